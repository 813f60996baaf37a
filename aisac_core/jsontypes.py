"""The one alias for free-form JSON: a value as ``json.loads`` returns it (RFC 8259: object, array, string, number,
true / false, null). Used where a shape is genuinely open - a model's parsed reply, a tool's structured result read
back from the trace, a workflow graph's node, a project manifest's free fields - so that a reader narrows it with
``isinstance`` before use instead of trusting it (``Any`` would let any use through unchecked).

Where a shape is fixed, declare a TypedDict instead; where a value is only passed on, ``object`` says so.
"""

from __future__ import annotations

from typing import TypeAlias

#: a JSON scalar: string, number, true / false, null
JSONScalar: TypeAlias = str | int | float | bool | None
#: any JSON value (recursive: arrays and objects of JSON values)
JSONValue: TypeAlias = "JSONScalar | list[JSONValue] | dict[str, JSONValue]"
#: a JSON object
JSONObject: TypeAlias = "dict[str, JSONValue]"


def json_object(value: object) -> JSONObject:
    """``value`` when it is a JSON object (a dict), else ``{}``: an optional object of a tool's result, read leniently
    (absent, null or of another type reads as empty)."""
    return value if isinstance(value, dict) else {}


def json_objects(value: object) -> list[JSONObject]:
    """The objects of ``value`` when it is a JSON array (other items left out), else ``[]``: a list of records in a
    tool's result (``hits``, ``frames``, ``records``), read leniently."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
