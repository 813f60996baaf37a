"""The result types of the data domain: what :class:`~aisac_core.data.frames.FrameRegistry` and
:class:`~aisac_core.data.sandbox.SandboxManager` return (plain dicts of these shapes), and the data tools' output
schemas (``aisac_servers.adapters.data`` derives them from these types).

Every top-level type forbids undeclared keys (``additionalProperties: false``); ``NotRequired`` marks keys that only
some results carry. Nested records stay open where their content varies (loader options, statistics, rows).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

__all__ = [
    "AggregateResult",
    "CloseResult",
    "CodeRun",
    "DescribeResult",
    "Figure",
    "FrameSummary",
    "InspectResult",
    "ListResult",
    "LoadResult",
    "PreviewResult",
    "QueryResult",
    "ResetResult",
    "SessionInfo",
    "SessionListResult",
    "ToSessionResult",
    "VariablesResult",
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


class Figure(TypedDict):
    name: str
    path: str
    sha256: str
    bytes: int


@with_config(_CLOSED)
class CodeRun(TypedDict):
    """A finished run, or pending: true with status running (poll job_id)."""

    ok: bool
    session: str
    job_id: str
    status: Literal["done", "running", "cancelled"]
    pending: NotRequired[bool]
    cell: NotRequired[int]
    stdout: NotRequired[str]
    stderr: NotRequired[str]
    result: NotRequired[str]
    result_truncated: NotRequired[bool]
    error: NotRequired[str]
    error_type: NotRequired[str]
    traceback: NotRequired[str]
    figures: NotRequired[list[Figure]]
    notes: NotRequired[list[str]]
    state_lost: NotRequired[bool]
    duration_ms: NotRequired[float]
    code_sha256: NotRequired[str]
    output_sha256: NotRequired[str]
    isolation: NotRequired[str]
    started_at: NotRequired[str]
    elapsed_s: NotRequired[float]
    finished_at: NotRequired[str | None]


@with_config(_CLOSED)
class VariablesResult(TypedDict):
    session: str
    variables: Annotated[Rows, Field(description="{name, type, shape?, len?, dtype?, repr}")]
    notes: list[str]


class SessionInfo(TypedDict):
    session: str
    dir: str
    alive: bool
    pid: int | None
    cells: int
    created_at: str
    last_used_at: str | None
    busy_job: str | None
    state_lost: str | None
    confinement: dict[str, Any]


@with_config(_CLOSED)
class SessionListResult(TypedDict):
    sessions: list[SessionInfo]
    isolation: str
    isolation_note: str
    allowed_imports: list[str]
    limits: dict[str, Any]


@with_config(_CLOSED)
class ResetResult(TypedDict):
    session: str
    reset: bool
    killed_job: str | None


@with_config(_CLOSED)
class CloseResult(TypedDict):
    session: str
    closed: bool
    dir: str
