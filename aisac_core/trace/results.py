"""Result shapes of the trace (the trace tools' output schemas derive from them).

The core returns plain dicts; these ``TypedDict`` declarations say which keys they carry (pydantic reads them for
the MCP output schemas, mypy checks the functions that build them). Top-level results forbid undeclared keys;
``NotRequired`` marks keys only some results carry; ``| None`` where the core may give None. Times are ISO 8601
UTC strings; open-ended payloads (arguments, stored results, pins, bundles) stay ``Any``.
"""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

#: top-level results: every key declared (``additionalProperties: false``)
FORBID = ConfigDict(extra="forbid")


class RunRow(TypedDict):
    run_id: str
    started_at: str | None
    last_event_at: str | None
    events: int
    tool_calls: int
    errors: int
    servers: list[str]
    tools: list[str]
    status: str
    active: bool


@with_config(FORBID)
class Runs(TypedDict):
    runs: list[RunRow]
    total: int
    offset: int
    next_offset: int | None


class RunSummary(TypedDict):
    run_id: str
    started_at: str
    first_event_at: str
    last_event_at: str
    duration_s: float
    events: int
    by_kind: dict[str, int]
    by_status: dict[str, int]
    errors: int
    servers: list[str]
    status: str
    active: bool


class ErrorRow(TypedDict):
    id: int
    tool: str
    status: str
    error: str | None


class InputPin(TypedDict):
    path: str
    sha256: str | None
    size: int | None
    source: str | None


class _EventKeys(TypedDict):
    # the keys of every recorded event (EventDict, EventDetail)
    id: int
    run_id: str
    kind: str
    parent_id: int | None
    server: str
    tool: str
    status: str
    error: str | None
    latency_ms: float | None
    started_at: str
    created_at: str
    arguments: Any
    arguments_sha256: str
    result_sha256: str | None
    anchor_ids: list[str]
    result_summary: str


class EventDict(_EventKeys):
    """One recorded event (:func:`aisac_core.trace.queries.event_dict`); ``result`` and ``result_truncated`` only
    with the stored result."""

    result: NotRequired[Any]
    result_truncated: NotRequired[bool]


@with_config(FORBID)
class EventDetail(_EventKeys):
    result: Any
    result_truncated: bool
    children: list[int]
    inputs: list[InputPin]


class Event(TypedDict):
    """detail=full adds the fields of trace_get_event"""

    id: int
    tool: str
    status: str
    latency_ms: float | None
    result_summary: str
    kind: NotRequired[str]
    arguments: NotRequired[Any]
    error: NotRequired[str | None]
    anchors: NotRequired[int]
    children: NotRequired[list[Event]]
    run_id: NotRequired[str]
    parent_id: NotRequired[int | None]
    server: NotRequired[str]
    started_at: NotRequired[str]
    created_at: NotRequired[str]
    arguments_sha256: NotRequired[str]
    result_sha256: NotRequired[str | None]
    anchor_ids: NotRequired[list[str]]
    result: NotRequired[Any]
    result_truncated: NotRequired[bool]


class RunData(TypedDict):
    """A run as :meth:`aisac_core.trace.queries.RunQueries.get_run` reads it: ``tree`` (nested event dicts with ``children``),
    or ``events`` (flat, newer than ``after_id``)."""

    run: RunSummary
    pins: dict[str, Any] | None
    last_id: int
    errors: list[ErrorRow]
    tree: NotRequired[list[dict[str, Any]]]
    events: NotRequired[list[EventDict]]


@with_config(FORBID)
class Run(TypedDict):
    run: RunSummary
    errors: list[ErrorRow]
    last_id: int
    tree: list[Event]
    report_uri: str
    detail: str
    pins: NotRequired[dict[str, Any] | None]


@with_config(FORBID)
class Exported(TypedDict):
    """json: bundle; markdown: markdown; html: bytes; prov: prov; rocrate: zip, summary."""

    format: str
    path: str
    bundle: NotRequired[dict[str, Any]]
    markdown: NotRequired[str]
    bytes: NotRequired[int]
    prov: NotRequired[dict[str, Any]]
    zip: NotRequired[str]
    summary: NotRequired[dict[str, Any]]


class AnchorCheck(TypedDict):
    chunk_id: str | None
    path: str | None
    page: int | None
    event_id: int
    status: str
    anchor_status: str
    detail: str | None


class InputCheck(TypedDict):
    path: str
    status: str
    sha256: str | None
    sha256_now: str | None
    source: str | None
    event_id: int | None


class TraceGap(TypedDict):
    """Trace events not in the store (:mod:`aisac_core.trace.gaps`): ``lost`` never will be (journal full, event
    rejected), ``pending`` still wait in the local journal; ``runs``: the runs concerned (at most 20); ``detail``:
    one line for a person, empty when there is no gap."""

    lost: int
    pending: int
    runs: list[str]
    detail: str


@with_config(FORBID)
class Verified(TypedDict):
    run_id: str
    status: str
    counts: dict[str, int]
    anchors: list[AnchorCheck]
    inputs: list[InputCheck]
    gap: TraceGap


class ReplayStep(TypedDict):
    event_id: int
    tool: str
    status: str
    original_sha256: str | None
    replay_sha256: NotRequired[str | None]
    reason: NotRequired[str]
    changes: NotRequired[list[str]]
    error: NotRequired[str | None]
    llm: NotRequired[str]


@with_config(FORBID)
class Replayed(TypedDict):
    run_id: str
    replay_run_id: str
    status: str
    counts: dict[str, int]
    steps: list[ReplayStep]
    pins_changed: list[str]
    message: NotRequired[str]


class DiffStep(TypedDict):
    status: str
    tool: str
    event_a: int | None
    event_b: int | None
    changes: NotRequired[list[str]]


class PinChange(TypedDict):
    pin: str
    a: Any
    b: Any


@with_config(FORBID)
class Diff(TypedDict):
    run_a: str
    run_b: str
    counts: dict[str, int]
    steps: list[DiffStep]
    pins_changed: list[PinChange]


class ToolStats(TypedDict):
    tool: str
    calls: int
    errors: int
    error_rate: float
    p50_ms: float
    p95_ms: float
    max_ms: float


@with_config(FORBID)
class Stats(TypedDict):
    runs: int
    events: int
    by_kind: dict[str, int]
    by_status: dict[str, int]
    first_event_at: str | None
    last_event_at: str | None
    tools: list[ToolStats]


class PruneFailure(TypedDict):
    run_id: str
    error: str


@with_config(FORBID)
class Pruned(TypedDict):
    cutoff: str | None
    runs: list[str]
    exported: list[str]
    deleted_events: int
    dry_run: bool
    failed: list[PruneFailure]
