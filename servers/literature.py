"""The literature server: arXiv, PubMed, Crossref, OpenAlex and Semantic Scholar as one search, and import of
open-access PDFs into the corpus.

A thin adapter over :mod:`aisac_core.literature`. Mounted by the suite under the ``lit`` namespace:
``lit_search``, ``lit_get``, ``lit_references``, ``lit_citations``, ``lit_import``.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any, Awaitable, TypeVar

import anyio
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.errors import AisacError

from .common import App

# the tools import aisac_core.literature.service (httpx, the HTTP cache) on first call, so serving starts fast
log = logging.getLogger("aisac.servers.literature")
T = TypeVar("T")

server = FastMCP(
    "literature",
    instructions=(
        "Search scholarly literature (arXiv, PubMed, Crossref, OpenAlex, Semantic Scholar) as one de-duplicated "
        "list, look papers up by DOI / arXiv id / PMID / PMCID / S2 id, follow references and citations, and "
        "import open-access PDFs into the corpus (then search them with rag_search). A throttled service shows "
        "status 'rate_limited' with 'retry_after' seconds; the others still answer."
    ),
)


async def _run(coro: Awaitable[T]) -> T:
    """Await a literature operation; aisac's user errors become ToolErrors with their message."""
    try:
        return await coro
    except ToolError:
        raise
    except AisacError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        log.exception("internal error in a literature tool")
        raise ToolError(f"internal error ({type(exc).__name__}: {exc}); the server log on stderr has details") from exc


@server.tool
async def search(
    query: Annotated[str, Field(description="what to find, e.g. 'transformer protein structure'")],
    sources: Annotated[list[str] | str | None, Field(
        description="any of arxiv, pubmed, crossref, openalex, semantic_scholar (alias s2); omit for all")] = None,
    k: Annotated[int, Field(description="number of merged papers wanted, 1..1000 (each source is clamped to its "
                                        "own maximum, and the result says so)")] = 10,
    year_from: Annotated[int | None, Field(description="earliest publication year, inclusive")] = None,
    year_to: Annotated[int | None, Field(description="latest publication year, inclusive")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Search several literature databases at once and merge their answers into one de-duplicated list.

    Papers are merged across sources by DOI, arXiv id (without version), PMID, then normalised title + year,
    and ranked by reciprocal rank fusion (sum of 1/(60 + rank) over sources; Cormack et al., SIGIR 2009).

    Result: ``{query, papers: [{source, source_id, title, authors, year, venue, abstract, doi, arxiv_id,
    arxiv_id_base, pmid, pmcid, s2_id, openalex_id, url, pdf_url, open_access, citation_count, retrieved_at,
    sources: [{source, source_id}]}], count, sources: {name: {status, count?, took_ms, retry_after?, error?,
    http_status?, k_requested?, k_max?}}, notes: [...]}``. ``status`` per source: ok, rate_limited (with
    ``retry_after`` seconds; no request is sent to that service until then), not_found, refused (HTTP 4xx),
    error (HTTP 5xx after retries), unavailable, unreachable, timeout, bad_response (malformed XML/JSON),
    replay_miss (replay mode, not cached), blocked (the service URL is on a loopback or private address not in
    AISAC_LIT_ALLOW_NETWORKS; nothing sent). One source failing never fails the call.

    Errors: empty query; unknown source (the message lists them); k < 1; year_from after year_to.
    """
    from aisac_core.literature import service

    core = app
    return await _run(service.search(core.settings, core, query, sources, k, year_from, year_to))


@server.tool
async def get(
    identifier: Annotated[str, Field(description="DOI (10.1038/...; doi: or https://doi.org/ prefixes ok), arXiv id "
                                                 "(2104.12255, arXiv:hep-th/9901001v2), PMID (pmid:12345), PMCID "
                                                 "(PMC123456), Semantic Scholar id (40 hex or CorpusId:123) or "
                                                 "OpenAlex id (W123)")],
    app: AppContext = App,
) -> dict[str, Any]:
    """Look up one paper by identifier, merged from the sources that index that kind of id.

    DOI: Crossref + OpenAlex + Semantic Scholar; arXiv id: arXiv; PMID: PubMed (full record with abstract);
    PMCID: OpenAlex + Semantic Scholar; S2 id: Semantic Scholar; W id: OpenAlex.

    Result: ``{identifier, kind, paper: {...same fields as lit_search papers...} | null, sources: {name: status}}``;
    ``paper`` is null only when every source was throttled or failed (``sources`` says why, e.g.
    ``rate_limited`` with ``retry_after``).

    Errors: empty, malformed (e.g. a DOI without '/') or unrecognised identifier; no source knows the paper.
    """
    from aisac_core.literature import service

    core = app
    return await _run(service.get(core.settings, core, identifier))


@server.tool
async def references(
    identifier: Annotated[str, Field(description="DOI, arXiv id, PMID, PMCID, S2 id or OpenAlex id of the paper")],
    k: Annotated[int, Field(description="most papers returned, 1..1000 (clamped, and said, above)")] = 100,
    app: AppContext = App,
) -> dict[str, Any]:
    """The papers a paper cites (its reference list), from Semantic Scholar, or OpenAlex when Semantic Scholar
    is throttled or failing (or for an OpenAlex id).

    Result: ``{identifier, kind, references: [paper...], count, sources: {name: status}, notes}``.
    Errors: malformed identifier; k < 1; the paper is unknown to every source asked."""
    from aisac_core.literature import service

    core = app
    return await _run(service.references(core.settings, core, identifier, k))


@server.tool
async def citations(
    identifier: Annotated[str, Field(description="DOI, arXiv id, PMID, PMCID, S2 id or OpenAlex id of the paper")],
    k: Annotated[int, Field(description="most papers returned, 1..1000 (clamped, and said, above)")] = 100,
    app: AppContext = App,
) -> dict[str, Any]:
    """The papers citing a paper, from Semantic Scholar, or OpenAlex (``cites:`` filter) when Semantic
    Scholar is throttled or failing (or for an OpenAlex id).

    Result: ``{identifier, kind, citations: [paper...], count, sources: {name: status}, notes}``.
    Errors: malformed identifier; k < 1; the paper is unknown to every source asked."""
    from aisac_core.literature import service

    core = app
    return await _run(service.citations(core.settings, core, identifier, k))


@server.tool(name="import")
async def import_(
    identifier: Annotated[str, Field(description="arXiv id, DOI, PMID, ... of an open-access paper")],
    root: Annotated[str | None, Field(description="a registered root (its name or path) or a folder inside one; "
                                                  "omit for the first registered root")] = None,
    wait: Annotated[bool, Field(description="stay until the index job ends (or timeout_s)")] = False,
    timeout_s: Annotated[float, Field(ge=0, le=3600, description="seconds to wait when wait=true")] = 300,
    app: AppContext = App,
) -> dict[str, Any]:
    """Download a paper's open-access PDF into a registered corpus root, write a provenance sidecar, and start
    an index job so it becomes searchable with rag_search.

    The PDF is saved as ``<root>/<arxiv-ID | doi-DOI | pmid-N>.pdf``; the sidecar ``<same>.provenance.json``
    holds the source URL, retrieval time (UTC), sha256, size, content type and the paper record. A download
    that is not a PDF (no ``%PDF-`` header, or an HTML content type: an error page or a login wall) is refused
    and nothing is saved.

    Result: ``{status: imported | already_present, path, sidecar, sha256, bytes, source_url, job_id, paper}``
    (poll ``rag_job_status(job_id)``, or pass ``wait=true``: the result then has ``job``, the job's status), or
    ``{status: rate_limited, retry_after}`` when the source is throttled.

    Errors: bad identifier; paper not found; no open-access PDF known; the PDF link or a redirect hop is not
    http(s) or points to a loopback, private or link-local address (refused unless AISAC_LIT_ALLOW_NETWORKS allows
    it; nothing is fetched); the download failed or is not a PDF; larger than AISAC_LIT_MAX_PDF_MB; root outside
    the registered roots (AISAC_ROOTS) or no roots registered. Nothing is saved or indexed on any error.
    """
    from aisac_core.literature import service

    core = app
    res = await _run(service.import_paper(core, identifier, root))
    if wait and res.get("job_id"):
        job_id = res["job_id"]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if await anyio.to_thread.run_sync(lambda: core.jobs.wait(job_id, 0.5)):
                break
        res["job"] = await anyio.to_thread.run_sync(core.jobs.status, job_id)
    return res
