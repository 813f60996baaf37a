"""The memory server over MCP: in memory (fastmcp Client over the suite) and, for two concurrent writers,
one `aisac serve --transport http` process with two client processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import http_server, store_env
from fastmcp import Client, FastMCP
from sqlmodel import Session, create_engine, select

from aisac_core.context import AppContext
from aisac_core.store.tables import TraceEvent, Turn
from aisac_servers.serving.suite import build

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

MEMORY_TOOLS = {
    "memory_start_session",
    "memory_add_turn",
    "memory_get_history",
    "memory_recall",
    "memory_search",
    "memory_list_sessions",
    "memory_export_session",
    "memory_delete_session",
    "memory_record_fact",
    "memory_query_facts",
    "memory_fact_timeline",
}
AISAC = str(Path(sys.executable).parent / "aisac")


def _suite(core: AppContext) -> FastMCP:
    return build(app=core)


def _events(core: AppContext) -> list[TraceEvent]:
    with Session(core.engine) as s:
        return s.exec(select(TraceEvent).order_by(TraceEvent.id)).all()


async def _call(c: Client, tool: str, **args) -> dict:
    return (await c.call_tool(tool, args)).structured_content


async def test_tools_and_resource_listed(fast_core):
    async with Client(_suite(fast_core)) as c:
        tools = {t.name: t for t in await c.list_tools()}
        templates = [t.uri_template for t in await c.list_resource_templates()]
    assert MEMORY_TOOLS <= set(tools)
    assert "aisac://memory/sessions/{session_id}" in templates
    for name in MEMORY_TOOLS:  # the result shape is the output schema; the description says when to use the tool
        t = tools[name]
        assert t.description and t.output_schema.get("properties") and t.title and t.annotations, name


async def test_research_thread_over_three_sessions(fast_core):
    """Acceptance 1: recall in session 3 surfaces session 1's exchange; facts as of t1, t2 and now; timeline;
    export as Markdown (acceptance 3); trace rows with server "memory"."""
    async with Client(_suite(fast_core)) as c:
        s1 = (await _call(c, "memory_start_session", title="Lipase stability", project="enzymes"))["session_id"]
        await _call(
            c,
            "memory_add_turn",
            session_id=s1,
            role="user",
            content="How thermally stable is the Candida lipase? What is the activation energy of its unfolding?",
        )
        r = await _call(
            c,
            "memory_add_turn",
            session_id=s1,
            role="router",
            content="route: literature + rag",
            metadata={"route": ["rag", "lit"]},
        )
        await _call(
            c,
            "memory_add_turn",
            session_id=s1,
            role="planner",
            content="1. rag_search 2. Arrhenius fit",
            metadata={"plan": ["rag_search", "fit"]},
            parent_id=r["turn_id"],
        )
        await _call(
            c,
            "memory_add_turn",
            session_id=s1,
            role="tool",
            content="rag_search: 4 hits (doc 3f2a, p. 5)",
            metadata={"tool": "rag_search", "hits": 4},
        )
        a1 = await _call(
            c,
            "memory_add_turn",
            session_id=s1,
            role="assistant",
            content="The Arrhenius fit of the denaturation rates gives an activation energy of "
            "250 kJ/mol for the lipase unfolding (doc 3f2a, p. 5).",
        )
        assert a1["pair"] is not None
        await _call(c, "memory_add_turn", session_id=s1, role="user", content="Which buffer was used?")
        await _call(c, "memory_add_turn", session_id=s1, role="assistant", content="50 mM phosphate at pH 7.4.")

        s2 = (await _call(c, "memory_start_session", title="Corrosion", project="materials"))["session_id"]
        await _call(
            c, "memory_add_turn", session_id=s2, role="user", content="Does a siderite layer protect X65 steel?"
        )
        await _call(
            c,
            "memory_add_turn",
            session_id=s2,
            role="assistant",
            content="Yes, FeCO3 forms a protective scale above about 60 C in CO2 brine.",
        )

        s3 = (await _call(c, "memory_start_session", title="Follow-up", project="enzymes"))["session_id"]
        await _call(c, "memory_add_turn", session_id=s3, role="user", content="Let us plan the next enzyme experiment.")
        await _call(
            c, "memory_add_turn", session_id=s3, role="assistant", content="Sure: which enzyme and which assay?"
        )
        rec = await _call(
            c,
            "memory_recall",
            session_id=s3,
            query="energy barrier of the lipase denaturation we found",
            last_n=4,
            k=3,
            token_budget=400,
        )
        assert [t["session_id"] for t in rec["recent"]] == [s3, s3]
        top = rec["related"][0]
        assert (
            top["session_id"] == s1 and top["assistant_turn_id"] == a1["turn_id"] and "250 kJ/mol" in top["assistant"]
        )
        assert top["session_title"] == "Lipase stability" and 0 < top["score"] <= 1
        assert rec["tokens"] <= 400

        found = await _call(c, "memory_search", query="siderite protective scale")
        assert found["hits"][0]["session_id"] == s2
        hist = await _call(c, "memory_get_history", session_id=s1, roles=["planner", "tool"])
        assert [t["role"] for t in hist["turns"]] == ["planner", "tool"]
        listed = await _call(c, "memory_list_sessions", project="enzymes")
        assert {s["session_id"] for s in listed["sessions"]} == {s1, s3} and listed["sessions"][1]["turn_count"] == 7

        # facts: believed at t1, superseded at t2
        t1, t2 = "2026-01-10T09:00:00Z", "2026-02-20T09:00:00Z"
        await _call(
            c,
            "memory_record_fact",
            subject="lipase Ea",
            predicate="value_kJ_mol",
            object="250",
            valid_at=t1,
            source="doc:3f2a p5",
            evidence_span="activation energy of 250 kJ/mol",
            conditions={"buffer": "phosphate pH 7.4"},
        )
        sup = await _call(
            c,
            "memory_record_fact",
            subject="Lipase Ea",
            predicate="value_kJ_mol",
            object="310",
            valid_at=t2,
            source="doc:77b1 table 2",
        )
        assert sup["superseded"]["object"] == "250" and sup["superseded"]["invalid_at"].startswith(
            "2026-02-20T09:00:00"
        )

        async def value(as_of):
            got = await _call(c, "memory_query_facts", subject="lipase ea", as_of=as_of)
            return [f["object"] for f in got["facts"]]

        assert await value(t1) == ["250"]
        assert await value("2026-02-01") == ["250"]
        assert await value(t2) == ["310"]
        assert await value(None) == ["310"]
        assert await value("2025-12-31") == []
        tl = await _call(c, "memory_fact_timeline", subject="Lipase Ea")
        assert [(f["object"], f["current"]) for f in tl["facts"]] == [("250", False), ("310", True)]
        assert tl["facts"][0]["conditions"] == {"buffer": "phosphate pH 7.4"}

        # export: readable Markdown with roles and metadata; the resource is the same Markdown
        md = (await _call(c, "memory_export_session", session_id=s1, format="markdown"))["markdown"]
        assert md.startswith("# Lipase stability")
        assert "- **project**: enzymes" in md and "- **turns**: 7" in md
        for role in ("User", "Router", "Planner", "Tool", "Assistant"):
            assert f". {role}\n" in md, role
        assert '"plan": [' in md and '"hits": 4' in md and "250 kJ/mol" in md
        res = await c.read_resource(f"aisac://memory/sessions/{s1}")
        assert res[0].text == md
        js = await _call(c, "memory_export_session", session_id=s1, format="json")
        assert js["session"]["turn_count"] == 7 and js["turns"][2]["metadata"] == {"plan": ["rag_search", "fit"]}

        # delete: confirm required; pairs leave the recall index, facts stay
        gone = await _call(c, "memory_delete_session", session_id=s1, confirm=True)
        assert gone["turns_deleted"] == 7 and gone["pairs_deleted"] == 2
        rec = await _call(
            c, "memory_recall", session_id=s3, query="energy barrier of the lipase denaturation", last_n=2, k=3
        )
        assert all(r["session_id"] != s1 for r in rec["related"])
        assert await value(None) == ["310"]

    events = _events(fast_core)
    mem_events = [e for e in events if e.tool.startswith("memory_")]
    assert len(mem_events) == len(events) > 25
    assert {e.server for e in mem_events} == {"memory"} and all(e.status == "ok" for e in mem_events)
    assert any(e.tool == "memory_recall" and len(e.result_sha256) == 64 for e in mem_events)


@pytest.mark.parametrize(
    "tool,args,expect",
    [
        (
            "memory_add_turn",
            {"session_id": "ses-nope", "role": "user", "content": "hi"},
            "unknown session id 'ses-nope'",
        ),
        ("memory_add_turn", {"session_id": "$S", "role": "user", "content": "  "}, "content is empty"),
        (
            "memory_add_turn",
            {"session_id": "$S", "role": "user", "content": "x" * 100_001},
            "the limit is 100,000 characters",
        ),
        (
            "memory_add_turn",
            {"session_id": "$S", "role": "king", "content": "hi"},
            "invalid role 'king': use one of user",
        ),
        ("memory_query_facts", {"as_of": "last spring"}, "as_of 'last spring' is not an ISO 8601"),
        (
            "memory_record_fact",
            {"subject": "a", "predicate": "b", "object": "c", "valid_at": "2026-02-30"},
            "valid_at '2026-02-30' is not an ISO 8601",
        ),
        ("memory_delete_session", {"session_id": "$S"}, "needs confirm=true"),
        ("memory_delete_session", {"session_id": "$S", "confirm": False}, "needs confirm=true"),
        ("memory_delete_session", {"session_id": "ses-nope", "confirm": True}, "unknown session id"),
        ("memory_get_history", {"session_id": "$S", "limit": 0}, "limit must be an integer from 1 to 500"),
        ("memory_get_history", {"session_id": "$S", "cursor": "zzz"}, "cursor 'zzz' is not valid"),
        ("memory_recall", {"session_id": "$S", "query": ""}, "query is empty"),
        ("memory_recall", {"session_id": "ses-nope", "query": "x"}, "unknown session id"),
        ("memory_recall", {"session_id": "$S", "query": "x", "token_budget": 0}, "token_budget must be an integer"),
        ("memory_search", {"query": "x", "limit": 1000}, "limit must be an integer from 1 to 50"),
        ("memory_list_sessions", {"limit": 100_000}, "limit must be an integer from 1 to 500"),
        ("memory_export_session", {"session_id": "ses-nope"}, "unknown session id"),
        ("memory_fact_timeline", {"subject": ""}, "subject is empty"),
    ],
)
async def test_bad_input_gives_clear_tool_errors(fast_core, tool, args, expect):
    async with Client(_suite(fast_core)) as c:
        sid = (await _call(c, "memory_start_session"))["session_id"]
        args = {k: (sid if v == "$S" else v) for k, v in args.items()}
        r = await c.call_tool(tool, args, raise_on_error=False)
    assert r.is_error
    text = r.content[0].text
    assert expect in text and "Traceback" not in text and "internal error" not in text
    ev = _events(fast_core)[-1]
    assert ev.tool == tool and ev.status == "tool_error" and ev.server == "memory"


# --------------------------------------------------------------------------------------------------
# acceptance 2: two processes x 500 memory_add_turn on one session, through one server process
# --------------------------------------------------------------------------------------------------

CLIENT = r"""
import asyncio, sys
from fastmcp import Client

async def main(url, sid, tag, n):
    async with Client(url) as c:
        for i in range(n):
            role = "user" if i % 2 == 0 else "assistant"
            r = await c.call_tool("memory_add_turn", {"session_id": sid, "role": role,
                                                      "content": f"{tag} {i:04d}: note on sample {i % 17}"})
            assert not r.is_error, r
    print("done", tag, n)

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


@pytest.mark.slow
async def test_two_processes_add_500_turns_each(settings):
    # one server process: on PostgreSQL its private embedded vector folder is the explicit single-process opt-in
    env = {**store_env(settings), "AISAC_ALLOW_PRIVATE_VECTORS": "true"}
    n = 500
    with http_server(env) as url:
        async with Client(url) as c:
            sid = (await c.call_tool("memory_start_session", {"title": "concurrent"})).structured_content["session_id"]
        clients = [
            subprocess.Popen(
                [sys.executable, "-c", CLIENT, url, sid, tag, str(n)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for tag in ("A", "B")
        ]
        outs = [p.communicate(timeout=300) for p in clients]
        for p, (_out, err) in zip(clients, outs):
            assert p.returncode == 0, err[-3000:]
        async with Client(url) as c:
            turns, cursor = [], None
            while True:
                page = (
                    await c.call_tool(
                        "memory_get_history",
                        {"session_id": sid, "limit": 500, **({"cursor": cursor} if cursor else {})},
                    )
                ).structured_content
                turns += page["turns"]
                cursor = page["next_cursor"]
                if not cursor:
                    break
    assert len(turns) == 2 * n
    stamps = [t["created_at"] for t in turns]
    assert stamps == sorted(stamps) and len(set(stamps)) == 2 * n  # strictly increasing: a stable order
    for tag in ("A", "B"):  # each client's turns in the order it sent them
        mine = [int(t["content"].split()[1].rstrip(":")) for t in turns if t["content"].startswith(tag + " ")]
        assert mine == list(range(n))
    # the same order straight from the SQL store, and every call traced
    eng = create_engine(settings.resolved_sql_url)
    with Session(eng) as db:
        rows = db.exec(select(Turn).where(Turn.session_id == sid).order_by(Turn.created_at, Turn.id)).all()
        ok = db.exec(select(TraceEvent).where(TraceEvent.tool == "memory_add_turn", TraceEvent.status == "ok")).all()
    eng.dispose()
    assert [r.id for r in rows] == [t["turn_id"] for t in turns] == sorted(r.id for r in rows)
    assert len(ok) == 2 * n
    assert json.loads(ok[0].arguments_json)["session_id"] == sid
