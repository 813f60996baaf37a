"""Holes in the trace, reported: trace events of calls that are not (or not yet) in the SQL store.

A run's trace has a gap when (see :mod:`aisac_core.trace.journal`):

- **lost** events: events that will never be in the store: the local journal was full while the store was down,
  the store rejected the event itself, or a journal line was torn by a crash. They are counted per run, first in
  ``<data dir>/trace-journal-lost.json``, then (on the next successful write) as one ``trace_gap`` event of the run
  whose ``arguments.dropped_events`` says how many;
- **pending** events: events waiting in the local journal of this data dir (the SQL store was unreachable when
  they were recorded), written at the next successful write.

``trace_verify`` reports a run's gap (:func:`run_gap`), the dashboard a warning line for the whole store
(:class:`StoreGaps`) and for the run on its page. Events journaled by a replica with another data dir are not
visible here until that replica writes them.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, inspect, select

from aisac_core.store.tables import TraceEvent
from aisac_core.trace.journal import GAP_KIND, pending_by_run, read_lost
from aisac_core.trace.results import TraceGap

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: runs named in a gap report at most
MAX_RUNS = 20


def _dropped(arguments_json: str) -> int:
    try:
        n = json.loads(arguments_json).get("dropped_events", 1)
    except (ValueError, AttributeError):
        return 1
    return int(n) if isinstance(n, int) and n > 0 else 1


def describe(lost: int, pending: int) -> str:
    """The one line a person reads about a gap (empty when there is none)."""
    parts = []
    if lost:
        parts.append(
            f"{lost} trace event{'s' if lost != 1 else ''} lost (the SQL store was unreachable and the local journal "
            "full, or the store rejected the event): those calls have no record"
        )
    if pending:
        parts.append(
            f"{pending} trace event{'s' if pending != 1 else ''} still wait in the local journal (the SQL store was "
            "unreachable); they are written by the next recorded call"
        )
    return "; ".join(parts)


def gap(lost: dict[str, int], pending: dict[str, int]) -> TraceGap:
    """A :class:`~aisac_core.trace.results.TraceGap` from per-run counts of lost and pending events."""
    n_lost, n_pending = sum(lost.values()), sum(pending.values())
    runs = sorted({r for r, n in (*lost.items(), *pending.items()) if n and r})
    return {"lost": n_lost, "pending": n_pending, "runs": runs[:MAX_RUNS], "detail": describe(n_lost, n_pending)}


def journal_gap(data_dir: Path) -> TraceGap:
    """The gap the journal files of ``data_dir`` show on their own, without the SQL store (``aisac status`` while the
    database is down): events lost (not yet written as ``trace_gap`` events) and events pending, per run."""
    lost = {run: int(v[0]) for run, v in read_lost(data_dir).items() if isinstance(v, list) and v}
    return gap(lost, pending_by_run(data_dir))


def run_gap(rows: list[Any], run_id: str, data_dir: Path | None) -> TraceGap:
    """The gap of one run: its ``trace_gap`` events among ``rows`` (its events,
    :func:`aisac_core.trace.queries.run_events`), plus what the journal files of ``data_dir`` hold for it (None: the
    store only)."""
    lost = sum(_dropped(r.arguments_json) for r in rows if r.kind == GAP_KIND)
    pending = 0
    if data_dir is not None:
        lost += int((read_lost(data_dir).get(run_id) or [0])[0])
        pending = pending_by_run(data_dir).get(run_id, 0)
    return gap({run_id: lost}, {run_id: pending})


class StoreGaps:
    """The gaps of a whole store, read incrementally: each call reads only ``trace_gap`` events newer than the last
    one seen (by primary key), so the dashboard's refreshes do not scan the trace table again. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._after = 0
        self._lost: dict[str, int] = {}

    def read(self, engine: Engine, data_dir: Path | None) -> TraceGap:
        """Every run's lost events (``trace_gap`` events and the lost counts not yet written) and the events pending
        in the journal of ``data_dir``."""
        t = inspect(TraceEvent).local_table
        with self._lock:
            with engine.connect() as conn:
                top = int(conn.execute(select(func.max(t.c.id))).scalar() or 0)
                if top < self._after:  # the trace was pruned or the store replaced: read it again
                    self._after, self._lost = 0, {}
                q = select(t.c.run_id, t.c.arguments_json).where(
                    t.c.id > self._after, t.c.id <= top, t.c.kind == GAP_KIND
                )
                for run, args in conn.execute(q):
                    self._lost[run] = self._lost.get(run, 0) + _dropped(args)
            self._after = top
            lost = dict(self._lost)
        pending: dict[str, int] = {}
        if data_dir is not None:
            for run, d in read_lost(data_dir).items():
                lost[run] = lost.get(run, 0) + int(d[0])
            pending = pending_by_run(data_dir)
        return gap(lost, pending)
