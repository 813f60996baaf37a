"""The host's view at the protocol level: tasks negotiated per protocol version, the specification's error codes,
server metadata, capabilities per version, and profiles whose texts name only the tools they list. In-memory MCP
clients on the real suite (a fresh store)."""

from __future__ import annotations

import pytest
from fastmcp import Client

pytestmark = pytest.mark.anyio

LONG_TOOLS = {"rag_index", "lit_import", "data_code_run", "roles_run"}


def _suite(app, tools="all", **kw):  # noqa: ANN001, ANN202
    from aisac_servers.serving.suite import build

    return build(app=app, lifespan=False, tools=tools, **kw)


async def test_task_support_is_listed_only_where_the_version_has_tasks(fast_core):
    """2025-11-25 (handshake era): no ``execution.taskSupport`` and no ``tasks`` capability, the long tools answer in
    the foreground with a job to poll; 2026-07-28: the tasks extension decides per call (nothing per tool)."""
    async with Client(_suite(fast_core), mode="legacy") as c:
        assert c.initialize_result is not None and c.initialize_result.protocol_version == "2025-11-25"
        caps = c.initialize_result.capabilities.model_dump(exclude_none=True)
        tools = (await c.list_tools_mcp()).tools
        assert LONG_TOOLS <= {t.name for t in tools}
        with_tasks = [t.name for t in tools if t.execution is not None and t.execution.task_support is not None]
        assert with_tasks == [] and "tasks" not in caps, (with_tasks, caps)
        r = await c.call_tool("rag_job_status", {})  # the poll-style job tool is there
        assert not r.is_error
    async with Client(_suite(fast_core)) as c:
        tools = (await c.list_tools_mcp()).tools
        assert LONG_TOOLS <= {t.name for t in tools}
