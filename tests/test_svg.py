"""The dashboard's SVG diagrams (aisac_core.trace.svg): the run's waterfall and its plan drawing, parsed as XML."""

from __future__ import annotations

import re
import statistics
import time
import xml.etree.ElementTree as ET

import pytest

from aisac_core.trace.svg import ERROR_COLOUR, KIND_COLOURS, MAX_ROWS, fit, nice_ticks, plan_svg, waterfall_svg

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script> & \'quoted\' "double" ]]> \x00\x07 <img src=x onerror=alert(1)>'


def ev(
    i: int,
    start: float,
    dur: float,
    *,
    depth: int = 0,
    kind: str = "tool_call",
    status: str = "ok",
    label: str | None = None,
    server: str = "rag",
) -> dict:
    return {
        "id": i,
        "label": label or f"tool_{i}",
        "server": server,
        "kind": kind,
        "status": status,
        "depth": depth,
        "start_ms": start,
        "duration_ms": dur,
    }


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    return root


def bars(root: ET.Element) -> list[ET.Element]:
    return [r for r in root.iter(f"{NS}rect") if r.get("class") == "bar"]


def box(root: ET.Element) -> tuple[float, float, float, float]:
    return tuple(map(float, root.get("viewBox", "").split()))  # type: ignore[return-value]


def all_text(root: ET.Element) -> str:
    return " ".join("".join(e.itertext()) for e in root.iter(f"{NS}text"))


# -- waterfall -------------------------------------------------------------------------------------------------------


def test_waterfall_one_bar_per_event_ordered_and_positioned() -> None:
    tl = [
        ev(1, 0, 400, kind="role_step", label="researcher"),
        ev(2, 10, 100, depth=1),
        ev(3, 150, 200, depth=1),
        ev(4, 360, 0.1, depth=2, kind="model_call"),
    ]
    root = parse(waterfall_svg(tl, 400))
    assert root.get("role") == "img" and "4 events" in root.get("aria-label", "")
    assert root.get("width") == "960" and int(root.get("height", 0)) >= 4 * 18
    b = bars(root)
    assert [x.get("data-id") for x in b] == ["1", "2", "3", "4"]
    x = {int(r.get("data-id", 0)): float(r.get("x", 0)) for r in b}
    w = {int(r.get("data-id", 0)): float(r.get("width", 0)) for r in b}
    y = [float(r.get("y", 0)) for r in b]
    assert x[1] < x[2] < x[3] < x[4]  # later start, further right
    assert w[1] > w[3] > w[2]  # longer, wider
    assert w[4] == pytest.approx(2.0)  # a 0.1 ms call: the minimum width
    assert y == sorted(y) and len(set(y)) == 4  # one row each, in order
    assert w[1] / w[2] == pytest.approx(4.0, rel=0.02)  # a linear axis
    _, _, vw, vh = box(root)
    for r in b:
        assert 0 <= float(r.get("x", 0)) and float(r.get("x", 0)) + float(r.get("width", 0)) <= vw
        assert 0 <= float(r.get("y", 0)) and float(r.get("y", 0)) + float(r.get("height", 0)) <= vh
    links = [a for a in root.iter(f"{NS}a")]
    assert [a.get("href") for a in links] == ["#ev-1", "#ev-2", "#ev-3", "#ev-4"]
    tip = links[1].find(f"{NS}title")
    assert tip is not None and tip.text == "tool_2 · 100.0 ms · ok · rag"
    assert "100.0 ms" in all_text(root)  # the duration beside its bar


def test_waterfall_colours_by_kind_and_error() -> None:
    tl = [
        ev(1, 0, 10, kind="role_step"),
        ev(2, 0, 10),
        ev(3, 0, 10, kind="model_call"),
        ev(4, 0, 10, status="tool_error"),
        ev(5, 0, 10, status="exception", kind="role_step"),
    ]
    fills = [r.get("fill") for r in bars(parse(waterfall_svg(tl, 10)))]
    assert fills[:3] == [KIND_COLOURS["role_step"], KIND_COLOURS["tool_call"], KIND_COLOURS["model_call"]]
    assert fills[3] == fills[4] == ERROR_COLOUR and ERROR_COLOUR not in fills[:3]


def test_waterfall_depth_indents_labels_and_long_labels_are_cut() -> None:
    tl = [ev(1, 0, 5, label="top"), ev(2, 0, 5, depth=1, label="child"), ev(3, 0, 5, depth=2, label="x" * 300)]
    root = parse(waterfall_svg(tl, 5))
    xs = {}
    for a in root.iter(f"{NS}a"):
        t = a.find(f"{NS}text")
        assert t is not None
        xs[t.text] = float(t.get("x", 0))
    assert xs["top"] < xs["child"]
    cut = next(k for k in xs if k and k.startswith("xxx"))
    assert cut.endswith("…") and len(cut) < 60 and xs[cut] > xs["child"]
    assert fit("abcdef", 4) == "abc…" and fit("abc", 4) == "abc" and fit("日本語テキスト", 6) == "日本…"


def test_waterfall_axis_ticks_are_nice() -> None:
    end, ticks = nice_ticks(1234)
    assert (end, ticks) == (1250, [0, 250, 500, 750, 1000, 1250])
    for span in (0, 0.013, 0.7, 3, 7, 99, 101, 999, 1001, 4_999, 77_777, 3_600_000):
        end, ticks = nice_ticks(span)
        assert 4 <= len(ticks) <= 6 and ticks[0] == 0 and end == ticks[-1] >= span
    labels = all_text(parse(waterfall_svg([ev(1, 0, 1400)], 1400)))
    assert "0.5 s" in labels and "1.5 s" in labels
    labels = all_text(parse(waterfall_svg([ev(1, 0, 1234)], 1234)))
    assert "0.25 s" in labels and "1.25 s" in labels
    labels = all_text(parse(waterfall_svg([ev(1, 0, 700)], 700)))
    assert "200 ms" in labels and "800 ms" in labels and " s " not in labels


def test_waterfall_caps_rows_at_1000() -> None:
    tl = [ev(i, i, 1) for i in range(1, 1501)]
    root = parse(waterfall_svg(tl, 1500))
    assert len(bars(root)) == MAX_ROWS == 1000
    more = [t for t in root.iter(f"{NS}text") if t.get("class") == "more"]
    assert len(more) == 1 and more[0].text == "… 500 more events"
    _, _, _, vh = box(root)
    assert float(more[0].get("y", 0)) <= vh and max(float(b.get("y", 0)) for b in bars(root)) < float(
        more[0].get("y", 0)
    )


def test_waterfall_escapes_hostile_text() -> None:
    tl = [ev(1, 0, 5, label=HOSTILE, server=HOSTILE, status=HOSTILE)]
    svg = waterfall_svg(tl, 5, href=lambda i: f'#ev-{i}"><script>x</script>')
    root = parse(svg)
    tags = {e.tag for e in root.iter()}
    assert tags <= {f"{NS}{t}" for t in ("svg", "rect", "text", "line", "a", "title")}
    assert "<script" not in svg and "<img" not in svg
    assert "&lt;script&gt;" in svg and "&amp;" in svg and "&quot;" in svg
    tip = root.find(f".//{NS}title")
    assert tip is not None and "<script>alert(\"x\")</script> & 'quoted'" in (tip.text or "")
    a = root.find(f".//{NS}a")
    assert a is not None and a.get("href") == '#ev-1"><script>x</script>'  # one attribute, not markup


def test_waterfall_odd_input() -> None:
    assert waterfall_svg([], 0) == ""
    root = parse(
        waterfall_svg(
            [ev(1, 0, 0), {"id": 2, "label": None, "start_ms": None, "duration_ms": "nan"}, ev(3, 5000, 10)], 10
        )
    )  # span smaller than the events: the axis still fits them
    _, _, vw, _ = box(root)
    assert len(bars(root)) == 3
    assert all(float(b.get("x", 0)) + float(b.get("width", 0)) <= vw for b in bars(root))


def test_waterfall_no_external_references() -> None:
    svg = waterfall_svg([ev(i, i, 3, depth=i % 3) for i in range(50)], 60)
    assert not re.search(r"<(script|image|img|style|foreignObject|use)\b|url\(|@import|https?://(?!www\.w3\.org)", svg)


# -- plan ------------------------------------------------------------------------------------------------------------


def node(i: str, label: str | None = None, tool: str | None = None, helper: str | None = None) -> dict:
    return {"id": i, "label": label or f"step {i}", "tool": tool, "helper": helper}


def nodes_of(root: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-id", ""): g for g in root.iter(f"{NS}g") if g.get("class") == "node"}


def edges_of(root: ET.Element) -> list[ET.Element]:
    return [p for p in root.iter(f"{NS}path") if "edge" in (p.get("class") or "").split()]


def top(g: ET.Element) -> float:
    r = g.find(f".//{NS}rect")
    assert r is not None
    return float(r.get("y", 0))


def left(g: ET.Element) -> float:
    r = g.find(f".//{NS}rect")
    assert r is not None
    return float(r.get("x", 0))


def test_plan_chain() -> None:
    plan = {
        "nodes": [node("1", tool="search"), node("2", helper="summarise"), node("3")],
        "edges": [("1", "2"), ("2", "3")],
        "event_id": 7,
    }
    root = parse(plan_svg(plan))
    ns, es = nodes_of(root), edges_of(root)
    assert list(ns) == ["1", "2", "3"] and len(es) == 2
    assert top(ns["1"]) < top(ns["2"]) < top(ns["3"])
    markers = list(root.iter(f"{NS}marker"))
    assert len(markers) == 1 and all(p.get("marker-end") == f"url(#{markers[0].get('id')})" for p in es)
    assert all(p.get("d", "").startswith("M") and "C" in p.get("d", "") for p in es)
    assert "search" in "".join(ns["1"].itertext()) and "summarise" in "".join(ns["2"].itertext())
    assert root.get("role") == "img" and root.get("aria-label") == "Plan: 3 steps, 2 dependencies"


def test_plan_diamond_layers_and_no_crossings() -> None:
    plan = {"nodes": [node(x) for x in "abcd"], "edges": [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]}
    root = parse(plan_svg(plan))
    ns = nodes_of(root)
    assert len(ns) == 4 and len(edges_of(root)) == 4
    assert top(ns["a"]) < top(ns["b"]) == top(ns["c"]) < top(ns["d"])
    assert left(ns["b"]) != left(ns["c"])


def test_plan_long_edge_goes_through_the_layers_it_spans() -> None:
    plan = {"nodes": [node(x) for x in "abc"], "edges": [("a", "b"), ("b", "c"), ("a", "c")]}
    root = parse(plan_svg(plan))
    ns = nodes_of(root)
    assert top(ns["a"]) < top(ns["b"]) < top(ns["c"])  # longest path: c below b
    long = next(p for p in edges_of(root) if p.get("data-from") == "a" and p.get("data-to") == "c")
    assert long.get("d", "").count("C") == 3  # into the dummy, down through it, out of it


def test_plan_two_roots_and_barycentre_order() -> None:
    # two roots, each with its own child; the children listed crosswise, so the input order would cross
    plan = {"nodes": [node("r1"), node("r2"), node("c2"), node("c1")], "edges": [("r1", "c1"), ("r2", "c2")]}
    root = parse(plan_svg(plan))
    ns = nodes_of(root)
    assert top(ns["r1"]) == top(ns["r2"]) < top(ns["c1"]) == top(ns["c2"])
    assert (left(ns["r1"]) < left(ns["r2"])) == (left(ns["c1"]) < left(ns["c2"]))  # no crossing


def test_plan_cycle_terminates_with_a_dashed_back_edge() -> None:
    plan = {"nodes": [node(x) for x in "abc"], "edges": [("a", "b"), ("b", "c"), ("c", "a")]}
    root = parse(plan_svg(plan))
    es = edges_of(root)
    assert len(nodes_of(root)) == 3 and len(es) == 3
    back = [p for p in es if p.get("stroke-dasharray")]
    assert len(back) == 1 and "back" in (back[0].get("class") or "")
    assert (back[0].get("data-from"), back[0].get("data-to")) == ("c", "a")
    _, _, vw, _ = box(root)
    assert all(float(v) <= vw for v in re.findall(r"[-\d.]+", back[0].get("d", ""))[0::2])
    # a root-less cycle and a long cycle still terminate
    assert plan_svg({"nodes": [node("x"), node("y")], "edges": [("x", "y"), ("y", "x")]})
    long = [node(str(i)) for i in range(3000)]
    ring = [(str(i), str((i + 1) % 3000)) for i in range(3000)]
    assert len(edges_of(parse(plan_svg({"nodes": long, "edges": ring})))) == 3000


def test_plan_empty_and_junk() -> None:
    assert plan_svg({}) == "" and plan_svg({"nodes": [], "edges": []}) == ""
    assert plan_svg(None) == ""  # type: ignore[arg-type]
    root = parse(
        plan_svg(
            {
                "nodes": [node("a"), node("a", "again"), node("b"), "junk"],
                "edges": [("a", "b"), ("a", "b"), ("a", "a"), ("a", "zz"), ("b",), None],
            }
        )
    )
    assert list(nodes_of(root)) == ["a", "b"] and len(edges_of(root)) == 1


def test_plan_labels_wrap_over_three_lines_at_most_and_hostile_text_is_escaped() -> None:
    long = "word " * 80
    plan = {"nodes": [node("1", long, tool=HOSTILE), node(HOSTILE, HOSTILE, helper="h")], "edges": [("1", HOSTILE)]}
    svg = plan_svg(plan, href=lambda i: f"#step-{i}")
    root = parse(svg)
    ns = nodes_of(root)
    assert len(ns) == 2 and len(edges_of(root)) == 1
    lines = [t.text for t in ns["1"].iter(f"{NS}text") if t.get("font-size") is None]
    assert len(lines) == 3 and lines[-1] and lines[-1].endswith("…")
    assert "<script" not in svg and "<img" not in svg and "&lt;script&gt;" in svg
    tags = {e.tag for e in root.iter()}
    assert tags <= {f"{NS}{t}" for t in ("svg", "defs", "marker", "path", "g", "a", "title", "rect", "text")}
    hostile_id = next(k for k in ns if k != "1")
    assert "<script>" in hostile_id  # the attribute holds the text, escaped in the markup
    a = ns[hostile_id].find(f"{NS}a")
    assert a is not None and (a.get("href") or "").startswith("#step-<script>")


def test_plan_is_deterministic() -> None:
    plan = {
        "nodes": [node(x, tool="t" if x in "ace" else None) for x in "abcdefg"],
        "edges": [
            ("a", "c"),
            ("b", "c"),
            ("c", "d"),
            ("a", "e"),
            ("e", "f"),
            ("d", "g"),
            ("f", "g"),
            ("b", "g"),
            ("g", "a"),
        ],
    }
    first = plan_svg(plan)
    assert all(plan_svg(plan) == first for _ in range(5))
    assert plan_svg({**plan, "nodes": list(plan["nodes"])}) == first
    tl = [ev(i, i * 3, i % 7 + 0.5, depth=i % 3) for i in range(200)]
    assert waterfall_svg(tl, 800) == waterfall_svg([dict(e) for e in tl], 800)


def test_plan_wide_layer_grows_the_drawing() -> None:
    plan = {"nodes": [node("r")] + [node(f"c{i}") for i in range(12)], "edges": [("r", f"c{i}") for i in range(12)]}
    root = parse(plan_svg(plan, width=960))
    _, _, vw, _ = box(root)
    assert vw > 960 and float(root.get("width", 0)) == vw
    for g in nodes_of(root).values():
        r = g.find(f".//{NS}rect")
        assert r is not None and float(r.get("x", 0)) >= 0 and float(r.get("x", 0)) + float(r.get("width", 0)) <= vw


def test_render_time_of_1000_events() -> None:
    """Prints the median time (ms) of 20 renders of a 1,000-event waterfall; asserts nothing about time."""
    tl = [
        ev(
            i,
            i * 1.7,
            (i * 37) % 250 + 0.1,
            depth=i % 4,
            kind=("role_step", "tool_call", "model_call")[i % 3],
            status="tool_error" if i % 50 == 0 else "ok",
            label=f"server_{i % 9}.tool_with_a_name_{i}",
        )
        for i in range(1000)
    ]
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        svg = waterfall_svg(tl, 2000)
        times.append((time.perf_counter() - t0) * 1000)
    assert len(bars(parse(svg))) == 1000
    print(
        f"\nwaterfall_svg, 1,000 events: median {statistics.median(times):.2f} ms of 20 "
        f"(min {min(times):.2f}, {len(svg) / 1024:.0f} KiB)"
    )
