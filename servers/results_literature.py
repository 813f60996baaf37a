"""Result shapes of the literature tools (``lit_*``; their output schemas in ``tools/list``).

The tools return the dicts :mod:`aisac_core.literature.service` builds (sent as built); these TypedDicts declare the
top-level keys a model works with (the suite lists top-level keys only); docs/literature.md has the paper record
and the source statuses.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict


class SearchResult(TypedDict):
    papers: list[dict[str, Any]]
    sources: dict[str, dict[str, Any]]


class GetResult(TypedDict):
    paper: dict[str, Any] | None
    sources: dict[str, dict[str, Any]]


class ReferencesResult(TypedDict):
    references: list[dict[str, Any]]
    count: int


class CitationsResult(TypedDict):
    citations: list[dict[str, Any]]
    count: int
