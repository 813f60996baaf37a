"""Background indexing jobs, run by whichever process serving the store claims them first.

A job is ``queued``, ``running``, then ``done`` or ``failed`` (or ``interrupted``; or ``cancelling``, then
``cancelled`` after :meth:`JobManager.cancel`: a running job stops between two files, so every file is indexed whole
or not at all), with progress (files done / total), the run's counters and per-file failures, all in its ``Job``
row, so any process reads any job's status.
``submit`` queues the job in the table; each :class:`JobManager` runs a worker thread that claims queued jobs
through :class:`~aisac_core.store.jobqueue.JobQueue` (``FOR UPDATE SKIP LOCKED`` on PostgreSQL) and holds them with
a renewed lease. A job whose process died (its lease expired) is claimed again by any process and runs again from
the start; running an index again converges (see :mod:`aisac_core.rag.indexer`), so files finished before the
crash are skipped. One process on one laptop and N replicas on one PostgreSQL work the same way.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from aisac_core.errors import AisacError
from aisac_core.hashing import dumps
from aisac_core.rag.indexer import Counters, Indexer
from aisac_core.store.jobqueue import TERMINAL, JobQueue
from aisac_core.store.tables import Job

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.results import IndexJob

log = logging.getLogger("aisac.indexing")

#: kinds of job this manager runs
KINDS = ("index", "catalog")


class JobLost(AisacError, RuntimeError):
    """This process no longer holds the job's lease (another process claimed it): stop working on it."""


class JobCancelled(AisacError, RuntimeError):
    """The job was asked to stop (:meth:`JobManager.cancel`): stop before the next file."""


class JobManager:
    """Queues indexing jobs in the ``Job`` table and runs claimed ones, one at a time, on a worker thread.

    The worker starts on the first local submit or on :meth:`resume` (a serving process calls it at start) and
    looks for claimable work every ``settings.job_poll_seconds`` (at once after a local submit). On SQLite, where
    one process serves the store, it stops while no job is pending anywhere; on a server database, where other
    replicas submit jobs and may die holding one, it keeps looking until :meth:`shutdown`. A manager that only
    reads job status (``aisac status``) never starts it, so a short-lived process claims nothing.
    """

    def __init__(self, engine: Engine, indexer: Indexer, *, lease_s: float, poll_s: float) -> None:
        """``engine``: the store's SQL engine (the ``job`` table); ``indexer``: runs the jobs; ``lease_s``: seconds
        a claimed job is held without a renewal (``settings.job_lease_seconds``); ``poll_s``: seconds between two
        looks for claimable work (``settings.job_poll_seconds``)."""
        self.engine = engine
        self.indexer = indexer
        self.poll_s = poll_s
        self.queue = JobQueue(engine, lease_s=lease_s)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._done = threading.Condition()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._shared = engine.dialect.name != "sqlite"
        self._cancel_here: set[str] = set()  # jobs of this process asked to stop (seen before the next write)

    def resume(self) -> None:
        """Start the worker when it has work: always on a server database (replicas), on SQLite when jobs are
        pending (queued ones a stopped process never started, running ones whose process died)."""
        if self._shared or self.queue.pending(KINDS):
            self._ensure_worker()

    def submit(self, paths: list[Path], catalog_only: bool = False) -> str:
        """Validate ``paths`` and queue a job; returns its id.

        Raises :class:`~aisac_core.rag.indexer.IndexingError` (a path is missing or unreadable) or
        :class:`~aisac_core.errors.BadPathError` (empty, a NUL byte, a symlink loop) before any job exists."""
        plan = self.indexer.plan(paths, catalog_only)  # fail fast on bad paths, before a job exists
        job_id = "job-" + uuid.uuid4().hex[:12]
        self.queue.submit(
            job_id,
            "catalog" if catalog_only else "index",
            dumps({"paths": [str(p) for p in paths], "catalog_only": catalog_only}),
            total=len(plan.documents) + len(plan.catalog),
        )
        self._ensure_worker()
        self._wake.set()
        return job_id

    def _ensure_worker(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._worker, name="aisac-index", daemon=True)
                self._thread.start()

    def _worker(self) -> None:
        poll = self.poll_s
        away = False
        while not self._stop.is_set():
            try:
                job = self.queue.claim(KINDS)
                away = False
            except Exception as exc:  # the database is away for a moment (a restart): try again after a pause
                if not away:  # one line per outage, not one per poll
                    log.warning(
                        "cannot look for indexing jobs (%s); trying again every %g s",
                        str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__,
                        poll,
                    )
                away, job = True, None
            if job is not None:
                self._run(job)
                with self._done:
                    self._done.notify_all()
                continue
            try:
                pending = self.queue.pending(KINDS)
            except Exception:  # unknown while the database is away: keep looking
                pending = 1
            with self._lock:
                if not pending and not self._shared and not self._wake.is_set():
                    self._thread = None
                    return
            self._wake.wait(poll)
            self._wake.clear()

    def _run(self, job: dict[str, Any]) -> None:
        job_id = job["job_id"]
        params = json.loads(job["params_json"])
        paths = [Path(p) for p in params.get("paths", [])]
        catalog_only = bool(params.get("catalog_only"))
        counters = Counters()
        failures: list[dict[str, str]] = []
        skipped: list[dict[str, str]] = []
        lost = threading.Event()
        cancel = threading.Event()
        beat_stop = threading.Event()

        def stopped() -> None:  # why the lease-conditional write failed: a cancel request, or the lease lost
            if cancel.is_set() or self.queue.cancelling(job_id):
                cancel.set()
                raise JobCancelled(f"job {job_id} was cancelled")
            lost.set()
            raise JobLost(f"job {job_id} was claimed by another process")

        def heartbeat() -> None:  # renews the lease while a long file parses (no progress calls meanwhile)
            while not beat_stop.wait(self.queue.lease_s / 3):
                try:
                    if not self.queue.renew(job_id):
                        if self.queue.cancelling(job_id):
                            cancel.set()
                            continue  # renew keeps the lease of a stopping job
                        lost.set()
                        return
                except Exception:
                    log.exception("could not renew the lease of job %s", job_id)

        beat = threading.Thread(target=heartbeat, name=f"aisac-lease-{job_id}", daemon=True)
        beat.start()
        last = [0.0]
        #: files done as recorded by the process that held the job before (a takeover): the new run walks the
        #: finished files again (skipped unread), so its own count starts at 0; shown progress never goes back
        recorded = int(job.get("done") or 0)

        def progress(done: int, total: int, msg: str) -> None:  # called between files: the place to stop
            if lost.is_set():
                raise JobLost(f"job {job_id} was claimed by another process")
            if cancel.is_set() or job_id in self._cancel_here:
                cancel.set()
                stopped()
            now = time.monotonic()
            if now - last[0] >= 0.25 or done == total:
                last[0] = now
                if not self.queue.update(
                    job_id,
                    done=max(done, recorded),
                    total=total,
                    message=msg,
                    counters_json=dumps(counters.as_dict()),
                    failures_json=dumps(_stored(failures, skipped)),
                ):
                    stopped()

        try:
            self.indexer.run(
                paths,
                catalog_only=catalog_only,
                progress=progress,
                failures=failures,
                counters=counters,
                skipped=skipped,
            )
            status, message = "done", None
        except JobLost:
            log.warning("job %s: lease lost to another process; leaving the job to it", job_id)
            return
        except JobCancelled:
            status, message = "cancelled", "cancelled on request"
            try:
                self.indexer.flush()  # the files indexed before the stop are whole: keep them on disk
            except Exception:
                log.exception("job %s: flushing the vector store after the cancel failed", job_id)
        except AisacError as exc:  # a user error (a path vanished or turned into a loop since submit)
            status, message = "failed", str(exc)[:1000]
        except Exception as exc:
            log.exception("job %s failed", job_id)
            status, message = "failed", f"{type(exc).__name__}: {str(exc)[:1000]}"
        finally:
            beat_stop.set()
            beat.join(5)
            self._cancel_here.discard(job_id)
        if not self.queue.finish(
            job_id,
            status,
            message=message,
            counters_json=dumps(counters.as_dict()),
            failures_json=dumps(_stored(failures, skipped)),
        ):
            log.warning("job %s ended here after its lease was lost; its row is left to the process holding it", job_id)

    def cancel(self, job_id: str) -> IndexJob | None:
        """Ask index job ``job_id`` to stop; returns its status (see :func:`job_dict`), None for an unknown job.

        A queued job ends ``cancelled`` at once; a running one (here or in another process serving the store) reads
        ``cancelling`` until its runner reaches the next file boundary and ends it ``cancelled``: the file being
        indexed is finished first, so the store holds every file whole or not at all. An ended job is left as it is.
        """
        st = self.status(job_id)
        if st is None or st["kind"] not in KINDS:
            return None
        if self.queue.request_cancel(job_id) == "cancelling" and st.get("runner") == self.queue.owner:
            self._cancel_here.add(job_id)
        with self._done:
            self._done.notify_all()
        return self.status(job_id)

    def wait(self, job_id: str, timeout: float | None = None) -> bool:
        """Block until ``job_id`` ends (True) or ``timeout`` seconds pass (False); True for an unknown job. The job
        may run in this process or another one serving the store."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.status(job_id)
            if st is None or st["status"] in TERMINAL:
                return True
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            with self._done:
                self._done.wait(0.2 if left is None else min(0.2, left))

    def status(self, job_id: str) -> IndexJob | None:
        """The job as a dict (see :func:`job_dict`), or None when unknown."""
        with Session(self.engine) as s:
            job = s.get(Job, job_id)
            return job_dict(job) if job else None

    def list(self, limit: int = 20) -> list[IndexJob]:
        """The most recent jobs, newest first."""
        with Session(self.engine) as s:
            rows = s.exec(select(Job).order_by(col(Job.created_at).desc()).limit(limit)).all()
            return [job_dict(j) for j in rows]

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop claiming new jobs and wait up to ``timeout`` seconds for the running one; a job still queued stays
        in the table for the next process (or another replica) to run."""
        with self._lock:
            self._stop.set()
            thread = self._thread
        self._wake.set()
        if thread is not None and thread.is_alive():
            thread.join(timeout)


def _stored(failures: list[dict[str, str]], skipped: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Failures and skipped paths in one list for the job row's ``failures_json`` (skipped entries carry
    ``"skipped": true``; :func:`job_dict` splits them again)."""
    return list(failures) + [{**s, "skipped": True} for s in skipped]


def job_dict(job: Job) -> IndexJob:
    """A job as JSON-ready dict: ``{job_id, kind, status, done, total, message, params, counters, failures: [{path,
    error}], skipped: [{path, reason}], created_at, started_at, finished_at, attempts, runner}``; ``skipped`` lists
    the symlinks (out of the registered roots, loops, broken) and unreadable folders the walk left out, with the
    reason; ``runner`` names the process holding (or last holding) the job (``host:pid:random``), ``attempts`` how
    many times it was claimed."""
    stored = json.loads(job.failures_json)
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "status": job.status,
        "done": job.done,
        "total": job.total,
        "message": job.message,
        "params": json.loads(job.params_json),
        "counters": json.loads(job.counters_json),
        "failures": [f for f in stored if not f.get("skipped")],
        "skipped": [{"path": f.get("path"), "reason": f.get("reason")} for f in stored if f.get("skipped")],
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "attempts": job.attempts or 0,
        "runner": job.lease_owner,
    }
