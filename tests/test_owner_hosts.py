"""Per-host settings on one owner: two stdio hosts with other roots and tool profiles on one store at the same
time, each loading from its own roots, refused the other's, listing its own profile; a user-started HTTP owner's
``--tools`` profile does not leak into what a stdio host sees. Real ``aisac serve`` processes, a real owner."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from conftest import stop_process
from mcp.shared.exceptions import MCPError
from test_owner import AISAC, owned_store, owner_info, serve_env, stdio  # noqa: F401 - owned_store is a fixture

pytestmark = pytest.mark.anyio


def _folder(base: Path, name: str) -> Path:
    d = base / name
    d.mkdir(parents=True)
    (d / f"{name}.csv").write_text("x,y\n1,2\n3,4\n", encoding="utf-8")
    return d


async def test_two_hosts_with_their_own_roots_and_profiles(owned_store, tmp_path):  # noqa: F811
    a_dir, b_dir = _folder(tmp_path, "alpha"), _folder(tmp_path, "beta")
    host_a = stdio(owned_store, "--tools", "all", AISAC_ROOTS=json.dumps([str(a_dir)]))
    host_b = stdio(owned_store, "--tools", "core,data", AISAC_ROOTS=json.dumps([str(b_dir)]))
    async with host_a as a, host_b as b:
        names_a = {t.name for t in await a.list_tools()}
        names_b = {t.name for t in await b.list_tools()}
        assert len(names_a) >= 55 and "lit_search" in names_a and "tools_search" not in names_a
        assert "data_load" in names_b and "rag_search" in names_b and "lit_search" not in names_b
        # both at once: each host's roots hold for its own calls
        async with anyio.create_task_group() as tg:
            for c, d, name in ((a, a_dir, "alpha"), (b, b_dir, "beta")):
                tg.start_soon(c.call_tool, "data_load", {"path": str(d / f"{name}.csv"), "name": name})
        for c, other in ((a, b_dir / "beta.csv"), (b, a_dir / "alpha.csv")):
            r = await c.call_tool("data_load", {"path": str(other), "name": "other"}, raise_on_error=False)
            assert r.is_error and "outside" in r.content[0].text.lower(), r.content[0].text
        # an unknown tool (outside the host's profile) is a protocol error, -32602 (MCP "Tools", error handling)
        with pytest.raises(MCPError, match="unknown tool") as err:
            await b.call_tool("lit_search", {"query": "x"})
        assert err.value.code == -32602
        listed = (await a.call_tool("data_list", {})).structured_content
        assert {"alpha", "beta"} <= {f["name"] for f in listed["frames"]}, listed
    assert owner_info(owned_store)["kind"] == "daemon"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_http_owner_profile_does_not_change_a_stdio_hosts_view(owned_store):  # noqa: F811
    port = _free_port()
    proc = subprocess.Popen(
        [AISAC, "serve", "--transport", "http", "--tools", "core", "--port", str(port)],
        env=serve_env(owned_store),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not (owned_store / "owner.json").exists() and time.monotonic() < deadline and proc.poll() is None:
            await anyio.sleep(0.2)
        assert owner_info(owned_store)["kind"] == "http"
        from fastmcp import Client

        token = owner_info(owned_store)["token"]  # every TCP listener needs its token (issue 30)
        async with Client(f"http://127.0.0.1:{port}/mcp", auth=token) as direct:  # the owner's own clients: its profile
            direct_names = {t.name for t in await direct.list_tools()}
            assert direct_names and "lit_search" not in direct_names and "rag_search" in direct_names
        async with stdio(owned_store, "--tools", "all") as c:
            names = {t.name for t in await c.list_tools()}
            assert len(names) >= 55 and "lit_search" in names, len(names)
        async with stdio(owned_store, "--tools", "full") as c:
            names = {t.name for t in await c.list_tools()}
            assert "tools_search" in names and "lit_search" not in names
            found = await c.call_tool("tools_search", {"query": "search scholarly literature"})
            assert not found.is_error
    finally:
        stop_process(proc)


def test_the_stdio_relay_path_imports_no_mcp_library_no_suite_and_no_httpx():
    """What `aisac serve` loads before its relay answers from the answer catalogue: the command line, the settings and
    the relay, but no MCP library, no suite or store layer, and no httpx (loaded once the catalogue has answered)."""
    import sys

    modules = ("aisac_servers.cli.main", "aisac_servers.owner.daemon", "aisac_servers.base.builtin")
    heavy = ("fastmcp", "mcp", "httpx", "sqlalchemy", "numpy", "aisac_servers.serving", "aisac_core.rag")
    code = f"import sys, {', '.join(modules)}; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


async def test_a_relay_lists_from_the_answer_catalogue_while_the_owner_starts(owned_store):  # noqa: F811
    """After a first host, the store keeps the owner's listing answers: the next host, with no owner running, gets
    initialize and tools/list from them (its profile applied) and its first call once the owner is up."""
    from aisac_core.owner import stop_owner

    async with stdio(owned_store) as c:
        every = {t.name for t in await c.list_tools()}
    assert (owned_store / "answer-catalog.json").exists()
    await anyio.to_thread.run_sync(stop_owner, owned_store)
    assert not (owned_store / "owner.json").exists()
    async with stdio(owned_store, "--tools", "core") as c:
        names = {t.name for t in await c.list_tools()}
        assert names and names < every and "rag_search" in names and "lit_search" not in names
        r = await c.call_tool("rag_list_documents", {})  # answered by the owner started in the background
        assert not r.is_error
    assert owner_info(owned_store)["kind"] == "daemon"


async def test_two_hosts_with_their_own_memory_scopes(owned_store):  # noqa: F811
    """Each host's AISAC_MEMORY_SCOPE (a per-host setting its relay sends with every request) is the default scope of
    its memory calls on the shared owner: its new sessions carry its participant, and its recalls and searches stay
    within its own history."""
    host_a = stdio(owned_store, AISAC_MEMORY_SCOPE='{"participant": "alice"}')
    host_b = stdio(owned_store, AISAC_MEMORY_SCOPE='{"participant": "carol"}')
    async with host_a as a, host_b as b:
        mine: dict[str, set[int]] = {}
        for c, who in ((a, "alice"), (b, "carol")):
            ses = (await c.call_tool("memory_start_session", {"title": who})).structured_content
            assert ses["participant"] == who
            mine[who] = set()
            for role, text in (("user", f"{who} ran the lipase assay"), ("assistant", "the lipase assay looks fine")):
                got = await c.call_tool(
                    "memory_add_turn", {"session_id": ses["session_id"], "role": role, "content": text}
                )
                mine[who].add(got.structured_content["turn_id"])
        for c, who in ((a, "alice"), (b, "carol")):
            asker = (await c.call_tool("memory_start_session", {"title": "asker"})).structured_content["session_id"]
            res = (
                await c.call_tool("memory_recall", {"session_id": asker, "query": "lipase assay", "k": 10, "last_n": 0})
            ).structured_content
            assert {t["turn_id"] for r in res["related"] for t in r["turns"]} == mine[who]
            assert res["scope"] == {"participant": who}
            hits = (await c.call_tool("memory_search", {"query": "lipase assay"})).structured_content["hits"]
            assert {t["turn_id"] for h in hits for t in h["turns"]} == mine[who]
