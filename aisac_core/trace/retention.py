"""Trace statistics and retention (delete old runs after exporting them)."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from aisac_core.store.tables import TraceEvent, TraceInput, TraceRunPin
from aisac_core.trace.queries import ERROR_STATUSES, TraceError, iso, naive_utc
from aisac_core.trace.results import Pruned, Stats, ToolStats

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: largest ``older_than_days`` of :func:`prune_runs`: 100 years (a larger value overflows the date arithmetic and
#: could select nothing anyway)
MAX_DAYS = 36_500


def _percentile(vals: list[float], p: float) -> float:
    """The ``p``-th percentile (0..100) of ``vals`` with linear interpolation (numpy's default method)."""
    v = sorted(vals)
    k = (len(v) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return round(v[lo] + (v[hi] - v[lo]) * (k - lo), 3)


class TraceStatistics:
    """Totals and latencies of one store's trace: a part of :class:`~aisac_core.trace.service.TraceService`.
    Collaborator: ``engine`` (the store's SQL engine)."""

    engine: Engine

    def stats(self, since: str | datetime | None = None) -> Stats:
        """Totals over the trace (events since ``since``, ISO 8601, when given): ``{runs, events, by_kind, by_status,
        first_event_at, last_event_at, tools: [{tool, calls, errors, error_rate, p50_ms, p95_ms, max_ms}]}``
        (latencies in ms; tools by calls, most first). Raises TraceError for a bad date."""
        T = TraceEvent
        since_d = naive_utc(since, "since")
        q = sa_select(col(T.run_id), col(T.kind), col(T.status), col(T.tool), col(T.latency_ms), col(T.created_at))
        if since_d:
            q = q.where(col(T.created_at) >= since_d)
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        runs: set[str] = set()
        kinds: dict[str, int] = {}
        statuses: dict[str, int] = {}
        per_tool: dict[str, dict[str, Any]] = {}
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
        tools: list[ToolStats] = [
            {
                "tool": name,
                "calls": t["calls"],
                "errors": t["errors"],
                "error_rate": round(t["errors"] / t["calls"], 4),
                "p50_ms": _percentile(t["lat"], 50),
                "p95_ms": _percentile(t["lat"], 95),
                "max_ms": round(max(t["lat"]), 3),
            }
            for name, t in sorted(per_tool.items(), key=lambda kv: -kv[1]["calls"])
        ]
        return {
            "runs": len(runs),
            "events": len(rows),
            "by_kind": kinds,
            "by_status": statuses,
            "first_event_at": iso(first),
            "last_event_at": iso(last),
            "tools": tools,
        }


def prune_runs(
    engine: Engine, older_than_days: float, *, export: Callable[[str], str], dry_run: bool = False
) -> Pruned:
    """Delete runs whose last event is older than ``older_than_days`` days, after exporting each as a JSON bundle
    (``export(run_id)`` writes it and returns its path: ``<data dir>/trace_exports/<run>.json`` from the trace
    service; a run whose export fails is kept and listed in ``failed``).
    ``dry_run`` lists without exporting or deleting. Returns ``{cutoff, runs: [run ids], exported: [paths],
    deleted_events, dry_run, failed: [{run_id, error}]}``. Raises TraceError when ``older_than_days`` is not a
    number from 0 to :data:`MAX_DAYS` (36,500 days, 100 years: older cut-offs fall before any trace)."""
    T = TraceEvent
    try:
        days = float(older_than_days)
    except (TypeError, ValueError) as exc:
        raise TraceError(
            f"older_than_days must be a number of days from 0 to {MAX_DAYS:,}, got {str(older_than_days)[:40]}"
        ) from exc
    if not (math.isfinite(days) and 0 <= days <= MAX_DAYS):
        raise TraceError(
            f"older_than_days must be a number of days from 0 to {MAX_DAYS:,} (100 years), got "
            f"{str(older_than_days)[:40]}"
        )
    cutoff = datetime.now(UTC) - timedelta(days=days)
    with Session(engine) as s:
        old = list(s.exec(select(T.run_id).group_by(T.run_id).having(func.max(T.created_at) < cutoff)).all())
    out: Pruned = {
        "cutoff": iso(cutoff),
        "runs": old,
        "exported": [],
        "deleted_events": 0,
        "dry_run": bool(dry_run),
        "failed": [],
    }
    if dry_run:
        return out
    for rid in old:
        try:
            path = export(rid)
            if not Path(path).stat().st_size:
                raise OSError("empty export")
        except Exception as exc:  # a run that cannot be exported is kept
            out["failed"].append({"run_id": rid, "error": f"{type(exc).__name__}: {exc}"})
            continue
        out["exported"].append(path)
        with Session(engine) as s:
            res = s.exec(delete(T).where(col(T.run_id) == rid))
            out["deleted_events"] += res.rowcount or 0
            s.exec(delete(TraceInput).where(col(TraceInput.run_id) == rid))
            s.exec(delete(TraceRunPin).where(col(TraceRunPin.run_id) == rid))
            s.commit()
    out["runs"] = [r for r in old if r not in {f["run_id"] for f in out["failed"]}]
    return out
