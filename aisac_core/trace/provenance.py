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

from aisac_core.store.tables import TraceInput, TraceRunPin
from aisac_core.evidence.anchor import find_anchors
from aisac_core.hashing import sha256_json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: arguments larger than this (canonical JSON, characters) are stored truncated; the sha256 is of the whole.
MAX_STORED_ARGS = 100_000


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
    """Chunk ids of every evidence anchor found anywhere in a tool result (dicts with an ``anchor``), in order,
    without repeats."""
    return list(dict.fromkeys(a["chunk_id"] for a in find_anchors(result)))


#: results larger than this (canonical JSON, characters) are stored truncated; the sha256 is of the whole.
MAX_STORED_RESULT = 100_000


def _sqlite_insert(engine: "Engine", row: dict[str, Any]) -> int:
    """Insert a trace event row through the pooled DBAPI connection (``BEGIN IMMEDIATE`` as everywhere in the
    store); ``created_at`` in SQLAlchemy's SQLite DATETIME text form, so ORM reads parse it alike."""
    vals = dict(row)
    vals["created_at"] = vals["created_at"].strftime("%Y-%m-%d %H:%M:%S.%f")
    cols = list(vals)
    sql = f"INSERT INTO traceevent ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.execute(sql, [vals[c] for c in cols])
            event_id = int(cur.lastrowid)
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        finally:
            cur.close()
    finally:
        raw.close()
    return event_id


def record_tool_call(engine: "Engine", *, run_id: str, server: str, tool: str, arguments: dict[str, Any],
                     result: Any, status: str, error: str | None, latency_ms: float,
                     kind: str = "tool_call", parent_id: int | None = None) -> int:
    """Write one trace event; returns its id.

    ``result`` is the JSON-ready result (None on error), stored as canonical JSON (truncated past
    ``MAX_STORED_RESULT`` characters; ``result_sha256`` is of the whole). ``kind`` is ``tool_call`` (the
    middleware), ``role_step`` or ``model_call`` (the roles server: ``server="roles"``, ``tool`` = the role or
    step name); ``parent_id`` is the id of the enclosing event (a role step for the tool calls it made).
    """
    from aisac_core.store.tables import TraceEvent, utcnow
    from aisac_core.hashing import dumps

    args_json = dumps(arguments)
    result_json = None if result is None else dumps(result)
    row = dict(
        run_id=run_id, server=server, tool=tool,
        arguments_json=args_json if len(args_json) <= MAX_STORED_ARGS else args_json[:MAX_STORED_ARGS],
        arguments_sha256=hashlib.sha256(args_json.encode("utf-8")).hexdigest(),
        result_sha256=None if result_json is None else hashlib.sha256(result_json.encode("utf-8")).hexdigest(),
        status=status, error=(error or None) and error[:2000], latency_ms=round(latency_ms, 3),
        anchor_ids_json=dumps(anchor_ids(result) if result is not None else []),
        kind=kind, parent_id=parent_id, created_at=utcnow(),
        result_json=None if result_json is None else result_json[:MAX_STORED_RESULT],
    )
    # the middleware pays this on every tool call: on SQLite one DBAPI insert (0.06 ms CPU, against 0.5 ms for a
    # SQLAlchemy Core insert and ~1 ms for the ORM, measured in bench/trace.py's set-up); elsewhere a Core insert
    if engine.dialect.name == "sqlite":
        event_id = _sqlite_insert(engine, row)
    else:
        table = TraceEvent.__table__  # type: ignore[attr-defined]
        with engine.begin() as conn:
            event_id = int(conn.execute(table.insert().values(**row)).inserted_primary_key[0])
    if kind == "tool_call" and status == "ok":
        try:
            pin_inputs(engine, run_id, event_id, arguments)
        except Exception:  # pinning inputs is best effort: the event itself is written
            import logging

            logging.getLogger("aisac.provenance").exception("could not pin the input files of event %s", event_id)
    return event_id


def list_events(engine: "Engine", run_id: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The latest trace events (optionally of one run), newest first, as JSON-ready dicts."""
    import json

    from sqlmodel import Session, select

    from aisac_core.store.tables import TraceEvent

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


# ==================================================================================================
# Trace server support (issue 8): pins, queries, exports, verification, replay, diff, stats, retention
# ==================================================================================================

import json as _json  # noqa: E402
import logging as _logging  # noqa: E402
import os as _os  # noqa: E402
import re as _re  # noqa: E402
from datetime import datetime as _dt, timedelta as _td, timezone as _tz  # noqa: E402
from pathlib import Path as _Path  # noqa: E402


from aisac_core.errors import AisacError  # noqa: E402

_log = _logging.getLogger("aisac.provenance")

#: export formats of :func:`export_run`.
EXPORT_FORMATS = ("json", "markdown", "prov", "rocrate")
#: bundle format id written into every JSON export (bump on incompatible change).
BUNDLE_FORMAT = "aisac-trace-bundle/1"
#: statuses that count as failures. A role step is ``running`` while it works and may end ``input_required``
#: (roles, issue 7): neither is an error.
ERROR_STATUSES = ("tool_error", "exception")
#: a run whose last event is younger than this many seconds is shown as ``active`` (still being written).
ACTIVE_SECONDS = 60.0
#: result keys that measure time and change on every call: ignored when replay and diff compare results.
#: ``run_id``, ``event_id`` and ``job_id`` in a result name the recording, not its content.
VOLATILE_KEYS = frozenset({"took_ms", "latency_ms", "elapsed_ms", "duration_ms", "elapsed_s", "took_s", "seconds",
                           "created_at", "started_at", "finished_at", "updated_at", "timestamp", "run_id", "event_id",
                           "job_id"})
#: files larger than this are pinned by size and mtime only (not hashed) when a tool call names them.
MAX_HASH_BYTES = 512 * 1024 * 1024
#: folder arguments pin at most this many indexed files (from the manifest, no hashing).
MAX_FOLDER_PINS = 2000


class TraceError(AisacError, ValueError):
    """Bad trace request (unknown run or event, bad format or filter); the message says what to pass instead."""


_tables_ready: set[int] = set()


def _ensure(engine: "Engine") -> None:
    if id(engine) not in _tables_ready:
        from aisac_core.store.sql import ensure_tables

        ensure_tables(engine, TraceInput, TraceRunPin)
        _tables_ready.add(id(engine))


# ---------------------------------------------------------------------------------------------- pins

def _file_sha256(path: _Path) -> str:
    from aisac_core.hashing import sha256_file

    return sha256_file(path)


def _path_strings(arguments: Any) -> list[str]:
    """Absolute (or ``~``) path-like strings among the argument values (top level and lists)."""
    out: list[str] = []
    vals = arguments.values() if isinstance(arguments, dict) else []
    for v in vals:
        items = v if isinstance(v, list) else [v]
        for x in items:
            if isinstance(x, str) and 1 < len(x) < 4096 and (x.startswith("/") or x.startswith("~")) and "\n" not in x:
                out.append(x)
    return out


#: sha256 of input files by (path, size, mtime_ns): a file named by many calls is read once while unchanged.
_HASHES: dict[tuple[str, int, int], str] = {}


def pin_inputs(engine: "Engine", run_id: str, event_id: int, arguments: dict[str, Any]) -> int:
    """Record the input files a tool call named: files are hashed (sha256), folders pinned through the index
    manifest rows under them (at most ``MAX_FOLDER_PINS``). Only absolute or ``~`` paths that exist are pinned,
    and only for calls that succeeded (a tool refuses paths outside its roots). A file unchanged in size and
    mtime since it was last hashed in this process is not read again. Returns the number of rows written."""
    from sqlmodel import Session, select

    from aisac_core.store.tables import Document

    paths = _path_strings(arguments)
    if not paths:
        return 0
    _ensure(engine)
    rows: list[TraceInput] = []
    for raw in paths:
        p = _Path(raw).expanduser()
        try:
            if p.is_file():
                st = p.stat()
                key = (str(p), st.st_size, st.st_mtime_ns)
                sha = _HASHES.get(key)
                if sha is None and st.st_size <= MAX_HASH_BYTES:
                    sha = _file_sha256(p)
                    if len(_HASHES) > 10_000:
                        _HASHES.clear()
                    _HASHES[key] = sha
                rows.append(TraceInput(run_id=run_id, event_id=event_id, path=str(p.resolve()), sha256=sha,
                                       size=st.st_size, mtime_ns=st.st_mtime_ns,
                                       source="hashed" if sha else "unhashed"))
            elif p.is_dir():
                prefix = str(p.resolve()).rstrip("/") + "/"
                with Session(engine) as s:
                    docs = s.exec(select(Document).where(Document.path.startswith(prefix))  # type: ignore[attr-defined]
                                  .limit(MAX_FOLDER_PINS)).all()
                rows += [TraceInput(run_id=run_id, event_id=event_id, path=d.path, sha256=d.sha256, size=d.size,
                                    mtime_ns=d.mtime_ns, source="manifest") for d in docs]
        except OSError:
            continue
    if rows:
        with Session(engine) as s:
            s.add_all(rows)
            s.commit()
    return len(rows)


def config_pins(core: Any) -> dict[str, Any]:
    """The configuration a run's results depend on: package versions, embedding and sparse models, index
    fingerprint (parser revision + chunker + models), PDF pipeline, retrieval constants and every setting whose
    name does not look secret (``key``, ``token``, ``secret``, ``password`` are left out)."""
    from importlib.metadata import PackageNotFoundError, version

    def ver(pkg: str) -> str | None:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return None

    s = core.settings
    pins: dict[str, Any] = {"packages": {p: ver(p) for p in ("aisac", "fastmcp", "mcp", "docling-slim", "fastembed",
                                                              "qdrant-edge-py", "qdrant-client")}}
    try:
        from aisac_core.rag import search as retrieval
        from aisac_core.rag.documents import PARSER_REVISION
        from aisac_core.rag.embeddings import SPARSE_MODEL_ID
        from aisac_core.rag.indexer import fingerprint

        pins.update(embedding_model=s.embedding_model, embedding_model_id=core.embedder.model_id,
                    sparse_model=SPARSE_MODEL_ID, parser_revision=PARSER_REVISION, index_fingerprint=fingerprint(core),
                    pdf_pipeline=s.pdf_pipeline, chunk_max_tokens=s.chunk_max_tokens,
                    retrieval={k: getattr(retrieval, k) for k in ("FUSION", "HYBRID_ALPHA", "PREFETCH", "RRF_K",
                                                                 "HYBRID_WEIGHTS", "MAX_K") if hasattr(retrieval, k)})
    except Exception as exc:  # pins are informative; a failure must not block a tool call
        pins["error"] = f"{type(exc).__name__}: {exc}"
    secret = _re.compile(r"key|token|secret|password", _re.I)
    pins["settings"] = {k: (str(v) if isinstance(v, _Path) else [str(x) for x in v] if isinstance(v, list) else v)
                        for k, v in s.model_dump().items() if not secret.search(k)}
    from aisac_core.hashing import dumps

    return _json.loads(dumps(pins))


_pinned: set[tuple[int, str, str]] = set()


def pin_run(core: Any, run_id: str) -> bool:
    """Write the configuration pins of ``run_id`` if the run has none yet; True when written. Called by the
    middleware for each run id the first time this process sees it."""
    from sqlmodel import Session

    from aisac_core.hashing import dumps

    key = (id(core.engine), str(core.engine.url), run_id)
    if key in _pinned:
        return False
    _ensure(core.engine)
    with Session(core.engine) as s:
        if s.get(TraceRunPin, run_id) is not None:
            _pinned.add(key)
            return False
    pins = config_pins(core)
    with Session(core.engine) as s:
        if s.get(TraceRunPin, run_id) is None:
            s.add(TraceRunPin(run_id=run_id, pins_json=dumps(pins)))
            s.commit()
    _pinned.add(key)
    return True


def run_pins(engine: "Engine", run_id: str) -> dict[str, Any] | None:
    """The recorded pins of a run, or None."""
    from sqlmodel import Session

    _ensure(engine)
    with Session(engine) as s:
        row = s.get(TraceRunPin, run_id)
    return _json.loads(row.pins_json) if row else None


# ---------------------------------------------------------------------------------------------- OpenTelemetry

_otel: dict[str, Any] = {"checked": False, "tracer": None, "provider": None}


def configure_otel(provider: Any | None = None) -> Any | None:
    """Set up span export. With ``provider`` (an ``opentelemetry.sdk.trace.TracerProvider``, e.g. with an
    ``InMemorySpanExporter`` in tests) spans go there; ``configure_otel(None)`` re-reads the environment.

    From the environment (the standard variables of the OpenTelemetry SDK): export is on when
    ``OTEL_TRACES_EXPORTER`` is set to something other than ``none`` (``console`` writes to stderr, never
    stdout; ``otlp`` needs the ``opentelemetry-exporter-otlp`` package), or when ``OTEL_EXPORTER_OTLP_ENDPOINT``
    / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; off when ``OTEL_SDK_DISABLED=true``. The service name is
    ``OTEL_SERVICE_NAME`` (default ``aisac``). Returns the tracer, or None when export is off."""
    _otel.update(checked=True, tracer=None, provider=None)
    if provider is not None:
        _otel.update(tracer=provider.get_tracer("aisac"), provider=provider)
        return _otel["tracer"]
    env = _os.environ
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    exporter_name = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not exporter_name and (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        exporter_name = "otlp"
    if not exporter_name or exporter_name == "none":
        return None
    try:
        import sys

        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        if exporter_name == "console":
            exporter: Any = ConsoleSpanExporter(out=sys.stderr)
        elif exporter_name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError:
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # type: ignore
            exporter = OTLPSpanExporter()
        else:
            _log.warning("OTEL_TRACES_EXPORTER=%s is not supported by aisac (use console or otlp): spans off",
                         exporter_name)
            return None
        prov = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "aisac")}))
        prov.add_span_processor(BatchSpanProcessor(exporter))
        _otel.update(tracer=prov.get_tracer("aisac"), provider=prov)
    except ImportError as exc:
        _log.warning("OpenTelemetry span export requested but unavailable (%s): pip install "
                     "opentelemetry-exporter-otlp", exc)
    return _otel["tracer"]


def otel_enabled() -> bool:
    """True when span export is configured (checks the environment once)."""
    if not _otel["checked"]:
        configure_otel(None)
    return _otel["tracer"] is not None


def emit_span(*, server: str, tool: str, run_id: str, start_ns: int, end_ns: int, status: str,
              error: str | None = None, event_id: int | None = None, parent_id: int | None = None) -> None:
    """Export one span for a finished tool call (no-op when span export is off). Name ``execute_tool {tool}``,
    kind SERVER, attributes :func:`otel_attributes` + ``aisac.event_id``, ``aisac.status``, ``aisac.parent_id``,
    and on failure ``error.type`` (the aisac status) with span status ERROR (OpenTelemetry GenAI and MCP
    semantic conventions)."""
    if not otel_enabled():
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    attrs: dict[str, Any] = {**otel_attributes(server, tool, run_id), "aisac.status": status}
    if event_id is not None:
        attrs["aisac.event_id"] = event_id
    if parent_id is not None:
        attrs["aisac.parent_id"] = parent_id
    if status != "ok":
        attrs["error.type"] = status
    span = _otel["tracer"].start_span(f"execute_tool {tool}", kind=SpanKind.SERVER, attributes=attrs,
                                      start_time=start_ns)
    if status != "ok":
        span.set_status(Status(StatusCode.ERROR, (error or status)[:500]))
    span.end(end_time=end_ns)


# ---------------------------------------------------------------------------------------------- queries

def _naive_utc(value: str | _dt | None, what: str) -> _dt | None:
    """ISO 8601 string / datetime -> timezone-aware UTC datetime (a value without zone is taken as UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = _dt.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise TraceError(f"{what} must be an ISO 8601 date or time such as 2026-03-14 or 2026-03-14T09:15:00Z, "
                             f"got {value!r}") from exc
    return value.astimezone(_tz.utc) if value.tzinfo is not None else value.replace(tzinfo=_tz.utc)


def _iso(d: _dt | None) -> str | None:
    if d is None:
        return None
    return (d if d.tzinfo else d.replace(tzinfo=_tz.utc)).isoformat()


def _aware(d: _dt) -> _dt:
    return d if d.tzinfo else d.replace(tzinfo=_tz.utc)


def _parse_json(text: str | None) -> tuple[Any, bool]:
    """(value, complete): parsed JSON, or (the raw text, False) when truncated/unparseable."""
    if text is None:
        return None, True
    try:
        return _json.loads(text), True
    except ValueError:
        return text, False


def summarize_result(result: Any, limit: int = 240) -> str:
    """A one-line summary of a result: scalar fields, list lengths (``hits[5]``), the text start of lists of text."""
    if result is None:
        return ""
    if isinstance(result, dict):
        parts = []
        for k, v in result.items():
            if isinstance(v, list):
                parts.append(f"{k}[{len(v)}]")
            elif isinstance(v, dict):
                parts.append(f"{k}{{{len(v)}}}")
            elif isinstance(v, str):
                parts.append(f"{k}={v[:60]!r}" if len(v) > 60 else f"{k}={v!r}")
            else:
                parts.append(f"{k}={v}")
        s = ", ".join(parts)
    elif isinstance(result, list):
        s = f"[{len(result)} items] " + " ".join(str(x)[:120] for x in result[:2])
    else:
        s = str(result)
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


#: result summaries by (event id, result sha256): events never change once written, and live pages re-read a run
#: on every update
_SUMMARIES: dict[tuple[int, str | None], str] = {}


def event_dict(r: Any, *, full: bool = True) -> dict[str, Any]:
    """A TraceEvent row as a JSON-ready dict: parsed arguments, result (``full``) or result summary, start time
    (``created_at`` minus the latency), ``result_truncated`` when the stored result was cut at 100k chars."""
    args, _ = _parse_json(r.arguments_json)
    key = (r.id, r.result_sha256)
    if full:
        result, complete = _parse_json(r.result_json)
        summary = _SUMMARIES.get(key) or summarize_result(result)
    else:
        summary = _SUMMARIES.get(key)
        if summary is None:
            summary = summarize_result(_parse_json(r.result_json)[0])
    if len(_SUMMARIES) > 50_000:
        _SUMMARIES.clear()
    _SUMMARIES[key] = summary
    created = _aware(r.created_at)
    d: dict[str, Any] = {
        "id": r.id, "run_id": r.run_id, "kind": r.kind, "parent_id": r.parent_id, "server": r.server, "tool": r.tool,
        "status": r.status, "error": r.error, "latency_ms": r.latency_ms,
        "started_at": (created - _td(milliseconds=r.latency_ms or 0)).isoformat(), "created_at": created.isoformat(),
        "arguments": args, "arguments_sha256": r.arguments_sha256, "result_sha256": r.result_sha256,
        "anchor_ids": _json.loads(r.anchor_ids_json or "[]"), "result_summary": summary,
    }
    if full:
        d["result"] = result
        d["result_truncated"] = not complete
    return d


def _events(engine: "Engine", run_id: str) -> list[Any]:
    """A run's events in id order as SQLAlchemy rows (attribute access like TraceEvent; no ORM instances, which
    cost ~4x more for a 1,000-event run)."""
    from sqlalchemy import select

    from aisac_core.store.tables import TraceEvent

    t = TraceEvent.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        return list(conn.execute(select(t).where(t.c.run_id == run_id).order_by(t.c.id)).all())


def _require_events(engine: "Engine", run_id: str) -> list[Any]:
    if not isinstance(run_id, str) or not run_id.strip():
        raise TraceError("run_id must be a non-empty string: trace_list_runs lists the run ids")
    rows = _events(engine, run_id)
    if not rows:
        raise TraceError(f"unknown run {run_id!r}: no trace events carry this run id; trace_list_runs lists runs "
                         "(newest first)")
    return rows


def list_runs(engine: "Engine", *, since: str | _dt | None = None, until: str | _dt | None = None,
              server: str | None = None, status: str | None = None, text: str | None = None, limit: int = 20,
              offset: int = 0) -> dict[str, Any]:
    """Runs, newest first (by last event), with paging.

    Args:
        since / until: ISO 8601; a run is listed when its last event is at/after ``since`` and its first event
            at/before ``until``.
        server: only runs with at least one event of this server namespace (``rag``, ``memory``, ``roles``...).
        status: ``ok`` (no failed event), ``errors`` (at least one ``tool_error`` / ``exception``) or ``active``
            (an event in the last ``ACTIVE_SECONDS`` = 60 s).
        text: case-insensitive substring of the run id, a tool name or the arguments JSON.
        limit: 1..500 runs per page; offset: runs to skip.

    Returns ``{runs: [{run_id, started_at, last_event_at, events, tool_calls, errors, servers, tools, status,
    active}], total, offset, next_offset}`` (``next_offset`` None on the last page).

    Raises TraceError for a bad date, status or paging value.
    """
    from sqlalchemy import case, func
    from sqlmodel import Session, select

    from aisac_core.store.tables import TraceEvent as T

    if not 1 <= int(limit) <= 500:
        raise TraceError(f"limit must be 1..500, got {limit}")
    if int(offset) < 0:
        raise TraceError(f"offset must be >= 0, got {offset}")
    if status not in (None, "", "ok", "errors", "active"):
        raise TraceError(f"status must be ok, errors or active, got {status!r}")
    since_d, until_d = _naive_utc(since, "since"), _naive_utc(until, "until")
    n_err = func.sum(case((T.status.in_(ERROR_STATUSES), 1), else_=0))  # type: ignore[attr-defined]
    q = select(T.run_id, func.min(T.created_at), func.max(T.created_at), func.count(), n_err,
               func.sum(case((T.kind == "tool_call", 1), else_=0))).group_by(T.run_id)
    conds = []
    if server:
        conds.append(T.run_id.in_(select(T.run_id).where(T.server == server)))  # type: ignore[attr-defined]
    if text:
        like = f"%{text.lower()}%"
        conds.append(T.run_id.in_(select(T.run_id).where(  # type: ignore[attr-defined]
            func.lower(T.run_id).like(like) | func.lower(T.tool).like(like) | func.lower(T.arguments_json).like(like))))
    for c in conds:
        q = q.where(c)
    having = []
    if since_d:
        having.append(func.max(T.created_at) >= since_d)
    if until_d:
        having.append(func.min(T.created_at) <= until_d)
    if status == "ok":
        having.append(n_err == 0)
    elif status == "errors":
        having.append(n_err > 0)
    elif status == "active":
        having.append(func.max(T.created_at) >= _dt.now(_tz.utc) - _td(seconds=ACTIVE_SECONDS))
    for h in having:
        q = q.having(h)
    with Session(engine) as s:
        total = s.exec(select(func.count()).select_from(q.subquery())).one()
        rows = s.exec(q.order_by(func.max(T.created_at).desc()).offset(int(offset)).limit(int(limit))).all()
        ids = [r[0] for r in rows]
        detail: dict[str, tuple[set[str], set[str]]] = {i: (set(), set()) for i in ids}
        if ids:
            for rid, srv, tool in s.exec(select(T.run_id, T.server, T.tool).where(
                    T.run_id.in_(ids)).distinct()).all():  # type: ignore[attr-defined]
                detail[rid][0].add(srv)
                detail[rid][1].add(tool)
    now = _dt.now(_tz.utc)
    runs = []
    for rid, first, last, n, errs, calls in rows:
        runs.append({"run_id": rid, "started_at": _iso(first), "last_event_at": _iso(last), "events": n,
                     "tool_calls": int(calls or 0), "errors": int(errs or 0), "servers": sorted(detail[rid][0]),
                     "tools": sorted(detail[rid][1]), "status": "errors" if errs else "ok",
                     "active": (now - _aware(last)).total_seconds() < ACTIVE_SECONDS})
    nxt = int(offset) + len(runs)
    return {"runs": runs, "total": int(total), "offset": int(offset), "next_offset": nxt if nxt < total else None}


def run_summary(rows: list[Any]) -> dict[str, Any]:
    """Counts and times of a run's events (rows ordered by id)."""
    first, last = _aware(rows[0].created_at), _aware(rows[-1].created_at)
    start = min(_aware(r.created_at) - _td(milliseconds=r.latency_ms or 0) for r in rows)
    by_kind: dict[str, int] = {}
    by_status: dict[str, int] = {}
    for r in rows:
        by_kind[r.kind] = by_kind.get(r.kind, 0) + 1
        by_status[r.status] = by_status.get(r.status, 0) + 1
    errors = sum(v for k, v in by_status.items() if k in ERROR_STATUSES)
    return {"run_id": rows[0].run_id, "started_at": start.isoformat(), "first_event_at": first.isoformat(),
            "last_event_at": last.isoformat(), "duration_s": round((last - start).total_seconds(), 3),
            "events": len(rows), "by_kind": by_kind, "by_status": by_status, "errors": errors,
            "servers": sorted({r.server for r in rows}), "status": "errors" if errors else "ok",
            "active": (_dt.now(_tz.utc) - last).total_seconds() < ACTIVE_SECONDS}


def build_tree(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nest event dicts by ``parent_id`` (``children`` lists, in id order); an event whose parent is not in the
    run is a root. Returns the roots."""
    by_id = {e["id"]: {**e, "children": []} for e in events}
    roots = []
    for e in by_id.values():
        parent = by_id.get(e["parent_id"]) if e["parent_id"] is not None else None
        (parent["children"] if parent is not None and parent is not e else roots).append(e)
    return roots


#: keys of an event that the compact tree (``detail=False``) keeps.
COMPACT_KEYS = ("id", "kind", "tool", "status", "latency_ms", "arguments", "result_summary")
#: in the compact tree, arguments whose JSON is longer than this are shown as a truncated JSON string.
COMPACT_ARGS_CHARS = 300


def compact_event(e: dict[str, Any]) -> dict[str, Any]:
    """The compact form of an event dict: :data:`COMPACT_KEYS`, plus ``error`` and ``anchors`` (count) when
    present, and ``children`` only when there are any (the nesting gives the parent); long arguments become a
    truncated JSON string."""
    c = {k: e[k] for k in COMPACT_KEYS}
    a = _json.dumps(c["arguments"], ensure_ascii=False) if not isinstance(c["arguments"], str) else c["arguments"]
    if len(a) > COMPACT_ARGS_CHARS:
        c["arguments"] = a[: COMPACT_ARGS_CHARS - 1] + "…"
    if e.get("error"):
        c["error"] = e["error"]
    if e.get("anchor_ids"):
        c["anchors"] = len(e["anchor_ids"])
    return c


def get_run(engine: "Engine", run_id: str, *, include_results: bool = False, detail: bool = True,
            after_id: int = 0) -> dict[str, Any]:
    """One run: ``{run: summary, pins, tree: [event + children...], errors: [failed events], last_id}``.

    Events carry arguments, hashes and a result summary; ``include_results`` adds the stored result;
    ``detail=False`` gives the compact form (:func:`compact_event`: no hashes, timestamps, run id or parent id;
    long arguments truncated; ``children`` only where there are any), for large runs over MCP.
    ``after_id`` > 0 returns only events with a larger id as a flat ``events`` list (for live updates).
    Raises TraceError for an unknown run."""
    rows = _require_events(engine, run_id)
    events = [event_dict(r, full=include_results) for r in rows]
    out: dict[str, Any] = {"run": run_summary(rows), "pins": run_pins(engine, run_id), "last_id": rows[-1].id,
                           "errors": [{k: e.get(k) for k in ("id", "tool", "status", "error")} for e in events
                                      if e["status"] in ERROR_STATUSES]}
    if after_id:
        out["events"] = [e for e in events if e["id"] > after_id]
    else:
        tree = build_tree(events)
        out["tree"] = tree if detail or include_results else _compact_tree(tree)
    return out


def _compact_tree(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**compact_event(n), **({"children": _compact_tree(n["children"])} if n["children"] else {})}
            for n in nodes]


def get_event(engine: "Engine", event_id: int) -> dict[str, Any]:
    """One event with its full stored result, its input-file pins and the ids of its children. Raises TraceError
    when unknown."""
    from sqlmodel import Session, select

    from aisac_core.store.tables import TraceEvent

    _ensure(engine)
    with Session(engine) as s:
        r = s.get(TraceEvent, int(event_id))
        if r is None:
            raise TraceError(f"unknown event id {event_id}: trace_get_run lists a run's event ids")
        children = s.exec(select(TraceEvent.id).where(TraceEvent.parent_id == r.id).order_by(TraceEvent.id)).all()
        inputs = s.exec(select(TraceInput).where(TraceInput.event_id == r.id)).all()
    d = event_dict(r)
    d["children"] = list(children)
    d["inputs"] = [{"path": i.path, "sha256": i.sha256, "size": i.size, "source": i.source} for i in inputs]
    return d


def _inputs(engine: "Engine", run_id: str) -> list[Any]:
    from sqlmodel import Session, select

    _ensure(engine)
    with Session(engine) as s:
        return list(s.exec(select(TraceInput).where(TraceInput.run_id == run_id).order_by(TraceInput.id)).all())


def run_anchors(rows: list[Any]) -> list[dict[str, Any]]:
    """The distinct anchors cited in a run (first citation wins), each with ``event_id``."""
    seen: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        result, _ = _parse_json(r.result_json)
        for a in find_anchors(result):
            key = (a.get("chunk_id"), a.get("sha256"), a.get("chunk_sha256"))
            if key not in seen:
                seen[key] = {**a, "event_id": r.id}
    return list(seen.values())


# ---------------------------------------------------------------------------------------------- exports

def export_bundle(core: Any, run_id: str) -> dict[str, Any]:
    """The JSON bundle of a run (format ``aisac-trace-bundle/1``): summary, recorded and current pins, every
    event with arguments, stored result and hashes, pinned input files, cited anchors."""
    rows = _require_events(core.engine, run_id)
    return {"format": BUNDLE_FORMAT, "exported_at": _dt.now(_tz.utc).isoformat(), "run": run_summary(rows),
            "pins": run_pins(core.engine, run_id), "current_pins": config_pins(core),
            "events": [event_dict(r) for r in rows],
            "inputs": [{"event_id": i.event_id, "path": i.path, "sha256": i.sha256, "size": i.size,
                        "source": i.source} for i in _inputs(core.engine, run_id)],
            "anchors": run_anchors(rows)}


def _md_escape(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def export_markdown(core: Any, run_id: str) -> str:
    """A human summary of a run in Markdown: times, counts, pins, errors, the steps as a nested list, the cited
    evidence and the input files."""
    b = export_bundle(core, run_id)
    run = b["run"]
    lines = [f"# aisac run `{run_id}`", "",
             f"- started: {run['started_at']}", f"- last event: {run['last_event_at']} ({run['duration_s']} s)",
             f"- events: {run['events']} ({', '.join(f'{k}: {v}' for k, v in run['by_kind'].items())})",
             f"- status: {', '.join(f'{k}: {v}' for k, v in run['by_status'].items())}",
             f"- servers: {', '.join(run['servers'])}", ""]
    pins = b["pins"] or {}
    if pins:
        lines += ["## Configuration", "", "| pin | value |", "|---|---|"]
        for k in ("embedding_model_id", "sparse_model", "index_fingerprint", "parser_revision", "pdf_pipeline",
                  "chunk_max_tokens", "retrieval"):
            if k in pins:
                val = _json.dumps(pins[k]) if isinstance(pins[k], dict) else pins[k]
                lines.append(f"| {k} | `{_md_escape(val)}` |")
        lines.append("")
    errs = [e for e in b["events"] if e["status"] in ERROR_STATUSES]
    if errs:
        lines += ["## Errors", ""] + [f"- event {e['id']} `{e['tool']}` ({e['status']}): {e['error']}" for e in errs]
        lines.append("")
    lines += ["## Steps", ""]

    def emit(nodes: list[dict[str, Any]], depth: int) -> None:
        for e in nodes:
            args = _json.dumps(e["arguments"], ensure_ascii=False) if not isinstance(e["arguments"], str) else ""
            args = args if len(args) <= 200 else args[:199] + "…"
            lines.append(f"{'  ' * depth}- **{e['tool']}** ({e['kind']}, {e['status']}, {e['latency_ms']:.1f} ms) "
                         f"`{args}` → {e['result_summary'] or e['error'] or ''} (event {e['id']}, result sha256 "
                         f"`{(e['result_sha256'] or '-')[:12]}`)")
            emit(e["children"], depth + 1)

    emit(build_tree(b["events"]), 0)
    if b["anchors"]:
        lines += ["", "## Evidence", "", "| # | source | page | section | score | chunk sha256 |",
                  "|---|---|---|---|---|---|"]
        for i, a in enumerate(b["anchors"], 1):
            lines.append(f"| {i} | {_md_escape(_Path(a.get('path') or '?').name)} | {a.get('page') or '-'} | "
                         f"{_md_escape(a.get('section') or '-')} | "
                         f"{a.get('score') if a.get('score') is not None else '-'} "
                         f"| `{(a.get('chunk_sha256') or '')[:12]}` |")
    if b["inputs"]:
        lines += ["", "## Input files", ""] + [f"- `{i['path']}` sha256 `{(i['sha256'] or '-')[:16]}` ({i['source']})"
                                               for i in b["inputs"]]
    return "\n".join(lines) + "\n"


def export_prov(core: Any, run_id: str) -> dict[str, Any]:
    """W3C PROV-JSON of a run, built with the ``prov`` package (https://www.w3.org/Submission/prov-json/).

    Tool calls, role steps and model calls are activities (start/end times, status); servers and roles are
    agents (``wasAssociatedWith``); the run is a bundle-level activity that ``wasInformedBy`` nothing and
    each top-level step ``wasInformedBy`` its parent step; each result is an entity (``wasGeneratedBy``,
    attribute ``aisac:sha256``); each cited document is an entity (``aisac:sha256`` of the file) that the
    result ``wasDerivedFrom`` and the activity ``used``; pinned input files likewise. Returns the PROV-JSON
    document as a dict."""
    from prov.model import ProvDocument

    b = export_bundle(core, run_id)
    doc = ProvDocument()
    doc.set_default_namespace("https://aisac.invalid/")
    doc.add_namespace("aisac", "https://aisac.invalid/ns#")
    safe = _re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
    run_act = doc.activity(f"run/{safe}", _dt.fromisoformat(b["run"]["started_at"]),
                           _dt.fromisoformat(b["run"]["last_event_at"]),
                           {"prov:type": "aisac:Run", "aisac:run_id": run_id})
    agents: dict[str, Any] = {}
    docs: dict[str, Any] = {}

    def agent(name: str, kind: str) -> Any:
        key = f"{kind}/{_re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"
        if key not in agents:
            agents[key] = doc.agent(key, {"prov:type": "prov:SoftwareAgent", "aisac:kind": kind, "aisac:name": name})
        return agents[key]

    def document(path: str, sha: str | None) -> Any:
        key = f"file/{sha or hashlib.sha256(path.encode()).hexdigest()}"
        if key not in docs:
            docs[key] = doc.entity(key, {"prov:type": "aisac:Document", "prov:location": path,
                                         "aisac:sha256": sha or ""})
        return docs[key]

    acts: dict[int, Any] = {}
    for e in b["events"]:
        act = doc.activity(f"event/{e['id']}", _dt.fromisoformat(e["started_at"]), _dt.fromisoformat(e["created_at"]),
                           {"prov:type": f"aisac:{e['kind']}", "prov:label": e["tool"], "aisac:tool": e["tool"],
                            "aisac:status": e["status"], "aisac:latency_ms": e["latency_ms"],
                            "aisac:arguments_sha256": e["arguments_sha256"]})
        acts[e["id"]] = act
        who = agent(e["tool"], "role") if e["kind"] == "role_step" else agent(e["server"], "server")
        doc.wasAssociatedWith(act, who)
        parent = acts.get(e["parent_id"]) if e["parent_id"] is not None else None
        doc.wasInformedBy(act, parent if parent is not None else run_act)
        if e["result_sha256"]:
            res = doc.entity(f"result/{e['id']}", {"prov:type": "aisac:Result", "aisac:sha256": e["result_sha256"],
                                                  "prov:label": e["result_summary"][:200]})
            doc.wasGeneratedBy(res, act)
            for a in find_anchors(e["result"]):
                d = document(a.get("path") or "", a.get("sha256"))
                doc.used(act, d)
                doc.wasDerivedFrom(res, d)
    for i in b["inputs"]:
        act = acts.get(i["event_id"])
        if act is not None:
            doc.used(act, document(i["path"], i["sha256"]))
    return _json.loads(doc.serialize(format="json"))


def _export_dir(core: Any) -> _Path:
    d = core.settings.data_dir / "trace_exports"
    d.mkdir(parents=True, exist_ok=True)
    return d


def export_rocrate(core: Any, run_id: str, out_dir: _Path | None = None) -> dict[str, Any]:
    """A Workflow Run RO-Crate (https://w3id.org/ro/wfrun/workflow/0.5) of a run, built with ``rocrate``.

    Written to ``<data dir>/trace_exports/<run>-rocrate/`` (folder) and ``<run>-rocrate.zip``. Content: the JSON
    bundle (``trace.json``, the run's machine-readable description, typed ``ComputationalWorkflow`` as the
    crate's main entity), ``trace.md`` and ``prov.json``; one ``CreateAction`` for the run (instrument: the
    bundle) and one per tool call / role step (instrument: a ``SoftwareApplication`` per tool; object: the
    cited documents and input files as ``File`` entities referenced by ``file://`` URI, not copied; result: a
    ``PropertyValue`` with the result's sha256; ``actionStatus`` Completed/Failed). Returns ``{path, zip,
    summary}``."""
    from rocrate.model.contextentity import ContextEntity
    from rocrate.rocrate import ROCrate

    b = export_bundle(core, run_id)
    safe = _re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
    base = (out_dir or _export_dir(core)) / f"{safe}-rocrate"
    import shutil
    import tempfile

    work = _Path(tempfile.mkdtemp(prefix="aisac-crate-"))
    try:
        (work / "trace.json").write_text(_json.dumps(b, indent=1, ensure_ascii=False), encoding="utf-8")
        (work / "trace.md").write_text(export_markdown(core, run_id), encoding="utf-8")
        (work / "prov.json").write_text(_json.dumps(export_prov(core, run_id), indent=1), encoding="utf-8")
        crate = ROCrate()
        crate.name = f"aisac run {run_id}"
        crate.description = (f"Provenance of aisac run {run_id}: {b['run']['events']} events, "
                             f"{b['run']['errors']} errors, servers {', '.join(b['run']['servers'])}")
        profiles = ["https://w3id.org/ro/wfrun/process/0.5", "https://w3id.org/ro/wfrun/workflow/0.5",
                    "https://w3id.org/workflowhub/workflow-ro-crate/1.0"]
        for p in profiles:
            crate.add(ContextEntity(crate, p, properties={"@type": "CreativeWork", "name": p.rsplit("/", 2)[-2],
                                                           "version": p.rsplit("/", 1)[-1]}))
        crate.root_dataset["conformsTo"] = [{"@id": p} for p in profiles]
        lang = crate.add(ContextEntity(crate, "https://aisac.invalid/trace-bundle", properties={
            "@type": "ComputerLanguage", "name": "aisac trace bundle", "alternateName": BUNDLE_FORMAT}))
        wf = crate.add_file(work / "trace.json", "trace.json", properties={
            "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow"], "name": "aisac trace bundle",
            "encodingFormat": "application/json", "programmingLanguage": {"@id": lang.id}})
        crate.mainEntity = wf
        crate.add_file(work / "trace.md", "trace.md", properties={"name": "human summary",
                                                                  "encodingFormat": "text/markdown"})
        crate.add_file(work / "prov.json", "prov.json", properties={"name": "W3C PROV-JSON",
                                                                    "encodingFormat": "application/json"})
        apps: dict[str, Any] = {}
        files: dict[str, Any] = {}

        def file_ent(path: str, sha: str | None) -> Any:
            if path not in files:
                uri = _Path(path).resolve().as_uri() if path.startswith("/") else path
                files[path] = crate.add(ContextEntity(crate, uri, properties={
                    "@type": "File", "name": _Path(path).name, **({"sha256": sha} if sha else {})}))
                crate.root_dataset.append_to("hasPart", files[path])  # RO-Crate 1.2: data entities are parts
            return files[path]

        def status_of(st: str) -> dict[str, str]:
            return {"@id": "http://schema.org/CompletedActionStatus" if st == "ok"
                    else "http://schema.org/FailedActionStatus"}

        run = b["run"]
        crate.add_action(wf, identifier="#run", properties={
            "name": f"aisac run {run_id}", "startTime": run["started_at"], "endTime": run["last_event_at"],
            "actionStatus": status_of(run["status"])})
        inputs_by_event: dict[int, list[dict[str, Any]]] = {}
        for i in b["inputs"]:
            inputs_by_event.setdefault(i["event_id"], []).append(i)
        for e in b["events"]:
            key = f"{e['kind']}:{e['tool']}"
            if key not in apps:
                apps[key] = crate.add(ContextEntity(crate, f"#tool-{_re.sub(r'[^A-Za-z0-9_.-]', '_', key)}",
                                                    properties={"@type": "SoftwareApplication", "name": e["tool"],
                                                                "description": f"aisac {e['kind']} ({e['server']})"}))
            objs = [file_ent(a.get("path") or "", a.get("sha256")) for a in find_anchors(e.get("result"))
                    if a.get("path")]
            objs += [file_ent(i["path"], i["sha256"]) for i in inputs_by_event.get(e["id"], [])]
            objs = list({o.id: o for o in objs}.values())
            res = crate.add(ContextEntity(crate, f"#result-{e['id']}", properties={
                "@type": "PropertyValue", "name": "result sha256", "value": e["result_sha256"] or "",
                "description": e["result_summary"][:300]}))
            props = {"name": f"{e['tool']} (event {e['id']})", "startTime": e["started_at"], "endTime": e["created_at"],
                     "actionStatus": status_of(e["status"]), "description": e["kind"]}
            if e["error"]:
                props["error"] = e["error"]
            if e["parent_id"] is not None:
                props["isPartOf"] = {"@id": f"#event-{e['parent_id']}"}
            crate.add_action(apps[key], identifier=f"#event-{e['id']}", object=objs, result=[res], properties=props)
        if base.exists():
            shutil.rmtree(base)
        crate.write(base)
        zip_path = crate.write_zip(str(base) + ".zip")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"path": str(base), "zip": str(zip_path), "summary": {
        "events": run["events"], "actions": run["events"] + 1, "files": len(files), "tools": len(apps),
        "conforms_to": profiles}}


def export_run(core: Any, run_id: str, fmt: str = "json") -> dict[str, Any]:
    """Export a run: ``json`` -> ``{format, bundle}``; ``markdown`` -> ``{format, markdown}``; ``prov`` ->
    ``{format, prov}`` (PROV-JSON dict); ``rocrate`` -> ``{format, path, zip, summary}``. Also writes the json,
    markdown and prov output to ``<data dir>/trace_exports/<run>.<ext>`` (``path`` in the result). Raises
    TraceError for an unknown run or format."""
    if fmt not in EXPORT_FORMATS:
        raise TraceError(f"format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    _require_events(core.engine, run_id)
    safe = _re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
    if fmt == "rocrate":
        return {"format": fmt, **export_rocrate(core, run_id)}
    if fmt == "json":
        body: Any = export_bundle(core, run_id)
        path = _export_dir(core) / f"{safe}.json"
        path.write_text(_json.dumps(body, indent=1, ensure_ascii=False), encoding="utf-8")
        return {"format": fmt, "path": str(path), "bundle": body}
    if fmt == "markdown":
        body = export_markdown(core, run_id)
        path = _export_dir(core) / f"{safe}.md"
        path.write_text(body, encoding="utf-8")
        return {"format": fmt, "path": str(path), "markdown": body}
    body = export_prov(core, run_id)
    path = _export_dir(core) / f"{safe}.prov.json"
    path.write_text(_json.dumps(body, indent=1), encoding="utf-8")
    return {"format": fmt, "path": str(path), "prov": body}


# ---------------------------------------------------------------------------------------------- verification

#: verify_anchor status -> trace_verify verdict.
_ANCHOR_VERDICT = {"ok": "unchanged", "file_changed": "changed", "chunk_changed": "changed", "missing": "missing"}


def run_signature(engine: "Engine", run_id: str | None = None) -> str:
    """A string that changes whenever a run (or, without ``run_id``, the trace) changes: the largest event id,
    plus, for one run, the number of events still ``running`` and of events with a result (role steps are
    written on entry and completed in place). The dashboard's live stream polls it."""
    from sqlalchemy import case, func, select

    from aisac_core.store.tables import TraceEvent

    t = TraceEvent.__table__  # type: ignore[attr-defined]
    if run_id is None:
        q = select(func.max(t.c.id), 0, 0)
    else:
        q = select(func.max(t.c.id), func.sum(case((t.c.status == "running", 1), else_=0)),
                   func.count(t.c.result_sha256)).where(t.c.run_id == run_id)
    with engine.connect() as conn:
        m, running, done = conn.execute(q).one()
    return f"{int(m or 0)}.{int(running or 0)}.{int(done or 0)}"


def verify_run(core: Any, run_id: str, *, use_index: bool = True) -> dict[str, Any]:
    """Re-hash every evidence anchor a run cited and every input file it pinned.

    Anchors go through :func:`aisac_core.rag.search.verify_anchor` (file sha256 and chunk text sha256); its
    ``ok`` is reported ``unchanged``, ``file_changed`` / ``chunk_changed`` as ``changed`` (``anchor_status``
    keeps the detail: with ``file_changed`` the quoted passage is still in the new version) and ``missing`` as
    ``missing``. Input files are re-hashed against the pin: ``unchanged`` / ``changed`` / ``missing``.

    ``use_index=False`` checks anchors at file level only (file sha256 against the anchor's), without opening the
    vector store: what a process that does not own the store (``aisac dashboard``) can do without taking the
    store's lock; a changed file is then reported ``changed`` / ``file_changed`` without looking for the passage.

    Returns ``{run_id, status (unchanged | changed | missing: the worst item), counts, anchors: [{chunk_id,
    path, page, status, anchor_status, detail, event_id}], inputs: [{path, status, sha256, sha256_now,
    event_id}]}``. Raises TraceError for an unknown run."""
    rows = _require_events(core.engine, run_id)
    anchors_out = []
    verify_anchor = None
    if use_index:
        try:
            from aisac_core.rag.search import verify_anchor
        except ImportError:  # older checkout: file-level check only
            verify_anchor = None
    hashes: dict[str, str | None] = {}

    def rehash(path: str) -> str | None:
        if path not in hashes:
            try:
                hashes[path] = _file_sha256(_Path(path))
            except OSError:
                hashes[path] = None
        return hashes[path]

    for a in run_anchors(rows):
        item = {"chunk_id": a.get("chunk_id"), "path": a.get("path"), "page": a.get("page"), "event_id": a["event_id"]}
        if verify_anchor is not None:
            try:
                v = verify_anchor(core, {k: v for k, v in a.items() if k not in ("event_id", "title")})
                item.update(status=_ANCHOR_VERDICT.get(v["status"], "changed"), anchor_status=v["status"],
                            detail=v.get("detail", ""))
            except Exception as exc:
                item.update(status="missing", anchor_status="error", detail=f"{type(exc).__name__}: {exc}")
        else:
            now = rehash(a.get("path") or "")
            st = "missing" if now is None else "unchanged" if now == a.get("sha256") else "changed"
            item.update(status=st, anchor_status={"unchanged": "ok", "changed": "file_changed"}.get(st, st),
                        detail="file-level check (sha256 of the file): " + (
                            "the file is gone" if now is None else "the file is byte-identical" if st == "unchanged"
                            else "the file's bytes changed; trace_verify in the server also looks for the passage"))
        anchors_out.append(item)
    inputs_out = []
    for i in _inputs(core.engine, run_id):
        p = _Path(i.path)
        if i.sha256 is None:
            try:
                st_ = p.stat()
                status = "unchanged" if (st_.st_size, st_.st_mtime_ns) == (i.size, i.mtime_ns) else "changed"
            except OSError:
                status = "missing"
            now = None
        else:
            now = rehash(i.path)
            status = "missing" if now is None else "unchanged" if now == i.sha256 else "changed"
        inputs_out.append({"path": i.path, "status": status, "sha256": i.sha256, "sha256_now": now,
                           "source": i.source, "event_id": i.event_id})
    counts: dict[str, int] = {}
    for it in anchors_out + inputs_out:
        counts[it["status"]] = counts.get(it["status"], 0) + 1
    overall = "missing" if counts.get("missing") else "changed" if counts.get("changed") else "unchanged"
    return {"run_id": run_id, "status": overall, "counts": counts, "anchors": anchors_out, "inputs": inputs_out}


# ---------------------------------------------------------------------------------------------- replay and diff

def strip_volatile(x: Any) -> Any:
    """``x`` without the keys of ``VOLATILE_KEYS`` at any depth (timings that change on every call)."""
    if isinstance(x, dict):
        return {k: strip_volatile(v) for k, v in x.items() if k not in VOLATILE_KEYS}
    if isinstance(x, list):
        return [strip_volatile(v) for v in x]
    return x


def json_changes(a: Any, b: Any, path: str = "$", limit: int = 20) -> list[str]:
    """JSON paths where ``a`` and ``b`` differ (at most ``limit``)."""
    out: list[str] = []

    def walk(x: Any, y: Any, p: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y), key=str):
                if k not in x or k not in y:
                    out.append(f"{p}.{k}")
                else:
                    walk(x[k], y[k], f"{p}.{k}")
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                out.append(f"{p}[len {len(x)} -> {len(y)}]")
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{p}[{i}]")
        elif x != y:
            out.append(p)

    walk(a, b, path)
    return out


def compare_results(sha_a: str | None, json_a: str | None, sha_b: str | None,
                    json_b: str | None) -> tuple[str, list[str]]:
    """``("same" | "changed", changed paths)``: equal sha256, or equal after removing volatile timing keys."""
    if sha_a == sha_b:
        return "same", []
    va, ca = _parse_json(json_a)
    vb, cb = _parse_json(json_b)
    if ca and cb and va is not None and vb is not None:
        sa, sb = strip_volatile(va), strip_volatile(vb)
        if sa == sb:
            return "same", []
        return "changed", json_changes(sa, sb)
    return "changed", ["$ (stored result truncated: compared by sha256)"]


#: tool-name words that mark a call as writing, destructive or non-deterministic (not replayed).
_SKIP_WORDS = _re.compile(r"(^|_)(remove|delete|prune|forget|clear|drop|reset|cancel|stop|close|add|record|start|"
                          r"create|new|put|set|save|write|update|index|load|register|upload|import|run|exec|replay|"
                          r"job|status|fetch|download|submit)(_|$)")


def replay_skip_reason(tool: str, annotations: Any = None) -> str | None:
    """Why a recorded tool call is not replayed, or None when it is. Tool annotations win
    (``readOnlyHint`` true: replayed; ``destructiveHint`` true: skipped), then the name: ``trace_*`` tools read the
    trace itself; names with a writing or time-dependent verb (``_SKIP_WORDS``: add, remove, index, run, job,
    status, fetch...) are skipped, since replaying them would duplicate writes, delete data, start jobs or depend
    on the clock or the web."""
    if tool.startswith("trace_"):
        return "reads the trace itself"
    ro = getattr(annotations, "readOnlyHint", None) if annotations is not None else None
    destructive = getattr(annotations, "destructiveHint", None) if annotations is not None else None
    if ro is True:
        return None
    if destructive is True:
        return "destructive (tool annotation destructiveHint)"
    m = _SKIP_WORDS.search(tool.split("_", 1)[1] if "_" in tool else tool)
    if m:
        return f"writes to the store, starts work or depends on time/the web ('{m.group(2)}' in the name): not replayed"
    return None


def _result_obj(res: Any) -> Any:
    """The JSON the middleware records for a fastmcp CallToolResult."""
    return res.structured_content if res.structured_content is not None else \
        [getattr(c, "text", repr(c)) for c in (res.content or [])]


async def replay_run(core: Any, run_id: str, *, force: list[str] | None = None,
                     replay_run_id: str | None = None) -> dict[str, Any]:
    """Re-execute a run's recorded top-level tool calls in order against the current store and compare results.

    Calls go through an in-process fastmcp Client on the suite (``aisac_servers.suite.build(lifespan=False)``: every
    mounted server behind the provenance middleware; no lifespan, so the process's store stays open); they are recorded under a new run id
    (``replay_run_id`` or ``replay-<new id>``), never into the original run. Role steps and model calls are not
    tool calls: they are reproduced by the roles tool call that made them; when the run holds model calls, a
    tool with an ``llm`` argument (roles_route / roles_plan / roles_evaluate) is replayed with ``llm="replay"``,
    so its model answers come from the roles response cache only (an unseen request fails the step). Calls
    with a parent event are covered by their parent's replay. Calls skipped by :func:`replay_skip_reason` are
    listed with the reason; ``force`` names tools to replay anyway.

    Per step: ``same`` (result sha256 equal, or equal once timing keys ``VOLATILE_KEYS`` are removed; a call
    that failed before and fails again with the same status is ``same`` too), ``changed`` (with the JSON
    paths that differ), ``failed`` (the replayed call failed where the original succeeded, or vice versa), or
    ``skipped`` (with the reason).

    Returns ``{run_id, replay_run_id, status (same | changed | failed), counts, steps: [{event_id, tool, status,
    reason?, changes?, original_sha256, replay_sha256, error?}], pins_changed}``. Raises TraceError for an
    unknown run."""
    from fastmcp import Client, FastMCP

    from aisac_core.hashing import dumps

    rows = _require_events(core.engine, run_id)
    from aisac_servers.suite import build

    suite: FastMCP = build(lifespan=False)  # no lifespan: the serving process keeps its store open
    rid = replay_run_id or "replay-" + new_run_id()[4:]
    force_set = set(force or [])
    has_model_calls = any(r.kind == "model_call" for r in rows)
    steps: list[dict[str, Any]] = []
    async with Client(suite) as client:
        tools = {t.name: t for t in await client.list_tools()}
        for r in rows:
            base = {"event_id": r.id, "tool": r.tool, "original_sha256": r.result_sha256}
            if r.kind != "tool_call":
                continue
            if r.parent_id is not None:
                steps.append({**base, "status": "skipped", "reason": f"child of event {r.parent_id}: replayed by it"})
                continue
            if r.tool not in tools:
                steps.append({**base, "status": "failed", "reason": f"tool {r.tool} is not available in this suite"})
                continue
            reason = None if r.tool in force_set else replay_skip_reason(r.tool, tools[r.tool].annotations)
            if reason:
                steps.append({**base, "status": "skipped", "reason": reason})
                continue
            args, complete = _parse_json(r.arguments_json)
            if not complete or not isinstance(args, dict):
                steps.append({**base, "status": "skipped", "reason": "arguments were stored truncated"})
                continue
            props = (tools[r.tool].inputSchema or {}).get("properties", {})
            if "llm" in props and has_model_calls and args.get("llm") != "none":
                args = {**args, "llm": "replay"}  # model answers from the roles response cache only
                base["llm"] = "replay"
            try:
                res = await client.call_tool(r.tool, args, raise_on_error=False, meta={"run_id": rid})
                ok, err, obj = not res.is_error, None, _result_obj(res)
                if res.is_error:
                    err = " ".join(str(x) for x in obj) if isinstance(obj, list) else str(obj)
            except Exception as exc:
                ok, err, obj = False, f"{type(exc).__name__}: {exc}", None
            new_sha = None if obj is None or not ok else sha256_json(obj)
            if r.status == "ok" and ok:
                status, changes = compare_results(r.result_sha256, r.result_json, new_sha, dumps(obj))
                steps.append({**base, "status": status, "replay_sha256": new_sha,
                              **({"changes": changes} if changes else {})})
            elif r.status != "ok" and not ok:
                steps.append({**base, "status": "same", "replay_sha256": None, "error": err,
                              "reason": "failed before and fails again"})
            else:
                steps.append({**base, "status": "failed", "replay_sha256": new_sha, "error": err or "",
                              "reason": "the original call failed but the replay succeeded" if ok
                              else "the replay failed"})
    counts: dict[str, int] = {}
    for s in steps:
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    old_pins, now_pins = run_pins(core.engine, run_id) or {}, config_pins(core)
    pins_changed = [k for k in sorted(set(old_pins) | set(now_pins)) if k not in ("settings",)
                    and old_pins.get(k) != now_pins.get(k)] if old_pins else []
    overall = "failed" if counts.get("failed") else "changed" if counts.get("changed") else "same"
    return {"run_id": run_id, "replay_run_id": rid, "status": overall, "counts": counts, "steps": steps,
            "pins_changed": pins_changed}


def diff_runs(engine: "Engine", run_a: str, run_b: str) -> dict[str, Any]:
    """Compare two runs' tool calls step by step.

    Steps are aligned by (tool, arguments sha256) with difflib's longest matching blocks; aligned steps are
    ``same`` or ``changed`` (results compared as in replay), unaligned ones ``only_a`` / ``only_b``. Also the
    pins that differ. Returns ``{run_a, run_b, counts, steps: [{status, tool, event_a, event_b, changes?}],
    pins_changed: [{pin, a, b}]}``. Raises TraceError for an unknown run."""
    import difflib

    ra = [r for r in _require_events(engine, run_a) if r.kind == "tool_call"]
    rb = [r for r in _require_events(engine, run_b) if r.kind == "tool_call"]
    ka = [(r.tool, r.arguments_sha256) for r in ra]
    kb = [(r.tool, r.arguments_sha256) for r in rb]
    steps: list[dict[str, Any]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=ka, b=kb, autojunk=False).get_opcodes():
        if op == "equal":
            for x, y in zip(ra[i1:i2], rb[j1:j2]):
                if x.status != y.status:
                    st, ch = "changed", [f"status {x.status} -> {y.status}"]
                else:
                    st, ch = compare_results(x.result_sha256, x.result_json, y.result_sha256, y.result_json)
                steps.append({"status": st, "tool": x.tool, "event_a": x.id, "event_b": y.id,
                              **({"changes": ch} if ch else {})})
        else:
            steps += [{"status": "only_a", "tool": x.tool, "event_a": x.id, "event_b": None} for x in ra[i1:i2]]
            steps += [{"status": "only_b", "tool": y.tool, "event_a": None, "event_b": y.id} for y in rb[j1:j2]]
    counts: dict[str, int] = {}
    for s in steps:
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    pa, pb = run_pins(engine, run_a) or {}, run_pins(engine, run_b) or {}
    pins = [{"pin": k, "a": pa.get(k), "b": pb.get(k)} for k in sorted(set(pa) | set(pb))
            if k != "settings" and pa.get(k) != pb.get(k)]
    return {"run_a": run_a, "run_b": run_b, "counts": counts, "steps": steps, "pins_changed": pins}


# ---------------------------------------------------------------------------------------------- stats, retention

def trace_stats(engine: "Engine", since: str | _dt | None = None) -> dict[str, Any]:
    """Totals over the trace (events since ``since`` when given): runs, events by kind and status, first/last
    event time, and per tool: calls, errors, error rate, latency p50/p95/max (ms; numpy-style linear
    percentiles). Raises TraceError for a bad date."""
    from sqlmodel import Session, select

    from aisac_core.store.tables import TraceEvent as T

    since_d = _naive_utc(since, "since")
    q = select(T.run_id, T.kind, T.status, T.tool, T.latency_ms, T.created_at)
    if since_d:
        q = q.where(T.created_at >= since_d)
    with Session(engine) as s:
        rows = s.exec(q).all()
    runs, kinds, statuses, per_tool = set(), {}, {}, {}
    first = last = None
    for rid, kind, st, tool, lat, created in rows:
        runs.add(rid)
        kinds[kind] = kinds.get(kind, 0) + 1
        statuses[st] = statuses.get(st, 0) + 1
        t = per_tool.setdefault(tool, {"calls": 0, "errors": 0, "lat": []})
        t["calls"] += 1
        t["errors"] += st in ERROR_STATUSES
        t["lat"].append(lat or 0.0)
        first = created if first is None or created < first else first
        last = created if last is None or created > last else last

    def pct(vals: list[float], p: float) -> float:
        v = sorted(vals)
        k = (len(v) - 1) * p / 100
        lo, hi = int(k), min(int(k) + 1, len(v) - 1)
        return round(v[lo] + (v[hi] - v[lo]) * (k - lo), 3)

    tools = [{"tool": name, "calls": t["calls"], "errors": t["errors"],
              "error_rate": round(t["errors"] / t["calls"], 4), "p50_ms": pct(t["lat"], 50),
              "p95_ms": pct(t["lat"], 95), "max_ms": round(max(t["lat"]), 3)}
             for name, t in sorted(per_tool.items(), key=lambda kv: -kv[1]["calls"])]
    return {"runs": len(runs), "events": len(rows), "by_kind": kinds, "by_status": statuses,
            "first_event_at": _iso(first), "last_event_at": _iso(last), "tools": tools}


def prune_runs(core: Any, older_than_days: float, *, dry_run: bool = False) -> dict[str, Any]:
    """Delete runs whose last event is older than ``older_than_days`` days, after exporting each as a JSON bundle
    to ``<data dir>/trace_exports/<run>.json`` (a run whose export fails is kept). ``dry_run`` lists without
    exporting or deleting. Returns ``{cutoff, runs: [run ids], exported: [paths], deleted_events, dry_run}``.
    Raises TraceError when ``older_than_days`` < 0."""
    from sqlalchemy import delete, func
    from sqlmodel import Session, select

    from aisac_core.store.tables import TraceEvent as T

    if older_than_days is None or float(older_than_days) < 0:
        raise TraceError(f"older_than_days must be >= 0, got {older_than_days}")
    cutoff = _dt.now(_tz.utc) - _td(days=float(older_than_days))
    with Session(core.engine) as s:
        old = list(s.exec(select(T.run_id).group_by(T.run_id).having(func.max(T.created_at) < cutoff)).all())
    out: dict[str, Any] = {"cutoff": _iso(cutoff), "runs": old, "exported": [], "deleted_events": 0,
                           "dry_run": bool(dry_run), "failed": []}
    if dry_run:
        return out
    _ensure(core.engine)
    for rid in old:
        try:
            exp = export_run(core, rid, "json")
            if not _Path(exp["path"]).stat().st_size:
                raise OSError("empty export")
        except Exception as exc:
            out["failed"].append({"run_id": rid, "error": f"{type(exc).__name__}: {exc}"})
            continue
        out["exported"].append(exp["path"])
        with Session(core.engine) as s:
            res = s.exec(delete(T).where(T.run_id == rid))  # type: ignore[call-overload]
            out["deleted_events"] += res.rowcount or 0
            s.exec(delete(TraceInput).where(TraceInput.run_id == rid))  # type: ignore[call-overload]
            s.exec(delete(TraceRunPin).where(TraceRunPin.run_id == rid))  # type: ignore[call-overload]
            s.commit()
    out["runs"] = [r for r in old if r not in {f["run_id"] for f in out["failed"]}]
    return out
