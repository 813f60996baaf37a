"""Per-call overhead of the suite over streamable HTTP (docs/retrieval.md, "Serving under load"): a real MCP
client drives the suite's ASGI app in process. The transport's per-call header check finds each tool's input
schema in the table the suite fills at start, instead of listing every tool on every call."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.server.middleware import Middleware


class _CountLists(Middleware):
    def __init__(self) -> None:
        self.lists = 0

    async def on_list_tools(self, context: Any, call_next: Any) -> Any:
        self.lists += 1
        return await call_next(context)


async def _tabled(suite: Any) -> Any:
    for _ in range(200):
        lookup = suite._mcp_server.get_tool_input_schema
        if lookup is not None:
            return lookup
        await asyncio.sleep(0.05)
    raise AssertionError("the input schema table was not installed")


@pytest.mark.anyio
async def test_tool_calls_over_http_do_not_list_tools(settings):
    from aisac_core.context import AppContext
    from aisac_servers.serving.suite import build

    app = AppContext(settings.model_copy(update={"warm": False}))  # the trace server needs no model
    suite = build(["trace"], app=app)
    counter = _CountLists()
    suite.add_middleware(counter)
    http = suite.http_app()

    def factory(**kw: Any) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=http), **kw)

    async with http.router.lifespan_context(http):
        lookup = await _tabled(suite)
        schema = lookup("trace_list_runs")
        assert {"since", "limit", "offset"} <= set(schema["properties"])
        assert "$defs" not in schema and lookup("no_such_tool") is None
        async with Client(StreamableHttpTransport("http://t/mcp", httpx_client_factory=factory)) as c:
            listed = {t.name: t.input_schema for t in await c.list_tools()}
            assert set(listed["trace_list_runs"]["properties"]) == set(schema["properties"])
            before = counter.lists
            for _ in range(3):
                runs = await c.call_tool("trace_list_runs", {"limit": 5})
                assert runs.structured_content is not None
                await c.call_tool("trace_stats", {"since": "2020-01-01"})
            assert counter.lists == before  # 6 calls, no listing (before: one whole tools/list per call)
            bad = await c.call_tool("trace_list_runs", {"limit": "many"}, raise_on_error=False)
            assert bad.is_error  # arguments are still validated against the tool's schema
            # every successful call left its trace event
            assert len((await c.call_tool("trace_list_runs", {"limit": 5})).structured_content["runs"]) >= 1
