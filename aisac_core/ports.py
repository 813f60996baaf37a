"""The tool port: how the core calls tools without knowing MCP.

The roles coordinator executes plan steps and trace replay re-executes recorded calls; both need "the suite's tools"
but the core imports no MCP library. They talk to a :class:`ToolPort`, which ``aisac_servers`` implements with an
in-process MCP client on the suite (``aisac_servers.serving.toolclient.SuiteTools``). Tests may implement it with plain
functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class ToolInfo:
    """A tool as the port lists it: MCP ``name``, ``description``, JSON Schema of its input (``input_schema``) and
    its annotations (MCP ``ToolAnnotations`` as a dict: ``readOnlyHint``, ``destructiveHint``, ...)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """``{name, description, input_schema, annotations}``."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "annotations": self.annotations,
        }


@dataclass
class ToolOutcome:
    """The result of one tool call: ``structured`` (the structured content, or None), ``text`` (the text blocks),
    ``is_error`` (a tool error: ``error`` holds its message)."""

    structured: Any = None
    text: list[str] = field(default_factory=list)
    is_error: bool = False
    error: str | None = None

    @property
    def value(self) -> Any:
        """The structured content when there is one, else the text blocks."""
        return self.structured if self.structured is not None else self.text


@runtime_checkable
class ToolPort(Protocol):
    """List and call the suite's tools (async). ``meta`` is passed as the request ``_meta`` (``run_id``,
    ``aisac/parent_id``: the trace joins the call to a run and a parent step)."""

    async def list_tools(self) -> list[ToolInfo]:
        """Every tool the suite serves."""
        ...

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, meta: dict[str, Any] | None = None
    ) -> ToolOutcome:
        """Call ``name`` with ``arguments``. A tool error comes back as ``ToolOutcome(is_error=True, error=...)``,
        never raised."""
        ...


@runtime_checkable
class PaperLookup(Protocol):
    """Look a paper up by an identifier printed on it (a DOI or an arXiv id), for rag's front matter. The
    composition root (:mod:`aisac_core.context`) gives rag one backed by the literature service (cached,
    rate-limited, replayable), so rag never imports the literature package."""

    def lookup(self, identifier: str, wait_s: float = 3.0) -> dict[str, Any] | None:
        """``{title, authors: [str], source}`` (``source``: "crossref", "arxiv", "openalex", ...) of the paper
        ``identifier`` names, or None when it cannot be answered now (offline, throttled, not found, a request
        still running after ``wait_s`` seconds: a later call answers). Never raises."""
        ...
