"""The HTML export of a run: the dashboard's run page as one self-contained file for a reviewer.

The same body as the live page (:func:`aisac_core.trace.runpage.render_run`: question, verdict, answer with linked
citations, cited evidence with its page images, plan and timeline diagrams, every step), with the stylesheet
inline, the page images embedded as ``data:`` URIs and no script: it opens from disk, offline, in any browser.
Evidence is verified against the files (sha256) when the export is made, without opening the vector store.
"""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING, Any

from aisac_core.trace.exports.bundle import safe_name
from aisac_core.trace.exports.software import aisac_version
from aisac_core.trace.queries import RunQueries
from aisac_core.trace.runpage import CSS, render_run
from aisac_core.trace.verify import verify_run

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.trace.evidence_images import EvidenceImages


class RunPage:
    """A run's report as one HTML page: a part of :class:`~aisac_core.trace.service.TraceService` (the HTML export
    and the ``report_html`` of the dashboard). Collaborators: ``engine`` (the store's SQL engine) and ``images()``
    (the store's page images, :class:`~aisac_core.trace.evidence_images.EvidenceImages`, to embed the cited
    passages' PDF pages: PNG, highlighted, indexed PDFs of this store only; None embeds none)."""

    engine: Engine

    def images(self) -> EvidenceImages | None:
        """The store's page images (provided by the service; None: no page images)."""
        return None

    def report_html(self, run_id: str) -> str:
        """The run page of ``run_id`` as a standalone HTML document (see the module docstring), not written to a
        file. Raises TraceError for an unknown run."""
        data = RunQueries(self.engine).get_run(run_id, include_results=True)
        images = self.images()

        def page_image(card: dict[str, Any]) -> dict[str, Any] | None:
            img = images.image(card) if images is not None else None
            if img is None:
                return None
            return {
                "src": "data:image/png;base64," + base64.b64encode(img.png).decode("ascii"),
                "width": img.width,
                "height": img.height,
                "rects": img.rects,
                "found": img.found,
            }

        body = render_run(
            dict(data),
            verify=dict(verify_run(self.engine, run_id)),
            page_image=page_image,
            run_href=lambda rid: f"{safe_name(rid)}.html",
        )  # that run's export, beside this one
        title = html.escape(f"aisac run {run_id}")
        software = html.escape(f"aisac {aisac_version({'pins': data.get('pins')})}")
        return (
            "<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<title>{title}</title><meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<meta name=generator content='{software}'>"
            f"<style>{CSS}</style></head><body><header><span>aisac run report</span><span class=mut>"
            f"{html.escape(run_id)} · {software}</span></header><main>{body}</main></body></html>"
        )
