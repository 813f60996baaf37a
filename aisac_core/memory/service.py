"""The memory service of one store: sessions, turns, dialogue recall and search, export, temporal facts.

:class:`MemoryService` is what the memory tools call (``app.memory.recall(...)``); the composition root
(the application context, ``app.memory``) builds one per store. It holds the store's memory state - whether the
``dialogue`` collection was reconciled with the turns, and the lock that serialises writes to it - and delegates to
the functions of :mod:`~aisac_core.memory.sessions`, :mod:`~aisac_core.memory.recall` and
:mod:`~aisac_core.memory.facts`, which the method of the same name documents in full.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from aisac_core.memory import facts, sessions
from aisac_core.memory.common import Scope
from aisac_core.memory.recall import DEFAULT_HOPS, SYNC_LOOKBACK_S, count_tokens, reconcile_dialogue
from aisac_core.memory.recall import recall as recall_context
from aisac_core.memory.recall import search as search_turns
from aisac_core.memory.results import (
    AddedTurn,
    Deleted,
    Export,
    Facts,
    History,
    Recall,
    Recorded,
    Search,
    Session,
    Sessions,
    Timeline,
)
from aisac_core.store.tables import utcnow

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.store.vectors import VectorStore


class MemoryService:
    """Memory over one store.

    ``engine``: the store's SQL engine (schema migrated); ``vectors``: a zero-argument callable giving the store's
    vector store with the ``dialogue`` collection ready (it is opened on the first call that needs it, not when the
    service is built); ``embedder``: the dense + sparse embedder whose tokenizer also counts token budgets.

    Every method raises :class:`~aisac_core.memory.common.MemoryInputError` (an ``AisacError``) on bad input, with a
    message saying what was wrong and what is accepted; results are the plain dicts of
    :mod:`aisac_core.memory.results`.
    """

    def __init__(self, engine: Engine, vectors: Callable[[], VectorStore], embedder: Embedder) -> None:
        self.engine = engine
        self.embedder = embedder
        self._vectors = vectors
        #: serialises this store's writes to the ``dialogue`` collection (pairs added, reconciled, deleted)
        self.upsert_lock = threading.Lock()
        self._reconcile_lock = threading.Lock()
        self._reconciled = False
        #: highest assistant turn id synced into the dialogue collection, and when (the incremental sync's start)
        self._synced_id = 0
        self._synced_at: datetime | None = None

    # the dialogue index

    def dialogue(self, sync: bool = True) -> VectorStore:
        """The vector store holding the ``dialogue`` collection, in sync with the pairs recorded in SQL: on the first
        call every pair is compared by id (:meth:`reconcile_dialogue`); on later calls the pairs recorded since the
        last sync (by any process sharing the SQL store) are looked up by id and the missing ones embedded, unless
        ``sync`` is False (a write that adds its own pair: reads - recall, search - sync)."""
        vs = self._vectors()
        with self._reconcile_lock:
            if not self._reconciled:
                self._reconcile(vs, 256)
            elif sync:
                self._sync(vs, 256)
        return vs

    def reconcile_dialogue(self, batch: int = 256) -> int:
        """Upsert every pair recorded in SQL that the ``dialogue`` collection lacks, ``batch`` pairs per embedding
        call; returns how many were added (0 when nothing is missing). Afterwards :meth:`dialogue` does not
        reconcile again."""
        vs = self._vectors()
        with self._reconcile_lock:
            return self._reconcile(vs, batch)

    def _reconcile(self, vs: VectorStore, batch: int) -> int:
        started = utcnow()
        added, self._synced_id = reconcile_dialogue(self.engine, self.embedder, vs, self.upsert_lock, batch)
        self._synced_at = started
        self._reconciled = True
        return added

    def _sync(self, vs: VectorStore, batch: int) -> int:
        started = utcnow()
        since = self._synced_at - timedelta(seconds=SYNC_LOOKBACK_S) if self._synced_at else None
        added, self._synced_id = reconcile_dialogue(
            self.engine, self.embedder, vs, self.upsert_lock, batch, after_id=max(self._synced_id, 1), since=since
        )
        self._synced_at = started
        return added

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text by the embedding model's tokenizer (no special tokens)."""
        return count_tokens(self.embedder, texts)

    # sessions and turns

    def start_session(
        self,
        title: str | None = None,
        project: str | None = None,
        participant: str | None = None,
        host: str | None = None,
        started_at: str | datetime | None = None,
    ) -> Session:
        """Create a session, optionally for a participant, from a host, dated ``started_at``
        (:func:`~aisac_core.memory.sessions.start_session`)."""
        return sessions.start_session(self.engine, title, project, participant, host, started_at)

    def add_turn(
        self,
        session_id: str,
        role: str,
        content: str,
        metadata: dict[str, Any] | None = None,
        parent_id: int | None = None,
        speaker: str | None = None,
    ) -> AddedTurn:
        """Append a turn and index it: an assistant turn answering the latest user turn as a pair with it, any other
        turn alone (:func:`~aisac_core.memory.sessions.add_turn`)."""
        return sessions.add_turn(self, session_id, role, content, metadata, parent_id, speaker)

    def get_history(
        self,
        session_id: str,
        cursor: str | int | None = None,
        limit: int = 50,
        roles: list[str] | None = None,
        token_budget: int | None = None,
    ) -> History:
        """A page of a session's turns, oldest first (:func:`~aisac_core.memory.sessions.get_history`)."""
        return sessions.get_history(self.engine, self.embedder, session_id, cursor, limit, roles, token_budget)

    def list_sessions(self, project: str | None = None, limit: int = 50, offset: int = 0) -> Sessions:
        """Sessions, newest first, paged (:func:`~aisac_core.memory.sessions.list_sessions`)."""
        return sessions.list_sessions(self.engine, project, limit, offset)

    def export_session(
        self, session_id: str, format: str = "markdown", cursor: str | int | None = None, limit: int = 1000
    ) -> Export:
        """A session as Markdown or JSON, in parts (:func:`~aisac_core.memory.sessions.export_session`)."""
        return sessions.export_session(self.engine, session_id, format, cursor, limit)

    def session_markdown(self, session_id: str, max_turns: int = 1000) -> str:
        """The session's first ``max_turns`` turns as Markdown (the session resource)."""
        return sessions.session_markdown(self.engine, session_id, max_turns)

    def delete_session(self, session_id: str, confirm: bool = False) -> Deleted:
        """Delete a session with its turns and pairs, keeping facts; needs ``confirm=True``
        (:func:`~aisac_core.memory.sessions.delete_session`)."""
        return sessions.delete_session(self, session_id, confirm)

    # recall and search

    def recall(
        self,
        session_id: str,
        query: str,
        last_n: int = 10,
        k: int = 5,
        token_budget: int = 2000,
        scope: Scope | dict[str, Any] | None = None,
        hops: int = DEFAULT_HOPS,
        time_aware: bool = True,
    ) -> Recall:
        """The session's last ``last_n`` turns and the ``k`` older exchanges within ``scope`` most related to
        ``query`` (time expressions resolved against the session's date), within ``token_budget`` tokens
        (:func:`~aisac_core.memory.recall.recall`)."""
        return recall_context(self, session_id, query, last_n, k, token_budget, scope, hops, time_aware)

    def search(
        self,
        query: str,
        session_id: str | None = None,
        roles: list[str] | None = None,
        mode: str = "hybrid",
        limit: int = 10,
        offset: int = 0,
        scope: Scope | dict[str, Any] | None = None,
    ) -> Search:
        """Keyword + semantic search over the turns within ``scope`` (every session by default)
        (:func:`~aisac_core.memory.recall.search`)."""
        return search_turns(self, query, session_id, roles, mode, limit, offset, scope)

    # temporal facts

    def record_fact(
        self,
        subject: str,
        predicate: str,
        object: str,
        conditions: dict[str, Any] | None = None,
        valid_at: str | None = None,
        source: str | None = None,
        evidence_span: str | None = None,
        run_id: str | None = None,
    ) -> Recorded:
        """Record a fact valid from ``valid_at``, closing the one it supersedes
        (:func:`~aisac_core.memory.facts.record_fact`)."""
        return facts.record_fact(
            self.engine, subject, predicate, object, conditions, valid_at, source, evidence_span, run_id
        )

    def query_facts(
        self,
        subject: str | None = None,
        predicate: str | None = None,
        object: str | None = None,
        as_of: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> Facts:
        """The facts valid at ``as_of`` (default now), filtered (:func:`~aisac_core.memory.facts.query_facts`)."""
        return facts.query_facts(self.engine, subject, predicate, object, as_of, limit, offset)

    def fact_timeline(self, subject: str, predicate: str | None = None, limit: int = 100, offset: int = 0) -> Timeline:
        """Every fact about ``subject``, current and superseded (:func:`~aisac_core.memory.facts.fact_timeline`)."""
        return facts.fact_timeline(self.engine, subject, predicate, limit, offset)
