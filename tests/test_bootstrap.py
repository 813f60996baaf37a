"""Project manifests and the validated, traced bootstrap: bad input halts with the file and the fix,
the initialization trace, settings from the manifest, the published JSON Schema."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

AISAC = str(Path(sys.executable).parent / "aisac")
REPO = Path(__file__).resolve().parents[1]

TOOLS = '''
def add(a: float, b: float) -> float:
    """Sum of a and b (same units)."""
    return a + b


def _private() -> None:
    pass
'''


def write_project(root: Path, manifest: str, files: dict[str, str] | None = None) -> Path:
    """A project folder with ``manifest`` as aisac.toml, data/notes and data/tables, and ``files``."""
    (root / "data" / "notes").mkdir(parents=True, exist_ok=True)
    (root / "data" / "tables").mkdir(parents=True, exist_ok=True)
    (root / "data" / "notes" / "a.md").write_text("# A note\n\nSome text about kinetics.\n")
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    (root / "aisac.toml").write_text(textwrap.dedent(manifest))
    return root


GOOD = """
manifest_version = 1
[project]
name = "Test project"
id = "test-proj"
category = "materials"
[[data.indexed]]
path = "data/notes"
description = "notes"
[[data.catalog]]
path = "data/tables"
[extensions]
tools = true
tools_modules = ["ext/tools.py"]
prompts = true
prompts_dir = "ext/prompts"
[roles]
mode = "strict"
[roles.thresholds]
max_plan_steps = 5
[roles.llm]
base_url = "http://127.0.0.1:9/v1"
api_key_env = "MY_KEY"
[literature]
mailto = "lab@example.org"
[literature.api_key_env]
semantic_scholar = "LAB_S2_KEY"
[sandbox]
allow_imports = ["fractions"]
"""


@pytest.fixture
def base(tmp_path: Path):  # noqa: ANN201
    from aisac_core.settings import Settings

    return Settings(data_dir=tmp_path / "store")


def good_project(tmp_path: Path) -> Path:
    return write_project(
        tmp_path / "proj", GOOD, {"ext/tools.py": TOOLS, "ext/prompts/planner.md": "Prefer the project's tools.\n"}
    )


def events(data_dir: Path) -> list[dict]:
    from sqlmodel import Session, select

    from aisac_core.store.sql import make_engine
    from aisac_core.store.tables import TraceEvent

    eng = make_engine(f"sqlite:///{data_dir / 'aisac.db'}")
    try:
        with Session(eng) as s:
            rows = s.exec(select(TraceEvent).order_by(TraceEvent.id)).all()
            return [
                {
                    "run_id": r.run_id,
                    "kind": r.kind,
                    "server": r.server,
                    "tool": r.tool,
                    "status": r.status,
                    "error": r.error,
                    "result": json.loads(r.result_json) if r.result_json else None,
                }
                for r in rows
            ]
    finally:
        eng.dispose()


def test_bootstrap_records_one_init_run_with_every_step(tmp_path, base):
    from aisac_core.projects import bootstrap

    b = bootstrap(good_project(tmp_path), base)
    assert b.settings.data_dir == base.data_dir / "projects" / "test-proj"
    assert b.settings.rag.roots == [(tmp_path / "proj" / "data" / "notes").resolve()]
    assert b.settings.rag.catalog_roots == [(tmp_path / "proj" / "data" / "tables").resolve()]
    assert b.settings.models_dir == base.models_dir  # models shared, data not
    assert b.tool_names == ["project_add"]  # _private stays private
    ev = events(b.settings.data_dir)
    assert [e["tool"] for e in ev] == ["load", "validate", "tools", "prompts", "graph", "settings", "store"]
    assert {e["kind"] for e in ev} == {"init_step"} and {e["server"] for e in ev} == {"bootstrap"}
    assert {e["run_id"] for e in ev} == {b.run_id} and b.run_id.startswith("init-")
    assert ev[0]["result"]["sha256"] == b.project.sha256 and ev[2]["result"]["tools"] == ["project_add"]


def test_bootstrap_is_deterministic(tmp_path, base):
    from aisac_core.projects import bootstrap

    p = good_project(tmp_path)
    r1 = [(s.name, s.result) for s in bootstrap(p, base, open_store=False).steps]
    r2 = [(s.name, s.result) for s in bootstrap(p, base, open_store=False).steps]
    assert r1 == r2


def test_manifest_settings_reach_the_roles_and_literature(tmp_path, base):
    from aisac_core.projects import bootstrap

    b = bootstrap(good_project(tmp_path), base, open_store=False)
    s = b.settings
    applied = b.steps[-1].result["applied"]
    if "roles_mode" in type(s).model_fields:
        assert s.roles.mode == "strict" and s.roles.max_plan_steps == 5
        assert s.roles.llm_base_url == "http://127.0.0.1:9/v1" and s.roles.llm_api_key_env == "MY_KEY"
        assert s.roles.prompt_dir == base.data_dir / "projects" / "test-proj" / "prompt_overlay"
        assert "roles_mode" in applied
    if "sandbox_allow_imports" in type(s).model_fields:
        assert s.sandbox.allow_imports == [*base.sandbox.allow_imports, "fractions"]
    if "lit_mailto" in type(s).model_fields:
        assert s.lit.mailto == "lab@example.org" and s.lit.s2_api_key_env == "LAB_S2_KEY"
    assert b.steps[-1].result["not_applied"] == [
        k for k in b.steps[-1].result["not_applied"] if k not in type(s).model_fields
    ]


# ---- bad input: each halts with the file and the fix, nothing served, the failure is traced ------------------

BAD = {
    "missing_path": (
        GOOD.replace('path = "data/tables"', 'path = "data/missing"'),
        {},
        r"aisac\.toml: data\.catalog\[0\]\.path = 'data/missing' -> .* does not exist; create it or fix",
    ),
    "unknown_key": (
        GOOD.replace('category = "materials"', 'category = "materials"\ncolour = "blue"'),
        {},
        r"aisac\.toml: unknown key 'project\.colour' in \[project\]: remove it or fix its spelling",
    ),
    "nested_unknown_key": (
        GOOD.replace('description = "notes"', 'descripton = "notes"'),
        {},
        r"unknown key 'data\.indexed\[0\]\.descripton'",
    ),
    "syntax_error": (
        GOOD,
        {"ext/tools.py": "def broken(:\n    pass\n"},
        r"ext/tools\.py:1: syntax error in the extensions\.tools_modules\[0\] module: .*; fix line 1",
    ),
    "duplicate_tool": (
        GOOD.replace('tools_modules = ["ext/tools.py"]', 'tools_modules = ["ext/tools.py", "ext/more.py"]'),
        {"ext/more.py": TOOLS},
        r"ext/more\.py: tool 'add' is also defined in .*ext/tools\.py; two "
        r"tools cannot share a name: rename one",
    ),
    "unknown_role": (
        GOOD,
        {"ext/prompts/summariser.md": "Summarise.\n"},
        r"ext/prompts/summariser\.md: prompt overlay for an unknown role 'summariser\.md'; overlays are "
        r"named router\.md, planner\.md, evaluator\.md.*: rename or remove it",
    ),
    "toml_syntax": (GOOD.replace("[roles]", "[roles"), {}, r"aisac\.toml: TOML syntax error: .*line \d+"),
    "bad_value": (GOOD.replace('mode = "strict"', 'mode = "sloppy"'), {}, r"'roles\.mode': Input should be"),
    "import_error": (
        GOOD,
        {"ext/tools.py": "import not_a_module_aisac\n"},
        r"importing the extensions\.tools_modules\[0\] module failed: ModuleNotFoundError",
    ),
    "no_docstring": (GOOD, {"ext/tools.py": "def f(x: int) -> int:\n    return x\n"}, r"function 'f' has no docstring"),
    "bad_placeholder": (
        GOOD,
        {"ext/prompts/planner.md": '+++\nmode = "replace"\n+++\nPlan {question}\n'},
        r"placeholder\(s\) \{question\} are not filled for the planner prompt",
    ),
    "bad_front_matter": (
        GOOD,
        {"ext/prompts/planner.md": "+++\nmood = 1\n+++\ntext\n"},
        r"unknown front matter key\(s\) \['mood'\]",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_halts_with_file_and_fix(tmp_path, base, case):
    from aisac_core.projects import BootstrapError, bootstrap

    manifest, files, pattern = BAD[case]
    if case == "bad_placeholder":
        pytest.importorskip("aisac_core.roles.prompts")
    p = write_project(
        tmp_path / "proj", manifest, {"ext/tools.py": TOOLS, "ext/prompts/planner.md": "Hint.\n", **files}
    )
    with pytest.raises(BootstrapError) as ei:
        bootstrap(p, base)
    msg = str(ei.value)
    assert re.search(pattern, msg), msg
    assert "\n" not in msg.strip() or case == "toml_syntax"
    store = base.data_dir / "projects" / "test-proj"
    assert not (store / "prompt_overlay").exists()  # nothing half-initialised: no composed prompts to serve
    if case not in ("unknown_key", "nested_unknown_key", "toml_syntax", "bad_value"):  # manifest loaded: traced
        ev = events(store)
        assert ev[-1]["status"] == "tool_error" and ev[-1]["error"] == msg
        assert "store" not in [e["tool"] for e in ev]


def test_serve_project_halts_and_keeps_the_other_context(tmp_path, base):
    from aisac_core.context import AppContext
    from aisac_core.projects import BootstrapError
    from aisac_servers.adapters.project import serve_project

    before = AppContext(base)
    try:
        p = write_project(tmp_path / "proj", GOOD, {"ext/tools.py": "def x(:\n", "ext/prompts/planner.md": "H\n"})
        with pytest.raises(BootstrapError):
            serve_project(p, base)
        assert before.project is None and before.settings.data_dir == base.data_dir and not before._closed
    finally:
        before.close()


def test_missing_manifest_names_init(tmp_path):
    from aisac_core.projects import BootstrapError, load_manifest

    with pytest.raises(BootstrapError, match=r"no project manifest there\. Create the project with `aisac init"):
        load_manifest(tmp_path)


def test_tool_with_unsupported_signature_is_refused(tmp_path, base):
    from aisac_core.projects import BootstrapError, bootstrap

    p = write_project(
        tmp_path / "proj", GOOD, {"ext/tools.py": 'def f(*args):\n    """Doc."""\n', "ext/prompts/planner.md": "H\n"}
    )
    with pytest.raises(BootstrapError, match=r"function 'f' cannot become an MCP tool"):
        bootstrap(p, base, open_store=False)


def run_cli(args: list[str], store: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_DATA_DIR=str(store))
    return subprocess.run([AISAC, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", ["missing_path", "unknown_key", "syntax_error", "duplicate_tool", "unknown_role"])
def test_cli_serve_project_bad_input_one_line(tmp_path, case):
    manifest, files, pattern = BAD[case]
    p = write_project(
        tmp_path / "proj", manifest, {"ext/tools.py": TOOLS, "ext/prompts/planner.md": "Hint.\n", **files}
    )
    out = run_cli(["serve", "--project", str(p)], tmp_path / "store")
    assert out.returncode == 1, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.stderr and re.search(pattern, lines[0]), lines
    assert out.stdout == ""


def test_json_schema_is_published_in_docs():
    from aisac_core.projects import manifest_json_schema

    doc = (REPO / "docs" / "projects.md").read_text()
    m = re.search(r"<!-- schema:begin -->\s*```json\n(.*?)```\s*<!-- schema:end -->", doc, re.S)
    assert m, "docs/projects.md lacks the schema block"
    assert json.loads(m.group(1)) == manifest_json_schema(), (
        "docs/projects.md schema is stale: run python -m aisac_core.projects schema"
    )


def test_json_schema_accepts_the_templates_and_rejects_unknown_keys():
    import tomllib

    import jsonschema

    from aisac_core.projects import list_templates, manifest_json_schema, templates_dir

    schema = manifest_json_schema()
    assert list_templates() == ["general", "materials", "process_safety"]
    for t in list_templates():
        jsonschema.validate(tomllib.loads((templates_dir() / t / "aisac.toml").read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"project": {"name": "x", "colour": "blue"}}, schema)


GRAPH = GOOD.replace(
    'prompts_dir = "ext/prompts"', 'prompts_dir = "ext/prompts"\ngraph = true\ngraph_module = "ext/graph.py"'
)


@pytest.mark.parametrize(
    "graph_src,pattern,needs_roles",
    [
        ("def other(g):\n    return g\n", r"ext/graph\.py: the graph module has no function augment\(graph\)", False),
        ("def augment(g, h):\n    return g\n", r"augment must take exactly one argument", False),
        (
            "def augment(g):\n    del g['nodes']['planner']\n    return g\n",
            r"ext/graph\.py: augment\(graph\) failed: RolesError: .*core node 'planner' is missing",
            True,
        ),
        (
            "def augment(g):\n    g['nodes']['x'] = {'kind': 'tool', 'tool': 'project_nope'}\n"
            "    g['edges'].append({'from': 'planner', 'to': 'x'})\n    return g\n",
            r"graph node 'x' calls 'project_nope', which is not a project tool \(the project has project_add\)",
            True,
        ),
    ],
)
def test_bad_graph_augmentation_halts(tmp_path, base, graph_src, pattern, needs_roles):
    from aisac_core.projects import BootstrapError, bootstrap

    if needs_roles:
        pytest.importorskip("aisac_core.roles.graph")
    p = write_project(
        tmp_path / "proj", GRAPH, {"ext/tools.py": TOOLS, "ext/prompts/planner.md": "H\n", "ext/graph.py": graph_src}
    )
    with pytest.raises(BootstrapError, match=pattern):
        bootstrap(p, base, open_store=False)


def test_graph_augmentation_is_installed_and_removed(tmp_path, base):
    pytest.importorskip("aisac_core.roles.graph")
    from aisac_core.context import AppContext
    from aisac_core.projects import bootstrap

    src = (
        "def augment(g):\n    g['nodes']['extra'] = {'kind': 'tool', 'tool': 'project_add', 'arguments': {'a': 1, "
        "'b': 2}}\n    g['edges'].append({'from': 'evaluator', 'to': 'extra'})\n    return g\n"
    )
    p = write_project(
        tmp_path / "proj", GRAPH, {"ext/tools.py": TOOLS, "ext/prompts/planner.md": "H\n", "ext/graph.py": src}
    )
    dry = bootstrap(p, base, open_store=False)
    assert "extra" not in AppContext(dry.settings).roles.active_graph()["nodes"]  # a dry run installs nothing
    b = bootstrap(p, base)
    app = AppContext(b.settings, project=b)
    try:
        assert "extra" in app.roles.active_graph()["nodes"] and b.steps[4].result["added_nodes"] == ["extra"]
        assert "extra" not in AppContext(b.settings).roles.active_graph()["nodes"]  # only where the project is served
    finally:
        app.close()


def test_project_tools_colliding_with_suite_tools_are_refused(tmp_path, base):
    from aisac_core.projects import BootstrapError
    from aisac_servers.adapters.project import mount_project, serve_project

    suite, app = serve_project(good_project(tmp_path), base)  # the project's tools are mounted here
    b = app.project
    try:
        with pytest.raises(
            BootstrapError,
            match=r"project tool\(s\) \['project_add'\] collide with tools the suite "
            r"already has; rename",
        ):
            mount_project(suite, app)
        assert [s.name for s in b.steps].count("mount") == 2 and b.steps[-1].status == "tool_error"
    finally:
        app.close()


def test_cli_init_errors_and_success(tmp_path):
    out = run_cli(["init", str(tmp_path / "x"), "--template", "nope"], tmp_path / "store")
    assert (
        out.returncode == 1
        and out.stderr.strip() == "error: unknown template 'nope'; available: general, materials, process_safety"
    )
    out = run_cli(["init", str(tmp_path / "My Lab"), "--name", 'Lab "A"'], tmp_path / "store")
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("created project 'Lab \"A\"' (id my-lab) in ") and len(out.stderr.splitlines()) == 1
    from aisac_core.projects import load_manifest

    p = load_manifest(tmp_path / "My Lab")
    assert p.id == "my-lab" and p.manifest.project.name == 'Lab "A"' and p.manifest.extensions.tools
