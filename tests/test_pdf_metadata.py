"""Paper title and authors from real PDFs (aisac_core.rag.frontmatter through parse_document) against the truth
in tests/fixtures/pdf_truth.json (written by reading the first pages), and the front-matter rules on PDFs and
line objects of our own making: a journal banner above the title, a two-line title, "Abstract" set largest,
document info title present vs producer junk.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest
from rapidfuzz import fuzz

from aisac_core.rag.documents import ParsedDocument
from aisac_core.rag.frontmatter import clean_info_title, front_matter, split_authors

TRUTH: dict[str, dict] = {
    k: v
    for k, v in json.loads((Path(__file__).parent / "fixtures" / "pdf_truth.json").read_text(encoding="utf-8")).items()
    if not k.startswith("_")
}
_BANNED = re.compile(
    r"^(abstract|introduction|\d+(\.\d+)*\.?\s+\w+|references|keywords|summary|contents|"
    r"journal of .*|proceedings of .*|.*journal)$"
)


def _norm(s: str | None) -> str:
    return " ".join(unicodedata.normalize("NFKC", s or "").casefold().split())


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory, models_dir: Path):  # noqa: ANN201
    from conftest import make_settings

    from aisac_core.rag.embeddings import Embedder

    return Embedder(make_settings(tmp_path_factory.mktemp("meta-tok") / "store", models_dir)).tokenizer()


def _path(shared_data: Path, key: str) -> Path:
    d, name = key.split("/")
    return shared_data / ("pdf_metadata/grobid" if d == "grobid" else f"pdfs/{d}") / name


@pytest.fixture(scope="module")
def parsed(tokenizer, parse_pool) -> dict[str, ParsedDocument]:  # noqa: ANN001
    """Every PDF of the truth file, parsed once for the run (conftest.ParsePool; skipped without ../shared/data)."""
    from conftest import SHARED_DATA

    if not (SHARED_DATA / "pdfs").is_dir():
        pytest.skip(f"shared test data absent: {SHARED_DATA}")
    return {k: parse_pool.parse(_path(SHARED_DATA, k), tokenizer) for k in TRUTH}


@pytest.mark.slow
def test_titles_and_first_authors_of_real_pdfs(parsed: dict[str, ParsedDocument]) -> None:
    bad_titles, author_hits, with_authors = [], 0, 0
    for key, truth in TRUTH.items():
        m = parsed[key].structure["metadata"]
        assert set(m) >= {"title", "authors", "year", "doi", "arxiv_id", "confidence", "title_source"}
        if truth["title"] is None:
            ok = m["title"] is None
        else:
            ok = m["title"] is not None and fuzz.ratio(_norm(truth["title"]), _norm(m["title"])) >= 90
            assert 0 < m["confidence"] <= 1 and m["title_source"] in ("layout", "pdf_info", "layout+pdf_info")
        if not ok:
            bad_titles.append((key, m["title"]))
        assert m["title"] is None or not _BANNED.match(_norm(m["title"])), (key, m["title"])
        if truth["authors"]:
            with_authors += 1
            author_hits += bool(m["authors"]) and fuzz.ratio(_norm(truth["authors"][0]), _norm(m["authors"][0])) >= 90
    assert not bad_titles, bad_titles
    assert author_hits >= 0.9 * with_authors, (author_hits, with_authors)


@pytest.mark.slow
def test_title_is_the_documents_title_item(parsed: dict[str, ParsedDocument]) -> None:
    doc = parsed["papermage/papermage.pdf"]
    assert doc.structure["blocks"][0][0] in ("title", "text")
    kinds = [b[0] for b in doc.structure["blocks"]]
    assert kinds.count("title") == 1
    assert doc.title.startswith("PaperMage: A Unified Toolkit")


# ---- front-matter rules on line objects of our own making -----------------------------------------------


@dataclass
class Ln:
    text: str
    top: float
    h: float
    font: str = "Times-Bold"
    l: float = 100.0  # noqa: E741
    r: float = 500.0


BODY = [
    Ln(
        "We study the problem of reading papers and report what we found in our experiments here.",
        400 + 12 * i,
        10,
        "Times-Roman",
        72,
        540,
    )
    for i in range(8)
]
PAGE = (612.0, 792.0)


def _fm(lines: list[Ln], info: dict | None = None, others: tuple = ()):  # noqa: ANN202
    return front_matter(lines + BODY, PAGE, 10.0, "Times-Roman", others, info)


def test_two_line_title_joins_and_authors_follow() -> None:
    fm = _fm(
        [
            Ln("A Perspective on Explanations of Molecular", 80, 17),
            Ln("Prediction Models", 99, 17),
            Ln("Geemi P. Wellawatte1, Heta A. Gandhi2 and Andrew D. White2*", 130, 11, "Times-Roman"),
            Ln("1 Department of Chemistry, University of Rochester, Rochester, NY 14627, USA", 146, 9, "Times-Roman"),
        ]
    )
    assert fm.title == "A Perspective on Explanations of Molecular Prediction Models"
    assert fm.authors == ["Geemi P. Wellawatte", "Heta A. Gandhi", "Andrew D. White"]
    assert fm.title_source == "layout" and 0.7 <= fm.confidence <= 1


def test_journal_banner_above_the_title_is_no_title() -> None:
    fm = _fm(
        [
            Ln("J", 40, 40),
            Ln("Journal of Cosmology and Astroparticle Physics", 60, 20, "Helvetica-Bold"),
            Ln("Dark matter halos and the cosmic web", 120, 17),
            Ln("Alice Smith,a Bob Jones b", 150, 11, "Times-Roman"),
            Ln("aDepartment of Physics, University of Somewhere", 165, 9, "Times-Roman"),
        ]
    )
    assert fm.title == "Dark matter halos and the cosmic web"
    assert fm.authors[0] == "Alice Smith"


def test_abstract_set_largest_is_no_title() -> None:
    fm = _fm(
        [
            Ln("PaSa: An LLM Agent for Comprehensive Academic Paper Search", 80, 14),
            Ln("Yichen He1 Guanhua Huang1 Peiyuan Feng1", 105, 11, "Times-Roman"),
            Ln("Abstract", 160, 18),
        ]
    )
    assert fm.title == "PaSa: An LLM Agent for Comprehensive Academic Paper Search"
    assert fm.authors[:2] == ["Yichen He", "Guanhua Huang"]
    only_abstract = _fm([Ln("Abstract", 160, 18), Ln("1 Introduction", 300, 16)])
    assert only_abstract.title is None and only_abstract.confidence == 0


def test_running_header_repeated_on_other_pages_is_no_title() -> None:
    banner = Ln("Journal-free Banner Line Of This Publisher", 60, 16)
    fm = _fm([banner], others=(Ln("Journal-free Banner Line Of This Publisher", 60, 16),))
    assert fm.title is None


def test_pdf_info_title_present_vs_junk() -> None:
    title = Ln("Learning to Read Scientific Papers", 80, 17)
    agree = _fm([title], info={"Title": "Learning to Read Scientific Papers", "Author": "Jane Doe"})
    assert agree.title_source == "layout+pdf_info" and agree.confidence >= 0.95
    assert agree.authors == ["Jane Doe"]  # no author lines on the page: the info's names
    junk = _fm([title], info={"Title": "Microsoft Word - paper_final.doc", "Author": "ibm"})
    assert junk.title == "Learning to Read Scientific Papers" and junk.title_source == "layout"
    assert junk.authors == []
    cut = _fm(
        [Ln("Learning to Read", 80, 17), Ln("Scientific Papers", 140, 17, "Other-Bold")],
        info={"Title": "Learning to Read Scientific Papers"},
    )
    assert cut.title == "Learning to Read Scientific Papers" and cut.title_source == "layout+pdf_info"
    for bad in ("untitled", "OECS12_Matthiesen-Atature", "5", "Microsoft PowerPoint - talk.ppt", "paper.tex"):
        assert clean_info_title(bad) is None, bad


def test_author_splitting() -> None:
    assert split_authors("Kyle Loα∗ Zejiang Shenα,τ∗ Benjamin Newmanα∗") == [
        "Kyle Lo",
        "Zejiang Shen",
        "Benjamin Newman",
    ]
    assert split_authors("TAL AUGUST, University of Washington, USA") == ["Tal August"]
    assert split_authors("Rui Wang 1 and Günter Neumann 2") == ["Rui Wang", "Günter Neumann"]
    assert split_authors("Dr. Saeed Murtaza") == ["Saeed Murtaza"]
    assert split_authors("{kylel, lucas}@allenai.org") == []
    assert split_authors("Allen Institute for AI & Northwestern University") == []


def test_generated_pdf_with_banner_and_two_line_title(tmp_path: Path) -> None:
    """A real PDF (reportlab) with a journal banner and a two-line title, parsed by the pipeline."""
    pytest.importorskip("reportlab")
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    from aisac_core.rag.formats import convert
    from aisac_core.rag.pdf import reconstruct_pdf

    p = tmp_path / "paper.pdf"
    c = canvas.Canvas(str(p), pagesize=letter)
    c.setTitle("Microsoft Word - draft3.doc")
    for page in range(2):
        c.setFont("Helvetica", 9)
        c.drawString(72, 760, "Journal of Statistical Software")
        if page == 0:
            c.setFont("Times-Bold", 17)
            c.drawString(72, 700, "Robust Estimation of Mixed Models for")
            c.drawString(72, 680, "Longitudinal Count Data")
            c.setFont("Times-Roman", 11)
            c.drawString(72, 650, "Maria Rossi1, John Smith2 and Wei Zhang1")
            c.setFont("Times-Roman", 9)
            c.drawString(72, 636, "1 Department of Statistics, University of Padova, Italy")
            c.setFont("Times-Bold", 11)
            c.drawString(72, 600, "Abstract")
        c.setFont("Times-Roman", 10)
        for i in range(25):
            c.drawString(
                72,
                580 - 14 * i,
                "We study the estimation of models for counts and report results on "
                f"simulated and real data sets in line {i}.",
            )
        c.showPage()
    c.save()
    doc = reconstruct_pdf(convert(p, "pdf", "native"), "paper")
    front = doc._aisac_meta["front"]
    assert front["title"] == "Robust Estimation of Mixed Models for Longitudinal Count Data"
    assert front["authors"] == ["Maria Rossi", "John Smith", "Wei Zhang"]
    assert front["title_source"] == "layout"
    titles = [it.text for it, _ in doc.iterate_items() if str(it.label).endswith("title")]
    assert titles == [front["title"]]
