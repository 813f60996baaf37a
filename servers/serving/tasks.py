"""Long work as MCP tasks: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663), progress, cancellation.

The long tools (``rag_index``, ``lit_import``, ``data_code_run``, ``roles_run``) are declared with :data:`TASK`
(mode ``optional``): a host that opts in to the tasks extension on its ``tools/call`` gets a task handle at once and
polls ``tasks/get`` (status, ``statusMessage`` with the progress, the result inlined when done) or stops the work
with ``tasks/cancel``; a host without tasks calls the same tools as before (a job id to poll, or ``wait``). The
engine is ``fastmcp-tasks`` on docket's in-process ``memory://`` backend (no Redis server; ``FASTMCP_DOCKET_URL``
may name one), registered on the suite root by :func:`add_tasks`.

The tool bodies run in a docket worker of the serving process when tasked: they read the application context
through :func:`app_of` (the worker has no request, so :func:`aisac_servers.serving.common.current_app` cannot), report
progress through :func:`report` (MCP progress notifications in the foreground, the task's status message when
tasked) and stop their job when the task is cancelled (:func:`follow_index_job`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

import anyio
import fastmcp_tasks  # noqa: F401 - registers the client half; undone below
from fastmcp import Context, FastMCP
from fastmcp.client.extension_hooks import _internal_client_extension_factories
from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import extract_version_spec
from fastmcp.utilities.tasks import TASKS_EXTENSION_ID, TaskConfig
from fastmcp_tasks import TasksExtension
from fastmcp_tasks.client import TasksClientExtension, _build_tasks_client_extension

from aisac_core.context import AppContext
from aisac_core.rag.results import IndexJob
from aisac_core.sessions.results import CodeRun, CodeRunPending

from .common import call_core, current_app

log = logging.getLogger("aisac.tasks")

#: the background jobs the tool call being served waits on (a list the provenance middleware sets per call, None
#: outside one): a call cancelled by its client, or cut by a disconnect, records what they had done
#: (:class:`aisac_servers.serving.suite.ProvenanceMiddleware`)
CALL_JOBS: ContextVar[list[str] | None] = ContextVar("aisac_call_jobs", default=None)

# Importing fastmcp_tasks makes every fastmcp Client of this process opt in to tasks, which would turn aisac's own
# in-process calls (the roles coordinator's SuiteTools, the CLI's owner client) into polled tasks without progress
# notifications. aisac's clients stay foreground; a client that wants tasks passes client_extensions().
if _build_tasks_client_extension in _internal_client_extension_factories:
    _internal_client_extension_factories.remove(_build_tasks_client_extension)

#: the task mode of the long tools: a host may run them as tasks; a host without tasks calls them as before
TASK = TaskConfig(mode="optional", poll_interval=timedelta(seconds=1))

#: the application context of the suite whose docket worker runs the current task (set by the extension's lifespan;
#: the worker's asyncio tasks inherit it)
_task_app: ContextVar[AppContext | None] = ContextVar("aisac_task_app", default=None)


def _stop_job(app: AppContext) -> bool:
    """Whether a cancelled call should cancel its job: yes for a cancel request, no when the server stops (a task
    cancelled by the shutdown leaves its job, queued or running in the job table, to the next process)."""
    return not app.stopping


def client_extensions() -> list[Any]:
    """The client extensions a fastmcp ``Client`` passes (``Client(..., extensions=client_extensions())``) to run
    the long tools as tasks; its ``call_tool`` then polls them transparently, ``fastmcp_tasks.call_tool_task``
    returns a handle."""
    return [TasksClientExtension()]


def task_on(server: FastMCP) -> TaskConfig:
    """:data:`TASK`, for ``@server.tool(task=task_on(server))``: also bundles an inert tasks extension with
    ``server`` (once), so a root that mounts it without :func:`add_tasks` (a server served alone) starts, and runs
    the tool in the foreground. The suite's own extension (:func:`add_tasks`) takes precedence over the bundled one.
    """
    if TASKS_EXTENSION_ID not in server._extensions:
        server.add_extension(_Foreground())
    return TASK


class AisacTasks(TasksExtension):
    """The tasks extension of one suite: an in-process docket queue of its own (unique name on ``memory://``), the
    suite's :class:`AppContext` for the task bodies, and foreground calls while no worker runs (``enabled=False``:
    an in-process suite that borrows a running server's context, or before the lifespan started)."""

    def __init__(self, app: AppContext | None, *, enabled: bool = True) -> None:
        super().__init__()
        if self.docket_settings.url.startswith("memory://"):
            self._settings = self._settings.model_copy(update={"name": f"aisac-{uuid.uuid4().hex[:12]}"})
        self.app = app
        self.enabled = enabled
        self._foreground: frozenset[str] | None = None

    async def intercept_tool_call(self, params: Any, context: Any, call_next: Any) -> Any:
        """Run the call as a task when the client opted in and this suite's worker runs; else in the foreground.

        A tool that never runs as a task (all but the long ones; :meth:`foreground_tools`) goes straight to its
        body: the extension's own check looks the tool up again (a second lookup per call, docs/retrieval.md
        "Serving under load")."""
        if not self.enabled or getattr(context.fastmcp, "_docket", None) is None:
            return await call_next()
        if not extract_version_spec(params.meta) and params.name in await self.foreground_tools(context.fastmcp):
            return await call_next()
        return await super().intercept_tool_call(params, context, call_next)

    async def foreground_tools(self, server: FastMCP) -> frozenset[str]:
        """The names of ``server``'s tools without task support (listed once, without middleware; a tool added
        later is not among them and takes the extension's own check)."""
        if self._foreground is None:
            tools = await server.list_tools(run_middleware=False)
            self._foreground = frozenset(t.name for t in tools if not t.task_config.supports_tasks())
        return self._foreground

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Start the docket worker (when enabled) with this suite's context visible to the task bodies."""
        if not self.enabled:
            yield
            return
        token = _task_app.set(self.app)
        try:
            async with super().lifespan():
                try:
                    yield
                finally:  # the worker cancels the running tasks next: their jobs stay for the next process
                    if self.app is not None:
                        self.app.stopping = True
        finally:
            if self.app is not None:
                self.app.stopping = False
            _task_app.reset(token)


class _Foreground(AisacTasks):
    """The inert tasks extension a long tool's server bundles (:func:`task_on`): every call in the foreground."""

    auto_register = True

    def __init__(self) -> None:
        super().__init__(None, enabled=False)


def add_tasks(server: FastMCP, app: AppContext, *, enabled: bool = True) -> None:
    """Register the tasks extension on the suite root ``server`` (serving ``app``); ``enabled=False`` for a suite
    without its own lifespan: the long tools then always run in the foreground."""
    server.add_extension(AisacTasks(app, enabled=enabled))


def in_task(ctx: Context | None) -> bool:
    """Whether the current tool call runs as a task (in a docket worker)."""
    return ctx is not None and ctx.is_background_task


def app_of(ctx: Context | None) -> AppContext:
    """The application context of the current tool call, foreground or task.

    Raises:
        ToolError: no suite serves the call.
    """
    app = _task_app.get() if in_task(ctx) else None
    return app if app is not None else current_app()


async def report(ctx: Context | None, done: float, total: float | None, message: str | None = None) -> None:
    """Report progress: an MCP progress notification when the caller sent a progress token (only when ``done`` is
    above the last value sent for this call: MCP 2025-11-25, "Progress": the value MUST increase with each
    notification), the task's status message (read by ``tasks/get``) when tasked; never fails the tool."""
    if ctx is None:
        return
    try:
        # the specification requires progress to increase with each notification of a token: a value that does not
        # (a job still on the same file) is not sent; the task's status message still gets it
        last = await ctx.get_state(_LAST_PROGRESS)
        if last is not None and done <= last and not in_task(ctx):
            return
        await ctx.set_state(_LAST_PROGRESS, done, serializable=False)
        await ctx.report_progress(done, total, message)
    except Exception as exc:  # noqa: BLE001 - a closed connection must not stop the work
        log.debug("progress not reported: %s", exc)


#: the request-scoped state key of the last progress value sent for the current call (see :func:`report`)
_LAST_PROGRESS = "aisac.last_progress"


def _index_message(st: IndexJob) -> str:
    return f"{st['status']}: {st['done']}/{st['total'] or '?'} files" + (
        f", last {st['message']}" if st.get("message") and st["status"] == "running" else ""
    )


async def follow_index_job(
    ctx: Context | None, app: AppContext, job_ids: list[str], timeout_s: float | None
) -> IndexJob:
    """Wait for the last of index jobs ``job_ids`` to end (or ``timeout_s`` seconds; None: no limit), reporting its
    progress; if the call is cancelled meanwhile (``tasks/cancel``, a client's cancel notification), the jobs are
    cancelled too (each stops between two files) before the cancellation goes on. Returns the job's last status."""
    jobs = app.rag.jobs
    job_id = job_ids[-1]  # jobs run in order: the last one ends last
    followed = CALL_JOBS.get()
    if followed is not None:  # the call's trace event names them, should the call be cancelled
        followed.extend(j for j in job_ids if j not in followed)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    st = await call_core(jobs.status, job_id)
    if st is not None:  # at once: a short job may end before the first half-second look
        await report(ctx, st["done"], st["total"] or None, _index_message(st))
    try:
        while st is not None and (deadline is None or time.monotonic() < deadline):
            left = 0.25 if deadline is None else max(0.0, min(0.25, deadline - time.monotonic()))
            finished = await anyio.to_thread.run_sync(jobs.wait, job_id, left)
            st = await call_core(jobs.status, job_id)
            if st is None:
                break
            await report(ctx, st["done"], st["total"] or None, _index_message(st))
            if finished:
                break
    except (asyncio.CancelledError, anyio.get_cancelled_exc_class()):
        if _stop_job(app):
            with anyio.CancelScope(shield=True):
                for jid in job_ids:
                    await anyio.to_thread.run_sync(jobs.cancel, jid)
        raise
    if st is None:
        raise ToolError(f"index job {job_id} vanished from the job table; list jobs with rag_job_status()")
    return st


async def follow_code_run(
    ctx: Context | None, sandbox: Any, first: CodeRunPending, wait_s: float | None
) -> tuple[CodeRun, list[bytes]]:
    """Wait up to ``wait_s`` seconds more (None: until it ends) for the code run ``first`` (a pending result of
    ``SandboxManager.run``), reporting the elapsed time; a cancelled call cancels the run (its worker is killed).
    Returns ``(result, images)``: the run's result, or ``first`` when it is still running after ``wait_s``."""
    job_id = first["job_id"]
    t0 = time.monotonic()
    try:
        while wait_s is None or time.monotonic() - t0 < wait_s:
            step = 1.0 if wait_s is None else max(0.0, min(1.0, wait_s - (time.monotonic() - t0)))
            if await anyio.to_thread.run_sync(sandbox.wait, job_id, step):
                return await call_core(sandbox.job_status, job_id)
            elapsed = time.monotonic() - t0
            await report(ctx, round(elapsed, 1), None, f"code run {job_id} running for {elapsed:.0f} s")
    except (asyncio.CancelledError, anyio.get_cancelled_exc_class()):
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(sandbox.cancel, job_id)
        raise
    still = first.copy()
    still["error"] = (
        f"still running after {wait_s:g} s; poll data_code_job_status(job_id={job_id!r}) or stop it with rag_job_cancel"
    )
    return still, []


def _roles_progress(app: AppContext, run_id: str) -> tuple[int, str]:
    from aisac_core.roles.store import run_events

    events = run_events(app.engine, run_id)
    last = events[-1] if events else None
    what = f"{last['kind']} {last['tool'] or last['server'] or ''}".strip() if last else "starting"
    return len(events), what


async def follow_roles_job(
    ctx: Context | None, app: AppContext, jobs: Any, job_id: str, run_id: str, wait_s: float | None
) -> None:
    """Wait up to ``wait_s`` seconds (None: until it ends) for roles job ``job_id``, reporting the steps its run
    has recorded so far; a cancelled call cancels the run (it stops within the step under way)."""
    t0 = time.monotonic()
    try:
        while wait_s is None or time.monotonic() - t0 < wait_s:
            step = 2.0 if wait_s is None else max(0.0, min(2.0, wait_s - (time.monotonic() - t0)))
            await jobs.wait(job_id, step)
            st = jobs.status(job_id)
            if st is None or st["status"] != "running":
                return
            n, what = await anyio.to_thread.run_sync(_roles_progress, app, run_id)
            await report(ctx, n, None, f"run {run_id}: {n} trace events, last {what}")
    except (asyncio.CancelledError, anyio.get_cancelled_exc_class()):
        if _stop_job(app):
            jobs.cancel(job_id)
        raise
