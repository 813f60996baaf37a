"""The trace server: provenance queries, exports, verification, replay, diff, statistics and retention.

A thin adapter over :mod:`aisac_core.trace`. Mounted by the suite under the ``trace`` namespace, so the
tools are ``trace_list_runs``, ``trace_get_run``, ``trace_get_event``, ``trace_export``, ``trace_verify``,
``trace_replay``, ``trace_diff``, ``trace_stats`` and ``trace_prune``. The live dashboard
(:mod:`aisac_core.trace.dashboard`) reads the same rows. User docs: docs/provenance.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aisac_servers.common import App, call_core, tool_error
from aisac_servers.report_app import VIEW_HTML, VIEW_MIME, VIEW_URI
from aisac_servers.toolclient import SuiteTools
from fastmcp import FastMCP
from fastmcp.apps.config import AppConfig
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.errors import AisacError
from aisac_core.trace.diff import diff_runs
from aisac_core.trace.exports import export_run
from aisac_core.trace.queries import get_event as core_event
from aisac_core.trace.queries import get_run as core_get
from aisac_core.trace.queries import list_runs as core_list
from aisac_core.trace.replay import replay_run
from aisac_core.trace.retention import prune_runs, trace_stats
from aisac_core.trace.verify import verify_run

server = FastMCP(
    "trace",
    instructions=(
        "Read the provenance trace of aisac: list runs, show a run's event tree (role steps -> tool calls), "
        "export a run (json for replay, markdown, W3C PROV-JSON, Workflow Run RO-Crate), verify that cited "
        "evidence and input files are unchanged, replay a run against the current store, compare two runs."
    ),
)


_RO = {"readOnlyHint": True, "openWorldHint": False}


@server.tool(annotations=_RO)
async def list_runs(
    since: Annotated[str | None, Field(description="ISO 8601 date/time: runs active at or after it")] = None,
    until: Annotated[str | None, Field(description="ISO 8601 date/time: runs started at or before it")] = None,
    server: Annotated[str | None, Field(description="only runs that called this server (rag, memory, lit, data, "
                                                    "roles, trace)")] = None,
    status: Annotated[Literal["ok", "errors", "active"] | None,
                      Field(description="ok: no failed call; errors: at least one; active: an event in the last "
                                        "60 s")] = None,
    text: Annotated[str | None, Field(description="substring of the run id, a tool name or the arguments (at most "
                                                  "1,000 characters)")] = None,
    limit: Annotated[int, Field(ge=1, le=500, description="runs per page")] = 20,
    offset: Annotated[int, Field(ge=0, description="runs to skip (next_offset of the previous page)")] = 0,
    app: AppContext = App,
) -> dict[str, Any]:
    """Runs, newest first: ``{runs: [{run_id, started_at, last_event_at, events, tool_calls, errors, servers,
    tools, status, active}], total, offset, next_offset}``. Errors: a date that is not ISO 8601; a search text over
    1,000 characters; an offset beyond 2^63-1."""
    return await call_core(core_list, app.engine, since=since, until=until, server=server, status=status,
                           text=text, limit=limit, offset=offset)


@server.tool(annotations=_RO, app=AppConfig(resource_uri=VIEW_URI))
async def get_run(
    run_id: Annotated[str, Field(description="a run id from trace_list_runs")],
    include_results: Annotated[bool, Field(description="add each event's stored result (can be large)")] = False,
    detail: Annotated[bool, Field(description="false: compact events (id, kind, tool, status, latency_ms, "
                                              "arguments, result_summary, error, anchors count, children) for "
                                              "large runs; trace_get_event has the rest")] = True,
    app: AppContext = App,
) -> dict[str, Any]:
    """A run as an event tree: ``{run: {run_id, started_at, last_event_at, duration_s, events, by_kind,
    by_status, errors, servers, status, active}, pins, errors: [{id, tool, status, error}], last_id, tree: [{id,
    kind (tool_call | role_step | model_call), server, tool, status, error, latency_ms, started_at, arguments,
    result_summary, anchor_ids, children: [...]}], report_uri}``. Role steps nest the tool calls they made
    (``parent_id``). ``report_uri``: the run's readable HTML report as a resource (question, answer, cited evidence
    on its pages, plan, timeline). Errors: unknown run id."""
    # ``run_id`` is this tool's own argument: the middleware leaves it to trace_* tools (docs/provenance.md)
    out = await call_core(core_get, app.engine, run_id, include_results=include_results, detail=detail)
    return {**out, "report_uri": report_uri(run_id)}


#: the run report resource (as mounted by the suite under ``trace``)
REPORT_URI = "aisac://trace/runs/{run_id}/report"


def report_uri(run_id: str) -> str:
    """The URI of a run's HTML report resource (:func:`run_report_page`)."""
    from urllib.parse import quote

    return REPORT_URI.format(run_id=quote(run_id, safe=""))


@server.resource("ui://run-report", mime_type=VIEW_MIME)
def run_report_view() -> str:
    """The MCP Apps view of a run report (:mod:`aisac_servers.report_app`): a host with the UI extension renders it
    for ``trace_get_run`` and ``roles_run`` results."""
    return VIEW_HTML


@server.resource("aisac://runs/{run_id}/report", mime_type="text/html")
async def run_report_page(run_id: str, app: AppContext = App) -> str:
    """A run's report as one self-contained HTML page (the dashboard's run page: question, verdict, answer with
    linked citations, cited evidence highlighted on its page images, plan and timeline, every step; no script, no
    network). A host that renders HTML shows it as is; ``trace_export format=html`` writes the same page to a file."""
    from fastmcp.exceptions import ResourceError

    from aisac_core.trace.exports import export_html

    try:
        return await call_core(export_html, app, run_id)
    except Exception as exc:  # call_core turned the core's TraceError into a tool error: report it as a resource one
        raise ResourceError(f"no report for run {run_id!r}: {exc}; trace_list_runs lists runs") from exc


@server.tool(annotations=_RO)
async def get_event(
    event_id: Annotated[int, Field(ge=1, description="an event id from trace_get_run")],
    app: AppContext = App,
) -> dict[str, Any]:
    """One event in full: arguments, stored result (``result_truncated`` when it was cut at 100,000 characters),
    hashes, status, error, latency, anchor ids, pinned input files, child event ids. Errors: unknown id (ids are
    1..2^63-1)."""
    return await call_core(core_event, app.engine, event_id)


@server.tool(annotations={"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False})
async def export(
    run_id: Annotated[str, Field(description="a run id from trace_list_runs")],
    format: Annotated[Literal["json", "markdown", "html", "prov", "rocrate"],
                      Field(description="json: machine bundle for replay; markdown: human summary (question, answer, "
                                        "cited evidence first); html: the run page as one offline file for a "
                                        "reviewer; prov: W3C PROV-JSON; rocrate: Workflow Run RO-Crate folder + "
                                        "zip")] = "json",
    app: AppContext = App,
) -> dict[str, Any]:
    """Export a run. ``json`` -> ``{format, path, bundle: {format, run, pins, current_pins, events, inputs,
    anchors}}``; ``markdown`` -> ``{format, path, markdown}``; ``html`` -> ``{format, path, bytes}``; ``prov`` ->
    ``{format, path, prov}``; ``rocrate``
    -> ``{format, path (folder), zip, summary}``. Files are written under ``<data dir>/trace_exports/``.
    Errors: unknown run, unknown format."""
    return await call_core(export_run, app, run_id, format)


@server.tool(annotations=_RO)
async def verify(
    run_id: Annotated[str, Field(description="a run id from trace_list_runs")],
    app: AppContext = App,
) -> dict[str, Any]:
    """Re-hash every evidence anchor the run cited and every input file it named: ``{run_id, status (unchanged |
    changed | missing), counts, anchors: [{chunk_id, path, page, status, anchor_status (ok | file_changed |
    chunk_changed | missing), detail, event_id}], inputs: [{path, status, sha256, sha256_now, source,
    event_id}]}``. Errors: unknown run."""
    return await call_core(verify_run, app, run_id)


@server.tool(annotations={"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False})
async def replay(
    run_id: Annotated[str, Field(description="the run to re-execute")],
    force: Annotated[list[str] | None, Field(description="tool names to replay although the skip rules would skip "
                                                         "them (e.g. a code run you know to be deterministic)")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Re-execute a run's recorded tool calls in order against the current store; the replayed calls are
    recorded under a new run id. Returns ``{run_id, replay_run_id, status (same | changed | failed), counts,
    steps: [{event_id, tool, status (same | changed | failed | skipped), reason?, changes?, original_sha256,
    replay_sha256}], pins_changed}``. Writing, destructive and time-dependent tools are skipped with the reason
    (docs/provenance.md). Errors: unknown run."""
    try:
        async with SuiteTools(app) as tools:
            return await replay_run(app, run_id, tools, force=force)
    except AisacError as exc:
        raise tool_error(str(exc), what="trace_replay") from exc


@server.tool(annotations=_RO)
async def diff(
    run_a: Annotated[str, Field(description="first run id")],
    run_b: Annotated[str, Field(description="second run id (e.g. a replay_run_id)")],
    app: AppContext = App,
) -> dict[str, Any]:
    """Compare two runs' tool calls, aligned by (tool, arguments sha256): ``{run_a, run_b, counts, steps:
    [{status (same | changed | only_a | only_b), tool, event_a, event_b, changes?}], pins_changed: [{pin, a,
    b}]}``. Errors: unknown run."""
    return await call_core(diff_runs, app.engine, run_a, run_b)


@server.tool(annotations=_RO)
async def stats(
    since: Annotated[str | None, Field(description="ISO 8601: count events at or after it")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Trace totals: ``{runs, events, by_kind, by_status, first_event_at, last_event_at, tools: [{tool, calls,
    errors, error_rate, p50_ms, p95_ms, max_ms}]}``. Errors: a date that is not ISO 8601."""
    return await call_core(trace_stats, app.engine, since)


@server.tool(annotations={"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False})
async def prune(
    older_than_days: Annotated[float, Field(ge=0, description="delete runs whose last event is older than this")],
    dry_run: Annotated[bool, Field(description="only list the runs that would go")] = True,
    app: AppContext = App,
) -> dict[str, Any]:
    """Retention: export each old run as a JSON bundle to ``<data dir>/trace_exports/<run>.json``, then delete
    its events, input pins and configuration pins (a run whose export fails is kept and listed in ``failed``).
    ``dry_run`` (default true) only lists. Returns ``{cutoff, runs, exported, deleted_events, dry_run,
    failed}``. Errors: ``older_than_days`` outside 0..36,500 (100 years)."""
    return await call_core(prune_runs, app, older_than_days, dry_run=dry_run)
