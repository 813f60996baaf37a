"""The MCP side of a project: its tools as the ``project`` server, and serving a project's suite.

``aisac serve --project DIR`` (and the owner daemon of a project's store) calls :func:`serve_project`: the project
is bootstrapped (:func:`aisac_core.projects.bootstrap`), an application context is opened on its store with the
project attached, and the suite is built on it. The suite mounts the project's tools through the server registry
(:func:`aisac_servers.serving.suite.suite_servers`), which calls :func:`project_server`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError

from aisac_core.context import AppContext
from aisac_core.errors import AisacError
from aisac_core.projects import PROJECT_NAMESPACE, BootstrapError, Bootstrapped, Step, bootstrap
from aisac_core.rag.embeddings import Embedder
from aisac_core.settings import Settings

from ..serving.common import AisacServer
from ..serving.suite import build
from ..shapes.annotations import hints

#: output schema of a project function without a return annotation: its value comes back as ``{"result": value}``
#: (a function annotated with a TypedDict, a pydantic model or a plain type gets the schema fastmcp derives)
UNTYPED_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {}},
    "required": ["result"],
    "x-fastmcp-wrap-result": True,
}


def project_tool_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The MCP annotations of a project tool. The manifest cannot declare them, so every project tool gets the safe
    default: it may change state (not read-only) but deletes nothing and stays on this machine (not destructive,
    not open-world, not idempotent); the title is the function name in words (``molar_mass`` -> "Molar mass")."""
    return hints(fn.__name__.replace("_", " ").strip().capitalize() or fn.__name__)


def _user_message(exc: Exception) -> str:
    if isinstance(exc, KeyError) and len(exc.args) == 1:  # str(KeyError('x')) is "'x'"
        return f"not found: {exc.args[0]}"
    return str(exc) or type(exc).__name__


def tool_wrapper(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The project function as a tool: ``ValueError`` / ``LookupError`` (``KeyError``, ``IndexError``) /
    :class:`AisacError` become MCP tool errors with their message (bad input); anything else is reported by fastmcp
    as a tool error naming the exception."""
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


def build_project_server(b: Bootstrapped) -> FastMCP:
    """A FastMCP server named ``project`` with one tool per project function (the tool name is the function name;
    mounted under the ``project`` namespace it becomes ``project_<name>``), annotated by
    :func:`project_tool_hints`; its output schema follows the return annotation (:data:`UNTYPED_RESULT` without one).

    Raises:
        BootstrapError: a function fastmcp cannot serve (an unsupported signature or annotation).
    """
    m = b.project.manifest
    srv = AisacServer(
        PROJECT_NAMESPACE,
        instructions=f"Tools of the project {m.project.name!r} "
        f"({m.project.category}; {m.project.domain or 'no domain given'}).",
    )
    for fn in b.tools:
        try:
            untyped = inspect.signature(fn).return_annotation is inspect.Signature.empty
            srv.tool(
                tool_wrapper(fn),
                name=fn.__name__,
                annotations=project_tool_hints(fn),
                output_schema=UNTYPED_RESULT if untyped else ...,
            )  # ...: fastmcp's default, from the annotation
        except Exception as exc:  # an unsupported signature (e.g. *args) or an annotation pydantic cannot use
            raise BootstrapError(
                f"{inspect.getsourcefile(fn) or fn.__module__}: function {fn.__name__!r} cannot "
                f"become an MCP tool ({type(exc).__name__}: {exc}); give it named, type-annotated "
                "parameters or rename it with a leading '_' to keep it private"
            ) from exc
    return srv


def project_server(app: AppContext) -> FastMCP:
    """The ``project`` server of the project ``app`` serves (built once per bootstrap and kept on it); the first
    call records the ``mount`` step in the project's initialization trace.

    Raises:
        BootstrapError: ``app`` serves no project, or a tool cannot be served (the failed step is recorded).
    """
    b = app.project
    if b is None:
        raise BootstrapError("this application context serves no project: start it with --project DIR")
    if b.server is None:
        with _mount_step(app, b) as step:
            b.server = build_project_server(b)
            step.result = {"mounted": True, "tools": b.tool_names}
    server: FastMCP = b.server  # the core keeps it untyped (it imports no MCP library)
    return server


@contextmanager
def _mount_step(app: AppContext, b: Bootstrapped) -> Iterator[Step]:
    """A ``mount`` step of the project's initialization trace: timed, marked ``tool_error`` when a
    :class:`BootstrapError` leaves the block, and recorded in the project's store either way."""
    t0 = time.perf_counter()
    step = Step("mount", {"namespace": PROJECT_NAMESPACE, "tools": b.tool_names})
    try:
        yield step
    except BootstrapError as exc:
        step.status, step.error = "tool_error", str(exc)
        raise
    finally:
        step.latency_ms = (time.perf_counter() - t0) * 1000
        b.record(step, app.engine)


def _run_async(fn: Callable[[], Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(fn())
    with ThreadPoolExecutor(1) as ex:
        return ex.submit(lambda: asyncio.run(fn())).result()


def mount_project(suite: FastMCP, app: AppContext) -> FastMCP:
    """Mount the ``project`` server of ``app`` on a suite built without it (a single-server build, or another
    suite), after checking its tool names against the suite's tools. Records a ``mount`` step.

    Raises:
        BootstrapError: a project tool name is already taken by a suite tool.
    """
    b = app.project
    if b is None:
        raise BootstrapError("this application context serves no project: start it with --project DIR")
    with _mount_step(app, b) as step:
        existing = {t.name for t in _run_async(lambda: suite.list_tools(run_middleware=False))}
        clash = sorted(existing & set(b.tool_names))
        if clash:
            raise BootstrapError(
                f"{b.project.path}: project tool(s) {clash} collide with tools the suite "
                "already has; rename the function(s) in the tools module"
            )
        suite.mount(project_server(app), namespace=PROJECT_NAMESPACE)
        step.result = {"mounted": True, "tools": b.tool_names}
    return suite


def serve_project(
    project_dir: str | Path,
    base_settings: Settings | None = None,
    names: list[str] | None = None,
    *,
    store_dir: Path | None = None,
    tools: str | None = None,
    embedder: Embedder | None = None,
) -> tuple[FastMCP, AppContext]:
    """Bootstrap a project (recorded) and build the suite on its store with its tools mounted: what
    ``aisac serve --project DIR`` (and the owner daemon of a project's store) serves.

    Args:
        project_dir: the project folder (holding ``aisac.toml``) or the manifest file.
        base_settings: the machine's settings (shared data dir, models); default: from the environment.
        names: the servers to mount (all when None; the project's tools come with the whole suite only).
        store_dir: the project's store folder when it is not ``<data_dir>/projects/<id>``.
        tools: the tool profile (``aisac serve --tools``; ``core,project`` keeps the project's tools), None: all.
        embedder: an already loaded embedder to share (tests), else one loads on first use.

    Returns: ``(suite, app)``; the suite's lifespan closes ``app`` when the server stops.

    Raises:
        BootstrapError: see :func:`aisac_core.projects.bootstrap`; nothing is left open.
    """
    b = bootstrap(project_dir, base_settings, store_dir=store_dir)
    app = AppContext(b.settings, project=b, embedder=embedder)
    try:
        suite = build(
            names, app=app, tools=tools
        )  # mounts the project's tools (a broken tool halts here, before serving)
    except BaseException:
        app.close()
        raise
    return suite, app
