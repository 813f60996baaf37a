"""`aisac serve` as a real subprocess: stdio (fastmcp Client, a raw JSON-RPC client) and streamable HTTP on
127.0.0.1. Over stdio the process proxies to the store's owner daemon (docs/processes.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import http_server, make_settings
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fixtures_gen import PAGE_MARKERS

AISAC = str(Path(sys.executable).parent / "aisac")


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1")
    return env


@pytest.fixture(scope="module")
def served_store(tmp_path_factory, models_dir, corpus):  # noqa: ANN201
    """A store with the corpus indexed by the CLI (a subprocess), free for a server process to open."""
    data_dir = tmp_path_factory.mktemp("served") / "store"
    make_settings(data_dir, models_dir)  # reuse the assembled model folder
    out = subprocess.run(
        [AISAC, "index", str(corpus), "--json"], env=_env(data_dir), capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["counters"]["files_indexed"] == 5
    yield data_dir
    from aisac_core.owner import stop_owner

    stop_owner(data_dir)  # `aisac serve` over stdio started the store's owner daemon (docs/processes.md)


@pytest.mark.anyio
async def test_stdio_fastmcp_client_grounded_search(served_store):
    transport = StdioTransport(command=AISAC, args=["serve"], env=_env(served_store), keep_alive=False)
    async with Client(transport) as c:
        names = {t.name for t in await c.list_tools()}
        assert {"rag_search", "rag_index", "rag_job_status"} <= names
        r = await c.call_tool("rag_search", {"query": "thermal denaturation of the lipase", "k": 3, "detail": "full"})
        hit = r.structured_content["hits"][0]
        assert hit["path"].endswith("enzyme_kinetics.md")
        assert hit["anchor"]["sha256"] and hit["anchor"]["chunk_sha256"]
        r = await c.call_tool("rag_search", {"query": "x", "k": 0}, raise_on_error=False)
        assert r.is_error and "k must be" in r.content[0].text


def test_stdio_stdout_carries_only_jsonrpc(served_store, corpus):
    """A raw client: every byte the server writes to stdout is a JSON-RPC message, even while models
    load, docling parses and an index job runs."""
    reqs = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "rag_index", "arguments": {"path": str(corpus), "wait": True}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "rag_search", "arguments": {"query": PAGE_MARKERS[2], "k": 2}},
        },
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "rag_search", "arguments": {"query": "x", "filters": {"nope": 1}}},
        },
    ]
    proc = subprocess.Popen(
        [AISAC, "serve"], env=_env(served_store), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin and proc.stdout
    responses: dict[int, dict] = {}
    try:
        for req in reqs:
            proc.stdin.write((json.dumps(req) + "\n").encode())
            proc.stdin.flush()
            if "id" not in req:
                continue
            while req["id"] not in responses:
                line = proc.stdout.readline()
                assert line, "server closed stdout early"
                msg = json.loads(line)  # raises if anything but JSON reached stdout
                assert msg.get("jsonrpc") == "2.0", line
                if "id" in msg and "method" not in msg:
                    responses[msg["id"]] = msg
        proc.stdin.close()
        proc.stdin = None  # EOF ends the server; communicate() must not flush the closed pipe
        rest, _err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    for line in rest.decode().splitlines():
        assert json.loads(line).get("jsonrpc") == "2.0", line
    assert responses[4]["result"]["structuredContent"]["hits"][0]["page"] == 2
    assert responses[5]["result"]["isError"] is True


@pytest.mark.anyio
async def test_streamable_http_on_loopback(served_store):
    with http_server(_env(served_store)) as url:
        async with Client(url) as c:
            assert "rag_search" in {t.name for t in await c.list_tools()}
            r = await c.call_tool(
                "rag_search", {"query": "wall heat transfer coefficient Nusselt", "k": 2, "detail": "full"}
            )
            assert r.structured_content["hits"][0]["path"].endswith("heat_transfer.md")


# The non-loopback bind (bearer token, 401) is tested in tests/test_security.py; the MCP Inspector CLI and the
# TypeScript SDK client, pinned in tests/interop/package.json, in tests/interop/test_interop.py.
