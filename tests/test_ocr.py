"""Scanned PDFs: OCR with Tesseract into aisac's own PDF reconstruction (aisac_core/rag/ocr.py, issue 41).

Scanned fixtures are made here: a paper of our own (tests/pdf_fixtures.make_paper) rendered to page images at 200 dpi
with skew, noise and JPEG compression and rebuilt as an image-only PDF (bench/scans.scan_copy); the original's text is
the truth. Tests that need the engine skip with a message where ``tesseract`` is missing; the refusal without it is
tested everywhere (PATH emptied).
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_DATA, make_settings
from pdf_fixtures import SECTIONS, TITLE, make_paper

from aisac_core.rag.documents import ParsedDocument, parse_document
from aisac_core.rag.formats import DocumentError, convert
from aisac_core.rag.ocr import OcrError, OcrOptions, engine, pages_needing_ocr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the bench package (scanned copies, OCR measures)
from bench.scans import line_cer, scan_copy, truth_lines, word_scores  # noqa: E402

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="Tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-eng): OCR tests skipped",
)

#: a second paper for the scanned page of the mixed PDF (words the first one does not have)
OTHER = {
    "1 Introduction": [
        "Zeolite membranes separate hydrogen from carbon dioxide at high temperature. Their selectivity depends "
        "on the pore size and on defects between the crystals, which this study measures."
    ],
    "2 Results": [
        "Permeance of hydrogen reached twelve units at four hundred kelvin while carbon dioxide stayed below one. "
        "Defects were sealed by a second hydrothermal growth."
    ],
}


def _words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[^\W_]+", text)]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory, models_dir: Path):  # noqa: ANN201
    from aisac_core.rag.embeddings import Embedder

    return Embedder(make_settings(tmp_path_factory.mktemp("ocr-tok") / "store", models_dir)).tokenizer()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """born-digital paper, its scanned copy, a 2-page scan, and a mixed PDF (page 1 text, page 2 scanned)."""
    import pypdfium2 as pdfium

    d = tmp_path_factory.mktemp("ocr")
    paper = make_paper(d / "paper.pdf")
    other = make_paper(d / "other.pdf", sections=OTHER, title="Hydrogen separation by zeolite membranes")
    scan = scan_copy(paper, d / "scan.pdf", dpi=200)
    two = scan_copy(paper, d / "two.pdf", dpi=100, pages=[1, 1], noise=0, skew=0)
    other_scan = scan_copy(other, d / "other_scan.pdf", dpi=200)
    mixed = pdfium.PdfDocument.new()
    for src in (paper, other_scan):
        with_src = pdfium.PdfDocument(str(src))
        mixed.import_pages(with_src)
        with_src.close()
    mixed.save(str(d / "mixed.pdf"))
    mixed.close()
    return {"paper": paper, "scan": scan, "two": two, "mixed": d / "mixed.pdf", "other": other}


_PARSED: dict[str, ParsedDocument] = {}


def _parse(files: dict[str, Path], name: str, tokenizer: Any) -> ParsedDocument:
    if name not in _PARSED:
        _PARSED[name] = parse_document(files[name], tokenizer)
    return _PARSED[name]


# ---- which pages are OCRed ------------------------------------------------------------------------------------


def test_born_digital_pages_are_never_ocred(files: dict[str, Path], tokenizer: Any, monkeypatch) -> None:  # noqa: ANN001
    import aisac_core.rag.documents as documents

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("a born-digital PDF was sent to OCR")

    monkeypatch.setattr(documents, "ocr_document", refuse)
    assert pages_needing_ocr(convert(files["paper"], "pdf", "native")) == []
    doc = parse_document(files["paper"], tokenizer)
    assert doc.ocr_pages == [] and "ocr" not in doc.structure["metadata"]
    assert {c.source for c in doc.chunks} == {"text"} and all(c.ocr_confidence is None for c in doc.chunks)
    assert pages_needing_ocr(convert(files["scan"], "pdf", "native")) == [1]
    assert pages_needing_ocr(convert(files["mixed"], "pdf", "native")) == [2]


def test_shared_born_digital_pdfs_need_no_ocr() -> None:
    pdfs = sorted((SHARED_DATA / "pdfs").glob("*/*.pdf")) if SHARED_DATA.is_dir() else []
    if not pdfs:
        pytest.skip("../shared/data is absent (fresh clone): shared PDFs not checked")
    checked = 0
    for f in pdfs:
        try:
            res = convert(f, "pdf", "native")
        except DocumentError:  # the encrypted one
            continue
        assert pages_needing_ocr(res) == [], f.name
        checked += 1
    assert checked >= 10


# ---- reading a scan ----------------------------------------------------------------------------------------------


@needs_tesseract
def test_scanned_paper_reads_back_with_structure(files: dict[str, Path], tokenizer: Any) -> None:
    doc = _parse(files, "scan", tokenizer)
    born = _parse(files, "paper", tokenizer)
    truth, got = _words(born.text), _words(doc.text)
    common = sum(min(truth.count(w), got.count(w)) for w in set(truth))
    assert common / len(truth) >= 0.97 and common / len(got) >= 0.95
    ocr = doc.structure["metadata"]["ocr"]  # shown by rag_get_overview
    # the default resolution: 300 dpi since OCR reading 3 (a 200-dpi scan read upscaled 1.5x; docs/rag.md)
    assert doc.ocr_pages == [1] and ocr["pages"] == [1] and ocr["dpi"] == 300
    assert ocr["engine"].startswith("tesseract ") and 0.5 < ocr["mean_confidence"] <= 1
    # every chunk came from OCR and carries its confidence; anchors keep pages and spans into the text
    assert {c.source for c in doc.chunks} == {"ocr"}
    assert all(c.ocr_confidence is not None and 0.3 < c.ocr_confidence <= 1 for c in doc.chunks)
    assert all(doc.text[c.char_start : c.char_end].split() == c.text.split() for c in doc.chunks)
    # headings found from weight (ink) and numbering, as for the born-digital file
    heads = [s["title"] for s in doc.structure["sections"] if s.get("level") == 1]
    assert {"1 Introduction", "2 Materials and Methods", "3 Results", "4 Conclusion"} <= set(heads), heads
    assert {c.section_covers for c in doc.chunks} >= {"introduction", "methods", "results", "conclusion"}
    assert TITLE.split()[0] in doc.text and SECTIONS["3 Results"][0].split()[0] in doc.text


@needs_tesseract
def test_mixed_pdf_gets_text_for_every_page(files: dict[str, Path], tokenizer: Any) -> None:
    doc = _parse(files, "mixed", tokenizer)
    assert doc.pages == 2 and doc.ocr_pages == [2]
    # a chunk holding any OCR text says so (a chunk may run from page 1 onto page 2)
    by_page = {p: {c.source for c in doc.chunks if c.page == c.page_end == p} for p in (1, 2)}
    assert by_page[1] == {"text"} and by_page[2] == {"ocr"}
    assert all(c.source == "ocr" for c in doc.chunks if c.page_end == 2)
    assert "zeolite" in _words(" ".join(c.text for c in doc.chunks if c.page == 2))
    assert "perovskite" in _words(" ".join(c.text for c in doc.chunks if c.page == 1))


@needs_tesseract
def test_two_column_paper_page_at_200_dpi(tmp_path: Path) -> None:
    """Acceptance 1 on one real two-column page: body-text word recall / precision, CER on aligned lines, and the
    reading order of the reconstructed text (the same word sequence as the born-digital page's)."""
    src = SHARED_DATA / "pdfs" / "papermage" / "2020.acl-main.447.pdf"
    if not src.is_file():
        pytest.skip("../shared/data is absent (fresh clone): the two-column check needs a shared paper")
    import pypdfium2 as pdfium
    from rapidfuzz.distance import Levenshtein

    from aisac_core.rag.ocr import ocr_document
    from aisac_core.rag.pdf import reconstruct_pdf

    scan = scan_copy(src, tmp_path / "acl.pdf", pages=[3])
    page = ocr_document(scan, [1], OcrOptions())[1]
    truth = truth_lines(src, 3)
    words = [(w.text, w.l, w.t, w.r, w.b) for ln in page.lines for w in ln.words]
    hit, n_truth, n_ocr = word_scores(truth, words)
    dist, chars = line_cer(truth, [(ln.text, ln.l, ln.t, ln.r, ln.b) for ln in page.lines])
    assert hit / n_truth >= 0.97 and hit / n_ocr >= 0.95, (hit / n_truth, hit / n_ocr)
    assert dist / chars <= 0.03, dist / chars
    # reading order: the page reconstructed from OCR lines reads like the born-digital page (columns interleaved
    # line by line would bring the similarity of the word sequences near 0.5)
    one = pdfium.PdfDocument.new()
    whole = pdfium.PdfDocument(str(src))
    one.import_pages(whole, [2])
    one.save(str(tmp_path / "born.pdf"))
    one.close()
    whole.close()

    def seq(doc: Any) -> list[str]:
        return _words(" ".join(getattr(it, "text", "") or "" for it, _ in doc.iterate_items()))

    born = seq(reconstruct_pdf(convert(tmp_path / "born.pdf", "pdf", "native"), "born"))
    read = seq(reconstruct_pdf(convert(scan, "pdf", "native"), "scan", {1: page}))
    assert Levenshtein.normalized_similarity(born, read) >= 0.9


# ---- refusals and bounds -----------------------------------------------------------------------------------------


def test_missing_engine_keeps_the_refusal_naming_the_packages(
    files: dict[str, Path], tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract on this PATH
    engine.cache_clear()
    try:
        with pytest.raises(DocumentError, match="no text layer.*apt-get install tesseract-ocr tesseract-ocr-eng"):
            parse_document(files["scan"], tokenizer)
        # a mixed PDF without the engine: its text pages are indexed, as before OCR existed
        doc = parse_document(files["mixed"], tokenizer)
        assert doc.ocr_pages == [] and {c.page for c in doc.chunks} == {1}
    finally:
        engine.cache_clear()


def test_ocr_off_refuses_scans(files: dict[str, Path], tokenizer: Any) -> None:
    with pytest.raises(DocumentError, match="no text layer.*AISAC_OCR=off"):
        parse_document(files["scan"], tokenizer, ocr=OcrOptions(enabled=False))


@needs_tesseract
def test_page_and_time_limits_are_named(files: dict[str, Path], tokenizer: Any) -> None:
    with pytest.raises(OcrError, match="2 scanned pages, more than the OCR page limit of 1.*AISAC_OCR_MAX_PAGES"):
        parse_document(files["two"], tokenizer, ocr=OcrOptions(max_pages=1))
    with pytest.raises(OcrError, match="time limit of 0.001 s.*AISAC_OCR_TIME_LIMIT_S.*of 2 scanned pages"):
        parse_document(files["two"], tokenizer, ocr=OcrOptions(time_limit_s=0.001))
    with pytest.raises(OcrError, match="language data is not installed: apt-get install tesseract-ocr-zzz"):
        parse_document(files["two"], tokenizer, ocr=OcrOptions(language="zzz"))


def test_a_hostile_page_size_is_rendered_within_the_pixel_cap() -> None:
    """A PDF may declare a 200 x 200 inch page (14,400 pt, PDF's largest): at 200 dpi a 1.6 GB bitmap. The render is
    capped at MAX_PIXELS (a lower resolution for such pages); ordinary pages keep the asked resolution."""
    from aisac_core.rag.ocr import MAX_PIXELS, MAX_SIDE, render_zoom

    assert render_zoom(595.0, 842.0, 200) == 200 / 72
    zoom = render_zoom(14_400.0, 14_400.0, 200)
    assert zoom < 200 / 72 and (14_400 * zoom) ** 2 <= MAX_PIXELS * 1.0001
    assert render_zoom(0.0, 1e9, 300) * 1e9 <= MAX_SIDE  # degenerate sizes too


@needs_tesseract
def test_progress_per_page_and_cancel_between_pages(files: dict[str, Path], tokenizer: Any) -> None:
    seen: list[tuple[int, int]] = []

    class Stop(Exception):
        pass

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        raise Stop

    with pytest.raises(Stop):
        parse_document(files["two"], tokenizer, progress=progress)
    assert seen == [(1, 2)]  # stopped after the first page: the second was never read
    seen.clear()
    doc = parse_document(files["two"], tokenizer, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 2), (2, 2)] and doc.ocr_pages == [1, 2]


# ---- the index: fingerprint, anchors, search ------------------------------------------------------------------


@needs_tesseract
def test_a_cancelled_index_job_stops_between_pages(
    files: dict[str, Path], tmp_path: Path, models_dir: Path, shared_embedder: Any
) -> None:
    """The job's progress call raises on a cancel (aisac_core.rag.jobs): between two OCRed pages it stops the run
    (not recorded as the file's failure), the files before it are stored whole, the scan is not stored."""
    from aisac_core.context import AppContext
    from aisac_core.store.tables import Document

    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(files["paper"], docs / "a-paper.pdf")
    shutil.copy(files["two"], docs / "b-two.pdf")

    class Cancelled(Exception):
        pass

    def progress(done: int, total: int, msg: str) -> None:
        if "OCR page 1/2" in msg:
            raise Cancelled(msg)

    c = AppContext(make_settings(tmp_path / "store", models_dir), embedder=shared_embedder)
    try:
        failures: list[dict[str, str]] = []
        with pytest.raises(Cancelled, match="b-two.pdf: OCR page 1/2"):
            c.rag.indexer.run([docs], progress=progress, failures=failures)
        assert failures == []
        from sqlmodel import Session, select

        with Session(c.engine) as s:
            rows = {Path(r.path).name: r.status for r in s.exec(select(Document)).all()}
        assert rows == {"a-paper.pdf": "indexed"}
    finally:
        c.close()


@needs_tesseract
def test_indexed_scan_cites_ocr_with_confidence(
    files: dict[str, Path], tmp_path: Path, models_dir: Path, shared_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from aisac_core.context import AppContext
    from aisac_core.evidence.anchor import Anchor, ocr_note
    from aisac_core.rag.indexer import fingerprint, scan_fingerprint
    from servers.shapes.results_rag import compact

    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(files["mixed"], docs / "mixed.pdf")
    shutil.copy(files["other"], docs / "other.pdf")
    c = AppContext(make_settings(tmp_path / "store", models_dir), embedder=shared_embedder)
    try:
        msgs: list[str] = []
        counters = c.rag.indexer.run([docs], progress=lambda d, t, m: msgs.append(m))
        assert counters.files_indexed == 2 and counters.pages_ocr == 1 and counters.ocr_seconds > 0
        assert "mixed.pdf: OCR page 1/1" in msgs
        res = c.rag.search("zeolite membranes hydrogen permeance").as_dict()
        top = next(h for h in res["hits"] if h["path"].endswith("mixed.pdf"))
        assert top["page"] == 2 and top["anchor"]["source"] == "ocr"
        conf = top["anchor"]["ocr_confidence"]
        assert isinstance(conf, float) and 0.3 < conf <= 1
        assert ocr_note(top) == f"OCR text, confidence {conf:.2f}"
        assert Anchor.parse(top["anchor"]).to_dict() == top["anchor"]  # the fields survive a host's round trip
        for ch, h in zip(compact(res, "zeolite")["hits"], res["hits"]):  # the compact hit says it too
            assert ch.get("source") == h["anchor"].get("source") and ch.get("ocr_confidence") == h["anchor"].get(
                "ocr_confidence"
            )
        born = next(h for h in res["hits"] if h["path"].endswith("other.pdf"))
        assert "source" not in born["anchor"] and ocr_note(born) == ""
        assert c.rag.status()["stale_documents"] == 0
        # another Tesseract (or language data) re-reads the scanned document once; the born-digital one is skipped
        fp, fps = fingerprint(c.settings, c.embedder), scan_fingerprint(c.settings, c.embedder)
        eng = engine()
        assert eng is not None
        monkeypatch.setattr("aisac_core.rag.ocr.engine", lambda: dataclasses.replace(eng, version="tesseract 9.9"))
        assert fingerprint(c.settings, c.embedder) == fp and scan_fingerprint(c.settings, c.embedder) != fps
        assert c.rag.status()["stale_documents"] == 1
        again = c.rag.indexer.run([docs])
        assert (again.files_indexed, again.files_skipped, again.pages_ocr) == (1, 1, 1)
        assert c.rag.indexer.run([docs]).files_skipped == 2
    finally:
        c.close()


@needs_tesseract
def test_a_cited_ocr_passage_says_so_in_report_markdown_and_run_page(fast_core, corpus_copy, tmp_path: Path) -> None:  # noqa: ANN001
    """A real roles run (llm none) over a scanned copy of the project's report.pdf: the cited passage's anchor carries
    source "ocr" and its confidence, and the run report, the Markdown export and the run page all say so."""
    import anyio
    from fastmcp import Client

    from aisac_core.trace.queries import RunQueries
    from aisac_core.trace.report import run_report
    from aisac_core.trace.runpage import render_run
    from aisac_servers.serving.suite import build

    docs = tmp_path / "docs"
    docs.mkdir()
    scan_copy(corpus_copy / "report.pdf", docs / "report-scan.pdf", dpi=200)
    counters = fast_core.rag.indexer.run([docs])
    assert counters.files_indexed == 1 and counters.pages_ocr >= 1
    question = "How much efficiency did perovskite cells without encapsulation lose at 85 percent relative humidity?"

    async def ask() -> str:
        async with Client(build(app=fast_core, lifespan=False)) as c:
            args = {"task": question, "llm": "none", "mode": "lite", "wait_s": 120}
            out = (await c.call_tool("roles_run", args)).structured_content
        assert out["status"] == "done", out
        return str(out["run_id"])

    run = anyio.run(ask)
    data = RunQueries(fast_core.engine).get_run(run, include_results=True)
    report = run_report(data)
    card = report["cited"][0]
    assert card["path"].endswith("report-scan.pdf") and card["source"] == "ocr"
    assert isinstance(card["ocr_confidence"], float) and 0.3 < card["ocr_confidence"] <= 1
    note = f"OCR text, confidence {card['ocr_confidence']:.2f}"
    assert note in fast_core.trace.export(run, "markdown")["markdown"]
    assert note in render_run(data)


@needs_tesseract
def test_cli_search_labels_ocr_hits(files: dict[str, Path], tmp_path: Path, models_dir: Path) -> None:
    """`aisac index` then `aisac search` as a user types them (real subprocesses): an OCR hit says so in the table."""
    import os
    import subprocess

    aisac = str(Path(sys.executable).parent / "aisac")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", COLUMNS="160")
    store = tmp_path / "store"
    make_settings(store, models_dir)
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(files["scan"], docs / "scan.pdf")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [aisac, *args, "--data-dir", str(store)], env=env, capture_output=True, text=True, timeout=600
        )

    out = run("index", str(docs))
    assert out.returncode == 0 and "1 indexed" in out.stderr, out.stderr
    out = run("search", "thermal stability of layered perovskite films", "-k", "2")
    assert out.returncode == 0, out.stderr
    assert re.search(r"OCR text, confidence 0\.\d\d", out.stdout), out.stdout


def test_ocr_quotes_and_dashes_read_as_a_text_layer_gives_them() -> None:
    """Tesseract reads the printed glyphs (’ “ ” — –); docling-parse gives a born-digital text layer's as ASCII, so
    a scanned copy would index "patient’s" where the born-digital copy has "patient's" (other embedding tokens)."""
    from aisac_core.rag.ocr import parse_tsv

    head = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
    words = ["the", "patient’s", "“stork”", "experts—lawyers", "1–4", "‘quoted’"]
    rows = [f"5\t1\t1\t1\t1\t{k + 1}\t{100 * k}\t100\t90\t30\t95\t{w}" for k, w in enumerate(words)]
    (line,) = parse_tsv("\n".join([head, *rows]), 72 / 200)
    assert line.text == "the patient's \"stork\" experts-lawyers 1-4 'quoted'"


def test_ocr_title_lines_read_with_different_weights_make_one_title() -> None:
    """The OCR's weight is an estimate from stroke width: the two lines of one bold title may come out one bold,
    one not; they still make one title (a born-digital title's lines in two fonts stay apart)."""
    from aisac_core.rag.frontmatter import front_matter
    from aisac_core.rag.ocr import OCR_FONT, OCR_FONT_BOLD
    from aisac_core.rag.pdf import _Line

    def page(f1: str, f2: str) -> list[_Line]:
        body = [
            _Line(1, f"Body text line {k} of the abstract, which runs on here.", 144, 468, 300 + 11 * k, 9, f1)
            for k in range(12)
        ]
        return [
            _Line(1, "Multi-LexSum: Real-World Summaries of Civil", 129, 479, 100.4, 16.5, f1),
            _Line(1, "Rights Lawsuits at Multiple Granularities", 150, 458, 121.1, 15.8, f2),
            _Line(1, "Zejiang Shen Kyle Lo Lauren Yu Nathan Dahlberg", 175, 434, 182, 9.2, f2),
            *body,
        ]

    ocr = front_matter(page(OCR_FONT, OCR_FONT_BOLD), (612, 792), 9.0, OCR_FONT)
    assert ocr.title == "Multi-LexSum: Real-World Summaries of Civil Rights Lawsuits at Multiple Granularities"
    born = front_matter(page("Times-Roman", "Times-Bold"), (612, 792), 9.0, "Times-Roman")
    assert born.title != ocr.title


def test_ocr_section_name_alone_set_larger_is_a_heading() -> None:
    """A usual section name alone on an OCR line, larger than the body, is a heading whatever weight the OCR
    estimated; a born-digital line keeps telling its weight by its font, and an OCR line of body size is text."""
    from aisac_core.rag.ocr import OCR_FONT
    from aisac_core.rag.pdf import _heading_like_line, _Line

    assert _heading_like_line(_Line(1, "Abstract", 283, 327, 270, 11.3, OCR_FONT), 9.0)
    assert _heading_like_line(_Line(1, "References:", 283, 327, 270, 11.3, OCR_FONT), 9.0)
    assert not _heading_like_line(_Line(1, "Abstract", 283, 327, 270, 9.0, OCR_FONT), 9.0)
    assert not _heading_like_line(_Line(1, "Abstract", 283, 327, 270, 11.3, "Times-Roman"), 9.0)
    assert not _heading_like_line(_Line(1, "Abstract models of text", 283, 327, 270, 11.3, OCR_FONT), 9.0)


def _page(*words: tuple[str, float]) -> Any:
    from aisac_core.rag.ocr import OcrLine, OcrPage, OcrWord

    ws = [OcrWord(t, 10.0 * k, 0.0, 10.0 * k + 8, 10.0, c) for k, (t, c) in enumerate(words)]
    return OcrPage(1, [OcrLine(ws, 0.0, 0.0, 10.0 * len(ws), 10.0, 0.9)])


def test_capitals_read_with_a_lower_case_l_take_the_documents_own_reading() -> None:
    """Tesseract reads "AI" as "Al" and "F1" as "Fl" (one vertical stroke in many faces); a reading the same document
    holds at least twice, with a higher confidence, replaces it; a token without such a reading stays as read."""
    from aisac_core.rag.ocr import resolve_stroke_confusions

    doc = {
        1: _page(("AI", 0.95), ("AI", 0.94), ("Designing", 0.96), ("Al", 0.88), ("(Al-assisted", 0.9), ("Al2O3", 0.9)),
        2: _page(("F1", 0.8), ("F1", 0.7), ("Fl", 0.5), ("Fl.", 0.6), ("Cl", 0.9), ("ll", 0.8)),
    }
    assert resolve_stroke_confusions(doc) == 4
    texts = [w.text for p in doc.values() for ln in p.lines for w in ln.words]
    assert texts == ["AI", "AI", "Designing", "AI", "(AI-assisted", "Al2O3", "F1", "F1", "F1", "F1.", "Cl", "ll"]
    # a chemistry paper: "Al" is aluminium where the document does not write "AI" twice with more confidence
    chem = {1: _page(("Al", 0.93), ("Al", 0.92), ("AI", 0.95), ("alloy", 0.96))}
    assert resolve_stroke_confusions(chem) == 0
    sure = {1: _page(("Al", 0.97), ("AI", 0.9), ("AI", 0.9))}  # "Al" read with more confidence than "AI": kept
    assert resolve_stroke_confusions(sure) == 0
    assert [w.text for ln in sure[1].lines for w in ln.words] == ["Al", "AI", "AI"]


def test_fingerprint_names_the_ocr_reading_and_resolution() -> None:
    """A change of the OCR reading (OCR_READING) or of the resolution re-reads scanned documents once."""
    from aisac_core.rag.ocr import OCR_READING, fingerprint_part
    from aisac_core.settings import RagSettings

    assert OcrOptions().dpi == RagSettings().ocr_dpi == 300
    part = fingerprint_part(OcrOptions())
    if engine() is not None:
        assert part.endswith(f"@300dpi/r{OCR_READING}") and OCR_READING >= 3, part
        assert fingerprint_part(OcrOptions(dpi=200)) != part
    else:
        assert part == "ocr=missing"


@needs_tesseract
def test_a_200_dpi_scan_is_read_upscaled(tmp_path: Path) -> None:
    """The default resolution (300 dpi) reads a 200-dpi scan upscaled 1.5x, at an x-height Tesseract reads well: a page
    that is mostly a numeric table (1903.10676 page 1: scores like 88.85 in 9-pt type, whose dots and digits Tesseract
    split and merged at 200 dpi) lost a quarter of its words read at 200 dpi (recall 0.74, CER 0.14); read upscaled,
    recall 0.97, CER 0.009 (asserted: >= 0.9, <= 0.03)."""
    src = SHARED_DATA / "pdfs" / "papermage" / "1903.10676.pdf"
    if not src.is_file():
        pytest.skip("../shared/data is absent (fresh clone): the resolution check needs a shared paper")
    from aisac_core.rag.ocr import ocr_document

    scan = scan_copy(src, tmp_path / "table.pdf", dpi=200, pages=[1])
    page = ocr_document(scan, [1], OcrOptions())[1]
    truth = truth_lines(src, 1)
    hit, n_truth, n_ocr = word_scores(truth, [(w.text, w.l, w.t, w.r, w.b) for ln in page.lines for w in ln.words])
    dist, chars = line_cer(truth, [(ln.text, ln.l, ln.t, ln.r, ln.b) for ln in page.lines])
    assert hit / n_truth >= 0.9 and hit / n_ocr >= 0.95, (hit / n_truth, hit / n_ocr)
    assert dist / chars <= 0.03, dist / chars
