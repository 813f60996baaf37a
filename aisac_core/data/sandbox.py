"""Stateful, sandboxed Python sessions: one persistent worker subprocess per session.

The boundary (docs/data.md "Threat model" says the same to users):

1. **A separate process** per session (:mod:`aisac_core.data.worker`): the server never executes session code
   itself; a crash, a kill or a runaway loop ends only that worker. The parent kills a run that exceeds its wall
   time (SIGKILL to the worker's process group) and reports the lost state on the next call.
2. **Namespaces when the machine offers them** (``Settings.sandbox.isolation``, default ``auto``): ``bwrap``
   (bubblewrap) - every namespace unshared, uid 65534 inside, a minimal read-only file system with only the session
   directory writable (:func:`aisac_core.data.isolation.worker_command`); else ``unshare -rn``; else ``none``.
3. **Kernel confinement in every mode** (:mod:`aisac_core.data.confine`): a seccomp filter (no processes, sockets,
   ptrace, mounts) and Landlock (reads beneath the Python installation and system libraries, writes beneath the
   session directory), applied by the worker to itself before its first request.
4. **Resource limits** (``resource.setrlimit`` in the worker: memory, CPU per run and per worker life, file size,
   no core dumps), a disk quota per session folder counted in allocated blocks (bwrap/unshare: a sized tmpfs the
   kernel holds, copied to disk hole for hole and link for link; none: checked during and after each run, deleted
   files held open included), output capped per stream;
   the worker is stopped (SIGSTOP) between requests, and a request that leaves a thread running (the worker ends
   them and reports the ones that would not end) or a signal handler installed (the kernel's list,
   ``/proc/<pid>/status``) has its worker killed: nothing a cell starts outlives its run.
5. **Python-level guards** (tripwires): the import allow-list as ``builtins.__import__``, refused dunder
   attributes in the source, a PEP 578 audit hook refusing processes, sockets, ctypes and file access outside the
   session directory.

The server trusts nothing a worker sends (:mod:`aisac_core.data.replies`): replies are tagged, length-capped and
checked; figures travel as PNG bytes and are kept in the server's own folder (``<root>/.state``). Its own writes
into a session folder never follow a link (:mod:`aisac_core.data.sessionfs`); matplotlib's font list comes from
the server, never from another session (:mod:`aisac_core.data.mplcache`).

Each call of :meth:`SandboxManager.run` waits up to ``sandbox_job_threshold_s``; a longer run continues in the
background and the call returns a job id to poll with :meth:`SandboxManager.job_status`.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from aisac_core.data import sessionfs
from aisac_core.data.errors import SandboxError
from aisac_core.data.isolation import (
    Spawner,
    Worker,
    WorkerGone,
    WorkerProtocolError,
    WorkerTimeout,
    caught_signals,
    deleted_but_open,
    detect_isolation,
    exit_text,
    find_worker_pid,
    kill,
    left_behind,
    pause,
    read,
    reply_limit,
    send,
    session_view,
    worker_command,
    worker_env,
)
from aisac_core.data.mplcache import FontLists
from aisac_core.data.names import check_input_name, check_session_name, check_variable
from aisac_core.data.replies import after_run, finish, stored_images, sync
from aisac_core.data.results import CloseResult, CodeRun, ResetResult, SessionInfo, SessionListResult, VariablesResult
from aisac_core.hashing import sha256_bytes
from aisac_core.settings import SandboxSettings

__all__ = ["DEFAULT_ALLOWED_IMPORTS", "Job", "SandboxError", "SandboxManager", "Session", "detect_isolation"]

#: imports a session's code may make (``Settings.sandbox.allow_imports`` adds to it)
DEFAULT_ALLOWED_IMPORTS = (
    "numpy",
    "pandas",
    "scipy",
    "matplotlib",
    "math",
    "statistics",
    "json",
    "re",
    "datetime",
    "collections",
    "itertools",
    "functools",
    "random",
    "decimal",
    "fractions",
    "string",
    "textwrap",
    "operator",
    "copy",
    "typing",
    "dataclasses",
    "enum",
    "cmath",
    "numbers",
    "bisect",
    "heapq",
    "pprint",
    "time",
    "calendar",
)
MAX_CODE_CHARS = 1_000_000
MAX_TIMEOUT_S = 3600.0
START_TIMEOUT_S = 60.0
MAX_JOBS_KEPT = 500
LOST = "the session state is lost (the next call starts a fresh worker)"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _sha256(data: bytes | str) -> str:
    return sha256_bytes(data.encode("utf-8", "replace") if isinstance(data, str) else data)


# -- sessions, workers, jobs ----------------------------------------------------------------------------------
@dataclass
class Session:
    """A named code session: its folder, its worker (None until the first call or after a loss), its state."""

    name: str
    dir: Path
    created_at: str = field(default_factory=_now)
    worker: Worker | None = None
    cells: int = 0
    lost: str | None = None  # why the previous state was lost; reported (once) by the next run
    busy_job: str | None = None
    stopping: str | None = None  # set while reset/close stops a running job
    seq: int = 0  # number of requests sent to the worker (replies echo each request's tag)
    confinement: dict[str, Any] = field(default_factory=dict[str, Any])  # what the worker reported in force at start
    last_used_at: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    sync_lock: threading.Lock = field(default_factory=threading.Lock)  # one copy of its tmpfs to disk at a time


@dataclass
class Job:
    """One ``code_run`` (every run is a job; the caller gets its result directly when it ends in time)."""

    job_id: str
    session: str
    code_sha256: str
    started_at: str
    t0: float
    done: threading.Event = field(default_factory=threading.Event)
    result: CodeRun | None = None
    figures: list[Path] = field(default_factory=list)  # PNG files in the server's own folder, never the session's
    finished_at: str | None = None


def _stop_workers(sessions: dict[str, Session], lock: threading.Lock, spawner: Spawner) -> None:
    """Kill the worker of every session in ``sessions`` and end the spawner thread."""
    with lock:
        live = list(sessions.values())
    for s in live:
        if s.worker is not None:
            kill(s.worker)
            s.worker = None
    spawner.stop()


class SandboxManager:
    """The code sessions of one store: start, run, poll, reset, close. Thread-safe.

    Args:
        settings: the sandbox settings (isolation, import allow-list, limits).
        root: the folder of the session folders (``AISAC_SANDBOX_DIR``, default ``<data_dir>/sessions``); the
            server's own files go to ``<root>/.state``.

    Workers start on demand; :meth:`shutdown` stops them, and so does the manager's finalizer when the manager is
    collected or the process exits.
    """

    def __init__(self, settings: SandboxSettings, root: Path) -> None:
        self.settings = settings
        self.root = root.expanduser().resolve()
        self.state = self.root / ".state"  # the server's own files per session (markers, logs, figures)
        self.allowed = sorted(set(DEFAULT_ALLOWED_IMPORTS) | set(settings.allow_imports))
        self.isolation, self.isolation_note = detect_isolation(settings.isolation)
        self.tmpfs = self.isolation in ("bwrap", "unshare")  # the session folder a worker sees is a sized tmpfs
        if settings.isolation not in ("auto", self.isolation):
            self.isolation_note = f"requested {settings.isolation!r} unavailable; " + self.isolation_note
        self._sessions: dict[str, Session] = {}
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._spawner = Spawner()
        self._fonts = FontLists()
        # at process exit (or when the manager is collected) no worker outlives it; the finalizer holds no
        # reference to the manager itself
        self._finalizer = weakref.finalize(self, _stop_workers, self._sessions, self._lock, self._spawner)

    # -- helpers ------------------------------------------------------------------------------------------
    def _session(self, name: str, create: bool) -> Session:
        check_session_name(name)
        with self._lock:
            s = self._sessions.get(name)
            if s is None:
                d = self.root / name
                if not create:
                    raise SandboxError(
                        f"unknown session {name!r}; data_code_session_list shows the live sessions "
                        "(data_code_run creates one)"
                    )
                self.state.mkdir(parents=True, exist_ok=True, mode=0o700)
                os.chmod(self.root, 0o700)
                if d.is_symlink() or (d.exists() and not d.is_dir()):
                    raise SandboxError(f"the folder of session {name!r} ({d}) is not a plain folder; remove it")
                d.mkdir(exist_ok=True, mode=0o700)
                s = Session(name=name, dir=d)
                marker = self.state / f"{name}.json"
                if marker.exists():  # a worker of an earlier server process had state here
                    try:
                        old = json.loads(marker.read_text())
                    except (OSError, ValueError):
                        old = {}
                    if old.get("cells"):
                        s.lost = (
                            f"the server restarted since the session's cell {old['cells']} (worker pid "
                            f"{old.get('pid')}); its variables were lost, files in {d} are kept"
                        )
                        s.cells = int(old["cells"])
                self._sessions[name] = s
            return s

    def _live_workers(self) -> int:
        return sum(1 for s in self._sessions.values() if s.worker is not None and s.worker.proc.poll() is None)

    def _make_room(self, s: Session) -> None:
        """At ``sandbox_max_sessions`` live workers, stop the least recently used idle one (its state is reported
        lost on its next call); refuse when every other worker is busy."""
        while self._live_workers() >= self.settings.max_sessions:
            with self._lock:
                idle = sorted(
                    (
                        o
                        for o in self._sessions.values()
                        if o is not s and o.worker is not None and o.worker.proc.poll() is None and o.busy_job is None
                    ),
                    key=lambda o: o.last_used_at or o.created_at,
                )
            for o in idle:
                if o.lock.acquire(blocking=False):
                    try:
                        if o.worker is not None:
                            kill(o.worker)
                            o.worker = None
                            o.lost = (
                                f"its worker was stopped to make room for session {s.name!r} (at most "
                                f"{self.settings.max_sessions} live workers, AISAC_SANDBOX_MAX_SESSIONS)"
                            )
                    finally:
                        o.lock.release()
                    break
            else:
                raise SandboxError(
                    f"{self.settings.max_sessions} sessions have a busy worker "
                    "(AISAC_SANDBOX_MAX_SESSIONS); wait for a job to finish or close a session"
                )

    def _start(self, s: Session) -> Worker:
        if self.isolation == "unavailable":
            raise SandboxError(self.isolation_note)
        self._make_room(s)
        self._fonts.seed(s.dir)
        log_path = self.state / f"{s.name}.log"
        log = open(log_path, "ab")  # noqa: SIM115 - the worker's early stderr (before it redirects)
        proc = self._spawner.spawn(
            worker_command(self.settings, self.isolation, s.dir, self.allowed),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=str(s.dir),
            env=worker_env(self.settings, s.dir),
            start_new_session=True,
            bufsize=0,
        )
        w = Worker(proc=proc, pid=proc.pid, started_at=_now(), log=log)
        try:
            ready = read(w, time.monotonic() + START_TIMEOUT_S, 1 << 16)
        except WorkerGone as exc:
            kill(w)
            tail = log_path.read_text(errors="replace")[-1500:]
            raise SandboxError(f"the session worker could not start ({exc}); worker log: {tail or '(empty)'}") from exc
        w.pid = find_worker_pid(proc.pid)  # the host pid (inside a PID namespace the worker is pid 1)
        w.base = caught_signals(w.pid)  # its own signal handlers: a request may leave no other
        pause(w)  # between requests the worker is stopped: nothing a cell left behind runs
        s.confinement = {
            k: ready.get(k)
            for k in ("uid", "seccomp", "landlock", "seccomp_note", "landlock_note", "capabilities_note")
            if k in ready
        }
        s.seq = 0
        return w

    def _ensure_worker(self, s: Session) -> tuple[Worker, list[str]]:
        """Start the session's worker if it is missing or dead (caller holds s.lock); returns it and the notes to
        report (``session state lost: ...`` when earlier state is gone). Raises SandboxError when it cannot start."""
        notes: list[str] = []
        if s.worker is not None and s.worker.proc.poll() is not None:
            s.lost = s.lost or f"the worker exited ({exit_text(s.worker.proc.returncode)})"
            kill(s.worker)
            s.worker = None
        w = s.worker
        if w is None:
            w = s.worker = self._start(s)
            self._write_marker(s)
        if s.lost:
            notes.append(f"session state lost: {s.lost}; a fresh worker was started and earlier variables are gone")
        return w, notes

    def _exchange(self, s: Session, req: dict[str, Any], timeout_s: float) -> tuple[dict[str, Any], list[str]]:
        """Send ``req`` to the session's worker (started if needed) and wait for the reply; caller holds s.lock.

        Returns (reply, notes). A wall-time overrun kills the worker; a dead worker gives an ``ok: false`` reply
        naming the cause, and the session's state is marked lost."""
        w, notes = self._ensure_worker(s)
        s.seq += 1  # requests carry an unpredictable tag: a reply forged in advance by a cell cannot match it
        req = {**req, "seq": f"{s.seq}-{secrets.token_hex(8)}"}
        quota = self.settings.disk_mb * 1024 * 1024
        t_check = [0.0]

        def watch() -> str | None:  # isolation none: the disk quota, checked at most every 2 s while a run waits
            if self.tmpfs or req.get("op") != "run" or time.monotonic() - t_check[0] < 2.0:
                return None
            t_check[0] = time.monotonic()
            used = sessionfs.usage(s.dir)
            if used <= quota:  # files it deleted but holds open count too: no folder walk sees them
                used += deleted_but_open(w.pid)
            held = "too many entries" if used >= sys.maxsize else f"{used / 2**20:,.0f} MB"
            return (
                (
                    f"disk quota exceeded: the session folder holds {held} (with files deleted but still open), "
                    f"over the limit of {quota / 2**20:,.0f} MB (AISAC_SANDBOX_DISK_MB)"
                )
                if used > quota
                else None
            )

        try:
            deadline = time.monotonic() + timeout_s
            send(w, req, deadline)  # and lets the stopped worker continue
            for _ in range(16):  # a reply to an earlier request (forged by a cell onto the channel) is skipped
                reply = read(w, deadline, reply_limit(self.settings), watch)
                if reply.get("seq") == req["seq"]:
                    break
            else:
                raise WorkerProtocolError("the worker keeps sending replies to other requests")
            left = left_behind(w)  # signal handlers beyond the worker's own (the kernel's view)
            pause(w)  # the run is over: whatever it left behind stops with it (SIGSTOP lands within microseconds)
            if left:  # ... and is killed with the worker: nothing a cell started outlives its run
                what = f"cell {req.get('cell')}" if req.get("op") == "run" else f"the {req.get('op')} request"
                self._lose(s, w, f"{what} left {left}; the worker was stopped and restarts on the next call", "", "")
                notes.append(f"session state lost: {s.lost}; its variables are gone, its files are kept")
        except WorkerProtocolError as exc:
            reply = self._lose(
                s,
                w,
                f"the worker was stopped during cell {req.get('cell')}: {exc}",
                "SandboxViolation",
                f"the run was stopped: {exc}; {LOST}",
            )
        except WorkerTimeout:
            reply = self._lose(
                s,
                w,
                f"the run of cell {req.get('cell')} exceeded its wall time of {timeout_s:g} s and "
                "the worker was killed",
                "TimeoutError",
                f"wall time limit of {timeout_s:g} s exceeded: the worker was killed and {LOST}",
            )
        except WorkerGone as exc:
            if s.stopping:
                kill(w)
                s.worker = None
                if s.stopping.startswith("cancelled"):  # the variables went with the worker: the next run says so
                    s.lost = f"cell {req.get('cell')} was cancelled and its worker stopped"
                    return {
                        "ok": False,
                        "error_type": "Cancelled",
                        "status": "cancelled",
                        "error": f"the run was {s.stopping}; {LOST}",
                    }, notes
                return {"ok": False, "error_type": "Stopped", "error": f"the run was {s.stopping}"}, notes
            reply = self._lose(
                s,
                w,
                f"the worker died during cell {req.get('cell')} ({exc})",
                "WorkerDied",
                f"the session worker died ({exc}), probably at a memory, CPU or file-size limit; {LOST}",
            )
        return reply, notes

    def sync(self, s: Session, w: Worker | None = None, wait: bool = False) -> str | None:
        """Copy the session's tmpfs to its folder on disk (:func:`aisac_core.data.replies.sync`): a note when the
        folder is full, else None."""
        return sync(self, s, w or s.worker, wait)

    def _lose(self, s: Session, w: Worker, why: str, error_type: str, error: str) -> dict[str, Any]:
        """Stop the session's worker ``w`` (its state is lost: ``why`` is reported by the next call; its files are
        kept) and return the ``ok: false`` reply of the interrupted request."""
        self.sync(s, w, wait=True)
        kill(w)
        s.worker = None
        s.lost = why
        return {"ok": False, "error_type": error_type, "error": error}

    def _write_marker(self, s: Session) -> None:
        try:
            (self.state / f"{s.name}.json").write_text(
                json.dumps(
                    {
                        "session": s.name,
                        "cells": s.cells,
                        "pid": s.worker.pid if s.worker else None,
                        "updated_at": _now(),
                    }
                )
            )
        except OSError:
            pass

    # -- public API ---------------------------------------------------------------------------------------
    def run(
        self, session: str, code: str, timeout_s: float | None = None, wait_s: float | None = None
    ) -> tuple[CodeRun, list[bytes]]:
        """Run ``code`` in ``session`` (created on first use) and return ``(result, png_images)``.

        Args:
            session: session name (1-64 of ``[A-Za-z0-9_.-]``).
            code: Python source (at most 1,000,000 characters). When its last statement is an expression, its
                ``repr`` is returned as ``result`` (as in a notebook).
            timeout_s: wall-time limit in seconds (default ``sandbox_timeout_s``, at most 3,600); the worker is
                killed when it is exceeded.
            wait_s: how long this call waits before returning a job id (default ``sandbox_job_threshold_s``).

        Result: ``{ok, session, cell, job_id, stdout, stderr, result?, error?, error_type?, traceback?, figures:
        [{path, sha256, bytes}], notes: [...], state_lost, duration_ms, code_sha256, output_sha256, isolation}``;
        when the run outlasts ``wait_s``: ``{ok: false, pending: true, status: "running", job_id, error: "still
        running ..."}`` (poll :meth:`job_status`).

        Raises:
            SandboxError: bad session name, empty or oversized code, bad timeout, the session busy with
                another run, too many live sessions, a worker that cannot start.
        """
        if not isinstance(code, str) or not code.strip():
            raise SandboxError("code is empty: pass Python source, e.g. 'x = 1 + 1' ")
        if len(code) > MAX_CODE_CHARS:
            raise SandboxError(f"code has {len(code):,} characters; the limit is {MAX_CODE_CHARS:,}")
        timeout = float(timeout_s if timeout_s is not None else self.settings.timeout_s)
        if not 0 < timeout <= MAX_TIMEOUT_S:
            raise SandboxError(f"timeout_s must be in (0, {MAX_TIMEOUT_S:g}] seconds, got {timeout_s}")
        s = self._session(session, create=True)
        if not s.lock.acquire(blocking=False):
            raise SandboxError(
                f"session {session!r} is busy with job {s.busy_job}; poll data_code_job_status or "
                "stop it with data_code_session_reset"
            )
        job = Job(
            job_id="job-" + uuid.uuid4().hex[:12],
            session=session,
            code_sha256=_sha256(code),
            started_at=_now(),
            t0=time.perf_counter(),
        )
        try:
            self._ensure_worker(s)  # here, so that a worker that cannot start is an error of this call
        except BaseException:
            s.lock.release()
            raise
        s.busy_job = job.job_id
        with self._lock:
            self._jobs[job.job_id] = job
            if len(self._jobs) > MAX_JOBS_KEPT:
                for jid in [j for j, v in self._jobs.items() if v.done.is_set()][: len(self._jobs) - MAX_JOBS_KEPT]:
                    self._jobs.pop(jid, None)

        def work() -> None:
            try:
                cell = s.cells + 1
                t_start = time.time()
                try:
                    reply, notes = self._exchange(
                        s, {"op": "run", "code": code, "cpu_s": self.settings.cpu_s, "cell": cell}, timeout
                    )
                except SandboxError as exc:
                    reply, notes = {"ok": False, "error_type": "SandboxError", "error": str(exc)}, []
                full = self.sync(s)
                if full:
                    notes.append(full)
                after_run(self, s, reply, notes, t_start)
                lost = any(n.startswith("session state lost") for n in notes)
                if s.worker is not None:  # alive after the run: the loss (if any) has been reported
                    s.lost = None
                s.cells = cell
                s.last_used_at = _now()
                self._write_marker(s)
                job.result, job.figures = finish(self, s, job, reply, notes, lost)
                if reply.get("status") == "cancelled":  # stopped by cancel(): not a run that ended by itself
                    job.result["status"] = "cancelled"
            except Exception as exc:  # noqa: BLE001 - never leave a job without a result
                job.result = {
                    "ok": False,
                    "error_type": type(exc).__name__,
                    "error": f"internal error: {exc}",
                    "session": session,
                    "job_id": job.job_id,
                    "status": "done",
                }
            finally:
                job.finished_at = _now()
                s.busy_job = None
                s.lock.release()
                job.done.set()

        threading.Thread(target=work, name=f"sandbox-{session}", daemon=True).start()
        wait = self.settings.job_threshold_s if wait_s is None else wait_s
        if job.done.wait(max(0.0, min(wait, timeout + 30))):
            return cast(CodeRun, job.result), stored_images(job)  # set before done
        return {
            "ok": False,
            "pending": True,
            "status": "running",
            "session": session,
            "job_id": job.job_id,
            "code_sha256": job.code_sha256,
            "started_at": job.started_at,
            "error": f"still running after {wait:g} s; poll data_code_job_status(job_id={job.job_id!r}) for the "
            f"result (the run is killed after {timeout:g} s)",
        }, []

    def job_status(self, job_id: str) -> tuple[CodeRun, list[bytes]]:
        """State of a run: ``{job_id, session, status: "running", started_at, elapsed_s}`` or, when finished,
        the run's full result (as :meth:`run` returns it) plus ``finished_at``. Raises SandboxError for an
        unknown job id (jobs live in the server process; a restart forgets them)."""
        with self._lock:
            job = self._jobs.get(job_id) if isinstance(job_id, str) else None
        if job is None:
            raise SandboxError(
                f"unknown job {job_id!r}: job ids come from data_code_run and live until the server restarts"
            )
        if not job.done.is_set():
            return {
                "ok": False,
                "pending": True,
                "status": "running",
                "job_id": job_id,
                "session": job.session,
                "started_at": job.started_at,
                "elapsed_s": round(time.perf_counter() - job.t0, 1),
                "error": "still running; poll again",
            }, []
        return {**cast(CodeRun, job.result), "finished_at": job.finished_at}, stored_images(job)  # set before done

    def wait(self, job_id: str, seconds: float) -> bool:
        """Wait up to ``seconds`` for code run ``job_id`` to end; True when it has ended (or is unknown)."""
        with self._lock:
            job = self._jobs.get(job_id) if isinstance(job_id, str) else None
        return job is None or job.done.wait(max(0.0, seconds))

    def cancel(self, job_id: str) -> dict[str, Any] | None:
        """Stop code run ``job_id``: its worker is killed (the session's variables are lost; the next run starts a
        fresh worker and reports ``state_lost``), and the run's result reads ``status: "cancelled"``. Returns
        ``{job_id, session, status}`` (``cancelled``, or the status of a run that had already ended), None for an
        unknown job id."""
        with self._lock:
            job = self._jobs.get(job_id) if isinstance(job_id, str) else None
            s = self._sessions.get(job.session) if job is not None else None
        if job is None:
            return None
        if not job.done.is_set() and s is not None and s.busy_job == job_id:
            s.stopping = f"cancelled (job {job_id})"
            w = s.worker
            if w is not None:
                self.sync(s, w, wait=True)  # the files the run wrote so far are kept
                kill(w, close=False)  # the run's reader sees the worker gone and finishes the job
            job.done.wait(15)
            s.stopping = None
        status = job.result["status"] if job.done.is_set() and job.result is not None else "running"
        return {"job_id": job_id, "session": job.session, "status": status}

    def _call(self, session: str, req: dict[str, Any], timeout_s: float = 120.0) -> dict[str, Any]:
        s = self._session(session, create=req.get("op") == "load_frame")
        if not s.lock.acquire(timeout=1.0):
            raise SandboxError(f"session {session!r} is busy with job {s.busy_job}; poll data_code_job_status")
        try:
            reply, notes = self._exchange(s, req, timeout_s)
            if s.worker is not None:
                s.lost = None
            reply["notes"] = notes + reply.get("notes", [])
            return reply
        finally:
            s.lock.release()

    def variables(self, session: str) -> VariablesResult:
        """``{session, variables: [{name, type, shape?|len?, dtype?, repr}], notes}`` of a session's namespace
        (names starting with '_' and modules left out). Raises SandboxError for an unknown session."""
        reply = self._call(session, {"op": "vars"})
        if not reply.get("ok"):
            raise SandboxError(f"cannot list the variables of {session!r}: {reply.get('error')}")
        return {"session": session, "variables": reply["variables"], "notes": reply["notes"]}

    def load_frame(self, session: str, var: str, parquet: Path) -> dict[str, Any]:
        """Load the Parquet file ``parquet`` (inside the session dir) into variable ``var`` of ``session``."""
        check_variable(var)
        reply = self._call(session, {"op": "load_frame", "var": var, "path": str(parquet)})
        if not reply.get("ok"):
            raise SandboxError(f"cannot load the frame into session {session!r}: {reply.get('error')}")
        return reply

    def write_input(self, session: str, name: str, data: bytes) -> Path:
        """Write ``data`` as ``inputs/<name>`` in the folder of ``session`` (created with the session) without
        following any link a cell planted there (:func:`aisac_core.data.sessionfs.write_file`). Returns the path.
        Raises SandboxError for a bad session or file name."""
        check_input_name(name)
        s = self._session(session, create=True)
        path = sessionfs.write_file(s.dir, f"inputs/{name}", data)
        w = s.worker
        if self.tmpfs and w is not None and w.proc.poll() is None:  # the live worker's tmpfs gets it too
            with s.sync_lock:
                sessionfs.write_file(session_view(w, s.dir, self.isolation), f"inputs/{name}", data)
        return path

    def session_dir(self, session: str) -> Path:
        """The folder of ``session`` (created with the session)."""
        return self._session(session, create=True).dir

    def worker_pid(self, session: str) -> int | None:
        """Host pid of the Python worker of ``session`` (None when it has none); under bwrap/unshare the worker is
        a descendant of the wrapper process (:func:`aisac_core.data.isolation.find_worker_pid`). Used to read the
        worker's memory (``/proc/<pid>/status``), CPU time and network namespace."""
        s = self._sessions.get(session)
        if s is None or s.worker is None:
            return None
        return s.worker.pid

    def list(self) -> SessionListResult:
        """``{sessions: [{session, dir, alive, pid, cells, created_at, last_used_at, busy_job, state_lost,
        confinement: {uid, seccomp, landlock (ABI, 0 = none), *_note}}], isolation, isolation_note, allowed_imports,
        limits}``."""
        with self._lock:
            sessions = list(self._sessions.values())
        out: list[SessionInfo] = []
        for s in sessions:
            w = s.worker
            alive = w is not None and w.proc.poll() is None
            out.append(
                {
                    "session": s.name,
                    "dir": str(s.dir),
                    "alive": alive,
                    "pid": w.pid if w is not None and alive else None,
                    "cells": s.cells,
                    "created_at": s.created_at,
                    "last_used_at": s.last_used_at,
                    "busy_job": s.busy_job,
                    "state_lost": s.lost,
                    "confinement": s.confinement,
                }
            )
        st = self.settings
        return {
            "sessions": out,
            "isolation": self.isolation,
            "isolation_note": self.isolation_note,
            "allowed_imports": self.allowed,
            "limits": {
                "cpu_s_per_run": st.cpu_s,
                "cpu_s_per_worker": st.session_cpu_s,
                "memory_mb": st.memory_mb,
                "file_mb": st.file_mb,
                "timeout_s": st.timeout_s,
                "job_threshold_s": st.job_threshold_s,
                "output_chars": st.output_chars,
                "max_sessions": st.max_sessions,
                "disk_mb": st.disk_mb,
                "figure_mb": st.figure_mb,
                "reply_mb": st.reply_mb,
            },
        }

    def reset(self, session: str) -> ResetResult:
        """Kill the session's worker (also a running job) and start afresh on the next call: variables are
        cleared on purpose (not reported as lost); files in the session dir are kept. ``{session, reset: true,
        killed_job}``. Raises SandboxError for an unknown session."""
        s = self._session(session, create=False)
        job = s.busy_job
        w = s.worker
        if w is not None:
            s.stopping = "stopped by data_code_session_reset (or close)"
            self.sync(s, w, wait=True)  # its files are kept
            kill(w, close=False)  # a running job's reader sees the worker gone and finishes
        if not s.lock.acquire(timeout=15):
            s.stopping = None
            raise SandboxError(f"session {session!r} did not stop in time; try again")
        try:
            s.stopping = None
            if s.worker is not None:
                kill(s.worker)
            s.worker = None
            s.lost = None
            s.cells = 0
            self._write_marker(s)
        finally:
            s.lock.release()
        return {"session": session, "reset": True, "killed_job": job}

    def close(self, session: str) -> CloseResult:
        """Stop the session's worker and forget the session (its folder and artifacts stay on disk).
        ``{session, closed: true, dir}``. Raises SandboxError for an unknown session."""
        self.reset(session)
        with self._lock:
            s = self._sessions.pop(session)
        try:
            (self.state / f"{session}.json").unlink()
        except OSError:
            pass
        return {"session": session, "closed": True, "dir": str(s.dir)}

    def shutdown(self) -> None:
        """Kill every worker (server exit). The manager stays usable: a later call starts fresh workers."""
        _stop_workers(self._sessions, self._lock, self._spawner)
