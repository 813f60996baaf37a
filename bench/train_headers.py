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

``--nested`` (with ``--cache DIR``, optionally ``--jobs 2``) measures instead: nested cross-validation by document
over all documents with the shipped CRF setting and maps' recipe (:func:`nested`), written to
``bench/data/headers_nested.json``; no model is written.

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
from collections.abc import Sequence
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


def fit_logistic(feats: list[dict[str, float]], right: list[bool], names: Sequence[str]) -> dict[str, Any]:
    """Logistic regression of "right" on the named :func:`aisac_core.rag.headers.calibration_features` (Platt's
    scaling with more inputs; scikit-learn, L2 with C = 1): ``{features, coef, intercept}``."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = np.array([[f.get(n, 0.0) for n in names] for f in feats], dtype=float)
    y = np.array([int(b) for b in right])
    if y.min() == y.max():
        p = (y.sum() + 1) / (len(y) + 2)
        return {"features": list(names), "coef": [0.0] * len(names), "intercept": float(np.log(p / (1 - p)))}
    lr = LogisticRegression(C=1.0, max_iter=5000).fit(x, y)
    return {"features": list(names), "coef": [float(c) for c in lr.coef_[0]], "intercept": float(lr.intercept_[0])}


#: the inputs of the logistic maps tried per field (:func:`aisac_core.rag.headers.calibration_features`)
LOGISTIC_SETS: dict[str, dict[str, tuple[str, ...]]] = {
    "title": {
        "logistic raw+mean": ("logit_raw", "logit_mean"),
        "logistic all": ("logit_raw", "logit_mean", "log_tokens", "lines", "runs", "largest"),
    },
    "authors": {
        "logistic raw+mean": ("logit_raw", "logit_mean"),
        "logistic all": ("logit_raw", "logit_mean", "log_tokens", "lines", "log_names", "fields"),
    },
}
#: repeats of the 5-fold cross-validation of the calibration maps (each a different seeded shuffle of the
#: documents): ECE over ~400 fields moves by ~0.01 between shuffles, so one split would choose by noise
CV_REPEATS = 5


def fit_calibration(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The calibration maps of both fields, each chosen by :func:`choose_calibration` on ``rows`` (raw scores of
    CRFs that did not see the rows' documents); a field counts only where the reader reports it (a predicted title;
    at least one parsed author name). Returns ``{"title": map, "authors": map}``."""
    t_rows = [r for r in rows if r["title"]]
    a_rows = [r for r in rows if r["n_pred"]]
    return {
        "title": choose_calibration(
            [r["title_raw"] for r in t_rows],
            [r["title_ok"] for r in t_rows],
            feats=[r["title_features"] for r in t_rows],
            fld="title",
        ),
        "authors": choose_calibration(
            [r["authors_raw"] for r in a_rows],
            [r["authors_ok"] for r in a_rows],
            feats=[r["authors_features"] for r in a_rows],
            fld="authors",
        ),
    }


def choose_calibration(
    raw: list[float], right: list[bool], k: int = 5, feats: list[dict[str, float]] | None = None, fld: str = "title"
) -> dict[str, Any]:
    """The calibration map of one field, chosen by cross-validation over these (out-of-fold) scores: isotonic
    regression or Platt's sigmoid of the raw score, or a logistic regression over the field's calibration features
    (:data:`LOGISTIC_SETS`; with ``feats``). Each map is cross-validated :data:`CV_REPEATS` times over ``k`` folds
    (each score calibrated by a map fitted on the other folds); the one with the lowest mean ECE is chosen among the
    maps whose mean Brier score is no worse than Platt's on the raw score (a map that gives everyone the base rate
    has a low ECE and tells nothing: calibration is not bought with discrimination); then fitted on all of them.
    Returns ``{"isotonic": {x, y}}``, ``{"platt": [a, b]}`` or ``{"logistic": {...}}`` with ``chosen``, ``cv_ece``
    and ``cv_brier`` (every map's mean)."""
    import random

    from .headers import ece

    f = feats if feats is not None else [{} for _ in raw]
    fits: dict[str, Any] = {
        "isotonic": lambda ix: {"isotonic": fit_isotonic([raw[i] for i in ix], [right[i] for i in ix])},
        "platt": lambda ix: {"platt": fit_platt([raw[i] for i in ix], [right[i] for i in ix])},
    }
    if feats is not None:
        for name, names in LOGISTIC_SETS[fld].items():
            fits[name] = lambda ix, names=names: {
                "logistic": fit_logistic([f[i] for i in ix], [right[i] for i in ix], names)
            }
    cv: dict[str, float] = {}
    brier: dict[str, float] = {}
    n = len(raw)
    for name, fit in fits.items():
        eces, briers = [], []
        for rep in range(CV_REPEATS):
            order = list(range(n))
            random.Random(1000 + rep).shuffle(order)
            fold = {i: pos % k for pos, i in enumerate(order)}
            pred = [0.0] * n
            for g in range(k):
                m = fit([i for i in range(n) if fold[i] != g])
                for i in range(n):
                    if fold[i] == g:
                        pred[i] = calibrate(raw[i], m, f[i])
            eces.append(ece(pred, right)[0])
            briers.append(sum((p - float(y)) ** 2 for p, y in zip(pred, right)) / n)
        cv[name] = round(sum(eces) / len(eces), 4)
        brier[name] = round(sum(briers) / len(briers), 4)
    ok = [m for m in cv if brier[m] <= brier["platt"] + 1e-9]
    chosen = min(ok, key=lambda m: (cv[m], m))
    out: dict[str, Any] = fits[chosen](list(range(n)))
    out.update(chosen=chosen, cv_ece=cv, cv_brier=brier)
    return out


def _recal(r: dict[str, Any], cal: dict[str, Any]) -> dict[str, Any]:
    # rounded to 3 decimals as the reader reports them (HeaderModel.read), so a figure here is the reader's figure
    return {
        "title_confidence": round(calibrate(r["title_raw"], cal["title"], r["title_features"]), 3)
        if r["title"]
        else 0.0,
        "authors_confidence": round(calibrate(r["authors_raw"], cal["authors"], r["authors_features"]), 3)
        if r["n_pred"]
        else 0.0,
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
        "title_ece_95",
        "authors_ece_95",
        "title_ece_if_calibrated",
        "authors_ece_if_calibrated",
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


def read_rows(path: Path, docs: list[HeaderDoc], rows_file: Path) -> list[dict[str, Any]]:
    """The uncalibrated :func:`bench.headers.judge` rows of ``docs`` read by the CRF at ``path``, cached in
    ``rows_file`` (reused when it names the same CRF, by sha256, and the same documents)."""
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    ids = [d.doc_id for d in docs]
    if rows_file.is_file():
        got = json.loads(rows_file.read_text(encoding="utf-8"))
        if got.get("crf_sha256") == sha and got.get("docs") == ids:
            return list(got["rows"])
    flat = {"title": {"platt": [-1.0, 0.0]}, "authors": {"platt": [-1.0, 0.0]}}
    rows = evaluate(HeaderModel(str(path), flat), docs)[1]
    rows_file.write_text(json.dumps({"crf_sha256": sha, "docs": ids, "rows": rows}), encoding="utf-8")
    return rows


def _pair_path(cache: Path, j: int, k: int) -> Path:
    a, b = sorted((j, k))
    return cache / f"pair{a}{b}.crfsuite"


def _train_pair(job: tuple[list[HeaderDoc], float, float, str, int]) -> str:
    docs, c1, c2, path, iterations = job
    train(docs, c1, c2, Path(path), iterations)
    return path


def nested(
    part: dict[str, list[HeaderDoc]], c1: float, c2: float, iterations: int, cache: Path, final: Path, jobs: int = 1
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Nested cross-validation by document over ALL annotated documents: every document held out once, its title and
    author-list confidence from a CRF and a calibration map that never saw it.

    Outer folds: the held-out test split and the :data:`FOLDS` calibration folds of train + validation
    (:func:`fold_of`). The test split is read by the shipped CRF (``final``, fitted on train + validation) with the
    map fitted on the 5-fold out-of-fold scores of train + validation (exactly the shipped recipe: the fixed-split
    figures). Calibration fold ``k`` is read by the CRF fitted without it (``fold{k}.crfsuite``); its map is chosen
    and fitted by :func:`choose_calibration` on out-of-fold scores of the other documents only: the test split read
    by that same CRF (which never saw the test split either) and each other fold ``j`` read by a CRF fitted without
    ``j`` and ``k`` (``pair{j}{k}.crfsuite``, 10 CRFs, written to ``cache`` and reused). The CRF setting is the
    shipped one (c1, c2, iterations: chosen once on the validation split), not re-chosen inside.

    Returns the pooled figures (:func:`bench.headers.figures`), the per-document rows, and one summary per outer
    fold (documents, the map chosen there, its title / author ECE)."""
    from concurrent.futures import ProcessPoolExecutor

    dev = part["train"] + part["validation"]
    fold = {d.doc_id: fold_of(d, FOLDS) for d in dev}
    todo = []
    for k in range(FOLDS):
        p = cache / f"fold{k}.crfsuite"
        if not p.is_file():
            todo.append(([d for d in dev if fold[d.doc_id] != k], c1, c2, str(p), iterations))
    for j in range(FOLDS):
        for k in range(j + 1, FOLDS):
            p = _pair_path(cache, j, k)
            if not p.is_file():
                todo.append(([d for d in dev if fold[d.doc_id] not in (j, k)], c1, c2, str(p), iterations))
    if todo:
        t1 = time.perf_counter()
        print(f"nested: fitting {len(todo)} CRFs into {cache} ({jobs} at a time)", flush=True)
        if jobs > 1:
            with ProcessPoolExecutor(max_workers=jobs) as ex:
                for p in ex.map(_train_pair, todo):
                    print(f"  {Path(p).name} ({time.perf_counter() - t1:.0f} s)", flush=True)
        else:
            for job in todo:
                print(f"  {Path(_train_pair(job)).name} ({time.perf_counter() - t1:.0f} s)", flush=True)

    def read(path: Path, docs: list[HeaderDoc], name: str) -> list[dict[str, Any]]:
        return read_rows(path, docs, cache / f"{path.stem}.{name}.rows.json")

    by_fold = {k: [d for d in dev if fold[d.doc_id] == k] for k in range(FOLDS)}
    fold_rows = {k: read(cache / f"fold{k}.crfsuite", by_fold[k], f"fold{k}") for k in range(FOLDS)}
    pooled: list[dict[str, Any]] = []
    per_fold: list[dict[str, Any]] = []
    outer: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = [
        ("test", read(final, part["test"], "test"), [r for k in range(FOLDS) for r in fold_rows[k]])
    ]
    for k in range(FOLDS):
        inner = read(cache / f"fold{k}.crfsuite", part["test"], "test")
        for j in range(FOLDS):
            if j != k:
                inner += read(_pair_path(cache, j, k), by_fold[j], f"fold{j}")
        outer.append((f"fold {k}", fold_rows[k], inner))
    for name, held, inner in outer:
        cal = fit_calibration(inner)
        rows = [{**r, **_recal(r, cal), "outer": name} for r in held]
        pooled += rows
        f = figures(rows)
        per_fold.append(
            {
                "outer": name,
                "documents": len(rows),
                "inner_documents": len(inner),
                "title_map": cal["title"]["chosen"],
                "authors_map": cal["authors"]["chosen"],
                "title_ece": f["title_ece"],
                "authors_ece": f["authors_ece"],
            }
        )
        print(f"  outer {name}: {per_fold[-1]}", flush=True)
    return figures(pooled), pooled, per_fold


#: where ``--nested`` records its figures (read by ``python -m bench --only headers``)
NESTED_FILE = ROOT / "bench" / "data" / "headers_nested.json"


def run_nested(args: argparse.Namespace, part: dict[str, list[HeaderDoc]], cache: Path, t0: float) -> int:
    """``--nested``: :func:`nested` with the shipped CRF setting and model; prints the pooled figures and each outer
    fold's, and records them in :data:`NESTED_FILE` with the sha256 of the model they measure."""
    from aisac_core.rag.headers import model_sha256

    old = json.loads((args.out / CALIBRATION_FILE).read_text(encoding="utf-8"))
    c1, c2, iterations = old["crf"]["c1"], old["crf"]["c2"], old["crf"]["max_iterations"]
    print(f"nested cross-validation: the shipped CRF setting (c1={c1} c2={c2}, {iterations} iterations)", flush=True)
    fig, rows, per_fold = nested(part, c1, c2, iterations, cache, args.out / MODEL_FILE, args.jobs)
    _show("nested cross-validation, all documents (each held out once)", fig)
    shipped = {f: old[f]["chosen"] for f in ("title", "authors")}
    out = {
        "what": "nested cross-validation by document (bench/train_headers.py --nested)",
        "model_sha256": model_sha256() if args.out == MODEL_DIR else "",
        "crf": old["crf"],
        "shipped_maps": shipped,
        "outer_folds": per_fold,
        "figures": fig,
        "rows": [{k: v for k, v in r.items() if not k.endswith(("_features", "_raw"))} for r in rows],
        "seconds": round(time.perf_counter() - t0, 1),
    }
    NESTED_FILE.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {NESTED_FILE}; {time.perf_counter() - t0:.0f} s in all")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the training; returns 0."""
    ap = argparse.ArgumentParser(prog="python -m bench.train_headers")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--quick", action="store_true", help="one grid setting, 60 iterations (a smoke run)")
    ap.add_argument("--out", type=Path, default=MODEL_DIR)
    ap.add_argument(
        "--calibrate-only",
        action="store_true",
        help="keep the shipped CRF and its setting (from header_calibration.json); refit the calibration only",
    )
    ap.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="folder of the fold CRFs (foldK.crfsuite): reused when present, written when not (they are "
        "deterministic: the same data and setting give the same files)",
    )
    ap.add_argument("--no-test", action="store_true", help="print no held-out figures and write nothing")
    ap.add_argument(
        "--nested",
        action="store_true",
        help="nested cross-validation by document over all documents with the shipped CRF setting (every document "
        "held out once; :func:`nested`); writes the figures to bench/data/headers_nested.json, no model",
    )
    ap.add_argument("--jobs", type=int, default=1, help="--nested: CRFs fitted at a time (processes)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    docs = load_docs(args.data / "pdf_headers" / "grobid")
    sp = split_of(docs)
    part = {k: [d for d in docs if sp[d.doc_id] == k] for k in ("train", "validation", "test")}
    print({k: len(v) for k, v in part.items()}, "documents", flush=True)
    grid = GRID[:1] if args.quick else GRID
    iterations = 100 if args.quick else 150
    tmp = Path(tempfile.mkdtemp(prefix="aisac-headers-"))
    cache = args.cache or tmp
    cache.mkdir(parents=True, exist_ok=True)
    flat = {"title": {"platt": [-1.0, 0.0]}, "authors": {"platt": [-1.0, 0.0]}}
    shipped = args.out / CALIBRATION_FILE
    if args.nested:
        return run_nested(args, part, cache, t0)
    if args.calibrate_only:
        old = json.loads(shipped.read_text(encoding="utf-8"))
        c1, c2, iterations = old["crf"]["c1"], old["crf"]["c2"], old["crf"]["max_iterations"]
        print(f"calibration only: the shipped CRF (c1={c1} c2={c2}, {iterations} iterations)", flush=True)
    else:
        best: tuple[float, tuple[float, float]] | None = None
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
        p = cache / f"fold{k}.crfsuite"
        t1 = time.perf_counter()
        if not p.is_file() or args.cache is None:
            train([d for d in dev if fold_of(d, FOLDS) != k], c1, c2, p, iterations)
        _, rows = evaluate(HeaderModel(str(p), flat), held)
        fold_rows += rows
        print(f"fold {k}: {len(held)} documents ({time.perf_counter() - t1:.0f} s)", flush=True)
    # calibrated where a field is reported: documents without a predicted title / author list show no confidence;
    # the map with the lowest cross-validated ECE on these out-of-fold scores (choose_calibration)
    cal: dict[str, Any] = fit_calibration(fold_rows)
    for f in ("title", "authors"):
        print(
            f"calibration of {f}: {cal[f]['chosen']} (cross-validated ECE {cal[f]['cv_ece']}; Brier "
            f"{cal[f]['cv_brier']})",
            flush=True,
        )
    oof = figures([{**r, **_recal(r, cal)} for r in fold_rows])
    _show("out-of-fold train+validation (the calibration data)", oof)
    if args.no_test:
        print(f"{time.perf_counter() - t0:.0f} s in all (no held-out figures, nothing written)")
        return 0
    chosen = tmp / "final.crfsuite"
    if args.calibrate_only:
        chosen.write_bytes((args.out / MODEL_FILE).read_bytes())
    else:
        train(dev, c1, c2, chosen, iterations)
    model = HeaderModel(str(chosen), cal)
    tfig, _ = evaluate(model, part["test"])
    _show("held-out test", tfig)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / MODEL_FILE).write_bytes(chosen.read_bytes())
    cal.update(
        {
            "labels": list(LABELS),
            "crf": {"c1": c1, "c2": c2, "max_iterations": iterations, "algorithm": "lbfgs", "minfreq": 2},
            "split": {k: sorted(d.doc_id for d in v) for k, v in part.items()},
            "out_of_fold": dict(oof.items()),
            "test": dict(tfig.items()),
            "trained_seconds": round(time.perf_counter() - t0, 1),
        }
    )
    (args.out / CALIBRATION_FILE).write_text(json.dumps(cal, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out / MODEL_FILE} ({(args.out / MODEL_FILE).stat().st_size:,} bytes) and {CALIBRATION_FILE}")
    print(f"{time.perf_counter() - t0:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
