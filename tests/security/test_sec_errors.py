"""Every bad input is a clear, short tool error: it names the input and the accepted form, stays under 2,000
characters and never quotes SQL - and the server keeps serving with its store intact.

Inputs found by an attacker against the installed suite, sent through a real in-process MCP client on the real suite
(real files, a real SQLite store): a 100,000-character trace search (SQLite's LIKE limit, whose error quoted the
SQL), integers and durations that overflow SQLite or ``datetime``, malformed CSV quoting, JSON nested 100,000 deep, a
100,000-column CSV (silently cut to 10,730 columns), echoed 200,000-character ids, and a call cut because the owner
daemon died (an empty or transport-level message). The safety net in ``servers/serving/common.py`` is exercised with real
database errors and a real in-process server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from conftest import make_settings
from fastmcp import Client, FastMCP
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError

pytestmark = pytest.mark.anyio

SQL_MARKS = ("[SQL:", "SELECT ", " FROM traceevent", "INSERT INTO", "sqlalche.me", "sqlite3.")


def clear(text: str, *must: str, internal: bool = False) -> None:
    """A clear tool error: short, no SQL, not an internal error (unless ``internal``), containing every ``must``
    fragment."""
    assert text.strip() and len(text) < 2000, (len(text), text[:300])
    assert not any(m in text for m in SQL_MARKS), text
    assert internal or "internal error" not in text, text
    for m in must:
        assert m in text, (m, text)


@pytest.fixture
def app(tmp_path: Path):  # noqa: ANN201
    """A store whose registered root is ``tmp_path / "root"`` (no model needed: data and trace tools only)."""
    from aisac_core.context import AppContext
    from aisac_core.settings import Settings

    root = tmp_path / "root"
    root.mkdir()
    core = AppContext(Settings(data_dir=tmp_path / "store", roots=[root], warm=False))
    yield core
    core.close()


def _suite(core):  # noqa: ANN001, ANN202
    from aisac_servers.serving.suite import build

    return build(["data", "trace", "memory"], app=core, lifespan=False)


async def _error(c: Client, tool: str, args: dict) -> str:
    r = await c.call_tool(tool, args, raise_on_error=False)
    assert r.is_error, (tool, args, r.structured_content)
    return " ".join(getattr(x, "text", "") for x in r.content or [])


async def _alive_and_intact(c: Client, core) -> None:  # noqa: ANN001
    ses = (await c.call_tool("memory_start_session", {"title": "after"})).structured_content
    assert ses["session_id"].startswith("ses-")
    runs = (await c.call_tool("trace_list_runs", {"limit": 5})).structured_content
    assert runs["total"] >= 1
    with sqlite3.connect(core.settings.data_dir / "aisac.db") as con:
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"


# -- trace ----------------------------------------------------------------------------------------------------
async def test_a_100000_character_trace_search_is_refused_without_sql(app):
    async with Client(_suite(app)) as c:
        await c.call_tool("memory_start_session", {"title": "a traced call"})
        msg = await _error(c, "trace_list_runs", {"text": "x" * 100_000})
        clear(msg, "text is 100,000 characters long", "at most 1,000")
        ok = (await c.call_tool("trace_list_runs", {"text": "memory_start"})).structured_content
        assert ok["total"] == 1
        await _alive_and_intact(c, app)


async def test_numbers_that_overflow_sqlite_or_datetime_are_clear_errors(app):
    async with Client(_suite(app)) as c:
        await c.call_tool("memory_start_session", {"title": "a traced call"})
        clear(await _error(c, "trace_get_event", {"event_id": 10**30}), "unknown event id", "1 to 9223372036854775807")
        clear(await _error(c, "trace_list_runs", {"offset": 10**30}), "offset must be 0..9223372036854775807")
        for dry in (True, False):
            clear(
                await _error(c, "trace_prune", {"older_than_days": 1e308, "dry_run": dry}),
                "older_than_days must be a number of days from 0 to 36,500",
                "1e+308",
            )
        clear(await _error(c, "trace_stats", {"since": "9999-12-31T23:59:59-01:00"}), "since", "years 1 and 9999")
        kept = (await c.call_tool("trace_prune", {"older_than_days": 36_500, "dry_run": False})).structured_content
        assert kept["runs"] == [] and kept["deleted_events"] == 0  # the trace is untouched
        await _alive_and_intact(c, app)


async def test_ids_echoed_back_are_cut_below_2000_characters(app):
    huge = "q" * 200_000
    async with Client(_suite(app)) as c:
        for tool, args, must in (
            ("trace_get_run", {"run_id": huge}, "unknown run"),
            ("trace_export", {"run_id": huge}, "unknown run"),
            ("data_preview", {"name": huge}, "unknown frame"),
            ("data_load", {"path": huge}, ""),
        ):
            msg = await _error(c, tool, {**args})
            clear(msg, must)
        await _alive_and_intact(c, app)


# -- data_load ------------------------------------------------------------------------------------------------
async def test_malformed_csv_quoting_names_the_line_and_the_accepted_form(app):
    root = app.settings.rag.roots[0]
    (root / "open_quote.csv").write_text('sample,comment\nA1,"fine"\nA2,"never closed\nA3,ok\n')
    (root / "ragged.csv").write_text("a,b,c\n1,2,3\n4,5,6,7,8\n")
    async with Client(_suite(app)) as c:
        clear(
            await _error(c, "data_load", {"path": "open_quote.csv"}),
            "open_quote.csv",
            "a quoted field opened on line 3 is never closed",
            "Accepted form",
            "RFC 4180",
        )
        clear(
            await _error(c, "data_load", {"path": "ragged.csv"}),
            "ragged.csv",
            "line 3 has 5 fields where the lines before it have 3",
            "Accepted form",
        )
        frames = (await c.call_tool("data_list", {})).structured_content
        assert frames["count"] == 0
        await _alive_and_intact(c, app)


async def test_json_nested_100000_deep_is_a_clear_error(app):
    root = app.settings.rag.roots[0]
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (root / "deep.jsonl").write_text('{"a": ' * 5_000 + "1" + "}" * 5_000 + "\n")
    (root / "records.json").write_text(json.dumps([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]))
    async with Client(_suite(app)) as c:
        clear(
            await _error(c, "data_load", {"path": "deep.json"}),
            "deep.json is nested too deeply",
            "Accepted form",
            "list of records",
        )
        clear(await _error(c, "data_load", {"path": "deep.jsonl"}), "deep.jsonl", "JSON Lines")
        ok = (await c.call_tool("data_load", {"path": "records.json"})).structured_content
        assert ok["frames"][0]["rows"] == 2
        await _alive_and_intact(c, app)


async def test_a_100000_column_csv_loads_every_column(app):
    root = app.settings.rag.roots[0]
    n = 100_000
    with open(root / "wide.csv", "w") as f:
        f.write(",".join(f"g{j}" for j in range(n)) + "\n")
        for i in range(1, 4):
            f.write(",".join(str(i * 1000 + j % 1000) for j in range(n)) + "\n")
    async with Client(_suite(app)) as c:
        t0 = time.monotonic()
        got = (await c.call_tool("data_load", {"path": "wide.csv"})).structured_content
        seconds = time.monotonic() - t0
        f = got["frames"][0]
        assert f["columns"] == n and f["rows"] == 3, f["columns"]
        assert f["column_names"][:3] == ["g0", "g1", "g2"] and len(f["column_names"]) == 100
        assert any(f"first 100 of {n:,} columns" in note for note in f["notes"]), f["notes"]
        last = (
            await c.call_tool("data_query", {"name": "wide", "expr": "g99999 > 2000", "columns": ["g99999"]})
        ).structured_content
        assert last["rows"] == [{"g99999": 2999}, {"g99999": 3999}]
        desc = (await c.call_tool("data_describe", {"name": "wide", "columns": ["g50000"]})).structured_content
        assert desc["columns"]["g50000"]["max"] == 3000
        await _alive_and_intact(c, app)
    print(f"100,000 columns loaded in {seconds:.1f} s")


# -- the safety net -------------------------------------------------------------------------------------------
async def test_a_real_database_error_reaches_the_client_without_its_sql(app, caplog):
    from sqlalchemy import text as sql

    from aisac_core.trace.recorder import record_tool_call
    from aisac_servers.serving.common import call_core

    record_tool_call(
        app.engine,
        run_id="run-1",
        server="memory",
        tool="memory_search",
        arguments={"query": "x"},
        result={"hits": []},
        status="ok",
        error=None,
        latency_ms=1.0,
    )  # LIKE is evaluated per row

    def too_complex_like() -> None:  # the store's own engine, a LIKE pattern over SQLite's 50,000-byte limit
        with app.engine.connect() as con:
            con.execute(
                sql("select run_id from traceevent where arguments_json like :p"),
                {"p": "%" + "secret-argument " * 5000 + "%"},
            )

    with caplog.at_level("WARNING", logger="aisac.servers"), pytest.raises(ToolError) as err:
        await call_core(too_complex_like)
    clear(
        str(err.value),
        "LIKE or GLOB pattern too complex",
        "SQL statement left out",
        "server log on stderr",
        internal=True,
    )
    assert "secret-argument" not in str(err.value)
    assert "[SQL:" in caplog.text  # the whole error went to the log

    def overflow() -> None:
        from sqlmodel import Session

        from aisac_core.store.tables import TraceEvent

        with Session(app.engine) as s:
            s.get(TraceEvent, 10**30)

    with pytest.raises(ToolError) as err:
        await call_core(overflow)
    clear(str(err.value), "a number in the arguments is out of range", "64 bits")

    # a user error that embeds a database error keeps its advice, without the statement
    from aisac_core.store.sql import make_engine

    broken = app.settings.data_dir / "broken.db"
    broken.write_bytes(b"not a database " * 300)
    with pytest.raises(ToolError) as err:
        await call_core(make_engine, f"sqlite:///{broken}")
    clear(str(err.value), str(broken), "file is not a database", "move it aside", "SQL statement left out")


async def test_every_error_message_is_capped_and_fastmcp_wrapped_ones_too(app):
    from aisac_core.errors import AisacError
    from aisac_servers.serving.common import MAX_ERROR_CHARS, SafeErrors, call_core

    def long_user_error() -> None:
        raise AisacError("bad value: " + "v" * 100_000)

    with pytest.raises(ToolError) as err:
        await call_core(long_user_error)
    msg = str(err.value)
    assert len(msg) <= MAX_ERROR_CHARS and msg.startswith("bad value: vvv") and "100,011 characters" in msg

    boom = FastMCP("boom")
    boom.add_middleware(SafeErrors())

    @boom.tool
    def explode(n: int) -> str:
        """Raises outside call_core, as a careless tool would."""
        if n == 1:
            raise ValueError("detail " * 50_000)
        if n == 2:
            raise RuntimeError("(sqlite3.OperationalError) disk I/O error\n[SQL: INSERT INTO turn (id) VALUES (?)]")
        raise ValueError("")

    async with Client(boom) as c:
        m1 = await _error(c, "explode", {"n": 1})
        assert len(m1) < 2000 and "Error calling tool 'explode'" in m1 and "[cut:" in m1
        m2 = await _error(c, "explode", {"n": 2})
        clear(m2, "disk I/O error", "SQL statement left out")
        m3 = await _error(c, "explode", {"n": 3})
        assert "gave no message" in m3 and len(m3) < 2000


# -- the owner daemon dying mid-call --------------------------------------------------------------------------
def test_a_real_closed_connection_maps_to_the_owner_stopped_message():
    """A server that accepts the request and closes the connection without answering (what a killed owner does):
    the proxy's mapping turns the transport error into the clear message; other errors pass unchanged."""
    import httpx

    from aisac_servers.base.proxying import OWNER_STOPPED
    from aisac_servers.owner.http import owner_stopped_error

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def accept_and_close() -> None:
        conn, _ = srv.accept()
        conn.recv(65536)
        conn.close()

    t = threading.Thread(target=accept_and_close, daemon=True)
    t.start()
    try:
        with pytest.raises(httpx.HTTPError) as cut:
            httpx.post(
                f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, timeout=10
            )
    finally:
        t.join(5)
        srv.close()
    wrapped = ToolError("Error calling tool 'rag_index': ")  # fastmcp's wrapping, with the transport error as cause
    wrapped.__cause__ = cut.value
    for exc in (cut.value, wrapped):
        mapped = owner_stopped_error(exc)
        assert mapped is not None and str(mapped) == OWNER_STOPPED
    assert "may or may not have been applied" in OWNER_STOPPED and "next call restarts" in OWNER_STOPPED
    assert owner_stopped_error(ValueError("bad argument")) is None
    assert owner_stopped_error(httpx.ReadTimeout("slow")) is None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.fixture
def owner_store(tmp_path, models_dir):  # noqa: ANN001, ANN201
    """An empty store; every owner daemon started on it is stopped at teardown."""
    from aisac_core.owner import read_owner_file, stop_owner

    data_dir = tmp_path / "store"
    make_settings(data_dir, models_dir)
    pids: list[int] = []
    yield data_dir, pids
    stop_owner(data_dir, timeout=30)
    info = read_owner_file(data_dir)
    for pid in pids + ([info.pid] if info else []):
        if _pid_alive(pid) and b"aisac_servers.owner.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)


async def test_owner_killed_mid_call_is_reported_and_the_next_call_restarts_it(owner_store):
    data_dir, pids = owner_store
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(
        AISAC_DATA_DIR=str(data_dir),
        HF_HUB_OFFLINE="1",
        AISAC_WARM="0",
        AISAC_SANDBOX_JOB_THRESHOLD_S="600",
        AISAC_SANDBOX_CPU_S="120",
    )
    aisac = str(Path(sys.executable).parent / "aisac")
    client = Client(StdioTransport(command=aisac, args=["serve"], env=env, keep_alive=False))
    async with client as c:
        ses = (await c.call_tool("memory_start_session", {"title": "before the crash"})).structured_content
        first = json.loads((data_dir / "owner.json").read_text())["pid"]
        pids.append(first)
        result: dict = {}

        async def long_call() -> None:
            result["r"] = await c.call_tool(
                "data_code_run",
                {"session": "crash", "code": "import time\ntime.sleep(90)", "timeout_s": 120},
                raise_on_error=False,
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            with anyio.fail_after(60):  # the call is in flight once its session folder exists
                while not (data_dir / "sessions" / "crash").exists():
                    await anyio.sleep(0.1)
            await anyio.sleep(1.0)
            assert "r" not in result
            os.kill(first, signal.SIGKILL)
        r = result["r"]
        assert r.is_error
        clear(
            r.content[0].text,
            "the aisac owner process stopped during the call",
            "may or may not have been applied",
            "next call restarts",
        )
        # the next call starts a new owner, with nothing lost
        hist = await c.call_tool("memory_list_sessions", {})
        assert ses["session_id"] in [s["session_id"] for s in hist.structured_content["sessions"]]
        second = json.loads((data_dir / "owner.json").read_text())["pid"]
        pids.append(second)
        assert second != first and not _pid_alive(first)
    with sqlite3.connect(data_dir / "aisac.db") as con:
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"


# -- paths ----------------------------------------------------------------------------------------------------
async def test_nul_bytes_loops_and_unknown_users_in_paths_are_clear_errors(app):
    root = app.settings.rag.roots[0]
    (root / "loop.csv").symlink_to(root / "loop2.csv")
    (root / "loop2.csv").symlink_to(root / "loop.csv")
    (root / "ok.csv").write_text("a,b\n1,2\n")
    async with Client(_suite(app)) as c:
        for path, must in (
            ("ok.csv\x00/../../etc/passwd", "NUL byte"),
            ("loop.csv", "symlink loop"),
            ("~no_such_user_zz/x.csv", "names no user"),
            ("   ", "empty"),
            ("x" * 300 + ".csv", "cannot read"),
        ):
            clear(await _error(c, "data_load", {"path": path}), must)
        assert (await c.call_tool("data_load", {"path": "ok.csv"})).structured_content["frames"][0]["rows"] == 1
        await _alive_and_intact(c, app)
