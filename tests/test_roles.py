"""Roles without MCP: schemas, plan validation, template planner, router rules, graph data, prompts, gates."""

from __future__ import annotations

import json

import anyio
import pytest
from roles_support import events, load_fixture, make_roles_core, release

from aisac_core.roles import RolesError
from aisac_core.roles.planner import find_cycle, resolve_arguments, template_plan, validate_plan

TOOLS = [
    {
        "name": "rag_search",
        "description": "search the index",
        "input_schema": {
            "type": "object",
            "required": ["query"],
            "properties": {
                "query": {"type": "string"},
                "k": {"type": "integer"},
                "filters": {},
                "mode": {"type": "string"},
            },
        },
    },
    {
        "name": "memory_recall",
        "description": "recall",
        "input_schema": {
            "type": "object",
            "required": ["session_id", "query"],
            "properties": {"session_id": {}, "query": {}},
        },
    },
]
LIT = {
    "name": "lit_search",
    "description": "search literature",
    "input_schema": {"type": "object", "required": ["query"], "properties": {"query": {}, "limit": {}}},
}


@pytest.fixture(scope="module")
def rcore(tmp_path_factory, models_dir, shared_embedder):
    c = make_roles_core(tmp_path_factory, models_dir, shared_embedder)
    yield c
    release(c)


def test_schema_errors_name_path_and_allowed_values():
    from aisac_core.roles.schemas import validate

    errs = validate("route", load_fixture("route_violating.json"))
    assert any(e.startswith("$.intent:") and "'factual'" in e for e in errs), errs
    assert any("mood" in e and "allowed keys" in e for e in errs), errs
    assert validate("route", load_fixture("route_plan.json")) == []
    assert validate("critique", {"critiques": [{"aspect": "a", "text": "t", "severity": 1.5}]})[0].startswith(
        "$.critiques[0].severity"
    )
    too_many = {"critiques": [{"aspect": "a", "text": "t", "severity": 0.1}] * 11}
    assert any("too long" in e or "more than 10" in e or "is too long" in e for e in validate("critique", too_many))


def test_invalid_plans_rejected_with_fixable_errors():
    bad = validate_plan(load_fixture("plan_bad_tool.json"), TOOLS, 8)
    assert len(bad) == 1 and "unknown tool 'rag_serch'" in bad[0] and "did you mean 'rag_search'" in bad[0]
    cyc = validate_plan(load_fixture("plan_cycle.json"), TOOLS, 8)
    assert any("cycle" in e and "a -> b -> a" in e for e in cyc), cyc
    dangling = {
        "steps": [{"id": "s1", "goal": "g", "tool": "rag_search", "arguments": {"query": "x"}, "depends_on": ["s9"]}]
    }
    assert any("'s9', which is not a step id" in e for e in validate_plan(dangling, TOOLS, 8))
    many = {
        "steps": [
            {"id": f"s{i}", "goal": "g", "tool": "rag_search", "arguments": {"query": "x"}, "depends_on": []}
            for i in range(5)
        ]
    }
    assert any("5 steps; the limit is 3" in e for e in validate_plan(many, TOOLS, 3))
    both = {"steps": [{"id": "s1", "goal": "g", "tool": "rag_search", "helper": "researcher", "depends_on": []}]}
    assert any("exactly one of 'tool'" in e for e in validate_plan(both, TOOLS, 8))
    args = {
        "steps": [
            {"id": "s1", "goal": "g", "tool": "memory_recall", "arguments": {"query": "x", "top": 3}, "depends_on": []}
        ]
    }
    errs = validate_plan(args, TOOLS, 8)
    assert any("needs argument(s) ['session_id']" in e for e in errs) and any("['top']" in e for e in errs)
    assert validate_plan(load_fixture("plan_valid.json"), TOOLS, 8) == []
    assert find_cycle(load_fixture("plan_valid.json")["steps"]) is None


def test_template_planner_degrades_without_literature_and_uses_it_when_present():
    p0 = template_plan("Which datasets does the S2ORC paper describe?", None, TOOLS)
    assert validate_plan(p0, TOOLS, 8) == []
    assert [s.get("tool") or s.get("helper") for s in p0["steps"]] == ["rag_search", "rag_search", "researcher"]
    assert p0["steps"][1]["arguments"]["filters"] == {"section": "datasets"}
    assert "lit_search" not in json.dumps(p0)
    p1 = template_plan("recent literature on perovskite stability", {"intent": "exploratory"}, TOOLS + [LIT])
    assert validate_plan(p1, TOOLS + [LIT], 8) == [] and any(s.get("tool") == "lit_search" for s in p1["steps"])
    replan = template_plan("heat transfer correlation", None, TOOLS, attempt=2)
    assert validate_plan(replan, TOOLS, 8) == [] and replan["steps"][0]["arguments"]["k"] == 25
    only = template_plan("x", None, [])["steps"]
    assert len(only) == 1 and only[0]["helper"] == "researcher" and only[0]["depends_on"] == []


def test_argument_templates():
    res = {"s1": {"hits": [{"doc_id": "d1", "page": 3}]}}
    assert resolve_arguments(
        {"q": "{task}!", "d": "{steps.s1.hits.0.doc_id}", "n": "{steps.s1.hits.0.page}"}, "why", res
    ) == {"q": "why!", "d": "d1", "n": 3}
    with pytest.raises(ValueError, match=r"steps.s2.x"):
        resolve_arguments("{steps.s2.x}", "t", res)


def test_router_rules():
    from aisac_core.roles.router import classify, rule_route

    assert classify("Which datasets does the S2ORC paper describe?") == ("factual", "low")
    assert classify("How does the Nusselt number correlate with Reynolds number?")[0] == "analytical"
    assert classify("Give me an overview of the literature on zeolite coking")[0] == "exploratory"
    strong = [{"chunk_id": "a", "score": 0.9}, {"chunk_id": "b", "score": 0.5}]
    assert rule_route("What is Km of the lipase?", strong)["decision"] == "direct"
    assert rule_route("What is Km of the lipase?", strong[:1])["decision"] == "plan"  # standard needs 2
    assert rule_route("What is Km of the lipase?", strong[:1], mode="lite")["decision"] == "direct"


def test_graph_is_data_and_can_be_augmented():
    from aisac_core.roles.graph import default_graph, validate_graph

    g = default_graph()
    assert set(g["nodes"]) == {"router", "planner", "coordinator", "researcher", "evaluator"}
    assert {"from": "evaluator", "to": "planner", "when": "failed", "replan": True} in g["edges"]

    def add_node(graph):
        graph["nodes"]["docs"] = {"kind": "tool", "tool": "rag_list_documents", "arguments": {}}
        graph["edges"].append({"from": "planner", "to": "docs"})
        graph["replan_limit"] = 1
        return graph

    g2 = default_graph(add_node)
    assert g2["nodes"]["docs"]["tool"] == "rag_list_documents" and "docs" not in default_graph()["nodes"]
    in_place = default_graph(
        lambda graph: (
            graph["nodes"].update(x={"kind": "tool", "tool": "t"})
            or graph["edges"].append({"from": "router", "to": "x"})
        )
    )
    assert in_place["nodes"]["x"]["tool"] == "t"  # edited in place, returned None
    with pytest.raises(RolesError, match="core node 'planner' is missing"):
        default_graph(lambda graph: {**graph, "nodes": {k: v for k, v in graph["nodes"].items() if k != "planner"}})
    assert any(
        "add an edge" in e for e in validate_graph({**g, "nodes": {**g["nodes"], "x": {"kind": "tool", "tool": "t"}}})
    )


def test_prompts_are_versioned_and_overlaid(tmp_path):
    from aisac_core.roles.prompts import load_prompt, render

    text, version, src = load_prompt("planner")
    assert version == "2" and src.endswith("planner.md")
    out, _ = render(
        "planner",
        {
            "task": "Q?",
            "tools": "- rag_search(query)",
            "max_steps": "8",
            "context": {},
            "feedback": "",
            "schema": {"type": "object"},
        },
    )
    assert "Q?" in out and "{task}" in out and "{steps.<id>.<field>...}" in out and "aisac prompt" not in out
    (tmp_path / "router.md").write_text("<!-- aisac prompt: router, version 7 -->\nProject router for {task}\n")
    out, version = render("router", {"task": "T"}, tmp_path)
    assert out == "Project router for T\n" and version == "overlay:7"
    assert (
        render("planner", {"task": "T"}, tmp_path)[1] == "2"
    )  # no overlay file: the packaged prompt (version 2: quoted data)
    with pytest.raises(RolesError):
        load_prompt("nonsense")


def test_evaluator_gates(rcore, tmp_path):
    from aisac_core.roles.evaluator import automatic_checks, data_gate, exec_gate, summarize
    from aisac_core.roles.researcher import citation, collect_evidence

    hits = rcore.rag.search("wall heat transfer coefficient Nusselt", 3).as_dict()
    items = collect_evidence({"s1": hits})
    answer = {"text": "x [1] [2]", "citations": [citation(1, items[0]), citation(2, items[1])]}
    gates, crit = automatic_checks(rcore.roles, answer, [], "standard")
    assert gates["evidence"]["passed"] and gates["evidence"]["verified_counted"] == 2 and crit == []
    gates, crit = automatic_checks(rcore.roles, answer, [], "strict")
    assert not gates["evidence"]["passed"] and crit[0]["severity"] == 0.9 and "needs 3" in crit[0]["text"]
    forged = json.loads(json.dumps(answer))
    forged["citations"][0]["anchor"]["chunk_sha256"] = "0" * 64
    gates, crit = automatic_checks(rcore.roles, forged, [], "lite")
    assert gates["evidence"]["anchors"][0]["status"] == "chunk_changed" and max(c["severity"] for c in crit) == 1.0
    # data gate: an HTML error page saved as .csv, and a missing file
    bad = tmp_path / "table.csv"
    bad.write_text("<!DOCTYPE html><html><head><title>404 Not Found</title></head></html>")
    ev = [
        {"id": 7, "kind": "tool_call", "tool": "data_load", "arguments": {"path": str(bad)}, "status": "ok"},
        {
            "id": 8,
            "kind": "tool_call",
            "tool": "data_load",
            "arguments": {"path": str(tmp_path / "nope.csv")},
            "status": "ok",
        },
    ]
    d, dc = data_gate({}, ev)
    assert not d["passed"] and "HTML page" in dc[0]["text"] and "does not exist" in dc[1]["text"]
    runs = [
        {
            "id": 9,
            "kind": "tool_call",
            "tool": "data_code_run",
            "status": "ok",
            "result": {"ok": False, "error": "ZeroDivisionError"},
        },
        {"id": 10, "kind": "tool_call", "tool": "data_code_run", "status": "ok", "result": {"ok": True}},
    ]
    x, xc = exec_gate({}, runs)
    assert not x["passed"] and xc[0]["evidence_refs"] == ["9"] and "ZeroDivisionError" in xc[0]["text"]
    assert exec_gate({"code_runs": [10]}, runs)[0]["passed"]
    # a long run answered {pending, job_id}: its outcome is the later data_code_job_status of that job
    pending = [
        {
            "id": 11,
            "kind": "tool_call",
            "tool": "data_code_run",
            "status": "ok",
            "result": {"ok": False, "pending": True, "job_id": "j1"},
        }
    ]
    assert not exec_gate({}, pending)[0]["passed"]
    polled = pending + [
        {
            "id": 12,
            "kind": "tool_call",
            "tool": "data_code_job_status",
            "status": "ok",
            "arguments": {"job_id": "j1"},
            "result": {"ok": False, "pending": True},
        },
        {
            "id": 13,
            "kind": "tool_call",
            "tool": "data_code_job_status",
            "status": "ok",
            "arguments": {"job_id": "j1"},
            "result": {"ok": True, "finished_at": "t"},
        },
    ]
    assert exec_gate({}, polled)[0]["passed"]
    # a relative data_load argument is judged by the resolved path the data server reported
    rel = [
        {
            "id": 14,
            "kind": "tool_call",
            "tool": "data_load",
            "arguments": {"path": "tables/x.csv"},
            "status": "ok",
            "result": {"frames": [{"source": {"path": str(bad)}}]},
        }
    ]
    d, dc = data_gate({}, rel)
    assert not d["passed"] and d["files"][0]["path"] == str(bad)
    s = summarize([{"severity": 0.5}, {"severity": 0.2}], 0.4, 0.8)
    assert s["mean_severity"] == 0.35 and s["passed"]
    assert not summarize([{"severity": 0.9}], 0.4, 0.8)["passed"] and summarize([], 0.4, 0.8)["passed"]


def test_run_graph_without_model_answers_with_citations_and_traces_every_step(rcore):
    from roles_support import run_graph

    from aisac_core.roles.graph import default_graph

    def add_node(graph):
        graph["nodes"]["docs"] = {"kind": "tool", "tool": "rag_list_documents", "arguments": {}}
        graph["edges"].append({"from": "planner", "to": "docs"})
        graph["nodes"]["listing"] = {"kind": "tool", "tool": "rag_list_documents", "arguments": {"limit": 5}}
        graph["edges"].append({"from": "evaluator", "to": "listing"})
        graph["nodes"]["absent"] = {"kind": "tool", "tool": "proj_not_mounted"}
        graph["edges"].append({"from": "router", "to": "absent"})
        return graph

    res = anyio.run(
        lambda: run_graph(
            rcore,
            "What correlation does the wall heat transfer coefficient follow?",
            llm="none",
            graph=default_graph(add_node),
        )
    )
    ans = res["answer"]
    assert ans["by"] == "extractive" and "[1]" in ans["text"]
    assert any("heat_transfer.md" in c["path"] for c in ans["citations"])
    assert "Nu = 0.17 Re^0.79" in ans["text"]
    # one passage of the corpus states the correlation: the answer quotes it alone, and the two-citation evidence
    # gate says so (it is not passed by a second sentence that states no correlation)
    gate = res["evaluation"]["gates"]["evidence"]
    assert not gate["passed"] and gate["verified_counted"] == 1 and gate["required"] == 2
    evs = events(rcore, res["run_id"])
    steps = {e["tool"]: e for e in evs if e["kind"] == "role_step"}
    assert {"router", "coordinator", "researcher", "evaluator"} <= set(steps)
    assert all(e["status"] == "ok" for e in steps.values())
    assert steps["router"]["result"]["decision"] in ("direct", "plan")
    assert steps["researcher"]["parent_id"] == steps["coordinator"]["id"]
    calls = [e for e in evs if e["kind"] == "tool_call"]
    assert any(e["tool"] == "rag_search" and e["parent_id"] == steps["router"]["id"] for e in calls)
    assert any(e["tool"] == "rag_search" and e["parent_id"] == steps["coordinator"]["id"] for e in calls)
    assert any(e["tool"] == "rag_list_documents" and e["parent_id"] == steps["coordinator"]["id"] for e in calls)
    assert steps["evaluator"]["result"]["passed"] is False  # the gate above: one stating passage of two
    assert any(e["tool"] == "rag_list_documents" and e["parent_id"] == steps["listing"]["id"] for e in calls)
    assert steps["listing"]["result"]["status"] == "ok"
    assert {
        "id": "absent",
        "tool": "proj_not_mounted",
        "status": "skipped",
        "error": "tool proj_not_mounted is not in the suite",
    } in steps["coordinator"]["result"]["executed"]
    with pytest.raises(RolesError, match="task is empty"):
        anyio.run(lambda: run_graph(rcore, "  "))
    with pytest.raises(RolesError, match="mode must be one of"):
        anyio.run(lambda: run_graph(rcore, "x", mode="extreme"))


def test_router_context_includes_memory_recall_of_the_session(rcore):
    from roles_support import run_graph

    sid = rcore.memory.start_session("lipase work")["session_id"]
    rcore.memory.add_turn(sid, "user", "We measure the lipase at pH 7.5")
    rcore.memory.add_turn(sid, "assistant", "Noted: pH 7.5, 30 degrees Celsius")
    res = anyio.run(
        lambda: run_graph(rcore, "What is the kcat of the lipase?", llm="none", session_id=sid, mode="lite")
    )
    assert any(m["kind"] == "recent" and "pH 7.5" in m["content"] for m in res["route"]["context"]["memory"])
    evs = events(rcore, res["run_id"])
    router = next(e for e in evs if e["kind"] == "role_step" and e["tool"] == "router")
    assert any(e["tool"] == "memory_recall" and e["parent_id"] == router["id"] for e in evs)
    assert any("enzyme_kinetics.md" in c["path"] for c in res["answer"]["citations"])


def test_ask_cli_rejects_bad_input_with_a_message(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    aisac = str(Path(sys.executable).parent / "aisac")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "AISAC_WARM": "0"}
    env.pop("AISAC_ROLES_LLM_BASE_URL", None)
    for args, msg in (
        (["  "], "task is empty"),
        (
            ["What?", "--mode", "extreme"],
            "mode 'extreme' is not one of lite, standard, strict",
        ),  # checked before any owner starts (issue 31)
        (["What?", "--llm", "openai"], "AISAC_ROLES_LLM_BASE_URL"),
        (["What?", "--llm", "sampling"], "offers sampling"),
    ):
        p = subprocess.run(
            [aisac, "ask", *args, "--data-dir", str(tmp_path / "store")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 1 and msg in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)


def test_served_project_augmentation_is_used_by_active_graph():
    from types import SimpleNamespace

    from aisac_core.roles.graph import active_graph

    def aug(graph):
        graph["nodes"]["check"] = {"kind": "tool", "tool": "proj_check", "arguments": {"text": "{task}"}}
        graph["edges"].append({"from": "evaluator", "to": "check"})
        return graph

    served = SimpleNamespace(graph_augment=aug)  # a roles service of a served project with that augmentation
    assert active_graph(served)["nodes"]["check"]["tool"] == "proj_check"
    assert "check" not in active_graph()["nodes"]
    assert "check" not in active_graph(SimpleNamespace(graph_augment=None))["nodes"]


def test_roles_service_built_from_its_parts(tmp_path):
    """The service needs no application context: the roles settings, a real SQLite store, and rag's typed interface."""
    from aisac_core.roles.service import RolesService
    from aisac_core.roles.store import run_events, submissions
    from aisac_core.settings import RolesSettings
    from aisac_core.store.sql import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'aisac.db'}")
    verified: list[dict] = []

    def aug(graph):
        graph["nodes"]["check"] = {"kind": "tool", "tool": "proj_check", "arguments": {"text": "{task}"}}
        graph["edges"].append({"from": "evaluator", "to": "check"})

    def verify(anchor):
        verified.append(anchor)
        return {"status": "ok", "chunk_id": anchor["chunk_id"], "path": anchor.get("path"), "detail": None}

    hit = {"chunk_id": "c1", "score": 0.9, "anchor": {"chunk_id": "c1", "sha256": "ab", "path": "/x.md", "score": 0.9}}

    class Corpus:  # rag's interface as the roles read it (aisac_core.roles.env.Corpus)
        def search_hits(self, query, k):
            return [hit][:k]

        def get_chunk(self, chunk_id):
            return None

        def adjacent_chunk(self, chunk_id, delta):
            return None

        def verify_cited(self, anchor):
            return verify(anchor)

    docs = Corpus()
    roles = RolesService(RolesSettings(llm="none"), lambda: engine, corpus=lambda: docs, graph_augment=aug)
    try:
        assert "check" in roles.active_graph()["nodes"]
        route = anyio.run(lambda: roles.route("What is Km?", run_id="run-svc", mode="lite"))
        assert (
            route["by"] == "rules" and route["run_id"] == "run-svc" and route["context"]["rag"][0]["chunk_id"] == "c1"
        )
        ev = anyio.run(
            lambda: roles.evaluate("What is Km?", "Km = 0.42 mM [1]", run_id="run-svc", citations=[hit], mode="lite")
        )
        assert ev["gates"]["evidence"]["passed"] and verified and ev["verdict"] == "automatic checks passed"
        with pytest.raises(RolesError, match="not valid"):
            anyio.run(lambda: roles.submit_route({"intent": "mood"}, run_id="run-svc"))
        assert len(submissions(engine, "run-svc")) == 1
        assert [e["tool"] for e in run_events(engine, "run-svc")] == ["router", "evaluator"]
        with pytest.raises(RolesError, match="unknown job id"):
            roles.job_status("rjob-nope")
        assert roles.job_status() == {"jobs": []}
    finally:
        engine.dispose()


def test_ask_runs_in_the_store_owner_when_one_is_serving(tmp_path, models_dir, shared_embedder):
    """With ``aisac serve --transport http`` owning the store (it holds the lock), ``aisac ask`` sends the run to it
    as ``roles_run`` instead of failing on the lock."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from conftest import http_server, make_settings
    from fixtures_gen import ENZYME_MD

    from aisac_core.context import AppContext

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "enzyme_kinetics.md").write_text(ENZYME_MD, encoding="utf-8")
    store = tmp_path / "store"
    c = AppContext(make_settings(store, models_dir, warm=False), embedder=shared_embedder)
    c.rag.indexer.run([notes])
    c.close()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "AISAC_DATA_DIR": str(store), "AISAC_WARM": "0", "COLUMNS": "200"}
    env.pop("AISAC_ROLES_LLM_BASE_URL", None)
    aisac = str(Path(sys.executable).parent / "aisac")
    with http_server(env, timeout=60):
        import time

        from aisac_core.owner import live_owner

        deadline = time.monotonic() + 30
        while live_owner(store) is None and time.monotonic() < deadline:  # owner.json is written once it listens
            time.sleep(0.2)
        assert live_owner(store) is not None
        p = subprocess.run(
            [aisac, "ask", "What is the Km of the lipase?", "--mode", "lite"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert p.returncode == 0, p.stderr
    assert "owner process" in p.stderr and "run id: run-" in p.stdout and "0.42 mM" in p.stdout
    assert "evidence gate: ok" in p.stdout


def test_schema_guards_match_their_types():
    """The TypeGuards that turn a schema-valid JSON value into a typed plan or critique report (issue 40): each type
    declares its schema's keys, and the guard runs the schema (a plan without steps, a critique without its required
    keys and a value of another JSON type are refused)."""
    from aisac_core.roles.evaluator import is_critique_report
    from aisac_core.roles.planner import is_plan
    from aisac_core.roles.schemas import load_schema
    from aisac_core.roles.shapes import CritiqueReport, Plan

    assert set(load_schema("plan")["properties"]) <= set(Plan.__annotations__)
    assert set(load_schema("critique")["properties"]) == set(CritiqueReport.__annotations__)
    plan = {"steps": [{"id": "a", "goal": "answer it", "helper": "researcher", "depends_on": []}]}
    assert is_plan(plan)
    assert not is_plan({"steps": []}) and not is_plan([plan]) and not is_plan(None)
    assert is_critique_report({"critiques": [{"aspect": "grounding", "text": "uncited claim", "severity": 0.5}]})
    assert not is_critique_report({"critiques": [{"aspect": "grounding"}]}) and not is_critique_report("critiques")
