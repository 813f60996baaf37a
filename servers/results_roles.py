"""Result shapes of the roles tools (their output schemas in ``tools/list``).

The route, plan and critique shapes follow the roles' JSON Schemas (:mod:`aisac_core.roles.schemas`: the enums are
read from them, the keys mirror their properties), plus the run they were recorded in (``run_id``). Results carry
more keys than declared (sent as built): ``by`` (rules / template / model), ``event_id`` (the role step's trace
event), the evaluator's ``mode``, ``thresholds``, ``content``, ...; docs/roles.md has the full shapes.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from aisac_core.roles.schemas import load_schema

_ROUTE = load_schema("route")["properties"]
_STEP = load_schema("plan")["properties"]["steps"]["items"]["properties"]

Intent = Literal[tuple(_ROUTE["intent"]["enum"])]  # type: ignore[valid-type]
Complexity = Literal[tuple(_ROUTE["complexity"]["enum"])]  # type: ignore[valid-type]
Decision = Literal[tuple(_ROUTE["decision"]["enum"])]  # type: ignore[valid-type]
Helper = Literal[tuple(_STEP["helper"]["enum"])]  # type: ignore[valid-type]


class RouteResult(TypedDict):
    intent: Intent
    complexity: Complexity
    decision: Decision
    rationale: str
    context: NotRequired[dict[str, Any]]
    run_id: str


class PlanStep(TypedDict):
    id: str
    goal: str
    tool: NotRequired[str]
    helper: NotRequired[Helper]
    arguments: NotRequired[dict[str, Any]]
    depends_on: list[str]
    expected_evidence: NotRequired[str]


class PlanResult(TypedDict):
    steps: list[PlanStep]
    run_id: str


class Critique(TypedDict):
    aspect: str
    text: str
    severity: float
    evidence_refs: NotRequired[list[str]]


class EvaluateResult(TypedDict):
    verdict: str
    passed: bool
    content_judged: bool
    gates: dict[str, dict[str, Any]]
    critiques: list[Critique]
    run_id: str


class SubmitResult(TypedDict):
    stored: bool
    run_id: str


class CritiqueSubmitResult(TypedDict):
    stored: bool
    verdict: str
    passed: bool
    run_id: str
