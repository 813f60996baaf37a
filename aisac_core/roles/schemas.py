"""JSON Schemas of the role outputs (``schemas/*.json``, JSON Schema draft 2020-12) and their validation.

Validation errors are returned as a list of strings, each naming the JSON path of the offending value, what was
wrong and what is accepted, so a model (or a person) can fix the object and submit it again.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from aisac_core.jsontypes import JSONObject, JSONValue
from aisac_core.roles import RolesError

if TYPE_CHECKING:
    from jsonschema import ValidationError

SCHEMA_DIR = Path(__file__).parent / "schemas"
#: role output -> schema file
SCHEMAS = {
    "route": "route.json",
    "plan": "plan.json",
    "critique": "critique.json",
    "answer": "answer.json",
    "support": "support.json",
}


@cache
def load_schema(name: str) -> JSONObject:
    """The JSON Schema ``name`` (route, plan, critique, answer, support). Raises :class:`RolesError` for another name."""
    if name not in SCHEMAS:
        raise RolesError(f"unknown schema {name!r}; known: {', '.join(SCHEMAS)}")
    schema: JSONObject = json.loads((SCHEMA_DIR / SCHEMAS[name]).read_text(encoding="utf-8"))
    return schema


def _path(err: ValidationError) -> str:
    out = "$"
    for p in err.absolute_path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def validate(name: str, obj: object) -> list[str]:
    """Errors of ``obj`` against schema ``name`` (empty list: valid), sorted by path, at most 20.

    Each error reads ``$.steps[1].depends_on: 3 is not of type 'array'`` and, for enumerations and missing or
    extra keys, names the accepted values.
    """
    from jsonschema import Draft202012Validator

    v = Draft202012Validator(load_schema(name))
    errors = []
    for e in sorted(v.iter_errors(obj), key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        msg = e.message
        if e.validator == "additionalProperties":
            allowed = sorted((e.schema.get("properties") or {}).keys())
            msg += f" (allowed keys: {', '.join(allowed)})"
        errors.append(f"{_path(e)}: {msg}")
    return errors[:20]


def parse_json(text: str) -> JSONValue:
    """The JSON object in a model reply: the whole text, or the first ``{...}`` block (models wrap JSON in prose
    or code fences). Raises :class:`ValueError` with the parser's message when none parses."""
    text = (text or "").strip()
    try:
        value: JSONValue = json.loads(text)
        return value
    except json.JSONDecodeError as first:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            try:
                block: JSONValue = json.loads(text[start : end + 1])
                return block
            except json.JSONDecodeError:
                pass
        raise ValueError(f"the reply is not JSON ({first.msg} at line {first.lineno} column {first.colno})") from None
