"""The store's health as ``aisac status`` and ``rag_store_status`` give it: :meth:`StoreHealth.status`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import func
from sqlmodel import Session, select

from aisac_core.rag.indexer import fingerprint, scan_fingerprint
from aisac_core.store.collections import CHUNKS
from aisac_core.store.files import permission_warnings
from aisac_core.store.sql import redact_url, schema_revision
from aisac_core.store.tables import CatalogEntry, Document, TraceEvent

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.rag.results import IndexJob, StoreStatus, VectorCheck
    from aisac_core.settings import Settings
    from aisac_core.store.vectors import VectorStore


class JobList(Protocol):
    """What :meth:`StoreHealth.status` reads of the index jobs (:class:`~aisac_core.rag.jobs.JobManager`)."""

    def list(self, limit: int = 20) -> list[IndexJob]:
        """The most recent jobs, newest first."""
        ...


def _dir_size(path: Path) -> int:
    """Bytes a folder occupies on disk (allocated blocks: vector shards are sparse files)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_blocks * 512  # on disk (shards are sparse files)
            except OSError:
                pass
    return total


def _vectors_where(s: Settings) -> str:
    """Where the vectors are: the embedded folder, the Qdrant server URL, or the PostgreSQL URL (no password)."""
    if s.vector_kind == "postgres":
        return redact_url(s.resolved_vector_url or "")
    return s.qdrant_url if s.vector_kind == "qdrant" and s.qdrant_url else str(s.vectors_dir)


def _vectors_folder(s: Settings) -> str | None:
    """The embedded vector folder of this process, None when the vectors are on a server (PostgreSQL, Qdrant)."""
    return None if s.shared_vectors else str(s.vectors_dir)


class StoreHealth:
    """The store's health as ``aisac status`` and ``rag_store_status`` give it: :meth:`status`. A part of
    :class:`~aisac_core.rag.service.RagService` (the CLI's owner client builds one over a store another process
    holds). The collaborators it uses: ``settings`` (where the store is), ``engine`` (the manifest, catalogue and
    trace counts), ``embedder`` (the model id and the index fingerprint), :meth:`vectors` (the chunk count),
    ``jobs`` (the recent index jobs) and :meth:`check_vectors` (the manifest against the vector store)."""

    settings: Settings
    engine: Engine
    embedder: Embedder

    if TYPE_CHECKING:

        @property
        def jobs(self) -> JobList:
            """The store's index jobs (:attr:`RagService.jobs`)."""
            ...

        def vectors(self) -> VectorStore:
            """The vector store with the ``chunks`` collection ready (:meth:`RagService.vectors`)."""
            ...

        def check_vectors(self) -> VectorCheck:
            """The manifest against the vector store (:meth:`aisac_core.rag.vectorcheck.VectorAudit.check_vectors`)."""
            ...

    def status(self) -> StoreStatus:
        """Documents (by status and type), chunks (manifest and vector store), catalogued files, the 5 most recent
        index jobs, store location and size in bytes, the SQL schema revision, the embedding model, and whether documents
        await re-embedding (``stale_documents``: indexed with another fingerprint); ``vector_check``: the manifest against
        the vector store by chunk id (:meth:`check_vectors`: missing and orphan vectors, per document).

        ``vectors().count`` may give None (the vector store is held by another process: ``aisac status``
        through the owner daemon). Raises what opening the store raises (:class:`~aisac_core.store.sql.StoreError`)."""
        s = self.settings
        with Session(self.engine) as db:
            by_status = dict(db.exec(select(Document.status, func.count()).group_by(Document.status)).all())
            by_type = dict(db.exec(select(Document.file_type, func.count()).group_by(Document.file_type)).all())
            manifest_chunks = db.exec(select(func.coalesce(func.sum(Document.chunk_count), 0))).one()
            catalogued = db.exec(select(func.count()).select_from(CatalogEntry)).one()
            events = db.exec(select(func.count()).select_from(TraceEvent)).one()
            fps = db.exec(select(Document.fingerprint).where(Document.status == "indexed")).all()
        fp = fingerprint(s, self.embedder)
        current = {fp, scan_fingerprint(s, self.embedder, fp)}  # born-digital / scanned or failed documents
        return {
            "data_dir": str(s.data_dir),
            "sql_url": redact_url(s.resolved_sql_url),
            "schema_revision": schema_revision(self.engine),
            "vector_backend": s.vector_kind,
            "vectors_dir": _vectors_folder(s),
            "vector_location": _vectors_where(s),
            "store_bytes": _dir_size(s.data_dir) if s.data_dir.exists() else 0,
            "embedding_model": self.embedder.model_id,
            "fingerprint": fp,
            "documents": by_status,
            "documents_by_type": by_type,
            "chunks_in_manifest": int(manifest_chunks),
            "chunks_in_vector_store": self.vectors().count(CHUNKS),
            "vector_check": self.check_vectors(),
            "stale_documents": sum(1 for f in fps if f not in current),
            "catalogued_files": int(catalogued),
            "trace_events": int(events),
            "recent_jobs": self.jobs.list(5),
            "permission_warnings": permission_warnings(s.data_dir),
        }
