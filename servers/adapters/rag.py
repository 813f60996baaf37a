"""The rag server: incremental indexing and hybrid search over the scientist's documents.

A thin adapter: arguments in, a call into ``aisac_core``, a JSON result out. Mounted by the suite under
the ``rag`` namespace, so the tools are ``rag_index``, ``rag_job_status``, ``rag_search``,
``rag_list_documents``, ``rag_get_chunk``, ``rag_get_overview``, ``rag_read_sections``,
``rag_verify_anchor``, ``rag_remove``, ``rag_catalog``, ``rag_store_status`` and the resource templates
``aisac://rag/documents/{doc_id}``, ``.../{doc_id}/text`` and ``.../{doc_id}/sections/{section}`` (as the suite
exposes them; completions for ``doc_id`` and ``section``).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, cast

import anyio
from fastmcp import Context
from fastmcp.exceptions import ResourceError, ToolError
from fastmcp.server.dependencies import fastmcp_request_ctx
from fastmcp.tools import ToolResult
from mcp_types import ResourceLink, TextContent
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.errors import AisacError, quote_path
from aisac_core.rag.results import (
    Catalog,
    Documents,
    HitDict,
    IndexJob,
    IndexJobList,
    Overview,
    Removed,
    SectionText,
    StoreStatus,
    Verification,
)
from aisac_core.rag.service import RagService

from ..serving.common import (
    FULL_RESULT_META,
    AisacServer,
    App,
    MissingResource,
    call_core,
    log,
    request_meta,
    request_roots,
    typed_result,
)
from ..serving.tasks import app_of, follow_index_job, in_task, task_on
from ..shapes import results_jobs as RJ
from ..shapes import results_rag as R
from ..shapes.annotations import hints

server = AisacServer(
    "rag",
    instructions=(
        "Search the user's indexed documents (rag_search), then read one (rag_get_overview, "
        "rag_read_sections). Every hit has an evidence anchor: cite anchors in answers."
    ),
)


@server.tool(annotations=hints("Index documents", idempotent=True), task=task_on(server))
async def index(
    ctx: Context,
    path: Annotated[
        str | list[str] | None,
        Field(
            description="file, folder, list of them, or a registered root's name; omit to index every registered root"
        ),
    ] = None,
    catalog_only: Annotated[bool, Field(description="list the files with metadata, do not embed them")] = False,
    wait: Annotated[bool, Field(description="stay until the job ends (progress notifications) or timeout_s")] = False,
    timeout_s: Annotated[float, Field(ge=0, le=3600, description="seconds to wait when wait=true")] = 300,
) -> IndexJob:
    """Use to make files searchable: indexes them incrementally in a background job (unchanged files
    skipped; PDF, DOCX, PPTX, XLSX, HTML, Markdown, JATS, LaTeX, txt embedded; CSV/Parquet/JSON catalogued).
    No ``path``: every registered root. Returns the job: follow it with rag_job_status, ``wait=true`` (progress
    notifications) or as an MCP task; rag_job_cancel stops it between two files.
    Errors: path missing, empty or outside the registered roots; no path and no roots.
    """
    core = app_of(ctx)
    rag = core.rag
    job_ids = await call_core(rag.index, path, catalog_only, request_roots())
    status: IndexJob | None
    if wait or in_task(ctx):  # a task lasts as long as its job
        status = await follow_index_job(ctx, core, job_ids, None if in_task(ctx) else timeout_s)
    else:
        status = await call_core(rag.jobs.status, job_ids[-1])
    assert status is not None
    if len(job_ids) > 1:
        status = {**status, "earlier_jobs": job_ids[:-1]}
    return status


@server.tool(annotations=hints("Index job status", read_only=True))
async def job_status(
    job_id: Annotated[str | None, Field(description="id from rag_index; omit to list recent jobs")] = None,
    app: AppContext = App,
) -> IndexJobList:
    """Use to follow a job of rag_index or lit_import. Status: queued, running, cancelling, done,
    failed, interrupted, cancelled; ``done``/``total`` files, counters, failures. No ``job_id``: the recent jobs."""
    jobs = app.rag.jobs
    if job_id is None:
        return {"jobs": await call_core(jobs.list)}
    st = await call_core(jobs.status, job_id)
    if st is None:
        raise ToolError(
            f"unknown job id {quote_path(job_id)}: rag_index returns job ids; rag_job_status() lists recent jobs"
        )
    return cast(IndexJobList, st)  # one job: IndexJob's keys


@server.tool(annotations=hints("Cancel a job", destructive=True, idempotent=True))
async def job_cancel(
    job_id: Annotated[str, Field(description="id from rag_index, lit_import, data_code_run or roles_run")],
    app: AppContext = App,
) -> RJ.Cancel:
    """Use to stop a job of rag_index, lit_import, data_code_run or roles_run. An index job stops
    between two files (no file half indexed); a code run's worker is killed (variables lost); a roles run stops
    in its current step. Status: cancelling until stopped, then cancelled."""
    core = app
    if job_id.startswith("rjob-"):
        st = await call_core(lambda: core.roles.jobs.cancel(job_id))
        if st is not None:
            return {"job_id": job_id, "kind": "roles", "status": st["status"]}
    else:
        ij = await call_core(core.rag.jobs.cancel, job_id)
        if ij is not None:
            return {"job_id": job_id, "kind": "index", "status": ij["status"]}
        cj = await call_core(lambda: core.sandbox.cancel(job_id))
        if cj is not None:
            return {"job_id": job_id, "kind": "code", "status": cj["status"]}
    raise ToolError(
        f"unknown job id {quote_path(job_id)}: job ids come from rag_index, lit_import, data_code_run "
        "or roles_run; rag_job_status() and roles_job_status() list recent ones (code runs are "
        "forgotten when the server restarts)"
    )


@server.tool(annotations=hints("Search the documents", read_only=True))
async def search(
    query: Annotated[str, Field(description="what to find, in natural language")],
    k: Annotated[int, Field(description="hits, 1 to 100")] = 10,
    filters: Annotated[
        dict[str, Any] | None,
        Field(description="any of doc_id, path_glob ('*.pdf'), page_from, page_to, file_type, section (e.g. methods)"),
    ] = None,
    mode: Annotated[
        Literal["hybrid", "dense", "sparse"], Field(description="sparse: BM25 keywords only; dense: embeddings only")
    ] = "hybrid",
    detail: Annotated[Literal["compact", "full"], Field(description="full: whole texts and full anchors")] = "compact",
    app: AppContext = App,
) -> R.CompactSearchResult | ToolResult:
    """Find passages that answer a question across the indexed documents (rag_read_sections reads a known
    section; roles_run writes a cited answer).

    Hits best first: {chunk_id, doc_id, title, page, section, score, relevance, text}; cite a hit by its chunk_id
    (rag_get_chunk: whole text, anchor). relevance (hybrid): calibrated probability; none over the
    threshold (0.80): no_relevant_passage."""
    res = await call_core(app.rag.search, query, k, filters, mode)
    full = res.as_dict()
    if detail == "full" or request_meta("aisac/detail") == "full":  # in-process callers ask in _meta
        # a full hit is a compact hit with more keys (CompactHit is open): the result type holds both forms
        return cast(R.CompactSearchResult, full)
    out = R.compact(full, query)
    # the full result rides in _meta to the suite's provenance middleware, which records it (the trace keeps the
    # full anchors whatever the caller sees) and removes it before the client sees the result
    return typed_result(
        R.CompactSearchResult,
        out,
        content=[
            TextContent(type="text", text=json.dumps(out, ensure_ascii=False, separators=(",", ":"))),
            *_document_links(full["hits"]),
        ],
        meta={FULL_RESULT_META: full},
    )


def _document_links(hits: list[HitDict]) -> list[ResourceLink]:
    """One resource link per distinct document of ``hits`` (its Markdown resource), in hit order."""
    seen: dict[str, str] = {}
    for h in hits:
        did = h.get("doc_id")
        if did and did not in seen:
            seen[did] = h.get("title") or did
    return [
        ResourceLink(type="resource_link", uri=f"{DOC_URI}/{d}", name=str(t)[:120], mime_type="text/markdown")
        for d, t in seen.items()
    ]


@server.tool(annotations=hints("Store status", read_only=True))
async def store_status(app: AppContext = App) -> StoreStatus:
    """The store's health, as `aisac status` prints it: documents by status, chunks, stale documents, recent
    jobs, permission warnings, plus data_dir, models, fingerprint and sizes."""
    return await call_core(app.rag.status)


@server.tool(annotations=hints("List indexed documents", read_only=True))
async def list_documents(
    status: Annotated[Literal["indexed", "failed", "indexing"] | None, Field(description="filter by status")] = None,
    file_type: Annotated[str | None, Field(description="pdf, docx, md, ...")] = None,
    path_glob: Annotated[str | None, Field(description="glob on the path or file name")] = None,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    offset: Annotated[int, Field(ge=0)] = 0,
    app: AppContext = App,
) -> Documents:
    """What is indexed and what failed and why: find a doc_id or a filter value. Rows also carry sha256, size,
    indexed_at; next_offset is null on the last page."""
    return await call_core(
        app.rag.list_documents, status=status, file_type=file_type, path_glob=path_glob, limit=limit, offset=offset
    )


@server.tool(annotations=hints("Get a chunk", read_only=True))
async def get_chunk(
    chunk_id: Annotated[str, Field(description="chunk_id of a search hit (its anchor id)")], app: AppContext = App
) -> HitDict:
    """Whole text and full evidence anchor {chunk_id, doc_id, path, sha256, section, page, char_span,
    chunk_sha256} of a search hit, by chunk_id. Error: unknown chunk id (ids change when a document is
    re-indexed)."""
    got = await call_core(app.rag.get_chunk, chunk_id)
    if got is None:
        raise ToolError(
            f"unknown chunk id {quote_path(chunk_id)}: use a chunk_id from rag_search (ids change when "
            "the document is re-indexed after an edit)"
        )
    return got


@server.tool(annotations=hints("Document overview", read_only=True))
async def get_overview(
    doc_id: Annotated[str, Field(description="doc_id from rag_list_documents or a search hit")], app: AppContext = App
) -> Overview:
    """What one document is (title, authors, year, doi in ``metadata``) and its sections (pages, chunk counts,
    subsections), before reading or searching in it. ``labels``: its section labels (rag_read_sections, rag_search's
    section filter). Error: unknown or failed doc_id."""
    return await call_core(app.rag.overview, doc_id)


@server.tool(annotations=hints("Read a section", read_only=True))
async def read_sections(
    doc_id: Annotated[str, Field(description="doc_id from rag_list_documents or a search hit")],
    section: Annotated[
        str,
        Field(
            description="a label (methods, results, ...) or a heading from "
            "rag_get_overview ('3.1 Setup', 'Setup' or '3.1')"
        ),
    ],
    max_tokens: Annotated[int, Field(ge=50, le=20000, description="page size")] = 2000,
    cursor: Annotated[int | None, Field(ge=0, description="next_cursor of the previous page")] = None,
    app: AppContext = App,
) -> SectionText:
    """Read one section of a document in order (rag_search gives scattered passages), a page at a time; a label
    reads every section with it. ``text``: Markdown, blocks prefixed [p. N]; more when next_cursor is not null
    (pass it as cursor). Error: a section the document lacks (the message lists its sections)."""
    return await call_core(app.rag.read_sections, doc_id, section, max_tokens, cursor)


@server.tool(annotations=hints("Verify evidence", read_only=True))
async def verify_anchor(
    anchor: Annotated[
        str | dict[str, Any],
        Field(description="a hit's chunk_id, or a full anchor object (optionally with the hit's 'text')"),
    ],
    app: AppContext = App,
) -> Verification:
    """Check that cited evidence still holds, by re-hashing the file and the chunk text. status: ok,
    file_changed (passage still there), chunk_changed (passage gone) or missing; ``detail`` says it in words."""
    return await call_core(app.rag.verify_anchor, anchor, request_roots())


@server.tool(annotations=hints("Remove a document", destructive=True, idempotent=False))
async def remove(
    doc_id: Annotated[str | None, Field(description="doc_id from rag_list_documents")] = None,
    path: Annotated[str | None, Field(description="or the indexed file's path")] = None,
    app: AppContext = App,
) -> Removed:
    """Remove (delete) a document and its chunks from the index; the file is untouched and indexing it again
    adds it back. Give doc_id or path. Error: unknown document."""
    return await call_core(app.rag.remove, doc_id, path)


@server.tool(annotations=hints("List data files", read_only=True))
async def catalog(
    root: Annotated[str | None, Field(description="only files under this folder")] = None,
    file_type: Annotated[str | None, Field(description="csv, tsv, parquet, json, jsonl, xlsx, ...")] = None,
    refresh: Annotated[bool, Field(description="re-list the catalog roots first")] = False,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    offset: Annotated[int, Field(ge=0)] = 0,
    app: AppContext = App,
) -> Catalog:
    """Data files (tables, arrays) listed but not embedded, to pick one for the data server. ``meta``: cheap
    facts (CSV columns and rows, Excel sheets); entries also carry root and modified."""
    return await call_core(app.rag.catalog, root=root, file_type=file_type, refresh=refresh, limit=limit, offset=offset)


@server.resource("aisac://documents/{doc_id}", mime_type="text/markdown")
async def document(doc_id: str, app: AppContext = App) -> str:
    """The parsed document as Markdown (headings, paragraphs, tables) with a header naming its source."""
    got = await anyio.to_thread.run_sync(app.rag.document, doc_id)
    row, content = got if got is not None else (None, None)
    if row is None or content is None:
        raise MissingResource(f"no indexed document {quote_path(doc_id)}; rag_list_documents lists doc_ids")
    return f"<!-- aisac document {row.doc_id} · {row.path} · sha256 {row.sha256} -->\n\n{content.markdown}"


@server.resource("aisac://documents/{doc_id}/text", mime_type="text/plain")
async def document_text(doc_id: str, app: AppContext = App) -> str:
    """The parsed document as plain text: the text evidence anchors' ``char_span`` offsets index into."""
    got = await anyio.to_thread.run_sync(app.rag.document, doc_id)
    if got is None or got[1] is None:
        raise MissingResource(f"no indexed document {quote_path(doc_id)}; rag_list_documents lists doc_ids")
    return got[1].text


@server.resource("aisac://documents/{doc_id}/sections/{section}", mime_type="text/markdown")
async def document_section(doc_id: str, section: str, app: AppContext = App) -> str:
    """A section of a document (a label such as ``methods``, or a heading) in reading order with ``[p. N]`` page
    anchors, as ``rag_read_sections`` gives it (first 20,000 tokens; a note names the cursor for the rest)."""
    try:
        got = await anyio.to_thread.run_sync(app.rag.read_sections, doc_id, section, 20000, None)
    except AisacError as exc:
        raise ResourceError(str(exc)) from exc
    more = got["next_cursor"]
    note = (
        f"\n\n[… more: rag_read_sections(doc_id={doc_id!r}, section={section!r}, cursor={more})]"
        if more is not None
        else ""
    )
    return got["text"] + note


#: the document resources as the suite exposes them (the rag server is mounted under the ``rag`` namespace)
DOC_URI = "aisac://rag/documents"
_TEMPLATE = re.compile(r"^aisac://(?:rag/)?documents/\{doc_id\}(?:/text|/sections/\{section\})?$")
MAX_COMPLETIONS = 100


def complete_doc_ids(rag: RagService, prefix: str) -> list[str]:
    """doc_ids of indexed documents whose id or title starts with ``prefix`` (case-insensitive), in path order."""
    want = prefix.strip().lower()
    out: list[str] = []
    offset: int | None = 0
    while offset is not None and len(out) < MAX_COMPLETIONS:
        page = rag.list_documents(status="indexed", limit=1000, offset=offset)
        out += [
            d["doc_id"]
            for d in page["documents"]
            if d["doc_id"].startswith(want) or (d.get("title") or "").strip().lower().startswith(want)
        ]
        offset = page["next_offset"]
    return out[:MAX_COMPLETIONS]


def complete_sections(rag: RagService, doc_id: str, prefix: str) -> list[str]:
    """The section labels, then the headings (and heading numbers) of ``doc_id`` that start with ``prefix``
    (case-insensitive); [] for an unknown or failed document."""
    try:
        ov = rag.overview(doc_id)
    except AisacError:
        return []
    names: list[str] = list(ov["labels"])
    for top in ov["sections"]:
        for sec in [top, *top.get("subsections", [])]:
            number = sec.get("number")
            names += [sec["title"]] + ([number] if number else [])
    want = prefix.strip().lower()
    out: dict[str, str] = {}  # lower-case -> first spelling (a label and its heading "Results" once)
    for n in names:
        if n and n.lower().startswith(want):
            out.setdefault(n.lower(), n)
    return list(out.values())[:MAX_COMPLETIONS]


@server.completion
async def complete(ref: Any, argument: Any, context: Any) -> list[str] | None:
    """Completions of the document resources' ``doc_id`` (ids and titles of indexed documents) and ``section``
    (the labels and headings of the ``doc_id`` already given)."""
    if not _TEMPLATE.match(str(getattr(ref, "uri", "") or "")):
        return None
    rc = fastmcp_request_ctx.get()
    lc = rc.lifespan_context if rc is not None else None
    app = lc.get("app") if isinstance(lc, dict) else None
    if not isinstance(app, AppContext):
        return None
    value = argument.value or ""
    try:
        if argument.name == "doc_id":
            return await anyio.to_thread.run_sync(complete_doc_ids, app.rag, value)
        doc_id = ((context.arguments if context is not None else None) or {}).get("doc_id")
        if argument.name == "section" and doc_id:
            return await anyio.to_thread.run_sync(complete_sections, app.rag, str(doc_id), value)
    except Exception:  # a completion never fails the client: no candidates
        log.exception("completion of %s failed", argument.name)
    return None
