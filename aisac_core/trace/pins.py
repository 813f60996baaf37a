"""Pins: what a run's results depend on, recorded so a later check can tell what changed.

Input pins (:class:`~aisac_core.store.tables.TraceInput`): the files a successful tool call named, with their sha256
(folders through the index manifest). Configuration pins (:class:`~aisac_core.store.tables.TraceRunPin`): package
versions, models, index fingerprint, retrieval constants and settings, written once per run.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from aisac_core.hashing import dumps, sha256_file
from aisac_core.rag import search as retrieval
from aisac_core.rag.documents import PARSER_REVISION
from aisac_core.rag.embeddings import SPARSE_MODEL_ID
from aisac_core.rag.indexer import fingerprint
from aisac_core.rag.ocr import OcrOptions
from aisac_core.rag.ocr import fingerprint_part as ocr_pin
from aisac_core.rag.ranker import model_sha256 as ranker_sha256
from aisac_core.rag.tableregions import model_sha256 as table_region_sha256
from aisac_core.store.sql import lock
from aisac_core.store.tables import Document, TraceInput, TraceRunPin

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.settings import Settings


#: files larger than this are pinned by size and mtime only (not hashed) when a tool call names them.
MAX_HASH_BYTES = 512 * 1024 * 1024
#: folder arguments pin at most this many indexed files (from the manifest, no hashing).
MAX_FOLDER_PINS = 2000
#: packages whose versions are pinned.
PINNED_PACKAGES = ("aisac", "fastmcp", "mcp", "docling-slim", "fastembed", "qdrant-edge-py", "qdrant-client")
#: retrieval constants pinned (those the search module defines).
PINNED_RETRIEVAL = ("FUSION", "HYBRID_ALPHA", "PREFETCH", "RRF_K", "HYBRID_WEIGHTS", "MAX_K", "RERANK")

_SECRET = re.compile(r"key|token|secret|password", re.I)


def _path_strings(arguments: Any) -> list[str]:
    """Absolute (or ``~``) path-like strings among the argument values (top level and lists)."""
    out: list[str] = []
    vals = arguments.values() if isinstance(arguments, dict) else []
    for v in vals:
        items = v if isinstance(v, list) else [v]
        for x in items:
            if isinstance(x, str) and 1 < len(x) < 4096 and (x.startswith("/") or x.startswith("~")) and "\n" not in x:
                out.append(x)
    return out


@functools.lru_cache(maxsize=10_000)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file, cached by (path, size, mtime_ns): a file named by many calls is read once while unchanged
    (a bounded cache of immutable values: the key names one version of the file's bytes)."""
    return sha256_file(Path(path))


def pin_inputs(engine: Engine, run_id: str, event_id: int, arguments: dict[str, Any]) -> int:
    """Record the input files a tool call named: files are hashed (sha256), folders pinned through the index
    manifest rows under them (at most ``MAX_FOLDER_PINS``). Only absolute or ``~`` paths that exist are pinned,
    and only for calls that succeeded (a tool refuses paths outside its roots). A file unchanged in size and
    mtime since it was last hashed in this process is not read again. Returns the number of rows written."""
    paths = _path_strings(arguments)
    if not paths:
        return 0
    rows: list[TraceInput] = []
    for raw in paths:
        p = Path(raw).expanduser()
        try:
            if p.is_file():
                st = p.stat()
                sha = _file_sha256(str(p), st.st_size, st.st_mtime_ns) if st.st_size <= MAX_HASH_BYTES else None
                rows.append(
                    TraceInput(
                        run_id=run_id,
                        event_id=event_id,
                        path=str(p.resolve()),
                        sha256=sha,
                        size=st.st_size,
                        mtime_ns=st.st_mtime_ns,
                        source="hashed" if sha else "unhashed",
                    )
                )
            elif p.is_dir():
                prefix = str(p.resolve()).rstrip("/") + "/"
                with Session(engine) as s:
                    docs = s.exec(
                        select(Document)
                        .where(col(Document.path).startswith(prefix, autoescape=True))
                        .limit(MAX_FOLDER_PINS)
                    ).all()
                rows += [
                    TraceInput(
                        run_id=run_id,
                        event_id=event_id,
                        path=d.path,
                        sha256=d.sha256,
                        size=d.size,
                        mtime_ns=d.mtime_ns,
                        source="manifest",
                    )
                    for d in docs
                ]
        except OSError:
            continue
    if rows:
        with Session(engine) as s:
            s.add_all(rows)
            s.commit()
    return len(rows)


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def config_pins(settings: Settings, embedder: Embedder) -> dict[str, Any]:
    """The configuration a run's results depend on: package versions, embedding and sparse models, index
    fingerprint (parser revision + chunker + models), PDF pipeline, retrieval constants and every setting whose
    name does not look secret (``key``, ``token``, ``secret``, ``password`` are left out). A failure to read the
    retrieval part is reported under ``error`` (pins are informative and never block a call). Returns a JSON-ready
    dict (``ranker_model_sha256``: the learned ranker's model file; ``table_region_model_sha256``: the PDF table
    reader's region classifier). ``settings``: the store's settings;
    ``embedder``: the store's dense + sparse embedder (its ``model_id`` is read; no model is loaded)."""
    s = settings
    pins: dict[str, Any] = {"packages": {p: _version(p) for p in PINNED_PACKAGES}}
    try:
        fp = fingerprint(s, embedder)
        pins.update(
            embedding_model=s.rag.embedding_model,
            embedding_model_id=embedder.model_id,
            sparse_model=SPARSE_MODEL_ID,
            parser_revision=PARSER_REVISION,
            index_fingerprint=fp,
            # the OCR engine and its language data, for passages read from page images (aisac_core.rag.ocr)
            ocr=ocr_pin(OcrOptions.from_settings(s)),
            pdf_pipeline=s.rag.pdf_pipeline,
            chunk_max_tokens=s.rag.chunk_max_tokens,
            retrieval={k: getattr(retrieval, k) for k in PINNED_RETRIEVAL if hasattr(retrieval, k)},
            # the learned ranker of hybrid search and its calibration (aisac_core.rag.ranker, models/ranker.json)
            ranker_model_sha256=ranker_sha256(),
            # the learned table-region classifier of PDF tables (aisac_core.rag.tableregions, models/table_regions.json)
            table_region_model_sha256=table_region_sha256(),
        )
    except Exception as exc:  # pins are informative; a failure must not block a tool call
        pins["error"] = f"{type(exc).__name__}: {exc}"
    pins["settings"] = {
        k: (str(v) if isinstance(v, Path) else [str(x) for x in v] if isinstance(v, list) else v)
        for k, v in s.flat().items()
        if not _SECRET.search(k)
    }
    plain: dict[str, Any] = json.loads(dumps(pins))
    return plain


def write_run_pins(engine: Engine, run_id: str, pins: Callable[[], dict[str, Any]]) -> bool:
    """Write the configuration pins of ``run_id`` (``pins()``, called only when needed: :func:`config_pins`) if the
    run has none yet; True when written. Two processes seeing a run's first calls at once write one row."""
    with Session(engine) as s:
        if s.get(TraceRunPin, run_id) is not None:
            return False
    values = pins()
    with Session(engine) as s:
        lock(s, "run_pin", run_id)
        if s.get(TraceRunPin, run_id) is None:
            s.add(TraceRunPin(run_id=run_id, pins_json=dumps(values)))
            s.commit()
            return True
    return False


def run_pins(engine: Engine, run_id: str) -> dict[str, Any] | None:
    """The recorded configuration pins of a run, or None."""
    with Session(engine) as s:
        row = s.get(TraceRunPin, run_id)
    return json.loads(row.pins_json) if row else None


def changed_pins(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """Names of the pins (except ``settings``) whose values differ between ``old`` and ``new``, sorted."""
    old, new = old or {}, new or {}
    return [k for k in sorted(set(old) | set(new)) if k != "settings" and old.get(k) != new.get(k)]
