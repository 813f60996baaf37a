"""The suite: every aisac server mounted under its namespace, behind the provenance middleware.

``build()`` mounts every server that exists; ``build(["rag"])`` mounts one, so a server
run alone keeps the same tool names (``rag_search``) as in the suite.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

import anyio
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_http_headers
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.server.transforms import Visibility
from fastmcp.tools import ToolResult

from aisac_core.context import AppContext
from aisac_core.owner import aisac_version
from aisac_core.plugins import PluginError, collect_from, plugins_of, register, skip_installed
from aisac_core.projects import PROJECT_NAMESPACE, BootstrapError
from aisac_core.tool_profiles import CATALOG_TOOLS, ToolProfile, compose_instructions, resolve
from aisac_core.trace.journal import TraceUnavailableError
from aisac_core.trace.recorder import RunAssigner

from ..base import builtin
from ..shapes.toollist import CompactToolList, ToolSearch
from .common import FULL_RESULT_META, AisacServer, SafeErrors, call_core
from .completions import chain_completions
from .dashboard import mount_dashboard
from .hosts import HostView
from .schemas import install_schema_lookup
from .tasks import CALL_JOBS, add_tasks

log = logging.getLogger("aisac.suite")

#: run id of the tool call being served (set by ProvenanceMiddleware): tools that write their own trace events
#: (the roles server) read it, since ``run_id`` arguments are removed before the tool sees them.
current_run_id: ContextVar[str | None] = ContextVar("aisac_current_run_id", default=None)

#: namespace -> "module:attribute" of each built-in server (tool names are prefixed: memory_, rag_, lit_, data_,
#: roles_, trace_); they register through the ``aisac_register_servers`` hook (:mod:`aisac_servers.base.builtin`)
ALL_SERVERS = dict(builtin.BUILTIN_SERVERS)
#: the built-in servers whose module is present (what ``aisac serve --server NAME`` accepts)
SERVERS = dict(builtin.aisac_register_servers())


#: the ``error`` of a cancelled call's trace event (status ``cancelled``)
CANCELLED_NOTE = "cancelled by the client (notifications/cancelled) or cut by its disconnect before the call ended"


async def _jobs_done(app: AppContext, job_ids: list[str]) -> list[dict[str, Any]]:
    """What the background jobs ``job_ids`` of a cancelled call had done: ``[{job_id, status, done, total}]``
    (index jobs of ``rag_index`` / ``lit_import``; a job the table no longer has is left out)."""
    out: list[dict[str, Any]] = []
    with anyio.CancelScope(shield=True):
        for jid in job_ids:
            try:
                st = await call_core(app.rag.jobs.status, jid)
            except Exception:  # noqa: BLE001 - the record of the call matters more than its detail
                log.warning("could not read index job %s for a cancelled call's trace event", jid)
                continue
            if st is not None:
                out.append({k: st.get(k) for k in ("job_id", "status", "done", "total")})
    return out


def take_full_result(result: ToolResult) -> tuple[ToolResult, Any]:
    """``(result without the full form, the full form or None)``: a tool that returns a compact form hands the full
    result in its ``_meta`` under :data:`~aisac_servers.serving.common.FULL_RESULT_META`; the trace records it, the client
    never sees it."""
    meta = result.meta
    if not meta or FULL_RESULT_META not in meta:
        return result, None
    rest = {k: v for k, v in meta.items() if k != FULL_RESULT_META}
    return result.model_copy(update={"meta": rest or None}), meta[FULL_RESULT_META]


class ProvenanceMiddleware(Middleware):
    """Writes one trace event per tool call through the store's trace service (``app.trace.record``).

    A caller names its run in the request ``_meta`` (``aisac/run_id``, or ``run_id``): the documented way, since no
    input schema declares a ``run_id`` argument (docs/hosts.md). A legacy ``run_id`` argument of old clients is still
    accepted silently (removed before the tool sees it; ``trace_*`` tools keep theirs: the run to read). Otherwise
    the call joins the current run of its client (:meth:`_client_key`: one per host connection), renewed
    after ``run_idle_seconds`` without a call of that client.

    A tool that returns a compact result hands the full one in the result's ``_meta`` (:func:`take_full_result`):
    the trace records the full result and the key is removed before the client sees the result.
    """

    def __init__(self, app: AppContext) -> None:
        self.app = app
        self.runs = RunAssigner(app.settings.run_idle_seconds)

    def _meta(self, context: MiddlewareContext, *keys: str) -> str | None:
        """The first of ``keys`` present in the request ``_meta`` (as a string), else None."""
        meta = getattr(context.message, "meta", None)
        if meta is None and context.fastmcp_context is not None:
            rc = context.fastmcp_context.request_context
            meta = getattr(rc, "meta", None) if rc is not None else None
        if meta is None:
            return None
        if not isinstance(meta, dict):
            meta = {
                **(getattr(meta, "model_extra", None) or {}),
                **{k: getattr(meta, k) for k in keys if getattr(meta, k, None) is not None},
            }
        val = next((meta[k] for k in keys if meta.get(k)), None)
        return str(val) if val else None

    def _client_key(self, context: MiddlewareContext) -> str:
        """Whose run a call joins: ``client_id`` of the request ``_meta``; else the ``X-Aisac-Client`` header (one id
        per stdio proxy process, i.e. per host connection, or per session of an HTTP proxy); else the MCP session
        id of a direct HTTP client; else ``default`` (stdio in-process, in-memory: one client per server)."""
        try:
            val = context.fastmcp_context.client_id if context.fastmcp_context is not None else None
        except Exception:  # no request context (e.g. in-memory transport)
            val = None
        if val:
            return str(val)
        headers = get_http_headers(include={"mcp-session-id"})  # {} outside an HTTP request
        if headers.get("x-aisac-client"):
            return "client:" + headers["x-aisac-client"][:200]
        if headers.get("mcp-session-id"):
            return "session:" + headers["mcp-session-id"][:200]
        return "default"

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        msg = context.message
        args = dict(msg.arguments or {})
        # trace_* tools take ``run_id`` as their own argument (the run to read), not as the caller's run
        own_run_arg = msg.name.startswith("trace_")
        run_id = (
            (None if own_run_arg else args.pop("run_id", None))
            or self._meta(context, "aisac/run_id", "run_id")
            or self.runs.run_for(self._client_key(context))
        )
        if "run_id" in (msg.arguments or {}) and not own_run_arg:
            context = context.copy(message=msg.model_copy(update={"arguments": args}))
        name = msg.name
        server = name.split("_", 1)[0] if "_" in name else "suite"
        t0_ns = time.time_ns()
        t0 = time.perf_counter()
        status, error, result_obj = "ok", None, None
        run_token = current_run_id.set(str(run_id))
        jobs_token = CALL_JOBS.set([])
        try:
            result = await call_next(context)
            if not hasattr(
                result, "content"
            ):  # a task handle (servers/serving/tasks.py): the work runs on after this call
                result_obj = result.model_dump(mode="json", by_alias=True, exclude_none=True)
                return result
            if getattr(result, "is_error", False):
                status = "tool_error"
            result, full = take_full_result(result)  # a compact result's full form (rag_search hits), for the trace
            result_obj = (
                full
                if full is not None and not result.is_error
                else result.structured_content
                if result.structured_content is not None
                else [getattr(c, "text", repr(c)) for c in (result.content or [])]
            )
            return result
        except ToolError as exc:
            status, error = "tool_error", str(exc)
            raise
        except Exception as exc:  # validation errors and the like
            status, error = ("tool_error" if type(exc).__name__ == "ValidationError" else "exception"), str(exc)
            raise
        except (asyncio.CancelledError, anyio.get_cancelled_exc_class()):
            # the client's notifications/cancelled, or its connection closed mid-call (stdin closed, the relay's
            # cancel for a host that went away): the call is still on the record, with what its jobs had done
            status, error = "cancelled", CANCELLED_NOTE
            result_obj = {"cancelled": True, "jobs": await _jobs_done(self.app, CALL_JOBS.get() or [])}
            raise
        finally:
            current_run_id.reset(run_token)
            CALL_JOBS.reset(jobs_token)
            latency = (time.perf_counter() - t0) * 1000
            with anyio.CancelScope(shield=True):  # a cancelled call's event is written all the same
                await self._record(context, run_id, server, name, args, result_obj, status, error, latency, t0_ns)

    async def _record(
        self,
        context: MiddlewareContext,
        run_id: str,
        server: str,
        name: str,
        args: dict[str, Any],
        result_obj: Any,
        status: str,
        error: str | None,
        latency: float,
        t0_ns: int,
    ) -> None:
        """Write the trace event of one call (and the run's configuration pins, an OpenTelemetry span)."""
        try:
            parent = self._meta(context, "aisac/parent_id")
            parent_id = int(parent) if parent and parent.isdigit() else None
            trace = self.app.trace
            event_id = await call_core(
                trace.record,
                run_id=str(run_id),
                server=server,
                tool=name,
                arguments=args,
                result=result_obj,
                status=status,
                error=error,
                latency_ms=latency,
                parent_id=parent_id,
            )
            if not trace.pinned(str(run_id)):  # configuration pins, once per run
                await call_core(trace.pin_run, str(run_id))
            if trace.otel.enabled():  # OpenTelemetry span per tool call, off unless OTEL_* configures it
                trace.otel.emit_span(
                    server=server,
                    tool=name,
                    run_id=str(run_id),
                    start_ns=t0_ns,
                    end_ns=t0_ns + int(latency * 1e6),
                    status=status,
                    error=error,
                    event_id=event_id,
                    parent_id=parent_id,
                )
        except Exception as exc:  # a trace write must never break the call itself ...
            if status != "cancelled" and isinstance(exc.__cause__, TraceUnavailableError):  # ... but in strict
                # audit mode (call_core wraps); a cancelled call has no answer left to replace
                raise ToolError(str(exc.__cause__)) from exc
            log.exception("could not record the trace event of %s", name)


#: the factory of a project's tool server: called with the application context
PROJECT_SERVER = "aisac_servers.adapters.project:project_server"


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
            raise PluginError(
                f"server {server!r} cannot be loaded ({type(exc).__name__}: {exc}); give "
                "'module:attribute' of a FastMCP server"
            ) from exc
    if not isinstance(obj, FastMCP) and callable(obj):
        obj = obj(app)
    if not isinstance(obj, FastMCP):
        raise PluginError(f"server {server!r} is a {type(obj).__name__}, not a FastMCP server")
    return obj


def suite_servers(app: AppContext) -> dict[str, Callable[[], FastMCP | None]]:
    """The servers a suite of ``app`` can mount: namespace -> loader, in order (the built-ins, the plugin servers:
    installed packages' and the served project's, then ``project`` when the project has tools). An installed
    plugin's server with a bad or taken namespace, or one that cannot be loaded, is skipped with a warning naming
    the plugin (recorded in the plugin manager's ``failures``): a broken plugin never stops the built-in servers.

    Raises:
        BootstrapError: a project's plugin server with a bad namespace, or a namespace registered twice.
    """
    pm = plugins_of(app)
    register(pm, builtin, name=builtin.PLUGIN_NAME)
    entries: list[tuple[Any, Any, str | None]] = []
    try:
        for item, installed in collect_from(pm, "aisac_register_servers"):
            if isinstance(item, (tuple, list)) and len(item) == 2:
                entries.append((item[0], item[1], installed))
            else:
                skip_installed(
                    pm, installed, f"aisac_register_servers() returned {item!r}; return (namespace, server) pairs"
                )
    except PluginError as exc:
        raise BootstrapError(str(exc)) from exc
    first = [e for e in entries if builtin.BUILTIN_SERVERS.get(e[0]) == e[1]]  # the built-ins first
    entries = first + [e for e in entries if e not in first]
    if app.project is not None and app.project.tools:
        entries.append((PROJECT_NAMESPACE, PROJECT_SERVER, None))
    out: dict[str, Callable[[], FastMCP | None]] = {}
    for ns, server, installed in entries:
        problem = None
        if not (isinstance(ns, str) and ns.isidentifier() and ns.islower() and "_" not in ns):
            problem = (
                f"server namespace {ns!r}: use lower-case letters and digits only (tools are named <namespace>_<tool>)"
            )
        elif ns in out:
            problem = (
                f"two servers register the namespace {ns!r}; rename one (the built-ins are "
                f"{', '.join(builtin.BUILTIN_SERVERS)}, a project's tools are {PROJECT_NAMESPACE!r})"
            )
        if problem is not None:
            if installed is None:
                raise BootstrapError(problem)
            skip_installed(pm, installed, problem)
            continue
        out[ns] = (
            functools.partial(load_server, server, app)
            if installed is None
            else functools.partial(_load_installed, server, app, pm, installed)
        )
    return out


def _load_installed(server: Any, app: AppContext, pm: Any, label: str) -> FastMCP | None:
    """An installed plugin's server (:func:`load_server`), or None when it cannot be loaded (recorded, logged)."""
    try:
        return load_server(server, app)
    except Exception as exc:  # noqa: BLE001 - any failure of a third-party package: skip it, keep the built-ins
        pm.fail(label, f"its server {server!r} cannot be loaded ({type(exc).__name__}: {exc})")
        return None


def _lifespan(app: AppContext, *, own: bool) -> Any:
    """The suite's lifespan: yields ``{"app": app}`` to every tool (:func:`aisac_servers.serving.common.current_app`). With
    ``own``, it also warms the app in the background at start (models, vector store) and closes it at exit."""

    @asynccontextmanager
    async def lifespan(server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        if own and app.settings.warm:
            app.warm()  # models and vector store load in the background; tools/list answers at once
        if own:
            app.resume_jobs()  # jobs queued or left by a process that died (or, on a server database, by a replica)
        # the transport's per-call schema lookup, tabled in the background (servers/serving/schemas.py)
        tabling = asyncio.get_running_loop().create_task(install_schema_lookup(server)) if own else None
        try:
            yield {"app": app}
        finally:
            if tabling is not None and not tabling.done():
                tabling.cancel()
            if own:
                app.close()

    return lifespan


class ProfileFilter(Visibility):
    """Hides the tools a tool profile leaves out of a server it exposes in part (fastmcp's visibility transform: a
    hidden tool is neither listed nor callable, "Unknown tool")."""

    def __init__(self, profile: ToolProfile) -> None:
        super().__init__(False, components={"tool"})
        self.profile = profile

    def _matches(self, component: Any) -> bool:
        return component.key.startswith("tool:") and not self.profile.allows(component.name)


async def every_tool_name(available: dict[str, Callable[[], FastMCP | None]]) -> frozenset[str]:
    """The names of every tool of the servers ``available`` (:func:`suite_servers`) and the catalog tools: what a
    profile's descriptions may name only when it offers them."""
    names = set(CATALOG_TOOLS)
    for ns, load in available.items():
        server = load()
        if server is not None:
            names |= {f"{ns}_{t.name}" for t in await server.list_tools()}
    return frozenset(names)


def build(
    names: list[str] | None = None,
    *,
    app: AppContext | None = None,
    lifespan: bool = True,
    tools: str | None = None,
    catalog: bool = False,
    host_settings: bool = False,
    served_profile: str | None = None,
) -> FastMCP:
    """The suite server with the named servers mounted (all when None), serving ``app`` (default: a new
    :class:`~aisac_core.context.AppContext` from the environment's settings).

    ``tools``: a tool profile (:mod:`aisac_core.tool_profiles`: ``core``, ``full``, ``rag,memory``...; what
    ``aisac serve --tools`` passes, default ``settings.tools``). None: every tool of the mounted servers (the suite
    the core itself calls through, :class:`aisac_servers.serving.toolclient.SuiteTools`). Servers outside the profile are
    not mounted; servers exposed in part hide their other tools (:class:`ProfileFilter`). The instructions are
    composed from the mounted servers' own (:func:`aisac_core.tool_profiles.compose_instructions`).

    ``catalog``: add ``tools_search`` / ``tools_call`` (:class:`~aisac_servers.shapes.toollist.ToolSearch`) to a suite that
    lists every tool (the owner daemon's, whose stdio relays apply each host's profile); the ``full`` profile adds
    them itself and lists only its core tools next to them.

    ``host_settings``: honour the per-host settings a relay sends with each request (roots, roles LLM and mode:
    :class:`~aisac_servers.serving.hosts.HostView`), for an owner serving several hosts. ``served_profile``: with
    ``tools=None``, the profile the server's direct clients see, while a proxy's requests reach every tool (the
    proxy applies its host's profile): a user-started HTTP owner.

    ``lifespan=False`` builds a suite that borrows ``app`` (an in-process client inside a running server): no warm-up
    and no ``app.close()`` at exit.

    The servers come from the ``aisac_register_servers`` hook (:func:`suite_servers`): the
    built-ins, a served project's plugin servers and, with the whole suite, the project's own tools (``project``).

    Raises:
        ValueError: an unknown server name (:class:`~aisac_core.tool_profiles.ToolProfileError`: a bad profile).
        BootstrapError: a project server that cannot be mounted (a namespace taken twice, a tool fastmcp refuses).
    """
    app = app if app is not None else AppContext()
    available = suite_servers(app)
    chosen = names or list(available)
    unknown = [n for n in chosen if n not in available]
    if unknown:
        raise ValueError(f"unknown server(s) {unknown}; available: {', '.join(available)}")
    profile = resolve(tools, chosen) if tools is not None else None
    if profile is not None:
        chosen = list(profile.servers)
    loaded = {n: available[n]() for n in chosen}
    mounted = {n: server for n, server in loaded.items() if server is not None}  # a broken installed plugin: skipped
    main = AisacServer(
        "aisac",
        version=aisac_version(),  # serverInfo names aisac's version, not fastmcp's
        lifespan=_lifespan(app, own=lifespan),
        instructions=compose_instructions({n: s.instructions for n, s in mounted.items()}),
    )
    add_tasks(main, app, enabled=lifespan)  # long tools as MCP tasks (an in-process suite runs them in the foreground)
    for n, server in mounted.items():
        main.mount(server, namespace=n)
    chain_completions(main, mounted.values())  # the mounted servers' resource completions
    if profile is not None and profile.only:
        main.add_transform(ProfileFilter(profile))
    searchable = catalog or (profile is not None and profile.search)
    if searchable:
        main.add_transform(ToolSearch())
    served = resolve(served_profile, chosen) if served_profile is not None and profile is None else None
    # outermost: the host's roots and roles defaults hold for the whole call (and the trace records the filled call)
    main.add_middleware(HostView(app, served, accept_host_settings=host_settings))
    main.add_middleware(ProvenanceMiddleware(app))
    # the lean wire form of tools/list (aisac_servers.shapes.toollist); the full profile lists its core tools only
    main.add_middleware(
        CompactToolList(
            profile.lists if profile is not None and profile.search else None,
            profile=profile if profile is not None and not profile.is_full else None,
            every=functools.partial(every_tool_name, available),
            typed=profile is None or not profile.budgeted,
        )
    )
    # inside the provenance middleware (added later = inner), so the trace records the safe message too: every tool
    # error at most 1,900 characters, no SQL (call_core applies the same net to core calls, with the core function's
    # name; this one also covers errors raised outside call_core)
    main.add_middleware(SafeErrors())
    mount_dashboard(main, prefix="/dashboard", app=app)  # HTTP transport only: the live trace dashboard
    return main
