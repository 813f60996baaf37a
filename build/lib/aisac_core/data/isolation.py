"""The worker process of a code session, seen from the parent: which OS isolation this machine offers, the command
line and environment that start a worker under it, the long-lived thread that spawns workers, the length-prefixed
JSON pipe protocol (:mod:`aisac_core.data.worker` speaks the other side), and killing a worker's process group.
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

from aisac_core.settings import Settings

WORKER_SCRIPT = Path(__file__).with_name("worker.py")


# -- OS isolation ---------------------------------------------------------------------------------------------
def _probe(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@lru_cache(maxsize=8)
def detect_isolation(requested: str = "auto") -> tuple[str, str]:
    """The OS isolation in force for ``requested`` (``auto``/``bwrap``/``unshare``/``none``) and a note.

    ``bwrap`` needs the ``bwrap`` binary and working unprivileged user namespaces (probed once by running
    ``bwrap --unshare-all ... true``); ``unshare`` needs ``unshare -rn true`` to succeed. A requested mode that
    does not work falls back to the next one, and the note says so.
    """
    notes = []
    if requested in ("auto", "bwrap"):
        if shutil.which("bwrap") and _probe(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all",
                                             "--die-with-parent", "true"]):
            return "bwrap", ("bubblewrap: user/network/PID namespaces, read-only root, only the session "
                             "directory writable, no network")
        notes.append("bubblewrap unavailable (no bwrap binary or no unprivileged user namespaces)")
    if requested in ("auto", "bwrap", "unshare"):
        if shutil.which("unshare") and _probe(["unshare", "-rn", "true"]):
            return "unshare", "; ".join(notes + ["unshare -rn: user + network namespace (no network); file "
                                                 "system protected by the audit hook only"])
        notes.append("unshare -rn does not work here")
    return "none", "; ".join(notes + ["no OS isolation: process, resource limits and audit hooks only (network "
                                      "refused by the audit hook, not by the OS)"])


def worker_command(settings: Settings, isolation: str, session_dir: Path, allowed: list[str]) -> list[str]:
    """The command line that starts a session's worker under ``isolation`` (``bwrap``, ``unshare`` or ``none``):
    ``python -I worker.py '<config JSON>'``, wrapped in bubblewrap (read-only root, private ``/tmp``, the data dir
    hidden, only ``session_dir`` writable, every namespace unshared) or ``unshare -rn``. ``allowed``: the top-level
    packages the session's code may import."""
    cfg = {"session_dir": str(session_dir), "allow_imports": allowed, "memory_mb": settings.sandbox.memory_mb,
           "file_mb": settings.sandbox.file_mb, "cpu_session_s": settings.sandbox.session_cpu_s,
           "output_chars": settings.sandbox.output_chars, "seed": settings.sandbox.seed,
           "nproc": 1, "isolation": isolation}
    py = [sys.executable, "-I", str(WORKER_SCRIPT), json.dumps(cfg)]
    if isolation == "bwrap":
        cmd = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        # the interpreter, the virtual environment and the code may live under /tmp (a checkout there, say):
        # mount them back read-only after the tmpfs that hid them
        code = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent,
                WORKER_SCRIPT.resolve().parents[2]}
        code |= {Path(e).resolve() for e in sys.path if e and Path(e).is_absolute() and Path(e).is_dir()}
        for p in sorted(code):
            if p.is_relative_to("/tmp") and not any(p.is_relative_to(q) for q in code if q != p):
                cmd += ["--ro-bind", str(p), str(p)]
        data_dir = settings.data_dir.resolve()
        protected = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), WORKER_SCRIPT.resolve()]
        if data_dir != Path("/") and not any(p == data_dir or p.is_relative_to(data_dir) for p in protected):
            cmd += ["--tmpfs", str(data_dir)]  # hide the store (SQLite file, frames, other sessions)
        cmd += ["--bind", str(session_dir), str(session_dir), "--chdir", str(session_dir), "--unshare-all",
                "--die-with-parent", "--new-session", "--"]
        return cmd + py
    if isolation == "unshare":
        return ["unshare", "-rn", "--"] + py
    return py


def worker_env(settings: Settings, session_dir: Path) -> dict[str, str]:
    """The whole environment of a session's worker (nothing inherited): C.UTF-8, HOME and TMPDIR inside
    ``session_dir``, matplotlib's Agg backend, one BLAS/OpenMP thread, a fixed PYTHONHASHSEED. Creates
    ``session_dir/tmp``."""
    tmp = session_dir / "tmp"
    tmp.mkdir(exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(session_dir),
            "TMPDIR": str(tmp), "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(session_dir / ".matplotlib"),
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "NUMEXPR_MAX_THREADS": "1", "NUMEXPR_NUM_THREADS": "1", "PYTHONHASHSEED": str(settings.sandbox.seed),
            "PYTHONDONTWRITEBYTECODE": "1"}


# -- starting and talking to a worker ------------------------------------------------------------------------
@dataclass
class Worker:
    """A running worker: its process (the bwrap or unshare wrapper under isolation), the worker's own pid as it
    reported it, when it started, and its early-stderr log file."""

    proc: subprocess.Popen
    pid: int
    started_at: str
    log: Any = None


class _Spawner:
    """Starts processes from one long-lived thread: bubblewrap's ``--die-with-parent`` (PR_SET_PDEATHSIG) fires
    when the *thread* that forked the child ends, so workers must not be started from short-lived job threads."""

    def __init__(self) -> None:
        self.q: "queue.Queue[tuple[list[str], dict, dict]]" = queue.Queue()
        self.t = threading.Thread(target=self._loop, name="sandbox-spawner", daemon=True)
        self.t.start()

    def _loop(self) -> None:
        while True:
            cmd, kw, box = self.q.get()
            try:
                box["proc"] = subprocess.Popen(cmd, **kw)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["error"] = exc
            box["done"].set()

    def __call__(self, cmd: list[str], **kw: Any) -> subprocess.Popen:
        box: dict[str, Any] = {"done": threading.Event()}
        self.q.put((cmd, kw, box))
        box["done"].wait()
        if "error" in box:
            raise box["error"]
        return box["proc"]


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def spawn(cmd: list[str], **kw: Any) -> subprocess.Popen:
    """``subprocess.Popen(cmd, **kw)`` run by the spawner thread (started on first use)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()
    return _spawner(cmd, **kw)


class WorkerTimeout(Exception):
    """The worker did not reply before the deadline."""


class WorkerGone(Exception):
    """The worker exited or its pipe closed; the message says how (exit code or signal)."""


def exit_text(code: int | None) -> str:
    """A process exit status in words: ``exit code N`` or ``signal SIGKILL (killed: ...)``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        hint = {"SIGKILL": " (killed: memory or CPU-time hard limit, or the wall-time kill)",
                "SIGXCPU": " (CPU-time limit)", "SIGSEGV": " (crashed)", "SIGXFSZ": " (file-size limit)"}.get(name, "")
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
            f.close()
        except Exception:  # noqa: BLE001
            pass


def send(w: Worker, obj: dict) -> None:
    """Write one request (4-byte big-endian length + UTF-8 JSON) to the worker. Raises WorkerGone."""
    data = json.dumps(obj).encode()
    try:
        w.proc.stdin.write(struct.pack(">I", len(data)) + data)
        w.proc.stdin.flush()
    except (BrokenPipeError, OSError, ValueError) as exc:
        raise WorkerGone(f"the worker is gone ({exc})") from exc


def read(w: Worker, deadline: float) -> dict:
    """Read one reply from the worker, waiting until ``deadline`` (``time.monotonic()``). Raises WorkerTimeout
    after the deadline, WorkerGone when the worker exited or its pipe closed."""
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
                continue
            chunk = os.read(fd, max(need - len(buf), 1 << 16) if header_done else need - len(buf))
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
            del buf[:4]
            header_done = True
        if header_done and len(buf) >= need:
            return json.loads(bytes(buf[:need]))
