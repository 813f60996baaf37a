"""Input schemas for the transport's per-call header check, looked up instead of listed.

The MCP SDK (``mcp`` 2.x, streamable HTTP of the stateless protocol era) checks every ``tools/call`` carrying
arguments against its tool's input schema (``Mcp-Param-*`` headers, SEP-2243). It asks the low-level server's
``get_tool_input_schema(name)``; when a server sets none (fastmcp 4.1 does not), it runs a whole ``tools/list``
through the middleware instead - for aisac's suite, every mounted server's listing and the dereferencing of every
schema, about 80 % of the server CPU of a mixed call under load (docs/retrieval.md, "Serving under load").

:func:`install_schema_lookup` fills a name -> input schema table once, when the suite starts (its lifespan), from the
suite's own unfiltered listing with ``$ref`` inlined as the listing does
(:func:`~aisac_servers.shapes.results_schema.inline_refs`, the same inlining), and only then sets the lookup: before, and
if filling fails, the SDK keeps its listing. A tool absent from the table (none at start) gets None: the SDK skips
the header check, and dispatch answers an unknown tool as before. The MCP Python SDK's own high-level server does
the same (``MCPServer._tool_input_schema``: the tool's parameters, found before middleware runs).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastmcp import FastMCP

from ..shapes.results_schema import inline_refs

log = logging.getLogger("aisac.suite")


class InputSchemas:
    """The suite's tool input schemas by tool name (filled by :meth:`fill`); callable as the SDK's lookup."""

    def __init__(self) -> None:
        self.table: dict[str, Mapping[str, Any]] = {}

    def __call__(self, name: str) -> Mapping[str, Any] | None:
        """The input schema of tool ``name`` (JSON Schema, ``$ref`` inlined), or None for an unknown name."""
        return self.table.get(name)

    async def fill(self, server: FastMCP) -> None:
        """List ``server``'s tools once (no middleware: hidden tools included) and keep each input schema."""
        table: dict[str, Mapping[str, Any]] = {}
        for tool in await server.list_tools(run_middleware=False):
            table.setdefault(tool.name, inline_refs(tool.parameters))
        self.table = table


async def install_schema_lookup(server: FastMCP) -> None:
    """Give ``server``'s low-level MCP server a table lookup of tool input schemas (see the module docstring).
    Never raises: on any failure the SDK's own per-call listing stays in place (logged)."""
    low = getattr(server, "_mcp_server", None)
    if low is None or not hasattr(low, "get_tool_input_schema"):
        return
    schemas = InputSchemas()
    try:
        await schemas.fill(server)
    except Exception:  # noqa: BLE001 - an optimisation only: the SDK's listing still checks the headers
        log.exception("tool input schemas not tabled; the transport lists tools per call")
        return
    low.get_tool_input_schema = schemas
