"""Project templates: each template initialises, bootstraps, indexes its own data and serves its tools;
two projects on one data dir see only their own documents; the materials template end to end over stdio."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import make_settings
from fastmcp import Client

AISAC = str(Path(sys.executable).parent / "aisac")
REPO = Path(__file__).resolve().parents[1]

#: per template: (a tool call, a check of its result, a query its notes answer, the note that answers it)
CASES = {
    "general": (
        "project_convert_temperature",
        {"value": 25, "from_unit": "C", "to_unit": "K"},
        lambda r: r == {"value": 298.15, "unit": "K"},
        "what does aisac index in this project",
        "getting_started.md",
    ),
    "materials": (
        "project_molar_mass",
        {"formula": "LiFePO4"},
        lambda r: r["molar_mass_g_per_mol"] == 157.755 and r["composition"]["O"] == 4,
        "iron dissolution capacity fade at 45 °C",
        "olivine_cathodes.md",
    ),
    "process_safety": (
        "project_substance_hazard",
        {"substance": "Toluene"},
        lambda r: r["ghs_category"] == 2 and r["nfpa_flammability"] == 3 and r["hazard_score"] == 51.0,
        "static ignition risk drum pumps bonding",
        "solvent_storage.md",
    ),
}


@pytest.fixture
def base(tmp_path: Path, models_dir: Path):  # noqa: ANN201
    """The machine's settings: one shared data dir with the assembled model (no background warm-up)."""
    return make_settings(tmp_path / "shared", models_dir, warm=False)


def served(project: Path, base, shared_embedder):  # noqa: ANN001, ANN201
    """bootstrap + suite with the project mounted, on an application context on the project's store (embedder
    reused). Returns (bootstrapped project, suite, app)."""
    from aisac_servers.adapters.project import serve_project

    suite, app = serve_project(project, base, embedder=shared_embedder)
    return app.project, suite, app


def data(res):  # noqa: ANN001, ANN201
    return res.structured_content if res.structured_content is not None else json.loads(res.content[0].text)


async def index_and_search(c: Client, query: str) -> list[dict]:
    res = data(await c.call_tool("rag_index", {"wait": True, "timeout_s": 300}))
    assert res["status"] == "done", res
    return data(await c.call_tool("rag_search", {"query": query, "k": 5, "detail": "full"}))["hits"]


@pytest.mark.anyio
@pytest.mark.parametrize("template", sorted(CASES))
async def test_template_indexes_and_serves_as_is(tmp_path, base, shared_embedder, template):
    from aisac_core.projects import init_project
    from aisac_core.trace.recorder import list_events

    tool, args, check, query, note = CASES[template]
    proj = tmp_path / f"my-{template}"
    init_project(proj, template)
    b, suite, app = served(proj, base, shared_embedder)
    try:
        assert b.project.id == f"my-{template}" and b.settings.data_dir == base.data_dir / "projects" / b.project.id
        async with Client(suite) as c:
            names = {t.name for t in await c.list_tools()}
            assert set(b.tool_names) <= names and "rag_search" in names
            res = await c.call_tool(tool, args)
            assert check(data(res)), data(res)
            hits = await index_and_search(c, query)
            assert hits and Path(hits[0]["path"]).name == note
            cat = data(await c.call_tool("rag_catalog", {}))
            assert str(proj / "data" / "tables") in json.dumps(cat)  # the catalog-only root was catalogued
            bad = await c.call_tool(tool, {**args, **{k: "??" for k in list(args)[:1]}}, raise_on_error=False)
            assert bad.is_error and "internal error" not in bad.content[0].text
        ev = [e for e in list_events(app.engine, limit=200) if e["tool"] == tool]
        assert [e["status"] for e in ev] == ["tool_error", "ok"] and ev[1]["server"] == "project"
    finally:
        app.close()


@pytest.mark.anyio
async def test_two_projects_in_turn_see_only_their_own_documents(tmp_path, base, shared_embedder):
    """Acceptance 2: one data dir, two projects served one after the other."""
    from aisac_core.projects import init_project

    a, b_dir = tmp_path / "lab-a", tmp_path / "lab-b"
    init_project(a, "materials")
    init_project(b_dir, "process_safety")
    seen = {}
    for proj, query in ((a, "LiFePO4 olivine capacity"), (b_dir, "flash point of acetone storage")):
        b, suite, app = served(proj, base, shared_embedder)
        try:
            async with Client(suite) as c:
                await index_and_search(c, query)
                docs = data(await c.call_tool("rag_list_documents", {}))
                paths = [d["path"] for d in docs["documents"]]
                seen[proj.name] = paths
                for q in ("LiFePO4 olivine capacity", "flash point of acetone storage"):
                    hits = data(await c.call_tool("rag_search", {"query": q, "k": 10, "detail": "full"}))["hits"]
                    assert all(h["path"].startswith(str(proj)) for h in hits), (proj, q, hits)
        finally:
            app.close()
    assert seen["lab-a"] and seen["lab-b"]
    assert all(p.startswith(str(a)) for p in seen["lab-a"]) and all(p.startswith(str(b_dir)) for p in seen["lab-b"])
    assert sorted((base.data_dir / "projects").iterdir()) == [
        base.data_dir / "projects" / "lab-a",
        base.data_dir / "projects" / "lab-b",
    ]


def test_materials_overlay_changes_the_planner_prompt(tmp_path, base):
    prompts = pytest.importorskip("aisac_core.roles.prompts")
    from aisac_core.projects import bootstrap, init_project

    proj = tmp_path / "mat"
    init_project(proj, "materials")
    b = bootstrap(proj, base)
    plain, v0 = prompts.render("planner", {"task": "molar mass of LiFePO4"})
    text, v1 = prompts.render("planner", {"task": "molar mass of LiFePO4"}, overlay_dir=b.settings.roles.prompt_dir)
    assert "project_molar_mass" in text and "project_molar_mass" not in plain
    assert "molar mass of LiFePO4" in text and v1 != v0 and "materials" not in v0
    assert text.endswith(plain.split("\n", 1)[1]) or plain.strip().splitlines()[-1] in text


def run(args: list[str], env: dict[str, str], timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([AISAC, *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.anyio
async def test_acceptance_init_and_serve_over_stdio(tmp_path, models_dir):
    """Acceptance 1 with real processes: `aisac init DIR --template materials`, `aisac serve --project DIR` over stdio
    (through the store's owner daemon, the default): the tool is listed, works, and its call is in the trace."""
    from fastmcp.client.transports import StdioTransport

    shared = tmp_path / "shared"
    make_settings(shared, models_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_DATA_DIR=str(shared), AISAC_WARM="0")
    proj = tmp_path / "p"
    out = run(["init", str(proj), "--template", "materials"], env)
    assert out.returncode == 0, out.stderr
    assert (proj / "aisac.toml").is_file() and (proj / "extensions" / "tools.py").is_file()
    store = shared / "projects" / "p"
    try:
        transport = StdioTransport(command=AISAC, args=["serve", "--project", str(proj)], env=env, keep_alive=False)
        async with Client(transport, timeout=120) as c:
            names = {t.name for t in await c.list_tools()}
            assert {"project_molar_mass", "project_element", "project_theoretical_capacity", "rag_search"} <= names
            res = await c.call_tool("project_theoretical_capacity", {"formula": "LiFePO4"})
            assert data(res)["capacity_mAh_per_g"] == 169.89
            if "roles_planner" in {p.name for p in await c.list_prompts()}:  # the overlay reaches the planner
                pr = await c.get_prompt("roles_planner", {"task": "molar mass of LiFePO4"})
                text = pr.messages[0].content.text
                assert text.startswith("Project guidance (Materials lab):") and "project_molar_mass" in text
        import sqlite3

        con = sqlite3.connect(store / "aisac.db")
        rows = con.execute("select kind, server, tool, status from traceevent order by id").fetchall()
        con.close()
        assert ("tool_call", "project", "project_theoretical_capacity", "ok") in rows
        init = [r[2] for r in rows if r[0] == "init_step"]
        assert init[:7] == ["load", "validate", "tools", "prompts", "graph", "settings", "store"] and "mount" in init
    finally:
        run(["owner", "stop", "--data-dir", str(store)], env)


@pytest.mark.slow
def test_templates_ship_in_the_wheel(tmp_path):
    """A non-editable install has the templates: build the wheel from a copy of the sources, init from it."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for pkg in ("aisac_core", "servers", "project_templates"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "whl"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        pytest.skip(f"cannot build a wheel here (no build backend from the package index?): {out.stderr[-300:]}")
    whl = next((tmp_path / "whl").glob("aisac-*.whl"))
    site = tmp_path / "site"
    zipfile.ZipFile(whl).extractall(site)
    code = (
        "import sys; from aisac_core import projects as b; assert b.__file__.startswith(sys.argv[1]), b.__file__;"
        "[b.init_project(sys.argv[2] + '/' + t, t) for t in b.list_templates()]; print(b.list_templates())"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    res = subprocess.run(
        [sys.executable, "-c", code, str(site), str(tmp_path / "projects")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "['general', 'materials', 'process_safety']"
    assert (tmp_path / "projects" / "materials" / "data" / "tables" / "elements.csv").is_file()


@pytest.mark.anyio
async def test_materials_graph_node_runs_in_ask(tmp_path, base, shared_embedder, monkeypatch):
    """Acceptance 1, graph part: the materials augmentation adds `formula_check`, which the headless run (what
    `aisac ask` runs) executes through the project tool, recorded under the coordinator's role step."""
    from aisac_core.context import AppContext
    from aisac_core.projects import init_project
    from aisac_core.trace.recorder import list_events
    from aisac_servers.serving.toolclient import SuiteTools

    proj = tmp_path / "mat"
    init_project(proj, "materials")
    b, suite, app = served(proj, base, shared_embedder)
    try:
        assert "formula_check" in app.roles.active_graph()["nodes"]
        # issue 46: the template also adds the formation-energy comparison node
        assert b.steps[4].result["added_nodes"] == ["formula_check", "value_comparison"]
        app.settings.lit.replay = True  # no network: literature answers from its (empty) cache
        app.settings.roles.replan_limit = 0  # one attempt is enough to see the node run
        async with SuiteTools(app) as tools:
            res = await app.roles.run(
                "What is the theoretical capacity of LiFePO4?", tools=tools, llm="none", mode="lite"
            )
        ev = list_events(app.engine, run_id=res["run_id"], limit=500)
        calls = [e for e in ev if e["tool"] == "project_formulas_in_text"]
        assert calls and all(e["status"] == "ok" and e["server"] == "project" for e in calls)
        parents = {e["id"]: e for e in ev}
        assert all(parents[e["parent_id"]]["tool"] == "coordinator" for e in calls)
        coord = [e for e in ev if e["tool"] == "coordinator"]
        assert coord
    finally:
        app.close()
    assert "formula_check" not in AppContext(b.settings).roles.active_graph()["nodes"]  # only where it is served


def test_cli_ask_project_runs_the_graph_node(tmp_path, models_dir):
    """`aisac ask --project DIR` (a real process) executes the materials graph node."""
    pytest.importorskip("aisac_core.roles.graph")
    shared = tmp_path / "shared"
    make_settings(shared, models_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(
        HF_HUB_OFFLINE="1",
        AISAC_DATA_DIR=str(shared),
        AISAC_WARM="0",
        AISAC_LIT_REPLAY="1",
        AISAC_ROLES_REPLAN_LIMIT="0",
    )
    proj = tmp_path / "p"
    assert run(["init", str(proj), "--template", "materials"], env).returncode == 0
    out = run(
        ["ask", "Molar mass of Al2O3 coatings?", "--project", str(proj), "--llm", "none", "--mode", "lite", "--json"],
        env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    import sqlite3

    con = sqlite3.connect(shared / "projects" / "p" / "aisac.db")
    rows = con.execute(
        "select tool, status, result_json from traceevent where run_id = ? and server = 'project'", (res["run_id"],)
    ).fetchall()
    con.close()
    assert rows and rows[0][0] == "project_formulas_in_text" and rows[0][1] == "ok"
    assert json.loads(rows[0][2])["formulas"][0]["formula"] == "Al2O3"
