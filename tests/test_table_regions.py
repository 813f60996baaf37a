"""The learned table-region classifier of the PDF table reader (:mod:`aisac_core.rag.tableregions`): the shipped model
file, its features on a grid we build, the selection of candidates, and a malformed or missing model as a clear
error. Fast: no PDF parse (the reader's own tests parse PDFs: tests/test_pdf_tables*.py)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from aisac_core.rag.pdftables import Candidate, PdfTable, TableCell, select_candidates
from aisac_core.rag.tableregions import (
    FEATURES,
    MODEL_PATH,
    TableModelError,
    load,
    model_sha256,
    parse_model,
    region_features,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the bench package (the training script)


def _table(page: int = 1, bbox: tuple[float, float, float, float] = (100, 100, 400, 200)) -> PdfTable:
    """A 4 x 3 table: a header row, three rows with a label and two figures (one cell empty)."""
    rows = [
        ("Material", "E (eV)", "Gap"),
        ("LiFePO4", "-2.51", "3.7"),
        ("LiCoO2", "-1.87", ""),
        ("NaCoO2", "-1.64", "2.1"),
    ]
    cells = []
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            if text:
                x = bbox[0] + 100 * c
                y = bbox[1] + 20 * r
                cells.append(TableCell(r, c, r, c, text, page, (x, y, x + 60, y + 10)))
    return PdfTable(page, bbox, 4, 3, 1, cells, caption="Table 2: Energies")


def test_shipped_model_is_readable_and_calibrated() -> None:
    m = load()
    raw = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    assert raw["features"] == list(FEATURES) and m.sha256 == model_sha256() and len(m.sha256) == 64
    assert 0.0 < m.threshold <= 1.0
    # the isotonic map is non-decreasing and a probability
    assert all(a <= b for a, b in zip(m.iso_x, m.iso_x[1:])) and all(a <= b for a, b in zip(m.iso_y, m.iso_y[1:]))
    assert all(0.0 <= v <= 1.0 for v in m.iso_y)
    # the cross-validated figures the docs quote are stored with the model
    cv = raw["cross_validation"]
    assert 0.0 <= cv["ece_10_bins"] <= 1.0 and set(raw["training"]["documents"]).isdisjoint({"eu-002", "us-001"})


def test_region_features_of_a_grid() -> None:
    t = _table()
    f = region_features(
        t,
        600,
        800,
        [(150.0, 90.0, 410.0), (150.0, 300.0, 310.0)],
        ruled=False,
        figure=False,
        axis=True,
        rules_keep=True,
    )
    assert list(f) == list(FEATURES)
    assert f["log_rows"] == pytest.approx(math.log(4)) and f["log_cols"] == pytest.approx(math.log(3))
    assert f["fill"] == pytest.approx(11 / 12)
    # "-2.51", "3.7", "-1.87", "-1.64", "2.1" are numbers; the formulas hold digits too, "E (eV)" none
    assert f["numeric_share"] == pytest.approx(5 / 11) and f["digit_share"] == pytest.approx(8 / 11)
    assert f["table_caption"] == 1.0 and f["figure_caption"] == 0.0 and f["beside_axis"] == 1.0
    assert f["width_share"] == pytest.approx(0.5) and f["height_share"] == pytest.approx(0.125)
    assert f["rulings"] == pytest.approx(math.log(2))  # the short ruling (10 of 300 pt) is not across the table
    assert f["pitch_cv"] == pytest.approx(0.0) and f["multi_rows"] == 1.0
    assert f["header_share"] == pytest.approx(0.25) and f["label_rows"] == 1.0 and f["rules_keep"] == 1.0


def test_the_model_ranks_a_table_over_prose() -> None:
    m = load()
    table = region_features(_table(), 600, 800, [], ruled=False, figure=False, axis=False, rules_keep=True)
    prose = {
        **table,
        "numeric_share": 0.0,
        "digit_share": 0.0,
        "prose_cells": 1.0,
        "words_per_cell": math.log1p(9),
        "fill": 0.3,
        "table_caption": 0.0,
        "figure_caption": 1.0,
        "rules_keep": 0.0,
        "label_rows": 0.0,
    }
    assert m.logit(table) > m.logit(prose)
    assert m.probability(table) >= m.probability(prose)
    with pytest.raises(KeyError):
        m.logit({k: v for k, v in table.items() if k != "fill"})


def test_select_candidates_threshold_overlap_order_and_forced() -> None:
    a = Candidate(_table(1, (100, 100, 400, 200)), {}, True)
    b = Candidate(_table(1, (110, 110, 390, 190)), {}, True)  # inside a
    c = Candidate(_table(2, (100, 100, 400, 200)), {}, True)
    d = Candidate(_table(1, (100, 400, 400, 500)), {}, True)  # below a, apart
    cands = [a, b, c, d]
    assert select_candidates(cands, [0.95, 0.97, 0.2, 0.91], 0.9) == [1, 3]  # b beats a; c below the threshold
    assert select_candidates(cands, [0.95, 0.97, 0.2, 0.91], 0.9, [True, False, False, False]) == [0, 3]
    assert select_candidates(cands, [0.95, 0.95, 0.95, 0.95], 0.5) == [0, 2, 3]  # a tie: the earlier one
    assert select_candidates(cands, [0.1, 0.1, 0.1, 0.1], 0.5) == []
    assert select_candidates([], [], 0.5) == []


def test_malformed_or_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    good = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    assert parse_model(MODEL_PATH.read_bytes()).threshold == good["threshold"]
    with pytest.raises(ValueError, match="differ from this release"):
        parse_model(json.dumps({**good, "features": ["x"]}).encode())
    with pytest.raises(ValueError, match="weights do not match"):
        parse_model(json.dumps({**good, "coef": good["coef"][:-1]}).encode())
    with pytest.raises(ValueError, match="isotonic map"):
        parse_model(json.dumps({**good, "isotonic": {"x": [0.0], "y": []}}).encode())
    with pytest.raises(ValueError):
        parse_model(b"{not json")
    with pytest.raises(ValueError):
        parse_model(json.dumps({k: v for k, v in good.items() if k != "threshold"}).encode())
    with pytest.raises(TableModelError, match="unreadable .*reinstall aisac"):
        load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**good, "scale": [0.0] * len(FEATURES)}), encoding="utf-8")
    with pytest.raises(TableModelError, match="weights do not match"):
        load(bad)


# -- the training script (bench/train_table_regions.py) on hand-made documents ---------------------------------------
def _doc(name: str, shift: float) -> object:
    """A document with two candidates: a true table (it matches the ground truth's region and cells) and a false one
    elsewhere on the page; the first feature tells them apart (+1 / -1, shifted per document)."""
    import numpy as np

    from bench import train_table_regions as T
    from bench.table_eval import EvalTable, GridCell

    cells = [GridCell(r, c, r, c, f"v{r}{c}", 1) for r in range(3) for c in range(2)]
    truth = EvalTable(regions=[(1, (100.0, 600.0, 300.0, 700.0))], cells=list(cells))
    good = EvalTable(regions=[(1, (100.0, 600.0, 300.0, 700.0))], cells=list(cells))
    bad = EvalTable(
        regions=[(1, (100.0, 100.0, 300.0, 200.0))],
        cells=[GridCell(0, 0, 0, 0, "x", 1), GridCell(0, 1, 0, 1, "y", 1), GridCell(1, 0, 1, 0, "z", 1)],
    )
    feats = [{name: 0.0 for name in FEATURES} for _ in range(2)]
    cands = [
        Candidate(_table(1, (100, 92, 300, 192)), feats[0], True),
        Candidate(_table(1, (100, 592, 300, 692)), feats[1], True),
    ]
    x = np.zeros((2, len(FEATURES)))
    x[0, 0], x[1, 0] = 1.0 + shift, -1.0 + shift
    x[:, 1] = [0.5, 0.4]
    return T.DocData(name, x, np.array([1, 0]), np.array([True, True]), [good, bad], cands, [[truth]], truth.regions)


def test_training_helpers_on_hand_made_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from bench import train_table_regions as T

    docs = [_doc(f"d{i}", 0.1 * i) for i in range(4)]
    # every candidate kept: the false table's relations count against precision; only the true one: all correct
    both = T.summary(docs, [[0, 1] for _ in docs])
    only = T.summary(docs, [[0] for _ in docs])
    assert both["region_p"] == 0.5 and only["region_p"] == 1.0 and only["doc_f1"] == 1.0 and both["doc_f1"] < 1.0
    monkeypatch.setattr(T, "CS", (0.1, 1.0))  # two strengths keep the test fast; the choice logic is the same
    ch = T.choose(docs, False)
    assert ch["C"] == 0.1 and ch["cv"]["doc_f1"] == 1.0 and 0.0 < ch["threshold"] <= 1.0
    # the captioned-table policy keeps a captioned candidate the hand rules keep, whatever its probability
    docs[0].cands[1].features["table_caption"] = 1.0
    assert T.select(docs[0], np.array([0.9, 0.0]), 0.5, True) == [0, 1]
    assert T.select(docs[0], np.array([0.9, 0.0]), 0.5, False) == [0]
    # one class only: a constant model, no scikit-learn error
    mean, scale, coef, b = T.fit(
        [T.DocData("one", np.ones((2, 3)), np.array([1, 1]), np.array([True, True]), [], [], [], [])], 1.0
    )
    assert not coef.any() and b > 0 and (scale == 1.0).all()
    # ECE over 10 equal-width bins: |0.05 - 0| * 1/3 + |0.95 - 0.5| * 2/3
    e, rows = T.ece(np.array([0.05, 0.95, 0.95]), np.array([0, 1, 0]))
    assert e == pytest.approx(0.05 / 3 + 0.45 * 2 / 3) and [r["n"] for r in rows] == [1, 2]
    xs, ys = T.fit_isotonic(np.array([-2.0, -1.0, 1.0, 2.0]), np.array([0, 1, 0, 1]))
    p = T.calibrate(np.array([-3.0, 0.0, 3.0]), xs, ys)
    assert list(p) == sorted(p) and 0.0 <= p[0] and p[-1] <= 1.0
