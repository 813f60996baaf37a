"""What a host's model sees of the data, literature, roles and project tools: annotations on every tool, real
(non-generic) output schemas that the results of real calls through the suite validate against, descriptions
without references a model cannot follow, and completion of frame and code-session names."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import jsonschema
import mcp_types as mt
import pytest
from fastmcp import Client
from literature_replay import ReplayServer
from roles_support import load_fixture, make_roles_core, release
from typing_extensions import TypedDict

pytestmark = pytest.mark.anyio

HINTS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")
#: what a host reads for a hint the listing leaves out (the MCP specification's defaults)
SPEC_DEFAULT = {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False, "open_world_hint": True}
#: tools whose shape another part of the work owns (long-running jobs and their status)
JOB_TOOLS = {"data_code_run", "data_code_job_status", "roles_run", "roles_job_status", "lit_import"}
READ_ONLY = {
    "data_inspect",
    "data_list",
    "data_preview",
    "data_describe",
    "data_query",
    "data_aggregate",
    "data_code_variables",
    "data_code_session_list",
    "lit_search",
    "lit_get",
    "lit_references",
    "lit_citations",
    "lit_materials",
}
DESTRUCTIVE = {"data_load", "data_save", "data_code_session_reset", "data_code_session_close"}


def _check(tool: Any, result: Any) -> dict[str, Any]:
    """The structured result of a call, validated against the tool's output schema."""
    data = result.structured_content
    jsonschema.validate(data, tool.output_schema)
    return data


def _generic(schema: dict[str, Any] | None) -> bool:
    return not schema or not schema.get("properties")


@pytest.fixture
def plain_app(tmp_path):
    from aisac_core.context import AppContext
    from aisac_core.settings import Settings

    root = tmp_path / "root"
    root.mkdir()
    (root / "yields.csv").write_text("site,temp_K,yield\nA,290,41.5\nA,310,47.0\nB,305,51.5\nB,280,38.0\n")
    app = AppContext(
        Settings(data_dir=tmp_path / "store", roots=[root], warm=False, sandbox_cpu_s=5, sandbox_job_threshold_s=60)
    )
    yield app
    app.sandbox.shutdown()
    app.close()


async def _tools(app, names=None) -> dict[str, Any]:
    from aisac_servers.serving.suite import build

    async with Client(build(names, app=app, lifespan=False)) as c:
        return {t.name: t for t in await c.list_tools()}


async def test_annotations_schemas_and_descriptions(plain_app):
    tools = await _tools(plain_app, ["data", "lit", "roles"])
    mine = {n: t for n, t in tools.items() if n.split("_")[0] in ("data", "lit", "roles") and n not in JOB_TOOLS}
    assert len(mine) == 24  # 22 + data_inspect (issue 29) + lit_materials (issue 46)
    for name, t in mine.items():
        ann = t.annotations
        assert ann is not None and (t.title or ann.title), name
        hint = {h: getattr(ann, h) if getattr(ann, h) is not None else SPEC_DEFAULT[h] for h in HINTS}
        assert hint["read_only_hint"] == (name in READ_ONLY), name
        if name not in READ_ONLY:  # the destructive hint is meaningless on a read-only tool
            assert hint["destructive_hint"] == (name in DESTRUCTIVE), name
        assert hint["open_world_hint"] == name.startswith("lit_"), name
        assert not _generic(t.output_schema), name
        assert t.output_schema["type"] == "object" and "$defs" not in json.dumps(t.output_schema), name
        desc = t.description or ""
        assert 40 < len(desc) < 500, (name, len(desc))
        for bad in ("docs/", ".json", "et al.", "SIGIR", "``"):
            assert bad not in desc, (name, bad)


async def test_data_results_validate_and_complete(plain_app):
    from aisac_servers.adapters import data as data_server
    from aisac_servers.serving.suite import build

    # the full output schemas (the listing shows the top-level keys only): closed on their top level, since the
    # data results declare every key they carry
    full = {f"data_{t.name}": t.output_schema for t in await data_server.server.list_tools()}
    assert all(s["additionalProperties"] is False for s in full.values())
    async with Client(build(["data"], app=plain_app, lifespan=False)) as c:
        tools = {t.name: t for t in await c.list_tools()}

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            data = _check(tools[name], await c.call_tool(name, args))
            jsonschema.validate(data, full[name])
            return data

        loaded = await call("data_load", {"path": "yields.csv", "name": "yields"})
        assert loaded["frames"][0]["rows"] == 4
        assert (await call("data_list", {}))["count"] == 1
        assert (await call("data_preview", {"name": "yields", "n": 2}))["shape"] == [4, 3]
        assert (await call("data_describe", {"name": "yields"}))["columns"]["yield"]["nulls"] == 0
        q = await call("data_query", {"name": "yields", "expr": "temp_K > 300"})
        agg = await call("data_aggregate", {"name": "yields", "by": ["site"], "metrics": {"yield": "mean"}})
        assert q["matched"] == 2 and agg["groups"] == 2
        saved = await call("data_save", {"name": q["result_id"], "new_name": "hot"})
        assert saved["parent"] == "yields" and saved["replaced"] is False and saved["created_at"]
        copied = await call("data_save", {"name": "hot", "new_name": "hot"})
        assert copied["replaced"] is True
        assert (await call("data_to_session", {"name": "hot", "session": "s1", "variable": "df"}))["shape"] == [2, 3]
        assert [v["name"] for v in (await call("data_code_variables", {"session": "s1"}))["variables"]] == ["df"]
        run = await call(
            "data_code_run",
            {"session": "s1", "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint(len(df))\ndf.shape"},
        )
        assert run["ok"] and run["status"] == "done" and run["result"] == "(2, 3)" and len(run["figures"]) == 1
        failed = await call("data_code_run", {"session": "s1", "code": "import os"})
        assert failed["ok"] is False and failed["error_type"]
        killed = await call("data_code_run", {"session": "s1", "code": "import time\ntime.sleep(30)", "timeout_s": 0.5})
        assert killed["ok"] is False and killed["status"] == "done" and killed["error_type"] == "TimeoutError"
        assert (await call("data_code_job_status", {"job_id": run["job_id"]}))["finished_at"]
        assert [s["session"] for s in (await call("data_code_session_list", {}))["sessions"]] == ["s1"]

        frames = await c.complete(
            mt.ResourceTemplateReference(type="ref/resource", uri="aisac://data/frames/{name}"),
            {"name": "name", "value": "H"},
        )
        assert frames.values == ["hot"]
        every = await c.complete(
            mt.ResourceTemplateReference(type="ref/resource", uri="aisac://data/frames/{name}"),
            {"name": "name", "value": ""},
        )
        assert sorted(every.values) == ["hot", "yields"]
        ses = await c.complete(
            mt.ResourceTemplateReference(type="ref/resource", uri="aisac://data/code-sessions/{session}"),
            {"name": "session", "value": "s"},
        )
        assert ses.values == ["s1"]
        read = await c.read_resource("aisac://data/frames/hot")
        assert json.loads(read[0].text)["shape"] == [2, 3]

        assert (await call("data_code_session_reset", {"session": "s1"}))["reset"] is True
        assert (await call("data_code_session_close", {"session": "s1"}))["closed"] is True
    assert (
        await data_server.complete(
            SimpleNamespace(uri="aisac://rag/documents/{doc_id}"), SimpleNamespace(name="doc_id", value="")
        )
        is None
    )


async def test_literature_results_validate(tmp_path):
    from aisac_core.context import AppContext
    from aisac_core.settings import Settings

    doi = "10.5555/aisac.2021.001"
    with ReplayServer() as srv:
        app = AppContext(
            Settings(
                data_dir=tmp_path / "store",
                warm=False,
                roots=[tmp_path / "papers"],
                **{**srv.settings_kwargs(), "lit_backoff_s": 0.01, "lit_arxiv_interval_s": 0.05},
            )
        )
        from aisac_servers.serving.suite import build

        try:
            suite = build(["lit"], app=app, lifespan=False)
            # the full output schemas (the listing compacts them to the top-level keys): every top-level key is
            # declared, so a result with another key fails validation
            declared = {t.name: t for t in await suite.list_tools(run_middleware=False)}
            for name in ("lit_search", "lit_get", "lit_references", "lit_citations", "lit_import"):
                assert declared[name].output_schema["additionalProperties"] is False, name
            async with Client(suite) as c:
                tools = {t.name: t for t in await c.list_tools()}

                async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
                    data = _check(tools[name], await c.call_tool(name, args))
                    jsonschema.validate(data, declared[name].output_schema)
                    return data

                found = await call("lit_search", {"query": "transformer protein"})
                got = await call("lit_get", {"identifier": doi})
                refs = await call("lit_references", {"identifier": doi})
                cits = await call("lit_citations", {"identifier": doi})
        finally:
            app.close()
    assert found["papers"] and got["paper"]["doi"] == doi and refs["references"] and cits["citations"]
    assert set(declared["lit_search"].output_schema["required"]) == set(found)  # always present: all of them
    # the papers go out as the core built them (the dicts are not serialised through the result type)
    assert found["query"] and {"abstract", "sources", "retrieved_at"} <= set(got["paper"])


@pytest.fixture(scope="module")
def rcore(tmp_path_factory, models_dir, shared_embedder):
    c = make_roles_core(tmp_path_factory, models_dir, shared_embedder)
    yield c
    release(c)


async def test_roles_results_validate(rcore):
    from aisac_servers.serving.suite import build

    task = "What is the Km of the lipase?"
    async with Client(build(app=rcore, lifespan=False)) as c:
        tools = {t.name: t for t in await c.list_tools()}

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            return _check(tools[name], await c.call_tool(name, args))

        rt = await call("roles_route", {"task": task, "llm": "none"})
        pl = await call("roles_plan", {"task": task, "route": rt, "llm": "none"})
        hits = (await c.call_tool("rag_search", {"query": "Km of the lipase", "k": 2})).structured_content["hits"]
        ev = await call(
            "roles_evaluate",
            {"task": task, "answer": "Km = 0.42 mM [1]", "citations": hits, "mode": "lite", "llm": "none"},
        )
        await call("roles_submit_route", {"route": load_fixture("route_plan.json")})
        await call("roles_submit_plan", {"plan": load_fixture("plan_valid.json")})
        cr = await call("roles_submit_critique", {"critique": load_fixture("critique_fail.json")})
    assert rt["by"] == "rules" and pl["steps"][-1]["helper"] == "researcher"
    assert ev["content_judged"] is False and cr["content_judged"] is True


def test_role_result_shapes_follow_the_json_schemas():
    from typing import get_args

    from aisac_core.roles import results as R
    from aisac_core.roles.schemas import load_schema

    route = load_schema("route")["properties"]
    assert set(route) <= set(R.RouteResult.__annotations__)
    for key in ("intent", "complexity", "decision"):
        assert set(get_args(R.RouteResult.__annotations__[key])) == set(route[key]["enum"]) or set(
            get_args(getattr(R, key.capitalize()))
        ) == set(route[key]["enum"])
    step = load_schema("plan")["properties"]["steps"]["items"]["properties"]
    assert set(step) == set(R.PlanStep.__annotations__)
    critique = load_schema("critique")["properties"]["critiques"]["items"]["properties"]
    assert set(critique) == set(R.Critique.__annotations__)


async def test_project_tools_annotated_with_output_schemas():
    from aisac_servers.adapters.project import UNTYPED_RESULT, build_project_server

    def molar_mass(formula: str) -> dict:
        """Molar mass of a formula."""
        return {"formula": formula, "g_per_mol": 18.015}

    def shout(text: str):  # no return annotation on purpose
        """Upper-case a text."""
        return text.upper()

    def count(text: str) -> int:
        """Count characters."""
        return len(text)

    manifest = SimpleNamespace(project=SimpleNamespace(name="t", category="general", domain=None))
    b = SimpleNamespace(project=SimpleNamespace(manifest=manifest), tools=[molar_mass, shout, count])
    async with Client(build_project_server(b)) as c:
        tools = {t.name: t for t in await c.list_tools()}
        for t in tools.values():
            ann = t.annotations
            assert ann.read_only_hint is False and ann.destructive_hint is False and ann.open_world_hint is False
            assert ann.idempotent_hint is False
        assert tools["molar_mass"].title == "Molar mass"
        assert tools["shout"].output_schema["properties"] == UNTYPED_RESULT["properties"]
        assert tools["count"].output_schema["properties"]["result"] == {"type": "integer"}
        shouted = await c.call_tool("shout", {"text": "ok"})
        assert shouted.structured_content == {"result": "OK"}
        jsonschema.validate(shouted.structured_content, tools["shout"].output_schema)
        mm = await c.call_tool("molar_mass", {"formula": "H2O"})
        jsonschema.validate(mm.structured_content, tools["molar_mass"].output_schema)
        assert mm.structured_content["g_per_mol"] == 18.015


class _Inner(TypedDict):
    a: int


class _Outer(TypedDict):
    x: str | None
    inner: _Inner | None


def test_lean_schema_writes_nullable_types_compactly():
    from aisac_servers.shapes.results_schema import output_schema

    s = output_schema(_Outer)
    assert s["properties"]["x"] == {"type": ["string", "null"]}
    assert s["properties"]["inner"]["type"] == ["object", "null"] and "$defs" not in s
    jsonschema.validate({"x": None, "inner": None}, s)
    jsonschema.validate({"x": "y", "inner": {"a": 1}}, s)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"x": 1, "inner": None}, s)
