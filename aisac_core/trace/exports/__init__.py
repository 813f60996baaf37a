"""Trace exports of one run: the JSON bundle (machine-readable, for replay and retention), Markdown (a human
summary: question and answer first), a self-contained HTML run page (for a reviewer, offline), W3C PROV-JSON and a
Workflow Run RO-Crate. :func:`export_run` picks one and writes it under ``<data dir>/trace_exports/``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.trace.exports.bundle import BUNDLE_FORMAT, export_bundle, export_dir, safe_name
from aisac_core.trace.exports.html import export_html
from aisac_core.trace.exports.markdown import export_markdown
from aisac_core.trace.exports.prov import export_prov
from aisac_core.trace.exports.rocrate import export_rocrate
from aisac_core.trace.queries import TraceError, require_events
from aisac_core.trace.results import Exported

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.trace.evidence_images import EvidenceImages

#: export formats of :func:`export_run`.
EXPORT_FORMATS = ("json", "markdown", "html", "prov", "rocrate")

__all__ = [
    "BUNDLE_FORMAT",
    "EXPORT_FORMATS",
    "export_bundle",
    "export_dir",
    "export_html",
    "export_markdown",
    "export_prov",
    "export_rocrate",
    "export_run",
]


def export_run(
    engine: Engine,
    run_id: str,
    fmt: str = "json",
    *,
    out_dir: Path,
    current_pins: Callable[[], dict[str, Any]],
    images: EvidenceImages | None = None,
) -> Exported:
    """Export a run: ``json`` -> ``{format, path, bundle}``; ``markdown`` -> ``{format, path, markdown}``;
    ``html`` -> ``{format, path, bytes}`` (the page is not repeated in the result: open the file); ``prov`` ->
    ``{format, path, prov}`` (PROV-JSON dict); ``rocrate`` -> ``{format, path (folder), zip, summary}``. The
    output is written under ``out_dir`` (the trace service passes ``<data dir>/trace_exports/``, created when
    missing): ``<run>.json`` / ``.md`` / ``.html`` / ``.prov.json`` (``path`` in the result), ``<run>-rocrate/``
    and its zip. ``current_pins()``: the store's configuration now (the bundle's ``current_pins``); ``images``:
    the page images the HTML page embeds (None: none). Raises TraceError for an unknown run or format."""
    if fmt not in EXPORT_FORMATS:
        raise TraceError(f"format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    require_events(engine, run_id)
    safe = safe_name(run_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    if fmt == "rocrate":
        crate = export_rocrate(engine, export_bundle(engine, run_id, current_pins()), out_dir)
        return {"format": fmt, "path": crate["path"], "zip": crate["zip"], "summary": crate["summary"]}
    if fmt == "json":
        bundle = export_bundle(engine, run_id, current_pins())
        path = out_dir / f"{safe}.json"
        path.write_text(json.dumps(bundle, indent=1, ensure_ascii=False), encoding="utf-8")
        return {"format": fmt, "path": str(path), "bundle": bundle}
    if fmt == "html":
        page = export_html(engine, run_id, images=images)
        path = out_dir / f"{safe}.html"
        path.write_text(page, encoding="utf-8")
        return {"format": fmt, "path": str(path), "bytes": len(page.encode("utf-8"))}
    if fmt == "markdown":
        text = export_markdown(engine, run_id)
        path = out_dir / f"{safe}.md"
        path.write_text(text, encoding="utf-8")
        return {"format": fmt, "path": str(path), "markdown": text}
    prov = export_prov(export_bundle(engine, run_id, current_pins()))
    path = out_dir / f"{safe}.prov.json"
    path.write_text(json.dumps(prov, indent=1), encoding="utf-8")
    return {"format": fmt, "path": str(path), "prov": prov}
