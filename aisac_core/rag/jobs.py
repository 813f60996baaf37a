"""Background indexing jobs: one worker thread runs queued jobs in order; each job's state is a ``Job`` row.

A job is ``queued``, ``running``, then ``done`` or ``failed``, with progress (files done / total), the run's
counters and per-file failures. Jobs left ``queued`` / ``running`` by a process that died are marked
``interrupted`` when the next manager starts; running the same index again converges (see
:mod:`aisac_core.rag.indexer`).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, select

from aisac_core.errors import AisacError
from aisac_core.hashing import dumps
from aisac_core.rag.indexer import Counters, Indexer
from aisac_core.store.tables import Job, utcnow

if TYPE_CHECKING:
    from aisac_core.context import AppContext

log = logging.getLogger("aisac.indexing")


class JobManager:
    """Runs indexing jobs one at a time on a worker thread; state lives in the ``Job`` table.

    Jobs left ``queued``/``running`` by a process that died are marked ``interrupted`` when the next
    manager starts; re-running the same index converges (see :mod:`aisac_core.rag.indexer`).
    """

    def __init__(self, core: "AppContext") -> None:
        self.core = core
        self.indexer = Indexer(core)
        self._queue: queue.Queue[tuple[str, list[Path], bool] | None] = queue.Queue()
        self._events: dict[str, threading.Event] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        with Session(core.engine) as s:
            for job in s.exec(select(Job).where(Job.status.in_(["queued", "running"]))).all():
                job.status, job.message, job.finished_at = "interrupted", "the process running it stopped", utcnow()
                s.add(job)
            s.commit()

    def submit(self, paths: list[Path], catalog_only: bool = False) -> str:
        """Validate ``paths`` and queue a job; returns its id.

        Raises :class:`~aisac_core.rag.indexer.IndexingError` (a path is missing or unreadable) or
        :class:`~aisac_core.errors.BadPathError` (empty, a NUL byte, a symlink loop) before any job exists."""
        plan = self.indexer.plan(paths, catalog_only)  # fail fast on bad paths, before a job exists
        job_id = "job-" + uuid.uuid4().hex[:12]
        with Session(self.core.engine) as s:
            s.add(Job(job_id=job_id, kind="catalog" if catalog_only else "index",
                      params_json=dumps({"paths": [str(p) for p in paths], "catalog_only": catalog_only}),
                      total=len(plan.documents) + len(plan.catalog)))
            s.commit()
        self._events[job_id] = threading.Event()
        with self._lock:
            self._queue.put((job_id, paths, catalog_only))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._worker, name="aisac-index", daemon=True)
                self._thread.start()
        return job_id

    def _worker(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            job_id, paths, catalog_only = item
            self._run(job_id, paths, catalog_only)
            ev = self._events.get(job_id)
            if ev:
                ev.set()

    def _update(self, job_id: str, **fields: Any) -> None:
        with Session(self.core.engine) as s:
            job = s.get(Job, job_id)
            if job is None:
                return
            for k, v in fields.items():
                setattr(job, k, v)
            s.add(job)
            s.commit()

    def _run(self, job_id: str, paths: list[Path], catalog_only: bool) -> None:
        counters = Counters()
        failures: list[dict[str, str]] = []
        skipped: list[dict[str, str]] = []
        self._update(job_id, status="running", started_at=utcnow())
        last = [0.0]

        def progress(done: int, total: int, msg: str) -> None:
            now = time.monotonic()
            if now - last[0] >= 0.25 or done == total:
                last[0] = now
                self._update(job_id, done=done, total=total, message=msg, counters_json=dumps(counters.as_dict()),
                             failures_json=dumps(_stored(failures, skipped)))

        try:
            self.indexer.run(paths, catalog_only=catalog_only, progress=progress, failures=failures, counters=counters,
                             skipped=skipped)
            status, message = "done", None
        except AisacError as exc:  # a user error (a path vanished or turned into a loop since submit)
            status, message = "failed", str(exc)[:1000]
        except Exception as exc:
            log.exception("job %s failed", job_id)
            status, message = "failed", f"{type(exc).__name__}: {str(exc)[:1000]}"
        self._update(job_id, status=status, message=message, finished_at=utcnow(),
                     counters_json=dumps(counters.as_dict()), failures_json=dumps(_stored(failures, skipped)))

    def wait(self, job_id: str, timeout: float | None = None) -> bool:
        """Block until ``job_id`` ends (True) or ``timeout`` seconds pass (False)."""
        ev = self._events.get(job_id)
        if ev is None:
            return True
        return ev.wait(timeout)

    def status(self, job_id: str) -> dict[str, Any] | None:
        """The job as a dict (see :func:`job_dict`), or None when unknown."""
        with Session(self.core.engine) as s:
            job = s.get(Job, job_id)
            return job_dict(job) if job else None

    def list(self, limit: int = 20) -> list[dict[str, Any]]:
        """The most recent jobs, newest first."""
        with Session(self.core.engine) as s:
            rows = s.exec(select(Job).order_by(Job.created_at.desc()).limit(limit)).all()
            return [job_dict(j) for j in rows]

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the worker after the queued jobs, waiting up to ``timeout`` seconds."""
        with self._lock:
            thread = self._thread
            if thread is None or not thread.is_alive():
                return
            self._queue.put(None)
        thread.join(timeout)


def _stored(failures: list[dict[str, str]], skipped: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Failures and skipped paths in one list for the job row's ``failures_json`` (skipped entries carry
    ``"skipped": true``; :func:`job_dict` splits them again)."""
    return list(failures) + [{**s, "skipped": True} for s in skipped]


def job_dict(job: Job) -> dict[str, Any]:
    """A job as JSON-ready dict: ``{job_id, kind, status, done, total, message, params, counters, failures: [{path,
    error}], skipped: [{path, reason}], created_at, started_at, finished_at}``; ``skipped`` lists the symlinks
    (out of the registered roots, loops, broken) and unreadable folders the walk left out, with the reason."""
    stored = json.loads(job.failures_json)
    return {
        "job_id": job.job_id, "kind": job.kind, "status": job.status, "done": job.done, "total": job.total,
        "message": job.message, "params": json.loads(job.params_json),
        "counters": json.loads(job.counters_json),
        "failures": [f for f in stored if not f.get("skipped")],
        "skipped": [{"path": f.get("path"), "reason": f.get("reason")} for f in stored if f.get("skipped")],
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }

