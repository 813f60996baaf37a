"""No hole in the trace: events that cannot reach the SQL store wait in a bounded local journal.

When the SQL store is unreachable (a PostgreSQL restart, a network cut), :meth:`TraceJournal.record` appends the
event to ``<data dir>/trace-journal.jsonl`` (one JSON object a line, file mode 0600, fsync'd) instead of losing it,
and writes the journal to the store, oldest first and with the events' own timestamps, as soon as a write succeeds
again (every later call tries). The journal is bounded (:data:`MAX_EVENTS` events).

**A gap** is a trace event that will never reach the store: the journal was full (the event is counted, not kept),
the store rejected the event itself (an error other than "unreachable"), or a journal line was torn by a crash.
Each is counted per run in ``<data dir>/trace-journal-lost.json`` (0600, rewritten atomically, so a count survives
a crash of the process), and the next successful write turns each run's count into one ``trace_gap`` event (kind
``trace_gap``, status ``gap``, arguments ``{dropped_events, from, to, reason}``). :mod:`aisac_core.trace.gaps`
reads both, and the events still waiting in the journal, for ``trace_verify`` and the dashboard: a hole in the
trace is reported, never silent. Journal files are changed under an exclusive ``flock`` of
``trace-journal.lock``, so processes sharing a data dir never write an event twice or lose one.

In strict audit mode (``AISAC_TRACE_STRICT=true``) a call whose event cannot be written to the store fails instead
(:class:`TraceUnavailableError`; the event is still journaled, or counted as lost).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from aisac_core.errors import AisacError
from aisac_core.store.sql import StoreError
from aisac_core.store.tables import utcnow

if sys.platform != "win32":
    import fcntl
else:  # pragma: no cover - Windows: one process per data dir (no owner daemon), the thread lock suffices
    fcntl = None

if TYPE_CHECKING:
    from collections.abc import Callable

#: events kept in the journal at most (each at most ~200 kB: arguments and result are truncated by the recorder)
MAX_EVENTS = 10_000
JOURNAL = "trace-journal.jsonl"
#: per run, the events lost and not yet reported by a ``trace_gap`` event: ``{run_id: [count, first, last, reason]}``
LOST = "trace-journal-lost.json"
LOCK = "trace-journal.lock"
#: the kind (and tool) of the event that reports lost events
GAP_KIND = "trace_gap"

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


def _rejected(exc: BaseException) -> str:
    """The reason recorded for an event the store refused."""
    return f"the SQL store rejected the event ({type(exc).__name__}: {exc})"[:300]


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` atomically (0600, fsync'd)."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_lost(data_dir: Path) -> dict[str, list[Any]]:
    """The lost events not yet written as ``trace_gap`` events: ``{run_id: [count, first ISO time, last ISO time,
    reason]}`` (empty when none, or when the file is unreadable)."""
    try:
        data = json.loads((data_dir / LOST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def pending_by_run(data_dir: Path) -> dict[str, int]:
    """Events waiting in the journal of ``data_dir``, per run (lines that do not parse count under ``""``)."""
    out: dict[str, int] = {}
    try:
        with (data_dir / JOURNAL).open("rb") as f:
            for line in f:
                run = line_run(line)
                out[run] = out.get(run, 0) + 1
    except FileNotFoundError:
        pass
    return out


def line_run(line: bytes) -> str:
    """The run id of a journal line, read from its start (the journal writes ``run_id`` first: no need to parse the
    whole event, and a torn line keeps its run); ``""`` when it cannot be read."""
    if line.startswith(b'{"run_id": "'):
        try:
            run = json.loads(line[11 : line.index(b'", ', 12) + 1])
        except ValueError:
            return ""
        return run if isinstance(run, str) else ""
    return ""


class TraceJournal:
    """The journal of one store's data dir; ``write(**event)`` writes one event to the SQL store (the recorder)."""

    def __init__(self, data_dir: Path, write: Callable[..., int], *, strict: bool = False) -> None:
        self.path = data_dir / JOURNAL
        self.lost_path = data_dir / LOST
        self._lock_path = data_dir / LOCK
        self._write = write
        self.strict = strict
        self._lock = threading.Lock()

    def pending(self) -> int:
        """Events waiting in the journal."""
        try:
            with self.path.open("rb") as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        """Exclusive ``flock`` of the data dir's journal files (processes sharing the data dir take turns)."""
        if fcntl is None:  # pragma: no cover - Windows
            yield
            return
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def record(self, **event: Any) -> int:
        """Write ``event`` (the recorder's keyword arguments) to the store, after whatever the journal holds; when the
        store is unreachable, keep it in the journal and return 0. An event the store rejects for another reason is
        counted as lost (reported as a ``trace_gap`` event) and the error raised. Raises
        :class:`TraceUnavailableError` in strict mode when the event did not reach the store."""
        event.setdefault("created_at", utcnow())
        with self._lock:
            try:
                if self.path.exists() or self.lost_path.exists():
                    with self._file_lock():
                        self._flush()
                return self._write(**event)
            except Exception as exc:
                if not _unreachable(exc):
                    self._lose(event, _rejected(exc))
                    if self.strict:
                        raise TraceUnavailableError(
                            f"strict audit mode: the trace event of {event.get('tool')} could not be written "
                            f"({type(exc).__name__}: {exc})"
                        ) from exc
                    raise
                with self._file_lock():
                    kept = self._append(event)
                log.warning("the SQL store is unreachable; trace event kept in %s (%s)", self.path, exc)
                if self.strict:
                    where = f"it waits in {self.path} and is written" if kept else "the journal is full: it is lost,"
                    raise TraceUnavailableError(
                        f"strict audit mode: the trace event of {event.get('tool')} could not be written (the SQL "
                        f"store is unreachable); {where} when the store is back"
                    ) from exc
                return 0

    def flush(self) -> int:
        """Write the journal to the store now; returns how many events were written. Raises what the store raises."""
        with self._lock, self._file_lock():
            return self._flush()

    def _lose(self, event: dict[str, Any], reason: str) -> None:
        """Count ``event`` as lost (durably, in :data:`LOST`)."""
        with self._file_lock():
            self._lose_locked(event, reason)

    def _append(self, event: dict[str, Any]) -> bool:
        """Keep ``event`` in the journal; False (and counted as lost) when the journal is full. Under the file lock."""
        if self.pending() >= MAX_EVENTS:
            self._lose_locked(event, f"the local journal was full ({MAX_EVENTS} events) while the SQL store was down")
            return False
        ev = {"run_id": str(event.get("run_id")), **event, "created_at": event["created_at"].isoformat()}
        line = json.dumps(ev, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def _lose_locked(self, event: dict[str, Any], reason: str) -> None:
        run = str(event.get("run_id"))
        when = event["created_at"]
        when = when.isoformat() if isinstance(when, datetime) else str(when)
        lost = read_lost(self.lost_path.parent)
        d = lost.setdefault(run, [0, when, when, reason])
        d[0] += 1
        d[2] = when
        if reason not in d[3]:
            d[3] = f"{d[3]}; {reason}"
        _write_private(self.lost_path, json.dumps(lost))
        log.error("a trace event of run %s is lost: %s", run, reason)

    def _flush(self) -> int:
        """Write the journal, then the lost counts as ``trace_gap`` events. Under the file lock."""
        written = 0
        if self.path.exists():
            lines = self.path.read_text(encoding="utf-8").splitlines()
            for i, line in enumerate(lines):
                try:
                    ev = json.loads(line)
                    ev["created_at"] = datetime.fromisoformat(ev["created_at"])
                except (ValueError, KeyError, TypeError):  # a torn line (a crash mid-write): that event is lost
                    run = line_run(line.encode()) or "unknown run"
                    self._lose_locked({"run_id": run, "created_at": utcnow()}, "a torn line in the local journal")
                    continue
                try:
                    self._write(**ev)
                except Exception as exc:
                    if not _unreachable(exc):  # this event itself is refused: lost, and the others still go
                        self._lose_locked(ev, _rejected(exc))
                        continue
                    _write_private(self.path, "".join(x + "\n" for x in lines[i:]))
                    raise
                written += 1
            self.path.unlink()
        lost = read_lost(self.lost_path.parent)
        for run, (n, first, last, reason) in list(lost.items()):
            self._write(
                run_id=run,
                server="trace",
                tool=GAP_KIND,
                arguments={"dropped_events": n, "from": first, "to": last, "reason": reason},
                result=None,
                status="gap",
                error=f"{n} trace events of this run were lost: {reason}",
                latency_ms=0.0,
                kind=GAP_KIND,
                created_at=datetime.fromisoformat(last),
            )
            del lost[run]
            if lost:
                _write_private(self.lost_path, json.dumps(lost))
            else:
                self.lost_path.unlink()
        return written
