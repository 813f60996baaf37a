"""One owner process per store: the daemon that opens the store, and the proxies that share it.

Embedded Qdrant locks its folder, so only one process may open a store. aisac therefore
gives each data dir a single *owner*: a process that serves the whole suite over streamable HTTP on loopback with
a random bearer token. Every other ``aisac serve`` on the same data dir (stdio for a host, or HTTP) is a thin
proxy to it. This module manages the locks, ``owner.json`` and the daemon process; serving (the daemon's HTTP
server and the proxies) lives in :mod:`aisac_servers.owner`. See docs/processes.md.

Files in the data dir (all mode 0600):

- ``owner.lock``: held (``flock``, exclusive) by the owner for its whole life. The kernel drops the lock when the
  process dies, even on ``kill -9``, so "lock free" means "no owner" and a leftover ``owner.json`` is stale.
- ``owner.json``: ``{pid, url, token, version, data_dir, started_at, kind}`` written by the owner once it listens
  (atomically: temporary file + rename), removed when it stops.
- ``owner.start.lock``: held by a process while it checks for an owner and, if there is none, starts one, so two
  hosts starting at once elect a single owner; an idle daemon also takes it while it shuts down.
- ``owner.log``: stderr of the daemon (appended).

The daemon (``python -m aisac_servers.owner daemon``) exits after ``Settings.owner.idle_seconds`` without requests
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
import time
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator
from urllib.parse import urlsplit

from aisac_core.errors import AisacError
from aisac_core.store.files import secure_data_dir

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no owner daemon (`aisac serve` opens the store in-process)
    fcntl = None  # type: ignore[assignment]

#: whether this platform supports the owner model (POSIX file locks)
SUPPORTED = fcntl is not None

if TYPE_CHECKING:
    from aisac_core.settings import Settings

log = logging.getLogger("aisac.owner")

OWNER_FILE = "owner.json"
LOCK_FILE = "owner.lock"
START_LOCK_FILE = "owner.start.lock"
LOG_FILE = "owner.log"
#: the module run as ``python -m <DAEMON_MODULE> daemon`` to start a store's owner daemon
DAEMON_MODULE = "aisac_servers.owner"


class OwnerError(AisacError):
    """The store's owner process cannot be reached or started; the message says why and what to do."""


class OwnerVersionError(OwnerError):
    """The running owner is another aisac version than this process."""


def aisac_version() -> str:
    """The installed aisac distribution's version (``importlib.metadata``), or ``0+unknown``."""
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
        OwnerError: the daemon did not come up within ``settings.owner.start_timeout_s`` (the message carries
            the end of ``owner.log``), or the start lock could not be taken.
    """
    data_dir = settings.data_dir
    secure_data_dir(data_dir)
    timeout = settings.owner.start_timeout_s
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
        proc = subprocess.Popen([sys.executable, "-m", DAEMON_MODULE, "daemon"], env=_daemon_env(settings),
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
                     f"{settings.owner.start_timeout_s:.0f} s (AISAC_OWNER_START_TIMEOUT_S). End of "
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
    secure_data_dir(data_dir)
    with _locked(data_dir / START_LOCK_FILE, settings.owner.start_timeout_s, "the owner start lock"):
        info = live_owner(data_dir)
        if info is not None:
            _check_version(info, data_dir)
            return None, info
        fd = acquire_lock(data_dir / LOCK_FILE, settings.owner.start_timeout_s)
        if fd is None:
            raise OwnerError(f"timed out waiting for the previous owner of {data_dir} to stop")
        if read_owner_file(data_dir) is not None:
            log.warning("recovering a stale owner lock of %s", data_dir)
            remove_owner_file(data_dir)
        return fd, None


# --------------------------------------------------------------------------------------------------
# listening sockets
# --------------------------------------------------------------------------------------------------


def connect_host(host: str) -> str:
    """The address a client connects to for a server bound on ``host`` (a wildcard bind -> loopback; an IPv6
    address in brackets, for a URL)."""
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
