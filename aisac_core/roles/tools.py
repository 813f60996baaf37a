"""The roles' view of the suite's tools, through a :class:`~aisac_core.ports.ToolPort`.

- :func:`capabilities`: the tools a plan may use (the planner's live capability list);
- :func:`call_tool`: one tool call as a child of a role step, reduced to ``(status, result, error)``.
"""

from __future__ import annotations

import json

from aisac_core.jsontypes import JSONObject, JSONValue
from aisac_core.ports import ToolInfo, ToolPort
from aisac_core.roles.shapes import Capability, Proposal
from aisac_core.trace.replay import SPEC_DEFAULT_HINTS

#: tools the planner never sees, not even as a proposal: the roles' own tools (a plan must not start another run)
HIDDEN_PREFIXES = ("roles_",)
#: tools that delete stored work; also any tool whose MCP annotations declare ``destructiveHint: true`` (the
#: annotations decide; the names are a second line for tools served without annotations)
DESTRUCTIVE_TOOLS = frozenset({"rag_remove", "memory_delete_session", "trace_prune"})
#: a tool error's message is cut to this many characters in a role step
MAX_ERROR_CHARS = 2000


def hidden(tool: ToolInfo) -> bool:
    """True for a tool a plan may not even propose: the roles' own tools (:data:`HIDDEN_PREFIXES`)."""
    return tool.name.startswith(HIDDEN_PREFIXES)


def _hints(tool: ToolInfo) -> dict[str, object]:
    """The tool's annotation hints, a hint left out read as the MCP specification's default (the suite's tool list
    leaves out the hints that equal it: :data:`~aisac_core.trace.replay.SPEC_DEFAULT_HINTS`)."""
    return {**SPEC_DEFAULT_HINTS, **{k: v for k, v in (tool.annotations or {}).items() if v is not None}}


def executable(tool: ToolInfo) -> bool:
    """True for a tool a plan may call on its own: ``readOnlyHint`` true and ``openWorldHint`` false (no network
    call: a web API would carry a query an injected instruction wrote), not one of :data:`DESTRUCTIVE_TOOLS`, not
    :func:`hidden`. A hint left out means the specification's default ("may write", "open world"), so a tool
    without annotations (a plugin's, a project's) is never executable."""
    h = _hints(tool)
    return (
        not hidden(tool)
        and tool.name not in DESTRUCTIVE_TOOLS
        and h["readOnlyHint"] is True
        and h["openWorldHint"] is False
    )


def _cap(t: ToolInfo) -> Capability:
    return {"name": t.name, "description": t.description, "input_schema": t.input_schema}


async def capabilities(tools: ToolPort) -> list[Capability]:
    """``[{name, description, input_schema}]`` of every tool of ``tools`` a plan may call on its own
    (:func:`executable`): the planner's capability list. Document text reaches the planner's prompt, so a plan
    is untrusted: it is only ever offered, and only ever executes, read-only closed-world tools."""
    return [_cap(t) for t in await tools.list_tools() if executable(t)]


async def proposable(tools: ToolPort) -> list[Proposal]:
    """``[{name, description, input_schema, read_only, destructive, open_world}]`` of the tools of ``tools`` a
    plan step may name but the coordinator never calls (writes, deletions, network calls): such a step is returned
    to the host as a proposal (``plan.proposals``) for the user to confirm. Not shown to the planner."""
    out: list[Proposal] = []
    for t in await tools.list_tools():
        if hidden(t) or executable(t):
            continue
        h = _hints(t)
        read_only = h["readOnlyHint"] is True
        out.append(
            {
                **_cap(t),
                "read_only": read_only,
                "destructive": t.name in DESTRUCTIVE_TOOLS or (not read_only and h["destructiveHint"] is not False),
                "open_world": h["openWorldHint"] is not False,
            }
        )
    return out


async def call_tool(
    tools: ToolPort, name: str, arguments: JSONObject, *, run_id: str, parent_id: int | None
) -> tuple[str, JSONValue, str | None]:
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
