"""The rag tools as a host's model sees them: compact search hits (and detail="full"), verification by chunk id,
resource completions, annotations, and output schemas that validate real results."""

from __future__ import annotations

import json

import jsonschema
import mcp_types
import pytest
from fastmcp import Client
from fixtures_gen import PAGE_MARKERS

pytestmark = pytest.mark.anyio

# "relevance": the calibrated probability a host thresholds (issue 42); hybrid hits carry it in compact form too
COMPACT_KEYS = {"chunk_id", "doc_id", "title", "page", "section", "score", "relevance", "text"}
HINTS = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
OTHERS = {"rag_index", "rag_job_status", "rag_job_cancel"}  # another adapter's tools (jobs)


def _suite(app):  # noqa: ANN001, ANN202  (fixture object)
    from aisac_servers.serving.suite import build

    return build(["rag"], app=app, lifespan=False)


async def test_compact_search_is_small_and_links_documents(indexed_core):
    async with Client(_suite(indexed_core)) as c:
        r = await c.call_tool("rag_search", {"query": "heat transfer enzyme perovskite kinetics", "k": 10})
    out = r.structured_content
    assert out["count"] == len(out["hits"]) > 0
    for h in out["hits"]:
        assert set(h) == COMPACT_KEYS, h
        assert h["text"] and len(h["text"]) <= 1500
    assert len(json.dumps(out, ensure_ascii=False)) <= 6000
    links = [b for b in r.content if b.type == "resource_link"]
    assert links and {str(b.uri) for b in links} == {f"aisac://rag/documents/{h['doc_id']}" for h in out["hits"]}
    assert json.loads(r.content[0].text) == out  # the text block is the same JSON


async def test_full_detail_is_the_core_result(indexed_core):

    q = PAGE_MARKERS[1]
    async with Client(_suite(indexed_core)) as c:
        r = await c.call_tool("rag_search", {"query": q, "k": 5, "detail": "full"})
    want = indexed_core.rag.search(q, 5).as_dict()
    got = r.structured_content
    assert {k: v for k, v in got.items() if k != "took_ms"} == {k: v for k, v in want.items() if k != "took_ms"}
    assert got["hits"][0]["anchor"]["sha256"] and got["hits"][0]["path"].endswith("report.pdf")


def test_snippet_keeps_the_matching_sentence():
    from aisac_servers.shapes.results_rag import snippet

    text = " ".join(f"Filler sentence number {i} about nothing." for i in range(40)) + " The Nusselt number is 42."
    out = snippet(text, "Nusselt number", 120)
    assert "Nusselt number is 42." in out and out.startswith("…") and len(out) <= 120
    assert snippet("short text", "x", 100) == "short text"


async def test_verify_anchor_by_chunk_id_or_compact_hit(indexed_core):
    async with Client(_suite(indexed_core)) as c:
        hit = (await c.call_tool("rag_search", {"query": PAGE_MARKERS[1], "k": 1})).structured_content["hits"][0]
        by_id = (await c.call_tool("rag_verify_anchor", {"anchor": hit["chunk_id"]})).structured_content
        by_hit = (await c.call_tool("rag_verify_anchor", {"anchor": hit})).structured_content
        full = (await c.call_tool("rag_get_chunk", {"chunk_id": hit["chunk_id"]})).structured_content
        by_anchor = (await c.call_tool("rag_verify_anchor", {"anchor": full["anchor"]})).structured_content
        gone = (await c.call_tool("rag_verify_anchor", {"anchor": "no-such-chunk"})).structured_content
    assert by_id["status"] == by_hit["status"] == by_anchor["status"] == "ok"
    assert by_id["chunk_id"] == hit["chunk_id"] and by_id["path"].endswith("report.pdf")
    assert gone["status"] == "missing" and "not in the index" in gone["detail"]


async def test_completions_of_doc_id_and_section(indexed_core):

    docs = indexed_core.rag.list_documents(status="indexed")["documents"]
    doc = next(d for d in docs if d["path"].endswith("report.pdf"))
    ref = mcp_types.ResourceTemplateReference(type="ref/resource", uri="aisac://rag/documents/{doc_id}")
    sec = mcp_types.ResourceTemplateReference(
        type="ref/resource", uri="aisac://rag/documents/{doc_id}/sections/{section}"
    )
    async with Client(_suite(indexed_core)) as c:
        everything = (await c.complete(ref, {"name": "doc_id", "value": ""})).values
        by_id = (await c.complete(ref, {"name": "doc_id", "value": doc["doc_id"][:6]})).values
        by_title = (await c.complete(ref, {"name": "doc_id", "value": (doc["title"] or "")[:5].upper()})).values
        sections = (
            await c.complete(sec, {"name": "section", "value": ""}, context_arguments={"doc_id": doc["doc_id"]})
        ).values
        none = (
            await c.complete(sec, {"name": "section", "value": "zzz"}, context_arguments={"doc_id": doc["doc_id"]})
        ).values
        text = (await c.read_resource(f"aisac://rag/documents/{doc['doc_id']}/sections/{sections[0]}"))[0].text
    assert set(everything) == {d["doc_id"] for d in docs}
    assert doc["doc_id"] in by_id and doc["doc_id"] in by_title
    assert sections and none == [] and text.strip()


async def _declared() -> dict:
    """The rag tools as the server declares them (``rag_`` names; the suite's listing compacts them on the wire)."""
    from aisac_servers.adapters.rag import server

    return {f"rag_{t.name}": t for t in await server.list_tools()}


async def test_every_rag_tool_is_annotated():
    for name, t in (await _declared()).items():
        if name in OTHERS:
            continue
        ann = t.annotations.model_dump(by_alias=True, exclude_none=True)
        assert all(h in ann for h in HINTS), (name, ann)
        assert ann["openWorldHint"] is False
        if name == "rag_remove":
            assert ann["destructiveHint"] is True and ann["readOnlyHint"] is False
        else:
            assert ann["readOnlyHint"] is True and ann["destructiveHint"] is False, name
        assert (t.output_schema or {}).get("properties"), name
        assert "docs/" not in (t.description or "") and "aisac://documents/" not in (t.description or ""), name


async def test_output_schemas_validate_real_results(indexed_core):

    doc = next(
        d for d in indexed_core.rag.list_documents(status="indexed")["documents"] if d["path"].endswith("report.pdf")
    )
    declared = {n: t.output_schema for n, t in (await _declared()).items()}
    async with Client(_suite(indexed_core)) as c:
        schemas = {t.name: t.output_schema for t in await c.list_tools()}  # as listed to the host
        hit = (await c.call_tool("rag_search", {"query": PAGE_MARKERS[1], "k": 3})).structured_content["hits"][0]
        calls = [
            ("rag_search", {"query": PAGE_MARKERS[1], "k": 3}),
            ("rag_search", {"query": PAGE_MARKERS[1], "k": 3, "detail": "full"}),
            ("rag_search", {"query": "qwxzzyv", "mode": "sparse"}),
            ("rag_store_status", {}),
            ("rag_list_documents", {}),
            ("rag_get_chunk", {"chunk_id": hit["chunk_id"]}),
            ("rag_get_overview", {"doc_id": doc["doc_id"]}),
            ("rag_read_sections", {"doc_id": doc["doc_id"], "section": "other", "max_tokens": 50}),
            ("rag_verify_anchor", {"anchor": hit["chunk_id"]}),
            ("rag_catalog", {}),
            ("rag_job_status", {}),
        ]
        checked = []
        for name, args in calls:
            r = await c.call_tool(name, args)
            jsonschema.validate(r.structured_content, schemas[name])
            jsonschema.validate(r.structured_content, declared[name])
            checked.append(name)
    jsonschema.validate({"removed": "abc", "chunks_deleted": 3}, declared["rag_remove"])
    assert set(checked) | {"rag_remove"} | OTHERS >= {n for n in schemas if n.startswith("rag_")}
    for name, sch in declared.items():  # every key of a real result is declared: the top level is closed
        if name != "rag_job_cancel":  # built by the adapter from three kinds of job (aisac_servers.shapes.results_jobs)
            assert sch.get("additionalProperties") is False, name
            assert sch.get("required") or name == "rag_job_status", name  # a job, or the list of jobs


async def test_compact_search_hands_the_full_result_in_meta(indexed_core):
    """rag_search's compact result carries the full one (whole texts, full anchors) in its _meta, for the trace."""
    from fastmcp.tools import ToolResult

    from aisac_servers.adapters.rag import search
    from aisac_servers.serving.common import FULL_RESULT_META

    r = await search(PAGE_MARKERS[1], k=3, app=indexed_core)
    assert isinstance(r, ToolResult) and r.meta is not None
    full = r.meta[FULL_RESULT_META]
    assert [h["chunk_id"] for h in full["hits"]] == [h["chunk_id"] for h in r.structured_content["hits"]]
    assert full["hits"][0]["anchor"]["sha256"] and "anchor" not in r.structured_content["hits"][0]


def test_index_job_list_repeats_the_job_keys():
    from aisac_core.rag.results import IndexJob, IndexJobList

    job = set(IndexJob.__annotations__) - {"earlier_jobs"}
    assert set(IndexJobList.__annotations__) == job | {"jobs"}
    assert IndexJobList.__required_keys__ == frozenset()
