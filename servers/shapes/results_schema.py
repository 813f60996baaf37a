"""The one output-schema helper: the JSON Schema of a tool's result type, as a host validates results against it.

Every tool of the suite declares its result type once, in the core (``aisac_core.<domain>.results``; the compact
search result in :mod:`aisac_servers.shapes.results_rag`), as its return annotation. :func:`output_schema` turns that
type into the tool's ``outputSchema`` (:class:`aisac_servers.serving.common.AisacServer` does it for every tool it
registers); :func:`inline_refs` is the ``$ref`` inlining the ``tools/list`` wire form
(:mod:`aisac_servers.shapes.toollist`) and the input-schema table (:mod:`aisac_servers.serving.schemas`) share.

The schema says what the type says, in as few tokens as JSON Schema (2020-12) allows:

- JSON types of every key, nested records and list items included; ``required`` lists the keys every result carries
  (``NotRequired`` keys are left out of it);
- ``additionalProperties: false`` wherever the type is closed (``extra="forbid"``), so a host may reject any other
  key; an open record (``extra="allow"``, or a ``dict[str, Any]``) says nothing, which means the same as ``true``;
- references inlined (where a recursive type refers to itself, ``{}``: any value), ``title`` keys dropped (the
  property name says the same) and ``anyOf [X, null]`` written ``type: [X, "null"]`` where X is one simple type.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import TypeAdapter


def inline_refs(schema: Any, defs: dict[str, Any] | None = None, _path: tuple[str, ...] = ()) -> Any:
    """``schema`` (a JSON Schema or part of one) with every local ``#/$defs/...`` reference replaced by its
    definition and ``$defs`` dropped; a reference back to a definition being inlined (a recursive type, such as a
    JSON value or a tree of events) becomes ``{}``, any value.

    Args:
        schema: the schema; its own ``$defs`` are used when ``defs`` is None.
        defs: the definitions references point into (``{name: schema}``).

    Returns: a new schema without ``$ref`` or ``$defs`` (the input is not changed).
    """
    if defs is None:
        defs = (schema.get("$defs") or {}) if isinstance(schema, dict) else {}
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.rsplit("/", 1)[-1]
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            target = {} if name in _path else inline_refs(defs.get(name, {}), defs, (*_path, name))
            return {**target, **inline_refs(rest, defs, _path)}
        return {k: inline_refs(v, defs, _path) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [inline_refs(v, defs, _path) for v in schema]
    return schema


def _lean(s: Any, *, under_properties: bool = False) -> Any:
    """``s`` without titles and ``additionalProperties: true``, nullable simple types merged (module docstring)."""
    if isinstance(s, list):
        return [_lean(x) for x in s]
    if not isinstance(s, dict):
        return s
    if under_properties:  # keys here are property names, whatever they are called ("title" is a common one)
        return {k: _lean(v) for k, v in s.items()}
    out = {k: _lean(v, under_properties=k == "properties") for k, v in s.items() if k != "title"}
    if out.get("additionalProperties") is True:
        del out["additionalProperties"]
    alts = out.get("anyOf")
    if isinstance(alts, list) and len(alts) == 2 and {"type": "null"} in alts:
        other = alts[0] if alts[1] == {"type": "null"} else alts[1]
        if isinstance(other, dict) and isinstance(other.get("type"), str):
            del out["anyOf"]
            out.update(other)
            out["type"] = [other["type"], "null"]
    return out


@functools.cache  # a result type's schema is the same for every server built in the process
def _output_schema(tp: Any) -> dict[str, Any]:
    raw = TypeAdapter(tp).json_schema(mode="serialization")
    out: dict[str, Any] = _lean(inline_refs(raw))
    if "type" not in out and any(k in out for k in ("anyOf", "oneOf")):  # a union of records: still an object
        out = {"type": "object", **_union_keys(out.get("oneOf") or out.get("anyOf") or []), **out}
    return out


def _union_keys(variants: list[Any]) -> dict[str, Any]:
    """What a host reads of any tool, on top of a union of records (``variants``: the branches' schemas):
    ``properties`` (every key of any branch; a key whose branches differ widened to their union, its values joined
    where both are closed), ``required`` (the keys every branch requires) and ``additionalProperties: false`` when
    every branch is closed. Empty when a branch is not a record with properties."""
    if not variants or not all(isinstance(v, dict) and isinstance(v.get("properties"), dict) for v in variants):
        return {}
    props: dict[str, Any] = {}
    for v in variants:
        for k, p in v["properties"].items():
            if k in props and props[k] != p:
                old = props[k]
                values = [[q["const"]] if "const" in q else q.get("enum") for q in (old, p)]
                wide = {kk: vv for kk, vv in p.items() if kk not in ("const", "enum")}
                if values[0] is not None and values[1] is not None:  # both closed: the union of their values
                    wide["enum"] = list(dict.fromkeys([*values[0], *values[1]]))
                p = wide
            props[k] = p
    required = [k for k in variants[0].get("required", []) if all(k in v.get("required", []) for v in variants)]
    out: dict[str, Any] = {"properties": props, "required": required}
    if all(v.get("additionalProperties") is False for v in variants):
        out["additionalProperties"] = False
    return out


def output_schema(tp: Any) -> dict[str, Any]:
    """The output schema of a tool whose result type is ``tp`` (module docstring).

    Args:
        tp: a result type: a TypedDict (closed with ``extra="forbid"`` where no other key may appear), a union of
            them (``type: object`` with one ``anyOf``/``oneOf`` branch per record), or any type pydantic describes
            as a JSON object.

    Returns: a JSON Schema object (a fresh copy: callers may change it) with ``type: object``, typed
    ``properties``, ``required`` and ``additionalProperties: false`` where ``tp`` is closed.

    Raises:
        pydantic.errors.PydanticSchemaGenerationError: ``tp`` is not a type pydantic can describe.
    """
    import copy

    return copy.deepcopy(_output_schema(tp))
