"""Project manifests (``aisac.toml``) and the validated, traced bootstrap of a project (issue 10).

A *project* is a folder with an ``aisac.toml`` manifest: who it is for (identity), which folders hold its
documents (indexed roots) and its tables (catalog-only roots), optional extensions (a tools module whose
functions become MCP tools on the ``project`` server, role prompt overlays, a workflow-graph augmentation),
and settings for roles, literature and the code sandbox. ``aisac serve --project DIR`` runs
:func:`bootstrap` and serves the suite with the project's extensions mounted.

The bootstrap is deterministic (fixed step order, tools sorted by name) and recorded as an *initialization
trace*: one run id (``init-...``), one trace event per step (``server="bootstrap"``, ``kind="init_step"``,
``tool`` = the step name) in the project's own store. Steps::

    load -> validate -> tools -> prompts -> graph -> settings -> store  (-> mount, when served)

Any failure stops it with a :class:`BootstrapError` naming the file and the fix; nothing is served
half-initialised (the failed step is still recorded when the project's store can be located).

Data scoping (multi-domain portal): every project has its own store under the shared data dir,
``<data_dir>/projects/<project id>/`` (SQLite file, vector store, jobs, traces); the embedding models stay
shared in ``<data_dir>/models``. Two projects served in turn from one data dir therefore see only their
own documents, memory and traces.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
import time
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aisac_core.errors import AisacError

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from aisac_core.settings import Settings
    from aisac_core.context import AppContext

MANIFEST = "aisac.toml"
#: Roles that accept a prompt overlay when the roles package is absent (issue 7's router -> planner -> coordinator
#: -> evaluator; the coordinator executes the plan and has no prompt of its own). With the roles package present,
#: its ``prompts.ROLES`` is the list (it adds ``researcher``, the coordinator's answer writer).
KNOWN_ROLES = ("router", "planner", "evaluator")
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
    id: str | None = Field(default=None, pattern=_ID_RE,
                           description="store id (lower-case letters, digits, '-', '_'); the store lives in "
                                       "<data_dir>/projects/<id>. Default: derived from the folder name")
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
    """``[extensions]``: toggles (all off by default) and where each extension lives.

    A module path is a ``.py`` file relative to the manifest's folder, or a dotted name of an importable module.
    """

    tools: bool = False
    tools_modules: list[str] = Field(default_factory=lambda: ["tools.py"],
                                     description="modules whose public functions become project_<name> tools")
    prompts: bool = False
    prompts_dir: str = Field(default="prompts", description="folder of <role>.md overlays (router, planner, "
                                                            "evaluator)")
    graph: bool = False
    graph_module: str = Field(default="graph.py", description="module with augment(graph) -> graph | None")


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
            msgs.append(f"unknown key '{where}'{' in [' + parent + ']' if parent else ''}: remove it or fix its "
                        "spelling (docs/projects.md lists every key)")
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
        raise BootstrapError(f"{p}: no project manifest there. Create the project with `aisac init {p.parent} "
                             "--template general`, or pass the folder that holds aisac.toml")
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
    return Project(manifest=manifest, path=path, sha256=hashlib.sha256(raw).hexdigest())


# ---- validation and extension loading ----------------------------------------------------------------------

def _check_path(project: Project, rel: str, key: str, *, want_dir: bool | None = None) -> Path:
    p = project.resolve(rel)
    if not p.exists():
        raise BootstrapError(f"{project.path}: {key} = {rel!r} -> {p} does not exist; create it or fix the path "
                             f"(relative paths start at {project.root})")
    if want_dir is True and not p.is_dir():
        raise BootstrapError(f"{project.path}: {key} = {rel!r} -> {p} is not a folder; name a folder")
    if not os.access(p, os.R_OK | (os.X_OK if p.is_dir() else 0)):
        raise BootstrapError(f"{project.path}: {key} = {rel!r} -> {p} is not readable; fix its permissions")
    return p


def _is_file_ref(ref: str) -> bool:
    return ref.endswith(".py") or "/" in ref or "\\" in ref


def load_module(project: Project, ref: str, key: str) -> ModuleType:
    """Import an extension module: a ``.py`` file relative to the project, or a dotted module name.

    File modules are imported under a private name (``aisac_project_<id>_<stem>``), fresh on every call,
    so two projects (or two bootstraps in one process) never share module state.

    Raises:
        BootstrapError: missing file, syntax error (file and line), or any exception raised on import.
    """
    if _is_file_ref(ref):
        path = _check_path(project, ref, key)
        if path.is_dir():
            path = path / "__init__.py"
            if not path.is_file():
                raise BootstrapError(f"{project.path}: {key} = {ref!r} is a folder without __init__.py; name a "
                                     ".py file")
        name = f"aisac_project_{re.sub(r'[^A-Za-z0-9_]', '_', project.id)}_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise BootstrapError(f"{path}: cannot be imported as a Python module ({key}); name a .py file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses / pydantic models in the module need their module registered
        try:
            spec.loader.exec_module(mod)
        except SyntaxError as exc:
            sys.modules.pop(name, None)
            raise BootstrapError(f"{exc.filename or path}:{exc.lineno}: syntax error in the {key} module: {exc.msg}"
                                 f"; fix line {exc.lineno}") from exc
        except Exception as exc:
            sys.modules.pop(name, None)
            raise BootstrapError(f"{path}: importing the {key} module failed: {type(exc).__name__}: {exc}; fix the "
                                 "module (or install what it imports)") from exc
        return mod
    try:
        return importlib.import_module(ref)
    except SyntaxError as exc:
        raise BootstrapError(f"{exc.filename}:{exc.lineno}: syntax error in the {key} module {ref!r}: {exc.msg}; "
                             f"fix line {exc.lineno}") from exc
    except Exception as exc:
        raise BootstrapError(f"{project.path}: {key} = {ref!r} cannot be imported ({type(exc).__name__}: {exc}); "
                             "give a .py file relative to the project or an installed module's dotted name") from exc


def public_functions(mod: ModuleType) -> list[Callable[..., Any]]:
    """The functions a tools module exports: ``__all__`` when defined, else every function defined in the module
    whose name does not start with ``_``; in name order."""
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n, obj in vars(mod).items() if not n.startswith("_") and inspect.isfunction(obj)
                 and obj.__module__ == mod.__name__]
    fns = []
    for n in sorted(names):
        obj = getattr(mod, n, None)
        if not callable(obj):
            raise BootstrapError(f"{mod.__file__}: __all__ names {n!r}, which is not a function; remove it from "
                                 "__all__")
        fns.append(obj)
    return fns


@dataclass
class PromptOverlay:
    """One role prompt overlay: ``<role>.md`` (Markdown text), optional TOML front matter between ``+++`` lines
    with ``mode =`` ``"prepend"`` (default: the text goes before the role's packaged prompt, as project guidance),
    ``"append"`` (after it) or ``"replace"`` (the file is the whole prompt template, with the packaged prompt's
    ``{placeholders}``)."""

    role: str
    path: Path
    text: str
    mode: Literal["prepend", "append", "replace"] = "prepend"
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
    mode = "prepend"
    if text.startswith("+++"):
        end = text.find("\n+++", 3)
        if end < 0:
            raise BootstrapError(f"{path}: front matter opened with '+++' is never closed; add a closing '+++' "
                                 "line")
        try:
            front = tomllib.loads(text[3:end])
        except tomllib.TOMLDecodeError as exc:
            raise BootstrapError(f"{path}: front matter is not valid TOML ({exc}); fix it") from exc
        extra = set(front) - {"mode"}
        if extra:
            raise BootstrapError(f"{path}: unknown front matter key(s) {sorted(extra)}; only 'mode' is allowed")
        mode = front.get("mode", "prepend")
        if mode not in ("prepend", "append", "replace"):
            raise BootstrapError(f"{path}: mode = {mode!r}; use 'prepend', 'append' or 'replace'")
        text = text[end + 4:].lstrip("\n")
    if not text.strip():
        raise BootstrapError(f"{path}: prompt overlay is empty; write the text to add to the {role} prompt or "
                             "delete the file")
    return PromptOverlay(role=role, path=path, text=text, mode=mode, sha256=hashlib.sha256(raw).hexdigest())


def load_prompts(project: Project) -> dict[str, PromptOverlay]:
    """Every ``<role>.md`` in the prompts folder, for the known roles only.

    Raises:
        BootstrapError: missing folder, a file for an unknown role, a file that does not parse.
    """
    ext = project.manifest.extensions
    d = _check_path(project, ext.prompts_dir, "extensions.prompts_dir", want_dir=True)
    roles = known_roles()
    out: dict[str, PromptOverlay] = {}
    for f in sorted(d.iterdir()):
        if f.name.startswith(".") or f.is_dir():
            continue
        role = f.stem
        if f.suffix != ".md" or role not in roles:
            raise BootstrapError(f"{f}: prompt overlay for an unknown role {f.name!r}; overlays are named "
                                 f"{', '.join(r + '.md' for r in roles)}: rename or remove it")
        ov = parse_prompt(f, role)
        if ov.mode == "replace":
            packaged = _packaged_prompt(role)
            if packaged is not None:
                unknown = sorted(set(_placeholders(ov.text)) - set(_placeholders(packaged)))
                if unknown:
                    raise BootstrapError(
                        f"{f}: placeholder(s) {', '.join('{' + u + '}' for u in unknown)} are not filled for the "
                        f"{role} prompt (it knows {', '.join('{' + k + '}' for k in _placeholders(packaged))}); "
                        "fix them, or write literal braces as {{ and }}")
        out[role] = ov
    if not out:
        raise BootstrapError(f"{d}: extensions.prompts is on but the folder has no overlay; add "
                             f"{' / '.join(r + '.md' for r in roles)} or set prompts = false")
    return out


def known_roles() -> tuple[str, ...]:
    """Roles that take a prompt overlay: the roles package's prompt names when it is installed, else
    :data:`KNOWN_ROLES`."""
    try:
        from aisac_core.roles.prompts import ROLES
    except ImportError:
        return KNOWN_ROLES
    return tuple(ROLES)


_PLACEHOLDER = re.compile(r"(?<!\{)\{([a-z_]+)\}(?!\})")  # the roles' own placeholder syntax (roles/prompts.py)
_HEADER = re.compile(r"<!--\s*aisac prompt:\s*([\w-]+),\s*version\s+([\w.-]+)\s*-->")


def _placeholders(text: str) -> list[str]:
    return sorted(set(_PLACEHOLDER.findall(text)))


def _packaged_prompt(role: str) -> str | None:
    try:
        from aisac_core.roles.prompts import PROMPT_DIR
    except ImportError:
        return None
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


# ---- the bootstrap ------------------------------------------------------------------------------------------

@dataclass
class Step:
    """One recorded step of the initialization trace."""

    name: str
    arguments: dict[str, Any]
    result: Any = None
    status: str = "ok"
    error: str | None = None
    latency_ms: float = 0.0


@dataclass
class Bootstrapped:
    """A validated project, ready to serve."""

    project: Project
    settings: "Settings"
    run_id: str
    tools: list[Callable[..., Any]] = field(default_factory=list)
    prompts: dict[str, PromptOverlay] = field(default_factory=dict)
    graph_augment: Callable[..., Any] | None = None
    #: the composed role prompts (Settings.roles_prompt_dir): <project store>/prompt_overlay, written by the store step
    prompt_dir: Path | None = None
    #: the project's own store: <data_dir>/projects/<id>
    store_dir: Path | None = None
    steps: list[Step] = field(default_factory=list)
    core: "AppContext | None" = None
    server: "FastMCP | None" = None

    @property
    def tool_names(self) -> list[str]:
        """The MCP names of the project tools (``project_<function>``)."""
        return [f"{PROJECT_NAMESPACE}_{fn.__name__}" for fn in self.tools]

    def augment_graph(self, graph: Any) -> Any:
        """Apply the project's graph augmentation to a workflow graph (identity when there is none)."""
        if self.graph_augment is None:
            return graph
        res = self.graph_augment(graph)
        return graph if res is None else res

    def mount(self, suite: "FastMCP") -> "FastMCP":
        """Mount the ``project`` server on a suite built by ``aisac_servers.suite.build()`` (its provenance middleware
        then traces the project tools like every other tool). Checks the names against the suite's tools first.

        Raises:
            BootstrapError: a project tool name is already taken by a suite tool.
        """
        t0 = time.perf_counter()
        step = Step("mount", {"namespace": PROJECT_NAMESPACE, "tools": self.tool_names})
        first = not any(s.name == "mount" for s in self.steps)
        try:
            if self.server is not None:
                existing = {t.name for t in _run_async(lambda: suite.list_tools(run_middleware=False))}
                clash = sorted(existing & set(self.tool_names))
                if clash:
                    raise BootstrapError(f"{self.project.path}: project tool(s) {clash} collide with tools the suite "
                                         "already has; rename the function(s) in the tools module")
                suite.mount(self.server, namespace=PROJECT_NAMESPACE)
            step.result = {"mounted": self.server is not None, "tools": self.tool_names}
        except BootstrapError as exc:
            step.status, step.error = "tool_error", str(exc)
            raise
        finally:
            step.latency_ms = (time.perf_counter() - t0) * 1000
            if first or step.status != "ok":  # recorded once (later builds, e.g. the roles' client, mount silently)
                self.steps.append(step)
                if self.core is not None:
                    _write_steps(self.core, self.run_id, [step])
        return suite


def _run_async(fn: Callable[[], Any]) -> Any:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(fn())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as ex:
        return ex.submit(lambda: asyncio.run(fn())).result()


def _write_steps(core: "AppContext", run_id: str, steps: list[Step]) -> None:
    from aisac_core.trace.provenance import record_tool_call

    for s in steps:
        record_tool_call(core.engine, run_id=run_id, server="bootstrap", tool=s.name, arguments=s.arguments,
                         result=s.result, status=s.status, error=s.error, latency_ms=s.latency_ms, kind="init_step")


def project_data_dir(base: "Settings", project_id: str) -> Path:
    """The project's own store folder: ``<data_dir>/projects/<project id>``."""
    return base.data_dir / "projects" / project_id


def _settings_updates(b: Bootstrapped, base: "Settings") -> tuple[dict[str, Any], list[str]]:
    """Settings fields the manifest sets, and the manifest settings this version has no field for."""
    from aisac_core.settings import Settings

    m, p = b.project.manifest, b.project
    fields = Settings.model_fields
    upd: dict[str, Any] = {
        "data_dir": b.store_dir or project_data_dir(base, p.id),
        "roots": [p.resolve(s.path) for s in m.data.indexed],
        "catalog_roots": [p.resolve(s.path) for s in m.data.catalog],
    }
    if "models_root" in fields:
        upd["models_root"] = base.models_dir  # models are shared infrastructure, data is not
    wanted: dict[str, Any] = {}
    if b.prompt_dir is not None:
        wanted["roles_prompt_dir"] = b.prompt_dir
    r = m.roles
    if r.mode:
        wanted["roles_mode"] = r.mode
    for k, v in r.thresholds.model_dump(exclude_none=True).items():
        wanted[f"roles_{k}"] = v
    llm = {"roles_llm": r.llm.backend, "roles_llm_base_url": r.llm.base_url, "roles_llm_model": r.llm.model,
           "roles_llm_api_key_env": r.llm.api_key_env}
    wanted.update({k: v for k, v in llm.items() if v is not None})
    lit = m.literature
    if lit.mailto:
        wanted["lit_mailto"] = lit.mailto
    if lit.api_key_env.ncbi:
        wanted["lit_ncbi_api_key_env"] = lit.api_key_env.ncbi
    if lit.api_key_env.semantic_scholar:
        wanted["lit_s2_api_key_env"] = lit.api_key_env.semantic_scholar
    if m.sandbox.allow_imports:
        wanted["sandbox_allow_imports"] = list(m.sandbox.allow_imports)
    unapplied = []
    for k, v in wanted.items():
        if k in fields:
            cur = getattr(base, k, None)
            if isinstance(cur, list) and isinstance(v, list):
                v = list(dict.fromkeys([*cur, *v]))  # allow-list *additions*
            elif isinstance(cur, dict) and isinstance(v, dict):
                v = {**cur, **v}
            upd[k] = v
        else:
            unapplied.append(k)
    return upd, unapplied


def _tool_wrapper(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The project function as a tool: ``ValueError`` / ``LookupError`` (``KeyError``, ``IndexError``) /
    :class:`AisacError` become MCP tool errors with their message (bad input); anything else is reported by fastmcp
    as a tool error naming the exception."""
    from fastmcp.exceptions import ToolError

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except ToolError:
                raise
            except (AisacError, ValueError, LookupError) as exc:
                raise ToolError(_user_message(exc)) from exc
        return awrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except (AisacError, ValueError, LookupError) as exc:
            raise ToolError(_user_message(exc)) from exc
    return wrapper


def _user_message(exc: Exception) -> str:
    if isinstance(exc, KeyError) and len(exc.args) == 1:  # str(KeyError('x')) is "'x'"
        return f"not found: {exc.args[0]}"
    return str(exc) or type(exc).__name__


def _build_server(b: Bootstrapped) -> "FastMCP":
    from fastmcp import FastMCP

    m = b.project.manifest
    srv = FastMCP(PROJECT_NAMESPACE, instructions=f"Tools of the project {m.project.name!r} "
                                                   f"({m.project.category}; {m.project.domain or 'no domain given'}).")
    for fn in b.tools:
        try:
            srv.tool(_tool_wrapper(fn), name=fn.__name__)
        except Exception as exc:  # an unsupported signature (e.g. *args) or an annotation pydantic cannot use
            raise BootstrapError(f"{inspect.getsourcefile(fn) or fn.__module__}: function {fn.__name__!r} cannot "
                                 f"become an MCP tool ({type(exc).__name__}: {exc}); give it named, type-annotated "
                                 "parameters or rename it with a leading '_' to keep it private") from exc
    return srv


def bootstrap(project_dir: str | Path, base_settings: "Settings | None" = None, *, open_store: bool = True,
              run_id: str | None = None, store_dir: Path | None = None) -> Bootstrapped:
    """Load, validate and prepare a project for serving, recording every step.

    Args:
        project_dir: the project folder (holding ``aisac.toml``) or the manifest file.
        base_settings: the machine's settings (shared data dir, models); default: from the environment.
        open_store: open the project's SQL store (creating its tables) and write the initialization trace
            there; with False nothing is written (a dry run: ``aisac init`` checks a fresh project this way).
        run_id: the initialization run id; default ``init-<UTC time>-<6 hex>``.
        store_dir: the project's store folder when it is not ``<base data_dir>/projects/<id>`` (the owner daemon
            of a project store gets that folder as its data dir).

    Returns: a :class:`Bootstrapped` with the project settings, tools (``.server``: a FastMCP ``project`` server
    when the tools extension is on), prompt overlays, the graph augmentation, the steps and (open_store) ``.core``,
    a :class:`~aisac_core.context.AppContext` on the project's store. Call ``.mount(suite)`` to serve the tools.

    Raises:
        BootstrapError: the first failing check, naming the file and the fix (the steps so far are recorded in
            the project's store when its id is known and open_store is True).
    """
    from aisac_core.settings import Settings

    state: dict[str, Any] = {}
    base = base_settings or Settings()
    if store_dir is not None:
        state["store_dir"] = Path(store_dir)
    run_id = run_id or "init-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    steps: list[Step] = []

    def step(name: str, args: dict[str, Any], fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        s = Step(name, args)
        try:
            res = fn()
            s.result = res
            return res
        except BootstrapError as exc:
            s.status, s.error = "tool_error", str(exc)
            raise
        except Exception as exc:  # an extension failing in a way we did not foresee: still one clear line
            s.status, s.error = "exception", f"{type(exc).__name__}: {exc}"
            raise BootstrapError(f"{state.get('path', project_dir)}: bootstrap step {name!r} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
        finally:
            s.latency_ms = (time.perf_counter() - t0) * 1000
            steps.append(s)

    b: Bootstrapped | None = None
    try:
        step("load", {"project": str(project_dir)}, lambda: _load_step(project_dir, state))
        project: Project = state["project"]
        b = Bootstrapped(project=project, settings=base, run_id=run_id, steps=steps)
        step("validate", {"manifest": str(project.path)}, lambda: _validate_step(project))
        step("tools", {"enabled": project.manifest.extensions.tools,
                       "modules": project.manifest.extensions.tools_modules if project.manifest.extensions.tools
                       else []}, lambda: _tools_step(b))
        step("prompts", {"enabled": project.manifest.extensions.prompts,
                         "dir": project.manifest.extensions.prompts_dir if project.manifest.extensions.prompts
                         else None}, lambda: _prompts_step(b))
        step("graph", {"enabled": project.manifest.extensions.graph,
                       "module": project.manifest.extensions.graph_module if project.manifest.extensions.graph
                       else None}, lambda: _graph_step(b))
        b.store_dir = state.get("store_dir") or project_data_dir(base, project.id)
        step("settings", {"base_data_dir": str(base.data_dir)}, lambda: _settings_step(b, base))
        if open_store:
            step("store", {"data_dir": str(b.settings.data_dir)}, lambda: _store_step(b))
    except BootstrapError:
        if open_store and "project" in state:
            _record_failure(state.get("store_dir") or project_data_dir(base, state["project"].id), base, run_id,
                            steps)
        raise
    if open_store:
        assert b.core is not None
        _write_steps(b.core, run_id, steps)
        activate(b)
    return b


def _load_step(project_dir: str | Path, state: dict[str, Any]) -> dict[str, Any]:
    project = load_manifest(project_dir)
    state["project"], state["path"] = project, project.path
    m = project.manifest
    return {"manifest": str(project.path), "sha256": project.sha256, "id": project.id, "name": m.project.name,
            "category": m.project.category, "domain": m.project.domain}


def _validate_step(project: Project) -> dict[str, Any]:
    m = project.manifest
    seen: dict[Path, str] = {}
    for kind, sources in (("indexed", m.data.indexed), ("catalog", m.data.catalog)):
        for i, s in enumerate(sources):
            key = f"data.{kind}[{i}].path"
            p = _check_path(project, s.path, key)
            if p in seen:
                raise BootstrapError(f"{project.path}: {key} = {s.path!r} is the same folder as {seen[p]}; list "
                                     "each folder once")
            seen[p] = key
    ext = m.extensions
    if ext.tools and not ext.tools_modules:
        raise BootstrapError(f"{project.path}: extensions.tools is on but tools_modules is empty; list a module "
                             "or set tools = false")
    return {"indexed": [str(project.resolve(s.path)) for s in m.data.indexed],
            "catalog": [str(project.resolve(s.path)) for s in m.data.catalog]}


def _tools_step(b: Bootstrapped) -> dict[str, Any]:
    ext = b.project.manifest.extensions
    if not ext.tools:
        return {"tools": []}
    owner: dict[str, str] = {}
    fns: list[Callable[..., Any]] = []
    for i, ref in enumerate(ext.tools_modules):
        mod = load_module(b.project, ref, f"extensions.tools_modules[{i}]")
        mfile = getattr(mod, "__file__", None) or ref
        found = public_functions(mod)
        if not found:
            raise BootstrapError(f"{mfile}: the tools module defines no public function; add one (with a docstring "
                                 "and type annotations) or set extensions.tools = false")
        for fn in found:
            if fn.__name__ in owner:
                raise BootstrapError(f"{mfile}: tool {fn.__name__!r} is also defined in {owner[fn.__name__]}; two "
                                     "tools cannot share a name: rename one of the functions (or prefix it with '_')")
            if not (fn.__doc__ or "").strip():
                raise BootstrapError(f"{mfile}: function {fn.__name__!r} has no docstring; hosts show it as the "
                                     "tool's description: add one (arguments, units, result, errors)")
            owner[fn.__name__] = mfile
            fns.append(fn)
    b.tools = sorted(fns, key=lambda f: f.__name__)
    b.server = _build_server(b)
    return {"tools": b.tool_names}


def _prompts_step(b: Bootstrapped) -> dict[str, Any]:
    if not b.project.manifest.extensions.prompts:
        return {"roles": []}
    b.prompts = load_prompts(b.project)
    return {"roles": sorted(b.prompts), "files": {r: {"path": str(o.path), "sha256": o.sha256, "mode": o.mode}
                                                  for r, o in sorted(b.prompts.items())}}


def _graph_step(b: Bootstrapped) -> dict[str, Any]:
    ext = b.project.manifest.extensions
    if not ext.graph:
        return {"augment": None}
    mod = load_module(b.project, ext.graph_module, "extensions.graph_module")
    fn = getattr(mod, "augment", None)
    mfile = getattr(mod, "__file__", None) or ext.graph_module
    if not callable(fn):
        raise BootstrapError(f"{mfile}: the graph module has no function augment(graph); define it (it receives the "
                             "workflow graph and returns it, augmented)")
    try:
        inspect.signature(fn).bind(object())
    except TypeError as exc:
        raise BootstrapError(f"{mfile}: augment must take exactly one argument (the graph): {exc}; fix its "
                             "signature") from exc
    b.graph_augment = fn
    res: dict[str, Any] = {"augment": f"{mfile}:augment"}
    graph_mod = _roles_graph()
    if graph_mod is not None:  # the roles are installed: apply it now, so a broken augmentation halts the bootstrap
        try:
            g = _default_graph(graph_mod, b)
        except Exception as exc:
            raise BootstrapError(f"{mfile}: augment(graph) failed: {type(exc).__name__}: {exc}; fix the function "
                                 "(it receives aisac_core.roles.graph.default_graph() and returns it)") from exc
        res["nodes"] = _node_names(g)
        added = sorted(set(res["nodes"] or []) - set(_node_names(graph_mod.default_graph()) or []))
        res["added_nodes"] = added
        for name in added:  # a tool node must name a tool that will exist: a project tool or a suite tool
            node = g["nodes"][name] if isinstance(g, dict) else None
            tool = node.get("tool") if isinstance(node, dict) and node.get("kind") == "tool" else None
            if tool and tool.startswith(PROJECT_NAMESPACE + "_") and tool not in b.tool_names:
                raise BootstrapError(f"{mfile}: graph node {name!r} calls {tool!r}, which is not a project tool "
                                     f"(the project has {', '.join(b.tool_names) or 'none'}); fix the name or "
                                     "enable the tools extension")
    return res


def _roles_graph() -> ModuleType | None:
    try:
        return importlib.import_module("aisac_core.roles.graph")
    except ModuleNotFoundError:
        return None


def _default_graph(graph_mod: ModuleType, b: Bootstrapped) -> Any:
    dg = graph_mod.default_graph
    try:
        params = inspect.signature(dg).parameters
    except (TypeError, ValueError):
        params = {}
    if "augment" in params:
        return dg(augment=b.augment_graph)
    return b.augment_graph(dg())


def _node_names(g: Any) -> list[str] | None:
    nodes = g.get("nodes") if isinstance(g, dict) else getattr(g, "nodes", None)
    if nodes is None:
        return None
    if isinstance(nodes, dict):
        return [str(k) for k in nodes]
    try:
        return [str(getattr(n, "name", n)) for n in nodes]
    except TypeError:
        return None


def _settings_step(b: Bootstrapped, base: "Settings") -> dict[str, Any]:
    if b.prompts:
        assert b.store_dir is not None
        b.prompt_dir = b.store_dir / "prompt_overlay"
    upd, unapplied = _settings_updates(b, base)
    b.settings = base.model_copy(update=upd)
    return {"data_dir": str(b.settings.data_dir), "roots": [str(r) for r in b.settings.roots],
            "catalog_roots": [str(r) for r in b.settings.catalog_roots],
            "applied": sorted(k for k in upd if k not in ("data_dir", "roots", "catalog_roots")),
            "not_applied": unapplied}


def _store_step(b: Bootstrapped) -> dict[str, Any]:
    from sqlalchemy import func
    from sqlmodel import Session, select

    from aisac_core.context import AppContext
    from aisac_core.store.tables import Document

    core = AppContext(b.settings)
    try:
        with Session(core.engine) as db:
            docs = db.exec(select(func.count()).select_from(Document)).one()
    except Exception as exc:
        core.close()
        raise BootstrapError(f"{b.settings.data_dir}: cannot open the project's store ({exc}); check the folder's "
                             "permissions and free space") from exc
    b.core = core
    if b.prompt_dir is not None:  # the composed prompts, where the roles read overlays (Settings.roles_prompt_dir)
        import shutil

        shutil.rmtree(b.prompt_dir, ignore_errors=True)
        b.prompt_dir.mkdir(parents=True)
        name = b.project.manifest.project.name
        for role, ov in sorted(b.prompts.items()):
            (b.prompt_dir / f"{role}.md").write_text(compose_prompt(ov, name, b.project.id), encoding="utf-8")
    return {"data_dir": str(b.settings.data_dir), "sql_url": b.settings.resolved_sql_url, "documents": int(docs)}


def _record_failure(store_dir: Path, base: "Settings", run_id: str, steps: list[Step]) -> None:
    """Write the steps of a failed bootstrap into the project's store (best effort: never masks the error)."""
    try:
        from aisac_core.context import AppContext

        core = AppContext(base.model_copy(update={"data_dir": store_dir, "sql_url": None}))
        try:
            _write_steps(core, run_id, steps)
        finally:
            core.close()
    except Exception:  # pragma: no cover - the bootstrap error itself is what the user needs
        pass


def serve_suite(project_dir: str | Path, base_settings: "Settings | None" = None, names: list[str] | None = None, *,
                store_dir: Path | None = None) -> "FastMCP":
    """Bootstrap a project (recorded) and build the suite on its store with its tools mounted: what
    ``aisac serve --project DIR`` (and the owner daemon of a project's store) serves.

    The project's :class:`~aisac_core.context.AppContext` becomes the process-wide core (``set_core``), so every server
    and the provenance middleware use the project's store.

    Raises:
        BootstrapError: see :func:`bootstrap`.
    """
    from aisac_servers.suite import build

    from aisac_core.context import set_core

    b = bootstrap(project_dir, base_settings, store_dir=store_dir)
    set_core(b.core)
    try:
        return build(names)  # mounts the active project's tools (mount_active_project)
    except BootstrapError:
        reset_active_project()
        set_core(None)
        raise


_ACTIVE: Bootstrapped | None = None


def active_project() -> Bootstrapped | None:
    """The project this process bootstrapped last (None when serving without ``--project``)."""
    return _ACTIVE


def activate(b: Bootstrapped) -> None:
    """Make ``b`` the process's project: ``aisac_servers.suite.build()`` mounts its tools, and the roles' workflow graph
    (``aisac_core.roles.graph.set_augment``) gets its augmentation. (Its prompt overlays reach the roles through
    ``Settings.roles_prompt_dir`` of the project's core.)"""
    global _ACTIVE
    _ACTIVE = b
    graph_mod = _roles_graph()
    if graph_mod is not None and hasattr(graph_mod, "set_augment"):
        graph_mod.set_augment(b.augment_graph if b.graph_augment is not None else None)


def reset_active_project() -> None:
    """Forget the active project and its graph augmentation (tests, or a process that serves another project)."""
    global _ACTIVE
    if _ACTIVE is not None and _ACTIVE.graph_augment is not None:
        graph_mod = _roles_graph()
        if graph_mod is not None and hasattr(graph_mod, "set_augment"):
            graph_mod.set_augment(None)
    _ACTIVE = None


def mount_active_project(suite: "FastMCP", names: list[str] | None = None) -> None:
    """The hook ``aisac_servers.suite.build()`` calls: mount the active project's ``project`` server on a whole suite
    (not on a single-server build). Each build gets it (the roles' in-process client builds its own suite)."""
    if _ACTIVE is not None and _ACTIVE.server is not None and not names:
        _ACTIVE.mount(suite)


# ---- init from a template -----------------------------------------------------------------------------------

def templates_dir() -> Path:
    """Where the shipped templates live: the top-level ``project_templates/`` folder, installed as the package
    ``aisac_templates`` (so an editable install and a wheel both find it)."""
    import importlib.resources

    return Path(str(importlib.resources.files("aisac_templates")))


def list_templates() -> list[str]:
    """Names of the shipped templates (folders holding an aisac.toml)."""
    d = templates_dir()
    return sorted(p.name for p in d.iterdir() if (p / MANIFEST).is_file()) if d.is_dir() else []


def init_project(target: str | Path, template: str = "general", *, name: str | None = None,
                 force: bool = False) -> Path:
    """Copy a template into ``target`` and set its ``[project] id`` (and ``name`` when given).

    Args:
        target: the new project folder (created; must be empty or absent unless ``force``).
        template: one of :func:`list_templates`.
        name: display name (default: the template's).
        force: allow a non-empty folder (files of the same name are overwritten).

    Returns: the manifest path. The result is checked with a dry-run :func:`bootstrap`.

    Raises:
        BootstrapError: unknown template, folder not empty.
    """
    import shutil

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
    import json

    return json.dumps(s, ensure_ascii=False)  # a JSON string is a valid TOML basic string


if __name__ == "__main__":  # pragma: no cover - `python -m aisac_core.projects.bootstrap schema` refreshes docs/projects.md
    import json as _json

    if sys.argv[1:] == ["schema"]:
        print(_json.dumps(manifest_json_schema(), indent=1, ensure_ascii=False))
    else:
        print("usage: python -m aisac_core.projects.bootstrap schema   (prints the aisac.toml JSON Schema)", file=sys.stderr)
        sys.exit(2)
