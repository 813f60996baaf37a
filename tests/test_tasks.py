"""Long work as MCP tasks (io.modelcontextprotocol/tasks), progress notifications and cancellation, with real
servers and real clients: the suite in memory, `aisac serve --transport http` as a subprocess. After every cancel,
the store holds no half-indexed file: each document's vector points match its manifest row."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from conftest import http_server, make_settings
from fastmcp import Client
from fastmcp_tasks import call_tool_task
from sqlmodel import Session, select

from aisac_servers.serving.suite import build
from aisac_servers.serving.tasks import client_extensions

pytestmark = pytest.mark.anyio
AISAC = str(Path(sys.executable).parent / "aisac")


def _big_corpus(src: Path, dest: Path, copies: int = 6) -> Path:
    """``copies`` copies of the test corpus's documents (distinct folders: distinct doc ids), so a job runs long
    enough to be cancelled between files."""
    for i in range(copies):
        d = dest / f"part{i}"
        d.mkdir(parents=True)
        for f in src.iterdir():
            if f.is_file() and f.suffix.lower() not in (".csv", ".tsv", ".parquet", ".json"):
                shutil.copy(f, d / f.name)
    return dest


def assert_store_whole(app, folder: Path) -> dict[str, int]:
    """No half-indexed file under ``folder``: every file's vector points match its manifest row (an ``indexed``
    row with ``chunk_count`` points, or no row and no point); no row is left ``indexing``. Returns ``{indexed,
    absent}`` counts."""
    from aisac_core.rag.indexer import doc_id_for
    from aisac_core.store.tables import Document
    from aisac_core.store.vectors import Cond

    vs = app.vectors()
    seen = {"indexed": 0, "absent": 0}
    with Session(app.engine) as s:
        assert not s.exec(select(Document).where(Document.status == "indexing")).all()
        for f in sorted(folder.rglob("*")):
            if not f.is_file():
                continue
            did = doc_id_for(f)
            row = s.get(Document, did)
            points = vs.count("chunks", [Cond("doc_id", eq=did)])
            if row is not None and row.status == "indexed":
                assert points == row.chunk_count and points > 0, (f, points, row.chunk_count)
                seen["indexed"] += 1
            else:
                assert points == 0, (f, points, row.status if row else None)
                seen["absent"] += 1
    return seen


async def _wait_status(c: Client, job_id: str, statuses: set[str], timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = (await c.call_tool("rag_job_status", {"job_id": job_id})).structured_content
        if st["status"] in statuses:
            return st
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {job_id} did not reach {statuses}: {st}")


async def _run_and_cancel(c: Client, corpus: Path, big: Path) -> None:
    """The scenario of both transports: an index task with progress in its status, then a second one cancelled."""
    names = {t.name for t in await c.list_tools()}
    assert {"rag_index", "rag_job_status", "rag_job_cancel"} <= names
    task = await call_tool_task(c, "rag_index", {"path": str(corpus)})
    messages = []
    while (st := await task.status()).status == "working":
        messages.append(st.status_message)
        await asyncio.sleep(0.05)
    messages.append(st.status_message)
    assert st.status == "completed", st
    assert any(m and "files" in m for m in messages), messages  # progress: "running: 2/6 files, last ..."
    done = (await task.result()).structured_content
    assert done["status"] == "done" and done["counters"]["files_indexed"] == 5

    task = await call_tool_task(c, "rag_index", {"path": str(big)})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # cancel once the job has indexed a file or two
        st = await task.status()
        assert st.status == "working", st
        if st.status_message and not st.status_message.startswith(("queued", "running: 0/")):
            break
        await asyncio.sleep(0.1)
    await task.cancel()
    final = await task.wait(timeout=60)
    assert final.status == "cancelled"
    jobs = (await c.call_tool("rag_job_status", {})).structured_content["jobs"]
    job_id = next(j["job_id"] for j in jobs if j["params"]["paths"] == [str(big)])
    st = await _wait_status(c, job_id, {"cancelled", "done"})
    assert st["status"] == "cancelled", st  # the job stopped between two files
    assert 0 < st["done"] < st["total"]


async def test_index_task_progress_and_cancel_in_memory(fast_core, corpus_copy, tmp_path):
    big = _big_corpus(corpus_copy, tmp_path / "big", copies=20)
    async with Client(build(app=fast_core), extensions=client_extensions()) as c:
        await _run_and_cancel(c, corpus_copy, big)
    seen = assert_store_whole(fast_core, big)
    assert seen["indexed"] >= 1 and seen["absent"] >= 1


async def test_foreground_calls_without_tasks_keep_progress_notifications(fast_core, corpus_copy):
    """A client without the tasks extension calls the same tool as before: wait=true streams progress."""
    async with Client(build(app=fast_core)) as c:
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(p: float, total: float | None, msg: str | None) -> None:
            progress.append((p, total, msg))

        r = await c.call_tool("rag_index", {"path": str(corpus_copy), "wait": True}, progress_handler=on_progress)
        assert r.structured_content["status"] == "done"
        assert progress and progress[-1][0] == progress[-1][1] and "files" in (progress[-1][2] or "")
        # 2026-07-28 lists no per-tool task support (the server decides per call, SEP-2663)
        assert {"rag_index", "lit_import", "data_code_run", "roles_run"} <= {t.name for t in await c.list_tools()}


async def test_poll_style_cancel_of_index_and_code_jobs(fast_core, corpus_copy, tmp_path):
    big = _big_corpus(corpus_copy, tmp_path / "big")
    async with Client(build(app=fast_core)) as c:
        job_id = (await c.call_tool("rag_index", {"path": str(big)})).structured_content["job_id"]
        await _wait_status(c, job_id, {"running"})
        deadline = time.monotonic() + 300
        while (await c.call_tool("rag_job_status", {"job_id": job_id})).structured_content["done"] < 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        r = (await c.call_tool("rag_job_cancel", {"job_id": job_id})).structured_content
        assert r["kind"] == "index" and r["status"] in ("cancelling", "cancelled", "done")
        st = await _wait_status(c, job_id, {"cancelled", "done"})
        assert st["status"] == "cancelled" and st["finished_at"]
        # cancelling again is harmless; an unknown id is a clear error
        again = (await c.call_tool("rag_job_cancel", {"job_id": job_id})).structured_content
        assert again["status"] == "cancelled"
        bad = await c.call_tool("rag_job_cancel", {"job_id": "job-nope"}, raise_on_error=False)
        assert bad.is_error and "unknown job id" in bad.content[0].text

        # a code run: its worker is killed, the run reads cancelled, the next run reports the lost state
        await c.call_tool("data_code_run", {"session": "c1", "code": "x = 41"})
        r = (
            await c.call_tool("data_code_run", {"session": "c1", "code": "import time\ntime.sleep(60)"}, timeout=60)
        ).structured_content
        if r.get("pending"):
            code_job = r["job_id"]
        else:  # pragma: no cover - a threshold above 60 s
            pytest.skip("the sandbox answered without a job id")
        r = (await c.call_tool("rag_job_cancel", {"job_id": code_job})).structured_content
        assert r == {"job_id": code_job, "kind": "code", "status": "cancelled"}
        st = (await c.call_tool("data_code_job_status", {"job_id": code_job})).structured_content
        assert st["status"] == "cancelled" and st["ok"] is False
        r = (await c.call_tool("data_code_run", {"session": "c1", "code": "'x' in dir()"})).structured_content
        assert r["ok"] and r["result"] == "False" and r["state_lost"] is True
    assert_store_whole(fast_core, big)


async def test_code_run_task_cancel_in_memory(settings, shared_embedder):
    """data_code_run as a task runs to its end (past the job threshold); tasks/cancel kills its worker."""
    from aisac_core.context import AppContext

    app = AppContext(
        settings.model_copy(update={"sandbox": settings.sandbox.model_copy(update={"job_threshold_s": 0.5})}),
        embedder=shared_embedder,
    )
    try:
        async with Client(build(app=app), extensions=client_extensions()) as c:
            r = await c.call_tool("data_code_run", {"session": "t1", "code": "import time\ntime.sleep(1.5)\n6 * 7"})
            assert r.structured_content["result"] == "42"  # no pending job: the task waited past the threshold
            task = await call_tool_task(c, "data_code_run", {"session": "t1", "code": "import time\ntime.sleep(60)"})
            await asyncio.sleep(1.0)
            await task.cancel()
            assert (await task.wait(timeout=30)).status == "cancelled"
            deadline = time.monotonic() + 20
            while True:  # the session is free again once the killed run is finished
                r = await c.call_tool("data_code_run", {"session": "t1", "code": "1 + 1"}, raise_on_error=False)
                if not r.is_error or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert r.structured_content["result"] == "2" and r.structured_content["state_lost"] is True
    finally:
        app.close()


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1")
    return env


async def test_index_task_over_streamable_http(tmp_path, models_dir, corpus_copy):
    """`aisac serve --transport http`: a fastmcp client with the tasks extension runs and cancels index tasks; once
    the server has stopped, the store holds every file whole or not at all."""
    from aisac_core.context import AppContext

    data_dir = tmp_path / "store"
    settings = make_settings(data_dir, models_dir)
    big = _big_corpus(corpus_copy, tmp_path / "big", copies=20)
    with http_server(_env(data_dir), timeout=60) as url:
        async with Client(url, extensions=client_extensions(), timeout=120) as c:
            await _run_and_cancel(c, corpus_copy, big)
    app = AppContext(settings)
    try:
        seen = assert_store_whole(app, big)
        assert seen["indexed"] >= 1 and seen["absent"] >= 1
    finally:
        app.close()


def test_typescript_sdk_client_runs_and_cancels_index_tasks(tmp_path, models_dir, corpus_copy):
    """The official TypeScript SDK client (tests/interop/sdk_tasks.mjs): its own task support is the earlier draft,
    so it sends the extension's requests (tools/call with the opt-in, tasks/get, tasks/cancel) with request()."""
    import json
    import subprocess

    interop = Path(__file__).parent / "interop"
    if shutil.which("node") is None or not (interop / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.skip("Node.js or tests/interop/node_modules missing (test_interop.py installs them with npm ci)")
    from aisac_core.context import AppContext

    data_dir = tmp_path / "store"
    settings = make_settings(data_dir, models_dir)
    big = _big_corpus(corpus_copy, tmp_path / "big", copies=20)
    with http_server(_env(data_dir), timeout=60) as url:
        out = subprocess.run(
            ["node", str(interop / "sdk_tasks.mjs"), url, str(corpus_copy), str(big)],
            check=False,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=interop,
        )
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert out.returncode == 0 and lines and all(x["ok"] for x in lines), out.stdout[-3000:] + out.stderr[-2000:]
    assert {x["check"] for x in lines} >= {
        "tools/call answers a task handle",
        "tasks/cancel ends the task cancelled",
        "tasks/get reports progress in statusMessage",
    }
    app = AppContext(settings)
    try:
        assert_store_whole(app, big)
    finally:
        app.close()


def test_job_queue_cancel_states(settings) -> None:
    """queued -> cancelled at once; running -> cancelling (the runner's writes fail, it ends the job cancelled);
    a cancelling job whose runner died ends cancelled at the next claim."""
    from datetime import timedelta

    from aisac_core.store.jobqueue import JobQueue
    from aisac_core.store.sql import make_engine
    from aisac_core.store.tables import Job, utcnow

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_sql_url)
    try:
        q, other = JobQueue(engine), JobQueue(engine)
        q.submit("j1", "index", "{}")
        assert q.request_cancel("j1") == "cancelled" and q.claim(["index"]) is None
        q.submit("j2", "index", "{}")
        assert q.claim(["index"])["job_id"] == "j2"
        assert other.request_cancel("j2") == "cancelling"
        assert not q.update("j2", done=1) and q.cancelling("j2") and not other.cancelling("j2")
        assert not q.renew("j2")  # the lease still runs while the job stops
        assert q.finish("j2", "failed")
        with Session(engine) as s:
            assert s.get(Job, "j2").status == "cancelled"
        assert q.request_cancel("j2") == "cancelled" and q.request_cancel("nope") is None
        q.submit("j3", "index", "{}")
        q.claim(["index"])
        other.request_cancel("j3")
        with Session(engine) as s:  # its runner died: the lease runs out
            row = s.get(Job, "j3")
            row.lease_expires_at = utcnow() - timedelta(seconds=1)
            s.add(row)
            s.commit()
        assert other.claim(["index"]) is None
        with Session(engine) as s:
            assert s.get(Job, "j3").status == "cancelled"
    finally:
        engine.dispose()


async def test_roles_job_cancel_here_and_from_another_process(settings) -> None:
    from aisac_core.roles.jobs import RunJobs
    from aisac_core.store.sql import make_engine

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.resolved_sql_url)
    try:
        here, there = RunJobs(engine, lease_s=3), RunJobs(engine, lease_s=3)

        async def slow() -> dict:
            await asyncio.sleep(60)
            return {}

        j1 = here.start("run-1", slow)
        await asyncio.sleep(0.1)
        assert here.cancel(j1)["status"] == "cancelled"
        await here.wait(j1, 5)
        assert here.status(j1)["status"] == "cancelled" and there.status(j1)["status"] == "cancelled"
        j2 = here.start("run-2", slow)
        await asyncio.sleep(0.1)
        assert there.cancel(j2)["status"] == "cancelling"  # the process running it stops it at its next renewal
        await here.wait(j2, 10)
        assert here.status(j2)["status"] == "cancelled" and there.status(j2)["status"] == "cancelled"
        assert here.cancel("rjob-nope") is None
    finally:
        engine.dispose()


async def test_index_task_over_stdio_through_the_owner(tmp_path, models_dir, corpus_copy, monkeypatch):
    """`aisac serve` over stdio relays the task requests (tools/call with the opt-in, tasks/get, tasks/cancel) to
    the store's owner daemon, which runs the tasks.

    The client waits up to 120 s for its `server/discover` probe, like the test's other requests: the relay answers
    it once the owner it starts is up (a fresh store has no answer catalogue), and the SDK's default of 10 s
    (mcp.client.session.DISCOVER_TIMEOUT_SECONDS) is shorter than that cold start on a loaded machine; a timed-out
    probe falls back to the legacy handshake, where tasks do not exist ("did not run as a task", intermittently:
    alone and in the file's order)."""
    import mcp.client.session
    from fastmcp.client.transports import StdioTransport

    monkeypatch.setattr(mcp.client.session, "DISCOVER_TIMEOUT_SECONDS", 120.0)

    from aisac_core.context import AppContext
    from aisac_core.owner import stop_owner

    data_dir = tmp_path / "store"
    settings = make_settings(data_dir, models_dir)
    big = _big_corpus(corpus_copy, tmp_path / "big", copies=20)
    transport = StdioTransport(command=AISAC, args=["serve"], env=_env(data_dir), keep_alive=False)
    try:
        async with Client(transport, extensions=client_extensions(), timeout=120) as c:
            await _run_and_cancel(c, corpus_copy, big)
    finally:
        stop_owner(data_dir)
    app = AppContext(settings)
    try:
        assert_store_whole(app, big)
    finally:
        app.close()


async def test_roles_run_as_a_task(fast_core, monkeypatch):
    """roles_run as a task runs the graph in the docket worker (no request there: the suite's context reaches it)
    and inlines its answer; llm=sampling is refused as a task (no back-channel)."""
    monkeypatch.setenv("AISAC_ROLES_LLM", "none")
    async with Client(build(app=fast_core), extensions=client_extensions()) as c:
        task = await call_tool_task(c, "roles_run", {"task": "What is the melting point of the lipase?", "llm": "none"})
        r = (await asyncio.wait_for(task.result(), 300)).structured_content
        assert r["status"] == "done" and r["job_id"].startswith("rjob-") and "answer" in r
        st = (await c.call_tool("roles_job_status", {"job_id": r["job_id"]})).structured_content
        assert st["status"] == "done"
        bad = await call_tool_task(c, "roles_run", {"task": "x", "llm": "sampling"}, raise_on_error=False)
        res = await asyncio.wait_for(bad.result(), 30)  # a tool error: the task completes with an error result
        assert res.is_error and "sampling" in res.content[0].text
