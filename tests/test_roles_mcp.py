"""The roles server in an MCP client session (fastmcp Client in memory, the whole suite).

Acceptance 3 (the host's own model): get the planner prompt, submit a bad plan (error), submit the fixed plan
(stored). Also: roles_run end to end, roles_evaluate on rag hits, MCP sampling in both protocol eras.
"""

from __future__ import annotations

import json

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from roles_support import events, load_fixture, make_roles_core, release

pytestmark = pytest.mark.anyio

ROLES_TOOLS = {
    "roles_route",
    "roles_plan",
    "roles_evaluate",
    "roles_run",
    "roles_job_status",
    "roles_submit_route",
    "roles_submit_plan",
    "roles_submit_critique",
}


@pytest.fixture(scope="module")
def rcore(tmp_path_factory, models_dir, shared_embedder):
    c = make_roles_core(tmp_path_factory, models_dir, shared_embedder)
    yield c
    release(c)


def _suite(core):
    from aisac_servers.serving.suite import build

    return build(app=core, lifespan=False)  # the module's core stays open between tests


async def test_tools_and_prompts_listed(rcore):
    async with Client(_suite(rcore)) as c:
        tools = {t.name: t for t in await c.list_tools()}
        prompts = {p.name for p in await c.list_prompts()}
    assert ROLES_TOOLS <= set(tools)
    assert {"roles_router", "roles_planner", "roles_evaluator"} <= prompts
    for name in ROLES_TOOLS:
        assert len(tools[name].description or "") > 80, name


async def test_host_model_planner_prompt_bad_plan_then_fixed_plan(rcore):
    """Acceptance 3."""
    from aisac_core.roles.store import submissions

    run = "run-host-model-1"
    async with Client(_suite(rcore)) as c:
        prompt = await c.get_prompt("roles_planner", {"task": "What correlation does the heat transfer follow?"})
        text = prompt.messages[0].content.text
        assert "You are the Planner" in text and "- rag_search(query, k?, filters?, mode?, detail?)" in text
        assert "roles_submit_plan" in text and "roles_run(" not in text  # the roles' own tools are hidden
        with pytest.raises(ToolError) as bad:
            await c.call_tool(
                "roles_submit_plan", {"plan": load_fixture("plan_bad_tool.json")}, meta={"aisac/run_id": run}
            )
        assert "unknown tool 'rag_serch'" in str(bad.value) and "did you mean 'rag_search'" in str(bad.value)
        with pytest.raises(ToolError) as cyc:
            await c.call_tool(
                "roles_submit_plan", {"plan": load_fixture("plan_cycle.json")}, meta={"aisac/run_id": run}
            )
        assert "cycle a -> b -> a" in str(cyc.value)
        with pytest.raises(ToolError) as schema:
            await c.call_tool("roles_submit_plan", {"plan": {"steps": [{"id": "s1"}]}}, meta={"aisac/run_id": run})
        assert "$.steps[0]: 'goal' is a required property" in str(schema.value)
        ok = await c.call_tool(
            "roles_submit_plan", {"plan": load_fixture("plan_valid.json")}, meta={"aisac/run_id": run}
        )
    out = ok.structured_content
    assert out["stored"] is True and out["run_id"] == run
    subs = submissions(rcore.engine, run, "plan")
    assert [s["valid"] for s in subs] == [False, False, False, True]
    assert subs[-1]["payload"] == load_fixture("plan_valid.json") and subs[0]["errors"]
    evs = events(rcore, run)
    step = next(e for e in evs if e["kind"] == "role_step")
    assert step["id"] == out["event_id"] and step["tool"] == "planner" and step["result"]["steps"][0]["id"] == "s1"
    calls = [(e["tool"], e["status"]) for e in evs if e["kind"] == "tool_call"]
    assert calls == [("roles_submit_plan", "tool_error")] * 3 + [("roles_submit_plan", "ok")]


async def test_submit_route_and_critique(rcore):
    async with Client(_suite(rcore)) as c:
        with pytest.raises(ToolError, match=r"\$\.intent"):
            await c.call_tool("roles_submit_route", {"route": load_fixture("route_violating.json")})
        r = await c.call_tool("roles_submit_route", {"route": load_fixture("route_plan.json")})
        assert r.structured_content["stored"]
        crit = await c.call_tool("roles_submit_critique", {"critique": load_fixture("critique_fail.json")})
        assert crit.structured_content["passed"] is False and crit.structured_content["max_severity"] == 0.85
        with pytest.raises(ToolError, match="severity"):
            await c.call_tool(
                "roles_submit_critique", {"critique": {"critiques": [{"aspect": "a", "text": "t", "severity": 2}]}}
            )
        p = await c.get_prompt("roles_evaluator", {"task": "Q", "answer": "A [1]"})
        assert "You are the Evaluator" in p.messages[0].content.text
        p = await c.get_prompt("roles_router", {"task": "What is the Km of the lipase?"})
        assert "0.42 mM" in p.messages[0].content.text  # the gathered context is in the prompt


async def test_roles_run_route_plan_evaluate_tools(rcore):
    async with Client(_suite(rcore)) as c:
        r = await c.call_tool("roles_run", {"task": "What is the Km of the lipase?", "llm": "none", "mode": "lite"})
        out = r.structured_content
        assert out["status"] == "done" and out["answer"]["citations"]
        assert any("enzyme_kinetics.md" in (x.get("path") or "") for x in out["answer"]["citations"])
        st = await c.call_tool("roles_job_status", {"job_id": out["job_id"]})
        assert st.structured_content["status"] == "done"
        with pytest.raises(ToolError, match="unknown job id"):
            await c.call_tool("roles_job_status", {"job_id": "rjob-nope"})
        with pytest.raises(ToolError, match="unknown job id"):  # rag_job_cancel reaches the roles' jobs too
            await c.call_tool("rag_job_cancel", {"job_id": "rjob-nope"})
        rt = await c.call_tool("roles_route", {"task": "What is the Km of the lipase?", "llm": "none"})
        assert rt.structured_content["intent"] == "factual" and rt.structured_content["context"]["rag"]
        pl = await c.call_tool("roles_plan", {"task": "What is the Km of the lipase?", "llm": "none"})
        assert pl.structured_content["steps"][-1]["helper"] == "researcher"
        hits = (await c.call_tool("rag_search", {"query": "Km of the lipase", "k": 2})).structured_content["hits"]
        ev = await c.call_tool(
            "roles_evaluate",
            {"task": "Km?", "answer": "Km = 0.42 mM [1][2]", "citations": hits, "mode": "standard", "llm": "none"},
        )
        assert ev.structured_content["gates"]["evidence"]["verified_counted"] >= 1
        ev1 = await c.call_tool(
            "roles_evaluate",
            {"task": "Km?", "answer": "Km = 0.42 mM", "citations": hits[:1], "mode": "strict", "llm": "none"},
        )
        assert ev1.structured_content["passed"] is False
        with pytest.raises(ToolError, match="no chunk_id"):
            await c.call_tool("roles_evaluate", {"task": "Km?", "answer": "x", "citations": [{"x": 1}]})
        with pytest.raises(ToolError, match="needs an MCP client that offers sampling"):
            await c.call_tool("roles_route", {"task": "Km?", "llm": "sampling"})
        with pytest.raises(ToolError, match="AISAC_ROLES_LLM_BASE_URL"):
            await c.call_tool("roles_route", {"task": "Km?", "llm": "openai"})
    evs = events(rcore, out["run_id"])
    assert {"router", "coordinator", "researcher", "evaluator"} <= {e["tool"] for e in evs if e["kind"] == "role_step"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sampling_backend_both_protocol_eras(rcore, mode):
    """MCP sampling: 2026-07-28 (InputRequiredResult, the tool re-entered with the reply) and handshake era
    (sampling/createMessage)."""
    seen: list[str] = []

    def handler(messages, params, _ctx):  # noqa: ANN001, ANN202
        seen.append(messages[-1].content.text)
        assert params.temperature == 0
        return json.dumps(load_fixture("route_plan.json"))

    async with Client(_suite(rcore), sampling_handler=handler, mode=mode) as c:
        r = await c.call_tool("roles_route", {"task": f"Compare the two notes ({mode})", "llm": "sampling"})
    out = r.structured_content
    assert out["by"] == "model" and out["decision"] == "plan" and out["intent"] == "analytical"
    assert len(seen) == 1 and "You are the Router" in seen[0]
    models = [e for e in events(rcore, out["run_id"]) if e["kind"] == "model_call"]
    assert models and models[-1]["arguments"]["backend"] == "sampling"


async def test_roles_run_with_client_sampling_handshake_era(rcore):
    """The whole graph on the client's model (sampling/createMessage on a handshake-era connection)."""
    from roles_support import ROLE_MARKERS

    replies = {
        "router": "route_plan.json",
        "planner": "plan_valid.json",
        "researcher": "answer_two.json",
        "evaluator": "critique_pass.json",
    }
    seen: list[str] = []

    def handler(messages, params, _ctx):  # noqa: ANN001, ANN202
        text = messages[-1].content.text
        role = next(r for r, mark in ROLE_MARKERS.items() if mark in text)
        seen.append(role)
        if role == "support":  # the model judges each citation's support, the cited sentence in front of it
            return json.dumps({"verdict": "supported", "reason": "the cited sentence states it"})
        return json.dumps(load_fixture(replies[role]))

    task = "How does the Nusselt number of the packed bed depend on the Reynolds number?"
    async with Client(_suite(rcore), sampling_handler=handler, mode="legacy") as c:
        r = await c.call_tool("roles_run", {"task": task, "llm": "sampling", "mode": "standard"})
    out = r.structured_content
    assert seen == ["router", "planner", "researcher", "support", "support", "evaluator"]
    assert out["status"] == "done" and out["llm"] == "sampling" and out["model_errors"] == []
    assert out["answer"]["by"] == "model" and len(out["answer"]["citations"]) == 2 and out["evaluation"]["passed"]
    async with Client(_suite(rcore), sampling_handler=handler) as c:  # 2026-07-28: refused with a clear message
        with pytest.raises(ToolError, match="handshake-era"):
            await c.call_tool("roles_run", {"task": task, "llm": "sampling"})


async def test_capability_list_hides_roles_and_destructive_tools(rcore):
    from aisac_core.roles.tools import capabilities
    from aisac_servers.serving.toolclient import SuiteTools

    async with SuiteTools(rcore, _suite(rcore)) as s:
        names = {t["name"] for t in await capabilities(s)}
    assert "rag_search" in names and "memory_recall" in names
    assert not {n for n in names if n.startswith("roles_")}
    assert not names & {"rag_remove", "memory_delete_session", "trace_prune"}
