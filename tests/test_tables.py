"""Table-region detection in workbooks (aisac_core.data.regions) and the data_load options that override it.

Shared workbooks (../shared/data: tidyxl and formats/xlsx) are checked against tests/fixtures/tables_expected.json,
the columns and row counts a person would choose; generated workbooks reproduce the failure patterns (notes above
and below a table, an offset table with a title and a footnote, a pivot export with merged group labels).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from aisac_core.context import AppContext
from aisac_core.data.frames import DataError
from aisac_core.data.regions import detect_region, parse_range
from aisac_core.settings import Settings
from aisac_servers.serving.suite import build

EXPECTED = json.loads((Path(__file__).parent / "fixtures" / "tables_expected.json").read_text(encoding="utf-8"))
WORKBOOKS = {
    "xlsx_01.xlsx": "formats/xlsx",
    "xlsx_05_table_with_title.xlsx": "formats/xlsx",
    "xlsx_06_edge_cases_.xlsx": "formats/xlsx",
}
PEOPLE = [
    ("Ann Bell", "Painter", 52, True, "1901-02-03", "1953-04-05"),
    ("Bo Chan", "Actor", 71, False, "1910-06-07", "1981-08-09"),
    ("Cy Dunn", "Singer", 44, True, "1920-10-11", "1964-12-13"),
    ("Di Egan", "Writer", 89, True, "1930-01-14", "2019-02-15"),
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    import openpyxl

    root = tmp_path / "root"
    root.mkdir()
    # notes above and below a people table (readxl's deaths.xlsx pattern)
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "arts"
    ws["A1"] = "Lots of people"
    ws["A2"], ws["D2"] = "simply cannot resist writing", "some notes"
    ws["A3"], ws["B3"], ws["C3"] = "at", "the", "top"
    ws["A4"], ws["C4"], ws["D4"] = "or", "merging", "cells"
    for j, h in enumerate(["Name", "Profession", "Age", "Has kids", "Date of birth", "Date of death"], start=1):
        ws.cell(5, j, h)
    for i, row in enumerate(PEOPLE, start=6):
        for j, v in enumerate(row, start=1):
            ws.cell(i, j, v)
    ws["A11"] = "This"
    ws["B12"], ws["C12"] = "is", "a footnote"
    ws["A13"] = "Source: made up"
    wb.save(root / "deaths.xlsx")
    # an offset table with a title and a footnote
    wb = openpyxl.Workbook()
    ws = wb.active
    ws["C2"] = "Table 1. Reactor yields"
    ws["C4"], ws["D4"], ws["E4"] = "run", "T (K)", "yield (%)"
    for i, (a, b, c) in enumerate([("r1", 300, 41.2), ("r2", 310, 44.0), ("r3", 320, 47.9)], start=5):
        ws.cell(i, 3, a), ws.cell(i, 4, b), ws.cell(i, 5, c)
    ws["C9"] = "* yields after 4 h"
    wb.save(root / "offset.xlsx")
    # a pivot export: two row-label columns, two header rows of merged group labels
    wb = openpyxl.Workbook()
    ws = wb.active
    ws["A1"] = "Population by region and sex (thousands)"
    ws["C3"], ws["E3"] = "2020", "2021"
    ws.merge_cells("C3:D3")
    ws.merge_cells("E3:F3")
    ws["C4"], ws["D4"], ws["E4"], ws["F4"] = "male", "female", "male", "female"
    ws["A4"], ws["B4"] = "Region", "District"
    data = [
        ("North", "N1", 10, 11, 12, 13),
        (None, "N2", 20, 21, 22, 23),
        ("South", "S1", 30, 31, 32, 33),
        (None, "S2", 40, 41, 42, 43),
    ]
    for i, row in enumerate(data, start=5):
        for j, v in enumerate(row, start=1):
            ws.cell(i, j, v)
    ws["A10"] = "Source: statistics office"
    wb.save(root / "pivot.xlsx")
    (root / "plain.csv").write_text("exported 2024\n\na,b\n1,2\n3,4\n", encoding="utf-8")
    return root


@pytest.fixture
def tcore(tmp_path: Path, root: Path):  # noqa: ANN201
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    roots = [root] + ([shared.resolve()] if shared.is_dir() else [])
    c = AppContext(Settings(data_dir=tmp_path / "store", roots=roots, warm=False))
    yield c
    c.sandbox.shutdown()
    c.close()


# -- the shared workbooks -------------------------------------------------------------------------------------
@pytest.mark.parametrize("workbook", sorted(EXPECTED))
def test_shared_workbooks_load_as_a_person_would(tcore, shared_data: Path, workbook: str) -> None:
    path = shared_data / WORKBOOKS.get(workbook, "tabular/tidyxl") / workbook
    if not path.is_file():
        pytest.skip(f"{path} not present")
    out = tcore.frames.load(str(path), name="wb")
    got = {f["source"]["sheet"]: f for f in out["frames"]}
    wrong = []
    for sheet, exp in EXPECTED[workbook].items():
        if exp.get("empty"):
            assert sheet not in got, sheet
            continue
        f = got[sheet]
        ok = (
            f["column_names"] == exp["columns"]
            if "columns" in exp
            else f["column_names"][: len(exp["first_columns"])] == exp["first_columns"]
            and exp.get("n_columns", f["columns"]) == f["columns"]
        ) and (exp["rows"] is None or f["rows"] == exp["rows"])
        if exp.get("known_wrong"):
            wrong.append(sheet)
            continue
        assert ok, (sheet, f["column_names"][:10], f["rows"], exp)
        assert f["detected"]["sheet"] == sheet and f["detected"]["range"]
        assert not any(c.startswith("col_") for c in f["column_names"]) or "columns" in exp or "first_columns" in exp
    if wrong:  # recorded in the fixture with the reason; kept visible rather than hidden
        pytest.xfail(f"known misdetections in {workbook}: {', '.join(wrong)}")


# -- generated workbooks: detection ---------------------------------------------------------------------------
def test_notes_above_and_below_a_table(tcore, root: Path) -> None:
    f = tcore.frames.load(str(root / "deaths.xlsx"))["frames"][0]
    assert f["column_names"] == ["Name", "Profession", "Age", "Has kids", "Date of birth", "Date of death"]
    assert f["rows"] == 4
    d = f["detected"]
    assert d["range"] == "A5:F9" and d["header_rows"] == 1 and not d["pivot"] and not d["tidy"]
    assert d["skipped_above"][0] == "Lots of people" and len(d["skipped_above"]) == 4
    assert d["skipped_below"] == ["This", "is | a footnote", "Source: made up"]
    assert f["dtypes"]["Age"] == "int64"


def test_offset_table_with_title_and_footnote(tcore, root: Path) -> None:
    f = tcore.frames.load(str(root / "offset.xlsx"))["frames"][0]
    assert f["column_names"] == ["run", "T (K)", "yield (%)"] and f["rows"] == 3
    assert f["detected"]["range"] == "C4:E7"
    assert f["detected"]["skipped_below"] == ["* yields after 4 h"]


def test_pivot_detected_and_tidy(tcore, root: Path) -> None:
    f = tcore.frames.load(str(root / "pivot.xlsx"))["frames"][0]
    assert f["column_names"] == ["Region", "District", "2020|male", "2020|female", "2021|male", "2021|female"]
    assert f["rows"] == 4 and f["detected"]["pivot"] is True and f["detected"]["header_rows"] == 2
    t = tcore.frames.load(str(root / "pivot.xlsx"), name="long", tidy=True)["frames"][0]
    assert t["rows"] == 16 and t["detected"]["tidy"] is True
    assert t["column_names"][:2] == ["Region", "District"] and t["column_names"][-1] == "value"
    rows = tcore.frames.preview("long", 16)["rows"]
    assert {"Region": "North", "District": "N2", "value": 22} in [
        {k: r[k] for k in ("Region", "District", "value")} for r in rows
    ]
    levels = t["column_names"][2:4]
    assert {(r[levels[0]], r[levels[1]]) for r in rows} == {
        ("2020", "male"),
        ("2020", "female"),
        ("2021", "male"),
        ("2021", "female"),
    }


# -- options override detection -------------------------------------------------------------------------------
def test_range_option(tcore, root: Path) -> None:
    f = tcore.frames.load(str(root / "deaths.xlsx"), name="r", cell_range="A5:C7")["frames"][0]
    assert f["column_names"] == ["Name", "Profession", "Age"] and f["rows"] == 2
    assert f["source"]["options"]["range"] == "A5:C7"
    g = tcore.frames.load(str(root / "deaths.xlsx"), name="r2", cell_range="B6:C9", header_rows=0)["frames"][0]
    assert g["column_names"] == ["col_2", "col_3"] and g["rows"] == 4


def test_skip_rows_and_header_rows_options(tcore, root: Path) -> None:
    f = tcore.frames.load(str(root / "offset.xlsx"), name="s", skip_rows=4)["frames"][0]
    assert f["detected"]["skipped_above"][-1] == "run | T (K) | yield (%)" and f["detected"]["range"].startswith("C5")
    assert f["rows"] == 3 and f["columns"] == 3
    h = tcore.frames.load(str(root / "pivot.xlsx"), name="h", header_rows=1)["frames"][0]
    assert h["detected"]["header_rows"] == 1 and h["column_names"][2:4] == ["2020", "2020.1"]
    assert h["rows"] == 5  # the leaf row (male/female) is now data, as with header_rows on CSV
    c = tcore.frames.load(str(root / "plain.csv"), name="c", skip_rows=2)["frames"][0]
    assert c["column_names"] == ["a", "b"] and c["rows"] == 2 and c["detected"]["header_rows"] == 1


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"cell_range": "B3-F20", "sheet": 0}, "not an Excel A1 range"),
        ({"cell_range": "F20:B3", "sheet": 0}, "ends above or left"),
        ({"cell_range": "Z100:Z200", "sheet": 0}, "outside the sheet"),
        ({"header_rows": 9}, "header_rows=9"),
        ({"skip_rows": 500}, "skip_rows=500"),
        ({"skip_rows": -1}, "skip_rows must be"),
    ],
)
def test_bad_options_give_clear_errors(tcore, root: Path, kwargs: dict, needle: str) -> None:
    with pytest.raises(DataError, match=needle):
        tcore.frames.load(str(root / "offset.xlsx"), name="bad", **kwargs)


def test_tidy_and_range_refused_where_they_do_not_apply(tcore, root: Path) -> None:
    with pytest.raises(DataError, match="range applies to Excel"):
        tcore.frames.load(str(root / "plain.csv"), cell_range="A1:B2")
    with pytest.raises(DataError, match="tidy applies to Excel"):
        tcore.frames.load(str(root / "plain.csv"), tidy=True)
    with pytest.raises(DataError, match="tidy=True needs a pivot"):
        tcore.frames.load(str(root / "deaths.xlsx"), tidy=True)


def test_parse_range_and_pure_detection() -> None:
    assert parse_range("$B$3:$F$20") == (2, 1, 19, 5) and parse_range("c4") == (3, 2, 3, 2)
    grid = [["Title", None, None], [None, None, None], ["a", "b", "c"], [1, 2, 3], [4, 5, 6], ["Note: x", None, None]]
    t = detect_region(grid)
    assert t["names"] == ["a", "b", "c"] and t["body"] == [3, 4] and t["skipped_below"] == ["Note: x"]


# -- through MCP ----------------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_mcp_data_load_with_options(tcore, root: Path) -> None:
    async with Client(build(["data"], app=tcore)) as client:
        r = await client.call_tool("data_load", {"path": str(root / "pivot.xlsx"), "name": "p", "tidy": True})
        f = r.structured_content["frames"][0]
        assert f["rows"] == 16 and f["detected"]["tidy"] and f["detected"]["pivot"]
        r = await client.call_tool("data_load", {"path": str(root / "deaths.xlsx"), "name": "d", "range": "A5:F7"})
        assert r.structured_content["frames"][0]["rows"] == 2
        r = await client.call_tool("data_load", {"path": str(root / "offset.xlsx"), "name": "o", "skip_rows": 3})
        assert r.structured_content["frames"][0]["column_names"] == ["run", "T (K)", "yield (%)"]
        with pytest.raises(ToolError, match="outside the sheet"):
            await client.call_tool("data_load", {"path": str(root / "offset.xlsx"), "range": "AA1:AB2"})


# -- generated workbooks: one per rule added for the messy shared sheets -------------------------------------
def test_rules_for_messy_layouts(tcore, root: Path) -> None:
    import datetime as dt

    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "side"  # two tables with one empty column between them, rows barely overlapping
    for i, row in enumerate([("a", "b"), (1, 2), (3, 4), (5, 6)], start=1):
        ws.cell(i, 1, row[0]), ws.cell(i, 2, row[1])
    for i, row in enumerate([("x", "y"), (7, 8), (9, 10), (11, 12)], start=4):
        ws.cell(i, 4, row[0]), ws.cell(i, 5, row[1])
    ws = wb.create_sheet("stray")  # a note in a column otherwise empty over the table
    for i, row in enumerate([("id", "name", "v"), ("a1", "p", "q"), ("a2", "r", "s"), ("a3", "t", "u")], start=1):
        for j, v in enumerate(row, start=2):
            ws.cell(i, j, v)
    ws["A3"] = "see below"
    ws = wb.create_sheet("hours")  # hour numbers 1..24 as header under a marker row, a label column
    ws["A1"] = dt.datetime(2002, 1, 25)
    for h in range(1, 25):
        ws.cell(2, h + 1, "x"), ws.cell(3, h + 1, h), ws.cell(4, h + 1, 600 + h * 7 % 13), ws.cell(5, h + 1, 50 + h % 3)
    ws["A4"], ws["A5"] = "Load", "TNP"
    ws = wb.create_sheet("months")  # form fields above a header of month dates; a '$' unit column
    ws["A1"], ws["B1"], ws["A2"], ws["B2"] = "R/C NAME:", "East", "R/C OWNER:", "Jane"
    ws["A4"] = "STAFFING"
    for m in range(1, 4):
        ws.cell(4, m + 2, dt.datetime(2000, m, 1))
    for i, lab in enumerate(["Executive", "Director", "Manager"], start=5):
        ws.cell(i, 1, lab), ws.cell(i, 2, "$")
        for m in range(1, 4):
            ws.cell(i, m + 2, i * m)
    ws = wb.create_sheet("merged")  # a header merged over two columns whose second column holds no value
    ws["A1"], ws["B1"], ws["D1"] = "year", "region", "n"
    ws.merge_cells("B1:C1")
    for i, row in enumerate([(2016, "North", 5), (2017, "South", 6), (2018, "East", 7)], start=2):
        ws.cell(i, 1, row[0]), ws.cell(i, 2, row[1]), ws.cell(i, 4, row[2])
    wb.save(root / "messy.xlsx")
    got = {f["source"]["sheet"]: f for f in tcore.frames.load(str(root / "messy.xlsx"), name="m")["frames"]}
    side = got["side"]
    assert side["column_names"] == ["a", "b"] and side["rows"] == 3 and side["detected"]["other_tables"] == ["D4:E7"]
    assert got["stray"]["column_names"] == ["id", "name", "v"] and got["stray"]["rows"] == 3
    assert any("stray cell" in n for n in got["stray"]["notes"])
    hours = got["hours"]
    assert hours["column_names"][:3] == ["label", "1", "2"] and hours["columns"] == 25 and hours["rows"] == 2
    assert hours["detected"]["header_rows"] == 1 and len(hours["detected"]["skipped_above"]) == 2
    months = got["months"]
    assert months["column_names"] == ["STAFFING", "2000-01-01", "2000-02-01", "2000-03-01"] and months["rows"] == 3
    assert any("unit sign" in n for n in months["notes"])
    assert got["merged"]["column_names"] == ["year", "region", "n"] and got["merged"]["rows"] == 3


def test_form_fields_are_not_header_levels() -> None:
    grid = [
        ["CC Name:", "CC Name:", None, None],
        ["CC #:", "CC #:", None, None],
        [None, None, "Monthly", "Run"],
        [None, None, "YTD", "Total"],
        [5200, "Travel", 10, 12],
        [5300, "Office", 11, 13],
        [5400, "Phone", 1, 2],
    ]
    t = detect_region(grid, merged=[(0, 0, 0, 1), (1, 0, 1, 1)], bold={(0, 0), (1, 0), (2, 2), (2, 3), (3, 2), (3, 3)})
    assert t["header"] == [2, 3] and t["names"] == ["col_1", "label", "Monthly|YTD", "Run|Total"]
    assert t["skipped_above"] == ["CC Name: | CC Name:", "CC #: | CC #:"]
