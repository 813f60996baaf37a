"""The extension seam: pluggy hook specifications of aisac, and the plugin manager that holds the implementations.

A plugin is any object or module with functions marked ``@hookimpl`` and named after a hook below. The built-ins
register through the same hooks (the five literature sources: :mod:`aisac_core.literature.builtin`; the six MCP
servers: ``aisac_servers.project``), and a project's extension modules (``[extensions]`` of ``aisac.toml``) are
registered on the plugin manager of the project's bootstrap, so a project adds tools, literature sources, table
loaders, MCP servers or workflow-graph changes without touching aisac's code::

    from aisac_core.plugins import hookimpl

    @hookimpl
    def aisac_register_tools():
        return [my_function]          # served as project_my_function

Hook results are collected in registration order (built-ins first, then the project's modules in manifest order).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Iterable

import pluggy

from aisac_core.errors import AisacError

#: the pluggy project name: hook implementations carry the ``aisac_impl`` marker
PROJECT_NAME = "aisac"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

#: modules of ``aisac_core`` implementing hooks for the built-in features, registered by :func:`make_plugin_manager`
#: (named, not imported here: a plugin sits above this module in the layers)
BUILTIN_PLUGINS = ("aisac_core.literature.builtin",)


class AisacSpec:
    """The hooks aisac calls. Every hook may be implemented by any number of plugins."""

    @hookspec
    def aisac_register_servers(self) -> list[tuple[str, Any]]:
        """MCP servers to mount on the suite: ``[(namespace, server)]``. ``server`` is a server object of the MCP
        layer or a ``"module:attribute"`` string naming one (imported when the suite mounts it). The namespace
        prefixes its tools (``<namespace>_<tool>``) and must be unique in the suite."""

    @hookspec
    def aisac_register_tools(self) -> list[Callable[..., Any]]:
        """Plain Python functions to serve as project tools (``project_<function name>``): named, type-annotated
        parameters and a docstring (the tool's description). Raising ``ValueError``/``LookupError`` reports bad
        input to the caller."""

    @hookspec
    def aisac_register_literature_sources(self) -> list[Any]:
        """Literature sources: objects with ``name`` (str), ``async search(fetcher, query, k, year_from, year_to)
        -> list[Paper]`` and optionally ``async get(fetcher, kind, value) -> Paper`` with ``identifiers`` (the
        identifier kinds it answers: doi, arxiv, pmid, pmcid, s2, openalex), ``max_results`` (int) and ``aliases``
        (other accepted spellings). See :class:`aisac_core.literature.sources.LiteratureSource`."""

    @hookspec
    def aisac_register_table_loaders(self) -> dict[str, Callable[..., Any]]:
        """Table loaders of the data registry: ``{".suffix": loader}``; ``loader(path: pathlib.Path)`` returns a
        pandas DataFrame (raise ``ValueError`` for a file it cannot read)."""

    @hookspec
    def aisac_augment_graph(self, graph: dict[str, Any]) -> dict[str, Any] | None:
        """Change the roles' workflow graph (see :mod:`aisac_core.roles.graph`): edit ``graph`` in place and return
        None, or return the new graph. Applied in registration order, each to the previous one's result."""


class PluginError(AisacError, ValueError):
    """A plugin that cannot be used: a hook implementation with an unknown name or bad signature, a bad result."""


def make_plugin_manager(extra_plugins: Iterable[Any] = ()) -> pluggy.PluginManager:
    """A plugin manager with aisac's hook specifications, the built-in plugins (:data:`BUILTIN_PLUGINS`) and
    ``extra_plugins`` (modules or objects with ``@hookimpl`` functions), registered in that order.

    Raises:
        PluginError: a plugin implements a hook aisac does not define (a misspelt name) or with wrong arguments.
    """
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(AisacSpec)
    for name in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    for plugin in extra_plugins:
        register(pm, plugin)
    return pm


def register(pm: pluggy.PluginManager, plugin: Any, name: str | None = None) -> None:
    """Register ``plugin`` on ``pm`` (no-op when it is registered already) and check its hook names.

    Raises:
        PluginError: an ``aisac_*`` hook implementation that aisac does not define, or with wrong arguments.
    """
    if pm.is_registered(plugin):
        return
    try:
        pm.register(plugin, name=name)
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        if pm.is_registered(plugin):
            pm.unregister(plugin)
        known = ", ".join(sorted(n for n in dir(AisacSpec) if n.startswith("aisac_")))
        raise PluginError(f"{exc}; the hooks are {known}") from exc


def plugins_of(app: Any) -> pluggy.PluginManager:
    """The plugin manager of an application context (:attr:`aisac_core.context.AppContext.plugins`: the served
    project's, with the built-ins plus its extension modules, else the built-ins only); a new one with the built-ins
    when ``app`` is None."""
    pm = getattr(app, "plugins", None)
    if pm is None:
        pm = getattr(getattr(app, "project", None), "plugins", None)
    return pm if pm is not None else make_plugin_manager()


def collect(pm: pluggy.PluginManager, hook: str) -> list[Any]:
    """The results of ``hook`` (a list-returning hook) from every plugin, flattened, in registration order."""
    caller = getattr(pm.hook, hook)
    out: list[Any] = []
    for impl in caller.get_hookimpls():  # pluggy's order is registration order (later ones are called first)
        res = impl.function()
        if res is None:
            continue
        if not isinstance(res, (list, tuple)):
            raise PluginError(f"{impl.plugin_name}: {hook}() must return a list, got {type(res).__name__}")
        out.extend(res)
    return out


def table_loaders(pm: pluggy.PluginManager) -> dict[str, Callable[..., Any]]:
    """The table loaders registered through ``aisac_register_table_loaders``: ``{".suffix" (lower case): loader}``;
    a later plugin's loader replaces an earlier one for the same suffix.

    Raises:
        PluginError: a result that is not a dict of ``".suffix" -> callable``.
    """
    out: dict[str, Callable[..., Any]] = {}
    for impl in pm.hook.aisac_register_table_loaders.get_hookimpls():
        res = impl.function() or {}
        if not isinstance(res, dict):
            raise PluginError(f"{impl.plugin_name}: aisac_register_table_loaders() must return a dict "
                              f"{{'.suffix': loader}}, got {type(res).__name__}")
        for suffix, loader in res.items():
            if not (isinstance(suffix, str) and suffix.startswith(".") and callable(loader)):
                raise PluginError(f"{impl.plugin_name}: table loader {suffix!r} -> {loader!r}: give '.suffix' -> "
                                  "a function of the path")
            out[suffix.lower()] = loader
    return out


def augment_graph(pm: pluggy.PluginManager, graph: dict[str, Any]) -> dict[str, Any]:
    """``graph`` passed through every ``aisac_augment_graph`` implementation in registration order (an
    implementation returning None edited it in place)."""
    for impl in pm.hook.aisac_augment_graph.get_hookimpls():
        res = impl.function(graph)
        graph = graph if res is None else res
    return graph


def has_impls(pm: pluggy.PluginManager, hook: str) -> bool:
    """Whether any registered plugin implements ``hook``."""
    return bool(getattr(pm.hook, hook).get_hookimpls())
