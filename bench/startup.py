"""Server start-up: from spawning ``aisac serve`` (stdio) to the answer of ``tools/list``.

Each run spawns a new ``.venv/bin/aisac serve`` through fastmcp's ``StdioTransport`` (environment:
``AISAC_DATA_DIR`` on a temporary store, ``HF_HUB_OFFLINE=1``), lists the tools and stops the server;
the time is the wall clock from just before the spawn to the ``tools/list`` answer, so it includes
the interpreter start, imports, and whatever handshake the client performs. Median of 5 runs
(``--runs``); target < 2 s. One more run measures the time to a first ``rag_search`` answer, which
waits for the models (loaded in the background). Before that, the import time of the suite (what a
``--no-owner`` server and the owner daemon load) and of the stdio relay (what every host spawns when an
owner serves the store): each the median of 3 fresh interpreters, the wall clock of the ``import``
statement alone. The start cases one by one (no owner with and without the store's answer catalogue, owner
running, ``--no-owner``), each with the CPU time of the spawned process: ``python -m bench --only owner``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from .common import AISAC_BIN, REPO_ROOT, Context, Skip, server_env, table, target_cell, temp_dir

TARGET_S = 2.0
#: modules whose import time is measured: (label, module)
IMPORTS = (
    ("suite (aisac_servers.serving.suite)", "aisac_servers.serving.suite"),
    ("stdio relay (aisac_servers.owner.relay)", "aisac_servers.owner.relay"),
)


def import_seconds(module: str, runs: int = 3) -> float:
    """Median wall-clock seconds of ``import module`` in ``runs`` fresh interpreters of the project's venv."""
    import subprocess
    import sys

    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=str(REPO_ROOT)
            ).stdout.strip()
        )
        for _ in range(runs)
    ]
    return statistics.median(out)


async def spawn_and_list(store: Path, search: bool = False) -> tuple[float, int, float | None]:
    """(seconds to the tools/list answer, number of tools, seconds to a first rag_search answer or None)."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(
        command=str(AISAC_BIN),
        args=["serve"],
        env=server_env(store),
        cwd=str(REPO_ROOT),
        log_file=store.parent / "server-stderr.log",
        keep_alive=False,
    )
    t0 = time.perf_counter()
    async with Client(transport) as client:
        tools = await client.list_tools()
        listed = time.perf_counter() - t0
        searched = None
        if search:
            await client.call_tool("rag_search", {"query": "boundary layer transition", "k": 5})
            searched = time.perf_counter() - t0
    return listed, len(tools), searched


def run(ctx: Context) -> dict[str, Any]:
    """The startup part; returns the JSON-ready result. Raises :class:`Skip` without the ``aisac`` script."""
    import anyio

    if not AISAC_BIN.exists():
        raise Skip(f"{AISAC_BIN} not found (install the project: make install)")
    runs = int(ctx.options.get("runs", 5))
    t0 = time.perf_counter()
    imports = {label: import_seconds(module) for label, module in IMPORTS}
    times, ntools = [], 0
    with temp_dir(ctx, "startup") as tmp:
        store = tmp / "store"
        for _ in range(runs):
            s, ntools, _n = anyio.run(spawn_and_list, store)
            times.append(s)
        _l, _n, first_search = anyio.run(spawn_and_list, store, True)
    med = statistics.median(times)
    ok = med < TARGET_S
    table(
        "startup: spawn `aisac serve` (stdio) -> tools/list answer",
        ["measure", "value", "target", "status"],
        [
            (f"median of {runs}, s", round(med, 3), f"< {TARGET_S:g}", target_cell(ok)),
            ("min / max, s", f"{min(times):.3f} / {max(times):.3f}", None, None),
            ("runs, s", ", ".join(f"{x:.3f}" for x in times), None, None),
            ("tools listed", ntools, None, None),
            ("spawn -> first rag_search answer (models load), s", round(first_search or 0, 3), None, None),
            *((f"import {label}, s (median of 3)", round(v, 3), None, None) for label, v in imports.items()),
        ],
    )
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": [
            {
                "metric": f"spawn -> tools/list median of {runs} s",
                "value": round(med, 3),
                "target": f"< {TARGET_S:g}",
                "met": ok,
            },
            {"metric": "spawn -> first rag_search answer s", "value": round(first_search or 0, 3)},
            *({"metric": f"import {label} s", "value": round(v, 3)} for label, v in imports.items()),
        ],
        "imports_s": {label: round(v, 4) for label, v in imports.items()},
        "runs_s": [round(x, 4) for x in times],
        "median_s": round(med, 4),
        "tools": ntools,
        "first_search_s": round(first_search or 0, 4),
        "targets": {"median_s": {"target": TARGET_S, "measured": round(med, 4), "met": ok}},
    }
