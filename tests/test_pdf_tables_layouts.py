"""Table layouts the PDF table reader (:mod:`aisac_core.rag.pdftables`) recovers, each on a page we write with
reportlab: the causes of the lowest development scores on the ICDAR 2013 portion (docs/rag.md, "Tables in PDFs"), as
general cases. Every cell anchor of a recovered table must re-verify (:func:`aisac_core.rag.pdfpage.cell_holds`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("reportlab")


def _tables(path: Path, draw: Callable[[Any], None]) -> list[Any]:
    """Draw one A4 page with ``draw(canvas)``, read its tables, and check every cell anchor re-verifies."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    from aisac_core.hashing import sha256_text
    from aisac_core.rag.formats import convert
    from aisac_core.rag.pdfpage import cell_holds
    from aisac_core.rag.pdftables import find_tables

    c = canvas.Canvas(str(path), pagesize=A4)
    draw(c)
    c.showPage()
    c.save()
    res = convert(path, "pdf", "native")
    tables = find_tables(res)
    for t in tables:
        for cell in t.cells:
            assert cell_holds(res, path, cell.page, cell.bbox, sha256_text(cell.text)), cell
    return tables


def _cell(t: Any, text: str) -> Any:
    return next(c for c in t.cells if c.text == text)


def test_ruled_table_with_cells_of_several_lines(tmp_path: Path) -> None:
    """A table ruled under every row whose second column holds bullet lists of several lines (the line spacing cannot
    tell its rows apart): one row per band between the rulings, each bullet list one cell."""
    items = [
        ("Clarity", ["- Reported as not relevant by many patients", "- Generates many questions from patients"]),
        ("Response range", ["- Most patients respond at the floor", "- None of the choices applies", "- Skewed"]),
        ("Variability", ["- All patients give the same answer to it", "- Differences are not detected"]),
    ]

    def draw(c: Any) -> None:
        c.setFont("Helvetica", 10)
        y = 700.0
        c.line(80, y, 520, y)
        c.drawString(90, y - 14, "Item property")
        c.drawString(230, y - 14, "Reason for change or deletion")
        y -= 22
        c.line(80, y, 520, y)
        for label, bullets in items:
            c.drawString(90, y - 14, label)
            for k, b in enumerate(bullets):
                c.drawString(230, y - 14 - 12 * k, b)
            y -= 14 + 12 * len(bullets)
            c.line(80, y, 520, y)

    (t,) = _tables(tmp_path / "ruled.pdf", draw)
    assert t.n_rows == 4 and t.n_cols == 2, t.grid()
    assert t.grid()[2] == [
        "Response range",
        "- Most patients respond at the floor - None of the choices applies - Skewed",
    ]
    assert t.header_rows == 1


def test_row_label_wrapped_onto_a_row_of_its_own(tmp_path: Path) -> None:
    """A label over a "Count" and a "Percentage" row, its second line beside the second: one cell spanning both rows;
    a label starting in lower case where most start in upper case is that second line."""
    rows = [
        ("Asthma", "Count", "12", "9"),
        (None, "Percentage", "2.4%", "1.8%"),
        ("Substance abuse", "Count", "10", "4"),
        ("problem", "Percentage", "2.0%", "0.8%"),
        ("Back pain", "Count", "202", "56"),
        (None, "Percentage", "40.9%", "11.3%"),
    ]

    def draw(c: Any) -> None:
        c.setFont("Helvetica", 9)
        y = 700.0
        c.drawString(90, y, "Condition")
        c.drawString(330, y, "Men")
        c.drawString(400, y, "Women")
        for label, kind, a, b in rows:
            y -= 13
            if label:
                c.drawString(90, y, label)
            c.drawString(200, y, kind)
            c.drawRightString(350, y, a)
            c.drawRightString(430, y, b)

    (t,) = _tables(tmp_path / "wrapped.pdf", draw)
    label = _cell(t, "Substance abuse problem")
    assert (label.row, label.row_end, label.col) == (3, 4, 0), t.grid()
    assert _cell(t, "Asthma").row == _cell(t, "Asthma").row_end  # no second line: the row below has none


def test_chart_labels_beside_a_value_axis_are_no_table(tmp_path: Path) -> None:
    """A stacked bar chart drawn as text: tick labels 0 to 100 alone on their lines, three rows of segment values
    inside the bars and the categories under them: rows and columns of figures, but beside a linear value axis (a
    tick hidden by a bar's label left out), so no table."""

    def draw(c: Any) -> None:
        c.setFont("Helvetica", 8)
        base = 500.0
        for v in (0, 20, 40, 60, 100):  # 80 is hidden
            c.drawRightString(150, base + v * 1.5 - 3, str(v))
        cats = ["16-17", "18-19", "20-21", "22-24", "25-29", "30-34"]
        for k, cat in enumerate(cats):
            x = 180 + 45 * k
            for level, v in enumerate((10 + k, 12 + 2 * k, 9 + k)):
                c.drawString(x + 4, base + 15 + 30 * level, str(v))
            c.drawString(x, base - 14, cat)

    assert _tables(tmp_path / "chart.pdf", draw) == []


def test_narrow_columns_of_figures_header_years_and_footnote(tmp_path: Path) -> None:
    """Right-aligned figures a few points apart are separate cells ("100 000" with a thousands space stays one); a line
    of years over the value columns is part of the header; a note under the first column is no row."""
    rows = [("Argentina", "60,400", "60,400", "100 000"), ("Brazil", "1,180,160", "2,218,406", "5 000")]

    def draw(c: Any) -> None:
        c.setFont("Helvetica", 7)
        y = 700.0
        c.drawString(72, y, "World production capacity:")
        y -= 11
        for x, year in ((190, "2009"), (235, "2010"), (290, "2011")):
            c.drawRightString(x, y, year)
        for label, a, b, d in rows:
            y -= 11
            c.drawString(72, y, label)
            c.drawRightString(190, y, a)
            c.drawRightString(226, y, b)  # 2,218,406 ends 36 pt right of 1,180,160: a gap of about 6 pt
            c.drawRightString(290, y, d)
        y -= 11
        c.drawString(72, y, "Total")
        c.drawRightString(190, y, "1,240,560")
        c.drawRightString(226, y, "2,278,806")
        c.drawRightString(290, y, "105 000")
        y -= 16
        c.drawString(68, y, "a")
        c.drawString(74, y, "U.S. Geological Survey, 2010")

    (t,) = _tables(tmp_path / "figures.pdf", draw)
    grid = t.grid()
    assert ["Brazil", "1,180,160", "2,218,406", "5 000"] in grid, grid
    assert [r[1:] for r in grid[: t.header_rows]] == [["2009", "2010", "2011"]], (t.header_rows, grid)
    assert grid[t.header_rows][0] == "Argentina", grid
    assert not any("Geological" in c.text for c in t.cells), grid
