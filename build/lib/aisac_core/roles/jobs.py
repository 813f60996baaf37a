"""Background graph runs for ``roles_run``: a run that outlasts the caller's wait continues as a job.

Jobs live in the serving process (an asyncio task each); their results are also in the trace (the run id is known
from the start), so a finished job's answer and evaluation survive a restart there.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Awaitable, Callable

MAX_JOBS = 100


class RunJobs:
    """``start(fn)`` -> job id; ``wait(job_id, seconds)``; ``status(job_id)``."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, Any]] = {}

    def start(self, run_id: str, factory: Callable[[], Awaitable[dict[str, Any]]]) -> str:
        """Start ``factory()`` as a task of the running loop; returns the job id."""
        job_id = "rjob-" + uuid.uuid4().hex[:10]
        task = asyncio.get_running_loop().create_task(factory())
        self._jobs[job_id] = {"job_id": job_id, "run_id": run_id, "task": task, "started": time.time()}
        if len(self._jobs) > MAX_JOBS:  # forget the oldest finished jobs
            for jid in [j for j, v in self._jobs.items() if v["task"].done()][: len(self._jobs) - MAX_JOBS]:
                self._jobs.pop(jid, None)
        return job_id

    async def wait(self, job_id: str, seconds: float) -> None:
        """Wait up to ``seconds`` for the job to end (the job goes on after a timeout)."""
        job = self._jobs[job_id]
        try:
            await asyncio.wait_for(asyncio.shield(job["task"]), timeout=max(0.0, seconds))
        except asyncio.TimeoutError:
            pass
        except Exception:  # reported by status()
            pass

    def status(self, job_id: str) -> dict[str, Any] | None:
        """``{job_id, run_id, status: running|done|failed, elapsed_s, result?, error?}``, None for an unknown id."""
        job = self._jobs.get(job_id)
        if job is None:
            return None
        t: asyncio.Task = job["task"]
        out: dict[str, Any] = {"job_id": job_id, "run_id": job["run_id"],
                               "elapsed_s": round(time.time() - job["started"], 2)}
        if not t.done():
            return {**out, "status": "running"}
        exc = t.exception()
        if exc is not None:
            return {**out, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        return {**out, "status": "done", "result": t.result()}

    def list(self) -> list[dict[str, Any]]:
        """Recent jobs without their results."""
        return [{k: v for k, v in (self.status(j) or {}).items() if k != "result"} for j in list(self._jobs)][-20:]
