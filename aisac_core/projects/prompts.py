"""Role prompt overlays of a project: ``<role>.md`` files that add project guidance to the roles' prompts.

An overlay is Markdown text with optional TOML front matter between ``+++`` lines (``mode = "prepend"`` (default),
``"append"`` or ``"replace"``). The bootstrap composes each overlay with the role's packaged prompt
(:func:`compose_prompt`) and writes the result where the roles read prompts (``Settings.roles.prompt_dir``).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from aisac_core.hashing import sha256_bytes
from aisac_core.projects.manifest import BootstrapError, Project, check_path
from aisac_core.roles.prompts import PROMPT_DIR, ROLES

#: how an overlay combines with the role's packaged prompt
OverlayMode = Literal["prepend", "append", "replace"]


@dataclass
class PromptOverlay:
    """One role prompt overlay: ``<role>.md`` (Markdown text), optional TOML front matter between ``+++`` lines
    with ``mode =`` ``"prepend"`` (default: the text goes before the role's packaged prompt, as project guidance),
    ``"append"`` (after it) or ``"replace"`` (the file is the whole prompt template, with the packaged prompt's
    ``{placeholders}``)."""

    role: str
    path: Path
    text: str
    mode: OverlayMode = "prepend"
    sha256: str = ""


def parse_prompt(path: Path, role: str) -> PromptOverlay:
    """Parse one overlay file.

    Raises:
        BootstrapError: not UTF-8, empty, bad front matter (TOML error or a key other than ``mode``).
    """
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BootstrapError(f"{path}: prompt overlay is not UTF-8 text; save it as UTF-8") from exc
    mode: OverlayMode = "prepend"
    if text.startswith("+++"):
        end = text.find("\n+++", 3)
        if end < 0:
            raise BootstrapError(f"{path}: front matter opened with '+++' is never closed; add a closing '+++' line")
        try:
            front = tomllib.loads(text[3:end])
        except tomllib.TOMLDecodeError as exc:
            raise BootstrapError(f"{path}: front matter is not valid TOML ({exc}); fix it") from exc
        extra = set(front) - {"mode"}
        if extra:
            raise BootstrapError(f"{path}: unknown front matter key(s) {sorted(extra)}; only 'mode' is allowed")
        given = front.get("mode", "prepend")
        if given not in get_args(OverlayMode):
            raise BootstrapError(f"{path}: mode = {given!r}; use 'prepend', 'append' or 'replace'")
        mode = given
        text = text[end + 4 :].lstrip("\n")
    if not text.strip():
        raise BootstrapError(
            f"{path}: prompt overlay is empty; write the text to add to the {role} prompt or delete the file"
        )
    return PromptOverlay(role=role, path=path, text=text, mode=mode, sha256=sha256_bytes(raw))


def load_prompts(project: Project) -> dict[str, PromptOverlay]:
    """Every ``<role>.md`` in the prompts folder, for the known roles only.

    Raises:
        BootstrapError: missing folder, a file for an unknown role, a file that does not parse.
    """
    ext = project.manifest.extensions
    d = check_path(project, ext.prompts_dir, "extensions.prompts_dir", want_dir=True)
    roles = known_roles()
    out: dict[str, PromptOverlay] = {}
    for f in sorted(d.iterdir()):
        if f.name.startswith(".") or f.is_dir():
            continue
        role = f.stem
        if f.suffix != ".md" or role not in roles:
            raise BootstrapError(
                f"{f}: prompt overlay for an unknown role {f.name!r}; overlays are named "
                f"{', '.join(r + '.md' for r in roles)}: rename or remove it"
            )
        ov = parse_prompt(f, role)
        if ov.mode == "replace":
            packaged = _packaged_prompt(role)
            if packaged is not None:
                unknown = sorted(set(_placeholders(ov.text)) - set(_placeholders(packaged)))
                if unknown:
                    raise BootstrapError(
                        f"{f}: placeholder(s) {', '.join('{' + u + '}' for u in unknown)} are not filled for the "
                        f"{role} prompt (it knows {', '.join('{' + k + '}' for k in _placeholders(packaged))}); "
                        "fix them, or write literal braces as {{ and }}"
                    )
        out[role] = ov
    if not out:
        raise BootstrapError(
            f"{d}: extensions.prompts is on but the folder has no overlay; add "
            f"{' / '.join(r + '.md' for r in roles)} or set prompts = false"
        )
    return out


def known_roles() -> tuple[str, ...]:
    """Roles that take a prompt overlay: the roles' prompt names (router, planner, evaluator, researcher)."""
    return tuple(ROLES)


_PLACEHOLDER = re.compile(r"(?<!\{)\{([a-z_]+)\}(?!\})")  # the roles' own placeholder syntax (roles/prompts.py)
_HEADER = re.compile(r"<!--\s*aisac prompt:\s*([\w-]+),\s*version\s+([\w.-]+)\s*-->")


def _placeholders(text: str) -> list[str]:
    return sorted(set(_PLACEHOLDER.findall(text)))


def _packaged_prompt(role: str) -> str | None:
    p = Path(PROMPT_DIR) / f"{role}.md"
    return p.read_text(encoding="utf-8") if p.is_file() else None


def compose_prompt(ov: PromptOverlay, project_name: str, project_id: str) -> str:
    """The effective prompt file for an overlay, in the roles' format (a version header, ``{placeholders}``,
    ``{{``/``}}`` for literal braces): the packaged prompt with the overlay text before it (``prepend``) or after it
    (``append``), or the overlay itself (``replace``). The version is ``<packaged version>.<project id>-<sha8 of the
    overlay>`` so every model call records which overlay shaped it."""
    packaged = _packaged_prompt(ov.role) or ""
    lines = packaged.splitlines()
    m = _HEADER.search(lines[0]) if lines else None
    base_version = m.group(2) if m else "0"
    body = "\n".join(lines[1:]) if m else packaged
    version = f"{base_version}.{re.sub(r'[^A-Za-z0-9_-]', '-', project_id)}-{ov.sha256[:8]}"
    header = f"<!-- aisac prompt: {ov.role}, version {version} -->"
    if ov.mode == "replace":
        text = ov.text
    else:
        guidance = (f"Project guidance ({project_name}):\n" + ov.text.strip()).replace("{", "{{").replace("}", "}}")
        text = guidance + "\n\n" + body.strip() if ov.mode == "prepend" else body.rstrip() + "\n\n" + guidance
    return header + "\n" + text.strip() + "\n"
