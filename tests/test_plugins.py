"""The extension seam (pluggy hooks): the built-ins register through the hooks, and a project's own plugin module
adds a tool, a literature source, a table loader and a graph change without touching aisac's code."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

PLUGIN = '''
from aisac_core.literature.paper import Paper
from aisac_core.plugins import hookimpl


def shout(text: str) -> str:
    """The text in upper case."""
    return text.upper()


class LabIndex:
    """The lab's own index of reports: answers every query with one record."""

    name = "labindex"
    max_results = 5
    aliases = ("lab",)

    async def search(self, fetcher, query, k, year_from=None, year_to=None):
        return [Paper(source="labindex", source_id="LAB-1", title=f"Lab report on {query}", year=2024,
                      doi="10.9999/lab.1")]


def read_lab(path):
    import pandas as pd

    return pd.DataFrame({"line": path.read_text().splitlines()})


@hookimpl
def aisac_register_tools():
    return [shout]


@hookimpl
def aisac_register_literature_sources():
    return [LabIndex()]


@hookimpl
def aisac_register_table_loaders():
    return {".lab": read_lab}


@hookimpl
def aisac_augment_graph(graph):
    graph["nodes"]["shout"] = {"kind": "tool", "tool": "project_shout", "arguments": {"text": "{task}"}}
    graph["edges"].append({"from": "evaluator", "to": "shout"})
'''

MANIFEST = """
manifest_version = 1
[project]
name = "Plugin lab"
id = "plugin-lab"
[extensions]
plugins = ["ext/plugin.py"]
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def base(tmp_path: Path):  # noqa: ANN201
    from aisac_core.settings import Settings

    return Settings(data_dir=tmp_path / "store", warm=False)


def test_builtins_register_through_the_hooks(base):
    from aisac_core.context import AppContext
    from aisac_core.data.readers import builtin_table_loaders
    from aisac_core.literature.paper import SOURCES
    from aisac_core.literature.sources import literature_sources
    from aisac_core.plugins import make_plugin_manager, table_loaders
    from aisac_core.rag.formats import TABLE_FORMATS
    from aisac_servers.base.builtin import BUILTIN_SERVERS
    from aisac_servers.serving.suite import suite_servers

    assert tuple(literature_sources()) == SOURCES
    # the built-in formats' loaders come through the hook too: one per suffix of the one suffix table, and the
    # tables of a PDF (.pdf is a document type for the indexer, so it is not in TABLE_FORMATS)
    assert table_loaders(make_plugin_manager()) == builtin_table_loaders()
    assert set(builtin_table_loaders()) == set(TABLE_FORMATS) | {".pdf"}
    app = AppContext(base)
    try:
        assert list(suite_servers(app)) == list(BUILTIN_SERVERS)  # no project: no project server
        assert tuple(literature_sources(app)) == SOURCES
    finally:
        app.close()


@pytest.mark.anyio
async def test_project_plugin_adds_a_tool_and_a_literature_source(tmp_path, base):
    """Acceptance: a project's plugin module (in the project folder, not in aisac) adds a tool and a literature
    source through the hooks; the project's suite lists the tool, and lit_search asks the new source."""
    from aisac_core.context import AppContext
    from aisac_core.plugins import plugins_of, table_loaders
    from aisac_servers.adapters.project import serve_project

    proj = write(tmp_path / "proj", {"aisac.toml": MANIFEST, "ext/plugin.py": PLUGIN})
    suite, app = serve_project(proj, base)
    try:
        b = app.project
        assert b.tool_names == ["project_shout"]
        tools_step = next(s for s in b.steps if s.name == "tools")
        assert "labindex" in tools_step.result["literature_sources"]
        async with Client(suite) as c:
            names = {t.name for t in await c.list_tools()}
            assert {"project_shout", "lit_search", "rag_search"} <= names
            assert (await c.call_tool("project_shout", {"text": "ok"})).structured_content == {"result": "OK"}
            res = await c.call_tool("lit_search", {"query": "cathode ageing", "sources": ["labindex"]})
            found = res.structured_content
            assert found["sources"]["labindex"]["status"] == "ok" and found["count"] == 1
            assert (
                found["papers"][0]["source"] == "labindex"
                and found["papers"][0]["title"] == "Lab report on cathode ageing"
            )
            alias = (await c.call_tool("lit_search", {"query": "x", "sources": "lab"})).structured_content
            assert list(alias["sources"]) == ["labindex"]
            with pytest.raises(ToolError, match=r"unknown source 'nope': choose from arxiv, .*, labindex"):
                await c.call_tool("lit_search", {"query": "x", "sources": ["nope"]})
        assert ".lab" in table_loaders(plugins_of(app))
        assert "shout" in app.roles.active_graph()["nodes"]
        other = AppContext(base)  # another context in the same process: built-ins only
        try:
            assert "shout" not in other.roles.active_graph()["nodes"] and ".lab" not in table_loaders(plugins_of(other))
        finally:
            other.close()
    finally:
        app.close()


def test_plugins_of_one_project_do_not_reach_another(tmp_path, base):
    from aisac_core.literature.sources import literature_sources
    from aisac_core.projects import bootstrap

    a = write(tmp_path / "a", {"aisac.toml": MANIFEST, "ext/plugin.py": PLUGIN})
    b_dir = write(
        tmp_path / "b",
        {"aisac.toml": MANIFEST.replace("plugin-lab", "plain").replace('plugins = ["ext/plugin.py"]', "")},
    )
    pa, pb = bootstrap(a, base, open_store=False), bootstrap(b_dir, base, open_store=False)
    assert "labindex" in literature_sources(type("App", (), {"project": pa})())
    assert "labindex" not in literature_sources(type("App", (), {"project": pb})())


@pytest.mark.parametrize(
    "src,pattern",
    [
        (
            "from aisac_core.plugins import hookimpl\n\n@hookimpl\ndef aisac_register_tool():\n    return []\n",
            r"ext/plugin\.py: the extensions\.plugins\[0\] module's hook implementation is not valid: .*aisac_register_tool",
        ),
        ("def helper():\n    pass\n", r"ext/plugin\.py: the plugin module defines no @hookimpl function"),
        (
            "from aisac_core.plugins import hookimpl\n\n@hookimpl\ndef aisac_register_tools():\n    return [print]\n",
            r"aisac_register_tools\(\) returned <built-in function print>|function 'print' has no docstring|"
            r"cannot become an MCP tool",
        ),
        (
            "from aisac_core.plugins import hookimpl\n\nclass S:\n    pass\n\n@hookimpl\n"
            "def aisac_register_literature_sources():\n    return [S()]\n",
            r"needs a name \(str\) and an async search",
        ),
    ],
)
def test_bad_plugin_halts_the_bootstrap(tmp_path, base, src, pattern):
    from aisac_core.projects import BootstrapError, bootstrap

    proj = write(tmp_path / "proj", {"aisac.toml": MANIFEST, "ext/plugin.py": src})
    with pytest.raises(BootstrapError, match=pattern):
        bootstrap(proj, base, open_store=False)


def test_hook_named_function_without_marker_is_refused(tmp_path, base):
    from aisac_core.projects import BootstrapError, bootstrap

    manifest = MANIFEST.replace('plugins = ["ext/plugin.py"]', 'tools = true\ntools_modules = ["ext/tools.py"]')
    proj = write(
        tmp_path / "proj",
        {"aisac.toml": manifest, "ext/tools.py": 'def aisac_register_tools():\n    """Doc."""\n    return []\n'},
    )
    with pytest.raises(
        BootstrapError,
        match=r"function 'aisac_register_tools' is named like a hook but is not "
        r"marked: decorate it with @hookimpl",
    ):
        bootstrap(proj, base, open_store=False)
