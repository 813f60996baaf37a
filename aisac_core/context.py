"""The application context: everything one aisac store needs, built once and handed down.

The MCP suite's lifespan builds one :class:`AppContext` and yields it to every tool
(``aisac_servers.serving.suite.build``); the CLI builds the same one for its commands. It owns the settings, the SQL engine,
the vector store, the embedder, the background jobs, the DataFrame registry, the sandbox manager, the memory service and
the served project, and :meth:`AppContext.close` closes all of them. There are no process-wide wiring globals: two
contexts on two data dirs live side by side in one process (the tests do that).

Everything opens lazily: creating an :class:`AppContext` touches nothing on disk, so a server can answer
``tools/list`` at once; the SQL store opens on first use, the vector store and the models on the first call that
needs them.
"""

from __future__ import annotations

import logging
import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

from aisac_core.plugins import make_plugin_manager, table_loaders
from aisac_core.settings import Settings
from aisac_core.store.collections import CHUNKS, DIALOGUE

if TYPE_CHECKING:
    import pluggy
    from sqlalchemy.engine import Engine

    from aisac_core.data.frames import FrameRegistry
    from aisac_core.literature.service import LiteratureService
    from aisac_core.memory.service import MemoryService
    from aisac_core.projects.bootstrap import Bootstrapped
    from aisac_core.rag.embeddings import Embedder
    from aisac_core.rag.jobs import JobManager
    from aisac_core.rag.service import RagService
    from aisac_core.roles.service import RolesService
    from aisac_core.sessions.manager import SandboxManager
    from aisac_core.store.identity import StoreIdentity
    from aisac_core.store.vectors import VectorStore
    from aisac_core.trace.service import TraceService

__all__ = ["AppContext", "CHUNKS", "DIALOGUE"]

log = logging.getLogger("aisac")


class AppContext:
    """Lazily opened store, models and domain services of one data dir.

    Fields (each opens on first use): ``settings``, ``engine`` (SQLAlchemy engine, schema migrated to the newest
    revision), ``embedder``, ``rag`` (the rag service; ``jobs``: its background index jobs), ``vectors()`` (the vector store), ``frames`` (the
    DataFrame registry), ``sandbox`` (code-session manager), ``memory`` (the memory service), ``roles`` (the
    roles service: role steps, graph runs and their background jobs), ``literature`` (the literature service),
    ``trace`` (the trace service), ``plugins`` (extension hooks); ``project`` is the bootstrapped project this context
    serves (None without ``--project``).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        project: Bootstrapped | None = None,
        embedder: Embedder | None = None,
        read_only: bool = False,
        adopt_settings: bool = False,
    ) -> None:
        """``settings`` (default: from the environment and the store's config file); ``project``: the bootstrapped
        project served; ``embedder``: an already loaded embedder to use instead of loading one (tests and benchmarks
        share one between stores); ``read_only``: open the store for reading only (``aisac status``, ``search``,
        ``verify``: nothing is created, migrated, marked stale or recorded; a read-only database role suffices);
        ``adopt_settings``: record this process's settings as the store's identity over differences of model,
        chunker or parser (``aisac index --adopt-settings``; :mod:`aisac_core.store.identity`)."""
        self.settings = settings if settings is not None else Settings()
        self.project = project
        self._given_embedder = embedder
        self.read_only = read_only
        self.adopt_settings = adopt_settings
        #: the store's identity once checked (:meth:`check_store`); None before, or on a read-only open of a store
        #: made before identities existed
        self.identity: StoreIdentity | None = None
        #: set while the suite serving this context shuts down: a long call cancelled then leaves its background
        #: job in the job table for the next process instead of cancelling it
        self.stopping = False
        self._lock = threading.RLock()
        #: a leaf lock (nothing else is taken while it is held): ``engine`` runs under functools.cached_property's
        #: lock (Python 3.11 holds one per property while computing) and calls :meth:`secure_store`, while
        #: :meth:`vectors` holds ``_lock`` and then reads ``engine``; with one lock for both, the two orders deadlock
        #: (seen when the SQL file is corrupt, so ``engine`` is never cached and every call re-enters it)
        self._secure_lock = threading.Lock()
        self._vectors: VectorStore | None = None
        self._warm_thread: threading.Thread | None = None
        self._closed = False
        self.permission_warnings: list[str] = []  # set when the store is first opened (store.files)
        self._secured = False

    @cached_property
    def engine(self) -> Engine:
        """The SQL engine (schema brought to the newest revision on first use; read-only: checked at it), after the
        store's identity was checked against this process's settings (:meth:`check_store`): every service reaches
        the store through this engine, so nothing is read or written before the check.

        Raises StoreError (cannot open, or read-only on a store not at this aisac's schema) and
        StoreIdentityError (this process's settings differ from the store's: every difference named)."""
        from aisac_core.store.sql import make_engine

        self.secure_store()
        engine = make_engine(self.settings.resolved_sql_url, read_only=self.read_only)
        try:
            self.check_store(engine)
        except BaseException:
            engine.dispose()
            raise
        return engine

    def check_store(self, engine: Engine) -> None:
        """The one identity check of every process (:func:`aisac_core.store.identity.check_identity`): this
        process's settings against the store's identity record on ``engine``; a writing process records it on a new
        store or one made before identities (adopted, not refused). Raises StoreIdentityError."""
        from aisac_core.rag.identity import current_identity
        from aisac_core.store.identity import check_identity
        from aisac_core.store.sql import schema_revision

        here = current_identity(self.settings, schema_revision(engine))
        self.identity = check_identity(
            engine, here, write=not self.read_only, shared=self.settings.server_sql, adopt=self.adopt_settings
        )

    @cached_property
    def embedder(self) -> Embedder:
        """Dense + sparse embedder (models load on first use): the one given to the constructor, else a new one."""
        if self._given_embedder is not None:
            return self._given_embedder
        from aisac_core.rag.embeddings import Embedder

        return Embedder(self.settings)

    @cached_property
    def rag(self) -> RagService:
        """The rag service: indexing (background jobs), search, sections, anchor verification, catalogue, status."""
        from aisac_core.literature.lookup import IdentifierLookup
        from aisac_core.rag.service import RagService

        svc = RagService(self.settings, self.engine, self.vectors, self.embedder)
        # identifiers first: rag looks DOIs / arXiv ids up through the literature service (built on first lookup)
        svc.paper_lookup = IdentifierLookup(lambda: self.literature)
        return svc

    @property
    def jobs(self) -> JobManager:
        """The background index jobs (``rag.jobs``)."""
        return self.rag.jobs

    @cached_property
    def frames(self) -> FrameRegistry:
        """The DataFrame registry of the data server (frames persisted under the data dir)."""
        from aisac_core.data.frames import FrameRegistry

        self.secure_store()
        s = self.settings
        return FrameRegistry(
            self.engine,
            s.data_dir / "frames",
            table_loaders(self.plugins),
            s.data,
            [*s.rag.roots, *s.rag.catalog_roots],
            lambda: self.sandbox,
        )

    @cached_property
    def sandbox(self) -> SandboxManager:
        """The manager of sandboxed code sessions (worker processes start on demand)."""
        from aisac_core.sessions.manager import SandboxManager

        self.secure_store()
        s = self.settings
        return SandboxManager(s.sandbox, s.sandbox.dir or s.data_dir / "sessions")

    @cached_property
    def memory(self) -> MemoryService:
        """The memory service of this store (sessions, turns, dialogue recall, facts); opens the SQL store."""
        from aisac_core.memory.service import MemoryService

        return MemoryService(self.engine, self.vectors, self.embedder)

    @cached_property
    def literature(self) -> LiteratureService:
        """The literature service: the sources the plugins register, the response cache in the SQL store (opened
        on the first request), the registered roots and rag's index jobs for ``lit_import``.

        Raises PluginError: a registered source without a name or search function, or two with one name."""
        from aisac_core.literature.service import LiteratureService
        from aisac_core.literature.sources import source_registry

        return LiteratureService(
            source_registry(self.plugins),
            self.settings.lit,
            engine=lambda: self.engine,
            roots=self.settings.rag.roots,
            corpus=self.rag,
        )

    @cached_property
    def roles(self) -> RolesService:
        """The roles (router, planner, evaluator, the whole graph and its background runs) on this store, with the
        served project's graph augmentation."""
        from aisac_core.roles.service import RolesService

        p = self.project
        augment = p.augment_graph if p is not None and p.graph_augment is not None else None
        return RolesService(
            self.settings.roles,
            lambda: self.engine,
            corpus=lambda: self.rag,  # rag's typed interface (aisac_core.roles.env.Corpus), opened on first use
            graph_augment=augment,
            lease_s=self.settings.job_lease_seconds,
            embed=lambda texts: self.embedder.embed_documents(texts),
        )

    @cached_property
    def trace(self) -> TraceService:
        """The trace of this store (:class:`~aisac_core.trace.service.TraceService`): recording, queries, exports,
        verification, replay, retention. Building it opens nothing (engine and rag are passed as callables)."""
        from aisac_core.trace.service import TraceService

        return TraceService(self.settings, engine=lambda: self.engine, rag=lambda: self.rag)

    @cached_property
    def plugins(self) -> pluggy.PluginManager:
        """The extension hooks in force: the served project's plugin manager (built-ins plus the project's extension
        modules), else one with the built-ins only."""
        pm = getattr(self.project, "plugins", None)
        return pm if pm is not None else make_plugin_manager()

    def opened(self, name: str) -> Any | None:
        """The field ``name`` when it was already opened, else None (never opens it); ``jobs``: the rag service's."""
        if name == "jobs":
            rag = self.__dict__.get("rag")
            return rag.__dict__.get("jobs") if rag is not None else None
        return self.__dict__.get(name)

    def secure_store(self) -> None:
        """Before anything is written to the store: umask 077 for this process, the data dir created 0700, and
        warnings (logged once, kept in ``permission_warnings``) when a user widened it (:mod:`aisac_core.store.files`)."""
        with self._secure_lock:
            if not self._secured:
                from aisac_core.store.files import secure_data_dir

                self.permission_warnings = secure_data_dir(self.settings.data_dir)
                self._secured = True

    def vectors(self) -> VectorStore:
        """The vector store with the ``chunks`` and ``dialogue`` collections ready for the embedder's dimension
        (read-only: a view that opens the collections that exist, creates none and refuses writes,
        :class:`~aisac_core.store.readonly.ReadOnlyVectors`).

        When the dimension changed (another embedding model), a collection is recreated empty: for
        ``chunks`` every manifest row is marked stale, so the next index run re-embeds everything; the
        ``dialogue`` pairs are re-embedded from the turns by the memory service on its first use
        (:meth:`aisac_core.memory.MemoryService.dialogue`).
        """
        _ = self.engine  # the store's identity is checked before the vectors open
        with self._lock:
            if self._vectors is None:
                from aisac_core.store.vectors import open_vector_store

                self.secure_store()
                if self.settings.vector_kind == "postgres":  # pgvector, in the SQL store's database or another
                    from aisac_core.store.pgvectors import open_pg_vectors

                    vs: VectorStore = open_pg_vectors(self.settings, read_only=self.read_only)
                else:  # the qdrant backend takes every qdrant_* setting (server URL, key, TLS, timeout, sharding)
                    vs = open_vector_store(
                        self.settings.vector_kind, root=self.settings.vectors_dir, settings=self.settings
                    )
                if self.read_only:  # opens what exists, creates nothing, refuses every write
                    from aisac_core.store.readonly import ReadOnlyVectors

                    try:
                        self._vectors = ReadOnlyVectors(vs, (CHUNKS, DIALOGUE), self.embedder.dim)
                    except Exception:
                        vs.close()
                        raise
                    return self._vectors
                try:  # a store that fails to open lets go of its folder lock, so the next call may open it
                    recreated = vs.ensure_collection(CHUNKS, self.embedder.dim)
                    vs.ensure_collection(DIALOGUE, self.embedder.dim)
                    if recreated:
                        from aisac_core.rag.indexer import mark_all_stale

                        mark_all_stale(self.engine)
                except Exception:
                    vs.close()
                    raise
                self._vectors = vs
            return self._vectors

    def resume_jobs(self) -> None:
        """In a background thread: start running the background jobs that wait for a process to claim them
        (:meth:`aisac_core.rag.service.RagService.resume`). Called by a serving process at start."""

        def _resume() -> None:
            try:
                self.rag.resume()
            except Exception as exc:  # the store cannot be opened: the first call that needs it reports why
                log.warning("resuming background jobs: %s", exc)

        threading.Thread(target=_resume, name="aisac-resume-jobs", daemon=True).start()

    def warm(self) -> None:
        """Load the models and open the vector store in a background thread (errors surface on first use)."""
        if self._warm_thread is not None:
            return

        def _warm() -> None:
            try:
                self.vectors()
            except Exception as exc:  # reported again, with its message, by the first call that needs it
                log.warning("background warm-up: %s", exc)

        # start after a short delay, so the first protocol requests are not slowed by model loading
        self._warm_thread = threading.Timer(1.0, _warm)
        self._warm_thread.daemon = True
        self._warm_thread.start()

    def close(self) -> None:
        """Stop background jobs (letting the running one finish, up to 10 s) and the code-session workers, then
        flush and release the vector store and dispose of the SQL engine. The jobs are stopped before taking the
        context's lock: a running job needs it to reach the store. Closing twice is harmless."""
        if (rag := self.opened("rag")) is not None:
            rag.close()
        if (sandbox := self.opened("sandbox")) is not None:
            sandbox.shutdown()
        with self._lock:
            if isinstance(self._warm_thread, threading.Timer):
                self._warm_thread.cancel()
            if self._vectors is not None:
                self._vectors.close()
                self._vectors = None
            self._warm_thread = None
            if (engine := self.opened("engine")) is not None:
                engine.dispose()
            self._closed = True
