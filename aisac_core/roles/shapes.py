"""The shapes the roles pass between them: evidence items, the tools a plan may use, a run's trace events. (The tools' results are
in :mod:`aisac_core.roles.results`; rag's, which the roles read, in :mod:`aisac_core.rag.results`.)"""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict

from aisac_core.rag.results import AnchorDict


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
