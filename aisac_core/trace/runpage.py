"""The run page's HTML: one renderer for the live dashboard and the self-contained HTML export.

:func:`render_run` turns :meth:`aisac_core.trace.queries.RunQueries.get_run` (with results) into the page body, through
:func:`aisac_core.trace.report.run_report`, in this order: the question; failed calls; the verdict with its gates
and critiques; the answer (Markdown, its ``[n]`` markers linked to the cited evidence cards); the cited evidence
(the passage highlighted on an image of its PDF page, or in its text for other formats; verification state);
the plan as a DAG (SVG) with a text outline; the router's decision; a waterfall of every step and tool call (SVG);
the other retrieved passages; every event as an expandable entry with its arguments and result formatted as
lists and tables (the stored JSON a click away).

Everything is escaped: questions, answers, documents and tool results are untrusted. The answer's Markdown is
rendered by markdown-it-py (CommonMark) with raw HTML disabled. No script is needed to read the page.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from aisac_core.evidence.anchor import ocr_note
from aisac_core.trace.report import anchor_label, run_report, walk
from aisac_core.trace.svg import plan_svg, waterfall_svg

#: characters of a stored result shown in an expanded entry (its raw JSON)
RESULT_CHARS = 4000
#: rows of a list of records shown as a table in an entry
TABLE_ROWS = 12
#: cited evidence cards rendered with a page image (the rest show their text)
MAX_PAGE_IMAGES = 12

CSS = """
:root{--ok:#1a7f37;--err:#cf222e;--warn:#bf8700;--mut:#57606a;--bg:#f6f8fa;--bd:#d0d7de;--acc:#0969da}
body{font:14px/1.5 system-ui,sans-serif;margin:0;color:#1f2328}
header{background:#24292f;color:#fff;padding:.6em 1.2em;display:flex;gap:1em;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600} main{padding:1em 1.2em;max-width:1200px}
h1.question{font-size:1.45em;margin:.2em 0 .3em;line-height:1.3} h1.question.none{color:var(--mut);font-weight:500}
h2{font-size:1.05em;margin:1.4em 0 .5em;border-bottom:1px solid var(--bd);padding-bottom:.2em}
table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid var(--bd);padding:.3em .5em;text-align:left;vertical-align:top}
.badge{display:inline-block;padding:0 .5em;border-radius:1em;font-size:.85em;background:var(--bg);border:1px solid var(--bd)}
.st-ok,.v-unchanged,.g-pass{color:var(--ok);border-color:var(--ok)} .st-tool_error,.st-exception,.st-failed,.st-errors,.v-missing,.g-fail{color:var(--err);border-color:var(--err)}
.gapwarn{color:var(--warn);border-left:3px solid var(--warn);padding-left:.5em;font-weight:600} .v-changed{color:var(--warn);border-color:var(--warn)} .st-running{color:var(--acc);border-color:var(--acc)} .live{color:#3fb950} .mut{color:var(--mut)}
.errors{background:#ffebe9;border:1px solid var(--err);padding:.5em 1em;border-radius:6px}
.verdict{display:flex;flex-wrap:wrap;gap:.5em;align-items:center} .verdict .label{font-size:1.05em;font-weight:600;padding:.1em .7em}
details.event{border:1px solid var(--bd);border-radius:6px;margin:.3em 0;padding:.2em .6em;background:#fff}
details.event>summary{cursor:pointer} details.event .kids{margin-left:1.2em}
details.role_step{background:#f3f0ff} details.model_call{background:#fff8e5}
pre{background:var(--bg);padding:.5em;overflow:auto;max-height:24em;white-space:pre-wrap;word-break:break-word}
.answer{font-size:1.02em;max-width:60em} .answer a.cite{text-decoration:none;font-weight:600;color:var(--acc)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(320px,1fr));gap:.7em}
.card{border:1px solid var(--bd);border-radius:6px;padding:.6em;background:#fff;scroll-margin-top:1em}
.card:target{outline:3px solid var(--acc)} .card .n{font-weight:700;color:var(--acc);margin-right:.3em}
.card .text{font-size:.92em;margin:.3em 0;max-height:12em;overflow:auto} .card .meta{color:var(--mut);font-size:.85em;overflow-wrap:anywhere}
.card mark{background:#fff3a3;padding:0 .1em} .cards.cited .card{grid-column:span 1}
.page{position:relative;margin:.4em 0;border:1px solid var(--bd);line-height:0} .page img{display:block;width:100%;height:auto}
svg.hls{position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none;overflow:visible}
svg.hls .hl{fill:rgba(255,221,0,.18);stroke:#d4a72c;stroke-width:2px;vector-effect:non-scaling-stroke} svg.hls .spot{fill:none;scroll-margin-top:30vh}
.sev-high,.sev-critical,.sev-error,.sev-blocker{color:var(--err);font-weight:600} .sev-medium,.sev-warning,.sev-major{color:var(--warn);font-weight:600}
.sev-low,.sev-info,.sev-minor{color:var(--mut)} dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em;margin:.2em 0}
dl.kv dt{font-weight:600;color:#32383f} dl.kv dd{margin:0;word-break:break-word}
table.recs{font-size:.9em;margin:.2em 0} table.recs th{background:var(--bg)}
.svg{overflow-x:auto} .svg svg{max-width:100%;height:auto} form.filters{display:flex;gap:.5em;margin-bottom:.6em} form.filters input,form.filters select{padding:.2em}
.page a{display:block;cursor:zoom-in} .zoom{display:none} .zoom:has(:target),.zoom:target{display:block;position:fixed;inset:0;z-index:10;background:rgba(0,0,0,.75);overflow:auto;padding:2em}
.zoom .zpage{position:relative;width:fit-content;margin:0 auto;background:#fff;line-height:0} .zoom .zpage img{display:block;max-width:none}
.zoom .close{position:fixed;top:.3em;right:.6em;color:#fff;font-size:2em;text-decoration:none;z-index:11}
.a-intact,.s-supported{color:var(--ok);border-color:var(--ok)} .a-changed,.s-partly{color:var(--warn);border-color:var(--warn)}
.a-missing,.s-not-supported,.s-contradicted{color:var(--err);border-color:var(--err)} .s-not-judged{color:var(--mut)}
.figs img{max-width:100%;border:1px solid var(--bd);margin:.3em 0} .cell-failed{color:var(--err);font-weight:600}
td.q{max-width:38em} td.q a{font-weight:600;text-decoration:none;color:#1f2328} td.q .rid{font-size:.8em}
"""

_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"


def e(x: Any) -> str:
    """HTML-escaped text of ``x`` (None -> empty)."""
    return html.escape("" if x is None else str(x), quote=True)


def pretty(x: Any, limit: int = RESULT_CHARS) -> str:
    """``x`` as indented JSON (text as is), cut after ``limit`` characters with a note."""
    s = x if isinstance(x, str) else json.dumps(x, indent=1, ensure_ascii=False, default=str)
    return s if len(s) <= limit else s[:limit] + f"\n… ({len(s) - limit:,} more characters: trace_get_event)"


# ---------------------------------------------------------------------------------------------- formatted values


def fmt(value: Any, depth: int = 0) -> str:
    """A JSON value as HTML a person reads: objects as definition lists, lists of records as tables (the first
    :data:`TABLE_ROWS` rows), short lists inline, long text in a block; nesting deeper than 4 as compact JSON."""
    if value is None:
        return "<span class=mut>-</span>"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return e(f"{value:.4g}" if isinstance(value, float) else value)
    if isinstance(value, str):
        if "\n" in value or len(value) > 240:
            return f"<pre>{e(value if len(value) <= RESULT_CHARS else value[:RESULT_CHARS] + '…')}</pre>"
        return e(value)
    if depth >= 4:
        return f"<code>{e(json.dumps(value, ensure_ascii=False, default=str)[:300])}</code>"
    if isinstance(value, dict):
        if not value:
            return "<span class=mut>{}</span>"
        return (
            "<dl class=kv>"
            + "".join(f"<dt>{e(k)}</dt><dd>{fmt(v, depth + 1)}</dd>" for k, v in value.items())
            + "</dl>"
        )
    if isinstance(value, list):
        if not value:
            return "<span class=mut>none</span>"
        if all(isinstance(v, dict) for v in value):
            return _records(value, depth)
        if all(not isinstance(v, (dict, list)) for v in value) and len(value) <= 20:
            return ", ".join(fmt(v, depth + 1) for v in value)
        return (
            "<ol>"
            + "".join(f"<li>{fmt(v, depth + 1)}</li>" for v in value[:TABLE_ROWS])
            + "</ol>"
            + (f"<span class=mut>… {len(value) - TABLE_ROWS} more</span>" if len(value) > TABLE_ROWS else "")
        )
    return e(value)


def _records(rows: list[dict[str, Any]], depth: int) -> str:
    cols: list[str] = []
    for r in rows[:TABLE_ROWS]:
        cols += [k for k in r if k not in cols and k != "anchor"]
    cols = cols[:8]

    def cell(v: Any) -> str:
        if isinstance(v, str) and len(v) > 160:
            return e(" ".join(v.split())[:160] + "…")
        return fmt(v, depth + 2) if isinstance(v, (dict, list)) else fmt(v, depth + 1)

    head = "".join(f"<th>{e(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in cols) + "</tr>" for r in rows[:TABLE_ROWS])
    more = f"<span class=mut>… {len(rows) - TABLE_ROWS} more rows</span>" if len(rows) > TABLE_ROWS else ""
    return f"<table class=recs><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


# ---------------------------------------------------------------------------------------------- answer


def answer_html(text: str, cited: set[int]) -> str:
    """The answer's Markdown as HTML (raw HTML disabled); each ``[n]`` marker whose ``n`` is in ``cited`` becomes a
    link to the evidence card ``#cite-n``."""
    from markdown_it import MarkdownIt

    def mark(m: re.Match[str]) -> str:
        ns = [int(x) for x in re.split(r"\s*,\s*", m.group(1))]
        if not all(n in cited for n in ns):
            return m.group(0)
        return "".join(f"{_MARK_OPEN}{n}{_MARK_CLOSE}" for n in ns)

    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    rendered = md.render(re.sub(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]", mark, text))
    return re.sub(
        f"{_MARK_OPEN}(\\d+){_MARK_CLOSE}",
        lambda m: f"<a class=cite href='#cite-{m.group(1)}' data-cite='{m.group(1)}'>[{m.group(1)}]</a>",
        rendered,
    )


# ---------------------------------------------------------------------------------------------- evidence cards


def highlight(text: str, passage: str | None) -> str:
    """``text`` escaped, with the first occurrence of ``passage`` (whitespace-insensitive) in ``<mark>``."""
    if not passage:
        return e(text)
    words = passage.split()
    if not words:
        return e(text)
    pat = re.compile(r"\s+".join(re.escape(w) for w in words[:60]), re.IGNORECASE)
    m = pat.search(text)
    if m is None:
        return e(text)
    return e(text[: m.start()]) + "<mark>" + e(m.group(0)) + "</mark>" + e(text[m.end() :])


def _verify_badge(v: dict[str, Any] | None) -> str:
    if v is None:
        return "<span class='badge verify mut' title='not checked'>not checked</span>"
    st = v.get("status") or "?"
    extra = f" ({v['anchor_status']})" if v.get("anchor_status") not in (None, "ok") else ""
    return (
        f"<span class='badge verify v-{e(st)}' title='{e(v.get('detail'))}'>anchor: {e(anchor_label(st))}{e(extra)}"
        "</span>"
    )


def highlight_svg(
    width: float, height: float, rects: list[tuple[float, float, float, float]], *, spot_id: str | None = None
) -> str:
    """The highlights of a page image as an SVG overlay laid over the image (CSS class ``hls``: the image's box).

    ``width``, ``height``: the image's size in pixels; ``rects``: ``[(x0, y0, x1, y1)]`` pixel boxes of the highlighted
    lines on that image (:class:`~aisac_core.trace.pageimage.PageImage`). The SVG's ``viewBox`` is the image's pixel
    grid (``preserveAspectRatio="none"``: stretched exactly as the image), so each ``<rect class=hl>`` covers its box
    at any displayed size. ``spot_id``: an invisible ``<rect class=spot>`` with that id on the first highlighted line
    (the top of the image without one), the target a link scrolls into view. Geometry travels in SVG attributes,
    not in ``style`` attributes, so the dashboard's Content-Security-Policy needs no ``style-src-attr
    'unsafe-inline'`` (CSP Level 3, section 6.1.3: only ``style`` attributes are inline style; SVG 2, section 9.2:
    ``x``, ``y``, ``width``, ``height`` of ``rect`` are geometry attributes)."""
    boxes = "".join(
        f"<rect class=hl x={x0:g} y={y0:g} width={x1 - x0:g} height={y1 - y0:g}></rect>" for x0, y0, x1, y1 in rects
    )
    spot = ""
    if spot_id is not None:
        x0, y0, x1, y1 = rects[0] if rects else (0, 0, width, 1)
        spot = f"<rect class=spot id='{e(spot_id)}' x={x0:g} y={y0:g} width={x1 - x0:g} height={y1 - y0:g}></rect>"
    return (
        f"<svg class=hls xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width:g} {height:g}' "
        f"preserveAspectRatio=none aria-hidden=true focusable=false>{boxes}{spot}</svg>"
    )


def _page_html(img: dict[str, Any] | None, card: dict[str, Any]) -> str:
    if not img:
        return ""
    w, h = img["width"], img["height"]
    rects = list(img.get("rects") or [])
    note = "" if img.get("found") else "<div class='meta mut'>the passage was not located on the page image</div>"
    spot = f"page-{card.get('n') if card.get('n') is not None else card.get('chunk_id')}"
    key = e(spot)
    alt = f"page {e(card.get('page'))} of {e(card.get('title') or '')}"
    # click the page: the same image full size in an overlay (a CSS :target, no script), the span scrolled into view
    # by the target placed on the first highlighted line; no style attribute anywhere (the CSP forbids them)
    full = (
        f"<div class=zoom id='{key}'><a class=close href='#cite-{e(card.get('n'))}' title='close'>×</a>"
        f"<div class=zpage><img src='{e(img['src'])}' width={w} height={h} alt='{alt}, full size'>"
        f"{highlight_svg(w, h, rects, spot_id=f'{spot}-span')}</div></div>"
    )
    return (
        f"<div class=page data-found='{str(bool(img.get('found'))).lower()}'><a href='#{key}-span' "
        f"title='open the page full size'><img src='{e(img['src'])}' width={w} height={h} loading=lazy alt='{alt}'>"
        f"{highlight_svg(w, h, rects)}</a></div>{note}{full}"
    )


def _card_html(
    card: dict[str, Any], verify: dict[str, Any] | None, img: dict[str, Any] | None, *, link_event: bool = True
) -> str:
    source = card.get("title") or (card.get("path") or "?").rsplit("/", 1)[-1]
    score = card.get("score")
    n = card.get("n")
    text = card.get("text") or card.get("quote") or ""
    body = highlight(text[:1500] + ("…" if len(text) > 1500 else ""), card.get("quote") if card.get("text") else None)
    anchor = f" id='cite-{n}'" if n is not None else ""
    sup = card.get("support")
    prob = card.get("support_probability")
    shown = f"{sup} (P {prob:.2f})" if isinstance(prob, (int, float)) else str(sup)
    sup_badge = (
        f" · <span class='badge support s-{e(str(sup).replace(' ', '-'))}'>support: {e(shown)}</span>"
        if n is not None
        else ""
    )
    if n is not None and not sup:
        sup_badge = " · <span class='badge support mut'>support: not judged</span>"
    url = card.get("url")
    link = f" · <a class=record href='{e(url)}' rel='noopener noreferrer'>{e(url)}</a>" if url else ""
    ev = (
        f" · <a href='#ev-{card['event_id']}'>event {card['event_id']}</a>"
        if link_event and card.get("event_id")
        else ""
    )
    return (
        f"<div class=card{anchor} data-chunk='{e(card.get('chunk_id'))}'>"
        f"<div>{f'<span class=n>[{n}]</span>' if n is not None else ''}<b>{e(source)}</b>{link}</div>"
        f"<div class=meta>page {e(card.get('page') or '-')} · {e(card.get('section') or '-')} · score "
        f"{e(f'{score:.3f}' if isinstance(score, (int, float)) else '-')} · {_verify_badge(verify)}{sup_badge}"
        f"{f' · <span class=badge>{e(note)}</span>' if (note := ocr_note(card)) else ''}</div>"
        f"{_page_html(img, card)}<div class=text>{body}</div>"
        f"<div class=meta title='{e(card.get('path'))}'>{e(card.get('path'))}{ev}</div></div>"
    )


# ---------------------------------------------------------------------------------------------- steps


def cell_failed(ev: dict[str, Any]) -> bool:
    """Whether ``ev`` is a code cell (``data_code_run`` / ``data_code_job_status``) whose result says it failed
    (``ok: false`` and not pending): the call itself succeeded, the code did not."""
    res = ev.get("result")
    return (
        ev.get("tool") in ("data_code_run", "data_code_job_status")
        and isinstance(res, dict)
        and res.get("ok") is False
        and not res.get("pending")
    )


def _figures(ev: dict[str, Any], figure_href: Callable[[int, int], str] | None) -> str:
    res = ev.get("result")
    figs = res.get("figures") if isinstance(res, dict) else None
    if not figure_href or not isinstance(figs, list) or not figs:
        return ""
    imgs = "".join(
        f"<img src='{e(figure_href(ev['id'], i))}' alt='{e(f.get('name') if isinstance(f, dict) else 'figure')}' "
        "loading=lazy>"
        for i, f in enumerate(figs[:8])
    )
    return f"<div class=figs>{imgs}</div>"


def event_html(ev: dict[str, Any], figure_href: Callable[[int, int], str] | None = None) -> str:
    """One event as an expandable entry: formatted arguments and result, the error, ids and hashes, children. A
    failed code cell is badged ``failed`` (not its call's ``ok``); a code run's figures are shown inline
    (``figure_href(event_id, index)``: their URL; None: not shown)."""
    kids = "".join(event_html(c, figure_href) for c in ev.get("children", []))
    res = ev.get("result")
    body = (
        f"<div class=args><b>arguments</b> <span class=mut>sha256 {e(ev['arguments_sha256'][:16])}</span>"
        f"{fmt(ev['arguments'])}</div>"
    )
    if ev.get("error"):
        body += f"<div class=errors>{e(ev['error'])}</div>"
    failed = cell_failed(ev)
    if failed and isinstance(res, dict):
        body += f"<div class=errors>the code failed: {e(res.get('error_type') or '')} {e(res.get('error') or '')}</div>"
    if res is not None:
        trunc = " (stored truncated)" if ev.get("result_truncated") else ""
        body += (
            f"<div class=result><b>result</b> <span class=mut>sha256 {e((ev['result_sha256'] or '')[:16])}"
            f"{trunc}</span>{fmt(res)}<details class=raw><summary class=mut>stored JSON</summary>"
            f"<pre>{e(pretty(res))}</pre></details></div>"
        )
    body += (
        f"<div class=mut>event {ev['id']} · {e(ev['kind'])} · started {e(ev['started_at'][11:23])} · "
        f"{ev['latency_ms']:.1f} ms{' · parent ' + str(ev['parent_id']) if ev['parent_id'] else ''}</div>"
    )
    return (
        f"<details class='event {e(ev['kind'])}' id='ev-{ev['id']}' data-id='{ev['id']}'><summary>"
        f"<b>{e(ev['tool'])}</b> "
        + (
            "<span class='badge st-errors cell-failed'>failed</span> "
            if failed
            else f"<span class='badge st-{e(ev['status'])}'>{e(ev['status'])}</span> "
        )
        + f"<span class=mut>{ev['latency_ms']:.1f} ms</span> <span class=mut>{e(ev['result_summary'][:160])}</span>"
        f"</summary>{body}{('<div class=kids>' + kids + '</div>') if kids else ''}</details>"
        + _figures(ev, figure_href)  # outside the collapsed entry: a code run's figures are seen without a click
    )


def _outline(plan: dict[str, Any]) -> str:
    """The plan as a nested text outline: each step under its last dependency or enclosing step (cycle-safe: the
    depth is capped); steps of a plain list stay siblings, in order."""
    nodes = {n["id"]: n for n in plan["nodes"]}
    parent: dict[str, str] = dict(plan.get("parents") or {})
    kids: dict[str | None, list[str]] = {}
    for nid in nodes:
        kids.setdefault(parent.get(nid), []).append(nid)

    def emit(pid: str | None, depth: int) -> str:
        if depth > 12 or pid not in kids:
            return ""
        items = []
        for nid in kids[pid]:
            n = nodes[nid]
            label = f"{nid}: {n['label']}" if n.get("named") and n["label"] != nid else n["label"]
            tag = "".join(f" <span class=badge>{k}: {e(n[k])}</span>" for k in ("tool", "helper") if n.get(k))
            items.append(f"<li>{e(label)}{tag}{emit(nid, depth + 1)}</li>")
        return "<ol>" + "".join(items) + "</ol>"

    return emit(None, 0)


# ---------------------------------------------------------------------------------------------- the page


def render_run(
    data: dict[str, Any],
    *,
    verify: dict[str, Any] | None = None,
    page_image: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
    event_href: Callable[[int], str] = lambda i: f"#ev-{i}",
    run_href: Callable[[str], str] = lambda rid: f"run?id={quote(rid, safe='')}",
    figure_href: Callable[[int, int], str] | None = None,
) -> str:
    """The run page's body (``<div id=body data-last-id=...>``) for ``data`` = ``get_run(..., include_results=True)``.

    ``verify``: :func:`aisac_core.trace.verify.verify_run`'s result (the cards' badges; None: "not checked");
    ``page_image(card)``: ``{src, width, height, rects: [(x0, y0, x1, y1) px], found}`` for a cited card's page image
    or None (no image: the card shows the highlighted text only); ``event_href``: link of an event's entry;
    ``run_href``: link of another run's page (a host's ``roles_run`` call links the graph's own run);
    ``figure_href(event_id, i)``: URL of the i-th figure of a code run (None: figures not shown)."""
    # long function: the run page's sections in page order
    r = run_report(data)
    run = r["run"]
    by_chunk = {a["chunk_id"]: a for a in (verify or {}).get("anchors", [])} if verify else {}
    parts = []
    q = r["question"]
    parts.append(
        f"<h1 class=question id=question>{e(q)}</h1>"
        if q
        else "<h1 class='question none' id=question>(no question recorded)</h1>"
    )
    parts.append(
        f"<p class=mut>{'<span class=live>● active</span> · ' if run['active'] else ''}run {e(run.get('run_id') or r['run_id'])} · "
        f"started {e(run['started_at'][:19].replace('T', ' '))} UTC · {run['duration_s']} s · {run['events']} events "
        f"({e(', '.join(f'{k} {v}' for k, v in run['by_kind'].items()))}) · servers {e(', '.join(run['servers']))}"
        f"{' · question from ' + e(r['question_source']) if r['question_source'] else ''}</p>"
    )
    gap = (verify or {}).get("gap") or {}
    if gap.get("detail"):
        parts.append(f"<p class=gapwarn id=trace-gap role=alert>⚠ trace gap: {e(gap['detail'])}</p>")
    if r["linked_runs"]:
        links = ", ".join(f"<a href='{e(run_href(x))}'>{e(x)}</a>" for x in r["linked_runs"])
        parts.append(
            f"<p id=linked>The roles graph this run started is traced as its own run: {links} (its plan, "
            "steps and timeline).</p>"
        )
    if r["errors"]:
        items = "".join(
            f"<li><a href='{e(event_href(x['id']))}'>{e(x['tool'])}</a> ({e(x['status'])}): {e(x['error'])}</li>"
            for x in r["errors"]
        )
        parts.append(
            f"<section class=errors id=errors><b>{len(r['errors'])} failed calls</b><ul>{items}</ul></section>"
        )
    v = r["verdict"]
    if v or r["critiques"]:
        gates = "".join(
            f"<span class='badge g-{'pass' if g['passed'] else 'fail'}'>{e(k)} gate: "
            f"{'ok' if g['passed'] else 'failed'}</span>"
            for k, g in (v or {}).get("gates", {}).items()
        )
        head = ""
        if v:
            # green only for what was checked: without a model, a pass whose support is not "supported" is amber
            full = v["content_judged"] or v.get("support") == "supported"
            cls = ("g-pass" if full else "s-partly") if v["passed"] else "g-fail" if v["passed"] is False else ""
            judged = "" if v["content_judged"] else "<span class='badge mut'>content: not judged (no model)</span>"
            av, sv = v.get("anchors"), v.get("support") or "not judged"
            two = (
                f"<span class='badge anchors a-{e(av or 'none')}' title='the cited bytes are still there'>anchors: "
                f"{e(av or '-')}</span><span class='badge support s-{e(sv.replace(' ', '-'))}' title='the cited "
                f"sentence states the claim{(' (judged by ' + e(v.get('support_by')) + ')') if v.get('support_by') else ''}'>"
                f"support: {e(sv)}</span>"
            )
            head = (
                f"<div class=verdict><span class='badge label {cls}'>{e(v['label'])}</span>{two}{gates}{judged}"
                f"<a class=mut href='{e(event_href(v['event_id']))}'>evaluator, event {v['event_id']}</a></div>"
            )

        def lis(items: list[dict[str, Any]]) -> str:
            return "".join(
                f"<li><span class='sev sev-{e(c['severity'])}'>{e(c['label'])}</span> "
                + (f"<span class=badge>{e(c['aspect'])}</span> " if c.get("aspect") else "")
                + f"{e(c['message'])} <a class=mut href='{e(event_href(c['event_id']))}'>event {c['event_id']}</a></li>"
                for c in items
            )

        final = [c for c in r["critiques"] if c.get("final", True)]
        earlier = [c for c in r["critiques"] if not c.get("final", True)]
        crit = f"<ul id=critiques>{lis(final)}</ul>" if final or earlier else ""
        if earlier:
            crit += (
                f"<details class=earlier><summary class=mut>{len(earlier)} critiques of earlier attempts (each "
                f"led to a new plan)</summary><ul>{lis(earlier)}</ul></details>"
            )
        parts.append(f"<h2>Evaluation</h2><section id=verdict>{head}{crit}</section>")
    a = r["answer"]
    if a:
        ns = {c["n"] for c in r["cited"] if c["n"] is not None}
        parts.append(
            f"<h2>Answer</h2><section id=answer class=answer>{answer_html(a['text'], ns)}"
            f"<p class=mut>{len(a['citations'])} citations · by {e(a.get('by') or '-')}</p></section>"
        )
    if r["cited"]:
        cards = []
        for i, c in enumerate(r["cited"]):
            img = page_image(c) if page_image is not None and i < MAX_PAGE_IMAGES else None
            cards.append(_card_html(c, by_chunk.get(c["chunk_id"]), img))
        parts.append(
            f"<h2>Cited evidence ({len(cards)})</h2><div class='cards cited' id=evidence>{''.join(cards)}</div>"
        )
    plan = r["plan"]
    if plan and plan["nodes"]:
        svg = plan_svg(plan)
        parts.append(
            f"<h2>Plan</h2><section id=plan><div class=svg>{svg}</div><details class=outline open><summary "
            f"class=mut>steps as a list</summary>{_outline(plan)}</details></section>"
        )
    router = [
        ev
        for ev in _events(data)
        if ev["kind"] == "role_step" and "rout" in ev["tool"] and isinstance(ev.get("result"), dict)
    ]
    if router:
        parts.append(f"<h2>Router decision</h2><section id=router>{fmt(router[-1]['result'])}</section>")
    if r["timeline"]:
        parts.append(
            f"<h2>Timeline ({r['span_ms'] / 1000:.2f} s)</h2><section id=timeline class=svg>"
            f"{waterfall_svg(r['timeline'], r['span_ms'], href=event_href)}</section>"
        )
    if r["retrieved"]:
        others = "".join(_card_html(c, by_chunk.get(c["chunk_id"]), None) for c in r["retrieved"])
        title = "Other retrieved passages" if r["cited"] else "Retrieved passages"
        parts.append(
            f"<h2>{title} ({len(r['retrieved'])})</h2><details id=retrieved{'' if r['cited'] else ' open'}>"
            f"<summary class=mut>not cited by the answer</summary><div class=cards>{others}</div></details>"
        )
    parts.append(
        "<h2>Steps</h2><div id=steps>" + "".join(event_html(ev, figure_href) for ev in data["tree"]) + "</div>"
    )
    return f"<div id=body data-last-id='{data['last_id']}'>{''.join(parts)}</div>"


def _events(data: dict[str, Any]) -> list[dict[str, Any]]:
    return walk(data["tree"])


def run_link(prefix: str, run_id: str) -> str:
    """URL of a run's page under the dashboard ``prefix``."""
    return f"{prefix}/run?id={quote(run_id, safe='')}"
