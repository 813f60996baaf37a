"""Loading a project's extension modules, the functions they export as tools, and their hook implementations.

A module path is a ``.py`` file relative to the project (imported under a private name per bootstrap, so two
projects never share module state) or the dotted name of an installed module. A tools module exports its public
functions (``__all__``, else every function defined in it whose name does not start with ``_``); functions marked
``@hookimpl`` (:mod:`aisac_core.plugins`) are hook implementations, not tools. Every project tool must be usable as
an MCP tool: named, type-annotated parameters (no ``*args``/``**kwargs``) and a docstring.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import typing
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pluggy
from pydantic import ConfigDict, create_model

from aisac_core.plugins import PROJECT_NAME, PluginError, register
from aisac_core.projects.manifest import BootstrapError, Project, check_path

#: the attribute pluggy's ``@hookimpl`` marker sets on a function
_IMPL_ATTR = f"{PROJECT_NAME}_impl"


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
        path = check_path(project, ref, key)
        if path.is_dir():
            path = path / "__init__.py"
            if not path.is_file():
                raise BootstrapError(
                    f"{project.path}: {key} = {ref!r} is a folder without __init__.py; name a .py file"
                )
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
            raise BootstrapError(
                f"{exc.filename or path}:{exc.lineno}: syntax error in the {key} module: {exc.msg}"
                f"; fix line {exc.lineno}"
            ) from exc
        except Exception as exc:
            sys.modules.pop(name, None)
            raise BootstrapError(
                f"{path}: importing the {key} module failed: {type(exc).__name__}: {exc}; fix the "
                "module (or install what it imports)"
            ) from exc
        return mod
    try:
        return importlib.import_module(ref)
    except SyntaxError as exc:
        raise BootstrapError(
            f"{exc.filename}:{exc.lineno}: syntax error in the {key} module {ref!r}: {exc.msg}; fix line {exc.lineno}"
        ) from exc
    except Exception as exc:
        raise BootstrapError(
            f"{project.path}: {key} = {ref!r} cannot be imported ({type(exc).__name__}: {exc}); "
            "give a .py file relative to the project or an installed module's dotted name"
        ) from exc


def is_hookimpl(obj: Any) -> bool:
    """Whether ``obj`` is marked ``@hookimpl`` (an aisac hook implementation)."""
    return getattr(obj, _IMPL_ATTR, None) is not None


def hookimpl_names(mod: ModuleType) -> list[str]:
    """Names of the ``@hookimpl`` functions a module defines, sorted."""
    return sorted(n for n, obj in vars(mod).items() if is_hookimpl(obj))


def public_functions(mod: ModuleType) -> list[Callable[..., Any]]:
    """The functions a tools module exports: ``__all__`` when defined, else every function defined in the module
    whose name does not start with ``_``, except ``@hookimpl`` functions; in name order.

    Raises:
        BootstrapError: ``__all__`` names something that is not a function; a function named like a hook
            (``aisac_...``) lacks the ``@hookimpl`` marker.
    """
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [
            n
            for n, obj in vars(mod).items()
            if not n.startswith("_")
            and inspect.isfunction(obj)
            and obj.__module__ == mod.__name__
            and not is_hookimpl(obj)
        ]
    fns = []
    for n in sorted(names):
        obj = getattr(mod, n, None)
        if not callable(obj):
            raise BootstrapError(
                f"{mod.__file__}: __all__ names {n!r}, which is not a function; remove it from __all__"
            )
        if is_hookimpl(obj):
            continue
        if n.startswith(f"{PROJECT_NAME}_"):
            raise BootstrapError(
                f"{mod.__file__}: function {n!r} is named like a hook but is not marked: decorate "
                "it with @hookimpl (from aisac_core.plugins import hookimpl), or rename it"
            )
        fns.append(obj)
    return fns


def source_of(fn: Any) -> str:
    """The file defining ``fn`` (its module name, or its repr, when there is no source file): for messages."""
    try:
        return inspect.getsourcefile(fn) or str(getattr(fn, "__module__", None) or repr(fn))
    except TypeError:
        return repr(fn)


def check_tool(fn: Callable[..., Any], where: str) -> None:
    """Check that ``fn`` can be served as an MCP tool: a docstring, named parameters only, annotations that a JSON
    Schema can describe.

    Raises:
        BootstrapError: naming ``where`` (the module file) and the fix.
    """
    if not (fn.__doc__ or "").strip():
        raise BootstrapError(
            f"{where}: function {fn.__name__!r} has no docstring; hosts show it as the "
            "tool's description: add one (arguments, units, result, errors)"
        )
    try:
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
        fields: dict[str, Any] = {}
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise ValueError(f"{'*' if p.kind == p.VAR_POSITIONAL else '**'}{p.name} parameters are not supported")
            fields[p.name] = (hints.get(p.name, Any), ... if p.default is p.empty else p.default)
        create_model(
            f"{fn.__name__}_arguments", __config__=ConfigDict(arbitrary_types_allowed=False), **fields
        ).model_json_schema()
    except Exception as exc:  # an unsupported signature (e.g. *args) or an annotation pydantic cannot use
        raise BootstrapError(
            f"{source_of(fn)}: function {fn.__name__!r} cannot "
            f"become an MCP tool ({type(exc).__name__}: {exc}); give it named, type-annotated "
            "parameters or rename it with a leading '_' to keep it private"
        ) from exc


def register_module(pm: pluggy.PluginManager, mod: ModuleType, key: str) -> list[str]:
    """Register an extension module's ``@hookimpl`` functions on ``pm``; returns their names (nothing registered
    when there are none).

    Raises:
        BootstrapError: a hook implementation with an unknown name or wrong arguments.
    """
    names = hookimpl_names(mod)
    if names:
        try:
            register(pm, mod, name=mod.__name__)
        except PluginError as exc:
            raise BootstrapError(
                f"{getattr(mod, '__file__', None) or mod.__name__}: the {key} module's hook "
                f"implementation is not valid: {exc}; fix its name or arguments"
            ) from exc
    return names
