"""The learned line classifier of table structure (aisac_core.data.structure): real tables through the shipped
model, the statistical markers, and the held-out figures of the shared cell_types portion when it is present."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path
from typing import Any

import pytest

from aisac_core.data import structure as S

REPO = Path(__file__).resolve().parents[1]
CELL_TYPES = REPO.parent / "shared" / "data" / "tabular" / "cell_types"

STAT_CSV = """Table 12. Resident population by region: 2000 to 2008,,,,
[In thousands. As of July 1],,,,
,,,,
Region,2000,2005,2007,2008
,,,,
United States,"282,172","295,517","301,290","304,060"
Northeast,"53,667","54,643","54,951","55,163"
Midwest,"64,497","65,795","66,388","66,561"
South,"100,559","108,076","111,718","113,318"
West,"63,449","67,003","68,233","69,018"
,,,,
"Source: U.S. Census Bureau, Population Estimates.",,,,
"1 Includes Armed Forces stationed in the area.",,,,
"""


def _grid(text: str) -> list[list[str]]:
    return [list(r) for r in csv.reader(io.StringIO(text))]


def test_a_statistical_table_is_read_title_header_body_notes() -> None:
    grid = _grid(STAT_CSV)
    st = S.classify(grid)
    lab = st.by_row()
    assert lab[0] == "metadata" and lab[1] == "metadata"
    assert lab[3] == "header"  # a header of years (numbers) is still the header
    assert all(lab[i] in ("data", "derived") for i in range(5, 10))
    assert lab[11] == "notes" and lab[12] == "notes"
    assert 0.0 <= st.confidence <= 1.0
    cells = S.cell_labels(grid, st)
    assert cells[(6, 0)] == "LeftAttribute" and cells[(6, 1)] in ("Data", "Derived")
    assert cells[(3, 2)] == "TopAttribute"


def test_a_total_line_is_derived_by_its_sums() -> None:
    """The computational feature: a line equal to the sum of the lines below it."""
    grid = _grid(STAT_CSV)
    rows, X = S.line_features(grid)
    k = S.FEATURES.index("sum_below")
    assert X[rows.index(5)][k] == 1.0  # United States = the four regions
    assert X[rows.index(6)][k] < 1.0


@pytest.mark.parametrize(
    ("value", "meaning"),
    [("[c]", "confidential"), ("..", "not available"), ("(NA)", "not available"), ("-", "nil or not applicable")],
)
def test_statistical_markers_are_missing_values_with_their_meaning(value: str, meaning: str) -> None:
    assert S.marker_meaning(value) == meaning
    assert S.value_kind(value) == "marker"


def test_numbers_as_statistical_tables_write_them() -> None:
    assert S.parse_number("18 080") == 18080.0
    assert S.parse_number("1,234.5") == 1234.5
    assert S.parse_number("(12)") == -12.0
    assert S.parse_number("Northeast") is None
    assert S.value_kind("2008") == "year" and S.value_kind("-21 139") == "num" and S.value_kind("Total") == "text"


def test_the_model_ships_with_its_calibration_and_hash() -> None:
    booster, meta = S._model()
    assert meta["classes"] == list(S.CLASSES) and meta["features"] == list(S.FEATURES)
    assert len(meta["platt"]) == 3 or meta.get("isotonic")
    assert len(S.model_sha256()) == 64
    assert booster.num_feature() == len(S.FEATURES)


def test_held_out_figures_on_the_shared_cell_types() -> None:
    """The acceptance figures on the held-out workbooks (those the model neither saw nor was calibrated on)."""
    if not (CELL_TYPES / "truth").is_dir():
        pytest.skip("../shared/data/tabular/cell_types is absent")
    sys.path.insert(0, str(REPO))
    from bench.cell_types import predict_tables, read_tables, score

    _, meta = S._model()
    seen = {tuple(k) for k in meta["seen_workbooks"]}
    tables = [t for t in read_tables(CELL_TYPES) if t.key not in seen]
    assert len(tables) >= 50
    s = score(tables, predict_tables(tables))
    assert s["macro_f1"] >= 0.85
    assert s["data_accuracy"] >= 0.95 and s["header_accuracy"] >= 0.95
    assert s["tables_right"] >= 0.85
    # the issue's target is 0.05; the held-out figure is 0.079 on 58 tables (docs/data.md "Learned table
    # structure"): this bound guards against a calibration that has come apart, not the target. At 58 tables a
    # perfectly calibrated confidence shows an ECE of ~0.07 by chance: the measured one must lie within that
    assert s["ece"] <= 0.08
    assert s["ece"] <= s["ece_if_calibrated"][1], (s["ece"], s["ece_if_calibrated"])
    assert 0 <= s["ece_95"][0] < s["ece_95"][1] <= 1


def test_nested_cross_validation_holds_every_table_out_once() -> None:
    """The recorded nested cross-validation (bench/train_cell_types.py --nested) measured the shipped model, holds
    every annotated table out exactly once (the held-out workbooks through the shipped model), its ECE follows from
    its rows, and it meets the acceptance: sheet-confidence ECE <= 0.05, macro F1 >= 0.85, data / header accuracy
    >= 0.95, tables right >= 0.85, at most 10 % wrong among tables loaded at >= 0.9."""
    if not (CELL_TYPES / "truth").is_dir():
        pytest.skip("../shared/data/tabular/cell_types is absent")
    sys.path.insert(0, str(REPO))
    from bench.cell_types import ece, nested_record, read_tables

    rec = nested_record(S.model_sha256())
    assert rec is not None, "bench/data/cell_types_nested.json is absent or measured another model"
    rows = rec["rows"]
    tables = read_tables(CELL_TYPES)
    assert sorted(r["table"] for r in rows) == sorted(t.name for t in tables)
    _, meta = S._model()
    seen = {tuple(k) for k in meta["seen_workbooks"]}
    assert {r["table"] for r in rows if r["outer"] == "test"} == {t.name for t in tables if t.key not in seen}
    n = rec["figures"]
    assert ece([r["confidence"] for r in rows], [r["right"] for r in rows])[0] == pytest.approx(n["ece"])
    assert n["ece"] <= 0.05 and n["ece_95"][0] <= n["ece"] <= n["ece_95"][1]
    assert n["macro_f1"] >= 0.85 and min(n["data_accuracy"], n["header_accuracy"]) >= 0.95
    assert n["tables_right"] >= 0.85
    assert n["wrong_at_0.9"] <= 0.10 * n["n_at_0.9"]


def test_the_sheet_confidence_map_reads_the_sheet_features() -> None:
    """The shipped calibration map is the one the training script chose by cross-validated ECE, and a logistic map
    is the logistic function of its named sheet features (a reading with a near-miss line scores lower)."""
    import math

    _, meta = S._model()
    cv = meta["calibration_cv"]
    chosen = meta["calibration_map"]
    assert cv[chosen]["brier"] <= cv["platt"]["brier"] and cv[chosen]["ece"] <= cv["platt"]["ece"]
    sure = [[0.0, 0.98, 0.0, 0.02, 0.0, 0.0]] + [[0.0, 0.0, 0.0, 0.99, 0.01, 0.0]] * 8
    near = [[0.0, 0.55, 0.0, 0.45, 0.0, 0.0]] + [[0.0, 0.0, 0.0, 0.99, 0.01, 0.0]] * 8
    labels = ["header"] + ["data"] * 8
    fs, fn = S.sheet_features(sure, labels), S.sheet_features(near, labels)
    assert fs["margin"] == pytest.approx(0.96) and fn["margin"] == pytest.approx(0.10)
    assert fs["no_header"] == 0.0 and fn["header_low"] == pytest.approx(0.55)
    lg = {"logistic": {"features": ["score", "margin"], "coef": [1.0, 2.0], "intercept": 0.5}}
    z = fs["score"] + 2.0 * fs["margin"] + 0.5
    assert S.calibrate(S.sheet_scores(sure, labels), lg, fs) == pytest.approx(1 / (1 + math.exp(-z)))
    p_sure = S.calibrate(S.sheet_scores(sure, labels), meta, fs)
    p_near = S.calibrate(S.sheet_scores(near, labels), meta, fn)
    assert 0.0 <= p_near < p_sure <= 1.0
    assert S.sheet_features([], []) == {}


# -- the loaders with the model: never lose a workbook, a CSV's preamble, markers ------------------------------
def _broken_xlsx(path: Path) -> Path:
    """An .xlsx whose workbook names an external-link part that the archive lacks (openpyxl: KeyError)."""
    import zipfile

    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Data"
    for row in (["Table 1. Widgets sold"], [], ["Region", 2019, 2020], ["North", 10, 12], ["South", 7, 9]):
        ws.append(row)
    wb.create_sheet("More").append(["a", "b"])
    wb["More"].append([1, 2])
    buf = io.BytesIO()
    wb.save(buf)
    rel = b"http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zin, zipfile.ZipFile(path, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "xl/_rels/workbook.xml.rels":
                data = data.replace(
                    b"</Relationships>",
                    b'<Relationship Id="rId99" Type="' + rel + b'/externalLink" '
                    b'Target="externalLinks/externalLink1.xml"/></Relationships>',
                )
            elif item.filename == "xl/workbook.xml":
                data = data.replace(
                    b"</sheets>",
                    b'</sheets><externalReferences><externalReference xmlns:r="' + rel + b'" r:id="rId99"/>'
                    b"</externalReferences>",
                )
            zout.writestr(item, data)
    return path


def test_a_workbook_openpyxl_cannot_open_loads_through_calamine(tmp_path: Path) -> None:
    import openpyxl

    path = _broken_xlsx(tmp_path / "broken.xlsx")
    with pytest.raises(KeyError):
        openpyxl.load_workbook(path, read_only=True)
    from aisac_core.data.errors import WorkbookOpenError
    from aisac_core.data.loaders import load_excel
    from aisac_core.data.readers import _read_excel

    with pytest.raises(WorkbookOpenError):
        load_excel(path, None, None)
    out = {title: (df, opts, notes) for title, df, opts, notes in _read_excel(path)}
    assert set(out) == {"Data", "More"}
    df, opts, notes = out["Data"]
    # the header of years (numbers) under a title is read as the header: the model's reading, not col_N
    assert list(df.columns) == ["Region", "2019", "2020"] and len(df) == 2
    assert opts["detected"]["fallback"]["reader"] == "calamine"
    assert "openpyxl cannot open" in notes[0] and "lost" in notes[0]
    assert list(out["More"][0].columns) == ["a", "b"]


def test_a_csv_with_a_ragged_preamble_loads_from_its_header(tmp_path: Path) -> None:
    from aisac_core.data.loaders import load_csv

    cols = ",".join(f"c{k}" for k in range(1, 9))
    rows = "\n".join(",".join(str(r * 10 + k) for k in range(1, 9)) for r in range(1, 13))
    text = (
        "Survey of widgets, 2024\n"
        "Produced by the Office of Widget Statistics; provisional figures\n"
        "Contact: stats@example.org, Tel. 555-0100\n"
        "\n"
        f"{cols}\n{rows}\n\n"
        "Source: Widget survey.\n"
    )
    path = tmp_path / "preamble.csv"
    path.write_text(text, encoding="utf-8")
    df, opts, notes = load_csv(path, None, ".csv")
    assert list(df.columns) == [f"c{k}" for k in range(1, 9)]
    assert len(df) == 12 and df.iloc[0, 0] == 11 and df.iloc[-1, -1] == 128
    assert opts["detected"]["skipped_below"] == ["Source: Widget survey."]
    assert (
        opts["detected"]["skipped_above"][0] == "Survey of widgets 2024" and len(opts["detected"]["skipped_above"]) == 3
    )
    assert 0.0 <= opts["detected"]["confidence"] <= 1.0


def test_a_statistical_csv_gets_its_header_numbers_and_markers(tmp_path: Path) -> None:
    from aisac_core.data.loaders import load_csv

    path = tmp_path / "stat.csv"
    path.write_text(STAT_CSV.replace('"53,667"', "[c]"), encoding="utf-8")
    df, opts, notes = load_csv(path, None, ".csv")
    assert list(df.columns) == ["Region", "2000", "2005", "2007", "2008"]
    assert len(df) == 5 and df["2008"].iloc[0] == 304060.0
    assert df["2000"].isna().sum() == 1  # [c] is a missing value ...
    assert opts["detected"]["markers"]["2000"] == {"[c]": "confidential"}  # ... with its meaning kept
    assert len(opts["detected"]["skipped_below"]) == 2


def test_numbers_with_a_magnitude_suffix_stay_text() -> None:
    """``20k`` is not 20 (a PDF table of the S2ORC paper, checked by hand): such a column keeps its text and a note
    says why; a unit suffix shared by the column (``3.5 eV``) still reads as a number."""
    import pandas as pd

    from aisac_core.data.tablemodel import numbers_and_markers

    df = pd.DataFrame(
        {"papers": ["20k", "0.3M", "80.0M"], "gap": ["3.5 eV", "2.0 eV", "1 eV"], "n": ["1,234", "7", "(12)"]}
    )
    out, _markers, notes = numbers_and_markers(df)
    assert out["papers"].tolist() == ["20k", "0.3M", "80.0M"]
    assert out["gap"].tolist() == [3.5, 2.0, 1.0] and out["n"].tolist() == [1234.0, 7.0, -12.0]
    assert any("magnitude suffix" in n and "20k" in n for n in notes)


def test_data_inspect_shows_every_populated_column_and_the_row_classes(tmp_path: Path) -> None:
    """A header that starts in column B (nothing in column A) is listed, and the rows a load sets aside are named;
    a workbook openpyxl cannot open is still mapped (through calamine)."""
    import openpyxl

    from aisac_core.data.inspect import inspect_workbook

    wb = openpyxl.Workbook()
    ws = wb.active
    ws["A1"] = "Table 3. Percentiles of income"
    for j, v in enumerate(["Group", 10, 20, 25, 50, 75, 90], start=2):
        ws.cell(row=3, column=j, value=v)
    for i, g in enumerate(["A", "B", "C", "D"], start=4):
        ws.cell(row=i, column=2, value=g)
        for j in range(3, 9):
            ws.cell(row=i, column=j, value=100 * i + j)
    ws["A9"] = "Source: survey of incomes."
    wb.save(tmp_path / "pct.xlsx")
    text = inspect_workbook(tmp_path / "pct.xlsx")["sheets"][0]["map"]
    assert "columns (8, first cell and cell count): A1=" in text and "H3=90(5)" in text
    assert "rows by the table-structure model" in text and "1 metadata" in text and "9 notes" in text
    broken = inspect_workbook(_broken_xlsx(tmp_path / "broken.xlsx"))
    assert [s["sheet"] for s in broken["sheets"]] == ["Data", "More"]
    assert "calamine" in broken["notes"][0]


def test_markers_in_a_workbook_are_missing_values_not_labels(tmp_path: Path) -> None:
    """Rows holding ``[c]`` are values: none is taken for a header or a footer, and the meaning is kept."""
    import openpyxl

    from aisac_core.data.loaders import load_excel

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["Table 4. Enterprises by size band"])
    ws.append([])
    ws.append(["Band", "2021", "2022", "2023"])
    rows = [["0-9", 120, "[c]", 131], ["10-49", "[c]", 88, 90], ["50-249", 41, 40, "[c]"], ["250+", "[c]", "[c]", 12]]
    rows += [["Unknown", 3, 4, 5], ["All", 200, 210, 220], ["Other", 1, "[x]", 2], ["Total", 9, 9, 9]]
    for r in rows:
        ws.append(r)
    wb.save(tmp_path / "bands.xlsx")
    [(title, df, opts, notes)] = load_excel(tmp_path / "bands.xlsx", None, None)
    assert list(df.columns) == ["Band", "2021", "2022", "2023"] and len(df) == 8
    assert df["2022"].isna().sum() == 3 and df["2023"].iloc[0] == 131
    assert opts["detected"]["markers"]["2022"] == {"[c]": "confidential", "[x]": "not available"}


def test_section_labels_of_a_statistical_csv_become_a_group_column() -> None:
    """SAUS table 1124 (held out): 'Age:', 'Sex:' ... lead blocks of rows; they label the rows below them."""
    path = CELL_TYPES / "files" / "saus" / "10s1124__Data.csv"
    if not path.is_file():
        pytest.skip("../shared/data/tabular/cell_types is absent")
    from aisac_core.data.loaders import load_csv

    df, opts, notes = load_csv(path, None, ".csv")
    assert list(df.columns[:2]) == ["group", "Characteristic"]
    assert opts["header_rows"] == 3 and opts["data_start_row"] == 10  # rows 5, 8, 9 (6-7 are empty)
    by = dict(zip(df["Characteristic"], df["group"]))
    assert by["18 to 29 years old"] == "Age:" and by["Female"] == "Sex:"
    assert (
        by["Total Adult Internet Users"] is None or by["Total Adult Internet Users"] != by["Total Adult Internet Users"]
    )
    assert "Age:" not in set(df["Characteristic"])  # the label lines are not rows
    assert opts["detected"]["skipped_below"]  # the notes under the table


def _summary_rows() -> list[list[Any]]:
    rows: list[list[Any]] = [["Table 3. Yield by plot"], [], ["Plot", "Treatment", "Yield", "Height"]]
    rows += [[f"P{i}", "A" if i % 2 else "B", 10.0 + i, 100 + 3 * i] for i in range(1, 9)]
    rows += [[], ["Summary"], ["Mean", None, 14.5, 113.5], ["SD", None, 2.4, 7.3], ["Min", None, 11.0, 103]]
    rows += [["Max", None, 18.0, 124], ["N", None, 8, 8]]
    return rows


def test_a_summary_block_below_a_workbook_table_is_not_data(tmp_path: Path) -> None:
    """Issue 47: a summary block one empty row below the table (Mean, SD, Min, Max, N) was loaded as 6 data rows."""
    import openpyxl

    from aisac_core.data.loaders import load_excel

    p = tmp_path / "summary.xlsx"
    wb = openpyxl.Workbook()
    for r in _summary_rows():
        wb.active.append(r)
    wb.save(p)
    [(_, df, opts, notes)] = load_excel(p, None, None)
    assert df is not None and list(df["Plot"]) == [f"P{i}" for i in range(1, 9)]
    assert opts["detected"]["skipped_below"][:2] == ["Summary", "Mean | 14.5 | 113.5"]
    assert any("summary block" in n for n in notes)


def test_a_summary_block_below_a_csv_table_is_not_data(tmp_path: Path) -> None:
    from aisac_core.data.loaders import load_csv

    p = tmp_path / "summary.csv"
    p.write_text("\n".join(",".join("" if v is None else str(v) for v in r) for r in _summary_rows()) + "\n")
    df, opts, notes = load_csv(p, None, ".csv")
    assert list(df["Plot"]) == [f"P{i}" for i in range(1, 9)] and "group" not in df.columns
    assert opts["detected"]["skipped_below"][:2] == ["Summary", "Mean | 14.5 | 113.5"]
    assert any("summary block" in n for n in notes)


def test_summary_block_start_needs_an_empty_row_and_statistics_only() -> None:
    from aisac_core.data.layout import summary_block_start

    firsts = ["P1", "P2", "P3", "Mean", "SD"]
    assert summary_block_start(firsts, [False, False, False, True, False]) == 3
    assert summary_block_start(firsts, [False] * 5) is None  # no empty row: rows of the table
    assert summary_block_start(["P1", "P2", "Total"], [False, False, True]) is None  # one total row stays
    assert summary_block_start(["P1", "P2", "Mean", "Denmark"], [False, False, True, False]) is None
    assert (
        summary_block_start(
            ["a", "b", "Descriptive statistics", "Std. Dev.", "25th percentile"], [False, False, True, False, False]
        )
        == 2
    )


def test_section_labels_of_a_workbook_become_a_group_column(tmp_path: Path) -> None:
    """Issue 47: group labels ("Age:", "Sex:") of a workbook table are a column of the rows under them (as for a
    CSV), not rows of their own with empty values."""
    import openpyxl

    from aisac_core.data.loaders import load_excel

    rows: list[list[Any]] = [
        ["Table 12. Voting-age population by characteristic, 2008"],
        ["[In thousands]"],
        [],
        ["Characteristic", "Total", "Registered", "Voted"],
        ["Age:"],
        ["18 to 24 years", 28263, 16472, 12515],
        ["25 to 44 years", 80420, 49108, 40891],
        ["45 to 64 years", 78340, 55012, 49174],
        ["Sex:"],
        ["Male", 106525, 69101, 61553],
        ["Female", 119190, 77543, 69593],
        ["Region:"],
        ["Northeast", 40683, 26433, 23296],
        ["Midwest", 49083, 33659, 29614],
        ["South", 82301, 54034, 46640],
        [],
        ["Source: U.S. Census Bureau."],
    ]
    p = tmp_path / "groups.xlsx"
    wb = openpyxl.Workbook()
    for r in rows:
        wb.active.append(r)
    wb.save(p)
    [(_, df, opts, notes)] = load_excel(p, None, None)
    assert df is not None and list(df.columns) == ["group", "Characteristic", "Total", "Registered", "Voted"]
    assert len(df) == 8 and list(df["group"]) == ["Age:"] * 3 + ["Sex:"] * 2 + ["Region:"] * 3
    assert df["Total"].dtype.kind in "if" and "group_rows" not in opts["detected"]["structure"]
    assert any("section label" in n for n in notes)
    # a range given by the user is read as given: no model, no group column
    [(_, df2, _, _)] = load_excel(p, None, None, cell_range="A4:D15")
    assert "group" not in df2.columns and len(df2) == 11
