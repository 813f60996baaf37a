"""Literature: lit_search latency (network vs cache), merge throughput, and arXiv spacing under concurrency.

All requests go to a local replay server on 127.0.0.1 (tests/literature_replay.py, the project's own
fixtures), so the figures measure aisac's own cost (HTTP client, parsing, merging, the SQLite cache), not the
services'. The rate limits are lifted for (1) and (2) (arXiv interval 0) - except Semantic Scholar's 1/s, which
is why it is left out of the source list there.

1. ``search`` over arXiv, PubMed (esearch + esummary), Crossref and OpenAlex, in-process
   (:meth:`aisac_core.literature.LiteratureService.search`): 30 distinct queries answered over HTTP (cold), then the same 30
   answered from the cache. The cold figure is bounded by NCBI's budget of 3 requests/s (two PubMed requests
   per search, so one search per ~0.33 s in steady state): it shows the politeness, not aisac's cost.
2. :func:`aisac_core.literature.merge_papers` on 5 x 200 synthetic records with 50 % overlap: papers/s.
3. arXiv politeness (acceptance 4): 5 concurrent ``lit_search`` calls (arXiv only) through the suite's MCP
   client at the default 3 s interval: the smallest gap between two requests as recorded by the server.
   Target: >= 3.0 s.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from .common import Context, latency_summary, table, target_cell, temp_dir

N_QUERIES = 30
TARGET_GAP_S = 3.0


def _replay_server() -> Any:
    tests = Path(__file__).resolve().parents[1] / "tests"
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))
    from literature_replay import ReplayServer

    return ReplayServer()


async def _searches(lit: Any) -> tuple[list[float], list[float]]:
    """``lit``: a LiteratureService."""
    src = ["arxiv", "pubmed", "crossref", "openalex"]
    cold, warm = [], []
    for i in range(N_QUERIES):
        t = time.perf_counter()
        await lit.search(f"protein structure {i}", src, 10)
        cold.append((time.perf_counter() - t) * 1000)
    for i in range(N_QUERIES):
        t = time.perf_counter()
        await lit.search(f"protein structure {i}", src, 10)
        warm.append((time.perf_counter() - t) * 1000)
    return cold, warm


def _merge_rate() -> float:
    from aisac_core.literature import Paper, merge_papers

    ranked = {}
    for s, name in enumerate(("arxiv", "pubmed", "crossref", "openalex", "semantic_scholar")):
        ranked[name] = [
            Paper(
                source=name,
                source_id=f"{name}-{i}",
                doi=f"10.5555/p{i if i % 2 else i + 1000 * s}",
                title=f"Paper number {i}",
                year=2020,
            )
            for i in range(200)
        ]
    t = time.perf_counter()
    for _ in range(5):
        merge_papers(ranked)
    return 5 * 1000 / (time.perf_counter() - t)


async def _arxiv_gaps(srv: Any, core: Any) -> list[float]:
    from fastmcp import Client

    from aisac_servers.serving.suite import build

    before = len(srv.requests("/arxiv"))
    async with Client(build(["lit"], app=core, lifespan=False)) as c:
        await asyncio.gather(
            *[c.call_tool("lit_search", {"query": f"topic {i}", "sources": ["arxiv"]}) for i in range(5)]
        )
    times = sorted(t for t, _p, _q in srv.requests("/arxiv")[before:])
    return [b - a for a, b in zip(times, times[1:])]


def run(ctx: Context) -> dict[str, Any]:
    """Run the three measurements; returns the JSON result."""
    from aisac_core.context import AppContext
    from aisac_core.settings import Settings

    t0 = time.perf_counter()
    with temp_dir(ctx, "literature") as tmp, _replay_server() as srv:
        base = {**srv.settings_kwargs(), "warm": False, "roots": [], "sql_url": None}
        fast = Settings(data_dir=tmp / "a", lit_arxiv_interval_s=0.0, **base)
        core = AppContext(fast)  # its literature service: budgets of its own
        cold, warm = asyncio.run(_searches(core.literature))
        core.close()
        rate = _merge_rate()
        polite = AppContext(Settings(data_dir=tmp / "b", **base))  # the default 3 s arXiv interval
        try:
            gaps = asyncio.run(_arxiv_gaps(srv, polite))
        finally:
            polite.close()
    c, w = latency_summary(cold), latency_summary(warm)
    table(
        "literature: lit_search, 4 sources, local replay server (ms)",
        ["answered", "n", "p50", "p95", "max"],
        [
            ["over HTTP (cold)", c["n"], c["p50_ms"], c["p95_ms"], c["max_ms"]],
            ["from the cache", w["n"], w["p50_ms"], w["p95_ms"], w["max_ms"]],
        ],
        caption="cold: paced by PubMed's 3 requests/s (2 per search)",
    )
    ok = min(gaps) >= TARGET_GAP_S if gaps else None
    table(
        "literature: merge and arXiv politeness",
        ["measure", "value", "target", "status"],
        [
            ["merge_papers (papers/s, 1,000 records)", round(rate), "-", "-"],
            [
                "arXiv: smallest gap of 5 concurrent calls (s)",
                round(min(gaps), 3) if gaps else None,
                f">= {TARGET_GAP_S}",
                target_cell(ok),
            ],
        ],
    )
    return {
        "status": "ok",
        "search_cold": c,
        "search_cached": w,
        "merge_papers_per_s": round(rate),
        "arxiv_gaps_s": [round(g, 3) for g in gaps],
        "arxiv_gap_target_met": ok,
        "summary": [
            {"metric": "lit_search p50, 4 sources, cold / cached (ms)", "value": f"{c['p50_ms']} / {w['p50_ms']}"},
            {
                "metric": "arXiv smallest gap, 5 concurrent calls (s)",
                "value": round(min(gaps), 3) if gaps else None,
                "target": f">= {TARGET_GAP_S}",
                "met": ok,
            },
        ],
        "seconds": round(time.perf_counter() - t0, 1),
    }
