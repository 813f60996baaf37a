"""CLI commands while the store's owner process runs, and hosts whose settings differ from the owner's.

Real `aisac` subprocesses and real owner daemons; every test stops the daemons it started (``owned_store``).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from conftest import make_settings
from fastmcp.exceptions import ToolError
from test_owner import AISAC, owner_info, serve_env, stdio, stop_all


@pytest.fixture
def owned_store(tmp_path, models_dir):
    """An empty store (model folder linked in); every owner daemon on it is stopped at teardown."""
    data_dir = tmp_path / "store"
    make_settings(data_dir, models_dir)
    yield data_dir
    stop_all(data_dir)


def cli(data_dir: Path, *args: str, timeout: int = 600, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [AISAC, *args],
        env={**serve_env(data_dir, **extra), "COLUMNS": "160"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _comparable_status(st: dict) -> dict:
    # store_bytes: the owner's files (owner.json, owner.log) count too; trace_events: the host's call is traced;
    # owner: where the running owner listens (only while one runs)
    skip = ("store_bytes", "chunks_in_vector_store", "trace_events", "owner")
    return {k: v for k, v in st.items() if k not in skip}


@pytest.mark.anyio
async def test_every_cli_command_works_while_the_owner_runs_and_agrees(owned_store, corpus):
    d = owned_store
    first = cli(d, "index", str(corpus), "--json")  # no owner yet: in-process
    assert first.returncode == 0, first.stderr
    again_here = json.loads(cli(d, "index", str(corpus), "--json").stdout)
    search_here = json.loads(cli(d, "search", "Michaelis constant of the lipase", "-k", "3", "--json").stdout)
    status_here = json.loads(cli(d, "status", "--json").stdout)

    async with stdio(d) as host:  # a host session starts the owner daemon, which stays after it
        assert (await host.call_tool("memory_list_sessions", {})).structured_content is not None
    pid = owner_info(d)["pid"]

    status_owner = cli(d, "status", "--json")
    assert status_owner.returncode == 0, status_owner.stderr
    st = json.loads(status_owner.stdout)
    assert _comparable_status(st) == _comparable_status(status_here)
    assert "owner" not in status_here and st["owner"].startswith(f"pid {pid}, Unix socket {d / 'owner.sock'}")
    assert st["chunks_in_vector_store"] in (None, status_here["chunks_in_vector_store"])

    search_owner = cli(d, "search", "Michaelis constant of the lipase", "-k", "3", "--json")
    assert search_owner.returncode == 0, search_owner.stderr
    got = json.loads(search_owner.stdout)
    assert [(h["chunk_id"], h["score"]) for h in got["hits"]] == [
        (h["chunk_id"], h["score"]) for h in search_here["hits"]
    ]
    table = cli(d, "search", "Michaelis constant of the lipase", "-k", "3")
    assert table.returncode == 0 and "enzyme_kinetics.md" in table.stdout and "3 hits" in table.stdout

    idx = cli(d, "index", str(corpus), "--json")
    assert idx.returncode == 0, idx.stderr
    assert json.loads(idx.stdout) == again_here  # same counters and failures as the in-process re-run
    text = cli(d, "index", str(corpus))
    assert text.returncode == 0 and "5 unchanged" in text.stderr

    ask = cli(d, "ask", "What is the Michaelis constant of the lipase?", "--llm", "none", "--json")
    assert ask.returncode == 0, ask.stderr
    assert json.loads(ask.stdout)["run_id"]

    for out in (status_owner, search_owner, idx, text, ask):
        assert "in use by another aisac process" not in out.stderr and "stop" not in out.stderr.lower()
    assert owner_info(d)["pid"] == pid  # the same owner served every command

    missing = cli(d, "index", str(d / "missing"))
    assert missing.returncode == 1 and "Traceback" not in missing.stderr and missing.stderr.strip().startswith("error:")


def _table(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "t.csv").write_text("a,b\n1,2\n3,4\n")
    return root / "t.csv"


async def _data_load(data_dir: Path, path: Path, **extra: str) -> str:
    """``data_load`` through a new host with ``extra`` environment: "ok" or the error text (a tool error, or the
    MCP error of the host's session start, which the proxy forwards to the owner too)."""
    try:
        async with stdio(data_dir, **extra) as host:
            res = await host.call_tool("data_load", {"path": str(path)}, raise_on_error=False)
            return "ok" if not res.is_error else res.content[0].text
    except (ToolError, Exception) as exc:  # noqa: BLE001 - the message is what the test checks
        return str(exc)


@pytest.mark.anyio
async def test_a_host_with_roots_never_meets_an_owner_without_them(owned_store, tmp_path):
    csv = _table(tmp_path / "root")
    async with stdio(owned_store) as a:  # host A: no roots; starts the owner and uses it
        await a.call_tool("memory_list_sessions", {})
        # host B, right after A's call: its session opens and lists the tools; its call is a tool error
        async with stdio(owned_store, AISAC_ROOTS=str(csv.parent)) as b:
            assert "data_load" in {t.name for t in await b.list_tools()}
            res = await b.call_tool("data_load", {"path": str(csv)}, raise_on_error=False)
        got = "ok" if not res.is_error else res.content[0].text
        assert (await a.call_tool("memory_list_sessions", {})).data is not None  # A keeps working
    assert "no root folders are registered" not in got
    if got != "ok":  # A used the owner a moment ago: B is told, naming the setting, both values and the fixes
        assert "roots" in got and str(csv.parent) in got and "aisac owner stop" in got and "aisac config set" in got


@pytest.mark.anyio
async def test_an_idle_owner_with_other_settings_is_restarted_for_the_new_host(owned_store, tmp_path):
    from aisac_core.owner import OwnerInfo, write_owner_file

    csv = _table(tmp_path / "root")
    async with stdio(owned_store) as a:
        await a.call_tool("memory_list_sessions", {})
    old = owner_info(owned_store)
    # roots are a per-host setting (sent with each request, not part of the owner's digest): a store setting
    # (chunking) makes the difference here
    assert old["settings_digest"] and "roots" not in old["settings"] and "http_token" not in old["settings"]
    assert old["settings"]["chunk_max_tokens"] != 300
    # what the daemon publishes when it has been idle for a minute with no job pending
    now = time.time()
    write_owner_file(
        owned_store, OwnerInfo(**{**old, "last_request_at": now - 60, "jobs_pending": False, "activity_at": now})
    )
    roots = json.dumps([str(csv.parent)])
    assert await _data_load(owned_store, csv, AISAC_ROOTS=roots, AISAC_CHUNK_MAX_TOKENS="300") == "ok"
    new = owner_info(owned_store)
    assert new["pid"] != old["pid"] and new["settings"]["chunk_max_tokens"] == 300


@pytest.mark.anyio
async def test_config_set_roots_reaches_every_new_host(owned_store, tmp_path):
    csv = _table(tmp_path / "papers")
    out = cli(owned_store, "config", "set", "roots", str(csv.parent))
    assert out.returncode == 0, out.stderr
    shown = json.loads(cli(owned_store, "config", "show").stdout)["settings"]
    assert shown["roots"] == {"value": [str(csv.parent.resolve())], "source": "aisac.toml"}
    assert await _data_load(owned_store, csv) == "ok"  # a host without AISAC_ROOTS: the store file's roots


def test_status_computed_beside_an_owner_without_the_status_tool_reads_no_vector(tmp_path, models_dir, shared_embedder):
    # the fallback of `aisac status` when the owner lists no rag_store_status (a tool profile without it): the SQL
    # store is read here, the vector store is the owner's; its check must say it checked nothing, not raise
    from aisac_core.context import AppContext
    from aisac_servers.cli.owner import _owner_status

    settings = make_settings(tmp_path / "store", models_dir)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# Lipase\n\nThe Michaelis constant of the lipase was 2.1 mM.\n")
    writer = AppContext(settings, embedder=shared_embedder)
    try:  # the store exists, as under a running owner
        writer.rag.indexer.run([tmp_path / "notes"])
    finally:
        writer.close()
    core = AppContext(settings, read_only=True, embedder=shared_embedder)
    try:
        st = _owner_status(core, [{"job_id": "j1", "state": "done"}], None)
    finally:
        core.close()
    assert st["chunks_in_vector_store"] is None and st["documents"] == {"indexed": 1}
    assert st["vector_check"]["checked_chunks"] == 0 and st["vector_check"]["missing_in"] == []
    assert st["recent_jobs"] == [{"job_id": "j1", "state": "done"}]
