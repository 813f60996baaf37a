"""The browser dashboard: a token, DNS-rebinding checks and a strict Content-Security-Policy (issue 30).

The red team found that ``aisac dashboard`` had no token and no Host check, so a DNS-rebinding web page could read
the trace through the user's browser, and that a model answer's Markdown image was fetched from a remote URL when
the run page was viewed (data leaves in the image URL). The guard is tested on the real dashboard app (real
SQLite trace) through Starlette's test client, and the ``aisac dashboard`` command as a real subprocess.
"""

from __future__ import annotations

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
from starlette.testclient import TestClient

TOKEN = "dash-" + "t" * 40


@pytest.fixture
def guarded(tmp_path, models_dir):
    from aisac_core.context import AppContext
    from aisac_core.security import DashboardGuard
    from aisac_core.trace.dashboard import create_app

    core = AppContext(make_settings(tmp_path / "store", models_dir, warm=False))
    try:
        yield DashboardGuard(create_app(core.trace), TOKEN)
    finally:
        core.close()


def test_token_is_required_then_kept_in_a_strict_cookie(guarded):
    with TestClient(guarded, base_url="http://127.0.0.1:8766") as c:
        r = c.get("/")
        assert r.status_code == 401 and "?token=" in r.json()["error_description"]
        assert c.get("/", params={"token": "wrong"}).status_code == 401
        r = c.get("/", params={"token": TOKEN})
        assert r.status_code == 200
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert c.get("/").status_code == 200  # the cookie, no token in the URL
    with TestClient(guarded, base_url="http://127.0.0.1:8766") as c:
        assert c.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


@pytest.mark.parametrize(
    ("host", "origin", "status"),
    [
        ("evil.example", None, 403),  # a rebound name: the browser sends the attacker's host name
        ("evil.example:8766", "http://evil.example:8766", 403),
        ("127.0.0.1.evil.example", None, 403),
        ("127.0.0.1:8766", "http://evil.example", 403),  # a cross-site page posting to the loopback address
        ("127.0.0.1:8766", "https://127.0.0.1.nip.io", 403),
        ("127.0.0.1:8766", None, 200),
        ("localhost:8766", "http://localhost:8766", 200),
        ("[::1]:8766", None, 200),
    ],
)
def test_host_and_origin_must_be_loopback(guarded, host, origin, status):
    headers = {"Host": host, "Authorization": f"Bearer {TOKEN}"}
    if origin:
        headers["Origin"] = origin
    with TestClient(guarded, base_url="http://127.0.0.1:8766") as c:
        assert c.get("/", headers=headers).status_code == status


def test_every_answer_carries_a_strict_content_security_policy(guarded):
    with TestClient(guarded, base_url="http://127.0.0.1:8766") as c:
        for path in ("/", "/run?id=missing", "/nope"):
            r = c.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
            csp = r.headers["content-security-policy"]
            img = re.search(r"img-src ([^;]*)", csp).group(1)  # type: ignore[union-attr]
            assert img.split() == ["'self'", "data:"]  # a remote Markdown image is never fetched
            assert "frame-src 'none'" in csp and "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
            assert not re.search(r"https?:|\*", csp)
            assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "no-referrer"
        assert "content-security-policy" in c.get("/").headers  # also on the 401


def test_no_inline_script_or_style_element_is_allowed_or_needed(guarded):
    """Issue 38: the policy still allowed inline scripts ('unsafe-inline'). Now scripts and style sheets come only
    from the dashboard's own files, and its pages carry no inline script or style element (the settings travel in a
    JSON data block, which a browser never runs), so the pages work under the policy. Style attributes are refused
    too: the evidence highlights are an SVG overlay (no ``style-src-attr 'unsafe-inline'``)."""
    with TestClient(guarded, base_url="http://127.0.0.1:8766") as c:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        r = c.get("/", headers=auth)
        csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
        assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'", csp
        # nor style attributes (issue 38, the remainder): no style-src-attr, so style-src 'self' governs them too
        assert "unsafe-inline" not in r.headers["content-security-policy"] and "style-src-attr" not in csp, csp
        assert "unsafe-eval" not in r.headers["content-security-policy"]
        for path in ("/", "/run?id=missing"):
            page = c.get(path, headers=auth).text
            scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, flags=re.S)
            assert scripts and all("src=" in a or "application/json" in a for a, _ in scripts), scripts
            assert all(not body.strip() for a, body in scripts if "src=" in a)
            assert "<style" not in page and not re.search(r"\son[a-z]+=", page)
            assert not re.search(r"\sstyle\s*=", page)  # a run page with highlights: tests/test_runpage.py
            js = re.search(r"<script src='([^']+)'", page).group(1)  # type: ignore[union-attr]
            css = re.search(r"<link rel=stylesheet href='([^']+)'", page).group(1)  # type: ignore[union-attr]
            for url, kind in ((js, "text/javascript"), (css, "text/css")):
                got = c.get(url, headers=auth)
                assert got.status_code == 200 and got.headers["content-type"].startswith(kind) and got.text
                assert "content-security-policy" in got.headers


def test_http_guard_adds_the_policy_to_the_served_dashboard_pages():
    import anyio

    from aisac_core.security import HttpGuard

    async def app(scope, receive, send):  # noqa: ANN001
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": b"<p>ok</p>"})

    sent: list[dict] = []

    async def go(path: str) -> dict:
        sent.clear()

        async def receive():  # noqa: ANN202
            return {"type": "http.request", "body": b""}

        async def send(m):  # noqa: ANN001
            sent.append(m)

        await HttpGuard(app, token=None)({"type": "http", "method": "GET", "path": path, "headers": []}, receive, send)
        return dict(sent[0]["headers"])

    assert b"content-security-policy" in anyio.run(go, "/dashboard/run")
    assert b"content-security-policy" not in anyio.run(go, "/mcp")


def test_aisac_dashboard_prints_a_token_url_and_refuses_without_it(tmp_path):
    aisac = str(Path(sys.executable).parent / "aisac")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(tmp_path / "store"), HF_HUB_OFFLINE="1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [aisac, "dashboard", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/\?token=\S+)", line).group(1)  # type: ignore[union-attr]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert r.status_code == 401
        r = httpx.get(url, timeout=5)
        assert r.status_code == 200 and "No runs yet" in r.text
        assert httpx.get(url, headers={"Host": "evil.example"}, timeout=5).status_code == 403
    finally:
        stop_process(proc)
