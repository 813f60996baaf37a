"""The DataFrame registry (aisac_core.data.frames) and the data server's frame tools.

Real files (our fixtures in tests/fixtures/data, ../shared/data when present), a real SQLite store, real Parquet
copies, and a real in-memory MCP client through the suite (so the provenance middleware records the calls).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from sqlmodel import Session, select

from aisac_core.context import AppContext
from aisac_core.data.frames import DataError, FrameRegistry
from aisac_core.errors import PathOutsideRootsError
from aisac_core.settings import Settings
from aisac_core.store.tables import TraceEvent
from aisac_servers.serving.suite import build

pytestmark = pytest.mark.both_engines

FIXTURES = Path(__file__).parent / "fixtures" / "data"


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    """A registered root holding a copy of our data fixtures plus a generated workbook."""
    import openpyxl

    root = tmp_path / "root"
    shutil.copytree(FIXTURES, root)
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Results"
    ws["B2"] = "Table 3. Yields of the catalyst screen"
    ws["B4"], ws["C4"], ws["E4"] = "catalyst", "conversion", "selectivity"
    ws.merge_cells("C4:D4")
    ws["C5"], ws["D5"], ws["E5"] = "1 h", "4 h", "%"
    rows = [("Pd/C", 0.12, 0.55, 91.0), ("Pt/C", 0.10, 0.47, 88.5), ("Ni", 0.02, 0.11, 70.25)]
    for i, r in enumerate(rows, start=6):
        for j, v in enumerate(r, start=2):
            ws.cell(i, j, v)
    ws2 = wb.create_sheet("Notes")
    ws2["A1"], ws2["B1"] = "key", "value"
    ws2["A2"], ws2["B2"] = "operator", "JD"
    wb.create_sheet("Empty")
    wb.save(root / "screen.xlsx")
    return root


@pytest.fixture
def dcore(tmp_path: Path, data_root: Path):  # noqa: ANN201
    """A fresh store whose roots are ``data_root`` (and ../shared/data when present)."""
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    roots = [data_root] + ([shared.resolve()] if shared.is_dir() else [])
    c = AppContext(
        Settings(data_dir=tmp_path / "store", roots=roots, warm=False, sandbox_cpu_s=5, sandbox_job_threshold_s=60)
    )
    yield c
    c.sandbox.shutdown()
    c.close()


def reg(core: AppContext) -> FrameRegistry:
    return core.frames


# -- loaders and header detection -----------------------------------------------------------------------------
def test_csv_title_row_and_two_row_header(dcore, data_root: Path) -> None:
    out = reg(dcore).load(str(data_root / "multiheader.csv"))
    f = out["frames"][0]
    assert f["name"] == "multiheader"
    assert f["column_names"] == ["sample", "temperature|K", "temperature|C", "yield|%"]
    assert f["rows"] == 4
    opts = f["source"]["options"]
    assert opts["header_rows"] == 2 and opts["skipped_rows"] == 2 and opts["delimiter"] == ","
    assert any("title" in n for n in f["notes"])
    assert f["dtypes"]["temperature|K"] == "float64"
    assert len(f["source"]["sha256"]) == 64


def test_csv_encoding_and_delimiter_detected(dcore, data_root: Path) -> None:
    f = reg(dcore).load(str(data_root / "latin1_semicolon.csv"))["frames"][0]
    assert f["source"]["options"]["delimiter"] == ";"
    assert f["source"]["options"]["encoding"].lower().replace("_", "-") not in ("utf-8", "utf-8-sig")
    assert f["column_names"] == ["Straße", "Menge", "Preis"]
    rows = reg(dcore).preview(f["name"], 5)["rows"]
    assert rows[0]["Straße"] == "Hauptstraße" and rows[2]["Menge"] == 7


def test_header_rows_override(dcore, data_root: Path) -> None:
    f = reg(dcore).load(str(data_root / "multiheader.csv"), name="mh1", header_rows=1)["frames"][0]
    assert f["column_names"] == ["sample", "temperature", "temperature.1", "yield"]
    assert f["rows"] == 5  # the units row is now data


def test_excel_every_sheet_title_merged_multirow(dcore, data_root: Path) -> None:
    out = reg(dcore).load(str(data_root / "screen.xlsx"))
    names = {f["name"]: f for f in out["frames"]}
    assert set(names) == {"screen:Results", "screen:Notes"}
    res = names["screen:Results"]
    assert res["column_names"] == ["catalyst", "conversion|1 h", "conversion|4 h", "selectivity|%"]
    assert res["rows"] == 3 and res["source"]["options"]["skipped_rows"] == 3
    assert any("merged" in n for n in res["notes"])
    assert names["screen:Notes"]["column_names"] == ["key", "value"]
    assert any("Empty" in n for n in out["notes"])
    one = reg(dcore).load(str(data_root / "screen.xlsx"), name="notes", sheet="Notes")["frames"]
    assert [f["name"] for f in one] == ["notes"]


def test_json_and_jsonl(dcore, data_root: Path) -> None:
    j = reg(dcore).load(str(data_root / "records.json"))["frames"][0]
    assert j["column_names"] == ["id", "name", "score"] and j["rows"] == 2
    jl = reg(dcore).load(str(data_root / "rows.jsonl"))["frames"][0]
    assert jl["rows"] == 3 and jl["dtypes"]["t"] == "float64"


@pytest.mark.parametrize("fname, needle", [("empty.csv", "empty"), ("corrupt.parquet", "Parquet")])
def test_bad_files_give_clear_errors(dcore, data_root: Path, fname: str, needle: str) -> None:
    with pytest.raises(DataError, match=needle):
        reg(dcore).load(str(data_root / fname))
    assert reg(dcore).list()["count"] == 0  # nothing half-registered


def test_header_only_csv_loads_empty_frame(dcore, data_root: Path) -> None:
    f = reg(dcore).load(str(data_root / "header_only.csv"))["frames"][0]
    assert f["rows"] == 0 and f["column_names"] == ["a", "b", "c"]


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "sub/../../outside.csv"])
def test_paths_outside_roots_refused(dcore, path: str) -> None:
    with pytest.raises(PathOutsideRootsError, match="outside the registered roots"):
        reg(dcore).load(path)


def test_symlink_escape_refused(dcore, data_root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.csv"
    outside.write_text("a,b\n1,2\n")
    (data_root / "link.csv").symlink_to(outside)
    with pytest.raises(PathOutsideRootsError):
        reg(dcore).load(str(data_root / "link.csv"))


# -- query safety ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr",
    [
        "@pd.io.common.os.system('id')",
        "a > @x",
        "__import__('os').system('id')",
        "a.__class__.__bases__",
        "pd.io.common.os",
        "a.values.tofile('/tmp/x')",
        "(lambda: 1)()",
        "[x for x in a]",
        "a.str.contains(__import__('os'))",
        "a if b else c",
        "_secret > 1",
        "a > 2 ** 10 ** 10",
        "b == 'x' * 10 ** 9",
    ],
)
def test_query_escapes_refused(dcore, data_root: Path, expr: str) -> None:
    reg(dcore).load(str(data_root / "records.json"), name="r")
    with pytest.raises(DataError, match="refused|not a valid"):
        reg(dcore).query("r", expr)


def test_query_aggregate_save_lineage_and_restart(dcore, data_root: Path) -> None:
    r = reg(dcore)
    r.load(str(data_root / "multiheader.csv"), name="mh")
    q = r.query("mh", "`temperature|K` > 305 and sample.str.startswith('A')", columns=["sample", "yield|%"])
    assert q["matched"] == 2 and [row["sample"] for row in q["rows"]] == ["A2", "A3"]
    saved = r.save(q["result_id"], "hot_a")
    assert saved["kind"] == "derived" and saved["parent"] == "mh" and saved["operation"]["op"] == "query"
    agg = r.aggregate("mh", by=[], metrics={"yield|%": ["mean", "max"], "sample": "count"})
    assert agg["rows"][0]["yield|%_max"] == 51.5 and agg["rows"][0]["sample_count"] == 4
    with pytest.raises(Exception, match="unknown aggregate"):
        r.aggregate("mh", by=["sample"], metrics={"yield|%": ["eval"]})
    # a new process (new core on the same data dir) finds the frames again, from Parquet
    c2 = AppContext(dcore.settings)
    try:
        r2 = reg(c2)
        names = {f["name"]: f for f in r2.list()["frames"]}
        assert {"mh", "hot_a"} <= set(names)
        assert r2.preview("hot_a", 5)["shape"] == [2, 2]
        assert names["mh"]["source"]["options"]["header_rows"] == 2
    finally:
        c2.close()


def test_describe_and_preview_modes(dcore, data_root: Path) -> None:
    r = reg(dcore)
    r.load(str(data_root / "multiheader.csv"), name="mh")
    d = r.describe("mh", ["temperature|K", "sample"])
    assert d["columns"]["temperature|K"]["max"] == 330.0 and d["columns"]["sample"]["unique"] == 4
    assert r.preview("mh", 2, "tail")["rows"][-1]["sample"] == "B1"
    assert r.preview("mh", 3, "sample") == r.preview("mh", 3, "sample")  # reproducible
    with pytest.raises(DataError, match="unknown frame"):
        r.preview("nope")
    with pytest.raises(DataError, match="unknown column"):
        r.describe("mh", ["nope"])


# -- acceptance on the shared data ----------------------------------------------------------------------------
def test_shared_brain_networks_three_row_header(dcore, shared_data: Path) -> None:
    f = reg(dcore).load(str(shared_data / "tabular/seaborn_data/brain_networks.csv"))["frames"][0]
    assert f["source"]["options"]["header_rows"] == 3
    assert f["columns"] == 63 and f["rows"] == 920
    assert f["column_names"][:3] == ["network|node|hemi", "1|1|lh", "1|1|rh"]
    assert all(t == "float64" for c, t in f["dtypes"].items() if c != "network|node|hemi")


def test_shared_xlsx_with_title_row(dcore, shared_data: Path) -> None:
    f = reg(dcore).load(str(shared_data / "formats/xlsx/xlsx_05_table_with_title.xlsx"))["frames"][0]
    assert f["column_names"] == ["Year", "Freshwater Ducks"]
    rows = reg(dcore).preview(f["name"], 10)["rows"]
    assert rows[0] == {"Year": 2019, "Freshwater Ducks": 120}
    assert f["source"]["options"]["skipped_rows"] == 3


def test_shared_xlsx_merged_multirow_header(dcore, shared_data: Path) -> None:
    out = reg(dcore).load(str(shared_data / "formats/xlsx/xlsx_01.xlsx"), name="x1", sheet="Sheet3")
    assert out["frames"][0]["column_names"][:3] == ["first", "header|second", "header|third"]


def test_shared_protein_parquet_preview_query(dcore, shared_data: Path) -> None:
    r = reg(dcore)
    f = r.load(str(shared_data / "tabular/mosaic_parquet/protein-design.parquet"), name="protein")["frames"][0]
    assert f["rows"] == 48_000 and f["columns"] == 13
    p = r.preview("protein", 5, "sample")
    assert p["shape"] == [48_000, 13] and len(p["rows"]) == 5
    q = r.query("protein", "pae_interaction < 10 and movement == 'og'", limit=5)
    assert 0 < q["matched"] < 48_000 and q["returned"] == 5 and q["truncated"]
    assert all(row["pae_interaction"] < 10 for row in q["rows"])


# -- through MCP (suite, provenance) --------------------------------------------------------------------------
@pytest.mark.anyio
async def test_mcp_data_tools_through_suite(dcore, data_root: Path) -> None:
    async with Client(build(["data"], app=dcore)) as client:
        names = {t.name for t in await client.list_tools()}
        assert {
            "data_load",
            "data_list",
            "data_preview",
            "data_describe",
            "data_query",
            "data_aggregate",
            "data_save",
            "data_to_session",
            "data_code_run",
            "data_code_variables",
            "data_code_session_list",
            "data_code_session_reset",
            "data_code_session_close",
            "data_code_job_status",
        } <= names
        res = await client.call_tool("data_load", {"path": str(data_root / "multiheader.csv"), "name": "mh"})
        assert res.structured_content["frames"][0]["rows"] == 4
        lst = await client.call_tool("data_list", {})
        assert lst.structured_content["count"] == 1
        q = await client.call_tool("data_query", {"name": "mh", "expr": "`yield|%` > 45"})
        assert q.structured_content["matched"] == 2
        with pytest.raises(ToolError, match="refused"):
            await client.call_tool("data_query", {"name": "mh", "expr": "@pd.io.common.os.system('id')"})
        with pytest.raises(ToolError, match="outside the registered roots"):
            await client.call_tool("data_load", {"path": "../../../etc/passwd"})
        ts = await client.call_tool("data_to_session", {"name": "mh", "session": "s1", "variable": "df"})
        assert ts.structured_content["shape"] == [4, 4]
        run = await client.call_tool("data_code_run", {"session": "s1", "code": "df['yield|%'].max()"})
        assert run.structured_content["ok"] is True and run.structured_content["result"] == "np.float64(51.5)"
    with Session(dcore.engine) as db:
        ev = db.exec(select(TraceEvent).where(TraceEvent.tool == "data_code_run")).one()
        assert json.loads(ev.result_json)["ok"] is True and ev.status == "ok"
        bad = db.exec(
            select(TraceEvent).where(TraceEvent.tool == "data_query", TraceEvent.status == "tool_error")
        ).one()
        assert "refused" in bad.error
