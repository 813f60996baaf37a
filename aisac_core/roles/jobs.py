"""Background graph runs for ``roles_run``: a run that outlasts the caller's wait continues as a job.

A job runs in the serving process that started it (an asyncio task: the graph may use the caller's connection for
sampling, so another process cannot take it over). With the store's engine, the job is also a row of the ``job``
table (kind ``roles``, held by this process's lease, :mod:`aisac_core.store.jobqueue`), so any process serving the
store (another replica behind the same proxy) answers ``roles_job_status`` for it, with the result once it is done;
when the process running it dies, the lease expires and the job reads ``interrupted``. The run's steps are in the
trace either way (the run id is known from the start). :meth:`RunJobs.cancel` stops a run (its task is cancelled at
its next await, i.e. within the step under way; a run of another process is flagged ``cancelling`` in the table and
stopped by its process at the next lease renewal) and the job reads ``cancelled``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypedDict

from sqlmodel import Session, col, select

from aisac_core.hashing import dumps
from aisac_core.jsontypes import json_object
from aisac_core.roles.results import RolesJob
from aisac_core.store.jobqueue import JobQueue
from aisac_core.store.tables import Job, utcnow

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

MAX_JOBS = 100
#: the ``job.kind`` of a roles run (no worker claims it: it runs where it started)
KIND = "roles"

log = logging.getLogger("aisac.roles")


class _LocalJob(TypedDict):
    # a job of this process: its ids, its task and when it started (time.time())
    job_id: str
    run_id: str
    task: asyncio.Task[Mapping[str, object]]
    started: float


class RunJobs:
    """``start(run_id, factory)`` -> job id; ``wait(job_id, seconds)``; ``status(job_id)``; ``list()``.

    ``engine`` (optional): the store's engine; with it, jobs are also rows of the ``job`` table (see the module
    docstring) and ``status``/``list`` answer for jobs of other processes too. ``lease_s``: the lease (seconds) this
    process renews every third of while a job runs.
    """

    def __init__(self, engine: Engine | None = None, *, lease_s: float = 30.0) -> None:
        self._jobs: dict[str, _LocalJob] = {}
        self._cancelled: set[str] = set()  # jobs of this process stopped on request
        self.queue = JobQueue(engine, lease_s=lease_s) if engine is not None else None

    def start(
        self,
        run_id: str,
        factory: Callable[[], Awaitable[Mapping[str, object]]],
        params: Mapping[str, object] | None = None,
    ) -> str:
        """Start ``factory()`` as a task of the running loop; returns the job id. ``params`` (JSON-ready, optional)
        is recorded with the job (e.g. the task and mode)."""
        job_id = "rjob-" + uuid.uuid4().hex[:10]
        if self.queue is not None:
            self.queue.start_here(job_id, KIND, dumps({"run_id": run_id, **(params or {})}))
        task = asyncio.get_running_loop().create_task(self._run(job_id, factory))
        self._jobs[job_id] = {"job_id": job_id, "run_id": run_id, "task": task, "started": time.time()}
        if len(self._jobs) > MAX_JOBS:  # forget the oldest finished jobs
            for jid in [j for j, v in self._jobs.items() if v["task"].done()][: len(self._jobs) - MAX_JOBS]:
                self._jobs.pop(jid, None)
        return job_id

    async def _run(self, job_id: str, factory: Callable[[], Awaitable[Mapping[str, object]]]) -> Mapping[str, object]:
        queue = self.queue
        if queue is None:
            return await factory()
        renew = asyncio.get_running_loop().create_task(self._renew(queue, job_id))
        try:
            result = await factory()
        except asyncio.CancelledError:
            if job_id in self._cancelled:
                await self._finish(queue, job_id, "cancelled", message="cancelled on request")
            else:
                await self._finish(queue, job_id, "interrupted", message="the server stopped before the run ended")
            raise
        except Exception as exc:
            await self._finish(queue, job_id, "failed", message=f"{type(exc).__name__}: {exc}"[:1000])
            raise
        finally:
            renew.cancel()
        await self._finish(queue, job_id, "done", result_json=dumps(result))
        return result

    async def _renew(self, queue: JobQueue, job_id: str) -> None:
        while True:
            await asyncio.sleep(min(queue.lease_s / 3, 2.0))
            try:
                if not await asyncio.to_thread(queue.renew, job_id) and await asyncio.to_thread(
                    queue.cancelling, job_id
                ):
                    self.cancel(job_id)  # another process asked (the job table says cancelling)
                    return
            except Exception:  # the database is away for a moment; the next renewal tries again
                log.exception("could not renew the lease of roles job %s", job_id)

    def cancel(self, job_id: str) -> RolesJob | None:
        """Stop roles job ``job_id``; returns its status (see :meth:`status`), None for an unknown job. A job of this
        process is cancelled at once (``cancelled``); another process's is flagged ``cancelling`` in the job table
        and stopped by its process within a few seconds. An ended job is left as it is."""
        job = self._jobs.get(job_id)
        if job is not None:
            if not job["task"].done():
                self._cancelled.add(job_id)
                job["task"].cancel()
                return {**(self.status(job_id) or {}), "status": "cancelled"}
            return self.status(job_id)
        if self.queue is None or self._stored(job_id) is None:
            return None
        self.queue.request_cancel(job_id)
        return self._stored(job_id)

    @staticmethod
    async def _finish(queue: JobQueue, job_id: str, status: str, **fields: str) -> None:
        try:
            await asyncio.shield(asyncio.to_thread(queue.finish, job_id, status, **fields))
        except Exception:  # the answer still reaches this process's callers; other processes read the lease out
            log.exception("could not record the end of roles job %s", job_id)

    async def wait(self, job_id: str, seconds: float) -> None:
        """Wait up to ``seconds`` for a job of this process to end (the job goes on after a timeout)."""
        job = self._jobs[job_id]
        try:
            await asyncio.wait_for(asyncio.shield(job["task"]), timeout=max(0.0, seconds))
        except TimeoutError:
            pass
        except asyncio.CancelledError:  # the job was cancelled (reported by status()), unless this wait was
            current = asyncio.current_task()
            if not job["task"].cancelled() or (current is not None and current.cancelling()):
                raise
        except Exception:  # reported by status()
            pass

    def status(self, job_id: str) -> RolesJob | None:
        """``{job_id, run_id, status: running|done|failed|interrupted|cancelled, elapsed_s, result?, error?}``, None
        for an unknown id. A job of this process is read from its task; another process's from the ``job`` table."""
        job = self._jobs.get(job_id)
        if job is None:
            return self._stored(job_id)
        t: asyncio.Task[Mapping[str, object]] = job["task"]
        out: RolesJob = {"job_id": job_id, "run_id": job["run_id"], "elapsed_s": round(time.time() - job["started"], 2)}
        if not t.done():
            return {**out, "status": "running"}
        exc = None if t.cancelled() else t.exception()
        if t.cancelled():
            if job_id in self._cancelled:
                return {**out, "status": "cancelled", "error": "cancelled on request"}
            return {**out, "status": "interrupted", "error": "the server stopped before the run ended"}
        if exc is not None:
            return {**out, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        return {**out, "status": "done", "result": dict(t.result())}

    def _stored(self, job_id: str) -> RolesJob | None:
        if self.queue is None:
            return None
        self.queue.reap(job_id)
        with Session(self.queue.engine) as s:
            row = s.get(Job, job_id)
        if row is None or row.kind != KIND:
            return None
        return _row_status(row, with_result=True)

    def list(self) -> list[RolesJob]:
        """The 20 most recent jobs without their results: of every process serving the store when jobs are in the
        ``job`` table, else of this process."""
        if self.queue is None:
            return [_without_result(self.status(j)) for j in list(self._jobs)][-20:]
        with Session(self.queue.engine) as s:
            rows = s.exec(select(Job).where(Job.kind == KIND).order_by(col(Job.created_at).desc()).limit(20)).all()
        return [_row_status(r, with_result=False) for r in reversed(rows)]


def _without_result(status: RolesJob | None) -> RolesJob:
    out = RolesJob(**status) if status else RolesJob()
    out.pop("result", None)
    return out


def _row_status(row: Job, *, with_result: bool) -> RolesJob:
    params = json_object(json.loads(row.params_json or "{}"))
    run_id = params.get("run_id")
    started = row.started_at or row.created_at
    end = row.finished_at or utcnow()
    out: RolesJob = {
        "job_id": row.job_id,
        "run_id": run_id if isinstance(run_id, str) else None,
        "status": row.status,
        "elapsed_s": round((end - started).total_seconds(), 2) if started else 0.0,
        "runner": row.lease_owner,
    }
    if row.status in ("failed", "interrupted", "cancelled") and row.message:
        out["error"] = row.message
    if with_result and row.status == "done" and row.result_json:
        out["result"] = json.loads(row.result_json)
    return out
