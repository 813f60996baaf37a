"""The architecture's rules, checked on the source tree: one MCP boundary (the core imports neither ``aisac_servers``
nor an MCP library), layered domains without package cycles (import-linter contracts in ``pyproject.toml``), small
modules, no wiring globals, no internal work-item references in what users read, and a wheel that ships every
package."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE, SERVERS = REPO / "aisac_core", REPO / "servers"
MAX_LINES = 600
#: a module may exceed MAX_LINES only with this note saying why
SIZE_NOTE = "longer than 600 lines because"

# Runs import-linter from ``root`` (it puts the working directory first on sys.path). For a copy of the tree the
# editable install's finder, which would map the package names back to this checkout, is taken out first.
_LINT = """
import sys
if sys.argv[2] == "copy":
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
from importlinter.cli import lint_imports
sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True))
"""


def _lint(root: Path, *, copy: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _LINT, str(root / "pyproject.toml"), "copy" if copy else "checkout"],
                          cwd=root, capture_output=True, text=True, timeout=300)


def _py_files(*roots: Path) -> list[Path]:
    return sorted(p for r in roots for p in r.rglob("*.py") if "__pycache__" not in p.parts)


def test_import_contracts_hold() -> None:
    """core -> no aisac_servers / fastmcp / mcp / mcp_types; layers; no cycles between core packages."""
    pytest.importorskip("importlinter")
    res = _lint(REPO)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert " 0 broken" in res.stdout.split("Contracts:")[-1]


@pytest.mark.parametrize("violation", ["import fastmcp\n", "from aisac_servers import common\n"])
def test_import_contract_fails_when_core_imports_the_mcp_layer(tmp_path: Path, violation: str) -> None:
    """The same contracts, run on a copy of the tree where one core module imports fastmcp or the servers, break."""
    pytest.importorskip("importlinter")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(CORE, tmp_path / "aisac_core", ignore=ignore)
    shutil.copytree(SERVERS, tmp_path / "aisac_servers", ignore=ignore)
    (tmp_path / "aisac_core" / "hashing.py").write_text(
        (CORE / "hashing.py").read_text(encoding="utf-8") + "\n" + violation, encoding="utf-8")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    res = _lint(tmp_path, copy=True)
    assert res.returncode != 0
    assert "aisac_core imports neither the MCP layer" in res.stdout and "BROKEN" in res.stdout
    assert "aisac_core.hashing" in res.stdout


def test_no_module_over_600_lines_without_a_note() -> None:
    too_long = []
    for p in _py_files(CORE, SERVERS):
        text = p.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES and SIZE_NOTE not in text:
            too_long.append(f"{p.relative_to(REPO)}: {text.count(chr(10))} lines")
    assert not too_long, too_long


def test_no_wiring_globals() -> None:
    """One application context: no process-wide core, active project or graph hook, nothing stashed in __dict__."""
    pat = re.compile(r"\b(get_core|set_core|set_augment|_ACTIVE|active_project)\b|__dict__\[")
    hits = [f"{p.relative_to(REPO)}:{i}: {line.strip()}" for p in _py_files(CORE, SERVERS)
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pat.search(line)]
    assert not hits, hits


def test_no_internal_work_item_references() -> None:
    """Code, help texts, tool descriptions, prompts and templates say what a thing is, not which work item or design
    file it came from."""
    pat = re.compile(r"\bissues? \d+\b|\(issue\b|DESIGN\.md")
    files = [p for r in (CORE, SERVERS, REPO / "project_templates") for p in r.rglob("*")
             if p.is_file() and p.suffix in {".py", ".md", ".json", ".toml", ".txt", ".html", ".js"}
             and "__pycache__" not in p.parts]
    hits = [f"{p.relative_to(REPO)}:{i}: {line.strip()[:120]}" for p in files
            for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if pat.search(line)]
    assert not hits, hits


def test_wheel_lists_every_package() -> None:
    """Every folder with an ``__init__.py`` under aisac_core ships (setuptools' explicit package list)."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(cfg["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in CORE.rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found <= listed, sorted(found - listed)
    assert cfg["package-dir"]["aisac_servers"] == "servers"
    assert not (REPO / "servers" / "__init__.py").read_text().count("import servers")
