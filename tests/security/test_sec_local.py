"""Other local users: every TCP listener needs a token; the proxy forwards only dashboard paths (issue 30).

The red team found ``aisac serve --transport http`` on 127.0.0.1 serving memory turns and document text to any
local account (no token on loopback), and the HTTP proxy forwarding ``/dashboard/%2e%2e/mcp`` to the owner with
the owner's token. Real ``aisac`` subprocesses and real HTTP requests.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import make_settings, stop_process

AISAC = str(Path(sys.executable).parent / "aisac")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_DATA_DIR=str(data_dir), AISAC_WARM="0")
    return env


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_loopback_http_server_generates_and_prints_a_token(tmp_path, models_dir):
    store = tmp_path / "store"
    make_settings(store, models_dir)
    port = _port()
    proc = subprocess.Popen(
        [AISAC, "serve", "--transport", "http", "--port", str(port), "--no-owner"],
        env=_env(store),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        text = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not re.search(r"^}$", text, flags=re.M):
            text += proc.stderr.readline()
        token = re.search(r"Authorization: Bearer (\S+)'", text).group(1)  # type: ignore[union-attr]
        config, _end = json.JSONDecoder().raw_decode(text[text.index("{") :])
        entry = config["mcpServers"]["aisac"]
        assert entry["url"] == f"http://127.0.0.1:{port}/mcp" and entry["headers"]["Authorization"] == f"Bearer {token}"
        assert len(token) >= 40
        url = entry["url"]
        while time.monotonic() < deadline:
            try:
                r = httpx.post(url, json=INIT, headers=MCP_HEADERS, timeout=10)
                break
            except httpx.ConnectError:
                time.sleep(0.1)
        assert r.status_code == 401  # another local account, without the token
        assert httpx.get(url.replace("/mcp", "/dashboard/"), timeout=10).status_code == 401
        r = httpx.post(url, json=INIT, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}, timeout=10)
        assert r.status_code == 200
    finally:
        stop_process(proc)


def test_no_token_is_refused_on_a_non_loopback_address(tmp_path, models_dir):
    store = tmp_path / "store"
    make_settings(store, models_dir)
    p = subprocess.run(
        [AISAC, "serve", "--transport", "http", "--host", "0.0.0.0", "--port", str(_port()), "--no-token"],
        env=_env(store),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1 and "--no-token is for loopback addresses only" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize(
    "path",
    [
        "/dashboard/../mcp",
        "/dashboard/%2e%2e/mcp",
        "/dashboard/%2E%2E/mcp",
        "/dashboard/.%2e/mcp",
        "/dashboard/%252e%252e/mcp",
        "/dashboard/..%2fmcp",
        "/dashboard/..%5cmcp",
        "/dashboard\\..\\mcp",
        "/dashboard/./run",
        "/dashboard%00/x",
        "/mcp",
        "/dashboardx/y",
    ],
)
def test_proxy_refuses_paths_that_leave_the_dashboard(path):
    from urllib.parse import unquote

    from aisac_servers.serving.dashboard import forward_path

    assert forward_path(unquote(path)) is None  # the server hands the handler the path decoded once


def test_proxy_forwards_dashboard_paths_unchanged():
    from aisac_servers.serving.dashboard import forward_path

    assert forward_path("/dashboard") == "/dashboard" and forward_path("/dashboard/") == "/dashboard/"
    assert forward_path("/dashboard/run/run-1/event/3") == "/dashboard/run/run-1/event/3"
    assert forward_path("/dashboard/a b") == "/dashboard/a%20b"


def _rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children's share is not counted: ``VmRSS`` of ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _upload(port: int, head: bytes, total: int, chunked: bool) -> tuple[bytes, float, int]:
    """Send ``head`` and then up to ``total`` body bytes (1 MB writes; as HTTP/1.1 chunks when ``chunked``) like a
    client that keeps uploading until the server answers or closes. Returns (answer, seconds to it, bytes sent)."""
    import select

    c = socket.create_connection(("127.0.0.1", port))
    try:
        c.sendall(head)
        piece = b"x" * (1 << 20)
        if chunked:
            piece = b"%x\r\n" % len(piece) + piece + b"\r\n"
        answer, sent, t0 = b"", 0, time.monotonic()
        while sent < total and time.monotonic() - t0 < 60:
            readable, writable, _ = select.select([c], [c], [], 1.0)
            if readable:
                try:
                    data = c.recv(65536)
                except ConnectionResetError:  # the server closed with our unread bytes pending: TCP resets, and
                    break  # the answer may be lost on the way (RFC 9112 section 9.6, the "lingering close" problem)
                if not data:
                    break
                answer += data
            if writable:
                try:
                    sent += c.send(piece)
                except OSError:  # the server closed the connection: the upload ends here
                    break
        dt = time.monotonic() - t0
        try:
            c.settimeout(5)
            while b"\r\n\r\n" not in answer and (data := c.recv(65536)):
                answer += data
        except OSError:
            pass
        return answer, dt, sent
    finally:
        c.close()


def test_oversized_bodies_are_refused_before_reading_and_memory_stays_flat(tmp_path, models_dir):
    """Issue 38: a 200 MB POST with ``Content-Length`` got its 413 only after 9-13 s and the server grew by
    230-300 MB. A declared length over the limit is refused before a byte is read, and the answer closes the
    connection, so the rest of the body is never read: the client's upload ends at once. Chunked bodies are cut at
    the limit the same way."""
    store = tmp_path / "store"
    make_settings(store, models_dir)
    port = _port()
    token = "t" * 43
    proc = subprocess.Popen(
        [AISAC, "serve", "--transport", "http", "--port", str(port), "--no-owner"],
        env={**_env(store), "AISAC_HTTP_TOKEN": token},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        base = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        )
        size = 200 * 2**20
        before = _rss_mb(proc.pid)
        # the declared length alone gets the answer, before a byte of the body is sent
        probe = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            probe.sendall((base + f"Content-Length: {size}\r\n\r\n").encode())
            answer = b""
            while b"AISAC_MAX_REQUEST_BYTES" not in answer and (data := probe.recv(65536)):
                answer += data
        finally:
            probe.close()
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert b"AISAC_MAX_REQUEST_BYTES" in answer and b"connection: close" in answer.lower()
        for chunked in (False, True):
            framing = "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {size}\r\n"
            answer, seconds, sent = _upload(port, (base + framing + "\r\n").encode(), size, chunked)
            # a client still sending when the server closes may see a reset instead of the answer (above)
            assert not answer or (answer.startswith(b"HTTP/1.1 413") and b"AISAC_MAX_REQUEST_BYTES" in answer), answer
            assert seconds < 5, seconds
            assert sent < 64 * 2**20, f"the server read {sent >> 20} MB of an oversized body before closing"
        assert _rss_mb(proc.pid) - before < 40, (before, _rss_mb(proc.pid))
        # a request within the limit still works on a fresh connection
        r = httpx.post(
            f"http://127.0.0.1:{port}/mcp",
            json=INIT,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert r.status_code == 200
    finally:
        stop_process(proc)
