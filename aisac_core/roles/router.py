"""The Router: intent class, complexity, the context it gathered, and the decision (direct or plan first).

Output (``schemas/route.json``): ``{intent: factual|analytical|exploratory, complexity: low|medium|high,
decision: direct|plan, rationale, context: {rag: [{chunk_id, doc_id, title, score}], memory: [...]}}``.

The deterministic router (:func:`rule_route`) needs no model:

- intent: *analytical* when the question asks for computation, comparison or data (why, how much, compare,
  correlate, fit, trend, average, plot, analyse, CSV, ...); *exploratory* for open surveys (overview, survey,
  literature, state of the art, related work, recent work, ...); *factual* otherwise;
- complexity: by length (<= 12 words low, <= 25 medium, else high), one level up per extra clause
  (" and ", a second question mark, "compare");
- decision: *direct* for a factual, low-complexity question whose gathered context already holds at least the
  mode's minimum number of hits above its minimum score (``MODE_GATES``); *plan* otherwise.

These keyword lists and cut-offs are aisac's own heuristics (not from a published source).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from aisac_core.roles import MODE_GATES
from aisac_core.roles.backends import ask_json
from aisac_core.roles.prompts import render
from aisac_core.roles.schemas import load_schema

if TYPE_CHECKING:
    from aisac_core.jsontypes import JSONObject
    from aisac_core.roles.backends import Backend
    from aisac_core.roles.env import RoleEnv
    from aisac_core.roles.shapes import Route, RouteContext

_ANALYTICAL = re.compile(
    r"\b(why|how (much|many|does|do|did)|compare[sd]?|comparison|correlat\w*|regress\w*|fit(ted|ting)?|trends?|"
    r"statistic\w*|average|mean|median|compute|calculate|plot|analy[sz]e|analysis|effect of|relationship|"
    r"difference between|csv|spreadsheet|excel|parquet)\b",
    re.I,
)
_EXPLORATORY = re.compile(
    r"\b(overview|survey|explore|landscape|related work|literature|state of the art|ideas|open questions|"
    r"what is known|recent (work|advances|papers|research)|review of)\b",
    re.I,
)


def classify(task: str) -> tuple[str, str]:
    """``(intent, complexity)`` of a question by the rules in the module docstring."""
    intent = "analytical" if _ANALYTICAL.search(task) else "exploratory" if _EXPLORATORY.search(task) else "factual"
    words = len(task.split())
    level = 0 if words <= 12 else 1 if words <= 25 else 2
    level += len(re.findall(r"\band\b", task, re.I)) > 0
    level += task.count("?") > 1
    level += bool(re.search(r"\bcompar", task, re.I))
    return intent, ("low", "medium", "high")[min(level, 2)]


#: a search hit as the router reads it: rag's :class:`~aisac_core.rag.results.HitDict` (the roles service's own
#: search) or a ``rag_search`` tool result's hit (compact or full: the graph's router calls the tool)
ContextHit = Mapping[str, object]


def _score(hit: ContextHit) -> float:
    """The hit's score (0 when it has none)."""
    s = hit.get("score")
    return float(s) if isinstance(s, (int, float)) else 0.0


def context_summary(rag_hits: Sequence[ContextHit], memory: list[JSONObject] | None = None) -> RouteContext:
    """The ``context`` part of a route: hit ids and scores (text left out), and the memory items."""
    return {
        "rag": [
            {"chunk_id": h.get("chunk_id"), "doc_id": h.get("doc_id"), "title": h.get("title"), "score": h.get("score")}
            for h in rag_hits
            if h.get("chunk_id")
        ],
        "memory": memory or [],
    }


def rule_route(
    task: str, rag_hits: Sequence[ContextHit], memory: list[JSONObject] | None = None, mode: str = "standard"
) -> Route:
    """The deterministic route (module docstring) of ``task`` given the gathered context."""
    intent, complexity = classify(task)
    gate = MODE_GATES[mode]
    strong = [h for h in rag_hits if _score(h) >= gate["min_score"]]
    direct = intent == "factual" and complexity == "low" and len(strong) >= gate["min_anchors"]
    why = (
        f"{intent} question of {complexity} complexity; {len(strong)} of {len(rag_hits)} context hits score "
        f">= {gate['min_score']} (mode {mode} needs {gate['min_anchors']})"
    )
    return {
        "intent": intent,
        "complexity": complexity,
        "decision": "direct" if direct else "plan",
        "rationale": why + ("; answering directly" if direct else "; planning first"),
        "context": context_summary(rag_hits, memory),
    }


def prompt_values(task: str, rag_hits: Sequence[ContextHit], memory: list[JSONObject] | None) -> dict[str, object]:
    """Values of the router prompt's placeholders."""
    ctx = {
        "rag": [
            {
                "chunk_id": h.get("chunk_id"),
                "title": h.get("title"),
                "score": h.get("score"),
                "section": h.get("section"),
                "page": h.get("page"),
                "text": str(h.get("text") or "")[:300],
            }
            for h in rag_hits
        ],
        "memory": memory or [],
    }
    return {"task": task, "context": ctx, "schema": load_schema("route")}


async def route(
    env: RoleEnv,
    task: str,
    rag_hits: Sequence[ContextHit],
    memory: list[JSONObject] | None,
    backend: Backend | None,
    *,
    mode: str,
    run_id: str,
    parent_id: int | None,
) -> Route:
    """The route of ``task``: by the model when ``backend`` is given (its ``context`` replaced by what was really
    gathered), else by :func:`rule_route`. Adds ``by`` (``model`` / ``rules``) and, for a model, the request hash.

    Raises :class:`~aisac_core.roles.RoleModelError` when the model fails (the caller may fall back)."""
    if backend is None:
        return {**rule_route(task, rag_hits, memory, mode), "by": "rules"}
    text, version = render("router", prompt_values(task, rag_hits, memory), env.settings.prompt_dir)
    got = await ask_json(
        env,
        backend,
        role="router",
        schema="route",
        prompt=text,
        prompt_version=version,
        run_id=run_id,
        parent_id=parent_id,
    )
    # the model's route was validated against the route schema (intent, complexity, decision, rationale)
    out = cast("Route", dict(got["output"]))
    out["context"] = context_summary(rag_hits, memory)
    return {**out, "by": "model", "request_sha256": got["request_sha256"]}
