"""What the role functions need from their service, as protocols (typing only).

:class:`~aisac_core.roles.service.RolesService` satisfies all of them; the role modules take it through these
protocols so that none of them imports the service (which imports them) or the application context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from aisac_core.settings import RolesSettings

#: a project's workflow-graph augmentation: ``augment(graph) -> graph | None`` (None: edited in place)
GraphAugment = Callable[[dict[str, Any]], "dict[str, Any] | None"]


class RoleEnv(Protocol):
    """The store's engine (response cache, trace) and the roles settings: what a model call needs."""

    @property
    def engine(self) -> Engine: ...

    @property
    def settings(self) -> RolesSettings: ...


class EvaluatorEnv(RoleEnv, Protocol):
    """:class:`RoleEnv` plus the re-verification of a cited anchor (rag)."""

    def verify_anchor(self, anchor: dict[str, Any]) -> dict[str, Any]:
        """``{status, chunk_id, path, detail}`` of ``anchor`` (:func:`aisac_core.rag.verify.verify_anchor`)."""
        ...


class HasAugment(Protocol):
    """Anything holding a served project's graph augmentation (None: no project, or it has none)."""

    @property
    def graph_augment(self) -> GraphAugment | None: ...


class GraphEnv(EvaluatorEnv, HasAugment, Protocol):
    """Everything a whole graph run needs (:func:`aisac_core.roles.graph.run_graph`)."""
