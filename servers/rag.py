"""The rag server: incremental indexing and hybrid search over the scientist's documents.

A thin adapter: arguments in, a call into ``aisac_core``, a JSON result out. Mounted by the suite under
the ``rag`` namespace, so the tools are ``rag_index``, ``rag_job_status``, ``rag_search``,
``rag_list_documents``, ``rag_get_chunk``, ``rag_get_overview``, ``rag_read_sections``,
``rag_verify_anchor``, ``rag_remove``, ``rag_catalog`` and the resource template
``aisac://rag/documents/{doc_id}``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ResourceError, ToolError
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.context import store_status as core_store_status
from aisac_core.errors import (
    BadPathError,
    check_path_text,
    expand_user,
    quote_path,
    resolve_in_roots,
)
from aisac_core.rag.catalog import catalog_entries
from aisac_core.rag.indexer import doc_id_of_path, get_document
from aisac_core.rag.indexer import list_documents as core_list
from aisac_core.rag.search import get_chunk as core_get
from aisac_core.rag.search import search as core_search
from aisac_core.rag.sections import get_overview as core_overview
from aisac_core.rag.sections import read_sections as core_read
from aisac_core.rag.verify import verify_anchor as core_verify

from .common import App, call_core

server = FastMCP(
    "rag",
    instructions=(
        "Index a scientist's documents (PDF, DOCX, PPTX, XLSX, HTML, Markdown, JATS) and search them. "
        "Every search hit carries an evidence anchor (file sha256, page, char span, chunk sha256): cite "
        "anchors when you answer."
    ),
)


def _accepted_forms(roots: list[Path]) -> str:
    """The forms ``rag_index``'s ``path`` accepts, naming up to 10 registered roots (for error messages)."""
    names = ", ".join(repr(r.name) for r in roots[:10])
    return ("give a file or folder (absolute, or relative to the first registered root), a list of them, or a "
            "registered root's name" + (f" ({names})" if names else "") + "; omit path to index every registered root")


def _resolve_targets(app: AppContext, path: str | list[str] | None) -> list[tuple[list[Path], bool]]:
    """(paths, catalog_only) groups to index: the given paths, or every registered root (``path`` None).

    Raises:
        BadPathError: an empty or blank path (or empty list), a NUL byte, a symlink loop; the message names the
            accepted forms.
        PathOutsideRootsError: with registered roots, a path resolving outside them.
    """
    s = app.settings
    roots = list(s.rag.roots) + list(s.rag.catalog_roots)
    if path is None:
        if not roots:
            raise BadPathError("no path given and no registered roots: pass path='/folder/of/papers' or set "
                               "AISAC_ROOTS='[\"/folder\"]'")
        groups = [(list(s.rag.roots), False), (list(s.rag.catalog_roots), True)]
        return [(paths, cat) for paths, cat in groups if paths]
    items = [path] if isinstance(path, str) else list(path)
    if not items:
        raise BadPathError(f"path is an empty list: {_accepted_forms(roots)}")
    out: list[Path] = []
    catalog_only = False
    for raw in items:
        if not isinstance(raw, str) or not raw.strip():
            raise BadPathError(f"path {quote_path(raw)} is empty or blank: {_accepted_forms(roots)}")
        check_path_text(raw)
        by_name = [r for r in roots if r.name == raw]
        if by_name and not _exists(raw):
            out.append(by_name[0])
            catalog_only = catalog_only or by_name[0] in s.rag.catalog_roots
        elif roots:  # with registered roots, a path must resolve inside one (no '..', no symlink escape)
            out.append(resolve_in_roots(raw, roots, what="path"))
        else:
            out.append(expand_user(raw))
    return [(out, catalog_only)]


def _exists(raw: str) -> bool:
    """Whether ``raw`` names an existing file or folder (False for a name the OS refuses, e.g. too long)."""
    try:
        return expand_user(raw).exists()
    except OSError:
        return False


@server.tool
async def index(
    ctx: Context,
    path: Annotated[str | list[str] | None, Field(description="file, folder, list of them, or a registered "
                                                             "root's name; omit to index every registered root")] = None,
    catalog_only: Annotated[bool, Field(description="list the files with metadata, do not embed them")] = False,
    wait: Annotated[bool, Field(description="stay until the job ends (progress notifications) or timeout_s")] = False,
    timeout_s: Annotated[float, Field(ge=0, le=3600, description="seconds to wait when wait=true")] = 300,
    app: AppContext = App,
) -> dict[str, Any]:
    """Index documents incrementally as a background job.

    Unchanged files are skipped without being read (size + mtime, then sha256); changed files are
    re-parsed and re-embedded; files gone from an indexed folder lose their chunks. PDF, DOCX, PPTX,
    XLSX, HTML, Markdown, JATS (.nxml), LaTeX and .txt are embedded; CSV/TSV/Parquet/JSON are catalogued.

    Returns ``{job_id, status, done, total, counters, failures}``: poll ``rag_job_status(job_id)``,
    or pass ``wait=true`` to stay (with MCP progress notifications) until the job ends or ``timeout_s``.
    A file that cannot be read (encrypted, damaged, empty, not what its suffix says) is listed in
    ``failures`` and the job goes on.

    Without ``path``, the registered roots are indexed and the catalog-only roots catalogued (two jobs:
    the result is the last one's, with ``earlier_jobs``).

    Symlinks inside a folder are followed only when they lead inside a registered root; the others, symlink
    loops and unreadable folders are listed in the job's ``skipped`` as ``{path, reason}``. An XLSX/DOCX/PPTX that
    would unpack to more than AISAC_DATA_MAX_UNPACKED_MB (or too many times its size) is refused before parsing
    and listed in ``failures``.

    Errors: a path that does not exist, is empty or blank, holds a NUL byte, is a symlink loop or resolves outside
    the registered roots; no path and no registered roots.
    """
    core = app
    targets = await call_core(_resolve_targets, app, path)
    job_ids = [await call_core(core.jobs.submit, paths, catalog_only or cat) for paths, cat in targets]
    job_id = job_ids[-1]  # jobs run in order: the last one ends last
    status = await call_core(core.jobs.status, job_id)
    if wait:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            finished = await anyio.to_thread.run_sync(lambda: core.jobs.wait(job_id, 0.5))
            status = await call_core(core.jobs.status, job_id)
            assert status is not None
            await ctx.report_progress(status["done"], status["total"] or None, status.get("message"))
            if finished:
                break
    assert status is not None
    if len(job_ids) > 1:
        status = {**status, "earlier_jobs": job_ids[:-1]}
    return status


@server.tool
async def job_status(
    job_id: Annotated[str | None, Field(description="id from rag_index; omit to list recent jobs")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Status of an indexing job: ``{job_id, kind, status (queued/running/done/failed/interrupted), done,
    total, counters (files_seen, files_skipped, files_read, files_indexed, files_failed, files_pruned,
    pages_parsed, chunks_embedded, chunks_deleted, ...), failures [{path, error}], times}``.
    Without ``job_id``: ``{jobs: [...]}``, the 20 most recent. Error: unknown job id."""
    core = app
    if job_id is None:
        return {"jobs": await call_core(core.jobs.list)}
    st = await call_core(core.jobs.status, job_id)
    if st is None:
        raise ToolError(f"unknown job id {quote_path(job_id)}: rag_index returns job ids; rag_job_status() lists "
                        "recent jobs")
    return st


@server.tool
async def search(
    query: Annotated[str, Field(description="what to find, in natural language")],
    k: Annotated[int, Field(description="number of hits, 1 to 100")] = 10,
    filters: Annotated[dict[str, Any] | None, Field(
        description="optional: doc_id (str or list), path_glob ('*.pdf'), page_from, page_to (1-based, "
                    "inclusive), file_type (pdf, docx, ... or list), section (abstract, introduction, "
                    "methods, results, discussion, conclusion, datasets, references, other)")] = None,
    mode: Annotated[Literal["hybrid", "dense", "sparse"], Field(
        description="hybrid = dense + BM25, scores fused (default); dense; sparse (BM25)")] = "hybrid",
    app: AppContext = App,
) -> dict[str, Any]:
    """Search the indexed chunks; every hit carries its text, score and evidence anchor.

    Result: ``{hits: [{chunk_id, doc_id, title, path, file_type, page, page_end, section, section_covers,
    chunk_index, text, score, anchor: {chunk_id, doc_id, path, sha256, section, page, char_span,
    chunk_sha256, score}}], count, mode, took_ms, message?}``. ``score``: in hybrid mode the convex
    combination 0.5 x dense + 0.5 x BM25 of min-max normalised scores over the candidates, 0..1 (Bruch,
    Gai & Ingber, ACM TOIS 2023; see docs/retrieval.md); cosine similarity in dense mode; BM25 in sparse.
    ``char_span`` is [start, end) in the document's plain text (resource
    aisac://rag/documents/{doc_id}/text; the span covers the chunk's source text, whose whitespace may
    differ from the chunk's).
    No hits is not an error: ``message`` says why.

    Errors: empty query; k outside 1..100; unknown filter key (the error lists the accepted ones);
    a filter value of the wrong type.
    """
    res = await call_core(core_search, app, query, k, filters, mode)
    return res.as_dict()


@server.tool(annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False})
async def store_status(app: AppContext = App) -> dict[str, Any]:
    """State of the whole store, as ``aisac status`` prints it: ``{data_dir, sql_url, schema_revision,
    vector_backend, vectors_dir, store_bytes, embedding_model, fingerprint, documents: {status: n},
    documents_by_type, chunks_in_manifest, chunks_in_vector_store, stale_documents, catalogued_files, trace_events,
    recent_jobs, permission_warnings}``. No arguments; no errors beyond an unreadable store."""
    return await call_core(core_store_status, app)


@server.tool
async def list_documents(
    status: Annotated[Literal["indexed", "failed", "indexing"] | None, Field(description="filter by status")] = None,
    file_type: Annotated[str | None, Field(description="filter by type: pdf, docx, pptx, xlsx, html, md, jats")] = None,
    path_glob: Annotated[str | None, Field(description="glob on the path or file name")] = None,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    offset: Annotated[int, Field(ge=0)] = 0,
    app: AppContext = App,
) -> dict[str, Any]:
    """The manifest: ``{documents: [{doc_id, path, file_type, title, pages, chunk_count, status, error,
    sha256, size, indexed_at}], total, offset, next_offset}``. Failed files show their error."""
    return await call_core(core_list, app, status=status, file_type=file_type, path_glob=path_glob,
                           limit=limit, offset=offset)


@server.tool
async def get_chunk(chunk_id: Annotated[str, Field(description="chunk_id of a search hit")], app: AppContext = App) -> dict[str, Any]:
    """One chunk with its text, page, section and anchor (score null). Error: unknown chunk id."""
    got = await call_core(core_get, app, chunk_id)
    if got is None:
        raise ToolError(f"unknown chunk id {quote_path(chunk_id)}: use a chunk_id from rag_search (ids change when "
                        "the document is re-indexed after an edit)")
    return got


@server.tool
async def get_overview(
    doc_id: Annotated[str, Field(description="doc_id from rag_list_documents or a search hit")],
    app: AppContext = App,
) -> dict[str, Any]:
    """What a document is and which sections it really has, before reading or searching inside it.

    Result: ``{doc_id, path, file_type, pages, chunk_count, sha256, indexed_at, title, metadata: {title,
    authors, year, doi, arxiv_id}, sections: [{title, number, level, label, page_start, page_end, chunk_count,
    subsections: [...]}], labels: {label: {sections, page_start, page_end}}, captions: [{kind, text, page}]}``.
    ``sections`` are the top-level sections in reading order with their page range and chunk count;
    ``label`` is the section taxonomy (abstract, introduction, methods, results, discussion, conclusion,
    datasets, references, other); ``labels`` says which of them the document has - use them with
    rag_read_sections or rag_search's ``section`` filter. Metadata fields not found are null.

    Errors: unknown doc_id; a document that failed to index (the error says why, e.g. no text layer).
    """
    return await call_core(core_overview, app, doc_id)


@server.tool
async def read_sections(
    doc_id: Annotated[str, Field(description="doc_id from rag_list_documents or a search hit")],
    section: Annotated[str, Field(description="a section label (abstract, introduction, methods, results, "
                                              "discussion, conclusion, datasets, references, other) or a heading "
                                              "from rag_get_overview ('3.1 Setup', 'Setup' or '3.1')")],
    max_tokens: Annotated[int, Field(ge=50, le=20000, description="page size in tokens (~4 characters each)")] = 2000,
    cursor: Annotated[int | None, Field(ge=0, description="next_cursor of the previous page; omit for the "
                                                          "first")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Read a section of a document in reading order, with page anchors, one page of text at a time.

    Result: ``{doc_id, title, section, matched: [{title, number, level, label, page_start, page_end,
    chunk_count}], text, blocks: [{kind, page, char_span, section}], tokens, total_tokens, next_cursor}``.
    ``text`` holds headings as Markdown lines and every other block prefixed with ``[p. N]``; ``char_span``
    indexes into the document's plain text (aisac://documents/{doc_id}/text). When ``next_cursor`` is not
    null, call again with ``cursor=next_cursor`` for the rest. A label reads every section with it (e.g.
    "methods" reads "2 Materials and Methods" with its subsections).

    Errors: unknown doc_id; a section the document does not have (the error lists the labels and headings
    it has); max_tokens outside 50..20000; a cursor that is no offset of the document.
    """
    return await call_core(core_read, app, doc_id, section, max_tokens, cursor)


@server.tool
async def verify_anchor(
    anchor: Annotated[dict[str, Any], Field(
        description="the 'anchor' object of a rag_search / rag_get_chunk hit: {chunk_id, doc_id, path, sha256, "
                    "section, page, char_span, chunk_sha256, score}; optionally 'text' (the hit's chunk text)")],
    app: AppContext = App,
) -> dict[str, Any]:
    """Check that a piece of evidence still holds, by re-hashing the file and the chunk text.

    Result: ``{status, chunk_id, doc_id, path, detail, sha256_now, current_chunk_id}``. ``status``:
    ``ok`` (file unchanged and the chunk's text hash matches), ``file_changed`` (the file's bytes changed
    but the anchored passage is still in the current version; page/span may have moved),
    ``chunk_changed`` (the passage is no longer found), ``missing`` (the document is no longer indexed or
    its file is gone). ``detail`` explains in words. A changed file that was not re-indexed yet is parsed
    again to look for the passage (PDF ~0.1 s/page).

    Errors: ``anchor`` not an object, or without sha256 / chunk_sha256 / (doc_id or path).
    """
    return await call_core(core_verify, app, anchor)


@server.tool
async def remove(
    doc_id: Annotated[str | None, Field(description="doc_id from rag_list_documents")] = None,
    path: Annotated[str | None, Field(description="or the indexed file's path")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Remove a document and its chunks from the index (the file itself is untouched).

    Result: ``{removed: doc_id, chunks_deleted}``. Errors: neither or both arguments; unknown document."""
    if (doc_id is None) == (path is None):
        raise ToolError("give exactly one of doc_id or path")
    core = app
    did = doc_id if doc_id is not None else await call_core(doc_id_of_path, path)
    if await call_core(get_document, core, did) is None:
        raise ToolError(f"no indexed document {quote_path(doc_id or path)}: rag_list_documents shows what is indexed")
    deleted = await call_core(core.jobs.indexer.remove, [did])
    return {"removed": did, "chunks_deleted": deleted}


@server.tool
async def catalog(
    root: Annotated[str | None, Field(description="only files under this folder")] = None,
    file_type: Annotated[str | None, Field(description="csv, tsv, parquet, json, jsonl, xlsx, ...")] = None,
    refresh: Annotated[bool, Field(description="re-list the registered catalog roots first")] = False,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    offset: Annotated[int, Field(ge=0)] = 0,
    app: AppContext = App,
) -> dict[str, Any]:
    """Files of catalog-only roots (and data files met while indexing), listed and never embedded:
    ``{entries: [{path, root, file_type, size, modified, meta}], total, next_offset}``; ``meta`` holds
    cheap facts (CSV columns and row count, Excel sheet names). The data server opens them on demand."""
    core = app
    if refresh and core.settings.rag.catalog_roots:
        await call_core(core.jobs.indexer.run, list(core.settings.rag.catalog_roots), catalog_only=True)
    return await call_core(catalog_entries, core, root=root, file_type=file_type, limit=limit, offset=offset)


@server.resource("aisac://documents/{doc_id}", mime_type="text/markdown")
async def document(doc_id: str, app: AppContext = App) -> str:
    """The parsed document as Markdown (headings, paragraphs, tables) with a header naming its source."""
    got = await anyio.to_thread.run_sync(get_document, app, doc_id)
    if got is None or got[1] is None:
        raise ResourceError(f"no indexed document {quote_path(doc_id)}; rag_list_documents lists doc_ids")
    row, content = got
    return f"<!-- aisac document {row.doc_id} · {row.path} · sha256 {row.sha256} -->\n\n{content.markdown}"


@server.resource("aisac://documents/{doc_id}/text", mime_type="text/plain")
async def document_text(doc_id: str, app: AppContext = App) -> str:
    """The parsed document as plain text: the text evidence anchors' ``char_span`` offsets index into."""
    got = await anyio.to_thread.run_sync(get_document, app, doc_id)
    if got is None or got[1] is None:
        raise ResourceError(f"no indexed document {quote_path(doc_id)}; rag_list_documents lists doc_ids")
    return got[1].text
