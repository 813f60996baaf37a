"""Trace exports of one run: the JSON bundle (machine-readable, for replay and retention), Markdown (a human
summary: question and answer first), a self-contained HTML run page (for a reviewer, offline), W3C PROV-JSON and a
Workflow Run RO-Crate. :meth:`RunExports.export` picks one and writes it under ``<data dir>/trace_exports/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.trace.exports.bundle import BUNDLE_FORMAT, export_bundle, export_dir, safe_name
from aisac_core.trace.exports.html import RunPage
from aisac_core.trace.exports.markdown import export_markdown
from aisac_core.trace.exports.prov import export_prov
from aisac_core.trace.exports.rocrate import export_rocrate
from aisac_core.trace.queries import TraceError, require_events
from aisac_core.trace.results import Exported

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: export formats of :meth:`RunExports.export`.
EXPORT_FORMATS = ("json", "markdown", "html", "prov", "rocrate")

__all__ = [
    "BUNDLE_FORMAT",
    "EXPORT_FORMATS",
    "export_bundle",
    "export_dir",
    "RunExports",
    "RunPage",
    "export_markdown",
    "export_prov",
    "export_rocrate",
]


class RunExports(RunPage):
    """Writing a run to a file: a part of :class:`~aisac_core.trace.service.TraceService`. Collaborators:
    ``engine`` (the store's SQL engine), ``export_dir`` (where files go: the service's ``<data dir>/trace_exports/``,
    created when missing), ``config_pins()`` (the store's configuration now: the bundle's ``current_pins``) and
    ``images()`` (the page images the HTML page embeds, :class:`RunPage`)."""

    engine: Engine

    @property
    def export_dir(self) -> Path:
        """Where exports are written (provided by the service)."""
        raise NotImplementedError

    def config_pins(self) -> dict[str, Any]:
        """The store's configuration now (provided by the service)."""
        raise NotImplementedError

    def export(self, run_id: str, fmt: str = "json") -> Exported:
        """Export a run: ``json`` -> ``{format, path, bundle}``; ``markdown`` -> ``{format, path, markdown}``;
        ``html`` -> ``{format, path, bytes}`` (the page is not repeated in the result: open the file); ``prov`` ->
        ``{format, path, prov}`` (PROV-JSON dict); ``rocrate`` -> ``{format, path (folder), zip, summary}``. The
        output is written under ``export_dir`` (created when missing): ``<run>.json`` / ``.md`` / ``.html`` / ``.prov.json`` (``path`` in the result), ``<run>-rocrate/``
        and its zip. Raises TraceError for an unknown run or format."""
        if fmt not in EXPORT_FORMATS:
            raise TraceError(f"format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
        require_events(self.engine, run_id)
        safe = safe_name(run_id)
        out_dir = self.export_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        if fmt == "rocrate":
            crate = export_rocrate(self.engine, export_bundle(self.engine, run_id, self.config_pins()), out_dir)
            return {"format": fmt, "path": crate["path"], "zip": crate["zip"], "summary": crate["summary"]}
        if fmt == "json":
            bundle = export_bundle(self.engine, run_id, self.config_pins())
            path = out_dir / f"{safe}.json"
            path.write_text(json.dumps(bundle, indent=1, ensure_ascii=False), encoding="utf-8")
            return {"format": fmt, "path": str(path), "bundle": bundle}
        if fmt == "html":
            page = self.report_html(run_id)
            path = out_dir / f"{safe}.html"
            path.write_text(page, encoding="utf-8")
            return {"format": fmt, "path": str(path), "bytes": len(page.encode("utf-8"))}
        if fmt == "markdown":
            text = export_markdown(self.engine, run_id)
            path = out_dir / f"{safe}.md"
            path.write_text(text, encoding="utf-8")
            return {"format": fmt, "path": str(path), "markdown": text}
        prov = export_prov(export_bundle(self.engine, run_id, self.config_pins()))
        path = out_dir / f"{safe}.prov.json"
        path.write_text(json.dumps(prov, indent=1), encoding="utf-8")
        return {"format": fmt, "path": str(path), "prov": prov}
