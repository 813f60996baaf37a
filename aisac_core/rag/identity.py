"""This process's side of the store identity (:mod:`aisac_core.store.identity`): what its settings would build.

Computed from the settings and the files on disk alone, without loading a model or opening the vector store, so the
check can run before anything else: the model file's sha256 (cached per file, size and mtime; the offline default's
digest is read from the assembled folder's marker when present) and the dimension from the model folder's
``config.json`` (``hidden_size``, the width of a BERT-style encoder's output: 384 for all-MiniLM-L6-v2).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from aisac_core.hashing import sha256_file
from aisac_core.rag.chunking import CONTEXT_REVISION
from aisac_core.rag.documents import PARSER_REVISION
from aisac_core.rag.embeddings import Embedder, offline_minilm_file
from aisac_core.rag.headers import model_sha256 as header_model_sha256
from aisac_core.settings import DEFAULT_EMBEDDING_MODEL
from aisac_core.store.identity import StoreIdentity

if TYPE_CHECKING:
    from aisac_core.settings import Settings

__all__ = ["current_identity", "parser_revision", "vector_location"]

#: the chunker aisac runs (docling-core's HybridChunker, peers merged), as recorded in the identity
CHUNKER = "HybridChunker(merge_peers)"


def vector_location(settings: Settings) -> str:
    """Where the vectors of ``settings`` are, in a form equal for every process that reaches the same store:
    ``sql`` (the SQL store's PostgreSQL database), ``postgresql://host:port/database`` (no user or password), the
    Qdrant server's URL, or ``embedded:<folder name>`` (a folder of the data dir, wherever the data dir is)."""
    kind = settings.vector_kind
    if kind == "postgres":
        url = settings.resolved_vector_url or ""
        if settings.vector_url in (None, "sql") or url == settings.resolved_sql_url:
            return "sql"
        from sqlalchemy.engine import make_url

        u = make_url(url)
        return f"postgresql://{u.host or ''}:{u.port or 5432}/{u.database or ''}"
    if kind == "qdrant" and settings.qdrant_url:
        return settings.qdrant_url.rstrip("/")
    return f"embedded:{settings.vectors_dir.name}"


@lru_cache(maxsize=1)
def parser_revision() -> str:
    """Parser revision + docling-slim version + contextual header revision + header model hash (16 hex digits)."""
    try:
        dv = version("docling-slim")
    except Exception:
        dv = "unknown"
    return f"{PARSER_REVISION}|docling-slim=={dv}|context@{CONTEXT_REVISION}|header_model={header_model_sha256()[:16]}"


@lru_cache(maxsize=16)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(Path(path))


def _model_file(settings: Settings) -> Path | None:
    """The dense model's ``model.onnx`` (None for a fastembed model name)."""
    spec = settings.rag.embedding_model
    if spec == DEFAULT_EMBEDDING_MODEL:
        return offline_minilm_file(settings.models_dir)
    p = Path(spec).expanduser()
    return p.resolve() / "model.onnx" if p.is_dir() else None


def _model_sha256(settings: Settings) -> str | None:
    f = _model_file(settings)
    if f is None:
        return None
    marker = f.parent / "aisac-assembled.json"  # the offline default: its digest was taken when assembled
    try:
        got = json.loads(marker.read_text()).get("model.onnx sha256")
        if isinstance(got, str) and got:
            return got
    except (OSError, ValueError):
        pass
    try:
        st = f.stat()
    except OSError:
        return None  # missing: loading it fails later with the install hint
    return _file_sha256(str(f), st.st_size, st.st_mtime_ns)


def _model_dim(settings: Settings) -> int | None:
    f = _model_file(settings)
    if f is None:
        return None
    for cfg in (f.parent / "config.json",):
        try:
            n = json.loads(cfg.read_text()).get("hidden_size")
        except (OSError, ValueError):
            continue
        if isinstance(n, int) and n > 0:
            return n
    return 384 if settings.rag.embedding_model == DEFAULT_EMBEDDING_MODEL else None


def current_identity(settings: Settings, schema_revision: str | None) -> StoreIdentity:
    """The identity a store built by a process with ``settings`` has (``schema_revision``: the store's, read by the
    caller). Reads the model file's hash (cached) and ``config.json``; loads no model."""
    return StoreIdentity(
        schema_revision=schema_revision,
        vector_backend=settings.vector_kind,
        vector_location=vector_location(settings),
        embedding_model=Embedder(settings).model_id,
        embedding_model_sha256=_model_sha256(settings),
        embedding_dim=_model_dim(settings),
        chunk_max_tokens=settings.rag.chunk_max_tokens,
        chunker=CHUNKER,
        pdf_pipeline=settings.rag.pdf_pipeline,
        parser_revision=parser_revision(),
    )
