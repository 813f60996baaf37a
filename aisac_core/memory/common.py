"""What every part of memory shares: the input error, the limits, time parsing and formatting, argument checks,
the JSON shapes of sessions and turns."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, overload

from sqlmodel import Session

from aisac_core.errors import AisacError
from aisac_core.hashing import dumps
from aisac_core.memory.results import Session as SessionResult
from aisac_core.memory.results import Turn as TurnResult
from aisac_core.store.tables import MemorySession, Turn
from aisac_core.store.vectors import Cond

if TYPE_CHECKING:
    pass

ROLES = ("user", "assistant", "router", "planner", "coordinator", "evaluator", "tool")
#: largest turn content, in characters
MAX_CONTENT_CHARS = 100_000
#: largest metadata / fact conditions, as canonical JSON characters
MAX_METADATA_CHARS = 100_000
MAX_QUERY_CHARS = 2_000
MAX_TITLE_CHARS = 500
MAX_FACT_FIELD_CHARS = 10_000
#: characters of a pair's text that are embedded and kept in the vector payload (MiniLM reads 256 tokens)
PAIR_TEXT_CHARS = 4_000
#: search hits carry at most this many characters of each turn's content (``truncated`` says so)
SNIPPET_CHARS = 2_000
#: keyword candidates read from SQL per search (newest first)
KEYWORD_CANDIDATES = 500
SEMANTIC_CANDIDATES = 100


class MemoryInputError(AisacError, ValueError):
    """Bad memory input (unknown session, empty content, a limit exceeded, ...); the message says what
    was wrong and what is accepted."""


def _utc(dt: datetime) -> datetime:
    """Aware UTC (a naive value is taken as UTC)."""
    return dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)


@overload
def iso(dt: datetime) -> str: ...


@overload
def iso(dt: datetime | None) -> str | None: ...


def iso(dt: datetime | None) -> str | None:
    """ISO 8601 UTC with ``Z`` (None for None)."""
    if dt is None:
        return None
    return _utc(dt).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_time(value: str | datetime | None, name: str = "as_of") -> datetime | None:
    """Parse an ISO 8601 date or date-time (``2026-03-01``, ``2026-03-01T12:00:00Z``, ``...+02:00``;
    without an offset: UTC) to an aware UTC datetime; ``now`` is the current time. Raises MemoryInputError."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return _utc(value)
    if not isinstance(value, str) or not value.strip():
        raise MemoryInputError(
            f"{name} must be an ISO 8601 date or date-time string, e.g. '2026-03-01' or "
            f"'2026-03-01T12:00:00Z', got {value!r}"
        )
    v = value.strip()
    if v.lower() == "now":
        return _now()
    try:
        dt = datetime.fromisoformat(v[:-1] + "+00:00" if v.endswith(("Z", "z")) else v)
    except ValueError:
        raise MemoryInputError(
            f"{name} {value!r} is not an ISO 8601 date or date-time; use e.g. '2026-03-01', "
            f"'2026-03-01T12:00:00Z' or '2026-03-01T14:00:00+02:00' (no offset = UTC)"
        ) from None
    return _utc(dt)


def _now() -> datetime:
    return datetime.now(UTC)


def _check_str(value: Any, name: str, limit: int, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        if not required and value == "":
            return None
        raise MemoryInputError(f"{name} is empty: give a non-empty string")
    if len(value) > limit:
        raise MemoryInputError(f"{name} is {len(value):,} characters long; the limit is {limit:,} characters")
    return value


def _check_json(value: Any, name: str) -> str:
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        raise MemoryInputError(f"{name} must be a JSON object (a dict), got {type(value).__name__}")
    text = dumps(value)
    if len(text) > MAX_METADATA_CHARS:
        raise MemoryInputError(f"{name} is {len(text):,} characters as JSON; the limit is {MAX_METADATA_CHARS:,}")
    return text


def _check_int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise MemoryInputError(f"{name} must be an integer from {lo} to {hi:,}, got {value!r}")
    return value


def _session(db: Session, session_id: str) -> MemorySession:
    if not isinstance(session_id, str) or not session_id:
        raise MemoryInputError("session_id is empty: memory_start_session returns one; memory_list_sessions lists them")
    row = db.get(MemorySession, session_id)
    if row is None:
        raise MemoryInputError(
            f"unknown session id {session_id!r}: memory_start_session creates one, memory_list_sessions lists them"
        )
    return row


def session_dict(s: MemorySession, turn_count: int, last_turn_at: datetime | None) -> SessionResult:
    """JSON-ready session with its number of turns and the time of its last turn (None without turns)."""
    return {
        "session_id": s.id,
        "title": s.title,
        "project": s.project,
        "created_at": iso(s.created_at),
        "turn_count": turn_count,
        "last_turn_at": iso(last_turn_at),
        "participant": s.participant,
        "host": s.host,
        "started_at": iso(s.started_at),
    }


def session_time(s: MemorySession) -> datetime:
    """When a session's conversation took place: ``started_at`` (an imported session), else ``created_at``."""
    return _utc(s.started_at or s.created_at)


def turn_time(t: Turn, s: MemorySession) -> datetime:
    """When a turn was said: its session's ``started_at`` for an imported session (its turns share the session's
    date), else the turn's own ``created_at``."""
    return _utc(s.started_at) if s.started_at is not None else _utc(t.created_at)


def stored_id(row_id: int | None) -> int:
    """The id of a stored row (its model types it ``int | None``: None only before the insert is flushed)."""
    assert row_id is not None, "row not stored yet"
    return row_id


def turn_dict(t: Turn, max_chars: int | None = None) -> TurnResult:
    """JSON-ready turn; content cut to ``max_chars`` (with ``truncated: true``) when given."""
    content = t.content
    truncated = max_chars is not None and len(content) > max_chars
    out: TurnResult = {
        "turn_id": stored_id(t.id),
        "session_id": t.session_id,
        "role": t.role,
        "content": content[:max_chars] if truncated else content,
        "metadata": json.loads(t.metadata_json or "{}"),
        "parent_id": t.parent_id,
        "created_at": iso(t.created_at),
    }
    if t.pair_user_id is not None:
        out["answers_turn_id"] = t.pair_user_id
    if t.speaker:
        out["speaker"] = t.speaker
    if truncated:
        out["truncated"] = True
    return out


#: the keys of a scope (:class:`Scope`), as a tool argument or a connection's default (``_meta`` ``aisac/memory_scope``)
SCOPE_KEYS = ("session_id", "project", "participant", "host", "since", "until")


@dataclass(frozen=True)
class Scope:
    """Which turns recall and search may return: those of one session, of sessions of a project, of a participant
    (whose history), recorded from a host, or said within ``[since, until]`` (the turn's time: its session's
    ``started_at`` for an imported session, else its own time). Every given key must hold (AND); None = any.

    The scope is enforced in the store queries themselves: a payload filter of the vector query (Qdrant) or its
    ``WHERE`` clause (pgvector) and the ``WHERE`` clause of the SQL keyword search, never by dropping hits
    afterwards, so a page of results is never short and never leaks a turn from outside."""

    session_id: str | None = None
    project: str | None = None
    participant: str | None = None
    host: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def parse(cls, value: Any, name: str = "scope") -> Scope:
        """A scope from a JSON object with keys among :data:`SCOPE_KEYS` (strings; ``since`` / ``until`` ISO 8601
        dates or date-times, a date-only ``until`` meaning the end of that day). Raises MemoryInputError on an unknown
        key or a bad value."""
        if value is None:
            return cls()
        if isinstance(value, Scope):
            return value
        if not isinstance(value, dict):
            raise MemoryInputError(f"{name} must be a JSON object with keys among {', '.join(SCOPE_KEYS)}")
        bad = sorted(set(value) - set(SCOPE_KEYS))
        if bad:
            raise MemoryInputError(f"{name}: unknown key(s) {bad}; use {', '.join(SCOPE_KEYS)}")
        kw: dict[str, Any] = {}
        for key in ("session_id", "project", "participant", "host"):
            v = value.get(key)
            if v is None or v == "":
                continue
            kw[key] = _check_str(v, f"{name}.{key}", MAX_TITLE_CHARS)
        since = parse_time(value.get("since") or None, f"{name}.since")
        until_raw = value.get("until") or None
        until = parse_time(until_raw, f"{name}.until")
        if until is not None and isinstance(until_raw, str) and len(until_raw.strip()) == 10:
            until = until.replace(hour=23, minute=59, second=59, microsecond=999999)  # a date: through its end
        if since is not None and until is not None and since > until:
            raise MemoryInputError(f"{name}: since ({iso(since)}) is after until ({iso(until)})")
        return cls(**kw, since=since, until=until)

    def over(self, default: Scope) -> Scope:
        """This scope with ``default``'s value for every key it leaves open (a connection's default scope under a
        call's own)."""
        return Scope(**{f.name: getattr(self, f.name) or getattr(default, f.name) for f in fields(self)})

    def empty(self) -> bool:
        """No key set: everything is in scope."""
        return all(getattr(self, f.name) is None for f in fields(self))

    def conds(self) -> list[Cond]:
        """The payload conditions of the ``dialogue`` collection for this scope (every point carries ``session_id``,
        ``project``, ``participant``, ``host`` and its turn time ``ts`` in seconds since the epoch)."""
        out = [
            Cond(k, eq=getattr(self, k)) for k in ("session_id", "project", "participant", "host") if getattr(self, k)
        ]
        if self.since is not None or self.until is not None:
            out.append(
                Cond(
                    "ts",
                    gte=float(int(self.since.timestamp())) if self.since else None,
                    lte=float(int(self.until.timestamp())) if self.until else None,
                )
            )
        return out

    def as_dict(self) -> dict[str, str]:
        """The keys set, as strings (times ISO 8601): what results echo as ``scope``."""
        out: dict[str, str] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None:
                out[f.name] = iso(v) if isinstance(v, datetime) else str(v)
        return out
