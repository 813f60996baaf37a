"""HTTP transport security and path confinement: real `aisac serve --transport http`
processes, real HTTP requests, the real suite in memory for the traced path refusals."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import make_settings, stop_process
from fastmcp import Client
from sqlmodel import Session, select

from aisac_core.context import AppContext
from aisac_core.store.tables import TraceEvent
from aisac_servers.serving.suite import build

AISAC = str(Path(sys.executable).parent / "aisac")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1", **extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_http(data_dir: Path, *args: str, **env: str):  # noqa: ANN201
    """`aisac serve --transport http --port P [args]`; yields (loopback MCP URL, process), stops it after."""
    port = _free_port()
    proc = subprocess.Popen(
        [AISAC, "serve", "--transport", "http", "--port", str(port), *args],
        env=_env(data_dir, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        stop_process(proc)


@pytest.fixture
def store(tmp_path, models_dir) -> Path:  # noqa: ANN001
    d = tmp_path / "store"
    make_settings(d, models_dir)
    return d


@pytest.mark.anyio
async def test_non_loopback_bind_requires_the_generated_token(store):
    with serve_http(store, "--host", "0.0.0.0") as (url, _proc):
        # the socket listens a moment before owner.json is written: wait for the file, not only the port
        deadline = time.monotonic() + 30
        while not (store / "owner.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        token = json.loads((store / "owner.json").read_text())["token"]  # also printed on stderr at start
        assert token and len(token) >= 40
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(url, json=INIT, headers=MCP_HEADERS)
            assert r.status_code == 401
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert "Authorization: Bearer" in r.json()["error_description"]
            r = await http.post(url, json=INIT, headers={**MCP_HEADERS, "Authorization": "Bearer wrong-token"})
            assert r.status_code == 401
            r = await http.get(url.replace("/mcp", "/dashboard/"))  # every route is behind the token
            assert r.status_code == 401
        async with Client(url, auth=token) as c:
            assert "memory_start_session" in {t.name for t in await c.list_tools()}
            r = await c.call_tool("memory_start_session", {"title": "over the network"})
            assert r.structured_content["session_id"].startswith("ses-")


@pytest.mark.anyio
async def test_configured_token_also_guards_loopback(store):
    with serve_http(store, "--no-owner", AISAC_HTTP_TOKEN="s3cret-token-of-the-lab") as (url, _proc):
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.post(url, json=INIT, headers=MCP_HEADERS)).status_code == 401
        async with Client(url, auth="s3cret-token-of-the-lab") as c:
            assert await c.list_tools()


@pytest.mark.anyio
async def test_request_size_limit(store):
    with serve_http(store, "--no-token", AISAC_MAX_REQUEST_BYTES="4096") as (url, _proc):
        big = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "memory_start_session", "arguments": {"title": "x" * 10_000}},
        }
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(url, json=big, headers=MCP_HEADERS)
            assert r.status_code == 413 and "4096" in r.json()["error_description"]

            async def chunks():  # no Content-Length: the streamed total is counted
                for _ in range(10):
                    yield b"x" * 1000

            r = await http.post(url, content=chunks(), headers=MCP_HEADERS)
            assert r.status_code == 413
        async with Client(url) as c:  # normal requests pass (loopback, --no-token)
            r = await c.call_tool("memory_start_session", {"title": "small"})
            assert r.structured_content["title"] == "small"


@pytest.mark.anyio
async def test_loopback_server_refuses_foreign_host_header(store):
    """DNS-rebinding protection: a page on evil.example cannot drive a loopback server."""
    with serve_http(store, "--no-token") as (url, _proc):
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(url, json=INIT, headers={**MCP_HEADERS, "Host": "evil.example"})
            assert 400 <= r.status_code < 500
            r = await http.post(url, json=INIT, headers={**MCP_HEADERS, "Origin": "http://evil.example"})
            assert 400 <= r.status_code < 500
            r = await http.post(url, json=INIT, headers=MCP_HEADERS)
            assert r.status_code == 200


@pytest.mark.anyio
async def test_owner_daemon_requires_its_token(store):
    from aisac_core.owner import ensure_owner, stop_owner
    from aisac_core.settings import Settings
    from aisac_servers.base.proxying import owner_mcp_transport

    info = ensure_owner(Settings(data_dir=store))
    try:
        assert oct((store / "owner.json").stat().st_mode & 0o777) == "0o600"
        # the daemon listens on its Unix socket (0600); the token is still required there (defence in depth)
        assert (
            info.socket == str(store / "owner.sock") and oct((store / "owner.sock").stat().st_mode & 0o777) == "0o600"
        )
        transport = httpx.AsyncHTTPTransport(uds=info.socket)
        async with httpx.AsyncClient(timeout=30, transport=transport) as http:
            assert (await http.post(info.url, json=INIT, headers=MCP_HEADERS)).status_code == 401
        async with Client(owner_mcp_transport(info)) as c:
            assert await c.list_tools()
    finally:
        stop_owner(store)


@pytest.mark.anyio
async def test_path_traversal_is_refused_and_traced(tmp_path, models_dir, shared_embedder):
    root = tmp_path / "papers"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "note.md").write_text("# Inside\n\nA note inside the registered root.\n")
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nmust never be indexed\n")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    core = AppContext(make_settings(tmp_path / "store", models_dir, roots=[root]), embedder=shared_embedder)
    attempts = [
        str(root / ".." / "private"),
        "../private/secret.md",
        str(outside / "secret.md"),
        str(root / "escape"),
        "escape/secret.md",
        "/etc/passwd",
        [str(root / "sub"), "/etc"],
    ]
    try:
        async with Client(build(app=core)) as c:
            for path in attempts:
                r = await c.call_tool("rag_index", {"path": path, "run_id": "run-traversal"}, raise_on_error=False)
                assert r.is_error, path
                assert "outside the registered roots" in r.content[0].text, r.content[0].text
            ok = await c.call_tool("rag_index", {"path": "sub", "wait": True, "run_id": "run-traversal"})
            assert ok.structured_content["status"] == "done"  # relative to the first root: allowed
            docs = (await c.call_tool("rag_list_documents", {})).structured_content["documents"]
            assert [Path(d["path"]).name for d in docs] == ["note.md"]
        with Session(core.engine) as db:
            rows = db.exec(select(TraceEvent).where(TraceEvent.run_id == "run-traversal").order_by(TraceEvent.id)).all()
        assert [r.status for r in rows] == ["tool_error"] * len(attempts) + ["ok"]
        assert all(r.tool == "rag_index" and "outside the registered roots" in (r.error or "") for r in rows[:-1])
    finally:
        core.close()
