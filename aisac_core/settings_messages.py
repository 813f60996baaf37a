"""Messages about settings: what a setting accepts (:func:`accepted_form`) and one line per invalid setting
(:func:`settings_errors`). A layer above :mod:`aisac_core.settings`, whose private helpers it uses: import both names
from here."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, get_args, get_origin

from pydantic import ValidationError

from aisac_core.settings import _env_name, _toml_value, plain_value, setting_field


def accepted_form(name: str) -> str:
    """What the setting with flat name ``name`` accepts, in words (``an integer from 1 to 10``, ``one of: edge,
    qdrant``, ``a path, paths joined by ':' or a JSON list of paths``)."""
    field = setting_field(name)
    if field is None:
        return "a known setting name"
    ann = field.annotation
    args = [a for a in get_args(ann) if a is not type(None)]
    if get_origin(ann) is not None and len(args) == 1 and get_origin(ann) is not list:
        ann = args[0]  # X | None
    bounds = {k: getattr(m, k) for m in field.metadata for k in ("ge", "gt", "le", "lt") if hasattr(m, k)}
    limits = [f"{op} {bounds[k]}" for k, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")) if k in bounds]
    if get_origin(ann) is Literal:
        return "one of: " + ", ".join(str(a) for a in get_args(ann))
    if ann is bool:
        return "true or false (1/0, yes/no)"
    if ann in (int, float):
        return ("an integer" if ann is int else "a number") + (" " + " and ".join(limits) if limits else "")
    if get_origin(ann) is list:
        if get_args(ann) and get_args(ann)[0] is Path:
            return f"a path, paths joined by {os.pathsep!r}, or a JSON list of paths"
        return "comma-separated values or a JSON list"
    if ann is Path:
        return "a path"
    return "text"


def settings_errors(exc: ValidationError, *, env: bool = True) -> list[str]:
    """One line per invalid setting in ``exc`` (from constructing :class:`Settings`): the environment variable
    (``env`` and the variable is set) or the setting's flat name, the value, what is wrong and the accepted form,
    e.g. ``AISAC_LIT_RETRIES=0: Input should be greater than or equal to 1 (accepted: an integer >= 1 and <=
    10)``. A value from ``aisac.toml`` names the file. Errors without a setting (a broken file) keep their text."""
    names = {k.upper(): k for k in os.environ}
    lines: list[str] = []
    for e in exc.errors():
        loc = [str(x) for x in e.get("loc") or ()]
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        if not loc or setting_field(loc[0]) is None:
            lines.append(f"invalid settings: {msg}")
            continue
        name, var = loc[0], _env_name(loc[0])
        value = e.get("input")
        where = next((x[1:] for x in loc[1:] if x.startswith("@")), None)
        if where:
            shown = f"{name} = {_toml_value(plain_value(value))} in {where}"
        elif env and var in names:
            shown = f"{var}={os.environ[names[var]]}"
        else:
            shown = f"{name}={value if isinstance(value, str) else json.dumps(plain_value(value), default=str)}"
        lines.append(f"{shown}: {msg} (accepted: {accepted_form(name)})")
    return lines
