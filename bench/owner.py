"""The owner model's cost (docs/processes.md): what sharing a store through the owner daemon adds.

Measured on a private empty store:

- cold start: spawn ``aisac serve`` (stdio) with no owner running -> ``tools/list`` answer (includes starting the
  daemon), and the same with the owner already running (the proxy only);
- per-call latency of ``memory_list_sessions`` (a small SQLite read plus the trace write) over stdio in-process
  (``--no-owner``), over stdio through the proxy, and over HTTP straight to the owner; p50/p95 of ``--queries``
  calls (default 50).

The daemon is stopped at the end (``aisac owner stop``).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from .common import AISAC_BIN, Context, Skip, percentile, server_env, table, temp_dir


async def _stdio_calls(store: Path, args: list[str], n: int) -> tuple[float, list[float]]:
    """(seconds from spawn to tools/list, per-call seconds of n memory_list_sessions)."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    t0 = time.perf_counter()
    async with Client(StdioTransport(command=str(AISAC_BIN), args=["serve", *args], env=server_env(store),
                                     keep_alive=False)) as c:
        await c.list_tools()
        listed = time.perf_counter() - t0
        lat = []
        for _ in range(n):
            t = time.perf_counter()
            await c.call_tool("memory_list_sessions", {"limit": 1})
            lat.append(time.perf_counter() - t)
    return listed, lat


async def _http_calls(store: Path, n: int) -> list[float]:
    from fastmcp import Client

    from aisac_core.owner import live_owner

    info = live_owner(store)
    assert info is not None
    lat = []
    async with Client(info.url, auth=info.token) as c:
        for _ in range(n):
            t = time.perf_counter()
            await c.call_tool("memory_list_sessions", {"limit": 1})
            lat.append(time.perf_counter() - t)
    return lat


def run(ctx: Context) -> dict[str, Any]:
    """The owner part; returns the JSON-ready result."""
    import anyio

    from aisac_core.owner import stop_owner

    if not AISAC_BIN.exists():
        raise Skip(f"{AISAC_BIN} not found (install the project: make install)")
    n = int(ctx.options.get("queries") or 50)
    t0 = time.perf_counter()
    with temp_dir(ctx, "owner") as tmp:
        store = tmp / "store"
        try:
            inproc_start, inproc = anyio.run(_stdio_calls, store, ["--no-owner"], n)
            cold, proxied = anyio.run(_stdio_calls, store, [], n)
            warm, _ = anyio.run(_stdio_calls, store, [], 0)
            direct = anyio.run(_http_calls, store, n)
        finally:
            stop_owner(store)
    ms = lambda xs, p: round(percentile(xs, p) * 1000, 1)  # noqa: E731
    rows = [("stdio, in-process (--no-owner)", ms(inproc, 50), ms(inproc, 95)),
            ("stdio -> proxy -> owner daemon", ms(proxied, 50), ms(proxied, 95)),
            ("HTTP straight to the owner daemon", ms(direct, 50), ms(direct, 95))]
    table(f"owner: memory_list_sessions latency, {n} calls", ["path", "p50 ms", "p95 ms"], rows)
    table("owner: spawn `aisac serve` -> tools/list", ["case", "seconds"],
          [("in-process (--no-owner)", round(inproc_start, 2)), ("no owner yet: starts the daemon", round(cold, 2)),
           ("owner already running: proxy only", round(warm, 2))])
    return {"status": "ok", "seconds": round(time.perf_counter() - t0, 1),
            "summary": [{"metric": "proxied call p50 ms", "value": ms(proxied, 50)},
                        {"metric": "in-process call p50 ms", "value": ms(inproc, 50)},
                        {"metric": "cold start with daemon s", "value": round(cold, 2)}],
            "latency_ms": {r[0]: {"p50": r[1], "p95": r[2]} for r in rows},
            "start_s": {"in_process": round(inproc_start, 3), "daemon_cold": round(cold, 3),
                        "proxy_warm": round(warm, 3)},
            "median_proxy_overhead_ms": round((statistics.median(proxied) - statistics.median(inproc)) * 1000, 1)}
