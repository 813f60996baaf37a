"""What the role functions need from their service, as protocols (typing only).

:class:`~aisac_core.roles.service.RolesService` satisfies all of them; the role modules take it through these
protocols so that none of them imports the service (which imports them) or the application context.

:class:`Corpus` is the roles' typed view of rag: the store's search, chunk lookup and anchor verification with rag's
declared result types (:class:`~aisac_core.rag.results.HitDict`, :class:`~aisac_core.rag.results.Verification`).
:class:`~aisac_core.rag.service.RagService` satisfies it, so a change of a rag result is a type error in roles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from sqlalchemy.engine import Engine

from aisac_core.jsontypes import JSONObject
from aisac_core.rag.results import HitDict, Verification
from aisac_core.settings import RolesSettings

#: texts -> unit dense vectors (the store's MiniLM embedder; ``[]`` vectors without one)
Embed = Callable[[list[str]], list[list[float]]]
#: ``(chunk_id, delta)`` -> the chunk ``delta`` places away in the same document version, or None
Neighbour = Callable[[str, int], "HitDict | None"]
#: chunk id -> the chunk's text as the index holds it (None: not in the index)
ChunkText = Callable[[str], "str | None"]

#: a project's workflow-graph augmentation: ``augment(graph) -> graph | None`` (None: edited in place)
GraphAugment = Callable[[JSONObject], "JSONObject | None"]


class Corpus(Protocol):
    """What the roles read of the store's indexed documents (rag): :class:`~aisac_core.rag.service.RagService`."""

    def search_hits(self, query: str, k: int) -> list[HitDict]:
        """The top ``k`` hybrid-search hits for ``query``, full anchors (:meth:`RagService.search_hits`)."""
        ...

    def get_chunk(self, chunk_id: str) -> HitDict | None:
        """A chunk by id with its whole text and full anchor (score None), or None when unknown."""
        ...

    def adjacent_chunk(self, chunk_id: str, delta: int) -> HitDict | None:
        """The chunk ``delta`` places from ``chunk_id`` in the same document version, or None."""
        ...

    def verify_cited(self, anchor: Mapping[str, object]) -> Verification:
        """A cited anchor re-verified; a document outside this process's roots counts as ``missing``."""
        ...


class RoleEnv(Protocol):
    """The store's engine (response cache, trace) and the roles settings: what a model call needs."""

    @property
    def engine(self) -> Engine: ...

    @property
    def settings(self) -> RolesSettings: ...


class HasCorpus(Protocol):
    """Anything holding the store's documents as the roles read them (:class:`Corpus`)."""

    @property
    def corpus(self) -> Corpus: ...


class EvaluatorEnv(RoleEnv, HasCorpus, Protocol):
    """:class:`RoleEnv` plus the store's documents (the re-verification of a cited anchor, the cited chunk's text)
    and the dense embedder (semantic similarity of question, answer and cited sentences)."""

    def chunk_text(self, chunk_id: str | None) -> str | None:
        """The text of chunk ``chunk_id`` as the index holds it (None: not in the index)."""
        ...

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Unit dense vectors of ``texts`` (``[]`` vectors without an embedder)."""
        ...


class ResearchEnv(RoleEnv, HasCorpus, Protocol):
    """:class:`RoleEnv` plus the store's documents (the neighbouring chunk) and the dense embedder: what the
    extractive answer needs."""

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Unit dense vectors of ``texts`` (``[]`` vectors without an embedder)."""
        ...


class HasAugment(Protocol):
    """Anything holding a served project's graph augmentation (None: no project, or it has none)."""

    @property
    def graph_augment(self) -> GraphAugment | None: ...


class GraphEnv(EvaluatorEnv, ResearchEnv, HasAugment, Protocol):
    """Everything a whole graph run needs (:meth:`aisac_core.roles.graph.GraphRun.run`)."""
