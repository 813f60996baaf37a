"""Train the learned ranker of hybrid search (:mod:`aisac_core.rag.ranker`) and print its cross-validated figures.

Usage: ``python -m bench.train_ranker [--data DIR] [--stores DIR] [--out PATH] [--figures PATH] [--cross N]``

Data (``../shared/data``): Cranfield (``retrieval/cranfield``, 225 queries, 1,400 abstracts, graded judgements) and
the SciFact train claims over the full corpus (``claims/scifact``: 807 claims, 5,183 abstracts; BEIR's train
split, relevant = cited abstracts). The SciFact test claims are never read.

Method (deterministic: fixed seeds, sorted ids):

1. Each collection is indexed through aisac's own pipeline (``bench.quality.index_collection``; ``--stores DIR``
   keeps and re-uses the stores). Each query runs the shipped hybrid fusion (TM2C2 + RM3 + gated dense feedback,
   :func:`aisac_core.rag.search.fuse_candidates`); its best :data:`aisac_core.rag.ranker.DEPTH` candidates are
   described by :func:`aisac_core.rag.ranker.features`; a candidate's label is 1 when its document is judged
   relevant (Cranfield: codes 1-4).
2. Queries are split into :data:`FOLDS` folds per collection (a seeded permutation); the logistic model
   (scikit-learn, L2, C chosen among :data:`CS` by inner cross-validated nDCG@10 on the training folds only) is
   fitted on both collections' training folds and ranks the held-out fold. Reported per collection: mean nDCG@10
   of the held-out folds with a 95 % interval (bootstrap over queries, 2,000 resamples), beside the fused order
   (the current default) and ``bm25s`` on the same queries, and the paired randomization test.
3. Probability: an isotonic map (Zadrozny & Elkan, KDD 2002) from the out-of-fold logit to P(relevant). Its
   figures (ECE over 10 equal-width bins, reliability table) and the threshold's are themselves cross-validated:
   map and threshold are fitted on four folds' out-of-fold scores and applied to the fifth. The threshold is the
   smallest multiple of 0.05 at which the top-10 hits above it are relevant at least :data:`PRECISION` of the time.
4. Queries without a relevant document, built honestly: each collection's queries run over the other
   collection's index (SciFact claims over Cranfield, Cranfield queries over SciFact); they are never used for
   fitting. Reported: the share whose best hit is below the threshold ("no relevant passage").
5. The shipped model is fitted on all queries of both collections, with the isotonic map fitted on all
   out-of-fold logits and the threshold chosen on them; written to ``aisac_core/rag/models/ranker.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import pickle
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import cranfield, scifact_full
from .common import DEFAULT_DATA_DIR, make_core
from .metrics import ndcg_at_k, paired_randomization_test

FOLDS = 5
SEED = 0
#: inverse L2 strengths tried (inner cross-validation on the training folds)
CS = (0.01, 0.1, 1.0)
#: the share of top-10 hits above the threshold that must be relevant (issue 42, acceptance 4: 80 %)
PRECISION = 0.8
MODEL_OUT = Path(__file__).resolve().parents[1] / "aisac_core" / "rag" / "models" / "ranker.json"


@dataclass
class Query:
    """One query's candidates: features (rows in fused order), labels, document ids, and judgements."""

    col: str
    qid: str
    x: np.ndarray
    y: np.ndarray
    docs: list[str]
    qrels: dict[str, int]
    text: str = ""
    cands: tuple[Any, ...] = ()


#: the payload keys the features read (the candidate cache keeps only these)
PAYLOAD_KEYS = ("doc_id", "path", "title", "section", "text", "chunk_index")


def ranker_mod() -> Any:
    from aisac_core.rag import ranker

    return ranker


def search_mod() -> Any:
    from aisac_core.rag import search

    return search


def file_name(doc_id: str) -> str:
    """The file a collection document is indexed from (``bench.quality.write_collection``)."""
    return f"cran-{int(doc_id):04d}.md"


def first_docs(col: cranfield.Cranfield, n: int | None) -> tuple[cranfield.Cranfield, list[str]]:
    """``col`` restricted to its first ``n`` documents in file-name order (the order aisac's indexer reads a folder
    in; None: all), and the ids of the queries left without any relevant document in it. Judgements of documents
    left out are dropped; a query whose every relevant document is left out is a query with no relevant document
    in the index (held-out claims whose cited abstracts are removed from the index)."""
    if n is None or n >= len(col.docs):
        return col, []
    docs = sorted(col.docs, key=lambda d: file_name(d.doc_id))[:n]
    keep = {d.doc_id for d in docs}
    qrels = {q: {d: g for d, g in r.items() if d in keep} for q, r in col.qrels.items()}
    none = [q for q in col.queries if not any(g > 0 for g in qrels.get(q, {}).values())]
    return cranfield.Cranfield(docs, col.queries, qrels), none


def collections(data: Path) -> dict[str, tuple[Path, cranfield.Cranfield]]:
    """The two collections present under ``data`` (label -> (source folder, collection))."""
    out: dict[str, tuple[Path, cranfield.Cranfield]] = {}
    cf = data / "retrieval" / "cranfield"
    if (cf / "cranqrel").exists():
        out["Cranfield"] = (cf, cranfield.load(cf))
    sf = data / "claims" / "scifact"
    if all((sf / f).exists() for f in scifact_full.FILES):
        out["SciFact train"] = (sf, scifact_full.load(sf))
    return out


def open_store(stores: Path, name: str, col: cranfield.Cranfield) -> Any:
    """An AppContext on the indexed collection ``name`` under ``stores`` (indexed now unless already there)."""
    from .quality import index_collection, write_collection

    root = stores / name
    core = make_core(root / "store")
    if not (root / "index.json").exists():
        folder = root / "docs" / name
        write_collection(col, folder)
        wanted = {file_name(d.doc_id) for d in col.docs}
        for extra in folder.glob("*.md"):  # a store of more documents: the indexer prunes what is gone
            if extra.name not in wanted:
                extra.unlink()
        info = index_collection(core, root / "docs" / name)
        (root / "index.json").write_text(json.dumps(info, default=str), encoding="utf-8")
    return core


def collect(core: Any, label: str, col: cranfield.Cranfield, queries: dict[str, str]) -> list[Query]:
    """Run each query through the shipped fusion on ``core``'s store; its candidates (payloads cut to
    :data:`PAYLOAD_KEYS`), features and labels."""
    import dataclasses

    from aisac_core.rag import ranker
    from aisac_core.rag import search as s

    from .quality import cran_id

    parts = core.rag
    vs, emb = parts.vectors(), parts.embedder
    corpus = {d.doc_id for d in col.docs}
    out = []
    for qid, text in queries.items():
        dense, sparse = emb.embed_query(text), emb.sparse_query(text)
        f = s.fuse_candidates(vs, dense, sparse, [], s.PREFETCH, feedback=emb.sparse_documents)
        cands = [
            dataclasses.replace(c, payload={k: c.payload.get(k) for k in PAYLOAD_KEYS})
            for c in s.candidates(vs, dense, f, ranker.DEPTH, [])
            if cran_id(c.payload["path"]) in corpus
        ]
        out.append(describe(label, qid, text, tuple(cands), col.qrels.get(qid, {})))
    return out


def describe(label: str, qid: str, text: str, cands: tuple[Any, ...], qrels: dict[str, int]) -> Query:
    """One query's :class:`Query`: the features of its candidates (:func:`aisac_core.rag.ranker.features`) and
    their labels (1 when the candidate's document is judged relevant)."""
    from aisac_core.rag import ranker

    from .quality import cran_id

    docs = [cran_id(c.payload["path"]) for c in cands]
    x = ranker.features(text, cands)
    y = np.asarray([1 if qrels.get(d, 0) > 0 else 0 for d in docs], dtype=np.int64)
    return Query(label, qid, x, y, docs, qrels, text, cands)


def ndcg(q: Query, scores: np.ndarray | None) -> float:
    """nDCG@10 of ``q``'s candidates ordered by ``scores`` (None: fused order), documents de-duplicated."""
    order = list(range(len(q.docs))) if scores is None else sorted(range(len(q.docs)), key=lambda j: (-scores[j], j))
    return ndcg_at_k([q.docs[j] for j in order], q.qrels, 10)


def folds(qs: list[Query]) -> list[int]:
    """Fold of each query: a seeded permutation per collection, dealt round-robin."""
    out = [0] * len(qs)
    for col in sorted({q.col for q in qs}):
        idx = [i for i, q in enumerate(qs) if q.col == col]
        perm = np.random.default_rng(SEED).permutation(len(idx))
        for r, j in enumerate(perm):
            out[idx[j]] = r % FOLDS
    return out


def fit(qs: list[Query], c: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Logistic regression on standardised features: (mean, scale, coef, intercept). Each query weighs the same
    (a row's weight is 1 / the query's candidates), so a collection counts by its queries."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([q.x for q in qs])
    y = np.concatenate([q.y for q in qs])
    w = np.concatenate([np.full(len(q.y), 1.0 / max(1, len(q.y))) for q in qs])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale <= 1e-9] = 1.0
    m = LogisticRegression(C=c, max_iter=2000)
    m.fit((x - mean) / scale, y, sample_weight=w * len(qs))
    return mean, scale, m.coef_[0].copy(), float(m.intercept_[0])


def logits(model: tuple[np.ndarray, np.ndarray, np.ndarray, float], x: np.ndarray) -> np.ndarray:
    mean, scale, coef, b = model
    out: np.ndarray = ((x - mean) / scale) @ coef + b
    return out


def choose_c(train: list[Query]) -> float:
    """The C of :data:`CS` with the best mean nDCG@10 in a 3-fold inner split of ``train`` (by query)."""
    inner = [i % 3 for i in range(len(train))]
    best, best_c = -1.0, CS[0]
    for c in CS:
        vals = []
        for f in range(3):
            m = fit([q for q, g in zip(train, inner) if g != f], c)
            vals += [ndcg(q, logits(m, q.x)) for q, g in zip(train, inner) if g == f]
        if float(np.mean(vals)) > best:
            best, best_c = float(np.mean(vals)), c
    return best_c


def fit_isotonic(z: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float]]:
    """Isotonic map logit -> P(relevant), as breakpoints (scikit-learn, clipped out of bounds)."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(z, y)
    return [float(v) for v in iso.X_thresholds_], [float(v) for v in iso.y_thresholds_]


def calibrate(z: np.ndarray, xs: list[float], ys: list[float]) -> np.ndarray:
    return np.interp(z, xs, ys)


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> tuple[float, list[tuple[str, int, float, float]]]:
    """Expected calibration error over ``bins`` equal-width bins (Naeini et al., AAAI 2015) and the table."""
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    total, rows = 0.0, []
    for b in range(bins):
        m = which == b
        if m.any():
            conf, acc = float(p[m].mean()), float(y[m].mean())
            total += m.sum() / len(p) * abs(conf - acc)
            rows.append((f"{edges[b]:.1f}-{edges[b + 1]:.1f}", int(m.sum()), round(conf, 3), round(acc, 3)))
    return total, rows


def top10(qs: list[Query], z: list[np.ndarray]) -> tuple[list[float], list[int], list[float]]:
    """Per query, its top-10 hits (documents de-duplicated as a user sees them: each chunk) by logit: the logits,
    the labels; and each query's best logit."""
    zs, ys, best = [], [], []
    for q, s in zip(qs, z):
        order = sorted(range(len(q.docs)), key=lambda j: (-s[j], j))[:10]
        zs += [float(s[j]) for j in order]
        ys += [int(q.y[j]) for j in order]
        best.append(float(s[order[0]]) if order else -math.inf)
    return zs, ys, best


def threshold(p: np.ndarray, y: np.ndarray) -> float:
    """The smallest multiple of 0.05 at which the hits with p >= it are relevant >= :data:`PRECISION` (0.95 when
    none is)."""
    for t in np.arange(0.05, 1.0, 0.05):
        m = p >= t
        if m.sum() >= 20 and y[m].mean() >= PRECISION:
            return round(float(t), 2)
    return 0.95


def bootstrap_ci(v: list[float], rounds: int = 2000) -> tuple[float, float]:
    rng = np.random.default_rng(SEED)
    a = np.asarray(v)
    means = a[rng.integers(0, len(a), size=(rounds, len(a)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def bm25s_runs(col: cranfield.Cranfield) -> dict[str, list[str]]:
    from .quality import run_bm25s

    runs, _ = run_bm25s(col, True)
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--stores", type=Path, default=None, help="keep and re-use the indexed stores here")
    ap.add_argument("--out", type=Path, default=MODEL_OUT)
    ap.add_argument("--figures", type=Path, default=None, help="write the figures as JSON here")
    ap.add_argument(
        "--scifact-docs",
        type=int,
        default=None,
        help="index only the first N SciFact abstracts in file-name order (default: all 5,183); claims left "
        "without a cited abstract become queries with no relevant document",
    )
    ap.add_argument("--cross", type=int, default=200, help="cross-collection queries per direction (seeded sample)")
    args = ap.parse_args(argv)
    import tempfile

    t0 = time.perf_counter()
    cols = collections(args.data)
    if len(cols) < 2:
        print(f"needs Cranfield and the SciFact train claims under {args.data}", file=sys.stderr)
        return 2
    sf_col, no_answer = first_docs(cols["SciFact train"][1], args.scifact_docs)
    cols["SciFact train"] = (cols["SciFact train"][0], sf_col)
    stores = args.stores or Path(tempfile.mkdtemp(prefix="aisac-train-ranker-"))
    store_name = {"Cranfield": "cranfield", "SciFact train": "scifact"}
    qs: list[Query] = []
    cross: list[Query] = []
    cache = stores / "candidates.pkl"
    # the candidates depend on the fusion and the indexes, not on the features: a feature change re-describes
    # the cached candidates (seconds) instead of re-running every query (minutes)

    def cache_key() -> str:
        indexes = b"".join(
            (stores / n / "index.json").read_bytes()
            for n in sorted(store_name.values())
            if (stores / n / "index.json").exists()
        )
        extra = f"{args.scifact_docs}|{args.cross}".encode()
        return hashlib.sha256(Path(search_mod().__file__).read_bytes() + indexes + extra).hexdigest()

    key = cache_key()
    if args.stores and cache.exists():
        got = pickle.loads(cache.read_bytes())
        if got.get("key") == key:
            qs = [describe(q.col, q.qid, q.text, q.cands, q.qrels) for q in got["qs"]]
            cross = [describe(q.col, q.qid, q.text, q.cands, q.qrels) for q in got["cross"]]
    if not qs:
        cores = {label: open_store(stores, store_name[label], col) for label, (_, col) in cols.items()}
        try:
            rng = np.random.default_rng(SEED)
            for label, (_, col) in cols.items():
                none = set(no_answer) if label == "SciFact train" else set()
                qs += collect(cores[label], label, col, {q: t for q, t in col.queries.items() if q not in none})
                if none:  # claims whose cited abstracts are not in the index
                    held_ids = [q for q in col.queries if q in none]
                    pick = sorted(rng.permutation(len(held_ids))[: args.cross].tolist())
                    held = {held_ids[j]: col.queries[held_ids[j]] for j in pick}
                    cross += collect(cores[label], f"{label} claims without their abstracts", col, held)
                other = next(o for o in cols if o != label)
                # this collection's queries over the other's index, where no document is relevant
                pick = sorted(rng.permutation(len(col.queries))[: args.cross].tolist())
                ids = list(col.queries)
                xq = {f"x{ids[j]}": col.queries[ids[j]] for j in pick}
                cross += collect(cores[other], f"{label} queries over {other}", cols[other][1], xq)
        finally:
            for c in cores.values():
                c.close()
        if args.stores:
            cache.write_bytes(pickle.dumps({"key": cache_key(), "qs": qs, "cross": cross}))
    print(f"collected {len(qs)} queries, {len(cross)} cross-collection queries in {time.perf_counter() - t0:.0f} s")
    fold = folds(qs)
    oof: list[np.ndarray] = [np.zeros(0)] * len(qs)
    chosen = []
    for f in range(FOLDS):
        train = [q for q, g in zip(qs, fold) if g != f]
        c = choose_c(train)
        chosen.append(c)
        m = fit(train, c)
        for i, (q, g) in enumerate(zip(qs, fold)):
            if g == f:
                oof[i] = logits(m, q.x)
    figures: dict[str, Any] = {"folds": FOLDS, "C_per_fold": chosen, "collections": {}}
    for label, (_, col) in cols.items():
        idx = [i for i, q in enumerate(qs) if q.col == label]
        learned = [ndcg(qs[i], oof[i]) for i in idx]
        fused = [ndcg(qs[i], None) for i in idx]
        runs = bm25s_runs(col)
        bm = [ndcg_at_k(runs.get(qs[i].qid, []), qs[i].qrels, 10) for i in idx]
        row = {}
        for name, v in (("learned ranker", learned), ("fused (current default)", fused), ("bm25s", bm)):
            lo, hi = bootstrap_ci(v)
            row[name] = {"ndcg@10": round(float(np.mean(v)), 4), "ci95": [round(lo, 4), round(hi, 4)]}
        row["p learned vs fused"] = round(paired_randomization_test(learned, fused), 4)
        row["queries"] = len(idx)
        figures["collections"][label] = row
        print(label, json.dumps(row))
    # calibration and threshold, cross-validated over the out-of-fold logits
    p_cv: list[np.ndarray] = [np.zeros(0)] * len(qs)
    thr_cv = []
    for f in range(FOLDS):
        tr = [i for i, g in enumerate(fold) if g != f]
        z, y, _ = top10([qs[i] for i in tr], [oof[i] for i in tr])
        allz = np.concatenate([oof[i] for i in tr])
        ally = np.concatenate([qs[i].y for i in tr])
        xs, ys = fit_isotonic(allz, ally)
        t = threshold(calibrate(np.asarray(z), xs, ys), np.asarray(y))
        thr_cv.append(t)
        for i, g in enumerate(fold):
            if g == f:
                p_cv[i] = calibrate(oof[i], xs, ys)
    z10, y10, _ = top10(qs, p_cv)
    p10, y10a = np.asarray(z10), np.asarray(y10)
    e, table = ece(np.concatenate(p_cv), np.concatenate([q.y for q in qs]))
    e10, table10 = ece(p10, y10a)
    prec = []
    for f in range(FOLDS):
        members = [i for i, g in enumerate(fold) if g == f]
        zz, yy, _ = top10([qs[i] for i in members], [p_cv[i] for i in members])
        m = np.asarray(zz) >= thr_cv[f]
        prec.append((int(np.asarray(yy)[m].sum()), int(m.sum())))
    figures["calibration"] = {
        "ece_all_candidates": round(e, 4),
        "ece_top10": round(e10, 4),
        "reliability_top10": table10,
        "reliability_all": table,
        "threshold_per_fold": thr_cv,
        "precision_above_threshold_top10": round(sum(a for a, _ in prec) / max(1, sum(b for _, b in prec)), 4),
        "hits_above_threshold": sum(b for _, b in prec),
    }
    # the shipped model: all queries; isotonic map on all out-of-fold logits; threshold on them
    c_all = choose_c(qs)
    model = fit(qs, c_all)
    xs, ys = fit_isotonic(np.concatenate(oof), np.concatenate([q.y for q in qs]))
    z_all, y_all, _ = top10(qs, oof)
    thr = threshold(calibrate(np.asarray(z_all), xs, ys), np.asarray(y_all))
    # queries with no relevant document: cross-collection, never fitted on; the shipped model and threshold
    per_col_none = {}
    for label in sorted({q.col for q in cross}):
        members = [q for q in cross if q.col == label]
        best = [float(calibrate(logits(model, q.x), xs, ys).max()) if len(q.y) else 0.0 for q in members]
        per_col_none[label] = round(float(np.mean([b < thr for b in best])), 4)
    # and the same share for queries that do have a relevant document (a false "no relevant passage")
    has_rel = [q for q in qs if q.y.any()]
    missed = [float(p_cv[qs.index(q)].max()) < thr for q in has_rel]
    figures["no_relevant_passage"] = {
        "threshold": thr,
        "said_on_queries_without_relevant_document": per_col_none,
        "said_on_queries_with_a_relevant_candidate_cv": round(float(np.mean(missed)), 4),
    }
    from aisac_core.rag import ranker

    out = {
        "features": list(ranker.FEATURES),
        "mean": [round(float(v), 8) for v in model[0]],
        "scale": [round(float(v), 8) for v in model[1]],
        "coef": [round(float(v), 8) for v in model[2]],
        "intercept": round(model[3], 8),
        "C": c_all,
        "isotonic": {"x": [round(v, 6) for v in xs], "y": [round(v, 6) for v in ys]},
        "threshold": thr,
        "depth": ranker.DEPTH,
        "trained_on": {label: len([q for q in qs if q.col == label]) for label in cols},
        "script": "bench/train_ranker.py",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    figures["model_sha256"] = hashlib.sha256(args.out.read_bytes()).hexdigest()
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps({k: v for k, v in figures.items() if k != "collections"}, indent=1))
    if args.figures:
        args.figures.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
