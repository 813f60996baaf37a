"""Issue 42, acceptance 5: the figures and error codes the docs state match the code, so they cannot drift again.

Each check reads a statement from the docs (a regular expression over the Markdown) and compares it with what a real
MCP client (fastmcp, in memory, at both protocol eras) gets from the suite: the number of tools of the default and
``core`` profiles, the size of the ``tools/list`` answer, the JSON-RPC codes of an unknown tool or prompt and of a
resource that does not exist, and the quickstart's statement that the CLI goes through a running owner."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastmcp import Client
from mcp.shared.exceptions import MCPError

from aisac_servers.serving.suite import build

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[1]
HOSTS = (ROOT / "docs" / "hosts.md").read_text(encoding="utf-8")
QUICKSTART = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
#: tolerance of a size the docs round ("about 54 KB"): descriptions change a little with every release
SIZE_TOLERANCE = 0.10


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _all(pattern: str, text: str) -> list[tuple[str, ...]]:
    found = re.findall(pattern, _flat(text))
    assert found, f"the docs no longer state {pattern!r}: update this test with the docs"
    return [f if isinstance(f, tuple) else (f,) for f in found]


@pytest.fixture(scope="module")
async def measured(tmp_path_factory, models_dir):
    """What the suite answers: tool counts, the tools/list size, and the error codes at both protocol eras."""
    from conftest import make_settings

    from aisac_core.context import AppContext

    app = AppContext(make_settings(tmp_path_factory.mktemp("docs") / "store", models_dir))
    got: dict[str, object] = {}
    try:
        async with Client(build(app=app), mode="legacy") as c:
            listed = (await c.list_tools_mcp()).model_dump(mode="json", by_alias=True, exclude_none=True)
            got["tools"] = len(listed["tools"])
            got["bytes"] = len(json.dumps(listed, separators=(",", ":"), ensure_ascii=False).encode())
        async with Client(build(app=app, tools="core"), mode="legacy") as c:
            got["core"] = len(await c.list_tools())
        for mode, era in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
            async with Client(build(app=app), mode=mode) as c:
                codes = set()
                for uri in ("aisac://nothing/here", "aisac://documents/no-such-doc", "aisac://documents/nope/text"):
                    with pytest.raises(MCPError) as err:
                        await c.read_resource(uri)
                    codes.add(err.value.code)
                got[f"resource {era}"] = codes
                with pytest.raises(MCPError) as err:
                    await c.call_tool("no_such_tool", {})
                with pytest.raises(MCPError) as err2:
                    await c.get_prompt("no_such_prompt", {})
                got[f"unknown {era}"] = {err.value.code, err2.value.code}
    finally:
        app.close()
    return got


async def test_tool_counts_in_the_docs_match_the_suite(measured):
    for (n,) in _all(r"\ball (\d+) (?:tools|of the six servers)", HOSTS):
        assert int(n) == measured["tools"], f"docs say all {n} tools; the suite lists {measured['tools']}"
    for (n,) in _all(r"\((\d+) tools × \d+ tokens", HOSTS):
        assert int(n) == measured["tools"]
    core_counts = {int(n) for (n,) in _all(r"grounded Q&A, (\d+) tools", README + "\n" + CONFIGURATION)}
    assert core_counts == {measured["core"]}, (core_counts, measured["core"])
    words = {"eleven": 11, "twelve": 12, "ten": 10, "thirteen": 13}
    for (w,) in _all(r"the (ten|eleven|twelve|thirteen) (?:tools of grounded question answering|of `core`)", HOSTS):
        assert words.get(w) == measured["core"], f"docs say {w} core tools; core lists {measured['core']}"


async def test_the_tools_list_size_in_the_docs_matches(measured):
    ((kb, n),) = _all(r"With every tool listed it is about (\d+) KB \((\d+) tools", HOSTS)
    assert int(n) == measured["tools"]
    size = measured["bytes"] / 1000
    assert abs(size - int(kb)) <= SIZE_TOLERANCE * size, f"docs say about {kb} KB; tools/list is {size:.1f} KB"


async def test_error_codes_in_the_docs_match(measured):
    ((old, new),) = _all(
        r"a resource that does not exist \([^)]*\) is (-\d+) at 2025-11-25 and (-\d+) at 2026-07-28", HOSTS
    )
    assert measured["resource 2025-11-25"] == {int(old)}, measured
    assert measured["resource 2026-07-28"] == {int(new)}, measured
    ((code,),) = _all(r"an unknown tool or prompt, or a prompt's missing argument, is a JSON-RPC error (-\d+)", HOSTS)
    assert measured["unknown 2025-11-25"] == measured["unknown 2026-07-28"] == {int(code)}, measured


def test_the_quickstart_says_the_cli_goes_through_the_owner():
    """The CLI sends index, search, status and ask to a running owner (servers/cli/owner.py): the quickstart must
    not say they are blocked while it runs."""
    text = _flat(QUICKSTART)
    assert "stop with a message saying that the vector store is in use" not in text
    assert re.search(r"`aisac index`, `aisac search`, `aisac status` and `aisac ask` on the same data dir send", text)
    import importlib

    corpus = importlib.import_module("aisac_servers.cli.corpus")
    main = importlib.import_module("aisac_servers.cli.main")
    assert "index_via_owner" in Path(corpus.__file__).read_text()
    assert "status_via_owner" in Path(main.__file__).read_text()
