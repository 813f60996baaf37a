"""The store is private to its user: another local user must not read memory turns, documents, frames, session
folders or the owner's token. Checked on a store filled through a real MCP client (every server writing), whatever
umask the user had."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import anyio
import pytest
from conftest import make_settings
from fastmcp import Client

from aisac_core.context import AppContext
from aisac_core.store.files import permission_warnings
from aisac_servers.serving.suite import build


def _modes(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            if not p.is_symlink():
                out[str(p.relative_to(root))] = stat.S_IMODE(p.lstat().st_mode)
    return out


@pytest.fixture
def filled(tmp_path: Path, models_dir: Path, shared_embedder):  # noqa: ANN001, ANN201
    """A store written by memory, rag, data (frames and a code session) and trace, under a permissive umask."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.md").write_text("# Results\n\nThe catalyst raised the yield to 87 percent.\n")
    (docs / "t.csv").write_text("a,b\n1,2\n3,4\n")
    settings = make_settings(tmp_path / "store", models_dir, roots=[docs])  # (links the test model folder in)
    for p in [settings.data_dir, *settings.data_dir.rglob("*")]:
        os.chmod(p, 0o700 if p.is_dir() else 0o600)  # as aisac itself would have created them
    old = os.umask(0o000)  # the user's umask is no excuse
    try:
        core = AppContext(settings, embedder=shared_embedder)

        async def fill() -> None:
            async with Client(build(["memory", "rag", "data", "trace"], app=core)) as c:
                sid = (await c.call_tool("memory_start_session", {"title": "private"})).structured_content["session_id"]
                await c.call_tool("memory_add_turn", {"session_id": sid, "role": "user", "content": "a secret turn"})
                await c.call_tool("rag_index", {"path": str(docs), "wait": True})
                await c.call_tool("data_load", {"path": str(docs / "t.csv"), "name": "t"})
                await c.call_tool("data_code_run", {"session": "box", "code": "open('x.txt', 'w').write('1')"})
                await c.call_tool("data_to_session", {"name": "t", "session": "box"})

        anyio.run(fill)
        yield core
        core.close()
    finally:
        os.umask(old)


def test_every_store_file_is_private(filled: AppContext) -> None:
    data = filled.settings.data_dir
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    modes = _modes(data)
    assert any(k.endswith(".db") for k in modes) and any("sessions" in k for k in modes)
    wide = {k: oct(m) for k, m in modes.items() if m & 0o077}
    assert not wide, wide


def test_status_warns_when_a_user_widens_the_store(filled: AppContext) -> None:
    data = filled.settings.data_dir
    assert filled.rag.status()["permission_warnings"] == []
    os.chmod(data, 0o755)
    warnings = filled.rag.status()["permission_warnings"]
    assert warnings and "chmod -R go-rwx" in warnings[0] and "0755" in warnings[0]
    os.chmod(data, 0o700)
    db = next(data.glob("*.db"))
    os.chmod(db, 0o644)
    assert any(db.name in w for w in permission_warnings(data))


def test_opening_a_store_warns_once_on_stderr(
    tmp_path: Path, models_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "wide"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    core = AppContext(make_settings(data, models_dir))
    try:
        with caplog.at_level("WARNING", logger="aisac.store"):
            _ = core.engine
        assert any("go-rwx" in r.getMessage() for r in caplog.records)
        assert core.permission_warnings
    finally:
        core.close()
