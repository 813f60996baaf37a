"""The live trace dashboard: server-rendered HTML over the trace events, live updates by server-sent events.

Two ways to open it:

- ``aisac dashboard`` runs it alone (:func:`serve`: Starlette on uvicorn, loopback only, default
  http://127.0.0.1:8766/);
- ``aisac serve --transport http`` serves it under ``/dashboard`` next to ``/mcp``
  (``aisac_servers.dashboard.mount_dashboard`` registers :meth:`Dashboard.routes` on the MCP server).

Pages (paths relative to the prefix): ``/`` the run list (filters ``server``, ``status``, ``text``; paging),
``/run?id=RUN`` a run: errors at the top, router decision, plan as an outline, evaluator critiques with
severities, evidence cards (text, source, page, score, verify status), and every event as an expandable entry
(arguments, result summary and stored result, latency, status) nested run -> role steps -> tool calls.
``/run/stream?id=RUN&after=ID`` and ``/stream?after=ID`` are ``text/event-stream`` endpoints: an ``update``
event whenever newer trace events exist (the store is polled every 0.5 s, so events written by any process on
the same store show up); the page then fetches ``/run/fragment`` (or ``/fragment``) and swaps it in, keeping
open entries open. ``/run/verify?id=RUN`` returns :func:`aisac_core.trace.verify.verify_run` as JSON (the page
calls it to fill the evidence cards' badges); ``/event?id=N`` returns one event as JSON.

No build step: the CSS and the ~60 lines of JavaScript are inline strings below.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable
from urllib.parse import quote, urlencode

import anyio
from sse_starlette import EventSourceResponse
from sse_starlette.event import ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from aisac_core.evidence.anchor import find_anchors
from aisac_core.trace.queries import (
    TraceError,
    get_event,
    get_run,
    list_runs,
    max_event_id,
)
from aisac_core.trace.verify import run_signature, verify_run

if TYPE_CHECKING:
    from aisac_core.context import AppContext

#: seconds between two looks at the store while a browser listens (server-sent events).
POLL_SECONDS = 0.5
#: a stream ends after this many seconds; the browser's EventSource reconnects on its own.
STREAM_SECONDS = 300.0
#: characters of a stored result shown in an expanded entry.
RESULT_CHARS = 4000
#: default port of ``aisac dashboard``.
DEFAULT_PORT = 8766

CSS = """
:root{--ok:#1a7f37;--err:#cf222e;--warn:#bf8700;--mut:#57606a;--bg:#f6f8fa;--bd:#d0d7de}
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1f2328}
header{background:#24292f;color:#fff;padding:.6em 1.2em;display:flex;gap:1em;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600} main{padding:1em 1.2em;max-width:1200px}
h2{font-size:1.05em;margin:1.2em 0 .4em;border-bottom:1px solid var(--bd);padding-bottom:.2em}
table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid var(--bd);padding:.3em .5em;text-align:left}
.badge{display:inline-block;padding:0 .5em;border-radius:1em;font-size:.85em;background:var(--bg);border:1px solid var(--bd)}
.st-ok,.v-unchanged{color:var(--ok);border-color:var(--ok)} .st-tool_error,.st-exception,.st-errors,.v-missing{color:var(--err);border-color:var(--err)}
.v-changed{color:var(--warn);border-color:var(--warn)} .st-running{color:#0969da;border-color:#0969da} .live{color:#3fb950} .mut{color:var(--mut)}
.errors{background:#ffebe9;border:1px solid var(--err);padding:.5em 1em;border-radius:6px}
details.event{border:1px solid var(--bd);border-radius:6px;margin:.3em 0;padding:.2em .6em;background:#fff}
details.event>summary{cursor:pointer} details.event .kids{margin-left:1.2em}
details.role_step{background:#f3f0ff} details.model_call{background:#fff8e5}
pre{background:var(--bg);padding:.5em;overflow:auto;max-height:24em;white-space:pre-wrap;word-break:break-word}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:.6em}
.card{border:1px solid var(--bd);border-radius:6px;padding:.6em;background:#fff}
.card .text{font-size:.92em;margin:.3em 0;max-height:9em;overflow:auto} .card .meta{color:var(--mut);font-size:.85em}
.sev-high,.sev-critical,.sev-error,.sev-blocker{color:var(--err);font-weight:600} .sev-medium,.sev-warning,.sev-major{color:var(--warn);font-weight:600}
.sev-low,.sev-info,.sev-minor{color:var(--mut)} dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em} dl.kv dt{font-weight:600}
form.filters{display:flex;gap:.5em;margin-bottom:.6em} form.filters input,form.filters select{padding:.2em}
"""

JS = """
(function(){
  const cfg = JSON.parse(document.getElementById('cfg').textContent);
  const live = document.getElementById('live');
  function openIds(){ return [...document.querySelectorAll('details[open]')].map(d => d.id).filter(Boolean); }
  async function refresh(){
    const body = document.getElementById('body');
    const keep = openIds();
    const r = await fetch(cfg.fragment, {cache: 'no-store'});
    if (!r.ok) return;
    body.outerHTML = await r.text();
    keep.forEach(id => { const d = document.getElementById(id); if (d) d.open = true; });
    if (cfg.verify) verify();
  }
  async function verify(){
    const cards = document.querySelectorAll('[data-chunk]');
    if (!cards.length) return;
    try {
      const r = await fetch(cfg.verify, {cache: 'no-store'});
      const v = await r.json();
      const by = {}; (v.anchors || []).forEach(a => { by[a.chunk_id] = a; });
      cards.forEach(c => {
        const a = by[c.dataset.chunk]; const b = c.querySelector('.verify');
        if (a && b) { b.textContent = a.status + (a.anchor_status && a.anchor_status !== 'ok' ? ' (' + a.anchor_status + ')' : '');
                      b.className = 'badge verify v-' + a.status; b.title = a.detail || ''; }
      });
    } catch (e) { /* verification is informative */ }
  }
  function connect(){
    const last = () => (document.getElementById('body') || {dataset: {}}).dataset.lastId || '0';
    const es = new EventSource(cfg.stream + (cfg.stream.includes('?') ? '&' : '?') + 'after=' + last());
    es.addEventListener('update', () => { refresh(); });
    es.onopen = () => { if (live) { live.textContent = '\u25cf live'; live.className = 'live'; } };
    es.onerror = () => { if (live) { live.textContent = '\u25cb reconnecting'; live.className = 'mut'; } };
  }
  if (cfg.verify) verify();
  connect();
})();
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _pretty(x: Any, limit: int = RESULT_CHARS) -> str:
    s = x if isinstance(x, str) else json.dumps(x, indent=1, ensure_ascii=False, default=str)
    return s if len(s) <= limit else s[:limit] + f"\n… ({len(s) - limit:,} more characters: trace_get_event)"


def _page(title: str, body: str, cfg: dict[str, Any], prefix: str) -> str:
    cfg_json = json.dumps(cfg).replace("</", "<\\/")
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{CSS}</style></head><body>"
            f"<header><a href='{_e(prefix or '/')}'>aisac trace</a><span>{_e(title)}</span>"
            f"<span id=live class=mut>○ connecting</span></header><main>{body}</main>"
            f"<script id=cfg type=application/json>{cfg_json}</script>"
            f"<script>{JS}</script></body></html>")


# ---------------------------------------------------------------------------------------------- run list

def render_runs(data: dict[str, Any], prefix: str, query: dict[str, str], last_id: int) -> str:
    """The run-list fragment (``<div id=body>``) for a :func:`~aisac_core.trace.queries.list_runs` result."""
    rows = []
    for r in data["runs"]:
        link = f"{prefix}/run?{urlencode({'id': r['run_id']})}"
        active = " <span class=live>● active</span>" if r["active"] else ""
        started, last = (_e(r[k][:19].replace("T", " ")) for k in ("started_at", "last_event_at"))
        rows.append(
            f"<tr><td><a href='{_e(link)}'>{_e(r['run_id'])}</a>{active}</td><td>{started}</td><td>{last}</td>"
            f"<td>{r['events']}</td><td>{r['tool_calls']}</td><td><span class='badge st-{_e(r['status'])}'>"
            f"{r['errors']} errors</span></td><td>{_e(', '.join(r['servers']))}</td></tr>")
    pager = ""
    if data.get("next_offset") is not None:
        more = urlencode({**query, "offset": data["next_offset"]})
        pager = f"<p><a href='{_e(prefix)}/?{_e(more)}'>older runs →</a></p>"
    table = ("<table><thead><tr><th>run</th><th>started (UTC)</th><th>last event</th><th>events</th><th>tool calls</th>"
             "<th>status</th><th>servers</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>") if rows else \
        "<p class=mut>No runs yet: tool calls through the aisac suite are recorded here as they happen.</p>"
    return (f"<div id=body data-last-id='{last_id}'><p class=mut>{data['total']} runs</p>{table}{pager}</div>")


# ---------------------------------------------------------------------------------------------- run page

def _walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for n in nodes:
        out.append(n)
        out += _walk(n.get("children", []))
    return out


def _role_events(events: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    """Role steps (or roles tool calls) whose tool name contains one of ``names``, with a dict result."""
    return [e for e in events if (e["kind"] == "role_step" or e["server"] == "roles")
            and any(n in e["tool"].lower() for n in names) and isinstance(e.get("result"), dict)]


def _kv(d: dict[str, Any]) -> str:
    items = []
    for k, v in d.items():
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False, default=str)
            v = v if len(v) <= 300 else v[:299] + "…"
        items.append(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>")
    return "<dl class=kv>" + "".join(items) + "</dl>"


_TITLE_KEYS = ("title", "goal", "description", "task", "name", "step", "text", "summary", "query")
_CHILD_KEYS = ("steps", "substeps", "children", "subtasks", "tasks", "subgoals")


def _outline(items: Any, depth: int = 0) -> str:
    if depth > 8 or not isinstance(items, list) or not items:
        return ""
    lis = []
    for it in items:
        if isinstance(it, dict):
            title = next((it[k] for k in _TITLE_KEYS if isinstance(it.get(k), str)), None)
            extra = {k: v for k, v in it.items() if k not in _CHILD_KEYS and k not in _TITLE_KEYS[:1]
                     and not isinstance(v, (dict, list)) and v is not None and v != title}
            kids = next((it[k] for k in _CHILD_KEYS if isinstance(it.get(k), list)), None)
            meta = " ".join(f"<span class=badge>{_e(k)}: {_e(v)}</span>" for k, v in list(extra.items())[:4])
            label = title or json.dumps(it, ensure_ascii=False)[:200]
            lis.append(f"<li>{_e(label)} {meta}{_outline(kids, depth + 1)}</li>")
        else:
            lis.append(f"<li>{_e(it)}</li>")
    return "<ol>" + "".join(lis) + "</ol>"


def _plan_items(result: dict[str, Any]) -> Any:
    """The plan's steps as a tree. A DAG of ``{id, goal, tool|helper, depends_on}`` steps (roles, schemas/plan.json)
    is nested under each step's last dependency (roots: no dependency), so the outline reads in execution order."""
    plan = result.get("plan", result)
    if isinstance(plan, dict):
        plan = next((plan[k] for k in _CHILD_KEYS if isinstance(plan.get(k), list)), [plan])
    if not isinstance(plan, list) or not all(isinstance(x, dict) and "id" in x for x in plan):
        return plan
    nodes = {str(x["id"]): {"title": f"{x['id']}: {x.get('goal') or x.get('title') or ''}",
                            **({"tool": x["tool"]} if x.get("tool") else {}),
                            **({"helper": x["helper"]} if x.get("helper") else {}),
                            **({"after": ", ".join(map(str, x["depends_on"]))} if len(x.get("depends_on") or []) > 1
                               else {}), "steps": []} for x in plan}
    roots = []
    for x in plan:
        deps = [str(d) for d in (x.get("depends_on") or []) if str(d) in nodes and str(d) != str(x["id"])]
        (nodes[deps[-1]]["steps"] if deps else roots).append(nodes[str(x["id"])])
    return roots


def _critiques(result: dict[str, Any]) -> list[dict[str, Any]]:
    for k in ("critiques", "issues", "findings", "problems", "critique"):
        v = result.get(k)
        if isinstance(v, list):
            return [c if isinstance(c, dict) else {"message": c} for c in v]
    return []


def _severity(c: dict[str, Any]) -> str:
    """Severity class: a word as given (high, medium, low...), or a number 0..1 (roles' evaluator,
    schemas/critique.json) banded >= 0.7 high, >= 0.4 medium, else low."""
    v = c.get("severity", c.get("level"))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return "high" if v >= 0.7 else "medium" if v >= 0.4 else "low"
    return str(v or "info").lower()


def _severity_label(c: dict[str, Any]) -> str:
    v = c.get("severity", c.get("level"))
    word = _severity(c)
    return f"{word} {v:.2f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else word


def _message(c: dict[str, Any]) -> str:
    return str(next((c[k] for k in ("message", "text", "critique", "issue", "description", "reason") if c.get(k)),
                    json.dumps(c, ensure_ascii=False)))


def _event_html(e: dict[str, Any]) -> str:
    kids = "".join(_event_html(c) for c in e.get("children", []))
    args = e["arguments"]
    res = e.get("result")
    body = (f"<div><b>arguments</b> <span class=mut>sha256 {_e(e['arguments_sha256'][:16])}</span>"
            f"<pre>{_e(_pretty(args, 2000))}</pre>")
    if e.get("error"):
        body += f"<div class=errors>{_e(e['error'])}</div>"
    if res is not None:
        body += (f"<b>result</b> <span class=mut>sha256 {_e((e['result_sha256'] or '')[:16])}"
                 f"{' (stored truncated)' if e.get('result_truncated') else ''}</span><pre>{_e(_pretty(res))}</pre>")
    body += (f"<div class=mut>event {e['id']} · {_e(e['kind'])} · started {_e(e['started_at'][11:23])} · "
             f"{e['latency_ms']:.1f} ms{' · parent ' + str(e['parent_id']) if e['parent_id'] else ''}</div></div>")
    return (f"<details class='event {_e(e['kind'])}' id='ev-{e['id']}' data-id='{e['id']}'><summary>"
            f"<b>{_e(e['tool'])}</b> <span class='badge st-{_e(e['status'])}'>{_e(e['status'])}</span> "
            f"<span class=mut>{e['latency_ms']:.1f} ms</span> <span class=mut>{_e(e['result_summary'][:160])}</span>"
            f"</summary>{body}{('<div class=kids>' + kids + '</div>') if kids else ''}</details>")


def render_run(data: dict[str, Any]) -> str:
    """The run fragment (``<div id=body>``) for :func:`~aisac_core.trace.queries.get_run` with results."""
    events = _walk(data["tree"])
    run = data["run"]
    parts = []
    if data["errors"]:
        items = "".join(f"<li><a href='#ev-{x['id']}'>{_e(x['tool'])}</a> ({_e(x['status'])}): {_e(x['error'])}</li>"
                        for x in data["errors"])
        parts.append(f"<section class=errors id=errors><b>{len(data['errors'])} failed calls</b>"
                     f"<ul>{items}</ul></section>")
    parts.append(
        f"<p>{'<span class=live>● active</span> · ' if run['active'] else ''}{run['events']} events "
        f"({_e(', '.join(f'{k} {v}' for k, v in run['by_kind'].items()))}) · started {_e(run['started_at'][:19])} · "
        f"{run['duration_s']} s · servers {_e(', '.join(run['servers']))}</p>")
    router = _role_events(events, "router", "route")
    if router:
        parts.append(f"<h2>Router decision</h2><section id=router>{_kv(router[-1]['result'])}</section>")
    plans = _role_events(events, "planner", "plan")
    if plans:
        outline = _outline(_plan_items(plans[-1]["result"]))
        parts.append(f"<h2>Plan</h2><section id=plan class=outline>{outline}</section>")
    crit = [(e, c) for e in _role_events(events, "evaluator", "evaluate", "critic") for c in _critiques(e["result"])]
    if crit:
        lis = "".join(f"<li><span class='sev sev-{_e(_severity(c))}'>{_e(_severity_label(c))}</span> "
                      + (f"<span class=badge>{_e(c['aspect'])}</span> " if c.get("aspect") else "")
                      + f"{_e(_message(c))} <a class=mut href='#ev-{e['id']}'>event {e['id']}</a></li>"
                      for e, c in crit)
        parts.append(f"<h2>Evaluator critiques</h2><ul id=critiques>{lis}</ul>")
    answers = _role_events(events, "researcher")
    if answers and isinstance(answers[-1]["result"].get("text"), str):
        a = answers[-1]["result"]
        parts.append(f"<h2>Answer</h2><section id=answer><p>{_e(a['text'][:3000])}</p><p class=mut>"
                     f"{len(a.get('citations') or [])} citations · by {_e(a.get('by') or '-')}</p></section>")
    cards, seen = [], set()
    for e in events:
        for a in find_anchors(e.get("result")):
            if a["chunk_id"] in seen:
                continue
            seen.add(a["chunk_id"])
            text = " ".join((a.get("text") or "").split())
            source = a.get("title") or (a.get("path") or "?").rsplit("/", 1)[-1]
            score = a.get("score")
            cards.append(
                f"<div class=card data-chunk='{_e(a['chunk_id'])}'><div><b>{_e(source)}</b></div>"
                f"<div class=meta>page {_e(a.get('page') or '-')} · {_e(a.get('section') or '-')} · score "
                f"{_e(f'{score:.3f}' if isinstance(score, (int, float)) else '-')} · "
                f"<span class='badge verify'>verifying…</span></div>"
                f"<div class=text>{_e(text[:600] + ('…' if len(text) > 600 else ''))}</div>"
                f"<div class=meta title='{_e(a.get('path'))}'>{_e(a.get('path'))} · <a href='#ev-{e['id']}'>event "
                f"{e['id']}</a></div></div>")
    if cards:
        parts.append(f"<h2>Evidence ({len(cards)})</h2><div class=cards id=evidence>{''.join(cards)}</div>")
    parts.append("<h2>Steps</h2><div id=steps>" + "".join(_event_html(e) for e in data["tree"]) + "</div>")
    return f"<div id=body data-last-id='{data['last_id']}'>{''.join(parts)}</div>"


# ---------------------------------------------------------------------------------------------- HTTP handlers

class Dashboard:
    """The dashboard's request handlers for one store (``app``), with links under ``prefix``."""

    def __init__(self, app: "AppContext", prefix: str = "", *, index_verify: bool = True) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/")
        #: False: evidence badges from file hashes only, never opening the vector store (``aisac dashboard`` runs
        #: beside the server that owns the store, whose embedded vector store is locked to one process)
        self.index_verify = index_verify

    async def _run(self, fn: Callable[..., Any], *a: Any, **kw: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*a, **kw))

    def _filters(self, request: Request) -> dict[str, str]:
        return {k: v for k in ("server", "status", "text", "offset") if (v := request.query_params.get(k))}

    async def _runs_fragment(self, request: Request) -> str:
        q = self._filters(request)
        engine = self.app.engine
        data = await self._run(list_runs, engine, server=q.get("server"), status=q.get("status"), text=q.get("text"),
                               limit=50, offset=int(q.get("offset", 0) or 0))
        return render_runs(data, self.prefix, q, await self._run(max_event_id, engine, None))

    async def index(self, request: Request) -> Response:
        """GET / : the run list."""
        q = self._filters(request)
        try:
            frag = await self._runs_fragment(request)
        except (TraceError, ValueError) as exc:
            return HTMLResponse(f"<p>{_e(exc)}</p>", status_code=400)
        sel = "".join(f"<option{' selected' if q.get('status') == s else ''}>{s}</option>"
                      for s in ("", "ok", "errors", "active"))
        form = (f"<form class=filters method=get action='{_e(self.prefix)}/'><input name=text placeholder='run id, "
                f"tool or argument' value='{_e(q.get('text', ''))}'><input name=server placeholder=server size=8 "
                f"value='{_e(q.get('server', ''))}'><select name=status>{sel}</select><button>filter</button></form>")
        qs = urlencode({k: v for k, v in q.items() if k != "offset"})
        cfg = {"fragment": f"{self.prefix}/fragment?{qs}", "stream": f"{self.prefix}/stream", "verify": None}
        return HTMLResponse(_page("runs", form + frag, cfg, self.prefix))

    async def runs_fragment(self, request: Request) -> Response:
        """GET /fragment : the run list's body (live updates)."""
        return HTMLResponse(await self._runs_fragment(request))

    def _run_id(self, request: Request) -> str:
        return request.query_params.get("id", "")

    async def _run_fragment(self, run_id: str) -> str:
        return render_run(await self._run(get_run, self.app.engine, run_id, include_results=True))

    async def run_page(self, request: Request) -> Response:
        """GET /run?id=RUN : one run."""
        rid = self._run_id(request)
        try:
            frag = await self._run_fragment(rid)
        except TraceError as exc:
            return HTMLResponse(_page("unknown run", f"<p>{_e(exc)}</p>", {"fragment": "", "stream": "",
                                                                             "verify": None}, self.prefix), 404)
        q = quote(rid, safe="")
        cfg = {"fragment": f"{self.prefix}/run/fragment?id={q}", "stream": f"{self.prefix}/run/stream?id={q}",
               "verify": f"{self.prefix}/run/verify?id={q}"}
        return HTMLResponse(_page(rid, frag, cfg, self.prefix))

    async def run_fragment(self, request: Request) -> Response:
        """GET /run/fragment?id=RUN : the run page's body (live updates)."""
        try:
            return HTMLResponse(await self._run_fragment(self._run_id(request)))
        except TraceError as exc:
            return HTMLResponse(f"<div id=body>{_e(exc)}</div>", 404)

    async def run_verify(self, request: Request) -> Response:
        """GET /run/verify?id=RUN : trace_verify as JSON."""
        try:
            return JSONResponse(await self._run(verify_run, self.app, self._run_id(request),
                                                use_index=self.index_verify))
        except TraceError as exc:
            return JSONResponse({"error": str(exc)}, 404)

    async def event(self, request: Request) -> Response:
        """GET /event?id=N : one event as JSON."""
        try:
            return JSONResponse(await self._run(get_event, self.app.engine, int(request.query_params.get("id", 0))))
        except (TraceError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, 404)

    async def _stream(self, request: Request, run_id: str | None) -> AsyncIterator[Any]:
        def update(sig: str) -> Any:
            return ServerSentEvent(event="update", data=json.dumps({"last_id": int(sig.split(".")[0]), "sig": sig}))

        after = request.query_params.get("after", "") or ""
        engine = self.app.engine
        last = await self._run(run_signature, engine, run_id)
        yield ServerSentEvent(comment="aisac trace", retry=1000)
        if after and after != last and after != last.split(".")[0]:  # changed since the page was rendered
            yield update(last)
        waited = 0.0
        while waited < STREAM_SECONDS:
            if await request.is_disconnected():
                return
            cur = await self._run(run_signature, engine, run_id)
            if cur != last:
                last = cur
                yield update(cur)
            await anyio.sleep(POLL_SECONDS)
            waited += POLL_SECONDS

    def _sse(self, gen: AsyncIterator[Any]) -> Response:
        # sse-starlette adds keep-alive pings and ends the stream when uvicorn shuts down, so an open page never
        # holds up the server's exit
        return EventSourceResponse(gen, ping=15, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def run_stream(self, request: Request) -> Response:
        """GET /run/stream?id=RUN&after=ID : server-sent ``update`` events when the run gets new events."""
        return self._sse(self._stream(request, self._run_id(request)))

    async def runs_stream(self, request: Request) -> Response:
        """GET /stream?after=ID : server-sent ``update`` events when any run gets new events."""
        return self._sse(self._stream(request, None))

    def routes(self) -> list[tuple[str, Callable[[Request], Any]]]:
        """(path relative to the prefix, handler) of every page and endpoint."""
        return [("/", self.index), ("/fragment", self.runs_fragment), ("/stream", self.runs_stream),
                ("/run", self.run_page), ("/run/fragment", self.run_fragment), ("/run/stream", self.run_stream),
                ("/run/verify", self.run_verify), ("/event", self.event)]


def create_app(app: "AppContext", *, index_verify: bool = False) -> Starlette:
    """A Starlette app serving the dashboard of ``app``'s store at ``/``. By default the evidence badges come from
    file hashes only (``index_verify=False``), so the app never opens (and locks) the vector store of a store
    another process serves."""
    d = Dashboard(app, "", index_verify=index_verify)
    return Starlette(routes=[Route(p, h, methods=["GET"]) for p, h in d.routes()])


def serve(host: str, port: int, app: "AppContext") -> None:
    """Run the dashboard of ``app``'s store on ``host:port`` (default port :data:`DEFAULT_PORT`) until interrupted
    (``aisac dashboard``). Loopback only: the trace holds queries and file names. Raises ValueError for a
    non-loopback host."""
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"the dashboard binds loopback only (127.0.0.1, localhost, ::1), got {host!r}: the trace "
                         "holds queries and file names")
    uvicorn.run(create_app(app), host=host, port=port, log_level="warning", timeout_graceful_shutdown=3)
