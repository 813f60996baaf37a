"""The servers a suite mounts, registered through the ``aisac_register_servers`` hook (:mod:`aisac_core.plugins`).

The six built-in servers are this module's hook implementation; a served project's plugins may add more, and a
project with tools adds its ``project`` server (:mod:`aisac_servers.project`). A server is given as an object or as
a ``"module:attribute"`` string, imported only when a suite mounts it (a single-server build imports one module);
an attribute that is not a server but a function is called with the application context and returns one.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Callable

from fastmcp import FastMCP

from aisac_core.context import AppContext
from aisac_core.plugins import PluginError, collect, hookimpl, plugins_of, register
from aisac_core.projects import PROJECT_NAMESPACE, BootstrapError

#: namespace -> "module:attribute" of each built-in server (tool names are ``<namespace>_<tool>``)
BUILTIN_SERVERS = {
    "rag": "aisac_servers.rag:server",
    "memory": "aisac_servers.memory:server",
    "lit": "aisac_servers.literature:server",
    "data": "aisac_servers.data:server",
    "roles": "aisac_servers.roles:server",
    "trace": "aisac_servers.trace:server",
}
#: the factory of a project's tool server: called with the application context
PROJECT_SERVER = "aisac_servers.project:project_server"
#: the name this module is registered under on a plugin manager
PLUGIN_NAME = "aisac_servers.builtin"


def _present(spec: str) -> bool:
    return importlib.util.find_spec(spec.split(":")[0]) is not None


@hookimpl
def aisac_register_servers() -> list[tuple[str, Any]]:
    """The built-in servers whose module is present: rag, memory, lit, data, roles, trace."""
    return [(ns, spec) for ns, spec in BUILTIN_SERVERS.items() if _present(spec)]


def load_server(server: Any, app: AppContext) -> FastMCP:
    """A registered server as a server object: a ``"module:attribute"`` string is imported; a function (not a
    server) is called with ``app``.

    Raises:
        PluginError: the string does not name a server, or the object is not one.
    """
    obj = server
    if isinstance(server, str):
        mod, _, attr = server.partition(":")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise PluginError(f"server {server!r} cannot be loaded ({type(exc).__name__}: {exc}); give "
                              "'module:attribute' of a FastMCP server") from exc
    if not isinstance(obj, FastMCP) and callable(obj):
        obj = obj(app)
    if not isinstance(obj, FastMCP):
        raise PluginError(f"server {server!r} is a {type(obj).__name__}, not a FastMCP server")
    return obj


def suite_servers(app: AppContext) -> dict[str, Callable[[], FastMCP]]:
    """The servers a suite of ``app`` can mount: namespace -> loader, in order (the built-ins, the served project's
    plugin servers, then ``project`` when the project has tools).

    Raises:
        BootstrapError: a plugin's server with a bad namespace, or a namespace registered twice.
    """
    pm = plugins_of(app)
    register(pm, importlib.import_module(__name__), name=PLUGIN_NAME)
    entries: list[tuple[str, Any]] = []
    try:
        for item in collect(pm, "aisac_register_servers"):
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise PluginError(f"aisac_register_servers() returned {item!r}; return (namespace, server) pairs")
            entries.append((item[0], item[1]))
    except PluginError as exc:
        raise BootstrapError(str(exc)) from exc
    builtin = [(ns, s) for ns, s in entries if BUILTIN_SERVERS.get(ns) == s]
    entries = builtin + [e for e in entries if e not in builtin]
    if app.project is not None and app.project.tools:
        entries.append((PROJECT_NAMESPACE, PROJECT_SERVER))
    out: dict[str, Callable[[], FastMCP]] = {}
    for ns, server in entries:
        if not (isinstance(ns, str) and ns.isidentifier() and ns.islower() and "_" not in ns):
            raise BootstrapError(f"server namespace {ns!r}: use lower-case letters and digits only (tools are named "
                                 "<namespace>_<tool>)")
        if ns in out:
            raise BootstrapError(f"two servers register the namespace {ns!r}; rename one (the built-ins are "
                                 f"{', '.join(BUILTIN_SERVERS)}, a project's tools are {PROJECT_NAMESPACE!r})")
        out[ns] = (lambda s=server: load_server(s, app))
    return out
