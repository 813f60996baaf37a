"""The live trace dashboard on the MCP server's HTTP transport: ``aisac serve --transport http`` serves it under
``/dashboard`` next to ``/mcp``. Pages and handlers are :mod:`aisac_core.trace.dashboard`; this module only
registers them as custom routes of a FastMCP server (:func:`mount_dashboard`), or, on a proxy to the store's owner,
forwards them to the owner's dashboard (:func:`forward_dashboard`)."""

from __future__ import annotations

import posixpath
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from fastmcp import FastMCP

if TYPE_CHECKING:
    from aisac_core.context import AppContext
    from aisac_core.owner import OwnerInfo

#: response headers not copied from the owner's answer (hop-by-hop; the proxy's server sets its own)
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "server",
        "date",
        "proxy-authenticate",
        "proxy-authorization",
    }
)
#: request headers the proxy passes on to the owner (the token is replaced by the owner's own)
_PASS = (
    "accept",
    "accept-encoding",
    "accept-language",
    "cache-control",
    "last-event-id",
    "if-none-match",
    "if-modified-since",
    "hx-request",
    "hx-current-url",
    "hx-target",
    "hx-trigger",
)


def mount_dashboard(mcp: FastMCP, prefix: str = "/dashboard", *, app: AppContext) -> None:
    """Register the dashboard of ``app``'s store on ``mcp`` under ``prefix`` (served by its HTTP transport only;
    stdio ignores custom routes). The server owns the store, so evidence is verified fully (file and passage)."""
    from aisac_core.trace.dashboard import Dashboard

    d = Dashboard(app.trace, prefix)
    for path, handler in d.routes():
        full = d.prefix + path if path != "/" else d.prefix
        mcp.custom_route(full, methods=["GET"], include_in_schema=False)(handler)
        if path == "/":
            mcp.custom_route(d.prefix + "/", methods=["GET"], include_in_schema=False)(handler)


def forward_path(path: str, prefix: str = "/dashboard") -> str | None:
    """The path a proxy may forward to the owner for the request path ``path`` (as the server decoded it), or None
    when it must be refused: the path is percent-decoded until it no longer changes (``%252e`` -> ``%2e`` -> ``.``),
    and refused when it then holds a ``.`` or ``..`` segment, a backslash or a NUL, or does not lie under ``prefix``.
    The result is re-quoted, so the owner sees exactly the path checked here (``/dashboard/%2e%2e/mcp`` would
    otherwise reach the owner's ``/mcp`` with the owner's token: URL libraries remove dot segments)."""
    decoded = path
    for _ in range(5):
        nxt = unquote(decoded)
        if nxt == decoded:
            break
        decoded = nxt
    else:  # still changing after five rounds: no real page is encoded like that
        return None
    if any(seg in (".", "..") for seg in decoded.split("/")) or "\\" in decoded or "\x00" in decoded:
        return None
    if decoded != prefix and not decoded.startswith(prefix + "/"):
        return None
    return quote(posixpath.normpath(decoded) + ("/" if decoded.endswith("/") and decoded != "/" else ""), safe="/")


def forward_dashboard(mcp: FastMCP, owner: Callable[[], Awaitable[OwnerInfo]], prefix: str = "/dashboard") -> None:
    """Serve the owner's dashboard on ``mcp`` (a proxy's HTTP server): every GET under ``prefix`` is sent to the
    same path and query of the owner (``owner()``: the current :class:`~aisac_core.owner.OwnerInfo`; its Unix
    socket or URL, and bearer token) and its answer streamed back unchanged (status, body, content headers), so pages, fragments and
    the server-sent-event streams work as on the owner. The caller's own token was checked by the proxy's
    :class:`~aisac_core.security.HttpGuard`. An unreachable owner answers ``502`` with the reason as text."""
    import httpx
    from starlette.background import BackgroundTask
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response, StreamingResponse

    from ..base.proxying import owner_http_client

    client: dict[str, httpx.AsyncClient] = {}  # per owner address (its Unix socket, or TCP)

    async def handler(request: Request) -> Response:
        path = forward_path(request.url.path, prefix)
        if path is None:
            return PlainTextResponse(
                "refused: the path holds '.' or '..' segments (also percent-encoded), a backslash or an encoded "
                f"slash, or leaves {prefix}; only dashboard pages are forwarded to the store's owner",
                status_code=400,
            )
        try:
            info = await owner()
            http = client.get(info.address)
            if http is None:
                http = client[info.address] = owner_http_client(info, timeout=httpx.Timeout(None, connect=10.0))
            base = info.url.rsplit("/mcp", 1)[0]
            url = base + path + (f"?{request.url.query}" if request.url.query else "")
            headers: dict[str, Any] = {k: v for k, v in request.headers.items() if k in _PASS}
            if info.token:
                headers["authorization"] = f"Bearer {info.token}"
            upstream = await http.send(http.build_request("GET", url, headers=headers), stream=True)
        except Exception as exc:  # noqa: BLE001 - the owner cannot be reached or started: say so
            return PlainTextResponse(f"the store's owner process cannot be reached: {exc}", status_code=502)
        out = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
        return StreamingResponse(
            upstream.aiter_raw(),
            status_code=upstream.status_code,
            headers=out,
            background=BackgroundTask(upstream.aclose),
        )

    mcp.custom_route(prefix, methods=["GET"], include_in_schema=False)(handler)
    mcp.custom_route(prefix + "/{rest:path}", methods=["GET"], include_in_schema=False)(handler)
