"""Papers read right on layouts nobody tuned for: generated PDFs (tests/fixtures/layouts, printed by headless
Chromium from make_layouts.py: a three-line title, name particles, IEEE roman headings in body-size capitals, a
contents page, one paper with and without bookmarks, headings only the bookmarks name), the full author lists
of the shared papers, and section reading of every shared paper's introduction.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aisac_core.rag.documents import ParsedDocument
from aisac_core.rag.outline import OutlineEntry, match_outline, plausible_outline, respace, toc_pages
from aisac_core.rag.sections import overview_of_structure, sections_of_structure

LAYOUTS = Path(__file__).parent / "fixtures" / "layouts"
LAYOUT_TRUTH: dict[str, dict] = {
    k: v for k, v in json.loads((LAYOUTS / "truth.json").read_text(encoding="utf-8")).items() if not k.startswith("_")
}
PDF_TRUTH: dict[str, dict] = {
    k: v
    for k, v in json.loads((Path(__file__).parent / "fixtures" / "pdf_truth.json").read_text(encoding="utf-8")).items()
    if not k.startswith("_")
}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory, models_dir: Path, parse_pool):  # noqa: ANN001, ANN201
    from conftest import make_settings

    from aisac_core.rag.embeddings import Embedder

    _POOL[:] = [parse_pool]
    return Embedder(make_settings(tmp_path_factory.mktemp("layout-tok") / "store", models_dir)).tokenizer()


_PARSED: dict[Path, ParsedDocument] = {}
#: the run's conftest.ParsePool (set by the ``tokenizer`` fixture, which every test that parses uses)
_POOL: list = []


def _parsed(path: Path, tokenizer) -> ParsedDocument:  # noqa: ANN001
    """``parse_document(path, tokenizer)``, once per run (conftest.ParsePool) and kept for this module's tests."""
    if path not in _PARSED:
        _PARSED[path] = _POOL[0].parse(path, tokenizer)
    return _PARSED[path]


@pytest.mark.parametrize("name", sorted(LAYOUT_TRUTH))
def test_generated_layout(tokenizer, name: str) -> None:  # noqa: ANN001
    truth = LAYOUT_TRUTH[name]
    doc = _parsed(LAYOUTS / name, tokenizer)
    m = doc.structure["metadata"]
    ov = overview_of_structure(doc.structure)
    assert m["title"] == truth["title"]
    assert m["authors"] == truth["authors"]
    assert [s["title"] for s in ov["sections"]] == truth["outline"]
    assert [x["title"] for s in ov["sections"] for x in s["subsections"]] == truth["sub"]
    assert m["outline_source"] == truth["outline_source"]
    assert m["title_source"] in ("layout", "layout+pdf_info") and 0 < m["confidence"] <= 1
    assert m["authors_source"] in ("layout", "layout+pdf_info") and 0 < m["authors_confidence"] <= 1
    assert 0 < m["outline_confidence"] <= 1
    # the introduction (or the first section) reads as text, not only its heading
    first = truth["outline"][1] if truth["outline"][0] in ("Abstract", "Contents") else truth["outline"][0]
    if first == "Contents":
        first = truth["outline"][2]
    got = sections_of_structure("d", None, doc.text, doc.structure, first)
    assert len(got["text"]) > len(first) + 200, got["text"]


def test_contents_page_is_no_outline(tokenizer) -> None:  # noqa: ANN001
    doc = _parsed(LAYOUTS / "contents_page.pdf", tokenizer)
    secs = doc.structure["sections"]
    intro = next(s for s in secs if s["title"] == "1 Introduction")
    assert intro["page_start"] == 3  # the section, not its contents line on page 2
    refs = next(s for s in secs if s["title"] == "References")
    assert refs["chunk_count"] <= 2


def test_same_paper_with_and_without_bookmarks(tokenizer) -> None:  # noqa: ANN001
    a = _parsed(LAYOUTS / "twin_bookmarks.pdf", tokenizer).structure
    b = _parsed(LAYOUTS / "twin_plain.pdf", tokenizer).structure
    assert a["metadata"]["outline_source"] == "outline" and b["metadata"]["outline_source"] == "layout"
    assert [(s["title"], s["level"]) for s in a["sections"]] == [(s["title"], s["level"]) for s in b["sections"]]


def test_outline_rules_on_entries_of_our_own_making() -> None:
    e = [OutlineEntry("1 Introduction", 1, 1), OutlineEntry("2 Method", 1, 2), OutlineEntry("2.1 Data", 2, 2)]
    assert plausible_outline(e, 3)
    assert not plausible_outline(e[:1], 3)  # one entry
    assert not plausible_outline([OutlineEntry("x", 1, 9), OutlineEntry("y", 1, 10)], 3)  # beyond the document
    backwards = [OutlineEntry(f"S{i}", 1, p) for i, p in enumerate([5, 4, 3, 2, 1])]
    assert not plausible_outline(backwards, 6)
    paras = [
        (1, ["Some title"]),
        (1, ["1 INTRODUCTION", "We study things."]),
        (2, ["Body text ends here.", "2 Method"]),
        (2, ["2.1 Data"]),
    ]
    found = match_outline(e, paras, str)
    assert {i: (x.title, a, n) for i, (x, a, n) in found.items()} == {
        1: ("1 Introduction", 0, 1),
        2: ("2 Method", 1, 1),
        3: ("2.1 Data", 0, 1),
    }
    assert respace("2 BACKGROUNDANDRELATEDWORK", "2 Background and related work") == "2 BACKGROUND AND RELATED WORK"
    assert respace("1 INTRODUCTION", "1 Introduction") == "1 INTRODUCTION"
    toc = {
        2: ["Contents"] + [f"{i} Section number {i} . . . . . . . {i + 2}" for i in range(1, 7)],
        3: ["Model | 12 | 10", "BERT base 85 84", "RoBERTa large 90 80", "Ours 95 70", "T5 small 70 60", "x 3"],
    }
    assert toc_pages(toc, str) == {2}  # a results table's falling last column is no contents page


@pytest.mark.slow
def test_full_author_lists_of_shared_papers(shared_data: Path, tokenizer) -> None:  # noqa: ANN001
    """Full author lists exactly as printed (tests/fixtures/pdf_truth.json, read from the rendered first pages):
    at least 12 of the 14 papers that have authors (measured: 14 of 14)."""
    exact, total, wrong = 0, 0, []
    for key, truth in PDF_TRUTH.items():
        if not truth["authors"]:
            continue
        d, name = key.split("/")
        path = shared_data / ("pdf_metadata/grobid" if d == "grobid" else f"pdfs/{d}") / name
        got = _parsed(path, tokenizer).structure["metadata"]["authors"]
        total += 1
        if got == truth["authors"]:
            exact += 1
        else:
            wrong.append((key, got))
    assert total == 14
    assert exact >= 12, wrong


@pytest.mark.slow
def test_introduction_reads_as_text_on_every_shared_paper(shared_data: Path, tokenizer) -> None:  # noqa: ANN001
    """rag_read_sections("introduction") returns the section's text, not only its heading, on every shared
    paper that has an introduction."""
    from test_chunk_sentences import _pdfs

    with_intro = 0
    for path in _pdfs(shared_data):
        doc = _parsed(path, tokenizer)
        if not any(s["label"] == "introduction" for s in doc.structure["sections"]):
            continue
        with_intro += 1
        got = sections_of_structure("d", None, doc.text, doc.structure, "introduction", max_tokens=20000)
        prose = [b for b in got["blocks"] if b["kind"] == "text"]
        assert sum(b["char_span"][1] - b["char_span"][0] for b in prose) >= 400, (path.name, got["text"][:300])
    assert with_intro >= 9  # 7 papermage papers, Wang-paperAVE2008, test_Grobid_1 (IEEE roman headings)
