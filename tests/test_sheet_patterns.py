"""Issue 29's layout patterns, one generated workbook each: every one loads as a person would choose or is reported
ambiguous with a plain-grid reading; none gives a wrong header label."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aisac_core.context import AppContext
from aisac_core.settings import Settings

AGES = ["0 - 6", "7 - 10", "0 - 6", "7 - 10"]


@pytest.fixture
def core(tmp_path: Path):  # noqa: ANN201
    root = tmp_path / "root"
    root.mkdir()
    c = AppContext(Settings(data_dir=tmp_path / "store", roots=[root], warm=False))
    yield c, root
    c.close()


def _group_sheet(align: str | None, merge: bool = False) -> Any:
    """Female | Male over 0 - 6 | 7 - 10 | 0 - 6 | 7 - 10, the group labels placed as ``align`` implies."""
    import openpyxl
    from openpyxl.styles import Alignment

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "groups"
    if merge:
        ws["B1"], ws["D1"] = "Female", "Male"
        ws.merge_cells("B1:C1")
        ws.merge_cells("D1:E1")
    elif align == "right":
        ws["C1"], ws["E1"] = "Female", "Male"
    elif align == "centerContinuous":
        ws["B1"], ws["D1"] = "Female", "Male"
    else:
        ws["B1"], ws["D1"] = "Female", "Male"
    if align:
        for col in "BCDE":
            ws[f"{col}1"].alignment = Alignment(horizontal=align)
    ws["A2"] = "region"
    for j, a in enumerate(AGES, start=2):
        ws.cell(2, j, a)
    for i, (reg, *vals) in enumerate([("North", 1, 2, 3, 4), ("South", 5, 6, 7, 8), ("East", 9, 10, 11, 12)], 3):
        ws.cell(i, 1, reg)
        for j, v in enumerate(vals, start=2):
            ws.cell(i, j, v)
    return wb


RIGHT = ["region", "Female|0 - 6", "Female|7 - 10", "Male|0 - 6", "Male|7 - 10"]


@pytest.mark.parametrize(
    ("align", "merge"), [("right", False), ("centerContinuous", False), (None, True), (None, False)]
)
def test_group_labels_cover_what_their_merge_or_alignment_shows(core, align: str | None, merge: bool) -> None:
    c, root = core
    _group_sheet(align, merge).save(root / "g.xlsx")
    f = c.frames.load(str(root / "g.xlsx"), name="g")["frames"][0]
    assert f["column_names"] == RIGHT and f["rows"] == 3
    assert f["detected"]["confidence"] >= 0.75 and "ambiguous" not in f["detected"]


def test_centred_group_labels_in_one_cell_are_not_guessed(core) -> None:
    """Female and Male centred in the first cell of their groups (B, D), the groups' cells centred: read like
    left-aligned labels. Moved to the middle (Female in C over B:D, B centred and empty), B is undecidable: the
    layout is reported ambiguous and loaded as a plain grid, never with a guessed label."""
    from openpyxl.styles import Alignment

    c, root = core
    _group_sheet("center").save(root / "c.xlsx")
    f = c.frames.load(str(root / "c.xlsx"), name="c")["frames"][0]
    assert f["column_names"] == RIGHT
    wb = _group_sheet("center")
    ws = wb.active
    ws["B1"], ws["C1"], ws["D1"], ws["E1"] = None, "Female", None, "Male"
    for col in "BCDE":
        ws[f"{col}1"].alignment = Alignment(horizontal="center")
    wb.save(root / "m.xlsx")
    f = c.frames.load(str(root / "m.xlsx"), name="m")["frames"][0]
    assert f["detected"].get("ambiguous") and f["column_names"][0] == "col_1"
    assert any("column B" in r for r in f["detected"]["ambiguous"]["reasons"])


def test_notes_above_and_footers_below(core) -> None:
    import datetime as dt

    import openpyxl

    c, root = core
    wb = openpyxl.Workbook()
    ws = wb.active
    ws["A1"] = "Survey of reactor runs"
    ws["A2"], ws["C2"] = "collected by", "the lab"
    ws["B3"] = "merging cells is common"
    for j, h in enumerate(["run", "date", "temp_K", "yield"], start=1):
        ws.cell(5, j, h)
    for i in range(6, 16):
        ws.cell(i, 1, f"r{i}"), ws.cell(i, 2, dt.datetime(2020, 1, i)), ws.cell(i, 3, 300 + i), ws.cell(i, 4, i / 10)
    ws["A16"] = "Total"
    ws["D16"] = 9.9
    ws["A18"] = "Source: lab notebook"
    ws["A19"], ws["B19"] = "Note:", "yields after 4 h"
    ws["A20"] = "* estimated"
    wb.save(root / "n.xlsx")
    f = c.frames.load(str(root / "n.xlsx"), name="n")["frames"][0]
    assert f["column_names"] == ["run", "date", "temp_K", "yield"]
    assert f["rows"] in (10, 11)  # the Total row is data or footer, never notes as rows
    assert f["dtypes"]["temp_K"].startswith(("int", "float")) and "datetime" in f["dtypes"]["date"]
    assert any("Source" in s for s in f["detected"]["skipped_below"])


def test_small_multiples_are_each_offered(core) -> None:
    import openpyxl

    c, root = core
    wb = openpyxl.Workbook()
    ws = wb.active
    for top, left in [(1, 1), (1, 5), (6, 1), (6, 5)]:
        ws.cell(top, left, "x"), ws.cell(top, left + 1, "y")
        for k in range(1, 3):
            ws.cell(top + k, left, k), ws.cell(top + k, left + 1, k * 10 + top + left)
    wb.save(root / "m.xlsx")
    f = c.frames.load(str(root / "m.xlsx"), name="m")["frames"][0]
    assert f["column_names"] == ["x", "y"] and f["rows"] == 2
    assert len(f["detected"]["other_tables"]) == 3


def test_header_at_the_bottom_is_not_mislabelled(core) -> None:
    import openpyxl

    c, root = core
    wb = openpyxl.Workbook()
    ws = wb.active
    for i in range(1, 6):
        for j in range(1, 5):
            ws.cell(i, j, i * j + 0.5)
    for j, h in enumerate(["alpha", "beta", "gamma", "delta"], start=1):
        ws.cell(6, j, h)
    wb.save(root / "b.xlsx")
    f = c.frames.load(str(root / "b.xlsx"), name="b")["frames"][0]
    assert f["detected"].get("ambiguous") and f["detected"]["confidence"] < 0.75
    assert all(n.startswith("col_") for n in f["column_names"]) and f["rows"] == 6  # nothing dropped
    assert {"header": "row 6 (at the bottom)", "data": "A1:D5"} in f["detected"]["ambiguous"]["alternatives"]


def test_transposed_table_is_reported_ambiguous(core) -> None:
    import datetime as dt

    import openpyxl

    c, root = core
    wb = openpyxl.Workbook()
    ws = wb.active
    rows = [
        ("Name", "Ann", "Bo", "Cy", "Di"),
        ("Profession", "Painter", "Actor", "Singer", "Writer"),
        ("Age", 52, 71, 44, 89),
        ("Has kids", True, False, True, True),
        ("Born", dt.datetime(1901, 2, 3), dt.datetime(1910, 6, 7), dt.datetime(1920, 10, 11), dt.datetime(1930, 1, 14)),
    ]
    for i, row in enumerate(rows, start=1):
        for j, v in enumerate(row, start=1):
            ws.cell(i, j, v)
    wb.save(root / "t.xlsx")
    f = c.frames.load(str(root / "t.xlsx"), name="t")["frames"][0]
    assert f["detected"].get("ambiguous"), f["column_names"]
    assert "Ann" not in f["column_names"] and f["rows"] == 5
    assert any("transposed" in a for a in f["detected"]["ambiguous"]["alternatives"])


def test_footer_rows_across_the_columns_are_never_data(core) -> None:
    """Four footer rows with text under the Age and date columns: not rows, and Age stays numeric."""
    import datetime as dt

    import openpyxl

    c, root = core
    wb = openpyxl.Workbook()
    ws = wb.active
    for j, h in enumerate(["Name", "Age", "Born"], start=1):
        ws.cell(1, j, h)
    for i in range(2, 12):
        ws.cell(i, 1, f"person {i}"), ws.cell(i, 2, 20 + i), ws.cell(i, 3, dt.datetime(1990, 1, i))
    for i, row in enumerate(
        [
            ("This", "is", "a footnote"),
            ("spread", "over", "columns"),
            ("and", "another", "one"),
            ("end", "of", "notes"),
        ],
        start=12,
    ):
        for j, v in enumerate(row, start=1):
            ws.cell(i, j, v)
    wb.save(root / "f.xlsx")
    f = c.frames.load(str(root / "f.xlsx"), name="f")["frames"][0]
    assert f["column_names"] == ["Name", "Age", "Born"] and f["rows"] == 10
    assert f["dtypes"]["Age"] == "int64" and "datetime" in f["dtypes"]["Born"]
    assert len(f["detected"]["skipped_below"]) == 4


def test_small_multiples_one_row_and_column_apart(core) -> None:
    import openpyxl

    c, root = core
    wb = openpyxl.Workbook()
    ws = wb.active
    for top, left in [(1, 1), (1, 4), (5, 1), (5, 4)]:
        ws.cell(top, left, "x"), ws.cell(top, left + 1, "y")
        for k in range(1, 3):
            ws.cell(top + k, left, k), ws.cell(top + k, left + 1, k * 10 + top + left)
    wb.save(root / "m1.xlsx")
    f = c.frames.load(str(root / "m1.xlsx"), name="m")["frames"][0]
    assert f["column_names"] == ["x", "y"] and f["rows"] == 2 and f["detected"]["range"] == "A1:B3"
    assert f["detected"]["other_tables"] == ["D1:E3", "A5:B7", "D5:E7"]  # reading order


@pytest.mark.parametrize("merge", ["C4:D4", "A4:B4", None])
def test_note_lines_above_the_header_are_not_group_labels(core, merge: str | None) -> None:
    """Three note lines over a people table (readxl's deaths.xlsx pattern), the last one with a merged cell: the
    note row spans columns of different kinds (a number and a flag, dates), so it is not a group label row."""
    import datetime as dt

    import openpyxl

    c, root = core
    wb = openpyxl.Workbook()
    ws = wb.active
    ws["A1"] = "Lots of people"
    ws["A2"], ws["D2"] = "simply cannot resist writing", "some notes"
    ws["A3"], ws["B3"], ws["C3"] = "at", "the", "top"
    ws["A4"], ws["C4"], ws["E4"] = "or", "merging", "cells"
    if merge:
        ws.merge_cells(merge)
    for j, h in enumerate(["Name", "Profession", "Age", "Has kids", "Date of birth", "Date of death"], start=1):
        ws.cell(5, j, h)
    people = [("Ann", "Painter", 52, True), ("Bo", "Actor", 71, False), ("Cy", "Singer", 44, True)]
    for i, (n, p, a, k) in enumerate(people, start=6):
        for j, v in enumerate([n, p, a, k, dt.datetime(1900 + i, 1, 2), dt.datetime(1960 + i, 3, 4)], start=1):
            ws.cell(i, j, v)
    wb.save(root / "d.xlsx")
    f = c.frames.load(str(root / "d.xlsx"), name="d")["frames"][0]
    assert f["column_names"] == ["Name", "Profession", "Age", "Has kids", "Date of birth", "Date of death"]
    assert f["rows"] == 3 and f["dtypes"]["Age"] == "int64"


def test_labels_at_the_right_are_reported_ambiguous(core) -> None:
    import openpyxl

    c, root = core
    wb = openpyxl.Workbook()
    ws = wb.active
    for i, lab in enumerate(["alpha", "beta", "gamma", "delta"], start=1):
        for j in range(1, 4):
            ws.cell(i, j, i * 10 + j + 0.5)
        ws.cell(i, 4, lab)
    wb.save(root / "r.xlsx")
    f = c.frames.load(str(root / "r.xlsx"), name="r")["frames"][0]
    d = f["detected"]
    assert d.get("ambiguous") and d["confidence"] < 0.75 and "inspect" in d
    assert {"header": "column D (at the right)"} in d["ambiguous"]["alternatives"]
    assert f["column_names"] == ["col_1", "col_2", "col_3", "col_4"] and f["rows"] == 4


def test_a_column_two_group_labels_claim_is_reported_not_filled(core) -> None:
    """Female left-aligned in B and Male right-aligned in E over B:E: C and D belong to either reading."""
    from openpyxl.styles import Alignment

    c, root = core
    wb = _group_sheet(None)
    ws = wb.active
    ws["D1"] = None
    ws["E1"] = "Male"
    ws["B1"].alignment = Alignment(horizontal="left")
    ws["E1"].alignment = Alignment(horizontal="right")
    wb.save(root / "x.xlsx")
    f = c.frames.load(str(root / "x.xlsx"), name="x")["frames"][0]
    d = f["detected"]
    assert d.get("ambiguous") and d["confidence"] < 0.75
    assert any("column C" in r for r in d["ambiguous"]["reasons"])
    assert f["column_names"] == ["col_1", "col_2", "col_3", "col_4", "col_5"] and f["rows"] == 5
    # the caller's choice is kept and the ambiguity still reported
    g = c.frames.load(str(root / "x.xlsx"), name="y", header_rows=2)["frames"][0]
    assert g["detected"].get("ambiguous") and g["column_names"][0] == "region"
