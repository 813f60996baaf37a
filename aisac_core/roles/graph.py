"""The workflow graph as data, and the headless run behind ``aisac ask`` and ``roles_run``.

:func:`default_graph` returns::

    {"version": 1, "start": "router", "replan_limit": None,     # None: Settings.replan_limit
     "nodes": {"router": {"kind": "role"}, "planner": {"kind": "role"}, "coordinator": {"kind": "role"},
               "researcher": {"kind": "helper", "within": "coordinator"}, "evaluator": {"kind": "role"}},
     "edges": [{"from": "router", "to": "coordinator", "when": "direct"},
               {"from": "router", "to": "planner", "when": "plan"},
               {"from": "planner", "to": "coordinator"},
               {"from": "coordinator", "to": "researcher"},
               {"from": "researcher", "to": "evaluator"},
               {"from": "evaluator", "to": "planner", "when": "failed", "replan": True},
               {"from": "evaluator", "to": "end", "when": "passed or re-plans exhausted"}]}

A project augments it with a function ``augment(graph) -> graph | None`` (None: edited in place;
``default_graph(augment)``; a served project's augmentation is the roles service's ``graph_augment``, which
:func:`active_graph` applies). Besides changing
``replan_limit`` or descriptions, an augmentation may add **tool nodes**::

    graph["nodes"]["units"] = {"kind": "tool", "tool": "proj_check_units", "arguments": {"text": "{task}"}}
    graph["edges"].append({"from": "planner", "to": "units"})

and **comparison nodes** (:mod:`.compare`: values a paper's tables report beside a materials database's, every number
cited; the materials template adds one)::

    graph["nodes"]["compare"] = {"kind": "comparison", "property": "formation_energy_per_atom"}
    graph["edges"].append({"from": "planner", "to": "compare"})

A comparison node runs inside the coordinator step before the plan's steps (its tool calls are traced there) and
its table is added to the researcher's answer (:func:`.compare.attach`); it runs only for a question naming its
property (:func:`.compare.applies`).
A tool node whose predecessor is ``router``, ``planner`` or ``coordinator`` runs inside the coordinator step
before the plan's steps, on every attempt, and its result counts as evidence for the researcher; one whose
predecessor is ``researcher`` or ``evaluator`` runs after the evaluation, as its own role step. Argument
templates take ``{task}``. The core nodes and their order are fixed; :func:`validate_graph` says what is wrong
with an augmented graph.
"""

from __future__ import annotations

import copy
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, cast

from aisac_core.jsontypes import JSONObject, JSONValue
from aisac_core.ports import ToolPort
from aisac_core.roles import RoleModelError, RolesError, check_mode
from aisac_core.roles import compare as cmp
from aisac_core.roles import planner as pl
from aisac_core.roles import researcher as rs
from aisac_core.roles.backends import Backend, get_backend
from aisac_core.roles.evaluator import evaluate
from aisac_core.roles.results import RunResult
from aisac_core.roles.router import route as do_route
from aisac_core.roles.router import rule_route
from aisac_core.roles.store import Step, run_events
from aisac_core.roles.tools import call_tool, capabilities, proposable
from aisac_core.trace.recorder import new_run_id

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqlalchemy.engine import Engine

    from aisac_core.roles.env import Corpus, GraphAugment, GraphEnv, HasAugment
    from aisac_core.roles.results import PlanStep
    from aisac_core.roles.shapes import Answer, Capability, Comparison, Plan, RoleCritique, Route, StepProposal
    from aisac_core.settings import RolesSettings

CORE_NODES = ("router", "planner", "coordinator", "researcher", "evaluator")
_BEFORE = ("router", "planner", "coordinator")
_AFTER = ("researcher", "evaluator")


def _base() -> JSONObject:
    return {
        "version": 1,
        "start": "router",
        "replan_limit": None,
        "nodes": {
            "router": {"kind": "role", "description": "classify the question, gather context, decide direct or plan"},
            "planner": {"kind": "role", "description": "write a plan DAG over the live capability list (no tools)"},
            "coordinator": {"kind": "role", "description": "execute the plan's steps through the suite's tools"},
            "researcher": {
                "kind": "helper",
                "within": "coordinator",
                "description": "write the answer from the gathered evidence, citing anchors",
            },
            "evaluator": {"kind": "role", "description": "gates (evidence, data, exec) and critiques; pass or fail"},
        },
        "edges": [
            {"from": "router", "to": "coordinator", "when": "direct"},
            {"from": "router", "to": "planner", "when": "plan"},
            {"from": "planner", "to": "coordinator"},
            {"from": "coordinator", "to": "researcher"},
            {"from": "researcher", "to": "evaluator"},
            {"from": "evaluator", "to": "planner", "when": "failed", "replan": True},
            {"from": "evaluator", "to": "end", "when": "passed or re-plans exhausted"},
        ],
    }


def validate_graph(graph: object) -> list[str]:
    """What is wrong with a (possibly augmented) graph: missing core nodes, edges naming unknown nodes, tool nodes
    without a tool name or without a predecessor, a bad ``replan_limit``."""
    if not (isinstance(graph, dict) and isinstance(graph.get("nodes"), dict) and isinstance(graph.get("edges"), list)):
        return ["the graph must be a dict with 'nodes' (dict) and 'edges' (list); start from default_graph()"]
    errs = []
    nodes = graph["nodes"]
    for n in CORE_NODES:
        if n not in nodes:
            errs.append(f"core node {n!r} is missing; an augmentation may add nodes but not remove core ones")
    for i, e in enumerate(graph["edges"]):
        if not isinstance(e, dict) or "from" not in e or "to" not in e:
            errs.append(f"edges[{i}] must be {{'from': node, 'to': node}}")
            continue
        for end in ("from", "to"):
            if e[end] not in nodes and e[end] != "end":
                errs.append(f"edges[{i}].{end} names {e[end]!r}, which is not a node ({', '.join(nodes)})")
    for name, node in nodes.items():
        if isinstance(node, dict) and node.get("kind") == "comparison":
            if not any(e.get("to") == name for e in graph["edges"] if isinstance(e, dict)):
                errs.append(f"node {name!r}: add an edge {{'from': 'planner', 'to': {name!r}}} saying when it runs")
        if isinstance(node, dict) and node.get("kind") == "tool":
            if not isinstance(node.get("tool"), str) or not node["tool"]:
                errs.append(f"node {name!r}: a tool node needs 'tool' (a suite tool name)")
            if not isinstance(node.get("arguments", {}), dict):
                errs.append(f"node {name!r}: 'arguments' must be a dict")
            if not any(e.get("to") == name for e in graph["edges"] if isinstance(e, dict)):
                errs.append(
                    f"node {name!r}: add an edge {{'from': <router|planner|coordinator|researcher|"
                    f"evaluator>, 'to': {name!r}}} saying when it runs"
                )
    rl = graph.get("replan_limit")
    if rl is not None and (not isinstance(rl, int) or isinstance(rl, bool) or not 0 <= rl <= 5):
        errs.append(f"replan_limit must be null or an integer 0..5, got {rl!r}")
    return errs


def default_graph(augment: GraphAugment | None = None) -> JSONObject:
    """The workflow graph (module docstring), passed through ``augment`` when given. Raises :class:`RolesError`
    when the augmented graph is invalid (the errors say what to fix)."""
    g = _base()
    if augment is not None:
        mine = copy.deepcopy(g)
        res = augment(mine)
        g = mine if res is None else res  # an augmentation may edit the graph in place and return None
        errs = validate_graph(g)
        if errs:
            raise RolesError("the augmented workflow graph is invalid: " + "; ".join(errs))
    return g


def active_graph(holder: HasAugment | None = None) -> JSONObject:
    """The graph runs use by default: :func:`default_graph` with the served project's augmentation
    (``holder.graph_augment``, e.g. the roles service's; none without a project or without ``holder``). Raises
    :class:`RolesError` when the augmented graph is invalid."""
    return default_graph(holder.graph_augment if holder is not None else None)


def _nodes(graph: JSONObject) -> dict[str, JSONObject]:
    """The graph's nodes that are objects (a valid graph's ``nodes``: :func:`validate_graph`)."""
    nodes = graph.get("nodes")
    return {n: v for n, v in nodes.items() if isinstance(v, dict)} if isinstance(nodes, dict) else {}


def _edges(graph: JSONObject) -> list[JSONObject]:
    """The graph's edges that are objects (a valid graph's ``edges``: :func:`validate_graph`)."""
    edges = graph.get("edges")
    return [e for e in edges if isinstance(e, dict)] if isinstance(edges, list) else []


def _tool_nodes(graph: JSONObject, after: tuple[str, ...], kind: str = "tool") -> list[tuple[str, JSONObject]]:
    out = []
    for name, node in _nodes(graph).items():
        if node.get("kind") == kind:
            preds = {str(e["from"]) for e in _edges(graph) if e.get("to") == name}
            if preds & set(after):
                out.append((name, node))
    return out


def _node_arguments(node: JSONObject) -> JSONObject:
    """A tool node's ``arguments`` template (``{}`` when it has none; a valid graph's are objects)."""
    args = node.get("arguments")
    return args if isinstance(args, dict) else {}


def direct_plan(task: str, route: Route, tools: list[Capability], max_steps: int) -> Plan:
    """The plan of a *direct* route: the template plan's first attempt (searches, then the researcher), taken by
    the coordinator without a planner step or model call."""
    p = pl.template_plan(task, route, tools, attempt=0, max_steps=max_steps)
    return {**p, "rationale": "direct route: the router found strong context; template searches", "by": "router-direct"}


class GraphRun(ABC):
    """The whole graph run (route, plan, execute, write, evaluate, re-plan): a part of
    :class:`~aisac_core.roles.service.RolesService`, which provides the collaborators it declares - the roles
    settings, the SQL engine, the store's documents (:class:`~aisac_core.roles.env.Corpus`), chunk texts, the dense
    embedder and the served project's graph augmentation - so that the role steps, which take it through their
    protocols (:class:`~aisac_core.roles.env.GraphEnv`), read them."""

    settings: RolesSettings
    graph_augment: GraphAugment | None

    @property
    @abstractmethod
    def engine(self) -> Engine:
        """The store's SQL engine (schema migrated)."""

    @property
    @abstractmethod
    def corpus(self) -> Corpus:
        """The store's documents as the roles read them."""

    @abstractmethod
    def chunk_text(self, chunk_id: str | None) -> str | None:
        """The text of chunk ``chunk_id`` as the index holds it (None: not in the index)."""

    @abstractmethod
    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Unit dense vectors of ``texts`` (``[]`` vectors without an embedder)."""

    async def run(
        self,
        task: str,
        *,
        tools: ToolPort,
        mode: str | None = None,
        llm: str | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        graph: JSONObject | None = None,
        sampling: Backend | None = None,
    ) -> RunResult:
        """Run the graph headless: route, plan, execute, write, evaluate, re-plan (at most ``replan_limit`` times).

        Args:
            task: the question (non-empty, at most 4,000 characters).
            mode: lite / standard / strict (default ``Settings.roles.mode``): the evidence gate's minimum anchors.
            llm: backend (``Settings.roles.llm`` when None; see :mod:`.backends`). A model that fails (unreachable,
                timeout, schema violation after one repair) is recorded and the role falls back to its rules.
            session_id: a memory session whose recall joins the router's context (``memory_recall``).
            run_id: the trace run (new when None). graph: a graph dict (default :func:`active_graph`).
            tools: the suite's tools (:class:`~aisac_core.ports.ToolPort`): the router's searches, the plan's steps
                and the graph's tool nodes call them; the planner sees, and the coordinator calls, only the read-only
                closed-world tools of :func:`.tools.capabilities`. A plan step naming another tool is not executed: it
                is returned in ``plan["proposals"]`` (:func:`.planner.proposal`) for the host to confirm with the user.
            sampling: the MCP client's model as a backend, built by the server serving the call (``llm='sampling'``).

        Returns ``{run_id, task, mode, llm, route, plan, answer, evaluation, attempts: [{attempt, plan, answer,
        evaluation}], model_errors, took_s}``. Every role step, model call and tool call is in the trace of ``run_id``.

        Raises :class:`RolesError` for an empty task, an unknown mode or llm, an invalid graph.
        """
        # long function: the workflow graph's node loop; every node kind shares the run's state, budget and trace
        env: GraphEnv = self  # the role steps take the service through their protocols (aisac_core.roles.env)
        t_start = time.perf_counter()
        if not isinstance(task, str) or not task.strip():
            raise RolesError("task is empty: give the question to answer")
        if len(task) > 4000:
            raise RolesError(f"task is {len(task)} characters long; the limit is 4000")
        s = env.settings
        mode = check_mode(mode, s.mode)
        backend = get_backend(s, llm, sampling)
        graph = graph if graph is not None else active_graph(env)
        errs = validate_graph(graph)
        if errs:
            raise RolesError("invalid workflow graph: " + "; ".join(errs))
        rl = graph.get("replan_limit")  # null or an integer 0..5 (validate_graph)
        replan_limit = rl if isinstance(rl, int) else s.replan_limit
        run_id = run_id or new_run_id()
        engine = env.engine
        model_errors: list[dict[str, str]] = []
        llm_name = backend.name if backend else "none"

        caps = await capabilities(tools)  # what a plan may call: read-only, closed-world tools
        names = {t["name"] for t in caps}
        others = {t["name"]: t for t in await proposable(tools)}  # what a plan step may only propose
        suite = names | set(others)  # the graph's own tool nodes (the project's configuration, not a model's plan)

        async def call(name: str, args: JSONObject, parent: int) -> tuple[str, JSONValue, str | None]:
            return await call_tool(tools, name, args, run_id=run_id, parent_id=parent)

        # --- router: gather context, classify, decide
        with Step(
            engine, run_id, "router", {"task": task, "mode": mode, "llm": llm_name, "session_id": session_id}
        ) as st:
            hits: list[JSONObject] = []
            memory: list[JSONObject] = []
            if "rag_search" in names:
                status, res, _err = await call("rag_search", {"query": task, "k": 5}, st.id)
                if status == "ok" and isinstance(res, dict):
                    hits = _objects(res.get("hits"))
            if session_id and "memory_recall" in names:
                status, res, _err = await call("memory_recall", {"session_id": session_id, "query": task}, st.id)
                if status == "ok" and isinstance(res, dict):
                    memory = [
                        {"kind": "recent", "role": t.get("role"), "content": str(t.get("content"))[:500]}
                        for t in _objects(res.get("recent"))
                    ][-5:] + [{"kind": "related", **p} for p in _objects(res.get("related"))][:5]
            try:
                decision = await do_route(env, task, hits, memory, backend, mode=mode, run_id=run_id, parent_id=st.id)
            except RoleModelError as exc:
                model_errors.append({"role": "router", "error": str(exc)})
                decision = {**rule_route(task, hits, memory, mode), "by": "rules (model failed)"}
            st.result = decision

        attempts: list[dict[str, object]] = []
        feedback: list[RoleCritique] | None = None
        attempt = 0
        while True:
            # --- planner (skipped on a direct route's first attempt)
            if decision["decision"] == "direct" and attempt == 0:
                plan = direct_plan(task, decision, caps, s.max_plan_steps)
            else:
                with Step(
                    engine,
                    run_id,
                    "planner",
                    {"task": task, "attempt": attempt, "feedback": feedback, "tools": sorted(names)},
                ) as st:
                    try:
                        plan = await pl.plan(
                            env,
                            task,
                            decision,
                            caps,
                            backend,
                            run_id=run_id,
                            parent_id=st.id,
                            attempt=attempt,
                            feedback=feedback,
                            proposable=list(others.values()),
                        )
                    except RoleModelError as exc:
                        model_errors.append({"role": "planner", "error": str(exc)})
                        plan = {
                            **pl.template_plan(task, decision, caps, attempt=attempt, max_steps=s.max_plan_steps),
                            "by": "template (model failed)",
                        }
                    st.result = plan
            # --- coordinator: project tool nodes, then the plan's steps; the researcher writes the answer
            with Step(
                engine, run_id, "coordinator", {"attempt": attempt, "steps": [x["id"] for x in plan["steps"]]}
            ) as cst:
                results: dict[str, JSONValue] = {}
                executed: list[JSONObject] = []
                proposals: list[StepProposal] = []
                for node_name, node in _tool_nodes(graph, _BEFORE):
                    if node["tool"] not in suite:
                        executed.append(
                            {
                                "id": node_name,
                                "tool": node["tool"],
                                "status": "skipped",
                                "error": f"tool {node['tool']} is not in the suite",
                            }
                        )
                        continue
                    args = pl.resolve_object(_node_arguments(node), task, {})
                    status, res, err = await call(str(node["tool"]), args, cst.id)
                    results[node_name] = res if status == "ok" else {"error": err}
                    executed.append({"id": node_name, "tool": node["tool"], "status": status, "error": err})
                comparisons: dict[str, Comparison] = {}
                for node_name, node in _tool_nodes(graph, _BEFORE, "comparison"):
                    if not cmp.applies(task, node):  # the question does not ask about the node's property
                        continue
                    comparisons[node_name] = await cmp.compare_reported(
                        lambda name, args: call(name, args, cst.id), task, node
                    )
                    executed.append({"id": node_name, "helper": "comparison", "status": "ok"})
                answer: Answer | None = None
                for step in pl.topological_order(plan["steps"]):
                    if "tool" in step and step["tool"] not in names:  # a write or network call: never executed here
                        shown: Mapping[str, object]
                        try:
                            shown = pl.resolve_object(step.get("arguments") or {}, task, results)
                        except ValueError:
                            shown = step.get("arguments") or {}
                        tool: Mapping[str, object] = others.get(step["tool"]) or {}  # {}: a tool the suite lacks
                        prop = pl.proposal(step, tool, shown)
                        proposals.append(prop)
                        results[step["id"]] = {"error": prop["reason"]}
                        executed.append({"id": step["id"], "tool": step["tool"], "status": "proposed", "error": None})
                    elif "tool" in step:
                        try:
                            args = pl.resolve_object(step.get("arguments") or {}, task, results)
                        except ValueError as exc:
                            results[step["id"]] = {"error": str(exc)}
                            executed.append(
                                {"id": step["id"], "tool": step["tool"], "status": "skipped", "error": str(exc)}
                            )
                            continue
                        status, res, err = await call(step["tool"], args, cst.id)
                        results[step["id"]] = res if status == "ok" else {"error": err}
                        executed.append({"id": step["id"], "tool": step["tool"], "status": status, "error": err})
                    else:
                        answer = await _research(
                            env,
                            engine,
                            run_id,
                            cst.id,
                            task,
                            results,
                            step,
                            plan,
                            backend,
                            model_errors,
                            list(_node_ids(graph)),
                            comparisons,
                        )
                        executed.append({"id": step["id"], "helper": "researcher", "status": "ok"})
                if answer is None:  # a model plan without a researcher step
                    answer = await _research(
                        env, engine, run_id, cst.id, task, results, None, plan, backend, model_errors, [], comparisons
                    )
                if proposals:
                    plan = {**plan, "proposals": proposals}
                cst.result = {
                    "executed": executed,
                    "answer_citations": len(answer.get("citations") or []),
                    **({"proposals": proposals} if proposals else {}),
                }
            # --- evaluator
            events = run_events(engine, run_id)
            with Step(
                engine, run_id, "evaluator", {"task": task, "mode": mode, "attempt": attempt, "answer": answer}
            ) as st:
                try:
                    report = await evaluate(
                        env, task, answer, events, backend, mode=mode, run_id=run_id, parent_id=st.id
                    )
                except RoleModelError as exc:
                    model_errors.append({"role": "evaluator", "error": str(exc)})
                    report = await evaluate(env, task, answer, events, None, mode=mode, run_id=run_id, parent_id=st.id)
                    report["by"] = "automatic (model failed)"
                st.result = report
            attempts.append({"attempt": attempt, "plan": plan, "answer": answer, "evaluation": report})
            if report["passed"] or attempt >= replan_limit:
                break
            attempt += 1
            feedback = report["critiques"]
        # an answer no cited passage supports is not an answer: "the sources do not state it" (the attempt keeps it)
        answer = rs.abstain_unsupported(answer, report)
        # --- tool nodes after the evaluation
        for node_name, node in _tool_nodes(graph, _AFTER):
            with Step(engine, run_id, node_name, {"tool": node["tool"]}) as st:
                if node["tool"] in suite:
                    status, res, err = await call(
                        str(node["tool"]), pl.resolve_object(_node_arguments(node), task, {}), st.id
                    )
                    st.result = {"status": status, "result": res, "error": err}
                else:
                    st.result = {"status": "skipped", "error": f"tool {node['tool']} is not in the suite"}
        return {
            "run_id": run_id,
            "task": task,
            "mode": mode,
            "llm": llm_name,
            "route": {**decision},  # the open JSON object of the result's wire schema
            "plan": plan,
            "answer": {**answer},  # the open JSON object of the result's wire schema
            "evaluation": {**report},  # the open JSON object of the result's wire schema
            "attempts": attempts,
            "model_errors": model_errors,
            "took_s": round(time.perf_counter() - t_start, 3),
        }


def _node_ids(graph: JSONObject) -> list[str]:
    return [n for n, node in _nodes(graph).items() if node.get("kind") == "tool"]


def _objects(value: JSONValue) -> list[JSONObject]:
    """The objects of a JSON array in a tool's result (``[]`` for anything else: absent, null)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


async def _research(
    env: GraphEnv,
    engine: Engine,
    run_id: str,
    parent: int,
    task: str,
    results: dict[str, JSONValue],
    step: PlanStep | None,
    plan: Plan,
    backend: Backend | None,
    model_errors: list[dict[str, str]],
    project_nodes: list[str],
    comparisons: dict[str, Comparison] | None = None,
) -> Answer:
    deps = list(step.get("depends_on") or []) if step else []
    only = (deps + project_nodes) if deps else None
    with Step(
        engine,
        run_id,
        "researcher",
        {"task": task, "step": step["id"] if step else None, "from_steps": only},
        parent_id=parent,
    ) as st:
        items = rs.collect_evidence(results, only)
        try:
            answer = await rs.write_answer(env, task, items, backend, run_id=run_id, parent_id=st.id)
        except RoleModelError as exc:
            model_errors.append({"role": "researcher", "error": str(exc)})
            answer = {**rs.extractive_answer(task, items), "by": "extractive (model failed)"}
        if comparisons:  # the comparison table, every number cited by its cell or its database record
            # the table adds cell and record citations (keys of their own) and ``comparisons``: an Answer still
            answer = cast("Answer", cmp.attach(answer, comparisons))
        st.result = answer
    return answer
