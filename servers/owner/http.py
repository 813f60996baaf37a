"""The HTTP side of a proxy to the store's owner: ``aisac serve --transport http`` while another process owns the
store. A FastMCP server forwarding every MCP request to the owner (fastmcp's proxy), plus the owner's ``/dashboard``
(:func:`aisac_servers.serving.dashboard.forward_dashboard`). Loaded only in HTTP mode: the stdio proxy is
:mod:`aisac_servers.owner.relay`, which never imports fastmcp.
"""

from __future__ import annotations

import inspect
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import anyio
import mcp_types as mt
from fastmcp import Client
from fastmcp.exceptions import NotFoundError, ToolError
from fastmcp.prompts.base import Prompt
from fastmcp.resources.base import Resource, ResourceResult
from fastmcp.resources.template import ResourceTemplate
from fastmcp.server import create_proxy
from fastmcp.server.dependencies import get_http_headers
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.server.providers.proxy import ClientFactoryT, FastMCPProxy
from fastmcp.tools.base import Tool, ToolResult

from aisac_core.owner import OwnerInfo, ensure_owner
from aisac_core.settings import Settings
from aisac_core.tool_profiles import ToolProfile, of_servers

from ..base.proxying import CLIENT_HEADER, OWNER_STOPPED, owner_mcp_transport, owner_stopped
from ..serving.dashboard import forward_dashboard

log = logging.getLogger("aisac.owner")


class NamespaceFilter(Middleware):
    """Shows and allows only the components of the given namespaces (``rag`` -> ``rag_*`` tools and prompts,
    ``aisac://rag/...`` resources), or of a tool profile (``profile``, :mod:`aisac_core.tool_profiles`); a call to
    another tool is a tool error, a read of another resource not found."""

    def __init__(self, names: list[str], profile: ToolProfile | None = None) -> None:
        self.profile = profile if profile is not None else of_servers(names)

    def _ok_uri(self, uri: str) -> bool:
        return self.profile.allows_uri(uri)

    async def on_list_tools(
        self, context: MiddlewareContext[mt.ListToolsRequest], call_next: CallNext[mt.ListToolsRequest, Sequence[Tool]]
    ) -> Sequence[Tool]:
        return [t for t in await call_next(context) if self.profile.lists(t.name)]

    async def on_list_prompts(
        self,
        context: MiddlewareContext[mt.ListPromptsRequest],
        call_next: CallNext[mt.ListPromptsRequest, Sequence[Prompt]],
    ) -> Sequence[Prompt]:
        return [p for p in await call_next(context) if self.profile.allows_prompt(p.name)]

    async def on_list_resources(
        self,
        context: MiddlewareContext[mt.ListResourcesRequest],
        call_next: CallNext[mt.ListResourcesRequest, Sequence[Resource]],
    ) -> Sequence[Resource]:
        return [r for r in await call_next(context) if self._ok_uri(str(r.uri))]

    async def on_list_resource_templates(
        self,
        context: MiddlewareContext[mt.ListResourceTemplatesRequest],
        call_next: CallNext[mt.ListResourceTemplatesRequest, Sequence[ResourceTemplate]],
    ) -> Sequence[ResourceTemplate]:
        return [r for r in await call_next(context) if self._ok_uri(str(r.uri_template))]

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        if not self.profile.allows(context.message.name):
            raise ToolError(
                f"unknown tool {context.message.name!r}: this server exposes the tool profile "
                f"{self.profile.value!r} (aisac serve --tools)"
            )
        return await call_next(context)

    async def on_read_resource(
        self,
        context: MiddlewareContext[mt.ReadResourceRequestParams],
        call_next: CallNext[mt.ReadResourceRequestParams, ResourceResult],
    ) -> ResourceResult:
        if not self._ok_uri(str(context.message.uri)):
            raise NotFoundError(f"unknown resource {context.message.uri}")
        return await call_next(context)


def owner_stopped_error(exc: BaseException) -> ToolError | None:
    """The :class:`ToolError` a proxy's caller gets when ``exc`` (what forwarding a call raised) means the
    connection to the owner broke mid-call - the owner process died (:func:`aisac_servers.base.proxying.owner_stopped`):
    :data:`~aisac_servers.base.proxying.OWNER_STOPPED`, saying the call may or may not have been applied and that the next
    call restarts the owner. None for any other error (timeouts, tool errors of the owner), which passes unchanged."""
    return ToolError(OWNER_STOPPED) if owner_stopped(exc) else None


class OwnerStopped(Middleware):
    """On a proxy: a call cut because the owner process died becomes
    :data:`~aisac_servers.base.proxying.OWNER_STOPPED` (instead of an empty or transport-level message); every other result
    or error passes unchanged."""

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        try:
            return await call_next(context)
        except Exception as exc:
            mapped = owner_stopped_error(exc)
            if mapped is None:
                raise
            log.warning(
                "call %s cut: the owner process stopped (%s)", getattr(context.message, "name", "?"), type(exc).__name__
            )
            raise mapped from exc


def http_proxy(
    settings: Settings, names: list[str] | None = None, *, profile: ToolProfile | None = None
) -> FastMCPProxy:
    """A FastMCP server forwarding every request to the store's owner (started on demand), for the HTTP transport.

    Each request asks :func:`~aisac_core.owner.ensure_owner` for the current owner (a few file operations), so the
    proxy survives the daemon's idle exit or death. Each front MCP session reaches the owner with its own
    ``X-Aisac-Client`` id (so its calls form trace runs of their own). ``names`` restricts the exposed tools,
    resources and prompts to those namespaces, ``profile`` to a tool profile. The owner's ``/dashboard`` is served under the same path. A call cut
    because the owner died fails with ``OWNER_STOPPED``; a request fails with the owner's error
    (:class:`~aisac_core.owner.OwnerError`) when no owner can be reached. Raises nothing at build time."""
    factories: OrderedDict[tuple[str, str | None, str], ClientFactoryT] = OrderedDict()

    async def client_factory() -> Client[Any]:
        info = await anyio.to_thread.run_sync(ensure_owner, settings)
        front = get_http_headers(include={"mcp-session-id"})
        client = front.get(CLIENT_HEADER.lower()) or front.get("mcp-session-id") or "http-proxy"
        key = (info.address, info.token, f"http-proxy:{client}")
        if key not in factories:
            # fastmcp's own per-request client factory for this owner (a fresh session per request, the backend
            # speaking the front connection's protocol era)
            transport = owner_mcp_transport(info, headers={CLIENT_HEADER: key[2]})  # its Unix socket, else TCP
            factories[key] = create_proxy(transport).client_factory
            while len(factories) > 256:
                factories.popitem(last=False)
        factories.move_to_end(key)
        made = factories[key]()  # fastmcp's factory is a plain function; an async one is awaited here
        return await made if inspect.isawaitable(made) else made

    async def owner() -> OwnerInfo:
        return await anyio.to_thread.run_sync(ensure_owner, settings)

    proxy = FastMCPProxy(
        client_factory=client_factory,
        name="aisac",
        instructions="aisac: retrieval-grounded scientific assistance with provenance "
        "(proxy to the store's owner process).",
    )
    proxy.add_middleware(OwnerStopped())
    if names or profile is not None:
        proxy.add_middleware(NamespaceFilter(names or [], profile))
    forward_dashboard(proxy, owner)
    return proxy
