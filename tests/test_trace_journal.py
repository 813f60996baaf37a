"""No hole in the trace: a PostgreSQL restart during load leaves every successful call with its trace event.

A real ``aisac serve --transport http`` on its own throwaway cluster (stopped and started again mid-load) answers
``rag_search`` calls, which need no SQL; the events of the calls made while the database was down wait in the local
journal (0600 in the data dir) and are written, with their own times, once it is back. Strict audit mode fails the
calls instead. The 60 s version of the load: ``python -m bench --only engines``.
"""

from __future__ import annotations

import asyncio
import json
import stat
import threading
import time
from pathlib import Path

import pytest
from conftest import http_server, make_settings, store_env
from fastmcp import Client
from test_replicas import _rows

from aisac_core.trace.journal import JOURNAL

pytestmark = pytest.mark.anyio


@pytest.fixture
def own_cluster():
    """A cluster of this test alone (it is stopped and started again)."""
    from pg_cluster import PgCluster, PgUnavailable, pg_bin, pgvector_bin

    try:
        try:
            bin_dir = pgvector_bin()
        except PgUnavailable:
            bin_dir = pg_bin()
        cluster = PgCluster.start(bin_dir)
    except PgUnavailable as exc:
        pytest.skip(str(exc))
    yield cluster
    cluster.stop()


async def _load(url: str, seconds: float, outage: tuple[float, float], cluster, strict: bool = False):
    """Calls rag_search (unique query each) for ``seconds``; the database is down during ``outage`` (start, length
    in seconds). Returns (queries answered ok, queries that failed, journal modes seen during the outage)."""
    ok, failed, modes = [], [], set()
    down = threading.Event()

    def restart() -> None:
        time.sleep(outage[0])
        cluster.server_stop()
        down.set()
        time.sleep(outage[1])
        cluster.server_start()
        down.clear()

    t = threading.Thread(target=restart)
    t.start()
    t0 = time.monotonic()
    i = 0
    async with Client(url, timeout=60) as c:
        while time.monotonic() - t0 < seconds:
            q = f"catalyst query {i}"
            i += 1
            try:
                r = await c.call_tool("rag_search", {"query": q, "k": 3}, raise_on_error=False)
                (failed if r.is_error else ok).append(q)
            except Exception:  # noqa: BLE001
                failed.append(q)
            if down.is_set():
                modes.add(_mode(url))
            await asyncio.sleep(0.02)
        t.join()
        await asyncio.sleep(1.5)
        r = await c.call_tool("rag_search", {"query": "after the restart", "k": 3})  # writes the journal
        ok.append("after the restart") if not r.is_error else failed.append("after the restart")
    return ok, failed, modes


_DATA: dict[str, Path] = {}


def _mode(_url: str) -> int | None:
    p = _DATA["dir"] / JOURNAL
    try:
        return stat.S_IMODE(p.stat().st_mode)
    except FileNotFoundError:
        return None


def _events(db: str) -> list[str]:
    rows = _rows(db, "select arguments_json from traceevent where tool = 'rag_search' and status = 'ok'")
    return [json.loads(r["arguments_json"])["query"] for r in rows]


async def test_a_postgresql_restart_leaves_no_trace_gap(tmp_path: Path, models_dir: Path, own_cluster) -> None:
    db = own_cluster.create_database()
    s = make_settings(tmp_path / "store", models_dir, sql_url=db)
    _DATA["dir"] = s.data_dir
    env = store_env(s, AISAC_ALLOW_PRIVATE_VECTORS="true", AISAC_WARM="true")
    with http_server(env, timeout=120) as url:
        async with Client(url, timeout=60) as c:  # warm: the store and models are open before the outage
            await c.call_tool("rag_search", {"query": "warm up", "k": 3})
        ok, failed, modes = await _load(url, 14.0, (3.0, 4.0), own_cluster)
        assert len(ok) > 8 and not failed, failed[:5]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (s.data_dir / JOURNAL).exists():
            await asyncio.sleep(0.2)
    got = _events(db)
    missing = sorted(set(ok) - set(got))
    assert not missing, f"{len(missing)} successful calls without a trace event, e.g. {missing[:3]}"
    assert len(got) == len(set(got))  # each written once
    assert modes <= {0o600, None} and 0o600 in modes  # the journal was used, private to the user
    assert not (s.data_dir / JOURNAL).exists()


async def test_strict_audit_mode_fails_a_call_whose_event_cannot_be_written(
    tmp_path: Path, models_dir: Path, own_cluster
) -> None:
    db = own_cluster.create_database()
    s = make_settings(tmp_path / "store", models_dir, sql_url=db)
    env = store_env(s, AISAC_ALLOW_PRIVATE_VECTORS="true", AISAC_WARM="true", AISAC_TRACE_STRICT="true")
    with http_server(env, timeout=120) as url:
        async with Client(url, timeout=60) as c:
            await c.call_tool("rag_search", {"query": "warm up", "k": 3})
            own_cluster.server_stop()
            try:
                r = await c.call_tool("rag_search", {"query": "while down", "k": 3}, raise_on_error=False)
            finally:
                own_cluster.server_start()
            assert r.is_error and "strict audit mode" in str(r.content[0].text)
            await asyncio.sleep(1.0)
            r = await c.call_tool("rag_search", {"query": "back", "k": 3})
            assert not r.is_error
    assert {"while down", "back"} <= set(_events(db))  # the refused call's event was kept and written too
