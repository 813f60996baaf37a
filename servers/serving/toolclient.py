"""The suite's tools for the core: an in-process MCP client over :func:`aisac_servers.serving.suite.build` that implements
:class:`aisac_core.ports.ToolPort`.

The roles coordinator executes plan steps, and trace replay re-executes recorded calls, through the suite's real
tools, so every call passes the provenance middleware and becomes a trace event (a child of the step that made it:
request ``_meta`` ``aisac/run_id`` and ``aisac/parent_id``).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from fastmcp import Client, FastMCP
from fastmcp.client.transports import FastMCPTransport

from aisac_core.context import AppContext
from aisac_core.ports import ToolInfo, ToolOutcome

from .suite import build


def _annotations(tool: Any) -> dict[str, Any]:
    ann = getattr(tool, "annotations", None)
    if ann is None:
        return {}
    return ann.model_dump(by_alias=True, exclude_none=True) if hasattr(ann, "model_dump") else dict(ann)


class SuiteTools:
    """``async with SuiteTools(app) as tools``: the live tool list and tool calls of the suite on ``app`` (a
    :class:`~aisac_core.ports.ToolPort`).

    ``server``: a FastMCP server to use instead of the whole suite (tests, or a project's own suite). Without it the
    suite is built on ``app`` without a lifespan: it borrows the running context and does not close it.
    """

    def __init__(self, app: AppContext | None, server: FastMCP | None = None) -> None:
        self.app = app
        self.server = server
        self.client: Client[FastMCPTransport] | None = None
        self._tools: list[ToolInfo] | None = None
        self._session = AsyncExitStack()  # the client's connection

    async def __aenter__(self) -> SuiteTools:
        if self.server is None:
            self.server = build(app=self.app, lifespan=False)
        self.client = Client(self.server)
        await self._session.enter_async_context(self.client)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._session.__aexit__(*exc)

    async def list_tools(self) -> list[ToolInfo]:
        """Every tool of the suite: ``ToolInfo(name, description, input_schema, annotations)`` (the annotations
        as MCP names them: ``readOnlyHint``, ``destructiveHint``...). Cached per connection."""
        if self._tools is None:
            assert self.client is not None, "use `async with SuiteTools(app) as tools`"
            self._tools = [
                ToolInfo(
                    name=t.name,
                    description=t.description or "",
                    input_schema=t.input_schema,
                    annotations=_annotations(t),
                )
                for t in await self.client.list_tools()
            ]
        return self._tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, meta: dict[str, Any] | None = None
    ) -> ToolOutcome:
        """Call tool ``name`` with ``arguments`` (``meta``: the request ``_meta``). The outcome is what the
        provenance middleware records: ``structured`` the structured content (or None), ``text`` the content
        blocks' text. A tool error, and a call refused before the tool runs (unknown tool, arguments rejected),
        come back as ``ToolOutcome(is_error=True, error=message)``, never raised."""
        assert self.client is not None, "use `async with SuiteTools(app) as tools`"
        if name == "rag_search" and "detail" not in arguments:  # the core needs full anchors (evidence, replay);
            meta = {**(meta or {}), "aisac/detail": "full"}  # in _meta, so the recorded arguments stay the caller's
        try:
            r = await self.client.call_tool(name, arguments, meta=meta, raise_on_error=False)
        except Exception as exc:  # protocol-level failure (unknown tool, bad arguments rejected before the tool)
            return ToolOutcome(is_error=True, error=f"{type(exc).__name__}: {exc}")
        texts = [getattr(c, "text", repr(c)) for c in (r.content or [])]
        if r.is_error:
            return ToolOutcome(
                structured=r.structured_content, text=texts, is_error=True, error=" ".join(texts) or "tool error"
            )
        return ToolOutcome(structured=r.structured_content, text=texts)
