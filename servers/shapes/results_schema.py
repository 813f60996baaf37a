"""Lean output schemas: the JSON Schema of a result type as few tokens as possible say it, for ``tools/list``.

``@server.tool(output_schema=schema(T))`` with ``-> T`` as the return annotation: fastmcp still serialises the
result through ``T``; the schema hosts see is ``T``'s with titles pruned, ``anyOf [X, null]`` written as
``type: [X, "null"]`` and the implied ``additionalProperties: true`` of open objects left out (the same meaning).
"""

from __future__ import annotations

from typing import Any

from fastmcp.utilities.json_schema import compress_schema, dereference_refs
from pydantic import TypeAdapter


def lean(s: Any) -> Any:
    """``s`` (a JSON Schema or part of one) with nullable simple types merged and ``additionalProperties: true``
    dropped, recursively."""
    if isinstance(s, list):
        return [lean(x) for x in s]
    if not isinstance(s, dict):
        return s
    s = {k: lean(v) for k, v in s.items()}
    if s.get("additionalProperties") is True:
        del s["additionalProperties"]
    alts = s.get("anyOf")
    if isinstance(alts, list) and len(alts) == 2 and {"type": "null"} in alts:
        other = alts[0] if alts[1] == {"type": "null"} else alts[1]
        if isinstance(other.get("type"), str):
            del s["anyOf"]
            s.update(other)
            s["type"] = [other["type"], "null"]
    return s


def schema(tp: Any, *, inline: bool = False) -> dict[str, Any]:
    """The lean output schema of the result type ``tp`` (a TypedDict), for ``@server.tool(output_schema=...)``;
    ``inline``: references inlined first (so a nullable nested type is written as ``type: [object, "null"]`` too)."""
    raw = TypeAdapter(tp).json_schema(mode="serialization")
    out: dict[str, Any] = lean(compress_schema(dereference_refs(raw) if inline else raw, prune_titles=True))
    return out
