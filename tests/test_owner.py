"""One owner process per store: real `aisac serve` subprocesses, the real owner daemon, real kills.

Every test stops the daemons it started (the ``owned_store`` fixture), so no daemon outlives the tests.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from conftest import make_settings
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from mcp.shared.exceptions import MCPError

AISAC = str(Path(sys.executable).parent / "aisac")


def serve_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1", **extra)
    return env


def stdio(data_dir: Path, *args: str, **extra: str) -> Client:
    return Client(
        StdioTransport(command=AISAC, args=["serve", *args], env=serve_env(data_dir, **extra), keep_alive=False)
    )  # the host process ends with the client


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped by its parent) counts as dead
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def stop_all(data_dir: Path) -> None:
    """Stop the owner of ``data_dir`` and any daemon pid it ever logged."""
    from aisac_core.owner import read_owner_file, stop_owner

    stop_owner(data_dir, timeout=30)
    info = read_owner_file(data_dir)
    if info is not None and _pid_alive(info.pid) and _is_daemon(info.pid):
        os.kill(info.pid, signal.SIGKILL)


def _is_daemon(pid: int) -> bool:
    try:
        return b"aisac_servers.owner.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.fixture
def owned_store(tmp_path, models_dir):  # noqa: ANN001, ANN201
    """An empty store (model folder linked in); every owner daemon on it is stopped at teardown."""
    data_dir = tmp_path / "store"
    make_settings(data_dir, models_dir)
    yield data_dir
    stop_all(data_dir)


def daemon_starts(data_dir: Path) -> int:
    """How many daemons started on this store (each logs one 'serving' line at INFO)."""
    log = data_dir / "owner.log"
    return log.read_text().count("aisac.owner INFO serving") if log.exists() else 0


def owner_info(data_dir: Path) -> dict:
    return json.loads((data_dir / "owner.json").read_text())


@pytest.mark.anyio
async def test_first_serve_starts_the_owner_and_the_next_proxies(owned_store):
    async with stdio(owned_store) as a:
        info = owner_info(owned_store)
        assert stat.S_IMODE((owned_store / "owner.json").stat().st_mode) == 0o600
        # the daemon listens on its Unix socket in the data dir (0600), not on TCP; the token is checked there too
        assert info["kind"] == "daemon" and info["url"] == "http://localhost/mcp" and len(info["token"]) >= 40
        assert info["socket"] == str(owned_store / "owner.sock") and info["socket_note"] is None
        assert stat.S_ISSOCK((owned_store / "owner.sock").stat().st_mode)
        assert stat.S_IMODE((owned_store / "owner.sock").stat().st_mode) == 0o600
        ses = (await a.call_tool("memory_start_session", {"title": "shared"})).structured_content["session_id"]
        async with stdio(owned_store, "memory") as b:  # a second host on the same store, one server only
            names = {t.name for t in await b.list_tools()}
            assert names and all(n.startswith("memory_") for n in names)
            await b.call_tool("memory_add_turn", {"session_id": ses, "role": "user", "content": "from host b"})
            # an unknown tool (outside the host's profile) is a protocol error, -32602 (MCP "Tools", error handling)
            with pytest.raises(MCPError, match="unknown tool") as err:
                await b.call_tool("rag_search", {"query": "x"})
            assert err.value.code == -32602
        hist = (await a.call_tool("memory_get_history", {"session_id": ses})).structured_content
        assert [t["content"] for t in hist["turns"]] == ["from host b"]
    assert owner_info(owned_store)["pid"] == info["pid"] and daemon_starts(owned_store) == 1
    out = subprocess.run(
        [AISAC, "owner", "status", "--json"], env=serve_env(owned_store), capture_output=True, text=True
    )
    status = json.loads(out.stdout)
    assert status["running"] and status["owner"]["pid"] == info["pid"] and "token" not in status["owner"]


@pytest.mark.anyio
async def test_concurrent_starters_elect_one_owner(owned_store):
    async def host(i: int, pids: list[int]) -> None:
        async with stdio(owned_store) as c:
            r = await c.call_tool("memory_start_session", {"title": f"host {i}"})
            assert r.structured_content["session_id"].startswith("ses-")
            pids.append(owner_info(owned_store)["pid"])

    pids: list[int] = []
    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(host, i, pids)
    assert len(set(pids)) == 1 and daemon_starts(owned_store) == 1


@pytest.mark.anyio
async def test_stale_lock_of_a_killed_owner_is_recovered(owned_store):
    async with stdio(owned_store) as c:
        await c.call_tool("memory_start_session", {"title": "before"})
        old = owner_info(owned_store)["pid"]
        os.kill(old, signal.SIGKILL)  # owner.json stays behind, the kernel frees owner.lock
        for _ in range(100):
            if not _pid_alive(old):
                break
            time.sleep(0.05)
        status = json.loads(
            subprocess.run(
                [AISAC, "owner", "status", "--json"], env=serve_env(owned_store), capture_output=True, text=True
            ).stdout
        )
        assert not status["running"] and status["stale_pid"] == old
        # the same proxy's next request starts a fresh owner
        r = await c.call_tool("memory_list_sessions", {})
        assert [s["title"] for s in r.structured_content["sessions"]] == ["before"]
    new = owner_info(owned_store)["pid"]
    assert new != old and _pid_alive(new) and daemon_starts(owned_store) == 2


def test_version_mismatch_is_a_clear_error(owned_store):
    """A live owner of another aisac version (simulated: this test holds owner.lock and wrote owner.json)."""
    from aisac_core.owner import LOCK_FILE, OwnerInfo, acquire_lock, write_owner_file

    fd = acquire_lock(owned_store / LOCK_FILE, 5)
    assert fd is not None
    try:
        write_owner_file(
            owned_store,
            OwnerInfo(
                pid=os.getpid(),
                url="http://127.0.0.1:9/mcp",
                token="t" * 43,
                version="0.0.1-old",
                data_dir=str(owned_store),
                started_at="x",
            ),
        )
        out = subprocess.run(
            [AISAC, "serve"],
            env=serve_env(owned_store),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        (owned_store / "owner.json").unlink()
        os.close(fd)
    assert out.returncode == 1
    assert "aisac 0.0.1-old" in out.stderr and "owner stop" in out.stderr and out.stdout == ""


@pytest.mark.anyio
async def test_idle_daemon_exits_and_the_next_request_restarts_it(owned_store):
    async with stdio(owned_store, AISAC_OWNER_IDLE_SECONDS="1.5") as c:
        await c.call_tool("memory_start_session", {"title": "a"})
        first = owner_info(owned_store)["pid"]
        deadline = time.monotonic() + 30
        while _pid_alive(first) and time.monotonic() < deadline:
            await anyio.sleep(0.2)
        assert not _pid_alive(first), "the idle daemon did not exit"
        assert not (owned_store / "owner.json").exists()  # a clean exit removes its file
        r = await c.call_tool("memory_list_sessions", {})  # the proxy starts a new owner
        assert len(r.structured_content["sessions"]) == 1
    assert daemon_starts(owned_store) == 2


def _store_state(data_dir: Path, models_dir: Path) -> tuple[int, int, int]:
    """(chunk points, manifest chunk sum, dialogue points) read in-process once no owner runs."""
    from aisac_core.context import AppContext

    core = AppContext(make_settings(data_dir, models_dir))
    try:
        vs = core.vectors()
        with sqlite3.connect(data_dir / "aisac.db") as con:
            manifest = con.execute(
                "select coalesce(sum(chunk_count),0) from document where status='indexed'"
            ).fetchone()[0]
        return vs.count("chunks"), manifest, vs.count("dialogue")
    finally:
        core.close()


def _notes(folder: Path, tag: str, n: int, version: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"{tag}_{i}.md").write_text(
            f"# Note {tag} {i}\n\nRevision {version} of note {i} by host {tag}: the sample {i} was measured at "
            f"{(i + 1) * (version + 2) * 1.5:.1f} kelvin with a lock-in amplifier.\n"
        )


def _kind(i: int) -> str:
    """Operation ``i`` of a host: an index job every 25th, reads every 5th and 5th+2, else a memory turn."""
    if i % 25 == 24:
        return "index"
    return {1: "history", 3: "search"}.get(i % 5, "turn")


@pytest.mark.slow
@pytest.mark.anyio
async def test_two_stdio_hosts_500_mixed_writes_each(owned_store, tmp_path, models_dir):
    """Acceptance 1: two hosts at once, 500 operations each (memory turns, facts, index jobs, reads); no lock
    error, every write present afterwards, the index consistent."""
    n_ops = 500
    written: dict[str, list[int]] = {"a": [], "b": []}
    errors: list[str] = []

    async def host(tag: str) -> None:
        folder = tmp_path / "docs" / tag
        async with stdio(owned_store) as c:
            ses = (await c.call_tool("memory_start_session", {"title": f"host {tag}"})).structured_content["session_id"]
            for i in range(n_ops):
                kind = _kind(i)
                if kind == "index":  # an index job on this host's folder, whose notes change every time
                    _notes(folder, tag, 3, i)
                    r = await c.call_tool(
                        "rag_index", {"path": str(folder), "wait": True, "timeout_s": 120}, raise_on_error=False
                    )
                    if r.is_error or r.structured_content["status"] != "done":
                        errors.append(f"{tag} index: {r.content[0].text[:300]}")
                elif kind in ("history", "search"):  # reads
                    tool, args = (
                        ("memory_get_history", {"session_id": ses, "limit": 5})
                        if kind == "history"
                        else ("rag_search", {"query": f"sample measured host {tag}", "k": 3})
                    )
                    r = await c.call_tool(tool, args, raise_on_error=False)
                    if r.is_error:
                        errors.append(f"{tag} {tool}: {r.content[0].text[:300]}")
                else:  # writes: user/assistant turns (assistant turns embed a dialogue pair)
                    role = "user" if i % 2 == 0 else "assistant"
                    r = await c.call_tool(
                        "memory_add_turn",
                        {"session_id": ses, "role": role, "content": f"{tag} turn {i}: observation {i * 7}"},
                        raise_on_error=False,
                    )
                    if r.is_error:
                        errors.append(f"{tag} add_turn: {r.content[0].text[:300]}")
                    else:
                        written[tag].append(r.structured_content["turn_id"])
            hist = []
            cursor = None
            while True:
                page = (
                    await c.call_tool("memory_get_history", {"session_id": ses, "limit": 500, "cursor": cursor})
                ).structured_content
                hist += [t["turn_id"] for t in page["turns"]]
                cursor = page["next_cursor"]
                if not cursor:
                    break
            assert hist == written[tag]

    t0 = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(host, "a")
        tg.start_soon(host, "b")
    elapsed = time.monotonic() - t0
    assert not errors, errors[:5]
    assert len(written["a"]) == len(written["b"]) == sum(_kind(i) == "turn" for i in range(n_ops))
    assert daemon_starts(owned_store) == 1
    stop_all(owned_store)
    with sqlite3.connect(owned_store / "aisac.db") as con:
        ids = {r[0] for r in con.execute("select id from turn")}
        docs = con.execute("select count(*) from document where status='indexed'").fetchone()[0]
    assert set(written["a"]) | set(written["b"]) <= ids
    assert docs == 6
    chunks, manifest, _dialogue = _store_state(owned_store, models_dir)
    assert chunks == manifest > 0
    print(f"2 hosts x {n_ops} operations in {elapsed:.1f} s")


@pytest.mark.anyio
async def test_kill_9_of_the_owner_during_writes_loses_no_committed_write(owned_store, tmp_path, models_dir, corpus):
    """Faults: the owner dies (SIGKILL) while a host writes turns and an index job runs; the proxy starts a new
    owner on the next request; every acknowledged write is there and a re-run of the index converges."""
    acked: list[int] = []
    failed = 0
    async with stdio(owned_store) as c:
        ses = (await c.call_tool("memory_start_session", {"title": "crash"})).structured_content["session_id"]
        await c.call_tool("rag_index", {"path": str(corpus)})  # background job, killed mid-run
        victim = owner_info(owned_store)["pid"]
        for i in range(60):
            if i == 20:
                os.kill(victim, signal.SIGKILL)
            r = await c.call_tool(
                "memory_add_turn",
                {"session_id": ses, "role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"},
                raise_on_error=False,
            )
            if r.is_error:
                failed += 1
            else:
                acked.append(r.structured_content["turn_id"])
        assert owner_info(owned_store)["pid"] != victim
        r = await c.call_tool("rag_index", {"path": str(corpus), "wait": True, "timeout_s": 600})
        assert r.structured_content["status"] == "done"
        hist = (await c.call_tool("memory_get_history", {"session_id": ses, "limit": 500})).structured_content
    assert failed <= 1 and len(acked) >= 59  # at most the call in flight at the kill fails
    assert set(acked) <= {t["turn_id"] for t in hist["turns"]}
    stop_all(owned_store)
    chunks, manifest, _ = _store_state(owned_store, models_dir)
    assert chunks == manifest > 0
    with sqlite3.connect(owned_store / "aisac.db") as con:
        assert con.execute("select count(*) from job where status='interrupted'").fetchone()[0] <= 1


@pytest.mark.anyio
async def test_corrupt_sqlite_file_is_a_clear_tool_error(owned_store):
    (owned_store / "aisac.db").write_bytes(b"not a database " * 200 + os.urandom(2048))
    async with stdio(owned_store) as c:
        r = await c.call_tool("memory_start_session", {"title": "x"}, raise_on_error=False)
    assert r.is_error
    msg = r.content[0].text
    assert str(owned_store / "aisac.db") in msg and "move it aside" in msg


@pytest.mark.anyio
async def test_corrupt_vector_folder_is_a_clear_tool_error(owned_store, corpus):
    async with stdio(owned_store, "--no-owner") as c:  # in-process mode builds a real vector store first
        r = await c.call_tool("rag_index", {"path": str(corpus / "notes"), "wait": True})
        assert r.structured_content["status"] == "done"
    shard = owned_store / "vectors" / "chunks"
    for f in shard.rglob("*"):
        if f.is_file():
            f.write_bytes(os.urandom(max(16, min(f.stat().st_size, 4096))))
    async with stdio(owned_store) as c:
        r = await c.call_tool("rag_search", {"query": "enzyme"}, raise_on_error=False)
    assert r.is_error
    msg = r.content[0].text
    assert str(shard) in msg and "move the folder aside" in msg


def test_a_sigterm_while_the_owner_starts_stops_it_and_cleans_up(owned_store):
    """SIGTERM sent as soon as `owner.json` appears (the daemon is still starting its HTTP server, before uvicorn takes
    the signal over) stops the daemon: it exits, removes owner.json and its socket. Before the fix the signal was
    swallowed there and the daemon served on until a second signal."""
    log = owned_store.parent / "daemon.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "aisac_servers.owner.daemon", "daemon"],
            env=serve_env(owned_store),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 120
        while not (owned_store / "owner.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the daemon never wrote owner.json"
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (owned_store / "owner.json").exists() and not (owned_store / "owner.sock").exists()
    assert "stopped by SIGTERM" in log.read_text()
