"""A read-only view of a vector store, for the commands that only read (``aisac status``, ``search``, ``verify``).

:class:`ReadOnlyVectors` opens the collections that exist and never creates one: a collection that does not exist
(nothing was indexed into this store yet) reads as empty. Every write (``ensure_collection``, ``upsert``,
``delete``) raises :class:`ReadOnlyStoreError`, so a read-only command cannot change the store by mistake: the
guarantee is in the interface, not in each caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from aisac_core.store.vectors import Cond, Mode, VectorHit, VectorPoint, VectorStore, VectorStoreError

__all__ = ["ReadOnlyStoreError", "ReadOnlyVectors"]


class ReadOnlyStoreError(VectorStoreError):
    """A write reached a store opened read-only (a bug in the caller: the message names the operation)."""


class ReadOnlyVectors(VectorStore):
    """``inner`` opened for reading: ``names`` are the collections to open (those missing read as empty).

    Raises :class:`VectorStoreError` (construction) when a collection's dimension differs from ``dim`` (the store's
    vectors are of another embedding model: query vectors of this one would be compared with them)."""

    def __init__(self, inner: VectorStore, names: Iterable[str], dim: int | None) -> None:
        self.inner = inner
        self.present: set[str] = set()
        for name in names:
            got = inner.existing_dim(name)
            if got is None:
                continue
            if dim is not None and got != dim:
                raise VectorStoreError(
                    f"the vector collection {name!r} holds {got}-d vectors, this process's embedding model gives "
                    f"{dim}-d ones: set AISAC_EMBEDDING_MODEL to the model the store was indexed with (a read-only "
                    "command never rebuilds the collection)"
                )
            self.present.add(name)

    def _refuse(self, what: str) -> ReadOnlyStoreError:
        return ReadOnlyStoreError(f"{what}: this process opened the store read-only (status, search, verify)")

    def ensure_collection(self, name: str, dim: int) -> bool:
        raise self._refuse(f"creating the collection {name!r}")

    def upsert(self, name: str, points: list[VectorPoint]) -> None:
        raise self._refuse(f"writing {len(points)} points to {name!r}")

    def delete(self, name: str, conds: list[Cond]) -> None:
        raise self._refuse(f"deleting points of {name!r}")

    def query(
        self,
        name: str,
        *,
        dense: list[float] | None,
        sparse: tuple[list[int], list[float]] | None,
        limit: int,
        conds: list[Cond] | None = None,
        mode: Mode = "hybrid",
        prefetch_limit: int = 100,
        rrf_k: int = 60,
        weights: tuple[float, float] | None = None,
        ids: list[str] | None = None,
        with_payload: bool = True,
    ) -> list[VectorHit]:
        if name not in self.present:
            return []
        return self.inner.query(
            name,
            dense=dense,
            sparse=sparse,
            limit=limit,
            conds=conds,
            mode=mode,
            prefetch_limit=prefetch_limit,
            rrf_k=rrf_k,
            weights=weights,
            ids=ids,
            with_payload=with_payload,
        )

    def retrieve(self, name: str, ids: list[str]) -> list[VectorHit]:
        return self.inner.retrieve(name, ids) if name in self.present else []

    def dense_vectors(self, name: str, ids: list[str]) -> dict[str, list[float]]:
        return self.inner.dense_vectors(name, ids) if name in self.present else {}

    def count(self, name: str, conds: list[Cond] | None = None) -> int:
        return self.inner.count(name, conds) if name in self.present else 0

    def scroll_ids(
        self, name: str, conds: list[Cond] | None = None, keys: list[str] | None = None
    ) -> Iterable[tuple[str, dict[str, Any]]]:
        return self.inner.scroll_ids(name, conds, keys) if name in self.present else iter(())

    def existing_dim(self, name: str) -> int | None:
        return self.inner.existing_dim(name) if name in self.present else None

    def scroll_points(self, name: str, batch: int = 256) -> Iterator[list[VectorPoint]]:
        return self.inner.scroll_points(name, batch) if name in self.present else iter(())

    def flush(self) -> None:  # nothing was written
        return None

    def close(self) -> None:
        self.inner.close()
