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

import json
from typing import Annotated, Any, Literal

import mcp_types as mt
from fastmcp import Context, FastMCP
from fastmcp.apps.config import AppConfig
from fastmcp.exceptions import ToolError
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.errors import AisacError
from aisac_core.rag.search import search
from aisac_core.roles import NeedInput, RolesError, check_mode
from aisac_core.roles import evaluator as core_evaluator
from aisac_core.roles import planner as core_planner
from aisac_core.roles import prompts as core_prompts
from aisac_core.roles import router as core_router
from aisac_core.roles.backends import get_backend
from aisac_core.roles.graph import run_graph
from aisac_core.roles.schemas import load_schema, validate
from aisac_core.roles.store import Step, run_events, save_submission
from aisac_core.roles.tools import capabilities
from aisac_core.trace.recorder import new_run_id

from . import results_jobs as RJ
from . import results_roles as R
from .common import App, call_core, hints
from .report_app import VIEW_URI
from .results_data import AsIs, lean_schema
from .sampling import sampling_backend, sampling_request, stateless_protocol
from .suite import current_run_id
from .tasks import app_of, follow_roles_job, in_task, task_on
from .toolclient import SuiteTools

server = FastMCP(
    "roles",
    instructions=(
        "roles_run answers a question end to end (route, plan, execute, evaluate) with cited anchors; or "
        "submit your own plan (prompt roles_planner, roles_submit_plan)."
    ),
)

Mode = Annotated[Literal["lite", "standard", "strict"] | None, Field(
    description="verified anchors needed: lite 1, standard 2, strict 3")]
Llm = Annotated[Literal["auto", "none", "openai", "sampling", "replay"] | None, Field(
    description="none = rules; openai = configured endpoint; sampling = your model; default: openai if set")]


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


async def _guard(coro: Any) -> Any:
    """Await a role; roles errors become tool errors; a 2026-07-28 sampling request becomes InputRequiredResult."""
    try:
        return await coro
    except NeedInput as need:
        return sampling_request(need)
    except AisacError as exc:
        raise ToolError(str(exc)) from exc


def _search_hits(app: AppContext, task: str, k: int = 5) -> list[dict[str, Any]]:
    try:
        return search(app, task, k).as_dict()["hits"]
    except Exception:  # an empty or unopened index is no context, not an error of the role
        return []


async def _capabilities(app: AppContext) -> list[dict[str, Any]]:
    """The tools a plan may use: the suite's live tool list without the hidden ones."""
    async with SuiteTools(app) as tools:
        return await capabilities(tools)


@server.tool(annotations=hints("Route a question"), output_schema=lean_schema(R.RouteResult))
async def route(
    ctx: Context,
    task: str,
    mode: Mode = None,
    llm: Llm = None,
    app: AppContext = App,
) -> AsIs[R.RouteResult] | mt.InputRequiredResult:
    """roles_run's first step alone: classify a question from the top rag_search hits; answer directly or plan."""
    async def go() -> dict[str, Any]:
        core = app
        if not task or not task.strip():
            raise RolesError("task is empty: give the question to route")
        m = check_mode(mode, core.settings.roles.mode)
        backend = get_backend(core.settings, llm, sampling_backend(ctx))
        hits = await call_core(_search_hits, app, task)
        run_id = _run_id(ctx)
        with Step(core.engine, run_id, "router", {"task": task, "mode": m}) as st:
            st.result = await core_router.route(core, task, hits, None, backend, mode=m, run_id=run_id, parent_id=st.id)
        return {**st.result, "run_id": run_id, "event_id": st.id}

    return await _guard(go())


@server.tool(annotations=hints("Plan a question"), output_schema=lean_schema(R.PlanResult))
async def plan(
    ctx: Context,
    task: str,
    route: Annotated[dict[str, Any] | None, Field(description="roles_route result")] = None,
    feedback: Annotated[list[dict[str, Any]] | None, Field(description="critiques, to re-plan")] = None,
    attempt: Annotated[int, Field(ge=0, le=5, description="0 first; 1-5 re-plans")] = 0,
    llm: Llm = None,
    app: AppContext = App,
) -> AsIs[R.PlanResult] | mt.InputRequiredResult:
    """A plan of tool calls for a question, not run (roles_run plans and runs): steps over the live tools."""
    async def go() -> dict[str, Any]:
        core = app
        if not task or not task.strip():
            raise RolesError("task is empty: give the question to plan for")
        backend = get_backend(core.settings, llm, sampling_backend(ctx))
        tools = await _capabilities(app)
        run_id = _run_id(ctx)
        args = {"task": task, "attempt": attempt, "feedback": feedback}
        with Step(core.engine, run_id, "planner", args) as st:
            st.result = await core_planner.plan(core, task, route, tools, backend, run_id=run_id, parent_id=st.id,
                                        attempt=attempt, feedback=feedback)
        return {**st.result, "run_id": run_id, "event_id": st.id}

    return await _guard(go())


def _answer_obj(answer: str, citations: list[dict[str, Any]] | None, files: list[str] | None,
                code_runs: list[int] | None) -> dict[str, Any]:
    cites = []
    for n, c in enumerate(citations or [], 1):
        if not isinstance(c, dict):
            raise ToolError(f"citations[{n - 1}] must be an object: a rag_search hit or its 'anchor'")
        a = c.get("anchor") if isinstance(c.get("anchor"), dict) else c
        if not a.get("chunk_id"):
            raise ToolError(f"citations[{n - 1}] has no chunk_id: pass rag_search hits or their 'anchor' objects")
        cites.append({"n": n, "kind": "rag", "chunk_id": a["chunk_id"], "anchor": a,
                      "score": c.get("score", a.get("score"))})
    return {"text": answer, "citations": cites, "files": files or [], "code_runs": code_runs or []}


@server.tool(annotations=hints("Evaluate an answer"), output_schema=lean_schema(R.EvaluateResult))
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
) -> AsIs[R.EvaluateResult] | mt.InputRequiredResult:
    """Check an answer before giving it: re-verifies its cited anchors, data files and code runs; a model (llm)
    also critiques the content. Without one the verdict is "evidence verified" or "evidence not verified" and the
    content is "not judged (no model)"."""
    async def go() -> dict[str, Any]:
        core = app
        m = check_mode(mode, core.settings.roles.mode)
        backend = get_backend(core.settings, llm, sampling_backend(ctx))
        ans = _answer_obj(answer, citations, files, code_runs)
        from aisac_core.rag.search import get_chunk
        for c in ans["citations"]:  # a compact rag_search hit cites its chunk_id: the index holds the full anchor
            got = None if c["anchor"].get("sha256") else await call_core(get_chunk, core, c["chunk_id"])
            if got is not None:
                c["anchor"] = {**got["anchor"], "score": c["score"]}
        run_id = _run_id(ctx)
        events = await call_core(run_events, core.engine, of_run or run_id)
        with Step(core.engine, run_id, "evaluator", {"task": task, "mode": m, "answer": ans}) as st:
            st.result = await core_evaluator.evaluate(core, task, ans, events, backend, mode=m, run_id=run_id, parent_id=st.id)
        return {**st.result, "run_id": run_id, "event_id": st.id}

    return await _guard(go())


@server.tool(app=AppConfig(resource_uri=VIEW_URI),  # hosts with MCP Apps show the run report (needs trace)
             annotations=hints("Answer a question (whole graph)"), task=task_on(server),
             output_schema=lean_schema(RJ.RolesRun))
async def run(
    ctx: Context,
    task: Annotated[str, Field(description="the question")],
    mode: Mode = None,
    llm: Llm = None,
    session_id: Annotated[str | None, Field(description="memory session whose recall joins the context")] = None,
    wait_s: Annotated[float, Field(ge=0, le=600, description="seconds to wait before answering with a job id")] = 120,
) -> AsIs[RJ.RolesRun]:
    """Answer a question end to end with cited evidence (plan, run the tools, answer, evaluate; rag_search is
    quicker for a lookup). Returns ``answer {text, citations}`` and ``evaluation``, or after ``wait_s`` a
    ``job_id`` for roles_job_status."""
    tasked = in_task(ctx)
    if llm == "sampling" and (tasked or stateless_protocol(ctx)):
        raise ToolError("llm='sampling' in roles_run needs a handshake-era connection (2026-07-28 and tasks have no "
                        "back-channel for a long run); use roles_route / roles_plan / roles_evaluate with "
                        "llm='sampling', or llm='none' / 'openai'")
    if not task or not task.strip():
        raise ToolError("task is empty: give the question to answer")
    run_id = new_run_id()
    core = app_of(ctx)
    sampling = None if tasked else sampling_backend(ctx)

    async def go() -> dict[str, Any]:
        async with SuiteTools(core) as tools:
            return await run_graph(core, task, tools=tools, mode=mode, llm=llm, session_id=session_id,
                                   run_id=run_id, sampling=sampling)

    jobs = await call_core(lambda: core.role_jobs)  # opens the store (a job row) off the event loop the first time
    job_id = jobs.start(run_id, go, {"task": task[:2000], "mode": mode, "llm": llm})
    await follow_roles_job(ctx, core, jobs, job_id, run_id, None if tasked else wait_s)
    st = jobs.status(job_id)
    assert st is not None
    if st["status"] == "failed":
        err = st["error"]
        raise ToolError(err.split(": ", 1)[1] if err.startswith(("RolesError", "RoleModelError")) else
                        f"the run failed ({err}); its trace is run {run_id}")
    from .trace import report_uri

    if st["status"] in ("running", "cancelled", "interrupted"):
        return {"status": st["status"], "job_id": job_id, "run_id": run_id, "report_uri": report_uri(run_id),
                "message": f"still running after {wait_s:g} s; poll roles_job_status(job_id)"
                if st["status"] == "running" else st.get("error") or st["status"]}
    return {"status": "done", "job_id": job_id, "run_id": run_id, **st["result"], "report_uri": report_uri(run_id)}


@server.tool(annotations=hints("Roles run status", read_only=True), output_schema=lean_schema(RJ.RolesJob))
async def job_status(
    job_id: Annotated[str | None, Field(description="id from roles_run; omit to list recent jobs")] = None,
    app: AppContext = App,
) -> AsIs[RJ.RolesJob]:
    """Use to follow a roles_run that answered ``status: running``: running, done (with
    ``result``), failed, interrupted or cancelled. No ``job_id``: the recent jobs."""
    jobs = await call_core(lambda: app.role_jobs)
    if job_id is None:
        return {"jobs": await call_core(jobs.list)}
    st = await call_core(jobs.status, job_id)
    if st is None:
        raise ToolError(f"unknown job id {job_id!r}: roles_run returns job ids; roles_job_status() lists them")
    return st  # type: ignore[return-value]


async def _submit(app: AppContext, ctx: Context, role: str, schema: str, payload: Any, extra_check: Any = None) -> dict[str, Any]:
    core = app
    errors = validate(schema, payload)
    if not errors and extra_check is not None:
        errors = await extra_check(payload)
    run_id = _run_id(ctx)
    engine = core.engine
    if errors:
        await call_core(save_submission, engine, run_id=run_id, role=schema, payload=payload, errors=errors)
        raise ToolError(f"the {schema} is not valid ({len(errors)} error(s)); fix and submit again:\n- "
                        + "\n- ".join(errors))
    with Step(engine, run_id, role, {"submitted_by": "host model", "schema": schema}) as st:
        st.result = {**payload, "by": "host"}
    sid = await call_core(save_submission, engine, run_id=run_id, role=schema, payload=payload, errors=[],
                          trace_event_id=st.id)
    return {"stored": True, "submission_id": sid, "run_id": run_id, "event_id": st.id}


@server.tool(annotations=hints("Submit a route"), output_schema=lean_schema(R.SubmitResult))
async def submit_route(
    ctx: Context,
    route: Annotated[dict[str, Any], Field(description="JSON asked for by the roles_router prompt")],
    app: AppContext = App,
) -> AsIs[R.SubmitResult]:
    """Check and store the route your model wrote from the roles_router prompt; an error lists what to fix."""
    return await _submit(app, ctx, "router", "route", route)


@server.tool(annotations=hints("Submit a plan"), output_schema=lean_schema(R.SubmitResult))
async def submit_plan(
    ctx: Context,
    plan: Annotated[dict[str, Any], Field(description="JSON asked for by the roles_planner prompt")],
    app: AppContext = App,
) -> AsIs[R.SubmitResult]:
    """Check your model's plan (from the roles_planner prompt) against the live tools and store it; an error
    lists what to fix."""
    async def check(p: Any) -> list[str]:
        return core_planner.validate_plan(p, await _capabilities(app), app.settings.roles.max_plan_steps)

    return await _submit(app, ctx, "planner", "plan", plan, check)


@server.tool(annotations=hints("Submit critiques"), output_schema=lean_schema(R.CritiqueSubmitResult))
async def submit_critique(
    ctx: Context,
    critique: Annotated[dict[str, Any], Field(description="JSON asked for by the roles_evaluator prompt")],
    app: AppContext = App,
) -> AsIs[R.CritiqueSubmitResult]:
    """Check and store the critiques your model wrote from the roles_evaluator prompt; the verdict ("passed" or
    "failed") follows the configured severity thresholds. An error lists what to fix."""
    out = await _submit(app, ctx, "evaluator", "critique", critique)
    s = app.settings
    summ = core_evaluator.summarize(critique["critiques"], s.roles.max_mean_severity, s.roles.max_severity)
    return {**out, **{k: v for k, v in summ.items() if k != "critiques"}, "content_judged": True,
            "verdict": core_evaluator.verdict(summ["passed"], True)}


_HOST_SUFFIX = ("\n\nSubmit the JSON object with the tool {tool}({arg}=<the object>). If it reports errors, fix "
                "them and submit again.\n")


@server.prompt(name="router")
async def router_prompt(task: str, app: AppContext = App) -> str:
    """The Router's instructions for the host's model, with the top search hits as context; submit the result
    with roles_submit_route."""
    hits = await call_core(_search_hits, app, task)
    text, _v = core_prompts.render("router", core_router.prompt_values(task, hits, None), app.settings.roles.prompt_dir)
    return text + _HOST_SUFFIX.format(tool="roles_submit_route", arg="route")


@server.prompt(name="planner")
async def planner_prompt(task: str, route: str | None = None, feedback: str | None = None, app: AppContext = App) -> str:
    """The Planner's instructions for the host's model, with the suite's live tool list; submit the plan with
    roles_submit_plan. ``route``: the router JSON (text), ``feedback``: critiques of a previous attempt (text)."""
    tools = await _capabilities(app)
    s = app.settings
    try:
        route_obj = json.loads(route) if route else None
    except ValueError:
        route_obj = {"note": route}
    fb = [{"aspect": "feedback", "severity": 1, "text": feedback}] if feedback else None
    text, _v = core_prompts.render("planner", core_planner.prompt_values(task, route_obj, tools, s.roles.max_plan_steps, fb), s.roles.prompt_dir)
    return text + _HOST_SUFFIX.format(tool="roles_submit_plan", arg="plan")


@server.prompt(name="evaluator")
async def evaluator_prompt(task: str, answer: str, of_run: str | None = None, app: AppContext = App) -> str:
    """The Evaluator's instructions for the host's model, with the trace of run ``of_run`` (when given); submit
    the critiques with roles_submit_critique."""
    core = app
    events = await call_core(run_events, core.engine, of_run) if of_run else []
    values = {"task": task, "answer": answer, "evidence": core_evaluator.evidence_summary(events),
              "gates": "(run roles_evaluate for the automatic gates)", "schema": load_schema("critique")}
    text, _v = core_prompts.render("evaluator", values, core.settings.roles.prompt_dir)
    return text + _HOST_SUFFIX.format(tool="roles_submit_critique", arg="critique")
