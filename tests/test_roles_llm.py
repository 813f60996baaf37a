"""Backend (1), an OpenAI-compatible endpoint, over real HTTP: a local server on 127.0.0.1 with prepared replies.

Valid replies drive route -> plan -> execute -> evaluate -> re-plan (acceptance 2); a schema-violating reply gets one
repair request, then a clear failure; a reply slower than the time-out fails clearly; replies are cached by request
hash, so the run replays without the endpoint (llm=replay).
"""

from __future__ import annotations

import json

import anyio
import pytest
from roles_support import ChatStub, events, load_fixture, make_roles_core, release

from aisac_core.roles import RoleModelError

TASK = "How does the wall heat transfer coefficient of the packed bed depend on the Reynolds number?"


@pytest.fixture(scope="module")
def rcore(tmp_path_factory, models_dir, shared_embedder):
    c = make_roles_core(tmp_path_factory, models_dir, shared_embedder)
    yield c
    release(c)


@pytest.fixture
def endpoint(rcore):
    """Point the core's settings at a stub (set by the test through ``endpoint(script)``), restore afterwards."""
    s = rcore.settings
    saved = (s.roles.llm, s.roles.llm_base_url, s.roles.llm_timeout_s)
    stubs: list[ChatStub] = []

    def start(script, timeout_s=20.0):
        stub = ChatStub(script).__enter__()
        stubs.append(stub)
        s.roles.llm, s.roles.llm_base_url, s.roles.llm_timeout_s = "openai", stub.url, timeout_s
        return stub

    yield start
    for st in stubs:
        st.__exit__(None, None, None)
    s.roles.llm, s.roles.llm_base_url, s.roles.llm_timeout_s = saved


SUPPORTED = json.dumps({"verdict": "supported", "reason": "the cited sentence states it"})


def test_route_plan_execute_evaluate_replan_all_traced(rcore, endpoint):
    """Acceptance 2: the model plans (its first plan names an unknown tool and is repaired), the first answer fails
    the evaluation, the planner re-plans with the critiques, the second answer passes; every step is traced."""
    from roles_support import run_graph

    stub = endpoint(
        {
            "router": [load_fixture("route_plan.json")],
            "planner": [
                load_fixture("plan_bad_tool.json"),
                load_fixture("plan_valid.json"),
                load_fixture("plan_replan.json"),
            ],
            "researcher": [load_fixture("answer_one.json"), load_fixture("answer_two.json")],
            # the model judges the support of each citation, the cited sentence in front of it
            "support": [SUPPORTED] * 3,
            "evaluator": [load_fixture("critique_fail.json"), load_fixture("critique_pass.json")],
        }
    )
    res = anyio.run(lambda: run_graph(rcore, TASK, mode="standard"))
    assert stub.roles() == [
        "router",
        "planner",
        "planner",
        "researcher",
        "support",
        "evaluator",
        "planner",
        "researcher",
        "support",
        "support",
        "evaluator",
    ]
    body = stub.requests[0]["body"]
    assert body["temperature"] == 0 and body["seed"] == rcore.settings.roles.llm_seed
    repair = stub.requests[2]["body"]["messages"]
    assert repair[-2]["role"] == "assistant" and "unknown tool 'rag_serch'" in repair[-1]["content"]
    replan_prompt = stub.requests[6]["body"]["messages"][-1]["content"]
    assert "failed evaluation" in replan_prompt and "range of Reynolds numbers" in replan_prompt
    assert "rag_search(" in replan_prompt  # the live capability list
    assert res["model_errors"] == []
    a0, a1 = res["attempts"]
    assert not a0["evaluation"]["passed"] and a0["evaluation"]["max_severity"] == 0.9  # one citation < 2 needed
    assert a1["evaluation"]["passed"] and res["evaluation"]["passed"]
    assert res["plan"]["steps"][1]["arguments"]["filters"] == {"section": "results"}
    assert len(res["answer"]["citations"]) == 2 and res["answer"]["by"] == "model"
    evs = events(rcore, res["run_id"])
    steps = [e for e in evs if e["kind"] == "role_step"]
    assert [e["tool"] for e in steps] == [
        "router",
        "planner",
        "coordinator",
        "researcher",
        "evaluator",
        "planner",
        "coordinator",
        "researcher",
        "evaluator",
    ]
    assert steps[1]["result"]["steps"][0]["tool"] == "rag_search"  # the repaired plan is what the trace keeps
    assert steps[4]["result"]["passed"] is False and steps[8]["result"]["passed"] is True
    models = [e for e in evs if e["kind"] == "model_call"]
    assert len(models) == 11 and all(e["parent_id"] in {s["id"] for s in steps} for e in models)
    assert [e["arguments"]["repair"] for e in models if e["tool"] == "planner.model"] == [False, True, False]
    coord = [s["id"] for s in steps if s["tool"] == "coordinator"]
    searches = [e for e in evs if e["kind"] == "tool_call" and e["tool"] == "rag_search"]
    assert [sum(e["parent_id"] == c for e in searches) for c in coord] == [1, 2]

    # replay: the same run without the endpoint answers from the cache
    before = len(stub.requests)
    rcore.settings.roles.llm_base_url = None
    res2 = anyio.run(lambda: run_graph(rcore, TASK, mode="standard", llm="replay"))
    assert len(stub.requests) == before and res2["model_errors"] == []
    assert res2["answer"]["text"] == res["answer"]["text"] and res2["evaluation"]["passed"]
    cached = [e for e in events(rcore, res2["run_id"]) if e["kind"] == "model_call"]
    assert cached and all(e["result"]["cached"] for e in cached)


def test_schema_violation_gets_one_repair_then_a_clear_failure(rcore, endpoint):
    from aisac_core.roles.router import route

    bad = load_fixture("route_violating.json")
    stub = endpoint({"router": [bad, bad]})
    from aisac_core.roles.backends import get_backend

    backend = get_backend(rcore.settings.roles)
    with pytest.raises(RoleModelError) as exc:
        anyio.run(
            lambda: route(
                rcore.roles, "What is Km?", [], None, backend, mode="standard", run_id="run-test-viol", parent_id=None
            )
        )
    msg = str(exc.value)
    assert "after one repair attempt" in msg and "$.intent" in msg and "mood" in msg
    assert stub.roles() == ["router", "router"]
    assert "Your reply is not valid" in stub.requests[1]["body"]["messages"][-1]["content"]

    # not JSON at all, then valid: repaired
    stub2 = endpoint({"router": ["Sure! Here is my answer: intent factual", load_fixture("route_plan.json")]})
    backend = get_backend(rcore.settings.roles)
    out = anyio.run(
        lambda: route(
            rcore.roles, "What is kcat?", [], None, backend, mode="standard", run_id="run-test-rep", parent_id=None
        )
    )
    assert out["decision"] == "plan" and out["by"] == "model" and len(stub2.requests) == 2
    assert "not JSON" in stub2.requests[1]["body"]["messages"][-1]["content"]


def test_timeout_is_a_clear_failure_and_the_run_falls_back(rcore, endpoint):
    from roles_support import run_graph

    from aisac_core.roles.backends import get_backend
    from aisac_core.roles.router import route

    endpoint({"router": [{"sleep": 3, "then": load_fixture("route_plan.json")}]}, timeout_s=0.5)
    backend = get_backend(rcore.settings.roles)
    with pytest.raises(RoleModelError, match=r"did not answer within 0.5 s"):
        anyio.run(
            lambda: route(
                rcore.roles,
                "What is Km of the lipase?",
                [],
                None,
                backend,
                mode="standard",
                run_id="run-test-timeout",
                parent_id=None,
            )
        )
    # a whole run with a silent endpoint: each role records the failure and uses its rules
    endpoint(
        {
            "router": [{"sleep": 3}],
            "planner": [{"sleep": 3}],
            "researcher": [{"sleep": 3}],
            "support": [{"sleep": 3}] * 6,
            "evaluator": [{"sleep": 3}],
        },
        timeout_s=0.5,
    )
    res = anyio.run(lambda: run_graph(rcore, "What is the Km of the lipase?", mode="lite"))
    assert res["model_errors"] and all("did not answer" in m["error"] for m in res["model_errors"])
    assert res["answer"]["citations"] and res["route"]["by"] == "rules (model failed)"
    fails = [e for e in events(rcore, res["run_id"]) if e["kind"] == "model_call"]
    assert fails and all(e["status"] == "exception" for e in fails)
