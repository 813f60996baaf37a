"""The data server: a registry of named DataFrames with lineage, and stateful sandboxed Python sessions.

A thin adapter over :mod:`aisac_core.data.frames` (``app.frames``) and :mod:`aisac_core.data.sandbox`
(``app.sandbox``). Mounted by the suite under the ``data`` namespace, so every tool gets the ``data_`` prefix:
``data_load``, ``data_list``, ``data_preview``, ``data_describe``, ``data_query``, ``data_aggregate``, ``data_save``,
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
from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult
from mcp.types import ImageContent, TextContent
from pydantic import Field

from aisac_core.context import AppContext

from .common import App, call_core

server = FastMCP(
    "data",
    instructions=(
        "Load tables (CSV/TSV, Excel with multi-row or titled headers, Parquet, JSON, JSON Lines) from the registered "
        "roots into named frames with lineage; preview, describe, query (pandas query syntax), aggregate, save "
        "derived frames; and run Python in persistent sandboxed sessions (numpy, pandas, scipy, matplotlib; "
        "no network, no processes, writes only in the session folder; plots come back as PNG images)."
    ),
)

FrameName = Annotated[str, Field(description="frame name (data_list shows them) or a result_id of data_query / "
                                             "data_aggregate")]
SessionName = Annotated[str, Field(description="session name: 1-64 letters, digits, '_', '.', '-'")]


def _with_images(result: dict, images: list[bytes]) -> ToolResult:
    content: list[Any] = [TextContent(type="text", text=json.dumps(result, ensure_ascii=False, default=str))]
    content += [ImageContent(type="image", data=base64.b64encode(b).decode(), mimeType="image/png") for b in images]
    return ToolResult(content=content, structured_content=result)


# -- frames ---------------------------------------------------------------------------------------------------
@server.tool
async def load(
    path: Annotated[str, Field(description="file inside a registered root (absolute, or relative to the first "
                                           "root): .csv .tsv .txt .xlsx .xlsm .parquet .json .jsonl")],
    name: Annotated[str | None, Field(description="frame name (default: the file name without extension)")] = None,
    sheet: Annotated[str | None, Field(description="Excel sheet name or 0-based index (default: every sheet, "
                                                   "registered as <name>:<sheet>)")] = None,
    header_rows: Annotated[int | None, Field(description="number of header rows 0-10, overriding detection (CSV, "
                                                         "Excel)")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Load a table file into a named frame (replacing a frame of that name), recording its lineage.

    Header rows are detected (multi-row headers joined with '|', title/note rows above the table skipped, merged
    cells filled); CSV encoding and delimiter are detected. Result: ``{frames: [{name, kind, rows, columns,
    column_names, dtypes, source: {path, sha256, format, sheet, options: {header_rows, encoding, delimiter,
    skipped_rows, data_start_row}}, notes, replaced}], notes}``.
    Every column of a wide CSV is loaded, up to 100,000 (``columns`` counts them; ``column_names`` lists 100, with a
    note). Errors: path outside the registered roots ('..', symlinks); an empty path, a NUL byte, a symlink loop;
    missing, empty, corrupt or unsupported file; a CSV not in the accepted form (the message names the line and the
    problem); JSON nested too deeply; an XLSX refused before parsing as a possible decompression bomb (over
    AISAC_DATA_MAX_UNPACKED_MB unpacked, or AISAC_DATA_MAX_UNPACK_RATIO times its size above 16 MB); bad name, sheet
    or header_rows; file over AISAC_DATA_MAX_FILE_MB."""
    sh: str | int | None = sheet
    return await call_core(lambda: app.frames.load(path, name, sh, header_rows))


@server.tool(name="list")
async def list_frames(app: AppContext = App) -> dict[str, Any]:
    """Every registered frame, newest first, with its lineage (source file + sha256, or parent + operation).
    Result: ``{frames: [{name, kind, rows, columns, column_names (first 20), source | parent + operation, notes,
    created_at}], count}``."""
    return await call_core(lambda: app.frames.list())


@server.tool
async def preview(
    name: FrameName,
    n: Annotated[int, Field(description="rows to show, 1-500")] = 10,
    where: Annotated[Literal["head", "tail", "sample"], Field(
        description="head, tail or sample (reproducible: random_state 0)")] = "head",
    app: AppContext = App,
) -> dict[str, Any]:
    """Rows of a frame with its shape and dtypes. Result: ``{name, where, n, shape: [rows, columns], dtypes:
    {column: dtype}, rows: [{column: value}]}`` (dates ISO 8601, missing values null). Errors: unknown frame;
    n out of range."""
    return await call_core(lambda: app.frames.preview(name, n, where))


@server.tool
async def describe(
    name: FrameName,
    columns: Annotated[list[str] | None, Field(description="only these columns (default all, first 200)")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Summary statistics per column (pandas describe(include='all') plus null counts). Result: ``{name, shape,
    columns: {column: {dtype, count, nulls, mean, std, min, 25%, 50%, 75%, max | unique, top, freq}},
    truncated}``. Errors: unknown frame or column."""
    return await call_core(lambda: app.frames.describe(name, columns))


@server.tool
async def query(
    name: FrameName,
    expr: Annotated[str, Field(description="pandas DataFrame.query expression, e.g. \"temp_K > 300 and site == "
                                           "'A'\"; `backticks` for column names with spaces")],
    columns: Annotated[list[str] | None, Field(description="columns to return (default all)")] = None,
    limit: Annotated[int, Field(description="rows to return, 1-1000")] = 50,
    app: AppContext = App,
) -> dict[str, Any]:
    """Rows matching a query in pandas DataFrame.query syntax - comparisons, and/or/not, arithmetic, 'in'
    lists, and the methods str.contains/startswith/endswith/lower/upper, isna/notna, isin, between, dt.year...
    No '@' variables, no other attributes or calls, no names starting with '_' (checked by parsing). Result:
    ``{name, expr, matched, returned, truncated, columns, rows, result_id}``; data_save(result_id, new_name)
    registers the full match. Errors: unknown frame or column; refused or invalid expression."""
    return await call_core(lambda: app.frames.query(name, expr, columns, limit))


@server.tool
async def aggregate(
    name: FrameName,
    metrics: Annotated[dict[str, list[str] | str], Field(
        description="{column: [function, ...]}; functions: count size sum mean median min max std var nunique "
                    "first last")],
    by: Annotated[list[str] | None, Field(description="group-by columns (default: whole frame)")] = None,
    limit: Annotated[int, Field(description="groups to return, 1-5000")] = 200,
    app: AppContext = App,
) -> dict[str, Any]:
    """Group and aggregate. Result: ``{name, by, groups, returned, truncated, columns (<column>_<function>),
    rows, result_id}``. Errors: unknown frame, column or function; a function that does not apply (mean of
    text)."""
    return await call_core(lambda: app.frames.aggregate(name, by, metrics, limit))


@server.tool
async def save(
    name: Annotated[str, Field(description="a result_id of data_query/data_aggregate, or a frame to copy")],
    new_name: Annotated[str, Field(description="name of the new frame")],
    app: AppContext = App,
) -> dict[str, Any]:
    """Register a derived frame (persisted) with its lineage: parent frame and operation (query expression,
    group-by + metrics, or copy). Result: the new frame's summary ``{name, kind: "derived", rows, columns,
    parent, operation, ...}``. Errors: unknown frame or result id; bad new name."""
    return await call_core(lambda: app.frames.save(name, new_name))


@server.tool
async def to_session(
    name: FrameName,
    session: SessionName,
    variable: Annotated[str | None, Field(description="variable name (default: the frame name as an "
                                                      "identifier)")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Copy a frame into a code session as a pandas DataFrame variable (the session is created if needed).
    Result: ``{name, session, variable, shape, path, notes}``. Errors: unknown frame; bad session or variable
    name; session busy."""
    return await call_core(lambda: app.frames.to_session(name, session, variable))


# -- code sessions --------------------------------------------------------------------------------------------
@server.tool
async def code_run(
    session: SessionName,
    code: Annotated[str, Field(description="Python source; the repr of a final expression is returned as result")],
    timeout_s: Annotated[float | None, Field(description="wall-time limit in seconds (default "
                                                         "AISAC_SANDBOX_TIMEOUT_S, max 3600)")] = None,
    app: AppContext = App,
) -> ToolResult:
    """Run Python in a persistent sandboxed session (created on first use; variables survive across calls).

    Allowed imports: numpy, pandas, scipy, matplotlib, math, statistics, json, re, datetime, collections,
    itertools, functools and a few stdlib helpers (+ AISAC_SANDBOX_ALLOW_IMPORTS). No network, no processes,
    writes only inside the session folder, CPU/memory/file-size/output limits; random and numpy seeded.
    Result (JSON, also as text): ``{ok, session, cell, job_id, status, stdout, stderr, result?, error?,
    error_type?, traceback?, figures: [{name, path, sha256, bytes}], notes, state_lost, duration_ms, code_sha256,
    output_sha256, isolation}`` plus one PNG image per matplotlib figure (at most 20, each within
    AISAC_SANDBOX_FIGURE_MB; ``path`` is the server's copy). A run longer than
    AISAC_SANDBOX_JOB_THRESHOLD_S returns ``{ok: false, pending: true, status: "running", job_id, error}``: poll
    data_code_job_status. ``state_lost: true`` means the worker had died or the server restarted: earlier
    variables are gone. Errors (MCP): empty or oversized code; bad session name; session busy; timeout out of
    range; too many live sessions."""
    result, images = await call_core(lambda: app.sandbox.run(session, code, timeout_s))
    return _with_images(result, images)


@server.tool
async def code_job_status(
    job_id: Annotated[str, Field(description="job_id returned by data_code_run")],
    app: AppContext = App,
) -> ToolResult:
    """State of a code run: ``{ok: false, pending: true, status: "running", elapsed_s, ...}`` while it runs,
    else the run's full result (as data_code_run returns it, images included) plus ``finished_at``. Errors:
    unknown job id (jobs are forgotten when the server restarts)."""
    result, images = await call_core(lambda: app.sandbox.job_status(job_id))
    return _with_images(result, images)


@server.tool
async def code_variables(session: SessionName, app: AppContext = App) -> dict[str, Any]:
    """The session's variables: ``{session, variables: [{name, type, shape? | len?, dtype?, repr (<= 200
    characters)}], notes}`` (names starting with '_' and modules left out). Errors: unknown session; session
    busy."""
    return await call_core(lambda: app.sandbox.variables(session))


@server.tool
async def code_session_list(app: AppContext = App) -> dict[str, Any]:
    """Sessions of this server: ``{sessions: [{session, dir, alive, pid, cells, created_at, last_used_at,
    busy_job, state_lost, confinement: {uid, seccomp, landlock}}], isolation (bwrap | unshare | none),
    isolation_note, allowed_imports, limits}``."""
    return await call_core(lambda: app.sandbox.list())


@server.tool
async def code_session_reset(session: SessionName, app: AppContext = App) -> dict[str, Any]:
    """Stop the session's worker (and any running job) and clear its variables; the next run starts fresh.
    Files in the session folder are kept. Result: ``{session, reset: true, killed_job}``. Errors: unknown
    session."""
    return await call_core(lambda: app.sandbox.reset(session))


@server.tool
async def code_session_close(session: SessionName, app: AppContext = App) -> dict[str, Any]:
    """Stop the session's worker and forget the session; its folder (artifacts, figures) stays on disk.
    Result: ``{session, closed: true, dir}``. Errors: unknown session."""
    return await call_core(lambda: app.sandbox.close(session))
