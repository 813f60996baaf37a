"""``%`` and ``_`` in a fact filter are literal characters, not SQL wildcards (issue 30).

The red team's ``memory_query_facts(object='%')`` matched every fact (the filter became ``LIKE '%%%'``). Replayed
through the real suite's MCP client on a real SQLite store.
"""

from __future__ import annotations

import pytest
from conftest import make_settings
from fastmcp import Client

pytestmark = pytest.mark.anyio


async def test_percent_and_underscore_in_fact_filters_match_only_themselves(tmp_path, models_dir, shared_embedder):
    from aisac_core.context import AppContext
    from aisac_servers.serving.suite import build

    core = AppContext(make_settings(tmp_path / "store", models_dir, warm=False), embedder=shared_embedder)
    try:
        async with Client(build(["memory"], app=core, lifespan=False)) as c:
            for subj, obj in (("yield", "42 %"), ("secret", "hunter2"), ("file", "run_1.csv"), ("other", "runX1")):
                await c.call_tool("memory_record_fact", {"subject": subj, "predicate": "value", "object": obj})

            async def objects(pattern: str) -> list[str]:
                res = await c.call_tool("memory_query_facts", {"object": pattern})
                return sorted(f["object"] for f in res.structured_content["facts"])

            assert await objects("%") == ["42 %"]
            assert await objects("_") == ["run_1.csv"]
            assert await objects("run_1") == ["run_1.csv"]  # '_' does not match the X of runX1
            assert await objects("%%") == [] and await objects("\\") == []
            assert await objects("RUN") == ["runX1", "run_1.csv"]  # still a case-insensitive substring
            sid = (await c.call_tool("memory_start_session", {"title": "t"})).structured_content["session_id"]
            await c.call_tool("memory_add_turn", {"session_id": sid, "role": "user", "content": "plain words"})
            for query, found in (("plai_", False), ("plain", True)):  # the keyword search's LIKE escapes too
                res = (await c.call_tool("memory_search", {"query": query, "mode": "keyword"})).structured_content
                assert bool(res["hits"]) is found, (query, res)
    finally:
        core.close()
