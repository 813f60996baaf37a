"""Outline rules of issue 37 on PDFs of our own making (reportlab): a reference-list entry is never a heading, and a
structured abstract's labels stay inside the abstract while the body's first heading ends it (the body's sections
are top-level sections, not children of "Abstract", whatever their size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aisac_core.rag.headings import heading_problem, reference_entry


def test_reference_entries_are_no_headings() -> None:
    for t in (
        "40. Arbona V, Manzi M, Ollas C",
        "[12] Smith, J., Jones, K.",
        "3. Smith JA et al",
        "[3] A. Smith and B. Jones",
    ):
        assert reference_entry(t) and heading_problem(t) == "reference", t
    for t in ("3 Results", "12. Related Work", "2. Materials and Methods", "4. Van Gogh Analysis", "1. Introduction"):
        assert not reference_entry(t) and heading_problem(t) is None, t


def _bmc_like(path: Path) -> Path:
    """Title; "Abstract" (14 pt bold) with run-in labels "Background:", "Methods:"; the body's headings "Study
    setting" and "Findings from the clinics" (12 pt bold, smaller than "Abstract"), a sub-heading "Interviews" (11 pt
    bold); a reference list whose entries are set in bold like the headings."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    _, h = A4
    y = h - 80

    def line(text: str, font: str, size: float, dy: float) -> None:
        nonlocal y
        c.setFont(font, size)
        c.drawString(72, y, text)
        y -= dy

    line("Patient views of home dialysis: a qualitative study", "Helvetica-Bold", 18, 28)
    line("Ada Lovelace and Carl Gauss", "Helvetica", 11, 30)
    line("Abstract", "Helvetica-Bold", 14, 20)
    for t in (
        "Background: Home dialysis is rare although patients prefer it when they are asked about it.",
        "Methods: We interviewed thirty patients of two clinics about their choice of treatment.",
        "Results: Most patients named the fear of complications as the main reason against it.",
    ):
        line(t, "Helvetica", 10, 14)
    y -= 16
    body = "Patients on dialysis spend many hours a week in clinics, which shapes their working lives."
    for head, size in (("Study setting", 12), ("Interviews", 11), ("Findings from the clinics", 12)):
        line(head, "Helvetica-Bold", size, 18)
        for _ in range(3):
            line(body, "Helvetica", 10, 14)
        y -= 12
    line("References", "Helvetica-Bold", 12, 18)
    line("40. Arbona V, Manzi M, Ollas C", "Helvetica-Bold", 10, 14)
    line("Home dialysis in practice. Kidney Int. 2019;95:1-10.", "Helvetica", 10, 14)
    c.showPage()
    c.save()
    return path


def test_body_headings_end_the_abstract_and_references_stay_entries(tmp_path: Path) -> None:
    pytest.importorskip("reportlab")
    from aisac_core.rag.formats import convert
    from aisac_core.rag.pdf import reconstruct_pdf

    doc = reconstruct_pdf(convert(_bmc_like(tmp_path / "bmc.pdf"), "pdf", "native"), "bmc")
    heads = [(it.text, it.level) for it, _ in doc.iterate_items() if str(it.label).endswith("section_header")]
    names = [t for t, _ in heads]
    assert not any(t.startswith("40.") for t in names), heads
    assert not any(t.startswith(("Background:", "Methods:")) for t in names), heads  # labels stay abstract text
    level = dict(heads)
    # the body's headings, smaller than "Abstract", are top-level sections, not the abstract's subsections
    assert level["Abstract"] == 1 and level["Study setting"] == 1 and level["Findings from the clinics"] == 1, heads
    assert level["Interviews"] >= 2, heads  # a sub-heading of "Study setting"
