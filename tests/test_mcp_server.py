"""The suite over MCP in memory (fastmcp Client): tool list, grounded search, errors, resource, trace rows."""

from __future__ import annotations

import json

import pytest
from fastmcp import Client
from fixtures_gen import PAGE_MARKERS, write_bad_files
from sqlmodel import Session, select

pytestmark = pytest.mark.anyio

RAG_TOOLS = {
    "rag_index",
    "rag_job_status",
    "rag_search",
    "rag_list_documents",
    "rag_get_chunk",
    "rag_remove",
    "rag_catalog",
}


def _suite(app):
    from aisac_servers.serving.suite import build

    return build(app=app)


def _events(core):
    from aisac_core.store.tables import TraceEvent

    with Session(core.engine) as s:
        return s.exec(select(TraceEvent).order_by(TraceEvent.id)).all()


async def _index(c: Client, path, **kw) -> dict:
    r = await c.call_tool("rag_index", {"path": str(path), "wait": True, "timeout_s": 300, **kw})
    assert r.structured_content["status"] == "done", r.structured_content
    return r.structured_content


async def test_tools_listed_without_loading_models(core):
    """tools/list is answered before (and without) loading the embedding model or docling."""
    async with Client(_suite(core)) as c:
        names = {t.name for t in await c.list_tools()}
        templates = [t.uri_template for t in await c.list_resource_templates()]
    assert RAG_TOOLS <= names
    assert "aisac://rag/documents/{doc_id}" in templates
    assert not core.embedder.loaded


async def test_every_tool_has_a_description_for_a_model(core):
    """A description says when to use the tool (the result shape is in its output schema); what a model cannot use
    (documentation paths, schema files) stays in docs/."""
    async with Client(_suite(core)) as c:
        tools = await c.list_tools()
    for t in tools:
        assert t.description and len(t.description) >= 40, t.name
        assert "docs/" not in t.description and "schemas/" not in t.description, t.name
        assert t.output_schema and t.output_schema.get("properties") or t.name == "tools_call", t.name


async def test_index_search_anchor_and_trace(core, corpus_copy):
    async with Client(_suite(core)) as c:
        progress: list[tuple[float, float | None]] = []

        async def on_progress(p: float, total: float | None, msg: str | None) -> None:
            progress.append((p, total))

        r = await c.call_tool("rag_index", {"path": str(corpus_copy), "wait": True}, progress_handler=on_progress)
        job = r.structured_content
        assert job["status"] == "done" and job["counters"]["files_indexed"] == 5
        assert job["counters"]["files_catalogued"] == 1
        assert progress and progress[-1][0] == progress[-1][1]

        r = await c.call_tool(
            "rag_search", {"query": PAGE_MARKERS[1], "k": 3, "detail": "full", "run_id": "run-test-1"}
        )
        hits = r.structured_content["hits"]
        assert hits[0]["path"].endswith("report.pdf") and hits[0]["page"] == 1
        anchor = hits[0]["anchor"]
        assert set(anchor) >= {"doc_id", "path", "sha256", "section", "page", "char_span", "chunk_sha256", "score"}

        # the anchor's span points into the document resource's text
        got = await c.call_tool("rag_get_chunk", {"chunk_id": hits[0]["chunk_id"]})
        assert got.structured_content["text"] == hits[0]["text"]
        res = await c.read_resource(f"aisac://rag/documents/{anchor['doc_id']}")
        assert "perovskite" in res[0].text
        plain = (await c.read_resource(f"aisac://rag/documents/{anchor['doc_id']}/text"))[0].text
        start, end = anchor["char_span"]
        assert plain[start:end].split() == hits[0]["text"].split()

        docs = (await c.call_tool("rag_list_documents", {})).structured_content
        assert docs["total"] == 5
        cat = (await c.call_tool("rag_catalog", {})).structured_content
        assert cat["entries"][0]["meta"]["columns"] == ["sample", "temperature_K", "pressure_kPa"]

    events = _events(core)
    tools = [e.tool for e in events]
    assert tools == ["rag_index", "rag_search", "rag_get_chunk", "rag_list_documents", "rag_catalog"]
    search_ev = events[1]
    assert search_ev.run_id == "run-test-1"
    assert "run_id" not in json.loads(search_ev.arguments_json)
    assert search_ev.status == "ok" and search_ev.server == "rag" and search_ev.latency_ms > 0
    assert len(search_ev.result_sha256) == 64 and len(search_ev.arguments_sha256) == 64
    assert json.loads(search_ev.anchor_ids_json)[0] == hits[0]["chunk_id"]
    # calls without a run id share the client's current run
    assert events[2].run_id == events[3].run_id == events[4].run_id != "run-test-1"


async def test_run_id_from_meta(core, corpus):
    async with Client(_suite(core)) as c:
        await c.call_tool("rag_list_documents", {}, meta={"run_id": "run-from-meta"})
    assert _events(core)[-1].run_id == "run-from-meta"


@pytest.mark.parametrize(
    "tool,args,expect",
    [
        ("rag_search", {"query": "heat", "k": 0}, "k must be an integer from 1 to 100"),
        ("rag_search", {"query": "heat", "k": 10**6}, "k must be an integer from 1 to 100"),
        ("rag_search", {"query": "   "}, "query is empty"),
        ("rag_search", {"query": "heat", "filters": {"author": "x"}}, "unknown filter key(s) ['author']"),
        ("rag_search", {"query": "heat", "filters": {"page_from": 0}}, "page_from must be a page number"),
        ("rag_index", {"path": "/no/such/folder"}, "path not found: '/no/such/folder'"),
        ("rag_job_status", {"job_id": "job-nope"}, "unknown job id"),
        ("rag_get_chunk", {"chunk_id": "nope"}, "unknown chunk id"),
        ("rag_remove", {}, "exactly one of doc_id or path"),
        ("rag_remove", {"doc_id": "feedfacefeedface"}, "no indexed document"),
    ],
)
async def test_bad_input_gives_clear_tool_errors(core, tool, args, expect):
    async with Client(_suite(core)) as c:
        r = await c.call_tool(tool, args, raise_on_error=False)
    assert r.is_error
    text = r.content[0].text
    assert expect in text
    assert "Traceback" not in text
    ev = _events(core)[-1]
    assert ev.tool == tool and ev.status == "tool_error"


async def test_bad_files_fail_per_file_and_keep_the_index(core, corpus_copy):
    bad = write_bad_files(corpus_copy / "bad")
    async with Client(_suite(core)) as c:
        job = await _index(c, corpus_copy)
        fails = {f["path"].rsplit("/", 1)[-1]: f["error"] for f in job["failures"]}
        assert set(fails) == {"empty.pdf", "binary.pdf", "truncated.pdf"}
        assert "empty" in fails["empty.pdf"]
        assert "not a PDF" in fails["binary.pdf"]
        assert job["counters"]["files_indexed"] == 5
        # the good documents are searchable; a nonsense query in sparse mode has no hits and says why
        r = await c.call_tool("rag_search", {"query": "Nusselt number packed bed", "k": 2, "detail": "full"})
        assert r.structured_content["hits"][0]["path"].endswith("heat_transfer.md")
        r = await c.call_tool("rag_search", {"query": "qwxzzyv", "mode": "sparse"})
        assert r.structured_content["hits"] == [] and r.structured_content["message"]
        # a failed file can be removed; the rest stays
        before = (await c.call_tool("rag_list_documents", {"status": "indexed"})).structured_content["total"]
        await c.call_tool("rag_remove", {"path": str(bad["binary"])})
        after = (await c.call_tool("rag_list_documents", {"status": "indexed"})).structured_content["total"]
        assert before == after == 5
    assert bad["binary"].exists()  # removing from the index never touches the file


async def test_encrypted_pdf_reported(core, shared_data):
    pdf = shared_data / "pdfs" / "docling" / "2206.01062_pg3.password-1234.pdf"
    async with Client(_suite(core)) as c:
        job = await _index(c, pdf)
    assert job["counters"]["files_failed"] == 1
    assert "encrypted" in job["failures"][0]["error"]


async def test_one_server_alone_keeps_the_tool_names(core):
    from aisac_servers.serving.suite import build

    async with Client(build(["rag"], app=core)) as c:
        assert RAG_TOOLS <= {t.name for t in await c.list_tools()}
    with pytest.raises(ValueError, match="unknown server"):
        build(["nope"])


async def test_registered_roots_indexed_and_catalogued(tmp_path, models_dir, corpus):
    from conftest import make_settings

    from aisac_core.context import AppContext

    data_root = tmp_path / "lab_data"
    data_root.mkdir()
    (data_root / "run1.csv").write_text("t,x\n0,1\n1,2\n")
    (data_root / "notes.md").write_text("# not embedded here\n\ncatalog roots are never embedded\n")
    settings = make_settings(tmp_path / "store", models_dir, roots=[corpus / "notes"], catalog_roots=[data_root])
    core = AppContext(settings)
    try:
        async with Client(_suite(core)) as c:
            r = (await c.call_tool("rag_index", {"wait": True})).structured_content
            assert r["status"] == "done" and r["kind"] == "catalog" and len(r["earlier_jobs"]) == 1
            first = (await c.call_tool("rag_job_status", {"job_id": r["earlier_jobs"][0]})).structured_content
            assert first["status"] == "done" and first["counters"]["files_indexed"] == 2
            cat = (await c.call_tool("rag_catalog", {"root": str(data_root)})).structured_content
            assert sorted(e["path"].rsplit("/", 1)[-1] for e in cat["entries"]) == ["notes.md", "run1.csv"]
            docs = (await c.call_tool("rag_list_documents", {})).structured_content
            assert docs["total"] == 2  # the two notes of the indexed root, nothing of the catalog root
            # a registered root may be named instead of spelled out
            r = (await c.call_tool("rag_index", {"path": "notes", "wait": True})).structured_content
            assert r["counters"]["files_skipped"] == 2
    finally:
        core.close()
