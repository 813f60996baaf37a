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
from aisac_core.trace.queries import get_run
from aisac_core.trace.runpage import CSS, render_run
from aisac_core.trace.verify import verify_run

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.trace.evidence_images import EvidenceImages


def export_html(engine: Engine, run_id: str, *, images: EvidenceImages | None = None) -> str:
    """The run page of ``run_id`` as a standalone HTML document (see the module docstring). ``images``: the
    store's page images (:class:`~aisac_core.trace.evidence_images.EvidenceImages`) to embed the cited passages'
    PDF pages (PNG, highlighted; indexed PDFs of this store only); None embeds none. Raises TraceError for an
    unknown run."""
    data = get_run(engine, run_id, include_results=True)

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
        verify=dict(verify_run(engine, run_id)),
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
