"""The roles' view of the suite's tools, through a :class:`~aisac_core.ports.ToolPort`.

- :func:`capabilities`: the tools a plan may use (the planner's live capability list);
- :func:`call_tool`: one tool call as a child of a role step, reduced to ``(status, result, error)``.
"""

from __future__ import annotations

import json
from typing import Any

from aisac_core.ports import ToolInfo, ToolPort

#: tools the planner never sees: the roles' own tools (a plan must not start another run), and tools that delete
#: stored work (also any tool whose MCP annotations declare ``destructiveHint: true``): a plan only gathers evidence
HIDDEN_PREFIXES = ("roles_",)
DESTRUCTIVE_TOOLS = frozenset({"rag_remove", "memory_delete_session", "trace_prune"})
#: a tool error's message is cut to this many characters in a role step
MAX_ERROR_CHARS = 2000


def hidden(tool: ToolInfo) -> bool:
    """True for a tool a plan must not use (see :data:`HIDDEN_PREFIXES`, :data:`DESTRUCTIVE_TOOLS`)."""
    return (
        tool.name.startswith(HIDDEN_PREFIXES)
        or tool.name in DESTRUCTIVE_TOOLS
        or bool(tool.annotations.get("destructiveHint"))
    )


async def capabilities(tools: ToolPort) -> list[dict[str, Any]]:
    """``[{name, description, input_schema}]`` of every tool of ``tools`` a plan may use (not :func:`hidden`)."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in await tools.list_tools()
        if not hidden(t)
    ]


async def call_tool(
    tools: ToolPort, name: str, arguments: dict[str, Any], *, run_id: str, parent_id: int | None
) -> tuple[str, Any, str | None]:
    """Call ``name`` in trace run ``run_id`` as a child of event ``parent_id``; returns ``(status ok|tool_error,
    result (the structured content with a lone ``result`` key unwrapped, else the text parsed as JSON when it is
    JSON, else the text), error message (at most :data:`MAX_ERROR_CHARS`))``. Tool errors are returned, not raised."""
    meta = {"aisac/run_id": run_id}
    if parent_id is not None:
        meta["aisac/parent_id"] = str(parent_id)
    out = await tools.call_tool(name, arguments, meta=meta)
    if out.is_error:
        return "tool_error", None, (out.error or "tool error")[:MAX_ERROR_CHARS]
    sc = out.structured
    if sc is not None:  # a tool returning a non-object result is wrapped as {"result": ...} (MCP structured content)
        return "ok", sc.get("result", sc) if isinstance(sc, dict) and set(sc) == {"result"} else sc, None
    joined = "\n".join(out.text)
    try:
        return "ok", json.loads(joined), None
    except ValueError:
        return "ok", joined, None
