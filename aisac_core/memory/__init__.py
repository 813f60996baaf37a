"""Memory: sessions, turns, dialogue recall and temporal facts (the memory server's logic; no MCP types).

Sessions and turns live in the SQL store (:class:`~aisac_core.store.tables.MemorySession`,
:class:`~aisac_core.store.tables.Turn`). A turn's ``created_at`` is assigned inside the ``BEGIN IMMEDIATE``
transaction that inserts it and is made strictly greater than the session's previous turn, so two
clients adding turns at once get one stable order: (created_at, id).

Dialogue index: every turn is embedded (MiniLM dense + BM25 sparse, the same embedder as documents) into the
``dialogue`` collection, one point per turn: an assistant turn answering the session's latest unanswered user turn as
the pair of both (``Turn.pair_user_id`` records it), every other turn alone, so every turn can be recalled whatever
the roles and their order. The payload (version 2, :data:`~aisac_core.memory.recall.PAYLOAD_VERSION`) carries the
scope fields (``session_id``, ``project``, ``participant``, ``host``), the speakers, the turn's time ``ts`` (its
session's ``started_at`` for an imported session) and the days it is about (``t_lo``..``t_hi``: its day and the days
its time expressions mean, :mod:`~aisac_core.memory.timeexpr`). The SQL row commits first; the vector upsert follows
under a deterministic point id (uuid5 of the turn id), so a crash in between is repaired by
:func:`reconcile_dialogue`, which runs once per store on first use (:meth:`MemoryService.dialogue`) and upserts every
turn the vector store lacks or holds with an older payload version.

Recall (:meth:`MemoryService.recall`): the last N turns of the session plus the related older exchanges within a
:class:`~aisac_core.memory.common.Scope` (filtered in the vector query; hybrid convex fusion as in
:mod:`aisac_core.rag.search`; time expressions of the query resolved against the session's date favour the exchanges
of those days; an optional second, multi-hop round), assembled within a token budget counted with the embedding
model's tokenizer.

Facts (:class:`~aisac_core.store.tables.Fact`): ``(subject, predicate, object)`` valid from ``valid_at``
until ``invalid_at``. Recording a fact for a subject + predicate closes the fact that was valid at the
new ``valid_at`` (its ``invalid_at`` becomes the new ``valid_at``); a back-dated fact is inserted into
the timeline and closed by the next later one. Matching of subject and predicate is case-insensitive.

:class:`~aisac_core.memory.service.MemoryService` is the API (one per store, built by the application context with
the store's engine, vector store and embedder; it holds the per-store state). Modules:
:mod:`~aisac_core.memory.service`, :mod:`~aisac_core.memory.sessions` (sessions, turns, history, export, delete),
:mod:`~aisac_core.memory.recall` (the dialogue index, reconcile, recall, search), :mod:`~aisac_core.memory.timeexpr`
(time expressions), :mod:`~aisac_core.memory.facts` (temporal facts), :mod:`~aisac_core.memory.results` (the result
shapes) and :mod:`~aisac_core.memory.common` (limits, checks, scopes, JSON shapes); this package re-exports their
public API.
"""

from aisac_core.memory.common import (
    KEYWORD_CANDIDATES,
    MAX_CONTENT_CHARS,
    MAX_FACT_FIELD_CHARS,
    MAX_METADATA_CHARS,
    MAX_QUERY_CHARS,
    MAX_TITLE_CHARS,
    PAIR_TEXT_CHARS,
    ROLES,
    SCOPE_KEYS,
    SEMANTIC_CANDIDATES,
    SNIPPET_CHARS,
    MemoryInputError,
    Scope,
    iso,
    parse_time,
    session_dict,
    turn_dict,
)
from aisac_core.memory.facts import FactLog, fact_dict
from aisac_core.memory.recall import DialogueRecall, count_tokens, point_id, reconcile_dialogue
from aisac_core.memory.service import MemoryService
from aisac_core.memory.sessions import EXPORT_MAX_TURNS, SessionLog, render_markdown
from aisac_core.store.collections import DIALOGUE

__all__ = [
    "DIALOGUE",
    "EXPORT_MAX_TURNS",
    "KEYWORD_CANDIDATES",
    "MAX_CONTENT_CHARS",
    "MAX_FACT_FIELD_CHARS",
    "MAX_METADATA_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_TITLE_CHARS",
    "PAIR_TEXT_CHARS",
    "ROLES",
    "SCOPE_KEYS",
    "SEMANTIC_CANDIDATES",
    "SNIPPET_CHARS",
    "Scope",
    "MemoryInputError",
    "MemoryService",
    "SessionLog",
    "DialogueRecall",
    "FactLog",
    "count_tokens",
    "fact_dict",
    "iso",
    "parse_time",
    "point_id",
    "reconcile_dialogue",
    "render_markdown",
    "session_dict",
    "turn_dict",
]
