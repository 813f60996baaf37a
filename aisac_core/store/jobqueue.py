"""The jobs table as a work queue shared by every process that serves the store.

A job is a :class:`~aisac_core.store.tables.Job` row. Any process (one owner on one laptop, or N replicas on one
PostgreSQL) submits a job by inserting it ``queued``; any process claims the oldest claimable job in one transaction:

- PostgreSQL: ``SELECT ... FOR UPDATE SKIP LOCKED`` (https://www.postgresql.org/docs/15/sql-select.html#SQL-FOR-UPDATE-SHARE):
  two replicas claiming at once lock different rows, neither waits for the other, and no row is claimed twice;
- SQLite: the same statement without the clause (SQLite has none) inside ``BEGIN IMMEDIATE``, which already admits
  one writer at a time.

The claim writes a **lease**: ``lease_owner`` (this process's :attr:`JobQueue.owner`) and ``lease_expires_at``
(now + ``lease_s``). The process running the job renews the lease well before it expires (:meth:`JobQueue.renew`);
a process that dies stops renewing, its job's lease expires, and the job becomes claimable again (``attempts``
counts the claims; after ``max_attempts`` the job is ``interrupted`` instead, so a file that kills its process
every time cannot take every replica down in turn). Every write of a running job's row is conditional on the lease
(``WHERE lease_owner = me``), so a process that lost its lease (stalled longer than ``lease_s``) cannot overwrite
the new owner's progress: :meth:`JobQueue.update` tells it to stop.

Cancelling (:meth:`JobQueue.request_cancel`): a ``queued`` job becomes ``cancelled`` at once; a ``running`` one
becomes ``cancelling``, which fails the runner's next conditional write (:meth:`JobQueue.update` returns False), so
the runner stops at its next check, asks :meth:`JobQueue.cancelling` why, and ends the job ``cancelled``
(:meth:`JobQueue.finish`). A ``cancelling`` job whose runner died (lease expired) is ended ``cancelled`` by the next
:meth:`JobQueue.claim` or :meth:`JobQueue.reap`.

Times are the database server's clock on PostgreSQL (``now()``), so replicas on machines with skewed clocks agree
on when a lease expired; SQLite is one machine.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, Result, and_, func, or_, update
from sqlmodel import Session, col, select

from aisac_core.store.tables import Job, utcnow

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: states a job ends in
TERMINAL = frozenset({"done", "failed", "interrupted", "cancelled"})
#: the state of a running job asked to stop (its runner ends it ``cancelled`` at its next check)
CANCELLING = "cancelling"


def _rowcount(result: Result[Any]) -> int:
    """Rows an ``UPDATE`` matched (``Session.execute`` is typed as returning a plain ``Result``)."""
    return cast(CursorResult[Any], result).rowcount


def process_id() -> str:
    """A name for this process that is unique across machines and restarts: ``host:pid:random``."""
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class JobQueue:
    """Submit, claim, renew, update and finish jobs of the ``job`` table (see the module docstring).

    ``engine``: the store's engine; ``lease_s`` (seconds, > 0): how long a claim holds without renewal;
    ``max_attempts`` (>= 1): claims of one job before it is given up as ``interrupted``.
    """

    def __init__(self, engine: Engine, *, lease_s: float = 30.0, max_attempts: int = 3) -> None:
        if lease_s <= 0 or max_attempts < 1:
            raise ValueError("lease_s must be > 0 and max_attempts >= 1")
        self.engine = engine
        self.lease_s = float(lease_s)
        self.max_attempts = int(max_attempts)
        self.owner = process_id()

    # ---- time ------------------------------------------------------------------------------------

    def _now(self, s: Session) -> datetime:
        """The database's clock on PostgreSQL (one clock for every replica), this machine's on SQLite."""
        if self.engine.dialect.name == "postgresql":
            value = s.exec(select(func.now())).one()
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        return utcnow()

    # ---- the queue ---------------------------------------------------------------------------------

    def submit(self, job_id: str, kind: str, params_json: str, total: int = 0) -> None:
        """Insert job ``job_id`` as ``queued`` (any process may claim it)."""
        with Session(self.engine) as s:
            s.add(Job(job_id=job_id, kind=kind, params_json=params_json, total=total, created_at=self._now(s)))
            s.commit()

    def start_here(self, job_id: str, kind: str, params_json: str) -> None:
        """Insert job ``job_id`` as ``running`` under this process's lease: a job that only this process can run
        (a ``roles_run`` graph answering its caller) but whose status every process reads. Its kind must not be one
        that workers claim; when this process dies, :meth:`reap` marks it ``interrupted``."""
        with Session(self.engine) as s:
            now = self._now(s)
            s.add(
                Job(
                    job_id=job_id,
                    kind=kind,
                    status="running",
                    params_json=params_json,
                    created_at=now,
                    started_at=now,
                    lease_owner=self.owner,
                    lease_expires_at=now + timedelta(seconds=self.lease_s),
                    attempts=1,
                )
            )
            s.commit()

    def reap(self, job_id: str) -> bool:
        """Mark ``job_id`` ``interrupted`` when it is ``running`` under an expired lease (its process died); True when
        it was. For jobs of kinds no worker claims again (see :meth:`start_here`)."""
        with Session(self.engine) as s:
            now = self._now(s)
            s.execute(
                update(Job)
                .where(col(Job.job_id) == job_id, col(Job.status) == CANCELLING, col(Job.lease_expires_at) < now)
                .values(status="cancelled", finished_at=now, lease_expires_at=None)
            )
            res = s.execute(
                update(Job)
                .where(col(Job.job_id) == job_id, col(Job.status) == "running", col(Job.lease_expires_at) < now)
                .values(
                    status="interrupted",
                    finished_at=now,
                    lease_expires_at=None,
                    message="the process running it stopped before it ended; its trace keeps the steps it made",
                )
            )
            s.commit()
            return bool(_rowcount(res))

    def claim(self, kinds: Iterable[str]) -> dict[str, Any] | None:
        """Claim the oldest claimable job of one of ``kinds`` for this process, or None when there is none.

        Claimable: ``queued``, or ``running`` with an expired lease (or none: a row written before leases existed).
        Returns ``{job_id, kind, params_json, attempts, done}`` (``done``: the count the previous runner recorded). A
        job whose expired lease already had ``max_attempts``
        claims is marked ``interrupted`` here and the next one is tried.
        """
        kinds = list(kinds)
        self._settle_cancelling(kinds)
        while True:
            with Session(self.engine) as s:
                now = self._now(s)
                expired = and_(
                    col(Job.status) == "running",
                    or_(col(Job.lease_expires_at).is_(None), col(Job.lease_expires_at) < now),
                )
                q = (
                    select(Job)
                    .where(col(Job.kind).in_(kinds), or_(col(Job.status) == "queued", expired))
                    .order_by(col(Job.created_at), col(Job.job_id))
                    .limit(1)
                    .with_for_update(skip_locked=True)
                )
                job = s.exec(q).first()
                if job is None:
                    return None
                if job.status == "running" and job.attempts >= self.max_attempts:
                    job.status, job.finished_at, job.lease_owner = "interrupted", now, None
                    job.message = (
                        f"the process running it stopped {job.attempts} times (the job is not retried "
                        "again); run the same request again to resume, finished files are kept"
                    )
                    s.add(job)
                    s.commit()
                    continue
                job.status, job.lease_owner = "running", self.owner
                job.lease_expires_at = now + timedelta(seconds=self.lease_s)
                job.attempts = (job.attempts or 0) + 1
                job.started_at = job.started_at or now
                if job.attempts > 1:
                    job.message = f"claimed again (attempt {job.attempts}): the process running it stopped"
                s.add(job)
                out = {
                    "job_id": job.job_id,
                    "kind": job.kind,
                    "params_json": job.params_json,
                    "attempts": job.attempts,
                    "done": job.done or 0,  # recorded by the previous runner: a takeover never shows less
                }
                s.commit()
                return out

    def _settle_cancelling(self, kinds: list[str]) -> None:
        """End ``cancelled`` the ``cancelling`` jobs of ``kinds`` whose runner died (lease expired)."""
        with Session(self.engine) as s:
            now = self._now(s)
            s.execute(
                update(Job)
                .where(
                    col(Job.kind).in_(kinds),
                    col(Job.status) == CANCELLING,
                    or_(col(Job.lease_expires_at).is_(None), col(Job.lease_expires_at) < now),
                )
                .values(
                    status="cancelled",
                    finished_at=now,
                    lease_expires_at=None,
                    message="cancelled; the process running it stopped before it could end the job",
                )
            )
            s.commit()

    def request_cancel(self, job_id: str) -> str | None:
        """Ask job ``job_id`` to stop; returns its status afterwards, None for an unknown job.

        ``queued`` -> ``cancelled`` at once (nothing ran); ``running`` -> ``cancelling`` (the process running it stops
        at its next check and ends it ``cancelled``); a job already ended or cancelling is left as it is."""
        with Session(self.engine) as s:
            now = self._now(s)
            s.execute(
                update(Job)
                .where(col(Job.job_id) == job_id, col(Job.status) == "queued")
                .values(status="cancelled", finished_at=now, message="cancelled before it started")
            )
            s.execute(
                update(Job)
                .where(col(Job.job_id) == job_id, col(Job.status) == "running")
                .values(status=CANCELLING, message="cancel requested; stopping at the next check")
            )
            s.commit()
            job = s.get(Job, job_id)
            return job.status if job is not None else None

    def cancelling(self, job_id: str) -> bool:
        """Whether job ``job_id`` is held by this process and was asked to stop (see :meth:`request_cancel`)."""
        with Session(self.engine) as s:
            job = s.get(Job, job_id)
            return job is not None and job.status == CANCELLING and job.lease_owner == self.owner

    def renew(self, job_id: str) -> bool:
        """Extend this process's lease on ``job_id``; False when the lease was lost (another process claimed the
        job after this one failed to renew in time, or the job ended) or the job was asked to stop (``cancelling``:
        the lease is still extended, so the job stays this process's while it stops)."""
        with Session(self.engine) as s:
            now = self._now(s)
            s.execute(
                update(Job)
                .where(col(Job.job_id) == job_id, col(Job.lease_owner) == self.owner, col(Job.status) == CANCELLING)
                .values(lease_expires_at=now + timedelta(seconds=self.lease_s))
            )
            s.commit()
        return self.update(job_id)

    def update(self, job_id: str, **fields: Any) -> bool:
        """Write ``fields`` (columns of :class:`Job`) of a job this process holds, renewing its lease; False when
        this process no longer holds it (then the caller must stop working on the job)."""
        with Session(self.engine) as s:
            now = self._now(s)
            values = {**fields, "lease_expires_at": now + timedelta(seconds=self.lease_s)}
            res = s.execute(
                update(Job)
                .where(col(Job.job_id) == job_id, col(Job.lease_owner) == self.owner, col(Job.status) == "running")
                .values(**values)
            )
            s.commit()
            return bool(_rowcount(res))

    def finish(self, job_id: str, status: str, **fields: Any) -> bool:
        """End a job this process holds with ``status`` (``done``/``failed``/``interrupted``/``cancelled``) and
        ``fields``; False when the lease was lost (the row is then left to its new owner). A job asked to stop
        (``cancelling``) ends ``cancelled`` unless ``status`` is ``done`` (the work completed before it stopped)."""
        if status not in TERMINAL:
            raise ValueError(f"not a final job status: {status!r}")
        with Session(self.engine) as s:
            now = self._now(s)
            ended = "done" if status == "done" else "cancelled"  # work that completed anyway stays done
            stopped = s.execute(
                update(Job)
                .where(col(Job.job_id) == job_id, col(Job.lease_owner) == self.owner, col(Job.status) == CANCELLING)
                .values(
                    status=ended,
                    finished_at=now,
                    lease_expires_at=None,
                    **{**fields, "message": fields.get("message") if ended == "done" else "cancelled on request"},
                )
            )
            res = s.execute(
                update(Job)
                .where(col(Job.job_id) == job_id, col(Job.lease_owner) == self.owner, col(Job.status) == "running")
                .values(status=status, finished_at=now, lease_expires_at=None, **fields)
            )
            s.commit()
            return bool(_rowcount(stopped) or _rowcount(res))

    def pending(self, kinds: Iterable[str]) -> int:
        """Number of jobs of ``kinds`` that are queued, running or cancelling anywhere (this process or another)."""
        with Session(self.engine) as s:
            return int(
                s.exec(
                    select(func.count())
                    .select_from(Job)
                    .where(col(Job.kind).in_(list(kinds)), col(Job.status).in_(["queued", "running", CANCELLING]))
                ).one()
            )
