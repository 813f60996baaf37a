"""New projects from the shipped templates (``aisac init DIR --template NAME``)."""

from __future__ import annotations

import importlib.resources
import json
import re
import shutil
from pathlib import Path

from aisac_core.projects.bootstrap import bootstrap
from aisac_core.projects.manifest import MANIFEST, BootstrapError, slugify


def templates_dir() -> Path:
    """Where the shipped templates live: the top-level ``project_templates/`` folder, installed as the package
    ``aisac_templates`` (so an editable install and a wheel both find it)."""
    return Path(str(importlib.resources.files("aisac_templates")))


def list_templates() -> list[str]:
    """Names of the shipped templates (folders holding an aisac.toml)."""
    d = templates_dir()
    return sorted(p.name for p in d.iterdir() if (p / MANIFEST).is_file()) if d.is_dir() else []


def init_project(
    target: str | Path, template: str = "general", *, name: str | None = None, force: bool = False
) -> Path:
    """Copy a template into ``target`` and set its ``[project] id`` (and ``name`` when given).

    Args:
        target: the new project folder (created; must be empty or absent unless ``force``).
        template: one of :func:`list_templates`.
        name: display name (default: the template's).
        force: allow a non-empty folder (files of the same name are overwritten).

    Returns: the manifest path. The result is checked with a dry-run :func:`~.bootstrap.bootstrap`.

    Raises:
        BootstrapError: unknown template, folder not empty.
    """
    src = templates_dir() / template
    if not (src / MANIFEST).is_file():
        raise BootstrapError(f"unknown template {template!r}; available: {', '.join(list_templates())}")
    dst = Path(target).expanduser().resolve()
    if dst.exists() and not dst.is_dir():
        raise BootstrapError(f"{dst} is a file; give a folder for the new project")
    if dst.is_dir() and any(dst.iterdir()) and not force:
        raise BootstrapError(f"{dst} is not empty; choose an empty or new folder (or pass --force to write into it)")
    shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    man = dst / MANIFEST
    text = man.read_text(encoding="utf-8")
    pid = slugify(dst.name)
    text = re.sub(r'(?m)^id\s*=\s*"[^"\n]*"', f'id = "{pid}"', text, count=1)
    if name:
        text = re.sub(r'(?m)^name\s*=\s*"[^"\n]*"', lambda _m: f"name = {_toml_str(name)}", text, count=1)
    man.write_text(text, encoding="utf-8")
    bootstrap(dst, open_store=False)
    return man


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a valid TOML basic string
