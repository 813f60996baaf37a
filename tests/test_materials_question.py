"""The materials question end to end (issue 46, acceptance 4): a materials-template project indexes a paper whose
table reports formation energies; the headless run (`aisac ask` / `roles_run`) answers "Which compositions showed the
lowest formation energy, and how do the reported values compare to computed predictions?" with a comparison table
whose every number cites its table cell (an anchor that re-verifies) or its OPTIMADE record (provider, id, URL); the
run page's cited cards carry the cells' boxes and their page images highlight them.

The database is OPTIMADE's reference server on loopback (tests/optimade_server.py) with five olivines of test values.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optimade_server
import pytest
from conftest import make_settings

pytestmark = pytest.mark.anyio

QUESTION = (
    "Which compositions showed the lowest formation energy, and how do the reported values compare to computed "
    "predictions?"
)
#: the paper's table: composition, reported, the paper's own DFT value (the fixture layout of test_pdf_tables)
ROWS = [
    ("LiFePO4", "-2.51", "-2.47"),
    ("LiMnPO4", "-2.66", "-2.60"),
    ("LiCoPO4", "-2.25", "-2.31"),
    ("NaCoO2", "-1.64", "-1.60"),  # not in the database: its row says so, no value is invented
]


@pytest.fixture(scope="module")
def ref_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[optimade_server.RefServer]:
    srv = optimade_server.start(tmp_path_factory.mktemp("optimade"))
    yield srv
    srv.stop()


def _paper(path: Path) -> Path:
    from test_pdf_tables import make_table_pdf

    return make_table_pdf(path, ROWS)


async def test_the_materials_question_cites_cells_and_records(ref_server, tmp_path, models_dir, shared_embedder):  # noqa: ANN001
    from aisac_core.projects import init_project
    from aisac_core.trace.queries import RunQueries
    from aisac_core.trace.report import run_report
    from aisac_servers.adapters.project import serve_project
    from aisac_servers.serving.toolclient import SuiteTools

    proj = tmp_path / "mat"
    init_project(proj, "materials")
    _paper(proj / "data" / "notes" / "olivine_energies.pdf")
    base = make_settings(
        tmp_path / "shared",
        models_dir,
        warm=False,
        lit_optimade_providers={"ref": ref_server.url},
        lit_optimade_provider="ref",
        lit_allow_networks=["127.0.0.1"],
        lit_retries=1,
    )
    _suite, app = serve_project(proj, base, embedder=shared_embedder)
    try:
        app.rag.indexer.run([proj / "data" / "notes"], failures=[])
        app.settings.roles.replan_limit = 0
        async with SuiteTools(app) as tools:
            res = await app.roles.run(QUESTION, tools=tools, llm="none", mode="lite")
        answer: dict[str, Any] = res["answer"]
        (comp,) = answer["comparisons"]
        by = {r["composition"]: r for r in comp["rows"]}
        assert list(by) == ["LiMnPO4", "LiFePO4", "LiCoPO4", "NaCoO2"]  # lowest reported first
        assert comp["lowest_reported"] == ["LiMnPO4"] and comp["lowest_database"] == ["LiMnPO4"]
        # the reported column, not the paper's own computed one; the database's lowest polymorph of LiFePO4
        assert by["LiFePO4"]["reported"]["value"] == -2.51 and by["LiFePO4"]["reported"]["unit"] == "eV/atom"
        fe_db = by["LiFePO4"]["database"]
        assert fe_db["database_id"] == "exmpl-olivine-1" and fe_db["value"] == -2.531 and fe_db["unit"] == "eV/atom"
        assert fe_db["url"] == f"{ref_server.url}/v1/structures/exmpl-olivine-1"
        assert by["LiFePO4"]["difference_ev_per_atom"] == pytest.approx(-0.021)
        assert by["NaCoO2"]["database"] is None and any("NaCoO2" in n or "CoNaO2" in n for n in comp["notes"])

        cites = {c["n"]: c for c in answer["citations"]}
        cells = [c for c in cites.values() if c.get("kind") == "cell"]
        records = [c for c in cites.values() if c.get("kind") == "record"]
        assert len(cells) == 4 and len(records) == 3
        for c in cells:  # every reported number cites its cell, and the cell's anchor re-verifies
            assert c["anchor"]["chunk_id"].startswith("cell:") and len(c["anchor"]["bbox"]) == 4
            assert app.rag.verify_full_anchor(c["anchor"])["status"] == "ok", c
        for c in records:
            assert c["url"].startswith(f"{ref_server.url}/v1/structures/") and c["provider"] == "ref"
        text = answer["text"]
        r = by["LiFePO4"]
        assert f"| LiFePO4 | -2.51 [{r['reported_citation']}] | -2.531 eV/atom (ref exmpl-olivine-1) " in text
        assert f"[{r['database_citation']}]" in text and "Lowest reported formation energy: LiMnPO4." in text

        # the run page: the cited cells are cards with their boxes, highlighted on the page image
        report = run_report(RunQueries(app.engine).get_run(res["run_id"], include_results=True))
        boxed = [c for c in report["cited"] if c.get("bbox")]
        assert len(boxed) == 4
        img = app.trace.images().image(boxed[0])
        assert img is not None and img.found and len(img.rects) == 1
        # the record citations carry their URL on the run page and in the Markdown export; the table is exported
        rec = next(c for c in report["cited"] if c.get("url"))
        assert rec["url"] == fe_db["url"] or rec["url"].startswith(f"{ref_server.url}/v1/structures/")
        html = app.trace.report_html(res["run_id"])
        assert f"href='{fe_db['url']}'" in html
        md = app.trace.export(res["run_id"], "markdown")["markdown"]
        assert f"<{fe_db['url']}>" in md and "| LiFePO4 | -2.51 [" in md
        # every tool call of the comparison is in the trace, under the coordinator
        from aisac_core.trace.recorder import list_events

        ev = list_events(app.engine, run_id=res["run_id"], limit=500)
        tools_called = {e["tool"] for e in ev}
        assert {"data_load", "data_preview", "lit_materials"} <= tools_called
    finally:
        app.close()


async def test_other_questions_skip_the_comparison(tmp_path, models_dir, shared_embedder):  # noqa: ANN001
    """A question not about formation energies costs no table read and no database call."""
    from aisac_core.roles.compare import applies

    node = {"kind": "comparison", "property": "formation_energy_per_atom"}
    assert applies(QUESTION, node)
    assert not applies("What is the theoretical capacity of LiFePO4?", node)
    assert applies("Compare the formation enthalpy of the oxides", node)


def test_columns_reported_before_computed_and_formulas_found_without_a_header() -> None:
    from aisac_core.roles.compare import pick_columns

    cols = ["Composition", "Formation energy (eV/atom)|computed", "Formation energy (eV/atom)|reported"]
    assert pick_columns(cols, [], "formation_energy_per_atom") == (cols[0], cols[2])
    # no composition header: the column whose cells read as formulas; a DFT-only column is still taken when alone
    rows = [{"col_1": "LiCoO2 (layered)", "ΔH DFT (meV/atom)": "-1870"}, {"col_1": "NaCoO2", "ΔH DFT (meV/atom)": "1"}]
    assert pick_columns(["col_1", "ΔH DFT (meV/atom)"], rows, "formation_energy_per_atom") == (
        "col_1",
        "ΔH DFT (meV/atom)",
    )
    assert pick_columns(["Sample", "Capacity (mAh/g)"], [], "formation_energy_per_atom") is None


async def test_unreachable_database_leaves_the_column_empty_and_says_why() -> None:
    """A comparison through a tool port whose database is down: the reported cells are cited, no value is invented."""
    from aisac_core.roles.compare import attach, compare_reported

    anchor = {"chunk_id": "cell:t:r1c1", "doc_id": "d", "path": "/p/a.pdf", "page": 1, "bbox": [1, 2, 3, 4]}

    async def call(name: str, args: dict[str, Any]) -> tuple[str, Any, str | None]:
        if name == "rag_search":
            return "ok", {"hits": [{"anchor": {"path": "/p/a.pdf"}}]}, None
        if name == "data_load":
            cols = ["Composition", "Formation energy (eV/atom)"]
            return "ok", {"frames": [{"name": "compare_1", "column_names": cols, "detected": {"page": 1}}]}, None
        if name == "data_preview":
            rows = [{"Composition": "LiFePO4", "Formation energy (eV/atom)": -2.51}]
            cells = [
                {"row": 0, "column": "Formation energy (eV/atom)", "text": "-2.51", "anchor": anchor},
                {"row": 0, "column": "Composition", "text": "LiFePO4", "anchor": {**anchor, "chunk_id": "cell:t:r1c0"}},
            ]
            return "ok", {"rows": rows, "cells": cells}, None
        assert name == "lit_materials" and args["formula"] == "FeLiO4P"
        return "tool_error", None, "the OPTIMADE provider 'x' cannot be reached: ... Nothing was searched"

    comp = await compare_reported(call, QUESTION, {"kind": "comparison"})
    (row,) = comp["rows"]
    assert row["database"] is None and row["difference_ev_per_atom"] is None
    assert any("cannot be reached" in n for n in comp["notes"])
    ans = attach({"text": "Extractive answer.", "citations": [{"n": 1, "kind": "rag"}]}, {"value_comparison": comp})
    assert [c["kind"] for c in ans["citations"]] == ["rag", "cell"] and ans["citations"][1]["n"] == 2
    assert "| LiFePO4 | -2.51 [2] | not found |" in ans["text"] and "cannot be reached" in ans["text"]


def test_hostile_record_and_cell_text_stay_inside_their_table_cells() -> None:
    """A provider's id or a PDF's cell text cannot break the Markdown table or smuggle a link into the answer."""
    from aisac_core.literature.optimade import to_record
    from aisac_core.roles.compare import attach

    rec = to_record(
        {"id": "x|1", "links": {"self": "javascript:alert(1)"}, "attributes": {"_p_delta_e": -1.0}},
        "p",
        "P",
        "https://db.example/optimade",
        "2026-01-01T00:00:00+00:00",
        {},
        False,
    )
    assert rec["url"] == "https://db.example/optimade/v1/structures/x%7C1"  # a non-http link is not used
    anchor = {"chunk_id": "cell:t:r1c1", "path": "/p/a.pdf", "page": 1, "bbox": [1, 2, 3, 4]}
    comp = {
        "kind": "materials_comparison",
        "label": "formation energy",
        "rows": [
            {
                "composition": "LiFePO4|[x](http://evil)",
                "reported": {"value": -2.5, "unit": "eV/atom", "text": "-2.5", "anchor": anchor},
                "database": {
                    "value": -2.4,
                    "unit": "eV/atom",
                    "provider": "p",
                    "database_id": "id|\n| injected | row |",
                    "url": rec["url"],
                },
                "difference_ev_per_atom": 0.1,
            }
        ],
        "lowest_reported": ["LiFePO4|[x](http://evil)"],
        "lowest_database": [],
        "notes": [],
    }
    text = attach({"text": "", "citations": []}, {"c": comp})["text"]
    table = [ln for ln in text.splitlines() if ln.startswith("| ") and "Composition" not in ln]
    assert len(table) == 1 and table[0].count("|") == 5, table  # one row, four cells
    assert "](" not in text and "[x]" not in text
