"""Hybrid search over the indexed chunks, with filters and evidence anchors.

Modes: ``dense`` (cosine over MiniLM vectors), ``sparse`` (BM25 with IDF), ``hybrid`` (both, fused).

Hybrid fusion (:data:`FUSION`, default ``convex``): the dense and the BM25 query each fetch their top
:data:`PREFETCH` chunks; every candidate of the union is then scored by both (the score a list did not
return is looked up exactly, restricted to the candidate ids; BM25 is 0 where no query term occurs), both
scores are min-max normalised over the candidates, and the hit score is the convex combination
``HYBRID_ALPHA * dense + (1 - HYBRID_ALPHA) * bm25``, in [0, 1] (Bruch, Gai & Ingber, "An Analysis of
Fusion Functions for Hybrid Retrieval", ACM TOIS 42(1), 2023). ``rrf`` selects the vector store's
reciprocal rank fusion instead, score = sum_i w_i / (k + rank_i) (Cormack, Clarke & Buettcher, SIGIR
2009). On Cranfield (nDCG@10) convex fusion scored 0.420 against 0.413-0.415 for RRF on the same
index, a difference within noise; the figures and the alternatives tried are in docs/retrieval.md, the
benchmark in ``bench/quality.py``.

Every hit carries an evidence anchor (DESIGN.md "Documents"): ``{doc_id, path, sha256 (of the file),
section, page, char_span [start, end) into the document's plain text, chunk_sha256 (of the chunk
text), score}``. Verifying an anchor (:func:`verify_anchor`) re-hashes the file and the chunk text.

Document structure (issue 3): :func:`get_overview` (title, metadata, sections with page ranges and chunk
counts, captions) and :func:`read_sections` (a section's text in reading order with page anchors, paged)
read the structure stored with each parse (``DocumentContent.structure_json``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, select

from aisac_core.errors import AisacError
from aisac_core.evidence.anchor import Anchor
from aisac_core.rag.indexer import documents_matching
from aisac_core.store.tables import Document, DocumentContent
from aisac_core.store.vectors import Cond, VectorHit

if TYPE_CHECKING:
    from aisac_core.context import AppContext

MAX_K = 100
MODES = ("hybrid", "dense", "sparse")
#: filter keys accepted by :func:`search` and what each means.
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

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready hit: chunk_id, doc_id, title, path, page(s), section, text, score, anchor."""
        p = self.payload
        return {
            "chunk_id": self.chunk_id, "doc_id": p.get("doc_id"), "title": p.get("title"), "path": p.get("path"),
            "file_type": p.get("file_type"), "page": p.get("page"), "page_end": p.get("page_end"),
            "section": p.get("section") or None, "section_covers": p.get("section_covers"),
            "chunk_index": p.get("chunk_index"), "text": p.get("text"), "score": round(self.score, 6),
            "anchor": anchor_of(self.chunk_id, p, self.score),
        }


def anchor_of(chunk_id: str, p: dict[str, Any], score: float | None) -> dict[str, Any]:
    """The JSON form of the evidence anchor of a chunk payload (score None when not from a search)."""
    return Anchor.from_payload(chunk_id, p, score).to_dict()


def _conds(core: "AppContext", filters: dict[str, Any] | None) -> tuple[list[Cond], str | None]:
    """Filters -> store conditions. Returns (conditions, reason) where reason says why nothing can match."""
    if not filters:
        return [], None
    unknown = sorted(set(filters) - set(FILTER_KEYS))
    if unknown:
        raise SearchError(f"unknown filter key(s) {unknown}; accepted keys: "
                          + "; ".join(f"{k} ({v})" for k, v in FILTER_KEYS.items()))
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
        matched = set(documents_matching(core.engine, g))
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
                from aisac_core.rag.documents import SECTION_LABELS

                bad = [x for x in vals if x not in SECTION_LABELS]
                if bad:
                    raise SearchError(f"filter section {bad} is not a section label; use one of "
                                      f"{', '.join(SECTION_LABELS)} (rag_get_overview lists a document's labels)")
            conds.append(Cond("file_type" if key == "file_type" else "section_covers", any=tuple(vals)))
    return conds, None


@dataclass
class SearchResult:
    """Hits (best first), the mode, the time taken, and a message when there are no hits."""

    hits: list[Hit]
    mode: str
    took_ms: float
    message: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready result."""
        out: dict[str, Any] = {"hits": [h.as_dict() for h in self.hits], "count": len(self.hits), "mode": self.mode,
                               "took_ms": round(self.took_ms, 2)}
        if self.message:
            out["message"] = self.message
        return out


def search(core: "AppContext", query: str, k: int = 10, filters: dict[str, Any] | None = None,
           mode: str = "hybrid") -> SearchResult:
    """Search the indexed chunks.

    Args:
        query: natural-language query (non-empty, at most 2,000 characters).
        k: number of hits, 1..100.
        filters: optional dict with keys of :data:`FILTER_KEYS`.
        mode: ``hybrid`` (default), ``dense`` or ``sparse``.

    Returns:
        :class:`SearchResult`; an empty hit list comes with a ``message`` saying why.

    Raises:
        SearchError: empty or over-long query, k out of range, unknown mode or filter key, bad filter value.
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
    conds, reason = _conds(core, filters)
    if reason:
        return SearchResult([], mode, (time.perf_counter() - t0) * 1000, reason)
    emb = core.embedder
    vs = core.vectors()
    dense = emb.embed_query(query) if mode in ("hybrid", "dense") else None
    sparse = emb.sparse_query(query) if mode in ("hybrid", "sparse") else None
    if mode == "hybrid" and FUSION == "convex":
        raw = convex_fusion(vs, dense, sparse, k, conds, max(PREFETCH, 2 * k))
    else:
        raw = vs.query("chunks", dense=dense, sparse=sparse, limit=k, conds=conds, mode=mode,
                       prefetch_limit=max(PREFETCH, 2 * k), rrf_k=RRF_K, weights=HYBRID_WEIGHTS)
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
                msg += "; " + _labels_hint(core, filters["doc_id"])
    return SearchResult(hits, mode, (time.perf_counter() - t0) * 1000, msg)


def _labels_hint(core: "AppContext", doc_ids: str | list[str]) -> str:
    """Which section labels the filtered documents have (for a search that found nothing)."""
    import json

    out = []
    for did in ([doc_ids] if isinstance(doc_ids, str) else list(doc_ids))[:10]:
        got = get_document(core, did)
        if got and got[1] is not None and got[1].structure_json:
            labels = sorted({sec["label"] for sec in json.loads(got[1].structure_json).get("sections", [])})
            out.append(f"{did} has sections: {', '.join(labels) or '(no headings)'}")
    return "; ".join(out) or "the filtered documents have no recorded sections"


def convex_fusion(vs: Any, dense: list[float] | None, sparse: tuple[list[int], list[float]] | None, k: int,
                   conds: list[Cond], prefetch: int, collection: str = "chunks") -> list[VectorHit]:
    """Hybrid hits by convex combination of min-max normalised dense and BM25 scores (module docstring).

    Each list fetches ``prefetch`` candidates (ids and scores only); the score a list did not return for
    a candidate is looked up exactly (a query restricted to those ids); a candidate without any query
    term has BM25 score 0. Ties go to the higher dense score. Payloads are read for the ``k`` winners only.
    ``collection``: ``chunks`` (documents) or ``dialogue`` (memory pairs).
    """
    has_sparse = sparse is not None and len(sparse[0]) > 0
    d_score = {h.id: h.score for h in vs.query(collection, dense=dense, sparse=None, limit=prefetch, conds=conds,
                                                mode="dense", with_payload=False)}
    s_score = {h.id: h.score for h in vs.query(collection, dense=None, sparse=sparse, limit=prefetch, conds=conds,
                                                mode="sparse", with_payload=False)} if has_sparse else {}
    missing_d = [i for i in s_score if i not in d_score]
    if missing_d:
        d_score.update((h.id, h.score) for h in vs.query(collection, dense=dense, sparse=None, limit=len(missing_d),
                                                         conds=conds, mode="dense", ids=missing_d, with_payload=False))
    missing_s = [i for i in d_score if i not in s_score] if has_sparse else []
    if missing_s:
        s_score.update((h.id, h.score) for h in vs.query(collection, dense=None, sparse=sparse, limit=len(missing_s),
                                                         conds=conds, mode="sparse", ids=missing_s, with_payload=False))
    candidates = list(d_score.keys() | s_score.keys())
    if not candidates:
        return []

    def normalised(scores: dict[str, float]) -> dict[str, float]:
        vals = [scores.get(i, 0.0) for i in candidates]
        lo, hi = min(vals), max(vals)
        return {i: ((scores.get(i, 0.0) - lo) / (hi - lo) if hi > lo else 0.0) for i in candidates}

    nd, ns = normalised(d_score), normalised(s_score)
    fused = {i: HYBRID_ALPHA * nd[i] + (1.0 - HYBRID_ALPHA) * ns[i] for i in candidates}
    best = sorted(candidates, key=lambda i: (-fused[i], -d_score.get(i, -1.0), i))[:k]
    payloads = {h.id: h.payload for h in vs.retrieve(collection, best)}
    return [VectorHit(i, fused[i], payloads[i]) for i in best if i in payloads]


def get_chunk(core: "AppContext", chunk_id: str) -> dict[str, Any] | None:
    """A chunk by id with its anchor (score None), or None when unknown."""
    recs = core.vectors().retrieve("chunks", [chunk_id]) if _is_uuid(chunk_id) else []
    if not recs:
        return None
    h = Hit(recs[0].id, 0.0, recs[0].payload).as_dict()
    h["score"] = None
    h["anchor"]["score"] = None
    return h


def _is_uuid(s: str) -> bool:
    import uuid

    try:
        uuid.UUID(s)
        return True
    except (ValueError, TypeError, AttributeError):
        return False


def list_documents(core: "AppContext", *, status: str | None = None, file_type: str | None = None,
                   path_glob: str | None = None, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """Manifest rows (doc_id, path, type, title, pages, chunks, status, error, sha256, indexed_at), paged."""
    import fnmatch
    from pathlib import Path

    with Session(core.engine) as s:
        q = select(Document).order_by(Document.path)
        if status:
            q = q.where(Document.status == status)
        if file_type:
            q = q.where(Document.file_type == file_type)
        rows = s.exec(q).all()
    if path_glob:
        rows = [r for r in rows if fnmatch.fnmatch(r.path, path_glob) or fnmatch.fnmatch(Path(r.path).name, path_glob)]
    total = len(rows)
    page = rows[offset:offset + limit]
    return {
        "documents": [document_dict(r) for r in page], "total": total, "offset": offset,
        "next_offset": offset + limit if offset + limit < total else None,
    }


def document_dict(r: Document) -> dict[str, Any]:
    """JSON-ready manifest row."""
    return {"doc_id": r.doc_id, "path": r.path, "file_type": r.file_type, "title": r.title, "pages": r.pages,
            "chunk_count": r.chunk_count, "status": r.status, "error": r.error, "sha256": r.sha256,
            "size": r.size, "indexed_at": r.indexed_at.isoformat() if r.indexed_at else None}


def get_document(core: "AppContext", doc_id: str) -> tuple[Document, DocumentContent | None] | None:
    """Manifest row and parsed content of a document, or None."""
    with Session(core.engine) as s:
        row = s.get(Document, doc_id)
        if row is None:
            return None
        return row, s.get(DocumentContent, doc_id)


# --------------------------------------------------------------------------------------------------
# evidence anchor verification (issue 3; contract in DESIGN.md "Documents")
# --------------------------------------------------------------------------------------------------

ANCHOR_STATUSES = ("ok", "file_changed", "chunk_changed", "missing")


def _norm_ws(s: str) -> str:
    return " ".join(s.split())


def verify_anchor(core: "AppContext", anchor: dict[str, Any]) -> dict[str, Any]:
    """Check an evidence anchor against the file on disk and the index, by re-hashing.

    Args:
        anchor: the ``anchor`` dict of a search hit (``rag_search``, ``rag_get_chunk``): ``{chunk_id,
            doc_id, path, sha256, section, page, char_span, chunk_sha256, score}``. Required: ``doc_id``
            (or ``path``), ``sha256`` and ``chunk_sha256``; ``chunk_id`` is used when present. An optional
            ``text`` (the hit's chunk text, when its sha256 equals ``chunk_sha256``) lets the check find
            the passage in a changed file even after the old chunk left the index.

    Returns:
        ``{"status", "chunk_id", "doc_id", "path", "detail", "sha256_now", "current_chunk_id"}`` where
        ``status`` is, in this order of precedence:

        - ``missing``: the document is no longer in the index, or its file is gone or unreadable;
        - ``ok``: the file's sha256 equals the anchor's, and the chunk text with ``chunk_sha256`` is a
          chunk of the document (the anchored point itself, or a chunk of the current index with the same
          text hash, or - anchor ``text`` given - the text occurs in the document's parsed text);
        - ``file_changed``: the file's bytes changed, but the anchored passage is still in the current
          version (a current chunk has the same text sha256, or the passage's text occurs, whitespace
          normalised, in the current version's parsed text): the quote still holds, the page/char span
          may have moved;
        - ``chunk_changed``: the passage is no longer found: the file changed and the text is gone, or
          the file is unchanged but no chunk has that text hash (anchor altered, or the document was
          re-chunked by a new parser revision and the text is not known).

        When the file changed and the index still holds the old version (not re-indexed yet), the current
        file is parsed again (PDF: ~0.1 s/page) to look for the passage. ``current_chunk_id`` names a chunk
        of the current index with the same text, when one exists. ``sha256_now`` is the file's current hash
        (None when missing).

    Raises:
        AnchorError: ``anchor`` is not a dict, or lacks ``sha256`` / ``chunk_sha256`` / (``doc_id`` or ``path``).
    """
    from pathlib import Path

    from aisac_core.rag.indexer import doc_id_for
    from aisac_core.hashing import sha256_file, sha256_text

    Anchor.parse(anchor)  # raises AnchorError naming what is missing
    chunk_id = anchor.get("chunk_id") if isinstance(anchor.get("chunk_id"), str) else None
    want_sha, want_chunk = anchor["sha256"], anchor["chunk_sha256"]
    doc_id = anchor.get("doc_id") or doc_id_for(Path(anchor["path"]))
    out: dict[str, Any] = {"status": "missing", "chunk_id": chunk_id, "doc_id": doc_id, "path": anchor.get("path"),
                           "detail": "", "sha256_now": None, "current_chunk_id": None}
    got = get_document(core, doc_id)
    if got is None:
        out["detail"] = (f"document {doc_id} is not in the index (removed, or never indexed in this store): "
                         "index the file again and search anew")
        return out
    row, content = got
    path = Path(row.path)
    out["path"] = row.path
    try:
        now = sha256_file(path)
    except FileNotFoundError:
        out["detail"] = f"the file {row.path} no longer exists"
        return out
    except OSError as exc:
        out["detail"] = f"the file {row.path} cannot be read ({exc})"
        return out
    out["sha256_now"] = now

    vs = core.vectors()
    text: str | None = None
    if isinstance(anchor.get("text"), str) and sha256_text(anchor["text"]) == want_chunk:
        text = anchor["text"]
    anchored_point_ok = False
    if chunk_id and _is_uuid(chunk_id):
        recs = vs.retrieve("chunks", [chunk_id])
        if recs and recs[0].payload.get("text_sha256") == want_chunk:
            anchored_point_ok = True
            text = text or recs[0].payload.get("text")
    index_is_current = row.sha256 == now and row.status == "indexed"
    current_match = None
    if index_is_current:
        for pid, p in vs.scroll_ids("chunks", [Cond("doc_id", eq=doc_id)]):
            if p.get("text_sha256") == want_chunk:
                current_match = pid
                break
    out["current_chunk_id"] = current_match

    if now == want_sha:
        if anchored_point_ok or current_match:
            out["status"], out["detail"] = "ok", "file unchanged (sha256 equal) and the chunk text hash matches"
        elif text is not None and content is not None and index_is_current and \
                _norm_ws(text) in _norm_ws(content.text):
            out["status"], out["detail"] = "ok", ("file unchanged (sha256 equal); the passage occurs in its text "
                                                  "(the document was re-chunked since)")
        else:
            out["status"] = "chunk_changed"
            out["detail"] = ("file unchanged (sha256 equal) but no chunk of the document has the anchor's "
                             "chunk_sha256: the anchor was altered, or the document was re-chunked by a new "
                             "parser revision; search again for a fresh anchor")
        return out

    # the file changed: is the passage still in the current version?
    found, where = False, ""
    if current_match:
        found, where = True, f"a chunk of the re-indexed version ({current_match}) has the same text"
    elif index_is_current:
        if text is not None and content is not None and _norm_ws(text) in _norm_ws(content.text):
            found, where = True, "the passage occurs in the re-indexed version's text"
    else:
        from aisac_core.rag.documents import DocumentError, parse_document

        try:
            parsed = parse_document(path, core.embedder.tokenizer(), core.settings.chunk_max_tokens,
                                    core.settings.pdf_pipeline)
        except DocumentError as exc:
            out["status"] = "chunk_changed"
            out["detail"] = f"the file changed (sha256 differs) and its current version cannot be parsed: {exc}"
            return out
        if any(sha256_text(c.text) == want_chunk for c in parsed.chunks):
            found, where = True, "a chunk of the current (not yet re-indexed) version has the same text"
        elif text is not None and _norm_ws(text) in _norm_ws(parsed.text):
            found, where = True, "the passage occurs in the current (not yet re-indexed) version's text"
    if found:
        out["status"] = "file_changed"
        out["detail"] = f"the file changed since the anchor was made (sha256 differs), but {where}; page and " \
                        "char span may have moved"
    else:
        out["status"] = "chunk_changed"
        out["detail"] = ("the file changed since the anchor was made (sha256 differs) and the anchored passage "
                         "is no longer in it" + ("" if text is not None else
                                                 " (no chunk of the current version has its text hash)"))
    return out


# --------------------------------------------------------------------------------------------------
# document structure: overview and section reading (issue 3)
# --------------------------------------------------------------------------------------------------

#: tokens are estimated as characters / 4 (the usual rule of thumb for English text with BPE tokenizers,
#: e.g. OpenAI's "a token is ~4 characters"); MiniLM's WordPiece gives a similar count on scientific prose.
CHARS_PER_TOKEN = 4
#: bounds of ``max_tokens`` in :func:`read_sections`
READ_MIN_TOKENS, READ_MAX_TOKENS = 50, 20000


class DocumentNotFoundError(SearchError):
    """An unknown doc_id, or a document without a stored parse (failed, or indexed by an older aisac)."""


class SectionNotFoundError(SearchError):
    """A section the document does not have; the message lists those it has."""


def _structure_of(core: "AppContext", doc_id: str) -> tuple[Document, DocumentContent, dict[str, Any]]:
    import json

    if not isinstance(doc_id, str) or not doc_id.strip():
        raise DocumentNotFoundError("doc_id is empty: rag_list_documents lists the indexed documents and their doc_ids")
    got = get_document(core, doc_id.strip())
    if got is None:
        raise DocumentNotFoundError(f"no indexed document {doc_id!r}: rag_list_documents lists doc_ids")
    row, content = got
    if row.status == "failed":
        raise DocumentNotFoundError(f"document {doc_id} ({row.path}) was not indexed: {row.error}")
    if content is None or row.status != "indexed":
        raise DocumentNotFoundError(f"document {doc_id} ({row.path}) is being indexed ({row.status}); try again "
                                    "when rag_job_status says the job is done")
    if not content.structure_json:
        raise DocumentNotFoundError(f"document {doc_id} was indexed by an older aisac without structure: index it "
                                    "again (rag_index with its path; the new parser revision re-parses it)")
    return row, content, json.loads(content.structure_json)


def _public_section(sec: dict[str, Any]) -> dict[str, Any]:
    return {k: sec.get(k) for k in ("title", "number", "level", "label", "page_start", "page_end", "chunk_count")}


def get_overview(core: "AppContext", doc_id: str) -> dict[str, Any]:
    """What a document is and which parts it has.

    Returns ``{doc_id, path, file_type, pages, chunk_count, sha256, indexed_at, title, metadata: {title,
    authors, year, doi, arxiv_id}, sections: [{title, number, level, label, page_start, page_end,
    chunk_count, subsections: [{title, number, level, label, page_start, page_end, chunk_count}]}],
    labels: {label: {sections, page_start, page_end}}, captions: [{kind (figure|table), text, page}]}``.
    ``sections`` are the top-level sections (level 1) in reading order; headings found before any top-level
    one appear as top-level too. ``labels`` lists the taxonomy labels the document really has (usable as
    ``rag_read_sections`` section or ``rag_search`` ``section`` filter). Metadata comes from the first pages
    (the title by type size, authors from the block under it, DOI / arXiv id / year by pattern); a field
    not found is null (or []). ``page_*`` are null for formats without pages.

    Raises:
        DocumentNotFoundError: unknown doc_id, a failed document (its error is quoted), no stored structure.
    """
    row, _content, st = _structure_of(core, doc_id)
    ov = overview_of_structure(st)
    return {
        "doc_id": row.doc_id, "path": row.path, "file_type": row.file_type, "pages": row.pages,
        "chunk_count": row.chunk_count, "sha256": row.sha256,
        "indexed_at": row.indexed_at.isoformat() if row.indexed_at else None,
        "title": ov["metadata"].get("title") or row.title, **ov,
    }


def overview_of_structure(st: dict[str, Any]) -> dict[str, Any]:
    """``{metadata, sections, labels, captions}`` of :func:`get_overview` from a parse's structure
    (``ParsedDocument.structure``, stored as ``DocumentContent.structure_json``)."""
    secs = st.get("sections", [])
    top: list[dict[str, Any]] = []
    min_level = min((s["level"] for s in secs), default=1)
    for s in secs:
        if s["level"] <= min_level or not top:
            top.append({**_public_section(s), "subsections": []})
        else:
            top[-1]["subsections"].append(_public_section(s))
    labels: dict[str, dict[str, Any]] = {}
    for s in secs:
        lab = labels.setdefault(s["label"], {"sections": [], "page_start": None, "page_end": None})
        lab["sections"].append(s["title"])
        for key, fn in (("page_start", min), ("page_end", max)):
            if s.get(key) is not None:
                lab[key] = s[key] if lab[key] is None else fn(lab[key], s[key])
    return {"metadata": st.get("metadata", {}), "sections": top, "labels": labels, "captions": st.get("captions", [])}


def _match_sections(secs: list[dict[str, Any]], section: str) -> list[int]:
    """Indexes of the sections ``section`` names: a taxonomy label (all sections with it, outermost
    only), else a heading (case- and whitespace-insensitive; with or without its number) or a number."""
    import re

    from aisac_core.rag.documents import SECTION_LABELS

    want = " ".join(section.lower().split())
    if want in SECTION_LABELS:
        idx = [i for i, s in enumerate(secs) if s["label"] == want]
    else:
        def forms(s: dict[str, Any]) -> set[str]:
            t = " ".join(s["title"].lower().split())
            out = {t}
            if s.get("number"):
                out.add(s["number"].lower())
                out.add(re.sub(r"^" + re.escape(s["number"].lower()) + r"\.?\s*", "", t))
            return out
        idx = [i for i, s in enumerate(secs) if want in forms(s)]
    # drop sections nested in an earlier match (their text is already included)
    out: list[int] = []
    for i in idx:
        if not any(secs[j]["char_start"] <= secs[i]["char_start"] < secs[j]["char_end"] for j in out):
            out.append(i)
    return out


def read_sections(core: "AppContext", doc_id: str, section: str, max_tokens: int = 2000,
                  cursor: int | None = None) -> dict[str, Any]:
    """The text of a document's section(s) in reading order, with page anchors, paged.

    Args:
        doc_id: from ``rag_list_documents`` / a search hit.
        section: a taxonomy label (``methods``, ``results``, ... : every section with that label) or a
            heading as the overview lists it (``"3.1 Setup"``, ``"Setup"`` or ``"3.1"``).
        max_tokens: page size, 50..20000 tokens (estimated as characters / 4, :data:`CHARS_PER_TOKEN`).
            A block longer than the page is cut at a word boundary and continued on the next page.
        cursor: ``next_cursor`` of the previous page (a character offset into the document's plain text);
            omit for the first page.

    Returns:
        ``{doc_id, title, section, matched: [{title, number, level, label, page_start, page_end,
        chunk_count}], text, blocks: [{kind (heading|text|caption|table|reference|list), page, char_span,
        section}], tokens (estimate of this page), total_tokens, next_cursor (null on the last page)}``.
        ``text`` is the page's blocks joined by blank lines, headings as Markdown ``#`` lines, each other
        block prefixed with its page anchor ``[p. N]`` (PDF) - the ``char_span`` of a block indexes into
        the document's plain text (resource ``aisac://documents/{doc_id}/text``), like search anchors.

    Raises:
        DocumentNotFoundError: unknown doc_id / failed document / no stored structure.
        SectionNotFoundError: the document has no such section; the message lists the labels and
            headings it has.
        SearchError: max_tokens or cursor out of range.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or \
            not READ_MIN_TOKENS <= max_tokens <= READ_MAX_TOKENS:
        raise SearchError(f"max_tokens must be an integer from {READ_MIN_TOKENS} to {READ_MAX_TOKENS}, "
                          f"got {max_tokens!r}")
    if not isinstance(section, str) or not section.strip():
        raise SearchError("section is empty: give a label (abstract, introduction, methods, results, discussion, "
                          "conclusion, datasets, references, other) or a heading from rag_get_overview")
    row, content, st = _structure_of(core, doc_id)
    text = content.text
    if cursor is not None and (isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor <= len(text)):
        raise SearchError(f"cursor must be a next_cursor returned by a previous call (0..{len(text)}), got {cursor!r}")
    secs = st.get("sections", [])
    idx = _match_sections(secs, section)
    if not idx:
        labels = sorted({s["label"] for s in secs})
        heads = [s["title"] for s in secs if s["level"] <= 1] or [s["title"] for s in secs]
        raise SectionNotFoundError(
            f"document {row.doc_id} has no section {section!r}. Its section labels: "
            f"{', '.join(labels) or '(none: no headings were found)'}; its top-level headings: "
            f"{'; '.join(heads[:40]) or '(none)'}. Pass one of these (rag_get_overview lists all).")
    ranges = [(secs[i]["char_start"], secs[i]["char_end"]) for i in idx]
    blocks = [b for b in st.get("blocks", []) if any(a <= b[2] < z for a, z in ranges)]
    total = sum(b[3] - b[2] for b in blocks)
    budget = max_tokens * CHARS_PER_TOKEN
    pos = cursor or 0
    out_blocks: list[dict[str, Any]] = []
    parts: list[str] = []
    used = 0
    next_cursor: int | None = None
    for kind, page, s, e, si in blocks:
        if e <= pos:
            continue
        s = max(s, pos)
        piece = text[s:e]
        if used and used + len(piece) > budget:
            next_cursor = s
            break
        if len(piece) > budget - used:  # one block longer than the page: cut at a word boundary
            cut = piece.rfind(" ", 0, budget - used)
            cut = cut if cut > 0 else budget - used
            piece = piece[:cut]
            e = s + cut
            next_cursor = e
        used += len(piece)
        title = secs[si]["title"] if si >= 0 else None
        out_blocks.append({"kind": kind, "page": page, "char_span": [s, e], "section": title})
        if kind == "heading":
            level = secs[si]["level"] if si >= 0 else 1
            parts.append("#" * min(6, level + 1) + " " + piece.strip())
        else:
            parts.append((f"[p. {page}] " if page is not None else "") + piece.strip())
        if next_cursor is not None:
            break
    return {
        "doc_id": row.doc_id, "title": st.get("metadata", {}).get("title") or row.title, "section": section,
        "matched": [_public_section(secs[i]) for i in idx], "text": "\n\n".join(parts), "blocks": out_blocks,
        "tokens": -(-used // CHARS_PER_TOKEN), "total_tokens": -(-total // CHARS_PER_TOKEN),
        "next_cursor": next_cursor,
    }
