"""Installed plugins: a package's entry point in the group ``aisac`` reaches a plain ``aisac serve`` (no project), a
broken one is reported by name and never stops the built-in servers, and the built-in table loaders and a plugin's
run through the same dispatch (:func:`aisac_core.data.readers.read_table`).

The packages are installed the way pip leaves them: a module plus a ``<name>-<version>.dist-info`` folder with
``METADATA`` and ``entry_points.txt``, in a folder on ``sys.path`` / ``PYTHONPATH``.
"""

from __future__ import annotations

import logging
import os
import sys
import textwrap
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

AISAC = str(Path(sys.executable).parent / "aisac")

LAB_PLUGIN = '''
"""labplug: the lab's own index of reports (a literature source answering offline) and its .lab table files."""
from aisac_core.literature.paper import Paper
from aisac_core.plugins import hookimpl


class LabIndex:
    name = "labindex"
    max_results = 5

    async def search(self, fetcher, query, k, year_from=None, year_to=None):
        return [Paper(source="labindex", source_id="LAB-1", title=f"Lab report on {query}", year=2024,
                      doi="10.9999/lab.1")]


def read_lab(path):
    import pandas as pd

    rows = [line.split("=", 1) for line in path.read_text().splitlines() if "=" in line]
    return pd.DataFrame({"key": [k.strip() for k, _ in rows], "value": [float(v) for _, v in rows]})


@hookimpl
def aisac_register_literature_sources():
    return [LabIndex()]


@hookimpl
def aisac_register_table_loaders():
    return {".lab": read_lab}
'''

BROKEN_PLUGIN = """
import aisac_no_such_module_for_the_test  # noqa: F401  (the import fails: the package is broken)
"""

RAISING_PLUGIN = """
from aisac_core.plugins import hookimpl


@hookimpl
def aisac_register_literature_sources():
    raise RuntimeError("the lab's VPN is down")


@hookimpl
def aisac_register_table_loaders():
    return ["not", "a", "dict"]
"""


def install(site: Path, dist: str, module: str, source: str, entry: str = "") -> None:
    """Install ``module`` (its source) as the distribution ``dist`` 0.1 into ``site``, with the entry point
    ``<entry> = <module>`` in the group ``aisac``: what ``pip install`` leaves in site-packages."""
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[aisac]\n{entry or dist} = {module}\n")
    (info / "RECORD").write_text("")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site folder with three installed plugins: a working one, one whose import fails, one whose hooks fail."""
    site = tmp_path / "site"
    site.mkdir()
    install(site, "labplug", "aisac_test_labplug", LAB_PLUGIN, entry="lab")
    install(site, "brokenplug", "aisac_test_brokenplug", BROKEN_PLUGIN, entry="broken")
    install(site, "raisingplug", "aisac_test_raisingplug", RAISING_PLUGIN, entry="raising")
    return site


@pytest.fixture
def on_path(site: Path, monkeypatch: pytest.MonkeyPatch):
    """``site`` on ``sys.path`` for this test (its modules forgotten afterwards)."""
    monkeypatch.syspath_prepend(str(site))
    yield site
    for mod in ("aisac_test_labplug", "aisac_test_brokenplug", "aisac_test_raisingplug"):
        sys.modules.pop(mod, None)


@pytest.fixture
def base(tmp_path: Path):
    from aisac_core.settings import Settings

    data = tmp_path / "data"
    data.mkdir()
    (data / "assay.lab").write_text("ph = 7.4\ntemperature = 310.5\n")
    (data / "assay.csv").write_text("key,value\nph,7.4\ntemperature,310.5\n")
    return Settings(data_dir=tmp_path / "store", warm=False, roots=[data])


def test_installed_plugins_are_found_and_broken_ones_reported_by_name(on_path, base, caplog):
    from aisac_core.context import AppContext
    from aisac_core.literature.sources import literature_sources
    from aisac_core.plugins import failures_of, make_plugin_manager, table_loaders
    from aisac_servers.base.builtin import BUILTIN_SERVERS
    from aisac_servers.serving.suite import suite_servers

    with caplog.at_level(logging.WARNING, logger="aisac_core.plugins"):
        pm = make_plugin_manager()
        assert ".lab" in table_loaders(pm) and ".csv" in table_loaders(pm)
        assert "labindex" in literature_sources(type("App", (), {"plugins": pm})())
    assert sorted(pm.installed) == ["labplug:lab", "raisingplug:raising"]
    failures = {f.plugin: f.error for f in failures_of(pm)}
    broken = "brokenplug 0.1: entry point broken = aisac_test_brokenplug"
    assert "ModuleNotFoundError" in failures[broken] and "aisac_no_such_module_for_the_test" in failures[broken]
    raising = "raisingplug 0.1: entry point raising = aisac_test_raisingplug"
    assert failures[raising] == "aisac_register_literature_sources() raised RuntimeError: the lab's VPN is down"
    assert any(f.plugin == raising and "must return a dict" in f.error for f in failures_of(pm))
    logged = caplog.text
    assert f"aisac plugin {broken} skipped" in logged and f"aisac plugin {raising} skipped" in logged
    assert make_plugin_manager(entry_points=False).installed == {}

    app = AppContext(base)  # a plain serve: no project, the installed plugins in force
    try:
        assert list(suite_servers(app)) == list(BUILTIN_SERVERS)  # every built-in server still served
        assert "labindex" in literature_sources(app)
        assert app.frames.load("assay.lab")["frames"][0]["source"]["format"] == "plugin"
    finally:
        app.close()


def test_builtin_and_plugin_loaders_share_one_dispatch(on_path, base, monkeypatch):
    """Acceptance: a built-in loader (CSV) and a plugin's (.lab) go through the same code path, read_table."""
    from aisac_core.context import AppContext
    from aisac_core.data import frames, readers

    calls = []
    real = readers.read_table

    def spy(loader, path, **kw):
        calls.append((path.suffix, loader))
        return real(loader, path, **kw)

    monkeypatch.setattr(frames, "read_table", spy)
    app = AppContext(base)
    try:
        csv_res = app.frames.load("assay.csv")["frames"][0]
        lab_res = app.frames.load("assay.lab")["frames"][0]
    finally:
        app.close()
    assert [suffix for suffix, _ in calls] == [".csv", ".lab"]
    assert calls[0][1] is readers.BUILTIN_LOADERS["csv"]
    assert calls[1][1].__module__ == "aisac_test_labplug" and calls[1][1].__name__ == "read_lab"
    assert (csv_res["source"]["format"], lab_res["source"]["format"]) == ("csv", "plugin")
    assert csv_res["rows"] == lab_res["rows"] == 2 and csv_res["column_names"] == lab_res["column_names"]


def test_a_plugin_loader_with_a_bad_result_is_a_clear_error(tmp_path):
    from aisac_core.data.errors import DataError
    from aisac_core.data.readers import read_table

    f = tmp_path / "x.lab"
    f.write_text("a")

    def bad(path):
        return "not a frame"

    def raising(path):
        raise ValueError("line 1: no '='")

    with pytest.raises(DataError, match=r"loader registered for \.lab \(.*bad\) returned str, not a pandas DataFrame"):
        read_table(bad, f)
    with pytest.raises(DataError, match=r"loader for \.lab \(.*raising\) cannot read x\.lab: ValueError: line 1"):
        read_table(raising, f)
    with pytest.raises(DataError, match=r"header_rows applies to CSV, Excel and PDF tables only"):
        read_table(bad, f, header_rows=1)


@pytest.mark.anyio
async def test_installed_plugin_reaches_a_plain_aisac_serve(site, base):
    """Acceptance: a plugin installed as a package adds a literature source and a table loader to a plain
    ``aisac serve`` (a real stdio subprocess, no project); the broken plugins beside it stop nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(
        AISAC_DATA_DIR=str(base.data_dir),
        AISAC_ROOTS=str(base.rag.roots[0]),
        AISAC_WARM="0",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    transport = StdioTransport(command=AISAC, args=["serve", "--no-owner"], env=env, keep_alive=False)
    async with Client(transport) as c:
        names = {t.name for t in await c.list_tools()}
        assert {"rag_search", "memory_recall", "lit_search", "data_load", "roles_run", "trace_list_runs"} <= names
        found = (
            await c.call_tool("lit_search", {"query": "cathode ageing", "sources": ["labindex"]})
        ).structured_content
        assert found["sources"]["labindex"]["status"] == "ok" and found["count"] == 1
        assert found["papers"][0]["title"] == "Lab report on cathode ageing"
        loaded = (await c.call_tool("data_load", {"path": str(base.rag.roots[0] / "assay.lab")})).structured_content
        frame = loaded["frames"][0]
        assert frame["source"]["format"] == "plugin" and frame["rows"] == 2
        assert frame["column_names"] == ["key", "value"]
        csv = (await c.call_tool("data_load", {"path": str(base.rag.roots[0] / "assay.csv")})).structured_content
        assert csv["frames"][0]["source"]["format"] == "csv"


BAD_SERVERS_PLUGIN = """
from aisac_core.plugins import hookimpl


class Nameless:
    async def search(self, fetcher, query, k, year_from=None, year_to=None):
        return []


class FakeArxiv:
    name = "arXiv"  # taken by the built-in source

    async def search(self, fetcher, query, k, year_from=None, year_to=None):
        return []


@hookimpl
def aisac_register_servers():
    return [("rag", "aisac_test_badservers:nothing"),  # a built-in's namespace
            ("Bad_NS", "aisac_test_badservers:nothing"),  # not a namespace
            ("labtools", "aisac_test_badservers:no_such_server"),  # cannot be loaded
            "not a pair"]


@hookimpl
def aisac_register_literature_sources():
    return [Nameless(), FakeArxiv()]
"""


def test_an_installed_plugins_bad_servers_and_sources_are_skipped_by_name(tmp_path, monkeypatch, base):
    """Servers with a taken or bad namespace or one that cannot be loaded, and nameless or duplicate literature
    sources, from an installed package: each skipped with its reason under the plugin's name; the built-in servers
    and sources all serve. The same from a project's own extension would stop the start with a BootstrapError."""
    from aisac_core.context import AppContext
    from aisac_core.literature.sources import literature_sources
    from aisac_core.plugins import failures_of
    from aisac_servers.serving.suite import build

    site = tmp_path / "badsite"
    site.mkdir()
    install(site, "badservers", "aisac_test_badservers", BAD_SERVERS_PLUGIN, entry="bad")
    monkeypatch.syspath_prepend(str(site))
    app = AppContext(base)
    try:
        suite = build(app=app, lifespan=False)
        assert set(literature_sources(app)) >= {"arxiv", "pubmed", "crossref", "openalex"}
        assert literature_sources(app)["arxiv"].__class__.__name__ != "FakeArxiv"
        errors = [f.error for f in failures_of(app.plugins) if f.plugin.startswith("badservers 0.1")]
        assert any("namespace 'rag'" in e for e in errors), errors
        assert any("'Bad_NS'" in e for e in errors), errors
        assert any("no_such_server" in e and "cannot be loaded" in e for e in errors), errors
        assert any("'not a pair'" in e for e in errors), errors
        assert any("needs a name" in e for e in errors), errors
        assert any("two literature sources are named 'arxiv'" in e for e in errors), errors

        async def namespaces() -> set[str]:
            async with Client(suite) as c:
                return {t.name.split("_", 1)[0] for t in await c.list_tools()}

        import anyio

        served = anyio.run(namespaces)
        assert served >= {"rag", "memory", "lit", "data", "roles", "trace"} and "labtools" not in served
    finally:
        app.close()
        sys.modules.pop("aisac_test_badservers", None)
