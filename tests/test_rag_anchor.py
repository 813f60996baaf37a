"""Evidence anchor verification: ok / file_changed / chunk_changed / missing.

Real store (SQLite + Qdrant Edge), real parses of PDFs we write with reportlab, real MCP client for the
``rag_verify_anchor`` tool.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from pdf_fixtures import SECTIONS, make_paper

from aisac_core.evidence.anchor import AnchorError


def _anchor(core, query: str, section: str) -> dict:  # noqa: ANN001
    hits = core.rag.search(query, k=5, filters={"section": section}).hits
    assert hits, (query, section)
    return hits[0].as_dict()["anchor"]


@pytest.fixture
def paper(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    return make_paper(tmp_path / "docs" / "paper.pdf")


def test_verify_anchor_follows_edits_of_a_pdf(fast_core, paper: Path) -> None:  # noqa: ANN001
    fast_core.rag.indexer.run([paper])
    methods = _anchor(fast_core, "spin coated dimethylformamide", "methods")
    results = _anchor(fast_core, "reflection vanished lead iodide", "results")
    assert fast_core.rag.verify_full_anchor(methods)["status"] == "ok"
    assert fast_core.rag.verify_full_anchor(results)["status"] == "ok"

    # edit the PDF: the results paragraph changes, the methods paragraph stays
    edited = copy.deepcopy(SECTIONS)
    edited["3 Results"][0] = "The (002) reflection persisted up to 170 degrees Celsius for the butyl spacer only."
    make_paper(paper, edited)
    r = fast_core.rag.verify_full_anchor(results)
    assert r["status"] == "chunk_changed", r
    m = fast_core.rag.verify_full_anchor(methods)
    assert m["status"] == "file_changed", m
    assert m["sha256_now"] != methods["sha256"]

    # after re-indexing, the same answers come from the index (no re-parse needed)
    fast_core.rag.indexer.run([paper])
    assert fast_core.rag.verify_full_anchor(results)["status"] == "chunk_changed"
    m2 = fast_core.rag.verify_full_anchor(methods)
    assert m2["status"] == "file_changed" and m2["current_chunk_id"], m2

    # a fresh anchor of the new version is ok; a forged chunk hash is not
    fresh = _anchor(fast_core, "spin coated dimethylformamide", "methods")
    assert fast_core.rag.verify_full_anchor(fresh)["status"] == "ok"
    forged = {**fresh, "chunk_sha256": "0" * 64}
    assert fast_core.rag.verify_full_anchor(forged)["status"] == "chunk_changed"

    # the file is deleted
    paper.unlink()
    gone = fast_core.rag.verify_full_anchor(fresh)
    assert gone["status"] == "missing" and "no longer exists" in gone["detail"]


def test_verify_anchor_of_a_removed_document(fast_core, paper: Path) -> None:  # noqa: ANN001
    fast_core.rag.indexer.run([paper])
    a = _anchor(fast_core, "butylammonium spacers stable", "conclusion")
    fast_core.rag.indexer.remove([a["doc_id"]])
    r = fast_core.rag.verify_full_anchor(a)
    assert r["status"] == "missing" and "not in the index" in r["detail"]


def test_verify_anchor_bad_input(fast_core) -> None:  # noqa: ANN001
    with pytest.raises(AnchorError, match="must be the anchor object"):
        fast_core.rag.verify_full_anchor("abc")  # type: ignore[arg-type]
    with pytest.raises(AnchorError, match="lacks sha256, chunk_sha256, doc_id or path"):
        fast_core.rag.verify_full_anchor({"chunk_id": "x"})


@pytest.mark.anyio
async def test_rag_verify_anchor_tool(fast_core, paper: Path) -> None:  # noqa: ANN001
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    fast_core.rag.indexer.run([paper])
    async with Client(_served(fast_core)) as client:
        hits = (
            await client.call_tool("search", {"query": "spin coated films", "k": 1, "detail": "full"})
        ).structured_content["hits"]
        res = (await client.call_tool("verify_anchor", {"anchor": hits[0]["anchor"]})).structured_content
        assert res["status"] == "ok" and res["chunk_id"] == hits[0]["chunk_id"]
        paper.write_bytes(paper.read_bytes() + b"\n% appended comment\n")  # bytes change, text does not
        res = (await client.call_tool("verify_anchor", {"anchor": hits[0]["anchor"]})).structured_content
        assert res["status"] == "file_changed", res
        with pytest.raises(ToolError, match="anchor lacks"):
            await client.call_tool("verify_anchor", {"anchor": {"page": 1}})


def _served(app):  # noqa: ANN001, ANN202
    """The rag server alone (tool names unprefixed), serving ``app``."""
    from conftest import served_alone

    from aisac_servers.adapters.rag import server

    return served_alone(server, app)
