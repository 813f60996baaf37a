"""The shapes the roles pass between them: evidence items, the tools a plan may use, a run's trace events. (The tools' results are
in :mod:`aisac_core.roles.results`; rag's, which the roles read, in :mod:`aisac_core.rag.results`.)"""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict

from aisac_core.rag.results import AnchorDict
from aisac_core.roles.results import Critique


class EvidenceItem(TypedDict, total=False):
    """One piece of evidence the plan's steps gathered (:func:`collect_evidence`): a rag passage (``kind`` "rag":
    its chunk, document, page, section, search score, text, evidence ``anchor`` and section ``label``) or a
    literature record (``kind`` "literature": its identifier ``ref``, title, abstract as ``text``, year, url).
    ``step``: the plan step whose result held it."""

    kind: Required[Literal["rag", "literature"]]
    chunk_id: str
    doc_id: str | None
    title: str | None
    path: str | None
    page: int | None
    section: str | None
    score: float | None
    text: Required[str]
    anchor: AnchorDict
    step: Required[str]
    label: str | None
    ref: str
    year: int | None
    url: str | None


class Capability(TypedDict):
    """A tool a plan may call on its own (:func:`aisac_core.roles.tools.capabilities`): its MCP ``name``,
    ``description`` and the JSON Schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


class Proposal(Capability):
    """A tool a plan step may name but the coordinator never calls (:func:`aisac_core.roles.tools.proposable`),
    with its MCP annotation hints read as the specification's defaults where left out."""

    read_only: bool
    destructive: bool
    open_world: bool


class RunEvent(TypedDict):
    """One trace event of a run as the evaluator reads it (:func:`aisac_core.roles.store.run_events`): the
    :class:`~aisac_core.store.tables.TraceEvent` row with ``arguments`` and ``result`` parsed from their stored JSON
    (None when truncated or absent: any JSON value otherwise)."""

    id: int | None
    kind: str
    server: str
    tool: str
    status: str
    error: str | None
    parent_id: int | None
    arguments: Any
    result: Any
    latency_ms: float


class GateAnchor(TypedDict):
    """One cited anchor as the evidence gate re-verified it (:func:`aisac_core.roles.evaluator.evidence_gate`): the
    citation number ``n``, its ``chunk_id``, the verification ``status`` and ``detail``, its search ``score``, whether
    it ``counted`` toward the mode's minimum, and the ``anchor`` word (intact / changed / missing)."""

    n: int | None
    chunk_id: str | None
    status: str | None
    detail: str | None
    score: float | None
    counted: bool
    anchor: str


class EvidenceGate(TypedDict):
    """The evidence gate: ``passed``, the mode's ``required`` anchors and ``min_score``, the anchors that counted
    (``verified_counted``) and every cited anchor (:class:`GateAnchor`)."""

    passed: bool
    required: int
    min_score: float
    verified_counted: int
    anchors: list[GateAnchor]


class GateFile(TypedDict):
    """A file the run's data calls or the answer referenced: its ``path``, the trace event that named it (None: the
    answer's ``files``), whether it is ``ok`` and the ``problem`` otherwise."""

    path: str
    event_id: int | None
    ok: bool
    problem: str | None


class DataGate(TypedDict):
    """The data gate: ``passed`` and the referenced ``files`` (:class:`GateFile`)."""

    passed: bool
    files: list[GateFile]


class GateRun(TypedDict):
    """A code run the exec gate read: its trace ``event_id``, whether it ended ``ok`` and its ``error``."""

    event_id: int | None
    ok: bool
    error: str | None


class ExecGate(TypedDict):
    """The exec gate: ``passed`` and the run's code runs (:class:`GateRun`)."""

    passed: bool
    runs: list[GateRun]


class Gates(TypedDict):
    """The evaluator's automatic gates (:func:`aisac_core.roles.evaluator.automatic_checks`)."""

    evidence: EvidenceGate
    data: DataGate
    exec: ExecGate


class RoleCritique(Critique, total=False):
    """A critique as the evaluator collects it: the ``critique`` schema's keys (:class:`~aisac_core.roles.results.Critique`:
    ``aspect``, ``text``, ``severity``, ``evidence_refs``) plus ``by`` ("model") on those the model added (the
    automatic gates' carry none)."""

    by: str


class CritiqueSummary(TypedDict):
    """The critiques' verdict (:func:`aisac_core.roles.evaluator.summarize`): the ``critiques`` kept (highest severity
    first), their ``mean_severity`` and ``max_severity``, whether they ``passed`` the ``thresholds``
    (``max_mean_severity``, ``max_severity``)."""

    critiques: list[RoleCritique]
    mean_severity: float
    max_severity: float
    passed: bool
    thresholds: dict[str, float]


class Citation(TypedDict, total=False):
    """One citation of an answer, numbered ``n`` as the text's ``[n]`` markers
    (:func:`aisac_core.roles.researcher.citation`): a rag passage (``kind`` "rag": its chunk, document, page,
    section, search score, evidence ``anchor`` and the ``quote``d text) or a literature record (``kind``
    "literature": ``ref``, title, url, year). A host's answer (:func:`aisac_core.roles.service.answer_object`) cites
    rag anchors by ``chunk_id``, ``anchor`` and ``score`` only."""

    n: Required[int]
    kind: Required[str]
    chunk_id: str
    doc_id: str | None
    title: str | None
    path: str | None
    page: int | None
    section: str | None
    score: float | None
    anchor: AnchorDict
    quote: str
    ref: str
    url: str | None
    year: int | None


class Answer(TypedDict, total=False):
    """An answer as the researcher writes it and the evaluator reads it: the ``text`` with ``[n]`` markers, its
    ``citations``, who wrote it (``by``: extractive, model, host...), how many evidence items it drew on, whether it
    ``stated`` an answer (False: the sources do not say; ``closest`` then lists the closest passages, ``withheld``
    the text an unsupported answer had), the extractive answer's ``check`` (asked ``kind``, ``coverage``,
    ``similarity``), the model request's ``request_sha256``, and a host's ``files`` and ``code_runs`` (trace event
    ids) for the data and exec gates."""

    text: Required[str]
    citations: Required[list[Citation]]
    by: str
    evidence_count: int
    stated: bool
    check: dict[str, str | float | None]
    closest: list[dict[str, object]]
    withheld: str | None
    request_sha256: str
    files: list[str]
    code_runs: list[int]
    comparisons: list[dict[str, object]]  # materials comparison tables (:func:`aisac_core.roles.compare.attach`)


class RouteContext(TypedDict):
    """A route's ``context`` (:func:`aisac_core.roles.router.context_summary`): the search hits the router saw and
    the memory items recalled for it (``memory_recall`` results)."""

    rag: list[dict[str, object]]  # each hit's chunk_id, doc_id, title, score (text left out)
    memory: list[dict[str, Any]]


class Route(TypedDict, total=False):
    """The router's decision (:func:`aisac_core.roles.router.route`; the ``route`` JSON Schema plus bookkeeping):
    ``intent`` (factual / analytical / exploratory), ``complexity`` (low / medium / high), ``decision`` (direct /
    plan), the ``rationale``, the ``context`` it saw, who decided (``by``: rules / model / host) and the model
    request's ``request_sha256``."""

    intent: Required[str]
    complexity: Required[str]
    decision: Required[str]
    rationale: Required[str]
    context: RouteContext
    by: str
    request_sha256: str


class Evaluation(CritiqueSummary, total=False):
    """The evaluator's report (:func:`aisac_core.roles.evaluator.evaluate`): the :class:`CritiqueSummary` plus the
    ``mode``, the ``anchors`` verdict (intact / changed / missing), the support judge's report (``support``:
    ``{verdict, by, citations, ms_per_citation}``), the automatic ``gates``, who judged (``by``), whether a model
    judged the content (``content_judged``, ``content``), the ``verdict`` wording and the model request's
    ``request_sha256``."""

    mode: Required[str]
    anchors: Required[str]
    support: Required[dict[str, Any]]
    gates: Required[Gates]
    by: Required[str]
    content_judged: Required[bool]
    content: Required[str]
    verdict: Required[str]
    request_sha256: str
