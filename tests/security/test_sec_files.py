"""Only regular files are read: a FIFO, a socket or a device never blocks a tool (issue 30).

Attacks found by the red team, replayed through a real in-process MCP client on the real suite (real FIFOs and
sockets on disk, a real SQLite store and vector store): a FIFO given to ``rag_index`` froze every tool of the store
(even ``rag_job_cancel``), and an indexed file swapped for a FIFO plus 45 ``rag_verify_anchor`` calls stopped the
server answering any host (each call blocked a worker thread on ``open``). Every test bounds the attack with a
deadline, checks that the server still answers and that the skip reason or the error says what the path is.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import anyio
import pytest
from conftest import make_settings
from fastmcp import Client

pytestmark = pytest.mark.anyio

NOTE = "# Field notes\n\nThe kiln reached 1,250 degrees on the second firing.\n"


def _app(tmp_path: Path, models_dir: Path, shared_embedder, roots: list[Path]):  # noqa: ANN001, ANN202
    from aisac_core.context import AppContext

    return AppContext(make_settings(tmp_path / "store", models_dir, roots=roots, warm=False), embedder=shared_embedder)


def _suite(core):  # noqa: ANN001, ANN202
    from aisac_servers.serving.suite import build

    return build(app=core, lifespan=False)


async def _alive(c: Client) -> None:
    with anyio.fail_after(20):
        r = await c.call_tool("memory_start_session", {"title": "still serving"})
    assert r.structured_content["session_id"].startswith("ses-")


async def test_a_fifo_given_to_rag_index_is_skipped_and_blocks_nothing(tmp_path, models_dir, shared_embedder):
    root = tmp_path / "root"
    root.mkdir()
    fifo = root / "trap.md"
    os.mkfifo(fifo)
    core = _app(tmp_path, models_dir, shared_embedder, [root])
    try:
        async with Client(_suite(core)) as c:
            with anyio.fail_after(60):  # before the fix: the job hung in open() with the store's write lock held
                job = (await c.call_tool("rag_index", {"path": str(fifo), "wait": True})).structured_content
            assert job["status"] == "done", job
            assert [Path(s["path"]).name for s in job["skipped"]] == ["trap.md"]
            assert "FIFO" in job["skipped"][0]["reason"] and "not a regular file" in job["skipped"][0]["reason"]
            assert job["counters"]["files_read"] == 0
            # a job started without waiting: rag_job_cancel and the other tools answer at once
            with anyio.fail_after(30):
                started = (await c.call_tool("rag_index", {"path": str(fifo)})).structured_content
                r = await c.call_tool("rag_job_cancel", {"job_id": started["job_id"]}, raise_on_error=False)
                assert r.content  # an answer (cancelled, or already done), not a hang
                await c.call_tool("rag_job_status", {})
            await _alive(c)
    finally:
        core.close()


async def test_fifos_sockets_and_links_to_them_in_a_folder_are_skipped_with_the_reason(
    tmp_path, models_dir, shared_embedder
):
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "note.md").write_text(NOTE)
    os.mkfifo(root / "docs" / "pipe.md")
    os.mkfifo(root / "docs" / "table.csv")  # a catalogued type: never opened either
    os.mkfifo(root / "hidden_pipe")
    (root / "docs" / "link.md").symlink_to(root / "hidden_pipe")  # a link (inside the root) to a FIFO
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(root / "docs" / "sock.md"))
    core = _app(tmp_path, models_dir, shared_embedder, [root])
    try:
        async with Client(_suite(core)) as c:
            with anyio.fail_after(120):
                job = (await c.call_tool("rag_index", {"path": str(root / "docs"), "wait": True})).structured_content
            assert job["status"] == "done" and job["counters"]["files_indexed"] == 1, job
            reasons = {Path(s["path"]).name: s["reason"] for s in job["skipped"]}
            assert set(reasons) == {"pipe.md", "table.csv", "link.md", "sock.md"}, reasons
            assert "FIFO" in reasons["pipe.md"] and "FIFO" in reasons["link.md"] and "socket" in reasons["sock.md"]
            assert job["failures"] == []
            await _alive(c)
    finally:
        sock.close()
        core.close()


async def test_an_indexed_file_swapped_for_a_fifo_keeps_verify_anchor_and_the_server_answering(
    tmp_path, models_dir, shared_embedder
):
    root = tmp_path / "root"
    root.mkdir()
    note = root / "note.md"
    note.write_text(NOTE)
    core = _app(tmp_path, models_dir, shared_embedder, [root])
    try:
        async with Client(_suite(core)) as c:
            job = (await c.call_tool("rag_index", {"path": str(root), "wait": True})).structured_content
            assert job["counters"]["files_indexed"] == 1
            hit = (
                await c.call_tool("rag_search", {"query": "kiln firing", "k": 1, "detail": "full"})
            ).structured_content
            anchor = hit["hits"][0]["anchor"]
            note.unlink()
            os.mkfifo(note)
            results: list = []

            async def verify() -> None:
                results.append((await c.call_tool("rag_verify_anchor", {"anchor": anchor})).structured_content)

            t0 = time.monotonic()
            with anyio.fail_after(60):  # before the fix: 45 calls exhausted the worker threads for good
                async with anyio.create_task_group() as tg:
                    for _ in range(60):
                        tg.start_soon(verify)
            assert len(results) == 60 and time.monotonic() - t0 < 60
            assert all(r["status"] == "missing" and "FIFO" in (r["detail"] or "") for r in results), results[0]
            await _alive(c)
            # the next index run skips the FIFO and keeps the document (it is not pruned for an unreadable path)
            with anyio.fail_after(60):
                job = (await c.call_tool("rag_index", {"path": str(root), "wait": True})).structured_content
            assert [Path(s["path"]).name for s in job["skipped"]] == ["note.md"]
    finally:
        core.close()


def test_open_regular_refuses_fifo_device_folder_and_socket_at_once(tmp_path):
    from aisac_core.hashing import NotRegularFileError, open_regular, sha256_file

    os.mkfifo(tmp_path / "p")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tmp_path / "s"))
    try:
        t0 = time.monotonic()
        for path, word in ((tmp_path / "p", "FIFO"), ("/dev/zero", "character device"), (tmp_path, "folder")):
            with pytest.raises(NotRegularFileError, match=word):
                sha256_file(path)
        with pytest.raises(OSError):  # a socket cannot be opened at all (ENXIO)
            open_regular(tmp_path / "s")
        assert time.monotonic() - t0 < 5
        (tmp_path / "f").write_bytes(b"abc")
        with open_regular(tmp_path / "f") as f:
            assert f.read() == b"abc"
    finally:
        sock.close()


def test_plan_skips_a_device_given_as_the_path():
    from aisac_core.rag.planning import plan_paths

    plan = plan_paths([Path("/dev/zero")])
    assert plan.documents == [] and plan.catalog == []
    assert [(str(p), "character device" in r) for p, r in plan.skipped] == [("/dev/zero", True)]
