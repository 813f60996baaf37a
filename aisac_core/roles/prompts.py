"""Versioned prompt files (``prompts/<role>.md``) and the project overlay.

Each file starts with ``<!-- aisac prompt: <role>, version N -->``; the version is recorded with every model
call. A project overlays a prompt by placing a file of the same name in ``Settings.roles.prompt_dir`` (the project
manifest sets it). Placeholders are ``{name}`` for the known names of each role; ``{{`` and ``}}`` stand for
literal braces.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from aisac_core.roles import RolesError

PROMPT_DIR = Path(__file__).parent / "prompts"
ROLES = ("router", "planner", "evaluator", "researcher", "support")
_VERSION = re.compile(r"<!--\s*aisac prompt:\s*([\w-]+),\s*version\s+([\w.-]+)\s*-->")


def prompt_path(role: str, overlay_dir: Path | None = None) -> Path:
    """The file that holds ``role``'s prompt: the overlay's ``<role>.md`` when present, else the packaged one."""
    if role not in ROLES:
        raise RolesError(f"unknown prompt {role!r}; known: {', '.join(ROLES)}")
    if overlay_dir is not None:
        p = Path(overlay_dir).expanduser() / f"{role}.md"
        if p.is_file():
            return p
    return PROMPT_DIR / f"{role}.md"


def load_prompt(role: str, overlay_dir: Path | None = None) -> tuple[str, str, str]:
    """``(template, version, source path)`` of ``role``'s prompt. Version ``unversioned`` when the header is
    missing (an overlay file without it)."""
    p = prompt_path(role, overlay_dir)
    text = p.read_text(encoding="utf-8")
    m = _VERSION.search(text.splitlines()[0] if text else "")
    version = m.group(2) if m else "unversioned"
    if p.parent != PROMPT_DIR:
        version = f"overlay:{version}"
    return text, version, str(p)


def render(role: str, values: dict[str, Any], overlay_dir: Path | None = None) -> tuple[str, str]:
    """``(text, version)``: the prompt of ``role`` with ``{name}`` placeholders filled from ``values`` (non-strings
    as indented JSON); unknown placeholders are left as they are; the header comment is dropped."""
    template, version, _src = load_prompt(role, overlay_dir)
    lines = template.splitlines()
    if lines and _VERSION.search(lines[0]):
        template = "\n".join(lines[1:])

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            return m.group(0)
        v = values[key]
        return v if isinstance(v, str) else json.dumps(v, indent=1, ensure_ascii=False, default=str)

    text = re.sub(r"(?<!\{)\{([a-z_]+)\}(?!\})", sub, template)
    return text.replace("{{", "{").replace("}}", "}").strip() + "\n", version
