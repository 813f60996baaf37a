"""Train the support judge (:mod:`aisac_core.roles.support_model`) on the shared SciFact train claims.

``python bench/train_support.py [--data ../shared/data] [--dry-run]``: deterministic (fixed split seed, lbfgs
logistic regressions, no random state elsewhere). Steps:

1. claims of ``claims/scifact/claims_train.jsonl`` split by claim into train / validation / test (50 / 25 / 25 %,
   :func:`bench.support.split`: claims citing a common abstract stay together, so no abstract is in two parts);
   train + validation (the development claims) are dealt into :data:`FOLDS` folds by the same groups, and every
   choice below is made on **out-of-fold** predictions (each claim scored by models fitted on the other folds),
   so the calibration and thresholds rest on all 75 % instead of a 25 % validation part; the test part is only
   scored, once, at the end;
2. every (claim, cited abstract) pair becomes one passage; its sentences get the features of
   :func:`aisac_core.roles.support_model.passage_features` (MiniLM vectors cached under /tmp by
   :class:`bench.support.VectorCache`, never in the repository);
3. **rationale** model: logistic regression, sentence of a cited abstract -> is a gold rationale sentence
   (every cited abstract, with or without evidence); C chosen by out-of-fold average precision;
4. **support** and **contradict** models: logistic regressions on the passage vector
   (:func:`aisac_core.roles.support_model.passage_vector`: the passage's best rationale probabilities and the
   features of its most likely rationale sentences), passage -> labelled SUPPORT (CONTRADICT); C chosen by
   out-of-fold average precision; the final models are refitted on all development claims;
5. calibration maps fitted on the out-of-fold predictions (each claim scored by models fitted without it):
   rationale probability -> P(rationale sentence), support score -> P(passage labelled SUPPORT), contradict score
   -> P(CONTRADICT); isotonic regression or Platt scaling, whichever has the lower cross-validated ECE
   (:func:`choose_calibration`);
6. thresholds chosen on the **cross-fitted** calibrated probabilities (each passage's out-of-fold score mapped by
   a calibration fitted on the other folds: neither its model nor its calibration saw it; the out-of-fold figures
   printed, ECE included, are of these too): rationale selection at the best F1; ``supported`` at the
   lowest calibrated P(support) whose precision is >= :data:`TARGET_PRECISION` with at least :data:`MIN_ABOVE`
   passages above it, or, when no threshold reaches it, at the highest precision reached (:func:`precision_threshold`);
   ``contradicts`` likewise; ``relevant`` (below it a passage does not bear on a claim or question: the evaluator's
   abstention) at the calibrated rationale probability that keeps :data:`RELEVANT_RECALL` of the gold rationale
   sentences;
7. the model file ``aisac_core/roles/models/support_scifact.json`` is written (coefficients, standardisation,
   isotonic breakpoints, thresholds, validation figures, sha256 of the training files) and the held-out test
   figures are printed (the same code as ``python -m bench --only support``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.support import (  # noqa: E402
    SPLIT_SEED,
    VectorCache,
    claim_groups,
    ece,
    evaluate,
    judge_records,
    load_claims,
    load_corpus,
    pairs,
    print_figures,
    split,
    texts_of,
)

MODEL_PATH = REPO / "aisac_core" / "roles" / "models" / "support_scifact.json"
C_GRID = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
#: out-of-fold precision wanted of a "supported" / "contradicts" verdict (the issue asks >= 0.90 held out)
TARGET_PRECISION = 0.9
#: at least this many out-of-fold passages above a verdict threshold (a threshold on a handful proves nothing)
MIN_ABOVE = 20
FOLDS = 5
#: share of the gold rationale sentences (out of fold) at or above the ``relevant`` threshold
RELEVANT_RECALL = 0.9


def features(records: list[dict[str, Any]], cache: VectorCache) -> list[np.ndarray]:
    """Feature rows of every record's sentences."""
    from aisac_core.roles.support_model import passage_features

    return [
        passage_features(r["claim"], r["sentences"], cache.get(r["claim"]), [cache.get(s) for s in r["sentences"]])
        for r in records
    ]


def fit_lr(x: np.ndarray, y: np.ndarray, c: float) -> dict[str, Any]:
    """Standardised logistic regression (scikit-learn, lbfgs): ``{C, mean, scale, coef, intercept}``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(x)
    scale = np.where(sc.scale_ > 0, sc.scale_, 1.0)
    lr = LogisticRegression(C=c, max_iter=5000).fit((x - sc.mean_) / scale, y)
    return {"C": c, "mean": sc.mean_, "scale": scale, "coef": lr.coef_[0], "intercept": float(lr.intercept_[0])}


def prob(part: dict[str, Any], x: np.ndarray) -> np.ndarray:
    z = ((x - part["mean"]) / part["scale"]) @ part["coef"] + part["intercept"]
    out: np.ndarray = 1 / (1 + np.exp(-np.clip(z, -40, 40)))
    return out


def isotonic(raw: np.ndarray, y: np.ndarray) -> dict[str, list[float]]:
    """Isotonic regression (scikit-learn, clipped out of bounds) as breakpoints ``{x, y}``."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, y)
    return {"x": [float(v) for v in iso.X_thresholds_], "y": [float(v) for v in iso.y_thresholds_]}


def platt(raw: np.ndarray, y: np.ndarray) -> dict[str, list[float]]:
    """Platt scaling (Platt 1999: a logistic regression on the logit of the raw score) written as breakpoints
    ``{x, y}`` on a 201-point grid of [0, 1], so that it is applied like the isotonic map (linear between them)."""
    from sklearn.linear_model import LogisticRegression

    def logit(v: np.ndarray) -> np.ndarray:
        v = np.clip(v, 1e-6, 1 - 1e-6)
        out: np.ndarray = np.log(v / (1 - v))
        return out

    lr = LogisticRegression(C=1e6, max_iter=5000).fit(logit(raw)[:, None], y)
    grid = np.linspace(0.0, 1.0, 201)
    return {"x": [float(v) for v in grid], "y": [float(v) for v in lr.predict_proba(logit(grid)[:, None])[:, 1]]}


def ece_of(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error, 10 equal-width bins (as :func:`bench.support.ece`)."""
    return ece(p.tolist(), y.astype(int).tolist(), bins)[0]


def choose_calibration(
    raw: np.ndarray, y: np.ndarray, fold: np.ndarray
) -> tuple[str, dict[str, list[float]], float, np.ndarray]:
    """Isotonic or Platt, whichever has the lower ECE when fitted on four folds of the out-of-fold scores and
    measured on the fifth (summed over the five): ``(kind, breakpoints fitted on all, cross-validated ECE,
    cross-fitted probabilities)``; the cross-fitted probabilities (each item mapped by a calibration that never saw
    it) are what the thresholds are chosen on and the out-of-fold figures report."""
    scores, preds = {}, {}
    for kind, fit in (("isotonic", isotonic), ("platt", platt)):
        pred = np.zeros(len(raw))
        for k in range(FOLDS):
            bp = fit(raw[fold != k], y[fold != k])
            pred[fold == k] = np.interp(raw[fold == k], bp["x"], bp["y"])
        scores[kind], preds[kind] = ece_of(pred, y), pred
    kind = min(scores, key=lambda k: scores[k])
    return kind, (isotonic if kind == "isotonic" else platt)(raw, y), scores[kind], preds[kind]


def precision_threshold(p: np.ndarray, hit: np.ndarray, target: float, min_n: int = 10) -> tuple[float, float]:
    """``(t, precision)``: the lowest value ``t`` of ``p`` such that the items with ``p >= t`` number at least
    ``min_n`` and have precision >= ``target``; when no ``t`` reaches ``target``, the ``t`` of highest precision
    (lowest on ties) among those with ``min_n`` items above. ``(1.01, 0.0)`` (never reached) without ``min_n``
    items."""
    best = (1.01, 0.0)
    for t in sorted(set(p.tolist())):
        m = p >= t
        if m.sum() < min_n:
            break
        prec = float(hit[m].mean())
        if prec >= target:
            return float(t), prec
        if prec > best[1]:
            best = (float(t), prec)
    return best


def rounded(x: Any) -> Any:
    """Arrays and floats rounded to 6 significant digits for the JSON file."""
    if isinstance(x, np.ndarray):
        return [float(f"{v:.6g}") for v in x.tolist()]
    if isinstance(x, float):
        return float(f"{x:.6g}")
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def folds_of(claims: list[dict[str, Any]], k: int = FOLDS) -> dict[Any, int]:
    """claim id -> fold (0..k-1): the :func:`bench.support.claim_groups` shuffled with the split seed, dealt in
    turn."""
    groups = claim_groups(claims)
    order = np.random.default_rng(SPLIT_SEED + 1).permutation(len(groups))
    return {c["id"]: j % k for j, i in enumerate(order) for c in groups[int(i)]}


def main(argv: list[str] | None = None) -> int:
    """Train, write the model file (unless ``--dry-run``), print the out-of-fold and held-out figures."""
    from sklearn.metrics import average_precision_score

    from aisac_core.roles.support_model import FEATURES, SupportModel, decide, passage_vector

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--dry-run", action="store_true", help="do not write the model file")
    args = ap.parse_args(argv)
    folder = args.data / "claims" / "scifact"
    t0 = time.perf_counter()
    claims = load_claims(folder / "claims_train.jsonl")
    parts = split(claims)
    dev_claims = parts["train"] + parts["validation"]
    corpus = load_corpus(folder / "corpus.jsonl", {d for c in claims for d in c["cited_doc_ids"]})
    dev, test = pairs(dev_claims, corpus), pairs(parts["test"], corpus)
    print(f"development (train + validation): {len(dev_claims)} claims, {len(dev)} cited abstracts")
    print(f"held-out test: {len(parts['test'])} claims, {len(test)} cited abstracts")
    cache = VectorCache()
    cache.ensure(texts_of(dev) + texts_of(test))
    print(f"vectors ready ({time.perf_counter() - t0:.0f} s)")
    feats = features(dev, cache)
    fold_of = folds_of(dev_claims)
    fold = np.array([fold_of[r["claim_id"]] for r in dev])
    y_sent = [np.array([int(i in r["gold"]) for i in range(len(r["sentences"]))]) for r in dev]
    labels = np.array([r["label"] for r in dev])

    def stack(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.vstack([feats[i] for i in idx]), np.concatenate([y_sent[i] for i in idx])

    def rationale_oof(c: float) -> list[np.ndarray]:
        out: list[np.ndarray] = [np.empty(0)] * len(dev)
        for k in range(FOLDS):
            m = fit_lr(*stack(np.flatnonzero(fold != k)), c)
            for i in np.flatnonzero(fold == k):
                out[i] = prob(m, feats[i])
        return out

    # 1. rationale model: C by out-of-fold average precision
    best_c, best_ap, r_oof = C_GRID[0], -1.0, []
    for c in C_GRID:
        got = rationale_oof(c)
        ap_c = float(average_precision_score(np.concatenate(y_sent), np.concatenate(got)))
        print(f"rationale C={c}: out-of-fold average precision {ap_c:.4f}")
        if ap_c > best_ap:
            best_c, best_ap, r_oof = c, ap_c, got
    # 2. passage models on the passage vectors (rationale probabilities of the fold's own rationale model)
    vec = np.array([passage_vector(r_oof[i], feats[i]) for i in range(len(dev))])
    passage: dict[str, dict[str, Any]] = {}
    for name, gold in (("support", "SUPPORT"), ("contradict", "CONTRADICT")):
        y = (labels == gold).astype(int)
        best: dict[str, Any] = {"ap": -1.0}
        for c in C_GRID:
            oof = np.zeros(len(dev))
            for k in range(FOLDS):
                m = fit_lr(vec[fold != k], y[fold != k], c)
                oof[fold == k] = prob(m, vec[fold == k])
            ap_c = float(average_precision_score(y, oof))
            print(f"{name} C={c}: out-of-fold average precision {ap_c:.4f}")
            if ap_c > best["ap"]:
                best = {"ap": ap_c, "C": c, "oof": oof}
        passage[name] = best
    # 3. final models on all development claims
    x_all, y_all = stack(np.arange(len(dev)))
    r_model = fit_lr(x_all, y_all, best_c)
    vec_all = np.array([passage_vector(prob(r_model, feats[i]), feats[i]) for i in range(len(dev))])
    s_model = fit_lr(vec_all, (labels == "SUPPORT").astype(int), passage["support"]["C"])
    c_model = fit_lr(vec_all, (labels == "CONTRADICT").astype(int), passage["contradict"]["C"])
    # 4. calibration and thresholds on the out-of-fold predictions (data no model saw while fitted)
    r_raw = np.concatenate(r_oof)
    is_sup = (labels == "SUPPORT").astype(int)
    is_con = (labels == "CONTRADICT").astype(int)
    sent_fold = np.concatenate([[fold[i]] * len(y_sent[i]) for i in range(len(dev))])
    iso: dict[str, dict[str, list[float]]] = {}
    calibration: dict[str, dict[str, Any]] = {}
    cross: dict[str, np.ndarray] = {}
    for name, raw, y in (
        ("rationale", r_raw, np.concatenate(y_sent)),
        ("support", passage["support"]["oof"], is_sup),
        ("contradict", passage["contradict"]["oof"], is_con),
    ):
        kind, iso[name], cv_ece, cross[name] = choose_calibration(raw, y, sent_fold if name == "rationale" else fold)
        calibration[name] = {"kind": kind, "cross_validated_ece": cv_ece}
        print(f"calibration of {name}: {kind} (cross-validated ECE {cv_ece:.4f})")
    draft = {
        "rationale": rounded(r_model),
        "support": rounded(s_model),
        "contradict": rounded(c_model),
        "isotonic": iso,
        "thresholds": {"supported": 1.01, "contradicts": 1.01, "rationale": 0.5, "relevant": 0.0},
    }
    # thresholds on the cross-fitted probabilities: neither the models nor the calibration saw the items
    p_r, p_s, p_c = cross["rationale"], cross["support"], cross["contradict"]
    y_r = np.concatenate(y_sent)
    best_f1, t_r = -1.0, 0.5
    for t in sorted(set(p_r.tolist())):
        pred = p_r >= t
        tp = float((pred & (y_r == 1)).sum())
        f1 = 2 * tp / (pred.sum() + y_r.sum()) if pred.sum() + y_r.sum() else 0.0
        if f1 > best_f1:
            best_f1, t_r = f1, float(t)
    # the passage "bears on" a claim or question down to the probability that keeps RELEVANT_RECALL of the gold
    # rationale sentences (below it the evaluator withholds an answer: abstention errs towards answering)
    pos = np.sort(p_r[y_r == 1])
    t_rel = float(pos[int(math.floor((1 - RELEVANT_RECALL) * len(pos)))])
    print(f"relevance threshold (out of fold): {t_rel:.3f} keeps {float((pos >= t_rel).mean()):.3f} of the rationales")
    t_s, prec_s = precision_threshold(p_s, is_sup, TARGET_PRECISION, MIN_ABOVE)
    t_c, prec_c = precision_threshold(p_c, is_con, TARGET_PRECISION, MIN_ABOVE)
    # what the precision costs: the share of the SUPPORT passages (and of all passages) shown "supported"
    cov_s = float((p_s >= t_s).mean())
    recall_s = float(is_sup[p_s >= t_s].sum() / max(is_sup.sum(), 1))
    print(f"supported at {t_s:.3f}: {100 * recall_s:.1f} % of the SUPPORT passages, {100 * cov_s:.1f} % of all")
    print(
        f"thresholds (out of fold): rationale {t_r:.3f} (F1 {best_f1:.3f}), supported {t_s:.3f} "
        f"({int((p_s >= t_s).sum())} passages above, precision {prec_s:.3f}), contradicts {t_c:.3f} "
        f"({int((p_c >= t_c).sum())} above, precision {prec_c:.3f})"
    )
    data_sha = {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in ("claims_train.jsonl", "corpus.jsonl")
    }
    model = {
        "name": "aisac support judge (SciFact)",
        "version": 2,
        "method": "logistic regressions (rationale per sentence; support, contradict per passage), isotonic "
        "calibration and thresholds on out-of-fold predictions; bench/train_support.py",
        "embedding_model": "all-MiniLM-L6-v2 (int8 ONNX, aisac default)",
        "features": list(FEATURES),
        "split": {
            "seed": SPLIT_SEED,
            "claims": {k: len(v) for k, v in parts.items()},
            "folds": FOLDS,
            "fitted_on": "train + validation",
            "held_out": "test",
        },
        "training_data_sha256": data_sha,
        **draft,
        # floored to 6 decimals: a threshold rounded up would exclude the passages it was chosen for
        "thresholds": {
            k: math.floor(v * 1e6) / 1e6
            for k, v in (("supported", t_s), ("contradicts", t_c), ("rationale", t_r), ("relevant", t_rel))
        },
        "out_of_fold": {
            "rationale_average_precision": best_ap,
            "support_average_precision": passage["support"]["ap"],
            "contradict_average_precision": passage["contradict"]["ap"],
            "rationale_f1": best_f1,
            "supported_precision": prec_s,
            "supported_recall": recall_s,
            "supported_coverage": cov_s,
            "contradicts_precision": prec_c,
        },
        "calibration": calibration,
    }
    model = rounded(model)
    final = SupportModel(model, "final")
    oof_verdicts = []
    bounds = np.concatenate([[0], np.cumsum([len(v) for v in y_sent])])
    for i in range(len(dev)):  # the out-of-fold verdicts: each passage judged by models that never saw it
        sc = {"rationale": p_r[bounds[i] : bounds[i + 1]], "p_s": float(p_s[i]), "p_c": float(p_c[i])}
        verdict, _prob, _unc = decide(final, sc["p_s"], sc["p_c"])
        order = [int(j) for j in np.argsort(-sc["rationale"], kind="stable")]
        chosen = [j for j in order if sc["rationale"][j] >= t_r][:3] or (
            order[:1] if verdict != "does not address" else []
        )
        oof_verdicts.append(
            {
                "verdict": verdict,
                "p_support": sc["p_s"],
                "p_contradict": sc["p_c"],
                "rationale": chosen,
                "sentences": [{"i": j, "p_rationale": float(v)} for j, v in enumerate(sc["rationale"])],
            }
        )
    print_figures("development claims, out of fold", evaluate(dev, oof_verdicts, t_r))
    verdicts = judge_records(test, cache, final)
    print_figures("held-out test claims", evaluate(test, verdicts, final.thresholds["rationale"]))
    if not args.dry_run:
        MODEL_PATH.parent.mkdir(parents=True, exist_ok=True)
        MODEL_PATH.write_text(json.dumps(model, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {MODEL_PATH} ({MODEL_PATH.stat().st_size:,} bytes)")
    print(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
