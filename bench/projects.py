"""Projects: the bootstrap's cost, and the start-up of a project server.

Per template: ``aisac init`` (copy + dry-run bootstrap), a dry-run bootstrap (load, validate, import the
extensions, apply the graph augmentation), a full bootstrap (also opens the project's SQL store and writes the
initialization trace): median of ``--runs`` runs each, in-process. Then the wall clock from spawning
``aisac serve --project DIR --no-owner`` (stdio) to the ``tools/list`` answer, next to plain ``aisac serve``
(the ``startup`` part's target: < 2 s), median of ``--runs`` spawns.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from .common import AISAC_BIN, REPO_ROOT, Context, Skip, isolated_settings, server_env, table, target_cell, temp_dir

TARGET_S = 2.0


async def _spawn(store: Path, args: list[str]) -> tuple[float, int]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(
        command=str(AISAC_BIN),
        args=args,
        env={**server_env(store), "AISAC_WARM": "0"},
        cwd=str(REPO_ROOT),
        log_file=store.parent / "server-stderr.log",
        keep_alive=False,
    )
    t0 = time.perf_counter()
    async with Client(transport) as client:
        tools = await client.list_tools()
        return time.perf_counter() - t0, len(tools)


def run(ctx: Context) -> dict[str, Any]:
    """The projects part; returns the JSON-ready result. Raises :class:`Skip` without the ``aisac`` script."""
    import anyio

    from aisac_core.projects import bootstrap, init_project, list_templates

    if not AISAC_BIN.exists():
        raise Skip(f"{AISAC_BIN} not found (install the project: make install)")
    runs = int(ctx.options.get("runs", 5))
    t_all = time.perf_counter()
    rows, per = [], {}
    with temp_dir(ctx, "projects") as tmp:
        base = isolated_settings(tmp / "shared")
        for t in list_templates():
            init_s, dry_s, full_s = [], [], []
            for i in range(runs):
                t0 = time.perf_counter()
                init_project(tmp / f"{t}-{i}", t)
                init_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                bootstrap(tmp / f"{t}-{i}", base, open_store=False)
                dry_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                bootstrap(tmp / f"{t}-{i}", base)
                full_s.append(time.perf_counter() - t0)
            per[t] = {
                k: round(statistics.median(v) * 1000, 1)
                for k, v in (("init_ms", init_s), ("dry_bootstrap_ms", dry_s), ("full_bootstrap_ms", full_s))
            }
            rows.append((t, per[t]["init_ms"], per[t]["dry_bootstrap_ms"], per[t]["full_bootstrap_ms"]))
        table(
            f"projects: bootstrap per template (median of {runs}, ms, in-process)",
            ["template", "aisac init", "bootstrap (dry run)", "bootstrap (store + trace)"],
            rows,
        )
        plain = [anyio.run(_spawn, tmp / "plain", ["serve", "--no-owner"])[0] for _ in range(runs)]
        proj_runs = [
            anyio.run(_spawn, tmp / "shared", ["serve", "--no-owner", "--project", str(tmp / "materials-0")])
            for _ in range(runs)
        ]
    med_plain, med_proj = statistics.median(plain), statistics.median(r[0] for r in proj_runs)
    ok = med_proj < TARGET_S
    table(
        "projects: spawn -> tools/list (stdio, --no-owner)",
        ["server", "median s", "tools", "target", "status"],
        [
            ("aisac serve", round(med_plain, 3), None, None, None),
            (
                "aisac serve --project (materials)",
                round(med_proj, 3),
                proj_runs[0][1],
                f"< {TARGET_S:g}",
                target_cell(ok),
            ),
        ],
    )
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t_all, 1),
        "templates": per,
        "spawn_plain_s": round(med_plain, 4),
        "spawn_project_s": round(med_proj, 4),
        "summary": [
            {
                "metric": "spawn serve --project -> tools/list median s",
                "value": round(med_proj, 3),
                "target": f"< {TARGET_S:g}",
                "met": ok,
            },
            {"metric": "full bootstrap materials ms", "value": per.get("materials", {}).get("full_bootstrap_ms")},
        ],
        "targets": {"spawn_project_s": {"target": TARGET_S, "measured": round(med_proj, 4), "met": ok}},
    }
