"""The wire form of ``tools/list``: what every conversation of a host pays for, kept lean.

Each tool keeps its full schemas on the server (fastmcp validates arguments against them, and
``docs/tools.md`` documents the full result types); the listing a host receives is compacted by
:class:`CompactToolList`, a middleware of the suite:

- ``$ref`` s are inlined and ``$defs`` dropped (:func:`~aisac_servers.shapes.results_schema.inline_refs`: where a
  recursive type refers to itself, ``{}``);
- ``title`` keys of schemas are dropped (the property name says the same);
- an optional argument declared ``anyOf: [X, null]`` with default ``null`` is listed as ``X`` and not
  required (leaving it out means the same as ``null``); ``"default": null`` is dropped;
- the output schema is the result type's (:func:`~aisac_servers.shapes.results_schema.output_schema`: JSON types of
  every key and nested record, ``required``, ``additionalProperties: false`` where the type is closed) without its
  descriptions: the tool's description says what the result means, and a host validates structured content against
  the listed schema as it is (the MCP specification, "Output Schema"). The token-budgeted profiles (``core`` and
  ``full``, 5,000 and 12,000 tokens: what every conversation pays) list the top-level keys and ``required`` only:
  the types would cost about 4,900 more tokens in ``core`` (6,300 for every nested type, 2,600 for the top-level
  ones, against 1,400 for the names; MiniLM WordPiece) and even ``additionalProperties: false`` (about 100) does not
  fit; a tool found with ``tools_search`` and every other profile carry the whole typed schema;
- fastmcp's own ``_meta.fastmcp`` entry (the tool's tags) is left out;
- annotation hints that equal the MCP specification's defaults (``readOnlyHint`` false, ``destructiveHint``
  true, ``idempotentHint`` false, ``openWorldHint`` true; "Tool annotations" in the specification) are left
  out, since a host reads a missing hint as that default (so does replay,
  :func:`aisac_core.trace.replay.replay_skip_reason`); ``destructiveHint`` and ``idempotentHint`` are left out of
  a read-only tool, where the specification says they are not meaningful; the title is sent once, as the tool's
  ``title``.
"""

from __future__ import annotations

import functools
from typing import Any

from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.server.transforms.search import BM25SearchTransform
from fastmcp.utilities.tasks import TaskConfig
from mcp.types import ToolAnnotations
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from aisac_core.tool_profiles import scrub_text
from aisac_core.trace.replay import SPEC_DEFAULT_HINTS

from .annotations import hints
from .results_schema import inline_refs


def _compact_input_property(prop: Any) -> Any:
    """One argument's schema without titles and without the ``null`` branch of an optional argument."""
    if not isinstance(prop, dict):
        return prop
    p = {k: v for k, v in prop.items() if k != "title"}
    branches = p.get("anyOf")
    if isinstance(branches, list) and p.get("default", 0) is None:
        non_null = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(non_null) == 1 and len(non_null) < len(branches) and isinstance(non_null[0], dict):
            rest = {k: v for k, v in p.items() if k not in ("anyOf", "default")}
            p = {**_compact_input_property(non_null[0]), **rest}
    if p.get("default", 0) is None:
        p.pop("default")
    for key in ("items", "additionalProperties"):
        if isinstance(p.get(key), dict):
            p[key] = _compact_input_property(p[key])
    if isinstance(p.get("properties"), dict):
        p["properties"] = {k: _compact_input_property(v) for k, v in p["properties"].items()}
    if isinstance(p.get("anyOf"), list):
        p["anyOf"] = [_compact_input_property(b) for b in p["anyOf"]]
    return p


def compact_input_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The listed form of a tool's input schema (module docstring); ``None`` stays ``None``."""
    if not isinstance(schema, dict):
        return schema
    s: dict[str, Any] = inline_refs(schema)
    s.pop("title", None)
    if isinstance(s.get("properties"), dict):
        s["properties"] = {k: _compact_input_property(v) for k, v in s["properties"].items()}
    return s


def _undescribed(node: Any, *, under_properties: bool = False) -> Any:
    """``node`` (a schema or part of one) without ``description`` and ``title`` keys (a property may be called
    either: the names under ``properties`` stay)."""
    if isinstance(node, list):
        return [_undescribed(x) for x in node]
    if not isinstance(node, dict):
        return node
    if under_properties:
        return {k: _undescribed(v) for k, v in node.items()}
    return {
        k: _undescribed(v, under_properties=k == "properties")
        for k, v in node.items()
        if k not in ("description", "title")
    }


def compact_output_schema(schema: dict[str, Any] | None, *, typed: bool = True) -> dict[str, Any] | None:
    """The listed form of a tool's output schema (module docstring); ``None`` stays ``None``.

    ``typed`` (the default): the declared schema with references inlined, without descriptions or titles; its
    types, ``required`` and ``additionalProperties`` kept. ``typed=False`` (the token-budgeted profiles, ``core``
    and ``full``): the top-level keys without their types (``{}``: any value) and ``required``."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = _undescribed(inline_refs(schema))
    props = out.get("properties")
    if typed or not isinstance(props, dict) or not props:
        return out
    keys: dict[str, Any] = {"type": "object", "properties": {name: {} for name in props}}
    for key in ("required", "x-fastmcp-wrap-result"):
        if key in out:
            keys[key] = out[key]
    return keys


def compact_annotations(ann: Any) -> dict[str, Any] | None:
    """The hints a host needs to be told (module docstring), without the title; ``None`` for a tool without
    annotations (one whose hints all equal the defaults lists ``readOnlyHint: false``, so it still has hints)."""
    if ann is None:
        return None
    data = ann if isinstance(ann, dict) else ann.model_dump(by_alias=True, exclude_none=True)
    out: dict[str, Any] = {}
    read_only = bool(data.get("readOnlyHint"))
    for key, default in SPEC_DEFAULT_HINTS.items():
        if key not in data or data[key] == default:
            continue
        if read_only and key in ("destructiveHint", "idempotentHint"):
            continue
        out[key] = data[key]
    return out or {"readOnlyHint": False}  # every hint at its default: say so with one


@functools.cache  # one subclass per fastmcp tool class: a class is the same for every store
def _listed_class(cls: type) -> type:
    """A subclass of a fastmcp tool class whose ``_meta`` leaves out fastmcp's own ``fastmcp`` entry (its tags,
    about 16 tokens a tool, which no host uses); other entries, e.g. an MCP Apps ``ui`` resource, stay."""

    def get_meta(self: Any) -> dict[str, Any] | None:
        meta = {k: v for k, v in (super(sub, self).get_meta() or {}).items() if k != "fastmcp"}
        return meta or None

    sub: type[Any] = type(f"Listed{cls.__name__}", (cls,), {"get_meta": get_meta, "__module__": __name__})
    return sub


def listed(tool: Any, *, tasks: bool = True, typed: bool = True) -> Any:
    """``tool`` (a fastmcp tool) in its compact wire form (module docstring): a copy, the tool itself unchanged.
    ``tasks=False``: without ``execution.taskSupport`` (a client whose protocol version has no tasks: the long
    tools answer it in the foreground, with a job id to poll). ``typed=False``: the output schema's top-level keys
    only (:func:`compact_output_schema`)."""
    ann = tool.annotations
    title = tool.title or (ann.get("title") if isinstance(ann, dict) else getattr(ann, "title", None))
    update = {
        "parameters": compact_input_schema(tool.parameters),
        "output_schema": compact_output_schema(tool.output_schema, typed=typed),
        "annotations": compact_annotations(ann),
        "title": title,
    }
    if not tasks and getattr(tool, "task_config", None) is not None:
        update |= {"task_config": TaskConfig(mode="forbidden"), "execution": None}
    out = tool.model_copy(update=update)
    out.__class__ = _listed_class(tool.__class__)
    return out


def _listed_json(tools: Any) -> list[dict[str, Any]]:
    return [listed(t).to_mcp_tool().model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def scrubbed(tool: Any, hidden: set[str] | frozenset[str]) -> Any:
    """A listed tool (:func:`listed`) whose description and argument descriptions name no tool of ``hidden``
    (:func:`aisac_core.tool_profiles.scrub_text`)."""
    if not hidden:
        return tool
    params = tool.parameters
    if isinstance(params, dict) and isinstance(params.get("properties"), dict):
        props = {
            k: {**v, "description": scrub_text(v["description"], hidden)}
            if isinstance(v, dict) and isinstance(v.get("description"), str)
            else v
            for k, v in params["properties"].items()
        }
        params = {**params, "properties": props}
    return tool.model_copy(update={"description": scrub_text(tool.description or "", hidden), "parameters": params})


class CompactToolList(Middleware):
    """Lists every tool in its compact wire form (module docstring); calls are not affected. ``keep``: a predicate
    on tool names; the others are left out of the list but stay callable (the ``full`` profile lists only its core
    tools and finds the rest with ``tools_search``). ``profile`` and ``every`` (an async function naming every tool
    of the whole suite): the descriptions name no tool the profile does not offer (:func:`scrubbed`). ``typed``:
    output schemas with their types (False for the token-budgeted profiles: top-level keys only)."""

    def __init__(self, keep: Any = None, profile: Any = None, every: Any = None, *, typed: bool = True) -> None:
        self.keep = keep
        self.typed = typed
        self.profile = profile
        self.every = every
        self._hidden: frozenset[str] | None = None

    async def _hide(self, listed_names: set[str]) -> frozenset[str]:
        if self.profile is None or self.every is None:
            return frozenset()
        if self._hidden is None:
            every = await self.every()
            pr = self.profile
            self._hidden = frozenset(n for n in every if n not in listed_names and not (pr.search and pr.allows(n)))
        return self._hidden

    async def on_list_tools(self, context: MiddlewareContext, call_next: Any) -> Any:
        tools = [t for t in await call_next(context) if self.keep is None or self.keep(t.name)]
        tasks = tasks_negotiable(context.fastmcp_context)
        hidden = await self._hide({t.name for t in tools})
        return [scrubbed(listed(t, tasks=tasks, typed=self.typed), hidden) for t in tools]


def tasks_negotiable(ctx: Any) -> bool:
    """Whether the client of ``ctx`` (a fastmcp Context, or None) speaks a protocol version at which aisac's tasks
    (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663) can be requested: 2026-07-28 and later. The
    handshake-era versions (2025-11-25 and before) get no ``execution.taskSupport`` in ``tools/list`` (aisac does not
    serve the earlier draft's ``tasks/result``, ``tasks/list`` or the ``tasks`` capability) and poll the job tools
    (``rag_job_status``, ``data_code_job_status``, ``roles_job_status``) instead. No request context (an in-process
    call): True."""
    rc = getattr(ctx, "request_context", None) if ctx is not None else None
    version = getattr(rc, "protocol_version", None) if rc is not None else None
    return version is None or version in MODERN_PROTOCOL_VERSIONS


class ToolSearch(BM25SearchTransform):
    """``tools_search`` and ``tools_call`` next to every other tool (fastmcp's BM25 tool search, Okapi BM25 over
    each tool's name, description and argument names and descriptions): ``tools_search(query)`` returns the best 5
    tools of the whole suite in their compact listed form; ``tools_call(name, arguments)`` calls one of them
    (for hosts whose model can only call listed tools). Unlike fastmcp's default, the catalog stays listed: which
    tools a host sees is the profile's business (:class:`CompactToolList` ``keep``, or the stdio relay)."""

    def __init__(self) -> None:
        super().__init__(
            max_results=5,
            search_tool_name="tools_search",
            call_tool_name="tools_call",
            search_result_serializer=_listed_json,
        )

    async def transform_tools(self, tools: Any) -> Any:
        return [*tools, self._make_search_tool(), self._make_call_tool()]

    async def get_tool_catalog(self, ctx: Any, *, run_middleware: bool = False) -> Any:
        """Every tool of the suite, also those the profile leaves out of ``tools/list`` (the list middleware,
        which does that, is not run here)."""
        return await super().get_tool_catalog(ctx, run_middleware=False)

    async def _get_visible_tools(self, ctx: Any) -> Any:
        return [
            t for t in await self.get_tool_catalog(ctx) if t.name not in (self._search_tool_name, self._call_tool_name)
        ]

    def _make_search_tool(self) -> Any:
        tool = super()._make_search_tool()
        return tool.model_copy(
            update={
                "description": "Find the tool for a task among every aisac tool, including those not listed (the "
                "full profile lists only the core ones); returns up to 5 tool definitions; call one "
                "by name or through tools_call.",
                "annotations": ToolAnnotations(**hints("Find a tool", read_only=True)),
            }
        )

    def _make_call_tool(self) -> Any:
        tool = super()._make_call_tool()
        return tool.model_copy(
            update={
                "description": "Call a tool found with tools_search by its name, with its arguments; returns that "
                "tool's result.",
                # the most cautious hints: it may call any tool, destructive and open-world ones included
                "annotations": ToolAnnotations(**hints("Call a found tool", destructive=True, open_world=True)),
            }
        )
