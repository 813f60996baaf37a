"""The learned line classifier of table structure (aisac_core.data.structure): real tables through the shipped
model, the statistical markers, and the held-out figures of the shared cell_types portion when it is present."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

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
    assert len(meta["platt"]) == 3
    assert len(S.model_sha256()) == 64
    assert booster.num_feature() == len(S.FEATURES)


def test_held_out_figures_on_the_shared_cell_types() -> None:
    """Acceptance of issue 47 on the held-out workbooks (those the model neither saw nor was calibrated on)."""
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
    assert s["ece"] <= 0.05
