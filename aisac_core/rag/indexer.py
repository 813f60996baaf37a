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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, select

from aisac_core.archives import ArchiveLimits
from aisac_core.errors import check_path_text, expand_user, resolve_link
from aisac_core.hashing import NotRegularFileError, dumps, sha256_file, sha256_text
from aisac_core.rag.catalog import catalogue_file
from aisac_core.rag.chunking import CONTEXT_REVISION, indexed_text
from aisac_core.rag.documents import PARSER_REVISION, parse_as_configured
from aisac_core.rag.embedcache import EmbedCounts, embed_cached
from aisac_core.rag.embeddings import SPARSE_MODEL_ID
from aisac_core.rag.formats import DOCUMENT_TYPES, DocumentError
from aisac_core.rag.headers import model_sha256 as header_model_sha256
from aisac_core.rag.ocr import OcrOptions
from aisac_core.rag.ocr import fingerprint_part as ocr_fingerprint
from aisac_core.rag.planning import Plan, allowed_roots, plan_paths
from aisac_core.rag.results import DocumentRow, Documents
from aisac_core.store.sql import StoreError, lock
from aisac_core.store.tables import CatalogEntry, Document, DocumentContent, utcnow
from aisac_core.store.vectors import Cond, VectorPoint, VectorStoreError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.settings import Settings
    from aisac_core.store.vectors import VectorStore

log = logging.getLogger("aisac.indexing")

_POINT_NS = uuid.UUID("6b1f3c2e-4a8d-5e9f-a0b1-c2d3e4f5a6b7")
#: seconds between vector-store flushes while indexing (see Indexer._store)
FLUSH_SECONDS = 5.0
#: chunks collected across files before one embedding call: enough for length-sorted batches of similar
#: lengths (the model pads a batch to its longest text), few enough to bound memory (~0.1 MB of vectors)
EMBED_BATCH_CHUNKS = 64


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


def fingerprint(settings: Settings, embedder: Embedder) -> str:
    """Index fingerprint (16 hex digits) of a store with ``settings`` (``settings.rag``: PDF pipeline, chunk size)
    and ``embedder`` (its ``model_id``): parser revision + docling version + chunker settings + dense and sparse model
    ids + the sha256 of the header model (:mod:`aisac_core.rag.headers`; a new model re-reads every PDF's title and
    authors). A document with scanned pages is stored under :func:`scan_fingerprint` instead, which adds the OCR
    engine."""
    try:
        dv = version("docling-slim")
    except Exception:
        dv = "unknown"
    s, emb = settings, embedder
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
        f"header_model={header_model_sha256()[:16]}",
    ]
    return sha256_text("|".join(items))[:16]


def scan_fingerprint(settings: Settings, embedder: Embedder, base: str | None = None) -> str:
    """The fingerprint of a document read (partly) by OCR, and of a failed document: :func:`fingerprint` (``base``
    when given, else computed from ``settings`` and ``embedder``) + the OCR engine, its language data's sha256,
    language and resolution (:func:`aisac_core.rag.ocr.fingerprint_part`). A new Tesseract (or installing it)
    re-reads scanned and failed documents once; born-digital ones stay as they are."""
    fp = base if base is not None else fingerprint(settings, embedder)
    return sha256_text(fp + "|" + ocr_fingerprint(OcrOptions.from_settings(settings)))[:16]


def mark_all_stale(engine: Engine) -> None:
    """Clear every manifest fingerprint, so the next run re-embeds every file."""
    with Session(engine) as s:
        for row in s.exec(select(Document)).all():
            row.fingerprint = ""
            s.add(row)
        s.commit()


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
    #: scanned pages read by OCR, and the seconds (render + Tesseract) they took
    pages_ocr: int = 0
    ocr_seconds: float = 0.0
    chunks_embedded: int = 0
    chunks_deleted: int = 0
    parse_seconds: float = 0.0
    embed_seconds: float = 0.0
    #: chunks whose dense vector came from the embedding cache (text embedded before by the same model)
    chunks_cached: int = 0
    #: tokens the dense model read (special tokens included, padding not)
    tokens_embedded: int = 0
    #: CPU seconds (``time.process_time``, every thread) per stage: parse + chunk, dense model, BM25,
    #: embedding cache look-ups and writes, vector store and manifest writes
    parse_cpu_s: float = 0.0
    dense_cpu_s: float = 0.0
    sparse_cpu_s: float = 0.0
    cache_cpu_s: float = 0.0
    store_cpu_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


ProgressFn = Callable[[int, int, str], None]


@dataclass
class _Prepared:
    """A changed file, parsed and chunked, waiting for its embeddings: the texts are the chunks' indexed texts."""

    path: Path
    st: os.stat_result
    did: str
    sha: str
    parsed: Any
    texts: list[str]


class _StopBetweenPages(Exception):  # noqa: N818 - a carrier, not an error of its own
    """Carries the exception of a ``progress`` call made between two OCRed pages (a cancelled job) past the
    per-file error handler (:func:`_file_errors`), so that it stops the run instead of failing the file."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc


@contextmanager
def _file_errors(path: Path, c: Counters, fails: list[dict[str, str]]) -> Iterator[None]:
    """Record a failure of one file and go on; a failing store (SQL or vectors) stops the run."""
    try:
        yield
    except _StopBetweenPages:
        raise
    except (DocumentError, NotRegularFileError) as exc:  # also: swapped for a FIFO after the plan
        c.files_failed += 1
        fails.append({"path": str(path), "error": str(exc)})
    except (VectorStoreError, StoreError):  # the store itself failed: stop, do not blame the file
        raise
    except Exception as exc:  # an unexpected parser failure must not stop the job
        log.exception("indexing %s failed", path)
        c.files_failed += 1
        fails.append({"path": str(path), "error": f"{type(exc).__name__}: {str(exc)[:500]}"})


class Indexer:
    """Indexes files into one store (:attr:`aisac_core.rag.service.RagService.indexer` is the store's; its background
    jobs run it).

    Args:
        settings: the store's settings (``settings.rag``: roots, chunk size, PDF pipeline, OCR; archive limits).
        engine: the store's SQL engine (schema migrated): the manifest, parsed texts, catalogue, embedding cache.
        embedder: dense + sparse embedder (its tokenizer also sizes the chunks).
        vectors: a zero-argument callable giving the vector store with the ``chunks`` collection ready (opened on
            the first call, by the caller).
    """

    def __init__(
        self, settings: Settings, engine: Engine, embedder: Embedder, vectors: Callable[[], VectorStore]
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.embedder = embedder
        self.vectors = vectors
        self._write_lock = threading.Lock()
        self._last_flush = time.monotonic()

    def plan(self, paths: list[Path], catalog_only: bool = False) -> Plan:
        """:func:`plan_paths` with symlinks confined to this store's registered roots (:func:`allowed_roots`)."""
        return plan_paths(paths, catalog_only, allowed_roots(self.settings))

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
        fp = fingerprint(self.settings, self.embedder) if plan.documents else ""
        fps = (fp, scan_fingerprint(self.settings, self.embedder, fp)) if plan.documents else ("", "")
        if plan.documents or plan.folders:
            self.vectors()  # fail fast (store locked by another process, damaged) before any parsing
        with self._write_lock:
            pending: list[_Prepared] = []
            for f in plan.documents:
                c.files_seen += 1

                def pages(k: int, n: int, name: str = f.name, at: int = done) -> None:
                    if progress:
                        try:
                            progress(at, total, f"{name}: OCR page {k}/{n}")
                        except BaseException as exc:  # a cancel between two pages
                            raise _StopBetweenPages(exc) from exc

                try:
                    with _file_errors(f, c, fails):
                        prep = self._prepare(f, fps, c, pages)
                        if prep is not None:
                            pending.append(prep)
                except _StopBetweenPages as stop:  # the files prepared so far are stored whole; this one is not
                    if pending:
                        self._embed_and_store(pending, fps, c, fails)
                    raise stop.exc from None
                if sum(len(p.texts) for p in pending) >= EMBED_BATCH_CHUNKS or f is plan.documents[-1]:
                    self._embed_and_store(pending, fps, c, fails)
                    pending = []
                done += 1
                if progress:
                    try:
                        progress(done, total, f.name)
                    except BaseException:  # a cancel between two files: the files prepared so far are stored whole
                        if pending:
                            self._embed_and_store(pending, fps, c, fails)
                        raise
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
                self.vectors().flush()
                self._last_flush = time.monotonic()
        return c

    # ---- one file -----------------------------------------------------------------------------

    def _prepare(
        self, path: Path, fps: tuple[str, str], c: Counters, pages: Callable[[int, int], None] | None = None
    ) -> _Prepared | None:
        """Hash, and when changed parse and chunk one file; None when it is unchanged (skipped)."""
        st = path.stat()
        did = doc_id_for(path)
        with Session(self.engine) as s:
            row = s.get(Document, did)
            # born-digital documents carry the base fingerprint, scanned and failed ones the one with the OCR engine
            unchanged_fp = row is not None and row.fingerprint in fps and row.status in ("indexed", "failed")
            if row is not None and unchanged_fp and row.size == st.st_size and row.mtime_ns == st.st_mtime_ns:
                _still_failed(row)
                c.files_skipped += 1
                return None
            c.files_read += 1
            sha = sha256_file(path)
            if row is not None and unchanged_fp and row.sha256 == sha:
                row.size, row.mtime_ns = st.st_size, st.st_mtime_ns
                s.add(row)
                s.commit()
                _still_failed(row)
                c.files_skipped += 1
                return None
            had_chunks = row is not None and row.status == "indexed"
        t0, cpu0 = time.perf_counter(), time.process_time()
        try:
            parsed = parse_as_configured(path, self.settings, self.embedder.tokenizer(), progress=pages)
        except DocumentError as exc:
            if not had_chunks:  # record the failure; an earlier good version keeps its chunks
                self._record_failure(did, path, st, sha, fps[1], str(exc))
            raise
        finally:
            c.parse_seconds += time.perf_counter() - t0
            c.parse_cpu_s += time.process_time() - cpu0
        c.pages_parsed += parsed.pages or 0
        c.pages_ocr += len(parsed.ocr_pages)
        c.ocr_seconds += parsed.ocr_seconds
        texts = [indexed_text(ch.embed_text, parsed.title, ch.section) for ch in parsed.chunks]
        return _Prepared(path, st, did, sha, parsed, texts)

    def _embed_and_store(
        self, pending: list[_Prepared], fps: tuple[str, str], c: Counters, fails: list[dict[str, str]]
    ) -> None:
        """Embed the chunks of ``pending`` files in one call (cached vectors reused, :mod:`.embedcache`), then
        store each file (:meth:`_store`); a file that fails to store is recorded in ``fails``."""
        texts = [t for p in pending for t in p.texts]
        if not pending:
            return
        emb = self.embedder
        t0, tok0 = time.perf_counter(), emb.stats.tokens
        counts = EmbedCounts()
        dense = embed_cached(self.engine, emb, texts, counts) if texts else []
        cpu1 = time.process_time()
        sparse = emb.sparse_documents(texts) if texts else []
        c.sparse_cpu_s += time.process_time() - cpu1
        c.embed_seconds += time.perf_counter() - t0
        c.dense_cpu_s += counts.model_cpu_s
        c.cache_cpu_s += counts.cache_cpu_s
        c.chunks_cached += counts.cached
        c.tokens_embedded += emb.stats.tokens - tok0
        start = 0
        for p in pending:
            n = len(p.texts)
            with _file_errors(p.path, c, fails):
                cpu0 = time.process_time()
                try:
                    fp = fps[1] if p.parsed.ocr_pages else fps[0]
                    self._store(p, dense[start : start + n], sparse[start : start + n], fp, c)
                finally:
                    c.store_cpu_s += time.process_time() - cpu0
            start += n

    def _store(
        self,
        prep: _Prepared,
        dense: list[list[float]],
        sparse: list[tuple[list[int], list[float]]],
        fp: str,
        c: Counters,
    ) -> None:
        path, st, did, sha, parsed = prep.path, prep.st, prep.did, prep.sha, prep.parsed
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
                    **({"source": "ocr", "ocr_confidence": ch.ocr_confidence} if ch.source == "ocr" else {}),
                },
            )
            for ch, dv, sv in zip(parsed.chunks, dense, sparse)
        ]
        vs = self.vectors()
        # (a) manifest says "indexing" before any vector write
        with Session(self.engine) as s:
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
        with Session(self.engine) as s:
            got = s.get(Document, did)
            assert got is not None
            row = got
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
        with Session(self.engine) as s:
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
        self.vectors().flush()

    # ---- removal ------------------------------------------------------------------------------

    def remove(self, doc_ids: list[str]) -> int:
        """Remove documents (points first, then manifest rows). Returns the number of chunks deleted."""
        deleted = 0
        with self._write_lock:
            vs = self.vectors()
            for did in doc_ids:
                deleted += vs.count("chunks", [Cond("doc_id", eq=did)])
                vs.delete("chunks", [Cond("doc_id", eq=did)])
            vs.flush()
            with Session(self.engine) as s:
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

        with Session(self.engine) as s:
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
        catalogue_file(self.engine, path, root, ArchiveLimits.from_settings(self.settings))


# --------------------------------------------------------------------------------------------------
# reading the manifest
# --------------------------------------------------------------------------------------------------


class Manifest:
    """Reading the manifest of one store: :meth:`document` and :meth:`list_documents`. A part of
    :class:`~aisac_core.rag.service.RagService`; the collaborator these methods use: ``engine`` (the SQL engine)."""

    engine: Engine

    def document(self, doc_id: str) -> tuple[Document, DocumentContent | None] | None:
        """A document's manifest row and parsed content (None when it has no stored parse), or None when
        ``doc_id`` is unknown."""
        with Session(self.engine) as s:
            row = s.get(Document, doc_id)
            if row is None:
                return None
            return row, s.get(DocumentContent, doc_id)

    def list_documents(
        self,
        *,
        status: str | None = None,
        file_type: str | None = None,
        path_glob: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Documents:
        """Manifest rows, paged: ``{documents: [document_dict], total, offset, next_offset}``, ordered by path;
        ``status``, ``file_type`` and ``path_glob`` (against the full path or the file name) filter them."""
        with Session(self.engine) as s:
            q = select(Document).order_by(Document.path)
            if status:
                q = q.where(Document.status == status)
            if file_type:
                q = q.where(Document.file_type == file_type)
            rows = s.exec(q).all()
        if path_glob:
            rows = [
                r for r in rows if fnmatch.fnmatch(r.path, path_glob) or fnmatch.fnmatch(Path(r.path).name, path_glob)
            ]
        total = len(rows)
        page = rows[offset : offset + limit]
        return {
            "documents": [document_dict(r) for r in page],
            "total": total,
            "offset": offset,
            "next_offset": offset + limit if offset + limit < total else None,
        }


def documents_matching(engine: Engine, pattern: str) -> list[str]:
    """doc_ids whose path matches the glob ``pattern`` (against the full path or the file name)."""
    with Session(engine) as s:
        rows = s.exec(select(Document.doc_id, Document.path)).all()
    return [d for d, p in rows if fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(Path(p).name, pattern)]


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
