"""The process-wide handle on one store: settings, SQL engine, vector store, embedder, jobs.

Everything opens lazily: creating a :class:`Core` touches nothing on disk, so a server can answer
``tools/list`` at once; the SQL store opens on first use, the vector store and the models on the first
call that needs them.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING

from aisac_core.settings import Settings, get_settings

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.rag.indexer import JobManager
    from aisac_core.store.vectors import VectorStore

#: Collection of document chunks (DESIGN.md "Store").
CHUNKS = "chunks"
#: Collection of embedded user -> assistant pairs of memory sessions (:mod:`aisac_core.memory`).
DIALOGUE = "dialogue"


class Core:
    """Lazily opened store and models for one data dir."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()
        self._lock = threading.RLock()
        self._vectors: VectorStore | None = None
        self._warm_thread: threading.Thread | None = None

    @cached_property
    def engine(self) -> "Engine":
        """The SQL engine (tables created on first use)."""
        from aisac_core.store.sql import make_engine

        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        return make_engine(self.settings.resolved_sql_url)

    @cached_property
    def embedder(self) -> "Embedder":
        """Dense + sparse embedder (models load on first use)."""
        from aisac_core.rag.embeddings import Embedder

        return Embedder(self.settings)

    @cached_property
    def jobs(self) -> "JobManager":
        """Background job runner (indexing)."""
        from aisac_core.rag.indexer import JobManager

        return JobManager(self)

    def vectors(self) -> "VectorStore":
        """The vector store with the ``chunks`` and ``dialogue`` collections ready for the embedder's dimension.

        When the dimension changed (another embedding model), a collection is recreated empty: for
        ``chunks`` every manifest row is marked stale, so the next index run re-embeds everything; the
        ``dialogue`` pairs are re-embedded from the turns by the memory module on its first use
        (:func:`aisac_core.memory.reconcile_dialogue`).
        """
        with self._lock:
            if self._vectors is None:
                from aisac_core.store.vectors import open_vector_store

                vs = open_vector_store(self.settings.vector_backend, root=self.settings.vectors_dir,
                                       url=self.settings.qdrant_url, api_key=self.settings.qdrant_api_key)
                try:
                    recreated = vs.ensure_collection(CHUNKS, self.embedder.dim)
                    vs.ensure_collection(DIALOGUE, self.embedder.dim)
                except Exception:
                    vs.close()
                    raise
                if recreated:
                    from aisac_core.rag.indexer import mark_all_stale

                    mark_all_stale(self.engine)
                self._vectors = vs
            return self._vectors

    def warm(self) -> None:
        """Load the models and open the vector store in a background thread (errors surface on first use)."""
        if getattr(self, "_warm_thread", None) is not None:
            return

        def _warm() -> None:
            try:
                self.vectors()
            except Exception as exc:  # reported again, with its message, by the first call that needs it
                import logging

                logging.getLogger("aisac").warning("background warm-up: %s", exc)

        # start after a short delay, so the first protocol requests are not slowed by model loading
        self._warm_thread = threading.Timer(1.0, _warm)
        self._warm_thread.daemon = True
        self._warm_thread.start()

    def close(self) -> None:
        """Stop background jobs (letting the running one finish, up to 10 s), then flush and release the vector
        store. The jobs are stopped before taking the core's lock: a running job needs it to reach the store."""
        if "jobs" in self.__dict__:
            self.jobs.shutdown()
        with self._lock:
            if self._vectors is not None:
                self._vectors.close()
                self._vectors = None
            self._warm_thread = None
            if "engine" in self.__dict__:
                self.engine.dispose()


_core: Core | None = None
_core_lock = threading.Lock()


def get_core() -> Core:
    """The process-wide :class:`Core` for the settings in the environment."""
    global _core
    with _core_lock:
        if _core is None:
            _core = Core()
        return _core


def set_core(core: Core | None) -> None:
    """Replace the process-wide core (tests, or a CLI option naming another data dir)."""
    global _core
    with _core_lock:
        if _core is not None and _core is not core:
            _core.close()
        _core = core


def _dir_size(path) -> int:  # noqa: ANN001
    import os

    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_blocks * 512  # on disk (shards are sparse files)
            except OSError:
                pass
    return total


def store_status(core: Core) -> dict:
    """Documents (by status and type), chunks (manifest and vector store), catalogued files, jobs, store
    location and size in bytes, the embedding model, and whether documents await re-embedding."""
    from sqlalchemy import func
    from sqlmodel import Session, select

    from aisac_core.rag.indexer import fingerprint
    from aisac_core.store.sql import CatalogEntry, Document, TraceEvent

    s = core.settings
    with Session(core.engine) as db:
        by_status = dict(db.exec(select(Document.status, func.count()).group_by(Document.status)).all())
        by_type = dict(db.exec(select(Document.file_type, func.count()).group_by(Document.file_type)).all())
        manifest_chunks = db.exec(select(func.coalesce(func.sum(Document.chunk_count), 0))).one()
        catalogued = db.exec(select(func.count()).select_from(CatalogEntry)).one()
        events = db.exec(select(func.count()).select_from(TraceEvent)).one()
        fps = db.exec(select(Document.fingerprint).where(Document.status == "indexed")).all()
    fp = fingerprint(core)
    return {
        "data_dir": str(s.data_dir), "sql_url": s.resolved_sql_url, "vector_backend": s.vector_backend,
        "vectors_dir": str(s.vectors_dir) if not s.qdrant_url else s.qdrant_url,
        "store_bytes": _dir_size(s.data_dir) if s.data_dir.exists() else 0,
        "embedding_model": core.embedder.model_id, "fingerprint": fp,
        "documents": by_status, "documents_by_type": by_type, "chunks_in_manifest": int(manifest_chunks),
        "chunks_in_vector_store": core.vectors().count(CHUNKS),
        "stale_documents": sum(1 for f in fps if f != fp), "catalogued_files": int(catalogued),
        "trace_events": int(events), "recent_jobs": core.jobs.list(5),
    }
