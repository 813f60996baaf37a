"""Issue 42, acceptance 1: a host that declares the ``roots`` capability (MCP 2025-11-25, "Roots") gets its own roots
honoured without ``AISAC_ROOTS``, and follows ``notifications/roots/list_changed``; ``AISAC_ROOTS`` applies only
to a host that declares none. Real clients: the Python SDK (fastmcp) in memory and over stdio through the store's
owner (the relay asks the host), and the TypeScript SDK over stdio (tests/interop/sdk_roots.mjs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import make_settings
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from aisac_core.host_roots import missing_roots, roots_from_host
from aisac_servers.serving.suite import build

pytestmark = pytest.mark.anyio
AISAC = str(Path(sys.executable).parent / "aisac")
INTEROP = Path(__file__).parent / "interop"


def _folder(base: Path, name: str) -> Path:
    d = base / name
    d.mkdir(parents=True)
    (d / f"{name}.csv").write_text("x,y\n1,2\n3,4\n", encoding="utf-8")
    return d


async def _load(c: Client, d: Path) -> tuple[bool, str]:
    r = await c.call_tool("data_load", {"path": str(d / f"{d.name}.csv"), "name": d.name}, raise_on_error=False)
    return r.is_error, r.content[0].text if r.content else ""


def test_root_uris_become_folders_and_others_are_named():
    got = roots_from_host(
        {
            "roots": [
                {"uri": "file:///data/papers%20A", "name": "papers"},
                {"uri": "file://localhost/data/b"},
                {"uri": "file:///data/papers%20A"},  # a duplicate
                {"uri": "https://example.org/x"},
                {"uri": "file://otherhost/share"},
                {"uri": "file:relative"},
            ]
        }
    )
    assert got.paths == (Path("/data/papers A"), Path("/data/b"))
    assert len(got.skipped) == 3 and all("not a file:// URI" in s for s in got.skipped)
    assert roots_from_host({"nothing": 1}).paths == () and roots_from_host(None).skipped
    assert missing_roots([Path("/"), Path("/no/such/folder/here")]) == [Path("/no/such/folder/here")]


async def test_a_client_with_roots_gets_them_honoured_in_memory(models_dir, shared_embedder, tmp_path):
    from aisac_core.context import AppContext

    a, b, other = _folder(tmp_path, "alpha"), _folder(tmp_path, "beta"), _folder(tmp_path, "other")
    app = AppContext(make_settings(tmp_path / "store", models_dir, roots=[other]), embedder=shared_embedder)
    try:
        server = build(app=app)
        # no roots capability: the settings' roots (AISAC_ROOTS) hold
        async with Client(server, mode="legacy") as c:
            assert not (await _load(c, other))[0]
            err, text = await _load(c, a)
            assert err and "outside" in text.lower(), text
        # a client that declares roots: its own, not the settings'
        current = [f"file://{a}"]  # what the client's roots handler answers (set_roots only affects a new session)
        async with Client(server, mode="legacy", roots=lambda _ctx: list(current)) as c:
            assert not (await _load(c, a))[0]
            for d in (b, other):
                err, text = await _load(c, d)
                assert err and "outside" in text.lower(), text
            current[:] = [f"file://{b}"]
            await c.send_roots_list_changed()
            await anyio.sleep(0.2)  # the notification is processed before the next call
            assert not (await _load(c, b))[0]
            err, text = await _load(c, a)
            assert err and "outside" in text.lower(), text
    finally:
        app.close()


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1", **extra)
    return env


@pytest.fixture
def roots_store(tmp_path, models_dir):
    from aisac_core.owner import stop_owner

    data_dir = tmp_path / "store"
    make_settings(data_dir, models_dir)
    yield data_dir
    stop_owner(data_dir, timeout=30)


async def test_a_stdio_host_with_roots_through_the_owner(roots_store, tmp_path):
    """Through the relay: the relay asks its host roots/list and sends the answer to the owner with each request."""
    a, b, other = _folder(tmp_path, "alpha"), _folder(tmp_path, "beta"), _folder(tmp_path, "other")
    env = _env(roots_store, AISAC_ROOTS=json.dumps([str(other)]))
    transport = StdioTransport(command=AISAC, args=["serve"], env=env, keep_alive=False)
    current = [f"file://{a}"]
    async with Client(transport, mode="legacy", roots=lambda _ctx: list(current)) as c:
        assert not (await _load(c, a))[0]
        err, text = await _load(c, other)
        assert err and "outside" in text.lower(), text
        current[:] = [f"file://{b}"]
        await c.send_roots_list_changed()
        await anyio.sleep(0.5)
        assert not (await _load(c, b))[0]
        assert (await _load(c, a))[0]
    # a second host on the same owner without the capability keeps AISAC_ROOTS
    transport = StdioTransport(command=AISAC, args=["serve"], env=env, keep_alive=False)
    async with Client(transport, mode="legacy") as c:
        assert not (await _load(c, other))[0]
        assert (await _load(c, b))[0]


async def test_the_typescript_sdk_as_a_host_with_roots(roots_store, tmp_path, corpus_copy):
    """The TypeScript SDK as a host: its roots honoured and followed, and a call it cancels (AbortController, which
    sends notifications/cancelled) on the record as cancelled (issue 42, acceptances 1 and 2)."""
    from test_cancelled_calls import _assert_cancelled, _events
    from test_tasks import _big_corpus

    if shutil.which("node") is None or not (INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.skip("Node.js or tests/interop/node_modules missing (test_interop.py installs them with npm ci)")
    a, b, other = _folder(tmp_path, "alpha"), _folder(tmp_path, "beta"), _folder(tmp_path, "other")
    big = _big_corpus(corpus_copy, tmp_path / "big", copies=3)
    env = _env(roots_store, AISAC_ROOTS=json.dumps([str(other)]))
    out = await anyio.to_thread.run_sync(
        lambda: subprocess.run(
            ["node", str(INTEROP / "sdk_roots.mjs"), AISAC, str(a), str(b), str(big)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=INTEROP,
        )
    )
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert out.returncode == 0 and lines and all(x["ok"] for x in lines), out.stdout[-3000:] + out.stderr[-2000:]
    assert len(lines) == 5
    transport = StdioTransport(command=AISAC, args=["serve"], env=env, keep_alive=False)
    async with Client(transport, mode="legacy") as c:
        with anyio.fail_after(60):
            while not (events := await _events(c, "run-ts-cancelled")):
                await anyio.sleep(0.2)
        _assert_cancelled(events[0])
        verified = (await c.call_tool("trace_verify", {"run_id": "run-ts-cancelled"})).structured_content
        assert not verified["gap"]["detail"], verified["gap"]
