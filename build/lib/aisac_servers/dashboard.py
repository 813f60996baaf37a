"""The live trace dashboard on the MCP server's HTTP transport: ``aisac serve --transport http`` serves it under
``/dashboard`` next to ``/mcp``. Pages and handlers are :mod:`aisac_core.trace.dashboard`; this module only
registers them as custom routes of a FastMCP server."""

from __future__ import annotations

from fastmcp import FastMCP

from aisac_core.context import AppContext
from aisac_core.trace.dashboard import Dashboard


def mount_dashboard(mcp: FastMCP, prefix: str = "/dashboard", *, app: AppContext) -> None:
    """Register the dashboard of ``app``'s store on ``mcp`` under ``prefix`` (served by its HTTP transport only;
    stdio ignores custom routes). The server owns the store, so evidence is verified fully (file and passage)."""
    d = Dashboard(app, prefix)
    for path, handler in d.routes():
        full = d.prefix + path if path != "/" else d.prefix
        mcp.custom_route(full, methods=["GET"], include_in_schema=False)(handler)
        if path == "/":
            mcp.custom_route(d.prefix + "/", methods=["GET"], include_in_schema=False)(handler)
