"""The live trace dashboard: pages over HTTP (in-process ASGI and a real uvicorn server), server-sent events,
the /dashboard routes of `aisac serve --transport http`, and a real headless browser (Debian chromium driven by
Playwright): open a run, expand a tool call, see an evidence card, save a screenshot, live update without reload."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import chromium_browser, http_server, stop_process


def _record(
    core, run_id, tool, *, result=None, status="ok", kind="tool_call", parent_id=None, server=None, arguments=None
) -> int:
    from aisac_core.trace.recorder import record_tool_call

    return record_tool_call(
        core.engine,
        run_id=run_id,
        server=server or tool.split("_", 1)[0],
        tool=tool,
        arguments=arguments or {"query": tool},
        result=result if status == "ok" else None,
        status=status,
        error=None if status == "ok" else "k must be an integer from 1 to 100",
        latency_ms=2.5,
        kind=kind,
        parent_id=parent_id,
    )


def _roles_run(core, run: str, hits: list[dict]) -> dict[str, int]:
    """A run shaped like the roles server's: router -> planner -> tool calls, evaluator critiques, one failure."""
    ids = {}
    ids["router"] = _record(
        core,
        run,
        "router",
        kind="role_step",
        server="roles",
        result={"route": "rag", "reason": "needs the indexed papers", "confidence": 0.9},
    )
    ids["planner"] = _record(
        core,
        run,
        "planner",
        kind="role_step",
        server="roles",
        parent_id=ids["router"],
        result={
            "plan": {
                "steps": [
                    {"title": "find stability evidence", "steps": [{"title": "search perovskite humidity"}]},
                    {"title": "summarise"},
                ]
            }
        },
    )
    ids["search"] = _record(
        core,
        run,
        "rag_search",
        parent_id=ids["planner"],
        arguments={"query": "perovskite humidity", "k": 3},
        result={"hits": hits, "count": len(hits), "mode": "hybrid", "took_ms": 4.0},
    )
    ids["bad"] = _record(core, run, "rag_search", status="tool_error", arguments={"query": "x", "k": 0})
    ids["evaluator"] = _record(
        core,
        run,
        "evaluator",
        kind="role_step",
        server="roles",
        result={
            "critiques": [
                {"severity": "high", "message": "claim lacks a citation"},
                {"severity": "low", "message": "units not stated"},
            ]
        },
    )
    return ids


FAKE_HIT = {
    "chunk_id": "11111111-1111-1111-1111-111111111111",
    "title": "Stability report",
    "path": "/gone/report.pdf",
    "page": 1,
    "section": "results",
    "text": "Encapsulated perovskite cells kept 90 % after 1000 h.",
    "score": 0.8123,
    "anchor": {
        "chunk_id": "11111111-1111-1111-1111-111111111111",
        "doc_id": "d1",
        "path": "/gone/report.pdf",
        "sha256": "0" * 64,
        "section": "results",
        "page": 1,
        "char_span": [0, 50],
        "chunk_sha256": "1" * 64,
        "score": 0.8123,
    },
}


@pytest.mark.anyio
async def test_pages_render_every_part(fast_core):
    from aisac_core.trace.dashboard import create_app

    run = "run-dash"
    ids = _roles_run(fast_core, run, [FAKE_HIT])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(fast_core.trace)), base_url="http://t"
    ) as h:
        home = await h.get("/")
        assert home.status_code == 200 and run in home.text and "1 errors" in home.text
        assert "perovskite humidity" in home.text  # the run's question (its first search query: no roles task)
        filtered = await h.get("/", params={"status": "ok"})
        assert run not in filtered.text
        page = (await h.get("/run", params={"id": run})).text
        # the question, errors, evaluation, plan, router, timeline, retrieved passages, steps
        order = [
            page.index(x)
            for x in (
                "id=question",
                "id=errors",
                "id=critiques",
                "id=plan",
                "id=router",
                "id=timeline",
                "id=retrieved",
                "id=steps",
            )
        ]
        assert order == sorted(order)
        assert "<h1 class=question id=question>perovskite humidity</h1>" in page
        assert "needs the indexed papers" in page
        assert "<ol><li>find stability evidence<ol><li>search perovskite humidity</li></ol></li><li>summarise" in page
        assert page.count('class="node"') == 3  # the plan DAG: two steps and a sub-step
        assert page.count('class="bar"') == 5  # the waterfall: one bar per event
        assert "sev-high" in page and "claim lacks a citation" in page
        assert f"data-chunk='{FAKE_HIT['chunk_id']}'" in page and "Stability report" in page and "0.812" in page
        assert "v-missing" in page  # verified when the page is rendered: the file is gone
        assert f"id='ev-{ids['search']}'" in page and "k must be an integer" in page
        # nesting: the search is inside the planner, inside the router
        r0 = page.index(f"id='ev-{ids['router']}'")
        assert r0 < page.index(f"id='ev-{ids['planner']}'") < page.index(f"id='ev-{ids['search']}'")
        v = (await h.get("/run/verify", params={"id": run})).json()
        assert v["anchors"][0]["status"] == "missing"
        ev = (await h.get("/event", params={"id": ids["search"]})).json()
        assert ev["result"]["hits"][0]["chunk_id"] == FAKE_HIT["chunk_id"]
        assert (await h.get("/run", params={"id": "nope"})).status_code == 404
        assert (await h.get("/event", params={"id": "x"})).status_code == 404
        frag = (await h.get("/run/fragment", params={"id": run})).text
        assert frag.startswith("<div id=body data-last-id=")


@contextlib.contextmanager
def serve_dashboard(core, token: str | None = None):  # noqa: ANN001, ANN201
    """The dashboard on a real uvicorn server in a thread, on a free loopback port; yields its base URL. With
    ``token``, behind :class:`~aisac_core.security.DashboardGuard` as ``aisac dashboard`` serves it (the token, the
    loopback checks and the Content-Security-Policy): open ``{base}/?token=...`` first, or send it as a bearer."""
    import uvicorn

    from aisac_core.security import DashboardGuard
    from aisac_core.trace.dashboard import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(core.trace) if token is None else DashboardGuard(create_app(core.trace), token),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=1,
        )
    )
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        t.join(10)


def test_server_sent_events_announce_new_events(fast_core):
    run = "run-sse"
    first = _record(fast_core, run, "rag_search")
    with serve_dashboard(fast_core) as base:
        with httpx.Client(timeout=10) as h:
            with h.stream("GET", f"{base}/run/stream", params={"id": run, "after": first}) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                lines = r.iter_lines()
                assert next(lines).startswith(": aisac trace") and next(lines).startswith("retry:")
                new = _record(fast_core, run, "rag_get_chunk")
                got = []
                for line in lines:
                    got.append(line)
                    if line.startswith("data:"):
                        break
    assert got[-2] == "event: update" and f'"last_id": {new}' in got[-1]


def test_dashboard_under_http_transport(tmp_path, models_dir):
    """`aisac serve --transport http` serves the dashboard under /dashboard next to /mcp."""
    import anyio
    from conftest import make_settings
    from fastmcp import Client

    data_dir = tmp_path / "store"
    make_settings(data_dir, models_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1", AISAC_WARM="0")
    with http_server(env) as url:

        async def call() -> None:
            async with Client(url) as c:
                await c.call_tool("rag_list_documents", {}, meta={"run_id": "run-over-http"})

        anyio.run(call)
        base = url.rsplit("/mcp", 1)[0]
        home = httpx.get(f"{base}/dashboard", timeout=10)
        assert home.status_code == 200 and "run-over-http" in home.text
        page = httpx.get(f"{base}/dashboard/run", params={"id": "run-over-http"}, timeout=10)
        assert page.status_code == 200 and "rag_list_documents" in page.text
        assert "/dashboard/run/stream?id=run-over-http" in page.text


# ---------------------------------------------------------------------------------------------- browser


def test_browser_run_page_expand_evidence_live(fast_core, corpus_copy, chromium, tmp_path):
    from fixtures_gen import PAGE_MARKERS
    from playwright.sync_api import expect

    fast_core.rag.indexer.run([corpus_copy / "report.pdf"])
    hits = [h.as_dict() for h in fast_core.rag.search(PAGE_MARKERS[1], 2).hits]
    run = "run-browser"
    ids = _roles_run(fast_core, run, hits)
    with serve_dashboard(fast_core) as base, chromium_browser(chromium) as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 1600})
        page.goto(f"{base}/")
        row = page.locator(f"tr[data-run='{run}']")
        expect(row.locator("td.q a")).to_have_text("perovskite humidity")  # the run's question links the run
        row.locator("td.q a").click()
        page.wait_for_url("**/run?id=run-browser")
        expect(page.locator("#live")).to_have_text("● live", timeout=10_000)
        page.evaluate("window.__noReload = 42")

        # expand a tool call: its arguments become visible
        entry = page.locator(f"#ev-{ids['search']}")
        args = entry.locator(".args").first
        expect(args).to_be_hidden()
        page.locator(f"#ev-{ids['router']} > summary").click()
        page.locator(f"#ev-{ids['planner']} > summary").click()
        entry.locator("> summary").click()
        expect(args).to_be_visible()
        expect(args).to_contain_text("perovskite humidity")  # formatted: a definition list, not raw JSON
        expect(args.locator("dt", has_text="query")).to_be_visible()

        # evidence card with text, source, page, score and the verify badge filled in
        card = page.locator(f"[data-chunk='{hits[0]['chunk_id']}']")
        expect(card).to_be_visible()
        expect(card).to_contain_text("perovskite")
        expect(card).to_contain_text("page 1")
        expect(card.locator(".verify")).to_have_text("anchor: intact")  # checked when the page was rendered
        expect(page.locator("#critiques .sev-high")).to_be_visible()
        page.screenshot(path=str(tmp_path / "run.png"), full_page=True)
        assert (tmp_path / "run.png").stat().st_size > 10_000

        # live update: a new event written while the page is open appears without a reload,
        # and the expanded entry stays open
        new = _record(fast_core, run, "rag_get_chunk", arguments={"chunk_id": hits[0]["chunk_id"]})
        expect(page.locator(f"#ev-{new}")).to_be_visible(timeout=15_000)
        assert page.evaluate("window.__noReload") == 42
        expect(page.locator(f"#ev-{ids['search']} .args").first).to_be_visible()
        page.screenshot(path=str(tmp_path / "run-live.png"), full_page=True)


@pytest.mark.anyio
async def test_roles_run_rendered(fast_core, corpus_copy):
    """A real roles run (llm=none: deterministic rules) traced through the suite: the run page shows the router
    decision, the plan outline (when the router planned), the answer, and the tool calls the coordinator made under
    its step."""
    from fastmcp import Client

    from aisac_core.trace.dashboard import create_app
    from aisac_servers.serving.suite import build

    if "roles" not in __import__("aisac_servers.serving.suite", fromlist=["SERVERS"]).SERVERS:
        pytest.skip("the roles server is not present")
    fast_core.rag.indexer.run([corpus_copy / "notes"])
    async with Client(build(app=fast_core, lifespan=False)) as c:
        out = (
            await c.call_tool("roles_run", {"task": "What is the Km of the lipase?", "llm": "none", "wait_s": 120})
        ).structured_content
        assert out["status"] == "done", out
        run = out["run_id"]
        tree = (await c.call_tool("trace_get_run", {"run_id": run, "detail": "full"})).structured_content
    kinds = {e["kind"] for e in _flat(tree["tree"])}
    assert "role_step" in kinds
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(fast_core.trace)), base_url="http://t"
    ) as h:
        page = (await h.get("/run", params={"id": run})).text
    assert "id=router" in page and "id=steps" in page and "decision" in page
    if any(e["tool"] == "planner" for e in _flat(tree["tree"])):
        assert "id=plan" in page
    if any(e["tool"] == "researcher" for e in _flat(tree["tree"])):
        assert "id=answer" in page
    # the coordinator's tool calls sit under its step
    coord = next(e for e in _flat(tree["tree"]) if e["tool"] == "coordinator")
    assert any(ch["kind"] == "tool_call" for ch in coord["children"])


def _flat(nodes):
    out = []
    for n in nodes:
        out.append(n)
        out += _flat(n["children"])
    return out


def test_plan_dag_and_numeric_severity_render():
    from aisac_core.trace.dashboard import render_run

    def ev(i, tool, result, kind="role_step", parent=None):
        return {
            "id": i,
            "kind": kind,
            "server": "roles",
            "tool": tool,
            "status": "ok",
            "error": None,
            "latency_ms": 1.0,
            "started_at": "2026-01-01T00:00:00+00:00",
            "arguments": {},
            "arguments_sha256": "0" * 64,
            "result_sha256": "1" * 64,
            "result_summary": "",
            "result": result,
            "parent_id": parent,
            "children": [],
        }

    plan = {
        "steps": [
            {"id": "s1", "goal": "search the notes", "tool": "rag_search", "depends_on": []},
            {"id": "s2", "goal": "write the answer", "helper": "researcher", "depends_on": ["s1"]},
        ]
    }
    crit = {
        "critiques": [
            {"aspect": "grounding", "text": "one claim uncited", "severity": 0.8},
            {"aspect": "clarity", "text": "fine", "severity": 0.1},
        ]
    }
    data = {
        "run": {
            "active": False,
            "events": 2,
            "by_kind": {"role_step": 2},
            "started_at": "2026-01-01T00:00:00",
            "duration_s": 1,
            "servers": ["roles"],
        },
        "errors": [],
        "last_id": 2,
        "tree": [ev(1, "planner", plan), ev(2, "evaluator", crit)],
    }
    html_ = render_run(data)
    assert "<ol><li>s1: search the notes <span class=badge>tool: rag_search</span><ol><li>s2: write the answer" in html_
    assert "sev-high'>high 0.80</span> <span class=badge>grounding</span> one claim uncited" in html_
    assert "sev-low'>low 0.10" in html_
    assert html_.count('class="node"') == 2 and html_.count('class="edge"') == 1  # the DAG diagram


def test_aisac_dashboard_command(tmp_path):
    """`aisac dashboard` serves the run list on loopback and refuses another bind address."""
    import subprocess
    import sys

    aisac = str(Path(sys.executable).parent / "aisac")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(tmp_path / "store"), HF_HUB_OFFLINE="1")
    bad = subprocess.run([aisac, "dashboard", "--host", "0.0.0.0"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "loopback" in bad.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env["AISAC_HTTP_TOKEN"] = "dashboard-token-" + "y" * 32  # issue 30: the dashboard requires a token
    proc = subprocess.Popen(
        [aisac, "dashboard", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        text = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/", params={"token": env["AISAC_HTTP_TOKEN"]}, timeout=2)
                text = r.text
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert text is not None and "No runs yet" in text, proc.stderr.read().decode() if proc.poll() else text
    finally:
        stop_process(proc)


def test_standalone_verify_never_opens_the_vector_store(fast_core, corpus_copy):
    """`aisac dashboard` checks evidence by file hash only: the vector store (locked to its owner) stays closed."""
    from fixtures_gen import PAGE_MARKERS
    from starlette.testclient import TestClient

    from aisac_core.trace.dashboard import create_app

    fast_core.rag.indexer.run([corpus_copy / "report.pdf"])
    hits = [h.as_dict() for h in fast_core.rag.search(PAGE_MARKERS[1], 2).hits]
    _roles_run(fast_core, "run-standalone", hits)
    fast_core.close()  # releases the vector store, as in a process that never opened it
    assert fast_core._vectors is None
    with TestClient(create_app(fast_core.trace)) as h:
        v = h.get("/run/verify", params={"id": "run-standalone"}).json()
        assert v["anchors"] and {a["status"] for a in v["anchors"]} == {"unchanged"} and fast_core._vectors is None
        pdf = corpus_copy / "report.pdf"
        pdf.write_bytes(pdf.read_bytes() + b"\n% edited\n")
        v = h.get("/run/verify", params={"id": "run-standalone"}).json()
        assert {(a["status"], a["anchor_status"]) for a in v["anchors"]} == {("changed", "file_changed")}
    assert fast_core._vectors is None
