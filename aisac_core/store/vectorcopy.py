"""Copy the vectors of a store into the PostgreSQL vector backend (``aisac store migrate --vectors``).

The points are copied whole, as stored (ids, dense and sparse vectors, payloads): nothing is re-embedded, so the
same queries find the same chunks before and after the move. Both collections are copied (document chunks and
memory dialogue pairs); a collection the source does not have is left for the target to create on first use.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from aisac_core.store.collections import CHUNKS, DIALOGUE
from aisac_core.store.vectors import VectorStoreError

if TYPE_CHECKING:
    from aisac_core.store.pgvectors import PgVectorStore
    from aisac_core.store.vectors import VectorStore

#: points per read from the source and per write to the target
BATCH = 256


class VectorsCopied(TypedDict):
    """``collections``: points copied per collection; ``points``: their sum; ``seconds``: wall time."""

    collections: dict[str, int]
    points: int
    seconds: float


def copy_vectors(
    source: VectorStore,
    target: PgVectorStore,
    *,
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> VectorsCopied:
    """Copy every point of ``source``'s collections (:data:`~aisac_core.store.collections.CHUNKS`,
    :data:`~aisac_core.store.collections.DIALOGUE`) into ``target``, each collection created at the source's
    dimension. ``progress(collection, done, total)`` is called after each batch.

    A target collection that already holds points is refused unless ``replace`` (then it is emptied first). After
    the copy the target's count must equal the source's. Raises :class:`VectorStoreError` (a non-empty target,
    a source that cannot read its vectors back, a count mismatch, a failure of either store)."""
    t0 = time.perf_counter()
    copied: dict[str, int] = {}
    for name in (CHUNKS, DIALOGUE):
        dim = source.existing_dim(name)
        if dim is None:
            continue
        total = source.count(name)
        target.ensure_collection(name, dim)
        have = target.count(name)
        if have and not replace:
            raise VectorStoreError(
                f"the target vector store already holds {have} points in collection {name!r}: pass --replace to "
                "empty it first, or migrate into another database"
            )
        if have:
            target.clear(name)
        done = 0
        if progress is not None:
            progress(f"vectors: {name}", 0, total)
        for batch in source.scroll_points(name, BATCH):
            target.upsert(name, batch)
            done += len(batch)
            if progress is not None:
                progress(f"vectors: {name}", done, total)
        now = target.count(name)
        if now != total:
            raise VectorStoreError(
                f"collection {name!r}: {total} points in the source, {now} in the target after the copy; run the "
                "migration again with --replace"
            )
        copied[name] = done
    return {"collections": copied, "points": sum(copied.values()), "seconds": round(time.perf_counter() - t0, 3)}
