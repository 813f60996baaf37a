"""Parsing and chunking with real docling parses of real files (no mocks).

The project's own corpus (fixtures_gen.write_corpus) covers PDF, DOCX, HTML and Markdown; the bad inputs
(fixtures_gen.write_bad_files) cover empty, binary-named-.pdf and truncated files; ../shared/data, when
present, covers every format of the shared collection and the encrypted PDF.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from fixtures_gen import PAGE_MARKERS, write_bad_files

from aisac_core.rag.documents import ParsedDocument, parse_document
from aisac_core.rag.formats import DOCUMENT_TYPES, DocumentError, file_type_of
from aisac_core.rag.structure import SECTION_LABELS, section_label

CORPUS_FILES = {
    "report.pdf": "pdf",
    "summary.docx": "docx",
    "glossary.html": "html",
    "notes/heat_transfer.md": "md",
    "notes/enzyme_kinetics.md": "md",
}


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory: pytest.TempPathFactory, models_dir: Path):  # noqa: ANN201
    from conftest import make_settings

    from aisac_core.rag.embeddings import Embedder

    return Embedder(make_settings(tmp_path_factory.mktemp("doc-tok") / "store", models_dir)).tokenizer()


@pytest.fixture(scope="session")
def parsed(corpus: Path, tokenizer) -> dict[str, ParsedDocument]:  # noqa: ANN001
    return {name: parse_document(corpus / name, tokenizer) for name in CORPUS_FILES}


# ---- every format of the corpus --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
def test_corpus_file_parses_into_chunks(parsed: dict[str, ParsedDocument], name: str) -> None:
    doc = parsed[name]
    assert doc.file_type == CORPUS_FILES[name]
    assert doc.chunks, f"{name}: no chunks"
    assert doc.text.strip() and doc.markdown.strip()
    assert [c.index for c in doc.chunks] == list(range(len(doc.chunks)))
    for c in doc.chunks:
        assert c.text.strip()
        assert c.text in c.embed_text or _norm(c.text) in _norm(c.embed_text)
        assert c.section_covers in SECTION_LABELS


def test_titles(parsed: dict[str, ParsedDocument]) -> None:
    assert parsed["report.pdf"].title == "Notes on materials durability"
    assert parsed["notes/heat_transfer.md"].title == "Convective heat transfer in a packed bed"
    assert parsed["glossary.html"].title == "Glossary of rheology"
    assert parsed["summary.docx"].title == "Summary of the corrosion campaign"


def test_pdf_pages_and_markers_on_their_page(parsed: dict[str, ParsedDocument]) -> None:
    doc = parsed["report.pdf"]
    assert doc.pages == 2
    for page, marker in PAGE_MARKERS.items():
        holders = [c for c in doc.chunks if marker in c.text]
        assert holders, f"marker {marker!r} in no chunk"
        for c in holders:
            assert c.page == page and c.page_end == page, (marker, c.page, c.page_end)
    # the page numbers printed at the bottom of each page are not text of the document
    assert not {"1", "2"} & {p.strip() for p in doc.text.split("\n\n")}
    # headings reconstructed from font size / numbering end up in the section path
    assert any("2 Catalyst deactivation" in c.section for c in doc.chunks if c.page == 2)


def test_non_pdf_formats_have_no_page_anchor(parsed: dict[str, ParsedDocument]) -> None:
    for name in ("notes/heat_transfer.md", "glossary.html", "summary.docx"):
        assert all(c.page is None for c in parsed[name].chunks), name


@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
def test_char_spans_index_into_the_text(parsed: dict[str, ParsedDocument], name: str) -> None:
    doc = parsed[name]
    for c in doc.chunks:
        assert 0 <= c.char_start < c.char_end <= len(doc.text), (c.char_start, c.char_end, len(doc.text))
        span = doc.text[c.char_start : c.char_end]
        first_words = " ".join(c.text.split()[:6])
        assert first_words in _norm(span), (name, c.index, first_words, span[:120])
        # the span is the chunk itself (whitespace aside), not a wider region
        assert _norm(span) == _norm(c.text), (name, c.index)


def test_char_spans_of_split_paragraphs_are_narrowed(corpus: Path, tokenizer) -> None:  # noqa: ANN001
    """With a small chunk size, long paragraphs are split; each piece's span must be its own text."""
    doc = parse_document(corpus / "notes/heat_transfer.md", tokenizer, max_tokens=40)
    default = parse_document(corpus / "notes/heat_transfer.md", tokenizer)
    assert len(doc.chunks) > len(default.chunks), "max_tokens=40 should split some paragraph"
    spans = []
    for c in doc.chunks:
        span = doc.text[c.char_start : c.char_end]
        assert _norm(span) == _norm(c.text), (c.index, c.text[:60], span[:60])
        spans.append((c.char_start, c.char_end))
    assert spans == sorted(spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "spans of consecutive chunks overlap"


def test_chunk_size_bounds_tokens(corpus: Path, tokenizer) -> None:  # noqa: ANN001
    for max_tokens in (40, 64):
        doc = parse_document(corpus / "notes/heat_transfer.md", tokenizer, max_tokens=max_tokens)
        counts = [len(tokenizer.encode(c.embed_text, add_special_tokens=False).ids) for c in doc.chunks]
        assert max(counts) <= max_tokens, (max_tokens, counts)


# ---- sections ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "label"),
    [
        ("3.1 Materials and Methods", "methods"),
        ("Findings", "results"),
        ("Bibliography", "references"),
        ("Experimental", "methods"),
        ("Abstract", "abstract"),
        ("1. Introduction", "introduction"),
        ("Introduction", "introduction"),
        ("Implementation details", "methods"),
        ("I. Introduction", "introduction"),
        ("IV Results", "results"),
        ("II. RESULTS AND DISCUSSION", "results"),
        ("5 Discussion", "discussion"),
        ("Conclusions", "conclusion"),
        ("References", "references"),
        ("Datasets", "datasets"),
        ("Acknowledgements", "other"),
        ("Viscoelasticity", "other"),
        ("Yield stress", "other"),
        ("", "other"),
        (None, "other"),
    ],
)
def test_section_label(heading: str | None, label: str) -> None:
    assert section_label(heading) == label


def test_chunks_carry_their_section(parsed: dict[str, ParsedDocument]) -> None:
    heat = parsed["notes/heat_transfer.md"]
    by_label = {c.section_covers: c for c in heat.chunks}
    assert set(by_label) == {"abstract", "methods", "results", "discussion"}
    assert "Nu = 0.17 Re^0.79" in by_label["results"].text
    assert "Thermocouples" in by_label["methods"].text
    assert by_label["results"].section.endswith("Results")
    docx = parsed["summary.docx"]
    assert [c.section_covers for c in docx.chunks if "Passivation" in c.text] == ["conclusion"]


def test_document_title_does_not_label_sections(parsed: dict[str, ParsedDocument]) -> None:
    """The PDF's title "Notes on materials durability" is not a section heading: its chunks sit under
    "1 Stability of perovskite solar cells" and "2 Catalyst deactivation", neither of which is a
    taxonomy section, so they are "other" (not "methods" because the title says "materials")."""
    pdf = parsed["report.pdf"]
    assert [c.section_covers for c in pdf.chunks] == ["other"] * len(pdf.chunks)
    assert all(c.section_covers == "other" for c in parsed["glossary.html"].chunks)


# ---- bad inputs --------------------------------------------------------------------------------------


def test_bad_files_raise_specific_errors(tmp_path: Path, tokenizer) -> None:  # noqa: ANN001
    bad = write_bad_files(tmp_path / "bad")
    expected = {"empty": "is empty (0 bytes)", "binary": "is not a PDF", "truncated": "damaged or truncated"}
    for key, path in bad.items():
        with pytest.raises(DocumentError) as ei:
            parse_document(path, tokenizer)
        msg = str(ei.value)
        assert path.name in msg and expected[key] in msg, (key, msg)


def test_other_bad_inputs(tmp_path: Path, tokenizer) -> None:  # noqa: ANN001
    (tmp_path / "notes.xyz").write_text("some text")
    with pytest.raises(DocumentError, match=r"unsupported file type \.xyz.*\.pdf"):
        parse_document(tmp_path / "notes.xyz", tokenizer)
    (tmp_path / "blank.md").write_text("   \n\n \n")
    with pytest.raises(DocumentError, match="blank.md contains no extractable text"):
        parse_document(tmp_path / "blank.md", tokenizer)
    (tmp_path / "junk.docx").write_bytes(bytes(range(256)) * 8)
    with pytest.raises(DocumentError, match="junk.docx could not be parsed"):
        parse_document(tmp_path / "junk.docx", tokenizer)


def test_file_type_of() -> None:
    assert file_type_of(Path("a/B.PDF")) == "pdf"
    assert file_type_of(Path("x.nxml")) == "jats"
    assert file_type_of(Path("x.csv")) is None
    assert set(DOCUMENT_TYPES.values()) >= {"pdf", "docx", "pptx", "xlsx", "html", "md", "jats"}


# ---- shared data -------------------------------------------------------------------------------------

ENCRYPTED = "2206.01062_pg3.password-1234.pdf"


@pytest.mark.slow
def test_every_shared_file_parses(shared_data: Path, tokenizer, parse_pool) -> None:  # noqa: ANN001
    """Every document of ../shared/data/formats and ../shared/data/pdfs parses into chunks whose spans
    lie in the text; the encrypted PDF is refused with a message saying so."""
    files = sorted(
        p
        for root in (shared_data / "formats", shared_data / "pdfs")
        for p in root.rglob("*")
        if p.is_file() and file_type_of(p) is not None
    )
    assert len(files) >= 40
    types = set()
    failures = {}
    t0 = time.perf_counter()
    for f in files:
        if f.name == ENCRYPTED:
            with pytest.raises(DocumentError, match="encrypted"):
                parse_document(f, tokenizer)
            continue
        try:
            doc = parse_pool.parse(f, tokenizer)  # parse_document, once per run (conftest.ParsePool)
        except DocumentError as exc:
            failures[f.name] = str(exc)
            continue
        types.add(doc.file_type)
        assert doc.chunks and doc.title, f
        if doc.file_type == "pdf":
            assert doc.pages and all(
                c.page is not None and 1 <= c.page <= c.page_end <= doc.pages for c in doc.chunks
            ), f
        for c in doc.chunks:
            assert 0 <= c.char_start <= c.char_end <= len(doc.text), (f, c.index)
            assert c.section_covers in SECTION_LABELS
    assert not failures, failures
    assert types >= {"pdf", "docx", "pptx", "xlsx", "html", "md", "jats", "latex"}
    assert any(f.name == ENCRYPTED for f in files)
    print(f"parsed {len(files)} shared files in {time.perf_counter() - t0:.1f} s")


JATS_BODY = (
    '<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="research-article" dtd-version="1.2">'
    "<front><article-meta><title-group><article-title>Sparse copies of session folders</article-title>"
    "</title-group><abstract><p>We measure allocated disk blocks.</p></abstract></article-meta></front>"
    "<body><sec><title>Introduction</title><p>Holes stay holes when files are copied.</p></sec>"
    "<sec><title>Methods</title><p>We used lseek with SEEK_DATA and SEEK_HOLE.</p></sec></body></article>"
)
DOCTYPES = {
    "none": "",
    "jats-publishing": '<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Publishing DTD v1.2 20190208//EN" '
    '"JATS-journalpublishing1.dtd">',
    "nlm-archiving-3": '<!DOCTYPE article PUBLIC "-//NLM//DTD Journal Archiving and Interchange DTD v3.0 20080202//EN" '
    '"archivearticle3.dtd">',
}


@pytest.mark.parametrize("suffix", [".xml", ".nxml"])
@pytest.mark.parametrize("doctype", sorted(DOCTYPES))
def test_jats_is_parsed_whatever_its_doctype(tmp_path: Path, tokenizer, suffix: str, doctype: str) -> None:  # noqa: ANN001
    """Issue 38: ``.xml`` JATS files were refused as "File format not allowed" although the docs list JATS (docling
    detects JATS only by a DOCTYPE naming ``JATS-journalpublishing`` or ``JATS-archive``); a JATS article without a
    DOCTYPE, or under the NLM DTDs JATS replaced, parses into its sections."""
    f = tmp_path / f"paper{suffix}"
    f.write_text(f'<?xml version="1.0" encoding="UTF-8"?>\n{DOCTYPES[doctype]}\n{JATS_BODY}', encoding="utf-8")
    doc = parse_document(f, tokenizer)
    assert doc.file_type == "jats" and doc.title == "Sparse copies of session folders", doc.title
    assert "SEEK_DATA" in doc.text and {c.section_covers for c in doc.chunks} >= {"introduction", "methods"}


def test_xml_that_is_not_jats_is_a_clear_error(tmp_path: Path, tokenizer) -> None:  # noqa: ANN001
    (tmp_path / "plot.xml").write_text('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>')
    with pytest.raises(DocumentError, match=r"plot.xml is XML but not a JATS article \(its root element is <svg>"):
        parse_document(tmp_path / "plot.xml", tokenizer)
    (tmp_path / "cut.xml").write_text("<article><body><p>unclosed")
    with pytest.raises(DocumentError, match="cut.xml is not well-formed XML"):
        parse_document(tmp_path / "cut.xml", tokenizer)
    (tmp_path / "secret.txt").write_text("xxe-secret-7f3a")
    (tmp_path / "xxe.xml").write_text(
        f'<?xml version="1.0"?><!DOCTYPE article [<!ENTITY x SYSTEM "file://{tmp_path}/secret.txt">]>'
        "<article><body><sec><title>Intro</title><p>&x; end</p></sec></body></article>"
    )
    try:
        doc = parse_document(tmp_path / "xxe.xml", tokenizer)
    except DocumentError:
        return
    assert "xxe-secret-7f3a" not in doc.text  # the external entity is never resolved
