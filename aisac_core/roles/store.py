"""The roles' own tables and their trace events.

- :class:`RoleModelCache`: every model response, keyed by the sha256 of its request (backend, model, messages,
  schema, temperature, seed), so a traced run replays without the model (``roles_llm=replay``).
- :class:`RoleSubmission`: outputs the host's own model submitted through ``roles_submit_route`` /
  ``roles_submit_plan`` / ``roles_submit_critique``, valid or not (``errors`` lists what was wrong).
- Role steps are :class:`~aisac_core.store.tables.TraceEvent` rows with ``kind="role_step"``, ``server="roles"``,
  ``tool`` = the step (router, planner, coordinator, researcher, evaluator, or a project node): :func:`begin_step`
  writes the row first (status ``running``) so the tool calls the step makes can name it as their parent, and
  :func:`finish_step` fills in the result (the router decision, the plan, the critiques) and the status.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlmodel import Session, col, select

from aisac_core.hashing import dumps, sha256_json
from aisac_core.jsontypes import JSONValue
from aisac_core.roles import NeedInput
from aisac_core.store.sql import lock
from aisac_core.store.tables import RoleModelCache, RoleSubmission, TraceEvent
from aisac_core.trace.recorder import MAX_STORED_RESULT, anchor_ids, record_tool_call

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import TracebackType

    from sqlalchemy.engine import Engine

    from aisac_core.roles.shapes import RunEvent, Submission


def request_hash(request: Mapping[str, object]) -> str:
    """sha256 of the canonical JSON of a model request."""
    return sha256_json(request)


def cache_get(engine: Engine, key: str) -> str | None:
    """The cached response text of request ``key``, or None."""
    with Session(engine) as s:
        row = s.get(RoleModelCache, key)
        return row.response_text if row else None


def cache_put(
    engine: Engine, key: str, *, backend: str, model: str, role: str, request: Mapping[str, object], response: str
) -> None:
    """Store (or replace) the response of request ``key``."""
    with Session(engine) as s:
        lock(s, "roles_cache", key)
        row = s.get(RoleModelCache, key) or RoleModelCache(
            request_sha256=key,
            backend=backend,
            model=model,
            role=role,
            request_json=dumps(request),
            response_text=response,
        )
        row.response_text = response
        s.add(row)
        s.commit()


def save_submission(
    engine: Engine, *, run_id: str, role: str, payload: object, errors: list[str], trace_event_id: int | None = None
) -> int:
    """Store a submission; returns its id."""
    with Session(engine) as s:
        row = RoleSubmission(
            run_id=run_id,
            role=role,
            payload_json=dumps(payload),
            valid=not errors,
            errors_json=dumps(errors),
            trace_event_id=trace_event_id,
        )
        s.add(row)
        s.commit()
        s.refresh(row)
        assert row.id is not None
        return row.id


def submissions(engine: Engine, run_id: str, role: str | None = None, valid_only: bool = False) -> list[Submission]:
    """Submissions of a run (oldest first): ``[{id, role, payload, valid, errors, trace_event_id, created_at}]``."""
    with Session(engine) as s:
        q = select(RoleSubmission).where(RoleSubmission.run_id == run_id).order_by(col(RoleSubmission.id))
        if role:
            q = q.where(RoleSubmission.role == role)
        if valid_only:
            q = q.where(RoleSubmission.valid == True)  # noqa: E712
        rows = s.exec(q).all()
    return [
        {
            "id": r.id,
            "role": r.role,
            "payload": json.loads(r.payload_json),
            "valid": r.valid,
            "errors": json.loads(r.errors_json),
            "trace_event_id": r.trace_event_id,
            "created_at": r.created_at.isoformat(),
        }
        for r in rows
    ]


class Step:
    """A role step in the trace: ``with Step(engine, run_id, "planner", inputs, parent_id) as st: st.result = ...``.

    The row is written on entry (status ``running``; ``st.id`` is the parent id for the step's tool calls and
    model calls) and completed on exit: status ``ok``; ``tool_error`` (bad input) or ``exception`` with the error when
    the body raised; ``input_required`` when a 2026-07-28 sampling request interrupted it (the tool is called again
    with the client's reply and writes a new step).
    """

    def __init__(
        self, engine: Engine, run_id: str, name: str, arguments: dict[str, object], parent_id: int | None = None
    ) -> None:
        self.engine, self.run_id, self.name, self.arguments, self.parent_id = engine, run_id, name, arguments, parent_id
        self.result: object = None  # the step's result, stored as JSON in the trace
        self.status = "ok"
        self.error: str | None = None
        self.id: int = 0

    def __enter__(self) -> Step:
        self._t0 = time.perf_counter()
        self.id = record_tool_call(
            self.engine,
            run_id=self.run_id,
            server="roles",
            tool=self.name,
            arguments=self.arguments,
            result=None,
            status="running",
            error=None,
            latency_ms=0.0,
            kind="role_step",
            parent_id=self.parent_id,
        )
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        if isinstance(exc, NeedInput):  # the client answers the model request, then re-enters the tool
            self.status, self.error = "input_required", "waiting for the client's sampling reply"
        elif exc is not None:
            self.status = "tool_error" if isinstance(exc, ValueError) else "exception"
            self.error = f"{type(exc).__name__}: {exc}"
        finish_step(self.engine, self.id, self.result, self.status, self.error, (time.perf_counter() - self._t0) * 1000)


def finish_step(
    engine: Engine, event_id: int, result: object, status: str, error: str | None, latency_ms: float
) -> None:
    """Complete a role-step event written by :func:`begin_step` / :class:`Step`: status, error, result, the
    measured ``latency_ms`` (ms, from entry to exit) and ``created_at`` moved from the step's start (when the row
    was written) to its end (start + latency), so a role step's row, like a tool call's, holds its end time and
    ``created_at - latency_ms`` is its true start."""

    with Session(engine) as s:
        ev = s.get(TraceEvent, event_id)
        if ev is None:
            return
        ev.created_at = ev.created_at + timedelta(milliseconds=latency_ms)
        ev.status = status
        ev.error = (error or None) and error[:2000]
        ev.latency_ms = round(latency_ms, 3)
        if result is not None:
            j = dumps(result)
            ev.result_json = j[:MAX_STORED_RESULT]
            ev.result_sha256 = sha256_json(result)
            ev.anchor_ids_json = dumps(anchor_ids(result))
        s.add(ev)
        s.commit()


def run_events(engine: Engine, run_id: str) -> list[RunEvent]:
    """Every trace event of a run, oldest first: ``[{id, kind, server, tool, status, error, parent_id, arguments,
    result}]`` (arguments/result parsed from their stored JSON; None when truncated or absent)."""

    def load(j: str | None) -> JSONValue:
        if not j:
            return None
        try:
            value: JSONValue = json.loads(j)
        except ValueError:
            return None
        return value

    with Session(engine) as s:
        rows = s.exec(select(TraceEvent).where(TraceEvent.run_id == run_id).order_by(col(TraceEvent.id))).all()
    return [
        {
            "id": r.id,
            "kind": r.kind,
            "server": r.server,
            "tool": r.tool,
            "status": r.status,
            "error": r.error,
            "parent_id": r.parent_id,
            "arguments": load(r.arguments_json),
            "result": load(r.result_json),
            "latency_ms": r.latency_ms,
        }
        for r in rows
    ]
