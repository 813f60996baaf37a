"""Hybrid search over the indexed chunks, with filters and evidence anchors.

Modes: ``dense`` (cosine over MiniLM vectors), ``sparse`` (BM25 with IDF), ``hybrid`` (both, fused).

Hybrid fusion (:data:`FUSION`, default ``convex``): the dense and the BM25 query each fetch their top
:data:`PREFETCH` chunks; every candidate of the union is then scored by both (the score a list did not
return is looked up exactly, restricted to the candidate ids; BM25 is 0 where no query term occurs), both
scores are normalised by their theoretical minimum (:data:`NORMALISATION` ``tmm``: score over the best
candidate's, floors 0), and the hit score is the convex combination
``HYBRID_ALPHA * dense + (1 - HYBRID_ALPHA) * bm25``, in [0, 1] (TM2C2 in Bruch, Gai & Ingber, "An Analysis
of Fusion Functions for Hybrid Retrieval", ACM TOIS 42(1), 2023). The best fused chunks then expand the BM25
query (RM3 pseudo-relevance feedback, :func:`expand_query`), move the dense query towards them unless the dense
first pass has a clear winner (Rocchio, :func:`dense_feedback`), and the fusion runs again. ``rrf`` selects the
vector store's reciprocal rank fusion instead, score = sum_i w_i / (k + rank_i) (Cormack, Clarke & Buettcher,
SIGIR 2009). On Cranfield (nDCG@10) the shipped hybrid scores 0.437, against 0.420 for min-max without
feedback (p = 0.009) and 0.413-0.415 for RRF; the figures and the alternatives tried are in
docs/retrieval.md, the benchmark in ``bench/quality.py``.

Hybrid hits also carry ``relevance``, a calibrated probability that the hit is relevant, from the learned ranker
(:mod:`aisac_core.rag.ranker`, :func:`ranked_hits`); a hybrid result whose best hit is below the ranker's
threshold says ``no_relevant_passage`` (with a ``note``) and keeps its hits. :data:`RERANK` re-orders the hits by
that probability (off by default; figures in docs/retrieval.md, "Learned ranker").

Every hit carries an evidence anchor (:class:`~aisac_core.evidence.anchor.Anchor`): ``{chunk_id, doc_id,
path, sha256 (of the file), section, page, char_span [start, end) into the document's plain text,
chunk_sha256 (of the chunk text), score}``. Verifying an anchor: :mod:`aisac_core.rag.verify`; reading a
document's sections: :mod:`aisac_core.rag.sections`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from aisac_core.errors import AisacError
from aisac_core.evidence.anchor import Anchor
from aisac_core.rag import ranker
from aisac_core.rag.chunking import indexed_text
from aisac_core.rag.indexer import documents_matching, is_point_id, point_id
from aisac_core.rag.results import AnchorDict, HitDict, SearchResultDict
from aisac_core.rag.structure import SECTION_LABELS
from aisac_core.store.vectors import Cond, Mode, VectorHit

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.store.tables import Document, DocumentContent
    from aisac_core.store.vectors import VectorStore

MAX_K = 100
MODES = ("hybrid", "dense", "sparse")
#: filter keys accepted by :meth:`ChunkSearch.search` and what each means.
FILTER_KEYS = {
    "doc_id": "one doc_id or a list of them",
    "path_glob": "glob matched against the full path or the file name, e.g. '*.pdf' or '*/papers/*'",
    "page_from": "first page (1-based, inclusive)",
    "page_to": "last page (1-based, inclusive)",
    "file_type": "one of pdf, docx, pptx, xlsx, html, md, jats, latex, txt (or a list)",
    "section": "section taxonomy label: abstract, introduction, methods, results, discussion, conclusion, "
    "datasets, references, other",
}
#: Fusion of hybrid mode: ``convex`` (normalised score combination) or ``rrf`` (reciprocal rank fusion).
FUSION = "convex"
#: Candidates fetched by each of the dense and the BM25 query in hybrid mode (at least 2 k).
PREFETCH = 100
#: Weight of the dense score in convex fusion (the BM25 score gets 1 - alpha): equal weights, untuned.
HYBRID_ALPHA = 0.5
#: Normalisation of convex fusion: ``tmm`` (theoretical min-max, Bruch, Gai & Ingber 2023: each score minus
#: its floor, over the best candidate's minus the floor) or ``minmax`` (over the candidates' own range, the
#: earlier default, which maps the worst of two candidates to 0 however relevant it is).
NORMALISATION = "tmm"
#: Floors of ``tmm``: BM25 is >= 0 by construction; the cosine's is 0, "no semantic relation" for an encoder
#: trained contrastively (unrelated texts score about 0; 2.6 % of Cranfield query-chunk cosines are below 0,
#: the lowest -0.21). -1, the bound for any unit vectors, measured worse (docs/retrieval.md).
DENSE_FLOOR = 0.0
SPARSE_FLOOR = 0.0
#: Pseudo-relevance feedback of hybrid mode (RM3, Lavrenko & Croft 2001; Abdul-Jaleel et al., TREC 2004):
#: feedback chunks, expansion terms and the weight kept by the original query; 0 chunks switches it off.
#: Anserini's defaults (fbDocs 10, fbTerms 10, originalQueryWeight 0.5), not tuned here.
PRF_CHUNKS = 10
PRF_TERMS = 10
PRF_QUERY_WEIGHT = 0.5
#: When the feedback is trusted: ``always`` (plain RM3, shipped) or ``agreement`` (the expansion's weight is
#: scaled by how far the dense and the BM25 first pass agree on their top :data:`PRF_CHUNKS` chunks, see
#: :func:`agreement`; no agreement, no expansion). Agreement of differently built rankers predicts a good first
#: pass (Aslam & Pavlu, ECIR 2007). Measured: SciFact dev 0.893 vs 0.884, Cranfield 0.429 vs 0.437 (neither
#: significant): it helps one collection and hurts the other, so it is off by default (docs/retrieval.md).
PRF_GATE = "always"
#: Dense pseudo-relevance feedback of hybrid mode (Rocchio on the embedding, :func:`dense_feedback`): the
#: query vector moves towards the mean of the stored vectors of the best fused chunks of the first pass,
#: ``q' = w q + (1 - w) mean(v)``, w = ``DENSE_PRF_QUERY_WEIGHT``; 0 chunks switches it off. Applied per query
#: only when the dense first pass has no clear winner (:func:`clear_winner`, :data:`DENSE_PRF_CLEAR_GAP`).
#: Ungated it helps Cranfield (0.443 vs 0.436) and hurts SciFact dev (0.880 vs 0.884); gated, both gain
#: (Cranfield 0.441, SciFact dev 0.886; docs/retrieval.md, "Per-query feedback rules").
DENSE_PRF_CHUNKS = 3
DENSE_PRF_QUERY_WEIGHT = 2 / 3
#: Selective feedback (Amati, Carpineto & Romano, "Query difficulty, robustness, and selective application of
#: query expansion", ECIR 2004): no dense feedback when the best dense cosine exceeds the second best by at
#: least this much. A chunk that stands out is the query's match (a claim paraphrasing one abstract); averaging
#: it with the next chunks drifts the query away from it (query drift, Mitra, Singhal & Buckley, SIGIR 1998).
#: Cosine units of the shipped embedding model (re-measure on a model change); None applies feedback always.
#: Every threshold from 0.02 to 0.08 beat the ungated and the no-feedback hybrid on both dev collections.
DENSE_PRF_CLEAR_GAP: float | None = 0.05
#: Learned re-ranking of hybrid (convex) mode (:mod:`aisac_core.rag.ranker`): True re-orders the best
#: ``ranker.DEPTH`` fused candidates (at least k) by the logistic ranker, best P(relevant) first (each hit's
#: ``score`` stays its fused score, so it would no longer decrease down the list). Cross-validated by query it beats
#: the fused order on both collections' held-out folds, significantly on one only (Cranfield 0.4474 vs 0.4410,
#: p = 0.15; SciFact train over 2,000 abstracts 0.7785 vs 0.7690, p = 0.010; docs/retrieval.md, "Learned
#: ranker"); off by default until the order/score contract of hosts and the roles' evidence gates is settled.
#: Every hybrid hit carries its calibrated ``relevance`` either way.
RERANK = False
#: RRF settings (``FUSION = "rrf"``): the usual k = 60 and equal weights (dense, BM25).
RRF_K = 60
HYBRID_WEIGHTS = (1.0, 1.0)


class SearchError(AisacError, ValueError):
    """Bad search input; the message names the argument and the accepted values."""


@dataclass
class Hit:
    """One search hit: the chunk, its document and its evidence anchor."""

    chunk_id: str
    score: float
    payload: dict[str, Any]
    relevance: float | None = None

    def as_dict(self) -> HitDict:
        """JSON-ready hit: chunk_id, doc_id, title, path, page(s), section, text, score, relevance, anchor."""
        p = self.payload
        return {
            "chunk_id": self.chunk_id,
            "doc_id": p.get("doc_id"),
            "title": p.get("title"),
            "path": p.get("path"),
            "file_type": p.get("file_type"),
            "page": p.get("page"),
            "page_end": p.get("page_end"),
            "section": p.get("section") or None,
            "section_covers": p.get("section_covers"),
            "chunk_index": p.get("chunk_index"),
            "text": p.get("text"),
            "score": round(self.score, 6),
            "relevance": None if self.relevance is None else round(self.relevance, 4),
            "anchor": anchor_of(self.chunk_id, p, self.score),
        }


def anchor_of(chunk_id: str, p: dict[str, Any], score: float | None) -> AnchorDict:
    """The JSON form of the evidence anchor of a chunk payload (score None when not from a search)."""
    return cast(AnchorDict, Anchor.from_payload(chunk_id, p, score).to_dict())


@dataclass
class SearchResult:
    """Hits (best first), the mode, the time taken, and a message when there are no hits."""

    hits: list[Hit]
    mode: str
    took_ms: float
    message: str | None = None
    no_relevant_passage: bool | None = None
    note: str | None = None

    def as_dict(self) -> SearchResultDict:
        """JSON-ready result (:class:`~aisac_core.rag.results.SearchResultDict`)."""
        out: SearchResultDict = {
            "hits": [h.as_dict() for h in self.hits],
            "count": len(self.hits),
            "mode": self.mode,
            "took_ms": round(self.took_ms, 2),
        }
        if self.message:
            out["message"] = self.message
        if self.no_relevant_passage is not None:
            out["no_relevant_passage"] = self.no_relevant_passage
        if self.note:
            out["note"] = self.note
        return out


class ChunkSearch:
    """Search and chunk reads over the indexed chunks of one store: :meth:`search` (hybrid, dense or BM25, with
    filters), :meth:`search_hits`, :meth:`get_chunk` and :meth:`adjacent_chunk`. A part of
    :class:`~aisac_core.rag.service.RagService`. The collaborators these methods use: ``engine`` (the manifest, for
    the ``path_glob`` filter), ``embedder`` (queries embedded; BM25 vectors of feedback chunks), :meth:`vectors` (the
    ``chunks`` collection) and :meth:`document` (a document's stored sections, for the hint of an empty result)."""

    engine: Engine
    embedder: Embedder

    if TYPE_CHECKING:

        def vectors(self) -> VectorStore:
            """The vector store with the ``chunks`` collection ready (:meth:`RagService.vectors`)."""
            ...

        def document(self, doc_id: str) -> tuple[Document, DocumentContent | None] | None:
            """A document's manifest row and parsed content (:meth:`aisac_core.rag.indexer.Manifest.document`)."""
            ...

    def _conds(self, filters: dict[str, Any] | None) -> tuple[list[Cond], str | None]:
        """Filters -> store conditions. Returns (conditions, reason) where reason says why nothing can match."""
        if not filters:
            return [], None
        unknown = sorted(set(filters) - set(FILTER_KEYS))
        if unknown:
            raise SearchError(
                f"unknown filter key(s) {unknown}; accepted keys: "
                + "; ".join(f"{k} ({v})" for k, v in FILTER_KEYS.items())
            )
        conds: list[Cond] = []
        doc_ids: set[str] | None = None
        if (v := filters.get("doc_id")) is not None:
            vals = [v] if isinstance(v, str) else list(v)
            if not vals or not all(isinstance(x, str) and x for x in vals):
                raise SearchError("filter doc_id must be a non-empty string or list of strings")
            doc_ids = set(vals)
        if (g := filters.get("path_glob")) is not None:
            if not isinstance(g, str) or not g:
                raise SearchError("filter path_glob must be a non-empty glob string, e.g. '*.pdf'")
            matched = set(documents_matching(self.engine, g))
            doc_ids = matched if doc_ids is None else doc_ids & matched
        if doc_ids is not None:
            if not doc_ids:
                return [], "no indexed document matches the doc_id / path_glob filter"
            conds.append(Cond("doc_id", any=tuple(sorted(doc_ids))))
        pf, pt = filters.get("page_from"), filters.get("page_to")
        for name, val in (("page_from", pf), ("page_to", pt)):
            if val is not None and (not isinstance(val, int) or isinstance(val, bool) or val < 1):
                raise SearchError(f"filter {name} must be a page number >= 1, got {val!r}")
        if pf is not None and pt is not None and pf > pt:
            raise SearchError(f"filter page_from ({pf}) is after page_to ({pt})")
        if pf is not None or pt is not None:
            conds.append(Cond("page", gte=pf, lte=pt))
        for key in ("file_type", "section"):
            if (v := filters.get(key)) is not None:
                vals = [v] if isinstance(v, str) else list(v)
                if not vals or not all(isinstance(x, str) and x for x in vals):
                    raise SearchError(f"filter {key} must be a non-empty string or list of strings")
                if key == "section":
                    bad = [x for x in vals if x not in SECTION_LABELS]
                    if bad:
                        raise SearchError(
                            f"filter section {bad} is not a section label; use one of "
                            f"{', '.join(SECTION_LABELS)} (rag_get_overview lists a document's labels)"
                        )
                conds.append(Cond("file_type" if key == "file_type" else "section_covers", any=tuple(vals)))
        return conds, None

    def search(
        self, query: str, k: int = 10, filters: dict[str, Any] | None = None, mode: str = "hybrid"
    ) -> SearchResult:
        """Search the indexed chunks of this store.

        Args:
            query: natural-language query (non-empty, at most 2,000 characters).
            k: number of hits, 1..100.
            filters: optional dict with keys of :data:`FILTER_KEYS`.
            mode: ``hybrid`` (default), ``dense`` or ``sparse``.

        Returns:
            :class:`SearchResult`; an empty hit list comes with a ``message`` saying why. Hybrid hits carry
            ``relevance`` (calibrated P(relevant), 0-1) and the result ``no_relevant_passage`` (True, with a ``note``,
            when the best hit's relevance is below :attr:`aisac_core.rag.ranker.Ranker.threshold`).

        Raises:
            SearchError: empty or over-long query, k out of range, unknown mode or filter key, bad filter value.
            RankerError: the shipped ranker model is unreadable (a broken install).
        """
        t0 = time.perf_counter()
        if not isinstance(query, str) or not query.strip():
            raise SearchError("query is empty: give a few words describing what to find")
        if len(query) > 2000:
            raise SearchError(f"query is {len(query)} characters long; the limit is 2000")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise SearchError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
        if mode not in MODES:
            raise SearchError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        conds, reason = self._conds(filters)
        if reason:
            return SearchResult([], mode, (time.perf_counter() - t0) * 1000, reason)
        emb = self.embedder
        vs = self.vectors()
        dense = emb.embed_query(query) if mode in ("hybrid", "dense") else None
        sparse = emb.sparse_query(query) if mode in ("hybrid", "sparse") else None
        if mode == "hybrid" and FUSION == "convex":
            feedback = self.embedder.sparse_documents if PRF_CHUNKS or DENSE_PRF_CHUNKS else None
            hits = ranked_hits(self.vectors(), feedback, query, dense, sparse, k, conds)
            if hits:
                thr = ranker.load().threshold
                best = max(h.relevance or 0.0 for h in hits)
                none = best < thr
                note = (
                    f"no relevant passage: no hit reaches the relevance threshold {thr:.2f} (best probability of "
                    f"relevance {best:.2f}); the hits are the closest passages and may not answer the query (rephrase it, "
                    "or index the documents that hold the answer)"
                    if none
                    else None
                )
                return SearchResult(hits, mode, (time.perf_counter() - t0) * 1000, None, none, note)
            raw: list[VectorHit] = []
        else:
            raw = vs.query(
                "chunks",
                dense=dense,
                sparse=sparse,
                limit=k,
                conds=conds,
                mode=cast(Mode, mode),
                prefetch_limit=max(PREFETCH, 2 * k),
                rrf_k=RRF_K,
                weights=HYBRID_WEIGHTS,
            )
        hits = [Hit(h.id, h.score, h.payload) for h in raw]
        msg = None
        if not hits:
            if vs.count("chunks") == 0:
                msg = "the index is empty: index documents first (rag_index / aisac index PATH)"
            elif mode == "sparse":
                msg = "no chunk shares a term with the query; try other words or mode 'hybrid'"
            else:
                msg = "no chunk matched the filters; loosen them"
                if filters and filters.get("section") and filters.get("doc_id"):
                    msg += "; " + self._labels_hint(filters["doc_id"])
        return SearchResult(hits, mode, (time.perf_counter() - t0) * 1000, msg)

    def search_hits(self, query: str, k: int = 10) -> list[HitDict]:
        """The top ``k`` hybrid-search hits for ``query`` with their whole text and full anchors (the roles'
        context). Raises :class:`SearchError`."""
        return self.search(query, k).as_dict()["hits"]

    def _labels_hint(self, doc_ids: str | list[str]) -> str:
        """Which section labels the filtered documents have (for a search that found nothing)."""
        out = []
        for did in ([doc_ids] if isinstance(doc_ids, str) else list(doc_ids))[:10]:
            got = self.document(did)
            if got and got[1] is not None and got[1].structure_json:
                labels = sorted({sec["label"] for sec in json.loads(got[1].structure_json).get("sections", [])})
                out.append(f"{did} has sections: {', '.join(labels) or '(no headings)'}")
        return "; ".join(out) or "the filtered documents have no recorded sections"

    def get_chunk(self, chunk_id: str) -> HitDict | None:
        """A chunk of this store by id with its anchor (score None), or None when unknown."""
        recs = self.vectors().retrieve("chunks", [chunk_id]) if is_point_id(chunk_id) else []
        if not recs:
            return None
        h = Hit(recs[0].id, 0.0, recs[0].payload).as_dict()
        h["score"] = None
        h["anchor"]["score"] = None
        return h

    def adjacent_chunk(self, chunk_id: str, delta: int) -> HitDict | None:
        """The chunk ``delta`` places after (negative: before) chunk ``chunk_id`` in the same version of the same
        document, with its anchor (score None); None when either is unknown or the document has no such chunk. A
        sentence cut by a chunk boundary is completed from it (the extractive answer)."""
        got = self.get_chunk(chunk_id)
        if got is None or got.get("chunk_index") is None:
            return None
        a = got["anchor"]
        if not a.get("doc_id") or not a.get("sha256") or int(got["chunk_index"] or 0) + delta < 0:
            return None
        return self.get_chunk(point_id(str(a["doc_id"]), str(a["sha256"]), int(got["chunk_index"] or 0) + delta))


def normalise(scores: dict[str, float], ids: list[str], floor: float | None) -> dict[str, float]:
    """Scores of ``ids`` mapped to [0, 1] (a missing score counts as 0).

    ``floor`` None: min-max over ``ids``, ``(x - min)/(max - min)``, all 0 when they tie. A float: theoretical
    min-max (TMM, Bruch, Gai & Ingber, ACM TOIS 42(1), 2023), ``(max(x, floor) - floor)/(max - floor)``, all 0
    when the best does not exceed the floor; it does not depend on the worst candidate, so two equally
    relevant candidates score alike however few there are.
    """
    vals = [scores.get(i, 0.0) for i in ids]
    hi = max(vals)
    lo = min(vals) if floor is None else floor
    return {i: ((max(v, lo) - lo) / (hi - lo) if hi > lo else 0.0) for i, v in zip(ids, vals)}


def _both_scores(
    vs: Any,
    collection: str,
    dense: list[float] | None,
    sparse: tuple[list[int], list[float]] | None,
    conds: list[Cond],
    prefetch: int,
    d_score: dict[str, float] | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """Dense and BM25 score of every candidate of both lists (``d_score``: dense candidates already known)."""
    has_sparse = sparse is not None and len(sparse[0]) > 0
    if d_score is None:
        d_score = {
            h.id: h.score
            for h in vs.query(
                collection, dense=dense, sparse=None, limit=prefetch, conds=conds, mode="dense", with_payload=False
            )
        }
    else:
        d_score = dict(d_score)
    s_score = (
        {
            h.id: h.score
            for h in vs.query(
                collection, dense=None, sparse=sparse, limit=prefetch, conds=conds, mode="sparse", with_payload=False
            )
        }
        if has_sparse
        else {}
    )
    missing_d = [i for i in s_score if i not in d_score]
    if missing_d:
        d_score.update(dense_scores(vs, collection, dense, missing_d, conds))
    missing_s = [i for i in d_score if i not in s_score] if has_sparse else []
    if missing_s:
        s_score.update(
            (h.id, h.score)
            for h in vs.query(
                collection,
                dense=None,
                sparse=sparse,
                limit=len(missing_s),
                conds=conds,
                mode="sparse",
                ids=missing_s,
                with_payload=False,
            )
        )
    return d_score, s_score


def _fuse(d_score: dict[str, float], s_score: dict[str, float]) -> tuple[list[str], dict[str, float]]:
    """(candidates best first, fused score) of the convex combination; ties go to the higher dense score."""
    candidates = list(d_score.keys() | s_score.keys())
    if not candidates:
        return [], {}
    tmm = NORMALISATION == "tmm"
    nd = normalise(d_score, candidates, DENSE_FLOOR if tmm else None)
    ns = normalise(s_score, candidates, SPARSE_FLOOR if tmm else None)
    fused = {i: HYBRID_ALPHA * nd[i] + (1.0 - HYBRID_ALPHA) * ns[i] for i in candidates}
    return sorted(candidates, key=lambda i: (-fused[i], -d_score.get(i, -1.0), i)), fused


def expand_query(
    sparse: tuple[list[int], list[float]],
    feedback: list[tuple[list[int], list[float]]],
    weights: list[float],
    n_terms: int = PRF_TERMS,
    keep: float = PRF_QUERY_WEIGHT,
) -> tuple[list[int], list[float]]:
    """RM3 query expansion of a BM25 query vector (Lavrenko & Croft, SIGIR 2001; Abdul-Jaleel et al., TREC 2004).

    Args:
        sparse: the query's ``(term ids, weights)`` (weight 1 per distinct term).
        feedback: the sparse vectors ``(term ids, BM25 term weights)`` of the feedback chunks.
        weights: each feedback chunk's retrieval score (>= 0), normalised here to sum 1 (P(q|d)).
        n_terms: expansion terms kept; ``keep``: weight of the original query (RM3's lambda).

    Returns:
        ``(term ids, weights)``: ``keep * q/|q| + (1 - keep) * e``, where ``e`` holds the ``n_terms`` terms
        with the highest ``sum_d P(t|d) P(q|d)``, renormalised to sum 1; ``P(t|d)`` is the chunk's BM25 term
        weight over the sum of its weights. The vector store applies IDF to every term at query time.
        The query is returned unchanged when there is no usable feedback.
    """
    tot = sum(w for w in weights if w > 0)
    rel: dict[int, float] = {}
    for (idx, vals), w in zip(feedback, weights):
        norm = sum(vals)
        if w <= 0 or norm <= 0:
            continue
        for t, v in zip(idx, vals):
            rel[t] = rel.get(t, 0.0) + (v / norm) * (w / tot)
    top = sorted(rel.items(), key=lambda kv: (-kv[1], kv[0]))[:n_terms]
    mass = sum(v for _, v in top)
    if not sparse[0] or mass <= 0:
        return sparse
    q = {t: keep / len(sparse[0]) for t in sparse[0]}
    for t, v in top:
        q[t] = q.get(t, 0.0) + (1.0 - keep) * v / mass
    ids = sorted(q)
    return ids, [q[t] for t in ids]


def agreement(d_score: dict[str, float], s_score: dict[str, float], n: int) -> float:
    """Overlap of the dense and the BM25 top ``n`` among the candidates, ``|D_n & S_n| / n``, in [0, 1].

    A query-performance predictor without parameters: two rankers built on different evidence (an embedding,
    term statistics) that put the same chunks first are likely both right (Aslam & Pavlu, "Query hardness
    estimation using Jensen-Shannon divergence among multiple scoring functions", ECIR 2007). It is 0 when
    either list is empty.
    """
    if n <= 0 or not d_score or not s_score:
        return 0.0
    top_d = sorted(d_score, key=lambda i: (-d_score[i], i))[:n]
    top_s = sorted(s_score, key=lambda i: (-s_score[i], i))[:n]
    return len(set(top_d) & set(top_s)) / n


def clear_winner(d_score: dict[str, float], gap: float | None) -> bool:
    """True when the best dense score beats the second best by at least ``gap`` (cosine units; None: never).

    The per-query rule of :func:`dense_feedback` (:data:`DENSE_PRF_CLEAR_GAP`, its sources there). A single
    candidate is a clear winner; no candidate is not.
    """
    if gap is None or not d_score:
        return False
    top = sorted(d_score.values(), reverse=True)[:2]
    return len(top) == 1 or top[0] - top[1] >= gap


def dense_feedback(
    vs: Any, collection: str, dense: list[float] | None, order: list[str], d_score: dict[str, float] | None = None
) -> list[float] | None:
    """The dense query moved towards its :data:`DENSE_PRF_CHUNKS` best fused chunks, or None (feedback off, no
    dense query, no candidates, or the first pass's dense scores ``d_score`` have a clear winner,
    :func:`clear_winner` with :data:`DENSE_PRF_CLEAR_GAP`).

    Rocchio's rule on embeddings (Rocchio 1971; for dense retrievers Li et al., "Improving Query Representations
    for Dense Retrieval with Pseudo Relevance Feedback: A Reproducibility Study", ECIR 2022):
    ``q' = w * q + (1 - w) * mean(v_1 .. v_n)``, renormalised to unit length, where ``v_i`` are the stored dense
    vectors of the ``n`` best chunks of the first (fused) pass and ``w`` = :data:`DENSE_PRF_QUERY_WEIGHT`.
    """
    if dense is None or DENSE_PRF_CHUNKS <= 0 or not order:
        return None
    if d_score is not None and clear_winner(d_score, DENSE_PRF_CLEAR_GAP):
        return None
    vecs = vs.dense_vectors(collection, order[:DENSE_PRF_CHUNKS])
    if not vecs:
        return None
    fb = np.asarray(list(vecs.values()), dtype=np.float32).mean(axis=0)
    q = DENSE_PRF_QUERY_WEIGHT * np.asarray(dense, dtype=np.float32) + (1.0 - DENSE_PRF_QUERY_WEIGHT) * fb
    norm = float(np.linalg.norm(q))
    return [float(x) for x in q / norm] if norm > 0 else None


@dataclass
class Fused:
    """What a convex fusion computed: candidates best first, their fused score, the final pass's raw dense and BM25
    scores, and the first pass's dense scores (cosines of the query as typed)."""

    order: list[str]
    fused: dict[str, float]
    d_score: dict[str, float]
    s_score: dict[str, float]
    d_first: dict[str, float]


def convex_fusion(
    vs: Any,
    dense: list[float] | None,
    sparse: tuple[list[int], list[float]] | None,
    k: int,
    conds: list[Cond],
    prefetch: int,
    collection: str = "chunks",
    feedback: Callable[[list[str]], list[tuple[list[int], list[float]]]] | None = None,
) -> list[VectorHit]:
    """Hybrid hits by convex combination of normalised dense and BM25 scores (module docstring).

    Each list fetches ``prefetch`` candidates (ids and scores only); the score a list did not return for
    a candidate is looked up exactly (a query restricted to those ids); a candidate without any query
    term has BM25 score 0. Scores are normalised per :data:`NORMALISATION` (:func:`normalise`) and combined
    with :data:`HYBRID_ALPHA`; ties go to the higher dense score. Payloads are read for the ``k`` winners only.
    ``collection``: ``chunks`` (documents) or ``dialogue`` (memory pairs).

    ``feedback`` (pseudo-relevance feedback, RM3): a function giving the BM25 vectors of texts (the
    embedder's ``sparse_documents``). When given and the query has a BM25 term, the :data:`PRF_CHUNKS` best
    fused chunks (title, heading path and text, as indexed) expand the BM25 query (:func:`expand_query`), and
    the candidates are fetched and fused again with the expanded BM25 query and the same dense query.
    Returns ``[VectorHit(id, fused score in [0, 1], payload)]``, best first, at most ``k``.
    """
    f = fuse_candidates(vs, dense, sparse, conds, prefetch, collection, feedback)
    best = f.order[:k]
    payloads = {h.id: h.payload for h in vs.retrieve(collection, best)} if best else {}
    return [VectorHit(i, f.fused[i], payloads[i]) for i in best if i in payloads]


def fuse_candidates(
    vs: Any,
    dense: list[float] | None,
    sparse: tuple[list[int], list[float]] | None,
    conds: list[Cond],
    prefetch: int,
    collection: str = "chunks",
    feedback: Callable[[list[str]], list[tuple[list[int], list[float]]]] | None = None,
) -> Fused:
    """Every candidate of :func:`convex_fusion` (same arguments, without ``k``) with the scores it computed; no
    payload is read but the feedback chunks'."""
    d_score, s_score = _both_scores(vs, collection, dense, sparse, conds, prefetch)
    d_first = d_score
    order, fused = _fuse(d_score, s_score)
    trust = 0.0
    expanded = sparse
    if feedback is not None and PRF_CHUNKS > 0 and sparse is not None and sparse[0] and order:
        trust = agreement(d_score, s_score, PRF_CHUNKS) if PRF_GATE == "agreement" else 1.0
    if feedback is not None and sparse is not None and trust > 0:
        fb = order[:PRF_CHUNKS]
        got = {h.id: h.payload for h in vs.retrieve(collection, fb)}
        fb = [i for i in fb if i in got]
        texts = [
            indexed_text(
                "\n".join([*(got[i].get("section") or "").split(" > "), got[i].get("text") or ""]).strip(),
                got[i].get("title"),
                got[i].get("section") or "",
            )
            for i in fb
        ]
        keep = 1.0 - (1.0 - PRF_QUERY_WEIGHT) * trust
        expanded = expand_query(sparse, feedback(texts) if texts else [], [fused[i] for i in fb], keep=keep)
    new_dense = dense_feedback(vs, collection, dense, order, d_score) if feedback is not None else None
    if new_dense is not None:
        d_score, s_score = _both_scores(vs, collection, new_dense, expanded, conds, prefetch)
        order, fused = _fuse(d_score, s_score)
    elif expanded is not sparse:
        d_score, s_score = _both_scores(vs, collection, dense, expanded, conds, prefetch, d_score)
        order, fused = _fuse(d_score, s_score)
    return Fused(order, fused, d_score, s_score, d_first)


def dense_scores(
    vs: Any, collection: str, dense: list[float] | None, ids: list[Any], conds: list[Cond]
) -> dict[Any, float]:
    """The cosine of the query vector ``dense`` for each point of ``ids`` in ``collection`` (those the filters
    ``conds`` keep): the dense score of a candidate that only the sparse or the feedback pass found."""
    hits = vs.query(
        collection, dense=dense, sparse=None, limit=len(ids), conds=conds, mode="dense", ids=ids, with_payload=False
    )
    return {h.id: h.score for h in hits}


def candidates(
    vs: Any, dense: list[float] | None, f: Fused, depth: int, conds: list[Cond], collection: str = "chunks"
) -> list[ranker.Candidate]:
    """The best ``depth`` candidates of the fusion ``f`` with their payloads and the signals of
    :class:`aisac_core.rag.ranker.Candidate` (the cosine of the query as typed is looked up for a candidate that
    only the feedback pass found), in fused order; a candidate whose payload is gone is left out."""
    pool = f.order[:depth]
    if not pool:
        return []
    cos = {i: f.d_first[i] for i in pool if i in f.d_first}
    missing = [i for i in pool if i not in cos]
    if missing and dense is not None:
        cos.update(dense_scores(vs, collection, dense, missing, conds))
    tmm = NORMALISATION == "tmm"
    nd = normalise(f.d_score, f.order, DENSE_FLOOR if tmm else None)
    ns = normalise(f.s_score, f.order, SPARSE_FLOOR if tmm else None)
    rank_d = {i: r for r, i in enumerate(sorted(f.order, key=lambda i: (-f.d_score.get(i, -1.0), i)))}
    rank_s = {i: r for r, i in enumerate(sorted(f.order, key=lambda i: (-f.s_score.get(i, 0.0), i)))}
    payloads = {h.id: h.payload for h in vs.retrieve(collection, pool)}
    return [
        ranker.Candidate(
            chunk_id=i,
            cos=cos.get(i, 0.0),
            bm25=f.s_score.get(i, 0.0),
            dense_norm=nd[i],
            bm25_norm=ns[i],
            fused=f.fused[i],
            rank_dense=rank_d[i],
            rank_bm25=rank_s[i],
            rank_fused=r,
            payload=payloads[i],
        )
        for r, i in enumerate(pool)
        if i in payloads
    ]


def ranked_hits(
    vs: VectorStore,
    feedback: Callable[[list[str]], list[tuple[list[int], list[float]]]] | None,
    query: str,
    dense: list[float] | None,
    sparse: tuple[list[int], list[float]] | None,
    k: int,
    conds: list[Cond],
) -> list[Hit]:
    """The ``k`` best hybrid hits of ``query``: the convex fusion's candidates (:func:`fuse_candidates`), the best
    ``max(ranker.DEPTH, k)`` of them re-ordered by the learned ranker when :data:`RERANK` (ties keep the fused
    order), each hit with its fused ``score`` and its calibrated ``relevance`` (:mod:`aisac_core.rag.ranker`).
    ``vs``: the store's vector store; ``feedback``: the sparse document encoder for pseudo-relevance feedback
    (``Embedder.sparse_documents``), None when feedback is off."""
    f = fuse_candidates(vs, dense, sparse, conds, max(PREFETCH, 2 * k), feedback=feedback)
    cands = candidates(vs, dense, f, max(ranker.DEPTH, k), conds)
    # without re-ranking only the k hits need their probability (the text features are most of the cost)
    scored = ranker.score(query, cands, rows=None if RERANK else k)
    order = list(range(len(scored)))
    if RERANK:
        order.sort(key=lambda j: (-scored[j][0], j))
    return [Hit(cands[j].chunk_id, cands[j].fused, cands[j].payload, scored[j][1]) for j in order[:k]]
