"""Static checks of the whole tree, run with the tests (so by ``make test`` and CI): ruff's lint rules and its
formatter (``[tool.ruff]`` in pyproject.toml), mypy (``[tool.mypy]``: strict on ``aisac_core``, the normal checks on
``servers/``), and few, explained ``# type: ignore`` comments."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: at most this many ``# type: ignore`` comments in aisac_core and servers/, each with its error code and a reason
MAX_TYPE_IGNORES = 15
_IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<code>\[[^\]]+\])?(?P<rest>.*)$")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    tool = BIN / args[0]
    assert tool.exists(), f"{tool} is missing: install the dev extra (make install)"
    return subprocess.run([str(tool), *args[1:]], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_lint() -> None:
    res = _run("ruff", "check", "--no-cache", ".")
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]


def test_ruff_format() -> None:
    res = _run("ruff", "format", "--no-cache", "--check", ".")
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]


def test_mypy() -> None:
    res = _run("mypy")
    assert res.returncode == 0, res.stdout[-8000:] + res.stderr[-2000:]


def test_type_ignores_are_few_and_explained() -> None:
    """Each ``# type: ignore`` names its error code and says why on the same line; fewer than 15 in all."""
    found: list[tuple[str, str]] = []
    for root in ("aisac_core", "servers"):
        for p in sorted((REPO / root).rglob("*.py")):
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                m = _IGNORE.search(line)
                if m:
                    found.append((f"{p.relative_to(REPO)}:{i}", line.strip()))
                    assert m.group("code"), f"{p.relative_to(REPO)}:{i}: give the error code: {line.strip()}"
                    assert m.group("rest").strip().startswith("#") and len(m.group("rest").strip()) > 5, (
                        f"{p.relative_to(REPO)}:{i}: say why on the same line: {line.strip()}"
                    )
    assert len(found) < MAX_TYPE_IGNORES, found


def test_the_type_ignore_check_can_fail(tmp_path: Path) -> None:
    """The pattern sees a bare ignore and one without a reason."""
    assert _IGNORE.search("x = f()  # type: ignore")
    bare = _IGNORE.search("x = f()  # type: ignore[arg-type]")
    assert bare is not None and not bare.group("rest").strip()
    explained = _IGNORE.search("x = f()  # type: ignore[arg-type]  # docling has no stubs")
    assert explained is not None and explained.group("rest").strip().startswith("#")
