"""Result shapes of memory (the memory tools' output schemas are derived from them).

The functions of :mod:`aisac_core.memory` return plain dicts of these shapes; every key a result carries is
declared (optional keys ``NotRequired``, ``| None`` where the value may be None), and the top-level results forbid
other keys (``additionalProperties: false``). Times are ISO 8601 UTC strings (``...Z``).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

#: on every top-level result: no key besides the declared ones (``additionalProperties: false``)
closed = with_config(ConfigDict(extra="forbid"))


@closed
class Session(TypedDict):
    session_id: str
    title: str | None
    project: str | None
    created_at: str
    turn_count: int
    last_turn_at: str | None
    participant: NotRequired[str | None]
    host: NotRequired[str | None]
    started_at: NotRequired[str | None]


class PairRef(TypedDict):
    user_turn_id: int
    assistant_turn_id: int


@closed
class AddedTurn(TypedDict):
    turn_id: int
    session_id: str
    role: str
    created_at: str
    parent_id: int | None
    pair: PairRef | None


class Turn(TypedDict):
    turn_id: int
    session_id: str
    role: str
    content: str
    metadata: dict[str, Any]
    parent_id: int | None
    created_at: str
    answers_turn_id: NotRequired[int]
    speaker: NotRequired[str]
    truncated: NotRequired[bool]
    tokens: NotRequired[int]


@closed
class History(TypedDict):
    session_id: str
    turns: list[Turn]
    count: int
    next_cursor: str | None
    tokens: NotRequired[int]
    token_budget: NotRequired[int]


class TimeMention(TypedDict):
    """A time expression of a text resolved to calendar days (:mod:`aisac_core.memory.timeexpr`)."""

    text: str
    first: str
    last: str


class RelatedPair(TypedDict):
    """A recalled exchange: a user -> assistant pair (``kind`` "pair": ``user``/``assistant`` and their ids are given)
    or a turn alone (``kind`` "turn"); ``turns`` holds its turns either way."""

    score: float
    session_id: str
    session_title: str | None
    created_at: str
    tokens: int
    kind: NotRequired[Literal["pair", "turn"]]
    turns: NotRequired[list[Turn]]
    session_date: NotRequired[str]
    mentions: NotRequired[list[TimeMention]]
    in_time_range: NotRequired[bool]
    user_turn_id: NotRequired[int]
    assistant_turn_id: NotRequired[int]
    user: NotRequired[str]
    assistant: NotRequired[str]


class TimeRange(TypedDict):
    """The days a question's time expressions mean (resolved against ``reference``)."""

    first: str
    last: str
    reference: str
    mentions: list[TimeMention]


class Omitted(TypedDict):
    recent: int
    related: int


@closed
class Recall(TypedDict):
    session_id: str
    session_title: str | None
    query: str
    recent: list[Turn]
    related: list[RelatedPair]
    tokens: int
    token_budget: int
    omitted: Omitted
    took_ms: float
    scope: NotRequired[dict[str, str]]
    time_range: NotRequired[TimeRange | None]


class SearchHit(TypedDict):
    kind: Literal["pair", "turn"]
    score: float
    semantic_score: float
    keyword_score: float
    session_id: str
    turns: list[Turn]
    session_date: NotRequired[str]


@closed
class Search(TypedDict):
    hits: list[SearchHit]
    count: int
    total: int
    offset: int
    next_offset: int | None
    mode: str
    took_ms: float
    message: NotRequired[str]
    scope: NotRequired[dict[str, str]]


@closed
class Sessions(TypedDict):
    sessions: list[Session]
    total: int
    offset: int
    next_offset: int | None


@closed
class Export(TypedDict):
    """markdown: session_id, format, markdown; json: session, turns."""

    count: int
    next_cursor: str | None
    session_id: NotRequired[str]
    format: NotRequired[str]
    markdown: NotRequired[str]
    session: NotRequired[Session]
    turns: NotRequired[list[Turn]]


@closed
class Deleted(TypedDict):
    deleted: str
    turns_deleted: int
    pairs_deleted: int
    facts_kept: bool


class Fact(TypedDict):
    fact_id: int
    subject: str
    predicate: str
    object: str
    conditions: dict[str, Any]
    valid_at: str
    invalid_at: str | None
    source: str | None
    evidence_span: str | None
    run_id: str | None
    created_at: str
    current: NotRequired[bool]


@closed
class Recorded(TypedDict):
    fact: Fact
    superseded: Fact | None


@closed
class Facts(TypedDict):
    facts: list[Fact]
    total: int
    as_of: str
    offset: int
    next_offset: int | None


@closed
class Timeline(TypedDict):
    subject: str
    facts: list[Fact]
    total: int
    offset: int
    next_offset: int | None
