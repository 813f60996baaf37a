"""The shapes the roles pass between them: evidence items, the tools a plan may use, a run's trace events. (The tools' results are
in :mod:`aisac_core.roles.results`; rag's, which the roles read, in :mod:`aisac_core.rag.results`.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, Required, TypedDict

from aisac_core.jsontypes import JSONObject, JSONValue
from aisac_core.rag.results import AnchorDict
from aisac_core.roles.results import Critique, PlanStep


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
    input_schema: JSONObject


class Proposal(Capability):
    """A tool a plan step may name but the coordinator never calls (:func:`aisac_core.roles.tools.proposable`),
    with its MCP annotation hints read as the specification's defaults where left out."""

    read_only: bool
    destructive: bool
    open_world: bool


class ModelReply(TypedDict):
    """A role model's reply (:func:`aisac_core.roles.backends.ask_json`): the JSON object it ``output`` (valid against
    the role's schema), the request's ``request_sha256``, whether it came from the cache and whether it needed the
    one repair request."""

    output: JSONObject
    request_sha256: str
    cached: bool
    repaired: bool


class Submission(TypedDict):
    """A host's stored submission (:func:`aisac_core.roles.store.submissions`): its ``id``, ``role``, the submitted
    ``payload`` (JSON as sent), whether it was ``valid``, the validation ``errors``, the trace event that recorded it
    and when (``created_at``, ISO 8601)."""

    id: int | None
    role: str
    payload: JSONValue
    valid: bool
    errors: JSONValue
    trace_event_id: int | None
    created_at: str


class StepProposal(TypedDict):
    """A plan step the coordinator did not execute (:func:`aisac_core.roles.planner.proposal`), for the host to
    confirm with the user: the ``step`` id, its ``tool``, ``goal`` and (resolved) ``arguments``, the tool's
    ``read_only`` / ``destructive`` / ``open_world`` hints and the ``reason`` it was not run."""

    step: str
    tool: str
    goal: str
    arguments: Mapping[str, object]
    read_only: bool
    destructive: bool
    open_world: bool
    reason: str


class Plan(TypedDict, total=False):
    """A plan DAG (the ``plan`` JSON Schema: ``rationale``, ``steps``; :func:`aisac_core.roles.planner.plan`) plus
    who wrote it (``by``: template / model / host / router-direct), the model request's ``request_sha256`` and, once
    the coordinator ran it, the ``proposals`` it did not execute."""

    rationale: str
    steps: Required[list[PlanStep]]
    by: str
    request_sha256: str
    proposals: list[StepProposal]


class ReportedValue(TypedDict):
    """A value a paper's table reports (:func:`aisac_core.roles.compare.compare_reported`): the number, its ``unit``
    (from the header), the cell ``text``, the value ``column``, the ``frame`` and ``page`` it is on, the table's
    ``caption``, the cell's ``anchor`` (the data server's cell anchor plus the cell text) and the composition cell's
    ``composition_anchor``."""

    value: float
    unit: str | None
    text: JSONValue
    column: str
    frame: JSONValue
    page: JSONValue
    caption: JSONValue
    anchor: JSONObject
    composition_anchor: JSONValue


class DatabaseValue(TypedDict):
    """The lowest value of a property among a materials database's records of one reduced formula
    (``lit_materials``): the number, its ``unit`` and ``field``, the ``provider`` (id and name), the record's
    ``database_id``, ``url`` and ``retrieved_at``, as the record gives them."""

    value: float
    unit: JSONValue
    field: JSONValue
    provider: JSONValue
    provider_name: JSONValue
    database_id: JSONValue
    url: JSONValue
    retrieved_at: JSONValue


class ComparisonRow(TypedDict, total=False):
    """One composition of a comparison: as written (``composition``) and reduced (``formula_reduced``), the
    ``reported`` value, the ``database`` value (None: no record has it) and their difference in eV/atom (None when a
    unit is not eV/atom or meV/atom); in an answer also the citation numbers of both."""

    composition: Required[str]
    formula_reduced: Required[str]
    reported: Required[ReportedValue]
    database: DatabaseValue | None
    difference_ev_per_atom: float | None
    reported_citation: int
    database_citation: int | None


class ComparisonTable(TypedDict):
    """A table a comparison read its values from: the PDF ``path``, the ``frame``, its ``page`` and ``caption``, and the
    value ``column``."""

    path: str
    frame: JSONValue
    page: JSONValue
    caption: JSONValue
    column: str


class Comparison(TypedDict):
    """A materials comparison (:func:`aisac_core.roles.compare.compare_reported`): ``kind`` "materials_comparison",
    the ``property`` and its ``label``, the ``rows`` (lowest reported first), the compositions with the lowest
    reported and database values, the ``tables`` read, the database ``provider`` and ``notes`` on what failed."""

    kind: str
    property: str
    label: str
    rows: list[ComparisonRow]
    lowest_reported: list[str]
    lowest_database: list[str]
    tables: list[ComparisonTable]
    provider: JSONValue
    notes: list[str]


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
    arguments: JSONValue
    result: JSONValue
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
    memory: list[JSONObject]  # memory_recall's turns and related items, as recalled


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


class CitationJudgement(TypedDict, total=False):
    """The support of one claim by one cited sentence (:func:`aisac_core.roles.support.judge_citation`): the
    ``verdict`` (supported / partly / not supported / contradicted), the ``reasons``, the question-sentence and
    claim-sentence cosines (None without an embedder), who judged (``by``: rules / support model); when the learned
    judge decided also its calibrated ``probability``, ``p_support``, ``p_contradict``, ``question_relevance``,
    ``off_question``, ``rationale`` and the ``model_sha256`` of :mod:`aisac_core.roles.support_model`."""

    verdict: str
    reasons: list[str]
    question_similarity: float | None
    claim_similarity: float | None
    by: str
    probability: float
    p_support: float
    p_contradict: float
    question_relevance: float
    off_question: bool
    rationale: list[int]
    model_sha256: str


class CitationSupport(CitationJudgement, total=False):
    """One rag citation as the support judge reports it (:func:`aisac_core.roles.support.judge_answer`): its number
    ``n``, the cited ``sentence`` and its ``quote_span`` in the chunk (None: the chunk is not in the index), whether
    the sentence is ``evidence`` at all (not a reference entry or boilerplate), and the :class:`CitationJudgement`
    keys (``by`` "model" where the model judged it)."""

    n: Required[int | None]
    sentence: Required[str | None]
    quote_span: Required[list[int] | None]
    evidence: bool


class SupportReport(TypedDict):
    """The support judge's report on an answer (:func:`aisac_core.roles.support.judge_answer`): the answer's
    ``verdict`` (:func:`aisac_core.roles.support.answer_verdict`), who judged (``by``: model / support model /
    rules), one :class:`CitationSupport` per rag citation and the milliseconds per judged citation (None: none
    judged)."""

    verdict: str
    by: str
    citations: list[CitationSupport]
    ms_per_citation: float | None


class CritiqueReport(TypedDict):
    """Critiques as a host's or a model's evaluator submits them (the ``critique`` JSON Schema: :class:`RoleCritique`
    items, an optional ``summary``)."""

    critiques: list[RoleCritique]
    summary: NotRequired[str]


class Evaluation(CritiqueSummary, total=False):
    """The evaluator's report (:func:`aisac_core.roles.evaluator.evaluate`): the :class:`CritiqueSummary` plus the
    ``mode``, the ``anchors`` verdict (intact / changed / missing), the support judge's report (``support``:
    ``{verdict, by, citations, ms_per_citation}``), the automatic ``gates``, who judged (``by``), whether a model
    judged the content (``content_judged``, ``content``), the ``verdict`` wording and the model request's
    ``request_sha256``."""

    mode: Required[str]
    anchors: Required[str]
    support: Required[SupportReport]
    gates: Required[Gates]
    by: Required[str]
    content_judged: Required[bool]
    content: Required[str]
    verdict: Required[str]
    request_sha256: str
