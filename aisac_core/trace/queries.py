"""Reading the trace: runs (list, summary, event tree), single events, the anchors a run cited.

Every function takes the SQL engine of the store, and so does :class:`RunQueries` (the runs and events a
service or a caller with an engine reads); all return JSON-ready dicts. Times are ISO 8601 in UTC.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import case, func, inspect
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from aisac_core.errors import AisacError
from aisac_core.evidence.anchor import find_anchors
from aisac_core.store.tables import TraceEvent, TraceInput
from aisac_core.trace.pins import run_pins
from aisac_core.trace.report import answer_digest, question_of
from aisac_core.trace.results import EventDetail, EventDict, RunData, RunRow, Runs, RunSummary

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: statuses that count as failures: ``failed`` is a call that returned but whose result reports a failure
#: (``{"ok": false, "error": ...}``: a code cell that raised; :func:`aisac_core.trace.recorder.record_tool_call`).
#: A role step is ``running`` while it works and may end ``input_required``: neither is an error.
ERROR_STATUSES = ("tool_error", "exception", "failed")
#: a run whose last event is younger than this many seconds is shown as ``active`` (calls still arriving; a role
#: step or tool call of a live run records an event at least every few seconds, so a finished run leaves the state
#: within this time instead of looking alive for a minute).
ACTIVE_SECONDS = 10.0
#: keys of an event that the compact tree (``detail=False``) keeps.
COMPACT_KEYS = ("id", "kind", "tool", "status", "latency_ms", "arguments", "result_summary")
#: in the compact tree, arguments whose JSON is longer than this are shown as a truncated JSON string.
COMPACT_ARGS_CHARS = 300
#: longest ``text`` filter of :func:`list_runs` (SQLite refuses LIKE patterns over 50,000 bytes,
#: SQLITE_MAX_LIKE_PATTERN_LENGTH; a run id, tool name or argument fragment is far shorter)
MAX_SEARCH_CHARS = 1000
#: largest id or offset SQLite can hold (a signed 64-bit integer)
MAX_SQL_INT = 2**63 - 1


class TraceError(AisacError, ValueError):
    """Bad trace request (unknown run or event, bad format or filter); the message says what to pass instead."""


# ---------------------------------------------------------------------------------------------- small helpers


def naive_utc(value: str | datetime | None, what: str) -> datetime | None:
    """ISO 8601 string / datetime -> timezone-aware UTC datetime (a value without zone is taken as UTC); None for
    None or "". Raises TraceError naming ``what`` for a string that is not ISO 8601."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            text = value
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise TraceError(
                f"{what} must be an ISO 8601 date or time such as 2026-03-14 or 2026-03-14T09:15:00Z, "
                f"got {text[:100]!r}"
            ) from exc
    try:
        return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    except OverflowError as exc:  # e.g. 9999-12-31T23:59:59-01:00 lies past the last representable UTC time
        raise TraceError(
            f"{what} {value.isoformat()} is out of range once converted to UTC: give a date between "
            "the years 1 and 9999"
        ) from exc


def iso(d: datetime | None) -> str | None:
    """ISO 8601 of ``d`` (a naive datetime is taken as UTC), or None."""
    if d is None:
        return None
    return aware(d).isoformat()


def aware(d: datetime) -> datetime:
    """``d`` with UTC as its zone when it has none (SQLite returns naive datetimes)."""
    return d if d.tzinfo else d.replace(tzinfo=UTC)


def parse_json(text: str | None) -> tuple[Any, bool]:
    """(value, complete): parsed JSON, or (the raw text, False) when truncated/unparseable; (None, True) for None."""
    if text is None:
        return None, True
    try:
        return json.loads(text), True
    except ValueError:
        return text, False


def count_by(items: Sequence[Mapping[str, Any]], key: str = "status") -> dict[str, int]:
    """``{value: count}`` of ``item[key]`` over ``items``, in first-seen order."""
    counts: dict[str, int] = {}
    for it in items:
        counts[it[key]] = counts.get(it[key], 0) + 1
    return counts


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


#: result summaries by (event id, result sha256) of one store (:class:`Summaries`) kept at most
MAX_SUMMARIES = 50_000


class Summaries(dict[tuple[int, "str | None"], str]):
    """Result summaries of one store's events by (event id, result sha256): events never change once written, and
    live pages re-read a run on every update. Held by the store's trace service; cleared past
    :data:`MAX_SUMMARIES`."""

    def keep(self, key: tuple[int, str | None], summary: str) -> None:
        """Remember ``summary`` under ``key`` (forgetting everything first when full)."""
        if len(self) > MAX_SUMMARIES:
            self.clear()
        self[key] = summary


def event_dict(r: Any, *, full: bool = True, summaries: Summaries | None = None) -> EventDict:
    """A TraceEvent row as a JSON-ready dict: parsed arguments, result (``full``) or result summary, start time
    (``created_at`` minus the latency), ``result_truncated`` when the stored result was cut at 100k chars.
    ``summaries``: the store's summary cache (:class:`Summaries`), or None."""
    args, _ = parse_json(r.arguments_json)
    key = (r.id, r.result_sha256)
    cached = summaries.get(key) if summaries is not None else None
    if full:
        result, complete = parse_json(r.result_json)
        summary = cached or summarize_result(result)
    else:
        summary = cached if cached is not None else summarize_result(parse_json(r.result_json)[0])
    if summaries is not None:
        summaries.keep(key, summary)
    created = aware(r.created_at)
    # every event's row holds its end: a tool call (or model call) is written when it ends, a role step is written
    # when it begins and completed in place with its end time (aisac_core.roles.store.finish_step)
    started = created - timedelta(milliseconds=r.latency_ms or 0)
    d: EventDict = {
        "id": r.id,
        "run_id": r.run_id,
        "kind": r.kind,
        "parent_id": r.parent_id,
        "server": r.server,
        "tool": r.tool,
        "status": r.status,
        "error": r.error,
        "latency_ms": r.latency_ms,
        "started_at": started.isoformat(),
        "created_at": created.isoformat(),
        "arguments": args,
        "arguments_sha256": r.arguments_sha256,
        "result_sha256": r.result_sha256,
        "anchor_ids": json.loads(r.anchor_ids_json or "[]"),
        "result_summary": summary,
    }
    if full:
        d["result"] = result
        d["result_truncated"] = not complete
    return d


def run_events(engine: Engine, run_id: str) -> list[Any]:
    """A run's events in id order as SQLAlchemy rows (attribute access like TraceEvent; no ORM instances, which
    cost ~4x more for a 1,000-event run). Empty for an unknown run."""
    t = inspect(TraceEvent).local_table
    with engine.connect() as conn:
        return list(conn.execute(sa_select(t).where(t.c.run_id == run_id).order_by(t.c.id)).all())


def require_events(engine: Engine, run_id: str) -> list[Any]:
    """:func:`run_events`, raising TraceError for an empty or unknown run id."""
    if not isinstance(run_id, str) or not run_id.strip():
        raise TraceError("run_id must be a non-empty string: trace_list_runs lists the run ids")
    rows = run_events(engine, run_id)
    if not rows:
        shown = repr(run_id) if len(run_id) <= 200 else repr(run_id[:200]) + f"… ({len(run_id):,} characters)"
        raise TraceError(
            f"unknown run {shown}: no trace events carry this run id; trace_list_runs lists runs (newest first)"
        )
    return rows


def run_inputs(engine: Engine, run_id: str) -> list[TraceInput]:
    """The input-file pins of a run, in id order."""
    with Session(engine) as s:
        return list(s.exec(select(TraceInput).where(TraceInput.run_id == run_id).order_by(col(TraceInput.id))).all())


# ---------------------------------------------------------------------------------------------- runs


def run_summary(rows: list[Any]) -> RunSummary:
    """Counts and times of a run's events (rows ordered by id): ``{run_id, started_at, first_event_at,
    last_event_at, duration_s, events, by_kind, by_status, errors, servers, status (ok | errors), active}``.
    ``started_at`` = ``first_event_at``: the earliest start of an event (``created_at - latency_ms``, every row
    holding its end); ``last_event_at``: the latest end (ISO 8601, UTC)."""
    first = min(aware(r.created_at) - timedelta(milliseconds=r.latency_ms or 0) for r in rows)
    last = max(aware(r.created_at) for r in rows)  # a parent role step ends after its children (written before it)
    start = first
    by_kind: dict[str, int] = {}
    by_status: dict[str, int] = {}
    for r in rows:
        by_kind[r.kind] = by_kind.get(r.kind, 0) + 1
        by_status[r.status] = by_status.get(r.status, 0) + 1
    errors = sum(v for k, v in by_status.items() if k in ERROR_STATUSES)
    return {
        "run_id": rows[0].run_id,
        "started_at": start.isoformat(),
        "first_event_at": first.isoformat(),
        "last_event_at": last.isoformat(),
        "duration_s": round((last - start).total_seconds(), 3),
        "events": len(rows),
        "by_kind": by_kind,
        "by_status": by_status,
        "errors": errors,
        "servers": sorted({r.server for r in rows}),
        "status": "errors" if errors else "ok",
        "active": (datetime.now(UTC) - last).total_seconds() < ACTIVE_SECONDS,
    }


def build_tree(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Nest event dicts by ``parent_id`` (``children`` lists, in id order); an event whose parent is not in the
    run is a root. Returns the roots."""
    by_id = {e["id"]: {**e, "children": []} for e in events}
    roots: list[dict[str, Any]] = []
    for e in by_id.values():
        parent = by_id.get(e["parent_id"]) if e["parent_id"] is not None else None
        (parent["children"] if parent is not None and parent is not e else roots).append(e)
    return roots


def compact_event(e: dict[str, Any]) -> dict[str, Any]:
    """The compact form of an event dict: :data:`COMPACT_KEYS`, plus ``error`` and ``anchors`` (count) when
    present, and ``children`` only when there are any (the nesting gives the parent); long arguments become a
    truncated JSON string."""
    c = {k: e[k] for k in COMPACT_KEYS}
    a = json.dumps(c["arguments"], ensure_ascii=False) if not isinstance(c["arguments"], str) else c["arguments"]
    if len(a) > COMPACT_ARGS_CHARS:
        c["arguments"] = a[: COMPACT_ARGS_CHARS - 1] + "…"
    if e.get("error"):
        c["error"] = e["error"]
    if e.get("anchor_ids"):
        c["anchors"] = len(e["anchor_ids"])
    return c


def _compact_tree(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**compact_event(n), **({"children": _compact_tree(n["children"])} if n["children"] else {})} for n in nodes
    ]


def max_event_id(engine: Engine, run_id: str | None = None) -> int:
    """The largest event id (of one run when ``run_id`` is given), 0 when there is none."""
    q = select(func.max(TraceEvent.id))
    if run_id:
        q = q.where(TraceEvent.run_id == run_id)
    with Session(engine) as s:
        return int(s.exec(q).one() or 0)


def run_anchors(rows: list[Any]) -> list[dict[str, Any]]:
    """The distinct anchors cited in a run (first citation wins), each with ``event_id``. ``rows``: the run's
    events (:func:`run_events`)."""
    seen: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for r in rows:
        result, _ = parse_json(r.result_json)
        for a in find_anchors(result):
            key = (a.get("chunk_id"), a.get("sha256"), a.get("chunk_sha256"))
            if key not in seen:
                seen[key] = {**a, "event_id": r.id}
    return list(seen.values())


#: events per run read to find its question (the question is in one of a run's first events)
HEADLINE_EVENTS = 25


class RunQueries:
    """Reading one store's runs and events: a part of :class:`~aisac_core.trace.service.TraceService` (which
    provides ``engine`` and its result-summary cache ``summaries``), also used on its own on an engine
    (``RunQueries(engine).get_run(run_id)``: the exports, the CLI, the tests).

    Collaborators: ``engine`` (the store's SQL engine, schema migrated); ``summaries`` (a :class:`Summaries` cache of
    result summaries, or None to compute each one).
    """

    engine: Engine
    summaries: Summaries | None

    def __init__(self, engine: Engine, summaries: Summaries | None = None) -> None:
        self.engine = engine
        self.summaries = summaries

    def list_runs(
        self,
        *,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        server: str | None = None,
        status: str | None = None,
        text: str | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> Runs:
        """Runs, newest first (by last event), with paging.

        Args:
            since / until: ISO 8601; a run is listed when its last event is at/after ``since`` and its first event
                at/before ``until``.
            server: only runs with at least one event of this server namespace (``rag``, ``memory``, ``roles``...).
            status: ``ok`` (no failed event), ``errors`` (at least one ``tool_error`` / ``exception``) or ``active``
                (an event in the last ``ACTIVE_SECONDS`` = 60 s).
            text: case-insensitive substring of the run id, a tool name or the arguments JSON; at most
                :data:`MAX_SEARCH_CHARS` (1,000) characters.
            limit: 1..500 runs per page; offset: runs to skip.

        Returns ``{runs: [{run_id, started_at, last_event_at, events, tool_calls, errors, servers, tools, status,
        active}], total, offset, next_offset}`` (``next_offset`` None on the last page).

        Raises TraceError for a bad date, status or paging value, or a ``text`` longer than 1,000 characters.
        """
        T = TraceEvent
        if not 1 <= int(limit) <= 500:
            raise TraceError(f"limit must be 1..500, got {limit}")
        if not 0 <= int(offset) <= MAX_SQL_INT:
            raise TraceError(f"offset must be 0..{MAX_SQL_INT} (a number of runs to skip), got {str(offset)[:40]}")
        if text is not None and len(text) > MAX_SEARCH_CHARS:
            raise TraceError(
                f"text is {len(text):,} characters long; the search text may have at most "
                f"{MAX_SEARCH_CHARS:,} (a fragment of a run id, a tool name or an argument value)"
            )
        if status not in (None, "", "ok", "errors", "active"):
            raise TraceError(f"status must be ok, errors or active, got {str(status)[:100]!r}")
        since_d, until_d = naive_utc(since, "since"), naive_utc(until, "until")
        n_err = func.sum(case((col(T.status).in_(ERROR_STATUSES), 1), else_=0))
        q = sa_select(
            col(T.run_id),
            func.min(T.created_at),
            func.max(T.created_at),
            func.count(),
            n_err,
            func.sum(case((col(T.kind) == "tool_call", 1), else_=0)),
        ).group_by(T.run_id)
        conds = []
        if server:
            conds.append(col(T.run_id).in_(select(T.run_id).where(T.server == server)))
        if text:
            # a substring, not a pattern: autoescape makes % _ and the escape character literal on every self.engine
            # (PostgreSQL's LIKE treats a backslash as an escape by default, SQLite's does not)
            t = text.lower()
            conds.append(
                col(T.run_id).in_(
                    select(T.run_id).where(
                        func.lower(T.run_id).contains(t, autoescape=True)
                        | func.lower(T.tool).contains(t, autoescape=True)
                        | func.lower(T.arguments_json).contains(t, autoescape=True)
                    )
                )
            )
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
            having.append(func.max(T.created_at) >= datetime.now(UTC) - timedelta(seconds=ACTIVE_SECONDS))
        for h in having:
            q = q.having(h)
        with self.engine.connect() as conn:
            total = conn.execute(sa_select(func.count()).select_from(q.subquery())).scalar_one()
            rows = conn.execute(q.order_by(func.max(T.created_at).desc()).offset(int(offset)).limit(int(limit))).all()
            ids = [r[0] for r in rows]
            detail: dict[str, tuple[set[str], set[str]]] = {i: (set(), set()) for i in ids}
            if ids:
                for rid, srv, tool in conn.execute(
                    sa_select(col(T.run_id), col(T.server), col(T.tool)).where(col(T.run_id).in_(ids)).distinct()
                ).all():
                    detail[rid][0].add(srv)
                    detail[rid][1].add(tool)
        now = datetime.now(UTC)
        runs: list[RunRow] = []
        for rid, first, last, n, errs, calls in rows:
            runs.append(
                {
                    "run_id": rid,
                    "started_at": iso(first),
                    "last_event_at": iso(last),
                    "events": n,
                    "tool_calls": int(calls or 0),
                    "errors": int(errs or 0),
                    "servers": sorted(detail[rid][0]),
                    "tools": sorted(detail[rid][1]),
                    "status": "errors" if errs else "ok",
                    "active": (now - aware(last)).total_seconds() < ACTIVE_SECONDS,
                }
            )
        nxt = int(offset) + len(runs)
        return {"runs": runs, "total": int(total), "offset": int(offset), "next_offset": nxt if nxt < total else None}

    def get_run(self, run_id: str, *, include_results: bool = False, detail: bool = True, after_id: int = 0) -> RunData:
        """One run: ``{run: summary, pins, tree: [event + children...], errors: [failed events], last_id}``.

        Events carry arguments, hashes and a result summary; ``include_results`` adds the stored result;
        ``detail=False`` gives the compact form (:func:`compact_event`: no hashes, timestamps, run id or parent id;
        long arguments truncated; ``children`` only where there are any), for large runs over MCP.
        ``after_id`` > 0 returns only events with a larger id as a flat ``events`` list (for live updates); result
        summaries come from the part's ``summaries`` cache when it has one. Raises TraceError for an unknown run."""
        rows = require_events(self.engine, run_id)
        events = [event_dict(r, full=include_results, summaries=self.summaries) for r in rows]
        out: RunData = {
            "run": run_summary(rows),
            "pins": run_pins(self.engine, run_id),
            "last_id": rows[-1].id,
            "errors": [
                {"id": e["id"], "tool": e["tool"], "status": e["status"], "error": e["error"]}
                for e in events
                if e["status"] in ERROR_STATUSES
            ],
        }
        if after_id:
            out["events"] = [e for e in events if e["id"] > after_id]
        else:
            tree = build_tree(events)
            out["tree"] = tree if detail or include_results else _compact_tree(tree)
        return out

    def get_event(self, event_id: int) -> EventDetail:
        """One event (:func:`event_dict` with its full stored result) plus ``children`` (ids) and ``inputs`` (its
        input-file pins: ``[{path, sha256, size, source}]``). Raises TraceError when unknown (including ids outside
        1..2^63-1, which no event can have)."""
        if not isinstance(event_id, int) or isinstance(event_id, bool) or not 1 <= event_id <= MAX_SQL_INT:
            raise TraceError(
                f"unknown event id {str(event_id)[:40]}: event ids are integers from 1 to {MAX_SQL_INT}; "
                "trace_get_run lists a run's event ids"
            )
        with Session(self.engine) as s:
            r = s.get(TraceEvent, int(event_id))
            if r is None:
                raise TraceError(f"unknown event id {event_id}: trace_get_run lists a run's event ids")
            children = s.exec(
                select(col(TraceEvent.id)).where(TraceEvent.parent_id == r.id).order_by(col(TraceEvent.id))
            ).all()
            inputs = s.exec(select(TraceInput).where(TraceInput.event_id == r.id)).all()
        d = event_dict(r, summaries=self.summaries)
        return {
            **d,
            "result": d.get("result"),
            "result_truncated": d.get("result_truncated", False),
            "children": [c for c in children if c is not None],  # ids of stored rows are never None
            "inputs": [{"path": i.path, "sha256": i.sha256, "size": i.size, "source": i.source} for i in inputs],
        }

    def run_headlines(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """What the run list shows of each run beyond counts: ``{run_id: {question, citations, verdict, verified,
        anchors}}``. ``question``: see :mod:`aisac_core.trace.report` (from the run's first
        :data:`HEADLINE_EVENTS` events); ``citations``: the number the run's last answer cites (None without an
        answer); ``verdict``: the last evaluator's label (``passed`` / ``automatic checks passed`` / ``failed``; None when no
        evaluator ran); ``verified`` / ``anchors``: evidence anchors the evaluator found unchanged, of those it checked
        (None without one). Two queries whatever the number of runs (the first events by a window function)."""
        out: dict[str, dict[str, Any]] = {
            r: {"question": None, "citations": None, "verdict": None, "verified": None, "anchors": None}
            for r in run_ids
        }
        if not run_ids:
            return out
        T = TraceEvent
        rn = func.row_number().over(partition_by=T.run_id, order_by=col(T.id)).label("rn")
        first = (
            sa_select(col(T.run_id), col(T.id), col(T.kind), col(T.server), col(T.tool), col(T.arguments_json), rn)
            .where(col(T.run_id).in_(run_ids))
            .subquery()
        )
        with self.engine.connect() as conn:
            heads = conn.execute(
                sa_select(
                    first.c.run_id, first.c.id, first.c.kind, first.c.server, first.c.tool, first.c.arguments_json
                ).where(first.c.rn <= HEADLINE_EVENTS)
            ).all()
            ends = conn.execute(
                sa_select(col(T.run_id), col(T.id), col(T.kind), col(T.server), col(T.tool), col(T.result_json))
                .where(
                    col(T.run_id).in_(run_ids),
                    (col(T.tool).in_(["researcher", "evaluator"]) & (col(T.kind) == "role_step"))
                    | col(T.tool).endswith("roles_run", autoescape=True),
                )
                .order_by(col(T.id))
            ).all()
        by_run: dict[str, list[dict[str, Any]]] = {}
        for rid, eid, kind, server, tool, args in heads:
            by_run.setdefault(rid, []).append(
                {"id": eid, "kind": kind, "server": server, "tool": tool, "arguments": parse_json(args)[0]}
            )
        for rid, events in by_run.items():
            out[rid]["question"] = question_of(events)
        last: dict[str, list[dict[str, Any]]] = {}
        for rid, eid, kind, server, tool, result in ends:
            last.setdefault(rid, []).append(
                {"id": eid, "kind": kind, "server": server, "tool": tool, "result": parse_json(result)[0]}
            )
        for rid, events in last.items():
            out[rid].update(answer_digest(events))
        return out
