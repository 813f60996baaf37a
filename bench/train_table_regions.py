"""Train the table-region classifier of the PDF table reader (:mod:`aisac_core.rag.tableregions`) and print its
cross-validated figures.

Usage: ``python -m bench.train_table_regions [--data DIR] [--out PATH] [--figures PATH]``

Data: the development documents (:data:`bench.pdf_tables.DEV_NAMES`, 22 of the 33) of the ICDAR 2013 Table
Competition portion in ``../shared/data/pdf_tables/icdar2013``; the 11 held-out documents are never read here.

Method (deterministic: sorted documents, no random state):

1. Every candidate region the layout rules propose (:func:`aisac_core.rag.pdftables.candidate_tables`) is described
   by :data:`aisac_core.rag.tableregions.FEATURES`; its label is 1 when its box matches a ground-truth region of its
   page at IoU >= 0.5.
2. Model: logistic regression (scikit-learn, L2, balanced class weights off) over standardised features, its
   inverse strength C among :data:`CS`; the logit goes through an isotonic map (Zadrozny and Elkan, KDD 2002) fitted
   on leave-one-document-out (LODO) logits; a candidate is kept when its calibrated probability reaches a threshold.
   C and the threshold are chosen together by LODO per-document adjacency F1 (the competition's relations, Göbel et
   al., ICDAR 2013, detection and structure together; F1 of the mean P and mean R, as Namysl et al. 2023 report);
   ties go to the smaller C and the lower threshold. Two policies are compared: the classifier alone, and the
   classifier with every candidate that has a "Table N" caption and that the hand rules keep kept whatever its
   probability (``keep_captioned``); the one with the better nested per-document F1 (step 3; then pooled F1; on a
   tie, captions kept) is shipped.
3. Honest figures: nested LODO. For each development document, C, the isotonic map and the threshold are chosen on
   the 21 others exactly as in step 2 (inner LODO), the model is fitted on those 21 and reads the left-out document.
   Printed: per-document and pooled adjacency F1 and region P/R/F1 of those out-of-fold readings, beside the hand
   rules' (``rules_keep``) on the same documents, and the ECE (10 equal-width bins) and reliability table of the
   out-of-fold probabilities.
4. The shipped model is fitted on all 22 documents, with the map fitted on all LODO logits and C and the threshold of
   step 2: written to ``aisac_core/rag/models/table_regions.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .common import DEFAULT_DATA_DIR
from .pdf_tables import DEV_NAMES, Doc, find_folder, read_docs
from .table_eval import EvalTable, GridCell, iou, prf, read_regions, read_structure, region_counts, score_document

#: inverse L2 strengths tried
CS = (0.03, 0.1, 0.3, 1.0, 3.0)
MODEL_OUT = Path(__file__).resolve().parents[1] / "aisac_core" / "rag" / "models" / "table_regions.json"
#: a candidate matches a ground-truth region at this IoU (the bench's region criterion)
REGION_IOU = 0.5


@dataclass
class DocData:
    """One development document: its candidates' features ``x``, labels ``y``, evaluation tables and truths."""

    name: str
    x: np.ndarray
    y: np.ndarray
    rules: np.ndarray
    tables: list[EvalTable]
    cands: list[Any]
    truths: list[list[EvalTable]]
    truth_regions: list[tuple[int, tuple[float, float, float, float]]]
    cache: dict[tuple[int, ...], tuple[float, float, int, int, int]] = field(default_factory=dict)


def load_doc(d: Doc) -> DocData:
    """Parse ``d``, propose candidates and label them."""
    from aisac_core.rag.formats import convert
    from aisac_core.rag.pdftables import candidate_tables
    from aisac_core.rag.tableregions import FEATURES

    res = convert(d.pdf, "pdf", "native")
    heights = {
        (p.page_no if p.page_no >= 1 else p.page_no + 1): (p.size.height if p.size else 792.0) for p in res.pages
    }
    cands = candidate_tables(res)
    truths = [read_structure(t) for t in d.truths]
    regions = read_regions(d.regions) if d.regions else [r for t in truths[0] for r in t.regions]
    tables, labels = [], []
    for c in cands:
        t = c.table
        H = heights.get(t.page, 792.0)
        x1, top, x2, bot = t.bbox
        box = (x1, H - bot, x2, H - top)
        et = EvalTable(regions=[(t.page, box)])
        et.cells = [GridCell(k.row, k.col, k.row_end, k.col_end, k.text, k.page) for k in t.cells]
        tables.append(et)
        labels.append(int(any(p == t.page and iou(box, b) >= REGION_IOU for p, b in regions)))
    x = np.array([[c.features[f] for f in FEATURES] for c in cands], dtype=np.float64).reshape(
        len(cands), len(FEATURES)
    )
    return DocData(
        d.name,
        x,
        np.array(labels, dtype=np.int64),
        np.array([c.rules_keep for c in cands], dtype=bool),
        tables,
        cands,
        truths,
        regions,
    )


def doc_score(d: DocData, kept: list[int]) -> tuple[float, float, int, int, int]:
    """(P, R, correct, result, truth) of ``d`` when the candidates ``kept`` are its tables (best ground truth)."""
    key = tuple(kept)
    if key not in d.cache:
        res = [d.tables[k] for k in kept]
        best = None
        for tr in d.truths:
            s = score_document(res, tr)
            f = prf(s.correct, s.result, s.truth)
            if best is None or f[2] > best[0]:
                best = (f[2], f[0], f[1], s.correct, s.result, s.truth)
        assert best is not None
        d.cache[key] = best[1:]
    return d.cache[key]


def select(d: DocData, probs: np.ndarray, threshold: float, keep_captioned: bool) -> list[int]:
    """The candidates of ``d`` kept at ``threshold`` (:func:`aisac_core.rag.pdftables.select_candidates`)."""
    from aisac_core.rag.pdftables import select_candidates

    forced = [keep_captioned and c.rules_keep and c.features["table_caption"] > 0 for c in d.cands]
    return select_candidates(d.cands, [float(p) for p in probs], threshold, forced)


def summary(docs: list[DocData], kept: list[list[int]]) -> dict[str, float]:
    """Per-document (F1 of mean P and mean R) and pooled adjacency figures, and region P/R/F1, of ``kept``."""
    ps, rs = [], []
    c = r = t = 0
    rr = rt = rm = 0
    for d, k in zip(docs, kept):
        p, rec, cc, res, tru = doc_score(d, k)
        ps.append(p)
        rs.append(rec)
        c, r, t = c + cc, r + res, t + tru
        a, b, m = region_counts([d.tables[i].regions[0] for i in k], d.truth_regions)
        rr, rt, rm = rr + a, rt + b, rm + m
    mp, mr = float(np.mean(ps)), float(np.mean(rs))
    up, ur, uf = prf(c, r, t)
    gp, gr, gf = prf(rm, rr, rt)
    return {
        "doc_p": mp,
        "doc_r": mr,
        "doc_f1": 2 * mp * mr / (mp + mr) if mp + mr else 0.0,
        "micro_p": up,
        "micro_r": ur,
        "micro_f1": uf,
        "region_p": gp,
        "region_r": gr,
        "region_f1": gf,
    }


def fit(docs: list[DocData], c: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(mean, scale, coef, intercept) of an L2 logistic regression on the candidates of ``docs``."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([d.x for d in docs])
    y = np.concatenate([d.y for d in docs])
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    if len(set(y.tolist())) < 2:
        return mean, scale, np.zeros(x.shape[1]), 5.0 if y.size and y[0] == 1 else -5.0
    m = LogisticRegression(C=c, max_iter=5000).fit((x - mean) / scale, y)
    return mean, scale, m.coef_[0].astype(np.float64), float(m.intercept_[0])


def logits(model: tuple[np.ndarray, np.ndarray, np.ndarray, float], x: np.ndarray) -> np.ndarray:
    mean, scale, coef, b = model
    out: np.ndarray = ((x - mean) / scale) @ coef + b
    return out


def lodo_logits(docs: list[DocData], c: float) -> list[np.ndarray]:
    """Each document's candidates' logits from a model fitted on the other documents."""
    return [logits(fit(docs[:i] + docs[i + 1 :], c), d.x) for i, d in enumerate(docs)]


def fit_isotonic(z: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float]]:
    from sklearn.isotonic import IsotonicRegression

    ir = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(z, y)
    return [float(v) for v in ir.X_thresholds_], [float(v) for v in ir.y_thresholds_]


def calibrate(z: np.ndarray, xs: list[float], ys: list[float]) -> np.ndarray:
    from aisac_core.calibration import isotonic

    return np.array([isotonic(float(v), xs, ys) for v in z], dtype=np.float64)


def choose(docs: list[DocData], keep_captioned: bool) -> dict[str, Any]:
    """C, isotonic map and threshold chosen by LODO per-document adjacency F1 on ``docs`` (module docstring, step 2)."""
    best: dict[str, Any] | None = None
    for c in CS:
        z = lodo_logits(docs, c)
        xs, ys = fit_isotonic(np.concatenate(z), np.concatenate([d.y for d in docs]))
        probs = [calibrate(zz, xs, ys) for zz in z]
        grid = sorted({0.0, *(round(float(v), 6) for p in probs for v in p)})
        for t in grid:
            s = summary(docs, [select(d, p, t, keep_captioned) for d, p in zip(docs, probs)])
            key = (round(s["doc_f1"], 6), round(s["micro_f1"], 6))
            if best is None or key > best["key"]:
                best = {"key": key, "C": c, "threshold": t, "iso": (xs, ys), "cv": s}
    assert best is not None
    return best


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> tuple[float, list[dict[str, Any]]]:
    """Expected calibration error over ``bins`` equal-width bins of P(table region), and the reliability table."""
    e = 0.0
    rows = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        m = (p >= lo) & ((p < hi) if b < bins - 1 else (p <= hi))
        if not m.any():
            continue
        conf, acc = float(p[m].mean()), float(y[m].mean())
        e += m.sum() / len(p) * abs(conf - acc)
        rows.append(
            {"bin": f"{lo:.1f}-{hi:.1f}", "n": int(m.sum()), "mean_p": round(conf, 3), "share_tables": round(acc, 3)}
        )
    return e, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--out", type=Path, default=MODEL_OUT)
    ap.add_argument("--figures", type=Path, default=None, help="also write the figures as JSON here")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    folder = find_folder(a.data)
    docs = [load_doc(d) for d in read_docs(folder) if d.name in DEV_NAMES]
    n = sum(len(d.y) for d in docs)
    print(
        f"{len(docs)} development documents, {n} candidates ({int(sum(d.y.sum() for d in docs))} table regions), "
        f"parsed in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    rules = summary(docs, [[i for i in range(len(d.y)) if d.rules[i]] for d in docs])
    # nested LODO, per captioned-table policy: the honest out-of-fold figures
    per_policy: dict[bool, dict[str, Any]] = {}
    for policy in (False, True):
        kept, p_oof, y_oof = [], [], []
        for i, d in enumerate(docs):
            others = docs[:i] + docs[i + 1 :]
            ch = choose(others, policy)
            p = calibrate(logits(fit(others, ch["C"]), d.x), *ch["iso"])
            kept.append(select(d, p, ch["threshold"], policy))
            p_oof.append(p)
            y_oof.append(d.y)
            print(
                f"  keep_captioned={policy} fold {i + 1:2d}/{len(docs)}: C={ch['C']}, t={ch['threshold']:.3f}",
                flush=True,
            )
        e, rel = ece(np.concatenate(p_oof), np.concatenate(y_oof))
        acc = float(np.mean((np.concatenate(p_oof) >= 0.5) == np.concatenate(y_oof)))
        per_policy[policy] = {"cv": summary(docs, kept), "ece": e, "reliability": rel, "accuracy": acc}
    # the policy with the better nested per-document F1 (then pooled F1); on a tie, captioned tables are kept
    policy = max(
        (True, False),
        key=lambda k: (round(per_policy[k]["cv"]["doc_f1"], 6), round(per_policy[k]["cv"]["micro_f1"], 6)),
    )
    nested, e, rel, acc = (per_policy[policy][k] for k in ("cv", "ece", "reliability", "accuracy"))
    final = choose(docs, policy)
    model = fit(docs, final["C"])
    xs, ys = final["iso"]
    from aisac_core.rag.tableregions import FEATURES

    out = {
        "model": "logistic regression over standardised region features, isotonic map of the logit (LODO)",
        "features": list(FEATURES),
        "mean": [float(v) for v in model[0]],
        "scale": [float(v) for v in model[1]],
        "coef": [float(v) for v in model[2]],
        "intercept": model[3],
        "C": final["C"],
        "isotonic": {"x": xs, "y": ys},
        "threshold": final["threshold"],
        "keep_captioned": policy,
        "training": {
            "data": "ICDAR 2013 Table Competition portion, development documents (bench.pdf_tables.DEV_NAMES)",
            "documents": [d.name for d in docs],
            "candidates": n,
            "table_regions": int(sum(d.y.sum() for d in docs)),
        },
        "cross_validation": {
            "scheme": "nested leave-one-document-out over the development documents",
            "model": {k: round(v, 4) for k, v in nested.items()},
            "policies": {
                f"keep_captioned={k}": {m: round(v, 4) for m, v in per_policy[k]["cv"].items()} for k in per_policy
            },
            "hand_rules": {k: round(v, 4) for k, v in rules.items()},
            "ece_10_bins": round(e, 4),
            "accuracy_at_0.5": round(acc, 4),
            "reliability": rel,
            "lodo_choice": {k: round(v, 4) for k, v in final["cv"].items()},
        },
    }
    a.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if a.figures:
        a.figures.write_text(json.dumps(out["cross_validation"], indent=1) + "\n", encoding="utf-8")
    print(
        f"{'':28s} {'reg P':>6s} {'reg R':>6s} {'reg F1':>6s} {'doc P':>6s} {'doc R':>6s} {'doc F1':>6s} {'mic F1':>6s}"
    )
    for label, s in (
        ("hand rules (in-sample)", rules),
        ("classifier (nested LODO)", per_policy[False]["cv"]),
        ("+ captioned kept (nested)", per_policy[True]["cv"]),
    ):
        print(
            f"{label:28s} {s['region_p']:6.3f} {s['region_r']:6.3f} {s['region_f1']:6.3f} {s['doc_p']:6.3f} "
            f"{s['doc_r']:6.3f} {s['doc_f1']:6.3f} {s['micro_f1']:6.3f}"
        )
    print(
        f"calibrated P(table region), nested LODO (keep_captioned={policy}): ECE (10 bins) {e:.4f}, accuracy at 0.5 {acc:.3f}"
    )
    for row in rel:
        print(f"  {row['bin']}: n={row['n']:3d}  mean p {row['mean_p']:.3f}  share tables {row['share_tables']:.3f}")
    print(
        f"shipped: C={final['C']}, threshold={final['threshold']:.4f}, keep_captioned={policy} -> {a.out} ({time.perf_counter() - t0:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
