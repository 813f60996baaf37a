"""Page images of cited passages for one store: which files may be rendered, and where the images are cached.

The dashboard's run page and the HTML export show each cited passage highlighted on its PDF page
(:func:`aisac_core.trace.pageimage.evidence_page`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, select

from aisac_core.store.tables import Document

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.trace.pageimage import PageImage


class EvidenceImages:
    """Page images of cited passages for one store (:func:`aisac_core.trace.pageimage.evidence_page`).

    Only a file that is an indexed PDF of this store's manifest is rendered (the trace's anchors name paths; a
    path in a trace is never opened on trust), with the passage highlighted: the citation's quote, else the chunk
    text; a table cell's box (``bbox`` of a cell anchor) is highlighted as it is. Images are cached under ``cache_dir`` (the trace service passes ``<data dir>/cache/pages``)."""

    def __init__(self, engine: Engine, cache_dir: Path) -> None:
        self.engine = engine
        self.cache_dir = cache_dir

    def _indexed(self, card: dict[str, Any]) -> bool:
        with Session(self.engine) as s:
            row = s.exec(select(Document).where(Document.path == str(card.get("path") or ""))).first()
        return (
            row is not None
            and row.status == "indexed"
            and row.file_type == "pdf"
            and (not card.get("doc_id") or row.doc_id == card["doc_id"])
        )

    def image(self, card: dict[str, Any] | None) -> PageImage | None:
        """The :class:`~aisac_core.trace.pageimage.PageImage` of ``card`` (a report card), or None (not a PDF of
        this store, no page, nothing to highlight, the page cannot be rendered)."""
        # pypdfium2 and PIL load only when a page is rendered (start-up time of the suite and the dashboard)
        from aisac_core.trace.pageimage import evidence_page

        page = (card or {}).get("page")
        passage = (card or {}).get("quote") or (card or {}).get("text")
        if not card or not isinstance(page, int) or isinstance(page, bool) or page < 1 or not passage:
            return None
        if not str(card.get("path") or "").lower().endswith(".pdf") or not self._indexed(card):
            return None
        bb = card.get("bbox")
        box = (
            (float(bb[0]), float(bb[1]), float(bb[2]), float(bb[3]))
            if isinstance(bb, (list, tuple))
            and len(bb) == 4
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bb)
            else None
        )
        return evidence_page(Path(card["path"]), page, passage, cache_dir=self.cache_dir, box=box)
