"""The owner model's cost (docs/processes.md): what sharing a store through the owner daemon adds.

Measured on a private empty store, printed as one table:

- start: spawn ``aisac serve`` (stdio) -> ``tools/list`` answered, in-process (``--no-owner``), with the owner
  already running (the stdio proxy only), and with no owner (the relay answers from the store's answer catalogue
  and starts the daemon in the background); median of ``--repeats`` spawns (default 5);
- sampling round trip: a handshake-era stdio host answering ``sampling/createMessage`` with a stub, through the
  relay and the owner, for one ``roles_route(llm="sampling")`` call (median of 5, after one unmeasured);
- per call: ``memory_list_sessions`` (a small SQLite read plus the trace write), p50/p95 of ``--queries`` calls
  (default 100, after 20 unmeasured) over stdio in-process, over stdio through the proxy to the owner, and over HTTP straight to the
  owner (a fastmcp client, one session);
- the overhead of the proxy: p50 stdio -> owner minus p50 in-process, against its target (10 ms).

The daemon is stopped at the end (``aisac owner stop``).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from .common import AISAC_BIN, Context, Skip, percentile, server_env, table, temp_dir

#: targets (docs/processes.md): per-call overhead of the stdio proxy over in-process, and spawn -> tools/list
OVERHEAD_TARGET_MS = 10.0
LIST_TARGET_WARM_S = 0.5
LIST_TARGET_COLD_S = 1.5
#: unmeasured calls before each latency series; seconds left to a freshly started owner to load its models
WARMUP = 20
SETTLE_S = 5.0


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
    from aisac_servers.owner.proxying import owner_mcp_transport

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


def run(ctx: Context) -> dict[str, Any]:
    """The owner part; returns the JSON-ready result."""
    import anyio

    from aisac_core.owner import stop_owner

    if not AISAC_BIN.exists():
        raise Skip(f"{AISAC_BIN} not found (install the project: make install)")
    n = int(ctx.options.get("queries") or 100)
    repeats = int(ctx.options.get("repeats") or 5)
    t0 = time.perf_counter()
    with temp_dir(ctx, "owner") as tmp:
        store = tmp / "store"
        try:
            anyio.run(_stdio_calls, store, ["--no-owner"], 1)  # create the store and warm the OS caches
            inproc_starts, cold_starts, warm_starts = [], [], []
            # latencies on the last spawn of each kind, once the servers' background warm-up (models) is over
            for i in range(repeats):
                s, inproc = anyio.run(_stdio_calls, store, ["--no-owner"], n if i == repeats - 1 else 0)
                inproc_starts.append(s)
            for _ in range(repeats):
                stop_owner(store)
                s, _lat = anyio.run(_stdio_calls, store, [], 0)
                cold_starts.append(s)
            time.sleep(SETTLE_S)
            for i in range(repeats):
                s, proxied = anyio.run(_stdio_calls, store, [], n if i == repeats - 1 else 0)
                warm_starts.append(s)
            direct = anyio.run(_http_calls, store, n)
            sampling = anyio.run(_sampling_rtt, store)
        finally:
            stop_owner(store)

    def ms(xs, p):
        return round(percentile(xs, p) * 1000, 1)

    def med(xs):
        return round(statistics.median(xs), 2)

    overhead = round(ms(proxied, 50) - ms(inproc, 50), 1)
    rows = [
        ("spawn -> tools/list, in-process (--no-owner)", med(inproc_starts), None, None, None),
        (
            "spawn -> tools/list, owner running",
            med(warm_starts),
            None,
            f"<= {LIST_TARGET_WARM_S}",
            med(warm_starts) <= LIST_TARGET_WARM_S,
        ),
        (
            "spawn -> tools/list, owner must start",
            med(cold_starts),
            None,
            f"<= {LIST_TARGET_COLD_S}",
            med(cold_starts) <= LIST_TARGET_COLD_S,
        ),
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
            overhead <= OVERHEAD_TARGET_MS,
        ),
    ]
    table(
        f"owner: start (s, median of {repeats}) and memory_list_sessions latency ({n} calls)",
        ["measure", "p50 / s", "p95", "target", "met"],
        rows,
    )
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": [
            {"metric": "proxied call p50 ms", "value": ms(proxied, 50)},
            {"metric": "in-process call p50 ms", "value": ms(inproc, 50)},
            {"metric": "proxy overhead p50 ms", "value": overhead},
            {"metric": "sampling round trip p50 ms", "value": ms(sampling, 50)},
            {"metric": "tools/list, owner running s", "value": med(warm_starts)},
            {"metric": "tools/list, owner must start s", "value": med(cold_starts)},
        ],
        "latency_ms": {r[0]: {"p50": r[1], "p95": r[2]} for r in rows[3:7]},
        "start_s": {
            "in_process": med(inproc_starts),
            "owner_must_start": med(cold_starts),
            "owner_running": med(warm_starts),
        },
        "median_proxy_overhead_ms": overhead,
        "targets_met": all(r[4] for r in rows if r[4] is not None),
    }
