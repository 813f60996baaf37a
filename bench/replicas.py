"""Replicas that share everything (issue 32), measured: part of ``python -m bench --only engines``, or alone with
``python -m bench.replicas [throughput|restart]`` (prints the tables and the JSON).

- **throughput**: the store (the repository's example notes) in one PostgreSQL-with-pgvector database (the
  ``pgserver`` wheel's PostgreSQL 16, a throwaway cluster, ``AISAC_VECTOR_URL=sql``); :data:`CLIENTS` MCP clients
  over streamable HTTP with the mix of :mod:`bench.load` (search 40 %, add turn 20 %, recall 20 %, trace list 20 %),
  :data:`CALLS_PER_CLIENT` calls each, first against one ``aisac serve`` process, then spread over two replicas.
  Figures: calls/s, p50/p95, errors, the servers' CPU seconds (``/proc/<pid>/stat``) and the load average.
- **restart** (acceptance 4): one ``aisac serve`` with its SQL store on PostgreSQL, :data:`CLIENTS` clients calling
  ``rag_search`` (each query unique, so each call's event can be found) for :data:`RESTART_RUN_S` seconds while
  the PostgreSQL server is stopped for :data:`OUTAGE_S` seconds and started again. The vectors are the process's
  own (Qdrant Edge, ``AISAC_ALLOW_PRIVATE_VECTORS``) so searches keep answering while SQL is down and the trace
  journal carries their events. Figures: successful calls, events found for them, the gap (successful calls
  without an event, target 0), calls that failed, and what :meth:`TraceService.gaps` reports.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .common import (
    REPO_ROOT,
    Context,
    Skip,
    example_notes,
    isolated_settings,
    latency_summary,
    server_env,
    table,
    target_cell,
    temp_dir,
)
from .load import CLIENTS, mixed_client

DEADLINE_S = 150.0
RESTART_RUN_S = 60.0
OUTAGE_AT_S = 15.0
OUTAGE_S = 10.0


def _cpu_s(pid: int) -> float:
    """utime + stime of process ``pid`` in seconds (Linux ``/proc``); 0 where unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _children_cpu_s(pid: int) -> float:
    """cutime + cstime of process ``pid``: the CPU seconds of its children that exited and were reaped (proc(5))."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cluster_cpu_s(cluster: Any) -> float:
    """CPU seconds used so far by a PostgreSQL cluster: its postmaster (``<root>/data/postmaster.pid``), every live
    process whose parent it is (backends, background workers), and the backends that already exited (the
    postmaster reaps them: its cutime + cstime), from ``/proc``; 0 where unreadable."""
    try:
        master = int((Path(cluster.root) / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    total = _cpu_s(master) + _children_cpu_s(master)
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == master:
                    total += _cpu_s(int(d.name))
            except (OSError, IndexError, ValueError):
                continue
    return total


class _Server:
    """``aisac serve --transport http --no-token --tools all`` on a free loopback port, with ``env``."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        aisac = str(Path(sys.executable).parent / "aisac")
        self.log = log
        self.proc = subprocess.Popen(
            [aisac, "serve", "--transport", "http", "--port", str(self.port), "--no-token", "--tools", "all"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(log, "wb"),  # noqa: SIM115 - closed with the process
        )
        up = time.monotonic() + 120
        while time.monotonic() < up and self.proc.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.2)
        self.stop()
        raise Skip(f"aisac serve did not listen: {log.read_text(errors='replace')[-500:]}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


async def _warm(url: str) -> None:
    from fastmcp import Client

    async with Client(url, timeout=120) as client:
        await client.call_tool("rag_search", {"query": "warm up", "k": 1})
        await client.call_tool("memory_start_session", {"title": "warm up"})
        await client.call_tool("trace_list_runs", {"limit": 1})


def _mixed(servers: list[_Server], cluster: Any) -> dict[str, Any]:
    """The 8-client mix, client i on replica i mod n."""

    async def drive() -> tuple[dict[str, list[float]], list[str], float, int]:
        lat: dict[str, list[float]] = {}
        errors: list[str] = []
        t0 = time.perf_counter()
        deadline = time.monotonic() + DEADLINE_S
        done = await asyncio.gather(
            *(mixed_client(servers[i % len(servers)].url, None, i, deadline, lat, errors) for i in range(CLIENTS))
        )
        return lat, errors, time.perf_counter() - t0, sum(done)

    for s in servers:
        asyncio.run(_warm(s.url))
    cpu0 = [_cpu_s(s.proc.pid) for s in servers]
    db0 = cluster_cpu_s(cluster)
    lat, errors, wall, calls = asyncio.run(drive())
    cpu = sum(_cpu_s(s.proc.pid) - c for s, c in zip(servers, cpu0, strict=True))
    db = cluster_cpu_s(cluster) - db0
    every = [x for v in lat.values() for x in v]
    return {
        "replicas": len(servers),
        "calls": calls,
        "wall_s": round(wall, 2),
        "calls_per_s": round(calls / wall, 1) if wall else 0.0,
        "overall": latency_summary(every),
        "server_cpu_s": round(cpu, 2),
        "server_cpu_ms_per_call": round(1000 * cpu / max(calls, 1), 1),
        "db_cpu_s": round(db, 2),
        "errors": len(errors),
        "error_examples": errors[:3],
        "load_average": round(os.getloadavg()[0], 1),
    }


def _cluster() -> Any:
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from pg_cluster import PgCluster, PgUnavailable, pgvector_bin

    try:
        return PgCluster.start(pgvector_bin())
    except PgUnavailable as exc:
        raise Skip(str(exc)) from exc


def run_throughput(ctx: Context) -> dict[str, Any]:
    """One server, then two replicas, on one PostgreSQL-with-pgvector database. Raises :class:`Skip` without
    pgserver."""
    from aisac_core.context import AppContext

    cluster = _cluster()
    out: dict[str, Any] = {}
    try:
        with temp_dir(ctx, "replicas") as tmp:
            url = cluster.create_database()
            core = AppContext(isolated_settings(tmp / "indexer").updated(sql_url=url, vector_url="sql"))
            try:
                core.rag.indexer.run([example_notes(tmp)])
            finally:
                core.close()
            for n in (1, 2):
                servers: list[_Server] = []
                try:
                    for i in range(n):
                        env = server_env(tmp / f"n{n}-replica-{i}")
                        env.update(AISAC_SQL_URL=url, AISAC_VECTOR_URL="sql", AISAC_SANDBOX_ISOLATION="none")
                        servers.append(_Server(env, tmp / f"n{n}-replica-{i}.log"))
                    out[f"replicas_{n}"] = _mixed(servers, cluster)
                finally:
                    for s in servers:
                        s.stop()
    finally:
        cluster.stop()
    one, two = out["replicas_1"], out["replicas_2"]
    table(
        f"engines: {CLIENTS} MCP clients (mixed calls) on one PostgreSQL with pgvector (SQL and vectors)",
        ["measure", "1 process", "2 replicas"],
        [
            ("calls", one["calls"], two["calls"]),
            ("calls/s", one["calls_per_s"], two["calls_per_s"]),
            ("p50 ms", one["overall"]["p50_ms"], two["overall"]["p50_ms"]),
            ("p95 ms", one["overall"]["p95_ms"], two["overall"]["p95_ms"]),
            ("server CPU s (all replicas)", one["server_cpu_s"], two["server_cpu_s"]),
            ("server CPU ms per call", one["server_cpu_ms_per_call"], two["server_cpu_ms_per_call"]),
            ("PostgreSQL CPU s", one["db_cpu_s"], two["db_cpu_s"]),
            ("errors", one["errors"], two["errors"]),
            ("load average (1 min) after", one["load_average"], two["load_average"]),
        ],
        caption=f"{os.cpu_count()} cores, shared with other work (see the load average)",
    )
    return out


def run_restart(ctx: Context) -> dict[str, Any]:
    """The 60 s run with a PostgreSQL restart in it; returns calls made / events found / gap."""
    from aisac_core.context import AppContext
    from aisac_core.trace.journal import JOURNAL

    cluster = _cluster()
    try:
        with temp_dir(ctx, "restart") as tmp:
            url = cluster.create_database()
            store = tmp / "store"
            settings = isolated_settings(store).updated(sql_url=url, allow_private_vectors=True)
            core = AppContext(settings)
            try:
                core.rag.indexer.run([example_notes(tmp)])
            finally:
                core.close()
            env = server_env(store)
            env.update(AISAC_SQL_URL=url, AISAC_ALLOW_PRIVATE_VECTORS="true", AISAC_SANDBOX_ISOLATION="none")
            server = _Server(env, tmp / "server.log")
            try:
                asyncio.run(_warm(server.url))
                cpu0 = _cpu_s(server.proc.pid)
                ok, failed, outage = asyncio.run(_restart_load(server.url, cluster))
                deadline = time.monotonic() + 60  # the journal is written by the next recorded call
                while time.monotonic() < deadline and (store / JOURNAL).exists():
                    asyncio.run(_one_call(server.url))
                    time.sleep(0.5)
                cpu = _cpu_s(server.proc.pid) - cpu0
            finally:
                server.stop()
            core = AppContext(settings)
            try:
                from sqlalchemy import text

                with core.engine.connect() as conn:
                    rows = conn.execute(
                        text("select arguments_json from traceevent where tool = 'rag_search' and status = 'ok'")
                    ).all()
                found = {json.loads(r[0]).get("query") for r in rows}
                gaps = dict(core.trace.gaps())
            finally:
                core.close()
    finally:
        cluster.stop()
    missing = sorted(set(ok) - found)
    out = {
        "run_s": RESTART_RUN_S,
        "outage_s": round(outage, 1),
        "calls_ok": len(ok),
        "calls_failed": len(failed),
        "events_found": len(set(ok) & found),
        "gap": len(missing),
        "gap_examples": missing[:3],
        "trace_gaps": gaps,
        "server_cpu_s": round(cpu, 1),
        "load_average": round(os.getloadavg()[0], 1),
        "met": not missing and not gaps["lost"] and not gaps["pending"],
    }
    table(
        f"engines: PostgreSQL stopped for {OUTAGE_S:g} s during {RESTART_RUN_S:g} s of {CLIENTS}-client load "
        "(acceptance 4: every successful call has its trace event)",
        ["measure", "value", "target", "status"],
        [
            ("successful calls", out["calls_ok"], None, "-"),
            ("their trace events found", out["events_found"], None, "-"),
            ("gap: successful calls without an event", out["gap"], "0", target_cell(out["gap"] == 0)),
            ("calls that failed", out["calls_failed"], None, "-"),
            ("trace gaps reported (lost / pending)", f"{gaps['lost']} / {gaps['pending']}", "0 / 0", "-"),
            ("outage (s)", out["outage_s"], None, "-"),
            ("server CPU s", out["server_cpu_s"], None, "-"),
            ("load average (1 min) after", out["load_average"], None, "-"),
        ],
    )
    return out


async def _one_call(url: str) -> None:
    from fastmcp import Client

    async with Client(url, timeout=60) as c:
        await c.call_tool("rag_search", {"query": f"flush {time.time()}", "k": 1}, raise_on_error=False)


async def _restart_load(url: str, cluster: Any) -> tuple[list[str], list[str], float]:
    """CLIENTS clients calling rag_search (unique queries) for RESTART_RUN_S seconds; the server is down from
    OUTAGE_AT_S for OUTAGE_S seconds. Returns (queries answered, queries failed, outage seconds)."""
    from fastmcp import Client

    ok: list[str] = []
    failed: list[str] = []
    span: list[float] = []

    def restart() -> None:
        time.sleep(OUTAGE_AT_S)
        t = time.monotonic()
        cluster.server_stop()
        time.sleep(OUTAGE_S)
        cluster.server_start()
        span.append(time.monotonic() - t)

    th = threading.Thread(target=restart)
    th.start()
    end = time.monotonic() + RESTART_RUN_S

    async def client(idx: int) -> None:
        async with Client(url, timeout=60) as c:
            i = 0
            while time.monotonic() < end:
                q = f"sample preparation {idx}-{i}"
                i += 1
                try:
                    r = await c.call_tool("rag_search", {"query": q, "k": 3}, raise_on_error=False)
                    (failed if r.is_error else ok).append(q)
                except Exception:  # noqa: BLE001 - a failed call is not a successful one: counted apart
                    failed.append(q)

    await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    await asyncio.to_thread(th.join)
    return ok, failed, span[0] if span else 0.0


def main() -> None:
    """``python -m bench.replicas [throughput|restart]``: run one part (both without an argument), print JSON."""
    which = sys.argv[1:] or ["throughput", "restart"]
    res = {w: (run_throughput if w == "throughput" else run_restart)(Context()) for w in which}
    print(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
