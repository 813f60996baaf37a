"""Workbook sheets load one by one, within bounds (issue 29): a sheet that fails never loses the others, and a sheet
whose declared extent or merged area is huge loads from its real cells or is refused with an error naming the
limit and its setting. Timing and memory of the bombs: ``python -m bench --only sheets``."""

from __future__ import annotations

from pathlib import Path

import pytest
from sheet_patterns import (  # tests/ is on sys.path (conftest.py); "tests." would find optimade's top-level tests package
    write_extent_bomb,
    write_merge_bomb,
)

from aisac_core.context import AppContext
from aisac_core.data.frames import DataError
from aisac_core.settings import Settings


@pytest.fixture
def core(tmp_path: Path):  # noqa: ANN201
    root = tmp_path / "root"
    root.mkdir()
    c = AppContext(Settings(data_dir=tmp_path / "store", roots=[root], warm=False))
    yield c, root
    c.close()


def _workbook_with_a_bad_sheet(path: Path) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "first"
    for i, row in enumerate([("a", "b"), (1, 2), (3, 4)], start=1):
        ws.cell(i, 1, row[0]), ws.cell(i, 2, row[1])
    ws = wb.create_sheet("formatting")  # one-cell rows only, scattered: raised StopIteration in detection before
    ws["A1"], ws["B2"], ws["C3"] = "bold", "italic", "underline"
    ws = wb.create_sheet("huge merge")
    ws["A1"] = "title"
    ws.merge_cells("A1:C3")
    ws = wb.create_sheet("last")
    for i, row in enumerate([("x", "y"), (5, 6), (7, 8)], start=1):
        ws.cell(i, 1, row[0]), ws.cell(i, 2, row[1])
    wb.save(path)
    return path


def test_a_failing_sheet_never_loses_the_others(core) -> None:
    c, root = core
    path = _workbook_with_a_bad_sheet(root / "book.xlsx")
    c.frames.settings.max_merged_cells = 5  # the 9-cell merge of "huge merge" passes it: that sheet fails alone
    out = c.frames.load(str(path), name="b")
    got = {f["source"]["sheet"]: f for f in out["frames"]}
    assert set(got) == {"first", "formatting", "last"}
    assert got["first"]["column_names"] == ["a", "b"] and got["last"]["rows"] == 2
    bad = [n for n in out["notes"] if "huge merge" in n]
    assert bad and "not loaded" in bad[0] and "AISAC_DATA_MAX_MERGED_CELLS" in bad[0]
    with pytest.raises(DataError, match="AISAC_DATA_MAX_MERGED_CELLS"):  # asked for by name: its own error
        c.frames.load(str(path), name="h", sheet="huge merge")


def test_an_internal_error_in_one_sheet_names_it(core, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: the detection raising a non-aisac exception on one sheet (as StopIteration did)."""
    from aisac_core.data import loaders

    c, root = core
    path = _workbook_with_a_bad_sheet(root / "book.xlsx")
    real = loaders.detect_region

    def flaky(grid, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        if any(v == "italic" for row in grid for v in row):
            raise RuntimeError("coroutine raised StopIteration")
        return real(grid, *a, **k)

    monkeypatch.setattr(loaders, "detect_region", flaky)
    out = c.frames.load(str(path), name="b")
    assert {f["source"]["sheet"] for f in out["frames"]} == {"first", "huge merge", "last"}
    note = next(n for n in out["notes"] if "'formatting'" in n)
    assert "RuntimeError" in note and "data_inspect" in note


def test_extent_bomb_loads_from_its_real_cells(core) -> None:
    c, root = core
    path = write_extent_bomb(root / "extent.xlsx")
    assert path.stat().st_size < 8_000
    f = c.frames.load(str(path), name="e")["frames"][0]
    assert f["column_names"] == ["site", "depth_m", "temp_C"] and f["rows"] == 3
    assert f["detected"]["range"] == "A1:C4"


def test_merge_bomb_is_refused_naming_the_limit(core) -> None:
    c, root = core
    path = write_merge_bomb(root / "merge.xlsx")
    with pytest.raises(DataError, match=r"A2:CV20000.*AISAC_DATA_MAX_MERGED_CELLS"):
        c.frames.load(str(path), name="m")
    c.frames.settings.max_merged_cells = 5_000_000  # raised: read as one merged title (a bounded, compact grid)
    f = c.frames.load(str(path), name="m")["frames"][0]
    assert f["rows"] <= 4


def test_cell_limit_names_its_setting(core) -> None:
    c, root = core
    path = write_extent_bomb(root / "extent.xlsx")
    c.frames.settings.max_sheet_cells = 10
    with pytest.raises(DataError, match="AISAC_DATA_MAX_SHEET_CELLS"):
        c.frames.load(str(path), name="e")


def test_data_inspect_maps_every_shared_sheet_within_4000_characters(shared_data: Path, tmp_path: Path) -> None:
    from aisac_core.data.inspect import MAX_CHARS, inspect_workbook

    books = sorted([*shared_data.glob("tabular/tidyxl/*.xlsx"), *shared_data.glob("formats/xlsx/*.xlsx")])
    if not books:
        pytest.skip("shared workbooks absent")
    for p in books:
        for s in inspect_workbook(p)["sheets"]:
            assert len(s["map"]) <= MAX_CHARS, (p.name, s["sheet"])
            if s["used"]:
                assert s["blocks"] and all(b in s["map"] for b in s["blocks"][:5]), (p.name, s["sheet"])


@pytest.mark.anyio
async def test_data_inspect_tool(core) -> None:
    from fastmcp import Client

    from aisac_servers.serving.suite import build

    c, root = core
    path = write_extent_bomb(root / "e.xlsx")
    async with Client(build(["data"], app=c)) as client:
        r = await client.call_tool("data_inspect", {"path": str(path)})
        s = r.structured_content["sheets"][0]
        assert s["used"] == "A1:ALL20000" and "A1:C4" in s["blocks"] and "A1='site'" in s["map"]


FIXTURES = Path(__file__).parent / "fixtures" / "sheets"  # made by tests/fixtures/sheets/make_fixtures.py


@pytest.mark.parametrize(
    ("name", "columns"),
    [
        ("yields.xls", ["run", "T (K)", "Yield (%)|4 h", "Yield (%)|8 h"]),
        ("yields.ods", ["run", "T (K)", "4 h", "8 h"]),
    ],
)
def test_xls_and_ods_load_through_calamine(core, name: str, columns: list[str]) -> None:
    import shutil

    c, root = core
    shutil.copy(FIXTURES / name, root / name)
    out = c.frames.load(str(root / name), name="y")
    f = out["frames"][0]
    assert f["source"]["format"] == "calamine" and f["source"]["sheet"] == "yields"
    assert f["column_names"] == columns and f["rows"] == 3
    assert f["dtypes"]["T (K)"] == "int64" and f["detected"]["skipped_below"] == ["Source: lab notebook"]
    assert c.frames.preview(f["name"], 3)["rows"][2]["run"] == "r3"


def test_a_damaged_xls_gives_a_clear_error(core) -> None:
    c, root = core
    (root / "bad.xls").write_bytes(b"not a workbook at all" * 20)
    with pytest.raises(DataError, match=r"cannot open bad\.xls as a \.xls workbook"):
        c.frames.load(str(root / "bad.xls"))


def test_data_inspect_reads_xls_and_ods(core) -> None:
    from aisac_core.data.inspect import inspect_workbook

    xls = inspect_workbook(FIXTURES / "yields.xls")["sheets"][0]
    assert xls["sheet"] == "yields" and xls["used"] == "A1:D9" and "C3:D3='Yield (%)'" in xls["map"]
    ods = inspect_workbook(FIXTURES / "yields.ods")["sheets"][0]
    assert "A3='run'" in ods["map"] and ods["blocks"]
