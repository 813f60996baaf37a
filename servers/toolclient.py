"""The coordinator's bridge to the suite: an in-process MCP client over ``aisac_servers.suite.build()``.

This is the one module of ``aisac_core`` that talks MCP (fastmcp is imported lazily): the coordinator executes
plan steps by calling the suite's real tools, so every call passes the provenance middleware and becomes a trace
event, a child of the role step that made it (request ``_meta``: ``aisac/run_id`` and ``aisac/parent_id``).
"""

from __future__ import annotations

import json
from typing import Any

#: tools the planner never sees: the roles' own tools (a plan must not start another run), and tools that delete
#: stored work (also any tool whose MCP annotations declare ``destructiveHint: true``): a plan only gathers evidence
HIDDEN_PREFIXES = ("roles_",)
DESTRUCTIVE_TOOLS = frozenset({"rag_remove", "memory_delete_session", "trace_prune"})


def _hidden(tool: Any) -> bool:
    ann = getattr(tool, "annotations", None)
    return (tool.name.startswith(HIDDEN_PREFIXES) or tool.name in DESTRUCTIVE_TOOLS
            or bool(ann is not None and getattr(ann, "destructive_hint", None)))


class SuiteTools:
    """``async with SuiteTools() as suite``: the live capability list and tool calls of the suite.

    ``server``: a FastMCP server to use instead of the whole suite (tests, or a project's own suite).
    """

    def __init__(self, app: Any, server: Any = None) -> None:
        self.app = app
        self.server = server
        self.client: Any = None
        self._tools: list[dict[str, Any]] | None = None

    async def __aenter__(self) -> "SuiteTools":
        from fastmcp import Client

        if self.server is None:
            from aisac_servers.suite import build

            self.server = build(app=self.app, lifespan=False)  # borrows the running app; does not close it
        self.client = Client(self.server)
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.client.__aexit__(*exc)

    async def list_tools(self) -> list[dict[str, Any]]:
        """``[{name, description, input_schema}]`` of every suite tool except the hidden ones (cached per client)."""
        if self._tools is None:
            tools = await self.client.list_tools()
            self._tools = [{"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
                           for t in tools if not _hidden(t)]
        return self._tools

    async def call(self, name: str, arguments: dict[str, Any], *, run_id: str,
                   parent_id: int | None) -> tuple[str, Any, str | None]:
        """Call tool ``name``; returns ``(status ok|tool_error, result (structured content, or parsed text), error
        message)``. Tool errors are returned, not raised."""
        meta = {"aisac/run_id": run_id}
        if parent_id is not None:
            meta["aisac/parent_id"] = str(parent_id)
        try:
            r = await self.client.call_tool(name, arguments, meta=meta, raise_on_error=False)
        except Exception as exc:  # protocol-level failure (unknown tool, bad arguments rejected before the tool)
            return "tool_error", None, f"{type(exc).__name__}: {exc}"
        texts = [getattr(c, "text", "") for c in (r.content or [])]
        if r.is_error:
            return "tool_error", None, " ".join(texts)[:2000] or "tool error"
        if r.structured_content is not None:
            sc = r.structured_content
            return "ok", sc.get("result", sc) if isinstance(sc, dict) and set(sc) == {"result"} else sc, None
        joined = "\n".join(texts)
        try:
            return "ok", json.loads(joined), None
        except ValueError:
            return "ok", joined, None


def tools_of(server: Any) -> list[dict[str, Any]]:  # pragma: no cover - convenience for scripts
    """The capability list of ``server`` (sync wrapper)."""
    import anyio

    async def go() -> list[dict[str, Any]]:
        async with SuiteTools(server) as s:
            return await s.list_tools()

    return anyio.run(go)
