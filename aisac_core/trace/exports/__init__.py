"""Trace exports of one run: the JSON bundle (machine-readable, for replay and retention), Markdown (a human
summary: question and answer first), a self-contained HTML run page (for a reviewer, offline), W3C PROV-JSON and a
Workflow Run RO-Crate. :func:`export_run` picks one and writes it under ``<data dir>/trace_exports/``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aisac_core.trace.exports.bundle import (
    BUNDLE_FORMAT,
    export_bundle,
    export_dir,
    safe_name,
)
from aisac_core.trace.exports.html import export_html
from aisac_core.trace.exports.markdown import export_markdown
from aisac_core.trace.exports.prov import export_prov
from aisac_core.trace.exports.rocrate import export_rocrate
from aisac_core.trace.queries import TraceError, require_events

if TYPE_CHECKING:
    from aisac_core.context import AppContext

#: export formats of :func:`export_run`.
EXPORT_FORMATS = ("json", "markdown", "html", "prov", "rocrate")

__all__ = ["BUNDLE_FORMAT", "EXPORT_FORMATS", "export_bundle", "export_dir", "export_html", "export_markdown",
           "export_prov", "export_rocrate", "export_run"]


def export_run(app: AppContext, run_id: str, fmt: str = "json") -> dict[str, Any]:
    """Export a run: ``json`` -> ``{format, path, bundle}``; ``markdown`` -> ``{format, path, markdown}``;
    ``html`` -> ``{format, path, bytes}`` (the page is not repeated in the result: open the file); ``prov`` ->
    ``{format, path, prov}`` (PROV-JSON dict); ``rocrate`` -> ``{format, path (folder), zip, summary}``. The json,
    markdown, html and prov output is written to ``<data dir>/trace_exports/<run>.json`` / ``.md`` / ``.html`` /
    ``.prov.json`` (``path`` in the result). Raises TraceError for an unknown run or format."""
    if fmt not in EXPORT_FORMATS:
        raise TraceError(f"format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    require_events(app.engine, run_id)
    safe = safe_name(run_id)
    if fmt == "rocrate":
        return {"format": fmt, **export_rocrate(app, run_id)}
    if fmt == "json":
        body: Any = export_bundle(app, run_id)
        path = export_dir(app) / f"{safe}.json"
        path.write_text(json.dumps(body, indent=1, ensure_ascii=False), encoding="utf-8")
        return {"format": fmt, "path": str(path), "bundle": body}
    if fmt == "html":
        page = export_html(app, run_id)
        path = export_dir(app) / f"{safe}.html"
        path.write_text(page, encoding="utf-8")
        return {"format": fmt, "path": str(path), "bytes": len(page.encode("utf-8"))}
    if fmt == "markdown":
        body = export_markdown(app, run_id)
        path = export_dir(app) / f"{safe}.md"
        path.write_text(body, encoding="utf-8")
        return {"format": fmt, "path": str(path), "markdown": body}
    body = export_prov(app, run_id)
    path = export_dir(app) / f"{safe}.prov.json"
    path.write_text(json.dumps(body, indent=1), encoding="utf-8")
    return {"format": fmt, "path": str(path), "prov": body}
