"""One owner process per store: the daemon that opens the store, and the proxies that share it.

Embedded Qdrant locks its folder, so only one process may open a store (DESIGN.md "Processes"). aisac therefore
gives each data dir a single *owner*: a process that serves the whole suite over streamable HTTP on loopback with
a random bearer token. Every other ``aisac serve`` on the same data dir (stdio for a host, or HTTP) is a thin
proxy to it (fastmcp's :class:`~fastmcp.server.providers.proxy.FastMCPProxy`). See docs/processes.md.

Files in the data dir (all mode 0600):

- ``owner.lock``: held (``flock``, exclusive) by the owner for its whole life. The kernel drops the lock when the
  process dies, even on ``kill -9``, so "lock free" means "no owner" and a leftover ``owner.json`` is stale.
- ``owner.json``: ``{pid, url, token, version, data_dir, started_at, kind}`` written by the owner once it listens
  (atomically: temporary file + rename), removed when it stops.
- ``owner.start.lock``: held by a process while it checks for an owner and, if there is none, starts one, so two
  hosts starting at once elect a single owner; an idle daemon also takes it while it shuts down.
- ``owner.log``: stderr of the daemon (appended).

The daemon (``python -m aisac_core.owner daemon``) exits after ``Settings.owner_idle_seconds`` without requests
and with no indexing job queued or running; the next proxy request starts a new one. A proxy of another aisac
version than the running owner refuses with :class:`OwnerVersionError` (what to do is in the message).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from aisac_core.errors import AisacError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no owner daemon (`aisac serve` opens the store in-process)
    fcntl = None  # type: ignore[assignment]

#: whether this platform supports the owner model (POSIX file locks)
SUPPORTED = fcntl is not None

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from aisac_core.settings import Settings
    from aisac_core.context import AppContext
    from aisac_core.security import Activity

log = logging.getLogger("aisac.owner")

OWNER_FILE = "owner.json"
LOCK_FILE = "owner.lock"
START_LOCK_FILE = "owner.start.lock"
LOG_FILE = "owner.log"


class OwnerError(AisacError):
    """The store's owner process cannot be reached or started; the message says why and what to do."""


class OwnerVersionError(OwnerError):
    """The running owner is another aisac version than this process."""


def aisac_version() -> str:
    """The installed aisac distribution's version (``importlib.metadata``), or ``0+unknown``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aisac")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


@dataclass
class OwnerInfo:
    """What ``owner.json`` says about the running owner.

    ``url``: the MCP endpoint (``http://127.0.0.1:<port>/mcp``); ``token``: its bearer token (None only for a
    user-started loopback HTTP server without a token); ``kind``: ``daemon`` (auto-started, idles out) or
    ``http`` (a user's ``aisac serve --transport http``)."""

    pid: int
    url: str
    token: str | None
    version: str
    data_dir: str
    started_at: str
    kind: str = "daemon"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------------------
# locks and the owner file
# --------------------------------------------------------------------------------------------------


def _open_lock(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise


def acquire_lock(path: Path, timeout: float) -> int | None:
    """Take an exclusive ``flock`` on ``path`` (created 0600), polling up to ``timeout`` seconds.

    Returns the open descriptor that holds the lock (close it to release), or None on timeout."""
    fd = _open_lock(path)
    deadline = time.monotonic() + timeout
    while True:
        if _try_flock(fd):
            return fd
        if time.monotonic() >= deadline:
            os.close(fd)
            return None
        time.sleep(0.05)


@contextlib.contextmanager
def _locked(path: Path, timeout: float, what: str) -> Iterator[None]:
    fd = acquire_lock(path, timeout)
    if fd is None:
        raise OwnerError(f"timed out after {timeout:.0f} s waiting for {path} ({what}); another aisac process "
                         "holds it. If none is running, remove the file and retry.")
    try:
        yield
    finally:
        os.close(fd)


def owner_lock_held(data_dir: Path) -> bool:
    """True while some process holds ``owner.lock`` (i.e. an owner is alive)."""
    path = Path(data_dir) / LOCK_FILE
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        if _try_flock(fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        return True
    finally:
        os.close(fd)


def read_owner_file(data_dir: Path) -> OwnerInfo | None:
    """The content of ``owner.json`` (live or stale), or None when absent or unreadable."""
    try:
        raw = json.loads((Path(data_dir) / OWNER_FILE).read_text())
        return OwnerInfo(**{k: raw[k] for k in OwnerInfo.__dataclass_fields__ if k in raw})
    except (OSError, ValueError, TypeError, KeyError):
        return None


def live_owner(data_dir: Path) -> OwnerInfo | None:
    """The running owner of ``data_dir``: ``owner.json`` while ``owner.lock`` is held, else None."""
    info = read_owner_file(data_dir)
    if info is None or not owner_lock_held(data_dir):
        return None
    return info


def write_owner_file(data_dir: Path, info: OwnerInfo) -> None:
    """Write ``owner.json`` atomically with mode 0600 (it holds the bearer token)."""
    path = Path(data_dir) / OWNER_FILE
    tmp = path.with_name(f".{OWNER_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info.as_dict(), f, indent=1)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def remove_owner_file(data_dir: Path, pid: int | None = None) -> None:
    """Remove ``owner.json`` (only when it names ``pid``, if given)."""
    path = Path(data_dir) / OWNER_FILE
    if pid is not None:
        info = read_owner_file(data_dir)
        if info is not None and info.pid != pid:
            return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _check_version(info: OwnerInfo, data_dir: Path) -> None:
    mine = aisac_version()
    if info.version != mine:
        raise OwnerVersionError(
            f"the store {data_dir} is owned by an aisac {info.version} process (pid {info.pid}, {info.url}), but "
            f"this is aisac {mine}: they must not share a store. Stop the old owner (`aisac owner stop "
            f"--data-dir {data_dir}`, or `kill {info.pid}`) once its hosts are done, then restart this host; "
            "the next `aisac serve` starts an owner of the installed version.")


def _reachable(url: str, timeout: float = 1.0) -> bool:
    from urllib.parse import urlsplit

    u = urlsplit(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 80), timeout=timeout):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------------------------------
# start-or-connect
# --------------------------------------------------------------------------------------------------


def _log_tail(data_dir: Path, n: int = 2000) -> str:
    try:
        return (Path(data_dir) / LOG_FILE).read_text(errors="replace")[-n:].strip()
    except OSError:
        return ""


def ensure_owner(settings: "Settings") -> OwnerInfo:
    """The running owner of ``settings.data_dir``; starts the daemon first when there is none.

    Holds ``owner.start.lock`` while it looks and starts, so concurrent callers elect one owner. A stale
    ``owner.json`` (its process died, e.g. ``kill -9``; the lock is free) is logged and replaced.

    Raises:
        OwnerVersionError: the running owner is another aisac version.
        OwnerError: the daemon did not come up within ``settings.owner_start_timeout_s`` (the message carries
            the end of ``owner.log``), or the start lock could not be taken.
    """
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    timeout = settings.owner_start_timeout_s
    with _locked(data_dir / START_LOCK_FILE, timeout, "the owner start lock"):
        info = live_owner(data_dir)
        if info is not None:
            _check_version(info, data_dir)
            return info
        # an owner that is shutting down still holds owner.lock without owner.json: let it finish
        deadline = time.monotonic() + timeout
        while owner_lock_held(data_dir) and time.monotonic() < deadline:
            info = live_owner(data_dir)
            if info is not None:
                _check_version(info, data_dir)
                return info
            time.sleep(0.1)
        stale = read_owner_file(data_dir)
        if stale is not None:
            log.warning("recovering a stale owner lock of %s: pid %s is gone", data_dir, stale.pid)
            remove_owner_file(data_dir)
        return _start_daemon(settings, deadline)


def _daemon_env(settings: "Settings") -> dict[str, str]:
    env = dict(os.environ)
    env["AISAC_DATA_DIR"] = str(settings.data_dir)
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def _start_daemon(settings: "Settings", deadline: float) -> OwnerInfo:
    data_dir = settings.data_dir
    logf = os.open(data_dir / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "aisac_core.owner", "daemon"], env=_daemon_env(settings),
                                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True,
                                close_fds=True)
    finally:
        os.close(logf)
    while time.monotonic() < deadline:
        info = read_owner_file(data_dir)
        if info is not None and info.pid == proc.pid and _reachable(info.url):
            return info
        if proc.poll() is not None:
            raise OwnerError(f"the aisac owner daemon for {data_dir} exited at start (code {proc.returncode}). "
                             f"End of {data_dir / LOG_FILE}:\n{_log_tail(data_dir)}")
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    raise OwnerError(f"the aisac owner daemon for {data_dir} did not listen within "
                     f"{settings.owner_start_timeout_s:.0f} s (AISAC_OWNER_START_TIMEOUT_S). End of "
                     f"{data_dir / LOG_FILE}:\n{_log_tail(data_dir)}")


def stop_owner(data_dir: Path, timeout: float = 30.0) -> OwnerInfo | None:
    """Stop the running owner of ``data_dir`` (SIGTERM, then SIGKILL after ``timeout`` s); returns whom it
    stopped, or None when no owner was running. The store is closed cleanly on SIGTERM."""
    info = live_owner(data_dir)
    if info is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while owner_lock_held(data_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    if owner_lock_held(data_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGKILL)
        while owner_lock_held(data_dir) and time.monotonic() < deadline + 10:
            time.sleep(0.05)
    return info


def claim_store(settings: "Settings") -> tuple[int | None, OwnerInfo | None]:
    """For a user-started HTTP server: become the store's owner, or find the running one.

    Returns ``(lock_fd, None)`` when this process now holds ``owner.lock`` (it must write ``owner.json`` and keep
    the descriptor open while it serves), or ``(None, info)`` when another owner runs (proxy to it).
    Raises :class:`OwnerVersionError` like :func:`ensure_owner`."""
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    with _locked(data_dir / START_LOCK_FILE, settings.owner_start_timeout_s, "the owner start lock"):
        info = live_owner(data_dir)
        if info is not None:
            _check_version(info, data_dir)
            return None, info
        fd = acquire_lock(data_dir / LOCK_FILE, settings.owner_start_timeout_s)
        if fd is None:
            raise OwnerError(f"timed out waiting for the previous owner of {data_dir} to stop")
        if read_owner_file(data_dir) is not None:
            log.warning("recovering a stale owner lock of %s", data_dir)
            remove_owner_file(data_dir)
        return fd, None


# --------------------------------------------------------------------------------------------------
# serving: the owner (in-process suite) and the proxies
# --------------------------------------------------------------------------------------------------


def _connect_host(host: str) -> str:
    if host in ("0.0.0.0", "", "*"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one). Raises OwnerError when the port is taken."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets that say so, and without it every
    # response waits ~40 ms for a delayed ACK (Nagle); measured 44 ms -> 3 ms per ping
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise OwnerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port") from exc
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def _jobs_pending(core: "AppContext | None") -> bool:
    """True while an indexing job is queued or running in this store."""
    if core is None or core.opened("jobs") is None:
        return False
    try:
        from sqlmodel import Session, select

        from aisac_core.store.tables import Job

        with Session(core.engine) as s:
            return s.exec(select(Job.job_id).where(Job.status.in_(["queued", "running"])).limit(1)).first() is not None
    except Exception:  # a broken store must not keep the daemon alive forever
        return False


def _idle_watch(settings: "Settings", activity: "Activity", idle_seconds: float, stop: threading.Event,
                app: "AppContext | None" = None) -> None:
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


def build_proxy(settings: "Settings", names: list[str] | None = None) -> "FastMCP":
    """A FastMCP server that forwards every request to the store's owner (started on demand).

    Each request asks :func:`ensure_owner` for the current owner (a few file operations), so a proxy survives
    the daemon's idle exit or death: the next request starts a new one. ``names`` restricts the exposed tools,
    resources and prompts to those namespaces (``aisac serve rag``)."""
    import anyio
    from fastmcp.client.transports import StreamableHttpTransport
    from fastmcp.server.providers.proxy import FastMCPProxy, _create_client_factory

    state: dict[str, Any] = {"key": None, "factory": None}

    async def client_factory():  # noqa: ANN202
        info = await anyio.to_thread.run_sync(ensure_owner, settings)
        key = (info.url, info.token)
        if state["key"] != key:
            state["factory"] = _create_client_factory(StreamableHttpTransport(info.url, auth=info.token))
            state["key"] = key
        return state["factory"]()

    proxy = FastMCPProxy(client_factory=client_factory, name="aisac",
                         instructions="aisac: retrieval-grounded scientific assistance with provenance "
                                      "(proxy to the store's owner process).")
    if names:
        proxy.add_middleware(NamespaceFilter(names))
    return proxy


def _namespace_filter_cls():  # noqa: ANN202
    from fastmcp.exceptions import NotFoundError, ToolError
    from fastmcp.server.middleware import Middleware

    class _NamespaceFilter(Middleware):
        """Shows and allows only the components of the given namespaces (``rag`` -> ``rag_*``,
        ``aisac://rag/...``)."""

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

    return _NamespaceFilter


def NamespaceFilter(names: list[str]):  # noqa: ANN201, N802
    """Middleware restricting a proxy to the tools/resources/prompts of ``names`` (see :func:`build_proxy`)."""
    return _namespace_filter_cls()(names)


def serve_http(settings: "Settings", mcp: "FastMCP", *, host: str, port: int, token: str | None,
               register_fd: int | None = None, kind: str = "http", idle_seconds: float = 0.0,
               sock: socket.socket | None = None, app: "AppContext | None" = None) -> None:
    """Serve ``mcp`` over streamable HTTP behind :class:`~aisac_core.security.HttpGuard` (token, size limit).

    With ``register_fd`` (this process holds ``owner.lock``) the server also writes ``owner.json`` once it listens
    and removes it when it stops; with ``idle_seconds`` > 0 it stops after that long without requests.
    Blocks until the server stops (SIGTERM/SIGINT or idle)."""
    from starlette.middleware import Middleware

    from aisac_core.security import Activity, HttpGuard

    sock = sock or bind_socket(host, port)
    real_port = sock.getsockname()[1]
    url = f"http://{_connect_host(host)}:{real_port}/mcp"
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
                middleware=[Middleware(HttpGuard, token=token, max_bytes=settings.max_request_bytes,
                                       activity=activity)],
                uvicorn_config={"timeout_graceful_shutdown": 10, "log_level": "warning"})
    finally:
        stop.set()
        if register_fd is not None:
            remove_owner_file(settings.data_dir, os.getpid())
        sock.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def run_daemon() -> None:
    """Body of ``python -m aisac_core.owner daemon``: take ``owner.lock``, serve the whole suite on a free
    loopback port with a fresh token, write ``owner.json``, idle out after ``owner_idle_seconds``."""
    from aisac_core.settings import Settings
    from aisac_core.context import AppContext
    from aisac_core.security import new_token

    logging.basicConfig(level=os.environ.get("AISAC_LOG_LEVEL", "WARNING"), stream=sys.stderr,
                        format=f"%(asctime)s owner[{os.getpid()}] %(name)s %(levelname)s %(message)s")
    log.setLevel(logging.INFO)  # the owner's own start/stop lines always reach owner.log
    settings = Settings()
    fd = acquire_lock(settings.data_dir / LOCK_FILE, 10.0)
    if fd is None:
        log.error("another owner holds %s; exiting", settings.data_dir / LOCK_FILE)
        sys.exit(3)
    if os.environ.get("AISAC_PROJECT"):  # issue 10: the owner of a project's store serves the project's suite
        from aisac_core.projects.bootstrap import serve_suite

        suite, app = serve_suite(os.environ["AISAC_PROJECT"], settings, store_dir=settings.data_dir)
    else:
        from aisac_servers.suite import build

        app = AppContext(settings)
        suite = build(app=app)
    serve_http(settings, suite, host="127.0.0.1", port=0, token=new_token(), register_fd=fd, kind="daemon",
               idle_seconds=settings.owner_idle_seconds, app=app)


if __name__ == "__main__":  # pragma: no cover - exercised through subprocesses
    if sys.argv[1:] == ["daemon"]:
        run_daemon()
    else:
        print("usage: python -m aisac_core.owner daemon   (started by `aisac serve`; see docs/processes.md)",
              file=sys.stderr)
        sys.exit(2)
