"""Literature downloads: written only into the root, never through a planted link; bounded in time (issue 30).

Attacks found by the red team, replayed against a local HTTP server standing in for arXiv (``literature_replay``;
the egress guard lets only that loopback address through, ``lit_allow_networks``) through the suite's MCP client:
a sidecar symlink planted in the root made ``lit_import`` overwrite a file outside the roots, and a server dripping
one byte every 3 s held ``lit_import`` for 81 s and then failed with ``internal error (ReadTimeout: )``.
"""

from __future__ import annotations

import json
import os
import stat
import time

import anyio
import pytest
from conftest import make_settings
from fastmcp import Client
from fastmcp.exceptions import ToolError
from fixtures_gen import make_pdf
from literature_replay import ReplayServer

pytestmark = pytest.mark.anyio

VICTIM = "the user's own file, which must stay as it is\n"


@pytest.fixture
def pdf_bytes(tmp_path_factory) -> bytes:
    return make_pdf(tmp_path_factory.mktemp("pdf") / "paper.pdf").read_bytes()


@pytest.fixture
def replay(pdf_bytes):
    with ReplayServer(pdf=pdf_bytes) as srv:
        yield srv


def _core(tmp_path, models_dir, shared_embedder, replay, **kw):  # noqa: ANN001, ANN202
    from aisac_core.context import AppContext

    papers = tmp_path / "papers"
    papers.mkdir(exist_ok=True)
    s = make_settings(
        tmp_path / "store",
        models_dir,
        roots=[papers],
        warm=False,
        lit_backoff_s=0.01,
        lit_arxiv_interval_s=0.05,
        **{**replay.settings_kwargs(), **kw},
    )
    return AppContext(s, embedder=shared_embedder)


def _suite(core):  # noqa: ANN001, ANN202
    from aisac_servers.serving.suite import build

    return build(["rag", "lit"], app=core, lifespan=False)


@pytest.mark.parametrize("planted", ["sidecar", "pdf", "both"])
async def test_planted_symlinks_in_the_root_are_replaced_not_followed(
    planted, tmp_path, models_dir, shared_embedder, replay, pdf_bytes
):
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = {"sidecar": outside / "victim.json", "pdf": outside / "victim.pdf"}
    for v in victims.values():
        v.write_text(VICTIM)
    core = _core(tmp_path, models_dir, shared_embedder, replay)
    root = core.settings.rag.roots[0]
    names = {"sidecar": "arxiv-2101.00001v2.provenance.json", "pdf": "arxiv-2101.00001v2.pdf"}
    for what in ("sidecar", "pdf") if planted == "both" else (planted,):
        (root / names[what]).symlink_to(victims[what])
    try:
        async with Client(_suite(core)) as c:
            res = (await c.call_tool("lit_import", {"identifier": "2101.00001", "root": "papers"})).structured_content
        assert res["status"] == "imported"
        for v in victims.values():
            assert v.read_text() == VICTIM  # nothing outside the root was written
        for name in names.values():
            p = root / name
            assert not p.is_symlink() and stat.S_IMODE(p.stat().st_mode) == 0o600
        assert (root / names["pdf"]).read_bytes() == pdf_bytes
        assert json.loads((root / names["sidecar"]).read_text())["sha256"] == res["sha256"]
        assert not [p for p in root.iterdir() if p.name.endswith(".part")]
    finally:
        core.close()


async def test_a_pdf_symlink_with_the_same_bytes_is_not_taken_as_already_present(
    tmp_path, models_dir, shared_embedder, replay, pdf_bytes
):
    """A link to an outside copy of the very PDF would make the import 'already present' and index the outside
    file: it is replaced by a real file in the root instead."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "copy.pdf").write_bytes(pdf_bytes)
    core = _core(tmp_path, models_dir, shared_embedder, replay)
    root = core.settings.rag.roots[0]
    (root / "arxiv-2101.00001v2.pdf").symlink_to(outside / "copy.pdf")
    try:
        async with Client(_suite(core)) as c:
            res = (await c.call_tool("lit_import", {"identifier": "2101.00001"})).structured_content
        assert res["status"] == "imported" and not (root / "arxiv-2101.00001v2.pdf").is_symlink()
    finally:
        core.close()


async def test_the_write_helper_refuses_a_folder_that_is_a_symlink(tmp_path):
    from aisac_core.literature.service import write_new

    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    with pytest.raises(OSError):
        write_new(tmp_path / "link", "x.json", b"{}")
    assert list(real.iterdir()) == []
    assert write_new(real, "x.json", b"{}").read_bytes() == b"{}"


async def test_a_dripping_pdf_download_ends_at_the_overall_deadline(
    tmp_path, models_dir, shared_embedder, replay, pdf_bytes
):
    """One byte every 0.2 s: each read arrives well inside the 20 s read time-out, so only the overall deadline
    (here 2 s) ends the download; a clear error, nothing saved, the server answers the next call."""
    replay.script("/pdf/", [(200, {"Content-Type": "application/pdf", "X-Test-Drip": "0.2"}, pdf_bytes)])
    core = _core(tmp_path, models_dir, shared_embedder, replay, lit_download_deadline_s=2.0)
    root = core.settings.rag.roots[0]
    try:
        async with Client(_suite(core)) as c:
            t0 = time.monotonic()
            with anyio.fail_after(30):
                with pytest.raises(ToolError) as err:
                    await c.call_tool("lit_import", {"identifier": "2101.00001"})
            took = time.monotonic() - t0
            msg = str(err.value)
            assert took < 15 and "did not finish within 2 s" in msg and "AISAC_LIT_DOWNLOAD_DEADLINE_S" in msg
            assert "internal error" not in msg and "nothing was saved" in msg.lower()
            assert list(root.iterdir()) == []
            with anyio.fail_after(20):
                await c.call_tool("rag_list_documents", {})
    finally:
        core.close()


async def test_a_dripping_api_answer_ends_at_the_request_deadline(tmp_path, models_dir, shared_embedder, replay):
    """The same drip on an API answer (a paper lookup): the request deadline ends it with a status ``timeout``."""
    body = json.dumps({"status": "ok", "message": {"DOI": "10.5555/slow.1", "title": ["Slow"]}}).encode()
    replay.script("/crossref/works/", [(200, {"Content-Type": "application/json", "X-Test-Drip": "0.2"}, body)])
    core = _core(
        tmp_path, models_dir, shared_embedder, replay, lit_request_deadline_s=1.5, lit_cache_ttl_s=0, lit_retries=1
    )
    try:
        async with Client(_suite(core)) as c:
            t0 = time.monotonic()
            with anyio.fail_after(30):
                res = (await c.call_tool("lit_get", {"identifier": "10.5555/slow.1"})).structured_content
            assert time.monotonic() - t0 < 15
            st = res["sources"]["crossref"]
            assert st["status"] == "timeout" and "did not answer within 1.5 s" in st["error"], st
    finally:
        core.close()


def test_deadlines_are_settings_with_their_environment_names(monkeypatch):
    from aisac_core.settings import Settings

    monkeypatch.setenv("AISAC_LIT_DOWNLOAD_DEADLINE_S", "42")
    monkeypatch.setenv("AISAC_LIT_REQUEST_DEADLINE_S", "7")
    s = Settings()
    assert s.lit.download_deadline_s == 42 and s.lit.request_deadline_s == 7
    assert os.environ["AISAC_LIT_DOWNLOAD_DEADLINE_S"] == "42"
