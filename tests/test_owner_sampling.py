"""Server-to-client requests through the store's owner: ``sampling/createMessage`` rides the stream of the call that
caused it, so a stdio host behind the relay and an HTTP client without a standalone GET stream both receive it, and
a host without the sampling capability gets a tool error at once. Real ``aisac serve`` processes, a real owner
daemon; the host's model is a stub answering with a prepared route.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from roles_support import load_fixture
from test_owner import AISAC, owned_store, owner_info, serve_env  # noqa: F401 - owned_store is a fixture

pytestmark = pytest.mark.anyio


def _host(data_dir: Path, handler: Any = None) -> Client:
    """A handshake-era stdio host (initialize, one MCP session), offering sampling when ``handler`` is given."""
    return Client(
        StdioTransport(command=AISAC, args=["serve"], env=serve_env(data_dir), keep_alive=False),
        mode="legacy",
        sampling_handler=handler,
    )


async def test_stdio_host_answers_sampling_through_the_relay(owned_store):  # noqa: F811
    seen: list[str] = []

    def handler(messages, params, _ctx):  # noqa: ANN001, ANN202
        seen.append(messages[-1].content.text)
        return json.dumps(load_fixture("route_plan.json"))

    async with _host(owned_store) as first:  # a first host: the store keeps the owner's listing answers
        await first.list_tools()
    # this host's initialize is answered from that catalogue while its session with the owner opens: its first call
    # must still reach the owner in that session
    async with _host(owned_store, handler) as c:
        with anyio.fail_after(120):
            r = await c.call_tool("roles_route", {"task": "Compare the two notes", "llm": "sampling"})
    out = r.structured_content
    assert out["by"] == "model" and out["decision"] == "plan", out
    assert len(seen) == 1 and "You are the Router" in seen[0]


async def test_host_without_sampling_gets_a_prompt_tool_error(owned_store):  # noqa: F811
    async with _host(owned_store) as c:
        await c.call_tool("memory_list_sessions", {})  # the owner is up
        t0 = time.monotonic()
        r = await c.call_tool("roles_route", {"task": "Km?", "llm": "sampling"}, raise_on_error=False)
        elapsed = time.monotonic() - t0
    assert r.is_error and "offers sampling" in r.content[0].text
    assert elapsed < 5, elapsed  # acceptance: < 1 s (measured ~0.05 s); the bound leaves room for a busy machine


async def _sse(r: httpx.Response) -> Any:
    """The JSON-RPC messages of a response: its JSON body or the data of its server-sent events."""
    if not r.headers.get("content-type", "").startswith("text/event-stream"):
        yield json.loads(await r.aread())
        return
    data: list[str] = []
    async for line in r.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


async def test_http_client_without_get_stream_gets_sampling_on_the_call_stream(owned_store):  # noqa: F811
    """A raw HTTP client of the owner that never opens the standalone GET stream: the sampling request arrives on
    the POST stream of its ``tools/call``; its answer, POSTed back, completes the call."""
    route = json.dumps(load_fixture("route_plan.json"))
    async with _host(owned_store) as starter:
        await starter.call_tool("memory_list_sessions", {})  # the owner is up
        info = owner_info(owned_store)
        h = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if info.get("token"):
            h["authorization"] = f"Bearer {info['token']}"
        # the owner's Unix socket (its TCP address where the data dir's path is too long for one)
        transport = httpx.AsyncHTTPTransport(uds=info["socket"]) if info.get("socket") else None
        async with httpx.AsyncClient(timeout=120, transport=transport) as http:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"sampling": {}},
                    "clientInfo": {"name": "raw-http", "version": "0"},
                },
            }
            r = await http.post(info["url"], json=init, headers=h)
            assert r.status_code == 200, r.text
            h["mcp-session-id"] = r.headers["mcp-session-id"]
            h["mcp-protocol-version"] = "2025-11-25"
            await http.post(info["url"], json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h)
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "roles_route", "arguments": {"task": "Compare the notes", "llm": "sampling"}},
            }
            seen: list[str] = []
            result: dict[str, Any] | None = None
            with anyio.fail_after(120):
                async with http.stream("POST", info["url"], json=call, headers=h) as resp:
                    async for m in _sse(resp):
                        if m.get("method") == "sampling/createMessage":
                            seen.append(m["params"]["messages"][-1]["content"]["text"])
                            answer = {
                                "jsonrpc": "2.0",
                                "id": m["id"],
                                "result": {
                                    "role": "assistant",
                                    "content": {"type": "text", "text": route},
                                    "model": "stub",
                                    "stopReason": "endTurn",
                                },
                            }
                            ack = await http.post(info["url"], json=answer, headers=h)
                            assert ack.status_code == 202, ack.text
                        elif m.get("id") == 2:
                            result = m
                            break
    assert len(seen) == 1 and "You are the Router" in seen[0]
    assert result is not None and not result["result"].get("isError"), result
    assert result["result"]["structuredContent"]["by"] == "model"


async def test_no_reply_to_a_cancelled_request_through_the_relay(owned_store):  # noqa: F811
    """A host cancels a call waiting for its own model (it never answers the sampling request): the relay sends no
    response for the cancelled id (MCP "Cancellation"), and the session goes on."""
    proc = await anyio.open_process([AISAC, "serve"], env=serve_env(owned_store))
    assert proc.stdin is not None and proc.stdout is not None
    buf = b""

    async def send(m: dict[str, Any]) -> None:
        assert proc.stdin is not None
        await proc.stdin.send(json.dumps(m).encode() + b"\n")

    async def read_until(pred: Any, seen: list[dict[str, Any]]) -> dict[str, Any]:
        nonlocal buf
        assert proc.stdout is not None
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                m = json.loads(line)
                seen.append(m)
                if pred(m):
                    return m
            buf += await proc.stdout.receive()

    seen: list[dict[str, Any]] = []
    try:
        with anyio.fail_after(180):
            await send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"sampling": {}},
                        "clientInfo": {"name": "raw-stdio", "version": "0"},
                    },
                }
            )
            await read_until(lambda m: m.get("id") == 1, seen)
            await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"name": "roles_route", "arguments": {"task": "Compare the notes", "llm": "sampling"}}
            await send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            await read_until(lambda m: m.get("method") == "sampling/createMessage", seen)
            await send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
            await anyio.sleep(2)  # time for the owner to cancel the call and for any (wrong) answer to arrive
            await send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
            await read_until(lambda m: m.get("id") == 3, seen)
    finally:
        await proc.stdin.aclose()
        with anyio.move_on_after(10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
    assert not [m for m in seen if m.get("id") == 2 and ("result" in m or "error" in m)], seen
