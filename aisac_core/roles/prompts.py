"""Versioned prompt files (``prompts/<role>.md``) and the project overlay.

Each file starts with ``<!-- aisac prompt: <role>, version N -->``; the version is recorded with every model
call. A project overlays a prompt by placing a file of the same name in ``Settings.roles.prompt_dir`` (the project
manifest sets it). Placeholders are ``{name}`` for the known names of each role; ``{{`` and ``}}`` stand for
literal braces.

Retrieved text is data, never instructions: the placeholders of :data:`DATA_KEYS` (search hits, memory, tool
results, evidence, a model's answer and critiques) are rendered by :func:`quote_data` between a start and an end
delimiter that the quoted text cannot forge, and every packaged prompt tells the model to treat what is inside as
quoted material (docs/roles.md, "Prompt injection").
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path

from aisac_core.roles import RolesError

PROMPT_DIR = Path(__file__).parent / "prompts"
ROLES = ("router", "planner", "evaluator", "researcher", "support")
#: per role, the placeholders whose values come from documents, tools or models (quoted by :func:`quote_data`);
#: the question (``task``), the capability list and the JSON Schema are the host's and aisac's own text
DATA_KEYS: dict[str, frozenset[str]] = {
    "router": frozenset({"context"}),
    "planner": frozenset({"context", "feedback"}),
    "researcher": frozenset({"evidence"}),
    "evaluator": frozenset({"answer", "evidence", "gates"}),
    "support": frozenset({"claim", "cited"}),
}
_DELIM = re.compile(r"<(/?)(quoted-data)", re.I)
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


def quote_data(text: str) -> str:
    """``text`` as quoted data: ``<quoted-data id="H">`` ... ``</quoted-data id="H">`` where ``H`` is the first
    12 hex digits of the SHA-256 of ``text``, so the text cannot close the quote (it would have to contain its own
    hash) and the prompt is the same on every run (the model-response cache is keyed by the prompt). A
    ``<quoted-data`` or ``</quoted-data`` inside ``text`` is escaped (``&lt;``) as well."""
    body = _DELIM.sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)
    h = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f'<quoted-data id="{h}">\n{body}\n</quoted-data id="{h}">'


def render(role: str, values: Mapping[str, object], overlay_dir: Path | None = None) -> tuple[str, str]:
    """``(text, version)``: the prompt of ``role`` with ``{name}`` placeholders filled from ``values`` (non-strings
    as indented JSON; the :data:`DATA_KEYS` of ``role`` quoted by :func:`quote_data`); unknown placeholders are
    left as they are; the header comment is dropped."""
    template, version, _src = load_prompt(role, overlay_dir)
    lines = template.splitlines()
    if lines and _VERSION.search(lines[0]):
        template = "\n".join(lines[1:])

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            return m.group(0)
        v = values[key]
        text = v if isinstance(v, str) else json.dumps(v, indent=1, ensure_ascii=False, default=str)
        return quote_data(text) if key in DATA_KEYS.get(role, ()) and text.strip() else text

    text = re.sub(r"(?<!\{)\{([a-z_]+)\}(?!\})", sub, template)
    return text.replace("{{", "{").replace("}}", "}").strip() + "\n", version
