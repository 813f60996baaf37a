"""The fusion study behind docs/retrieval.md (``python -m bench --only quality --study``).

It reuses the Cranfield index of the quality part: the stored dense vectors of every chunk (read from the
Qdrant Edge shard) and the chunk texts, and scores every query against every chunk in numpy:

- dense: cosine (the vectors are unit length), as the store computes it;
- BM25: fastembed's ``Qdrant/bm25`` term weights recomputed from the chunk text with a given ``avg_len``
  (k1 and b as shipped), times Qdrant's IDF, ln(1 + (N - df + 0.5) / (df + 0.5)), for each query term.
  The chunk text is rebuilt as heading + newline + text, which is what docling's ``contextualize``
  embeds for these one-heading documents; at the shipped ``avg_len`` the study's sparse figure equals
  the live sparse run of the quality table.

Each fusion then ranks the chunks as :meth:`aisac_core.rag.search.ChunkSearch.search` would with k = 100 (candidates:
the top ``max(PREFETCH, 2k)`` of each list), chunks map to documents, and nDCG@10 / recall@100 follow.

A second table tests a heading field weight for BM25 (:func:`heading_weight_study`): BM25F (Robertson,
Zaragoza & Taylor, CIKM 2004) approximated by repeating the heading path ``w`` times in the text the
*sparse* vector is computed from (the dense vectors are unchanged), at ``avg_len`` 80 and at 80 scaled
by the measured growth of the mean document length, with a paired randomization test against the
shipped hybrid and a 2-fold cross-validation of ``w`` over odd / even query numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import cranfield
from .common import table
from .metrics import mean, ndcg_at_k, recall_at_k

K = 100


def _load_index(core: Any) -> tuple[list[str], list[str], list[str], np.ndarray]:
    """(Cranfield id, heading path, chunk text) per chunk and the dense matrix, read from the Edge shard."""
    import qdrant_edge as qe

    from .quality import cran_id

    shard = core.vectors()._shards["chunks"]
    docs, heads, bodies, vecs = [], [], [], []
    offset = None
    while True:
        recs, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=1000, with_payload=True, with_vector=True))
        for r in recs:
            p = dict(r.payload or {})
            docs.append(cran_id(p["path"]))
            heads.append(p.get("section") or "")
            bodies.append(p["text"])
            v = r.vector
            vecs.append(v["dense"] if isinstance(v, dict) else v)
        if offset is None or not recs:
            break
    return docs, heads, bodies, np.asarray(vecs, dtype=np.float32)


def _bm25_text(head: str, body: str, w: int = 1) -> str:
    """The text BM25 sees: the heading ``w`` times, then the chunk (``w`` = 1 is what aisac embeds)."""
    return "\n".join([head] * w + [body]) if head else body


def _bm25_lengths(core: Any, texts: list[str]) -> np.ndarray:
    """Length of each text in BM25 terms (fastembed's tokenizer, stopwords and stemmer: its ``|d|``)."""
    from fastembed import SparseTextEmbedding
    from fastembed.sparse.bm25 import remove_non_alphanumeric

    m = SparseTextEmbedding("Qdrant/bm25", specific_model_path=str(core.embedder._bm25_dir())).model
    return np.asarray([len(m._stem(m.tokenizer.tokenize(remove_non_alphanumeric(t)))) for t in texts], dtype=float)


def _bm25(core: Any, texts: list[str], queries: list[str], avg_len: float) -> np.ndarray:
    """BM25 score of every (query, chunk) as Qdrant computes it from fastembed's weights at ``avg_len``."""
    from fastembed import SparseTextEmbedding

    from aisac_core.rag.embeddings import BM25_B, BM25_K

    model = SparseTextEmbedding(
        "Qdrant/bm25", specific_model_path=str(core.embedder._bm25_dir()), k=BM25_K, b=BM25_B, avg_len=avg_len
    )
    vocab: dict[int, int] = {}
    rows, cols, vals = [], [], []
    for i, e in enumerate(model.embed(texts, batch_size=256)):
        for t, v in zip(e.indices.tolist(), e.values.tolist()):
            rows.append(i)
            cols.append(vocab.setdefault(t, len(vocab)))
            vals.append(v)
    w = np.zeros((len(texts), len(vocab)), dtype=np.float32)
    w[rows, cols] = vals
    n = len(texts)
    df = (w > 0).sum(axis=0)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    s = np.zeros((len(queries), n), dtype=np.float32)
    for qi, e in enumerate(model.query_embed(queries)):
        c = [vocab[t] for t in e.indices.tolist() if t in vocab]
        if c:
            s[qi] = (w[:, c] * idf[c]).sum(axis=1)
    return s


def _top(scores: np.ndarray, n: int, positive_only: bool = False) -> np.ndarray:
    """Indices of the ``n`` best entries (BM25: only chunks sharing a term, as the store returns them)."""
    order = np.argsort(-scores, kind="stable")[:n]
    return order[scores[order] > 0] if positive_only else order


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def fuse_convex(d: np.ndarray, s: np.ndarray, pre: int, alpha: float = 0.5, complete: bool = True) -> dict[int, float]:
    """Convex combination of min-max normalised scores over the union of both candidate lists. With
    ``complete`` every candidate has both scores (what aisac ships); otherwise a score a list did not
    return counts as that list's minimum."""
    dc, sc = _top(d, pre), _top(s, pre, True)
    u = np.union1d(dc, sc)
    if complete:
        dv, sv = d[u], s[u]
    else:
        dv = np.where(np.isin(u, dc), d[u], d[dc].min())
        sv = np.where(np.isin(u, sc), s[u], s[sc].min() if len(sc) else 0.0)
    f = alpha * _minmax(dv) + (1 - alpha) * _minmax(sv)
    return dict(zip(u.tolist(), f.tolist()))


def fuse_tmm(d: np.ndarray, s: np.ndarray, pre: int, alpha: float = 0.5, d_floor: float = 0.0) -> dict[int, float]:
    """Convex combination after theoretical min-max normalisation (TM2C2, Bruch, Gai & Ingber 2023): each
    score minus its floor over the best candidate's minus the floor; BM25's floor is 0, the cosine's ``d_floor``
    (-1, the bound for unit vectors, or 0, "unrelated" for a contrastively trained encoder)."""
    dc, sc = _top(d, pre), _top(s, pre, True)
    u = np.union1d(dc, sc)
    dv, sv = np.maximum(d[u], d_floor), s[u]
    dn = (dv - d_floor) / (dv.max() - d_floor) if dv.max() > d_floor else np.zeros_like(dv)
    sn = sv / sv.max() if sv.max() > 0 else np.zeros_like(sv)
    return dict(zip(u.tolist(), (alpha * dn + (1 - alpha) * sn).tolist()))


def fuse_rrf(
    d: np.ndarray, s: np.ndarray, pre: int, k: int = 60, w: tuple[float, float] = (1.0, 1.0)
) -> dict[int, float]:
    """Reciprocal rank fusion of the two candidate lists (what the store's RRF computes)."""
    out: dict[int, float] = {}
    for weight, lst in ((w[0], _top(d, pre)), (w[1], _top(s, pre, True))):
        for r, i in enumerate(lst.tolist(), 1):
            out[i] = out.get(i, 0.0) + weight / (k + r)
    return out


def fuse_dbsf(d: np.ndarray, s: np.ndarray, pre: int) -> dict[int, float]:
    """Distribution-based score fusion (Qdrant's DBSF): each list normalised by mean +- 3 sd, then summed."""
    out: dict[int, float] = {}
    for lst, sc in ((_top(d, pre), d), (_top(s, pre, True), s)):
        if not len(lst):
            continue
        v = sc[lst]
        lo, hi = v.mean() - 3 * v.std(), v.mean() + 3 * v.std()
        for i, x in zip(lst.tolist(), ((v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)).tolist()):
            out[i] = out.get(i, 0.0) + x
    return out


def _prf(q: np.ndarray, dmat: np.ndarray, beta: float = 0.5, m: int = 3) -> np.ndarray:
    """Rocchio pseudo-relevance feedback on dense vectors: q + beta * mean of the top-m chunk vectors."""
    out = []
    for qi in range(q.shape[0]):
        top = np.argsort(-(dmat @ q[qi]))[:m]
        v = q[qi] + beta * dmat[top].mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.asarray(out) @ dmat.T


def run_study(core: Any, col: cranfield.Cranfield) -> dict[str, Any]:
    """Evaluate the fusion alternatives on the quality part's index; returns rows for the JSON result."""
    from aisac_core.rag.embeddings import BM25_AVG_LEN
    from aisac_core.rag.search import PREFETCH
    from aisac_core.store.vectors import EdgeVectorStore

    if not isinstance(core.vectors(), EdgeVectorStore):
        return {"skipped": "the study reads vectors from a Qdrant Edge shard"}
    docs, heads, bodies, dmat = _load_index(core)
    texts = [_bm25_text(h, b) for h, b in zip(heads, bodies)]
    qids = list(col.queries)
    queries = [col.queries[q] for q in qids]
    qv = np.asarray([core.embedder.embed_query(t) for t in queries], dtype=np.float32)
    dense = qv @ dmat.T
    pre = max(PREFETCH, 2 * K)

    def score(fn: Callable[[int], dict[int, float]]) -> tuple[float, float]:
        nd, rc = [], []
        for qi, q in enumerate(qids):
            fused = fn(qi)
            best = sorted(fused, key=lambda i: -fused[i])[:K]
            ranking = [docs[i] for i in best]
            nd.append(ndcg_at_k(ranking, col.qrels[q], 10))
            rc.append(recall_at_k(ranking, col.qrels[q], 100))
        return round(mean(nd), 4), round(mean(rc), 4)

    def single(m: np.ndarray, positive_only: bool) -> Callable[[int], dict[int, float]]:
        return lambda qi: {i: float(m[qi, i]) for i in _top(m[qi], K, positive_only).tolist()}

    rows: list[dict[str, Any]] = []

    def add(avg: float, name: str, fn: Callable[[int], dict[int, float]], shipped: bool = False) -> None:
        nd, rc = score(fn)
        rows.append({"bm25_avg_len": avg, "run": name, "ndcg@10": nd, "recall@100": rc, "shipped": shipped})

    add(0, "dense alone", single(dense, False))
    prf = _prf(qv, dmat)
    for avg in (256.0, BM25_AVG_LEN):
        sp = _bm25(core, texts, queries, avg)
        add(avg, "BM25 alone", single(sp, True))
        add(avg, "RRF k=60", lambda qi: fuse_rrf(dense[qi], sp[qi], pre))
        add(avg, "RRF k=20", lambda qi: fuse_rrf(dense[qi], sp[qi], pre, k=20))
        add(avg, "RRF k=60, weights dense 1 / BM25 0.5", lambda qi: fuse_rrf(dense[qi], sp[qi], pre, w=(1.0, 0.5)))
        add(avg, "DBSF (Qdrant)", lambda qi: fuse_dbsf(dense[qi], sp[qi], pre))
        add(
            avg,
            "convex a=0.5, missing score = list minimum",
            lambda qi: fuse_convex(dense[qi], sp[qi], pre, complete=False),
        )
        for a in (0.3, 0.4, 0.5, 0.6, 0.7):
            add(avg, f"convex a={a}, both scores looked up", lambda qi, a=a: fuse_convex(dense[qi], sp[qi], pre, a))
        add(avg, "dense Rocchio PRF (b=0.5, m=3) + convex a=0.5", lambda qi: fuse_convex(prf[qi], sp[qi], pre))
        if avg == BM25_AVG_LEN:
            for floor in (-1.0, 0.0):
                for a in (0.5, 0.6, 0.7, 0.8):
                    add(
                        avg,
                        f"TM2C2 (theoretical min-max), cosine floor {floor:g}, a={a}",
                        lambda qi, a=a, floor=floor, sp=sp: fuse_tmm(dense[qi], sp[qi], pre, a, floor),
                        shipped=(floor == 0.0 and a == 0.5),
                    )
    heading = heading_weight_study(core, col, docs, heads, bodies, dense, queries, pre)
    return {"k": K, "prefetch": pre, "chunks": len(docs), "rows": rows, "heading_weight": heading}


def heading_weight_study(
    core: Any,
    col: cranfield.Cranfield,
    docs: list[str],
    heads: list[str],
    bodies: list[str],
    dense: np.ndarray,
    queries: list[str],
    pre: int,
    weights: tuple[int, ...] = (1, 2, 3),
) -> dict[str, Any]:
    """BM25 with the heading repeated ``w`` times (a BM25F heading weight), dense unchanged.

    For each ``w`` and two ``avg_len`` policies (the shipped 80, and 80 times the growth of the mean BM25
    length over ``w`` = 1, which keeps the length normalisation of the body as shipped) it reports BM25
    alone and the shipped hybrid (convex, alpha 0.5), each with the paired randomization p-value against
    its shipped counterpart (``w`` = 1 at 80). Then, per policy, 2-fold cross-validation over the queries
    (odd / even query numbers): ``w`` is chosen by hybrid nDCG@10 on one half and scored on the other;
    the held-out mean is over all queries, next to the shipped hybrid's mean on the same queries.
    """
    from aisac_core.rag.embeddings import BM25_AVG_LEN

    from .metrics import paired_randomization_test

    qids = list(col.queries)

    def per_query(fn: Callable[[int], dict[int, float]]) -> tuple[np.ndarray, np.ndarray]:
        nd, rc = [], []
        for qi, q in enumerate(qids):
            fused = fn(qi)
            ranking = [docs[i] for i in sorted(fused, key=lambda i: -fused[i])[:K]]
            nd.append(ndcg_at_k(ranking, col.qrels[q], 10))
            rc.append(recall_at_k(ranking, col.qrels[q], 100))
        return np.asarray(nd), np.asarray(rc)

    base_len = float(_bm25_lengths(core, [_bm25_text(h, b) for h, b in zip(heads, bodies)]).mean())
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    for w in weights:
        texts = [_bm25_text(h, b, w) for h, b in zip(heads, bodies)]
        mean_len = float(_bm25_lengths(core, texts).mean())
        for policy, avg in (("80", BM25_AVG_LEN), ("80 x length growth", BM25_AVG_LEN * mean_len / base_len)):
            if w == 1 and policy != "80":
                continue  # identical to the shipped run
            sp = _bm25(core, texts, queries, avg)
            s_nd, _ = per_query(lambda qi: {i: float(sp[qi, i]) for i in _top(sp[qi], K, True).tolist()})
            h_nd, h_rc = per_query(lambda qi: fuse_convex(dense[qi], sp[qi], pre))
            runs[(policy, w)] = {
                "w": w,
                "avg_len_policy": policy,
                "avg_len": round(avg, 1),
                "mean_bm25_len": round(mean_len, 1),
                "sparse": s_nd,
                "hybrid": h_nd,
                "recall": h_rc,
            }
    ship = runs[("80", 1)]
    rows = []
    for r in runs.values():
        rows.append(
            {k: r[k] for k in ("w", "avg_len_policy", "avg_len", "mean_bm25_len")}
            | {
                "sparse_ndcg@10": round(float(r["sparse"].mean()), 4),
                "sparse_p_vs_shipped": round(paired_randomization_test(ship["sparse"], r["sparse"]), 4),
                "hybrid_ndcg@10": round(float(r["hybrid"].mean()), 4),
                "hybrid_recall@100": round(float(r["recall"].mean()), 4),
                "hybrid_p_vs_shipped": round(paired_randomization_test(ship["hybrid"], r["hybrid"]), 4),
                "shipped": r is ship,
            }
        )
    halves = [np.asarray([int(q) % 2 == par for q in qids]) for par in (1, 0)]  # odd, even query numbers
    cv = []
    for policy in ("80", "80 x length growth"):
        cand = {w: runs[(policy, w)] if (policy, w) in runs else ship for w in weights}
        held, chosen = np.zeros(len(qids)), []
        for train, test in ((halves[0], halves[1]), (halves[1], halves[0])):
            best = max(weights, key=lambda w: (round(float(cand[w]["hybrid"][train].mean()), 6), -w))
            chosen.append(best)
            held[test] = cand[best]["hybrid"][test]
        cv.append(
            {
                "avg_len_policy": policy,
                "w_chosen_on_odd_for_even": chosen[0],
                "w_chosen_on_even_for_odd": chosen[1],
                "held_out_hybrid_ndcg@10": round(float(held.mean()), 4),
                "shipped_hybrid_ndcg@10": round(float(ship["hybrid"].mean()), 4),
                "p_vs_shipped": round(paired_randomization_test(ship["hybrid"], held), 4),
            }
        )
    return {"base_mean_bm25_len": round(base_len, 1), "rows": rows, "cv": cv}


def print_study(study: dict[str, Any]) -> None:
    """Print the study's rows as a table."""
    if "rows" not in study:
        table("fusion study", ["note"], [(study.get("skipped", "not run"),)])
        return
    rows = [
        (
            r["run"] + ("  <- shipped (search adds RM3 feedback)" if r["shipped"] else ""),
            r["bm25_avg_len"] or "-",
            r["ndcg@10"],
            r["recall@100"],
        )
        for r in study["rows"]
    ]
    table(
        f"fusion study (Cranfield, {study['chunks']} chunks, k={study['k']}, prefetch {study['prefetch']})",
        ["run", "BM25 avg_len", "nDCG@10", "recall@100"],
        rows,
    )
    hw = study.get("heading_weight")
    if hw:
        table(
            "heading weight for BM25 (heading repeated w times in the sparse text; hybrid = convex a=0.5)",
            [
                "w",
                "avg_len",
                "mean BM25 len",
                "sparse nDCG@10",
                "p (sparse)",
                "hybrid nDCG@10",
                "recall@100",
                "p vs shipped",
            ],
            [
                (
                    f"{r['w']}" + ("  <- earlier shipped" if r["shipped"] else ""),
                    f"{r['avg_len']} ({r['avg_len_policy']})",
                    r["mean_bm25_len"],
                    r["sparse_ndcg@10"],
                    r["sparse_p_vs_shipped"],
                    r["hybrid_ndcg@10"],
                    r["hybrid_recall@100"],
                    r["hybrid_p_vs_shipped"],
                )
                for r in hw["rows"]
            ],
        )
        table(
            "heading weight: 2-fold cross-validation of w (odd / even query numbers)",
            ["avg_len", "w: odd->even", "w: even->odd", "held-out hybrid nDCG@10", "shipped", "p"],
            [
                (
                    c["avg_len_policy"],
                    c["w_chosen_on_odd_for_even"],
                    c["w_chosen_on_even_for_odd"],
                    c["held_out_hybrid_ndcg@10"],
                    c["shipped_hybrid_ndcg@10"],
                    c["p_vs_shipped"],
                )
                for c in hw["cv"]
            ],
        )


__all__ = ["run_study", "print_study", "heading_weight_study", "fuse_convex", "fuse_tmm", "fuse_rrf", "fuse_dbsf"]
