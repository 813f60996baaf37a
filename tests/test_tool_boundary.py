"""The typed boundary, seen by a host: every tool of the suite is called at least once, over an in-memory MCP client,
on a small store, and each structured result is validated against the output schema ``tools/list`` advertises
(typed, ``required``, ``additionalProperties: false`` where the result type is closed). Error results are allowed
only for the tools listed in :data:`MAY_FAIL` (they need an LLM or a web service this store does not have); every
other tool must answer with a result its schema accepts.

One module-scoped store and client: about 15-25 s on two cores, most of it indexing three small documents and the
code session's worker."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import jsonschema
import pytest
from fastmcp import Client
from literature_replay import ReplayServer
from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

pytestmark = pytest.mark.anyio

#: tools that may answer with an error here, and why: the submit tools are called with no run waiting for them
# the three submit tools: no run is waiting for them; lit_materials: no OPTIMADE provider is reachable here (its
# answers against the reference server are checked in tests/test_optimade.py); an unreachable provider is an error
MAY_FAIL = {"roles_submit_route", "roles_submit_plan", "roles_submit_critique", "lit_materials"}
DOI = "10.5555/aisac.2021.001"


# closed result types for the boundary's own tests (comments: a docstring would become the schema's description)
@with_config(ConfigDict(extra="forbid"))
class Pending(TypedDict):
    status: Literal["running"]
    job_id: str


@with_config(ConfigDict(extra="forbid"))
class Done(TypedDict):
    status: Literal["done"]
    result: str


# a closed result type for the boundary's own test (a comment: a docstring would become the schema's description)
@with_config(ConfigDict(extra="forbid"))
class Closed(TypedDict):
    n: int
    label: str | None


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def boundary_app(tmp_path_factory, models_dir, shared_embedder):  # noqa: ANN001, ANN201
    from conftest import make_settings
    from fixtures_gen import CSV, HEAT_MD, make_pdf

    from aisac_core.context import AppContext

    root = tmp_path_factory.mktemp("boundary-root")
    (root / "notes").mkdir()
    (root / "notes" / "heat_transfer.md").write_text(HEAT_MD, encoding="utf-8")
    (root / "measurements.csv").write_text(CSV, encoding="utf-8")
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    for row in (["sample", "T_K"], ["A1", 293.1], ["A2", 310.4]):
        book.active.append(row)
    book.save(root / "sheet.xlsx")
    pdf = make_pdf(tmp_path_factory.mktemp("boundary-pdf") / "paper.pdf").read_bytes()
    with ReplayServer(pdf=pdf) as lit:
        settings = make_settings(
            tmp_path_factory.mktemp("boundary") / "store",
            models_dir,
            roots=[root],
            warm=False,
            sandbox_job_threshold_s=60,
            **{**lit.settings_kwargs(), "lit_backoff_s": 0.01, "lit_arxiv_interval_s": 0.05},
        )
        app = AppContext(settings, embedder=shared_embedder)
        try:
            yield app, root
        finally:
            app.sandbox.shutdown()
            app.close()


class Host:
    """An MCP client on the suite that validates every structured result against the advertised output schema."""

    def __init__(self, client: Client, tools: dict[str, Any]) -> None:
        self.client = client
        self.tools = tools
        self.called: dict[str, bool] = {}  # tool -> answered without error
        self.seconds: dict[str, float] = {}

    async def call(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any] | None:
        t0 = time.perf_counter()
        res = await self.client.call_tool_mcp(name, args or {})
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
        self.called[name] = self.called.get(name, False) or not res.isError
        if res.isError:
            assert name in MAY_FAIL, f"{name} failed: {res.content[0].text if res.content else res}"
            return None
        schema = self.tools[name].outputSchema
        if schema is None:  # tools_call: the result of the tool it calls
            return res.structuredContent
        assert res.structuredContent is not None, name
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.Draft202012Validator(schema).validate(res.structuredContent)
        return res.structuredContent


async def test_every_tool_answers_within_its_advertised_schema(boundary_app):
    from aisac_servers.serving.suite import build

    app, root = boundary_app
    async with Client(build(app=app, lifespan=False, catalog=True)) as c:
        tools = {t.name: t for t in (await c.list_tools_mcp()).tools}
        h = Host(c, tools)
        # the listing is typed: every result key has a JSON type, closed results say so
        search_schema = tools["rag_search"].outputSchema
        assert search_schema["properties"]["count"] == {"type": "integer"}
        assert search_schema["additionalProperties"] is False
        assert tools["rag_get_chunk"].outputSchema["properties"]["anchor"]["type"] == "object"

        # rag
        job = await h.call("rag_index", {"path": str(root / "notes"), "wait": True})
        assert job and job["status"] == "done", job
        await h.call("rag_job_status", {"job_id": job["job_id"]})
        await h.call("rag_job_status", {})
        await h.call("rag_job_cancel", {"job_id": job["job_id"]})
        await h.call("rag_store_status")
        docs = await h.call("rag_list_documents")
        assert docs and docs["documents"], docs
        doc_id = next(d["doc_id"] for d in docs["documents"] if d["path"].endswith("heat_transfer.md"))
        hits = await h.call("rag_search", {"query": "wall heat transfer coefficient", "k": 3})
        full = await h.call("rag_search", {"query": "wall heat transfer coefficient", "k": 3, "detail": "full"})
        assert hits and full and hits["hits"] and full["hits"][0]["anchor"], (hits, full)
        await h.call("rag_get_chunk", {"chunk_id": hits["hits"][0]["chunk_id"]})
        await h.call("rag_get_overview", {"doc_id": doc_id})
        await h.call("rag_read_sections", {"doc_id": doc_id, "section": "methods"})
        await h.call("rag_verify_anchor", {"anchor": full["hits"][0]["anchor"]})
        await h.call("rag_catalog")

        # memory
        ses = await h.call("memory_start_session", {"title": "boundary"})
        assert ses
        sid = ses["session_id"]
        await h.call("memory_add_turn", {"session_id": sid, "role": "user", "content": "What is Nu at Re 800?"})
        await h.call("memory_add_turn", {"session_id": sid, "role": "assistant", "content": "About 61."})
        await h.call("memory_get_history", {"session_id": sid})
        await h.call("memory_recall", {"session_id": sid, "query": "Nusselt number"})
        await h.call("memory_search", {"query": "Nusselt"})
        await h.call("memory_list_sessions")
        await h.call("memory_export_session", {"session_id": sid})
        await h.call("memory_record_fact", {"subject": "bed", "predicate": "Nu_max", "object": "61"})
        await h.call("memory_query_facts", {"subject": "bed"})
        await h.call("memory_fact_timeline", {"subject": "bed"})

        # data
        await h.call("data_load", {"path": str(root / "measurements.csv"), "name": "m"})
        await h.call("data_inspect", {"path": str(root / "sheet.xlsx")})
        await h.call("data_list")
        await h.call("data_preview", {"name": "m", "n": 2})
        await h.call("data_describe", {"name": "m"})
        q = await h.call("data_query", {"name": "m", "expr": "temperature_K > 300"})
        await h.call("data_aggregate", {"name": "m", "metrics": {"pressure_kPa": "mean"}})
        await h.call("data_save", {"name": q["result_id"] if q else "m", "new_name": "hot"})
        await h.call("data_to_session", {"name": "hot", "session": "s1", "variable": "df"})
        run = await h.call("data_code_run", {"session": "s1", "code": "print(len(df))\ndf.shape"})
        assert run and run["ok"], run
        await h.call("data_code_job_status", {"job_id": run["job_id"]})
        await h.call("data_code_variables", {"session": "s1"})
        await h.call("data_code_session_list")
        await h.call("data_code_session_reset", {"session": "s1"})
        await h.call("data_code_session_close", {"session": "s1"})

        # literature (recorded web answers)
        await h.call("lit_search", {"query": "transformer protein"})
        await h.call("lit_get", {"identifier": DOI})
        await h.call("lit_references", {"identifier": DOI})
        await h.call("lit_citations", {"identifier": DOI})
        await h.call("lit_import", {"identifier": DOI, "wait": True, "timeout_s": 20})
        await h.call("lit_materials", {"formula": "LiFePO4"})

        # roles (no LLM configured: the deterministic fallbacks answer)
        await h.call("roles_route", {"task": "What is the Nusselt number at Re 800?"})
        await h.call("roles_plan", {"task": "What is the Nusselt number at Re 800?"})
        await h.call("roles_evaluate", {"task": "Nusselt number at Re 800?", "answer": "About 61 [1]."})
        rr = await h.call("roles_run", {"task": "What is the Nusselt number at Re 800?", "wait_s": 20})
        await h.call("roles_job_status", {"job_id": rr["job_id"]} if rr and rr.get("job_id") else {})
        await h.call("roles_submit_route", {"route": {"run_id": "none"}})
        await h.call("roles_submit_plan", {"plan": {"run_id": "none"}})
        await h.call("roles_submit_critique", {"critique": {"run_id": "none"}})

        # trace
        runs = await h.call("trace_list_runs", {"limit": 5})
        assert runs and len(runs["runs"]) >= 2, runs
        run_a, run_b = runs["runs"][0]["run_id"], runs["runs"][1]["run_id"]
        got = await h.call("trace_get_run", {"run_id": run_a})
        assert got and got["tree"], got
        await h.call("trace_get_event", {"event_id": got["tree"][0]["id"]})
        await h.call("trace_export", {"run_id": run_a})
        await h.call("trace_verify", {"run_id": run_a})
        await h.call("trace_replay", {"run_id": run_a})
        await h.call("trace_diff", {"run_a": run_a, "run_b": run_b})
        await h.call("trace_stats")
        await h.call("trace_prune", {"older_than_days": 3650, "dry_run": True})

        # the catalog tools, then the destructive ones last
        found = await h.call("tools_search", {"query": "remove a document"})
        assert found and any(t["name"] == "rag_remove" for t in found["result"]), found
        listed = next(t for t in found["result"] if t["name"] == "rag_remove")
        assert listed["outputSchema"]["properties"]["removed"]["type"], json.dumps(listed["outputSchema"])
        await h.call("tools_call", {"name": "trace_stats", "arguments": {}})
        await h.call("memory_delete_session", {"session_id": sid, "confirm": True})
        await h.call("rag_remove", {"doc_id": doc_id})

    assert set(h.called) == set(tools), f"not called: {sorted(set(tools) - set(h.called))}"
    answered = {n for n, ok in h.called.items() if ok}
    assert set(tools) - MAY_FAIL <= answered
    print(
        f"\n{len(tools)} tools called, {len(answered)} answered with a result their schema accepts; errors (allowed):"
    )
    print(", ".join(sorted(set(tools) - answered)))
    print("slowest:", sorted(h.seconds.items(), key=lambda kv: -kv[1])[:5])


async def test_a_result_outside_its_type_is_an_error_not_a_silent_pass():
    """The boundary check itself: a tool whose body returns a key its closed result type does not declare, or a
    value of the wrong type, answers with a clear tool error; a result of its type passes unchanged."""
    from fastmcp import FastMCP

    from aisac_servers.serving.common import AisacServer

    srv = AisacServer("t")
    returned: dict[str, Any] = {}

    @srv.tool
    def closed() -> Closed:
        return returned  # type: ignore[return-value]

    outer = FastMCP("outer")
    outer.mount(srv, namespace="t")
    async with Client(outer) as c:
        (tool,) = (await c.list_tools_mcp()).tools
        assert tool.outputSchema == {
            "additionalProperties": False,
            "properties": {"n": {"type": "integer"}, "label": {"type": ["string", "null"]}},
            "required": ["n", "label"],
            "type": "object",
        }
        returned.update(n=3, label=None)
        ok = await c.call_tool_mcp("t_closed", {})
        assert not ok.isError and ok.structuredContent == {"n": 3, "label": None}
        for bad in ({"n": 3, "label": None, "extra": 1}, {"n": "three", "label": None}, {"label": "x"}):
            returned.clear()
            returned.update(bad)
            res = await c.call_tool_mcp("t_closed", {})
            assert res.isError, bad
            text = res.content[0].text
            assert "does not match its declared type" in text and "t_closed" in text or "closed" in text, text


async def test_a_tagged_union_result_is_one_of_its_records():
    """A tool returning a union of closed records (pending or done) advertises an object schema with one branch per
    record; each record passes, a mix of the two is an error."""
    from fastmcp import Client

    from aisac_servers.serving.common import AisacServer

    srv = AisacServer("u")
    returned: dict[str, Any] = {}

    @srv.tool
    def job() -> Pending | Done:
        return returned  # type: ignore[return-value]

    async with Client(srv) as c:
        (tool,) = (await c.list_tools_mcp()).tools
        schema = tool.outputSchema
        assert schema["type"] == "object" and len(schema["anyOf"]) == 2, schema
        for good in ({"status": "running", "job_id": "j1"}, {"status": "done", "result": "42"}):
            returned.clear()
            returned.update(good)
            res = await c.call_tool_mcp("job", {})
            assert not res.isError and res.structuredContent == good
            jsonschema.validate(res.structuredContent, schema)
        returned.clear()
        returned.update(status="done", job_id="j1")
        assert (await c.call_tool_mcp("job", {})).isError
