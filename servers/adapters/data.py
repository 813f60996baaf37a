"""The data server: a registry of named DataFrames with lineage, and stateful sandboxed Python sessions.

A thin adapter over :class:`aisac_core.data.frames.FrameRegistry` (``app.frames``) and
:class:`aisac_core.sessions.manager.SandboxManager` (``app.sandbox``); the output schemas come from the result types of
:mod:`aisac_core.data.results` and :mod:`aisac_core.sessions.results` (a code run's result is the tagged union
:data:`~aisac_core.sessions.results.CodeRun`, checked against its type before it leaves). Mounted by the suite under the ``data`` namespace, so every tool gets the ``data_``
prefix:
``data_load``, ``data_inspect``, ``data_list``, ``data_preview``, ``data_describe``, ``data_query``, ``data_aggregate``, ``data_save``,
``data_to_session`` (functions named ``load``, ``list_frames`` (tool name ``list``), ...) and the code tools
``data_code_run``, ``data_code_variables``, ``data_code_session_list``, ``data_code_session_reset``,
``data_code_session_close``, ``data_code_job_status`` (functions ``code_run``, ...). docs/data.md describes them.

``data_code_run`` returns structured JSON with ``ok: bool`` (``error`` when false) - the roles exec gate reads it
from the trace - plus one PNG image content block per matplotlib figure. A failing run (exception, limit,
refused import) is a normal result with ``ok: false``, not an MCP error; bad arguments (empty code, bad session
name, busy session) are MCP tool errors.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastmcp import Context
from fastmcp.exceptions import ResourceError
from fastmcp.tools.base import ToolResult
from mcp.types import ImageContent, TextContent
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.data import results as R
from aisac_core.sessions import results as S

from ..serving.common import AisacServer, App, call_core, request_roots, typed_result
from ..serving.completions import by_prefix
from ..serving.tasks import app_of, follow_code_run, in_task, task_on
from ..shapes.annotations import hints

server = AisacServer(
    "data",
    instructions=(
        "Load tables (CSV, Excel, Parquet, JSON) from the allowed roots; preview, query, aggregate; run "
        "Python in sandboxed sessions."
    ),
)


FrameName = Annotated[str, Field(description="frame name, or a result_id")]
SessionName = Annotated[str, Field(description="code session name (letters, digits, _ . -)")]


def _with_images(run: Mapping[str, Any], images: list[bytes]) -> ToolResult:
    """A code run's result, checked against its type (:data:`~aisac_core.sessions.results.CodeRun`: a key outside
    the variant's declared keys or a missing required key is an error, never sent), as structured content with one
    PNG image block per figure (content blocks only a raw tool result carries: :func:`typed_result`)."""
    result = S.CODE_RUN.dump_python(S.CODE_RUN.validate_python(run), mode="json")
    content: list[Any] = [TextContent(type="text", text=json.dumps(result, ensure_ascii=False, default=str))]
    content += [ImageContent(type="image", data=base64.b64encode(b).decode(), mime_type="image/png") for b in images]
    return typed_result(S.CodeRun, result, content=content)


# -- frames ---------------------------------------------------------------------------------------------------
@server.tool(annotations=hints("Load a table", destructive=True, idempotent=True))
async def load(
    path: Annotated[
        str,
        Field(
            description="file in a registered root: csv tsv txt xlsx xlsm xls ods parquet json jsonl, or pdf (its tables)"
        ),
    ],
    name: Annotated[str | None, Field(description="default: the file name")] = None,
    sheet: Annotated[
        str | None,
        Field(
            description="Excel sheet name or 0-based index (PDF: table p<page>_t<k> or index); default: every "
            "sheet/table, as <name>:<sheet>"
        ),
    ] = None,
    header_rows: Annotated[int | None, Field(description="0-10, overrides detection")] = None,
    skip_rows: Annotated[int | None, Field(description="rows above the table to drop, overrides detection")] = None,
    range: Annotated[str | None, Field(description="Excel A1 block, e.g. 'B3:F20'")] = None,
    tidy: Annotated[bool, Field(description="unpivot an Excel pivot export into a long frame")] = False,
    app: AppContext = App,
) -> R.LoadResult:
    """Load a table file into a named frame with its lineage (replacing one of that name), before the other data
    tools. Header rows, titles above and footnotes below a table are detected: check each frame's `detected`
    (data_inspect maps a sheet) and correct it with header_rows, skip_rows, range or tidy. A PDF gives a frame per
    table; data_preview lists each shown cell's anchor to cite (rag_verify_anchor re-checks it)."""
    sh: str | int | None = sheet
    roots = request_roots()
    return await call_core(lambda: app.frames.load(path, name, sh, header_rows, skip_rows, range, tidy, roots))


@server.tool(annotations=hints("Inspect a workbook", read_only=True))
async def inspect(
    path: Annotated[str, Field(description="workbook in a registered root: xlsx xlsm xls ods")],
    sheet: Annotated[str | None, Field(description="default: every sheet")] = None,
    app: AppContext = App,
) -> R.InspectResult:
    """A compact map of each sheet (used range, blocks, merged ranges with alignment, bold/fill runs, first cells
    with coordinates) to choose data_load's range, header_rows, skip_rows or tidy."""
    roots = request_roots()
    return await call_core(lambda: app.frames.inspect(path, sheet, roots))


@server.tool(name="list", annotations=hints("List frames", read_only=True))
async def list_frames(app: AppContext = App) -> R.ListResult:
    """The frames loaded so far (their names, for the other data tools), newest first, with size and lineage."""
    return await call_core(lambda: app.frames.list())


@server.tool(annotations=hints("Preview", read_only=True))
async def preview(
    name: FrameName,
    n: Annotated[int, Field(description="1-500")] = 10,
    where: Literal["head", "tail", "sample"] = "head",
    app: AppContext = App,
) -> R.PreviewResult:
    """A first look at a frame: shape, dtypes and a few rows (data_query filters rows)."""
    return await call_core(lambda: app.frames.preview(name, n, where))


@server.tool(annotations=hints("Describe", read_only=True))
async def describe(
    name: FrameName,
    columns: Annotated[list[str] | None, Field(description="default: all")] = None,
    app: AppContext = App,
) -> R.DescribeResult:
    """Per-column statistics of a frame: count, nulls, mean, std, quartiles, or unique/top values."""
    return await call_core(lambda: app.frames.describe(name, columns))


@server.tool(annotations=hints("Query", read_only=True))
async def query(
    name: FrameName,
    expr: Annotated[str, Field(description="e.g. \"temp_K > 300 and site == 'A'\"; `col name` for spaces")],
    columns: Annotated[list[str] | None, Field(description="default: all")] = None,
    limit: Annotated[int, Field(description="1-1000")] = 50,
    app: AppContext = App,
) -> R.QueryResult:
    """Rows of a frame matching a pandas query expression (filtering only: no '@' variables or function calls;
    data_code_run computes). data_save keeps the match by its result_id."""
    return await call_core(lambda: app.frames.query(name, expr, columns, limit))


@server.tool(annotations=hints("Aggregate", read_only=True))
async def aggregate(
    name: FrameName,
    metrics: Annotated[
        dict[str, list[str] | str],
        Field(description="{column: [count|sum|mean|median|min|max|std|var|nunique|first|last]}"),
    ],
    by: Annotated[list[str] | None, Field(description="group-by columns")] = None,
    limit: Annotated[int, Field(description="1-5000")] = 200,
    app: AppContext = App,
) -> R.AggregateResult:
    """Group-by statistics of a frame without code; result columns are named <column>_<function>."""
    return await call_core(lambda: app.frames.aggregate(name, by, metrics, limit))


@server.tool(annotations=hints("Save frame", destructive=True, idempotent=True))
async def save(
    name: Annotated[str, Field(description="result_id, or a frame to copy")], new_name: str, app: AppContext = App
) -> R.FrameSummary:
    """Keep a data_query/data_aggregate result as a frame with its lineage (replaces a frame of that name)."""
    return await call_core(lambda: app.frames.save(name, new_name))


@server.tool(annotations=hints("Frame to session", idempotent=True))
async def to_session(
    name: FrameName,
    session: SessionName,
    variable: Annotated[str | None, Field(description="default: the frame name")] = None,
    app: AppContext = App,
) -> R.ToSessionResult:
    """Put a frame into a code session as a pandas DataFrame, for data_code_run."""
    return await call_core(lambda: app.frames.to_session(name, session, variable))


# -- code sessions --------------------------------------------------------------------------------------------
@server.tool(annotations=hints("Run Python code"), task=task_on(server))
async def code_run(
    ctx: Context,
    session: SessionName,
    code: Annotated[str, Field(description="Python source; the repr of a final expression is returned as result")],
    timeout_s: Annotated[
        float | None, Field(description="wall-time limit in seconds (default AISAC_SANDBOX_TIMEOUT_S, max 3600)")
    ] = None,
) -> S.CodeRun | ToolResult:
    """Use to compute with Python in a persistent sandboxed session (variables survive across calls).

    numpy, pandas, scipy, matplotlib and common stdlib modules; no network or processes; writes only in the
    session folder; CPU/memory/time limits. Returns stdout, stderr, the final expression's repr as ``result``,
    errors, one PNG per figure; ``state_lost``: earlier variables are gone. A run past
    AISAC_SANDBOX_JOB_THRESHOLD_S returns ``pending: true`` and a ``job_id`` (data_code_job_status,
    rag_job_cancel); as an MCP task it runs to its end."""
    app = app_of(ctx)
    wait_s = None if in_task(ctx) else app.settings.sandbox.job_threshold_s
    first = 0.2 if wait_s is None else min(0.2, wait_s)  # a quick run answers at once, a longer one reports progress
    run, images = await call_core(_start_run, app, session, code, timeout_s, first)
    result: Mapping[str, Any] = run
    if run["status"] == "running":
        result, images = await follow_code_run(ctx, app.sandbox, run, None if wait_s is None else wait_s - first)
    return _with_images(result, images)


def _start_run(
    app: AppContext, session: str, code: str, timeout_s: float | None, wait_s: float
) -> tuple[S.CodeRun, list[bytes]]:
    """The code-session manager (built on first use: it probes the machine's isolation) and the run it starts."""
    return app.sandbox.run(session, code, timeout_s, wait_s=wait_s)


@server.tool(annotations=hints("Code run status", read_only=True))
async def code_job_status(
    job_id: Annotated[str, Field(description="job_id returned by data_code_run")], app: AppContext = App
) -> S.CodeRun | ToolResult:
    """Use to follow a data_code_run that returned ``pending: true``: ``status`` running, else the
    run's full result (``cancelled`` when stopped). Error: unknown job id."""
    result, images = await call_core(lambda: app.sandbox.job_status(job_id))
    return _with_images(result, images)


@server.tool(annotations=hints("Session variables", read_only=True))
async def code_variables(session: SessionName, app: AppContext = App) -> S.VariablesResult:
    """Names, types and shapes of a code session's variables."""
    return await call_core(lambda: app.sandbox.variables(session))


@server.tool(annotations=hints("Code sessions", read_only=True))
async def code_session_list(app: AppContext = App) -> S.SessionListResult:
    """The code sessions, and the sandbox's isolation, allowed imports and limits."""
    return await call_core(lambda: app.sandbox.list())


@server.tool(annotations=hints("Reset session", destructive=True, idempotent=True))
async def code_session_reset(session: SessionName, app: AppContext = App) -> S.ResetResult:
    """Clear a code session's variables and stop its running job; its files stay."""
    return await call_core(lambda: app.sandbox.reset(session))


@server.tool(annotations=hints("Close session", destructive=True, idempotent=True))
async def code_session_close(session: SessionName, app: AppContext = App) -> S.CloseResult:
    """End a code session: its worker stops, its files stay."""
    return await call_core(lambda: app.sandbox.close(session))


# -- resources and completions --------------------------------------------------------------------------------
#: the templates as this server declares them; the suite mounts them as ``aisac://data/frames/{name}`` ...
FRAME_URI = "aisac://frames/{name}"
SESSION_URI = "aisac://code-sessions/{session}"
#: most values a completion answers with (the MCP limit is 100)
COMPLETIONS = 100


@server.resource(FRAME_URI, mime_type="application/json")
async def frame_resource(name: str, app: AppContext = App) -> str:
    """A frame's first 20 rows with its shape and dtypes (as data_preview returns them), as JSON."""
    try:
        res = await call_core(lambda: app.frames.preview(name, 20, "head"))
    except Exception as exc:  # ToolError from call_core: a resource read reports a ResourceError
        raise ResourceError(str(exc)) from exc
    return json.dumps(res, ensure_ascii=False, default=str)


@server.resource(SESSION_URI, name="code_session", mime_type="application/json")
async def session_resource(session: str, app: AppContext = App) -> str:
    """A code session's variables (as data_code_variables returns them), as JSON."""
    try:
        res = await call_core(lambda: app.sandbox.variables(session))
    except Exception as exc:
        raise ResourceError(str(exc)) from exc
    return json.dumps(res, ensure_ascii=False, default=str)


def frame_names(app: AppContext, prefix: str = "") -> list[str]:
    """Registered frame names starting with ``prefix`` (any case), newest first, at most 100."""
    names = [f["name"] for f in app.frames.list()["frames"]]
    return [n for n in names if n.lower().startswith(prefix.lower())][:COMPLETIONS]


def session_names(app: AppContext, prefix: str = "") -> list[str]:
    """Code session names starting with ``prefix`` (any case), at most 100."""
    names = sorted(s["session"] for s in app.sandbox.list()["sessions"])
    return [n for n in names if n.lower().startswith(prefix.lower())][:COMPLETIONS]


#: completion of the frame resource's ``name`` (frame names) and the code-session resource's ``session`` (session
#: names), by prefix; the suite's namespaced templates are recognised too
complete = by_prefix(
    {
        **{(uri, "name"): frame_names for uri in (FRAME_URI, "aisac://data/frames/{name}")},
        **{(uri, "session"): session_names for uri in (SESSION_URI, "aisac://data/code-sessions/{session}")},
    }
)
server.add_completion_handler(complete)
