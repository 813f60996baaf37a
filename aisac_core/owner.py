"""One owner process per store: the daemon that opens the store, and the proxies that share it.

Embedded Qdrant locks its folder, so only one process may open a store. aisac therefore
gives each data dir a single *owner*: a process that serves the whole suite over streamable HTTP on a Unix domain
socket inside the data dir (``owner.sock``: the 0700 folder and the 0600 socket keep other local users out) with a
random bearer token as well (defence in depth); where the socket's path is too long for ``sun_path`` (107 bytes) it
listens on loopback TCP with the token instead and says so in ``owner.json``. Every other ``aisac serve`` on the same data dir (stdio for a host, or HTTP) is a thin
proxy to it. This module manages the locks, ``owner.json`` and the daemon process; serving (the daemon's HTTP
server and the proxies) lives in :mod:`aisac_servers.owner.daemon`. See docs/processes.md.

Files in the data dir (all mode 0600):

- ``owner.lock``: held (``flock``, exclusive) by the owner for its whole life. The kernel drops the lock when the
  process dies, even on ``kill -9``, so "lock free" means "no owner" and a leftover ``owner.json`` is stale.
- ``owner.json``: ``{pid, url, token, version, data_dir, started_at, kind, settings_digest, settings,
  last_request_at, jobs_pending, activity_at}`` written by the owner once it listens (atomically: temporary file +
  rename), removed when it stops. ``settings`` are the behaviour settings the owner was started with
  (:func:`aisac_core.settings.behaviour_settings`, no secrets); the activity fields are refreshed by the daemon
  (:func:`publish_activity`).
- ``owner.start.lock``: held by a process while it checks for an owner and, if there is none, starts one, so two
  hosts starting at once elect a single owner; an idle daemon also takes it while it shuts down.
- ``owner.log``: stderr of the daemon (appended).
- ``owner.sock``: the owner's Unix domain socket (mode 0600), bound while it serves and removed when it stops; a
  leftover of a killed owner is replaced by the next owner (which holds ``owner.lock``).

The daemon (``python -m aisac_servers.owner.daemon daemon``) exits after ``Settings.owner.idle_seconds`` without requests
and with no indexing job queued or running; the next proxy request starts a new one. A proxy of another aisac
version than the running owner refuses with :class:`OwnerVersionError` (what to do is in the message). A caller
whose behaviour settings differ from the owner's restarts an idle daemon with its own settings, and otherwise gets
:class:`OwnerSettingsDriftError` naming each difference (:func:`ensure_owner`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aisac_core.errors import AisacError
from aisac_core.store.files import secure_data_dir

if sys.platform != "win32":
    import fcntl
else:  # pragma: no cover - Windows: no owner daemon (`aisac serve` opens the store in-process)
    fcntl = None

#: whether this platform supports the owner model (POSIX file locks)
SUPPORTED = fcntl is not None

if TYPE_CHECKING:
    from aisac_core.settings import Settings

log = logging.getLogger("aisac.owner")

OWNER_FILE = "owner.json"
LOCK_FILE = "owner.lock"
START_LOCK_FILE = "owner.start.lock"
LOG_FILE = "owner.log"
SOCKET_FILE = "owner.sock"
#: the longest Unix socket path: ``sun_path`` of ``struct sockaddr_un`` holds 108 bytes, the last one the NUL
#: (Linux unix(7); macOS allows 103)
SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
#: the module run as ``python -m <DAEMON_MODULE> daemon`` to start a store's owner daemon
DAEMON_MODULE = "aisac_servers.owner.daemon"


class OwnerError(AisacError):
    """The store's owner process cannot be reached or started; the message says why and what to do."""


class OwnerVersionError(OwnerError):
    """The running owner is another aisac version than this process."""


class OwnerSettingsDriftError(OwnerError):
    """The running owner was started with other behaviour settings (roots, models, limits, ...) than this caller's
    and is busy (or is a user-started HTTP server), so it was not restarted; the message names each differing
    setting with both values and the commands that fix it. ``info``: that owner (a proxy may still list its tools
    but must not forward calls to it)."""

    def __init__(self, message: str, info: OwnerInfo | None = None) -> None:
        super().__init__(message)
        self.info = info


#: environment variable through which a starter hands its behaviour settings record to the daemon it starts
RECORD_ENV = "_AISAC_OWNER_SETTINGS"
#: the daemon's published activity counts only when refreshed within this many seconds
ACTIVITY_FRESH_S = 15.0


def aisac_version() -> str:
    """The installed aisac distribution's version (``importlib.metadata``), or ``0+unknown``."""
    try:
        return version("aisac")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


@dataclass
class OwnerInfo:
    """What ``owner.json`` says about the running owner.

    ``url``: the MCP endpoint: ``http://localhost/mcp`` (path and ``Host`` header only) when the owner listens on
    its Unix socket alone, else its TCP address (``http://127.0.0.1:<port>/mcp``); ``socket``: the path of the Unix
    domain socket to connect to (None: connect to ``url`` over TCP); ``socket_note``: why there is no socket (the
    data dir's path is too long); ``token``: its bearer token (None only for a user-started loopback HTTP server
    without a token), sent over the socket too; ``kind``: ``daemon`` (auto-started, idles out) or ``http`` (a
    user's ``aisac serve --transport http``, which also listens on the socket for the other hosts' proxies)."""

    pid: int
    url: str
    token: str | None
    version: str
    data_dir: str
    started_at: str
    kind: str = "daemon"
    settings_digest: str | None = None
    settings: dict[str, Any] | None = None
    last_request_at: float | None = None  # epoch seconds of the last request (published by the daemon)
    jobs_pending: bool | None = None  # an indexing job is queued or running
    activity_at: float | None = None  # epoch seconds when the two fields above were published
    socket: str | None = None
    socket_note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def address(self) -> str:
        """Where the owner listens, for messages: ``unix:<path>`` or its TCP URL."""
        return f"unix:{self.socket}" if self.socket else self.url

    def listening(self) -> str:
        """One line for ``aisac status``: the owner's pid and transport (and, for TCP, why not the socket)."""
        if self.socket:
            return f"pid {self.pid}, Unix socket {self.socket} (mode 0600; bearer token too)"
        why = f": {self.socket_note}" if self.socket_note else ""
        return f"pid {self.pid}, loopback TCP {self.url} with a bearer token{why}"


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
        raise OwnerError(
            f"timed out after {timeout:.0f} s waiting for {path} ({what}); another aisac process "
            "holds it. If none is running, remove the file and retry."
        )
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


def process_running(pid: int) -> bool:
    """True while process ``pid`` exists and has not exited (a zombie, exited but not yet reaped by its parent, counts
    as exited: Linux ``/proc/PID/stat`` state ``Z``; proc(5))."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1] not in ("Z", "X")
    except (OSError, IndexError):
        return True  # no /proc: os.kill said it exists


def wait_for_exit(pid: int, timeout: float) -> bool:
    """Poll (every 20 ms) until process ``pid`` has exited or ``timeout`` seconds passed; True when it exited."""
    deadline = time.monotonic() + timeout
    while process_running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def live_owner(data_dir: Path) -> OwnerInfo | None:
    """The running owner of ``data_dir``: ``owner.json`` while ``owner.lock`` is held, else None."""
    info = read_owner_file(data_dir)
    if info is None or not owner_lock_held(data_dir):
        return None
    return info


def write_owner_file(data_dir: Path, info: OwnerInfo) -> None:
    """Write ``owner.json`` atomically with mode 0600 (it holds the bearer token).

    Without ``info.settings_digest`` the settings record handed over by the starter (:data:`RECORD_ENV`, set by
    :func:`ensure_owner` for the daemon and by :func:`claim_store` for an HTTP owner) is filled in."""
    if info.settings_digest is None:
        with contextlib.suppress(ValueError, TypeError):
            rec = json.loads(os.environ.get(RECORD_ENV) or "null")
            if isinstance(rec, dict):
                info.settings_digest, info.settings = rec.get("settings_digest"), rec.get("settings")
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


def publish_activity(data_dir: Path, *, idle_for: float, jobs_pending: bool) -> None:
    """For the running owner (this process): record in ``owner.json`` when the last request was (``idle_for``:
    seconds since it, 0 while one is in flight) and whether an indexing job is queued or running, so a caller with
    other settings can tell whether restarting the owner would cut anyone off. Call it every few seconds (the
    daemon's idle watch). Does nothing when ``owner.json`` names another process; never raises on an OS error."""
    info = read_owner_file(data_dir)
    if info is None or info.pid != os.getpid():
        return
    now = time.time()
    info.last_request_at, info.jobs_pending, info.activity_at = now - max(0.0, idle_for), bool(jobs_pending), now
    try:
        write_owner_file(data_dir, info)
    except OSError as exc:  # pragma: no cover - a full disk must not kill the owner
        log.warning("cannot publish the owner's activity: %s", exc)


def settings_record(settings: Settings) -> dict[str, Any]:
    """``{settings_digest, settings}``: the behaviour settings of ``settings`` and their digest
    (:func:`aisac_core.settings.behaviour_settings`), as recorded in ``owner.json``."""
    # loaded here, not at the top: the stdio relay imports this module and starts without pydantic (~0.15 s)
    from aisac_core.settings import behaviour_settings

    values, digest = behaviour_settings(settings)
    return {"settings_digest": digest, "settings": values}


def settings_drift(info: OwnerInfo, settings: Settings) -> dict[str, tuple[Any, Any]]:
    """The behaviour settings on which the owner ``info`` and ``settings`` differ: ``{flat name: (owner's value,
    this caller's value)}``; empty when they agree or the owner recorded no settings (an older owner)."""
    if info.settings_digest is None or info.settings is None:
        return {}
    mine = settings_record(settings)
    if mine["settings_digest"] == info.settings_digest:
        return {}
    theirs, ours = info.settings, mine["settings"]
    return {k: (theirs.get(k), ours.get(k)) for k in sorted(set(theirs) | set(ours)) if theirs.get(k) != ours.get(k)}


def owner_idle(info: OwnerInfo, idle_s: float, now: float | None = None) -> bool:
    """True when the daemon ``info`` published recently (:data:`ACTIVITY_FRESH_S`) that it has had no request for
    ``idle_s`` seconds and no indexing job pending. False for a user-started HTTP owner or unknown activity."""
    now = time.time() if now is None else now
    if info.kind != "daemon" or info.activity_at is None or info.last_request_at is None or info.jobs_pending:
        return False
    return now - info.activity_at <= ACTIVITY_FRESH_S and now - info.last_request_at >= idle_s


def _drift_message(info: OwnerInfo, data_dir: Path, drift: dict[str, tuple[Any, Any]]) -> str:
    diffs = "; ".join(f"{k}: owner {json.dumps(a)} vs this host {json.dumps(b)}" for k, (a, b) in drift.items())
    sets = " and ".join(
        f"`aisac config set {k} '{json.dumps(b)}' --data-dir {data_dir}`" for k, (_a, b) in drift.items()
    )
    busy = (
        "is a user-started HTTP server"
        if info.kind != "daemon"
        else "is busy (a recent request or an indexing job), so it was not restarted"
    )
    return (
        f"the store {data_dir} is served by an aisac owner process (pid {info.pid}) started with other settings "
        f"than this host's - {diffs}. That owner {busy}. Fix: run `aisac owner stop --data-dir {data_dir}` once "
        f"the other host is done (the next request starts an owner with this host's settings), or make every "
        f"host agree: remove the setting from the hosts' environment and run {sets}"
    )


def _check_settings(info: OwnerInfo, settings: Settings) -> bool:
    """True when the owner ``info`` serves ``settings``' behaviour settings; False when it differs but is idle (the
    caller restarts it). Raises OwnerSettingsDriftError when it differs and is busy or user-started."""
    drift = settings_drift(info, settings)
    if not drift:
        return True
    if owner_idle(info, settings.owner.restart_idle_s):
        log.warning(
            "the idle owner of %s (pid %s) has other settings (%s): restarting it",
            settings.data_dir,
            info.pid,
            ", ".join(drift),
        )
        return False
    raise OwnerSettingsDriftError(_drift_message(info, settings.data_dir, drift), info)


def _check_version(info: OwnerInfo, data_dir: Path) -> None:
    mine = aisac_version()
    if info.version != mine:
        raise OwnerVersionError(
            f"the store {data_dir} is owned by an aisac {info.version} process (pid {info.pid}, {info.address}), but "
            f"this is aisac {mine}: they must not share a store. Stop the old owner (`aisac owner stop "
            f"--data-dir {data_dir}`, or `kill {info.pid}`) once its hosts are done, then restart this host; "
            "the next `aisac serve` starts an owner of the installed version."
        )


def _reachable(info: OwnerInfo, timeout: float = 1.0) -> bool:
    """True when the owner ``info`` accepts a connection (on its Unix socket, else its TCP address)."""
    try:
        if info.socket:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                s.connect(info.socket)
            return True
        u = urlsplit(info.url)
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


def ensure_owner(settings: Settings) -> OwnerInfo:
    """The running owner of ``settings.data_dir``; starts the daemon first when there is none.

    Holds ``owner.start.lock`` while it looks and starts, so concurrent callers elect one owner. A stale
    ``owner.json`` (its process died, e.g. ``kill -9``; the lock is free) is logged and replaced. An owner whose
    behaviour settings differ from ``settings``' is stopped and replaced when it is idle (``owner_restart_idle_s``,
    :func:`owner_idle`); the new daemon gets ``settings``.

    Raises:
        OwnerVersionError: the running owner is another aisac version.
        OwnerSettingsDriftError: the running owner has other behaviour settings and is busy or user-started.
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
            if _check_settings(info, settings):
                return info
            stop_owner(data_dir, timeout=timeout)
        # an owner that is shutting down still holds owner.lock without owner.json: let it finish
        deadline = time.monotonic() + timeout
        while owner_lock_held(data_dir) and time.monotonic() < deadline:
            info = live_owner(data_dir)
            if info is not None:
                _check_version(info, data_dir)
                if _check_settings(info, settings):
                    return info
                stop_owner(data_dir, timeout=timeout)
            time.sleep(0.1)
        stale = read_owner_file(data_dir)
        if stale is not None:
            log.warning("recovering a stale owner lock of %s: pid %s is gone", data_dir, stale.pid)
            remove_owner_file(data_dir)
        return _start_daemon(settings, deadline)


def _daemon_env(settings: Settings) -> dict[str, str]:
    """The daemon's environment: this process's, the data dir, the caller's behaviour settings as ``AISAC_*``
    variables (so the daemon serves exactly ``settings``, whatever their source) and their record
    (:data:`RECORD_ENV`). A project's owner (``AISAC_PROJECT``) derives its settings from the manifest instead."""
    env = dict(os.environ)
    env["AISAC_DATA_DIR"] = str(settings.data_dir)
    env.setdefault("HF_HUB_OFFLINE", "1")
    rec = settings_record(settings)
    if "AISAC_PROJECT" not in env:
        for name, value in rec["settings"].items():
            if value is not None:
                env["AISAC_" + name.upper()] = value if isinstance(value, str) else json.dumps(value)
    env[RECORD_ENV] = json.dumps(rec)
    return env


def _start_daemon(settings: Settings, deadline: float) -> OwnerInfo:
    data_dir = settings.data_dir
    logf = os.open(data_dir / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", DAEMON_MODULE, "daemon"],
            env=_daemon_env(settings),
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=logf,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(logf)
    while time.monotonic() < deadline:
        info = read_owner_file(data_dir)
        if info is not None and info.pid == proc.pid and _reachable(info):
            return info
        if proc.poll() is not None:
            raise OwnerError(
                f"the aisac owner daemon for {data_dir} exited at start (code {proc.returncode}). "
                f"End of {data_dir / LOG_FILE}:\n{_log_tail(data_dir)}"
            )
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    raise OwnerError(
        f"the aisac owner daemon for {data_dir} did not listen within "
        f"{settings.owner.start_timeout_s:.0f} s (AISAC_OWNER_START_TIMEOUT_S). End of "
        f"{data_dir / LOG_FILE}:\n{_log_tail(data_dir)}"
    )


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


def claim_store(settings: Settings) -> tuple[int | None, OwnerInfo | None]:
    """For a user-started HTTP server: become the store's owner, or find the running one.

    Returns ``(lock_fd, None)`` when this process now holds ``owner.lock`` (it must write ``owner.json`` and keep
    the descriptor open while it serves; the settings record for it is put in :data:`RECORD_ENV` of this process),
    or ``(None, info)`` when another owner runs (proxy to it). Raises :class:`OwnerVersionError` and
    :class:`OwnerSettingsDriftError` like :func:`ensure_owner` (an idle daemon with other settings is replaced)."""
    data_dir = settings.data_dir
    secure_data_dir(data_dir)
    with _locked(data_dir / START_LOCK_FILE, settings.owner.start_timeout_s, "the owner start lock"):
        info = live_owner(data_dir)
        if info is not None:
            _check_version(info, data_dir)
            if _check_settings(info, settings):
                return None, info
            stop_owner(data_dir, timeout=settings.owner.start_timeout_s)
        os.environ[RECORD_ENV] = json.dumps(settings_record(settings))
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


def owner_socket_path(data_dir: Path) -> tuple[Path | None, str | None]:
    """Where the owner of ``data_dir`` listens: ``(<data_dir>/owner.sock, None)``, or ``(None, why)`` when that
    path is longer than :data:`SUN_PATH_MAX` bytes (the owner then listens on loopback TCP with its token), or the
    platform has no Unix sockets."""
    if not hasattr(socket, "AF_UNIX"):  # pragma: no cover - Windows
        return None, "this platform has no Unix domain sockets: the owner listens on loopback TCP with its token"
    path = Path(data_dir).absolute() / SOCKET_FILE
    size = len(os.fsencode(path))
    if size > SUN_PATH_MAX:
        return None, (
            f"the data dir's path is too long for a Unix socket ({path}: {size} bytes, at most {SUN_PATH_MAX}): "
            "the owner listens on loopback TCP with its bearer token instead, which every local account can "
            "connect to (the token keeps them out); a shorter --data-dir gives the owner its Unix socket"
        )
    return path, None


def bind_unix_socket(path: Path) -> socket.socket:
    """A listening Unix domain socket at ``path``, mode 0600 from the start (``fchmod`` before ``bind``: Linux gives
    the socket file the socket's mode, then ``chmod`` for other systems). The caller holds ``owner.lock``, so a
    socket file found there is a dead owner's leftover and is replaced. Raises OwnerError when it cannot bind or
    something other than a socket is in the way."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise OwnerError(f"{path} exists and is not a socket: remove it (the owner listens there)")
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.fchmod(sock.fileno(), 0o600)
        sock.bind(str(path))
        os.chmod(path, 0o600)
    except OSError as exc:
        sock.close()
        raise OwnerError(f"cannot listen on the Unix socket {path}: {exc.strerror or exc}") from exc
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def remove_socket(path: Path, sock: socket.socket) -> None:
    """Remove the socket file ``path`` that ``sock`` is bound to. Call it while still holding ``owner.lock`` (no
    other owner can have bound the path since). Never raises."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode) and sock.getsockname() == str(path):
            path.unlink()
