"""The rag service of one store: indexing (background jobs), hybrid search, reading documents by section,
verifying evidence anchors, the catalogue of data files and the store's status.

:class:`RagService` is built by the composition root (``AppContext.rag``) from the store's collaborators (settings,
SQL engine, vector store, embedder); the rag tools (``aisac_servers.adapters.rag``), the roles (through
:class:`aisac_core.roles.env.Corpus`), the trace, the CLI and the benchmarks call its methods. Its methods come from
parts, each in the module of its domain and declaring only the collaborators it uses:
:class:`~aisac_core.rag.search.ChunkSearch` (search and chunk reads), :class:`~aisac_core.rag.sections.SectionReader`
(overview and sections), :class:`~aisac_core.rag.indexer.Manifest` (manifest reads),
:class:`~aisac_core.rag.verify.AnchorVerifier` (evidence anchors), :class:`~aisac_core.rag.vectorcheck.VectorAudit`
(the manifest against the vector store) and :class:`~aisac_core.rag.status.StoreHealth` (the store's status). The
service provides the collaborators and owns the store's indexer, its background jobs, the index targets, removal
and the catalogue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.errors import (
    BadPathError,
    PathOutsideRootsError,
    check_path_text,
    expand_user,
    quote_path,
    resolve_in_roots,
)
from aisac_core.ports import PaperLookup
from aisac_core.rag.catalog import catalog_entries
from aisac_core.rag.indexer import Indexer, Manifest, doc_id_of_path
from aisac_core.rag.jobs import JobManager
from aisac_core.rag.planning import IndexingError
from aisac_core.rag.search import ChunkSearch
from aisac_core.rag.sections import SectionReader
from aisac_core.rag.status import StoreHealth
from aisac_core.rag.vectorcheck import VectorAudit
from aisac_core.rag.verify import AnchorVerifier
from aisac_core.settings import HostRoots

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.rag.results import Catalog, Removed, Verification
    from aisac_core.settings import Settings
    from aisac_core.store.vectors import VectorStore


def accepted_forms(roots: list[Path]) -> str:
    """The forms :meth:`RagService.index` accepts, naming up to 10 registered roots (for error messages)."""
    names = ", ".join(repr(r.name) for r in roots[:10])
    return (
        "give a file or folder (absolute, or relative to the first registered root), a list of them, or a "
        "registered root's name" + (f" ({names})" if names else "") + "; omit path to index every registered root"
    )


def _exists(raw: str) -> bool:
    """Whether ``raw`` names an existing file or folder (False for a name the OS refuses, e.g. too long)."""
    try:
        return expand_user(raw).exists()
    except OSError:
        return False


class RagService(ChunkSearch, SectionReader, Manifest, AnchorVerifier, VectorAudit, StoreHealth):
    """Indexing, search, reading and verification over one store (its parts: the module docstring).

    Args:
        settings: the store's settings (``settings.rag``: roots, chunking, PDF pipeline; job lease and poll times).
        engine: the store's SQL engine (schema migrated).
        vectors: a zero-argument callable giving the vector store (opened on first call, by the caller's context).
        embedder: dense + sparse embedder (models load on first use).

    ``indexer`` and ``jobs`` (the background index jobs) open on first use; :meth:`close` stops the jobs.
    """

    def __init__(
        self, settings: Settings, engine: Engine, vectors: Callable[[], VectorStore], embedder: Embedder
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.embedder = embedder
        self._vectors = vectors
        #: looks a paper up by the DOI / arXiv id printed on it (overviews: identifiers first); the composition
        #: root sets one backed by the literature service, None: the layout reading alone
        self.paper_lookup: PaperLookup | None = None

    def vectors(self) -> VectorStore:
        """The vector store (``chunks`` collection ready)."""
        return self._vectors()

    @cached_property
    def indexer(self) -> Indexer:
        """The indexer of this store (the background jobs run it)."""
        return Indexer(self.settings, self.engine, self.embedder, self.vectors)

    @cached_property
    def jobs(self) -> JobManager:
        """The background index jobs of this store (the worker starts on the first submit or :meth:`resume`)."""
        return JobManager(
            self.engine, self.indexer, lease_s=self.settings.job_lease_seconds, poll_s=self.settings.job_poll_seconds
        )

    def resume(self) -> None:
        """Start running the jobs that wait for a process to claim them (:meth:`JobManager.resume`)."""
        self.jobs.resume()

    def close(self) -> None:
        """Stop the background jobs, if started (the running one may finish, up to 10 s)."""
        if (jobs := self.__dict__.get("jobs")) is not None:
            jobs.shutdown()

    # ---- evidence anchors -------------------------------------------------------------------------

    def verify_anchor(self, anchor: str | dict[str, Any], roots: HostRoots | None = None) -> Verification:
        """Whether cited evidence still holds: :meth:`~aisac_core.rag.verify.AnchorVerifier.verify_full_anchor`.

        ``anchor``: a full anchor (optionally with the hit's ``text``), a compact hit (a dict with a ``chunk_id``
        and no ``sha256``: its chunk_id is the anchor id), or a chunk id; an id not in the index gives status
        ``missing``. Raises :class:`~aisac_core.evidence.anchor.AnchorError` for an anchor lacking its hashes."""
        if isinstance(anchor, dict) and not anchor.get("sha256") and isinstance(anchor.get("chunk_id"), str):
            anchor = anchor["chunk_id"]  # a compact hit: its chunk_id is the anchor id
        if isinstance(anchor, str):
            got = self.get_chunk(anchor.strip()) if anchor.strip() else None
            if got is None:
                return {
                    "status": "missing",
                    "chunk_id": anchor,
                    "doc_id": None,
                    "path": None,
                    "sha256_now": None,
                    "current_chunk_id": None,
                    "detail": f"chunk id {anchor!r} is not in the index: its document was removed or re-indexed "
                    "after an edit (chunk ids change then), or the id is wrong; verify the full anchor "
                    "instead",
                }
            anchor = {**got["anchor"], "text": got.get("text")}
        return self.verify_full_anchor(anchor, roots)

    def verify_cited(self, anchor: Mapping[str, object]) -> Verification:
        """A cited anchor (a full one) verified (:meth:`~aisac_core.rag.verify.AnchorVerifier.verify_full_anchor`), for a reader that must
        not fail on one citation (the roles' evidence gate): a document outside this process's roots is not read
        and comes back ``missing`` with the reason, not as an error."""
        try:
            return self.verify_full_anchor(dict(anchor))
        except PathOutsideRootsError as exc:
            chunk_id, path = anchor.get("chunk_id"), anchor.get("path")
            return {
                "status": "missing",
                "chunk_id": chunk_id if isinstance(chunk_id, str) else None,
                "doc_id": None,
                "path": path if isinstance(path, str) else None,
                "detail": str(exc),
                "sha256_now": None,
                "current_chunk_id": None,
            }

    # ---- the manifest and the catalogue ------------------------------------------------------------

    def catalog(
        self,
        *,
        root: str | None = None,
        file_type: str | None = None,
        refresh: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> Catalog:
        """Catalogued data files, paged: :func:`aisac_core.rag.catalog.catalog_entries`; ``refresh``: list the
        catalog roots again first. Raises :class:`~aisac_core.errors.BadPathError` for a bad ``root``."""
        if refresh and self.settings.rag.catalog_roots:
            self.indexer.run(list(self.settings.rag.catalog_roots), catalog_only=True)
        return catalog_entries(self.engine, root=root, file_type=file_type, limit=limit, offset=offset)

    # ---- indexing --------------------------------------------------------------------------------

    def targets(self, path: str | list[str] | None, roots: HostRoots | None = None) -> list[tuple[list[Path], bool]]:
        """(paths, catalog_only) groups to index: the given paths, or every registered root (``path`` None).

        ``path``: a file or folder (absolute, or relative to the first registered root), a list of them, or a
        registered root's name. ``roots``: the requesting host's roots (its MCP client's, or its own
        ``AISAC_ROOTS`` through the store's owner); None: the settings' ``roots``.

        Raises:
            BadPathError: an empty or blank path (or empty list), a NUL byte, a symlink loop; the message names the
                accepted forms.
            PathOutsideRootsError: with registered roots, a path resolving outside them.
        """
        s = self.settings
        host_roots = list(s.rag.roots) if roots is None else list(roots.roots)  # the requesting host's, if given
        allowed = host_roots + list(s.rag.catalog_roots)
        if path is None:
            if not allowed:
                raise BadPathError(
                    "no path given and no registered roots: pass path='/folder/of/papers' or set "
                    "AISAC_ROOTS='[\"/folder\"]'"
                )
            groups = [(host_roots, False), (list(s.rag.catalog_roots), True)]
            return [(paths, cat) for paths, cat in groups if paths]
        items = [path] if isinstance(path, str) else list(path)
        if not items:
            raise BadPathError(f"path is an empty list: {accepted_forms(allowed)}")
        out: list[Path] = []
        catalog_only = False
        for raw in items:
            if not isinstance(raw, str) or not raw.strip():
                raise BadPathError(f"path {quote_path(raw)} is empty or blank: {accepted_forms(allowed)}")
            check_path_text(raw)
            by_name = [r for r in allowed if r.name == raw]
            if by_name and not _exists(raw):
                out.append(by_name[0])
                catalog_only = catalog_only or by_name[0] in s.rag.catalog_roots
            elif allowed:  # with registered roots, a path must resolve inside one (no '..', no symlink escape)
                out.append(resolve_in_roots(raw, allowed, what="path"))
            else:
                out.append(expand_user(raw))
        return [(out, catalog_only)]

    def index(
        self, path: str | list[str] | None = None, catalog_only: bool = False, roots: HostRoots | None = None
    ) -> list[str]:
        """Queue background index jobs for ``path`` (:meth:`targets`; None: every registered root), one per group;
        returns their ids (they run in order: the last ends last). Raises the errors of :meth:`targets` and
        :meth:`JobManager.submit` (a missing path) before any job exists."""
        return [self.jobs.submit(paths, catalog_only or cat) for paths, cat in self.targets(path, roots)]

    def remove(self, doc_id: str | None = None, path: str | None = None) -> Removed:
        """Remove a document (by ``doc_id`` or by the indexed file's ``path``) and its chunks from the index; the
        file is untouched. Returns ``{removed: doc_id, chunks_deleted}``.

        Raises:
            IndexingError: neither or both of doc_id and path given; no such indexed document.
            BadPathError: a bad ``path`` (empty, a NUL byte, a symlink loop).
        """
        if (doc_id is None) == (path is None):
            raise IndexingError("give exactly one of doc_id or path")
        did = doc_id if doc_id is not None else doc_id_of_path(path or "")
        if self.document(did) is None:
            raise IndexingError(
                f"no indexed document {quote_path(doc_id or path)}: rag_list_documents shows what is indexed"
            )
        return {"removed": did, "chunks_deleted": self.indexer.remove([did])}
