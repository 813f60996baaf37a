"""The roles server: Router, Planner, Evaluator as tools, prompts for the host's own model, and the whole graph.

A thin adapter over :mod:`aisac_core.roles`. Mounted by the suite under ``roles``:

- tools ``roles_route``, ``roles_plan``, ``roles_evaluate`` (one role each; ``llm`` picks the backend: ``none`` =
  deterministic rules, ``openai`` = the configured endpoint, ``sampling`` = the client's model where offered),
  ``roles_run`` (the whole graph; a run longer than ``wait_s`` continues as a job: ``roles_job_status``);
- for the host's own model: prompts ``roles_router``, ``roles_planner``, ``roles_evaluator`` (the role's
  instructions filled with live context: search hits, the suite's real tools, the run's gates) and the validating
  tools ``roles_submit_route``, ``roles_submit_plan``, ``roles_submit_critique`` that check the JSON against its
  schema (and a plan against the live tools), store it in the run and answer with precise errors to fix.

Every role step is a ``role_step`` trace event of the caller's run (``server="roles"``, ``tool`` = the role),
every model request a ``model_call`` event under it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any, Literal, TypeVar

import mcp_types as mt
from fastmcp import Context
from fastmcp.apps.config import AppConfig
from fastmcp.exceptions import ToolError
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.errors import AisacError
from aisac_core.roles import NeedInput
from aisac_core.roles import results as R
from aisac_core.trace.recorder import new_run_id

from ..serving.common import AisacServer, App, call_core
from ..serving.report_app import VIEW_URI
from ..serving.sampling import sampling_backend, sampling_request, stateless_protocol
from ..serving.suite import current_run_id
from ..serving.tasks import app_of, follow_roles_job, in_task, task_on
from ..serving.toolclient import SuiteTools
from ..shapes.annotations import hints
from .trace import report_uri

server = AisacServer(
    "roles",
    instructions=(
        "roles_run answers a question end to end (route, plan, execute, evaluate) with cited anchors; the "
        "roles_* prompts let your own model route, plan and evaluate."
    ),
)

Mode = Annotated[
    Literal["lite", "standard", "strict"] | None,
    Field(description="verified anchors needed: lite 1, standard 2, strict 3"),
]
Llm = Annotated[
    Literal["auto", "none", "openai", "sampling", "replay"] | None,
    Field(description="none = rules; openai = configured endpoint; sampling = your model; default: openai if set"),
]


def _run_id(ctx: Context | None) -> str:
    """The caller's run: the suite middleware's, else the request _meta's, else a new one."""
    rid = current_run_id.get()
    if rid:
        return rid
    rc = ctx.request_context if ctx is not None else None
    meta = getattr(rc, "meta", None) if rc is not None else None
    if isinstance(meta, dict):
        for k in ("aisac/run_id", "run_id"):
            if meta.get(k):
                return str(meta[k])
    return new_run_id()


_T = TypeVar("_T")


async def _checked(coro: Awaitable[_T]) -> _T:
    """Await a role that samples no model (a submit_*); roles errors become tool errors."""
    try:
        return await coro
    except AisacError as exc:
        raise ToolError(str(exc)) from exc


async def _guard(coro: Awaitable[_T]) -> _T | mt.InputRequiredResult:
    """Await a role; roles errors become tool errors; a 2026-07-28 sampling request becomes InputRequiredResult."""
    try:
        return await _checked(coro)
    except NeedInput as need:  # raised by the sampling backend only
        return sampling_request(need)


@server.tool(annotations=hints("Route a question"))
async def route(
    ctx: Context, task: str, mode: Mode = None, llm: Llm = None, app: AppContext = App
) -> R.RouteResult | mt.InputRequiredResult:
    """roles_run's first step alone: classify a question from the top rag_search hits; answer directly or plan."""
    return await _guard(app.roles.route(task, run_id=_run_id(ctx), mode=mode, llm=llm, sampling=sampling_backend(ctx)))


@server.tool(annotations=hints("Plan a question"))
async def plan(
    ctx: Context,
    task: str,
    route: Annotated[dict[str, Any] | None, Field(description="roles_route result")] = None,
    feedback: Annotated[list[dict[str, Any]] | None, Field(description="critiques, to re-plan")] = None,
    attempt: Annotated[int, Field(ge=0, le=5, description="0 first; 1-5 re-plans")] = 0,
    llm: Llm = None,
    app: AppContext = App,
) -> R.PlanResult | mt.InputRequiredResult:
    """A plan of tool calls for a question, not run (roles_run plans and runs): steps over the live tools."""

    async def go() -> R.PlanResult:
        async with SuiteTools(app) as tools:
            return await app.roles.plan(
                task,
                tools=tools,
                run_id=_run_id(ctx),
                route=route,
                feedback=feedback,
                attempt=attempt,
                llm=llm,
                sampling=sampling_backend(ctx),
            )

    return await _guard(go())


@server.tool(annotations=hints("Evaluate an answer"))
async def evaluate(
    ctx: Context,
    task: str,
    answer: str,
    citations: Annotated[list[dict[str, Any]] | None, Field(description="rag_search hits or their anchors")] = None,
    files: Annotated[list[str] | None, Field(description="data files it relies on")] = None,
    code_runs: Annotated[list[int] | None, Field(description="data_code_run event ids; default: all")] = None,
    of_run: Annotated[str | None, Field(description="run to check; default: this call's")] = None,
    mode: Mode = None,
    llm: Llm = None,
    app: AppContext = App,
) -> R.EvaluateResult | mt.InputRequiredResult:
    """Check an answer before giving it: re-verifies its cited anchors, data files and code runs; a model (llm)
    also critiques the content. Without one the verdict is "automatic checks passed" or "automatic checks failed" and the
    content is "not judged (no model)"."""
    return await _guard(
        app.roles.evaluate(
            task,
            answer,
            run_id=_run_id(ctx),
            citations=citations,
            files=files,
            code_runs=code_runs,
            of_run=of_run,
            mode=mode,
            llm=llm,
            sampling=sampling_backend(ctx),
        )
    )


@server.tool(
    app=AppConfig(resource_uri=VIEW_URI),  # hosts with MCP Apps show the run report (needs trace)
    annotations=hints("Answer a question (whole graph)"),
    task=task_on(server),
)
async def run(
    ctx: Context,
    task: Annotated[str, Field(description="the question")],
    mode: Mode = None,
    llm: Llm = None,
    session_id: Annotated[str | None, Field(description="memory session whose recall joins the context")] = None,
    wait_s: Annotated[float, Field(ge=0, le=600, description="seconds to wait before answering with a job id")] = 120,
) -> R.RolesRun:
    """Answer a question end to end with cited evidence (plan, run the tools, answer, evaluate; rag_search is
    quicker for a lookup). Returns ``answer {text, citations}`` and ``evaluation``, or after ``wait_s`` a
    ``job_id`` for roles_job_status."""
    tasked = in_task(ctx)
    if llm == "sampling" and (tasked or stateless_protocol(ctx)):
        raise ToolError(
            "llm='sampling' in roles_run needs a handshake-era connection (2026-07-28 and tasks have no "
            "back-channel for a long run); use roles_route / roles_plan / roles_evaluate with "
            "llm='sampling', or llm='none' / 'openai'"
        )
    if not task or not task.strip():
        raise ToolError("task is empty: give the question to answer")
    run_id = new_run_id()
    core = app_of(ctx)
    roles = core.roles
    jobs = await call_core(lambda: roles.jobs)  # opens the store (a job row) off the event loop the first time
    job_id = roles.start_run(
        task,
        open_tools=lambda: SuiteTools(core),
        run_id=run_id,
        mode=mode,
        llm=llm,
        session_id=session_id,
        sampling=None if tasked else sampling_backend(ctx),
    )
    await follow_roles_job(ctx, core, jobs, job_id, run_id, None if tasked else wait_s)
    return await call_core(roles.run_outcome, job_id, run_id, wait_s=wait_s, report_uri=report_uri(run_id))


@server.tool(annotations=hints("Roles run status", read_only=True))
async def job_status(
    job_id: Annotated[str | None, Field(description="id from roles_run; omit to list recent jobs")] = None,
    app: AppContext = App,
) -> R.RolesJob:
    """Use to follow a roles_run that answered ``status: running``: running, done (with
    ``result``), failed, interrupted or cancelled. No ``job_id``: the recent jobs."""
    return await call_core(app.roles.job_status, job_id)


@server.tool(annotations=hints("Submit a route"))
async def submit_route(
    ctx: Context,
    route: Annotated[dict[str, Any], Field(description="JSON asked for by the roles_router prompt")],
    app: AppContext = App,
) -> R.SubmitResult:
    """Check and store the route your model wrote from the roles_router prompt; an error lists what to fix."""
    return await _checked(app.roles.submit_route(route, run_id=_run_id(ctx)))


@server.tool(annotations=hints("Submit a plan"))
async def submit_plan(
    ctx: Context,
    plan: Annotated[dict[str, Any], Field(description="JSON asked for by the roles_planner prompt")],
    app: AppContext = App,
) -> R.SubmitResult:
    """Check your model's plan (from the roles_planner prompt) against the live tools and store it; an error
    lists what to fix."""

    async def go() -> R.SubmitResult:
        async with SuiteTools(app) as tools:
            return await app.roles.submit_plan(plan, tools=tools, run_id=_run_id(ctx))

    return await _checked(go())


@server.tool(annotations=hints("Submit critiques"))
async def submit_critique(
    ctx: Context,
    critique: Annotated[dict[str, Any], Field(description="JSON asked for by the roles_evaluator prompt")],
    app: AppContext = App,
) -> R.CritiqueSubmitResult:
    """Check and store the critiques your model wrote from the roles_evaluator prompt; the verdict ("passed" or
    "failed") follows the configured severity thresholds. An error lists what to fix."""
    return await _checked(app.roles.submit_critique(critique, run_id=_run_id(ctx)))


@server.prompt(name="router")
async def router_prompt(task: str, app: AppContext = App) -> str:
    """The Router's instructions for the host's model, with the top search hits as context; submit the result
    with roles_submit_route."""
    return await app.roles.router_prompt(task)


@server.prompt(name="planner")
async def planner_prompt(
    task: str, route: str | None = None, feedback: str | None = None, app: AppContext = App
) -> str:
    """The Planner's instructions for the host's model, with the suite's live tool list; submit the plan with
    roles_submit_plan. ``route``: the router JSON (text), ``feedback``: critiques of a previous attempt (text)."""
    async with SuiteTools(app) as tools:
        return await app.roles.planner_prompt(task, tools=tools, route=route, feedback=feedback)


@server.prompt(name="evaluator")
async def evaluator_prompt(task: str, answer: str, of_run: str | None = None, app: AppContext = App) -> str:
    """The Evaluator's instructions for the host's model, with the trace of run ``of_run`` (when given); submit
    the critiques with roles_submit_critique."""
    return await app.roles.evaluator_prompt(task, answer, of_run)
