"""The result types of the data domain: what :class:`~aisac_core.data.frames.FrameRegistry` returns (plain dicts of
these shapes), and the frame tools' output schemas (``aisac_servers.adapters.data`` derives them from these types).
The code sessions' types are in :mod:`aisac_core.sessions.results`.

Every top-level type forbids undeclared keys (``additionalProperties: false``); ``NotRequired`` marks keys that only
some results carry. Nested records stay open where their content varies (loader options, statistics, rows).
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

__all__ = [
    "AggregateResult",
    "DescribeResult",
    "FrameSummary",
    "InspectResult",
    "ListResult",
    "LoadResult",
    "PreviewResult",
    "QueryResult",
    "ToSessionResult",
]

_CLOSED = ConfigDict(extra="forbid")
Rows = list[dict[str, Any]]


@with_config(_CLOSED)
class FrameSummary(TypedDict):
    """A registered frame; source for a file, parent and operation for a derived frame."""

    name: str
    kind: Annotated[str, Field(description="file | derived")]
    rows: int
    columns: int
    column_names: list[str]
    dtypes: NotRequired[dict[str, str]]
    notes: list[str]
    created_at: str | None
    source: NotRequired[dict[str, Any]]
    parent: NotRequired[str | None]
    operation: NotRequired[dict[str, Any] | None]
    replaced: NotRequired[bool]
    detected: NotRequired[dict[str, Any] | None]


@with_config(_CLOSED)
class LoadResult(TypedDict):
    frames: list[FrameSummary]
    notes: list[str]


@with_config(_CLOSED)
class InspectResult(TypedDict):
    """data_inspect: per sheet its used range, blocks (A1) and a compact map (<= 4,000 characters)."""

    path: str
    sheets: list[dict[str, Any]]
    notes: list[str]


@with_config(_CLOSED)
class ListResult(TypedDict):
    frames: Annotated[list[FrameSummary], Field(description="newest first; column_names cut at 20")]
    count: int


@with_config(_CLOSED)
class PreviewResult(TypedDict):
    name: str
    where: str
    n: int
    shape: list[int]
    dtypes: dict[str, str]
    rows: Rows
    cells: NotRequired[
        Annotated[
            list[dict[str, Any]],
            Field(
                description="a PDF table's cells (header and shown rows): {row, column, text, anchor}; cite the "
                "anchor (page, bbox); rag_verify_anchor re-checks it"
            ),
        ]
    ]


@with_config(_CLOSED)
class DescribeResult(TypedDict):
    name: str
    shape: list[int]
    columns: dict[str, dict[str, Any]]
    truncated: bool


@with_config(_CLOSED)
class QueryResult(TypedDict):
    name: str
    expr: str
    matched: int
    returned: int
    truncated: bool
    columns: list[str]
    rows: Rows
    result_id: str


@with_config(_CLOSED)
class AggregateResult(TypedDict):
    name: str
    by: list[str]
    groups: int
    returned: int
    truncated: bool
    columns: list[str]
    rows: Rows
    result_id: str


@with_config(_CLOSED)
class ToSessionResult(TypedDict):
    name: str
    session: str
    variable: str
    shape: list[int] | None
    path: str
    notes: list[str]
