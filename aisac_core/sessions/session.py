"""One code session: its folder, its worker process, its cells, and what a run does from request to result.

A :class:`Session` owns its worker (:class:`~aisac_core.sessions.isolation.Worker`, started for it by the
:class:`~aisac_core.sessions.manager.SandboxManager`, which admits it), its count of cells, the note of state it
lost, and its files (the session folder; under bwrap/unshare the worker's sized tmpfs, copied to the folder after
each request). :meth:`Session.run_cell` is one run: the request to the worker (:func:`isolation.exchange
<aisac_core.sessions.isolation.exchange>`), the checks after it (threads left running, the disk quota) and the
result built from the worker's untrusted reply (:func:`aisac_core.sessions.replies.finish`).
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aisac_core.sessions import sessionfs
from aisac_core.sessions.errors import SandboxError
from aisac_core.sessions.isolation import (
    Worker,
    WorkerGone,
    WorkerProtocolError,
    WorkerTimeout,
    copy_out,
    exchange,
    kill,
    session_view,
)
from aisac_core.sessions.replies import finish
from aisac_core.sessions.results import CodeRunDone, SessionInfo
from aisac_core.settings import SandboxSettings

__all__ = ["LOST", "Session"]

LOST = "the session state is lost (the next call starts a fresh worker)"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _full_note(copied: tuple[int, int, int, int] | None, quota: int) -> str | None:
    """The note for a session folder that is full, from :func:`~aisac_core.sessions.isolation.copy_out`'s figures
    (files refused, folders too deep, free entries, free bytes of the tmpfs); None when it is not full."""
    if copied is None:
        return None
    refused, deep, free_entries, free_bytes = copied
    if refused:
        return (
            f"disk quota exceeded: {refused} file(s) of the session were not copied to its folder on disk, where "
            f"they would pass {quota / 2**20:,.0f} MB of allocated blocks (AISAC_SANDBOX_DISK_MB); they stay in "
            "the live session only"
        )
    if deep:
        return (
            f"{deep} folder(s) nested deeper than {sessionfs.MIRROR_DEPTH} levels stay in the live session only: "
            "they are not copied to the session folder on disk and are gone when the worker restarts"
        )
    if free_entries == 0:
        return (
            f"disk quota exceeded: the session folder holds the most entries it may ({sessionfs.MAX_ENTRIES:,}); "
            "creating more failed (No space left on device)"
        )
    if free_bytes < max(quota // 100, 64 * 1024):
        return (
            f"disk quota exceeded: the session folder is full ({quota / 2**20:,.0f} MB, AISAC_SANDBOX_DISK_MB); "
            "writes past it failed (No space left on device)"
        )
    return None


@dataclass
class Session:
    """A named code session: its folder, its worker (None until the first call or after a loss), its state.

    ``settings``, ``isolation`` (``bwrap``/``unshare``/``none``), ``isolation_note`` and ``state`` (the server's own
    folder for the sessions' figures) come from the manager; ``tmpfs``: the folder the worker sees is a sized tmpfs
    (bwrap/unshare), copied to ``dir`` after each request. ``lock`` is held by the one request under way."""

    name: str
    dir: Path
    settings: SandboxSettings
    isolation: str
    isolation_note: str
    state: Path
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

    def __post_init__(self) -> None:
        self.tmpfs = self.isolation in ("bwrap", "unshare")
        self.quota = self.settings.disk_mb * 1024 * 1024

    # -- a run ------------------------------------------------------------------------------------------------
    def run_cell(
        self, code: str, timeout_s: float, notes: list[str], job_id: str, code_sha256: str, t0: float, started_at: str
    ) -> tuple[CodeRunDone, list[Path]]:
        """Run ``code`` as the session's next cell in its worker (started by the manager; caller holds ``lock``)
        and return ``(result, paths of the run's stored figures)``; ``notes`` (e.g. earlier state lost) open the
        result's notes. A worker that dies, overruns ``timeout_s`` or breaks the protocol gives an ``ok: false``
        result and the session's state is marked lost."""
        cell = self.cells + 1
        t_start = time.time()
        reply, notes, full = self.exchange(
            {"op": "run", "code": code, "cpu_s": self.settings.cpu_s, "cell": cell}, timeout_s, notes, copy=True
        )
        if full:
            notes.append(full)
        self._after_run(reply, notes, t_start)
        lost = any(n.startswith("session state lost") for n in notes)
        if self.worker is not None:  # alive after the run: the loss (if any) has been reported
            self.lost = None
        self.cells = cell
        self.last_used_at = _now()
        figures_dir = self.state / self.name / "figures"
        result, figures = finish(
            reply,
            notes,
            settings=self.settings,
            session=self.name,
            cells=self.cells,
            job_id=job_id,
            code_sha256=code_sha256,
            t0=t0,
            started_at=started_at,
            state_lost=lost,
            figures_dir=figures_dir,
            isolation=self.isolation,
            isolation_note=self.isolation_note,
            confinement=self.confinement,
        )
        if reply.get("status") == "cancelled":  # stopped by the manager's cancel: not a run that ended by itself
            result["status"] = "cancelled"
        return result, figures

    def exchange(
        self, req: dict[str, Any], timeout_s: float, notes: list[str], copy: bool = False
    ) -> tuple[dict[str, Any], list[str], str | None]:
        """Send ``req`` to the session's worker and wait for the reply (caller holds ``lock``; the worker was started
        by the manager). ``copy``: copy the tmpfs to disk after it. Returns (reply, notes, note of a full folder or
        None). A wall-time overrun kills the worker; a dead worker gives an ``ok: false`` reply naming the cause,
        and the session's state is marked lost."""
        w = self.worker
        if w is None:
            return (
                {"ok": False, "error_type": "SandboxError", "error": f"the session has no worker; {LOST}"},
                notes,
                None,
            )
        self.seq += 1  # requests carry an unpredictable tag: a reply forged in advance by a cell cannot match it
        req = {**req, "seq": f"{self.seq}-{secrets.token_hex(8)}"}
        t_check = [0.0]

        def watch() -> str | None:  # isolation none: the disk quota, checked at most every 2 s while a run waits
            if self.tmpfs or req.get("op") != "run" or time.monotonic() - t_check[0] < 2.0:
                return None
            t_check[0] = time.monotonic()
            used = sessionfs.usage(self.dir)
            if used <= self.quota:  # files it deleted but holds open count too: no folder walk sees them
                used += sessionfs.deleted_but_open(w.pid)
            held = "too many entries" if used >= sys.maxsize else f"{used / 2**20:,.0f} MB"
            return (
                (
                    f"disk quota exceeded: the session folder holds {held} (with files deleted but still open), "
                    f"over the limit of {self.quota / 2**20:,.0f} MB (AISAC_SANDBOX_DISK_MB)"
                )
                if used > self.quota
                else None
            )

        full = None
        try:
            reply, left, copied = exchange(
                w,
                req,
                time.monotonic() + timeout_s,
                self.settings,
                watch,
                (self.dir, self.isolation, self.quota, self.sync_lock) if copy and self.tmpfs else None,
            )
            full = _full_note(copied, self.quota)
            if left:  # ... and is killed with the worker: nothing a cell started outlives its run
                what = f"cell {req.get('cell')}" if req.get("op") == "run" else f"the {req.get('op')} request"
                self.lose(w, f"{what} left {left}; the worker was stopped and restarts on the next call", "", "")
                notes.append(f"session state lost: {self.lost}; its variables are gone, its files are kept")
        except WorkerProtocolError as exc:
            reply = self.lose(
                w,
                f"the worker was stopped during cell {req.get('cell')}: {exc}",
                "SandboxViolation",
                f"the run was stopped: {exc}; {LOST}",
            )
        except WorkerTimeout:
            reply = self.lose(
                w,
                f"the run of cell {req.get('cell')} exceeded its wall time of {timeout_s:g} s and "
                "the worker was killed",
                "TimeoutError",
                f"wall time limit of {timeout_s:g} s exceeded: the worker was killed and {LOST}",
            )
        except WorkerGone as exc:
            if self.stopping:
                kill(w)
                self.worker = None
                if self.stopping.startswith("cancelled"):  # the variables went with the worker: the next run says so
                    self.lost = f"cell {req.get('cell')} was cancelled and its worker stopped"
                    return (
                        {
                            "ok": False,
                            "error_type": "Cancelled",
                            "status": "cancelled",
                            "error": f"the run was {self.stopping}; {LOST}",
                        },
                        notes,
                        None,
                    )
                return {"ok": False, "error_type": "Stopped", "error": f"the run was {self.stopping}"}, notes, None
            reply = self.lose(
                w,
                f"the worker died during cell {req.get('cell')} ({exc})",
                "WorkerDied",
                f"the session worker died ({exc}), probably at a memory, CPU or file-size limit; {LOST}",
            )
        return reply, notes, full

    def _after_run(self, reply: dict[str, Any], notes: list[str], t_start: float) -> None:
        """Checks after every run: threads the run left running stop the worker (state lost). Under isolation
        ``none`` (no tmpfs): a session folder over its disk quota (allocated blocks, any depth) loses the files this
        run wrote (their inode change time is at or after ``t_start``); when files the worker deleted but keeps open
        (:func:`~aisac_core.sessions.sessionfs.enforce_quota`) still put it over, the worker is stopped, which
        releases them (state lost)."""
        stray = reply.pop("stray_threads", 0)
        if stray and self.worker is not None:
            kill(self.worker)
            self.worker = None
            self.lost = (
                f"cell {reply.get('cell')} left {stray if isinstance(stray, int) else 'some'} thread(s) running; "
                "the worker was stopped so that nothing outlives its run"
            )
            notes.append(f"session state lost: {self.lost}")
        if self.tmpfs:  # the kernel holds the quota (a sized tmpfs); exchange's copy noted a full folder
            return
        quota = self.quota
        w = self.worker
        used, removed, left, hidden = sessionfs.enforce_quota(self.dir, t_start, quota, w.pid if w else None)
        if removed >= 0:
            held = f"more than {sessionfs.MAX_ENTRIES:,} entries" if used == sys.maxsize else f"{used / 2**20:,.0f} MB"
            notes.append(
                f"disk quota exceeded: the session folder held {held}, over the limit of "
                f"{quota / 2**20:,.0f} MB (AISAC_SANDBOX_DISK_MB); the {removed} file(s) this run wrote were "
                "removed"
            )
        if hidden and left + hidden > quota and w is not None:  # only the worker's end releases those blocks
            kill(w)
            self.worker = None
            self.lost = (
                f"cell {reply.get('cell')} kept {hidden / 2**20:,.0f} MB in deleted files open, which with the "
                f"session folder passes the disk quota of {quota / 2**20:,.0f} MB (AISAC_SANDBOX_DISK_MB); the "
                "worker was stopped to release them"
            )
            notes.append(f"session state lost: {self.lost}")

    # -- files and stopping -----------------------------------------------------------------------------------
    def sync(self, w: Worker | None = None, wait: bool = False) -> str | None:
        """Copy the session's tmpfs (bwrap/unshare) to its folder on disk, the worker (``w``, default its own)
        stopped first (:func:`~aisac_core.sessions.isolation.copy_out`; ``wait``: until the kernel reports it
        stopped - before it is killed). Returns a note when the folder is full (the kernel refused writes past
        ``AISAC_SANDBOX_DISK_MB``), else None; a no-op under isolation ``none`` and for a worker that is gone."""
        w = w or self.worker
        if not self.tmpfs or w is None or w.proc.poll() is not None:
            return None
        with self.sync_lock:
            try:
                copied = copy_out(w, self.dir, self.isolation, self.quota, wait=wait)
            except (OSError, SandboxError):
                return None
        return _full_note(copied, self.quota)

    def lose(self, w: Worker, why: str, error_type: str, error: str) -> dict[str, Any]:
        """Stop the session's worker ``w`` (its state is lost: ``why`` is reported by the next call; its files are
        kept) and return the ``ok: false`` reply of the interrupted request."""
        self.sync(w, wait=True)
        kill(w)
        self.worker = None
        self.lost = why
        return {"ok": False, "error_type": error_type, "error": error}

    def interrupt(self, why: str) -> None:
        """Stop the worker under a running request (``why``: what the interrupted run reports, e.g. ``cancelled
        (job ...)``); the files it wrote so far are kept. The request's own thread sees the worker gone and
        finishes; the caller clears :attr:`stopping` once that thread is done."""
        w = self.worker
        self.stopping = why
        if w is not None:
            self.sync(w, wait=True)  # the files the run wrote so far are kept
            kill(w, close=False)  # the run's reader sees the worker gone and finishes the job

    def write_input(self, rel: str, data: bytes) -> Path:
        """Write ``data`` as ``rel`` in the session folder (and the live worker's tmpfs), following no link a cell
        planted (:func:`aisac_core.sessions.sessionfs.write_file`). Returns the path on disk."""
        path = sessionfs.write_file(self.dir, rel, data)
        w = self.worker
        if self.tmpfs and w is not None and w.proc.poll() is None:  # the live worker's tmpfs gets it too
            with self.sync_lock:
                sessionfs.write_file(session_view(w, self.dir, self.isolation), rel, data)
        return path

    def info(self) -> SessionInfo:
        """The session as ``data_code_session_list`` shows it."""
        w = self.worker
        alive = w is not None and w.proc.poll() is None
        return {
            "session": self.name,
            "dir": str(self.dir),
            "alive": alive,
            "pid": w.pid if w is not None and alive else None,
            "cells": self.cells,
            "created_at": self.created_at,
            "last_used_at": self.last_used_at,
            "busy_job": self.busy_job,
            "state_lost": self.lost,
            "confinement": self.confinement,
        }
