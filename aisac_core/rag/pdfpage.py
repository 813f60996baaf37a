"""The text layer of a PDF page as aisac's table reader sees it (:mod:`aisac_core.rag.pdftables`): text segments cut
from docling's native text lines at wide word gaps, horizontal rulings (pypdfium2 path objects), the PDF's own
characters inside a box (pdfium), and the check that a table cell anchor's box still holds its text.

Coordinates: PDF points with the origin at the top left of the page (docling's ``TOPLEFT``); pdfium's user space
(origin bottom left, PDF 32000-1:2008 §8.3.2.3) is converted with the page height.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

#: a segment at least this share of the page width and with 6+ words is running text
PROSE_WIDTH = 0.42
#: words of a text line further apart than this many line heights are separate cells (chosen on the development
#: documents of the ICDAR 2013 portion: 0.9-1.1 give the same figures, 0.8 and 1.2 less)
WORD_GAP = 1.0


#: two figures further apart than this many line heights are separate cells ("2,218,406 1,180,160": narrow columns
#: of right-aligned numbers), unless the second is a group of three digits (a thousands separator space: "100 000")
NUMBER_GAP = 0.5
_FIGURE = re.compile(r"^[-+\u2212(]?[$\u20ac\u00a3]?\d[\d,.]*%?\)?$")
_GROUP = re.compile(r"^\d{3}([,.]\d+)?%?\)?$")


@dataclass
class Segment:
    """A run of text on one printed line: ``text`` and its box ``l, t, r, b`` (points, origin top-left)."""

    text: str
    l: float  # noqa: E741
    t: float
    r: float
    b: float

    @property
    def h(self) -> float:
        return max(0.5, self.b - self.t)

    @property
    def cy(self) -> float:
        return (self.t + self.b) / 2


@contextlib.contextmanager
def pdfium_pages(path: Any, pages: Iterable[int] | None = None) -> Iterator[Iterator[tuple[int, Any]]]:
    """The pages of the PDF at ``path`` as pypdfium2 pages, ``(1-based number, page)`` in the order of ``pages`` (None:
    every page; numbers outside the document are left out), read under docling's process-wide pdfium lock (pdfium is
    not thread-safe) and closed on exit. Raises what pypdfium2 raises for a file it cannot open."""
    import pypdfium2 as pdfium
    from docling.utils.locks import pypdfium2_lock

    with pypdfium2_lock:
        doc = pdfium.PdfDocument(str(path))
        try:
            n = len(doc)
            wanted = range(1, n + 1) if pages is None else pages
            yield ((pno, doc[pno - 1]) for pno in wanted if 1 <= pno <= n)
        finally:
            doc.close()


def _box(cell: Any, H: float) -> tuple[float, float, float, float]:
    bb = cell.rect.to_bounding_box()
    if bb.coord_origin.name != "TOPLEFT":
        bb = bb.to_top_left_origin(page_height=H)
    return min(bb.l, bb.r), min(bb.t, bb.b), max(bb.l, bb.r), max(bb.t, bb.b)


def _split_words(
    text: str, box: tuple[float, float, float, float], words: list[tuple[float, float, float, float, str]]
) -> list[Segment]:
    """A text line cut where its words are further apart than :data:`WORD_GAP` times the line height (docling-parse
    joins table cells a few spaces apart into one line)."""
    l, t, r, b = box  # noqa: E741
    h = max(0.5, b - t)
    inside = sorted(w for w in words if l - 1 <= (w[0] + w[2]) / 2 <= r + 1 and t - 1 <= (w[1] + w[3]) / 2 <= b + 1)
    if len(inside) < 2:
        return [Segment(text, l, t, r, b)]
    parts: list[list[tuple[float, float, float, float, str]]] = [[inside[0]]]
    for w in inside[1:]:
        gap, left = w[0] - parts[-1][-1][2], parts[-1][-1][4]
        if gap > WORD_GAP * h or (
            gap > NUMBER_GAP * h and _FIGURE.match(left) and _FIGURE.match(w[4]) and not _GROUP.match(w[4])
        ):
            parts.append([w])
        else:
            parts[-1].append(w)
    if len(parts) == 1:
        return [Segment(text, l, t, r, b)]
    return [
        Segment(" ".join(w[4] for w in p), p[0][0], min(w[1] for w in p), max(w[2] for w in p), max(w[3] for w in p))
        for p in parts
    ]


#: a line with a run of figures, or ending in a figure after a word (a long row label and its value, which
#: docling-parse may join into one line), is table material, not running text kept whole
_FIGURES = re.compile(r"\d%?\s+[-+(]?\d|[A-Za-z)]\s+[-+(]?[$\u20ac\u00a3]?\d[\d,.]*%?\)?$")


def page_segments(res: Any) -> dict[int, tuple[float, float, list[Segment]]]:
    """Per page (1-based): width, height and the text segments of a docling native-pipeline conversion result: its
    text lines, each cut at wide gaps between its words (:func:`_split_words`); vertical text is left out."""
    out: dict[int, tuple[float, float, list[Segment]]] = {}
    for page in res.pages:
        pno = page.page_no if page.page_no >= 1 else page.page_no + 1
        W, H = (page.size.width, page.size.height) if page.size else (612.0, 792.0)
        segs: list[Segment] = []
        pp = page.parsed_page
        buckets: dict[int, list[tuple[float, float, float, float, str]]] = {}
        for wc in (getattr(pp, "word_cells", None) or ()) if pp is not None else ():
            wt = (wc.text or "").strip()
            if wt:
                bx = _box(wc, H)
                buckets.setdefault(int((bx[1] + bx[3]) / 2 // 8), []).append((*bx, wt))
        for cell in pp.textline_cells if pp is not None else ():
            text = (cell.text or "").strip()
            if not text:
                continue
            l, t, r, b = _box(cell, H)  # noqa: E741
            if (b - t) > 1.5 * (r - l) and len(text) > 3:
                continue  # vertical text
            if (r - l) >= PROSE_WIDTH * W and len(text.split()) >= 6 and not _FIGURES.search(text):
                segs.append(Segment(text, l, t, r, b))  # running text (justified: wide spaces), kept whole
                continue
            k = int((t + b) / 2 // 8)
            near = [w for j in (k - 1, k, k + 1) for w in buckets.get(j, ())]
            segs.extend(_split_words(text, (l, t, r, b), near))
        out[pno] = (W, H, segs)
    return out


def page_rulings(path: Any) -> dict[int, list[tuple[float, float, float]]]:
    """Horizontal rulings per page (1-based) of the PDF at ``path`` as ``(y, x0, x1)`` in points, origin top-left:
    thin path objects (at most 2.5 pt high, at least 8 pt long) and the top and bottom edges of larger rectangles
    (cell borders, shaded bands), read with pypdfium2. Rotated pages and unreadable files give none."""
    out: dict[int, list[tuple[float, float, float]]] = {}
    if path is None:
        return out
    try:
        import pypdfium2.raw as pdfium_c

        with pdfium_pages(path) as pages:
            for pno, page in pages:
                if page.get_rotation() % 360:
                    continue
                H = page.get_height()
                rules: list[tuple[float, float, float]] = []
                for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_PATH,), max_depth=4):
                    x0, y0, x1, y1 = obj.get_bounds()
                    w, h = x1 - x0, y1 - y0
                    if w < 8:
                        continue
                    if h <= 2.5:
                        rules.append((H - (y0 + y1) / 2, x0, x1))
                    elif len(rules) < 5000:
                        rules.extend(((H - y1, x0, x1), (H - y0, x0, x1)))
                out[pno] = rules[:5000]
    except Exception:  # a page the table reader cannot read rulings of keeps its text-only reconstruction
        return {}
    return out


def cell_text_at(
    res: Any, page: int, bbox: tuple[float, float, float, float], slack: float = 1.5, path: Any = None
) -> str:
    """The text of the segments of ``page`` whose centre lies in ``bbox`` (grown by ``slack`` points), in reading
    order, joined by spaces: what a cell anchor's box holds in a conversion result ``res``; with ``path``, the PDF's
    own characters there (as :func:`aisac_core.rag.pdftables.find_tables` gives a cell's text: en dashes kept)."""
    if path is not None:
        return exact_texts(path, [(page, bbox, cell_text_at(res, page, bbox, slack))])[0]
    segs = page_segments(res).get(page, (0.0, 0.0, []))[2]
    l, t, r, b = bbox[0] - slack, bbox[1] - slack, bbox[2] + slack, bbox[3] + slack  # noqa: E741
    inside = [s for s in segs if l <= (s.l + s.r) / 2 <= r and t <= s.cy <= b]
    inside.sort(key=lambda x: (round(x.cy / 2), x.l))
    return " ".join(s.text for s in inside)


#: typographic variants one text extractor keeps and another folds (dashes, minus, quotes, soft hyphens), for
#: comparing the texts of two extractors (NFKC first: ligatures); pdfium reports a hyphen at a line end as U+0002
TYPOGRAPHIC_FOLD = str.maketrans(
    {
        "\u0002": "-",
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u00ad": "",
    }
)


def folded(text: str) -> str:
    """``text`` compared across extractors: NFKC (ligatures), dashes and minus as ``-``, curly quotes straight, soft
    hyphens and every whitespace removed."""
    return "".join(unicodedata.normalize("NFKC", text).translate(TYPOGRAPHIC_FOLD).split())


def same_text(a: str, b: str) -> bool:
    """Whether two cell texts are equal once whitespace is removed and typographic variants folded (:func:`folded`;
    the comparison of the ICDAR 2013 structure metric, without its case folding: a changed letter case is a changed
    value)."""
    return folded(a) == folded(b)


def exact_texts(path: Any, cells: list[tuple[int, tuple[float, float, float, float], str]]) -> list[str]:
    """The texts of ``cells`` (``(page, bbox, parsed text)``) as the PDF's own characters, read with pdfium inside each
    box, where they equal the parsed text up to typographic variants (:func:`folded`; docling-parse reads an en dash
    as a hyphen); the parsed text otherwise, and for every cell when pdfium cannot read the file."""
    out = [t for _, _, t in cells]
    if path is None or not cells:
        return out
    try:
        with pdfium_pages(path, sorted({p for p, _, _ in cells})) as pages:
            for pno, page in pages:
                if page.get_rotation() % 360:
                    continue
                H = page.get_height()
                tp = page.get_textpage()
                for k, (p, (l, top, r, b), text) in enumerate(cells):  # noqa: E741
                    if p != pno:
                        continue
                    raw = tp.get_text_bounded(left=l - 0.5, bottom=H - b - 0.5, right=r + 0.5, top=H - top + 0.5)
                    exact = " ".join(raw.split())
                    if exact != text and folded(exact) == folded(text):
                        out[k] = exact
    except Exception:  # the parsed text stands when pdfium cannot read the page
        return [t for _, _, t in cells]
    return out


def cell_holds(
    res: Any, path: Any, page: int, bbox: tuple[float, float, float, float], chunk_sha256: str, text: str | None = None
) -> bool:
    """Whether ``page`` of a conversion result ``res`` (of the PDF at ``path``) holds a cell anchor's text inside
    ``bbox``: the parsed text there, or the PDF's own characters there, has the sha256 ``chunk_sha256`` or equals
    ``text`` up to whitespace and typographic variants (:func:`same_text`). The check of
    :meth:`aisac_core.rag.verify.AnchorVerifier.verify_cell_anchor`."""
    from aisac_core.hashing import sha256_text

    for t in (cell_text_at(res, page, bbox), cell_text_at(res, page, bbox, path=path)):
        if sha256_text(t) == chunk_sha256 or (text is not None and same_text(t, text)):
            return True
    return False
