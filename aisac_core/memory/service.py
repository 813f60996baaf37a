"""The memory service of one store: sessions, turns, dialogue recall and search, export, temporal facts.

:class:`MemoryService` is what the memory tools call (``app.memory.recall(...)``); the composition root
(the application context, ``app.memory``) builds one per store. It holds the store's collaborators (engine, embedder,
the ``dialogue`` vectors) and its memory state - whether the ``dialogue`` collection was reconciled with the turns,
and the lock that serialises writes to it. Its methods come from three parts, each in the module of its domain and
declaring only the collaborators it uses: :class:`~aisac_core.memory.sessions.SessionLog` (sessions and turns),
:class:`~aisac_core.memory.recall.DialogueRecall` (recall and search) and :class:`~aisac_core.memory.facts.FactLog`
(temporal facts); the service itself owns the dialogue index's reconciliation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from aisac_core.memory.facts import FactLog
from aisac_core.memory.recall import SYNC_LOOKBACK_S, DialogueRecall, reconcile_dialogue
from aisac_core.memory.sessions import SessionLog
from aisac_core.store.tables import utcnow

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.store.vectors import VectorStore


class MemoryService(SessionLog, DialogueRecall, FactLog):
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
