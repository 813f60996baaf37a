"""Issue 42, acceptance 2: a tool call cancelled by its client (``notifications/cancelled``) or cut by the client's
disconnect is still on the record: its trace event has status ``cancelled``, says what the index job it waited on
had done (``done`` of ``total`` files), and ``trace_verify`` reports no gap for the run. Real clients: the Python SDK
(fastmcp) in memory and over stdio through the owner, the TypeScript SDK over HTTP, and a stdio host killed
mid-call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import make_settings, unique_corpus
from fastmcp import Client
from test_tasks import _big_corpus

from aisac_servers.serving.suite import build

pytestmark = pytest.mark.anyio
AISAC = str(Path(sys.executable).parent / "aisac")


async def _events(c: Client, run_id: str) -> list[dict]:
    """The run's rag_index events (none while the run has no event yet)."""
    r = await c.call_tool(
        "trace_get_run", {"run_id": run_id, "detail": "full", "include_results": True}, raise_on_error=False
    )
    if r.is_error:
        assert "unknown run" in r.content[0].text, r.content[0].text
        return []
    return [e for e in r.structured_content["tree"] if e["tool"] == "rag_index"]


def _assert_cancelled(ev: dict) -> None:
    assert ev["status"] == "cancelled", ev
    assert "cancel" in (ev["error"] or ""), ev
    result = ev["result"] if isinstance(ev.get("result"), dict) else json.loads(ev["result"])
    assert result["cancelled"] is True and len(result["jobs"]) == 1, result
    job = result["jobs"][0]
    assert job["job_id"] and 1 <= job["done"] <= job["total"], job  # what the job had done when the call ended


async def _cancel_after_first_file(c: Client, folder: Path, run_id: str) -> None:
    """Call rag_index with wait=true and cancel the call (the SDK sends notifications/cancelled) once a file is
    indexed."""
    first = anyio.Event()

    async def on_progress(p: float, total: float | None, msg: str | None) -> None:
        if p >= 1:
            first.set()

    async def call() -> None:
        await c.call_tool(
            "rag_index",
            {"path": str(folder), "wait": True},
            progress_handler=on_progress,
            meta={"aisac/run_id": run_id},
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(120):
            await first.wait()
        tg.cancel_scope.cancel()


async def test_a_call_cancelled_through_the_python_sdk_is_on_the_record(fast_core, corpus_copy, tmp_path):
    big = _big_corpus(corpus_copy, tmp_path / "big", copies=3)
    async with Client(build(app=fast_core)) as c:
        await _cancel_after_first_file(c, big, "run-cancelled-py")
        with anyio.fail_after(30):
            while not (events := await _events(c, "run-cancelled-py")):
                await anyio.sleep(0.05)
        _assert_cancelled(events[0])
        verified = (await c.call_tool("trace_verify", {"run_id": "run-cancelled-py"})).structured_content
        assert verified["gap"]["lost"] == 0 and verified["gap"]["pending"] == 0 and not verified["gap"]["detail"]


@pytest.fixture
def owned(tmp_path, models_dir):
    from aisac_core.owner import stop_owner

    data_dir = tmp_path / "store"
    make_settings(data_dir, models_dir)
    yield data_dir
    stop_owner(data_dir, timeout=30)


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1")
    return env


#: a host process: starts `aisac serve` over stdio, calls rag_index (wait=true, run id in _meta) and, once a file is
#: indexed (a progress notification), says so and waits to be killed
_HOST = r"""
import json, subprocess, sys, time
aisac, folder = sys.argv[1:3]
p = subprocess.Popen([aisac, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def send(m):
    p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
      "capabilities": {}, "clientInfo": {"name": "killed-host", "version": "1"}}})
assert json.loads(p.stdout.readline())["id"] == 1
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "rag_index",
      "arguments": {"path": folder, "wait": True}, "_meta": {"progressToken": "t", "aisac/run_id": "run-killed"}}})
while True:
    m = json.loads(p.stdout.readline())
    if m.get("method") == "notifications/progress" and m["params"]["progress"] >= 1:
        print("indexing", flush=True)
        time.sleep(3600)
"""


async def test_cancelled_and_killed_hosts_through_the_owner(owned, corpus_copy, tmp_path):
    """Over stdio through the store's owner: a call the Python SDK cancels, and a call whose host is killed (SIGKILL:
    the relay sees its stdin close and cancels the call at the owner), each end on the record as cancelled."""
    from fastmcp.client.transports import StdioTransport

    big = _big_corpus(corpus_copy, tmp_path / "big", copies=3)
    other = unique_corpus(tmp_path / "other")  # text no cache has seen: the killed host's job is still running
    transport = StdioTransport(command=AISAC, args=["serve"], env=_env(owned), keep_alive=False)
    async with Client(transport, mode="legacy") as c:
        await _cancel_after_first_file(c, big, "run-cancelled-stdio")
        host = subprocess.Popen(
            [sys.executable, "-c", _HOST, AISAC, str(other)], env=_env(owned), stdout=subprocess.PIPE, text=True
        )
        try:
            with anyio.fail_after(180):
                line = await anyio.to_thread.run_sync(host.stdout.readline)
            assert line.strip() == "indexing", line
        finally:
            os.kill(host.pid, signal.SIGKILL)
            host.wait()
        for run_id in ("run-cancelled-stdio", "run-killed"):
            with anyio.fail_after(60):
                while not (events := await _events(c, run_id)):
                    await anyio.sleep(0.2)
            _assert_cancelled(events[0])
            verified = (await c.call_tool("trace_verify", {"run_id": run_id})).structured_content
            assert not verified["gap"]["detail"], verified["gap"]
