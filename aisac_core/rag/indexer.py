"""Incremental indexing: the manifest, skip / re-embed / prune, and fingerprints.

Manifest: one :class:`~aisac_core.store.sql.Document` row per file
with size, mtime, sha256, fingerprint, chunk count and status. For each file:

1. size and mtime equal to the manifest and fingerprint unchanged -> skip without reading the file;
2. else sha256 equal and fingerprint unchanged -> skip (size/mtime refreshed), nothing embedded;
3. else parse, chunk and embed (nothing written yet), then write in this order:
   a. manifest row -> status ``indexing`` with the new sha256 (committed);
   b. vector store: delete every point of the doc_id, upsert the new points (ids are deterministic:
      uuid5 of doc_id, sha256 and chunk index); Qdrant's write-ahead log holds them from here on;
   c. manifest row -> status ``indexed`` with the chunk count, and the parsed text (committed).
   A crash before (a) changes nothing; between (a) and (c) the row is not ``indexed``, so the next run
   redoes the file, and (b) deletes before it inserts: no duplicate and no orphan chunk survives.
4. files gone from an indexed folder: points deleted first, then the row (a crash in between leaves a
   row whose file is missing, which the next run prunes again).

The fingerprint is sha256 of (parser revision, docling version, chunk size, tokenizer, embedding model
id, sparse model id with its BM25 parameters, revision of the embedded text: the contextual chunk
header of :func:`aisac_core.rag.chunking.indexed_text`): changing any of them re-embeds every file.

Background jobs that run the indexer: :mod:`aisac_core.rag.jobs`; the catalogue of data files:
:mod:`aisac_core.rag.catalog`.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, select

from aisac_core.archives import ArchiveLimits
from aisac_core.errors import (
    AisacError,
    BadPathError,
    check_path_text,
    expand_user,
    inside_roots,
    quote_path,
    resolve_link,
)
from aisac_core.hashing import dumps, sha256_file, sha256_text
from aisac_core.rag.catalog import catalogue_file
from aisac_core.rag.chunking import CONTEXT_REVISION, indexed_text
from aisac_core.rag.documents import PARSER_REVISION, parse_document
from aisac_core.rag.embeddings import SPARSE_MODEL_ID
from aisac_core.rag.formats import CATALOG_TYPES, DOCUMENT_TYPES, DocumentError
from aisac_core.rag.results import DocumentRow, Documents
from aisac_core.store.sql import StoreError, lock
from aisac_core.store.tables import CatalogEntry, Document, DocumentContent, utcnow
from aisac_core.store.vectors import Cond, VectorPoint, VectorStoreError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.parts import RagParts

log = logging.getLogger("aisac.indexing")

_POINT_NS = uuid.UUID("6b1f3c2e-4a8d-5e9f-a0b1-c2d3e4f5a6b7")
#: seconds between vector-store flushes while indexing (see Indexer._index_file)
FLUSH_SECONDS = 5.0
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "node_modules", ".ipynb_checkpoints"}


class IndexingError(AisacError, ValueError):
    """Bad input to the indexer (missing path, nothing indexable); the message says what to do."""


def doc_id_for(path: Path) -> str:
    """Stable id of a file: first 16 hex digits of sha256 of its resolved absolute path."""
    return sha256_text(str(path.resolve()))[:16]


def doc_id_of_path(path: str | Path, *, what: str = "path") -> str:
    """:func:`doc_id_for` of a path a client gave (the file need not exist any more).

    Raises:
        BadPathError: an empty path, a NUL byte in it, an unknown ``~user``, or a symlink loop.
    """
    p = expand_user(check_path_text(path, what=what), what=what)
    try:
        return doc_id_for(p)
    except (RuntimeError, OSError):  # a symlink loop: the strict resolution says so
        return doc_id_for(resolve_link(p, what=what))


def point_id(doc_id: str, sha256: str, index: int) -> str:
    """Deterministic point id of chunk ``index`` of a file version (uuid5), so re-runs overwrite."""
    return str(uuid.uuid5(_POINT_NS, f"{doc_id}:{sha256}:{index}"))


def is_point_id(s: Any) -> bool:
    """Whether ``s`` has the form of a point id (a UUID string); a chunk id of any other form names no chunk."""
    try:
        uuid.UUID(s)
        return True
    except (ValueError, TypeError, AttributeError):
        return False


def fingerprint(parts: RagParts) -> str:
    """Index fingerprint (16 hex digits) of a store's ``parts`` (its settings and embedder): parser revision +
    docling version + chunker settings + dense and sparse model ids."""
    try:
        dv = version("docling-slim")
    except Exception:
        dv = "unknown"
    s, emb = parts.settings, parts.embedder
    items = [
        PARSER_REVISION,
        f"docling-slim=={dv}",
        f"pdf={s.rag.pdf_pipeline}",
        f"chunk_max_tokens={s.rag.chunk_max_tokens}",
        "chunker=HybridChunker(merge_peers)",
        f"tokenizer={emb.model_id}",
        f"dense={emb.model_id}",
        f"sparse={SPARSE_MODEL_ID}",
        f"context=title+headings@{CONTEXT_REVISION}",
    ]
    return sha256_text("|".join(items))[:16]


def mark_all_stale(engine: Engine) -> None:
    """Clear every manifest fingerprint, so the next run re-embeds every file."""
    with Session(engine) as s:
        for row in s.exec(select(Document)).all():
            row.fingerprint = ""
            s.add(row)
        s.commit()


# --------------------------------------------------------------------------------------------------
# planning: which files a path stands for
# --------------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """Files to index and to catalogue, the folders whose vanished files are pruned, and the paths skipped while
    walking (``(path, reason)``: symlinks leading out of the registered roots, symlink loops, unreadable folders)."""

    documents: list[Path] = field(default_factory=list)
    catalog: list[tuple[Path, Path]] = field(default_factory=list)  # (file, root)
    folders: list[Path] = field(default_factory=list)
    ignored: int = 0
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def _link_target(link: Path, allowed: list[Path] | None, skipped: list[tuple[Path, str]]) -> Path | None:
    """The resolved target of the symlink ``link`` met while walking, or None (and a skip reason) when it is a loop,
    broken, or leads out of the ``allowed`` roots."""
    try:
        target = resolve_link(link, what="symlink")
    except BadPathError as exc:
        skipped.append((link, str(exc)))
        return None
    if allowed is not None and not inside_roots(target, allowed):
        skipped.append(
            (
                link,
                f"symlink to {target}, which is outside the registered roots: not followed (links may "
                "only lead to files and folders inside a registered root)",
            )
        )
        return None
    return target


def _walk(top: Path, allowed: list[Path] | None, skipped: list[tuple[Path, str]]) -> Iterable[Path]:
    """Files under the resolved folder ``top``, depth first in name order (hidden entries, ``~$`` lock files and
    :data:`_SKIP_DIRS` left out). A symlinked file yields its resolved target when ``allowed`` is None (no roots
    registered) or the target lies inside ``allowed``; a symlinked folder is walked only when it lies inside
    ``allowed`` and was not walked yet. Loops, broken links, links out of the roots and unreadable folders are
    appended to ``skipped`` as ``(path, reason)``; nothing here raises."""
    visited = {top}
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            skipped.append((folder, f"folder cannot be read ({exc.strerror or exc})"))
            continue
        subdirs: list[Path] = []
        for e in entries:
            name = e.name
            if name.startswith("."):
                continue
            p = Path(e.path)
            try:
                if e.is_symlink():
                    target = _link_target(p, allowed, skipped)
                    if target is None:
                        continue
                    if target.is_dir():
                        if name in _SKIP_DIRS:
                            continue
                        if allowed is None:
                            skipped.append(
                                (
                                    p,
                                    "symlinked folder not followed: no registered roots to check its "
                                    f"target {target} against; index the target itself",
                                )
                            )
                        elif target in visited or folder.is_relative_to(target):
                            skipped.append((p, f"symlink loop: leads back to {target}, a folder already walked"))
                        else:
                            visited.add(target)
                            subdirs.append(target)
                    elif not name.startswith("~$"):
                        yield target
                elif e.is_dir(follow_symlinks=False):
                    if name not in _SKIP_DIRS and p not in visited:
                        visited.add(p)
                        subdirs.append(p)
                elif e.is_file(follow_symlinks=False) and not name.startswith("~$"):
                    yield p
            except OSError as exc:
                skipped.append((p, f"cannot be read ({exc.strerror or exc})"))
        stack.extend(reversed(subdirs))


def allowed_roots(settings: Any) -> list[Path] | None:
    """The resolved registered roots (indexed + catalog-only) symlinks met while walking must stay inside, or None
    when no root is registered (unrestricted use: symlinked files are followed, symlinked folders are not)."""
    roots = list(settings.rag.roots) + list(settings.rag.catalog_roots)
    return [Path(r).expanduser().resolve() for r in roots] or None


def plan_paths(paths: list[Path], catalog_only: bool = False, roots: list[Path] | None = None) -> Plan:
    """Expand files and folders into a :class:`Plan`.

    Document types (:data:`~aisac_core.rag.formats.DOCUMENT_TYPES`) are indexed, except under
    ``catalog_only``; tabular and binary data types (:data:`~aisac_core.rag.formats.CATALOG_TYPES`) are
    catalogued. ``roots`` (resolved; see :func:`allowed_roots`) confines symlinks met inside folders: a link whose
    target is outside them, a loop or a broken link is listed in ``Plan.skipped`` with the reason. Each file is
    planned once, by its resolved path.

    Raises:
        IndexingError: a given path does not exist or cannot be read.
        BadPathError: a given path is empty, holds a NUL byte or is a symlink loop.
    """
    plan = Plan()
    seen: set[Path] = set()
    for raw in paths:
        check_path_text(raw)
        p = expand_user(raw)
        try:
            exists = p.exists()
            if not exists and p.is_symlink():
                resolve_link(p)  # raises: a loop or a dangling link, with the reason
        except OSError as exc:
            raise IndexingError(f"path {quote_path(raw)} cannot be read ({exc.strerror or exc})") from exc
        if not exists:
            hint = (
                ""
                if Path(str(raw)).expanduser().is_absolute()
                else f"; relative paths are resolved against {Path.cwd()}"
            )
            raise IndexingError(f"path not found: {quote_path(raw)} (give an existing file or folder{hint})")
        p = resolve_link(p)
        files: Iterable[Path]
        if p.is_dir():
            plan.folders.append(p)
            files = _walk(p, roots, plan.skipped)
            root = p
        else:
            files = [p]
            root = p.parent
        for f in files:
            if f in seen:
                continue
            seen.add(f)
            suf = f.suffix.lower()
            if not catalog_only and suf in DOCUMENT_TYPES:
                plan.documents.append(f)
            elif suf in CATALOG_TYPES or catalog_only:
                plan.catalog.append((f, root))
            else:
                plan.ignored += 1
    return plan


# --------------------------------------------------------------------------------------------------
# the indexer
# --------------------------------------------------------------------------------------------------


@dataclass
class Counters:
    """What a run did. ``files_read`` counts files whose content was read (hashed or parsed)."""

    files_seen: int = 0
    files_skipped: int = 0
    files_read: int = 0
    files_indexed: int = 0
    files_failed: int = 0
    files_pruned: int = 0
    files_catalogued: int = 0
    #: symlinks (out of the roots, loops, broken) and unreadable folders skipped while walking
    paths_skipped: int = 0
    pages_parsed: int = 0
    chunks_embedded: int = 0
    chunks_deleted: int = 0
    parse_seconds: float = 0.0
    embed_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


ProgressFn = Callable[[int, int, str], None]


class Indexer:
    """Indexes files into one store: ``parts`` gives its settings, SQL engine, embedder and vector store
    (:class:`~aisac_core.rag.service.RagService`, or anything with those attributes)."""

    def __init__(self, parts: RagParts) -> None:
        self.parts = parts
        self._write_lock = threading.Lock()
        self._last_flush = time.monotonic()

    def plan(self, paths: list[Path], catalog_only: bool = False) -> Plan:
        """:func:`plan_paths` with symlinks confined to this store's registered roots (:func:`allowed_roots`)."""
        return plan_paths(paths, catalog_only, allowed_roots(self.parts.settings))

    def run(
        self,
        paths: list[Path],
        *,
        catalog_only: bool = False,
        progress: ProgressFn | None = None,
        failures: list[dict[str, str]] | None = None,
        counters: Counters | None = None,
        skipped: list[dict[str, str]] | None = None,
    ) -> Counters:
        """Index (or catalogue) ``paths``: files and folders, recursively.

        Per-file failures are appended to ``failures`` as ``{"path", "error"}`` and the run goes on; paths skipped
        while walking (symlinks out of the registered roots, loops, unreadable folders) to ``skipped`` as
        ``{"path", "reason"}`` (to ``failures`` as ``{"path", "error": "skipped: <reason>"}`` when ``skipped`` is
        None). ``progress(done, total, message)`` is called after every file. Returns the run's counters.
        Raises :class:`IndexingError` / :class:`~aisac_core.errors.BadPathError` when a given path does not exist,
        is empty, holds a NUL byte or is a symlink loop.
        """
        plan = self.plan(paths, catalog_only)
        c = counters or Counters()
        fails = failures if failures is not None else []
        for path, reason in plan.skipped:
            c.paths_skipped += 1
            if skipped is not None:
                skipped.append({"path": str(path), "reason": reason})
            else:
                fails.append({"path": str(path), "error": f"skipped: {reason}"})
        total = len(plan.documents) + len(plan.catalog)
        done = 0
        fp = fingerprint(self.parts) if plan.documents else ""
        if plan.documents or plan.folders:
            self.parts.vectors()  # fail fast (store locked by another process, damaged) before any parsing
        with self._write_lock:
            for f in plan.documents:
                c.files_seen += 1
                try:
                    self._index_file(f, fp, c)
                except DocumentError as exc:
                    c.files_failed += 1
                    fails.append({"path": str(f), "error": str(exc)})
                except (VectorStoreError, StoreError):  # the store itself failed: stop, do not blame the file
                    raise
                except Exception as exc:  # an unexpected parser failure must not stop the job
                    log.exception("indexing %s failed", f)
                    c.files_failed += 1
                    fails.append({"path": str(f), "error": f"{type(exc).__name__}: {str(exc)[:500]}"})
                done += 1
                if progress:
                    progress(done, total, f.name)
            for f, root in plan.catalog:
                try:
                    self._catalogue(f, root)
                    c.files_catalogued += 1
                except Exception as exc:
                    fails.append({"path": str(f), "error": f"cannot catalogue: {str(exc)[:500]}"})
                done += 1
                if progress:
                    progress(done, total, f.name)
            refused = {str(path) for path, _ in plan.skipped}
            for folder in plan.folders:
                self._prune(folder, c, refused)
            if plan.documents or plan.folders:
                self.parts.vectors().flush()
                self._last_flush = time.monotonic()
        return c

    # ---- one file -----------------------------------------------------------------------------

    def _index_file(self, path: Path, fp: str, c: Counters) -> None:
        parts = self.parts
        st = path.stat()
        did = doc_id_for(path)
        with Session(parts.engine) as s:
            row = s.get(Document, did)
            unchanged_fp = row is not None and row.fingerprint == fp and row.status in ("indexed", "failed")
            if row is not None and unchanged_fp and row.size == st.st_size and row.mtime_ns == st.st_mtime_ns:
                _still_failed(row)
                c.files_skipped += 1
                return
            c.files_read += 1
            sha = sha256_file(path)
            if row is not None and unchanged_fp and row.sha256 == sha:
                row.size, row.mtime_ns = st.st_size, st.st_mtime_ns
                s.add(row)
                s.commit()
                _still_failed(row)
                c.files_skipped += 1
                return
            had_chunks = row is not None and row.status == "indexed"
        t0 = time.perf_counter()
        try:
            parsed = parse_document(
                path,
                parts.embedder.tokenizer(),
                parts.settings.rag.chunk_max_tokens,
                parts.settings.rag.pdf_pipeline,
                limits=ArchiveLimits.from_settings(parts.settings),
            )
        except DocumentError as exc:
            if not had_chunks:  # record the failure; an earlier good version keeps its chunks
                self._record_failure(did, path, st, sha, fp, str(exc))
            raise
        finally:
            c.parse_seconds += time.perf_counter() - t0
        c.pages_parsed += parsed.pages or 0
        t0 = time.perf_counter()
        texts = [indexed_text(ch.embed_text, parsed.title, ch.section) for ch in parsed.chunks]
        dense = parts.embedder.embed_documents(texts)
        sparse = parts.embedder.sparse_documents(texts)
        c.embed_seconds += time.perf_counter() - t0
        c.chunks_embedded += len(parsed.chunks)
        points = [
            VectorPoint(
                id=point_id(did, sha, ch.index),
                dense=dv,
                sparse_indices=sv[0],
                sparse_values=sv[1],
                payload={
                    "doc_id": did,
                    "path": str(path),
                    "sha256": sha,
                    "file_type": parsed.file_type,
                    "chunk_index": ch.index,
                    "page": ch.page,
                    "page_end": ch.page_end,
                    "char_start": ch.char_start,
                    "char_end": ch.char_end,
                    "section": ch.section,
                    "section_covers": ch.section_covers,
                    "text": ch.text,
                    "text_sha256": sha256_text(ch.text),
                    "title": parsed.title,
                },
            )
            for ch, dv, sv in zip(parsed.chunks, dense, sparse)
        ]
        vs = parts.vectors()
        # (a) manifest says "indexing" before any vector write
        with Session(parts.engine) as s:
            lock(s, "document", did)
            row = s.get(Document, did) or Document(
                doc_id=did,
                path=str(path),
                file_type=parsed.file_type,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                sha256=sha,
                fingerprint=fp,
            )
            row.path, row.file_type, row.size, row.mtime_ns = str(path), parsed.file_type, st.st_size, st.st_mtime_ns
            row.sha256, row.fingerprint, row.status, row.error = sha, "", "indexing", None
            s.add(row)
            s.commit()
        # (b) replace the file's points
        before = vs.count("chunks", [Cond("doc_id", eq=did)])
        vs.delete("chunks", [Cond("doc_id", eq=did)])
        c.chunks_deleted += before
        for i in range(0, len(points), 256):
            vs.upsert("chunks", points[i : i + 256])
        # Qdrant's write-ahead log already makes the upsert survive a killed process (checked by
        # tests/test_crash.py); flushing segments costs ~0.2 s, so it runs at most every FLUSH_SECONDS
        # and at the end of the run.
        if time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            vs.flush()
            self._last_flush = time.monotonic()
        # (c) commit the manifest
        with Session(parts.engine) as s:
            row = s.get(Document, did)
            assert row is not None
            row.status, row.fingerprint, row.chunk_count = "indexed", fp, len(points)
            row.pages, row.title, row.indexed_at = parsed.pages, parsed.title, utcnow()
            content = s.get(DocumentContent, did) or DocumentContent(doc_id=did, text="", markdown="")
            content.text, content.markdown = parsed.text, parsed.markdown
            content.structure_json = dumps(parsed.structure)  # read by overview / read_sections
            s.add(row)
            s.add(content)
            s.commit()
        c.files_indexed += 1

    def _record_failure(self, did: str, path: Path, st: os.stat_result, sha: str, fp: str, error: str) -> None:
        with Session(self.parts.engine) as s:
            lock(s, "document", did)
            row = s.get(Document, did) or Document(
                doc_id=did,
                path=str(path),
                file_type=DOCUMENT_TYPES.get(path.suffix.lower(), "unknown"),
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                sha256=sha,
                fingerprint=fp,
            )
            row.size, row.mtime_ns, row.sha256, row.fingerprint = st.st_size, st.st_mtime_ns, sha, fp
            row.status, row.error, row.chunk_count, row.indexed_at = "failed", error, 0, utcnow()
            s.add(row)
            s.commit()

    def flush(self) -> None:
        """Write the vector store's pending changes to disk (the files indexed so far are whole)."""
        self.parts.vectors().flush()

    # ---- removal ------------------------------------------------------------------------------

    def remove(self, doc_ids: list[str]) -> int:
        """Remove documents (points first, then manifest rows). Returns the number of chunks deleted."""
        deleted = 0
        with self._write_lock:
            vs = self.parts.vectors()
            for did in doc_ids:
                deleted += vs.count("chunks", [Cond("doc_id", eq=did)])
                vs.delete("chunks", [Cond("doc_id", eq=did)])
            vs.flush()
            with Session(self.parts.engine) as s:
                for did in doc_ids:
                    for model in (Document, DocumentContent):
                        row = s.get(model, did)
                        if row is not None:
                            s.delete(row)
                s.commit()
        return deleted

    def _prune(self, folder: Path, c: Counters, refused: set[str] | None = None) -> None:
        """Remove the rows under ``folder`` whose file is gone, or whose path this run skipped (``refused``: a
        symlink now leading out of the roots, or a loop; an earlier version may have indexed it)."""
        prefix = str(folder) + os.sep
        refused = refused or set()

        def gone_or_refused(path: str) -> bool:
            return path in refused or not Path(path).exists()

        with Session(self.parts.engine) as s:
            gone = [
                r.doc_id
                for r in s.exec(select(Document).where(Document.path.startswith(prefix))).all()
                if gone_or_refused(r.path)
            ]
            stale_cat = [
                r
                for r in s.exec(select(CatalogEntry).where(CatalogEntry.path.startswith(prefix))).all()
                if gone_or_refused(r.path)
            ]
            for r in stale_cat:
                s.delete(r)
            s.commit()
        if gone:
            self._write_lock.release()
            try:
                c.chunks_deleted += self.remove(gone)
            finally:
                self._write_lock.acquire()
            c.files_pruned += len(gone)

    # ---- catalogue ----------------------------------------------------------------------------

    def _catalogue(self, path: Path, root: Path) -> None:
        catalogue_file(self.parts.engine, path, root, ArchiveLimits.from_settings(self.parts.settings))


# --------------------------------------------------------------------------------------------------
# reading the manifest
# --------------------------------------------------------------------------------------------------


def get_document(parts: RagParts, doc_id: str) -> tuple[Document, DocumentContent | None] | None:
    """Manifest row and parsed content of a document (``parts``: its store), or None."""
    with Session(parts.engine) as s:
        row = s.get(Document, doc_id)
        if row is None:
            return None
        return row, s.get(DocumentContent, doc_id)


def documents_matching(engine: Engine, pattern: str) -> list[str]:
    """doc_ids whose path matches the glob ``pattern`` (against the full path or the file name)."""
    with Session(engine) as s:
        rows = s.exec(select(Document.doc_id, Document.path)).all()
    return [d for d, p in rows if fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(Path(p).name, pattern)]


def list_documents(
    parts: RagParts,
    *,
    status: str | None = None,
    file_type: str | None = None,
    path_glob: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> Documents:
    """Manifest rows, paged: ``{documents: [document_dict], total, offset, next_offset}``, ordered by path;
    ``status``, ``file_type`` and ``path_glob`` (against the full path or the file name) filter them."""
    with Session(parts.engine) as s:
        q = select(Document).order_by(Document.path)
        if status:
            q = q.where(Document.status == status)
        if file_type:
            q = q.where(Document.file_type == file_type)
        rows = s.exec(q).all()
    if path_glob:
        rows = [r for r in rows if fnmatch.fnmatch(r.path, path_glob) or fnmatch.fnmatch(Path(r.path).name, path_glob)]
    total = len(rows)
    page = rows[offset : offset + limit]
    return {
        "documents": [document_dict(r) for r in page],
        "total": total,
        "offset": offset,
        "next_offset": offset + limit if offset + limit < total else None,
    }


def document_dict(r: Document) -> DocumentRow:
    """JSON-ready manifest row: doc_id, path, file_type, title, pages, chunk_count, status, error, sha256, size,
    indexed_at (ISO 8601)."""
    return {
        "doc_id": r.doc_id,
        "path": r.path,
        "file_type": r.file_type,
        "title": r.title,
        "pages": r.pages,
        "chunk_count": r.chunk_count,
        "status": r.status,
        "error": r.error,
        "sha256": r.sha256,
        "size": r.size,
        "indexed_at": r.indexed_at.isoformat() if r.indexed_at else None,
    }


def _still_failed(row: Document) -> None:
    """An unchanged file whose last indexing failed is not re-parsed (it would fail again) but is reported as failed
    again, with its stored error, rather than counted as unchanged. Raises DocumentError for such a row."""
    if row.status == "failed":
        raise DocumentError(f"unchanged since indexing it failed: {row.error or 'unknown error'}")
