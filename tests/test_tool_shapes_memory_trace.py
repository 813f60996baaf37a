"""What a host sees of the memory and trace tools: annotations on every tool, typed output schemas that validate the
results of real calls (and lose no key the core returned), compact vs full trace_get_run, completions."""

from __future__ import annotations

import json

import jsonschema
import pytest
from fastmcp import Client

pytestmark = [pytest.mark.anyio]

#: a missing hint means the MCP specification's default (the suite's listing leaves defaults out)
SPEC_DEFAULTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}


def _suite(app, **kw):
    from aisac_servers.serving.suite import build

    return build(["memory", "trace"], app=app, lifespan=False, **kw)  # only the servers under test


@pytest.fixture
def serialised(monkeypatch):
    """Every result of a memory / trace tool as the core returned it and as fastmcp sent it: (type, raw, sent)."""
    from fastmcp.tools import base

    seen: list[tuple[object, object, object]] = []
    orig = base._serialize_to_jsonable

    def spy(data, annotation=None):
        out = orig(data, annotation)
        if getattr(annotation, "__module__", "").endswith(("memory.results", "trace.results")):
            seen.append((annotation, data, out))
        return out

    monkeypatch.setattr(base, "_serialize_to_jsonable", spy)
    return seen


async def _tools(c: Client) -> dict:
    return {t.name: t for t in await c.list_tools() if t.name.startswith(("memory_", "trace_"))}


def _hints(tool) -> dict:  # noqa: ANN001
    """The tool's hints as a host reads them (a missing one is the specification's default)."""
    given = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    return {**SPEC_DEFAULTS, **{k: v for k, v in given.items() if k in SPEC_DEFAULTS}}


def _full_schema(name: str) -> dict:
    """The full output schema of a tool: the lean schema of its function's return type (the listing shows only
    the top-level keys)."""
    import typing

    from aisac_servers.adapters import memory, trace
    from aisac_servers.shapes.results_schema import output_schema

    ns, fn = name.split("_", 1)
    return output_schema(typing.get_type_hints(getattr({"memory": memory, "trace": trace}[ns], fn))["return"])


async def test_annotations_and_output_schemas(fast_core):
    async with Client(_suite(fast_core)) as c:
        tools = await _tools(c)
    assert len(tools) >= 20
    hints = {name: _hints(t) for name, t in tools.items()}
    for name, t in tools.items():
        assert t.annotations is not None and t.title, name
        assert hints[name]["openWorldHint"] is False, name
        for schema in (t.output_schema, _full_schema(name)):
            assert schema and schema.get("properties"), f"{name}: generic output schema {schema}"
            jsonschema.Draft202012Validator.check_schema(schema)
        assert "docs/" not in (t.description or "") and "aisac://sessions/" not in (t.description or ""), name
    ro = {n for n, h in hints.items() if h["readOnlyHint"]}
    assert ro == {
        "memory_get_history",
        "memory_recall",
        "memory_search",
        "memory_list_sessions",
        "memory_export_session",
        "memory_query_facts",
        "memory_fact_timeline",
        "trace_list_runs",
        "trace_get_run",
        "trace_get_event",
        "trace_verify",
        "trace_diff",
        "trace_stats",
    }
    assert hints["memory_delete_session"]["destructiveHint"] is True
    assert hints["trace_prune"]["destructiveHint"] is True
    for name in ("memory_add_turn", "memory_record_fact", "memory_start_session", "trace_replay"):
        assert hints[name]["idempotentHint"] is False and hints[name]["destructiveHint"] is False, name
    full = _full_schema("memory_recall")  # nested shapes are typed too
    recent = full["properties"]["recent"]["items"]  # the one schema helper inlines nested records
    assert {"turn_id", "role", "content", "tokens"} <= set(recent["properties"])


async def test_every_tool_result_matches_its_schema(fast_core, serialised):
    """Each memory and trace tool called for real: its result validates against its output schema, and fastmcp's
    serialisation through the result type kept every key and value the core returned."""
    run = "shapes-run"
    meta = {"run_id": run}
    calls: list[tuple[str, dict]] = []
    async with Client(_suite(fast_core)) as c:
        tools = await _tools(c)

        async def call(tool: str, args: dict, **kw) -> dict:
            out = (await c.call_tool(tool, args, **kw)).structured_content
            calls.append((tool, out))
            return out

        sid = (await call("memory_start_session", {"title": "shapes", "project": "p"}, meta=meta))["session_id"]
        u = await call(
            "memory_add_turn", {"session_id": sid, "role": "user", "content": "lipase activation energy?"}, meta=meta
        )
        await call(
            "memory_add_turn",
            {
                "session_id": sid,
                "role": "assistant",
                "content": "250 kJ/mol by DSC.",
                "metadata": {"plan": ["rag_search"]},
                "parent_id": u["turn_id"],
            },
            meta=meta,
        )
        await call("memory_add_turn", {"session_id": sid, "role": "user", "content": "x" * 3000}, meta=meta)
        await call("memory_get_history", {"session_id": sid, "limit": 2}, meta=meta)
        await call("memory_get_history", {"session_id": sid, "token_budget": 5}, meta=meta)
        await call(
            "memory_recall",
            {"session_id": sid, "query": "activation energy", "last_n": 1, "token_budget": 50},
            meta=meta,
        )
        await call("memory_search", {"query": "lipase"}, meta=meta)
        await call("memory_search", {"query": "nothing-matches-zzz", "mode": "keyword"}, meta=meta)
        await call("memory_list_sessions", {}, meta=meta)
        await call("memory_export_session", {"session_id": sid}, meta=meta)
        await call("memory_export_session", {"session_id": sid, "format": "json", "limit": 1}, meta=meta)
        await call(
            "memory_record_fact",
            {"subject": "H1", "predicate": "status", "object": "open", "valid_at": "2026-01-01"},
            meta=meta,
        )
        await call(
            "memory_record_fact",
            {
                "subject": "H1",
                "predicate": "status",
                "object": "supported",
                "conditions": {"T_K": 323},
                "source": "doc",
            },
            meta=meta,
        )
        await call("memory_query_facts", {"subject": "h1"}, meta=meta)
        await call("memory_fact_timeline", {"subject": "H1"}, meta=meta)
        sid2 = (await call("memory_start_session", {}, meta=meta))["session_id"]
        await call("memory_delete_session", {"session_id": sid2, "confirm": True}, meta=meta)

        await call("trace_list_runs", {})
        got = await call("trace_get_run", {"run_id": run})
        await call("trace_get_run", {"run_id": run, "detail": "full"})
        await call("trace_get_run", {"run_id": run, "include_results": True})
        await call("trace_get_event", {"event_id": got["tree"][0]["id"]})
        for fmt in ("json", "markdown", "html", "prov"):
            await call("trace_export", {"run_id": run, "format": fmt})
        await call("trace_verify", {"run_id": run})
        rp = await call("trace_replay", {"run_id": run})
        await call("trace_diff", {"run_a": run, "run_b": rp["replay_run_id"]})
        await call("trace_stats", {})
        await call("trace_prune", {"older_than_days": 1})
    called = {t for t, _ in calls}
    assert called == set(tools), set(tools) - called
    for tool, out in calls:
        jsonschema.validate(out, tools[tool].output_schema)  # what the host validates against
        jsonschema.validate(out, _full_schema(tool))  # the whole result type
        if tool.startswith("memory_"):  # the core declares every key of a memory result: no other key may appear
            assert _full_schema(tool)["additionalProperties"] is False, tool
            jsonschema.validate(out, {**tools[tool].output_schema, "additionalProperties": False})
    assert len(serialised) >= len(calls)
    for tp, raw, sent in serialised:
        assert sent == json.loads(json.dumps(raw)), f"{tp.__name__}: serialisation changed the result"


async def test_get_run_compact_by_default_full_on_request(fast_core):
    """A run of a few dozen calls: the default compact tree is far smaller than the full one, and keeps per event
    id, tool, status, latency and a short summary; detail=full (or the older detail=true) is today's full tree."""
    run = "size-run"
    meta = {"run_id": run}
    async with Client(_suite(fast_core)) as c:
        sid = (await c.call_tool("memory_start_session", {"title": "size"}, meta=meta)).structured_content
        for i in range(12):
            await c.call_tool(
                "memory_add_turn",
                {
                    "session_id": sid["session_id"],
                    "role": "user",
                    "content": f"question {i} on lipase stability",
                    "metadata": {"notes": "n" * 300},
                },
                meta=meta,
            )
            await c.call_tool(
                "memory_add_turn",
                {"session_id": sid["session_id"], "role": "assistant", "content": f"answer {i}: 250 kJ/mol " * 5},
                meta=meta,
            )
        compact = (await c.call_tool("trace_get_run", {"run_id": run})).structured_content
        full = (await c.call_tool("trace_get_run", {"run_id": run, "detail": "full"})).structured_content
        legacy = (await c.call_tool("trace_get_run", {"run_id": run, "detail": True})).structured_content
        legacy_compact = (await c.call_tool("trace_get_run", {"run_id": run, "detail": False})).structured_content
    assert compact["run"]["events"] == full["run"]["events"] == 25
    assert compact["detail"] == "compact" and full["detail"] == "full" == legacy["detail"]
    assert legacy_compact["detail"] == "compact"
    assert len(json.dumps(compact)) * 2.5 < len(json.dumps(full))  # about 3x here
    assert "pins" not in compact and full["pins"]
    allowed = {
        "id",
        "tool",
        "status",
        "latency_ms",
        "result_summary",
        "kind",
        "arguments",
        "error",
        "anchors",
        "children",
    }
    for e in compact["tree"]:
        assert {"id", "tool", "status", "latency_ms", "result_summary"} <= set(e) <= allowed
        assert len(e["result_summary"]) <= 120 and len(e.get("arguments", "")) <= 100
        assert isinstance(e.get("arguments", ""), str)
    assert [e["id"] for e in compact["tree"]] == [e["id"] for e in full["tree"]]
    assert all(len(e["arguments_sha256"]) == 64 and isinstance(e["arguments"], dict) for e in full["tree"])


async def test_completions_of_session_and_run_ids(fast_core):
    from mcp_types import ResourceTemplateReference

    suite = _suite(fast_core)
    assert suite._completion_handler is not None  # the suite chains its servers' handlers
    async with Client(suite) as c:
        templates = {t.uri_template for t in await c.list_resource_templates()}
        session_uri = "aisac://memory/sessions/{session_id}"
        report_uri = "aisac://trace/runs/{run_id}/report"
        assert {session_uri, report_uri} <= templates
        ids = []
        for title in ("a", "b", "c"):
            ids.append(
                (
                    await c.call_tool("memory_start_session", {"title": title}, meta={"run_id": f"compl-{title}"})
                ).structured_content["session_id"]
            )
        got = await c.complete(ResourceTemplateReference(uri=session_uri), {"name": "session_id", "value": "ses-"})
        assert got.values[:3] == ids[::-1]  # newest first
        one = await c.complete(ResourceTemplateReference(uri=session_uri), {"name": "session_id", "value": ids[0][:12]})
        assert ids[0] in one.values and all(v.startswith(ids[0][:12]) for v in one.values)
        runs = await c.complete(ResourceTemplateReference(uri=report_uri), {"name": "run_id", "value": "compl-"})
        assert set(runs.values) == {"compl-a", "compl-b", "compl-c"} and runs.values[0] == "compl-c"
        none = await c.complete(ResourceTemplateReference(uri=report_uri), {"name": "run_id", "value": "zzz"})
        assert none.values == []
