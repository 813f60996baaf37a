"""Stateful, sandboxed Python sessions: one persistent worker subprocess per session.

The boundary (docs/data.md "Threat model" says the same to users):

1. **A separate process** per session (:mod:`aisac_core.sessions.worker`): the server never executes session code
   itself; a crash, a kill or a runaway loop ends only that worker. The parent kills a run that exceeds its wall
   time (SIGKILL to the worker's process group) and reports the lost state on the next call.
2. **Namespaces when the machine offers them** (``Settings.sandbox.isolation``, default ``auto``): ``bwrap``
   (bubblewrap) - every namespace unshared, uid 65534 inside, a minimal read-only file system with only the session
   directory writable (:func:`aisac_core.sessions.isolation.worker_command`); else ``unshare -rn``; else ``none``.
3. **Kernel confinement in every mode** (:mod:`aisac_core.sessions.confine`): a seccomp filter (no processes, sockets,
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

The package's modules: this one (the manager: admits sessions and their workers, schedules runs as jobs, looks
sessions and jobs up), :mod:`~aisac_core.sessions.session` (one session: its worker, cells and files, and a run from
request to result), :mod:`~aisac_core.sessions.isolation` (the worker process seen from the parent),
:mod:`~aisac_core.sessions.worker` (the worker itself), :mod:`~aisac_core.sessions.confine` (seccomp, Landlock),
:mod:`~aisac_core.sessions.results` (the result types, :data:`~aisac_core.sessions.results.CodeRun` a tagged union),
:mod:`~aisac_core.sessions.names` and :mod:`~aisac_core.sessions.errors`.

The server trusts nothing a worker sends (:mod:`aisac_core.sessions.replies`): replies are tagged, length-capped and
checked; figures travel as PNG bytes and are kept in the server's own folder (``<root>/.state``). Its own writes
into a session folder never follow a link (:mod:`aisac_core.sessions.sessionfs`); matplotlib's font list comes from
the server, never from another session (:mod:`aisac_core.sessions.mplcache`).

Each call of :meth:`SandboxManager.run` waits up to ``sandbox_job_threshold_s``; a longer run continues in the
background and the call returns a job id to poll with :meth:`SandboxManager.job_status`.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aisac_core.hashing import sha256_bytes
from aisac_core.sessions.errors import SandboxError
from aisac_core.sessions.isolation import Spawner, WorkerGone, detect_isolation, exit_text, kill, launch
from aisac_core.sessions.mplcache import FontLists
from aisac_core.sessions.names import check_input_name, check_session_name, check_variable
from aisac_core.sessions.results import (
    CloseResult,
    CodeRun,
    CodeRunDone,
    CodeRunPending,
    ResetResult,
    SessionListResult,
    VariablesResult,
)
from aisac_core.sessions.session import Session
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


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Job:
    """One ``code_run`` (every run is a job; the caller gets its result directly when it ends in time)."""

    job_id: str
    session: str
    code_sha256: str
    started_at: str
    t0: float
    done: threading.Event = field(default_factory=threading.Event)
    result: CodeRunDone | None = None
    figures: list[Path] = field(default_factory=list)  # PNG files in the server's own folder, never the session's

    def images(self) -> list[bytes]:
        """The PNG bytes of the job's figures, read from the server's own folder."""
        out = []
        for p in self.figures:
            try:
                out.append(p.read_bytes())
            except OSError:
                pass
        return out

    def pending(self, error: str) -> CodeRunPending:
        """The job's result while it runs, ``error`` saying what to do."""
        return {
            "ok": False,
            "pending": True,
            "status": "running",
            "session": self.session,
            "job_id": self.job_id,
            "code_sha256": self.code_sha256,
            "started_at": self.started_at,
            "elapsed_s": round(time.perf_counter() - self.t0, 1),
            "error": error,
        }


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
    """The code sessions of one store: admits sessions and their workers (at most ``max_sessions`` live), schedules
    each run as a job on its own thread, looks sessions and jobs up; start, run, poll, reset, close. Thread-safe.

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

    # -- looking up and admitting -------------------------------------------------------------------------
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
                s = Session(
                    name=name,
                    dir=d,
                    settings=self.settings,
                    isolation=self.isolation,
                    isolation_note=self.isolation_note,
                    state=self.state,
                )
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

    def _ensure_worker(self, s: Session) -> list[str]:
        """Start the session's worker if it is missing or dead (caller holds s.lock), after making room for it;
        returns the notes to report (``session state lost: ...`` when earlier state is gone). Raises SandboxError
        when it cannot start."""
        notes: list[str] = []
        if s.worker is not None and s.worker.proc.poll() is not None:
            s.lost = s.lost or f"the worker exited ({exit_text(s.worker.proc.returncode)})"
            kill(s.worker)
            s.worker = None
        if s.worker is None:
            if self.isolation == "unavailable":
                raise SandboxError(self.isolation_note)
            self._make_room(s)
            self._fonts.seed(s.dir)
            log_path = self.state / f"{s.name}.log"
            try:
                w, ready = launch(
                    self._spawner, self.settings, self.isolation, s.dir, self.allowed, log_path, _now(), START_TIMEOUT_S
                )
            except WorkerGone as exc:
                tail = log_path.read_text(errors="replace")[-1500:]
                raise SandboxError(
                    f"the session worker could not start ({exc}); worker log: {tail or '(empty)'}"
                ) from exc
            s.confinement = {
                k: ready.get(k)
                for k in ("uid", "seccomp", "landlock", "seccomp_note", "landlock_note", "capabilities_note")
                if k in ready
            }
            s.seq = 0
            s.worker = w
            self._write_marker(s)
        if s.lost:
            notes.append(f"session state lost: {s.lost}; a fresh worker was started and earlier variables are gone")
        return notes

    def _write_marker(self, s: Session) -> None:
        """The server's note of a session's cells (``<root>/.state/<session>.json``): after a restart the next run
        reports the state lost."""
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

    # -- scheduling ---------------------------------------------------------------------------------------
    def _work(self, s: Session, job: Job, code: str, timeout: float, notes: list[str]) -> None:
        """The job's thread: the run (:meth:`Session.run_cell`), the session's marker, the job's result (never left
        without one), the session released."""
        try:
            job.result, job.figures = s.run_cell(
                code, timeout, notes, job.job_id, job.code_sha256, job.t0, job.started_at
            )
            self._write_marker(s)
        except Exception as exc:  # noqa: BLE001 - never leave a job without a result
            job.result = {
                "ok": False,
                "status": "done",
                "session": s.name,
                "job_id": job.job_id,
                "cell": s.cells,
                "stdout": "",
                "stderr": "",
                "error": f"internal error: {exc}",
                "error_type": type(exc).__name__,
                "figures": [],
                "notes": notes,
                "state_lost": s.worker is None,
                "duration_ms": round((time.perf_counter() - job.t0) * 1000, 2),
                "code_sha256": job.code_sha256,
                "output_sha256": sha256_bytes(b"\x00\x00"),
                "isolation": self.isolation,
                "started_at": job.started_at,
                "finished_at": _now(),
            }
        finally:
            s.busy_job = None
            s.lock.release()
            job.done.set()

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

        Result: a :data:`~aisac_core.sessions.results.CodeRun`: when the run ended within ``wait_s``, a
        :class:`~aisac_core.sessions.results.CodeRunDone` (``{ok, status: "done", session, job_id, cell, stdout,
        stderr, result?, error?, error_type?, traceback?, figures: [{name, path, sha256, bytes}], notes,
        state_lost, duration_ms, code_sha256, output_sha256, isolation, started_at, finished_at}``); else a
        :class:`~aisac_core.sessions.results.CodeRunPending` (``{ok: false, pending: true, status: "running",
        job_id, ..., error: "still running ..."}``; poll :meth:`job_status`).

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
            code_sha256=sha256_bytes(code.encode("utf-8", "replace")),
            started_at=_now(),
            t0=time.perf_counter(),
        )
        try:
            notes = self._ensure_worker(s)  # here, so that a worker that cannot start is an error of this call
        except BaseException:
            s.lock.release()
            raise
        s.busy_job = job.job_id
        with self._lock:
            self._jobs[job.job_id] = job
            if len(self._jobs) > MAX_JOBS_KEPT:
                for jid in [j for j, v in self._jobs.items() if v.done.is_set()][: len(self._jobs) - MAX_JOBS_KEPT]:
                    self._jobs.pop(jid, None)
        threading.Thread(
            target=self._work, args=(s, job, code, timeout, notes), name=f"sandbox-{session}", daemon=True
        ).start()
        wait = self.settings.job_threshold_s if wait_s is None else wait_s
        if job.done.wait(max(0.0, min(wait, timeout + 30))) and job.result is not None:  # set before done
            return job.result, job.images()
        return job.pending(
            f"still running after {wait:g} s; poll data_code_job_status(job_id={job.job_id!r}) for the "
            f"result (the run is killed after {timeout:g} s)"
        ), []

    def job_status(self, job_id: str) -> tuple[CodeRun, list[bytes]]:
        """State of a run: a :class:`~aisac_core.sessions.results.CodeRunPending` (``status: "running"``, with
        ``elapsed_s``) or, when it has ended, its :class:`~aisac_core.sessions.results.CodeRunDone` (as :meth:`run`
        returns it) and its PNG images. Raises SandboxError for an unknown job id (jobs live in the server process;
        a restart forgets them)."""
        with self._lock:
            job = self._jobs.get(job_id) if isinstance(job_id, str) else None
        if job is None:
            raise SandboxError(
                f"unknown job {job_id!r}: job ids come from data_code_run and live until the server restarts"
            )
        if not job.done.is_set() or job.result is None:  # the result is set before done
            return job.pending("still running; poll again"), []
        return job.result, job.images()

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
            s.interrupt(f"cancelled (job {job_id})")
            job.done.wait(15)
            s.stopping = None
        status = job.result["status"] if job.done.is_set() and job.result is not None else "running"
        return {"job_id": job_id, "session": job.session, "status": status}

    def _call(self, session: str, req: dict[str, Any], timeout_s: float = 120.0) -> dict[str, Any]:
        s = self._session(session, create=req.get("op") == "load_frame")
        if not s.lock.acquire(timeout=1.0):
            raise SandboxError(f"session {session!r} is busy with job {s.busy_job}; poll data_code_job_status")
        try:
            notes = self._ensure_worker(s)
            reply, notes, _full = s.exchange(req, timeout_s, notes)
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
        following any link a cell planted there (:func:`aisac_core.sessions.sessionfs.write_file`). Returns the
        path. Raises SandboxError for a bad session or file name."""
        check_input_name(name)
        return self._session(session, create=True).write_input(f"inputs/{name}", data)

    def session_dir(self, session: str) -> Path:
        """The folder of ``session`` (created with the session)."""
        return self._session(session, create=True).dir

    def worker_pid(self, session: str) -> int | None:
        """Host pid of the Python worker of ``session`` (None when it has none); under bwrap/unshare the worker is
        a descendant of the wrapper process (:func:`aisac_core.sessions.isolation.find_worker_pid`). Used to read
        the worker's memory (``/proc/<pid>/status``), CPU time and network namespace."""
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
        st = self.settings
        return {
            "sessions": [s.info() for s in sessions],
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
        if s.worker is not None:
            s.interrupt("stopped by data_code_session_reset (or close)")  # its files are kept
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
