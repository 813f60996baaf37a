"""The host's view of the suite: tool profiles, the tools/list token budget, annotations and typed output schemas,
composed instructions, the generated tool reference, and the run id rule.

Tokens are counted with the tokenizer the memory server counts its budgets with
(:func:`aisac_core.memory.count_tokens`: the bundled all-MiniLM-L6-v2 WordPiece tokenizer, loaded offline, no
special tokens). WordPiece splits JSON punctuation finely, so these counts are higher than a host model's BPE
count of the same text: the budgets are conservative.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from aisac_core.memory import count_tokens
from aisac_core.tool_profiles import CORE_TOOLS, ToolProfileError, resolve
from aisac_core.trace.replay import SPEC_DEFAULT_HINTS

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]
BUDGET = {"core": 5_000, "full": 12_000}
INSTRUCTIONS_BUDGET = 300
HINTS = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _suite(app, tools):  # noqa: ANN001, ANN202
    from aisac_servers.serving.suite import build

    return build(app=app, lifespan=False, tools=tools)


async def _listing(app, tools: str):  # noqa: ANN001, ANN202
    from aisac_servers.serving.tooldoc import payload_text

    async with Client(_suite(app, tools)) as c:
        listed = (await c.list_tools_mcp()).tools
        return listed, payload_text(listed), c.instructions


@pytest.mark.parametrize("profile", ["core", "full"])
async def test_tools_list_fits_the_token_budget(fast_core, profile):
    """Acceptance: the tools/list JSON of the profile, over a real client, within its token budget."""
    tools, text, _ = await _listing(fast_core, profile)
    (tokens,) = count_tokens(fast_core.embedder, [text])
    print(f"\nprofile {profile}: {len(tools)} tools, {len(text.encode())} bytes, {tokens} tokens (MiniLM WordPiece)")
    assert tokens <= BUDGET[profile], f"{profile}: {tokens} tokens > {BUDGET[profile]} ({len(text.encode())} bytes)"


@pytest.mark.parametrize("profile", ["all"])
async def test_the_whole_list_is_measured(fast_core, profile):
    """``all`` lists every tool flat: no budget (it is for hosts with their own tool selection), but measured."""
    tools, text, _ = await _listing(fast_core, profile)
    (tokens,) = count_tokens(fast_core.embedder, [text])
    print(f"\nprofile {profile}: {len(tools)} tools, {len(text.encode())} bytes, {tokens} tokens (MiniLM WordPiece)")
    assert len(tools) >= 55


async def test_every_tool_has_annotations_and_a_typed_output_schema(fast_core):
    """Every tool declares the five annotation fields (title and the four hints) and an output schema with
    properties; the listed (compact) form keeps a title, the hints that differ from the specification's defaults
    and the output schema's top-level keys. ``tools_call`` returns the result of the tool it calls: no schema of
    its own."""
    from aisac_servers.serving.suite import build

    server = build(app=fast_core, lifespan=False, catalog=True)
    declared = await server.list_tools(run_middleware=False)
    missing: dict[str, list[str]] = {}
    for t in declared:
        ann = t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else {}
        lacks = [h for h in HINTS if h not in ann]
        if t.name != "tools_call" and not (t.output_schema or {}).get("properties"):
            lacks.append("outputSchema.properties")
        if lacks:
            missing[t.name] = lacks
    assert not missing, f"{len(missing)} of {len(declared)} tools lack: " + json.dumps(missing, indent=0)
    assert len(declared) >= 55
    async with Client(server) as c:
        listed = {t.name: t for t in (await c.list_tools_mcp()).tools}
    assert set(listed) == {t.name for t in declared}
    for t in declared:
        wire = listed[t.name]
        assert wire.title and wire.annotations is not None, t.name
        w = wire.annotations.model_dump(by_alias=True, exclude_none=True)
        for h in HINTS[1:]:  # a hint left out on the wire is the specification's default: it must agree
            declared_h = getattr(t.annotations, h)
            if declared_h is not None and not (w.get("readOnlyHint") and h in ("destructiveHint", "idempotentHint")):
                assert w.get(h, SPEC_DEFAULT_HINTS[h]) == declared_h, (t.name, h)
        if t.name != "tools_call":
            assert set(wire.output_schema["properties"]) == set(t.output_schema["properties"]), t.name


async def test_full_lists_core_and_finds_the_rest(fast_core):
    """``full``: the core tools and the two catalog tools are listed; every other tool is found by tools_search
    and runs by name or through tools_call, recorded in the trace under its own name."""
    from sqlmodel import Session, select

    from aisac_core.store.tables import TraceEvent

    listed, _, _ = await _listing(fast_core, "full")
    core = {n for names in CORE_TOOLS.values() for n in names}
    assert {t.name for t in listed} == core | {"tools_search", "tools_call"}
    async with Client(_suite(fast_core, "full")) as c:
        found = (await c.call_tool("tools_search", {"query": "remove a document from the index"})).structured_content
        names = [t["name"] for t in found["result"]]
        assert "rag_remove" in names and len(names) <= 5, names
        hit = next(t for t in found["result"] if t["name"] == "rag_remove")
        assert hit["annotations"]["destructiveHint"] if "destructiveHint" in hit["annotations"] else True
        stats = await c.call_tool("tools_call", {"name": "trace_stats", "arguments": {}})
        assert not stats.is_error
        direct = await c.call_tool("memory_list_sessions", {})  # not listed, still callable by name
        assert "sessions" in direct.structured_content
        via = await c.call_tool("tools_call", {"name": "memory_list_sessions", "arguments": {"limit": 3}})
        assert not via.is_error
        with Session(fast_core.engine) as s:
            tools = [e.tool for e in s.exec(select(TraceEvent).order_by(TraceEvent.id)).all()]
        with pytest.raises(ToolError):
            await c.call_tool("tools_call", {"name": "no_such_tool", "arguments": {}})
    assert tools.count("memory_list_sessions") == 2 and "tools_call" in tools  # the inner call under its own name


async def test_profiles_expose_what_they_name(fast_core):
    core, _, _ = await _listing(fast_core, "core")
    assert {t.name for t in core} == {n for names in CORE_TOOLS.values() for n in names}
    two, _, _ = await _listing(fast_core, "rag,memory")
    assert {t.name.split("_", 1)[0] for t in two} == {"rag", "memory"} and len(two) > len(core) - 2
    mixed, _, _ = await _listing(fast_core, "core,trace")
    assert "trace_list_runs" in {t.name for t in mixed} and "roles_plan" not in {t.name for t in mixed}
    async with Client(_suite(fast_core, "core")) as c:
        # hidden: not listed and not callable; an unknown tool is a protocol error (-32602, MCP "Tools")
        with pytest.raises(MCPError, match="unknown tool") as err:
            await c.call_tool("rag_remove", {"doc_id": "x"})
        assert err.value.code == -32602
        uris = [str(r.uri) for r in await c.list_resources()] + [
            r.uri_template for r in await c.list_resource_templates()
        ]
        assert not [u for u in uris if u.startswith(("aisac://lit/", "aisac://data/"))]  # servers not mounted
        prompts = [p.name for p in await c.list_prompts()]
        assert all(p.split("_", 1)[0] in CORE_TOOLS for p in prompts)


def test_bad_profile_names_the_accepted_values():
    with pytest.raises(ToolProfileError) as ei:
        resolve("core,nope", ["rag", "memory", "lit"])
    assert "nope" in str(ei.value) and "core, full, all" in str(ei.value) and "rag, memory, lit" in str(ei.value)
    with pytest.raises(ToolProfileError, match="comma"):
        resolve("co re", ["rag"])
    assert resolve(None, ["rag", "lit"]).is_full and resolve("all", ["rag"]).servers == ("rag",)
    full = resolve("full", ["rag", "lit"])
    assert full.search and not full.is_full and full.allows("lit_search") and not full.lists("lit_search")
    assert full.lists("rag_search") and full.lists("tools_search") and not resolve("core", ["rag"]).allows("tools_call")


def test_serve_refuses_a_bad_tools_value(tmp_path):
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "aisac_servers.cli", "serve", "--tools", "core,bogus", "--no-owner"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"AISAC_DATA_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode != 0 and "bogus" in res.stderr and "core, full, all" in res.stderr, res.stderr[-2000:]


@pytest.mark.parametrize("profile", ["core", "full"])
async def test_instructions_are_composed_from_the_mounted_servers(fast_core, profile):
    _, _, text = await _listing(fast_core, profile)
    (tokens,) = count_tokens(fast_core.embedder, [text])
    print(f"\ninstructions of {profile}: {tokens} tokens")
    assert tokens <= INSTRUCTIONS_BUDGET, text
    assert "[rag]" in text and "anchor" in text and "aisac/run_id" in text
    assert ("[lit]" in text) == (profile == "full")


def test_relay_filters_a_profile():
    """The stdio relay to the store's owner (which serves every tool) applies the profile itself."""
    from aisac_core.settings import Settings
    from aisac_core.tool_profiles import compose_instructions
    from aisac_servers.owner.relay import StdioRelay

    relay = StdioRelay(Settings(), profile=resolve("core", ["rag", "memory", "lit", "roles", "trace"]))
    listing = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "tools": [{"name": "rag_search"}, {"name": "rag_remove"}, {"name": "lit_search"}, {"name": "roles_run"}]
        },
    }
    assert [t["name"] for t in relay._filter("tools/list", listing)["result"]["tools"]] == ["rag_search", "roles_run"]
    assert relay._refused({"method": "tools/call", "params": {"name": "rag_remove"}})
    assert relay._refused({"method": "tools/call", "params": {"name": "rag_search"}}) is None
    assert relay._refused({"method": "prompts/get", "params": {"name": "roles_planner"}}) is None
    assert relay._refused({"method": "resources/read", "params": {"uri": "aisac://lit/x"}})
    init = {"jsonrpc": "2.0", "id": 0, "result": {"instructions": compose_instructions({"rag": "R", "lit": "L"})}}
    assert "[lit]" not in relay._filter("initialize", init)["result"]["instructions"]


async def test_tool_reference_and_hosts_profiles_are_current(fast_core):
    """docs/tools.md and the profiles block of docs/hosts.md are generated from the live tool list."""
    from aisac_servers.serving.tooldoc import REGENERATE, profiles_markdown, replace_block, tool_reference

    tools, _, _ = await _listing(fast_core, "all")
    hint = f"stale: regenerate with `{REGENERATE}` (from the repository root)"
    assert (REPO / "docs" / "tools.md").read_text(encoding="utf-8") == tool_reference(tools), "docs/tools.md " + hint
    hosts = (REPO / "docs" / "hosts.md").read_text(encoding="utf-8")
    assert replace_block(hosts, profiles_markdown([t.name for t in tools])) == hosts, "docs/hosts.md " + hint


def test_docs_name_the_run_with_meta_only():
    """The documented way to name a run is the request _meta (no schema declares a run_id argument)."""
    stale = ("accepts an extra `run_id` argument", "a `run_id` **tool argument**", "Every tool accepts it")
    for path in [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "project_templates").rglob("*.md")),
    ]:
        text = path.read_text(encoding="utf-8")
        for phrase in stale:
            assert phrase not in text, f"{path.relative_to(REPO)} still says {phrase!r}; document _meta aisac/run_id"
