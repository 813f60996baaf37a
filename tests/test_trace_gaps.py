"""A hole in the trace is reported: events lost while the SQL store was unreachable (a full local journal, a torn
journal line, an event the store rejects) and events still waiting in the journal show in ``trace_verify``'s
``gap``, in ``TraceService.gaps`` and as a warning line on the dashboard's run list and run page.

The store is a real SQLite store; "unreachable" is a real PostgreSQL URL on a port nothing listens on (connection
refused), so the recorder's own error path runs. The journal is made small (3 events) to force drops.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine

from aisac_core.trace import journal
from aisac_core.trace.service import TraceService

pytestmark = pytest.mark.anyio

#: a PostgreSQL server that cannot be reached (port 1: connection refused at once)
DOWN = "postgresql+psycopg://aisac@127.0.0.1:1/none?connect_timeout=2"


def _event(run: str, i: int) -> dict[str, object]:
    return {
        "run_id": run,
        "server": "rag",
        "tool": "rag_search",
        "arguments": {"query": f"q{i}"},
        "result": {"hits": []},
        "status": "ok",
        "error": None,
        "latency_ms": 1.0,
    }


async def test_a_full_journal_leaves_a_reported_gap(fast_core, monkeypatch) -> None:
    from aisac_core.trace.dashboard import create_app

    monkeypatch.setattr(journal, "MAX_EVENTS", 3)
    store = fast_core.engine
    engine = [create_engine(DOWN)]
    trace = TraceService(fast_core.settings, engine=lambda: engine[0], rag=lambda: fast_core.rag)
    data_dir: Path = fast_core.settings.data_dir

    assert trace.record(**_event("before", 0)) == 0  # down from the start: journaled
    engine[0] = store
    trace.record(**_event("before", 1))  # back: the journal is written first, then this event
    assert trace.gaps() == {"lost": 0, "pending": 0, "runs": [], "detail": ""}
    assert trace.verify("before", use_index=False)["gap"]["detail"] == ""

    engine[0] = create_engine(DOWN)  # down: 5 calls, 3 kept in the journal, 2 lost (the journal is full)
    for i in range(5):
        assert trace.record(**_event("r1", i)) == 0
    assert stat.S_IMODE((data_dir / journal.LOST).stat().st_mode) == 0o600
    engine[0] = store  # readable again, nothing written yet: the dashboard reads the journal files
    g = trace.gaps()
    assert (g["lost"], g["pending"], g["runs"]) == (2, 3, ["r1"])
    assert "2 trace events lost" in g["detail"] and "3 trace events still wait" in g["detail"]

    # a crash mid-write tears a journal line: that event is lost too (counted, not silently skipped)
    with (data_dir / journal.JOURNAL).open("a") as f:
        f.write('{"run_id": "r1", "server": "rag", "tool": "rag_se')
    trace.record(**_event("r2", 0))  # the next write empties the journal and reports the lost events
    assert not (data_dir / journal.JOURNAL).exists() and not (data_dir / journal.LOST).exists()

    v = trace.verify("r1", use_index=False)
    assert v["gap"]["lost"] == 3 and v["gap"]["pending"] == 0 and "3 trace events lost" in v["gap"]["detail"]
    assert trace.verify("r2", use_index=False)["gap"]["lost"] == 0
    kinds = trace.get_run("r1")["run"]["by_kind"]
    assert kinds == {"tool_call": 3, "trace_gap": 1}  # the three journaled events, written with one gap event
    g = trace.gaps()
    assert (g["lost"], g["pending"], g["runs"]) == (3, 0, ["r1"])

    app = create_app(trace)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as h:
        page = (await h.get("/")).text
        assert "id=trace-gap" in page and "3 trace events lost" in page and "?id=r1" in page
        run = (await h.get("/run", params={"id": "r1"})).text
        assert "id=trace-gap" in run and "3 trace events lost" in run
        clean = (await h.get("/run", params={"id": "r2"})).text
        assert "id=trace-gap" not in clean
        assert json.loads((await h.get("/run/verify", params={"id": "r1"})).text)["gap"]["lost"] == 3


def test_lost_counts_survive_a_restart_of_the_process(fast_core, monkeypatch) -> None:
    """The count of lost events is on disk: a new process (a new journal) writes the gap event."""
    monkeypatch.setattr(journal, "MAX_EVENTS", 1)
    down = create_engine(DOWN)
    first = TraceService(fast_core.settings, engine=lambda: down, rag=lambda: fast_core.rag)
    for i in range(3):
        first.record(**_event("r3", i))
    second = TraceService(fast_core.settings, engine=lambda: fast_core.engine, rag=lambda: fast_core.rag)
    second.record(**_event("r4", 0))
    assert second.verify("r3", use_index=False)["gap"]["lost"] == 2
    assert second.gaps()["runs"] == ["r3"]
    # an event the store itself rejects (SQLite stores NaN as NULL: NOT NULL fails) is raised and counted as lost
    with pytest.raises(Exception, match="NOT NULL"):
        second.record(**{**_event("r5", 0), "latency_ms": float("nan")})
    assert "rejected the event (IntegrityError" in journal.read_lost(fast_core.settings.data_dir)["r5"][3]
    second.record(**_event("r5", 1))
    assert second.verify("r5", use_index=False)["gap"]["lost"] == 1
    assert second.get_run("r5")["run"]["by_kind"] == {"tool_call": 1, "trace_gap": 1}
    # a journaled event the store refuses once it is back is lost; the events after it are still written
    monkeypatch.setattr(journal, "MAX_EVENTS", 10)
    first.record(**{**_event("r6", 0), "latency_ms": float("nan")})
    first.record(**_event("r6", 1))
    second.record(**_event("r7", 0))
    assert not (fast_core.settings.data_dir / journal.JOURNAL).exists()
    assert second.verify("r6", use_index=False)["gap"]["lost"] == 1
    assert second.get_run("r6")["run"]["by_kind"] == {"tool_call": 1, "trace_gap": 1}
