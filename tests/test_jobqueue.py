"""The jobs table as a queue shared by processes (:mod:`aisac_core.store.jobqueue`), on SQLite and PostgreSQL:
claims are exclusive under contention, a lease that runs out passes the job on, a process that lost its lease
cannot write the job any more, and roles runs are readable by every process."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
from sqlmodel import Session

from aisac_core.roles.jobs import RunJobs
from aisac_core.store.jobqueue import JobQueue
from aisac_core.store.sql import make_engine
from aisac_core.store.tables import Job, utcnow

pytestmark = pytest.mark.both_engines


@pytest.fixture
def engine(settings):
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    e = make_engine(settings.resolved_sql_url)
    yield e
    e.dispose()


def _expire(engine, job_id: str) -> None:
    with Session(engine) as s:
        row = s.get(Job, job_id)
        assert row is not None
        row.lease_expires_at = utcnow() - timedelta(seconds=1)
        s.add(row)
        s.commit()


def test_claims_are_exclusive_under_contention(settings, engine) -> None:
    """4 claimers (each with its own engine, as separate processes) drain 200 jobs: each claimed exactly once."""
    JobQueue(engine)
    for i in range(200):
        JobQueue(engine).submit(f"j{i:03d}", "t", "{}")
    got: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def work(k: int) -> None:
        e = make_engine(settings.resolved_sql_url)
        q = JobQueue(e)
        start.wait()
        while (job := q.claim(["t"])) is not None:
            got[k].append(job["job_id"])
            assert q.finish(job["job_id"], "done")
        e.dispose()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    claimed = [j for g in got for j in g]
    assert sorted(claimed) == [f"j{i:03d}" for i in range(200)]  # every job, none twice
    with Session(engine) as s:
        rows = [s.get(Job, f"j{i:03d}") for i in range(200)]
    assert all(r is not None and r.status == "done" and r.attempts == 1 for r in rows)


def test_a_lost_lease_passes_the_job_on(engine) -> None:
    a, b = JobQueue(engine, lease_s=60, max_attempts=2), JobQueue(engine, lease_s=60, max_attempts=2)
    a.submit("j1", "t", '{"x": 1}')
    assert a.claim(["other"]) is None  # kinds are respected
    job = a.claim(["t"])
    assert job == {"job_id": "j1", "kind": "t", "params_json": '{"x": 1}', "attempts": 1, "done": 0}
    assert b.claim(["t"]) is None  # held under a live lease
    assert a.update("j1", done=3) and a.renew("j1")
    _expire(engine, "j1")  # a stops renewing (it died, or stalled)
    again = b.claim(["t"])
    assert again is not None and again["attempts"] == 2
    assert again["done"] == 3  # what the previous holder recorded: the new one starts from it
    assert not a.update("j1", done=99)  # the stale holder cannot overwrite the new holder's row
    assert not a.finish("j1", "done")
    with Session(engine) as s:
        row = s.get(Job, "j1")
        assert row is not None and row.done == 3 and row.lease_owner == b.owner and row.status == "running"
        assert "claimed again (attempt 2)" in (row.message or "")
    _expire(engine, "j1")  # b dies too: the attempts are used up
    assert a.claim(["t"]) is None
    with Session(engine) as s:
        row = s.get(Job, "j1")
        assert row is not None and row.status == "interrupted" and "stopped 2 times" in (row.message or "")
    with pytest.raises(ValueError, match="not a final job status"):
        a.finish("j1", "running")


def test_roles_jobs_are_read_by_every_process(engine) -> None:
    here, there = RunJobs(engine, lease_s=3), RunJobs(engine, lease_s=3)

    async def scenario() -> None:
        gate = asyncio.Event()

        async def graph() -> dict:
            await gate.wait()
            return {"answer": {"text": "42"}, "run_id": "run-x"}

        async def broken() -> dict:
            raise RuntimeError("no model")

        jid = here.start("run-x", graph, {"task": "q"})
        st = await asyncio.to_thread(there.status, jid)
        assert st is not None and st["status"] == "running" and st["run_id"] == "run-x"
        assert st["runner"] == here.queue.owner  # type: ignore[union-attr]
        await asyncio.sleep(1.5)  # past a renewal (every lease/3 = 1 s)
        gate.set()
        await here.wait(jid, 10)
        st = await asyncio.to_thread(there.status, jid)
        assert st is not None and st["status"] == "done" and st["result"]["answer"]["text"] == "42"
        bad = here.start("run-y", broken)
        await here.wait(bad, 10)
        st = await asyncio.to_thread(there.status, bad)
        assert st is not None and st["status"] == "failed" and "no model" in st["error"]
        assert [j["job_id"] for j in await asyncio.to_thread(there.list)][-2:] == [jid, bad]
        assert all("result" not in j for j in await asyncio.to_thread(there.list))

    asyncio.run(scenario())
    # a process that dies mid-run stops renewing: once the lease expired, the others read "interrupted"
    here.queue.start_here("rjob-dead", "roles", '{"run_id": "run-z"}')  # type: ignore[union-attr]
    assert there.status("rjob-dead")["status"] == "running"  # type: ignore[index]
    _expire(engine, "rjob-dead")
    st = there.status("rjob-dead")
    assert st is not None and st["status"] == "interrupted" and "stopped" in st["error"]
    assert there.status("rjob-unknown") is None
    JobQueue(engine).submit("j-index", "index", "{}")
    assert there.status("j-index") is None  # an indexing job is not a roles job
