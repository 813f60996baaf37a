"""Server-rendered SVG diagrams of a run for the trace dashboard: a waterfall of its events
(:func:`waterfall_svg`) and a layered drawing of its plan (:func:`plan_svg`), both from
:func:`aisac_core.trace.report.run_report` (``timeline`` / ``span_ms`` and ``plan``).

Each function returns one self-contained ``<svg>`` element, or ``""`` when there is nothing to draw. Presentation
attributes only: no stylesheet, script, font, image or external reference, so the drawing looks the same in a page
saved to disk (a page's CSS may still restyle it, e.g. ``svg {max-width: 100%; height: auto}``). Every text comes
from the trace (model output, user documents): it is stripped of characters XML forbids and escaped. Same input,
same bytes. Standard library only.
"""

from __future__ import annotations

import hashlib
import math
import re
import textwrap
import unicodedata
from collections.abc import Callable
from html import escape
from itertools import pairwise
from typing import Any

SVG_NS = "http://www.w3.org/2000/svg"
#: waterfall rows drawn at most; the rest is summed up in a final "… N more events" row
MAX_ROWS = 1000
ROW = 18  # px per waterfall row
HEAD = 26  # px above the first row: legend and time axis labels
LABEL_W = 270  # px of the label column
INDENT, MAX_DEPTH = 12, 12  # px of indentation per depth level, levels indented at most
CHAR = 6.6  # px per column of the waterfall's 11 px monospace font
MIN_BAR = 2.0  # px: the narrowest bar, so a 0.1 ms call stays visible
KIND_COLOURS = {"role_step": "#8a63c9", "tool_call": "#3b78d8", "model_call": "#dd9a1f"}
OTHER_COLOUR, ERROR_COLOUR = "#8a8f99", "#d43d3d"
ERROR_WORDS = ("error", "exception", "fail", "timeout", "denied")
MONO = "ui-monospace,SFMono-Regular,Menlo,Consolas,monospace"
SANS = "system-ui,-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif"
# plan: node width (shrinks to NODE_MIN_W before the drawing grows wider than asked), dummy slot, gaps, margin
NODE_W, NODE_MIN_W, DUMMY_W, H_GAP, V_GAP, MARGIN = 190, 130, 14, 26, 44, 12
PCHAR = 7.0  # px per character of the plan's 12 px sans-serif font (generous: a label rather wraps than overflows)
NODE_STYLE = {"tool": ("#e8f0fc", "#3b78d8"), "helper": ("#f1ebfa", "#8a63c9"), None: ("#f4f5f7", "#8a8f99")}
EDGE_COLOUR = "#6b7280"
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def _clean(value: Any) -> str:
    """One line of text: whitespace runs collapsed, characters XML cannot hold removed."""
    return " ".join(_NOT_XML.sub("", "" if value is None else str(value)).split())


def _esc(value: Any) -> str:
    return escape(_NOT_XML.sub("", str(value)), quote=True)


def _cols(c: str) -> int:
    """Columns a character takes in a monospace font: 2 for wide (CJK), 0 for combining marks."""
    return 2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1


def fit(text: str, cols: int) -> str:
    """``text`` cut to ``cols`` columns, its last column an ellipsis when cut."""
    if (len(text) if text.isascii() else sum(map(_cols, text))) <= cols:
        return text
    out, used = [], 1
    for c in text:
        used += _cols(c)
        if used > cols:
            break
        out.append(c)
    return "".join(out) + "…" if cols > 0 else ""


def _num(value: Any) -> float:
    """A finite, non-negative float (0.0 for anything else)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) and v > 0 else 0.0


def fmt_ms(ms: float) -> str:
    """A duration for people: ``0.12 ms``, ``12.3 ms``, ``1.23 s``, ``12.3 s``."""
    return (
        f"{ms / 1000:.1f} s"
        if ms >= 10_000
        else f"{ms / 1000:.2f} s"
        if ms >= 1000
        else f"{ms:.1f} ms"
        if ms >= 1
        else f"{ms:.2f} ms"
    )


def nice_ticks(span_ms: float) -> tuple[float, list[float]]:
    """``(axis_end_ms, ticks_ms)``: 4 to 6 ticks from 0, a step of 1, 2, 2.5 or 5 × 10^k ms, the last tick (the axis
    end) at or just past ``span_ms`` (1 ms when the span is 0)."""
    span = max(_num(span_ms), 0.01) if _num(span_ms) else 1.0
    k = 10.0 ** math.floor(math.log10(span / 5))  # span / k in [5, 50): a step of 10k leaves at most 5 intervals
    for m in (1, 2, 2.5, 5, 10):
        step, n = m * k, max(math.ceil(span / (m * k) - 1e-9), 1)
        if n <= 5:
            break
    return n * step, [round(i * step, 9) for i in range(n + 1)]


def is_error(status: Any) -> bool:
    """Whether an event status is a failure (``tool_error``, ``exception``, ``failed``, ``timeout``...)."""
    return any(w in str(status or "").lower() for w in ERROR_WORDS)


def waterfall_svg(
    timeline: list[dict[str, Any]],
    span_ms: float,
    *,
    href: Callable[[int], str] = lambda i: f"#ev-{i}",
    width: int = 960,
) -> str:
    """A Gantt-style waterfall of a run's events, one row each, as an ``<svg>`` element (``""`` without events).

    ``timeline``: :func:`~aisac_core.trace.report.run_report`'s rows ``{id, label, server, kind, status, depth,
    start_ms, duration_ms}`` in tree (depth-first) order; ``start_ms`` is the offset from the run's first event and
    ``duration_ms`` the event's latency, both in milliseconds. ``span_ms``: the run's span (ms); the time axis runs
    from 0 to the first "nice" value (1, 2, 2.5 or 5 × 10^k ms, :func:`nice_ticks`) at or past the larger of
    ``span_ms`` and the latest event end, with 4 to 6 labelled ticks. ``href(id)``: the link of an event's row
    (default ``#ev-{id}``, the event's entry on the run page). ``width``: of the drawing, px.

    Layout: a label column of 270 px on the left (the step or tool name, indented 12 px per depth level, cut with
    an ellipsis to fit), bars on a linear time axis on the right (x = start, width = duration, at least 2 px),
    a duration text right of the bar where it fits. 18 px rows, zebra-striped. Bar colours: role steps purple,
    tool calls blue, model calls amber, any error status (:func:`is_error`) red; a running event half transparent.
    Each row is an ``<a href>`` with a ``<title>`` tooltip ``label · 12.3 ms · status · server``; each bar a
    ``<rect class="bar" data-id="{id}">``, one per drawn event. Of a longer timeline the first 1,000 rows are drawn
    (:data:`MAX_ROWS`) and a last row says ``… N more events``.
    """
    if not timeline:
        return ""
    rows, more = timeline[:MAX_ROWS], max(len(timeline) - MAX_ROWS, 0)
    starts = [_num(r.get("start_ms")) for r in rows]
    durs = [_num(r.get("duration_ms")) for r in rows]
    end, ticks = nice_ticks(max(_num(span_ms), *(s + d for s, d in zip(starts, durs))))
    x0, x1 = LABEL_W + 10, width - 64  # the bar area: 64 px on the right for the last bar's duration
    scale = (x1 - x0) / end
    height = HEAD + ROW * (len(rows) + (1 if more else 0)) + 6
    aria = f"Waterfall of {len(timeline)} events over {fmt_ms(_num(span_ms))}"
    out = [
        (
            f'<svg xmlns="{SVG_NS}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{aria}" font-family="{MONO}" font-size="11">'
        )
    ]
    x = 4.0
    for name, colour in (
        ("role", KIND_COLOURS["role_step"]),
        ("tool", KIND_COLOURS["tool_call"]),
        ("model", KIND_COLOURS["model_call"]),
        ("error", ERROR_COLOUR),
    ):
        out.append(
            f'<rect x="{x:.1f}" y="{HEAD - 17}" width="9" height="9" rx="2" fill="{colour}"/>'
            f'<text x="{x + 13:.1f}" y="{HEAD - 9}" fill="#555">{name}</text>'
        )
        x += 13 + len(name) * CHAR + 12
    seconds = end >= 1000
    for i, v in enumerate(ticks):
        tx = x0 + v * scale
        anchor = "start" if i == 0 else "end" if i == len(ticks) - 1 else "middle"
        out.append(
            f'<line x1="{tx:.1f}" y1="{HEAD - 4}" x2="{tx:.1f}" y2="{height - 6}" stroke="#dfe1e6"/>'
            f'<text x="{tx:.1f}" y="{HEAD - 9}" text-anchor="{anchor}" fill="#555">'
            f"{'0' if v == 0 else f'{v / 1000:g} s' if seconds else f'{v:g} ms'}</text>"
        )
    for i, (r, s, d) in enumerate(zip(rows, starts, durs)):
        y = HEAD + i * ROW
        rid: Any = r.get("id")  # the event id (whatever the row holds: it is escaped, not interpreted)
        lx = 4 + min(max(int(_num(r.get("depth"))), 0), MAX_DEPTH) * INDENT
        label = _clean(r.get("label")) or "?"
        status, kind = _clean(r.get("status")), r.get("kind")
        colour = ERROR_COLOUR if is_error(status) else KIND_COLOURS.get(str(kind), OTHER_COLOUR)
        bx = min(x0 + s * scale, x1 - MIN_BAR)
        bw = min(max(d * scale, MIN_BAR), x1 - bx)
        dur = fmt_ms(d)
        tip = f"{label[:500]} · {dur} · {status or '?'} · {_clean(r.get('server')) or '?'}"
        zebra = 'fill="#f3f4f7"' if i % 2 == 0 else 'fill="#fff" fill-opacity="0"'
        running = ' fill-opacity="0.55"' if status == "running" else ""
        out.append(
            f'<a href="{_esc(href(rid))}"><title>{_esc(tip)}</title>'
            f'<rect x="0" y="{y}" width="{width}" height="{ROW}" {zebra}/>'
            f'<text x="{lx}" y="{y + 13}" fill="#222">{_esc(fit(label, int((LABEL_W - lx) / CHAR)))}</text>'
            f'<rect class="bar" data-id="{_esc(rid)}" x="{bx:.1f}" y="{y + 3}" width="{bw:.1f}" '
            f'height="{ROW - 6}" rx="2" fill="{colour}"{running}/>'
        )
        if bx + bw + 4 + len(dur) * CHAR <= width - 2:
            out.append(f'<text x="{bx + bw + 4:.1f}" y="{y + 13}" fill="#555">{dur}</text>')
        out.append("</a>")
    if more:
        y = HEAD + len(rows) * ROW
        out.append(f'<text class="more" x="4" y="{y + 13}" fill="#555">… {more:,} more events</text>')
    out.append("</svg>")
    return "".join(out)


def _adjacency(n: int, edges: list[tuple[int, int]]) -> tuple[list[list[int]], list[int]]:
    """Each node's successors and in-degree."""
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for u, v in edges:
        succ[u].append(v)
        indeg[v] += 1
    return succ, indeg


def _back_edges(n: int, edges: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """The edges that close a cycle: those a depth-first search from each unvisited node in input order (a plan lists
    its steps in order, so the edge pointing back to an earlier step is the one reversed; iterative, so a long chain
    cannot exhaust the stack) finds pointing at a node still on its stack."""
    succ, _ = _adjacency(n, edges)
    state, back = [0] * n, set()  # state: 0 unseen, 1 on the stack, 2 done
    for root in range(n):
        if state[root]:
            continue
        state[root], stack = 1, [(root, iter(succ[root]))]
        while stack:
            u, it = stack[-1]
            v = next(it, None)
            if v is None:
                state[u] = 2
                stack.pop()
            elif state[v] == 1:
                back.add((u, v))
            elif state[v] == 0:
                state[v] = 1
                stack.append((v, iter(succ[v])))
    return back


def _layers(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Each node's layer in an acyclic graph: the longest path to it from a root (Kahn's order)."""
    (succ, indeg), layer = _adjacency(n, edges), [0] * n
    ready = [i for i in range(n) if indeg[i] == 0]
    for u in ready:  # grows while it is read
        for v in succ[u]:
            layer[v] = max(layer[v], layer[u] + 1)
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return layer


def _crossings(order: list[list[int]], down: dict[int, list[int]]) -> int:
    total = 0
    for upper, lower in pairwise(order):
        pos = {v: i for i, v in enumerate(lower)}
        segs = [(i, pos[w]) for i, v in enumerate(upper) for w in down.get(v, ())]
        total += sum(1 for j, (a, b) in enumerate(segs) for c, d in segs[j + 1 :] if (a - c) * (b - d) < 0)
    return total


def _order(order: list[list[int]], up: dict[int, list[int]], down: dict[int, list[int]]) -> list[list[int]]:
    """Barycentre heuristic: two down-and-up sweeps, each layer sorted by the mean position of its neighbours in
    the layer just swept (a node without any keeps its place); the ordering with the fewest crossings wins."""
    pos = {v: i for layer in order for i, v in enumerate(layer)}
    best, fewest = [list(layer) for layer in order], _crossings(order, down)
    for _ in range(2):
        for rng, nbrs in ((range(1, len(order)), up), (range(len(order) - 2, -1, -1), down)):
            for li in rng:
                key = {
                    v: (sum(pos[w] for w in nbrs[v]) / len(nbrs[v]) if nbrs.get(v) else pos[v], pos[v])
                    for v in order[li]
                }
                order[li].sort(key=key.__getitem__)
                pos.update((v, i) for i, v in enumerate(order[li]))
        crossings = _crossings(order, down)
        if crossings < fewest:
            best, fewest = [list(layer) for layer in order], crossings
    return best


def plan_svg(plan: dict[str, Any], *, href: Callable[[str], str] | None = None, width: int = 960) -> str:
    """A layered drawing of a plan's steps and their dependencies as an ``<svg>`` element (``""`` without steps).

    ``plan``: :func:`~aisac_core.trace.report.run_report`'s ``{nodes: [{id, label, tool, helper}], edges: [(from,
    to)]}``; edges to unknown ids, self-loops and repeats are left out, a repeated node id counts once.
    ``href(node_id)``: a link for each step (none by default). ``width``: of the drawing, px: nodes are 190 px wide,
    narrowed to 130 px when the widest layer would not fit; a drawing that still does not fit is wider than asked.

    Layout: the layered method of Sugiyama, Tagawa & Toda (1981), "Methods for visual understanding of hierarchical
    system structures", IEEE Trans. SMC 11(2), top to bottom: (1) cycles broken: the back edges of a depth-first
    search (a buggy planner's cycle) are reversed for the layout and drawn dashed, the arrow pointing back up;
    (2) layering: a step's layer is the longest path to it from a root, so a step sits below everything it depends
    on; an edge spanning several layers gets a dummy node in each one it crosses; (3) crossing reduction: the
    barycentre heuristic (each node placed at the mean position of its neighbours in the adjacent layer, alternating
    downward and upward sweeps, the best of two rounds kept); (4) each layer centred. Steps are rounded rectangles
    ``<g class="node" data-id="{id}">`` (fill by kind: tool, helper or neither) with the label wrapped over up to 3
    lines (cut with …) and the tool or helper name in a small last line; each dependency is a cubic Bézier
    ``<path class="edge" data-from data-to>`` (``class="edge back"`` when dashed) through its dummy nodes, ending in
    an arrowhead: one ``<marker>``, its id derived from the plan, so two drawings on one page do not clash.
    """
    # long function: the plan's SVG drawn in one pass over its nodes and edges
    by_id: dict[str, dict[str, Any]] = {}
    for nd in (plan or {}).get("nodes") or []:
        if isinstance(nd, dict) and _clean(nd.get("id")):
            by_id.setdefault(_clean(nd.get("id")), nd)
    if not by_id:
        return ""
    ids, nodes, n = list(by_id), list(by_id.values()), len(by_id)
    idx = {k: i for i, k in enumerate(ids)}
    pairs = [
        (idx.get(_clean(e[0]), -1), idx.get(_clean(e[1]), -1))
        for e in (plan or {}).get("edges") or []
        if isinstance(e, (list, tuple)) and len(e) == 2
    ]
    edges = list(dict.fromkeys((a, b) for a, b in pairs if a >= 0 and b >= 0 and a != b))
    back = _back_edges(n, edges)
    forward = [(v, u) if (u, v) in back else (u, v) for u, v in edges]  # every edge pointing down
    lay = _layers(n, forward)
    chains: list[list[int]] = []
    up: dict[int, list[int]] = {}
    down: dict[int, list[int]] = {}
    for u, v in forward:  # long edges: a dummy node (index >= n) in every layer between
        chain = [u, *range(len(lay), len(lay) + lay[v] - lay[u] - 1), v]
        lay += list(range(lay[u] + 1, lay[v]))
        chains.append(chain)
        for a, b in pairwise(chain):
            down.setdefault(a, []).append(b)
            up.setdefault(b, []).append(a)
    order: list[list[int]] = [[] for _ in range(max(lay) + 1)]
    for i, li in enumerate(lay):
        order[li].append(i)
    order = _order(order, up, down)
    nw = int(
        min(
            NODE_W,
            max(
                NODE_MIN_W,
                min(
                    (width - 2 * MARGIN - sum(DUMMY_W for v in layer if v >= n) - (len(layer) - 1) * H_GAP)
                    / max(sum(v < n for v in layer), 1)
                    for layer in order
                ),
            ),
        )
    )
    subs = [" · ".join(_clean(nd.get(k)) for k in ("tool", "helper") if _clean(nd.get(k))) for nd in nodes]
    texts = [
        textwrap.wrap(
            _clean(nd.get("label")) or _clean(nd.get("id")), int((nw - 14) / PCHAR), max_lines=3, placeholder="…"
        )
        or ["?"]
        for nd in nodes
    ]
    nh = 12 + 15 * max(map(len, texts)) + (13 if any(subs) else 0)

    def slot(v: int) -> int:
        return nw if v < n else DUMMY_W

    need = max(sum(map(slot, layer)) + (len(layer) - 1) * H_GAP for layer in order)
    w = max(width, need + 2 * MARGIN)
    height = 2 * MARGIN + len(order) * nh + (len(order) - 1) * V_GAP
    cx: dict[int, float] = {}
    for layer in order:
        x = (w - sum(map(slot, layer)) - (len(layer) - 1) * H_GAP) / 2
        for v in layer:
            cx[v], x = x + slot(v) / 2, x + slot(v) + H_GAP
    top = [MARGIN + li * (nh + V_GAP) for li in lay]
    marker = "plan-arrow-" + hashlib.sha1(repr((ids, edges)).encode("utf-8", "replace")).hexdigest()[:10]
    out = [
        (
            f'<svg xmlns="{SVG_NS}" width="{w}" height="{height}" viewBox="0 0 {w} {height}" role="img" '
            f'aria-label="Plan: {n} steps, {len(edges)} dependencies" font-family="{SANS}" font-size="12">'
            f'<defs><marker id="{marker}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="{EDGE_COLOUR}"/></marker></defs>'
        )
    ]
    edge = f'fill="none" stroke="{EDGE_COLOUR}" stroke-width="1.3" marker-end="url(#{marker})"'
    for (u, v), chain in zip(edges, chains):  # as given; a reversed back edge's chain runs from v down to u
        pts = [(cx[chain[0]], top[chain[0]] + nh)]
        for p in chain[1:]:  # into each item's top; out of a dummy's bottom (straight down its layer)
            pts += [(cx[p], top[p])] + ([(cx[p], top[p] + nh)] if p >= n else [])
        if (u, v) in back:
            pts.reverse()
        d = f"M{pts[0][0]:.1f},{pts[0][1]}" + "".join(  # control points half-way: straight when x does not change
            f"C{x1:.1f},{(y1 + y2) / 2:.1f} {x2:.1f},{(y1 + y2) / 2:.1f} {x2:.1f},{y2}"
            for (x1, y1), (x2, y2) in pairwise(pts)
        )
        dash = ' stroke-dasharray="5 4"' if (u, v) in back else ""
        out.append(
            f'<path class="edge{" back" if dash else ""}" data-from="{_esc(ids[u])}" data-to="{_esc(ids[v])}" '
            f'd="{d}" {edge}{dash}/>'
        )
    for i, nd in enumerate(nodes):
        fill, stroke = NODE_STYLE["tool" if _clean(nd.get("tool")) else "helper" if _clean(nd.get("helper")) else None]
        x, y = cx[i] - nw / 2, top[i]
        tip = " · ".join(t for t in (_clean(nd.get("label"))[:1000], subs[i], f"step {ids[i]}") if t)
        ty = y + (nh - (13 if subs[i] else 0) - 15 * len(texts[i])) / 2 + 11  # the lines centred in the box
        body = [
            (
                f'<title>{_esc(tip)}</title><rect x="{x:.1f}" y="{y}" width="{nw}" height="{nh}" rx="7" '
                f'fill="{fill}" stroke="{stroke}"/>'
            )
        ]
        body += [
            f'<text x="{cx[i]:.1f}" y="{ty + 15 * j:.1f}" text-anchor="middle" fill="#1d2433">{_esc(t)}</text>'
            for j, t in enumerate(texts[i])
        ]
        if subs[i]:
            body.append(
                f'<text x="{cx[i]:.1f}" y="{y + nh - 8}" text-anchor="middle" font-family="{MONO}" '
                f'font-size="10" fill="#5a6275">{_esc(fit(subs[i], int((nw - 12) / 6.0)))}</text>'
            )
        inner = "".join(body) if href is None else f'<a href="{_esc(href(ids[i]))}">{"".join(body)}</a>'
        out.append(f'<g class="node" data-id="{_esc(ids[i])}">{inner}</g>')
    out.append("</svg>")
    return "".join(out)
