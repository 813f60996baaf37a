"""Serving a store's owner: the daemon's HTTP server, user-started HTTP servers, and the proxies to the owner.

:mod:`aisac_core.owner` elects one owner process per data dir (locks, ``owner.json``, starting and stopping the
daemon). This module is the MCP side of it:

- :func:`serve_http`: serve a FastMCP server over streamable HTTP behind :class:`~aisac_core.security.HttpGuard`
  (bearer token, size limit); as the owner it also writes ``owner.json`` and, for the daemon, idles out;
- :func:`build_proxy`: a proxy forwarding every request to the store's current owner (started on demand): over stdio
  :mod:`aisac_servers.owner.relay`, over HTTP :mod:`aisac_servers.owner.http`;
- :func:`run_daemon`: the owner daemon itself, ``python -m aisac_servers.owner.daemon daemon`` (started by
  :func:`aisac_core.owner.ensure_owner`). See docs/processes.md.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.middleware import Middleware as AsgiMiddleware

from aisac_core.owner import (
    LOCK_FILE,
    OWNER_FILE,
    START_LOCK_FILE,
    OwnerInfo,
    acquire_lock,
    aisac_version,
    bind_socket,
    bind_unix_socket,
    connect_host,
    owner_socket_path,
    publish_activity,
    read_owner_file,
    remove_owner_file,
    remove_socket,
    write_owner_file,
)
from aisac_core.security import Activity, HttpGuard, new_token
from aisac_core.settings import Settings
from aisac_core.tool_profiles import ToolProfile

from .relay import StdioRelay

if TYPE_CHECKING:
    from fastmcp import FastMCP
    from fastmcp.server.server import Transport

    from aisac_core.context import AppContext

# fastmcp, the suite and the context load where they are used: the stdio proxy (`aisac serve` while an owner runs)
# imports this module and relays bytes without them (:mod:`aisac_servers.owner.relay`)

log = logging.getLogger("aisac.owner")


class OwnerProxy:
    """What :func:`build_proxy` returns: a proxy to the store's owner, not yet bound to a transport.

    ``run(transport="stdio")`` relays the host's stdio over one long-lived MCP session to the owner
    (:class:`~aisac_servers.owner.relay.StdioRelay`); :meth:`http_server` is the FastMCP server of an HTTP proxy
    (:func:`aisac_servers.owner.http.http_proxy`), which :func:`serve_http` serves."""

    def __init__(self, settings: Settings, names: list[str] | None = None, profile: ToolProfile | None = None) -> None:
        self.settings = settings
        self.names = names
        self.profile = profile

    def run(self, transport: Transport = "stdio", **kwargs: Any) -> None:
        """Serve until the host leaves: stdio -> the relay (``kwargs`` ignored); another transport -> the FastMCP
        proxy's ``run(transport, **kwargs)``."""
        if transport == "stdio":
            StdioRelay(self.settings, self.names, profile=self.profile).run()
        else:
            self.http_server().run(transport=transport, **kwargs)

    def http_server(self) -> FastMCP:
        """The FastMCP proxy server for the HTTP transport (forwards ``/mcp`` and ``/dashboard`` to the owner)."""
        from .http import http_proxy  # with fastmcp (~0.6 s of imports): HTTP mode only

        return http_proxy(self.settings, self.names, profile=self.profile)


def build_proxy(settings: Settings, names: list[str] | None = None, profile: ToolProfile | None = None) -> OwnerProxy:
    """A proxy that forwards every request to the store's owner (started on demand).

    Over stdio it keeps one MCP session to the owner for the whole host connection and checks ``owner.json`` before
    each request, so it survives the daemon's idle exit or death: the next request starts a new owner and the
    session is reopened transparently. ``names`` restricts the exposed tools, resources and prompts to those
    namespaces (``aisac serve rag``); ``profile``, to a tool profile (``aisac serve --tools core``,
    :mod:`aisac_core.tool_profiles`; the owner serves every tool). A call cut because the owner died mid-call fails
    with :data:`~aisac_servers.base.proxying.OWNER_STOPPED`.
    Raises nothing at build time; a request fails with the owner's error (:class:`~aisac_core.owner.OwnerError`)
    when no owner can be reached."""
    return OwnerProxy(settings, names, profile)


def _jobs_pending(app: AppContext | None) -> bool:
    """True while an indexing job is queued or running in this store."""
    if app is None or app.opened("jobs") is None:
        return False
    try:
        # loaded here: only the daemon needs the SQL layer for this, a proxy never does
        from sqlmodel import Session, col, select

        from aisac_core.store.tables import Job

        with Session(app.engine) as s:
            pending = select(Job.job_id).where(col(Job.status).in_(["queued", "running"])).limit(1)
            return s.exec(pending).first() is not None
    except Exception:  # a broken store must not keep the daemon alive forever
        return False


def _idle_watch(
    settings: Settings, activity: Activity, idle_seconds: float, stop: threading.Event, app: AppContext | None = None
) -> None:
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
        # for hosts with other settings: may this owner be restarted without cutting anyone off?
        publish_activity(data_dir, idle_for=activity.idle_for(), jobs_pending=_jobs_pending(app))
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


class _Terminated(BaseException):
    """Raised by the SIGTERM handler of :func:`serve_http` to end the run (a BaseException, so that no ``except
    Exception`` on the way swallows it)."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated


def serve_http(
    settings: Settings,
    mcp: FastMCP | OwnerProxy,
    *,
    host: str,
    port: int,
    token: str | None,
    register_fd: int | None = None,
    kind: str = "http",
    idle_seconds: float = 0.0,
    sock: socket.socket | None = None,
    app: AppContext | None = None,
    tcp: bool = True,
) -> None:
    """Serve ``mcp`` over streamable HTTP behind :class:`~aisac_core.security.HttpGuard` (token, size limit).

    With ``register_fd`` (this process holds ``owner.lock``) the server is the store's owner: it also listens on the
    owner's Unix socket (``<data_dir>/owner.sock``, 0600, :func:`~aisac_core.owner.owner_socket_path`), where the
    other hosts' proxies connect, writes ``owner.json`` once it listens and removes both when it stops; ``tcp=False``
    (the daemon): the socket only, unless the data dir's path is too long for one (then loopback TCP on
    ``host:port``, the reason in ``owner.json``). With ``kind="daemon"`` and ``idle_seconds`` > 0 it stops after
    that long without requests (``app``: the served context, whose pending index jobs keep it alive). Every
    listener requires ``token`` (the socket too: defence in depth). Blocks until the server stops (SIGTERM/SIGINT
    or idle). ``mcp`` may be an :class:`OwnerProxy` (a proxy to the running owner, which also forwards
    ``/dashboard``). Raises :class:`~aisac_core.owner.OwnerError` when ``host:port`` or the socket is taken."""
    if isinstance(mcp, OwnerProxy):
        mcp = mcp.http_server()

    unix_path, unix_note = owner_socket_path(settings.data_dir) if register_fd is not None else (None, None)
    if unix_note:
        log.warning("%s", unix_note)
    if sock is None and (tcp or unix_path is None):
        sock = bind_socket(host, port)
    unix = bind_unix_socket(unix_path) if unix_path is not None else None
    if sock is not None:
        real_port = sock.getsockname()[1]
        url = f"http://{connect_host(host)}:{real_port}/mcp"
    else:  # the Unix socket only: the URL carries the path and the Host header (a loopback name)
        real_port, url = 0, "http://localhost/mcp"
    sockets = [s for s in (sock, unix) if s is not None]
    activity = Activity()
    stop = threading.Event()
    # uvicorn turns SIGTERM into a graceful shutdown while it serves, then re-raises it once it has stopped: with the
    # default handler that would kill the process before the store is closed. Our handler runs in two moments only:
    # before uvicorn has taken the signal over (the server is still starting: ignoring it there left the server
    # running until a second signal) and at that re-raise (the server has stopped). In both it ends the run; the
    # store is closed below.
    previous = (
        signal.signal(signal.SIGTERM, _terminate) if threading.current_thread() is threading.main_thread() else None
    )
    try:
        if register_fd is not None:
            write_owner_file(
                settings.data_dir,
                OwnerInfo(
                    pid=os.getpid(),
                    url=url,
                    token=token,
                    version=aisac_version(),
                    data_dir=str(settings.data_dir),
                    started_at=datetime.now(UTC).isoformat(timespec="seconds"),
                    kind=kind,
                    socket=str(unix_path) if unix_path is not None else None,
                    socket_note=unix_note,
                ),
            )
            if kind == "daemon":
                threading.Thread(
                    target=_idle_watch,
                    args=(settings, activity, idle_seconds, stop, app),
                    name="aisac-owner-idle",
                    daemon=True,
                ).start()
        log.info(
            "serving %s on %s (%s)",
            settings.data_dir,
            " and ".join(([url] if sock is not None else []) + ([f"unix:{unix_path}"] if unix is not None else [])),
            kind,
        )
        # host_origin_protection "auto": a loopback server refuses foreign Host/Origin headers (DNS rebinding)
        mcp.run(
            transport="http",
            host=host.strip("[]") if sock is not None else "127.0.0.1",
            port=real_port,
            sockets=sockets,
            show_banner=False,
            host_origin_protection="auto",
            middleware=[
                AsgiMiddleware(HttpGuard, token=token, max_bytes=settings.max_request_bytes, activity=activity)
            ],
            uvicorn_config={"timeout_graceful_shutdown": 10, "log_level": "warning"},
        )
    except _Terminated:
        log.info("stopped by SIGTERM")
    finally:
        if previous is not None:  # a second SIGTERM must not cut the cleanup short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop.set()
        if app is not None:
            app.close()  # harmless twice (the suite's lifespan closes it too); needed when stopped while starting
        if register_fd is not None:
            remove_owner_file(settings.data_dir, os.getpid())
        if unix is not None and unix_path is not None:
            remove_socket(unix_path, unix)
        for s in sockets:
            s.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _daemon_suite(settings: Settings) -> tuple[FastMCP, AppContext]:
    """The suite the daemon serves and its context: the project's suite when ``AISAC_PROJECT`` names a project
    (the owner of a project's store), else the whole suite on ``settings``."""
    # loaded here, not at the top: a proxy (`aisac serve` over stdio) imports this module and must start without
    # loading the suite's servers, fastmcp or the context (~1 s of imports)
    from aisac_core.context import AppContext

    from ..adapters.project import serve_project
    from ..serving.suite import build

    project = os.environ.get("AISAC_PROJECT")
    if project:
        return serve_project(project, settings, store_dir=settings.data_dir)
    app = AppContext(settings)
    # every tool listed, plus tools_search: relays apply profiles; each relay's roots and roles defaults per request
    return build(app=app, catalog=True, host_settings=True), app


def run_daemon() -> None:
    """Body of ``python -m aisac_servers.owner.daemon daemon``: take ``owner.lock``, serve the whole suite on the
    store's Unix socket (a free loopback port when the data dir's path is too long for one) with a fresh token,
    write ``owner.json``, idle out after ``owner_idle_seconds``. Exits with code 3 when another owner holds the
    lock."""
    logging.basicConfig(
        level=os.environ.get("AISAC_LOG_LEVEL", "WARNING"),
        stream=sys.stderr,
        format=f"%(asctime)s owner[{os.getpid()}] %(name)s %(levelname)s %(message)s",
    )
    log.setLevel(logging.INFO)  # the owner's own start/stop lines always reach owner.log
    settings = Settings()
    fd = acquire_lock(settings.data_dir / LOCK_FILE, 10.0)
    if fd is None:
        log.error("another owner holds %s; exiting", settings.data_dir / LOCK_FILE)
        sys.exit(3)
    suite, app = _daemon_suite(settings)
    serve_http(
        settings,
        suite,
        host="127.0.0.1",
        port=0,
        token=new_token(),
        register_fd=fd,
        kind="daemon",
        idle_seconds=settings.owner.idle_seconds,
        app=app,
        tcp=False,
    )


if __name__ == "__main__":  # pragma: no cover - exercised through subprocesses
    if sys.argv[1:] == ["daemon"]:
        run_daemon()
    else:
        print(
            "usage: python -m aisac_servers.owner.daemon daemon   (started by `aisac serve`; see docs/processes.md)",
            file=sys.stderr,
        )
        sys.exit(2)
