"""What the proxies to a store's owner share: the stdio relay (:mod:`aisac_servers.owner.relay`), the HTTP proxy
(:mod:`aisac_servers.owner.http`) and the daemon's module (:mod:`aisac_servers.owner.daemon`) all import it; it imports none
of them, and no MCP library at import time (the stdio relay must start fast).

- :data:`HOST_HEADER`: the header carrying a relay's per-host settings (roots, profile, roles LLM and mode);
- :data:`CLIENT_HEADER`: the header carrying a proxy's client id to the owner (the owner groups that client's calls
  into trace runs of their own);
- :data:`OWNER_STOPPED` and :func:`owner_stopped`: what a caller is told when the owner process died while serving
  its call, and whether an error means that (the HTTP proxy's tool error is
  :func:`aisac_servers.owner.http.owner_stopped_error`).
"""

from __future__ import annotations

#: the header carrying a proxy's client id (one per stdio process, one per front MCP session over HTTP) to the owner
CLIENT_HEADER = "X-Aisac-Client"
#: the header carrying a relay's per-host settings (JSON ``{roots, tools, roles_llm, roles_mode}``,
#: :data:`aisac_core.settings.PER_HOST`) to the owner, which applies them to that request
#: (:class:`aisac_servers.serving.hosts.HostView`)
HOST_HEADER = "X-Aisac-Host"

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
