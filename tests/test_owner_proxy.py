"""The proxy to a store's owner: real `aisac serve` hosts (stdio and HTTP) and a real owner daemon.

One long-lived session per host process (stdio relay), one trace run per host, progress through the proxy,
reconnection after the owner stops, the owner's dashboard behind an HTTP proxy. Every test stops the daemons it
started (``owned_store``, from tests/test_owner.py).
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest
from conftest import stop_process
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from mcp.shared.exceptions import MCPError
from test_owner import AISAC, owned_store, owner_info, serve_env, stdio  # noqa: F401 - owned_store is a fixture


def legacy_stdio(data_dir: Path, *args: str) -> Client:
    """A host speaking the handshake era (initialize, one MCP session), as most MCP hosts still do."""
    return Client(
        StdioTransport(command=AISAC, args=["serve", *args], env=serve_env(data_dir), keep_alive=False), mode="legacy"
    )


def stop_owner_cli(data_dir: Path) -> None:
    out = subprocess.run(
        [AISAC, "owner", "stop"], env=serve_env(data_dir), capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.anyio
async def test_two_hosts_get_two_runs(owned_store):  # noqa: F811
    """Two host processes calling at once: each gets its own trace run (the idle rule applies per host)."""

    async def host(tag: str, c: Client) -> None:
        for i in range(5):
            await c.call_tool("memory_start_session", {"title": f"{tag} {i}"})
            await anyio.sleep(0.01)

    async with stdio(owned_store) as a, legacy_stdio(owned_store) as b:
        async with anyio.create_task_group() as tg:
            tg.start_soon(host, "a", a)
            tg.start_soon(host, "b", b)
        runs = (await a.call_tool("trace_list_runs", {"server": "memory"})).structured_content["runs"]
        assert len(runs) == 2, runs
        assert sorted(r["tool_calls"] for r in runs) == [5, 5]
        # the same host keeps its run
        await b.call_tool("memory_list_sessions", {})
        runs2 = (await a.call_tool("trace_list_runs", {"server": "memory"})).structured_content["runs"]
        assert {r["run_id"] for r in runs2} == {r["run_id"] for r in runs}


@pytest.mark.anyio
@pytest.mark.parametrize("legacy", [False, True], ids=["stateless", "handshake"])
async def test_progress_of_rag_index_reaches_the_caller(owned_store, corpus, legacy):  # noqa: F811
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    client = legacy_stdio(owned_store) if legacy else stdio(owned_store)
    async with client as c:
        r = await c.call_tool(
            "rag_index", {"path": str(corpus / "notes"), "wait": True, "timeout_s": 300}, progress_handler=on_progress
        )
        assert r.structured_content["status"] == "done"
    assert seen, "no progress notification reached the host"
    assert seen[-1][0] == r.structured_content["done"]
    values = [p for p, _ in seen]
    assert all(b > a for a, b in zip(values, values[1:], strict=False)), f"progress not increasing: {values}"


@pytest.mark.anyio
@pytest.mark.parametrize("legacy", [False, True], ids=["stateless", "handshake"])
async def test_proxy_reconnects_after_owner_stop(owned_store, legacy):  # noqa: F811
    client = legacy_stdio(owned_store) if legacy else stdio(owned_store)
    async with client as c:
        ses = (await c.call_tool("memory_start_session", {"title": "before"})).structured_content["session_id"]
        first = owner_info(owned_store)["pid"]
        await anyio.to_thread.run_sync(stop_owner_cli, owned_store)
        assert not (owned_store / "owner.json").exists()
        r = await c.call_tool("memory_get_history", {"session_id": ses})  # starts a new owner, same host session
        assert r.structured_content["session_id"] == ses
        assert owner_info(owned_store)["pid"] != first
        names = {t.name for t in await c.list_tools()}
        assert "rag_search" in names


@pytest.mark.anyio
async def test_namespace_filter_of_the_relay(owned_store):  # noqa: F811
    async with legacy_stdio(owned_store, "memory") as c:
        names = {t.name for t in await c.list_tools()}
        assert names and all(n.startswith("memory_") for n in names)
        # an unknown tool (outside the host's profile) is a protocol error, -32602 (MCP "Tools", error handling)
        with pytest.raises(MCPError, match="unknown tool") as err:
            await c.call_tool("trace_list_runs", {})
        assert err.value.code == -32602


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.anyio
async def test_dashboard_through_an_http_proxy(owned_store):  # noqa: F811
    async with stdio(owned_store) as c:  # starts the owner daemon and records one call
        await c.call_tool("memory_start_session", {"title": "seen on the dashboard"})
        owner = owner_info(owned_store)
        port = _free_port()
        env = serve_env(owned_store, AISAC_HTTP_TOKEN="proxy-token-" + "x" * 32)
        proc = subprocess.Popen(
            [AISAC, "serve", "--transport", "http", "--port", str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # noqa: ASYNC220
        try:
            base = f"http://127.0.0.1:{port}"
            auth = {"Authorization": "Bearer proxy-token-" + "x" * 32}
            async with httpx.AsyncClient(timeout=30) as http:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        r = await http.get(base + "/dashboard", headers=auth)
                        break
                    except httpx.ConnectError:
                        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()
                        await anyio.sleep(0.1)
                assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
                # the owner itself, over its Unix socket (issue 30)
                async with httpx.AsyncClient(timeout=30, transport=httpx.AsyncHTTPTransport(uds=owner["socket"])) as o:
                    direct = await o.get(
                        owner["url"].rsplit("/mcp", 1)[0] + "/dashboard",
                        headers={"Authorization": f"Bearer {owner['token']}"},
                    )
                assert direct.status_code == 200
                assert "<html" in r.text.lower() and r.text[:200] == direct.text[:200]
                assert (await http.get(base + "/dashboard")).status_code == 401  # the proxy's own token guards it
                frag = await http.get(base + "/dashboard/fragment", headers=auth)
                assert frag.status_code == 200
                # issue 30: dot segments (plain, percent-encoded, double-encoded) never reach the owner's /mcp
                for evil in ("/dashboard/%2e%2e/mcp", "/dashboard/%252e%252e/mcp", "/dashboard/.%2E/mcp"):
                    r = await http.post(base + evil, json={}, headers=auth)  # POST: no dashboard route forwards it
                    assert r.status_code in (400, 404, 405), (evil, r.status_code)
                    r = await http.get(base + evil, headers=auth)
                    assert r.status_code == 400 and "refused" in r.text, (evil, r.status_code, r.text[:200])
                # the live stream answers as a server-sent-event stream through the proxy
                async with http.stream("GET", base + "/dashboard/stream", headers=auth) as s:
                    assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
            assert owner_info(owned_store)["pid"] == owner["pid"]  # the HTTP server proxied, did not take over
        finally:
            stop_process(proc, 20)
