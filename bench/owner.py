"""The owner model's cost (docs/processes.md): what sharing a store through the owner daemon adds.

Measured on a private store, printed as two tables:

- start: spawn ``aisac serve`` (stdio) -> ``tools/list`` answered, the way a host starts it: ``initialize`` at
  protocol 2025-11-25, ``notifications/initialized``, ``tools/list`` (raw JSON-RPC lines, so the figure is the
  server's, not a client library's). Four cases, each the median of ``--runs`` spawns (default 5):
  in-process (``--no-owner``); the owner already running (the stdio relay only); no owner running with the store's
  answer catalogue present (the relay answers from ``answer-catalog.json`` and starts the daemon in the background:
  every start after the store's first); no owner and no catalogue (a first start, or the first after an upgrade:
  the relay waits for the daemon). Each row gives the wall-clock median and the CPU time (user + sys) the spawned
  process used until the answer (Linux ``/proc``; "-" elsewhere): the machine's load stretches the wall clock, the
  CPU time is what the start itself costs. The load average is printed with the table;
- sampling round trip: a handshake-era stdio host answering ``sampling/createMessage`` with a stub, through the
  relay and the owner, for one ``roles_route(llm="sampling")`` call (median of 5, after one unmeasured);
- per call: ``memory_list_sessions`` (a small SQLite read plus the trace write), p50/p95 of ``--queries`` calls
  (default 100, after 20 unmeasured) over stdio in-process, over stdio through the proxy to the owner, and over HTTP straight to the
  owner (a fastmcp client, one session);
- the overhead of the proxy: p50 stdio -> owner minus p50 in-process, against its target (10 ms).

The daemon is stopped at the end (``aisac owner stop``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from .common import AISAC_BIN, HANDSHAKE_OPEN, Context, Skip, percentile, server_env, table, target_cell, temp_dir

#: targets (docs/processes.md): per-call overhead of the stdio proxy over in-process, and spawn -> tools/list
OVERHEAD_TARGET_MS = 10.0
LIST_TARGET_WARM_S = 0.5
LIST_TARGET_COLD_S = 1.5
#: unmeasured calls before each latency series; seconds left to a freshly started owner to load its models
WARMUP = 20
SETTLE_S = 5.0


#: the requests a host sends before it sees the tools (the handshake era, as the TypeScript SDK and most hosts do)
_HANDSHAKE = (*HANDSHAKE_OPEN, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})


def _cpu_of(pid: int) -> float | None:
    """CPU seconds (user + sys) process ``pid`` has used so far, from ``/proc/<pid>/stat``; None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (proc(5))


def spawn_list(store: Path, args: list[str], timeout: float = 180.0) -> tuple[float, float | None, int]:
    """Spawn ``aisac serve *args`` over stdio, send the handshake and ``tools/list`` as one host's first lines, and
    return (wall seconds from just before the spawn to the ``tools/list`` answer, CPU seconds the spawned process used
    by then or None, number of tools listed). The server is then left to end (stdin closed), at most ``timeout`` s.
    Raises RuntimeError when the server exits, answers an error, or says nothing within ``timeout`` s."""
    log = (store.parent / "serve-stderr.log").open("ab")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(AISAC_BIN), "serve", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        env=server_env(store),
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in _HANDSHAKE))
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"aisac serve {' '.join(args)} ended before answering tools/list (see {log.name})")
            msg = json.loads(line)
            if msg.get("id") == 2:
                break
        wall, cpu = time.perf_counter() - t0, _cpu_of(proc.pid)
        if "result" not in msg:
            raise RuntimeError(f"tools/list answered an error: {msg}")
        proc.stdin.close()
        proc.wait()
        return wall, cpu, len(msg["result"]["tools"])
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


async def _stdio_calls(store: Path, args: list[str], n: int) -> tuple[float, list[float]]:
    """(seconds from spawn to the tools/list answer, per-call seconds of n memory_list_sessions)."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    t0 = time.perf_counter()
    async with Client(
        StdioTransport(command=str(AISAC_BIN), args=["serve", *args], env=server_env(store), keep_alive=False)
    ) as c:
        await c.list_tools()
        listed = time.perf_counter() - t0
        lat = []
        for _ in range(WARMUP if n else 0):  # first calls: lazy imports, connection set-up
            await c.call_tool("memory_list_sessions", {"limit": 1})
        for _ in range(n):
            t = time.perf_counter()
            await c.call_tool("memory_list_sessions", {"limit": 1})
            lat.append(time.perf_counter() - t)
    return listed, lat


async def _http_calls(store: Path, n: int) -> list[float]:
    from fastmcp import Client

    from aisac_core.owner import live_owner
    from aisac_servers.base.proxying import owner_mcp_transport

    info = live_owner(store)
    assert info is not None
    lat = []
    async with Client(owner_mcp_transport(info)) as c:  # over the owner's Unix socket
        for _ in range(WARMUP):
            await c.call_tool("memory_list_sessions", {"limit": 1})
        for _ in range(n):
            t = time.perf_counter()
            await c.call_tool("memory_list_sessions", {"limit": 1})
            lat.append(time.perf_counter() - t)
    return lat


async def _sampling_rtt(store: Path, n: int = 5) -> list[float]:
    """Seconds of ``roles_route(llm="sampling")`` calls through the relay, the host's model a stub (one route)."""
    import json

    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    route = json.dumps({"intent": "analytical", "complexity": "medium", "decision": "plan", "rationale": "stub"})

    def handler(messages: Any, params: Any, _ctx: Any) -> str:
        return route

    lat = []
    transport = StdioTransport(command=str(AISAC_BIN), args=["serve"], env=server_env(store), keep_alive=False)
    async with Client(transport, mode="legacy", sampling_handler=handler) as c:
        for i in range(n + 1):
            t = time.perf_counter()
            await c.call_tool("roles_route", {"task": f"What is the Km of enzyme {i}?", "llm": "sampling"})
            if i:
                lat.append(time.perf_counter() - t)
    return lat


def _starts(store: Path, args: list[str], repeats: int, before: Any = None) -> dict[str, Any]:
    """``repeats`` spawns of :func:`spawn_list` (``before()`` runs ahead of each, unmeasured): wall and CPU seconds."""
    walls, cpus = [], []
    for _ in range(repeats):
        if before is not None:
            before()
        wall, cpu, _n = spawn_list(store, args)
        walls.append(wall)
        if cpu is not None:
            cpus.append(cpu)
    return {
        "wall_median_s": round(statistics.median(walls), 3),
        "cpu_median_s": round(statistics.median(cpus), 3) if cpus else None,
        "wall_runs_s": [round(x, 3) for x in walls],
        "cpu_runs_s": [round(x, 3) for x in cpus],
    }


def run(ctx: Context) -> dict[str, Any]:
    """The owner part; returns the JSON-ready result."""
    import anyio

    from aisac_core.owner import stop_owner
    from aisac_servers.owner.catalog import CATALOG_FILE

    if not AISAC_BIN.exists():
        raise Skip(f"{AISAC_BIN} not found (install the project: make install)")
    n = int(ctx.options.get("queries") or 100)
    repeats = int(ctx.options.get("runs") or 5)
    t0 = time.perf_counter()
    load_before = os.getloadavg()
    with temp_dir(ctx, "owner") as tmp:
        store = tmp / "store"

        def no_owner() -> None:
            stop_owner(store)

        def first_start() -> None:
            stop_owner(store)
            (store / CATALOG_FILE).unlink(missing_ok=True)

        try:
            anyio.run(_stdio_calls, store, ["--no-owner"], 1)  # create the store and warm the OS caches
            starts = {"in_process": _starts(store, ["--no-owner"], repeats)}
            _s, inproc = anyio.run(_stdio_calls, store, ["--no-owner"], n)
            starts["first_start"] = _starts(store, [], repeats, first_start)
            starts["no_owner"] = _starts(store, [], repeats, no_owner)
            stop_owner(store)
            spawn_list(store, [])  # one owner for the rest, left to load its models
            time.sleep(SETTLE_S)
            starts["owner_running"] = _starts(store, [], repeats)
            _s, proxied = anyio.run(_stdio_calls, store, [], n)
            direct = anyio.run(_http_calls, store, n)
            sampling = anyio.run(_sampling_rtt, store)
        finally:
            stop_owner(store)
    load_after = os.getloadavg()

    def ms(xs, p):
        return round(percentile(xs, p) * 1000, 1)

    overhead = round(ms(proxied, 50) - ms(inproc, 50), 1)
    targets = {"owner_running": LIST_TARGET_WARM_S, "no_owner": LIST_TARGET_COLD_S}
    labels = {
        "no_owner": "no owner running, catalogue present (every start after the first)",
        "first_start": "no owner running, no catalogue (first start: waits for the daemon)",
        "owner_running": "owner running (relay only)",
        "in_process": "--no-owner (the suite in the host's process)",
    }
    start_rows = []
    for key, label in labels.items():
        st, target = starts[key], targets.get(key)
        ok = None if target is None else st["wall_median_s"] <= target
        st["target_s"], st["met"] = target, ok
        start_rows.append(
            (
                label,
                st["wall_median_s"],
                st["cpu_median_s"],
                ", ".join(f"{x:.2f}" for x in st["wall_runs_s"]),
                None if target is None else f"<= {target:g}",
                target_cell(ok),
            )
        )
    load = f"load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after, on {os.cpu_count()} CPUs"
    table(
        f"owner: spawn `aisac serve` (stdio) -> tools/list answered, median of {repeats}",
        ["start", "wall s", "CPU s", "wall runs s", "target", "met"],
        start_rows,
        caption=f"CPU: user + sys of the spawned process until the answer; {load}",
    )
    rows = [
        ("call, stdio in-process (ms)", ms(inproc, 50), ms(inproc, 95), None, None),
        ("call, stdio -> owner (ms)", ms(proxied, 50), ms(proxied, 95), None, None),
        ("call, HTTP straight to the owner (ms)", ms(direct, 50), ms(direct, 95), None, None),
        (
            "sampling round trip: roles_route(llm=sampling) via relay (ms)",
            ms(sampling, 50),
            ms(sampling, 95),
            None,
            None,
        ),
        (
            "overhead stdio -> owner minus in-process (ms)",
            overhead,
            None,
            f"<= {OVERHEAD_TARGET_MS:g}",
            target_cell(overhead <= OVERHEAD_TARGET_MS),
        ),
    ]
    table(
        f"owner: memory_list_sessions latency ({n} calls) and the sampling round trip",
        ["measure", "p50", "p95", "target", "met"],
        rows,
    )
    met = [st["met"] for st in starts.values() if st["met"] is not None] + [overhead <= OVERHEAD_TARGET_MS]
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": [
            {"metric": "proxied call p50 ms", "value": ms(proxied, 50)},
            {"metric": "in-process call p50 ms", "value": ms(inproc, 50)},
            {"metric": "proxy overhead p50 ms", "value": overhead},
            {"metric": "sampling round trip p50 ms", "value": ms(sampling, 50)},
            *(
                {"metric": f"tools/list, {key.replace('_', ' ')} s", "value": st["wall_median_s"]}
                for key, st in starts.items()
            ),
        ],
        "latency_ms": {r[0]: {"p50": r[1], "p95": r[2]} for r in rows[:4]},
        "start_s": starts,
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in load_after]},
        "median_proxy_overhead_ms": overhead,
        "targets_met": all(met),
    }
