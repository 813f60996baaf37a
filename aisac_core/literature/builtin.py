"""The five built-in literature sources, registered through the ``aisac_register_literature_sources`` hook."""

from __future__ import annotations

from aisac_core.literature import arxiv, crossref, openalex, pubmed, semanticscholar
from aisac_core.literature.http import Fetcher
from aisac_core.literature.paper import Paper
from aisac_core.literature.sources import LiteratureSource
from aisac_core.plugins import hookimpl


async def _arxiv_get(f: Fetcher, _kind: str, value: str) -> Paper:
    return await arxiv.get(f, value)


async def _pubmed_get(f: Fetcher, _kind: str, value: str) -> Paper:
    return await pubmed.get(f, value)


async def _crossref_get(f: Fetcher, _kind: str, value: str) -> Paper:
    return await crossref.get(f, value)


#: the built-ins, in the order their values win when records merge (:data:`~.paper.SOURCES`)
SOURCES = (
    LiteratureSource("arxiv", arxiv.search, _arxiv_get, ("arxiv",), arxiv.MAX_RESULTS),
    LiteratureSource("pubmed", pubmed.search, _pubmed_get, ("pmid",), pubmed.MAX_RESULTS),
    LiteratureSource("crossref", crossref.search, _crossref_get, ("doi",), crossref.MAX_RESULTS),
    LiteratureSource("openalex", openalex.search, openalex.get, ("doi", "pmcid", "openalex"), openalex.MAX_RESULTS),
    LiteratureSource(
        "semantic_scholar",
        semanticscholar.search,
        semanticscholar.get,
        ("doi", "pmcid", "s2"),
        semanticscholar.MAX_RESULTS,
        aliases=("s2", "semanticscholar", "semantic scholar"),
    ),
)


@hookimpl
def aisac_register_literature_sources() -> list[LiteratureSource]:
    """arXiv, PubMed, Crossref, OpenAlex and Semantic Scholar."""
    return list(SOURCES)
