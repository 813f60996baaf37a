"""Serving a store's owner: the daemon's HTTP server, user-started HTTP servers, and the proxies to the owner.

:mod:`aisac_core.owner` elects one owner process per data dir (locks, ``owner.json``, starting and stopping the
daemon). This module is the MCP side of it:

- :func:`serve_http`: serve a FastMCP server over streamable HTTP behind :class:`~aisac_core.security.HttpGuard`
  (bearer token, size limit); as the owner it also writes ``owner.json`` and, for the daemon, idles out;
- :func:`build_proxy`: a FastMCP server forwarding every request to the store's current owner (started on demand);
- :func:`run_daemon`: the owner daemon itself, ``python -m aisac_servers.owner daemon`` (started by
  :func:`aisac_core.owner.ensure_owner`). See docs/processes.md.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from datetime import datetime, timezone
from typing import Any

import anyio
from fastmcp import FastMCP
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import NotFoundError, ToolError
from fastmcp.server import create_proxy
from fastmcp.server.middleware import Middleware
from fastmcp.server.providers.proxy import FastMCPProxy

from aisac_core.context import AppContext
from aisac_core.owner import (
    LOCK_FILE,
    OWNER_FILE,
    START_LOCK_FILE,
    OwnerInfo,
    acquire_lock,
    aisac_version,
    bind_socket,
    connect_host,
    ensure_owner,
    read_owner_file,
    remove_owner_file,
    write_owner_file,
)
from aisac_core.security import Activity, HttpGuard, new_token
from aisac_core.settings import Settings

log = logging.getLogger("aisac.owner")


class NamespaceFilter(Middleware):
    """Shows and allows only the components of the given namespaces (``rag`` -> ``rag_*`` tools and prompts,
    ``aisac://rag/...`` resources); a call to another tool is a tool error, a read of another resource not found."""

    def __init__(self, names: list[str]) -> None:
        self.prefixes = tuple(f"{n}_" for n in names)
        self.uri_prefixes = tuple(f"aisac://{n}/" for n in names)

    def _ok_uri(self, uri: str) -> bool:
        return not uri.startswith("aisac://") or uri.startswith(self.uri_prefixes)

    async def on_list_tools(self, context, call_next):  # noqa: ANN001, ANN201
        return [t for t in await call_next(context) if t.name.startswith(self.prefixes)]

    async def on_list_prompts(self, context, call_next):  # noqa: ANN001, ANN201
        return [p for p in await call_next(context) if p.name.startswith(self.prefixes)]

    async def on_list_resources(self, context, call_next):  # noqa: ANN001, ANN201
        return [r for r in await call_next(context) if self._ok_uri(str(r.uri))]

    async def on_list_resource_templates(self, context, call_next):  # noqa: ANN001, ANN201
        return [r for r in await call_next(context) if self._ok_uri(str(r.uri_template))]

    async def on_call_tool(self, context, call_next):  # noqa: ANN001, ANN201
        if not context.message.name.startswith(self.prefixes):
            raise ToolError(f"unknown tool {context.message.name!r}: this server exposes only "
                            f"{', '.join(p + '*' for p in self.prefixes)}")
        return await call_next(context)

    async def on_read_resource(self, context, call_next):  # noqa: ANN001, ANN201
        if not self._ok_uri(str(context.message.uri)):
            raise NotFoundError(f"unknown resource {context.message.uri}")
        return await call_next(context)


#: what a caller is told when the owner process died while serving its call
OWNER_STOPPED = ("the aisac owner process stopped during the call (it crashed or was killed), so the call may or may "
                 "not have been applied: check before repeating a change (e.g. list what it would have written). The "
                 "next call restarts the owner process.")
#: exception class names (anywhere in the chain or the class hierarchy) meaning the connection to the owner broke
#: mid-request: httpx's transport errors, anyio's closed streams, the OS's connection errors
_CUT_CONNECTION = frozenset({"RemoteProtocolError", "ReadError", "WriteError", "ConnectError", "NetworkError",
                             "ClosedResourceError", "BrokenResourceError", "EndOfStream", "IncompleteRead",
                             "ConnectionError", "ConnectionResetError", "ConnectionAbortedError", "BrokenPipeError"})


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups among them (each once)."""
    out: list[BaseException] = []
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is o for o in out) or len(out) > 50:
            continue
        out.append(e)
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]  # type: ignore[list-item]
    return out


def owner_stopped_error(exc: BaseException) -> ToolError | None:
    """The :class:`ToolError` a proxy's caller gets when ``exc`` (what forwarding a call raised) means the
    connection to the owner broke mid-call - the owner process died: :data:`OWNER_STOPPED`, saying the call may or
    may not have been applied and that the next call restarts the owner. None for any other error (timeouts, tool
    errors of the owner), which passes unchanged."""
    for e in _chain(exc):
        names = {k.__name__ for k in type(e).__mro__}
        if "TimeoutException" in names:
            return None
        if names & _CUT_CONNECTION or (type(e).__name__ in ("McpError", "MCPError")
                                       and "connection closed" in str(e).lower()):
            return ToolError(OWNER_STOPPED)
    return None


class OwnerStopped(Middleware):
    """On a proxy: a call cut because the owner process died becomes :data:`OWNER_STOPPED` (instead of an empty or
    transport-level message); every other result or error passes unchanged."""

    async def on_call_tool(self, context, call_next):  # noqa: ANN001, ANN201
        try:
            return await call_next(context)
        except Exception as exc:
            mapped = owner_stopped_error(exc)
            if mapped is None:
                raise
            log.warning("call %s cut: the owner process stopped (%s)", getattr(context.message, "name", "?"),
                        type(exc).__name__)
            raise mapped from exc


def build_proxy(settings: Settings, names: list[str] | None = None) -> FastMCPProxy:
    """A FastMCP server that forwards every request to the store's owner (started on demand).

    Each request asks :func:`~aisac_core.owner.ensure_owner` for the current owner (a few file operations), so a
    proxy survives the daemon's idle exit or death: the next request starts a new one. ``names`` restricts the
    exposed tools, resources and prompts to those namespaces (``aisac serve rag``). A call cut because the owner
    died mid-call fails with :data:`OWNER_STOPPED` (:class:`OwnerStopped`). Raises nothing at build time; a request
    fails with the owner's error (:class:`~aisac_core.owner.OwnerError`) when no owner can be reached."""
    state: dict[str, Any] = {"key": None, "factory": None}

    async def client_factory():  # noqa: ANN202
        info = await anyio.to_thread.run_sync(ensure_owner, settings)
        key = (info.url, info.token)
        if state["key"] != key:
            # fastmcp's own per-request client factory for this owner (a fresh session per request, the backend
            # speaking the front connection's protocol era)
            state["factory"] = create_proxy(StreamableHttpTransport(info.url, auth=info.token)).client_factory
            state["key"] = key
        return state["factory"]()

    proxy = FastMCPProxy(client_factory=client_factory, name="aisac",
                         instructions="aisac: retrieval-grounded scientific assistance with provenance "
                                      "(proxy to the store's owner process).")
    proxy.add_middleware(OwnerStopped())
    if names:
        proxy.add_middleware(NamespaceFilter(names))
    return proxy


def _jobs_pending(app: AppContext | None) -> bool:
    """True while an indexing job is queued or running in this store."""
    if app is None or app.opened("jobs") is None:
        return False
    try:
        # loaded here: only the daemon needs the SQL layer for this, a proxy never does
        from sqlmodel import Session, select

        from aisac_core.store.tables import Job

        with Session(app.engine) as s:
            return s.exec(select(Job.job_id).where(Job.status.in_(["queued", "running"])).limit(1)).first() is not None
    except Exception:  # a broken store must not keep the daemon alive forever
        return False


def _idle_watch(settings: Settings, activity: Activity, idle_seconds: float, stop: threading.Event,
                app: AppContext | None = None) -> None:
    """Daemon thread: once idle for ``idle_seconds`` (> 0; no request in flight, no job pending), take the start
    lock (no starter can pick this owner any more), remove ``owner.json`` and stop the server with SIGTERM. Also
    stops the daemon when its ``owner.json`` disappears (the data dir was deleted, e.g. a temporary store)."""
    data_dir = settings.data_dir
    period = max(0.2, min(5.0, idle_seconds / 4)) if idle_seconds > 0 else 5.0
    while not stop.wait(period):
        mine = read_owner_file(data_dir)
        if mine is None or mine.pid != os.getpid():  # the store (or our owner.json) was deleted: nothing to own
            log.warning("%s no longer names this process as its owner: shutting down", data_dir / OWNER_FILE)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if idle_seconds <= 0 or activity.idle_for() < idle_seconds or _jobs_pending(app):
            continue
        fd = acquire_lock(data_dir / START_LOCK_FILE, 5.0)
        if fd is None:
            continue
        if activity.idle_for() < idle_seconds:  # a request came in meanwhile
            os.close(fd)
            continue
        log.warning("owner of %s idle for %.0f s: shutting down", data_dir, activity.idle_for())
        remove_owner_file(data_dir, os.getpid())
        # keep fd (the start lock) until the process exits: starters wait, then start a fresh owner
        os.kill(os.getpid(), signal.SIGTERM)
        return


def serve_http(settings: Settings, mcp: FastMCP, *, host: str, port: int, token: str | None,
               register_fd: int | None = None, kind: str = "http", idle_seconds: float = 0.0,
               sock: socket.socket | None = None, app: AppContext | None = None) -> None:
    """Serve ``mcp`` over streamable HTTP behind :class:`~aisac_core.security.HttpGuard` (token, size limit).

    With ``register_fd`` (this process holds ``owner.lock``) the server also writes ``owner.json`` once it listens
    and removes it when it stops; with ``kind="daemon"`` and ``idle_seconds`` > 0 it stops after that long without
    requests (``app``: the served context, whose pending index jobs keep it alive). Blocks until the server stops
    (SIGTERM/SIGINT or idle). Raises :class:`~aisac_core.owner.OwnerError` when ``host:port`` is taken."""
    from starlette.middleware import Middleware as AsgiMiddleware

    sock = sock or bind_socket(host, port)
    real_port = sock.getsockname()[1]
    url = f"http://{connect_host(host)}:{real_port}/mcp"
    activity = Activity()
    stop = threading.Event()
    if register_fd is not None:
        write_owner_file(settings.data_dir, OwnerInfo(
            pid=os.getpid(), url=url, token=token, version=aisac_version(), data_dir=str(settings.data_dir),
            started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), kind=kind))
        if kind == "daemon":
            threading.Thread(target=_idle_watch, args=(settings, activity, idle_seconds, stop, app),
                             name="aisac-owner-idle", daemon=True).start()
    log.info("serving %s on %s (%s)", settings.data_dir, url, kind)
    # uvicorn turns SIGTERM into a graceful shutdown, then re-raises it once it has stopped: with the default
    # handler that would kill the process before the suite's lifespan closes the store. Ignore that re-raise.
    previous = signal.signal(signal.SIGTERM, lambda *_: None) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        # host_origin_protection "auto": a loopback server refuses foreign Host/Origin headers (DNS rebinding)
        mcp.run(transport="http", host=host.strip("[]"), port=real_port, sockets=[sock], show_banner=False,
                host_origin_protection="auto",
                middleware=[AsgiMiddleware(HttpGuard, token=token, max_bytes=settings.max_request_bytes,
                                           activity=activity)],
                uvicorn_config={"timeout_graceful_shutdown": 10, "log_level": "warning"})
    finally:
        stop.set()
        if register_fd is not None:
            remove_owner_file(settings.data_dir, os.getpid())
        sock.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _daemon_suite(settings: Settings) -> tuple[FastMCP, AppContext]:
    """The suite the daemon serves and its context: the project's suite when ``AISAC_PROJECT`` names a project
    (the owner of a project's store), else the whole suite on ``settings``."""
    # loaded here, not at the top: a proxy (`aisac serve` over stdio) imports this module and must start without
    # loading the suite's servers
    from aisac_servers.project import serve_project
    from aisac_servers.suite import build

    project = os.environ.get("AISAC_PROJECT")
    if project:
        return serve_project(project, settings, store_dir=settings.data_dir)
    app = AppContext(settings)
    return build(app=app), app


def run_daemon() -> None:
    """Body of ``python -m aisac_servers.owner daemon``: take ``owner.lock``, serve the whole suite on a free
    loopback port with a fresh token, write ``owner.json``, idle out after ``owner_idle_seconds``. Exits with
    code 3 when another owner holds the lock."""
    logging.basicConfig(level=os.environ.get("AISAC_LOG_LEVEL", "WARNING"), stream=sys.stderr,
                        format=f"%(asctime)s owner[{os.getpid()}] %(name)s %(levelname)s %(message)s")
    log.setLevel(logging.INFO)  # the owner's own start/stop lines always reach owner.log
    settings = Settings()
    fd = acquire_lock(settings.data_dir / LOCK_FILE, 10.0)
    if fd is None:
        log.error("another owner holds %s; exiting", settings.data_dir / LOCK_FILE)
        sys.exit(3)
    suite, app = _daemon_suite(settings)
    serve_http(settings, suite, host="127.0.0.1", port=0, token=new_token(), register_fd=fd, kind="daemon",
               idle_seconds=settings.owner.idle_seconds, app=app)


if __name__ == "__main__":  # pragma: no cover - exercised through subprocesses
    if sys.argv[1:] == ["daemon"]:
        run_daemon()
    else:
        print("usage: python -m aisac_servers.owner daemon   (started by `aisac serve`; see docs/processes.md)",
              file=sys.stderr)
        sys.exit(2)
