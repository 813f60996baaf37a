"""Train the paper-header model: ``python -m bench.train_headers [--data DIR] [--quick]``.

Deterministic (fixed split, fixed CRFsuite settings; L-BFGS has no random state). Steps:

1. read the GROBID header corpus (``shared/data/pdf_headers/grobid``; its README) and align each feature file to
   its TEI labels (:func:`bench.headers.align`, GROBID's trainer rule);
2. split BY DOCUMENT (duplicate papers kept together): 60 % train, 20 % validation, 20 % held-out test
   (:func:`bench.headers.split_of`);
3. fit a linear-chain CRF (python-crfsuite, L-BFGS with elastic-net c1/c2) on train, for each of a small grid of
   regularisation settings; keep the setting with the best validation title exact match + author-name F1;
4. calibration: 5-fold cross-fitting over train + validation (folds by paper): each fold is read by a CRF fitted
   on the other four, and the maps of the title's and the author list's raw scores to "title exactly right" /
   "author list right" are fitted on these out-of-fold scores (isotonic regression or Platt's sigmoid, the one
   with the lower cross-validated ECE there), so no probability is calibrated on a document that fitted the CRF
   that scored it;
5. the shipped CRF is fitted on train + validation with the chosen setting; held-out test figures (title exact
   match, author P/R/F1, ECE, reliability tables) are printed, and ``aisac_core/rag/models/header.crfsuite`` and
   ``header_calibration.json`` written.

Tokens the alignment leaves unlabelled are left out of training (as GROBID's trainer does) but kept when
predicting: the evaluation reads every token of the feature file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aisac_core.rag.headers import CALIBRATION_FILE, LABELS, MODEL_FILE, HeaderModel, calibrate, token_features

from .headers import HeaderDoc, evaluate, figures, group_of, load_docs, split_of

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / "aisac_core" / "rag" / "models"
#: (c1, c2) settings tried on validation (L1 keeps the model small; CRFsuite's defaults are c1=0, c2=1)
GRID = ((0.2, 0.01), (0.1, 0.05))
#: folds of the cross-fitted calibration
FOLDS = 5


def fold_of(d: HeaderDoc, k: int) -> int:
    """The calibration fold of a document (a sha1 of its paper's group key, so duplicates share a fold)."""
    return int(hashlib.sha1(("aisac-headers-fold:" + group_of(d)).encode()).hexdigest(), 16) % k


def fit_isotonic(raw: list[float], right: list[bool]) -> dict[str, list[float]]:
    """Isotonic regression (Zadrozny & Elkan 2002, "Transforming classifier scores into accurate multiclass
    probability estimates") of "right" on the raw score, by scikit-learn, probabilities bounded to
    [0.01, 0.99]; returned as its breakpoints ``{x, y}`` (piecewise linear between them)."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.01, y_max=0.99, out_of_bounds="clip").fit(raw, [float(b) for b in right])
    return {"x": [round(float(v), 6) for v in iso.X_thresholds_], "y": [round(float(v), 6) for v in iso.y_thresholds_]}


def fit_platt(raw: list[float], right: list[bool]) -> list[float]:
    """Platt's sigmoid (Platt 1999) on logit(raw): [a, b] with P(right) = 1 / (1 + exp(a * logit(raw) + b)), by
    logistic regression (scikit-learn, C = 1e4: almost no regularisation)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    r = np.clip(np.array(raw, dtype=float), 1e-6, 1 - 1e-6)
    x = np.log(r / (1 - r)).reshape(-1, 1)
    y = np.array([int(b) for b in right])
    if y.min() == y.max():
        p = (y.sum() + 1) / (len(y) + 2)
        return [0.0, float(-np.log(p / (1 - p)))]
    lr = LogisticRegression(C=1e4, max_iter=1000).fit(x, y)
    return [float(-lr.coef_[0][0]), float(-lr.intercept_[0])]


def choose_calibration(raw: list[float], right: list[bool], k: int = 5) -> dict[str, Any]:
    """The calibration map of one field: isotonic regression or Platt's sigmoid, whichever gives the lower ECE
    under ``k``-fold cross-validation over these (out-of-fold) scores - each score calibrated by a map fitted on
    the other folds; then fitted on all of them. Returns ``{"isotonic": {x, y}}`` or ``{"platt": [a, b]}`` with
    ``chosen`` and ``cv_ece`` (both maps' cross-validated ECE)."""
    from .headers import ece

    fits = {"isotonic": lambda r, y: {"isotonic": fit_isotonic(r, y)}, "platt": lambda r, y: {"platt": fit_platt(r, y)}}
    cv: dict[str, float] = {}
    for name, fit in fits.items():
        pred = [0.0] * len(raw)
        for f in range(k):
            tr = [i for i in range(len(raw)) if i % k != f]
            m = fit([raw[i] for i in tr], [right[i] for i in tr])
            for i in range(f, len(raw), k):
                pred[i] = calibrate(raw[i], m)
        cv[name] = ece(pred, right)[0]
    chosen = min(cv, key=lambda n: (cv[n], n))
    out: dict[str, Any] = fits[chosen](raw, right)
    out.update(chosen=chosen, cv_ece=cv)
    return out


def _recal(r: dict[str, Any], cal: dict[str, Any]) -> dict[str, Any]:
    return {
        "title_confidence": calibrate(r["title_raw"], cal["title"]) if r["title"] else 0.0,
        "authors_confidence": calibrate(r["authors_raw"], cal["authors"]) if r["n_pred"] else 0.0,
    }


def _seq(d: HeaderDoc) -> tuple[list[list[str]], list[str]]:
    keep = [i for i, lab in enumerate(d.labels) if lab is not None]
    toks = [d.tokens[i] for i in keep]
    # field starts are told apart for titles and authors only (two authors' fields side by side); the other
    # labels' "I-" starts fold into the label (fewer labels: a faster fit)
    labs = [str(d.labels[i]) for i in keep]
    labs = [x if x in ("I-title", "I-author") else x.removeprefix("I-") for x in labs]
    return token_features(toks), labs


def train(docs: list[HeaderDoc], c1: float, c2: float, path: Path, iterations: int) -> None:
    """Fit the CRF on ``docs`` and save it to ``path``."""
    import pycrfsuite

    tr = pycrfsuite.Trainer(verbose=False)
    for d in docs:
        x, y = _seq(d)
        if x:
            tr.append(x, y)
    tr.select("lbfgs", "crf1d")
    tr.set_params(
        {"c1": c1, "c2": c2, "max_iterations": iterations, "feature.possible_transitions": True, "feature.minfreq": 2}
    )
    tr.train(str(path))


def _show(name: str, fig: dict[str, Any]) -> None:
    keys = (
        "documents",
        "title_exact",
        "author_precision",
        "author_recall",
        "author_f1",
        "author_lists_right",
        "title_ece",
        "authors_ece",
        "title_wrong_at_0.9",
        "authors_wrong_at_0.9",
    )
    print(f"{name}: " + ", ".join(f"{k}={fig[k]}" for k in keys), flush=True)
    for f in ("title", "authors"):
        print(
            f"  reliability {f}: "
            + "; ".join(
                f"{b['bin']} n={b['n']} conf={b['confidence']} acc={b['accuracy']}" for b in fig[f"{f}_reliability"]
            )
        )


def main(argv: list[str] | None = None) -> int:
    """Run the training; returns 0."""
    ap = argparse.ArgumentParser(prog="python -m bench.train_headers")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--quick", action="store_true", help="one grid setting, 60 iterations (a smoke run)")
    ap.add_argument("--out", type=Path, default=MODEL_DIR)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    docs = load_docs(args.data / "pdf_headers" / "grobid")
    sp = split_of(docs)
    part = {k: [d for d in docs if sp[d.doc_id] == k] for k in ("train", "validation", "test")}
    print({k: len(v) for k, v in part.items()}, "documents", flush=True)
    grid = GRID[:1] if args.quick else GRID
    iterations = 100 if args.quick else 150
    best: tuple[float, tuple[float, float]] | None = None
    tmp = Path(tempfile.mkdtemp(prefix="aisac-headers-"))
    flat = {"title": {"platt": [-1.0, 0.0]}, "authors": {"platt": [-1.0, 0.0]}}
    for c1, c2 in grid:
        p = tmp / f"m_{c1}_{c2}.crfsuite"
        t1 = time.perf_counter()
        train(part["train"], c1, c2, p, iterations)
        fig, _ = evaluate(HeaderModel(str(p), flat), part["validation"])
        score = fig["title_exact"] + fig["author_f1"]
        print(
            f"c1={c1} c2={c2}: validation title_exact={fig['title_exact']} author_f1={fig['author_f1']} "
            f"({time.perf_counter() - t1:.0f} s)",
            flush=True,
        )
        if best is None or score > best[0]:
            best = (score, (c1, c2))
    assert best is not None
    c1, c2 = best[1]
    # calibration data: out-of-fold raw scores over train + validation (5 folds by paper; each fold read by a
    # CRF fitted on the other four), so no score comes from a CRF that saw its document
    dev = part["train"] + part["validation"]
    fold_rows: list[dict[str, Any]] = []
    for k in range(FOLDS):
        held = [d for d in dev if fold_of(d, FOLDS) == k]
        p = tmp / f"fold{k}.crfsuite"
        t1 = time.perf_counter()
        train([d for d in dev if fold_of(d, FOLDS) != k], c1, c2, p, iterations)
        _, rows = evaluate(HeaderModel(str(p), flat), held)
        fold_rows += rows
        print(f"fold {k}: {len(held)} documents ({time.perf_counter() - t1:.0f} s)", flush=True)
    # calibrated where a field is reported: documents without a predicted title / author list show no confidence;
    # isotonic or Platt, whichever has the lower cross-validated ECE on these out-of-fold scores
    t_rows = [r for r in fold_rows if r["title"]]
    a_rows = [r for r in fold_rows if r["n_pred"]]
    cal: dict[str, Any] = {
        "title": choose_calibration([r["title_raw"] for r in t_rows], [r["title_ok"] for r in t_rows]),
        "authors": choose_calibration([r["authors_raw"] for r in a_rows], [r["authors_ok"] for r in a_rows]),
    }
    for f in ("title", "authors"):
        print(f"calibration of {f}: {cal[f]['chosen']} (cross-validated ECE {cal[f]['cv_ece']})", flush=True)
    chosen = tmp / "final.crfsuite"
    train(dev, c1, c2, chosen, iterations)
    model = HeaderModel(str(chosen), cal)
    oof = figures([{**r, **_recal(r, cal)} for r in fold_rows])
    tfig, _ = evaluate(model, part["test"])
    _show("out-of-fold train+validation (the calibration data)", oof)
    _show("held-out test", tfig)
    vfig = oof
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / MODEL_FILE).write_bytes(chosen.read_bytes())
    cal.update(
        {
            "labels": list(LABELS),
            "crf": {"c1": c1, "c2": c2, "max_iterations": iterations, "algorithm": "lbfgs", "minfreq": 2},
            "split": {k: sorted(d.doc_id for d in v) for k, v in part.items()},
            "out_of_fold": {k: v for k, v in vfig.items()},
            "test": {k: v for k, v in tfig.items()},
            "trained_seconds": round(time.perf_counter() - t0, 1),
        }
    )
    (args.out / CALIBRATION_FILE).write_text(json.dumps(cal, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out / MODEL_FILE} ({(args.out / MODEL_FILE).stat().st_size:,} bytes) and {CALIBRATION_FILE}")
    print(f"{time.perf_counter() - t0:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
