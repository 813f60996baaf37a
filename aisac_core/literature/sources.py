"""The registry of literature sources: what ``lit_search`` and ``lit_get`` can ask, collected from the plugins.

Every source, built-in or not, is a :class:`LiteratureSource` (or any object with the same attributes) returned by
an ``aisac_register_literature_sources`` hook implementation (:mod:`aisac_core.plugins`); the five built-ins come
from :mod:`aisac_core.literature.builtin`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aisac_core.literature.paper import LiteratureError, Paper
from aisac_core.plugins import collect_from, plugins_of, skip_installed

if TYPE_CHECKING:
    import pluggy

    from aisac_core.literature.http import Fetcher

#: default per-request maximum of a source that does not say
DEFAULT_MAX_RESULTS = 100


@dataclass(frozen=True)
class LiteratureSource:
    """One literature source.

    ``search(fetcher, query, k, year_from, year_to)`` returns up to ``k`` papers, best first (use
    ``fetcher.fetch(...)`` for politeness, retries and the cache; raise :class:`~.http.NotFound` /
    :class:`~.http.ServiceError` for service failures). ``get(fetcher, kind, value)`` returns the paper for an
    identifier of one of the ``identifiers`` kinds (doi, arxiv, pmid, pmcid, s2, openalex). ``max_results`` is the
    source's per-request maximum; ``aliases`` are other accepted spellings of ``name``.
    """

    name: str
    search: Callable[..., Awaitable[list[Paper]]]
    get: Callable[..., Awaitable[Paper]] | None = None
    identifiers: tuple[str, ...] = ()
    max_results: int = DEFAULT_MAX_RESULTS
    aliases: tuple[str, ...] = field(default_factory=tuple)


def literature_sources(app: Any = None) -> dict[str, Any]:
    """The sources of ``app``'s plugins (built-ins plus a served project's; ``app`` None: the built-ins), by
    canonical name, in registration order (the five built-ins first: arxiv, pubmed, crossref, openalex,
    semantic_scholar).

    Raises:
        PluginError: a source without a name or search function, or two sources with one name.
    """
    return source_registry(plugins_of(app))


def source_registry(pm: pluggy.PluginManager) -> dict[str, Any]:
    """The sources registered on the plugin manager ``pm`` (see :func:`literature_sources`). An installed plugin's
    source without a name or search function, or with a name taken, is skipped with a warning naming the plugin.

    Raises:
        PluginError: such a source from a built-in or a project's extension.
    """
    out: dict[str, Any] = {}
    for src, installed in collect_from(pm, "aisac_register_literature_sources"):
        name = getattr(src, "name", None)
        if not isinstance(name, str) or not name.strip() or not callable(getattr(src, "search", None)):
            skip_installed(
                pm,
                installed,
                f"literature source {src!r} needs a name (str) and an async "
                "search(fetcher, query, k, year_from, year_to)",
            )
            continue
        key = name.strip().lower()
        if key in out:
            skip_installed(pm, installed, f"two literature sources are named {key!r}; rename one")
            continue
        out[key] = src
    return out


def aliases(sources: dict[str, Any]) -> dict[str, str]:
    """Accepted spellings (lower case) -> canonical name, for ``sources``."""
    out = {n: n for n in sources}
    for n, src in sources.items():
        for a in getattr(src, "aliases", ()) or ():
            out.setdefault(str(a).strip().lower(), n)
    return out


def max_results(src: Any) -> int:
    """A source's per-request maximum (:data:`DEFAULT_MAX_RESULTS` when it does not say)."""
    return int(getattr(src, "max_results", DEFAULT_MAX_RESULTS) or DEFAULT_MAX_RESULTS)


def routes(sources: dict[str, Any], kind: str) -> list[tuple[str, Callable[[Fetcher, str, str], Awaitable[Paper]]]]:
    """``[(name, get)]`` of the sources answering identifiers of ``kind``, in registry order.

    Raises:
        LiteratureError: no source answers that kind.
    """
    out = [
        (n, src.get)
        for n, src in sources.items()
        if getattr(src, "get", None) is not None and kind in (getattr(src, "identifiers", ()) or ())
    ]
    if not out:
        raise LiteratureError(f"no literature source looks up {kind} identifiers")
    return out
