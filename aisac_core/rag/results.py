"""The result shapes of the rag service (:class:`aisac_core.rag.service.RagService`), declared once.

The core returns plain dicts of these shapes; the MCP layer derives each tool's output schema from them. Top-level
results forbid undeclared keys (every key a real result carries is declared); ``NotRequired`` marks keys only some
results carry, ``X | None`` a key the core may set to None. A host's model pays for every schema token, so a
description is given only where a key's name does not say what it holds.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, NotRequired, TypeVar

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

#: the config of every top-level result: a key not declared is an error (``additionalProperties: false``)
CLOSED = ConfigDict(extra="forbid")
#: the config of the nested rows (else they would take their parent's ``forbid``): open, as before
OPEN = ConfigDict(extra="allow")


# The JSON form of the evidence anchor (aisac_core.evidence.anchor.Anchor.to_dict). Comments, not docstrings, on
# these classes: a TypedDict's docstring becomes a description in every schema that holds it.
@with_config(OPEN)
class AnchorDict(TypedDict):
    chunk_id: str
    doc_id: str | None
    path: str | None
    sha256: str | None
    section: str | None
    page: int | None
    char_span: list[int | None]
    chunk_sha256: str | None
    score: float | None
    quote_span: NotRequired[
        Annotated[list[int], Field(description="[start, end] of the quoted sentence(s) in the chunk text")]
    ]
    source: NotRequired[Annotated[str, Field(description="'ocr': the passage was read by OCR from a page image")]]
    ocr_confidence: NotRequired[
        Annotated[float | None, Field(description="mean OCR word confidence of the passage, 0-1 (source 'ocr')")]
    ]


# One search hit with its whole text and full anchor (rag_search detail="full", rag_get_chunk: score None).
@with_config(CLOSED)
class HitDict(TypedDict):
    chunk_id: str
    doc_id: str | None
    title: str | None
    path: str | None
    file_type: str | None
    page: int | None
    page_end: int | None
    section: str | None
    section_covers: Annotated[str | None, Field(description="section label")]
    chunk_index: int | None
    text: str | None
    score: float | None
    relevance: NotRequired[
        Annotated[float | None, Field(description="calibrated probability (0-1) that the passage is relevant (hybrid)")]
    ]
    anchor: AnchorDict


HitT = TypeVar("HitT")


# A search result; its hits are HitDict (SearchResultDict), or a compact form in the MCP layer.
@with_config(CLOSED)
class SearchResultOf(TypedDict, Generic[HitT]):
    hits: list[HitT]
    count: int
    mode: str
    took_ms: float
    message: NotRequired[Annotated[str, Field(description="why there are no hits")]]
    no_relevant_passage: NotRequired[
        Annotated[bool, Field(description="hybrid: true when no hit reaches the relevance threshold")]
    ]
    note: NotRequired[str]


SearchResultDict = SearchResultOf[HitDict]


@with_config(OPEN)
class SectionInfo(TypedDict):
    title: str
    number: str | None
    level: int
    label: str
    page_start: int | None
    page_end: int | None
    chunk_count: int | None


@with_config(OPEN)
class OverviewSection(SectionInfo):
    subsections: list[SectionInfo]


@with_config(OPEN)
class LabelSpan(TypedDict):
    sections: list[str]
    page_start: int | None
    page_end: int | None


@with_config(OPEN)
class Caption(TypedDict):
    kind: Literal["figure", "table"]
    text: str
    page: int | None


@with_config(CLOSED)
class Overview(TypedDict):
    doc_id: str
    path: str
    file_type: str | None
    pages: int | None
    chunk_count: int | None
    sha256: str | None
    indexed_at: str | None
    title: str | None
    metadata: Annotated[
        dict[str, Any],
        Field(description="title, authors, year, doi, arxiv_id; ocr {pages, engine, dpi, mean_confidence} for scans"),
    ]
    sections: list[OverviewSection]
    labels: Annotated[dict[str, LabelSpan], Field(description="by section label")]
    captions: list[Caption]


@with_config(OPEN)
class Block(TypedDict):
    kind: str
    page: int | None
    char_span: list[int]
    section: str | None


@with_config(CLOSED)
class SectionText(TypedDict):
    doc_id: str
    title: str | None
    section: str
    matched: list[SectionInfo]
    text: str
    blocks: list[Block]
    tokens: int
    total_tokens: int
    next_cursor: int | None


@with_config(CLOSED)
class Verification(TypedDict):
    status: Literal["ok", "file_changed", "chunk_changed", "missing"]
    chunk_id: str | None
    doc_id: str | None
    path: str | None
    detail: str
    sha256_now: str | None
    current_chunk_id: str | None
    quote: NotRequired[Annotated[str | None, Field(description="the text at the anchor's quote_span")]]


@with_config(OPEN)
class DocumentRow(TypedDict):
    doc_id: str
    path: str
    file_type: str | None
    title: str | None
    pages: int | None
    chunk_count: int | None
    status: str
    error: str | None
    sha256: str | None
    size: int | None
    indexed_at: str | None


@with_config(CLOSED)
class Documents(TypedDict):
    documents: list[DocumentRow]
    total: int
    offset: int
    next_offset: int | None


@with_config(CLOSED)
class Removed(TypedDict):
    removed: Annotated[str, Field(description="doc_id")]
    chunks_deleted: int


@with_config(OPEN)
class CatalogRow(TypedDict):
    path: str
    root: str
    file_type: str | None
    size: int | None
    modified: str
    meta: dict[str, Any]


@with_config(CLOSED)
class Catalog(TypedDict):
    entries: list[CatalogRow]
    total: int
    next_offset: int | None


@with_config(OPEN)
class JobFailure(TypedDict):
    path: str | None
    error: str | None


@with_config(OPEN)
class JobSkip(TypedDict):
    path: str | None
    reason: str | None


# An index job (aisac_core.rag.jobs.job_dict); rag_index adds earlier_jobs when it queued one job per root group.
@with_config(CLOSED)
class IndexJob(TypedDict):
    job_id: str
    kind: str
    status: str
    done: int
    total: int
    message: str | None
    params: dict[str, Any]
    counters: dict[str, Any]
    failures: list[JobFailure]
    skipped: list[JobSkip]
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    attempts: int
    runner: str | None
    earlier_jobs: NotRequired[list[str]]


# rag_job_status: one job (IndexJob's keys), or with no job_id the recent jobs under ``jobs``. The keys repeat
# IndexJob's as optional ones (a TypedDict cannot make inherited keys optional); a test keeps the two in step.
@with_config(CLOSED)
class IndexJobList(TypedDict, total=False):
    jobs: list[IndexJob]
    job_id: str
    kind: str
    status: str
    done: int
    total: int
    message: str | None
    params: dict[str, Any]
    counters: dict[str, Any]
    failures: list[JobFailure]
    skipped: list[JobSkip]
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    attempts: int
    runner: str | None


@with_config(CLOSED)
class MissingIn(TypedDict):
    doc_id: str
    path: str
    missing: int
    chunks: int


@with_config(CLOSED)
class VectorCheck(TypedDict):
    missing_vectors: Annotated[int, Field(description="chunks in the manifest without a vector")]
    orphan_vectors: Annotated[int, Field(description="vectors of no manifest chunk")]
    documents_missing_vectors: int
    missing_in: Annotated[list[MissingIn], Field(description="up to 20; repair: aisac index --repair")]
    checked_chunks: int


@with_config(CLOSED)
class StoreStatus(TypedDict):
    data_dir: str
    sql_url: str
    schema_revision: str | None
    vector_backend: str
    vectors_dir: Annotated[str | None, Field(description="the embedded vector folder; null: vectors on a server")]
    vector_location: Annotated[str, Field(description="the folder, Qdrant URL or PostgreSQL URL (no password)")]
    store_bytes: int
    embedding_model: str
    fingerprint: Annotated[str, Field(description="of the index settings; stale documents differ")]
    documents: Annotated[dict[str, int], Field(description="count by status")]
    documents_by_type: dict[str, int]
    chunks_in_manifest: int
    chunks_in_vector_store: int | None
    vector_check: VectorCheck
    stale_documents: int
    catalogued_files: int
    trace_events: int
    recent_jobs: list[IndexJob]
    permission_warnings: list[str]
