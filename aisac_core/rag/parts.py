"""What the rag functions need of a store: :class:`RagParts`, the settings, the SQL engine, the embedder and the
vector store. :class:`aisac_core.rag.service.RagService` has them (so has the application context that builds it);
a function annotated with :class:`RagParts` works with either."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.settings import Settings
    from aisac_core.store.vectors import VectorStore


class RagParts(Protocol):
    """The parts of one store the rag functions use (each may open on first use)."""

    @property
    def settings(self) -> Settings:
        """The store's settings (``settings.rag`` for the rag group)."""
        ...

    @property
    def engine(self) -> Engine:
        """The SQL engine (schema at the newest revision)."""
        ...

    @property
    def embedder(self) -> Embedder:
        """Dense + sparse embedder."""
        ...

    def vectors(self) -> VectorStore:
        """The vector store with the ``chunks`` collection ready."""
        ...
