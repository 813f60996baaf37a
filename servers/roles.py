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

from .common import App, call_core
from .report_app import VIEW_URI
from .sampling import sampling_backend, sampling_request, stateless_protocol
from .suite import current_run_id
from .toolclient import SuiteTools

server = FastMCP(
    "roles",
    instructions=(
        "Reasoning roles with provenance. roles_run answers a question end to end (route, plan, execute with the "
        "suite's tools, evaluate, re-plan) and cites evidence anchors. To use your own model instead: get the "
        "prompt roles_planner (or roles_router / roles_evaluator), write the JSON it asks for, and submit it with "
        "roles_submit_plan (roles_submit_route / roles_submit_critique); fix any errors it reports and resubmit."
    ),
)

Mode = Annotated[Literal["lite", "standard", "strict"] | None, Field(
    description="evidence gate: minimum verified anchors cited (lite 1, standard 2, strict 3); default from config")]
Llm = Annotated[Literal["auto", "none", "openai", "sampling", "replay"] | None, Field(
    description="model backend: none = deterministic rules; openai = the configured OpenAI-compatible endpoint; "
                "sampling = this client's model (if it offers sampling); replay = cached responses only; "
                "auto/default = openai when an endpoint is configured, else none")]


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


@server.tool
async def route(
    ctx: Context,
    task: Annotated[str, Field(description="the question")],
    mode: Mode = None,
    llm: Llm = None,
    app: AppContext = App,
) -> dict[str, Any] | mt.InputRequiredResult:
    """Route a question: gathers context (the top 5 rag_search hits), classifies intent (factual / analytical /
    exploratory) and complexity (low / medium / high), decides ``direct`` (answer from the context) or ``plan``.

    Result (schemas/route.json): ``{intent, complexity, decision, rationale, context: {rag: [{chunk_id, doc_id,
    title, score}], memory}, by: rules|model, run_id, event_id}``. Rules: docs/roles.md.
    Errors: empty task; unknown mode/llm; llm=openai without an endpoint; the model failing (one repair attempt).
    """
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


@server.tool
async def plan(
    ctx: Context,
    task: Annotated[str, Field(description="the question")],
    route: Annotated[dict[str, Any] | None, Field(description="the router's decision (roles_route), optional")] = None,
    feedback: Annotated[list[dict[str, Any]] | None, Field(
        description="critiques of a previous attempt (roles_evaluate's critiques), for a re-plan")] = None,
    attempt: Annotated[int, Field(ge=0, le=5, description="0 = first plan; 1.. = re-plans (template widens)")] = 0,
    llm: Llm = None,
    app: AppContext = App,
) -> dict[str, Any] | mt.InputRequiredResult:
    """Plan (without calling tools) over the suite's live tool list: a DAG of steps ``{id, goal, tool | helper,
    arguments, depends_on, expected_evidence}`` ending with the ``researcher`` helper.

    Result: ``{rationale, steps, by: template|model, run_id, event_id}``. A model's plan is validated (unknown
    tools, cycles, dangling dependencies, more than AISAC_ROLES_MAX_PLAN_STEPS steps, missing arguments) and sent
    back once with the errors. Errors: empty task; unknown llm; the model failing after the repair.
    """
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


@server.tool
async def evaluate(
    ctx: Context,
    task: Annotated[str, Field(description="the question")],
    answer: Annotated[str, Field(description="the answer to check")],
    citations: Annotated[list[dict[str, Any]] | None, Field(
        description="the evidence the answer cites: rag_search hits or their 'anchor' objects")] = None,
    files: Annotated[list[str] | None, Field(description="data files the answer relies on")] = None,
    code_runs: Annotated[list[int] | None, Field(
        description="trace event ids of the data_code_run calls the answer relies on (default: all of the run)"),
    ] = None,
    of_run: Annotated[str | None, Field(description="the run whose trace to check (default: this call's run)")] = None,
    mode: Mode = None,
    llm: Llm = None,
    app: AppContext = App,
) -> dict[str, Any] | mt.InputRequiredResult:
    """Evaluate an answer: automatic gates first (evidence: every cited anchor re-verified, enough of them above
    the mode's score; data: referenced files exist and are no error pages; exec: code runs succeeded), then the
    model's critiques when a model is chosen.

    Result: ``{mode, gates: {evidence, data, exec}, critiques: [{aspect, text, severity 0..1, evidence_refs}],
    mean_severity, max_severity, passed, thresholds, by, run_id, event_id}``; passed = mean <= 0.4 and max <= 0.8
    by default (AISAC_ROLES_MAX_MEAN_SEVERITY, AISAC_ROLES_MAX_SEVERITY). Errors: a citation without chunk_id.
    """
    async def go() -> dict[str, Any]:
        core = app
        m = check_mode(mode, core.settings.roles.mode)
        backend = get_backend(core.settings, llm, sampling_backend(ctx))
        ans = _answer_obj(answer, citations, files, code_runs)
        run_id = _run_id(ctx)
        events = await call_core(run_events, core.engine, of_run or run_id)
        with Step(core.engine, run_id, "evaluator", {"task": task, "mode": m, "answer": ans}) as st:
            st.result = await core_evaluator.evaluate(core, task, ans, events, backend, mode=m, run_id=run_id, parent_id=st.id)
        return {**st.result, "run_id": run_id, "event_id": st.id}

    return await _guard(go())


@server.tool(app=AppConfig(resource_uri=VIEW_URI))  # hosts with MCP Apps show the run report (needs trace)
async def run(
    ctx: Context,
    task: Annotated[str, Field(description="the question")],
    mode: Mode = None,
    llm: Llm = None,
    session_id: Annotated[str | None, Field(description="memory session whose recall joins the context")] = None,
    wait_s: Annotated[float, Field(ge=0, le=600, description="seconds to wait before answering with a job id")] = 120,
    app: AppContext = App,
) -> dict[str, Any]:
    """Run the whole graph headless: route -> plan -> execute (the suite's tools, traced as children of the
    coordinator step) -> researcher answer with citations -> evaluate -> re-plan on failure (at most
    AISAC_ROLES_REPLAN_LIMIT times, default 2).

    Result when done within ``wait_s``: ``{status: "done", run_id, answer: {text, citations}, evaluation, route,
    plan, attempts, model_errors, took_s, job_id, report_uri}``; else ``{status: "running", job_id, run_id,
    report_uri}``: poll ``roles_job_status(job_id)``. ``report_uri``: the run's HTML report resource (the
    dashboard's run page as one file). Errors: empty task; unknown mode/llm; llm=sampling over a 2026-07-28 connection
    (use the single-role tools there).
    """
    if llm == "sampling" and stateless_protocol(ctx):
        raise ToolError("llm='sampling' in roles_run needs a handshake-era connection (2026-07-28 has no "
                        "back-channel for a long run); use roles_route / roles_plan / roles_evaluate with "
                        "llm='sampling', or llm='none' / 'openai'")
    if not task or not task.strip():
        raise ToolError("task is empty: give the question to answer")
    run_id = new_run_id()
    core = app

    async def go() -> dict[str, Any]:
        async with SuiteTools(core) as tools:
            return await run_graph(core, task, tools=tools, mode=mode, llm=llm, session_id=session_id,
                                   run_id=run_id, sampling=sampling_backend(ctx))

    jobs = await call_core(lambda: app.role_jobs)  # opens the store (a job row) off the event loop the first time
    job_id = jobs.start(run_id, go, {"task": task[:2000], "mode": mode, "llm": llm})
    await jobs.wait(job_id, wait_s)
    st = jobs.status(job_id)
    assert st is not None
    if st["status"] == "failed":
        err = st["error"]
        raise ToolError(err.split(": ", 1)[1] if err.startswith(("RolesError", "RoleModelError")) else
                        f"the run failed ({err}); its trace is run {run_id}")
    from .trace import report_uri

    if st["status"] == "running":
        return {"status": "running", "job_id": job_id, "run_id": run_id, "report_uri": report_uri(run_id),
                "message": f"still running after {wait_s:g} s; poll roles_job_status(job_id)"}
    return {"status": "done", "job_id": job_id, **st["result"], "report_uri": report_uri(run_id)}


@server.tool
async def job_status(
    job_id: Annotated[str | None, Field(description="id from roles_run; omit to list recent jobs")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Status of a roles_run job: ``{job_id, run_id, status: running|done|failed|interrupted, elapsed_s, result?,
    error?}``; without job_id ``{jobs: [...]}`` (the 20 most recent). Any process serving the store answers for any
    job (jobs are rows of the store's job table); ``interrupted``: the process running it stopped. Error: unknown
    job id."""
    jobs = await call_core(lambda: app.role_jobs)
    if job_id is None:
        return {"jobs": await call_core(jobs.list)}
    st = await call_core(jobs.status, job_id)
    if st is None:
        raise ToolError(f"unknown job id {job_id!r}: roles_run returns job ids; roles_job_status() lists them")
    return st


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


@server.tool
async def submit_route(
    ctx: Context,
    route: Annotated[dict[str, Any], Field(description="the router JSON (prompt roles_router; schema route.json)")],
    app: AppContext = App,
) -> dict[str, Any]:
    """Validate and store the host model's route: ``{intent, complexity, decision, rationale, context?}``.
    Result: ``{stored, submission_id, run_id, event_id}``. Error: the list of schema violations to fix."""
    return await _submit(app, ctx, "router", "route", route)


@server.tool
async def submit_plan(
    ctx: Context,
    plan: Annotated[dict[str, Any], Field(description="the plan JSON (prompt roles_planner; schema plan.json)")],
    app: AppContext = App,
) -> dict[str, Any]:
    """Validate the host model's plan against its schema and the suite's live tools (unknown tools, cycles,
    dangling depends_on, too many steps, missing or unknown arguments), store it in the run and return
    ``{stored, submission_id, run_id, event_id}``. Error: every problem, each saying how to fix it."""
    async def check(p: Any) -> list[str]:
        return core_planner.validate_plan(p, await _capabilities(app), app.settings.roles.max_plan_steps)

    return await _submit(app, ctx, "planner", "plan", plan, check)


@server.tool
async def submit_critique(
    ctx: Context,
    critique: Annotated[dict[str, Any], Field(
        description="the evaluator JSON (prompt roles_evaluator; schema critique.json): {critiques: [...]} ")],
    app: AppContext = App,
) -> dict[str, Any]:
    """Validate and store the host model's critiques (at most 10, severity 0..1); returns ``{stored,
    submission_id, run_id, event_id, mean_severity, max_severity, passed, thresholds}`` by the configured
    thresholds. Error: the schema violations to fix."""
    out = await _submit(app, ctx, "evaluator", "critique", critique)
    s = app.settings
    summ = core_evaluator.summarize(critique["critiques"], s.roles.max_mean_severity, s.roles.max_severity)
    return {**out, **{k: v for k, v in summ.items() if k != "critiques"}}


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
