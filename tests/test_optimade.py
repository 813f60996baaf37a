"""lit_materials: computed materials data through OPTIMADE, against the OPTIMADE reference server (issue 46, acceptance 3).

The server (optimade-python-tools' reference implementation, mongomock backend) runs in a subprocess on loopback
with its bundled test structures plus five olivines of this fixture (tests/optimade_server.py); aisac reaches it
through its real HTTP path (egress guard with loopback allowed explicitly, budget, cache).
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import jsonschema
import optimade_server
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from aisac_core.literature.formula import formula_key, parse_formula
from aisac_core.literature.optimade import build_filter, check_filter, computed_properties
from aisac_core.literature.paper import LiteratureError

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------------------------------------------------------
# formulas and filters (no server)
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("LiFePO4", "FeLiO4P"),
        ("Li2Fe2P2O8", "FeLiO4P"),  # reduced by the gcd
        ("PO4FeLi", "FeLiO4P"),
        ("Ca3(PO4)2", "Ca3O8P2"),
        ("LiNi0.8Co0.1Mn0.1O2", "CoLi10MnNi8O20"),  # fractional counts scaled to integers
        ("O2", "O"),
        ("Fe2O3", "Fe2O3"),
    ],
)
def test_reduced_formula_is_optimades(text: str, key: str) -> None:
    assert formula_key(text) == key


def test_parse_formula_counts_groups() -> None:
    assert parse_formula("Ca3(PO4)2") == {"Ca": Fraction(3), "P": Fraction(2), "O": Fraction(8)}


@pytest.mark.parametrize(
    ("text", "says"),
    [("", "empty"), ("LiXx", "not an element"), ("Li(PO4", "open"), ("LiPO4)", "never opened"), ("Li;O", "not part")],
)
def test_bad_formulas_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(LiteratureError, match=says):
        formula_key(text)


def test_build_filter() -> None:
    assert build_filter(formula="LiFePO4") == 'chemical_formula_reduced="FeLiO4P"'
    assert build_filter(elements=["o", "Fe", "li"]) == 'elements HAS ALL "Fe","Li","O" AND nelements=3'
    assert build_filter(elements="Li-Fe-O", exact_elements=False) == 'elements HAS ALL "Fe","Li","O"'
    both = build_filter(elements=["Li"], exact_elements=False, filter_text="nsites<10")
    assert both == 'elements HAS ALL "Li" AND (nsites<10)'
    with pytest.raises(LiteratureError, match="say what to look up"):
        build_filter()
    with pytest.raises(LiteratureError, match="not an element symbol"):
        build_filter(elements=["Li", "Qq"])


@pytest.mark.parametrize("bad", ['elements HAS ALL "Li" AND', "nelements==3", 'elements HAS "Li"); DROP'])
def test_bad_filter_is_refused_before_sending(bad: str) -> None:
    with pytest.raises(LiteratureError, match="not OPTIMADE filter syntax"):
        check_filter(bad)


def test_computed_properties_take_the_common_names_with_units() -> None:
    attrs = {
        "_oqmd_delta_e": -1.2,
        "_oqmd_stability": 0.05,
        "_oqmd_band_gap": 0.0,
        "_oqmd_prototype": "Cu",
        "nelements": 2,
    }
    units = {"_oqmd_delta_e": {"unit": "eV/atom", "description": "formation energy"}}
    props, others = computed_properties(attrs, units)
    assert props["formation_energy_per_atom"] == {
        "value": -1.2,
        "unit": "eV/atom",
        "field": "_oqmd_delta_e",
        "description": "formation energy",
    }
    assert props["energy_above_hull"]["value"] == 0.05 and props["band_gap"]["unit"] is None
    assert others == {"_oqmd_prototype": "Cu"}
    # the preferred name wins whatever the order of the fields
    props2, others2 = computed_properties({"_x_formation_energy": -1.0, "_x_formation_energy_per_atom": -0.5}, {})
    assert props2["formation_energy_per_atom"]["field"] == "_x_formation_energy_per_atom"
    assert others2 == {"_x_formation_energy": -1.0}


# ------------------------------------------------------------------------------------------------------------------
# against the reference server
# ------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ref_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[optimade_server.RefServer]:
    srv = optimade_server.start(tmp_path_factory.mktemp("optimade"))
    yield srv
    srv.stop()


def _app(tmp_path: Any, providers: dict[str, str], allow: bool = True, **kw: Any) -> Any:
    from aisac_core.context import AppContext
    from aisac_core.settings import Settings

    return AppContext(
        Settings(
            data_dir=tmp_path / "store",
            warm=False,
            lit_optimade_providers=providers,
            lit_optimade_provider=next(iter(providers)),
            lit_allow_networks=["127.0.0.1"] if allow else [],
            lit_retries=1,
            **kw,
        )
    )


async def _client_call(app: Any, args: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    from aisac_servers.adapters import literature as lit_server
    from aisac_servers.serving.suite import build

    full = {t.name: t.output_schema for t in await lit_server.server.list_tools()}["materials"]
    async with Client(build(["lit"], app=app, lifespan=False)) as c:
        res = await c.call_tool("lit_materials", args)
    data = res.structured_content
    jsonschema.validate(data, full)
    return res, data


async def test_formula_lookup_cites_provider_id_and_url(ref_server, tmp_path) -> None:  # noqa: ANN001
    app = _app(tmp_path, {"ref": ref_server.url})
    try:
        _res, out = await _client_call(app, {"formula": "LiFePO4"})
        assert out["filter"] == 'chemical_formula_reduced="FeLiO4P"'
        assert out["count"] == 2 and out["data_returned"] == 2 and out["from_cache"] is False
        recs = {r["database_id"]: r for r in out["records"]}
        assert set(recs) == {"exmpl-olivine-1", "exmpl-olivine-5"}
        r = recs["exmpl-olivine-1"]
        assert r["provider"] == "ref" and r["provider_name"] == "Example provider"
        assert r["url"] == f"{ref_server.url}/v1/structures/exmpl-olivine-1"
        assert r["formula_reduced"] == "FeLiO4P" and r["elements"] == ["Fe", "Li", "O", "P"]
        fe = r["properties"]["formation_energy_per_atom"]
        assert fe == {
            "value": -2.531,
            "unit": "eV/atom",
            "field": "_exmpl_formation_energy_per_atom",
            "description": "formation energy per atom (test)",
        }
        assert r["properties"]["band_gap"]["unit"] == "eV" and r["properties"]["energy_above_hull"]["value"] == 0.0
        assert "structure" not in r
        # the entry's URL answers with that entry (the citation resolves)
        import httpx

        got = httpx.get(r["url"], timeout=10).json()
        assert got["data"]["id"] == "exmpl-olivine-1"
        # asked again: from the response cache, same records
        again = await app.literature.materials(formula="Li2Fe2P2O8")
        assert again["from_cache"] is True and [x["database_id"] for x in again["records"]] == [
            x["database_id"] for x in out["records"]
        ]
        # replay (AISAC_LIT_REPLAY): the cached answer, with the time it was fetched; an uncached request is an error
        replay = app.literature.cache_only()
        replayed = await replay.materials(formula="LiFePO4")
        from datetime import datetime

        t_replayed = datetime.fromisoformat(replayed["records"][0]["retrieved_at"])
        assert abs((t_replayed - datetime.fromisoformat(out["records"][0]["retrieved_at"])).total_seconds()) <= 2
        with pytest.raises(LiteratureError, match="replay mode"):
            await replay.materials(formula="LiMnPO4")
    finally:
        app.close()


async def test_bundled_structures_elements_filter_and_structure(ref_server, tmp_path) -> None:  # noqa: ANN001
    app = _app(tmp_path, {"ref": ref_server.url})
    try:
        out = await app.literature.materials(elements=["Ag"], exact_elements=False, k=3, with_structure=True)
        assert out["data_returned"] == 11 and out["count"] == 3 and out["more_data_available"] is True
        r = out["records"][0]
        assert "Ag" in r["elements"] and r["provider_fields"]["_exmpl_this_provider_field"] == "test"
        assert r["properties"] == {}  # the bundled structures carry no computed energies
        assert len(r["structure"]["lattice_vectors"]) == 3 and len(r["structure"]["species_at_sites"]) == r["nsites"]
        exact = await app.literature.materials(elements="Ac,Ag,Ir")
        assert [x["database_id"] for x in exact["records"]] == ["mpf_2"]
        raw = await app.literature.materials(filter='nelements=4 AND elements HAS "P"', k=10)
        assert raw["count"] == 5
        none = await app.literature.materials(formula="NaCl")
        assert none["count"] == 0 and none["records"] == []  # reached and answered: an honest empty answer
    finally:
        app.close()


async def test_unreachable_provider_is_an_error_not_an_empty_result(tmp_path) -> None:  # noqa: ANN001
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once
    app = _app(tmp_path, {"dead": dead})
    try:
        with pytest.raises(ToolError, match="cannot be reached.*Nothing was searched"):
            await _client_call(app, {"formula": "LiFePO4"})
    finally:
        app.close()


async def test_loopback_provider_refused_without_allow_list(ref_server, tmp_path) -> None:  # noqa: ANN001
    app = _app(tmp_path, {"ref": ref_server.url}, allow=False)
    try:
        with pytest.raises(ToolError, match=r"127\.0\.0\.1"):
            await _client_call(app, {"formula": "LiFePO4"})
    finally:
        app.close()


async def test_bad_arguments_are_tool_errors(ref_server, tmp_path) -> None:  # noqa: ANN001
    app = _app(tmp_path, {"ref": ref_server.url})
    try:
        for args, says in [
            ({}, "say what to look up"),
            ({"formula": "LiFePO4", "provider": "nowhere"}, "unknown OPTIMADE provider"),
            ({"formula": "LiFePO4", "k": 0}, "1 to 100"),
            ({"filter": "nelements=="}, "not OPTIMADE filter syntax"),
            ({"formula": "Xx2O"}, "not an element symbol"),
        ]:
            with pytest.raises(ToolError, match=says):
                await _client_call(app, args)
    finally:
        app.close()
