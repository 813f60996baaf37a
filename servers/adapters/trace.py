"""The trace server: provenance queries, exports, verification, replay, diff, statistics and retention.

A thin adapter over :mod:`aisac_core.trace`. Mounted by the suite under the ``trace`` namespace, so the
tools are ``trace_list_runs``, ``trace_get_run``, ``trace_get_event``, ``trace_export``, ``trace_verify``,
``trace_replay``, ``trace_diff``, ``trace_stats`` and ``trace_prune``. The live dashboard
(:mod:`aisac_core.trace.dashboard`) reads the same rows. Every tool calls the store's trace service
(``app.trace``, :class:`aisac_core.trace.service.TraceService`); results are typed in the core
(:mod:`aisac_core.trace.results`). :func:`complete` completes the ``run_id`` of the run report resource.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, cast
from urllib.parse import quote

from fastmcp.apps.config import AppConfig
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.errors import AisacError
from aisac_core.trace import results as R

from ..serving.common import AisacServer, App, MissingResource, call_core, request_roots, tool_error
from ..serving.completions import by_prefix
from ..serving.report_app import VIEW_HTML, VIEW_MIME, VIEW_URI
from ..serving.toolclient import SuiteTools
from ..shapes.annotations import hints

server = AisacServer(
    "trace", instructions=("The provenance trace: runs, a run's event tree, exports, anchor checks, replay, diff.")
)

RunId = Annotated[str, Field(description="a run id (trace_list_runs)")]


@server.tool(annotations=hints("List runs", read_only=True))
async def list_runs(
    since: Annotated[str | None, Field(description="ISO 8601: active at or after")] = None,
    until: Annotated[str | None, Field(description="ISO 8601: started at or before")] = None,
    server: Annotated[str | None, Field(description="called this server (rag, memory, ...)")] = None,
    status: Annotated[
        Literal["ok", "errors", "active"] | None,
        Field(description="errors: a call failed; active: an event in the last 60 s"),
    ] = None,
    text: Annotated[str | None, Field(description="in the run id, a tool name or the arguments")] = None,
    limit: Annotated[int, Field(ge=1, le=500)] = 20,
    offset: Annotated[int, Field(ge=0)] = 0,
    app: AppContext = App,
) -> R.Runs:
    """Find runs (the recorded tool calls of one task), newest first, by time, server, status or text; read
    one with trace_get_run."""
    return await call_core(
        app.trace.list_runs,
        since=since,
        until=until,
        server=server,
        status=status,
        text=text,
        limit=limit,
        offset=offset,
    )


@server.tool(annotations=hints("Read a run", read_only=True), app=AppConfig(resource_uri=VIEW_URI))
async def get_run(
    run_id: RunId,
    detail: Annotated[
        Literal["compact", "full"] | bool,
        Field(description="compact: id, tool, status, latency, summary per event; full: every field"),
    ] = "compact",
    include_results: Annotated[bool, Field(description="full events with stored results (large)")] = False,
    app: AppContext = App,
) -> R.Run:
    """See what happened in one run: a summary, the failed calls and the event tree (role steps hold their tool
    calls). Compact events: a short result summary and arguments; trace_get_event reads one whole.
    ``report_uri``: the run's HTML report resource."""
    # ``run_id`` is this tool's own argument: the middleware leaves it to trace_* tools; ``detail`` true / false
    # are the older spellings of full / compact
    full = detail is True or detail == "full" or include_results
    out = await call_core(app.trace.get_run, run_id, include_results=include_results, detail=True)
    tree = out.get("tree", [])
    if full:
        return {
            "run": out["run"],
            "pins": out["pins"],
            "last_id": out["last_id"],
            "errors": out["errors"],
            "tree": cast("list[R.Event]", tree),  # full event dicts: an Event with every key
            "report_uri": report_uri(run_id),
            "detail": "full",
        }
    errors: list[R.ErrorRow] = [
        {"id": e["id"], "tool": e["tool"], "status": e["status"], "error": _cut(e["error"], COMPACT_ERROR)}
        for e in out["errors"]
    ]
    return {
        "run": out["run"],
        "last_id": out["last_id"],
        "errors": errors,
        "tree": compact_tree(tree),
        "report_uri": report_uri(run_id),
        "detail": "compact",
    }


#: compact events: longest result summary, arguments (as JSON text) and error, in characters
COMPACT_SUMMARY, COMPACT_ARGS, COMPACT_ERROR = 120, 100, 300


def _cut(text: str | None, n: int) -> str | None:
    return text if text is None or len(text) <= n else text[: n - 1] + "…"


def compact_tree(nodes: list[dict[str, Any]]) -> list[R.Event]:
    """The compact form of an event tree (full event dicts, :func:`aisac_core.trace.queries.build_tree`): per event
    ``id, tool, status, latency_ms`` (0.1 ms), ``result_summary`` (<= 120 characters), ``kind`` unless a tool call,
    ``arguments`` as JSON text (<= 100 characters) when there are any, ``error``, ``anchors`` (how many were cited)
    and ``children`` only where present."""
    out: list[R.Event] = []
    for n in nodes:
        lat = n.get("latency_ms")
        c: R.Event = {
            "id": n["id"],
            "tool": n["tool"],
            "status": n["status"],
            "latency_ms": round(lat, 1) if lat is not None else None,
            "result_summary": _cut(n.get("result_summary") or "", COMPACT_SUMMARY) or "",
        }
        if n.get("kind") != "tool_call":
            c["kind"] = n["kind"]
        args = n.get("arguments")
        if args:
            c["arguments"] = _cut(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False), COMPACT_ARGS)
        if n.get("error"):
            c["error"] = _cut(n["error"], COMPACT_ERROR)
        if n.get("anchor_ids"):
            c["anchors"] = len(n["anchor_ids"])
        if n.get("children"):
            c["children"] = compact_tree(n["children"])
        out.append(c)
    return out


#: the run report resource (as mounted by the suite under ``trace``)
REPORT_URI = "aisac://trace/runs/{run_id}/report"


def report_uri(run_id: str) -> str:
    """The URI of a run's HTML report resource (:func:`run_report_page`)."""
    return REPORT_URI.format(run_id=quote(run_id, safe=""))


@server.resource("ui://run-report", mime_type=VIEW_MIME)
def run_report_view() -> str:
    """The MCP Apps view of a run report (:mod:`aisac_servers.serving.report_app`): a host with the UI extension renders it
    for ``trace_get_run`` and ``roles_run`` results."""
    return VIEW_HTML


@server.resource("aisac://runs/{run_id}/report", mime_type="text/html")
async def run_report_page(run_id: str, app: AppContext = App) -> str:
    """A run's report as one self-contained HTML page (the dashboard's run page: question, verdict, answer with
    linked citations, cited evidence highlighted on its page images, plan and timeline, every step; no script, no
    network). A host that renders HTML shows it as is; ``trace_export format=html`` writes the same page to a file."""
    try:
        return await call_core(app.trace.report_html, run_id)
    except Exception as exc:  # call_core turned the core's TraceError into a tool error: report it as a resource one
        raise MissingResource(f"no report for run {run_id!r}: {exc}; trace_list_runs lists runs") from exc


@server.tool(annotations=hints("Read an event", read_only=True))
async def get_event(
    event_id: Annotated[int, Field(ge=1, description="an id from trace_get_run")], app: AppContext = App
) -> R.EventDetail:
    """Read one recorded call whole: arguments, stored result (``result_truncated`` past 100,000 characters),
    hashes, error, cited anchor ids, pinned input files and child event ids."""
    return await call_core(app.trace.get_event, event_id)


@server.tool(annotations=hints("Export a run", idempotent=True))
async def export(
    run_id: RunId, format: Literal["json", "markdown", "html", "prov", "rocrate"] = "json", app: AppContext = App
) -> R.Exported:
    """Save a run as a file under the data dir's trace_exports folder: json (bundle for replay), markdown
    (summary for a reader), html (offline report page), prov (W3C PROV-JSON) or rocrate (Workflow Run
    RO-Crate folder and zip). Returns the path and, except html and rocrate, the content."""
    return await call_core(app.trace.export, run_id, format)


@server.tool(annotations=hints("Verify a run's evidence", read_only=True))
async def verify(run_id: RunId, app: AppContext = App) -> R.Verified:
    """Check that the evidence a run cited and the files it read are unchanged: re-hashes each anchor and
    input file; ``status`` is the worst of unchanged, changed, missing."""
    roots = request_roots()
    return await call_core(lambda: app.trace.verify(run_id, roots=roots))


@server.tool(annotations=hints("Replay a run"))
async def replay(
    run_id: RunId,
    force: Annotated[list[str] | None, Field(description="tool names to replay although skipped by rule")] = None,
    app: AppContext = App,
) -> R.Replayed:
    """Check that a run is reproducible: re-executes its read-only tool calls against the current store
    (recorded under ``replay_run_id``) and compares each result: same, changed (with the differing
    paths), failed, or skipped with the reason (writing or time-dependent tools, unless in ``force``).
    ``status`` not_replayed: nothing was re-executed (``message`` says why)."""
    try:
        async with SuiteTools(app) as tools:
            return await app.trace.replay(run_id, tools, force=force)
    except AisacError as exc:
        raise tool_error(str(exc), what="trace_replay") from exc


@server.tool(annotations=hints("Compare two runs", read_only=True))
async def diff(
    run_a: RunId, run_b: Annotated[str, Field(description="e.g. a replay_run_id")], app: AppContext = App
) -> R.Diff:
    """Compare the tool calls of two runs (e.g. a run and its replay), aligned by tool and arguments: same,
    changed, only_a or only_b, plus the configuration pins that differ."""
    return await call_core(app.trace.diff, run_a, run_b)


@server.tool(annotations=hints("Trace statistics", read_only=True))
async def stats(
    since: Annotated[str | None, Field(description="ISO 8601: events at or after")] = None, app: AppContext = App
) -> R.Stats:
    """How tools behave over all runs: events by kind and status, per tool the calls, error rate and
    latency percentiles."""
    return await call_core(app.trace.stats, since)


@server.tool(annotations=hints("Delete old runs", destructive=True))
async def prune(
    older_than_days: Annotated[float, Field(ge=0, description="age of the last event, 0-36,500")],
    dry_run: Annotated[bool, Field(description="only list")] = True,
    app: AppContext = App,
) -> R.Pruned:
    """Delete runs whose last event is older than ``older_than_days``, each exported as JSON to
    trace_exports first (a failed export keeps the run); ``dry_run`` (default) only lists them."""
    return await call_core(app.trace.prune, older_than_days, dry_run=dry_run)


#: the run report template as the trace server declares it (the suite mounts it as :data:`REPORT_URI`)
LOCAL_REPORT_URI = "aisac://runs/{run_id}/report"


def run_ids(app: AppContext, prefix: str = "") -> list[str]:
    """Run ids starting with ``prefix``, most recently active first, at most 100 (of the 500 newest runs that
    contain ``prefix``)."""
    runs = app.trace.list_runs(text=prefix or None, limit=500)["runs"]
    return [r["run_id"] for r in runs if r["run_id"].startswith(prefix or "")][:100]


#: completion of the run report resource's ``run_id`` (run ids by prefix, newest first)
complete = by_prefix({(uri, "run_id"): run_ids for uri in (REPORT_URI, LOCAL_REPORT_URI)})
server.add_completion_handler(complete)
