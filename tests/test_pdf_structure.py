"""PDF structure: sections, abstract reading order, captions, tables, references, metadata,
text similarity against docling's groundtruth, bad inputs, and the overview / read_sections tools.

Every document is parsed for real (docling's model-free pipeline + aisac's reconstruction); the shared
papers come from ../shared/data/pdfs (tests skip when it is absent); our own fixtures are written with
reportlab (tests/pdf_fixtures.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pdf_fixtures import DOI, TITLE, make_paper, make_scanned

from aisac_core.rag.documents import ParsedDocument, parse_document
from aisac_core.rag.formats import DocumentError
from aisac_core.rag.sections import overview_of_structure
from aisac_core.rag.structure import SECTION_LABELS

# --------------------------------------------------------------------------------------------------
# Top-level sections a reader sees in each paper of ../shared/data/pdfs/papermage, written by reading the
# PDFs page by page (headings as printed; the two one-page extracts show only what is on their page:
# 1903.10676 continues section 4 and starts "5 Discussion"; 2107.07170 has no heading at all, only a run-in
# paragraph title). Kept in tests/fixtures/papermage_sections.json, which bench/pdf.py reads too.
# --------------------------------------------------------------------------------------------------
PAPERMAGE_SECTIONS: dict[str, list[str]] = json.loads(
    (Path(__file__).parent / "fixtures" / "papermage_sections.json").read_text(encoding="utf-8")
)

#: sentences of each abstract as printed (line-end hyphens joined): they must come out whole and in order
ABSTRACT_SENTENCES: dict[str, list[str]] = {
    "2020.acl-main.447.pdf": [
        "The corpus consists of rich metadata, paper abstracts, resolved bibliographic references, as well as "
        "structured full text for 8.1M open access papers.",
        "In S2ORC, we aggregate papers from hundreds of academic publishers and digital archives into a unified "
        "source, and create the largest publicly-available collection of machine-readable academic text to date.",
        "We hope this resource will facilitate research and development of tools and tasks for text mining over "
        "academic text.",
    ],
    "2023.eacl-main.121.pdf": [
        "While human evaluation remains best practice for accurately judging the faithfulness of "
        "automatically-generated summaries, few solutions exist to address the increased difficulty and workload "
        "when evaluating long-form summaries.",
        "Through a survey of 162 papers on long-form summarization, we first shed light on current human "
        "evaluation practices surrounding long-form summaries.",
        "We release our human judgments, annotation templates, and our software for future research.",
    ],
    "2206.10883v3.pdf": [
        "With the advent of large language models, methods for abstractive summarization have made great "
        "strides, creating potential for use in applications to aid knowledge workers processing unwieldy "
        "document collections.",
        "Motivated by this ongoing real-world summarization effort, we introduce Multi-LexSum, a collection of "
        "9,280 expert-authored summaries drawn from ongoing CRLC writing.",
        "We release Multi-LexSum for further research in summarization methods as well as to facilitate "
        "development of applications to assist in the CRLC's mission.",
    ],
    "2302.07302v1.pdf": [
        "When reading a scholarly article, inline citations help researchers contextualize the current article "
        "and discover relevant prior work.",
        "This paper introduces CiteSee, a paper reading tool that leverages a user's publishing, reading, and "
        "saving activities to provide personalized visual augmentations and context around citations.",
        "We conducted a lab study that suggests CiteSee is significantly more effective for paper discovery "
        "than three baselines.",
    ],
    "2304.02623v1.pdf": [
        "Large language models have introduced exciting new opportunities and challenges in designing and "
        "developing new AI-assisted writing support tools.",
        "In this position paper, we argue that developing AI supports for expository writing has unique and "
        "exciting research challenges and can lead to high real-world impacts.",
        "We sketch three components for AI support design and discuss considerations for future research.",
    ],
    "papermage.pdf": [
        "Despite growing interest in applying natural language processing (NLP) and computer vision (CV) models "
        "to the scholarly domain, scientific documents remain challenging to work with.",
        # "open-" + "source" at a line end: the paper's own compound (aisac-parse-8 keeps the hyphen; -7 dropped it)
        "We introduce papermage, an open-source Python toolkit for analyzing and processing visually-rich, "
        "structured scientific documents.",
        "papermage has powered multiple research prototypes of AI applications over scientific documents, along "
        "with Semantic Scholar's large-scale production system for processing millions of PDFs.",
    ],
}

#: rapidfuzz ratio (0-100) of our Markdown against docling's groundtruth Markdown, both normalised
#: (:func:`_norm_md`), as measured with parser revision aisac-parse-3 (rounded down): a floor, not a target.
GROUNDTRUTH_FLOORS = {
    "2305.03393v1-pg9.pdf": 92.0,
    "code_and_formula.pdf": 99.0,
    "multi_page.pdf": 99.5,
    "normal_4pages.pdf": 96.0,
    "redp5110_sampled.pdf": 94.0,
}


def _key(heading: str) -> str:
    """Heading comparison key: lower-case letters and digits only (PDF text drops some inter-word spaces,
    e.g. "RELATEDWORK", and typographic quotes vary)."""
    return re.sub(r"[^a-z0-9]", "", heading.lower())


def _norm(s: str) -> str:
    return " ".join(s.replace("\u2019", "'").replace("\u2014", "-").split())


def _norm_md(md: str) -> str:
    md = re.sub(r"<!--.*?-->", " ", md, flags=re.S)
    md = re.sub(r"[#*_|`>\-]+", " ", md)
    return " ".join(md.lower().split())


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory, models_dir: Path, parse_pool):  # noqa: ANN001, ANN201
    from conftest import make_settings

    from aisac_core.rag.embeddings import Embedder

    _POOL[:] = [parse_pool]
    return Embedder(make_settings(tmp_path_factory.mktemp("pdf-tok") / "store", models_dir)).tokenizer()


_PARSED: dict[str, ParsedDocument] = {}
#: the run's conftest.ParsePool (set by the ``tokenizer`` fixture, which every test that parses uses)
_POOL: list = []


def _parsed(path: Path, tokenizer) -> ParsedDocument:  # noqa: ANN001
    """``parse_document(path, tokenizer)``, once per run (conftest.ParsePool) and kept for this module's tests."""
    if str(path) not in _PARSED:
        _PARSED[str(path)] = _POOL[0].parse(path, tokenizer)
    return _PARSED[str(path)]


# ---- acceptance 2: top-level sections of real papers -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PAPERMAGE_SECTIONS))
def test_papermage_top_level_sections(shared_data: Path, tokenizer, name: str) -> None:  # noqa: ANN001
    doc = _parsed(shared_data / "pdfs" / "papermage" / name, tokenizer)
    found = [s["title"] for s in overview_of_structure(doc.structure)["sections"] if s["level"] == 1]
    truth = PAPERMAGE_SECTIONS[name]
    fk, tk = [_key(t) for t in found], [_key(t) for t in truth]
    hits = sum(1 for t in tk if t in fk)
    recall = hits / len(tk) if tk else 1.0
    precision = sum(1 for f in fk if f in tk) / len(fk) if fk else 1.0
    # measured 1.00 / 1.00 on all 9 papers (parser aisac-parse-4, heading hygiene included): kept exact
    assert recall == 1.0 and precision == 1.0, (
        name,
        recall,
        precision,
        sorted(set(tk) - set(fk)),
        sorted(set(fk) - set(tk)),
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ABSTRACT_SENTENCES))
def test_papermage_abstract_whole_and_in_order(shared_data: Path, tokenizer, name: str) -> None:  # noqa: ANN001
    doc = _parsed(shared_data / "pdfs" / "papermage" / name, tokenizer)
    abstracts = [s for s in doc.structure["sections"] if s["label"] == "abstract"]
    assert len(abstracts) == 1, [s["title"] for s in abstracts]
    a = abstracts[0]
    text = _norm(doc.text[a["char_start"] : a["char_end"]])
    pos = -1
    for sent in ABSTRACT_SENTENCES[name]:
        i = text.find(_norm(sent))
        assert i > pos, (name, sent, text[:400])
        pos = i
    assert a["page_start"] == 1 and a["chunk_count"] >= 1


def test_metadata_of_real_papers(shared_data: Path, tokenizer) -> None:  # noqa: ANN001
    pm = shared_data / "pdfs" / "papermage"
    m = _parsed(pm / "2206.10883v3.pdf", tokenizer).structure["metadata"]
    assert m["title"] == "Multi-LexSum: Real-World Summaries of Civil Rights Lawsuits at Multiple Granularities"
    assert m["arxiv_id"] == "2206.10883v3" and m["year"] == 2022
    assert {"Zejiang Shen", "Kyle Lo", "Doug Downey"} <= set(m["authors"])
    m = _parsed(pm / "2302.07302v1.pdf", tokenizer).structure["metadata"]
    assert m["doi"] == "10.1145/3544548.3580847" and m["title"].startswith("CiteSee: Augmenting Citations")
    m = _parsed(pm / "2020.acl-main.447.pdf", tokenizer).structure["metadata"]
    assert m["title"] == "S2ORC: The Semantic Scholar Open Research Corpus" and m["year"] == 2020
    assert m["arxiv_id"] is None and "Kyle Lo" in m["authors"]
    # an extract page has no title block: no title is invented
    assert _parsed(pm / "2107.07170.pdf", tokenizer).structure["metadata"]["title"] is None


def test_captions_of_real_papers(shared_data: Path, tokenizer) -> None:  # noqa: ANN001
    caps = _parsed(shared_data / "pdfs" / "papermage" / "2020.acl-main.447.pdf", tokenizer).structure["captions"]
    assert caps[0]["kind"] == "figure" and caps[0]["text"].startswith("Figure 1: Inline citations")
    assert any(c["kind"] == "table" and c["text"].startswith("Table 1:") for c in caps)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PAPERMAGE_SECTIONS))
def test_chunks_never_straddle_sections(shared_data: Path, tokenizer, name: str) -> None:  # noqa: ANN001
    doc = _parsed(shared_data / "pdfs" / "papermage" / name, tokenizer)
    starts = [s["char_start"] for s in doc.structure["sections"]]
    for c in doc.chunks:
        assert not any(c.char_start < b < c.char_end for b in starts), (name, c.index, c.section)
        assert c.section_covers in SECTION_LABELS


# ---- acceptance 1: similarity to docling's groundtruth ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GROUNDTRUTH_FLOORS))
def test_docling_groundtruth_similarity(shared_data: Path, tokenizer, name: str) -> None:  # noqa: ANN001
    from rapidfuzz import fuzz

    pdf = shared_data / "pdfs" / "docling" / name
    gt = (shared_data / "pdfs" / "docling" / "groundtruth" / (pdf.stem + ".md")).read_text(encoding="utf-8")
    ratio = fuzz.ratio(_norm_md(_parsed(pdf, tokenizer).markdown), _norm_md(gt))
    print(f"{name}: rapidfuzz ratio {ratio:.1f} (floor {GROUNDTRUTH_FLOORS[name]})")
    assert ratio >= GROUNDTRUTH_FLOORS[name], (name, ratio)


def test_non_english_pdf(shared_data: Path, tokenizer) -> None:  # noqa: ANN001
    doc = _parsed(shared_data / "pdfs" / "docling" / "normal_4pages.pdf", tokenizer)
    assert doc.pages == 4 and doc.chunks
    assert "코로나-19" in doc.text and "재해보험금" in doc.text
    assert all(c.section_covers in SECTION_LABELS for c in doc.chunks)


def test_encrypted_pdf_is_refused(shared_data: Path, tokenizer) -> None:  # noqa: ANN001
    with pytest.raises(DocumentError, match="encrypted"):
        parse_document(shared_data / "pdfs" / "docling" / "2206.01062_pg3.password-1234.pdf", tokenizer)


# ---- our own fixtures: captions, tables, references, labels, scanned pages ------------------------------


def test_structure_of_a_generated_paper(tmp_path: Path, tokenizer) -> None:  # noqa: ANN001
    doc = parse_document(make_paper(tmp_path / "paper.pdf"), tokenizer)
    st = doc.structure
    assert doc.pages == 1  # a one-page document
    assert st["metadata"]["title"] == TITLE and st["metadata"]["doi"] == DOI and st["metadata"]["year"] == 2024
    assert st["metadata"]["authors"] == ["Ada Lovelace", "Carl Gauss", "Marie Curie"]
    secs = [(s["title"], s["label"], s["level"]) for s in st["sections"]]
    assert secs == [
        ("Abstract", "abstract", 1),
        ("1 Introduction", "introduction", 1),
        ("2 Materials and Methods", "methods", 1),
        ("3 Results", "results", 1),
        ("4 Conclusion", "conclusion", 1),
        ("References", "references", 1),
    ]
    assert [(c["kind"], c["text"][:8]) for c in st["captions"]] == [("figure", "Figure 1"), ("table", "Table 1:")]
    kinds = {b[0] for b in st["blocks"]}
    assert {"heading", "text", "caption", "table", "reference"} <= kinds
    table = next(doc.text[b[2] : b[3]] for b in st["blocks"] if b[0] == "table")
    assert table.splitlines()[0] == "spacer | onset (C) | product" and "butyl | 160 | PbI2" in table
    refs = [doc.text[b[2] : b[3]] for b in st["blocks"] if b[0] == "reference"]
    assert len(refs) == 2 and refs[0].startswith("[1] A. Author")
    by_label = {c.section_covers for c in doc.chunks}
    # the front matter (authors, DOI line) is before any section: "other"
    assert by_label == {"other", "abstract", "introduction", "methods", "results", "conclusion", "references"}
    assert [c.section_covers for c in doc.chunks if "Ada Lovelace" in c.text] == ["other"]
    assert "## 3 Results" in doc.markdown or "3 Results" in doc.markdown


def test_scanned_pdf_has_no_text_layer(tmp_path: Path, tokenizer) -> None:  # noqa: ANN001
    from aisac_core.rag.ocr import OcrOptions

    # with OCR off (with OCR on, tests/test_ocr.py reads scans; without Tesseract the refusal names its packages)
    with pytest.raises(DocumentError, match="no text layer.*AISAC_OCR=off"):
        parse_document(make_scanned(tmp_path / "scan.pdf"), tokenizer, ocr=OcrOptions(enabled=False))


# ---- heading hygiene: figure / table / equation text, run-in headings, lost spaces, nesting -------------


#: what a section heading may not look like (checked on every shared PDF); reasons of headings.heading_problem
#: plus a lower-case start
def _bad_heading(title: str) -> str | None:
    from aisac_core.rag.headings import heading_problem

    if title[:1].islower():
        return "lower-case start"
    return heading_problem(title)


def _shared_pdfs() -> list[Path]:
    from conftest import SHARED_DATA

    pdfs = (
        sorted((SHARED_DATA / "pdfs" / "papermage").glob("*.pdf"))
        + sorted((SHARED_DATA / "pdfs" / "docling").glob("*.pdf"))
        + sorted((SHARED_DATA / "pdf_metadata" / "grobid").glob("*.pdf"))
    )
    return [p for p in pdfs if "password" not in p.name]


@pytest.mark.slow
@pytest.mark.parametrize("path", _shared_pdfs(), ids=lambda p: p.name)
def test_headings_of_every_shared_pdf_are_clean(shared_data: Path, tokenizer, path: Path) -> None:  # noqa: ANN001
    doc = _parsed(path, tokenizer)
    titles = [s["title"] for s in doc.structure["sections"]]
    print(path.name, titles)
    bad = [(t, why) for t in titles if (why := _bad_heading(t))]
    if doc.structure["metadata"]["outline_source"] == "outline":
        # headings named by the PDF's own outline (bookmarks) may be long: 2203.00130v1's "7.2 How does Paper
        # Plain affect ... relevant information?" is 136 characters, as printed and as bookmarked
        bad = [(t, why) for t, why in bad if why != "long"]
    assert not bad, (path.name, bad)
    assert all(len(t) <= (200 if doc.structure["metadata"]["outline_source"] == "outline" else 120) for t in titles)
    assert not [t for t in titles if re.match(r"^\d+(\.\d+)*[A-Za-z]", t)]  # "2RelatedWork"


def test_heading_problem_predicates() -> None:
    from aisac_core.rag.headings import heading_problem, math_like

    for ok in (
        "2 Related Work",
        "3.1 RQ1: Does inter-annotator agreement improve?",
        "Acknowledgements",
        "A Background & Terminology",
        "5.2 Effect of SCIVOCAB",
        "Limitations",
        "4 Vignette: Building a QA",
    ):
        assert heading_problem(ok) is None, ok
    cases = {
        "Figure 3: Scaling of the search": "caption",
        "Table 2": "caption",
        "Fsumm = 1": "math",
        "S ∑summ∈S Fsumm where": "math",
        "(3) 12.5 17.0 0.33": "digits",
        "Method | Acc | F1": "table-cell",
        "Human evaluation of long-form summaries is": "fragment",
        "Data Classes. magelib provides three base data": "run-in",
        "2RelatedWork": "missing-space",
        "1 is the mean difference in score": "fragment",
        "x" * 130: "long",
    }
    for text, why in cases.items():
        assert heading_problem(text) == why, (text, heading_problem(text))
    assert math_like("𝛽 𝑃𝐷𝐹 2") and math_like("a + b → c (3)") and not math_like("Multi-task learning")


def test_repair_heading_spaces() -> None:
    from aisac_core.rag.headings import repair_heading

    assert repair_heading("2RelatedWork") == "2 Related Work"
    assert repair_heading("2 RelatedWork") == "2 Related Work"
    assert repair_heading("4.2Computer Science Domain") == "4.2 Computer Science Domain"
    assert repair_heading("3.2 CreatingMulti-LexSum summaries") == "3.2 Creating Multi-LexSum summaries"
    assert (
        repair_heading("D.1 ModelingMixed-Effects in RepeatedMeasures")
        == "D.1 Modeling Mixed-Effects in Repeated Measures"
    )
    assert repair_heading("A Background &Terminology") == "A Background & Terminology"
    for keep in (
        "5 Pretraining SciBERT on GitHub",
        "LaTeX and BibTeX sources",
        "CiteSee in PubMed",
        "OpenAI and DeepMind models",
        "3D Reconstruction",
        "2 BERT",
        "iPhone apps",
    ):
        assert repair_heading(keep) == keep


def test_run_in_split() -> None:
    from aisac_core.rag.headings import run_in_split

    line = [("Reward", True, False), ("Design", True, False)] + [(w, False, True) for w in "We conduct RL".split()]
    assert run_in_split(line) == 2
    # a heading whose last word is in italics or code is no run-in; an all-bold line neither
    assert (
        run_in_split([("3.1", True, False), ("Models", True, False), ("with", True, False), ("magelib", False, False)])
        == 0
    )
    assert run_in_split([("Results", True, False), ("overview", True, False)]) == 0


def test_figure_debris_runs() -> None:
    from aisac_core.rag.headings import figure_debris
    from aisac_core.rag.pdf import _Line

    def ln(text: str, top: float, w: float = 200, h: float = 10) -> _Line:
        return _Line(1, text, 72, 72 + w, top, h)

    seq = [
        ln("Body text that fills the whole column of the page here.", 100, 300),
        ln("[Search]Analysis of scaling", 120, 120),
        ln("accuracy", 135, 40),
        ln("0.5", 150, 15),
        ln("Figure 2: Scaling of the search.", 170, 300),
        ln("Body again, a long line of running text in the body font.", 190, 300),
        ln("Reward Design", 210, 80),
        ln("Body after a real heading, a long line of running text.", 225, 300),
        ln("Method", 250, 40),
        ln("Acc", 250, 20),
        ln("Body closing the page, another long line of running text.", 270, 300),
    ]
    seq[9].l, seq[9].r = 200, 220
    body = [i in (0, 5, 7, 10) for i in range(len(seq))]
    in_row = [i in (8, 9) for i in range(len(seq))]
    short = [s.r - s.l < 165 for s in seq]
    flags = figure_debris(seq, body, [False] * len(seq), in_row, short, 10.0)
    assert flags[1] and flags[2] and flags[3]  # figure text above its caption
    assert not flags[6]  # a heading between body paragraphs
    assert flags[8] and flags[9]  # table header cells
    tiny = figure_debris([ln("ABSTRACT", 10, 30, h=5)], [False], [True], [False], [True], 10.0)
    assert tiny == [True]  # text set at half the body size is figure text (a paper shown in a figure)


def test_heading_levels_follow_numbering_and_size() -> None:
    from aisac_core.rag.pdf import _heading_level
    from aisac_core.rag.structure import NUMBERING

    def lvl(t: str, numbered: bool = True, h: float = 12, top_h: float = 12, sizes: list[float] | None = None):
        return _heading_level(t, numbered, h, top_h, NUMBERING.match(t), sizes)

    assert lvl("2 Related Work") == 1 and lvl("2.1 Data") == 2 and lvl("IV. Results") == 1
    assert lvl("References", h=10) == 1 and lvl("Acknowledgements", h=9) == 1 and lvl("Appendix", h=9) == 1
    assert lvl("Datasheet motivation", h=14) == 2  # unnumbered in a numbered paper: inside the section before
    sizes = [14.0, 14.2, 12.0, 12.1, 10.5]
    assert [lvl(t, False, h, 14.2, sizes) for t, h in (("Overview", 14.1), ("Setup", 12.0), ("Notes", 10.5))] == [
        1,
        2,
        3,
    ]


def _make_polluted(path: Path) -> Path:
    """A one-column paper whose headings a naive parser gets wrong: a lost space ("2RelatedWork"), a run-in
    bold paragraph start, bold figure labels above a "Figure 1:" caption, a bold equation, a bold table
    header row under a "Table 1:" caption."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    body = (
        "This line of running text is long enough to fill the column like the body of a real paper does "
        "and it keeps going."
    )
    c = canvas.Canvas(str(path), pagesize=A4)
    y = 780.0

    def text(s: str, font: str = "Helvetica", size: float = 10.5, x: float = 72, dy: float = 14) -> None:
        nonlocal y
        c.setFont(font, size)
        c.drawString(x, y, s)
        y -= dy

    text("A study of heading hygiene in parsed papers", "Helvetica-Bold", 17, dy=40)
    text("1 Introduction", "Helvetica-Bold", 12.5, dy=20)
    for _ in range(4):
        text(body[:95])
    y -= 10
    text("2RelatedWork", "Helvetica-Bold", 12.5, dy=20)
    c.setFont("Helvetica-Bold", 10.5)
    c.drawString(72, y, "Reward Design")
    text("We conduct RL training on the benchmark with a reward that counts solved tasks and", x=154)
    for _ in range(3):
        text(body[:95])
    y -= 14
    for label, x in (
        ("[Search]Analysis of scaling", 120),
        ("Accuracy", 80),
        ("Steps", 300),
        ("0.5", 90),
        ("Baseline", 380),
    ):
        text(label, "Helvetica-Bold", 10.5, x=x, dy=12)
    text("Figure 1: Scaling of the search with the number of steps.", dy=24)
    for _ in range(3):
        text(body[:95])
    y -= 10
    text("Fsumm = 1 / |S| (3)", "Helvetica-Bold", 10.5, x=200, dy=20)
    for _ in range(3):
        text(body[:95])
    y -= 10
    text("Table 1: Scores of the methods.", dy=18)
    c.setFont("Helvetica-Bold", 10.5)
    for cell, x in (("Method", 90), ("Accuracy", 220), ("Recall", 340)):
        c.drawString(x, y, cell)
    y -= 14
    for row in (("ours", "91.2", "88.0"), ("baseline", "85.1", "80.3")):
        c.setFont("Helvetica", 10.5)
        for cell, x in zip(row, (90, 220, 340)):
            c.drawString(x, y, cell)
        y -= 14
    y -= 10
    text("3 Results", "Helvetica-Bold", 12.5, dy=20)
    for _ in range(4):
        text(body[:95])
    c.showPage()
    c.save()
    return path


def test_polluted_headings_of_a_generated_paper(tmp_path: Path) -> None:
    from aisac_core.rag.formats import convert
    from aisac_core.rag.pdf import reconstruct_pdf

    doc = reconstruct_pdf(convert(_make_polluted(tmp_path / "polluted.pdf"), "pdf", "native"), "polluted")
    heads = [(it.text, it.level) for it, _ in doc.iterate_items() if str(it.label).endswith("section_header")]
    assert heads == [("1 Introduction", 1), ("2 Related Work", 1), ("3 Results", 1)], heads
    body = " ".join(getattr(it, "text", "") for it, _ in doc.iterate_items())
    assert "Reward Design We conduct RL training" in body  # the run-in heading stays in its paragraph
