"""Recording: one trace event per tool call of every server (the trace server reads these rows).

A :class:`~aisac_core.store.tables.TraceEvent` holds the run id, server, tool, the arguments (canonical JSON) and
their sha256, the result's sha256, status (``ok`` / ``tool_error`` / ``exception`` / ``failed``: a result that
reports ``ok: false``), latency in ms, the ids of the evidence anchors the result carried, and a timestamp. Vocabulary follows the OpenTelemetry GenAI and MCP semantic
conventions (``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name``, ``mcp.method.name = tools/call``): see
:func:`aisac_core.trace.otel.otel_attributes`.

Run ids: a client passes ``run_id`` as a tool argument or in the request ``_meta``; otherwise calls from one client
(one host connection: the server decides the key, see ``aisac_servers.serving.suite.ProvenanceMiddleware``) join its
current run until ``run_idle_seconds`` (default 30 min) pass without a call, after which a new run starts
(:class:`RunAssigner`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert
from sqlmodel import Session, col, select

from aisac_core.evidence.anchor import find_anchors
from aisac_core.hashing import dumps, sha256_text
from aisac_core.store.tables import TraceEvent, utcnow
from aisac_core.trace.pins import pin_inputs

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: arguments larger than this (canonical JSON, characters) are stored truncated; the sha256 is of the whole.
MAX_STORED_ARGS = 100_000
#: results larger than this (canonical JSON, characters) are stored truncated; the sha256 is of the whole.
MAX_STORED_RESULT = 100_000

log = logging.getLogger("aisac.provenance")


def new_run_id() -> str:
    """A fresh run id: ``run-`` + UTC time + 6 random hex digits (sortable by start time)."""
    return "run-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


class RunAssigner:
    """Run ids for calls that bring none: one current run per client key (any string naming one client
    connection), renewed after an idle gap of that client (``idle_seconds``, seconds)."""

    def __init__(self, idle_seconds: float) -> None:
        self.idle = idle_seconds
        self._runs: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def run_for(self, client_key: str) -> str:
        """The current run of ``client_key`` (a new one after ``idle_seconds`` of silence). Clients idle past
        ``idle_seconds`` are forgotten now and then, so a long-lived owner serving many short host connections
        keeps a bounded table."""
        now = time.monotonic()
        with self._lock:
            cur = self._runs.get(client_key)
            run_id = cur[0] if cur and now - cur[1] <= self.idle else new_run_id()
            self._runs[client_key] = (run_id, now)
            if len(self._runs) > 1024:
                self._runs = {k: v for k, v in self._runs.items() if now - v[1] <= self.idle}
            return run_id


def anchor_ids(result: Any) -> list[str]:
    """Chunk ids of every evidence anchor found anywhere in a tool result (dicts with an ``anchor``), in order,
    without repeats."""
    return list(dict.fromkeys(a["chunk_id"] for a in find_anchors(result)))


def _raw_insert(engine: Engine, row: dict[str, Any]) -> int:
    """Insert a trace event row through the pooled DBAPI connection; returns its id.

    SQLite: ``BEGIN IMMEDIATE`` as everywhere in the store, ``created_at`` in SQLAlchemy's SQLite DATETIME text
    form (so ORM reads parse it alike), the id from ``lastrowid``. PostgreSQL (psycopg): ``INSERT ... RETURNING
    id`` in the driver's own transaction, ``created_at`` as the aware datetime.
    """
    vals = dict(row)
    cols = list(vals)
    sqlite = engine.dialect.name == "sqlite"
    if sqlite:
        vals["created_at"] = vals["created_at"].strftime("%Y-%m-%d %H:%M:%S.%f")
        sql = f"INSERT INTO traceevent ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    else:
        sql = f"INSERT INTO traceevent ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))}) RETURNING id"
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        try:
            if sqlite:
                cur.execute("BEGIN IMMEDIATE")
            try:
                cur.execute(sql, [vals[c] for c in cols])
                if sqlite:
                    event_id = int(cur.lastrowid)
                else:
                    returned = cur.fetchone()
                    assert returned is not None  # INSERT ... RETURNING id returns the one row inserted
                    event_id = int(returned[0])
                if sqlite:
                    cur.execute("COMMIT")
                else:
                    raw.commit()
            except BaseException:
                if sqlite:
                    cur.execute("ROLLBACK")
                else:
                    raw.rollback()
                raise
        finally:
            cur.close()
    finally:
        raw.close()
    return event_id


def record_tool_call(
    engine: Engine,
    *,
    run_id: str,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    result: Any,
    status: str,
    error: str | None,
    latency_ms: float,
    kind: str = "tool_call",
    parent_id: int | None = None,
    created_at: datetime | None = None,
) -> int:
    """Write one trace event; returns its id. ``created_at``: when the call ended (default now; an event written
    late from the local journal, :mod:`aisac_core.trace.journal`, keeps its own time).

    ``result`` is the JSON-ready result (None on error), stored as canonical JSON (truncated past
    ``MAX_STORED_RESULT`` characters; ``result_sha256`` is of the whole). ``kind`` is ``tool_call`` (the
    middleware), ``role_step`` or ``model_call`` (the roles server: ``server="roles"``, ``tool`` = the role or
    step name); a call whose result is a dict with ``ok: false`` (and no ``pending: true``) is recorded with
    status ``failed`` and the result's ``error`` (a code cell that raised returns normally); ``parent_id`` is the id of the enclosing event (a role step for the tool calls it made). A
    successful tool call also pins the input files its arguments name (:func:`aisac_core.trace.pins.pin_inputs`,
    best effort).
    """
    if status == "ok" and isinstance(result, dict) and result.get("ok") is False and not result.get("pending"):
        # the call returned, but its result reports a failure (a code cell that raised: data_code_run's
        # ``{ok: false, error_type, error}``): recorded as failed so every export says so. A long cell's
        # ``{ok: false, pending: true, job_id}`` has not failed: its outcome is a later data_code_job_status
        status = "failed"
        error = error or str(result.get("error") or result.get("error_type") or "the result reports ok: false")
    args_json = dumps(arguments)
    result_json = None if result is None else dumps(result)
    row = dict(
        run_id=run_id,
        server=server,
        tool=tool,
        arguments_json=args_json if len(args_json) <= MAX_STORED_ARGS else args_json[:MAX_STORED_ARGS],
        arguments_sha256=sha256_text(args_json),
        result_sha256=None if result_json is None else sha256_text(result_json),
        status=status,
        error=(error or None) and error[:2000],
        latency_ms=round(latency_ms, 3),
        anchor_ids_json=dumps(anchor_ids(result) if result is not None else []),
        kind=kind,
        parent_id=parent_id,
        created_at=created_at or utcnow(),
        result_json=None if result_json is None else result_json[:MAX_STORED_RESULT],
    )
    # the middleware pays this on every tool call: one DBAPI insert (SQLite 0.06 ms CPU, against 0.5 ms for a
    # SQLAlchemy Core insert and ~1 ms for the ORM, measured in bench/trace.py's set-up; PostgreSQL: bench/engines.py);
    # other engines a Core insert
    if engine.dialect.name in ("sqlite", "postgresql") and engine.dialect.driver in ("pysqlite", "psycopg"):
        event_id = _raw_insert(engine, row)
    else:
        with engine.begin() as conn:
            key = conn.execute(insert(TraceEvent).values(**row)).inserted_primary_key
            assert key is not None  # a single-row insert always has its primary key
            event_id = int(key[0])
    if kind == "tool_call" and status == "ok":
        try:
            pin_inputs(engine, run_id, event_id, arguments)
        except Exception:  # pinning inputs is best effort: the event itself is written
            log.exception("could not pin the input files of event %s", event_id)
    return event_id


def list_events(engine: Engine, run_id: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The latest trace events (optionally of one run), newest first, as JSON-ready dicts: ``[{id, run_id,
    server, tool, arguments, arguments_sha256, result_sha256, status, error, latency_ms, anchor_ids, created_at,
    kind, parent_id}]``."""
    with Session(engine) as s:
        q = select(TraceEvent).order_by(col(TraceEvent.id).desc()).limit(limit)
        if run_id:
            q = q.where(TraceEvent.run_id == run_id)
        rows = s.exec(q).all()
    return [
        {
            "id": r.id,
            "run_id": r.run_id,
            "server": r.server,
            "tool": r.tool,
            "arguments": json.loads(r.arguments_json) if r.arguments_json.startswith("{") else r.arguments_json,
            "arguments_sha256": r.arguments_sha256,
            "result_sha256": r.result_sha256,
            "status": r.status,
            "error": r.error,
            "latency_ms": r.latency_ms,
            "anchor_ids": json.loads(r.anchor_ids_json),
            "created_at": r.created_at.isoformat(),
            "kind": r.kind,
            "parent_id": r.parent_id,
        }
        for r in rows
    ]
