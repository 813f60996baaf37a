"""What the proxies to a store's owner share: the stdio relay (:mod:`aisac_servers.owner.relay`), the HTTP proxy
(:mod:`aisac_servers.owner.http`) and the daemon's module (:mod:`aisac_servers.owner.daemon`) all import it; it imports none
of them, and no MCP library at import time (the stdio relay must start fast).

- :data:`HOST_HEADER`: the header carrying a relay's per-host settings (roots, profile, roles LLM and mode);
- :data:`CLIENT_HEADER`: the header carrying a proxy's client id to the owner (the owner groups that client's calls
  into trace runs of their own);
- :data:`OWNER_STOPPED` and :func:`owner_stopped`: what a caller is told when the owner process died while serving
  its call, and whether an error means that (the HTTP proxy's tool error is
  :func:`aisac_servers.owner.http.owner_stopped_error`);
- :func:`owner_http_client` and :func:`owner_mcp_transport`: an ``httpx`` client and a fastmcp client transport
  that reach the owner where it listens (its Unix socket, else its loopback TCP URL) with its bearer token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx
    from fastmcp.client.transports import StreamableHttpTransport

    from aisac_core.owner import OwnerInfo

#: the header carrying a proxy's client id (one per stdio process, one per front MCP session over HTTP) to the owner
CLIENT_HEADER = "X-Aisac-Client"
#: the header carrying a relay's per-host settings (JSON ``{roots, tools, roles_llm, roles_mode}``,
#: :data:`aisac_core.settings.PER_HOST`) to the owner, which applies them to that request
#: (:class:`aisac_servers.serving.hosts.HostView`)
HOST_HEADER = "X-Aisac-Host"
#: seconds a request waits for the host's first ``roots/list`` answer before it goes on with ``AISAC_ROOTS``
ROOTS_WAIT_S = 10.0

#: what a caller is told when the owner process died while serving its call
OWNER_STOPPED = (
    "the aisac owner process stopped during the call (it crashed or was killed), so the call may or may "
    "not have been applied: check before repeating a change (e.g. list what it would have written). The "
    "next call restarts the owner process."
)
#: exception class names (anywhere in the chain or the class hierarchy) meaning the connection to the owner broke
#: mid-request: httpx's transport errors, anyio's closed streams, the OS's connection errors
CUT_CONNECTION = frozenset(
    {
        "RemoteProtocolError",
        "ReadError",
        "WriteError",
        "ConnectError",
        "NetworkError",
        "ClosedResourceError",
        "BrokenResourceError",
        "EndOfStream",
        "IncompleteRead",
        "ConnectionError",
        "ConnectionResetError",
        "ConnectionAbortedError",
        "BrokenPipeError",
    }
)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups among them (each once, at most 51)."""
    out: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is o for o in out) or len(out) > 50:
            continue
        out.append(e)
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return out


def owner_stopped(exc: BaseException) -> bool:
    """True when ``exc`` (what forwarding a call raised) means the connection to the owner broke mid-call - the
    owner process died; False for any other error (timeouts, tool errors of the owner)."""
    for e in _chain(exc):
        names = {k.__name__ for k in type(e).__mro__}
        if "TimeoutException" in names:
            return False
        if names & CUT_CONNECTION or (
            type(e).__name__ in ("McpError", "MCPError") and "connection closed" in str(e).lower()
        ):
            return True
    return False


def owner_http_client(info: OwnerInfo, **kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` (``kwargs``: its options, e.g. ``timeout``, ``limits``) whose connections go to the
    owner ``info``: over its Unix socket when it has one (``info.socket``; the request URLs stay ``info.url``'s,
    which give the path and the ``Host`` header), else over TCP. Requests still need the bearer token
    (``authorization`` header): the owner checks it on the socket too. Close it with ``aclose``."""
    import httpx  # loaded with the relay or the dashboard forwarder, which import it anyway

    limits = kwargs.pop("limits", httpx.Limits(max_keepalive_connections=8, keepalive_expiry=600))
    transport = httpx.AsyncHTTPTransport(uds=info.socket, limits=limits) if info.socket else None
    return httpx.AsyncClient(transport=transport, limits=limits, **kwargs)


def owner_mcp_transport(info: OwnerInfo, headers: dict[str, str] | None = None) -> StreamableHttpTransport:
    """A fastmcp streamable-HTTP client transport to the owner ``info`` (bearer token ``info.token``, extra
    ``headers``): over its Unix socket when it has one, else its TCP URL. Loads fastmcp (HTTP and CLI paths only)."""
    from fastmcp.client.transports import StreamableHttpTransport

    if not info.socket:
        return StreamableHttpTransport(info.url, auth=info.token, headers=headers)
    import httpx2  # the HTTP library of fastmcp's client transports

    path = info.socket

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
        **_: Any,  # follow_redirects: the owner never redirects
    ) -> httpx2.AsyncClient:
        # the MCP SDK's defaults (mcp.shared._httpx_utils.create_mcp_http_client): 30 s, 300 s to read a stream
        return httpx2.AsyncClient(
            headers=headers,
            auth=auth,
            timeout=timeout or httpx2.Timeout(30.0, read=300.0),
            transport=httpx2.AsyncHTTPTransport(uds=path),
        )

    return StreamableHttpTransport(info.url, auth=info.token, headers=headers, httpx_client_factory=factory)
