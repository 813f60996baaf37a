"""The validated, traced bootstrap of a project: from ``aisac.toml`` to the settings, tools, prompts, graph and
plugins the project is served with.

The bootstrap is deterministic (fixed step order, tools sorted by name) and recorded as an *initialization
trace*: one run id (``init-...``), one trace event per step (``server="bootstrap"``, ``kind="init_step"``,
``tool`` = the step name) in the project's own store. Steps::

    load -> validate -> tools -> prompts -> graph -> settings -> store  (-> mount, when served)

Any failure stops it with a :class:`BootstrapError` naming the file and the fix; nothing is served
half-initialised (the failed step is still recorded when the project's store can be located). The MCP layer
serves the result (``aisac_servers.adapters.project``): the project's tools under the ``project`` namespace, on an
application context ``AppContext(b.settings, project=b)``.

Data scoping (multi-domain portal): every project has its own store under the shared data dir,
``<data_dir>/projects/<project id>/`` (SQLite file, vector store, jobs, traces); the embedding models stay
shared in ``<data_dir>/models``. Two projects served in turn from one data dir therefore see only their
own documents, memory and traces.
"""

from __future__ import annotations

import inspect
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy
from sqlalchemy import func
from sqlmodel import Session, select

from aisac_core.literature.sources import source_registry
from aisac_core.plugins import PluginError, augment_graph, collect, has_impls, make_plugin_manager
from aisac_core.projects.extensions import check_tool, load_module, public_functions, register_module, source_of
from aisac_core.projects.manifest import PROJECT_NAMESPACE, BootstrapError, Project, check_path, load_manifest
from aisac_core.projects.prompts import PromptOverlay, compose_prompt, load_prompts
from aisac_core.roles.graph import default_graph
from aisac_core.settings import Settings
from aisac_core.store.sql import make_engine, redact_url
from aisac_core.store.tables import Document
from aisac_core.trace.recorder import record_tool_call


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
    """A validated project, ready to serve: what ``AppContext.project`` holds."""

    project: Project
    settings: Settings
    run_id: str
    #: the project tools (public functions of the tools modules and ``aisac_register_tools`` results), by name
    tools: list[Callable[..., Any]] = field(default_factory=list)
    prompts: dict[str, PromptOverlay] = field(default_factory=dict)
    #: the workflow-graph augmentation (the graph module's ``augment`` then the ``aisac_augment_graph`` hooks)
    graph_augment: Callable[..., Any] | None = None
    #: the composed role prompts (Settings.roles.prompt_dir): <project store>/prompt_overlay, written by the store step
    prompt_dir: Path | None = None
    #: the project's own store: <data_dir>/projects/<id>
    store_dir: Path | None = None
    steps: list[Step] = field(default_factory=list)
    #: the plugin manager: aisac's built-ins plus the project's extension modules (their ``@hookimpl`` functions)
    plugins: pluggy.PluginManager = field(default_factory=make_plugin_manager)
    #: the MCP server of the project tools, built by the MCP layer when first mounted (``aisac_servers.adapters.project``)
    server: Any = None

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

    def record(self, step: Step, engine: Any | None) -> None:
        """Append a step taken after the bootstrap (e.g. the MCP layer's ``mount``) and write it to the
        initialization trace through the SQL ``engine`` of the project's store (not written when None)."""
        self.steps.append(step)
        if engine is not None:
            write_steps(engine, self.run_id, [step])


def write_steps(engine: Any, run_id: str, steps: list[Step]) -> None:
    """Write ``steps`` as ``init_step`` trace events of ``run_id`` (server ``bootstrap``)."""
    for s in steps:
        record_tool_call(
            engine,
            run_id=run_id,
            server="bootstrap",
            tool=s.name,
            arguments=s.arguments,
            result=s.result,
            status=s.status,
            error=s.error,
            latency_ms=s.latency_ms,
            kind="init_step",
        )


def project_data_dir(base: Settings, project_id: str) -> Path:
    """The project's own store folder: ``<data_dir>/projects/<project id>``."""
    return base.data_dir / "projects" / project_id


def _settings_updates(b: Bootstrapped, base: Settings) -> tuple[dict[str, Any], list[str]]:
    """Settings fields the manifest sets, and the manifest settings this version has no field for."""
    m, p = b.project.manifest, b.project
    fields = set(Settings.setting_names())
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
    llm = {
        "roles_llm": r.llm.backend,
        "roles_llm_base_url": r.llm.base_url,
        "roles_llm_model": r.llm.model,
        "roles_llm_api_key_env": r.llm.api_key_env,
    }
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
            cur = base.get(k)
            if isinstance(cur, list) and isinstance(v, list):
                v = list(dict.fromkeys([*cur, *v]))  # allow-list *additions*
            elif isinstance(cur, dict) and isinstance(v, dict):
                v = {**cur, **v}
            upd[k] = v
        else:
            unapplied.append(k)
    return upd, unapplied


def bootstrap(
    project_dir: str | Path,
    base_settings: Settings | None = None,
    *,
    open_store: bool = True,
    run_id: str | None = None,
    store_dir: Path | None = None,
) -> Bootstrapped:
    """Load, validate and prepare a project for serving, recording every step.

    Args:
        project_dir: the project folder (holding ``aisac.toml``) or the manifest file.
        base_settings: the machine's settings (shared data dir, models); default: from the environment.
        open_store: open the project's SQL store (creating its tables) and write the initialization trace
            there; with False nothing is written (a dry run: ``aisac init`` checks a fresh project this way).
        run_id: the initialization run id; default ``init-<UTC time>-<6 hex>``.
        store_dir: the project's store folder when it is not ``<base data_dir>/projects/<id>`` (the owner daemon
            of a project store gets that folder as its data dir).

    Returns: a :class:`Bootstrapped` with the project settings, tools, prompt overlays, the graph augmentation,
    the plugin manager (built-ins plus the project's extension modules) and the steps. Serve it on
    ``AppContext(b.settings, project=b)`` (``aisac_servers.adapters.project.serve_project`` does).

    Raises:
        BootstrapError: the first failing check, naming the file and the fix (the steps so far are recorded in
            the project's store when its id is known and open_store is True).
    """
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
            raise BootstrapError(
                f"{state.get('path', project_dir)}: bootstrap step {name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            s.latency_ms = (time.perf_counter() - t0) * 1000
            steps.append(s)

    b: Bootstrapped | None = None
    try:
        step("load", {"project": str(project_dir)}, lambda: _load_step(project_dir, state))
        project: Project = state["project"]
        b = Bootstrapped(project=project, settings=base, run_id=run_id, steps=steps)
        ext = project.manifest.extensions
        tool_args: dict[str, Any] = {"enabled": ext.tools, "modules": ext.tools_modules if ext.tools else []}
        if ext.plugins:
            tool_args["plugins"] = list(ext.plugins)
        step("validate", {"manifest": str(project.path)}, lambda: _validate_step(project))
        step("tools", tool_args, lambda: _tools_step(b))
        step(
            "prompts",
            {
                "enabled": project.manifest.extensions.prompts,
                "dir": project.manifest.extensions.prompts_dir if project.manifest.extensions.prompts else None,
            },
            lambda: _prompts_step(b),
        )
        step(
            "graph",
            {
                "enabled": project.manifest.extensions.graph,
                "module": project.manifest.extensions.graph_module if project.manifest.extensions.graph else None,
            },
            lambda: _graph_step(b),
        )
        b.store_dir = state.get("store_dir") or project_data_dir(base, project.id)
        step("settings", {"base_data_dir": str(base.data_dir)}, lambda: _settings_step(b, base))
        if open_store:
            step("store", {"data_dir": str(b.settings.data_dir)}, lambda: _store_step(b))
    except BootstrapError:
        if open_store and "project" in state:
            _record_failure(state.get("store_dir") or project_data_dir(base, state["project"].id), base, run_id, steps)
        raise
    if open_store:
        engine = make_engine(b.settings.resolved_sql_url)
        try:
            write_steps(engine, run_id, steps)
        finally:
            engine.dispose()
    return b


def _load_step(project_dir: str | Path, state: dict[str, Any]) -> dict[str, Any]:
    project = load_manifest(project_dir)
    state["project"], state["path"] = project, project.path
    m = project.manifest
    return {
        "manifest": str(project.path),
        "sha256": project.sha256,
        "id": project.id,
        "name": m.project.name,
        "category": m.project.category,
        "domain": m.project.domain,
    }


def _validate_step(project: Project) -> dict[str, Any]:
    m = project.manifest
    seen: dict[Path, str] = {}
    for kind, sources in (("indexed", m.data.indexed), ("catalog", m.data.catalog)):
        for i, s in enumerate(sources):
            key = f"data.{kind}[{i}].path"
            p = check_path(project, s.path, key)
            if p in seen:
                raise BootstrapError(
                    f"{project.path}: {key} = {s.path!r} is the same folder as {seen[p]}; list each folder once"
                )
            seen[p] = key
    ext = m.extensions
    if ext.tools and not ext.tools_modules:
        raise BootstrapError(
            f"{project.path}: extensions.tools is on but tools_modules is empty; list a module or set tools = false"
        )
    return {
        "indexed": [str(project.resolve(s.path)) for s in m.data.indexed],
        "catalog": [str(project.resolve(s.path)) for s in m.data.catalog],
    }


def _tools_step(b: Bootstrapped) -> dict[str, Any]:
    ext = b.project.manifest.extensions
    owner: dict[str, str] = {}
    fns: list[Callable[..., Any]] = []
    hooks: list[str] = []

    def add(fn: Callable[..., Any], where: str) -> None:
        if not callable(fn) or not getattr(fn, "__name__", "").isidentifier() or fn.__name__.startswith("_"):
            raise BootstrapError(
                f"{where}: aisac_register_tools() returned {fn!r}; return plain functions with public names"
            )
        if fn.__name__ in owner:
            raise BootstrapError(
                f"{where}: tool {fn.__name__!r} is also defined in {owner[fn.__name__]}; two "
                "tools cannot share a name: rename one of the functions (or prefix it with '_')"
            )
        check_tool(fn, where)
        owner[fn.__name__] = where
        fns.append(fn)

    for i, ref in enumerate(ext.plugins):
        key = f"extensions.plugins[{i}]"
        mod = load_module(b.project, ref, key)
        hooked = register_module(b.plugins, mod, key)
        if not hooked:
            raise BootstrapError(
                f"{getattr(mod, '__file__', None) or ref}: the plugin module defines no @hookimpl "
                "function; add one (from aisac_core.plugins import hookimpl) or remove it from "
                "extensions.plugins"
            )
        hooks += [f"{ref}:{n}" for n in hooked]
    for i, ref in enumerate(ext.tools_modules if ext.tools else []):
        key = f"extensions.tools_modules[{i}]"
        mod = load_module(b.project, ref, key)
        mfile = getattr(mod, "__file__", None) or ref
        found = public_functions(mod)
        registered = register_module(b.plugins, mod, key)
        hooks += [f"{ref}:{n}" for n in registered]
        if not found and not registered:
            raise BootstrapError(
                f"{mfile}: the tools module defines no public function; add one (with a docstring "
                "and type annotations) or set extensions.tools = false"
            )
        for fn in found:
            add(fn, mfile)
    try:
        for fn in collect(b.plugins, "aisac_register_tools"):
            add(fn, source_of(fn))
        sources = source_registry(b.plugins)
    except PluginError as exc:
        raise BootstrapError(f"{b.project.path}: a plugin module returned something aisac cannot use: {exc}") from exc
    b.tools = sorted(fns, key=lambda f: f.__name__)
    res: dict[str, Any] = {"tools": b.tool_names}
    if hooks:
        res["hooks"] = sorted(hooks)
        res["literature_sources"] = list(sources)
    return res


def _prompts_step(b: Bootstrapped) -> dict[str, Any]:
    if not b.project.manifest.extensions.prompts:
        return {"roles": []}
    b.prompts = load_prompts(b.project)
    return {
        "roles": sorted(b.prompts),
        "files": {r: {"path": str(o.path), "sha256": o.sha256, "mode": o.mode} for r, o in sorted(b.prompts.items())},
    }


def _graph_step(b: Bootstrapped) -> dict[str, Any]:
    ext = b.project.manifest.extensions
    fn: Callable[..., Any] | None = None
    res: dict[str, Any] = {"augment": None}
    mfile = "a plugin's aisac_augment_graph"
    if ext.graph:
        mod = load_module(b.project, ext.graph_module, "extensions.graph_module")
        register_module(b.plugins, mod, "extensions.graph_module")
        fn = getattr(mod, "augment", None)
        mfile = getattr(mod, "__file__", None) or ext.graph_module
        if not callable(fn):
            raise BootstrapError(
                f"{mfile}: the graph module has no function augment(graph); define it (it receives "
                "the workflow graph and returns it, augmented)"
            )
        try:
            inspect.signature(fn).bind(object())
        except TypeError as exc:
            raise BootstrapError(
                f"{mfile}: augment must take exactly one argument (the graph): {exc}; fix its signature"
            ) from exc
        res["augment"] = f"{mfile}:augment"
    hooked = has_impls(b.plugins, "aisac_augment_graph")
    if fn is None and not hooked:
        return res
    pm = b.plugins

    def augment(graph: dict[str, Any]) -> dict[str, Any]:
        if fn is not None:
            out = fn(graph)
            graph = graph if out is None else out
        return augment_graph(pm, graph) if hooked else graph

    b.graph_augment = augment
    if hooked:
        res["hooks"] = sorted(impl.plugin_name for impl in pm.hook.aisac_augment_graph.get_hookimpls())
    try:  # apply it now, so a broken augmentation halts the bootstrap
        g = default_graph(b.augment_graph)
    except Exception as exc:
        raise BootstrapError(
            f"{mfile}: augment(graph) failed: {type(exc).__name__}: {exc}; fix the function "
            "(it receives aisac_core.roles.graph.default_graph() and returns it)"
        ) from exc
    res["nodes"] = _node_names(g)
    added = sorted(set(res["nodes"] or []) - set(_node_names(default_graph()) or []))
    res["added_nodes"] = added
    for name in added:  # a tool node must name a tool that will exist: a project tool or a suite tool
        nodes = g.get("nodes")
        node = nodes.get(name) if isinstance(nodes, dict) else None
        tool = node.get("tool") if isinstance(node, dict) and node.get("kind") == "tool" else None
        if isinstance(tool, str) and tool and tool.startswith(PROJECT_NAMESPACE + "_") and tool not in b.tool_names:
            raise BootstrapError(
                f"{mfile}: graph node {name!r} calls {tool!r}, which is not a project tool "
                f"(the project has {', '.join(b.tool_names) or 'none'}); fix the name or "
                "enable the tools extension"
            )
    return res


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


def _settings_step(b: Bootstrapped, base: Settings) -> dict[str, Any]:
    if b.prompts:
        assert b.store_dir is not None
        b.prompt_dir = b.store_dir / "prompt_overlay"
    upd, unapplied = _settings_updates(b, base)
    b.settings = base.updated(**upd)
    return {
        "data_dir": str(b.settings.data_dir),
        "roots": [str(r) for r in b.settings.rag.roots],
        "catalog_roots": [str(r) for r in b.settings.rag.catalog_roots],
        "applied": sorted(k for k in upd if k not in ("data_dir", "roots", "catalog_roots")),
        "not_applied": unapplied,
    }


def _store_step(b: Bootstrapped) -> dict[str, Any]:
    engine = None
    try:
        b.settings.data_dir.mkdir(parents=True, exist_ok=True)
        engine = make_engine(b.settings.resolved_sql_url)
        with Session(engine) as db:
            docs = db.exec(select(func.count()).select_from(Document)).one()
    except Exception as exc:
        raise BootstrapError(
            f"{b.settings.data_dir}: cannot open the project's store ({exc}); check the folder's "
            "permissions and free space"
        ) from exc
    finally:
        if engine is not None:
            engine.dispose()
    if b.prompt_dir is not None:  # the composed prompts, where the roles read overlays (Settings.roles.prompt_dir)
        shutil.rmtree(b.prompt_dir, ignore_errors=True)
        b.prompt_dir.mkdir(parents=True)
        name = b.project.manifest.project.name
        for role, ov in sorted(b.prompts.items()):
            (b.prompt_dir / f"{role}.md").write_text(compose_prompt(ov, name, b.project.id), encoding="utf-8")
    return {
        "data_dir": str(b.settings.data_dir),
        "sql_url": redact_url(b.settings.resolved_sql_url),
        "documents": int(docs),
    }


def _record_failure(store_dir: Path, base: Settings, run_id: str, steps: list[Step]) -> None:
    """Write the steps of a failed bootstrap into the project's store (best effort: never masks the error)."""
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
        engine = make_engine(base.updated(data_dir=store_dir, sql_url=None).resolved_sql_url)
        try:
            write_steps(engine, run_id, steps)
        finally:
            engine.dispose()
    except Exception:  # pragma: no cover - the bootstrap error itself is what the user needs
        pass
