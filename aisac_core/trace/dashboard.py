"""The live trace dashboard: server-rendered HTML over the trace events, live updates by server-sent events.

Two ways to open it:

- ``aisac dashboard`` runs it alone (:func:`serve`: Starlette on uvicorn, loopback only, default
  http://127.0.0.1:8766/);
- ``aisac serve --transport http`` serves it under ``/dashboard`` next to ``/mcp``
  (``aisac_servers.serving.dashboard.mount_dashboard`` registers :meth:`Dashboard.routes` on the MCP server).

Pages (paths relative to the prefix): ``/`` the run list: each run's question, start, duration, status and
verdict, citations and how many of them verified (filters ``server``, ``status``, ``text``: question, run id, tool
or argument; paging), with a warning line when the trace has a gap (:mod:`aisac_core.trace.gaps`: events lost or
still waiting in the local journal); ``/run?id=RUN`` a run, with the run's gap warning
(:mod:`aisac_core.trace.runpage`: question, verdict, answer with linked citations, cited evidence on its page images, plan DAG, timeline, every step). Evidence verification runs when
the page is rendered (cached until the run changes). ``/evidence/page?run=RUN&chunk=ID`` is a cited passage's PDF
page as PNG with the passage highlighted. ``/run/stream?id=RUN&after=ID`` and ``/stream?after=ID`` are
``text/event-stream`` endpoints: an ``update`` event whenever newer trace events exist (the store is polled every
0.5 s, so events written by any process on the same store show up); the page then fetches ``/run/fragment`` (or
``/fragment``) and swaps it in, keeping open entries open. ``/run/verify?id=RUN`` returns
:func:`aisac_core.trace.verify.verify_run` as JSON; ``/event?id=N`` returns one event as JSON.

No build step and no external resource: the CSS and the ~25 lines of JavaScript are strings of this module, served
as ``/static/dashboard.css`` and ``/static/dashboard.js`` (no inline script or style element and no ``style``
attribute - evidence highlights are an SVG overlay - so the Content-Security-Policy needs no ``'unsafe-inline'``); the page reads the same without JavaScript (it then
does not update live).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar
from urllib.parse import quote, urlencode

import anyio
from sse_starlette import EventSourceResponse
from sse_starlette.event import ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from aisac_core.trace.queries import TraceError, max_event_id
from aisac_core.trace.report import run_report
from aisac_core.trace.runpage import CSS, render_run, run_link
from aisac_core.trace.runpage import e as _e
from aisac_core.trace.verify import run_signature

if TYPE_CHECKING:
    from aisac_core.trace.service import TraceService

#: seconds between two looks at the store while a browser listens (server-sent events).
POLL_SECONDS = 0.5
#: a stream ends after this many seconds; the browser's EventSource reconnects on its own.
STREAM_SECONDS = 300.0
#: default port of ``aisac dashboard``.
DEFAULT_PORT = 8766

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
  }
  function connect(){
    const last = () => (document.getElementById('body') || {dataset: {}}).dataset.lastId || '0';
    const es = new EventSource(cfg.stream + (cfg.stream.includes('?') ? '&' : '?') + 'after=' + last());
    es.addEventListener('update', () => { refresh(); });
    es.onopen = () => { if (live) { live.textContent = '\u25cf live'; live.className = 'live'; } };
    es.onerror = () => { if (live) { live.textContent = '\u25cb reconnecting'; live.className = 'mut'; } };
  }
  connect();
})();
"""


#: the version of :data:`JS` and :data:`CSS` in their URLs (the first 12 hex digits of their SHA-256), so a browser
#: may keep them cached and still loads a changed one
ASSET_VERSION = hashlib.sha256((JS + "\x00" + CSS).encode()).hexdigest()[:12]


def _page(title: str, body: str, cfg: dict[str, Any], prefix: str) -> str:
    """A whole dashboard page: no inline script or style element (the Content-Security-Policy allows scripts and
    style sheets from the dashboard itself only): the script and the style sheet are files of the dashboard
    (``/static/dashboard.js``, ``/static/dashboard.css``); the page's settings travel in a JSON data block, which a
    browser never executes."""
    cfg_json = json.dumps(cfg).replace("</", "<\\/")
    static = f"{_e(prefix)}/static/dashboard"
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
        f"<meta name=viewport content='width=device-width,initial-scale=1'>"
        f"<link rel=stylesheet href='{static}.css?v={ASSET_VERSION}'></head><body>"
        f"<header><a href='{_e(prefix or '/')}'>aisac trace</a><span>{_e(title)}</span>"
        f"<span id=live class=mut>○ connecting</span></header><main>{body}</main>"
        f"<script id=cfg type=application/json>{cfg_json}</script>"
        f"<script src='{static}.js?v={ASSET_VERSION}'></script></body></html>"
    )


# ---------------------------------------------------------------------------------------------- run list


def render_runs(
    data: dict[str, Any],
    prefix: str,
    query: dict[str, str],
    last_id: int,
    heads: dict[str, dict[str, Any]] | None = None,
    gaps: dict[str, Any] | None = None,
) -> str:
    """The run-list fragment (``<div id=body>``) for a :meth:`~aisac_core.trace.queries.RunQueries.list_runs` result, with
    each run's question, citations and verdict from :meth:`~aisac_core.trace.queries.RunQueries.run_headlines` (``heads``);
    ``gaps``: the store's :class:`~aisac_core.trace.results.TraceGap`, shown as a warning line (with links to the
    runs concerned) when it has a ``detail``."""
    heads = heads or {}
    warn = ""
    if gaps and gaps.get("detail"):
        runs = ", ".join(f"<a href='{_e(run_link(prefix, x))}'>{_e(x)}</a>" for x in gaps.get("runs") or [])
        warn = f"<p class=gapwarn id=trace-gap role=alert>⚠ trace gap: {_e(gaps['detail'])}" + (
            f" (runs: {runs})</p>" if runs else "</p>"
        )
    rows = []
    for r in data["runs"]:
        h = heads.get(r["run_id"]) or {}
        link = run_link(prefix, r["run_id"])
        active = " <span class=live>● active</span>" if r["active"] else ""
        started = _e(r["started_at"][:19].replace("T", " "))
        q = h.get("question")
        label = (
            _e(q if len(q or "") <= 200 else (q or "")[:199] + "…")
            if q
            else f"<span class=mut>{_e(', '.join(r['tools'][:3]))}</span>"
        )
        dur = _duration(r["started_at"], r["last_event_at"])
        cites = "-" if h.get("citations") is None else str(h["citations"])
        if h.get("anchors"):
            ok = h["verified"] == h["anchors"]
            cites += f" <span class='badge {'v-unchanged' if ok else 'v-changed'}'>{h['verified']}/{h['anchors']} anchors intact</span>"
        verdict = f"<span class=badge>{_e(h['verdict'])}</span>" if h.get("verdict") else ""
        rows.append(
            f"<tr data-run='{_e(r['run_id'])}'><td class=q><a href='{_e(link)}'>{label}</a>{active}<div class='mut rid'>"
            f"{_e(r['run_id'])}</div></td><td>{started}</td><td>{dur}</td><td><span class='badge st-{_e(r['status'])}'>"
            f"{'ok' if not r['errors'] else str(r['errors']) + ' errors'}</span> {verdict}</td><td>{cites}</td>"
            f"<td>{r['events']}</td><td>{_e(', '.join(r['servers']))}</td></tr>"
        )
    pager = ""
    if data.get("next_offset") is not None:
        more = urlencode({**query, "offset": data["next_offset"]})
        pager = f"<p><a href='{_e(prefix)}/?{_e(more)}'>older runs →</a></p>"
    table = (
        (
            "<table id=runs><thead><tr><th>question</th><th>started (UTC)</th><th>duration</th><th>status</th>"
            "<th>citations</th><th>events</th><th>servers</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )
        if rows
        else "<p class=mut>No runs yet: tool calls through the aisac suite are recorded here as they happen.</p>"
    )
    return f"<div id=body data-last-id='{last_id}'>{warn}<p class=mut>{data['total']} runs</p>{table}{pager}</div>"


def _duration(start: str, end: str) -> str:
    try:
        s = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return "-"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


# ---------------------------------------------------------------------------------------------- HTTP handlers

_P = ParamSpec("_P")
_T = TypeVar("_T")


class Dashboard:
    """The dashboard's request handlers for one store (its trace service ``trace``), with links under ``prefix``."""

    def __init__(self, trace: TraceService, prefix: str = "", *, index_verify: bool = True) -> None:
        self.trace = trace
        self.prefix = prefix.rstrip("/")
        #: False: evidence badges from file hashes only, never opening the vector store (``aisac dashboard`` runs
        #: beside the server that owns the store, whose embedded vector store is locked to one process)
        self.index_verify = index_verify
        #: run id -> (run signature, verify_run result): a page refresh re-hashes files only when the run changed
        self._verified: dict[str, tuple[str, dict[str, Any]]] = {}

    async def _run(self, fn: Callable[_P, _T], *a: _P.args, **kw: _P.kwargs) -> _T:
        return await anyio.to_thread.run_sync(lambda: fn(*a, **kw))

    def _filters(self, request: Request) -> dict[str, str]:
        return {k: v for k in ("server", "status", "text", "offset") if (v := request.query_params.get(k))}

    async def _runs_fragment(self, request: Request) -> str:
        q = self._filters(request)
        t = self.trace
        data = await self._run(
            t.list_runs,
            server=q.get("server"),
            status=q.get("status"),
            text=q.get("text"),
            limit=50,
            offset=int(q.get("offset", 0) or 0),
        )
        heads = await self._run(t.run_headlines, [r["run_id"] for r in data["runs"]])
        gaps = dict(await self._run(t.gaps))
        last = await self._run(lambda: max_event_id(t.engine, None))
        return render_runs(dict(data), self.prefix, q, last, heads, gaps)

    async def index(self, request: Request) -> Response:
        """GET / : the run list."""
        q = self._filters(request)
        try:
            frag = await self._runs_fragment(request)
        except (TraceError, ValueError) as exc:
            return HTMLResponse(f"<p>{_e(exc)}</p>", status_code=400)
        sel = "".join(
            f"<option{' selected' if q.get('status') == s else ''}>{s}</option>" for s in ("", "ok", "errors", "active")
        )
        form = (
            f"<form class=filters method=get action='{_e(self.prefix)}/'><input name=text placeholder='question, run id, "
            f"tool or argument' value='{_e(q.get('text', ''))}'><input name=server placeholder=server size=8 "
            f"value='{_e(q.get('server', ''))}'><select name=status>{sel}</select><button>filter</button></form>"
        )
        qs = urlencode({k: v for k, v in q.items() if k != "offset"})
        cfg = {"fragment": f"{self.prefix}/fragment?{qs}", "stream": f"{self.prefix}/stream"}
        return HTMLResponse(_page("runs", form + frag, cfg, self.prefix))

    async def runs_fragment(self, request: Request) -> Response:
        """GET /fragment : the run list's body (live updates)."""
        return HTMLResponse(await self._runs_fragment(request))

    def _run_id(self, request: Request) -> str:
        return request.query_params.get("id", "")

    async def _run_fragment(self, run_id: str) -> str:
        return await self._run(self._render_run, run_id)

    def _render_run(self, run_id: str) -> str:
        """The run page body, with verification and page images computed here (blocking: call in a thread)."""
        data = self.trace.get_run(run_id, include_results=True)
        sig = run_signature(self.trace.engine, run_id)
        cached = self._verified.get(run_id)
        if cached is None or cached[0] != sig:
            cached = (sig, dict(self.trace.verify(run_id, use_index=self.index_verify)))
            self._verified[run_id] = cached
            if len(self._verified) > 64:
                self._verified.pop(next(iter(self._verified)))
        images = self.trace.images()
        q = quote(run_id, safe="")

        def page_image(card: dict[str, Any]) -> dict[str, Any] | None:
            img = images.image(card)
            if img is None:
                return None
            src = f"{self.prefix}/evidence/page?run={q}&chunk={quote(str(card['chunk_id']), safe='')}"
            return {"src": src, "width": img.width, "height": img.height, "rects": img.rects, "found": img.found}

        return render_run(
            dict(data),
            verify=cached[1],
            page_image=page_image,
            run_href=lambda rid: run_link(self.prefix, rid),
            figure_href=lambda ev, i: f"{self.prefix}/run/figure?run={q}&event={ev}&i={i}",
        )

    async def run_page(self, request: Request) -> Response:
        """GET /run?id=RUN : one run."""
        rid = self._run_id(request)
        try:
            frag = await self._run_fragment(rid)
        except TraceError as exc:
            return HTMLResponse(
                _page("unknown run", f"<p>{_e(exc)}</p>", {"fragment": "", "stream": ""}, self.prefix), 404
            )
        q = quote(rid, safe="")
        cfg = {"fragment": f"{self.prefix}/run/fragment?id={q}", "stream": f"{self.prefix}/run/stream?id={q}"}
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
            return JSONResponse(await self._run(self.trace.verify, self._run_id(request), use_index=self.index_verify))
        except TraceError as exc:
            return JSONResponse({"error": str(exc)}, 404)

    async def evidence_page(self, request: Request) -> Response:
        """GET /evidence/page?run=RUN&chunk=ID : the PNG of a cited passage's PDF page with the passage highlighted
        (404 unless the run cites that chunk and its file is an indexed PDF of this store)."""
        run_id, chunk = request.query_params.get("run", ""), request.query_params.get("chunk", "")

        def png() -> bytes | None:
            report = run_report(dict(self.trace.get_run(run_id, include_results=True)))
            card = next((c for c in report["cited"] if c["chunk_id"] == chunk), None)
            img = self.trace.images().image(card) if card else None
            return img.png if img else None

        try:
            body = await self._run(png)
        except TraceError:
            body = None
        if body is None:
            return Response("no page image for this run and chunk", status_code=404, media_type="text/plain")
        return Response(body, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})

    async def run_figure(self, request: Request) -> Response:
        """GET /run/figure?run=RUN&event=ID&i=K : the K-th PNG figure of a code run of the run (404 unless that event
        is a ``data_code_run`` / ``data_code_job_status`` call of the run whose result lists the figure, the file is in
        a sandbox's own ``.state`` folder, is a PNG, and still has the sha256 the result recorded: a path in a trace
        is never opened on trust)."""
        q = request.query_params

        def png() -> bytes | None:
            ev = self.trace.get_event(int(q.get("event", "0")))
            res = ev.get("result") if ev.get("run_id") == q.get("run") else None
            if ev.get("tool") not in ("data_code_run", "data_code_job_status") or not isinstance(res, dict):
                return None
            figs = res.get("figures") or []
            i = int(q.get("i", "0"))
            if not 0 <= i < len(figs) or not isinstance(figs[i], dict):
                return None
            path = Path(str(figs[i].get("path") or ""))
            if ".state" not in path.parts or path.suffix.lower() != ".png" or not path.is_file():
                return None
            body = path.read_bytes()[: 50 * 1024 * 1024]
            ok = body.startswith(b"\x89PNG\r\n\x1a\n") and hashlib.sha256(body).hexdigest() == figs[i].get("sha256")
            return body if ok else None

        try:
            body = await self._run(png)
        except (TraceError, ValueError, OSError):
            body = None
        if body is None:
            return Response("no such figure for this run", status_code=404, media_type="text/plain")
        return Response(body, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})

    async def event(self, request: Request) -> Response:
        """GET /event?id=N : one event as JSON."""
        try:
            return JSONResponse(await self._run(self.trace.get_event, int(request.query_params.get("id", 0))))
        except (TraceError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, 404)

    async def _stream(self, request: Request, run_id: str | None) -> AsyncIterator[Any]:
        def update(sig: str) -> Any:
            return ServerSentEvent(event="update", data=json.dumps({"last_id": int(sig.split(".")[0]), "sig": sig}))

        after = request.query_params.get("after", "") or ""
        engine = self.trace.engine
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

    async def script(self, request: Request) -> Response:
        """GET /static/dashboard.js : the page script (:data:`JS`)."""
        return Response(JS, media_type="text/javascript", headers={"Cache-Control": "private, max-age=86400"})

    async def style(self, request: Request) -> Response:
        """GET /static/dashboard.css : the style sheet (the run page's :data:`~aisac_core.trace.runpage.CSS`)."""
        return Response(CSS, media_type="text/css", headers={"Cache-Control": "private, max-age=86400"})

    def routes(self) -> list[tuple[str, Callable[[Request], Any]]]:
        """(path relative to the prefix, handler) of every page and endpoint."""
        return [
            ("/", self.index),
            ("/fragment", self.runs_fragment),
            ("/stream", self.runs_stream),
            ("/run", self.run_page),
            ("/run/fragment", self.run_fragment),
            ("/run/stream", self.run_stream),
            ("/run/verify", self.run_verify),
            ("/evidence/page", self.evidence_page),
            ("/run/figure", self.run_figure),
            ("/event", self.event),
            ("/static/dashboard.js", self.script),
            ("/static/dashboard.css", self.style),
        ]


def create_app(trace: TraceService, *, index_verify: bool = False) -> Starlette:
    """A Starlette app serving the dashboard of a store (its trace service ``trace``) at ``/``. By default the
    evidence badges come from file hashes only (``index_verify=False``), so the app never opens (and locks) the
    vector store of a store another process serves."""
    d = Dashboard(trace, "", index_verify=index_verify)
    return Starlette(routes=[Route(p, h, methods=["GET"]) for p, h in d.routes()])


def serve(host: str, port: int, trace: TraceService, guard: Callable[[Any], Any]) -> None:
    """Run the dashboard of a store (its trace service ``trace``) on ``host:port`` (default port :data:`DEFAULT_PORT`)
    until interrupted (``aisac dashboard``), wrapped in ``guard`` (an ASGI middleware factory: the CLI passes
    :class:`aisac_core.security.DashboardGuard` with the token, which checks the token and a loopback
    ``Host``/``Origin`` and adds the Content-Security-Policy). Loopback only: the trace holds queries and file
    names. Raises ValueError for a non-loopback host."""
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(
            f"the dashboard binds loopback only (127.0.0.1, localhost, ::1), got {host!r}: the trace "
            "holds queries and file names"
        )
    uvicorn.run(guard(create_app(trace)), host=host, port=port, log_level="warning", timeout_graceful_shutdown=3)
