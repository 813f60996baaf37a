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


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_errors_carry_the_specifications_codes(fast_core, mode):
    """Unknown tool: -32602 (a protocol error, not a tool result); a tool's bad arguments: a tool error (MCP
    2025-11-25: input validation errors are tool execution errors); resource not found: -32002 up to 2025-11-25,
    -32602 at 2026-07-28 (never -32603); a prompt's missing argument: -32602 naming the prompt as listed."""
    from mcp.shared.exceptions import MCPError

    async with Client(_suite(fast_core), mode=mode) as c:
        with pytest.raises(MCPError) as err:
            await c.call_tool_mcp("nope_tool", {})
        assert err.value.code == -32602 and "nope_tool" in err.value.message
        bad = await c.call_tool_mcp("rag_search", {"query": 5})
        assert bad.is_error
        for uri in ("aisac://rag/document/nope", "aisac://nothing/x"):
            with pytest.raises(MCPError) as err:
                await c.read_resource_mcp(uri)
            assert err.value.code == (-32002 if mode == "legacy" else -32602), (uri, err.value.code)
        with pytest.raises(MCPError) as err:
            await c.get_prompt_mcp("roles_router", {})
        assert err.value.code == -32602 and "'roles_router'" in err.value.message and "task" in err.value.message


async def test_server_metadata(fast_core):
    """serverInfo names aisac and its version (both eras); resource template names are unique; the deprecated
    ``logging`` capability is not declared at 2026-07-28; ``tools_call`` carries the most cautious hints."""
    from aisac_core.owner import aisac_version

    async with Client(_suite(fast_core, "full"), mode="legacy") as c:
        info = c.initialize_result.server_info
        assert (info.name, info.version) == ("aisac", aisac_version())
        names = [t.name for t in await c.list_resource_templates()]
        assert len(names) == len(set(names)), names
        tools = {t.name: t for t in (await c.list_tools_mcp()).tools}
        ann = tools["tools_call"].annotations
        assert ann.read_only_hint is not True and ann.destructive_hint is not False and ann.open_world_hint is not False
        assert ann.idempotent_hint is not True
    async with Client(_suite(fast_core)) as c:
        r = await c.call_tool_mcp("memory_list_sessions", {})
        meta = (r.meta or {}).get("io.modelcontextprotocol/serverInfo")
        assert meta is None or meta["version"] == aisac_version(), meta
        assert c.protocol_version == "2026-07-28"
        caps = c.server_capabilities
        assert caps is not None and caps.tools is not None and caps.logging is None, caps


PROFILES = ["core", "full", "all", "rag", "memory", "lit", "data", "roles", "trace", "core,lit"]


def _texts(tool) -> list[str]:  # noqa: ANN001
    """A listed tool's description and its arguments' descriptions."""
    out = [tool.description or ""]
    for prop in ((tool.input_schema or {}).get("properties") or {}).values():
        if isinstance(prop, dict):
            out.append(str(prop.get("description", "")))
    return out


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_profile_names_only_tools_it_offers(fast_core, profile):
    """The descriptions and the instructions a host gets name only tools it can call: listed ones (``full``: also
    the ones tools_search finds, which it calls by name)."""
    import re

    from aisac_core.tool_profiles import resolve

    async with Client(_suite(fast_core, "all", catalog=True)) as c:
        every = {t.name for t in (await c.list_tools_mcp()).tools}
    async with Client(_suite(fast_core, profile)) as c:
        tools = (await c.list_tools_mcp()).tools
        texts = {t.name: " ".join(_texts(t)) for t in tools}
        texts["(instructions)"] = c.instructions or ""
    pr = resolve(profile, ["rag", "memory", "lit", "data", "roles", "trace"])
    offered = {t.name for t in tools} | ({n for n in every if pr.allows(n)} if pr.search else set())
    pattern = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, every), key=len, reverse=True)) + r")\b")
    wrong = {where: sorted(set(pattern.findall(text)) - offered) for where, text in texts.items()}
    wrong = {k: v for k, v in wrong.items() if v}
    assert not wrong, f"{profile}: texts name tools the profile does not offer: {wrong}"
