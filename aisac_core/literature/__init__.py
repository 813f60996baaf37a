"""Literature: arXiv, PubMed (E-utilities), Crossref, OpenAlex and Semantic Scholar as one search, with
per-service politeness, a response cache / replay, and import of open-access PDFs into the corpus.

Modules: :mod:`.paper` (the common :class:`Paper` record, identifiers, merging), :mod:`.http` (budgets,
retries, cache), one client module per source, :mod:`.sources` (the source registry, filled through the
``aisac_register_literature_sources`` hook), :mod:`.builtin` (the five built-in sources), :mod:`.service` (the
:class:`LiteratureService` the server calls), :mod:`.results` (its result types).
"""

from aisac_core.literature.http import BadResponse, HttpState, NotFound, RateLimited, ReplayMiss, ServiceError
from aisac_core.literature.paper import SOURCES, LiteratureError, Paper, merge_papers, normalise_doi, parse_identifier
from aisac_core.literature.service import LiteratureService
from aisac_core.literature.sources import LiteratureSource, literature_sources, source_registry

__all__ = [
    "SOURCES",
    "BadResponse",
    "HttpState",
    "LiteratureError",
    "LiteratureService",
    "LiteratureSource",
    "NotFound",
    "Paper",
    "RateLimited",
    "ReplayMiss",
    "ServiceError",
    "literature_sources",
    "merge_papers",
    "normalise_doi",
    "parse_identifier",
    "source_registry",
]
