"""Section-aware reading over a real store: rag_get_overview, rag_read_sections,
the ``section`` search filter, and bad input (unknown section, scanned PDF, unknown document).

One store per module (SQLite + Qdrant Edge, the session's embedder) with our generated paper, a scanned
page, and - when ../shared is present - a real 4-page paper.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import SHARED_DATA, make_settings
from pdf_fixtures import DOI, TITLE, make_paper, make_scanned

from aisac_core.rag.indexer import doc_id_for
from aisac_core.rag.search import SearchError
from aisac_core.rag.sections import DocumentNotFoundError, SectionNotFoundError

REAL = "2304.02623v1.pdf"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, models_dir: Path, shared_embedder):  # noqa: ANN001, ANN201
    from aisac_core.context import AppContext

    root = tmp_path_factory.mktemp("sections")
    docs = root / "docs"
    docs.mkdir()
    make_paper(docs / "paper.pdf")
    make_scanned(docs / "scan.pdf")
    real = SHARED_DATA / "pdfs" / "papermage" / REAL
    if real.is_file():
        shutil.copy(real, docs / REAL)
    # OCR off: this store checks the refusal of a PDF without a text layer (tests/test_ocr.py reads scans)
    c = AppContext(make_settings(root / "store", models_dir, rag={"ocr": "off"}), embedder=shared_embedder)
    failures: list[dict[str, str]] = []
    c.rag.indexer.run([docs], failures=failures)
    c._failures = failures  # type: ignore[attr-defined]
    c._docs = docs  # type: ignore[attr-defined]
    yield c
    c.close()


@pytest.fixture
def as_current(store):  # noqa: ANN001, ANN201
    return store


def _paper(store) -> str:  # noqa: ANN001
    return doc_id_for(store._docs / "paper.pdf")


def test_overview_of_a_generated_paper(store) -> None:  # noqa: ANN001
    ov = store.rag.overview(_paper(store))
    assert ov["title"] == TITLE and ov["metadata"]["doi"] == DOI and ov["metadata"]["year"] == 2024
    assert [s["title"] for s in ov["sections"]] == [
        "Abstract",
        "1 Introduction",
        "2 Materials and Methods",
        "3 Results",
        "4 Conclusion",
        "References",
    ]
    assert all(s["page_start"] == 1 == s["page_end"] and s["chunk_count"] >= 1 for s in ov["sections"])
    assert sum(s["chunk_count"] for s in ov["sections"]) <= ov["chunk_count"]
    assert set(ov["labels"]) == {"abstract", "introduction", "methods", "results", "conclusion", "references"}
    assert [c["kind"] for c in ov["captions"]] == ["figure", "table"]


def test_read_sections_methods_returns_only_methods(store) -> None:  # noqa: ANN001
    did = _paper(store)
    got = store.rag.read_sections(did, "methods")
    assert [m["title"] for m in got["matched"]] == ["2 Materials and Methods"]
    assert "spin coated from dimethylformamide" in got["text"] and "[p. 1]" in got["text"]
    for other in ("reflection vanished", "Layered perovskites promise", "Butylammonium spacers give"):
        assert other not in got["text"]
    assert got["next_cursor"] is None
    # the same section by heading, heading without number, and number
    for name in ("2 Materials and Methods", "materials and methods", "2"):
        assert store.rag.read_sections(did, name)["text"] == got["text"]


def test_search_with_section_filter_returns_only_that_section(store) -> None:  # noqa: ANN001

    for query in ("decomposition temperature of the films", "spin coating annealing"):
        hits = store.rag.search(query, k=10, filters={"section": "results"}).hits
        assert hits
        for h in hits:
            d = h.as_dict()
            assert d["section_covers"] == "results", d
            res = store.rag.read_sections(d["doc_id"], "results", max_tokens=20000)
            spans = [b["char_span"] for b in res["blocks"]]
            s, e = d["anchor"]["char_span"]
            assert any(a <= s and e <= z for a, z in spans) or (spans[0][0] <= s and e <= spans[-1][1]), d
            text = store.rag.document(d["doc_id"])[1].text
            assert " ".join(text[s:e].split()) == " ".join(d["text"].split())


def test_paging_covers_the_section_exactly(store) -> None:  # noqa: ANN001
    did = _paper(store)
    whole = store.rag.read_sections(did, "results", max_tokens=20000)
    pieces, cursor, pages = [], None, 0
    while True:
        page = store.rag.read_sections(did, "results", max_tokens=50, cursor=cursor)
        pages += 1
        assert page["tokens"] <= 50 or len(page["blocks"]) == 1
        pieces += [tuple(b["char_span"]) for b in page["blocks"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert pages < 50
    assert pages >= 2
    covered = sum(e - s for s, e in pieces)
    assert covered == sum(e - s for s, e in (tuple(b["char_span"]) for b in whole["blocks"]))
    assert all(a[1] <= b[0] for a, b in zip(pieces, pieces[1:]))


def test_bad_input(store) -> None:  # noqa: ANN001
    did = _paper(store)
    with pytest.raises(SectionNotFoundError) as ei:
        store.rag.read_sections(did, "discussion")
    msg = str(ei.value)
    assert "no section 'discussion'" in msg and "methods" in msg and "3 Results" in msg
    with pytest.raises(DocumentNotFoundError, match="no indexed document"):
        store.rag.overview("0123456789abcdef")
    with pytest.raises(SearchError, match="max_tokens"):
        store.rag.read_sections(did, "methods", max_tokens=10)
    with pytest.raises(SearchError, match="cursor"):
        store.rag.read_sections(did, "methods", cursor=10**9)
    with pytest.raises(SearchError, match="not a section label"):
        store.rag.search("films", filters={"section": "method"})
    res = store.rag.search("films", filters={"section": "discussion", "doc_id": did})
    assert not res.hits and "has sections:" in (res.message or "")


def test_scanned_pdf_indexes_nothing(store) -> None:  # noqa: ANN001
    from aisac_core.store.vectors import Cond

    scan = store._docs / "scan.pdf"
    assert [f["path"] for f in store._failures] == [str(scan)]
    assert "no text layer" in store._failures[0]["error"]
    did = doc_id_for(scan)
    assert store.vectors().count("chunks", [Cond("doc_id", eq=did)]) == 0
    with pytest.raises(DocumentNotFoundError, match="no text layer"):
        store.rag.overview(did)


def test_real_paper_overview_and_reading(store) -> None:  # noqa: ANN001
    if not (store._docs / REAL).is_file():
        pytest.skip("../shared/data is absent")
    did = doc_id_for(store._docs / REAL)
    ov = store.rag.overview(did)
    assert ov["metadata"]["arxiv_id"] == "2304.02623v1" and ov["pages"] == 4
    assert [s["title"] for s in ov["sections"]][:3] == ["ABSTRACT", "KEYWORDS", "1 INTRODUCTION"]
    intro = store.rag.read_sections(did, "introduction")
    assert intro["text"].startswith("## 1 INTRODUCTION") and "The advent of large language models" in intro["text"]
    assert "CHARACTERIZING EXPOSITORY" not in intro["text"]


@pytest.mark.anyio
async def test_mcp_tools(as_current) -> None:  # noqa: ANN001
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    did = _paper(as_current)
    async with Client(_served(as_current)) as client:
        names = {t.name for t in await client.list_tools()}
        assert {"get_overview", "read_sections", "verify_anchor"} <= names
        ov = (await client.call_tool("get_overview", {"doc_id": did})).structured_content
        assert ov["labels"]["methods"]["sections"] == ["2 Materials and Methods"]
        rs = (
            await client.call_tool("read_sections", {"doc_id": did, "section": "methods", "max_tokens": 500})
        ).structured_content
        assert "spin coated" in rs["text"] and rs["next_cursor"] is None
        with pytest.raises(ToolError, match="has no section 'datasets'.*methods"):
            await client.call_tool("read_sections", {"doc_id": did, "section": "datasets"})
        with pytest.raises(ToolError, match="no indexed document"):
            await client.call_tool("get_overview", {"doc_id": "nope"})


def _served(app):  # noqa: ANN001, ANN202
    """The rag server alone (tool names unprefixed), serving ``app``."""
    from conftest import served_alone

    from aisac_servers.adapters.rag import server

    return served_alone(server, app)
