"""The literature server: arXiv, PubMed, Crossref, OpenAlex and Semantic Scholar as one search, and import of
open-access PDFs into the corpus.

A thin adapter over :mod:`aisac_core.literature`. Mounted by the suite under the ``lit`` namespace:
``lit_search``, ``lit_get``, ``lit_references``, ``lit_citations``, ``lit_import``, and ``lit_materials`` (computed
materials data from OPTIMADE providers).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastmcp import Context
from fastmcp.exceptions import ToolError
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.errors import AisacError
from aisac_core.literature import results as R

from ..serving.common import AisacServer, App, request_roots
from ..serving.tasks import app_of, follow_index_job, in_task, task_on
from ..shapes.annotations import hints

log = logging.getLogger("aisac.servers.literature")
T = TypeVar("T")

server = AisacServer(
    "literature",
    instructions=(
        "Search scholarly literature (arXiv, PubMed, Crossref, OpenAlex, Semantic Scholar), follow citations, "
        "import open-access PDFs into rag."
    ),
)


async def _run(call: Callable[[], Awaitable[T]]) -> T:
    """Await the literature operation ``call()`` (building the service may fail too: a broken plugin source); aisac's
    user errors become ToolErrors with their message."""
    try:
        return await call()
    except ToolError:
        raise
    except AisacError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        log.exception("internal error in a literature tool")
        raise ToolError(f"internal error ({type(exc).__name__}: {exc}); the server log on stderr has details") from exc


@server.tool(annotations=hints("Search papers", read_only=True, open_world=True))
async def search(
    query: str,
    sources: Annotated[
        list[str] | str | None, Field(description="arxiv, pubmed, crossref, openalex, semantic_scholar; default all")
    ] = None,
    k: Annotated[int, Field(description="1-1000")] = 10,
    year_from: int | None = None,
    year_to: int | None = None,
    app: AppContext = App,
) -> R.SearchResult:
    """Find published papers on the web as one merged list (rag_search searches the user's documents).
    `sources` gives each service's status; a throttled one says rate_limited and the others still answer."""
    return await _run(lambda: app.literature.search(query, sources, k, year_from, year_to))


@server.tool(annotations=hints("Get a paper", read_only=True, open_world=True))
async def get(
    identifier: Annotated[str, Field(description="DOI, arXiv id, pmid:N, PMCID, S2 or OpenAlex id")],
    app: AppContext = App,
) -> R.GetResult:
    """One paper's full record (with abstract) by identifier; `paper` is null when every service failed."""
    return await _run(lambda: app.literature.get(identifier))


@server.tool(annotations=hints("Cited papers", read_only=True, open_world=True))
async def references(
    identifier: Annotated[str, Field(description="DOI, arXiv id, pmid:N, PMCID, S2 or OpenAlex id")],
    k: Annotated[int, Field(description="1-1000")] = 100,
    app: AppContext = App,
) -> R.ReferencesResult:
    """The papers a paper cites, its reference list (Semantic Scholar, else OpenAlex)."""
    return await _run(lambda: app.literature.references(identifier, k))


@server.tool(annotations=hints("Citing papers", read_only=True, open_world=True))
async def citations(
    identifier: Annotated[str, Field(description="DOI, arXiv id, pmid:N, PMCID, S2 or OpenAlex id")],
    k: Annotated[int, Field(description="1-1000")] = 100,
    app: AppContext = App,
) -> R.CitationsResult:
    """The papers citing a paper (Semantic Scholar, else OpenAlex)."""
    return await _run(lambda: app.literature.citations(identifier, k))


@server.tool(annotations=hints("Computed materials data (OPTIMADE)", read_only=True, open_world=True))
async def materials(
    formula: Annotated[
        str | None, Field(description="a composition, e.g. LiFePO4 (any spelling of it matches)")
    ] = None,
    elements: Annotated[
        list[str] | str | None, Field(description='element symbols the structures contain, e.g. ["Li","Fe","O"]')
    ] = None,
    filter: Annotated[
        str | None, Field(description='an OPTIMADE filter, e.g. nelements<=4 AND elements HAS "O"')
    ] = None,
    provider: Annotated[str | None, Field(description="alexandria, oqmd, mp or another configured one")] = None,
    k: Annotated[int, Field(description="1-100")] = 10,
    exact_elements: Annotated[bool, Field(description="only the given elements (nelements = their count)")] = True,
    with_structure: Annotated[
        bool, Field(description="add each record's cell (lattice, species, positions in Å)")
    ] = False,
    app: AppContext = App,
) -> R.MaterialsResult:
    """Use to look up computed materials data (formation energy, energy above hull, band gap, structure) in a
    public database through the OPTIMADE API. Each record cites its provider, database id and URL; properties
    carry the provider's units. Errors: nothing to look up; bad formula, element or filter; unknown provider;
    provider unreachable (an error, never an empty list)."""
    return await _run(
        lambda: app.literature.materials(formula, elements, filter, provider, k, exact_elements, with_structure)
    )


@server.tool(
    name="import",
    annotations=hints("Import an open-access paper", open_world=True, idempotent=True),
    task=task_on(server),
)
async def import_(
    ctx: Context,
    identifier: Annotated[str, Field(description="arXiv id, DOI, PMID, ... of an open-access paper")],
    root: Annotated[
        str | None,
        Field(
            description="a registered root (its name or path) or a folder inside one; "
            "omit for the first registered root"
        ),
    ] = None,
    wait: Annotated[bool, Field(description="stay until the index job ends (or timeout_s)")] = False,
    timeout_s: Annotated[float, Field(ge=0, le=3600, description="seconds to wait when wait=true")] = 300,
) -> R.ImportResult:
    """Use to add an open-access paper to the corpus: saves its PDF in a registered root with a
    provenance sidecar (source URL, time, sha256) and starts an index job (``job_id``; rag_job_status, or
    ``wait=true``, or as an MCP task, which lasts until it is indexed). ``status``: imported, already_present or
    rate_limited (``retry_after``). Errors: unknown paper; no open-access PDF; not a PDF; private address
    (AISAC_LIT_ALLOW_NETWORKS); too large; root not registered. Nothing is saved on error.
    """
    app = app_of(ctx)
    roots = request_roots()
    res = await _run(lambda: app.literature.import_paper(identifier, root, roots))
    if (wait or in_task(ctx)) and res.get("job_id"):
        res["job"] = await follow_index_job(ctx, app, [res["job_id"]], None if in_task(ctx) else timeout_s)
    return res
