"""Embed chunk texts at most once per model: the ``embedding_cache`` table and the batched embedding step of
indexing.

A text's dense vector depends only on the model and the text, so it is stored under
``sha256(model id + NUL + text)`` (:func:`cache_key`). Re-indexing a document whose content changed embeds only
its chunks whose indexed text is new; a chunk text shared by several documents (a licence footer, a repeated
abstract) is embedded once. BM25 vectors are not cached: they need no model (tokenising and hashing, over
5,000 chunks/s) and are recomputed.

Entries are never read for another model (the key contains the model id). They are not deleted when a
document goes: a vector costs 1.5 kB (384 float32) and the cache is what makes putting a file back, or
restoring an earlier version, free; :func:`clear` empties it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from sqlalchemy import Engine, delete
from sqlmodel import Session, col, select

from aisac_core.store.tables import EmbeddingCacheEntry


class DocumentEmbedder(Protocol):
    """What the cache needs of an embedder (:class:`~aisac_core.rag.embeddings.Embedder` has it)."""

    @property
    def model_id(self) -> str: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...


#: Keys per ``IN (...)`` look-up (well under SQLite's and PostgreSQL's bound-parameter limits).
LOOKUP_CHUNK = 500


def cache_key(model_id: str, text: str) -> str:
    """The cache key of ``text`` embedded by ``model_id``: hex sha256 of ``model_id + "\\0" + text`` (UTF-8)."""
    return hashlib.sha256(f"{model_id}\0{text}".encode()).hexdigest()


@dataclass
class EmbedCounts:
    """Texts asked for, texts found in the cache (or repeated within the call), texts embedded, and the
    CPU seconds (``time.process_time``, all threads) of the model and of the cache look-ups and writes."""

    texts: int = 0
    cached: int = 0
    embedded: int = 0
    model_cpu_s: float = 0.0
    cache_cpu_s: float = 0.0


def embed_cached(
    engine: Engine, embedder: DocumentEmbedder, texts: Sequence[str], counts: EmbedCounts | None = None
) -> list[list[float]]:
    """Dense vectors of ``texts`` (in order), taken from the cache where present; the others are embedded in
    one call of ``embedder.embed_documents`` (batched by token length there) and stored.

    Args:
        engine: the store's SQL engine (the ``embedding_cache`` table).
        embedder: an :class:`~aisac_core.rag.embeddings.Embedder` (``model_id``, ``embed_documents``).
        texts: the indexed texts of the chunks.
        counts: added to when given.

    Returns:
        One vector (list of floats) per text.
    """
    c = counts if counts is not None else EmbedCounts()
    model_id = embedder.model_id
    t0 = time.process_time()
    keys = [cache_key(model_id, t) for t in texts]
    found: dict[str, list[float]] = {}
    with Session(engine) as s:
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), LOOKUP_CHUNK):
            part = uniq[i : i + LOOKUP_CHUNK]
            for row in s.exec(select(EmbeddingCacheEntry).where(col(EmbeddingCacheEntry.key).in_(part))):
                found[row.key] = np.frombuffer(row.vector, dtype="<f4").tolist()
    todo: dict[str, str] = {}
    for k, t in zip(keys, texts):
        if k not in found and k not in todo:
            todo[k] = t
    c.cache_cpu_s += time.process_time() - t0
    if todo:
        t1 = time.process_time()
        vecs = embedder.embed_documents(list(todo.values()))
        c.model_cpu_s += time.process_time() - t1
        t2 = time.process_time()
        with Session(engine) as s:
            for k, v in zip(todo, vecs):
                found[k] = v
                s.merge(
                    EmbeddingCacheEntry(key=k, model=model_id, dim=len(v), vector=np.asarray(v, dtype="<f4").tobytes())
                )
            s.commit()
        c.cache_cpu_s += time.process_time() - t2
    c.texts += len(texts)
    c.embedded += len(todo)
    c.cached += len(texts) - len(todo)
    return [found[k] for k in keys]


def clear(engine: Engine, model_id: str | None = None) -> int:
    """Delete the cached vectors (of ``model_id`` only, when given); returns how many rows went."""
    with Session(engine) as s:
        stmt = delete(EmbeddingCacheEntry)
        if model_id is not None:
            stmt = stmt.where(col(EmbeddingCacheEntry.model) == model_id)
        n = s.exec(stmt).rowcount
        s.commit()
        return int(n or 0)
