"""The project manifest ``aisac.toml``: its pydantic model, JSON Schema, loading and schema check.

A *project* is a folder with an ``aisac.toml`` manifest: who it is for (identity), which folders hold its
documents (indexed roots) and its tables (catalog-only roots), optional extensions (a tools module whose
functions become MCP tools on the ``project`` server, role prompt overlays, a workflow-graph augmentation, plugin
modules implementing aisac's hooks), and settings for roles, literature and the code sandbox.

``python -m aisac_core.projects schema`` prints the JSON Schema (published in docs/projects.md).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aisac_core.errors import AisacError
from aisac_core.hashing import sha256_bytes

MANIFEST = "aisac.toml"
#: MCP namespace of the project's own tools (``project_<function name>``).
PROJECT_NAMESPACE = "project"
_ID_RE = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_ENV_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"


class BootstrapError(AisacError):
    """A project that cannot be served: bad manifest, missing path, broken extension. The message names the file
    and the fix."""


# ---- the manifest model ------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Identity(_Strict):
    """``[project]``: who the project is for."""

    name: str = Field(min_length=1, description="display name, e.g. 'Battery materials lab'")
    id: str | None = Field(
        default=None,
        pattern=_ID_RE,
        description="store id (lower-case letters, digits, '-', '_'); the store lives in "
        "<data_dir>/projects/<id>. Default: derived from the folder name",
    )
    category: str = Field(default="general", description="e.g. general, materials, process_safety, combustion")
    domain: str = Field(default="", description="scientific domain in words, shown to hosts and roles")
    description: str = Field(default="", description="one paragraph about the project")


class Source(_Strict):
    """One data source: a folder (or file) relative to the manifest's folder, with a description."""

    path: str = Field(min_length=1, description="relative to the folder holding aisac.toml (or absolute)")
    description: str = ""


class DataSources(_Strict):
    """``[data]``: ``indexed`` roots are parsed and embedded; ``catalog`` roots are listed with metadata only."""

    indexed: list[Source] = Field(default_factory=list)
    catalog: list[Source] = Field(default_factory=list)


class Extensions(_Strict):
    """``[extensions]``: toggles (all off by default) and where each extension lives; ``plugins`` lists modules
    implementing aisac's hooks (:mod:`aisac_core.plugins`), registered whatever the toggles say.

    A module path is a ``.py`` file relative to the manifest's folder, or a dotted name of an importable module.
    """

    tools: bool = False
    tools_modules: list[str] = Field(
        default_factory=lambda: ["tools.py"], description="modules whose public functions become project_<name> tools"
    )
    prompts: bool = False
    prompts_dir: str = Field(default="prompts", description="folder of <role>.md overlays (router, planner, evaluator)")
    graph: bool = False
    graph_module: str = Field(default="graph.py", description="module with augment(graph) -> graph | None")
    plugins: list[str] = Field(
        default_factory=list,
        description="modules with @hookimpl functions (aisac_core.plugins): tools, literature "
        "sources, table loaders, MCP servers, graph changes",
    )


class LLMBackend(_Strict):
    """``[roles.llm]``: the roles' model (Settings ``roles_llm*``); the API key is read from an environment variable."""

    backend: Literal["auto", "none", "openai", "sampling", "replay"] | None = None
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    model: str | None = None
    api_key_env: str | None = Field(default=None, pattern=_ENV_RE, description="name of the variable holding the key")


class Thresholds(_Strict):
    """``[roles.thresholds]``: the evaluator's pass thresholds and the plan limits (Settings ``roles_<name>``)."""

    max_mean_severity: float | None = Field(default=None, ge=0, le=1)
    max_severity: float | None = Field(default=None, ge=0, le=1)
    max_plan_steps: int | None = Field(default=None, ge=1, le=50)
    replan_limit: int | None = Field(default=None, ge=0, le=5)


class RolesCfg(_Strict):
    """``[roles]``: how the router/planner/evaluator run for this project (mode: evidence gate lite/standard/strict)."""

    mode: Literal["lite", "standard", "strict"] | None = None
    thresholds: Thresholds = Field(default_factory=Thresholds)
    llm: LLMBackend = Field(default_factory=LLMBackend)


class ApiKeyEnv(_Strict):
    """``[literature.api_key_env]``: names of the environment variables holding the literature API keys."""

    ncbi: str | None = Field(default=None, pattern=_ENV_RE)
    semantic_scholar: str | None = Field(default=None, pattern=_ENV_RE)


class LiteratureCfg(_Strict):
    """``[literature]``: polite-pool e-mail and the names of the environment variables holding API keys."""

    mailto: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+$")
    api_key_env: ApiKeyEnv = Field(default_factory=ApiKeyEnv)


class SandboxCfg(_Strict):
    """``[sandbox]``: additions to the code sandbox's import allow-list (Settings ``sandbox_allow_imports``)."""

    allow_imports: list[str] = Field(default_factory=list, description="extra importable modules, e.g. 'pymatgen'")


class Manifest(_Strict):
    """The whole ``aisac.toml``. Unknown keys are errors (a typo must not be silently ignored)."""

    manifest_version: Literal[1] = 1
    project: Identity
    data: DataSources = Field(default_factory=DataSources)
    extensions: Extensions = Field(default_factory=Extensions)
    roles: RolesCfg = Field(default_factory=RolesCfg)
    literature: LiteratureCfg = Field(default_factory=LiteratureCfg)
    sandbox: SandboxCfg = Field(default_factory=SandboxCfg)


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``aisac.toml``, generated from :class:`Manifest` (published in
    docs/projects.md)."""
    schema = Manifest.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "aisac.toml project manifest"
    return schema


# ---- loading ------------------------------------------------------------------------------------------------


@dataclass
class Project:
    """A loaded, schema-valid manifest and where it lives."""

    manifest: Manifest
    path: Path  # the aisac.toml file
    sha256: str

    @property
    def root(self) -> Path:
        """The folder holding the manifest (relative paths start here)."""
        return self.path.parent

    @property
    def id(self) -> str:
        """The store id: ``[project] id``, else a slug of the folder name."""
        return self.manifest.project.id or slugify(self.root.name)

    def resolve(self, rel: str) -> Path:
        """A manifest path (relative to :attr:`root`, ``~`` allowed) as an absolute path."""
        p = Path(rel).expanduser()
        return (p if p.is_absolute() else self.root / p).resolve()


def slugify(name: str) -> str:
    """A project id from a name: lower case, runs of other characters -> '-', at most 63 characters."""
    s = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:63]
    return s or "project"


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _format_validation(exc: ValidationError, path: Path) -> str:
    msgs = []
    for e in exc.errors():
        where = _loc(tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-"))))
        if e["type"] == "extra_forbidden":
            parent = where.rsplit(".", 1)[0] if "." in where else ""
            msgs.append(
                f"unknown key '{where}'{' in [' + parent + ']' if parent else ''}: remove it or fix its "
                "spelling (docs/projects.md lists every key)"
            )
        elif e["type"] == "missing":
            msgs.append(f"missing required key '{where}': add it")
        else:
            msgs.append(f"'{where}': {e['msg']} (got {e.get('input')!r})")
    return f"{path}: " + "; ".join(msgs)


def find_manifest(project: str | Path) -> Path:
    """``project`` is a folder holding ``aisac.toml`` or the manifest file itself; returns the manifest path.

    Raises:
        BootstrapError: no such folder or file.
    """
    given = Path(project).expanduser().resolve()
    p = given / MANIFEST if given.is_dir() or given.suffix != ".toml" else given
    if not p.is_file():
        raise BootstrapError(
            f"{p}: no project manifest there. Create the project with `aisac init {p.parent} "
            "--template general`, or pass the folder that holds aisac.toml"
        )
    return p


def load_manifest(project: str | Path) -> Project:
    """Read and schema-check a manifest (no path or module checks: see :func:`validate`).

    Raises:
        BootstrapError: missing file, unreadable file, TOML syntax error (with line), unknown or bad keys.
    """
    path = find_manifest(project)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BootstrapError(f"{path}: cannot read the manifest ({exc.strerror}); fix its permissions") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BootstrapError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BootstrapError(f"{path}: TOML syntax error: {exc}; fix the line it names") from exc
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        raise BootstrapError(_format_validation(exc, path)) from exc
    return Project(manifest=manifest, path=path, sha256=sha256_bytes(raw))


def check_path(project: Project, rel: str, key: str, *, want_dir: bool | None = None) -> Path:
    """The manifest path ``rel`` (set by the key ``key``) resolved, checked to exist and be readable (and to be a
    folder with ``want_dir``).

    Raises:
        BootstrapError: missing, not a folder, or not readable; the message names the manifest and the fix.
    """
    p = project.resolve(rel)
    if not p.exists():
        raise BootstrapError(
            f"{project.path}: {key} = {rel!r} -> {p} does not exist; create it or fix the path "
            f"(relative paths start at {project.root})"
        )
    if want_dir is True and not p.is_dir():
        raise BootstrapError(f"{project.path}: {key} = {rel!r} -> {p} is not a folder; name a folder")
    if not os.access(p, os.R_OK | (os.X_OK if p.is_dir() else 0)):
        raise BootstrapError(f"{project.path}: {key} = {rel!r} -> {p} is not readable; fix its permissions")
    return p
