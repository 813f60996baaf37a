"""The result types of the code sessions: what :class:`~aisac_core.sessions.manager.SessionManager` returns and the
code tools' output schemas (``aisac_servers.adapters.data`` derives them from these types).

A code run's result is a tagged union, :data:`CodeRun`, on ``status``: :class:`CodeRunPending` (``running``: the
run goes on in the background; poll its ``job_id``) or :class:`CodeRunDone` (``done``, or ``cancelled`` for a run
stopped by ``rag_job_cancel``), every key of which is required but the four that exist only for some runs
(``result``, ``result_truncated``, ``error`` with ``error_type``, ``traceback``). Every top-level type forbids
undeclared keys (``additionalProperties: false``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

__all__ = [
    "CODE_RUN",
    "CloseResult",
    "CodeRun",
    "CodeRunDone",
    "CodeRunPending",
    "Figure",
    "ResetResult",
    "SessionInfo",
    "SessionListResult",
    "VariablesResult",
]

_CLOSED = ConfigDict(extra="forbid")


class Figure(TypedDict):
    """A matplotlib figure of a run: a PNG file in the server's own folder (never the session's)."""

    name: str
    path: str
    sha256: str
    bytes: int


@with_config(_CLOSED)
class CodeRunPending(TypedDict):
    """A run still going on after the call's wait (``AISAC_SANDBOX_JOB_THRESHOLD_S``): poll ``job_id`` with
    ``data_code_job_status`` (``error`` says so in words)."""

    ok: Literal[False]
    pending: Literal[True]
    status: Literal["running"]
    session: str
    job_id: str
    code_sha256: Annotated[str, Field(description="sha256 of the code (UTF-8)")]
    started_at: Annotated[str, Field(description="ISO 8601, UTC")]
    elapsed_s: Annotated[float, Field(description="seconds since the run started")]
    error: str


@with_config(_CLOSED)
class CodeRunDone(TypedDict):
    """A finished run (``ok``: the cell ran without an exception); ``cancelled``: stopped by ``rag_job_cancel`` (its
    worker was killed; the session's variables are lost)."""

    ok: bool
    status: Literal["done", "cancelled"]
    session: str
    job_id: str
    cell: Annotated[int, Field(description="the cell's number in its session, from 1")]
    stdout: str
    stderr: str
    result: NotRequired[Annotated[str, Field(description="repr of the final expression, when there is one")]]
    result_truncated: NotRequired[bool]
    error: NotRequired[str]
    error_type: NotRequired[str]
    traceback: NotRequired[str]
    figures: list[Figure]
    notes: list[str]
    state_lost: Annotated[bool, Field(description="earlier variables of the session are gone (notes say why)")]
    duration_ms: float
    code_sha256: Annotated[str, Field(description="sha256 of the code (UTF-8)")]
    output_sha256: Annotated[str, Field(description="sha256 of stdout NUL stderr NUL result")]
    isolation: Annotated[str, Field(description="bwrap | unshare | none: the OS isolation the run had")]
    started_at: Annotated[str, Field(description="ISO 8601, UTC")]
    finished_at: Annotated[str, Field(description="ISO 8601, UTC")]


#: the result of ``data_code_run`` and ``data_code_job_status``, tagged by ``status``
CodeRun = Annotated[CodeRunPending | CodeRunDone, Field(discriminator="status")]
#: validates a :data:`CodeRun` (e.g. read back from a trace event)
CODE_RUN: TypeAdapter[CodeRunPending | CodeRunDone] = TypeAdapter(CodeRun)


@with_config(_CLOSED)
class VariablesResult(TypedDict):
    session: str
    variables: Annotated[list[dict[str, Any]], Field(description="{name, type, shape?, len?, dtype?, repr}")]
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
