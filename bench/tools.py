"""Tools: what the suite costs a host's context - the ``tools/list`` answer per tool profile and per server, and the
size of three typical results.

1. ``tools/list``: the suite built with each profile (``core``, ``full``, ``all``) and with each server alone, listed over
   an in-memory fastmcp client; the compact JSON of the answer (:func:`aisac_servers.serving.tooldoc.payload_text`) in
   bytes and in tokens of the memory server's tokenizer (bundled all-MiniLM-L6-v2 WordPiece, no special tokens;
   it splits JSON finely, so a host model's BPE count is lower). Targets: core <= 5,000 tokens, full <= 12,000.
   Also the composed instructions' tokens (target <= 300).
2. Result sizes (characters of the structured content as JSON) on the demo corpus (``examples/*.md``): ``rag_search``
   with k=10, ``memory_recall`` of a 10-turn session, ``trace_get_run`` of the run that made them.

The "before" column holds the figures measured on 2026-11-24 on commit 8786b79, before tool annotations, typed
output schemas, model-oriented descriptions, composed instructions and profiles were added (58 tools, the same
measurement and corpus; ``core`` then = the same 11 tools filtered from the full list; ``full`` and ``all`` then = every
tool listed, which is what ``all`` still is: ``full`` now lists the core tools and finds the rest with ``tools_search``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
from fastmcp import Client

from .common import Context, example_notes, make_core, table, target_cell, temp_dir

#: measured 2026-11-24 (bytes, tokens) of tools/list before the host-view work; None: the profile did not exist
BEFORE_LIST: dict[str, tuple[int, int] | None] = {
    "core": (14_902, 5_648),
    "full": (64_804, 25_224),
    "all": (64_804, 25_224),
    "rag": (12_728, 4_902),
    "memory": (14_071, 5_524),
    "lit": (6_935, 2_637),
    "data": (12_397, 4_805),
    "roles": (10_007, 3_840),
    "trace": (8_721, 3_551),
}
#: the same day and commit: characters of the results on the demo corpus; instructions were 26 tokens
BEFORE_RESULTS: dict[str, int | None] = {"rag_search k=10": 15_468, "memory_recall": 2_741, "trace_get_run": 13_343}
BEFORE_NOTE = "before: 2026-11-24, commit 8786b79 (58 tools, instructions 26 tokens: a one-line list of servers)"
TARGETS = {"core": 5_000, "full": 12_000}
RUN = "bench-tools"


async def _measure(core: Any, notes: Path) -> dict[str, Any]:
    from aisac_core.memory import count_tokens
    from aisac_servers.serving.suite import SERVERS, build
    from aisac_servers.serving.tooldoc import payload_text

    lists: dict[str, dict[str, Any]] = {}
    profiles = ("core", "full", "all", *[n for n in ("rag", "memory", "lit", "data", "roles", "trace") if n in SERVERS])
    for profile in profiles:
        async with Client(build(app=core, lifespan=False, tools=profile)) as c:
            tools = (await c.list_tools_mcp()).tools
            text = payload_text(tools)
            instr = c.instructions or ""
        n_tok, n_instr = count_tokens(core.embedder, [text, instr])
        lists[profile] = {
            "tools": len(tools),
            "bytes": len(text.encode()),
            "tokens": n_tok,
            "instructions_tokens": n_instr,
        }
    results: dict[str, int] = {}
    meta = {"aisac/run_id": RUN}
    async with Client(build(app=core, lifespan=False)) as c:
        r = await c.call_tool(
            "rag_search", {"query": "capacity fade of the cathode at high temperature", "k": 10}, meta=meta
        )
        results["rag_search k=10"] = len(json.dumps(r.structured_content, ensure_ascii=False))
        sid = (await c.call_tool("memory_start_session", {}, meta=meta)).structured_content["session_id"]
        for i in range(5):
            await c.call_tool(
                "memory_add_turn",
                {"session_id": sid, "role": "user", "content": f"What limits the flame speed of methane, case {i}?"},
                meta=meta,
            )
            await c.call_tool(
                "memory_add_turn",
                {
                    "session_id": sid,
                    "role": "assistant",
                    "content": f"Case {i}: the equivalence ratio and the preheat temperature, per the notes.",
                },
                meta=meta,
            )
        r = await c.call_tool("memory_recall", {"session_id": sid, "query": "methane flame speed"}, meta=meta)
        results["memory_recall"] = len(json.dumps(r.structured_content, ensure_ascii=False))
        r = await c.call_tool("trace_get_run", {"run_id": RUN})
        results["trace_get_run"] = len(json.dumps(r.structured_content, ensure_ascii=False))
    return {"lists": lists, "results": results}


def run(ctx: Context) -> dict[str, Any]:
    """Measure and print the tables; returns the part's result (``status``, ``summary``, figures)."""

    t0 = time.perf_counter()
    with temp_dir(ctx, "tools") as tmp:
        notes = example_notes(tmp)
        core = make_core(tmp / "store")
        core.settings.warm = False
        try:
            core.rag.indexer.run([notes])
            out = anyio.run(_measure, core, notes)
        finally:
            core.close()
    rows = []
    for name, m in out["lists"].items():
        before = BEFORE_LIST.get(name)
        rows.append(
            (
                name,
                m["tools"],
                f"{before[0]:,}" if before else "-",
                f"{before[1]:,}" if before else "-",
                f"{m['bytes']:,}",
                f"{m['tokens']:,}",
                m["instructions_tokens"],
                TARGETS.get(name, "-"),
                target_cell(m["tokens"] <= TARGETS[name]) if name in TARGETS else "-",
            )
        )
    table(
        "tools/list per profile and server (tokens: MiniLM WordPiece)",
        ["profile", "tools", "bytes before", "tokens before", "bytes", "tokens", "instr. tokens", "target", "met"],
        rows,
        caption=BEFORE_NOTE,
    )
    table(
        "result sizes (characters of the structured content)",
        ["result", "before", "now"],
        [(k, f"{BEFORE_RESULTS.get(k) or 0:,}", f"{v:,}") for k, v in out["results"].items()],
    )
    summary = [
        {
            "metric": f"tools/list tokens, {p}",
            "value": out["lists"][p]["tokens"],
            "target": TARGETS[p],
            "met": out["lists"][p]["tokens"] <= TARGETS[p],
        }
        for p in TARGETS
    ]
    summary.append(
        {
            "metric": "instructions tokens, full",
            "value": out["lists"]["full"]["instructions_tokens"],
            "target": 300,
            "met": out["lists"]["full"]["instructions_tokens"] <= 300,
        }
    )
    return {
        "status": "ok",
        "summary": summary,
        "seconds": round(time.perf_counter() - t0, 1),
        **out,
        "before": {"lists": BEFORE_LIST, "results": BEFORE_RESULTS, "note": BEFORE_NOTE},
    }
