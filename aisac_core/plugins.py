"""The extension seam: pluggy hook specifications of aisac, and the plugin manager that holds the implementations.

A plugin is any object or module with functions marked ``@hookimpl`` and named after a hook below. The built-ins
register through the same hooks (the five literature sources: :mod:`aisac_core.literature.builtin`; the table
loaders of the built-in file formats: :mod:`aisac_core.data.builtin`; the six MCP servers:
``aisac_servers.base.builtin``). Plugins come from two places:

- installed packages: every entry point of the group ``aisac`` (``[project.entry-points.aisac]`` in the package's
  ``pyproject.toml``, as pytest's ``pytest11`` and llm's ``llm``), loaded by :func:`make_plugin_manager`, so a
  pip-installed plugin reaches a plain ``aisac serve``. A plugin that fails (its import, its registration, a hook
  that raises or returns a bad result) is skipped with a warning naming its distribution and entry point, and
  recorded in :attr:`AisacPluginManager.failures`; the built-ins keep serving;
- a project's extension modules (``[extensions]`` of ``aisac.toml``), registered on the plugin manager of the
  project's bootstrap; a broken one halts the bootstrap with a message naming the module.

So a package or a project adds tools, literature sources, table loaders, MCP servers or workflow-graph changes
without touching aisac's code::

    from aisac_core.plugins import hookimpl

    @hookimpl
    def aisac_register_tools():
        return [my_function]          # served as project_my_function

Hook results are collected in registration order (built-ins first, then the installed plugins in entry-point order,
then the project's modules in manifest order).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pluggy

from aisac_core.errors import AisacError

#: the pluggy project name: hook implementations carry the ``aisac_impl`` marker
PROJECT_NAME = "aisac"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

#: modules of ``aisac_core`` implementing hooks for the built-in features, registered by :func:`make_plugin_manager`
#: (named, not imported here: a plugin sits above this module in the layers)
BUILTIN_PLUGINS = ("aisac_core.literature.builtin", "aisac_core.data.builtin")
#: the entry-point group of installed plugins
ENTRY_POINT_GROUP = "aisac"

log = logging.getLogger(__name__)


class AisacSpec:
    """The hooks aisac calls. Every hook may be implemented by any number of plugins; an implementation may return
    None (nothing to add)."""

    @hookspec
    def aisac_register_servers(self) -> list[tuple[str, Any]] | None:
        """MCP servers to mount on the suite: ``[(namespace, server)]``. ``server`` is a server object of the MCP
        layer or a ``"module:attribute"`` string naming one (imported when the suite mounts it). The namespace
        prefixes its tools (``<namespace>_<tool>``) and must be unique in the suite."""

    @hookspec
    def aisac_register_tools(self) -> list[Callable[..., Any]] | None:
        """Plain Python functions to serve as project tools (``project_<function name>``): named, type-annotated
        parameters and a docstring (the tool's description). Raising ``ValueError``/``LookupError`` reports bad
        input to the caller."""

    @hookspec
    def aisac_register_literature_sources(self) -> list[Any] | None:
        """Literature sources: objects with ``name`` (str), ``async search(fetcher, query, k, year_from, year_to)
        -> list[Paper]`` and optionally ``async get(fetcher, kind, value) -> Paper`` with ``identifiers`` (the
        identifier kinds it answers: doi, arxiv, pmid, pmcid, s2, openalex), ``max_results`` (int) and ``aliases``
        (other accepted spellings). See :class:`aisac_core.literature.sources.LiteratureSource`."""

    @hookspec
    def aisac_register_table_loaders(self) -> dict[str, Callable[..., Any]] | None:
        """Table loaders of the data registry: ``{".suffix": loader}``; ``loader(path: pathlib.Path)`` returns a
        pandas DataFrame (raise ``ValueError`` for a file it cannot read). The built-in formats register here too
        (:mod:`aisac_core.data.builtin`), as :class:`aisac_core.data.readers.TableLoader` objects that also take
        options (sheet, header_rows, ...); a later plugin's loader replaces an earlier one for the same suffix."""

    @hookspec
    def aisac_augment_graph(self, graph: dict[str, Any]) -> dict[str, Any] | None:
        """Change the roles' workflow graph (see :mod:`aisac_core.roles.graph`): edit ``graph`` in place and return
        None, or return the new graph. Applied in registration order, each to the previous one's result."""


class PluginError(AisacError, ValueError):
    """A plugin that cannot be used: a hook implementation with an unknown name or bad signature, a bad result."""


@dataclass(frozen=True)
class PluginFailure:
    """An installed plugin that was skipped: ``plugin`` names it (``<distribution> <version>: <entry point> =
    <module:object>``), ``error`` says what failed."""

    plugin: str
    error: str


class AisacPluginManager(pluggy.PluginManager):
    """pluggy's plugin manager with aisac's record of installed plugins: ``installed`` (plugin name -> the entry
    point it came from, for messages) and ``failures`` (the installed plugins skipped, and why)."""

    def __init__(self) -> None:
        super().__init__(PROJECT_NAME)
        self.installed: dict[str, str] = {}
        self.failures: list[PluginFailure] = []

    def fail(self, plugin: str, error: str) -> None:
        """Record an installed plugin's failure and log a warning naming it (once per plugin and error)."""
        failure = PluginFailure(plugin, error)
        if failure not in self.failures:
            self.failures.append(failure)
            log.warning("aisac plugin %s skipped: %s", plugin, error)


def make_plugin_manager(extra_plugins: Iterable[Any] = (), *, entry_points: bool = True) -> AisacPluginManager:
    """A plugin manager with aisac's hook specifications, the built-in plugins (:data:`BUILTIN_PLUGINS`), with
    ``entry_points`` the installed plugins (:func:`load_entry_points`), then ``extra_plugins`` (modules or objects
    with ``@hookimpl`` functions), registered in that order.

    Raises:
        PluginError: an extra plugin implements a hook aisac does not define (a misspelt name) or with wrong
            arguments (an installed plugin's failure is recorded in ``failures`` instead).
    """
    pm = AisacPluginManager()
    pm.add_hookspecs(AisacSpec)
    for name in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if entry_points:
        load_entry_points(pm)
    for plugin in extra_plugins:
        register(pm, plugin)
    return pm


def _entry_point_label(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    where = f"{dist.name} {dist.version}" if dist is not None else "an installed package"
    return f"{where}: entry point {ep.name} = {ep.value}"


def load_entry_points(pm: AisacPluginManager, group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Register the installed plugins: every entry point of ``group`` names a module or object with ``@hookimpl``
    functions. Returns the names registered (``<distribution>:<entry point>``). Never raises for a plugin: one that
    cannot be imported or registered is skipped, logged and recorded in ``pm.failures``."""
    done = []
    for ep in importlib.metadata.entry_points(group=group):
        label = _entry_point_label(ep)
        dist = getattr(ep, "dist", None)
        name = f"{dist.name if dist is not None else 'plugin'}:{ep.name}"
        try:
            plugin = ep.load()
        except Exception as exc:
            pm.fail(label, f"import failed: {type(exc).__name__}: {exc}; fix or uninstall the package")
            continue
        if pm.is_registered(plugin):  # a built-in, or the same module under two entry points
            continue
        try:
            register(pm, plugin, name=name)
        except (PluginError, ValueError) as exc:
            pm.fail(label, f"not a valid plugin: {exc}")
            continue
        pm.installed[name] = label
        done.append(name)
    return done


def failures_of(pm: pluggy.PluginManager) -> list[PluginFailure]:
    """The installed plugins skipped on ``pm`` (empty for a plain pluggy manager)."""
    return list(getattr(pm, "failures", ()))


def _installed(pm: pluggy.PluginManager, impl: Any) -> str | None:
    """The entry-point label of the installed plugin that holds ``impl``, None for a built-in or a project's."""
    return pm.installed.get(impl.plugin_name) if isinstance(pm, AisacPluginManager) else None


def _call(pm: pluggy.PluginManager, impl: Any, hook: str, *args: Any) -> tuple[bool, Any]:
    """Call one hook implementation: ``(True, result)``; for an installed plugin that raises, ``(False, None)`` and
    the failure recorded (a built-in's or a project's exception propagates)."""
    label = _installed(pm, impl)
    if label is None:
        return True, impl.function(*args)
    try:
        return True, impl.function(*args)
    except Exception as exc:
        assert isinstance(pm, AisacPluginManager)  # _installed found the plugin on one
        pm.fail(label, f"{hook}() raised {type(exc).__name__}: {exc}")
        return False, None


def _bad(pm: pluggy.PluginManager, impl: Any, message: str) -> None:
    """A bad hook result: recorded and skipped for an installed plugin, else PluginError."""
    label = _installed(pm, impl)
    if label is None:
        raise PluginError(f"{impl.plugin_name}: {message}")
    assert isinstance(pm, AisacPluginManager)
    pm.fail(label, message)


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
    """The results of ``hook`` (a list-returning hook) from every plugin, flattened, in registration order. An
    installed plugin whose implementation raises or returns no list is skipped (recorded in its failures).

    Raises:
        PluginError: a built-in's or a project's implementation returns no list.
    """
    caller = getattr(pm.hook, hook)
    out: list[Any] = []
    for impl in caller.get_hookimpls():  # pluggy's order is registration order (later ones are called first)
        ok, res = _call(pm, impl, hook)
        if not ok or res is None:
            continue
        if not isinstance(res, (list, tuple)):
            _bad(pm, impl, f"{hook}() must return a list, got {type(res).__name__}")
            continue
        out.extend(res)
    return out


def collect_from(pm: pluggy.PluginManager, hook: str) -> list[tuple[Any, str | None]]:
    """Like :func:`collect`, with each item's origin: ``(item, installed)``, where ``installed`` labels an installed
    plugin (its entry point, for :meth:`AisacPluginManager.fail`) and is None for a built-in's or a project's item.

    Raises:
        PluginError: a built-in's or a project's implementation returns no list.
    """
    out: list[tuple[Any, str | None]] = []
    for impl in getattr(pm.hook, hook).get_hookimpls():
        ok, res = _call(pm, impl, hook)
        if not ok or res is None:
            continue
        if not isinstance(res, (list, tuple)):
            _bad(pm, impl, f"{hook}() must return a list, got {type(res).__name__}")
            continue
        out.extend((item, _installed(pm, impl)) for item in res)
    return out


def skip_installed(pm: pluggy.PluginManager, installed: str | None, message: str) -> None:
    """A bad item registered by a plugin: recorded and skipped when an installed plugin (``installed``: its label
    from :func:`collect_from`) registered it, else :class:`PluginError` with ``message``."""
    if installed is None or not isinstance(pm, AisacPluginManager):
        raise PluginError(message)
    pm.fail(installed, message)


def table_loaders(pm: pluggy.PluginManager) -> dict[str, Callable[..., Any]]:
    """The table loaders registered through ``aisac_register_table_loaders`` (the built-in formats' first):
    ``{".suffix" (lower case): loader}``; a later plugin's loader replaces an earlier one for the same suffix. Every
    loader runs through one dispatch, :func:`aisac_core.data.readers.read_table`.

    Raises:
        PluginError: a built-in's or a project's result that is not a dict of ``".suffix" -> callable`` (an
            installed plugin's is skipped and recorded).
    """
    out: dict[str, Callable[..., Any]] = {}
    for impl in pm.hook.aisac_register_table_loaders.get_hookimpls():
        ok, res = _call(pm, impl, "aisac_register_table_loaders")
        res = (res or {}) if ok else {}
        if not isinstance(res, dict):
            _bad(
                pm,
                impl,
                f"aisac_register_table_loaders() must return a dict {{'.suffix': loader}}, got {type(res).__name__}",
            )
            continue
        good: dict[str, Callable[..., Any]] = {}
        for suffix, loader in res.items():
            if not (isinstance(suffix, str) and suffix.startswith(".") and callable(loader)):
                _bad(pm, impl, f"table loader {suffix!r} -> {loader!r}: give '.suffix' -> a function of the path")
                good = {}
                break
            good[suffix.lower()] = loader
        out.update(good)
    return out


def augment_graph(pm: pluggy.PluginManager, graph: dict[str, Any]) -> dict[str, Any]:
    """``graph`` passed through every ``aisac_augment_graph`` implementation in registration order (an
    implementation returning None edited it in place; an installed plugin's that raises is skipped)."""
    for impl in pm.hook.aisac_augment_graph.get_hookimpls():
        ok, res = _call(pm, impl, "aisac_augment_graph", graph)
        graph = graph if not ok or res is None else res
    return graph


def has_impls(pm: pluggy.PluginManager, hook: str) -> bool:
    """Whether any registered plugin implements ``hook``."""
    return bool(getattr(pm.hook, hook).get_hookimpls())
