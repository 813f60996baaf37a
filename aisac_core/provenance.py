"""Provenance: one trace event per tool call of every server (the trace server reads these rows).

A :class:`~aisac_core.store.sql.TraceEvent` holds the run id, server, tool, the arguments (canonical
JSON) and their sha256, the result's sha256, status (``ok`` / ``tool_error`` / ``exception``), latency
in ms, the ids of the evidence anchors the result carried, and a timestamp. Vocabulary follows the
OpenTelemetry GenAI and MCP semantic conventions (``gen_ai.operation.name = execute_tool``,
``gen_ai.tool.name``, ``mcp.method.name = tools/call``): see :func:`otel_attributes`.

Run ids: a client passes ``run_id`` as a tool argument or in the request ``_meta``; otherwise calls
from one client join its current run until ``run_idle_seconds`` (default 30 min) pass without a call,
after which a new run starts (:class:`RunAssigner`).
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: arguments larger than this (canonical JSON, characters) are stored truncated; the sha256 is of the whole.
MAX_STORED_ARGS = 100_000


def sha256_json(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (sorted keys, compact separators, UTF-8)."""
    from .store.sql import dumps

    return hashlib.sha256(dumps(obj).encode("utf-8")).hexdigest()


def new_run_id() -> str:
    """A fresh run id: ``run-`` + UTC time + 6 random hex digits (sortable by start time)."""
    return "run-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


class RunAssigner:
    """Run ids for calls that bring none: one current run per client key, renewed after an idle gap."""

    def __init__(self, idle_seconds: float) -> None:
        self.idle = idle_seconds
        self._runs: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def run_for(self, client_key: str) -> str:
        """The current run of ``client_key`` (a new one after ``idle_seconds`` of silence)."""
        now = time.monotonic()
        with self._lock:
            cur = self._runs.get(client_key)
            run_id = cur[0] if cur and now - cur[1] <= self.idle else new_run_id()
            self._runs[client_key] = (run_id, now)
            return run_id


def anchor_ids(result: Any) -> list[str]:
    """Chunk ids of every evidence anchor found anywhere in a tool result (dicts with an ``anchor``)."""
    found: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            a = x.get("anchor")
            if isinstance(a, dict) and isinstance(a.get("chunk_id"), str):
                found.append(a["chunk_id"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(result)
    return list(dict.fromkeys(found))


#: results larger than this (canonical JSON, characters) are stored truncated; the sha256 is of the whole.
MAX_STORED_RESULT = 100_000


def record_tool_call(engine: "Engine", *, run_id: str, server: str, tool: str, arguments: dict[str, Any],
                     result: Any, status: str, error: str | None, latency_ms: float,
                     kind: str = "tool_call", parent_id: int | None = None) -> int:
    """Write one trace event; returns its id.

    ``result`` is the JSON-ready result (None on error), stored as canonical JSON (truncated past
    ``MAX_STORED_RESULT`` characters; ``result_sha256`` is of the whole). ``kind`` is ``tool_call`` (the
    middleware), ``role_step`` or ``model_call`` (the roles server: ``server="roles"``, ``tool`` = the role or
    step name); ``parent_id`` is the id of the enclosing event (a role step for the tool calls it made).
    """
    from sqlmodel import Session

    from .store.sql import TraceEvent, dumps

    args_json = dumps(arguments)
    ev = TraceEvent(
        run_id=run_id, server=server, tool=tool,
        arguments_json=args_json if len(args_json) <= MAX_STORED_ARGS else args_json[:MAX_STORED_ARGS],
        arguments_sha256=hashlib.sha256(args_json.encode("utf-8")).hexdigest(),
        result_sha256=None if result is None else sha256_json(result),
        status=status, error=(error or None) and error[:2000], latency_ms=round(latency_ms, 3),
        anchor_ids_json=dumps(anchor_ids(result) if result is not None else []),
        kind=kind, parent_id=parent_id,
        result_json=None if result is None else (lambda j: j if len(j) <= MAX_STORED_RESULT else j[:MAX_STORED_RESULT])(
            dumps(result)),
    )
    with Session(engine) as s:
        s.add(ev)
        s.commit()
        s.refresh(ev)
        assert ev.id is not None
        return ev.id


def list_events(engine: "Engine", run_id: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The latest trace events (optionally of one run), newest first, as JSON-ready dicts."""
    import json

    from sqlmodel import Session, select

    from .store.sql import TraceEvent

    with Session(engine) as s:
        q = select(TraceEvent).order_by(TraceEvent.id.desc()).limit(limit)
        if run_id:
            q = q.where(TraceEvent.run_id == run_id)
        rows = s.exec(q).all()
    return [{"id": r.id, "run_id": r.run_id, "server": r.server, "tool": r.tool,
             "arguments": json.loads(r.arguments_json) if r.arguments_json.startswith("{") else r.arguments_json,
             "arguments_sha256": r.arguments_sha256, "result_sha256": r.result_sha256, "status": r.status,
             "error": r.error, "latency_ms": r.latency_ms, "anchor_ids": json.loads(r.anchor_ids_json),
             "created_at": r.created_at.isoformat(), "kind": r.kind, "parent_id": r.parent_id} for r in rows]


def otel_attributes(server: str, tool: str, run_id: str) -> dict[str, str]:
    """OpenTelemetry span attributes of a tool call (GenAI + MCP semantic conventions)."""
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "mcp.method.name": "tools/call",
            "aisac.server": server, "aisac.run_id": run_id}
