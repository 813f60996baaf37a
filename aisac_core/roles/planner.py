"""The Planner (tool-less): a plan DAG over the live capability list, its validation, and the template planner.

A plan (``schemas/plan.json``) is ``{rationale?, steps: [{id, goal, tool | helper, arguments, depends_on,
expected_evidence}]}``. :func:`validate_plan` checks it against the schema and then against the capabilities:
every tool must be in the capability list, exactly one of tool/helper per step, ids unique, every
``depends_on`` must name a step, no cycles, at most ``max_steps`` steps, the tool's required arguments present,
and no argument the tool does not take. Every error names the step and says how to fix it, so a model (or the
host's model through ``roles_submit_plan``) can correct the plan.

The template planner (:func:`template_plan`) needs no model: searches with the tools that exist (``rag_search``;
``lit_search`` when the literature server is mounted and the question is about the literature or a re-plan asks
for more evidence), then the ``researcher`` helper. Each re-plan widens the search (more hits, a keyword-only
BM25 query, a section filter suggested by the question); "what is X" and "how many" questions also search the
abstracts and introductions.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypeGuard

from aisac_core.jsontypes import JSONObject, JSONValue
from aisac_core.roles import RoleModelError
from aisac_core.roles.backends import ask_json
from aisac_core.roles.prompts import render
from aisac_core.roles.schemas import load_schema, validate

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from aisac_core.roles.backends import Backend
    from aisac_core.roles.env import RoleEnv
    from aisac_core.roles.results import PlanStep
    from aisac_core.roles.shapes import Capability, Plan, Proposal, StepProposal

HELPERS = {"researcher": "writes the answer from the evidence gathered by the steps it depends on, citing anchors"}
_STOP = set(
    """a an and are as at be by can could did do does for from has have how i in into is it its of on or our
that the their them there these they this to was were what when where which who why will with would about paper
papers describe described describes study studies show shows""".split()
)
#: question words -> rag section filter (the section labels the indexer assigns to chunks)
_SECTION_HINTS = [
    (re.compile(r"\bdata ?sets?\b|\bcorpus\b|\bcorpora\b", re.I), "datasets"),
    (re.compile(r"\bmethods?\b|\bapproach\b|\bmodel\b", re.I), "methods"),
    (re.compile(r"\bresults?\b|\bperformance\b|\baccuracy\b", re.I), "results"),
    (re.compile(r"\bconclu", re.I), "conclusion"),
]
#: "what is / what does X do" and "how many / how much" questions: their answer is usually stated in the abstract
#: or the introduction (a defining sentence, a headline number), so the template plan also searches those sections
_OVERVIEW_HINT = re.compile(r"^\s*what\s+(is|are|was|were|does|do|did)\b|\bhow\s+(many|much)\b", re.I)
_LIT_HINT = re.compile(r"\b(literature|published|recent|papers? on|citations?|doi|arxiv|pubmed|related work)\b", re.I)


def tool_index(tools: Sequence[Capability]) -> dict[str, Capability]:
    """name -> {name, description, input_schema} of a capability list."""
    return {t["name"]: t for t in tools}


def schema_properties(schema: JSONObject) -> JSONObject:
    """The ``properties`` of a tool's input JSON Schema (``{}`` when absent or not an object)."""
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def schema_required(schema: JSONObject) -> list[str]:
    """The ``required`` names of a tool's input JSON Schema (``[]`` when absent; names that are not strings left out)."""
    req = schema.get("required")
    return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


def capability_text(tools: list[Capability]) -> str:
    """The capability list as the planner prompt shows it: one tool per line with its arguments."""
    lines = []
    for t in tools:
        schema = t.get("input_schema") or {}
        req = set(schema_required(schema))
        args = ", ".join(f"{k}{'' if k in req else '?'}" for k in schema_properties(schema))
        desc = " ".join((t.get("description") or "").split())[:300]
        lines.append(f"- {t['name']}({args}): {desc}")
    lines += [f"- helper {k}: {v}" for k, v in HELPERS.items()]
    return "\n".join(lines)


def _closest(name: str, choices: list[str]) -> str:
    from rapidfuzz import process

    best = process.extractOne(name, choices) if choices else None
    return f" (did you mean {best[0]!r}?)" if best and best[1] >= 60 else ""


def is_plan(value: object) -> TypeGuard[Plan]:
    """True when ``value`` is valid against the ``plan`` JSON Schema, whose keys and types :class:`Plan` and
    :class:`~aisac_core.roles.results.PlanStep` declare (``tests/test_roles.py::test_schema_guards_match_their_types`` checks that they agree)."""
    return not validate("plan", value)


def validate_plan(
    plan: object, tools: list[Capability], max_steps: int, proposable: list[Proposal] | None = None
) -> list[str]:
    """Fixable errors of ``plan`` (empty list: valid); see the module docstring for the rules. ``proposable``: tools
    (:func:`aisac_core.roles.tools.proposable`) a step may also name; such a step is valid but is not executed
    (:func:`proposal`)."""
    if not is_plan(plan):
        return validate("plan", plan)
    errors: list[str] = []
    steps = plan["steps"]
    idx = tool_index(tools)
    pidx = tool_index(proposable or [])
    if len(steps) > max_steps:
        errors.append(
            f"$.steps: the plan has {len(steps)} steps; the limit is {max_steps} "
            "(AISAC_ROLES_MAX_PLAN_STEPS): merge searches or drop steps"
        )
    ids = [s["id"] for s in steps]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        errors.append(f"$.steps: duplicate step id(s) {dup}: give every step its own id")
    known = set(ids)
    for n, s in enumerate(steps):
        where = f"$.steps[{n}] (id {s['id']!r})"
        has_tool, has_helper = "tool" in s, "helper" in s
        if has_tool == has_helper:
            errors.append(f"{where}: give exactly one of 'tool' (a tool name) or 'helper' ({', '.join(HELPERS)})")
        if has_tool:
            name = s["tool"]
            if name not in idx and name not in pidx:
                errors.append(
                    f"{where}: unknown tool {name!r}{_closest(name, list(idx))}; use a tool of the "
                    f"capability list: {', '.join(sorted(idx)) or '(none)'}"
                )
            else:
                schema = (idx.get(name) or pidx[name]).get("input_schema") or {}
                props = schema_properties(schema)
                args = s.get("arguments") or {}
                missing = [r for r in schema_required(schema) if r not in args and r != "run_id"]
                if missing:
                    errors.append(f"{where}: tool {name} needs argument(s) {missing}; it takes {sorted(props)}")
                extra = [a for a in args if props and a not in props]
                if extra and not schema.get("additionalProperties"):
                    errors.append(f"{where}: tool {name} takes no argument(s) {extra}; it takes {sorted(props)}")
        for d in s.get("depends_on") or []:
            if d == s["id"]:
                errors.append(f"{where}: a step cannot depend on itself; remove {d!r} from depends_on")
            elif d not in known:
                errors.append(
                    f"{where}: depends_on names {d!r}, which is not a step id of this plan "
                    f"(ids: {', '.join(ids)}); fix the id or remove it"
                )
    if not any(e for e in errors if "depends_on" in e or "duplicate" in e):
        cycle = find_cycle(steps)
        if cycle:
            errors.append(
                "$.steps: the dependencies form a cycle "
                + " -> ".join(cycle)
                + "; a plan must be acyclic: remove one of these dependencies"
            )
    return errors


def find_cycle(steps: list[PlanStep]) -> list[str] | None:
    """A dependency cycle as a list of ids (first id repeated at the end), or None."""
    deps = {s["id"]: list(s.get("depends_on") or []) for s in steps}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for d in deps.get(n, []):
            if d not in deps:
                continue
            if state.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if state.get(d) is None and (c := visit(d)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in deps:
        if state.get(n) is None and (c := visit(n)):
            return c
    return None


def topological_order(steps: list[PlanStep]) -> list[PlanStep]:
    """The steps of a valid plan in an order where every step follows its dependencies (stable)."""
    done: set[str] = set()
    out: list[PlanStep] = []
    pending = list(steps)
    while pending:
        ready = [s for s in pending if all(d in done for d in s.get("depends_on") or [])]
        if not ready:  # not reached for a validated plan
            raise ValueError("plan has a cycle")
        for s in ready:
            out.append(s)
            done.add(s["id"])
        pending = [s for s in pending if s["id"] not in done]
    return out


def keywords(task: str) -> str:
    """The content words of a question (stop words and punctuation dropped), for a BM25 query."""
    words = re.findall(r"[\w][\w.-]*", task)
    return " ".join(w for w in words if w.lower() not in _STOP) or task


def _query_arg(tool: Capability) -> str | None:
    props = schema_properties(tool.get("input_schema") or {})
    for name in ("query", "q", "question", "text"):
        if name in props:
            return name
    return None


def template_plan(
    task: str, route: Mapping[str, object] | None, tools: list[Capability], *, attempt: int = 0, max_steps: int = 8
) -> Plan:
    """The deterministic plan (module docstring). ``attempt`` 0 is the first plan, 1.. the re-plans."""
    idx = tool_index(tools)
    steps: list[PlanStep] = []
    intent = (route or {}).get("intent", "factual")
    if "rag_search" in idx:
        k = (8, 15, 25)[min(attempt, 2)]
        steps.append(
            {
                "id": "search",
                "goal": "find passages of the indexed documents that answer the question",
                "tool": "rag_search",
                "arguments": {"query": "{task}", "k": k},
                "depends_on": [],
                "expected_evidence": "chunks with evidence anchors",
            }
        )
        section = next((sec for rx, sec in _SECTION_HINTS if rx.search(task)), None)
        if section and attempt < 2:
            steps.append(
                {
                    "id": "search_section",
                    "goal": f"passages of the '{section}' sections",
                    "tool": "rag_search",
                    "arguments": {"query": "{task}", "k": 5, "filters": {"section": section}},
                    "depends_on": [],
                    "expected_evidence": f"chunks from {section} sections",
                }
            )
        if _OVERVIEW_HINT.search(task) and attempt < 2:
            steps.append(
                {
                    "id": "search_overview",
                    "goal": "passages of the abstracts and introductions",
                    "tool": "rag_search",
                    "arguments": {"query": "{task}", "k": 8, "filters": {"section": ["abstract", "introduction"]}},
                    "depends_on": [],
                    "expected_evidence": "defining sentences and headline numbers",
                }
            )
        if attempt >= 1:
            steps.append(
                {
                    "id": "search_keywords",
                    "goal": "keyword (BM25) search with the question's content words",
                    "tool": "rag_search",
                    "arguments": {"query": keywords(task), "k": 10, "mode": "sparse"},
                    "depends_on": [],
                    "expected_evidence": "chunks sharing the question's terms",
                }
            )
        if attempt >= 2:
            steps.append(
                {
                    "id": "search_dense",
                    "goal": "semantic (dense) search",
                    "tool": "rag_search",
                    "arguments": {"query": "{task}", "k": 10, "mode": "dense"},
                    "depends_on": [],
                    "expected_evidence": "semantically close chunks",
                }
            )
    lit = idx.get("lit_search")
    if lit is not None and (intent == "exploratory" or _LIT_HINT.search(task) or attempt >= 1 or not steps):
        qa = _query_arg(lit)
        required = set(schema_required(lit.get("input_schema") or {}))
        if qa and required <= {qa, "run_id"}:
            steps.append(
                {
                    "id": "literature",
                    "goal": "find published papers on the question",
                    "tool": "lit_search",
                    "arguments": {qa: keywords(task)},
                    "depends_on": [],
                    "expected_evidence": "paper records (title, DOI or id, abstract)",
                }
            )
    # the researcher cites anchors: ask for whole hits where rag_search has a compact default
    rag_search = idx.get("rag_search")
    if rag_search is not None and "detail" in schema_properties(rag_search.get("input_schema") or {}):
        for st in steps:
            if st.get("tool") == "rag_search":
                st["arguments"] = {**st.get("arguments", {}), "detail": "full"}
    steps = steps[: max_steps - 1]
    steps.append(
        {
            "id": "answer",
            "goal": "write the answer from the evidence, citing anchors",
            "helper": "researcher",
            "arguments": {},
            "depends_on": [s["id"] for s in steps],
            "expected_evidence": "an answer with citations",
        }
    )
    return {"rationale": f"template plan (attempt {attempt}) over the available tools", "steps": steps}


def prompt_values(
    task: str,
    route: Mapping[str, object] | None,
    tools: list[Capability],
    max_steps: int,
    feedback: Sequence[Mapping[str, object]] | None,
) -> dict[str, object]:
    """Values of the planner prompt's placeholders."""
    fb = ""
    if feedback:
        fb = (
            "The previous plan's answer failed evaluation. Critiques to address (fix the plan so the new "
            "evidence answers them):\n"
            + "\n".join(f"- [{c.get('aspect')}, severity {c.get('severity')}] {c.get('text')}" for c in feedback)
            + "\n"
        )
    return {
        "task": task,
        "context": route or {},
        "tools": capability_text(tools),
        "max_steps": str(max_steps),
        "feedback": fb,
        "schema": load_schema("plan"),
    }


async def plan(
    env: RoleEnv,
    task: str,
    route: Mapping[str, object] | None,
    tools: list[Capability],
    backend: Backend | None,
    *,
    run_id: str,
    parent_id: int | None,
    attempt: int = 0,
    feedback: Sequence[Mapping[str, object]] | None = None,
    proposable: list[Proposal] | None = None,
) -> Plan:
    """A validated plan: by the model when ``backend`` is given (validation errors go back to it once), else
    :func:`template_plan`. Adds ``by`` (model / template). ``tools``: the capability list the prompt shows (the
    tools a plan may call); ``proposable``: tools a step may name as a proposal (not shown, not executed).

    Raises :class:`~aisac_core.roles.RoleModelError` when the model's plan is still invalid after the repair."""
    max_steps = env.settings.max_plan_steps
    if backend is None:
        return {**template_plan(task, route, tools, attempt=attempt, max_steps=max_steps), "by": "template"}
    text, version = render("planner", prompt_values(task, route, tools, max_steps, feedback), env.settings.prompt_dir)
    got = await ask_json(
        env,
        backend,
        role="planner",
        schema="plan",
        prompt=text,
        prompt_version=version,
        run_id=run_id,
        parent_id=parent_id,
        check=lambda obj: validate_plan(obj, tools, max_steps, proposable),
    )
    output = got["output"]
    if not is_plan(output):  # not reached: ask_json validated it against the plan schema
        raise RoleModelError("the planner model's reply is not a plan")
    return {**output, "by": "model", "request_sha256": got["request_sha256"]}


def proposal(
    step: PlanStep, tool: Mapping[str, object], arguments: Mapping[str, object], reason: str | None = None
) -> StepProposal:
    """A plan step the coordinator does not execute, as returned to the host: ``{step, tool, goal, arguments,
    read_only, destructive, open_world, reason}``. The host shows it to the user, who decides whether to call the
    tool; the plan may come from a model that read a document's text, so a proposal is never run on its own."""
    what = [w for w, on in (("writes", not tool.get("read_only")), ("deletes", tool.get("destructive"))) if on]
    if tool.get("open_world"):
        what.append("reaches the network")
    return {
        "step": step["id"],
        "tool": step.get("tool", ""),
        "goal": step.get("goal", ""),
        "arguments": arguments,
        "read_only": bool(tool.get("read_only")),
        "destructive": bool(tool.get("destructive")),
        "open_world": bool(tool.get("open_world")),
        "reason": reason
        or f"not executed: {step['tool']} {' and '.join(what) or 'is not read-only'}; a plan only calls "
        "read-only tools on its own. Confirm with the user before calling it.",
    }


_REF = re.compile(r"\{(task|steps\.[A-Za-z][\w-]*(?:\.[\w-]+)*)\}")


def resolve_object(args: Mapping[str, object], task: str, results: Mapping[str, JSONValue]) -> JSONObject:
    """:func:`resolve_arguments` of a plan step's or a graph node's ``arguments`` object: the tool call's arguments."""
    return {str(k): resolve_arguments(v, task, results) for k, v in args.items()}


def resolve_arguments(args: object, task: str, results: Mapping[str, JSONValue]) -> JSONValue:
    """Fill an argument template: ``{task}`` and ``{steps.<id>.<key or index>...}`` inside strings, at any depth.
    A string that is exactly one reference takes the referenced value as is (a list stays a list). ``results``: step
    id -> the step's result. Raises :class:`ValueError` naming the reference that does not resolve, or a value that
    is not JSON (a graph augmentation is Python code: a tuple counts as a JSON array)."""
    if isinstance(args, dict):
        return {str(k): resolve_arguments(v, task, results) for k, v in args.items()}
    if isinstance(args, list | tuple):
        return [resolve_arguments(v, task, results) for v in args]
    if args is None or isinstance(args, int | float | bool):
        return args
    if not isinstance(args, str):
        raise ValueError(f"argument value {args!r} is not JSON (a string, number, boolean, null, list or object)")

    def value(ref: str) -> JSONValue:
        if ref == "task":
            return task
        parts = ref.split(".")[1:]
        cur: JSONValue = dict(results)
        for p in parts:
            if isinstance(cur, dict) and p in cur:
                cur = cur[p]
            elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
                cur = cur[int(p)]
            else:
                raise ValueError(f"argument reference {{{ref}}} does not resolve (at {p!r})")
        return cur

    m = _REF.fullmatch(args)
    if m:
        return value(m.group(1))
    return _REF.sub(lambda m: str(value(m.group(1))), args)
