"""Incremental indexing: the manifest, skip / re-embed / prune, fingerprints, and background jobs.

Manifest (DESIGN.md "Incremental indexing"): one :class:`~aisac_core.store.sql.Document` row per file
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
id, sparse model id with its BM25 parameters): changing any of them re-embeds every file.
"""

from __future__ import annotations

import csv
import fnmatch
import hashlib
import json
import logging
import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from sqlmodel import Session, select

from aisac_core.errors import AisacError
from aisac_core.hashing import sha256_file, sha256_text
from aisac_core.rag.documents import CATALOG_TYPES, DOCUMENT_TYPES, PARSER_REVISION, DocumentError, parse_document
from aisac_core.rag.embeddings import SPARSE_MODEL_ID
from aisac_core.store.sql import StoreError
from aisac_core.store.tables import CatalogEntry, Document, DocumentContent, Job, utcnow
from aisac_core.hashing import dumps
from aisac_core.store.vectors import Cond, VectorPoint, VectorStoreError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.context import AppContext

log = logging.getLogger("aisac.indexing")

_POINT_NS = uuid.UUID("6b1f3c2e-4a8d-5e9f-a0b1-c2d3e4f5a6b7")
#: seconds between vector-store flushes while indexing (see Indexer._index_file)
FLUSH_SECONDS = 5.0
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "node_modules", ".ipynb_checkpoints"}


class IndexingError(AisacError, ValueError):
    """Bad input to the indexer (missing path, nothing indexable); the message says what to do."""


def doc_id_for(path: Path) -> str:
    """Stable id of a file: first 16 hex digits of sha256 of its resolved absolute path."""
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]


def point_id(doc_id: str, sha256: str, index: int) -> str:
    """Deterministic point id of chunk ``index`` of a file version (uuid5), so re-runs overwrite."""
    return str(uuid.uuid5(_POINT_NS, f"{doc_id}:{sha256}:{index}"))


def fingerprint(core: "AppContext") -> str:
    """Index fingerprint: parser revision + docling version + chunker settings + dense and sparse model ids."""
    from importlib.metadata import version

    try:
        dv = version("docling-slim")
    except Exception:
        dv = "unknown"
    s = core.settings
    parts = [PARSER_REVISION, f"docling-slim=={dv}", f"pdf={s.pdf_pipeline}", f"chunk_max_tokens={s.chunk_max_tokens}",
             "chunker=HybridChunker(merge_peers)", f"tokenizer={core.embedder.model_id}",
             f"dense={core.embedder.model_id}", f"sparse={SPARSE_MODEL_ID}"]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def mark_all_stale(engine: "Engine") -> None:
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
    """Files to index and to catalogue, and the folders whose vanished files are pruned."""

    documents: list[Path] = field(default_factory=list)
    catalog: list[tuple[Path, Path]] = field(default_factory=list)  # (file, root)
    folders: list[Path] = field(default_factory=list)
    ignored: int = 0


def _walk(folder: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for f in sorted(filenames):
            if not f.startswith(".") and not f.startswith("~$"):
                yield Path(dirpath) / f


def plan_paths(paths: list[Path], catalog_only: bool = False) -> Plan:
    """Expand files and folders into a :class:`Plan`.

    Document types (:data:`~aisac_core.rag.documents.DOCUMENT_TYPES`) are indexed, except under
    ``catalog_only``; tabular and binary data types (:data:`~aisac_core.rag.documents.CATALOG_TYPES`) are
    catalogued. Raises :class:`IndexingError` for a path that does not exist.
    """
    plan = Plan()
    for raw in paths:
        p = Path(raw).expanduser()
        if not p.exists():
            raise IndexingError(f"path not found: {raw} (give an existing file or folder; relative paths are "
                              f"resolved against {Path.cwd()})")
        p = p.resolve()
        files: Iterable[Path]
        if p.is_dir():
            plan.folders.append(p)
            files = _walk(p)
            root = p
        else:
            files = [p]
            root = p.parent
        for f in files:
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
    """Indexes files into the shared store for one :class:`~aisac_core.context.AppContext`."""

    def __init__(self, core: "AppContext") -> None:
        self.core = core
        self._write_lock = threading.Lock()
        self._last_flush = time.monotonic()

    def run(self, paths: list[Path], *, catalog_only: bool = False, progress: ProgressFn | None = None,
            failures: list[dict[str, str]] | None = None, counters: Counters | None = None) -> Counters:
        """Index (or catalogue) ``paths``: files and folders, recursively.

        Per-file failures are appended to ``failures`` as ``{"path", "error"}`` and the run goes on.
        ``progress(done, total, message)`` is called after every file. Returns the run's counters.
        Raises :class:`IndexingError` when a path does not exist.
        """
        plan = plan_paths(paths, catalog_only)
        c = counters or Counters()
        fails = failures if failures is not None else []
        total = len(plan.documents) + len(plan.catalog)
        done = 0
        fp = fingerprint(self.core) if plan.documents else ""
        if plan.documents or plan.folders:
            self.core.vectors()  # fail fast (store locked by another process, damaged) before any parsing
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
                    fails.append({"path": str(f), "error": f"{type(exc).__name__}: {exc}"})
                done += 1
                if progress:
                    progress(done, total, f.name)
            for f, root in plan.catalog:
                try:
                    self._catalogue(f, root)
                    c.files_catalogued += 1
                except Exception as exc:
                    fails.append({"path": str(f), "error": f"cannot catalogue: {exc}"})
                done += 1
                if progress:
                    progress(done, total, f.name)
            for folder in plan.folders:
                self._prune(folder, c)
            if plan.documents or plan.folders:
                self.core.vectors().flush()
                self._last_flush = time.monotonic()
        return c

    # ---- one file -----------------------------------------------------------------------------

    def _index_file(self, path: Path, fp: str, c: Counters) -> None:
        core = self.core
        st = path.stat()
        did = doc_id_for(path)
        with Session(core.engine) as s:
            row = s.get(Document, did)
            unchanged_fp = row is not None and row.fingerprint == fp and row.status in ("indexed", "failed")
            if unchanged_fp and row.size == st.st_size and row.mtime_ns == st.st_mtime_ns:
                c.files_skipped += 1
                return
            c.files_read += 1
            sha = sha256_file(path)
            if unchanged_fp and row.sha256 == sha:
                row.size, row.mtime_ns = st.st_size, st.st_mtime_ns
                s.add(row)
                s.commit()
                c.files_skipped += 1
                return
            had_chunks = row is not None and row.status == "indexed"
        t0 = time.perf_counter()
        try:
            parsed = parse_document(path, core.embedder.tokenizer(), core.settings.chunk_max_tokens,
                                    core.settings.pdf_pipeline)
        except DocumentError as exc:
            if not had_chunks:  # record the failure; an earlier good version keeps its chunks
                self._record_failure(did, path, st, sha, fp, str(exc))
            raise
        finally:
            c.parse_seconds += time.perf_counter() - t0
        c.pages_parsed += parsed.pages or 0
        t0 = time.perf_counter()
        dense = core.embedder.embed_documents([ch.embed_text for ch in parsed.chunks])
        sparse = core.embedder.sparse_documents([ch.embed_text for ch in parsed.chunks])
        c.embed_seconds += time.perf_counter() - t0
        c.chunks_embedded += len(parsed.chunks)
        points = [
            VectorPoint(
                id=point_id(did, sha, ch.index), dense=dv, sparse_indices=sv[0], sparse_values=sv[1],
                payload={"doc_id": did, "path": str(path), "sha256": sha, "file_type": parsed.file_type,
                         "chunk_index": ch.index, "page": ch.page, "page_end": ch.page_end,
                         "char_start": ch.char_start, "char_end": ch.char_end, "section": ch.section,
                         "section_covers": ch.section_covers, "text": ch.text,
                         "text_sha256": sha256_text(ch.text), "title": parsed.title},
            )
            for ch, dv, sv in zip(parsed.chunks, dense, sparse)
        ]
        vs = core.vectors()
        # (a) manifest says "indexing" before any vector write
        with Session(core.engine) as s:
            row = s.get(Document, did) or Document(doc_id=did, path=str(path), file_type=parsed.file_type,
                                                   size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=sha,
                                                   fingerprint=fp)
            row.path, row.file_type, row.size, row.mtime_ns = str(path), parsed.file_type, st.st_size, st.st_mtime_ns
            row.sha256, row.fingerprint, row.status, row.error = sha, "", "indexing", None
            s.add(row)
            s.commit()
        # (b) replace the file's points
        before = vs.count("chunks", [Cond("doc_id", eq=did)])
        vs.delete("chunks", [Cond("doc_id", eq=did)])
        c.chunks_deleted += before
        for i in range(0, len(points), 256):
            vs.upsert("chunks", points[i:i + 256])
        # Qdrant's write-ahead log already makes the upsert survive a killed process (checked by
        # tests/test_crash.py); flushing segments costs ~0.2 s, so it runs at most every FLUSH_SECONDS
        # and at the end of the run.
        if time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            vs.flush()
            self._last_flush = time.monotonic()
        # (c) commit the manifest
        with Session(core.engine) as s:
            row = s.get(Document, did)
            assert row is not None
            row.status, row.fingerprint, row.chunk_count = "indexed", fp, len(points)
            row.pages, row.title, row.indexed_at = parsed.pages, parsed.title, utcnow()
            content = s.get(DocumentContent, did) or DocumentContent(doc_id=did, text="", markdown="")
            content.text, content.markdown = parsed.text, parsed.markdown
            content.structure_json = dumps(parsed.structure)  # issue 3: overview / read_sections
            s.add(row)
            s.add(content)
            s.commit()
        c.files_indexed += 1

    def _record_failure(self, did: str, path: Path, st: os.stat_result, sha: str, fp: str, error: str) -> None:
        with Session(self.core.engine) as s:
            row = s.get(Document, did) or Document(doc_id=did, path=str(path), file_type=DOCUMENT_TYPES.get(
                path.suffix.lower(), "unknown"), size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=sha, fingerprint=fp)
            row.size, row.mtime_ns, row.sha256, row.fingerprint = st.st_size, st.st_mtime_ns, sha, fp
            row.status, row.error, row.chunk_count, row.indexed_at = "failed", error, 0, utcnow()
            s.add(row)
            s.commit()

    # ---- removal ------------------------------------------------------------------------------

    def remove(self, doc_ids: list[str]) -> int:
        """Remove documents (points first, then manifest rows). Returns the number of chunks deleted."""
        deleted = 0
        with self._write_lock:
            vs = self.core.vectors()
            for did in doc_ids:
                deleted += vs.count("chunks", [Cond("doc_id", eq=did)])
                vs.delete("chunks", [Cond("doc_id", eq=did)])
            vs.flush()
            with Session(self.core.engine) as s:
                for did in doc_ids:
                    for model in (Document, DocumentContent):
                        row = s.get(model, did)
                        if row is not None:
                            s.delete(row)
                s.commit()
        return deleted

    def _prune(self, folder: Path, c: Counters) -> None:
        prefix = str(folder) + os.sep
        with Session(self.core.engine) as s:
            gone = [r.doc_id for r in s.exec(select(Document).where(Document.path.startswith(prefix))).all()
                    if not Path(r.path).exists()]
            stale_cat = [r for r in s.exec(select(CatalogEntry).where(CatalogEntry.path.startswith(prefix))).all()
                         if not Path(r.path).exists()]
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
        st = path.stat()
        ftype = CATALOG_TYPES.get(path.suffix.lower(), path.suffix.lower().lstrip(".") or "unknown")
        with Session(self.core.engine) as s:
            row = s.get(CatalogEntry, str(path))
            if row is not None and row.size == st.st_size and row.mtime_ns == st.st_mtime_ns:
                return
            meta = catalog_metadata(path, ftype)
            row = row or CatalogEntry(path=str(path), root=str(root), file_type=ftype, size=st.st_size,
                                      mtime_ns=st.st_mtime_ns)
            row.root, row.file_type, row.size, row.mtime_ns = str(root), ftype, st.st_size, st.st_mtime_ns
            row.meta_json, row.listed_at = dumps(meta), utcnow()
            s.add(row)
            s.commit()


def catalog_metadata(path: Path, ftype: str) -> dict[str, Any]:
    """Cheap metadata of a data file: CSV/TSV columns and row count (files up to 64 MiB), Excel sheet
    names, JSON top-level type. Never loads a large file whole."""
    meta: dict[str, Any] = {}
    try:
        if ftype in ("csv", "tsv"):
            with open(path, newline="", encoding="utf-8", errors="replace") as f:
                sample = f.read(65536)
                try:
                    dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
                    delim = dialect.delimiter
                except csv.Error:
                    delim = "\t" if ftype == "tsv" else ","
                first = next(csv.reader([sample.splitlines()[0]], delimiter=delim)) if sample else []
                meta.update(delimiter=delim, columns=first[:200])
            if path.stat().st_size <= 64 << 20:
                with open(path, "rb") as f:
                    meta["rows"] = max(0, sum(1 for _ in f) - 1)
        elif ftype == "xlsx":
            from openpyxl import load_workbook

            wb = load_workbook(path, read_only=True)
            meta["sheets"] = wb.sheetnames
            wb.close()
        elif ftype in ("json", "jsonl") and path.stat().st_size <= 16 << 20:
            if ftype == "jsonl":
                with open(path, "rb") as f:
                    meta["records"] = sum(1 for line in f if line.strip())
            else:
                obj = json.loads(path.read_text(encoding="utf-8"))
                meta["top_level"] = type(obj).__name__
                if isinstance(obj, list):
                    meta["records"] = len(obj)
    except Exception as exc:
        meta["metadata_error"] = str(exc)[:200]
    return meta


# --------------------------------------------------------------------------------------------------
# background jobs
# --------------------------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(timezone.utc)


class JobManager:
    """Runs indexing jobs one at a time on a worker thread; state lives in the ``Job`` table.

    Jobs left ``queued``/``running`` by a process that died are marked ``interrupted`` when the next
    manager starts; re-running the same index converges (see the module docstring).
    """

    def __init__(self, core: "AppContext") -> None:
        self.core = core
        self.indexer = Indexer(core)
        self._queue: queue.Queue[tuple[str, list[Path], bool] | None] = queue.Queue()
        self._events: dict[str, threading.Event] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        with Session(core.engine) as s:
            for job in s.exec(select(Job).where(Job.status.in_(["queued", "running"]))).all():
                job.status, job.message, job.finished_at = "interrupted", "the process running it stopped", _now()
                s.add(job)
            s.commit()

    def submit(self, paths: list[Path], catalog_only: bool = False) -> str:
        """Validate ``paths`` (raises :class:`IndexingError` when one is missing) and queue a job; returns its id."""
        plan = plan_paths(paths, catalog_only)  # fail fast on bad paths, before a job exists
        job_id = "job-" + uuid.uuid4().hex[:12]
        with Session(self.core.engine) as s:
            s.add(Job(job_id=job_id, kind="catalog" if catalog_only else "index",
                      params_json=dumps({"paths": [str(p) for p in paths], "catalog_only": catalog_only}),
                      total=len(plan.documents) + len(plan.catalog)))
            s.commit()
        self._events[job_id] = threading.Event()
        with self._lock:
            self._queue.put((job_id, paths, catalog_only))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._worker, name="aisac-index", daemon=True)
                self._thread.start()
        return job_id

    def _worker(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            job_id, paths, catalog_only = item
            self._run(job_id, paths, catalog_only)
            ev = self._events.get(job_id)
            if ev:
                ev.set()

    def _update(self, job_id: str, **fields: Any) -> None:
        with Session(self.core.engine) as s:
            job = s.get(Job, job_id)
            if job is None:
                return
            for k, v in fields.items():
                setattr(job, k, v)
            s.add(job)
            s.commit()

    def _run(self, job_id: str, paths: list[Path], catalog_only: bool) -> None:
        counters = Counters()
        failures: list[dict[str, str]] = []
        self._update(job_id, status="running", started_at=_now())
        last = [0.0]

        def progress(done: int, total: int, msg: str) -> None:
            now = time.monotonic()
            if now - last[0] >= 0.25 or done == total:
                last[0] = now
                self._update(job_id, done=done, total=total, message=msg, counters_json=dumps(counters.as_dict()),
                             failures_json=dumps(failures))

        try:
            self.indexer.run(paths, catalog_only=catalog_only, progress=progress, failures=failures, counters=counters)
            status, message = "done", None
        except Exception as exc:
            log.exception("job %s failed", job_id)
            status, message = "failed", f"{type(exc).__name__}: {exc}"
        self._update(job_id, status=status, message=message, finished_at=_now(),
                     counters_json=dumps(counters.as_dict()), failures_json=dumps(failures))

    def wait(self, job_id: str, timeout: float | None = None) -> bool:
        """Block until ``job_id`` ends (True) or ``timeout`` seconds pass (False)."""
        ev = self._events.get(job_id)
        if ev is None:
            return True
        return ev.wait(timeout)

    def status(self, job_id: str) -> dict[str, Any] | None:
        """The job as a dict (see :func:`job_dict`), or None when unknown."""
        with Session(self.core.engine) as s:
            job = s.get(Job, job_id)
            return job_dict(job) if job else None

    def list(self, limit: int = 20) -> list[dict[str, Any]]:
        """The most recent jobs, newest first."""
        with Session(self.core.engine) as s:
            rows = s.exec(select(Job).order_by(Job.created_at.desc()).limit(limit)).all()
            return [job_dict(j) for j in rows]

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the worker after the queued jobs, waiting up to ``timeout`` seconds."""
        with self._lock:
            thread = self._thread
            if thread is None or not thread.is_alive():
                return
            self._queue.put(None)
        thread.join(timeout)


def job_dict(job: Job) -> dict[str, Any]:
    """A job as JSON-ready dict: id, kind, status, progress (done/total), counters, failures, times."""
    return {
        "job_id": job.job_id, "kind": job.kind, "status": job.status, "done": job.done, "total": job.total,
        "message": job.message, "params": json.loads(job.params_json),
        "counters": json.loads(job.counters_json), "failures": json.loads(job.failures_json),
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }


def documents_matching(engine: "Engine", pattern: str) -> list[str]:
    """doc_ids whose path matches the glob ``pattern`` (against the full path or the file name)."""
    with Session(engine) as s:
        rows = s.exec(select(Document.doc_id, Document.path)).all()
    return [d for d, p in rows if fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(Path(p).name, pattern)]


def catalog_entries(core: "AppContext", *, root: str | None = None, file_type: str | None = None, limit: int = 100,
                    offset: int = 0) -> dict[str, Any]:
    """Catalogued files, paged: ``{entries: [{path, root, file_type, size, modified, meta}], total, next_offset}``."""
    with Session(core.engine) as s:
        q = select(CatalogEntry).order_by(CatalogEntry.path)
        if root:
            prefix = str(Path(root).expanduser().resolve())
            q = q.where(CatalogEntry.path.startswith(prefix))
        if file_type:
            q = q.where(CatalogEntry.file_type == file_type)
        rows = s.exec(q).all()
    page = rows[offset:offset + limit]
    return {
        "entries": [{"path": r.path, "root": r.root, "file_type": r.file_type, "size": r.size,
                     "modified": datetime.fromtimestamp(r.mtime_ns / 1e9, timezone.utc).isoformat(),
                     "meta": json.loads(r.meta_json)} for r in page],
        "total": len(rows), "next_offset": offset + limit if offset + limit < len(rows) else None,
    }
