"""The worker process of a code session, seen from the parent: which OS isolation this machine offers, the command
line and environment that start a worker under it, the long-lived thread that spawns workers, the length-prefixed
JSON pipe protocol (:mod:`aisac_core.sessions.worker` speaks the other side), and killing a worker's process group.
"""

from __future__ import annotations

import json
import os
import queue
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from aisac_core.sessions import sessionfs
from aisac_core.sessions.errors import SandboxError
from aisac_core.settings import SandboxSettings

WORKER_SCRIPT = Path(__file__).resolve().with_name("worker.py")  # real path: bubblewrap mounts its folder


# -- OS isolation ---------------------------------------------------------------------------------------------
#: the sandbox user and group inside bubblewrap's user namespace (``nobody``/``nogroup``): never root inside
SANDBOX_UID = 65534
#: host folders a worker needs read-only (the interpreter's shared libraries, fonts, time zones); /etc contributes
#: only the named files - no passwd, shadow, hosts or keys
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/fonts",
    "/etc/alternatives",
)


def _probe(cmd: list[str]) -> bool:
    try:
        return (
            subprocess.run(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


def _bwrap_base() -> list[str]:
    """bubblewrap's namespace and privilege options: every namespace unshared (user, PID, IPC, network, UTS,
    cgroup), the sandbox user ``SANDBOX_UID`` inside, no nested user namespaces (bubblewrap >= 0.8), every
    capability dropped, a new terminal session, killed with its parent (bwrap(1))."""
    return [
        "--unshare-all",
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
    ]


def _system_mounts() -> list[str]:
    """Read-only mounts of :data:`SYSTEM_DIRS` and :data:`ETC_FILES` as they exist on this host (a merged-/usr
    symlink stays a symlink), plus a fresh ``/proc``, a ``/dev`` of ``null``, ``zero``, ``random`` and ``urandom``,
    and an empty ``/tmp``."""
    cmd: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            cmd += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            cmd += ["--ro-bind", d, d]
    for f in ETC_FILES:
        cmd += ["--ro-bind-try", f, f]
    return cmd + [
        "--proc",
        "/proc",
        # a /dev of the four character devices a worker reads (not bwrap's --dev: its devpts instance keeps the
        # worker from mounting its session tmpfs)
        "--tmpfs",
        "/dev",
        *[a for d in ("null", "zero", "random", "urandom") for a in ("--dev-bind", f"/dev/{d}", f"/dev/{d}")],
        "--symlink",
        "/proc/self/fd",
        "/dev/fd",
        "--tmpfs",
        "/tmp",
        "--ro-bind-try",
        "/sys/devices/system/cpu",
        "/sys/devices/system/cpu",
    ]


#: ``unshare(1)``'s options: user (root mapped to the server's user), mount, PID, IPC, UTS and network namespaces,
#: a fresh /proc, the worker forked as PID 1 of its namespace and killed when ``unshare`` ends
UNSHARE_OPTS = ["-rmnpiuf", "--mount-proc", "--kill-child"]
#: the refusal when no mode with namespaces works and none was opted out of explicitly
NO_ISOLATION = (
    "code runs are refused: this machine offers neither bubblewrap nor unprivileged user namespaces, and without "
    "them a cell could reach other processes and the store. Install bubblewrap (Debian/Ubuntu: apt install "
    "bubblewrap; Fedora: dnf install bubblewrap; Arch: pacman -S bubblewrap), or allow unprivileged user "
    "namespaces (sysctl kernel.unprivileged_userns_clone=1; Ubuntu 24.04+: "
    "kernel.apparmor_restrict_unprivileged_userns=0); or opt into the weaker isolation explicitly with "
    "AISAC_SANDBOX_ISOLATION=none (seccomp and Landlock only: docs/data.md, Threat model)"
)


@lru_cache(maxsize=8)  # module state allowed: probe results of this machine (immutable tuples of text)
def detect_isolation(requested: str = "auto") -> tuple[str, str]:
    """The OS isolation in force for ``requested`` (``auto``/``bwrap``/``unshare``/``none``) and a note.

    ``bwrap`` needs the ``bwrap`` binary (0.8 or later) and working user namespaces, probed once by running
    ``true`` under the very options a worker gets; ``unshare`` needs ``unshare`` with user, mount, PID and network
    namespaces (probed the same way). ``auto`` and ``bwrap`` fall back to ``unshare``; when neither works the mode
    is ``unavailable`` and the note is the refusal (:data:`NO_ISOLATION`): code runs are refused rather than run
    weaker. ``none`` (no namespaces) is used only when requested explicitly. In every mode the worker also confines
    itself with seccomp and Landlock where the kernel offers them (:mod:`aisac_core.sessions.confine`)."""
    if requested == "none":
        return "none", (
            "isolation none (opted in with AISAC_SANDBOX_ISOLATION=none): no namespaces; a plain subprocess "
            "confined by seccomp (no processes, sockets, signals or limits of others, no file mode/owner/time "
            "changes) and Landlock (files) where the kernel offers them; the disk quota is checked by the server"
        )
    notes = []
    if requested in ("auto", "bwrap"):
        if shutil.which("bwrap") and _probe(["bwrap", *_bwrap_base(), *_system_mounts(), "true"]):
            return "bwrap", (
                "bubblewrap: user/PID/IPC/network namespaces, uid 65534 inside, a read-only minimal "
                "file system (system libraries and the Python installation), the session folder a size-limited "
                "tmpfs (the disk quota), no network"
            )
        notes.append("bubblewrap unavailable (no bwrap 0.8+ binary or no user namespaces)")
    if shutil.which("unshare") and _probe(["unshare", *UNSHARE_OPTS, "true"]):
        return "unshare", "; ".join(
            notes
            + [
                "unshare: user/mount/PID/IPC/network namespaces (no network, no other process visible), the "
                "session folder a size-limited tmpfs (the disk quota), files protected by Landlock"
            ]
        )
    notes.append("unshare with user, mount and PID namespaces does not work here")
    return "unavailable", "; ".join([*notes, NO_ISOLATION])


def python_paths() -> list[Path]:
    """Folders of this Python installation a worker needs: the prefixes and the stdlib/site-packages entries of
    ``sys.path`` (not the current folder, not a source checkout put there by an editable install)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.base_exec_prefix)}
    for e in sys.path:
        if (
            e
            and Path(e).is_absolute()
            and Path(e).is_dir()
            and (Path(e).name in ("site-packages", "dist-packages") or "/lib/python" in e)
        ):
            paths.add(Path(e))
    out = sorted({p.resolve() for p in paths} | {Path(sys.executable).resolve().parent})
    return [p for p in out if not any(p != q and p.is_relative_to(q) for q in out)]


def worker_command(settings: SandboxSettings, isolation: str, session_dir: Path, allowed: list[str]) -> list[str]:
    """The command line that starts a session's worker under ``isolation`` (``bwrap``, ``unshare`` or ``none``):
    ``python -I worker.py '<config JSON>'``, wrapped in bubblewrap (a minimal read-only file system of system
    libraries, the Python installation and the worker's own folder; ``session_dir`` the only writable folder and
    the working directory; every namespace unshared; uid 65534) or ``unshare -rn``. ``allowed``: the top-level
    packages the session's code may import; ``settings``: the worker's limits."""
    cfg = {
        "session_dir": str(session_dir),
        "allow_imports": allowed,
        "memory_mb": settings.memory_mb,
        "file_mb": settings.file_mb,
        "cpu_session_s": settings.session_cpu_s,
        "output_chars": settings.output_chars,
        "seed": settings.seed,
        "figure_bytes": int(settings.figure_mb * 1024 * 1024),
        "reply_bytes": reply_limit(settings),
        "nproc": 1,
        "isolation": isolation,
        "read_roots": [str(p) for p in python_paths()],
    }
    quota = settings.disk_mb * 1024 * 1024
    if isolation in ("bwrap", "unshare"):  # the session folder is a tmpfs: its size is the quota, held by the kernel
        cfg["scratch"] = {"bytes": quota, "inodes": sessionfs.MAX_ENTRIES}
    py = [sys.executable, "-I", str(WORKER_SCRIPT), json.dumps(cfg)]
    if isolation == "bwrap":
        # no --disable-userns here: it nests a second user namespace that does not own the mount namespace, so the
        # worker could not mount its tmpfs; the seccomp filter refuses unshare/clone of namespaces instead
        cmd = ["bwrap", *[o for o in _bwrap_base() if o != "--disable-userns"], *_system_mounts()]
        for p in python_paths():
            cmd += ["--ro-bind", str(p), str(p)]
        code = WORKER_SCRIPT.resolve().parent
        cmd += [
            "--ro-bind",
            str(code),
            str(code),
            "--ro-bind",  # the worker mounts its sized tmpfs over it (CAP_SYS_ADMIN of its own namespace, then
            str(session_dir),  # dropped before any request)
            str(session_dir),
            "--cap-add",
            "CAP_SYS_ADMIN",
            "--chdir",
            str(session_dir),
            "--",
        ]
        return cmd + py
    if isolation == "unshare":
        # setpriv --pdeathsig: unshare (and through --kill-child the worker) dies with the thread that started it
        pre = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        return [*pre, "unshare", *UNSHARE_OPTS, "--", *py]
    return py


def reply_limit(settings: SandboxSettings) -> int:
    """Largest reply (bytes) the parent reads from a worker: ``AISAC_SANDBOX_REPLY_MB``."""
    return int(settings.reply_mb * 1024 * 1024)


def worker_env(settings: SandboxSettings, session_dir: Path) -> dict[str, str]:
    """The whole environment of a session's worker (nothing inherited): C.UTF-8, HOME and TMPDIR inside
    ``session_dir``, matplotlib's Agg backend, one BLAS/OpenMP thread, a fixed PYTHONHASHSEED. Creates
    ``session_dir/tmp``."""
    tmp = session_dir / "tmp"
    tmp.mkdir(exist_ok=True)
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(session_dir),
        "TMPDIR": str(tmp),
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(session_dir / ".matplotlib"),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_MAX_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "PYTHONHASHSEED": str(settings.seed),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


# -- starting and talking to a worker ------------------------------------------------------------------------
@dataclass
class Worker:
    """A running worker: its process (the bwrap or unshare wrapper under isolation), the worker's host pid (the
    Python process itself, found below the wrapper), when it started, and its early-stderr log file."""

    proc: subprocess.Popen[bytes]
    pid: int
    started_at: str
    log: Any = None
    #: the signals the worker had handlers for when it was ready (:func:`caught_signals`)
    base: int | None = None


def caught_signals(pid: int) -> int | None:
    """The mask of signals process ``pid`` has handlers for, as the kernel reports it (``/proc/<pid>/status``
    ``SigCgt``, ``proc(5)``; bit ``n - 1`` for signal ``n``), without glibc's own two (32 and 33, ``SIGCANCEL``
    and ``SIGSETXID``, set up with the first thread): what a cell cannot forge, even with every Python guard of the
    worker switched off. None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"SigCgt:"):
                    return int(line.split(b":", 1)[1], 16) & ~(0b11 << 31)
    except (OSError, ValueError):
        pass
    return None


def left_behind(w: Worker) -> str | None:
    """Signal handlers a request left in the worker ``w`` beyond its own at start (:attr:`Worker.base`, the
    kernel's view, :func:`caught_signals`): the worker puts its own handlers back after each request, so one left
    means the worker was tampered with. Returns a description for the result, or None. (Threads a request leaves
    are ended by the worker and reported as ``stray_threads``: the kernel cannot tell a cell's thread from a
    library's pool thread.)"""
    if w.base is None:
        return None
    now = caught_signals(w.pid)
    extra = 0 if now is None else now & ~w.base
    if not extra:
        return None
    return "signal handler(s) installed for " + ", ".join(_signame(n) for n in range(1, 65) if extra >> (n - 1) & 1)


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def find_worker_pid(root: int) -> int:
    """Host pid of the Python worker started as (or below) process ``root``: the first process in the tree under
    ``root`` (``/proc/<pid>/task/<pid>/children``, ``proc(5)``) whose command line is ``<python> -I <worker
    script>``; ``root`` itself when none is found."""
    script = str(WORKER_SCRIPT).encode()

    def children(p: int) -> list[int]:
        try:
            return [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except (OSError, ValueError):  # a kernel without CONFIG_PROC_CHILDREN: the parent links of every process
            out = []
            for d in Path("/proc").iterdir():
                try:
                    if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == p:
                        out.append(int(d.name))
                except (OSError, IndexError, ValueError):
                    continue
            return out

    todo = [root]
    for _ in range(64):
        if not todo:
            break
        p = todo.pop(0)
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:3] == [b"-I", script]:  # python -I worker.py (the wrappers name the script further on)
            return p
        todo += children(p)
    return root


def pause(w: Worker, wait: bool = False) -> None:
    """Stop the worker (SIGSTOP: every thread of it, whatever a cell left behind) until :func:`resume`: between
    requests a worker uses no CPU and writes nothing. ``wait``: return only once the kernel reports it stopped
    (``/proc/<pid>/stat`` state ``T``; at most 0.5 s), so that its files can be read as a consistent whole."""
    try:
        os.kill(w.pid, signal.SIGSTOP)
    except OSError:
        return
    if not wait:
        return
    stat = f"/proc/{w.pid}/stat"
    end = time.monotonic() + 0.5
    spins = 0
    while time.monotonic() < end:
        try:
            with open(stat, "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t", b"Z", b"X"):
                    return
        except (OSError, IndexError):
            return
        spins += 1
        if spins < 200:  # the stop usually lands within microseconds: yield rather than sleep a timer tick
            os.sched_yield()
        else:
            time.sleep(0.001)


def resume(w: Worker) -> None:
    """Let a worker stopped by :func:`pause` run again (SIGCONT)."""
    try:
        os.kill(w.pid, signal.SIGCONT)
    except OSError:
        pass


def session_view(w: Worker, session_dir: Path, isolation: str) -> Path:
    """The session folder as the worker sees it: under ``bwrap``/``unshare`` its tmpfs, reached through the
    worker's root (``/proc/<pid>/root``, ``proc(5)``); under ``none`` the folder itself."""
    if isolation in ("bwrap", "unshare"):
        return Path(f"/proc/{w.pid}/root{session_dir}")
    return session_dir


class Spawner:
    """Starts processes from one long-lived thread: bubblewrap's ``--die-with-parent`` (PR_SET_PDEATHSIG) fires
    when the *thread* that forked the child ends, so workers must not be started from short-lived job threads.

    Each :class:`~aisac_core.sessions.manager.SandboxManager` owns one; its thread starts with the first
    :meth:`spawn` and ends with :meth:`stop` (then the bubblewrap processes it started die with it; a later
    :meth:`spawn` starts a new thread)."""

    def __init__(self) -> None:
        self._q: queue.Queue[tuple[list[str], dict[str, Any], dict[str, Any]] | None] | None = None
        self._lock = threading.Lock()

    @staticmethod
    def _loop(q: queue.Queue[tuple[list[str], dict[str, Any], dict[str, Any]] | None]) -> None:
        while (item := q.get()) is not None:
            cmd, kw, box = item
            try:
                box["proc"] = subprocess.Popen(cmd, **kw)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["error"] = exc
            box["done"].set()

    def spawn(self, cmd: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        """``subprocess.Popen(cmd, **kw)`` run by the spawner thread (started on first use); raises what Popen
        raises."""
        box: dict[str, Any] = {"done": threading.Event()}
        with self._lock:
            if self._q is None:
                self._q = queue.Queue()
                threading.Thread(target=self._loop, args=(self._q,), name="sandbox-spawner", daemon=True).start()
            self._q.put((cmd, kw, box))
        box["done"].wait()
        if "error" in box:
            raise box["error"]
        proc: subprocess.Popen[bytes] = box["proc"]  # binary pipes: callers pass no text/encoding option
        return proc

    def stop(self) -> None:
        """End the spawner thread once it has started what it was asked to (harmless when it is not running)."""
        with self._lock:
            if self._q is not None:
                self._q.put(None)
                self._q = None


class WorkerTimeout(Exception):
    """The worker did not reply before the deadline."""


class WorkerGone(Exception):
    """The worker exited or its pipe closed; the message says how (exit code or signal)."""


class WorkerProtocolError(WorkerGone):
    """The worker broke the protocol (a length over the cap, a body that is not a JSON object): it is stopped."""


def exit_text(code: int | None) -> str:
    """A process exit status in words: ``exit code N`` or ``signal SIGKILL (killed: ...)``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        hint = {
            "SIGKILL": " (killed: memory or CPU-time hard limit, or the wall-time kill)",
            "SIGXCPU": " (CPU-time limit)",
            "SIGSEGV": " (crashed)",
            "SIGXFSZ": " (file-size limit)",
        }.get(name, "")
        return f"signal {name}{hint}"
    return f"exit code {code}"


def kill(w: Worker, close: bool = True) -> None:
    """SIGKILL the worker's process group and reap it; ``close``: also close the pipes (only by the thread
    that owns the session lock - another thread may be reading them)."""
    try:
        os.killpg(w.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    try:
        w.proc.kill()
    except OSError:
        pass
    try:
        w.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    if not close:
        return
    for f in (w.proc.stdin, w.proc.stdout, w.log):
        try:
            if f is not None:
                f.close()
        except Exception:  # noqa: BLE001
            pass


def send(w: Worker, obj: dict[str, Any], deadline: float | None = None) -> None:
    """Write one request (4-byte big-endian length + UTF-8 JSON) to the worker, waiting for room in the pipe until
    ``deadline`` (``time.monotonic()``; None: no limit) - a worker whose cell still runs reads nothing - and let a
    worker stopped by :func:`pause` continue once the request is in the pipe (or the pipe is full), so that it
    wakes once. Raises WorkerTimeout after the deadline, WorkerGone when the worker's pipe is closed."""
    body = json.dumps(obj).encode()
    data = memoryview(struct.pack(">I", len(body)) + body)
    if w.proc.stdin is None:
        raise WorkerGone("the worker has no request pipe")
    resumed = False
    try:
        fd = w.proc.stdin.fileno()
        while data:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WorkerTimeout()
            wait = 0.0 if not resumed else 1.0 if remaining is None else min(remaining, 1.0)
            _, ready, _ = select.select([], [fd], [], wait)
            if not ready:
                if not resumed:
                    resume(w)
                    resumed = True
                elif w.proc.poll() is not None:
                    raise WorkerGone(exit_text(w.proc.returncode))
                continue
            n = os.write(fd, data[:4096])  # PIPE_BUF bytes: a write never blocks once select saw room (pipe(7))
            data = data[n:]
        if not resumed:
            resume(w)
    except (BrokenPipeError, OSError, ValueError) as exc:
        raise WorkerGone(f"the worker is gone ({exc})") from exc


def read(w: Worker, deadline: float, max_bytes: int = 32 << 20, watch: Any = None) -> dict[str, Any]:
    """Read one reply (a JSON object) from the worker, waiting until ``deadline`` (``time.monotonic()``).

    The 4-byte length is checked against ``max_bytes`` before anything more is read, so a forged length cannot make
    the parent allocate. ``watch``: called about once a second while waiting; a string it returns stops the wait
    with WorkerProtocolError(that string) (the disk-quota check). Raises WorkerTimeout after the deadline,
    WorkerGone when the worker exited or its pipe closed, WorkerProtocolError for a length over ``max_bytes`` or a
    body that is not a JSON object."""
    if w.proc.stdout is None:
        raise WorkerGone("the worker has no reply pipe")
    fd = w.proc.stdout.fileno()
    buf = bytearray()
    need = 4
    header_done = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WorkerTimeout()
        try:
            r, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not r:
                if w.proc.poll() is not None:
                    raise WorkerGone(exit_text(w.proc.returncode))
                why = watch() if watch is not None else None
                if why:
                    raise WorkerProtocolError(why)
                continue
            chunk = os.read(fd, min(need - len(buf), 1 << 20))  # never past this message: the next may follow
        except (OSError, ValueError) as exc:
            raise WorkerGone(f"the worker's pipe closed ({exc})") from exc
        if not chunk:
            try:
                w.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            raise WorkerGone(exit_text(w.proc.returncode))
        buf += chunk
        if not header_done and len(buf) >= 4:
            need = struct.unpack(">I", bytes(buf[:4]))[0]
            if need > max_bytes:
                raise WorkerProtocolError(
                    f"the worker announced a reply of {need:,} bytes, over the limit of "
                    f"{max_bytes:,} bytes (AISAC_SANDBOX_REPLY_MB)"
                )
            del buf[:4]
            header_done = True
        if header_done and len(buf) >= need:
            try:
                obj = json.loads(bytes(buf[:need]))
            except ValueError as exc:
                raise WorkerProtocolError(f"the worker sent a reply that is not JSON ({exc})") from exc
            if not isinstance(obj, dict):
                raise WorkerProtocolError("the worker sent a reply that is not a JSON object")
            return obj


# -- the two calls a session makes per request ---------------------------------------------------------------
def launch(
    spawner: Spawner,
    settings: SandboxSettings,
    isolation: str,
    session_dir: Path,
    allowed: list[str],
    log_path: Path,
    started_at: str,
    timeout_s: float,
) -> tuple[Worker, dict[str, Any]]:
    """Start the worker of the session folder ``session_dir`` under ``isolation`` (:func:`worker_command`,
    :func:`worker_env`) from the spawner's thread, its early stderr appended to ``log_path``; wait up to
    ``timeout_s`` seconds for its ready message (what confinement it holds: uid, seccomp, Landlock ABI), find its
    host pid (:func:`find_worker_pid`), note its own signal handlers (:func:`caught_signals`) and stop it until its
    first request (:func:`pause`). Returns ``(worker, ready message)``. Raises WorkerGone (the worker killed first)
    when it exits or breaks the protocol before it is ready; OSError when it cannot be spawned."""
    log = open(log_path, "ab")  # noqa: SIM115 - the worker's early stderr (before it redirects); closed by kill()
    try:
        proc = spawner.spawn(
            worker_command(settings, isolation, session_dir, allowed),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=str(session_dir),
            env=worker_env(settings, session_dir),
            start_new_session=True,
            bufsize=0,
        )
    except BaseException:
        log.close()
        raise
    w = Worker(proc=proc, pid=proc.pid, started_at=started_at, log=log)
    try:
        ready = read(w, time.monotonic() + timeout_s, 1 << 16)
    except WorkerGone:
        kill(w)
        raise
    w.pid = find_worker_pid(proc.pid)  # the host pid (inside a PID namespace the worker is pid 1)
    w.base = caught_signals(w.pid)  # its own signal handlers: a request may leave no other
    pause(w)  # between requests the worker is stopped: nothing a cell left behind runs
    return w, ready


def copy_out(w: Worker, session_dir: Path, isolation: str, quota: int, wait: bool = False) -> tuple[int, int, int, int]:
    """Copy the tmpfs of worker ``w`` (bwrap/unshare: :func:`session_view`) to the session folder ``session_dir`` on
    disk, the worker stopped first (:func:`pause`; ``wait``: until the kernel reports it stopped - before it is
    killed), within ``quota`` bytes of allocated blocks (:func:`aisac_core.sessions.sessionfs.mirror`, which follows
    no link). Returns ``(files refused over the quota, folders too deep to copy, free entries, free bytes)`` of the
    tmpfs (``statvfs``: ``f_favail``, ``f_bavail * f_frsize``). Raises OSError or SandboxError when a folder cannot
    be opened safely."""
    pause(w, wait=wait)
    view = session_view(w, session_dir, isolation)
    _copied, refused, deep = sessionfs.mirror(view, session_dir, quota)
    fs = os.statvfs(view)
    return refused, deep, fs.f_favail, fs.f_bavail * fs.f_frsize


def exchange(
    w: Worker,
    req: dict[str, Any],
    deadline: float,
    settings: SandboxSettings,
    watch: Any = None,
    copy: tuple[Path, str, int, threading.Lock] | None = None,
) -> tuple[dict[str, Any], str | None, tuple[int, int, int, int] | None]:
    """One request to worker ``w`` and its reply: :func:`send` ``req`` (it carries an unpredictable ``seq`` tag),
    :func:`read` replies (each within :func:`reply_limit` of ``settings``) until the one echoing that tag (at most 16: a reply to an earlier request, forged by a cell
    onto the channel, is skipped), then stop the worker (:func:`pause`) and look for signal handlers the request
    left (:func:`left_behind`). ``copy``: ``(session folder, isolation, quota bytes, the session's copy lock)`` - when
    the request left nothing behind, the tmpfs is then copied to disk (:func:`copy_out`, no wait; a file still
    changing is copied again next time). Returns ``(reply, what the request left behind or None, copy_out's
    figures or None)``. Raises WorkerTimeout after ``deadline`` (``time.monotonic()``), WorkerGone when the worker
    is gone, WorkerProtocolError when it breaks the protocol or ``watch`` stops the wait (:func:`read`)."""
    send(w, req, deadline)  # and lets the stopped worker continue
    for _ in range(16):
        reply = read(w, deadline, reply_limit(settings), watch)
        if reply.get("seq") == req["seq"]:
            break
    else:
        raise WorkerProtocolError("the worker keeps sending replies to other requests")
    left = left_behind(w)  # signal handlers beyond the worker's own (the kernel's view)
    pause(w)  # the request is over: whatever it left behind stops with it (SIGSTOP lands within microseconds)
    copied = None
    if copy is not None and left is None and w.proc.poll() is None:
        session_dir, isolation, quota, lock = copy
        with lock:
            try:
                copied = copy_out(w, session_dir, isolation, quota)
            except (OSError, SandboxError):
                copied = None
    return reply, left, copied
