"""Roles: the cost of the headless graph without a model, and of its pieces.

Store: the Markdown notes of ``examples/`` (written for aisac), indexed once. Measured in-process:

- ``run_graph`` with ``llm="none"`` (router -> template plan -> coordinator through the in-process MCP client ->
  extractive researcher -> evaluator gates), one question per note topic, cycled; wall time per run, and the
  latency of each role step as the trace records it;
- plan validation (:func:`aisac_core.roles.planner.validate_plan`) of an 8-step plan over 40 tools;
- the evidence gate alone (anchor verification re-hashes each cited file).

No target is set; the figures show what a run costs before any model time is added.
"""

from __future__ import annotations

import time
from typing import Any

from .common import Context, Timer, example_notes, latency_summary, make_core, table, temp_dir

QUESTIONS = [
    "What correlation does the wall heat transfer coefficient of the packed bed follow?",
    "What is the Km of beta-galactosidase?",
    "How fast does the methane flame propagate at stoichiometry?",
    "What causes capacity fade of NMC811 cathodes?",
]
RUNS = 8


def _tools(n: int) -> list[dict[str, Any]]:
    return [
        {
            "name": f"srv_tool{i}",
            "description": "a tool",
            "input_schema": {"type": "object", "required": ["query"], "properties": {"query": {}, "k": {}}},
        }
        for i in range(n)
    ]


def run(ctx: Context) -> dict[str, Any]:
    """The roles part; returns the JSON-ready result."""
    import anyio

    from aisac_core.roles.evaluator import evidence_gate
    from aisac_core.roles.planner import validate_plan
    from aisac_core.roles.store import run_events
    from aisac_servers.serving.toolclient import SuiteTools

    async def run_graph(core: Any, task: str, **kw: Any) -> dict[str, Any]:
        async with SuiteTools(core) as tools:
            return dict(await core.roles.run(task, tools=tools, **kw))

    t0 = time.perf_counter()
    with temp_dir(ctx, "roles") as tmp:
        notes = example_notes(tmp)
        n_notes = len(list(notes.glob("*.md")))
        core = make_core(tmp / "store")
        core.settings.warm = False
        try:
            with Timer() as t_index:
                core.rag.indexer.run([notes])
            anyio.run(lambda: run_graph(core, QUESTIONS[0], llm="none"))  # warm-up: models, suite import
            wall: list[float] = []
            per_step: dict[str, list[float]] = {}
            passed = 0
            last: dict[str, Any] = {}
            for i in range(RUNS):
                q = QUESTIONS[i % len(QUESTIONS)]
                t = time.perf_counter()
                last = anyio.run(lambda: run_graph(core, q, llm="none"))
                wall.append((time.perf_counter() - t) * 1000)
                passed += bool(last["evaluation"]["passed"])
                for ev in run_events(core.engine, last["run_id"]):
                    if ev["kind"] == "role_step":
                        per_step.setdefault(ev["tool"], []).append(ev["latency_ms"])
            tools = _tools(40)
            plan = {
                "steps": [
                    {
                        "id": f"s{i}",
                        "goal": "g",
                        "tool": f"srv_tool{i}",
                        "arguments": {"query": "x"},
                        "depends_on": [f"s{i - 1}"] if i else [],
                    }
                    for i in range(7)
                ]
                + [{"id": "answer", "goal": "g", "helper": "researcher", "depends_on": ["s6"]}]
            }
            val_ms = []
            for _ in range(300):
                t = time.perf_counter()
                errs = validate_plan(plan, tools, 8)
                val_ms.append((time.perf_counter() - t) * 1000)
            assert errs == [], errs
            gate_ms = []
            for _ in range(20):
                t = time.perf_counter()
                evidence_gate(core.roles, last["answer"], "standard")
                gate_ms.append((time.perf_counter() - t) * 1000)
        finally:
            core.close()
    ws, vs, gs = latency_summary(wall), latency_summary(val_ms), latency_summary(gate_ms)
    rows = [("run_graph, no model (whole run)", ws["n"], ws["p50_ms"], ws["p95_ms"], ws["mean_ms"])]
    for step in ("router", "planner", "coordinator", "researcher", "evaluator"):
        if step in per_step:
            s = latency_summary(per_step[step])
            rows.append((f"  role step {step} (trace latency)", s["n"], s["p50_ms"], s["p95_ms"], s["mean_ms"]))
    rows += [
        ("validate_plan, 8 steps over 40 tools", vs["n"], vs["p50_ms"], vs["p95_ms"], vs["mean_ms"]),
        (
            f"evidence gate, {len(last['answer']['citations'])} cited anchors",
            gs["n"],
            gs["p50_ms"],
            gs["p95_ms"],
            gs["mean_ms"],
        ),
    ]
    table(
        "roles: headless graph without a model (in-process)",
        ["measure", "n", "p50 ms", "p95 ms", "mean ms"],
        rows,
        caption=f"store: {n_notes} example notes indexed in {t_index.seconds:.1f} s; "
        f"{passed}/{RUNS} runs passed the evaluator (standard mode)",
    )
    summary = [
        {"metric": "run_graph without model p50 ms", "value": ws["p50_ms"], "target": None, "met": None},
        {"metric": "validate_plan p50 ms (8 steps, 40 tools)", "value": vs["p50_ms"], "target": None, "met": None},
    ]
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": summary,
        "run_ms": ws,
        "steps_ms": {k: latency_summary(v) for k, v in per_step.items()},
        "validate_plan_ms": vs,
        "evidence_gate_ms": gs,
        "passed": passed,
        "runs": RUNS,
    }
