"""Guards against a split store: the vectors of several processes must be one store, or one process's alone.

- :func:`check_replica_store`: a serving process whose SQL store is a server (shared with other processes) but
  whose vectors are an embedded folder of its own would answer from a private slice of the corpus: replica B finds
  nothing indexed through A, and re-indexing through B skips what the shared manifest calls indexed. Refused unless
  ``AISAC_ALLOW_PRIVATE_VECTORS=true`` says this is the only process on that SQL store.
- :class:`~aisac_core.store.vectors.FolderLock`: an embedded vector folder (Qdrant Edge, qdrant-client local mode) is opened by one process
  at a time, whatever ``AISAC_OWNER_MODE`` says: an exclusive ``flock`` on ``<folder>/aisac.lock`` held while the
  store is open (the kernel drops it when the process dies, so a crash never leaves it locked). Two processes
  writing one shard folder damaged it (index jobs failed until restart, orphan vectors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aisac_core.errors import AisacError

if TYPE_CHECKING:
    from aisac_core.settings import Settings


class SplitStoreError(AisacError, RuntimeError):
    """This process would keep vectors apart from the SQL store it shares; the message names both settings."""


def check_replica_store(settings: Settings) -> None:
    """Raise :class:`SplitStoreError` when ``settings`` put the SQL store on a server but the vectors in an embedded
    folder of this process (``AISAC_SQL_URL`` not SQLite, vector backend ``edge``, or ``qdrant`` without
    ``AISAC_QDRANT_URL``), unless ``allow_private_vectors`` is set. Called by ``aisac serve`` and every other command
    before it opens anything (the store's identity, :mod:`aisac_core.store.identity`, then catches a private folder on
    a store whose vectors are elsewhere even where this opt-in is set)."""
    if not settings.server_sql or settings.shared_vectors or settings.allow_private_vectors:
        return
    from aisac_core.store.sql import redact_url

    raise SplitStoreError(
        f"AISAC_SQL_URL={redact_url(settings.resolved_sql_url)} is a database server that other aisac processes can "
        f"share, but the vectors are a private folder of this process ({settings.vectors_dir}, "
        f"AISAC_VECTOR_BACKEND={settings.vector_kind}): a second process would not find what this one indexes. "
        "Put the vectors in the same PostgreSQL (AISAC_VECTOR_URL=sql, pgvector) or on a Qdrant server "
        "(AISAC_VECTOR_BACKEND=qdrant with AISAC_QDRANT_URL); or, if this is the only process on that database, "
        "set AISAC_ALLOW_PRIVATE_VECTORS=true (docs/deployment.md)"
    )
