"""The suite: every aisac server mounted under its namespace, behind the provenance middleware.

``build()`` mounts every server that exists; ``build(["rag"])`` mounts one, so a server
run alone keeps the same tool names (``rag_search``) as in the suite.
"""

from __future__ import annotations

import logging
import time
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, AsyncIterator

from fastmcp import FastMCP
from fastmcp.server.middleware import Middleware, MiddlewareContext

from aisac_core.context import AppContext

log = logging.getLogger("aisac.suite")

#: run id of the tool call being served (set by ProvenanceMiddleware): tools that write their own trace events
#: (the roles server, issue 7) read it, since ``run_id`` arguments are removed before the tool sees them.
current_run_id: "ContextVar[str | None]" = ContextVar("aisac_current_run_id", default=None)

#: namespace -> "module:attribute" of each server (DESIGN.md "Layout": namespaces memory_, rag_, lit_, data_, roles_,
#: trace_). ``build()`` mounts those whose module is present.
ALL_SERVERS = {
    "rag": "aisac_servers.rag:server",
    "memory": "aisac_servers.memory:server",
    "lit": "aisac_servers.literature:server",
    "data": "aisac_servers.data:server",
    "roles": "aisac_servers.roles:server",
    "trace": "aisac_servers.trace:server",
}


def _present(spec: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(spec.split(":")[0]) is not None


SERVERS = {name: spec for name, spec in ALL_SERVERS.items() if _present(spec)}


def _load(name: str) -> FastMCP:
    import importlib

    mod, attr = SERVERS[name].split(":")
    return getattr(importlib.import_module(mod), attr)


class ProvenanceMiddleware(Middleware):
    """Writes one trace event per tool call (see :mod:`aisac_core.trace.provenance`).

    ``run_id`` may come as a tool argument (removed before the tool sees it) or in the request ``_meta``;
    otherwise the call joins the client's current run.
    """

    def __init__(self, app: AppContext) -> None:
        from aisac_core.trace.provenance import RunAssigner

        self.app = app
        self.runs = RunAssigner(app.settings.run_idle_seconds)
        self._pinned: set[str] = set()

    def _meta(self, context: MiddlewareContext, *keys: str) -> str | None:
        """The first of ``keys`` present in the request ``_meta`` (as a string), else None."""
        meta = getattr(context.message, "meta", None)
        if meta is None and context.fastmcp_context is not None:
            rc = context.fastmcp_context.request_context
            meta = getattr(rc, "meta", None) if rc is not None else None
        if meta is None:
            return None
        if not isinstance(meta, dict):
            meta = {**(getattr(meta, "model_extra", None) or {}),
                    **{k: getattr(meta, k) for k in keys if getattr(meta, k, None) is not None}}
        val = next((meta[k] for k in keys if meta.get(k)), None)
        return str(val) if val else None

    def _client_key(self, context: MiddlewareContext) -> str:
        try:
            val = context.fastmcp_context.client_id if context.fastmcp_context is not None else None
        except Exception:  # no request context (e.g. in-memory transport)
            val = None
        return str(val) if val else "default"

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        from fastmcp.exceptions import ToolError

        from aisac_core.trace.provenance import record_tool_call
        from aisac_servers.common import call_core

        msg = context.message
        args = dict(msg.arguments or {})
        # trace_* tools take ``run_id`` as their own argument (the run to read), not as the caller's run (issue 8)
        own_run_arg = msg.name.startswith("trace_")
        run_id = ((None if own_run_arg else args.pop("run_id", None)) or self._meta(context, "run_id", "aisac/run_id")
                  or self.runs.run_for(self._client_key(context)))
        if "run_id" in (msg.arguments or {}) and not own_run_arg:
            context = context.copy(message=msg.model_copy(update={"arguments": args}))
        name = msg.name
        server = name.split("_", 1)[0] if "_" in name else "suite"
        t0_ns = time.time_ns()
        t0 = time.perf_counter()
        status, error, result_obj = "ok", None, None
        run_token = current_run_id.set(str(run_id))
        try:
            result = await call_next(context)
            if getattr(result, "is_error", False):
                status = "tool_error"
            result_obj = result.structured_content if result.structured_content is not None else \
                [getattr(c, "text", repr(c)) for c in (result.content or [])]
            return result
        except ToolError as exc:
            status, error = "tool_error", str(exc)
            raise
        except Exception as exc:  # validation errors and the like
            status, error = ("tool_error" if type(exc).__name__ == "ValidationError" else "exception"), str(exc)
            raise
        finally:
            current_run_id.reset(run_token)
            latency = (time.perf_counter() - t0) * 1000
            try:
                parent = self._meta(context, "aisac/parent_id")
                parent_id = int(parent) if parent and parent.isdigit() else None
                event_id = await call_core(record_tool_call, self.app.engine, run_id=str(run_id), server=server,
                                           tool=name, arguments=args, result=result_obj, status=status, error=error,
                                           latency_ms=latency, parent_id=parent_id)
                if str(run_id) not in self._pinned:  # configuration pins, once per run and process (issue 8)
                    self._pinned.add(str(run_id))
                    from aisac_core.trace.provenance import pin_run

                    await call_core(pin_run, self.app, str(run_id))
                from aisac_core.trace.provenance import emit_span, otel_enabled

                if otel_enabled():  # OpenTelemetry span per tool call, off unless OTEL_* configures it (issue 8)
                    emit_span(server=server, tool=name, run_id=str(run_id), start_ns=t0_ns,
                              end_ns=t0_ns + int(latency * 1e6), status=status, error=error, event_id=event_id,
                              parent_id=parent_id)
            except Exception:  # a trace write must never break the call itself
                log.exception("could not record the trace event of %s", name)


def _lifespan(app: AppContext, *, own: bool) -> Any:
    """The suite's lifespan: yields ``{"app": app}`` to every tool (:func:`aisac_servers.common.current_app`). With
    ``own``, it also warms the app in the background at start (models, vector store) and closes it at exit."""

    @asynccontextmanager
    async def lifespan(_server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        if own and app.settings.warm:
            app.warm()  # models and vector store load in the background; tools/list answers at once
        try:
            yield {"app": app}
        finally:
            if own:
                app.close()

    return lifespan


def build(names: list[str] | None = None, *, app: AppContext | None = None, lifespan: bool = True) -> FastMCP:
    """The suite server with the named servers mounted (all when None), serving ``app`` (default: a new
    :class:`~aisac_core.context.AppContext` from the environment's settings).

    ``lifespan=False`` builds a suite that borrows ``app`` (an in-process client inside a running server): no warm-up
    and no ``app.close()`` at exit.

    Raises:
        ValueError: an unknown server name.
    """
    chosen = names or list(SERVERS)
    unknown = [n for n in chosen if n not in SERVERS]
    if unknown:
        raise ValueError(f"unknown server(s) {unknown}; available: {', '.join(SERVERS)}")
    app = app if app is not None else AppContext()
    main = FastMCP("aisac", lifespan=_lifespan(app, own=lifespan),
                   instructions="aisac: retrieval-grounded scientific assistance with provenance. "
                                "Servers: " + ", ".join(chosen))
    for n in chosen:
        main.mount(_load(n), namespace=n)
    if app.project is not None and app.project.server is not None and not names:
        app.project.mount(main)  # the served project's own tools, namespace "project"
    main.add_middleware(ProvenanceMiddleware(app))
    from aisac_core.trace.dashboard import mount_dashboard

    mount_dashboard(main, prefix="/dashboard", core=app)  # HTTP transport only: the live trace dashboard
    return main
