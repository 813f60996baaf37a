"""Run reports a scientist looks at: a real roles run over the project's own PDF, then the run list, the run page in
real Chromium (question, answer whose [1] scrolls to its card, the passage highlighted on the PDF page image, the
waterfall, the plan DAG), the Markdown export (question and answer first, cited evidence only) and the HTML export
opened from disk with the network cut off. Screenshots go to ``test-artifacts/dashboard/``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import httpx
import pytest
from conftest import chromium_browser
from test_dashboard import serve_dashboard

from aisac_core.trace.runpage import CSS

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "dashboard"
QUESTION = "How much efficiency did perovskite cells without encapsulation lose at 85 percent relative humidity?"


@pytest.fixture
def roles_run(fast_core, corpus_copy):  # noqa: ANN001, ANN201
    """A real roles run (llm=none) through the suite over report.pdf and the notes; returns (core, run id, report)."""
    import anyio
    from fastmcp import Client

    from aisac_core.trace.queries import RunQueries
    from aisac_core.trace.report import run_report
    from aisac_servers.serving.suite import build

    fast_core.rag.indexer.run([corpus_copy / "report.pdf", corpus_copy / "notes"])

    async def ask() -> str:
        async with Client(build(app=fast_core, lifespan=False)) as c:
            # lite mode: the precise extractive answer cites the one passage that states the figure (the corpus has
            # no second one), and the report under test is that of a run that passed its gates
            args = {"task": QUESTION, "llm": "none", "mode": "lite", "wait_s": 120}
            out = (await c.call_tool("roles_run", args)).structured_content
        assert out["status"] == "done", out
        return out["run_id"]

    run = anyio.run(ask)
    report = run_report(RunQueries(fast_core.engine).get_run(run, include_results=True))
    assert report["question"] == QUESTION and report["answer"] and report["cited"]
    assert report["cited"][0]["path"].endswith("report.pdf") and report["cited"][0]["page"] == 1
    return fast_core, run, report


def test_report_separates_cited_from_retrieved(roles_run) -> None:  # noqa: ANN001
    _core, _run, r = roles_run
    cited = {c["chunk_id"] for c in r["cited"]}
    assert [c["n"] for c in r["cited"]] == sorted(c["n"] for c in r["cited"])
    assert not cited & {c["chunk_id"] for c in r["retrieved"]}
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", r["answer"]["text"])}
    assert markers <= {c["n"] for c in r["cited"]}
    assert r["verdict"]["label"] == "automatic checks passed" and not r["verdict"]["content_judged"]
    assert r["timeline"] and all(t["duration_ms"] >= 0 and t["start_ms"] >= 0 for t in r["timeline"])


def test_markdown_export_leads_with_question_and_answer(roles_run) -> None:  # noqa: ANN001
    core, run, r = roles_run
    md = core.trace.export(run, "markdown")["markdown"]
    q, a, ev, steps = (md.index(x) for x in (f"**Question:** {QUESTION}", "## Answer", "## Evidence", "## Steps"))
    assert q < a < ev < steps
    assert r["answer"]["text"].strip() in md  # the full answer, not a cut
    table = md[ev : md.index("\n\n", ev + 12)]
    rows = [ln for ln in table.splitlines() if re.match(r"\| \d+ \|", ln)]
    assert len(rows) == len(r["cited"])  # cited evidence only
    assert all("intact" in ln for ln in rows)
    for c in r["retrieved"]:
        assert (c["text"] or "")[:60] not in table
    assert "content: not judged (no model)" in md


def _highlight_inside_image(page, card, anchor=None) -> None:  # noqa: ANN001
    """The card's page image loaded and its highlights lie on it; with ``anchor`` (the cited passage's
    :class:`~aisac_core.trace.pageimage.PageImage`), each highlight's box in the browser is the anchor's box on the
    page image, scaled to the image's displayed size, within 2 px."""
    img = card.locator(".page img")
    assert page.evaluate("(i) => i.complete && i.naturalWidth > 0", img.element_handle())  # the PNG loaded
    ib = img.bounding_box()
    boxes = card.locator(".page .hl")
    assert boxes.count() >= 1
    for i in range(boxes.count()):
        b = boxes.nth(i).bounding_box()
        assert b["width"] > 5 and b["height"] > 3
        assert ib["x"] - 1 <= b["x"] and b["x"] + b["width"] <= ib["x"] + ib["width"] + 1
        assert ib["y"] - 1 <= b["y"] and b["y"] + b["height"] <= ib["y"] + ib["height"] + 1
    if anchor is not None:
        _boxes_match_anchor(img, boxes, anchor)


def _boxes_match_anchor(img, boxes, anchor) -> None:  # noqa: ANN001
    """Each highlight ``boxes.nth(i)`` covers ``anchor.rects[i]`` (pixels of the page image) as the browser shows
    ``img``: scaled by displayed size / pixel size and offset by the image's position, within 1 px. The browser's box
    of an SVG ``rect`` includes its outline, 2 px drawn centred on the edge (``vector-effect: non-scaling-stroke``):
    1 px on each side of the anchor's box."""
    ib = img.bounding_box()
    sx, sy = ib["width"] / anchor.width, ib["height"] / anchor.height
    half = 1.0  # half the outline's width, in CSS px
    assert boxes.count() == len(anchor.rects) >= 1
    for i, (x0, y0, x1, y1) in enumerate(anchor.rects):
        b = boxes.nth(i).bounding_box()
        got = (b["x"], b["y"], b["width"], b["height"])
        want = (
            ib["x"] + x0 * sx - half,
            ib["y"] + y0 * sy - half,
            (x1 - x0) * sx + 2 * half,
            (y1 - y0) * sy + 2 * half,
        )
        assert all(abs(g - w) <= 1 for g, w in zip(got, want, strict=True)), (i, got, want)


def assert_no_inline_style_or_script(html: str, where: str, *, stylesheet: str | None = None) -> None:
    """``html`` has no ``style`` attribute, no inline ``<style>`` element and no inline script (a script file or a JSON
    data block only): what the dashboard's Content-Security-Policy forbids (issue 38). ``stylesheet``: the one
    ``<style>`` element a self-contained export may carry (its text), removed before the check."""
    if stylesheet is not None:
        assert html.count(f"<style>{stylesheet}</style>") == 1, where
        html = html.replace(f"<style>{stylesheet}</style>", "")
    assert not re.search(r"\sstyle\s*=", html, flags=re.I), (where, re.search(r".{80}\sstyle\s*=.{80}", html))
    assert "<style" not in html.lower(), where
    for attrs, body in re.findall(r"<script([^>]*)>(.*?)</script>", html, flags=re.S | re.I):
        assert ("src=" in attrs and not body.strip()) or "application/json" in attrs, (where, attrs)


def test_browser_run_list_and_run_page(roles_run, chromium, tmp_path) -> None:  # noqa: ANN001
    """One browser session on the dashboard as ``aisac dashboard`` serves it (token, Content-Security-Policy): the
    run list, the run page ([1] scrolls to its card, the span highlighted on the page image exactly on the anchor's
    box), a click on the page image opening it full size with the cited span scrolled into view, and a run with
    two code cells: the figure of the one that ran shown inline, the one whose code failed badged failed. The
    console reports no CSP violation (issue 38: no style attribute is needed any more), and no served page has a
    style attribute or an inline script or style element."""
    import hashlib

    from playwright.sync_api import expect
    from test_dashboard import _record

    from aisac_core.security import DASHBOARD_CSP

    core, run, r = roles_run
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    n_events = len(r["timeline"])
    anchor = core.trace.images().image(r["cited"][0])  # the cited passage's box on its page image
    assert anchor is not None and anchor.found and anchor.rects
    token = "runpage-" + "t" * 32
    auth = {"Authorization": f"Bearer {token}"}
    console: list[str] = []
    with serve_dashboard(core, token) as base, chromium_browser(chromium) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.goto(f"{base}/?token={token}")  # the token once; the cookie from then on
        row = page.locator(f"tr[data-run='{run}']")
        expect(row.locator("td.q a")).to_have_text(QUESTION)
        expect(row).to_contain_text(f"{len(r['cited'])}/{len(r['cited'])} anchors intact")
        page.screenshot(path=str(ARTIFACTS / "run-list.png"))
        row.locator("td.q a").click()
        page.wait_for_url(f"**/run?id={run}")
        expect(page.locator("#question")).to_have_text(QUESTION)
        expect(page.locator("#verdict")).to_contain_text("automatic checks passed")
        expect(page.locator("#verdict")).to_contain_text("content: not judged (no model)")
        page.screenshot(path=str(ARTIFACTS / "run-page.png"))
        # [1] in the answer scrolls to the first cited card
        first = page.locator("#cite-1")
        page.locator("#answer a.cite[data-cite='1']").first.click()
        page.wait_for_function("location.hash === '#cite-1'")
        box = first.bounding_box()
        assert box is not None and 0 <= box["y"] < 900, box
        _highlight_inside_image(page, first, anchor)
        expect(first.locator(".verify")).to_have_text("anchor: intact")
        first.screenshot(path=str(ARTIFACTS / "evidence-card.png"))
        # the waterfall has one bar per event, the plan a node per step
        assert page.locator("#timeline rect.bar").count() == n_events
        assert page.locator("#plan svg g.node").count() == len(r["plan"]["nodes"]) >= 2
        page.locator("#timeline").screenshot(path=str(ARTIFACTS / "timeline.png"))
        page.locator("#plan").screenshot(path=str(ARTIFACTS / "plan.png"))
        page.screenshot(path=str(ARTIFACTS / "run-page-full.png"), full_page=True)
        png = httpx.get(
            f"{base}/evidence/page", params={"run": run, "chunk": r["cited"][0]["chunk_id"]}, headers=auth, timeout=30
        )
        assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"

        # click the page image: the page full size (wider than on the card), the cited span scrolled into view
        small = first.locator(".page img").bounding_box()
        first.locator(".page a").click()
        page.wait_for_function("location.hash === '#page-1-span'")
        zoom = page.locator("#page-1")
        expect(zoom).to_be_visible()
        big = zoom.locator("img").bounding_box()
        assert big["width"] > 1.5 * small["width"], (big, small)
        lines = zoom.locator(".hl")
        assert lines.count() == first.locator(".page .hl").count() >= 1
        hl = lines.first.bounding_box()
        assert 0 <= hl["y"] and hl["y"] + hl["height"] <= 900, hl  # the highlighted span is in the viewport
        _boxes_match_anchor(zoom.locator("img"), lines, anchor)
        big = zoom.locator("img").bounding_box()
        assert abs(big["width"] - anchor.width) <= 1 and abs(big["height"] - anchor.height) <= 1, big  # full size
        page.screenshot(path=str(ARTIFACTS / "page-full-size.png"))
        zoom.locator("a.close").click()
        expect(zoom).to_be_hidden()

        # code cells: a figure shown inline (outside the collapsed entry), a failed cell badged failed
        fig = tmp_path / "sandbox" / ".state" / "figures" / "fig-1.png"
        fig.parent.mkdir(parents=True)
        fig.write_bytes(png.content)  # a real PNG (the page image above), as the data server stores a figure
        figure = {"name": "fig-1.png", "path": str(fig), "sha256": hashlib.sha256(png.content).hexdigest()}
        cells = "run-cells"
        ran = _record(
            core,
            cells,
            "data_code_run",
            arguments={"code": "plt.plot([1, 2])"},
            result={"ok": True, "figures": [figure]},
        )
        bad = _record(
            core,
            cells,
            "data_code_run",
            arguments={"code": "1/0"},
            result={"ok": False, "error": "division by zero", "error_type": "ZeroDivisionError"},
        )
        page.goto(f"{base}/run?id={cells}")
        expect(page.locator(f"#ev-{bad} > summary .cell-failed")).to_have_text("failed")
        expect(page.locator(f"#ev-{ran} > summary .cell-failed")).to_have_count(0)
        img = page.locator(f"#ev-{ran} + .figs img")
        expect(img).to_be_visible()  # without expanding the entry
        page.wait_for_function("(i) => i.complete && i.naturalWidth > 0", arg=img.element_handle())
        page.screenshot(path=str(ARTIFACTS / "code-cells.png"), full_page=True)
        # a chunk the run does not cite, or another run's: no image
        other = r["retrieved"][0]["chunk_id"] if r["retrieved"] else "nope"
        missing = ({"run": run, "chunk": other}, {"run": "no-run", "chunk": "x"})
        for params in missing:
            assert httpx.get(f"{base}/evidence/page", params=params, headers=auth, timeout=30).status_code == 404
        # every page the dashboard served is free of what the policy forbids, and the browser reported no violation
        for path, params in (
            ("/", {}),
            ("/fragment", {}),
            ("/run", {"id": run}),
            ("/run/fragment", {"id": run}),
            ("/run", {"id": cells}),
            ("/run", {"id": "no-such-run"}),
        ):
            got = httpx.get(f"{base}{path}", params=params, headers=auth, timeout=30)
            assert got.headers["content-security-policy"] == DASHBOARD_CSP
            assert_no_inline_style_or_script(got.text, f"{path} {params}")
        assert not [m for m in console if "Content Security Policy" in m], console
        # the check can fail: a style attribute under the same policy is refused, and the console says so
        page.route(
            f"{base}/probe",
            lambda route: route.fulfill(
                status=200,
                headers={"content-type": "text/html", "content-security-policy": DASHBOARD_CSP},
                body="<!doctype html><p id=p style='color:rgb(255, 0, 0)'>probe</p>",
            ),
        )
        with page.expect_console_message(lambda m: "Content Security Policy" in m.text and "style" in m.text):
            page.goto(f"{base}/probe")
        assert page.locator("#p").evaluate("(p) => getComputedStyle(p).color") != "rgb(255, 0, 0)"
    for name in ("run-list", "run-page", "evidence-card", "timeline", "plan", "run-page-full", "page-full-size"):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 2_000


def test_html_export_opens_offline(roles_run, chromium, tmp_path) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    core, run, r = roles_run
    out = core.trace.export(run, "html")
    path = Path(out["path"])
    assert path.is_file() and out["bytes"] == path.stat().st_size and path.stat().st_mode & 0o077 == 0
    text = path.read_text(encoding="utf-8")
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert_no_inline_style_or_script(text, "html export", stylesheet=CSS)  # the stylesheet is its one <style>
    anchor = core.trace.images().image(r["cited"][0])
    assert anchor is not None and anchor.rects
    copy = tmp_path / "report.html"  # a reviewer's copy, away from the store
    shutil.copy(path, copy)
    requests: list[str] = []
    with chromium_browser(chromium) as browser:
        ctx = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.on("request", lambda req: requests.append(req.url))
        page.goto(copy.as_uri())
        expect(page.locator("#question")).to_have_text(QUESTION)
        bullet = next(ln for ln in r["answer"]["text"].splitlines() if ln.startswith("- "))
        expect(page.locator("#answer")).to_contain_text(bullet[2:].rsplit(" [", 1)[0][:60])
        expect(page.locator("#evidence .card")).to_have_count(len(r["cited"]))
        _highlight_inside_image(page, page.locator("#cite-1"), anchor)
        assert page.locator("#timeline rect.bar").count() == len(r["timeline"])
        page.screenshot(path=str(tmp_path / "export.png"), full_page=True)
    assert all(u.startswith(("file:", "data:")) for u in requests), requests


def test_a_hosts_roles_run_call_shows_the_answer_and_links_the_graph_run(roles_run) -> None:  # noqa: ANN001
    """The host's own run (one ``roles_run`` tool call) shows the question, the answer, non-blank cited cards and the
    evaluation, and links the graph's run."""
    from aisac_core.trace.queries import RunQueries
    from aisac_core.trace.report import run_report
    from aisac_core.trace.runpage import render_run

    core, run, graph = roles_run
    host = next(
        x["run_id"]
        for x in RunQueries(core.engine).list_runs()["runs"]
        if x["run_id"] != run and "roles_run" in x["tools"]
    )
    r = run_report(RunQueries(core.engine).get_run(host, include_results=True))
    assert r["question"] == QUESTION and r["answer"]["text"] == graph["answer"]["text"]
    assert [c["chunk_id"] for c in r["cited"]] == [c["chunk_id"] for c in graph["cited"]]
    assert all(c["text"] or c["quote"] for c in r["cited"]) and r["cited"][0]["path"].endswith("report.pdf")
    assert r["verdict"]["label"] == "automatic checks passed" and r["linked_runs"] == [run]
    page = render_run(RunQueries(core.engine).get_run(host, include_results=True))
    assert f"run?id={run}" in page and "id=answer" in page and "id='cite-1'" in page
    heads = RunQueries(core.engine).run_headlines([host, run])
    assert heads[host]["question"] == heads[run]["question"] == QUESTION
    assert heads[host]["citations"] == len(graph["cited"]) and heads[host]["verdict"] == "automatic checks passed"


def test_report_resource_inside_the_host(roles_run) -> None:  # noqa: ANN001
    """trace_get_run names the run's HTML report resource; a host reads it over MCP (no dashboard needed)."""
    import anyio
    from fastmcp import Client
    from fastmcp.exceptions import McpError

    from aisac_servers.serving.suite import build

    core, run, r = roles_run

    async def go() -> tuple[str, str]:
        async with Client(build(app=core, lifespan=False)) as c:
            got = (await c.call_tool("trace_get_run", {"run_id": run, "detail": False})).structured_content
            assert got["report_uri"] == f"aisac://trace/runs/{run}/report"
            templates = [t.uri_template for t in await c.list_resource_templates()]
            assert "aisac://trace/runs/{run_id}/report" in templates
            page = (await c.read_resource(got["report_uri"]))[0]
            with pytest.raises(McpError, match="no report for run"):
                await c.read_resource("aisac://trace/runs/no-such-run/report")
            return page.text, page.mime_type

    text, mime = anyio.run(go)
    assert mime == "text/html" and QUESTION in text and "id='cite-1'" in text and "<script" not in text


def test_aisac_report_command(roles_run) -> None:  # noqa: ANN001
    import os
    import subprocess
    import sys

    core, run, _r = roles_run
    aisac = str(Path(sys.executable).parent / "aisac")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_OWNER_MODE="false", AISAC_DATA_DIR=str(core.settings.data_dir))
    md = subprocess.run(
        [aisac, "report", run, "--format", "markdown"], env=env, capture_output=True, text=True, timeout=300
    )
    assert md.returncode == 0, md.stderr[-2000:]
    assert Path(md.stdout.strip()).read_text(encoding="utf-8").startswith(f"# aisac run `{run}`\n\n**Question:** ")
    bad = subprocess.run([aisac, "report", "no-such-run"], env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "unknown run" in bad.stderr and "Traceback" not in bad.stderr


def _json_strategy():  # noqa: ANN202
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | st.text(max_size=20)
    return st.recursive(
        scalars,
        lambda kids: (
            st.lists(kids, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "n",
                        "text",
                        "citations",
                        "anchor",
                        "chunk_id",
                        "page",
                        "score",
                        "quote",
                        "title",
                        "plan",
                        "steps",
                        "id",
                        "depends_on",
                        "goal",
                        "passed",
                        "by",
                        "gates",
                        "critiques",
                        "severity",
                        "evidence",
                        "anchors",
                        "status",
                        "answer",
                        "evaluation",
                        "run_id",
                        "hits",
                        "char_span",
                    ]
                ),
                kids,
                max_size=6,
            )
        ),
        max_leaves=25,
    )


def test_any_recorded_shape_renders() -> None:
    """Step results and arguments are whatever a host or a model submitted: the report, the page and the headline
    digest render any JSON without raising (a host's roles_submit_* payloads land in the trace as is)."""
    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    from aisac_core.trace.report import answer_digest, run_report
    from aisac_core.trace.runpage import render_run

    tools = st.sampled_from(
        ["router", "planner", "researcher", "evaluator", "coordinator", "rag_search", "roles_run", "memory_add_turn"]
    )
    event = st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["tool_call", "role_step", "model_call"]),
            "tool": tools,
            "server": st.sampled_from(["roles", "rag"]),
            "result": _json_strategy(),
            "arguments": _json_strategy(),
            "started_at": st.sampled_from(["2026-01-01T00:00:00+00:00", "", "bad"]),
        }
    )

    odd = {
        "kind": "role_step",
        "tool": "researcher",
        "server": "roles",
        "arguments": {"task": 5},
        "started_at": "bad",
        "result": {"text": "t [1]", "citations": [{"n": "one", "quote": 5, "page": "x"}, 7]},
    }

    odd_gates = {
        "kind": "role_step",
        "tool": "evaluator",
        "server": "roles",
        "arguments": {},
        "started_at": "",
        "result": {"passed": True, "gates": 5},
    }

    @settings(max_examples=300, deadline=None)
    @example([odd])  # a citation number that is not a number (a submitted answer)
    @example([odd_gates])  # gates that are not an object
    @given(st.lists(event, min_size=1, max_size=6))
    def check(evs: list[dict]) -> None:
        tree = [
            {
                **e,
                "id": i + 1,
                "status": "ok",
                "error": None,
                "latency_ms": 1.0,
                "arguments_sha256": "0" * 64,
                "result_sha256": None,
                "result_summary": "",
                "parent_id": None,
                "children": [],
            }
            for i, e in enumerate(evs)
        ]
        data = {
            "run": {
                "run_id": "r",
                "active": False,
                "events": len(tree),
                "by_kind": {},
                "duration_s": 0,
                "started_at": "2026-01-01T00:00:00",
                "servers": [],
            },
            "errors": [],
            "last_id": len(tree),
            "tree": tree,
        }
        page = render_run(data)
        assert page.startswith("<div id=body") and "<script" not in page
        run_report(data)
        answer_digest(tree)

    check()


HOST_PAGE = """<!doctype html><html><body><iframe id=view sandbox="allow-scripts" style="width:1200px;height:800px">
</iframe><script>
// the host side of the MCP Apps extension, as a host implements it: answer ui/initialize, send the tool result
// once the view is initialized, proxy resources/read to the server (here: window.readResource, bridged to Python)
window.hostLog = [];
const view = document.getElementById('view');
const reply = (id, result) => view.contentWindow.postMessage({jsonrpc: '2.0', id, result}, '*');
window.addEventListener('message', async (e) => {
  const m = e.data; window.hostLog.push(m.method || 'response');
  if (m.method === 'ui/initialize') {
    window.initParams = m.params;
    reply(m.id, {protocolVersion: m.params.protocolVersion, hostInfo: {name: 'test-host', version: '1'},
                 hostCapabilities: {serverResources: {}}, hostContext: {displayMode: 'inline'}});
  } else if (m.method === 'ui/notifications/initialized') {
    view.contentWindow.postMessage({jsonrpc: '2.0', method: 'ui/notifications/tool-result',
                                    params: window.toolResult}, '*');
  } else if (m.method === 'resources/read') {
    reply(m.id, {contents: [{uri: m.params.uri, mimeType: 'text/html', text: await window.readResource(m.params.uri)}]});
  } else if (m.method === 'ui/notifications/size-changed') {
    window.viewHeight = m.params.height;
  }
});
</script></body></html>"""


def test_mcp_apps_view_shows_the_report_in_a_host(roles_run, chromium) -> None:  # noqa: ANN001
    """A host with the MCP Apps extension: trace_get_run names the view in _meta.ui; the view, in a sandboxed
    iframe, starts the handshake, receives the tool result, reads the report resource through the host and shows
    the run page (question, cited card) and reports its height."""
    import json

    import anyio
    from fastmcp import Client

    from aisac_servers.serving.suite import build

    core, run, _r = roles_run

    async def fetch() -> tuple[str, dict, dict[str, str]]:
        async with Client(build(app=core, lifespan=False)) as c:
            tool = next(t for t in await c.list_tools() if t.name == "trace_get_run")
            view_uri = tool.meta["ui"]["resourceUri"]
            view = (await c.read_resource(view_uri))[0]
            assert view.mime_type == "text/html;profile=mcp-app"
            res = await c.call_tool("trace_get_run", {"run_id": run, "detail": False})
            report = (await c.read_resource(res.structured_content["report_uri"]))[0].text
            return (
                view.text,
                {"structuredContent": res.structured_content, "content": [{"type": "text", "text": "run"}]},
                {res.structured_content["report_uri"]: report},
            )

    view_html, result, resources = anyio.run(fetch)
    with chromium_browser(chromium) as browser:
        ctx = browser.new_context(offline=True)
        page = ctx.new_page()
        page.expose_function("readResource", lambda uri: resources[uri])
        page.set_content(HOST_PAGE)
        page.evaluate(
            "([html, result]) => { window.toolResult = result; document.getElementById('view').srcdoc = html; }",
            [view_html, json.loads(json.dumps(result))],
        )
        frame = page.frame_locator("#view")
        frame.locator("#question").wait_for(timeout=30_000)
        assert frame.locator("#question").inner_text() == QUESTION
        assert frame.locator("#cite-1").count() == 1 and frame.locator("#timeline rect.bar").count() > 0
        page.wait_for_function("window.viewHeight > 300", timeout=10_000)
        init = page.evaluate("window.initParams")
        assert init["protocolVersion"] == "2026-01-26" and init["appInfo"]["name"] == "aisac-run-report"
        log = page.evaluate("window.hostLog")
        assert log[:3] == ["ui/initialize", "ui/notifications/initialized", "resources/read"], log


def test_failed_cell_figures_and_full_size_page_render() -> None:
    """A code cell whose code failed is badged failed (not its call's ok), a code run's figures are shown inline
    (outside the collapsed entry), and a cited page image opens full size with an anchor on the highlighted span."""
    from aisac_core.trace.runpage import _page_html, event_html

    ev = {
        "id": 7,
        "kind": "tool_call",
        "tool": "data_code_run",
        "status": "ok",
        "arguments": {"code": "1/0"},
        "arguments_sha256": "0" * 64,
        "result": {
            "ok": False,
            "error": "division by zero",
            "error_type": "ZeroDivisionError",
            "figures": [{"name": "fig1.png", "path": "/x/.state/fig1.png", "sha256": "1" * 64, "bytes": 10}],
        },
        "result_sha256": "2" * 64,
        "result_summary": "ok: false",
        "started_at": "2026-01-01T00:00:00.000+00:00",
        "latency_ms": 3.0,
        "parent_id": None,
        "children": [],
    }
    html = event_html(ev, lambda e, i: f"/run/figure?event={e}&i={i}")
    assert "cell-failed'>failed</span>" in html and "st-ok" not in html.split("</summary>")[0]
    assert "ZeroDivisionError" in html
    assert html.index("<div class=figs><img src='/run/figure?event=7&amp;i=0'") > html.index("</details>")
    ok = event_html({**ev, "result": {"ok": True, "figures": []}}, None)
    assert "failed" not in ok.split("</summary>")[0] and "<div class=figs>" not in ok
    page = _page_html(
        {
            "src": "/p.png",
            "width": 900,
            "height": 1200,
            "rects": [(90, 300, 800, 318), (90, 320, 500, 338)],
            "found": True,
        },
        {"n": 1, "page": 3, "title": "T"},
    )
    assert "<a href='#page-1-span'" in page and "id='page-1'" in page and "id='page-1-span'" in page
    assert page.count("<rect class=hl ") == 4  # the two highlighted lines, on the card and in the full-size view
    assert "style=" not in page  # the CSP allows no style attribute: the geometry is in SVG attributes
    assert "viewBox='0 0 900 1200'" in page and "<rect class=hl x=90 y=300 width=710 height=18>" in page
    # the span's scroll target sits on the first highlighted line
    assert "<rect class=spot id='page-1-span' x=90 y=300 width=710 height=18>" in page
