"""Literature: arXiv, PubMed (E-utilities), Crossref, OpenAlex and Semantic Scholar as one search, with
per-service politeness, a response cache / replay, and import of open-access PDFs into the corpus.

Modules: :mod:`.paper` (the common :class:`Paper` record, identifiers, merging), :mod:`.http` (budgets,
retries, cache), one client module per source, :mod:`.sources` (the source registry, filled through the
``aisac_register_literature_sources`` hook), :mod:`.builtin` (the five built-in sources), :mod:`.service` (the
operations the server calls).
"""

from aisac_core.literature.http import (
           BadResponse,
           NotFound,
           RateLimited,
           ReplayMiss,
           ServiceError,
           reset_states,
)
from aisac_core.literature.paper import (
           SOURCES,
           LiteratureError,
           Paper,
           merge_papers,
           normalise_doi,
           parse_identifier,
)
from aisac_core.literature.service import (
           citations,
           get,
           import_paper,
           references,
           search,
)
from aisac_core.literature.sources import LiteratureSource, literature_sources

__all__ = ["SOURCES", "BadResponse", "LiteratureError", "LiteratureSource", "NotFound", "Paper", "RateLimited",
           "ReplayMiss", "ServiceError", "citations", "get", "import_paper", "literature_sources", "merge_papers",
           "normalise_doi", "parse_identifier", "references", "reset_states", "search"]
