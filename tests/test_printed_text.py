"""Text as printed (issue 42, acceptance 3): line-end hyphens decided by the document's vocabulary and a word list,
spacing accents composed (NFC), word spaces restored from glyph positions; chunk text, quotes and anchors agree.

The PDF is of our own making (reportlab): a hyphen at a line end inside a compound ("machine-" + "readable") and
inside a word ("connec-" + "tion"), a diaeresis drawn as a glyph of its own over an "a" ("F¨arber"), and two names
drawn without a space character between them, 2.6 pt apart ("LuWang").
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from aisac_core.hashing import sha256_text
from aisac_core.rag.documents import ParsedDocument, parse_document
from aisac_core.rag.printed import Hyphenation, compose_diacritics, respace, spacing_accents

LINES = [
    "Scientific documents are rarely machine-",
    "readable in full, and the extraction of their",
    "text needs a careful connec-",
    "tion between the glyphs on the page and the",
    "words a reader sees, which we call printed text.",
]


def _draw(path: Path) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfbase.pdfmetrics import stringWidth
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    y = 760.0
    c.setFont("Helvetica-Bold", 16)
    c.drawString(72, y, "Text as printed")
    y -= 30
    c.setFont("Helvetica", 10)
    for t in LINES:
        c.drawString(72, y, t)
        y -= 13
    # TeX's way with an umlaut: the base letters, and the diaeresis as a glyph of its own set over the "a"
    head = "The work of Saier and F"
    c.drawString(72, y, head)
    x = 72 + stringWidth(head, "Helvetica", 10)
    wa, wd = stringWidth("a", "Helvetica", 10), stringWidth("\u00a8", "Helvetica", 10)
    c.drawString(x + (wa - wd) / 2, y + 1, "\u00a8")
    c.drawString(x, y, "arber is cited here.")
    y -= 13
    # two names with no space character between them, only a gap
    first = "It was extended by Lucy Lu"
    c.drawString(72, y, first)
    c.drawString(72 + stringWidth(first, "Helvetica", 10) + 2.6, y, "Wang in a later study.")
    c.save()
    return path


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory, models_dir: Path) -> tuple[ParsedDocument, ParsedDocument]:
    """The drawn PDF parsed as printed, and its conversion without the repairs (the text layer as read)."""
    from conftest import make_settings

    from aisac_core.rag.chunking import chunk_document
    from aisac_core.rag.embeddings import Embedder
    from aisac_core.rag.formats import convert
    from aisac_core.rag.pdf import reconstruct_pdf

    d = tmp_path_factory.mktemp("printed")
    tok = Embedder(make_settings(d / "store", models_dir)).tokenizer()
    pdf = _draw(d / "printed.pdf")
    doc = parse_document(pdf, tok)
    raw = reconstruct_pdf(convert(pdf, "pdf", "native"), pdf.stem, as_printed=False)
    text, chunks, _ = chunk_document(raw, tok, 256, None)
    return doc, ParsedDocument("pdf", text, "", None, 1, chunks)


def test_drawn_artefacts_are_there_without_the_repairs(parsed: tuple[ParsedDocument, ParsedDocument]) -> None:
    """The fixture holds the three artefacts: a test of the repairs that could not fail otherwise."""
    _, raw = parsed
    assert "machinereadable" in raw.text
    assert "LuWang" in raw.text
    assert spacing_accents(raw.text) >= 1


def test_text_as_printed(parsed: tuple[ParsedDocument, ParsedDocument]) -> None:
    doc, _ = parsed
    assert "machine-readable in full" in doc.text  # a compound's hyphen kept
    assert "careful connection between" in doc.text  # a typesetter's break joined
    assert "Saier and Färber is cited" in doc.text  # the diaeresis composed, NFC
    assert "Lucy Lu Wang in a later" in doc.text  # the space restored from the glyph positions
    assert spacing_accents(doc.text) == 0
    assert unicodedata.is_normalized("NFC", doc.text)


def test_chunks_and_anchors_agree_with_the_stored_text(parsed: tuple[ParsedDocument, ParsedDocument]) -> None:
    """Anchors are over the stored text: each chunk's char span there is its text, and its hash the anchor's."""
    doc, _ = parsed
    assert doc.chunks
    for c in doc.chunks:
        assert doc.text[c.char_start : c.char_end] == c.text
        assert sha256_text(doc.text[c.char_start : c.char_end]) == sha256_text(c.text)
    quoted = " ".join(c.text for c in doc.chunks)
    assert "Färber" in quoted and "Lu Wang" in quoted and "machine-readable" in quoted


def test_compose_diacritics() -> None:
    assert compose_diacritics("F\u00a8arber") == "F\u00e4rber"
    assert compose_diacritics("Stanojevi\u00b4c") == "Stanojevi\u0107"
    assert compose_diacritics("Kry\u00b4sci \u00b4nski") == "Kry\u015bci\u0144ski"  # the extractor's space goes
    assert compose_diacritics("Ond\u02c7rej") == "Ond\u0159ej"
    assert compose_diacritics("Lourenc\u00b8o") == "Louren\u00e7o"  # a cedilla follows its letter
    assert compose_diacritics("a\u00a8 b") == "\u00e4 b"  # accent after its letter
    assert compose_diacritics("( \u02dc x") == "( x\u0303"  # no precomposed form: letter + combining mark
    assert compose_diacritics("MS\u02c62") == "MS\u02c62"  # before a digit: no letter's accent, left alone
    assert compose_diacritics("cafe\u0301") == "caf\u00e9"  # NFC
    once = compose_diacritics("F\u00a8arber")
    assert compose_diacritics(once) == once


def test_respace_adds_only_spaces_between_letters() -> None:
    assert respace("Lucy LuWang", "Lucy Lu Wang") == "Lucy Lu Wang"
    assert respace("Ciorascu,Wendy", "Ciorascu, Wendy") == "Ciorascu, Wendy"
    assert respace("console.log(add(3, 5));", "console .log (add (3 , 5) ) ;") == "console.log(add(3, 5));"
    assert respace("\U0001d6fd\U0001d444", "\U0001d6fd \U0001d444") == "\U0001d6fd\U0001d444"  # a formula
    assert respace("LuWang", "Lu Wong") == "LuWang"  # other characters: unchanged
    assert respace("F\u00a8arber LuWang", "F \u00a8arber Lu Wang") == "F\u00a8arber Lu Wang"
    assert respace("a\ufb01x", "a \ufb01x") == "a \ufb01x"  # ligatures compare by NFKC


def test_hyphenation_vocabulary_and_word_list() -> None:
    words = {"connection": 10, "machine": 10, "readable": 10, "state": 5, "art": 5}
    h = Hyphenation(["we train a state-of-the-art model", "and a dataset of data-sets"], words=words)
    assert h.join("careful connec-", "tion") == "careful connection"  # joined form is a word
    assert h.join("machine-", "readable text") == "machine-readable text"  # two words, the joined form is none
    assert h.join("non-", "English") == "non-English"  # before a capital: kept, no space
    assert h.join("COVID-", "19") == "COVID-19"
    assert h.join("a line", "and the next") == "a line and the next"
    # the document's own usage decides first: "data-sets" is written with a hyphen elsewhere, "dataset" without
    assert h.join("data-", "sets") == "data-sets"
    assert h.join("data-", "set") == "dataset"
    assert h.join("syl-", "lable") == "syllable"  # unknown everywhere: a typesetter's break
    assert h.decisions[0] == ("connec-", "tion", True)


def test_hyphenation_ignores_the_halves_of_broken_words() -> None:
    """A word broken at a line end is no evidence: its halves do not enter the vocabulary."""
    h = Hyphenation(["Santiago On-", "tanon and others", "by Jeff On-", "tanon"], words={"on": 5})
    assert "tanon" not in h.vocab
    assert h.join("On-", "tanon") == "Ontanon"


def test_form_text_lines_reads_form_objects_and_skips_covered_lines(tmp_path: Path) -> None:
    """pdfium's reading of form XObjects: a form's line is returned where no parsed line covers it, never twice."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    from aisac_core.rag.printed import form_text_lines

    pdf = tmp_path / "form.pdf"
    c = canvas.Canvas(str(pdf), pagesize=A4)
    c.setFont("Helvetica", 10)
    c.drawString(72, 760, "Running text outside the form.")
    c.beginForm("box")
    c.setFont("Helvetica", 10)
    c.drawString(90, 700, "A boxed passage drawn as a form object.")
    c.endForm()
    c.doForm("box")
    c.save()
    got = form_text_lines(pdf, {1: []})[1]
    assert [g[0] for g in got] == ["A boxed passage drawn as a form object."]  # the running text is no form's
    text, l, t, r, b = got[0]  # noqa: E741
    assert 85 <= l <= 95 and abs(t - (A4[1] - 700 - 8)) < 4  # top-left origin
    assert form_text_lines(pdf, {1: [(l, t, r, b)]}) == {}  # already read: not again
    assert form_text_lines(None, {1: []}) == {}


def test_text_in_a_form_object_is_indexed(shared_data: Path, models_dir: Path, tmp_path: Path) -> None:
    """2304.02623 prints a boxed passage inside a form XObject that docling-parse does not read: it is in the stored
    text (and was only found on a scanned copy, through OCR, before aisac-parse-8)."""
    from conftest import make_settings

    from aisac_core.rag.embeddings import Embedder

    pdf = shared_data / "pdfs" / "papermage" / "2304.02623v1.pdf"
    if not pdf.is_file():
        pytest.skip(f"{pdf} is absent")
    doc = parse_document(pdf, Embedder(make_settings(tmp_path / "store", models_dir)).tokenizer())
    assert "produce step-by-step reasoning" in doc.text
    assert doc.text.count("Several studies have shown that pre-trained models") == 1
