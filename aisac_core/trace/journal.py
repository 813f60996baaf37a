"""No hole in the trace: events that cannot reach the SQL store wait in a bounded local journal.

When the SQL store is unreachable (a PostgreSQL restart, a network cut), :meth:`TraceJournal.record` appends the
event to ``<data dir>/trace-journal.jsonl`` (one JSON object a line, file mode 0600, fsync'd) instead of losing it,
and writes the journal to the store, oldest first and with the events' own timestamps, as soon as a write succeeds
again (every later call tries). The journal is bounded (:data:`MAX_EVENTS` events): past it, events are counted,
not kept, and the flush writes one ``trace_gap`` event per run saying how many were lost and between which times,
so the dashboard and ``trace_verify`` show the gap instead of a silent hole. In strict audit mode
(``AISAC_TRACE_STRICT=true``) a call whose event cannot be written to the store fails instead
(:class:`TraceUnavailableError`; the event is still journaled).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from aisac_core.errors import AisacError
from aisac_core.store.sql import StoreError
from aisac_core.store.tables import utcnow

if TYPE_CHECKING:
    from collections.abc import Callable

#: events kept in the journal at most (each at most ~200 kB: arguments and result are truncated by the recorder)
MAX_EVENTS = 10_000
JOURNAL = "trace-journal.jsonl"

log = logging.getLogger("aisac.provenance")


class TraceUnavailableError(AisacError, RuntimeError):
    """Strict audit mode: the trace event of a call could not be written to the SQL store."""


def _unreachable(exc: BaseException | None) -> bool:
    """Whether ``exc`` says the database cannot be reached (rather than rejecting this event): SQLAlchemy's
    ``OperationalError``/``InterfaceError`` or a lost connection, the driver's own (the recorder's DBAPI insert
    raises those unwrapped), or the store failing to open for one of them."""
    if exc is None:
        return False
    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, StoreError):
        return _unreachable(exc.__cause__)
    try:
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


class TraceJournal:
    """The journal of one store's data dir; ``write(**event)`` writes one event to the SQL store (the recorder)."""

    def __init__(self, data_dir: Path, write: Callable[..., int], *, strict: bool = False) -> None:
        self.path = data_dir / JOURNAL
        self._write = write
        self.strict = strict
        self._lock = threading.Lock()
        #: per run: [events dropped, first time, last time] since the journal was last written to the store
        self._dropped: dict[str, list[Any]] = {}

    def pending(self) -> int:
        """Events waiting in the journal."""
        try:
            with self.path.open("rb") as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    def record(self, **event: Any) -> int:
        """Write ``event`` (the recorder's keyword arguments) to the store, after whatever the journal holds; when the
        store is unreachable, keep it in the journal and return 0. Raises :class:`TraceUnavailableError` in strict
        mode when the event did not reach the store; other errors of the recorder as they are."""
        event.setdefault("created_at", utcnow())
        with self._lock:
            try:
                if self.path.exists() or self._dropped:
                    self._flush()
                return self._write(**event)
            except Exception as exc:
                if not _unreachable(exc):
                    raise
                self._append(event)
                log.warning("the SQL store is unreachable; trace event kept in %s (%s)", self.path, exc)
                if self.strict:
                    raise TraceUnavailableError(
                        f"strict audit mode: the trace event of {event.get('tool')} could not be written (the SQL "
                        f"store is unreachable); it waits in {self.path} and is written when the store is back"
                    ) from exc
                return 0

    def flush(self) -> int:
        """Write the journal to the store now; returns how many events were written. Raises what the store raises."""
        with self._lock:
            return self._flush()

    def _append(self, event: dict[str, Any]) -> None:
        if self.pending() >= MAX_EVENTS:
            run = str(event.get("run_id"))
            when = event["created_at"].isoformat()
            d = self._dropped.setdefault(run, [0, when, when])
            d[0] += 1
            d[2] = when
            return
        line = json.dumps({**event, "created_at": event["created_at"].isoformat()}, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def _flush(self) -> int:
        written = 0
        if self.path.exists():
            lines = self.path.read_text(encoding="utf-8").splitlines()
            for i, line in enumerate(lines):
                try:
                    ev = json.loads(line)
                except ValueError:  # a torn last line (a crash mid-write): nothing to write
                    continue
                ev["created_at"] = datetime.fromisoformat(ev["created_at"])
                try:
                    self._write(**ev)
                except Exception:
                    rest = "".join(x + "\n" for x in lines[i:])
                    self._rewrite(rest)
                    raise
                written += 1
            self.path.unlink()
        for run, (n, first, last) in list(self._dropped.items()):
            self._write(
                run_id=run,
                server="trace",
                tool="trace_gap",
                arguments={"dropped_events": n, "from": first, "to": last},
                result=None,
                status="gap",
                error=f"{n} trace events of this run were lost while the SQL store was unreachable "
                f"(the local journal was full: {MAX_EVENTS} events)",
                latency_ms=0.0,
                kind="trace_gap",
                created_at=datetime.fromisoformat(last),
            )
            del self._dropped[run]
        return written

    def _rewrite(self, text: str) -> None:
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
