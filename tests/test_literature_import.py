"""lit_import: an arXiv paper's PDF is downloaded over HTTP from the local server,
stored in a registered root with a provenance sidecar, indexed by a job, and found by rag_search - all through
the suite's MCP client."""

from __future__ import annotations

import hashlib
import json
import time

import jsonschema
import pytest
from conftest import make_settings
from fastmcp import Client
from fastmcp.exceptions import ToolError
from fixtures_gen import PAGE_MARKERS, make_pdf
from literature_replay import ReplayServer

from aisac_core.literature.results import ImportResult
from aisac_servers.shapes.results_schema import output_schema

pytestmark = pytest.mark.anyio


@pytest.fixture
def pdf_bytes(tmp_path_factory) -> bytes:
    return make_pdf(tmp_path_factory.mktemp("pdf") / "paper.pdf").read_bytes()


@pytest.fixture
def replay(pdf_bytes):
    with ReplayServer(pdf=pdf_bytes) as srv:
        yield srv


@pytest.fixture
def import_core(tmp_path, models_dir, shared_embedder, replay):
    from aisac_core.context import AppContext

    papers = tmp_path / "papers"
    papers.mkdir()
    s = make_settings(
        tmp_path / "store",
        models_dir,
        roots=[papers],
        warm=False,
        lit_backoff_s=0.01,
        lit_arxiv_interval_s=0.05,
        **replay.settings_kwargs(),
    )
    c = AppContext(s, embedder=shared_embedder)
    yield c
    c.close()


def _suite(core):
    from aisac_servers.serving.suite import build

    return build(["rag", "lit"], app=core, lifespan=False)  # the fixture closes the core


async def _wait_job(c: Client, job_id: str, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = (await c.call_tool("rag_job_status", {"job_id": job_id})).structured_content
        if st["status"] in ("done", "failed", "interrupted"):
            return st
        await _sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish")


async def _sleep(s: float) -> None:
    import anyio

    await anyio.sleep(s)


async def test_import_arxiv_pdf_becomes_searchable(import_core, replay, pdf_bytes):
    root = import_core.settings.rag.roots[0]
    async with Client(_suite(import_core)) as c:
        res = (await c.call_tool("lit_import", {"identifier": "arXiv:2101.00001", "root": "papers"})).structured_content
        assert res["status"] == "imported"
        jsonschema.validate(res, output_schema(ImportResult))  # every top-level key declared
        pdf = root / "arxiv-2101.00001v2.pdf"
        assert res["path"] == str(pdf) and pdf.read_bytes() == pdf_bytes
        assert res["sha256"] == hashlib.sha256(pdf_bytes).hexdigest() and res["bytes"] == len(pdf_bytes)
        side = json.loads((root / "arxiv-2101.00001v2.provenance.json").read_text())
        assert side["source_url"] == f"{replay.url}/pdf/2101.00001v2" and side["sha256"] == res["sha256"]
        assert side["paper"]["doi"] == "10.5555/aisac.2021.001" and side["retrieved_at"].endswith("+00:00")
        st = await _wait_job(c, res["job_id"])
        assert st["status"] == "done" and st["counters"]["files_indexed"] == 1, st
        hits = (
            await c.call_tool("rag_search", {"query": PAGE_MARKERS[1], "k": 3, "detail": "full"})
        ).structured_content["hits"]
        assert hits and hits[0]["path"] == str(pdf) and hits[0]["anchor"]["sha256"] == res["sha256"]
        again = (await c.call_tool("lit_import", {"identifier": "2101.00001", "wait": True})).structured_content
        jsonschema.validate(again, output_schema(ImportResult))
        assert again["status"] == "already_present" and again["path"] == str(pdf)
        assert again["job"]["status"] == "done" and again["job"]["counters"]["files_skipped"] == 1, again
    assert len(replay.requests("/pdf/")) == 2


async def test_import_refuses_an_html_login_wall(import_core, replay):
    root = import_core.settings.rag.roots[0]
    replay.script(
        "/pdf/",
        [
            (
                200,
                {"Content-Type": "text/html; charset=utf-8"},
                b"<!DOCTYPE html><html><body><form>Please sign in</form></body></html>",
            )
        ],
    )
    async with Client(_suite(import_core)) as c:
        with pytest.raises(ToolError, match="HTML page .*Nothing was saved"):
            await c.call_tool("lit_import", {"identifier": "2101.00001"})
    assert list(root.iterdir()) == []


async def test_import_refuses_a_path_outside_the_roots(import_core, replay, tmp_path):
    async with Client(_suite(import_core)) as c:
        with pytest.raises(ToolError, match="outside the registered roots"):
            await c.call_tool("lit_import", {"identifier": "2101.00001", "root": str(tmp_path / "elsewhere")})
        with pytest.raises(ToolError, match="outside the registered roots"):
            await c.call_tool("lit_import", {"identifier": "2101.00001", "root": "papers/../../x"})
    assert replay.requests() == []


async def test_import_without_open_access_pdf(import_core, replay):
    replay.script(
        "/crossref/works/",
        [
            (
                200,
                {"Content-Type": "application/json"},
                json.dumps(
                    {"status": "ok", "message": {"DOI": "10.5555/closed.1", "title": ["A closed paper"]}}
                ).encode(),
            )
        ],
    )
    async with Client(_suite(import_core)) as c:
        with pytest.raises(ToolError, match="no open-access PDF is known"):
            await c.call_tool("lit_import", {"identifier": "10.5555/closed.1"})
