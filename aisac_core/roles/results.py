"""Result shapes of the roles (the tools' output schemas in ``tools/list`` are derived from them).

The route, plan and critique shapes follow the roles' JSON Schemas (:mod:`aisac_core.roles.schemas`; a test checks
that the enums and keys agree), plus the bookkeeping every tool result carries: ``run_id`` (the trace run),
``event_id`` (the role step's trace event), ``by`` (rules / template / model / host). The core returns plain dicts
of these shapes; their top-level keys are all declared (``extra="forbid"`` through ``pydantic.with_config``),
nested objects stay open: ``Mapping[str, object]`` (a JSON object whose values the type does not fix; its wire schema
is ``{"type": "object"}``, the same as an untyped dict's, and it accepts the core's TypedDicts, whose full shapes
are in :mod:`aisac_core.roles.shapes`). No class docstrings: pydantic would put them in every schema a host reads (comments
instead). docs/roles.md has the full shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

Intent = Literal["factual", "analytical", "exploratory"]
Complexity = Literal["low", "medium", "high"]
Decision = Literal["direct", "plan"]
Helper = Literal["researcher"]

_FORBID = ConfigDict(extra="forbid")


# ``roles_route``: the router's decision.
@with_config(_FORBID)
class RouteResult(TypedDict):
    intent: Intent
    complexity: Complexity
    decision: Decision
    rationale: str
    context: NotRequired[Mapping[str, object]]
    by: str
    request_sha256: NotRequired[str]
    run_id: str
    event_id: int


class PlanStep(TypedDict):
    id: str
    goal: str
    tool: NotRequired[str]
    helper: NotRequired[Helper]
    arguments: NotRequired[Mapping[str, object]]
    depends_on: list[str]
    expected_evidence: NotRequired[str]


# ``roles_plan``: a plan DAG (not run).
@with_config(_FORBID)
class PlanResult(TypedDict):
    rationale: NotRequired[str]
    steps: list[PlanStep]
    by: str
    request_sha256: NotRequired[str]
    run_id: str
    event_id: int


class Critique(TypedDict):
    aspect: str
    text: str
    severity: float
    evidence_refs: NotRequired[list[str]]


# ``roles_evaluate``: the evaluator's report.
@with_config(_FORBID)
class EvaluateResult(TypedDict):
    mode: str
    verdict: str
    anchors: str  # intact | changed | missing: the cited bytes are still there (aisac_core.roles.support)
    support: Mapping[
        str, object
    ]  # {verdict: supported|partly|not supported|not judged, by, citations, ms_per_citation}
    passed: bool
    content_judged: bool
    content: str
    gates: Mapping[str, Mapping[str, object]]
    critiques: list[Critique]
    mean_severity: float
    max_severity: float
    thresholds: dict[str, float]
    by: str
    request_sha256: NotRequired[str]
    run_id: str
    event_id: int


# ``roles_submit_route`` / ``roles_submit_plan``: the stored submission.
@with_config(_FORBID)
class SubmitResult(TypedDict):
    stored: bool
    submission_id: int
    run_id: str
    event_id: int


# ``roles_submit_critique``: the stored critiques and their verdict.
@with_config(_FORBID)
class CritiqueSubmitResult(TypedDict):
    stored: bool
    submission_id: int
    verdict: str
    passed: bool
    content_judged: bool
    mean_severity: float
    max_severity: float
    thresholds: dict[str, float]
    run_id: str
    event_id: int


# A whole graph run (:meth:`aisac_core.roles.graph.GraphRun.run`, ``aisac ask``).
@with_config(_FORBID)
class RunResult(TypedDict):
    run_id: str
    task: str
    mode: str
    llm: str
    route: Mapping[str, object]
    plan: Mapping[str, object]
    answer: Mapping[str, object]
    evaluation: Mapping[str, object]
    attempts: Sequence[Mapping[str, object]]
    model_errors: Sequence[Mapping[str, object]]
    took_s: float


# ``roles_run``: a finished run (``status: done``, the :class:`RunResult` keys) or a job still going.
@with_config(_FORBID)
class RolesRun(TypedDict):
    status: str
    job_id: str
    run_id: str
    report_uri: str
    message: NotRequired[str]
    task: NotRequired[str]
    mode: NotRequired[str]
    llm: NotRequired[str]
    route: NotRequired[Mapping[str, object]]
    plan: NotRequired[Mapping[str, object]]
    answer: NotRequired[Mapping[str, object]]
    evaluation: NotRequired[Mapping[str, object]]
    attempts: NotRequired[Sequence[Mapping[str, object]]]
    model_errors: NotRequired[Sequence[Mapping[str, object]]]
    took_s: NotRequired[float]


# ``roles_job_status``: one job's status (``result``: the :class:`RunResult` once done), or ``jobs``.
@with_config(_FORBID)
class RolesJob(TypedDict, total=False):
    job_id: str
    run_id: str | None
    status: str
    elapsed_s: float
    runner: str | None
    result: Mapping[str, object]
    error: str
    jobs: Sequence[Mapping[str, object]]
