"""PDF layout reconstruction: reading order, paragraphs, headings and captions from the text lines of docling's
model-free ``NativePdfPipeline``.

Per page: page numbers and running headers/footers (text repeated in the margins of many pages) are removed;
lines are ordered by column (full-width lines split a page into bands; in a two-column band the left column is
read first); lines join into paragraphs by line gap, column, size and kind (heading-like or body); rows of
side-by-side cells become table blocks (cells joined by `` | ``). Headings are found by weight (a bold font other
than the body font) or size, and take their level from their numbering ("3" -> 1, "3.1" -> 2, appendix "A" -> 1)
or, unnumbered, from their name and size. The result is a DoclingDocument, so chunking and structure treat every
format alike. The rules and their measured quality: docs/rag.md, "PDF structure".
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any

from aisac_core.rag.frontmatter import is_affiliation
from aisac_core.rag.frontmodel import document_front_matter
from aisac_core.rag.headings import ends_open, figure_debris, heading_problem, repair_heading, run_in_split
from aisac_core.rag.ocr import OCR_FONT, OCR_FONT_BOLD, OcrPage
from aisac_core.rag.outline import (
    TOC_HEADING,
    OutlineEntry,
    match_outline,
    pdf_outline,
    plausible_outline,
    respace,
    toc_pages,
)
from aisac_core.rag.outline import heading_key as _okey
from aisac_core.rag.printed import SPACING_ACCENTS, Hyphenation, compose_diacritics, form_text_lines, glyph_texts
from aisac_core.rag.printed import respace as glyph_respace
from aisac_core.rag.structure import NUMBERING, letters_ratio, section_label

_PAGE_NUM = re.compile(r"^\s*(page\s*)?[\divxlc]{1,5}(\s*(/|of)\s*\d+)?\s*$", re.I)
#: bold / heavy weight in a PDF font name ("NimbusRomNo9L-Medi", "LinLibertineTB", "CMBX10", "Arial-BoldMT")
_BOLD_FONT = re.compile(r"bold|medi|black|heavy|semibold|demi|cmbx|cmb\d|-bd|tb$|-b$|,b$|\.b$", re.I)
#: unnumbered headings that are top-level sections wherever they occur
_TOP_LEVEL_NAMES = re.compile(
    r"^(abstract|introduction|background|related work|methods?|methodology|materials and methods|experiments?|"
    r"experimental( section| setup)?|results?( and discussion)?|discussion|conclusions?|concluding remarks|"
    r"limitations|acknowledge?ments?|references|bibliography|works cited|literature cited|appendix|appendices|"
    r"supplementary (material|materials|information)|ethic(s|s statement|al considerations)|broader impacts?|"
    r"author contributions|data availability|code availability|funding|declarations?|competing interests|"
    r"conflicts? of interests?|keywords|ccs concepts|summary)\b",
    re.I,
)
#: unnumbered names that are top-level sections at any size (front and back matter)
_ALWAYS_TOP = re.compile(
    r"^(abstract|keywords|index terms|ccs concepts|acknowledge?ments?|references|bibliography|works cited|"
    r"literature cited|appendix|appendices|supplementary (material|materials|information)|author contributions|"
    r"data availability|code availability|competing interests|conflicts? of interests?|(table of )?contents)\b",
    re.I,
)
#: a figure / table caption: "Figure 3:", "Fig. 2.", "Table 1:", "TABLE II"
_CAPTION = re.compile(r"^(fig(ure|\.)?|table|tab\.)\s*([0-9]+|[IVX]+)[a-z]?\s*[.:|]", re.I)


@dataclass
class _Line:
    page: int
    text: str
    l: float  # noqa: E741
    r: float
    top: float  # distance from the top of the page
    h: float
    font: str = ""
    bold: bool = False
    #: the line's words as (text, font name), when the PDF parser gives words (run-in headings)
    words: tuple[tuple[str, str], ...] = ()


def _pdf_lines(
    res: Any, ocr: dict[int, OcrPage] | None = None, as_printed: bool = True
) -> tuple[dict[int, list[_Line]], dict[int, tuple[float, float]], list[str]]:
    """Text lines per page (1-based) with font name and weight, page sizes, and the lines dropped because
    they run vertically (e.g. the arXiv stamp in the left margin; kept aside for metadata). A page in ``ocr``
    takes its lines from the OCR (:mod:`aisac_core.rag.ocr`) instead of its text layer. With ``as_printed``, each
    text-layer line gets the word spaces pdfium places from its glyph positions, the text of form XObjects that
    docling-parse leaves out is added (:func:`aisac_core.rag.printed.form_text_lines`), and every line's spacing
    accents are composed (:mod:`aisac_core.rag.printed`)."""
    lines, sizes, vertical = _layer_lines(res, ocr)
    if as_printed:
        path = getattr(getattr(res, "input", None), "file", None)
        layer = {pno: [ln for ln in ls if ln.font not in (OCR_FONT, OCR_FONT_BOLD)] for pno, ls in lines.items()}
        glyphs = glyph_texts(path, {pno: [(x.l, x.top, x.r, x.top + x.h) for x in ls] for pno, ls in layer.items()})
        for pno, ls in layer.items():
            for ln, g in zip(ls, glyphs.get(pno, ())):
                ln.text = glyph_respace(ln.text, g)
        # text inside form XObjects, which docling-parse leaves out (a boxed passage, an included figure's labels)
        text_pages = {pno: [(x.l, x.top, x.r, x.top + x.h) for x in ls] for pno, ls in layer.items()}
        for pno, rows in form_text_lines(
            path, {p: b for p, b in text_pages.items() if not ocr or p not in ocr}
        ).items():
            for text, l, t, r, b in rows:  # noqa: E741
                if (b - t) > 1.5 * (r - l) and len(text) > 3:
                    vertical.append(text)
                else:
                    lines.setdefault(pno, []).append(_Line(pno, text, l, r, t, max(1.0, b - t)))
        for pno, ls in lines.items():
            lines[pno] = _attach_accents(ls)  # an accent the parser read as a line of its own, first
            for ln in lines[pno]:
                ln.text = compose_diacritics(ln.text)
    return lines, sizes, vertical


def _attach_accents(ls: list[_Line]) -> list[_Line]:
    """The lines of one page with each line that ends in a spacing accent left over (no letter beside it in its own
    text) joined to the line on the same row that starts under the accent: the parser cut the printed line at an
    accent set over a letter it read as a line of its own ("(denoted ˜" + "𝑥) for each" -> "(denoted 𝑥̃) for
    each"). Geometry: the rows overlap by half a line height, the other line starts within one line height left
    and a fifth right of the accent line's right edge, with a letter."""
    out = list(ls)
    changed = True
    while changed:
        changed = False
        for a in out:
            t = a.text.rstrip()
            if not t or t[-1] not in SPACING_ACCENTS:
                continue
            near = [
                b
                for b in out
                if b is not a
                and b.text[:1].isalpha()
                and min(a.top + a.h, b.top + b.h) - max(a.top, b.top) >= 0.5 * min(a.h, b.h)
                and a.r - a.h <= b.l <= a.r + 0.2 * a.h
            ]
            if not near:
                continue
            b = min(near, key=lambda x: abs(x.l - a.r))
            a.text = compose_diacritics(t[:-1] + b.text[0] + SPACING_ACCENTS[t[-1]] + b.text[1:])
            a.top, a.h = min(a.top, b.top), max(a.top + a.h, b.top + b.h) - min(a.top, b.top)
            a.l, a.r = min(a.l, b.l), max(a.r, b.r)
            a.words = a.words + b.words
            out.remove(b)
            changed = True
            break
    return out


def _layer_lines(
    res: Any, ocr: dict[int, OcrPage] | None = None
) -> tuple[dict[int, list[_Line]], dict[int, tuple[float, float]], list[str]]:
    """The lines of :func:`_pdf_lines` as the text layer (or the OCR) gives them."""
    sizes: dict[int, tuple[float, float]] = {}
    lines: dict[int, list[_Line]] = {}
    vertical: list[str] = []
    for page in res.pages:
        pno = page.page_no if page.page_no >= 1 else page.page_no + 1
        W, H = (page.size.width, page.size.height) if page.size else (612.0, 792.0)
        sizes[pno] = (W, H)
        pp = page.parsed_page
        out = lines.setdefault(pno, [])
        if ocr is not None and pno in ocr:
            for ol in ocr[pno].lines:
                w, h = ol.r - ol.l, ol.b - ol.t
                if h > 1.5 * w and len(ol.text) > 3:
                    vertical.append(ol.text)
                    continue
                font = OCR_FONT_BOLD if ol.bold else OCR_FONT
                out.append(_Line(pno, ol.text, ol.l, ol.r, ol.t, max(1.0, h), font, ol.bold))
            continue
        if pp is None:
            continue
        # words by vertical position (4-point buckets), built on first need: lines in a bold font get their
        # words with their fonts (run-in headings)
        wbuckets: dict[int, list[tuple[float, float, float, str, str]]] | None = None
        for cell in pp.textline_cells:
            text = (cell.text or "").strip()
            if not text:
                continue
            bb = cell.rect.to_bounding_box()
            if bb.coord_origin.name != "TOPLEFT":
                bb = bb.to_top_left_origin(page_height=H)
            w, h = abs(bb.r - bb.l), abs(bb.b - bb.t)
            if h > 1.5 * w and len(text) > 3:
                vertical.append(text)
                continue
            font = (cell.font_name or "").split("+")[-1]
            top, bot = min(bb.t, bb.b), max(bb.t, bb.b)
            words: tuple[tuple[str, str], ...] = ()
            if text.count(" ") >= 2 and _BOLD_FONT.search(font) or re.fullmatch(r"/?[A-Za-z]{0,2}\d+", font):
                if wbuckets is None:
                    wbuckets = {}
                    for wc in getattr(pp, "word_cells", None) or ():
                        wb = wc.rect.to_bounding_box()
                        if wb.coord_origin.name != "TOPLEFT":
                            wb = wb.to_top_left_origin(page_height=H)
                        cy = (wb.t + wb.b) / 2
                        wbuckets.setdefault(int(cy // 4), []).append(
                            (cy, wb.l, wb.r, wc.text or "", (wc.font_name or "").split("+")[-1])
                        )
                words = tuple(
                    (wt, wf)
                    for _, wt, wf in sorted(
                        (wl, wt, wf)
                        for k in range(int(top // 4), int(bot // 4) + 1)
                        for cy, wl, wr, wt, wf in wbuckets.get(k, ())
                        if top <= cy <= bot and wl >= bb.l - 1 and wr <= bb.r + 1
                    )
                )
            out.append(_Line(pno, text, bb.l, bb.r, bb.t, max(1.0, h), font, bool(_BOLD_FONT.search(font)), words))
    return lines, sizes, vertical


def _strip_margins(lines: dict[int, list[_Line]], sizes: dict[int, tuple[float, float]]) -> list[str]:
    """Remove page numbers and running headers/footers (text repeated in the margins of many pages).
    Returns the removed texts (for metadata: venue lines, DOIs)."""

    def key(t: str) -> str:
        return re.sub(r"\d+", "#", t.lower()).strip()

    margin_keys: dict[str, int] = {}
    npages = len(lines)
    for pno, ls in lines.items():
        H = sizes[pno][1]
        seen = set()
        for ln in ls:
            if ln.top < 0.08 * H or ln.top > 0.92 * H:
                seen.add(key(ln.text))
        for k in seen:
            margin_keys[k] = margin_keys.get(k, 0) + 1
    # on long documents, running heads alternate between even and odd pages: a quarter of the pages suffices
    share = 0.5 if npages < 8 else 0.25
    repeated = {k for k, c in margin_keys.items() if npages >= 3 and c >= max(2, share * npages)}
    removed: list[str] = []
    for pno, ls in lines.items():
        H = sizes[pno][1]
        keep = []
        for ln in ls:
            in_margin = ln.top < 0.08 * H or ln.top > 0.92 * H
            if in_margin and (_PAGE_NUM.match(ln.text) or key(ln.text) in repeated):
                removed.append(ln.text)
                continue
            keep.append(ln)
        lines[pno] = keep
    return removed


def _reading_order(ls: list[_Line], width: float) -> list[tuple[int, _Line]]:
    """Order the lines of one page: full-width lines split the page into bands; inside a band with two
    columns, the left column is read before the right. Returns (column id, line) pairs."""
    mid = width / 2
    tol = 0.02 * width

    def col(ln: _Line) -> int:
        if ln.r <= mid + tol:
            return 0
        if ln.l >= mid - tol:
            return 1
        return 2  # spans the middle

    cols = [col(ln) for ln in ls]
    n = len(ls)
    two_col = n > 0 and cols.count(0) >= 0.2 * n and cols.count(1) >= 0.2 * n
    if not two_col:
        return [(0, ln) for ln in sorted(ls, key=lambda x: (round(x.top / 2), x.l))]
    out: list[tuple[int, _Line]] = []
    band: list[tuple[int, _Line]] = []

    def flush_band() -> None:
        for c in (0, 1):
            out.extend((c, ln) for cc, ln in sorted(band, key=lambda p: (round(p[1].top / 2), p[1].l)) if cc == c)
        band.clear()

    for c, ln in sorted(zip(cols, ls), key=lambda p: (p[1].top, p[1].l)):
        if c == 2:
            flush_band()
            out.append((2, ln))
        else:
            band.append((c, ln))
    flush_band()
    return out


def _join_lines(prev: str, nxt: str) -> str:
    """The joining of two lines without the document's vocabulary (``as_printed=False``: every line-end hyphen
    before a lower-case letter dropped, aisac-parse-7's rule)."""
    if prev.endswith("-") and len(prev) > 1 and prev[-2].isalpha() and nxt[:1].islower():
        return prev[:-1] + nxt  # de-hyphenate "connec-" + "tion"
    return prev + " " + nxt


def _caps(t: str) -> bool:
    """Whether ``t`` is set in capitals: 4+ letters, 90 % of the cased ones upper case ("II. RELATED WORK")."""
    cased = [ch for ch in t if ch.isalpha() and ch.lower() != ch.upper()]
    return len(cased) >= 4 and sum(ch.isupper() for ch in cased) >= 0.9 * len(cased)


def _marked_heading(ln: _Line) -> bool:
    """A heading marked by capitals or italics rather than weight or size (IEEE and Word templates set "I.
    INTRODUCTION" in body-size small capitals, "A. Setup" in italics): a numbered line in capitals, a usual
    section name in capitals ("REFERENCES"), or a numbered line in an italic font."""
    t = ln.text.strip()
    if len(t) > 90 or t.endswith((".", ",", ";", ":")):
        return False
    m = NUMBERING.match(t)
    if _caps(t) and (m or _TOP_LEVEL_NAMES.match(t)):
        return True
    return bool(m) and re.search(r"ital|obli|-it$|cmti\d|cmsl\d", ln.font, re.I) is not None


def _ocr_named_heading(ln: _Line, body_h: float) -> bool:
    """An OCR line that is a usual section name alone ("Abstract", "References"; :data:`_TOP_LEVEL_NAMES`) set at
    least 1.1 x the body size: a heading, whatever weight the OCR estimated. The OCR's weight (stroke width,
    :mod:`aisac_core.rag.ocr`) agrees with the born-digital fonts on F1 0.49 only (1,146 OCR lines of the 16 scanned pages
    of bench/ocr.py), so a bold "Abstract" read as regular would otherwise be a paragraph of body text, and
    the abstract no section (the scanned copy of 2206.10883). A born-digital line tells its weight by its font."""
    t = ln.text.strip().rstrip(":").strip()
    m = _TOP_LEVEL_NAMES.match(t)
    return ln.font in (OCR_FONT, OCR_FONT_BOLD) and ln.h >= 1.1 * body_h and m is not None and m.end() == len(t)


def _heading_like_line(ln: _Line, body_h: float) -> bool:
    """A line typeset like a heading: bold (in a font other than the body font; see reconstruct_pdf) or
    clearly larger than body text, or marked by capitals or italics (:func:`_marked_heading`), short, mostly
    letters, not ending like running text (hyphen, comma)."""
    t = ln.text
    return (
        (ln.bold or ln.h >= 1.4 * body_h or _marked_heading(ln) or _ocr_named_heading(ln, body_h))
        and len(t) <= 110
        and letters_ratio(t) >= 0.6
        and not t.endswith(("-", ",", ";"))
        and (t[:1] != "(" or bool(NUMBERING.match(t)))
    )


def _heading_level(
    text: str, has_numbered: bool, h: float, top_h: float, m: re.Match[str] | None, sizes: list[float] | None = None
) -> int | None:
    """Level of a heading paragraph (1 = top-level section): from its numbering ("3" -> 1, "3.1" -> 2,
    appendix "A" -> 1); unnumbered: 1 for front and back matter names (Abstract, References, Appendix, ...)
    at any size; 1 for the other usual top-level names (Introduction, Results, ...) set at least 0.85 x the
    size of the numbered top-level headings (``top_h``); any other in a numbered document 2 (numbering, not
    size, gives the nesting there); in an unnumbered document the rank of its size among the heading ``sizes`` (largest first, sizes
    within 0.5 pt count as one), at most 3."""
    if m:
        num = m.group(1).rstrip(".")
        if re.fullmatch(r"[IVX]+", num):
            return 1
        return min(3, num.count(".") + 1)
    if len(text) <= 60 and (
        _ALWAYS_TOP.match(text) or (_TOP_LEVEL_NAMES.match(text) and (not has_numbered or h >= 0.85 * top_h))
    ):
        return 1
    if has_numbered:  # a child of the numbered section before it, whatever its size (datasheet headings of an
        return 2  # appendix, set larger than the sections, stay in it)
    ranks = sorted({round(x * 2) / 2 for x in (sizes or [top_h])}, reverse=True)
    levels: list[int] = []
    last: float | None = None
    for x in ranks:  # one level per size, sizes within 0.5 pt of the previous one count as that one
        levels.append(levels[-1] if last is not None and last - x <= 0.5 else len(set(levels)) + 1)
        last = x
    return min(3, next((lv for x, lv in zip(ranks, levels) if h >= x - 0.25), levels[-1] if levels else 2))


def reconstruct_pdf(res: Any, name: str, ocr: dict[int, OcrPage] | None = None, *, as_printed: bool = True) -> Any:
    """A DoclingDocument named ``name`` in reading order with page provenance, from ``res`` (the
    ``ConversionResult`` of docling's native PDF pipeline): title, section headings (level from numbering,
    weight and size), paragraphs, captions (label ``caption``), table rows kept as text blocks, reference
    entries. The document's ``_aisac_meta`` attribute (``{margins, vertical}``: the texts removed from page
    margins and the vertical stamps) carries metadata hints (arXiv id, DOI, year) for
    :func:`aisac_core.rag.structure.document_structure`.

    ``ocr``: the OCR of the scanned pages (:func:`aisac_core.rag.ocr.ocr_document`), whose lines replace those
    pages' text layers; ``_aisac_meta["ocr"]`` then holds ``{"pages": [page numbers], "items": {self_ref:
    [mean word confidence, characters]}}`` for every item on an OCRed page (:func:`ocr_item_confidence`).

    ``as_printed`` (default): the text as printed (:mod:`aisac_core.rag.printed`): word spaces from glyph
    positions, spacing accents composed and NFC, line-end hyphens kept or dropped by the document's vocabulary and
    a word list; ``_aisac_meta["hyphens"]`` lists the line-end decisions ``[head-, tail, joined]``. False: the
    text layer's lines as docling-parse reads them (aisac-parse-7; the benchmark's "before")."""
    # long function: one pass over a document's text cells in reading order; its stages share the page state
    from docling_core.types.doc import BoundingBox, CoordOrigin, DocItemLabel, DoclingDocument, ProvenanceItem

    lines, sizes, vertical = _pdf_lines(res, ocr, as_printed)
    removed = _strip_margins(lines, sizes)
    hyph = Hyphenation(ln.text for ls in lines.values() for ln in ls) if as_printed else None
    fonts: dict[str, int] = {}
    for ls in lines.values():
        for ln in ls:
            fonts[ln.font] = fonts.get(ln.font, 0) + len(ln.text)
    body_font = max(fonts, key=lambda f: fonts[f]) if fonts else ""
    body_hs = [ln.h for ls in lines.values() for ln in ls if ln.font == body_font]
    body_h = statistics.median(body_hs) if body_hs else 10.0
    run_in: set[int] = set()
    for ls in lines.values():
        for ln in ls:
            if ln.font == body_font:
                ln.bold = False  # a bold body font (rare) says nothing
            elif re.fullmatch(r"/?[A-Za-z]{0,2}\d+", ln.font):
                # a bare resource key ("/F2": standard-14 fonts, not embedded) tells no weight: a font other than
                # the body's, set larger, counts as emphasis
                ln.bold = ln.h >= 1.1 * body_h
            if (
                ln.bold
                and len(ln.words) >= 3
                and run_in_split(
                    [(t, f != body_font and bool(_BOLD_FONT.search(f)), f == body_font) for t, f in ln.words]
                )
            ):
                ln.bold = False  # a run-in heading ("Reward Design We conduct ..."): the line is body text
                run_in.add(id(ln))

    # paragraphs per page: line gaps, same column, similar size, no change between heading-like and body lines
    paras_by_page: dict[int, list[list[_Line]]] = {}
    caps_cont: set[int] = set()  # capital lines continuing a heading set in capitals
    debris: set[int] = set()
    ordered_by_page = {pno: _reading_order(lines.get(pno, []), sizes[pno][0]) for pno in sorted(sizes)}
    # the body's usual gap between a line's box and the next line's: some producers (Skia, i.e. Chromium's
    # "Save as PDF") give glyph boxes of half the font size, so that a line gap of 0.7 box heights would cut every
    # paragraph into lines; the median gap between consecutive body lines of a column is the line spacing there
    gaps = [
        b.top - (a.top + a.h)
        for od in ordered_by_page.values()
        for (ca, a), (cb, b) in zip(od, od[1:])
        if ca == cb and a.font == body_font == b.font and 0 < b.top - (a.top + a.h) < 3 * body_h
    ]
    lead = statistics.median(gaps) if len(gaps) >= 10 else 0.0
    for pno in sorted(sizes):
        ordered = ordered_by_page[pno]
        # lines sharing their row with another line of the same column are table cells (or ruled layouts)
        in_row: set[int] = set()
        by_col: dict[int, list[_Line]] = {}
        for c, ln in ordered:
            by_col.setdefault(c, []).append(ln)
        for col_lines in by_col.values():
            srt = sorted(col_lines, key=lambda x: x.top)
            for i, a in enumerate(srt):
                for b in srt[i + 1 :]:
                    if b.top - a.top >= 0.5 * min(a.h, b.h):
                        break
                    if a.r <= b.l or b.r <= a.l:
                        in_row.update((id(a), id(b)))
        # figure and table text: runs of short non-body lines (headings.figure_debris)
        colw = {c: max(x.r for x in cl) - min(x.l for x in cl) for c, cl in by_col.items()}
        hl = [_heading_like_line(ln, body_h) for _, ln in ordered]
        body = [
            not hl[k]
            and 0.85 * body_h <= ln.h <= 1.25 * body_h
            and id(ln) not in in_row
            and letters_ratio(ln.text) >= 0.6
            and (ln.r - ln.l >= 0.55 * colw[c] or ln.text.endswith((".", "!", "?", ";", ":", ",", ")")))
            for k, (c, ln) in enumerate(ordered)
        ]
        strong = [
            hl[k]
            and len(ln.text) <= 120
            and (
                bool(NUMBERING.match(repair_heading(ln.text)))
                or bool(_TOP_LEVEL_NAMES.match(ln.text))
                or bool(_ALWAYS_TOP.match(ln.text))
            )
            for k, (_, ln) in enumerate(ordered)
        ]
        flags = figure_debris(
            [ln for _, ln in ordered],
            body,
            strong,
            [id(ln) in in_row for _, ln in ordered],
            [ln.r - ln.l < 0.55 * colw[c] for c, ln in ordered],
            body_h,
        )
        debris.update(id(ln) for (_, ln), f in zip(ordered, flags) if f)
        paras: list[list[_Line]] = []
        last_col = None
        for c, ln in ordered:
            if paras and c == last_col:
                p = paras[-1][-1]
                gap = ln.top - (p.top + p.h)
                same_row = abs(ln.top - p.top) < 0.5 * min(ln.h, p.h)
                # a run-in heading may start on the line above ("Partial annotation has a high correlation to
                # full" + "annotation, but higher variance: In Figure 4 ...")
                kind_same = _heading_like_line(ln, body_h) == _heading_like_line(p, body_h) or id(ln) in run_in
                if not kind_same and _marked_heading(p) and _caps(ln.text) and len(ln.text) <= 60:
                    kind_same = True  # "III. MDRPM (MARKET DRIVEN REQUIREMENT" + "PRIORITIZATION MODEL)"
                    caps_cont.add(id(ln))
                # body lines vary in box height (sub/superscripts); heading lines of one level do not
                similar = abs(ln.h - p.h) <= (0.1 if _heading_like_line(ln, body_h) else 0.2) * max(ln.h, p.h)
                starts_caption = bool(_CAPTION.match(ln.text)) or (
                    _heading_like_line(ln, body_h) and bool(NUMBERING.match(ln.text))
                )
                row_same = (id(ln) in in_row) == (id(p) in in_row)
                # a heading line ending mid-phrase ("difficulty, understanding, and") continues on the next
                max_gap = 1.1 if kind_same and _heading_like_line(p, body_h) and ends_open(p.text) else 0.7
                if (
                    (same_row or (-0.5 * p.h <= gap <= max(max_gap * max(p.h, ln.h), 1.3 * lead)))
                    and similar
                    and kind_same
                    and not starts_caption
                    and row_same
                ):
                    paras[-1].append(ln)
                    continue
            paras.append([ln])
            last_col = c
        paras_by_page[pno] = paras

    def para_text(para: list[_Line]) -> tuple[str, bool]:
        rows: list[list[_Line]] = []
        for ln in para:
            if rows and abs(ln.top - rows[-1][-1].top) < 0.5 * min(ln.h, rows[-1][-1].h):
                rows[-1].append(ln)
            else:
                rows.append([ln])
        is_table = len(rows) >= 2 and sum(len(r) >= 2 for r in rows) >= 2
        if is_table:  # cells of a row on one line, " | " between cells
            return "\n".join(" | ".join(x.text for x in sorted(r, key=lambda x: x.l)) for r in rows), True
        text = para[0].text
        for ln in para[1:]:
            text = hyph.join(text, ln.text) if hyph is not None else _join_lines(text, ln.text)
        text = re.sub(r"\s+", " ", text).strip()
        return (compose_diacritics(text) if hyph is not None else text), False  # accents on the line above

    # title and authors from the first page's layout and the document info (aisac_core.rag.frontmatter)
    path = getattr(getattr(res, "input", None), "file", None)
    first_pno = min(sizes) if sizes else 1
    ordered_first = [ln for _, ln in ordered_by_page.get(first_pno, [])]
    front = document_front_matter(lines, sizes, body_h, body_font, path, ordered_first)
    # the PDF's own outline (bookmarks), when present and plausible, names the headings (aisac_core.rag.outline)
    entries = pdf_outline(path, front.title) if path else []
    if front.title:
        entries = [e for e in entries if _okey(e.title) != _okey(front.title)]
    outline_of: dict[int, OutlineEntry] = {}
    if plausible_outline(entries, len(sizes)):
        flat = [(pno, para) for pno in sorted(paras_by_page) for para in paras_by_page[pno]]
        found = match_outline(entries, flat, lambda x: x.text)
        if len(found) >= max(2, 0.5 * len(entries)):
            for i, (entry, oa, on) in found.items():
                opno, opara = flat[i]
                if (oa, on) != (0, len(opara)):  # lines glued above or under the heading: paragraphs of their own
                    k = next(j for j, x in enumerate(paras_by_page[opno]) if x is opara)
                    parts = [opara[:oa], opara[oa : oa + on], opara[oa + on :]]
                    paras_by_page[opno][k : k + 1] = [x for x in parts if x]
                    opara = parts[1]
                outline_of[id(opara)] = entry
    outline_top = min((e.level for e in outline_of.values()), default=1)
    outline_depth = max((e.level - outline_top + 1 for e in outline_of.values()), default=0)
    tocs = toc_pages(lines, lambda x: x.text)

    # first pass: which paragraphs are headings, and is the document numbered?
    cands: list[tuple[int, list[_Line], str, bool, bool, float]] = []
    for pno in sorted(paras_by_page):
        for para in paras_by_page[pno]:
            text, is_table = para_text(para)
            if not text:
                continue
            if id(para) in outline_of:
                cands.append((pno, para, text, False, True, statistics.mean(x.h for x in para)))
                continue
            h = statistics.mean(x.h for x in para)
            rt = repair_heading(text)
            headingish = (
                not is_table
                and len(para) <= 3
                and len(text) <= 150
                and all(_heading_like_line(x, body_h) or id(x) in caps_cont for x in para)
                and not text.endswith((".", ":", ",", ";"))
                and not _CAPTION.match(text)
                and re.search(r"[^\W\d_]{3}", text) is not None
                and not text[:1].islower()
                and not (":" in text[:30] and not NUMBERING.match(rt))
                and id(para[0]) not in debris
                and heading_problem(rt) is None
                and not is_affiliation(text)  # "1 Department of Physics, ..." (a marker, not a number)
            )
            if headingish and not (
                NUMBERING.match(rt)
                or _TOP_LEVEL_NAMES.match(text)
                or h >= 1.4 * body_h
                or (len(para) == 1 and len(text) <= 60 and letters_ratio(text) >= 0.65)
            ):
                headingish = False
            if pno in tocs and not TOC_HEADING.match(text):
                headingish = False  # a contents line names a heading; it is none
            elif outline_of and headingish:
                # the outline is the outline: the layout adds front / back matter names and deeper headings
                m = NUMBERING.match(rt)
                deeper = m is not None and m.group(1).rstrip(".").count(".") + 1 > outline_depth
                headingish = deeper or bool(_ALWAYS_TOP.match(text) or _TOP_LEVEL_NAMES.match(text))
            cands.append((pno, para, text, is_table, headingish, h))
    # "A Glimpse into the Future" is no appendix A unless an appendix B (or A.1, or "A Appendix") exists too
    letters = any(
        hd and re.match(r"^(B(\.\d+)*\.?\s+[A-Z]|A\.\d|A\.?\s+(Appendi|Supplement))", t) for _, _, t, _, hd, _ in cands
    )

    def numbering(t: str) -> re.Match[str] | None:
        m = NUMBERING.match(repair_heading(t))
        return None if m and m.group(1).rstrip(".") == "A" and not letters else m

    # IEEE numbering: roman sections ("II. METHOD") hold lettered subsections ("A. Setup")
    roman = sum(1 for _, _, t, _, hd, _ in cands if hd and re.match(r"^[IVX]{1,5}\.\s", t)) >= 2
    numbered_h = [h for _, _, t, _, hd, h in cands if hd and (m := numbering(t)) and "." not in m.group(1).rstrip(".")]
    has_numbered = len(numbered_h) >= 1
    top_h = statistics.median(numbered_h) if numbered_h else max((h for *_, hd, h in cands if hd), default=body_h)
    head_sizes = [h for *_, hd, h in cands if hd]

    doc = DoclingDocument(name=name)
    first = min(sizes) if sizes else 1
    title_ids = {id(x) for x in front.title_lines}
    title_done = front.title is None
    if front.title and not title_ids:  # the document info title, printed on page 1 but not found in the layout
        doc.add_title(text=front.title)
        title_done = True
    in_refs = False
    in_abstract = False  # the last top-level heading is "Abstract"
    promoted_h: float | None = None  # size of a heading lifted out of the abstract
    seen_top = False
    seen_headings: set[str] = set()
    # figure text and captions right after a heading wait until the section's first body paragraph is out,
    # so that a section's text starts with its prose ("7 Results" is not followed by axis labels)
    pending: list[tuple[Any, str, Any]] = []
    after_heading = False

    def flush() -> None:
        for lab, t, pv in pending:
            doc.add_text(label=lab, text=t, prov=pv)
        pending.clear()

    for pno, para, text, _is_table, headingish, h in cands:
        bbox = BoundingBox(
            l=min(x.l for x in para),
            t=min(x.top for x in para),
            r=max(x.r for x in para),
            b=max(x.top + x.h for x in para),
            coord_origin=CoordOrigin.TOPLEFT,
        )
        prov = ProvenanceItem(page_no=pno, bbox=bbox, charspan=(0, len(text)))
        if title_ids and pno == first and any(id(x) in title_ids for x in para):
            if not title_done:
                tl = front.title_lines
                tb = BoundingBox(
                    l=min(x.l for x in tl),
                    t=min(x.top for x in tl),
                    r=max(x.r for x in tl),
                    b=max(x.top + x.h for x in tl),
                    coord_origin=CoordOrigin.TOPLEFT,
                )
                doc.add_title(
                    text=front.title or text,
                    prov=ProvenanceItem(page_no=pno, bbox=tb, charspan=(0, len(front.title or text))),
                )
                title_done = True
            rest = [x for x in para if id(x) not in title_ids]  # author lines joined to the title paragraph
            if rest and (rest_text := para_text(rest)[0]):
                doc.add_text(label=DocItemLabel.TEXT, text=rest_text, prov=prov)
            continue
        if (oe := outline_of.get(id(para))) is not None:
            heading = respace(repair_heading(text), oe.title)
            o_level = min(6, oe.level - outline_top + 1)
            seen_top = seen_top or o_level == 1
            seen_headings.add(text)
            flush()
            after_heading = True
            doc.add_heading(text=heading, level=o_level, prov=prov)
            if o_level == 1:
                in_refs = section_label(heading) == "references"
                in_abstract = section_label(heading) == "abstract"
            continue
        if headingish:
            num = numbering(text)
            level = _heading_level(text, has_numbered, h, top_h, num, head_sizes)
            if roman and num and re.fullmatch(r"[A-H]\.?", num.group(1)) and not in_refs:
                level = 2
            if outline_of and num is None and level is not None:
                level = 1  # a front or back matter name beside the outline's sections
            elif outline_of and level is not None:
                level = max(level, outline_depth + 1)
            if level is not None and level > 1 and not seen_top and not num:
                level = None  # front matter (authors, affiliations in bold) before the first section heading
            if (
                level is not None
                and not num
                and not _TOP_LEVEL_NAMES.match(text)
                and (text in seen_headings or not re.search(r"[^\W\d_]{5}|[^\W\d_A-Za-z]{2}", text))
            ):
                level = None  # "Gold L" twice in a table is not a heading (and equal headings would merge chunks)
            if level is not None and level > 1 and in_abstract:
                level = 1  # the abstract has no subsections: the body's first heading ends it
                promoted_h = h
            elif level is not None and level > 1 and not num and promoted_h is not None and abs(h - promoted_h) <= 0.5:
                level = 1  # the body's other headings of that size are its siblings ("Background", "Methods")
            if level is not None:
                seen_top = seen_top or level == 1
                seen_headings.add(text)
                flush()
                after_heading = True
                doc.add_heading(text=repair_heading(text), level=level, prov=prov)
                if level == 1:
                    in_refs = section_label(text) == "references"
                    in_abstract = section_label(text) == "abstract"
                continue
        label = (
            DocItemLabel.CAPTION if _CAPTION.match(text) else DocItemLabel.REFERENCE if in_refs else DocItemLabel.TEXT
        )
        figure_text = label == DocItemLabel.CAPTION or (pno not in tocs and all(id(x) in debris for x in para))
        if after_heading and figure_text and not in_refs:
            pending.append((label, text, prov))
            continue
        doc.add_text(label=label, text=text, prov=prov)
        if not figure_text:
            after_heading = False
            flush()
    flush()
    setattr(  # noqa: B010 - docling's document has no field for aisac's hints; an attribute carries them
        doc,
        "_aisac_meta",
        {
            "margins": removed,
            "vertical": vertical,
            "front": {
                "title": front.title,
                "authors": front.authors,
                "confidence": front.confidence,
                "title_source": front.title_source,
                "authors_source": front.authors_source,
                "authors_confidence": front.authors_confidence,
                "title_reader": front.title_reader,
                "authors_reader": front.authors_reader,
                "title_uncertain": front.title_uncertain,
                "authors_uncertain": front.authors_uncertain,
                "affiliations": front.affiliations,
            },
            "outline": {
                "source": "outline" if outline_of else "layout",
                "entries": len(entries),
                "matched": len(outline_of),
            },
            "ocr": {"pages": sorted(ocr), "items": ocr_item_confidence(doc, ocr)} if ocr else None,
            "hyphens": [list(d) for d in hyph.decisions] if hyph is not None else [],
        },
    )
    return doc


def ocr_item_confidence(doc: Any, ocr: dict[int, OcrPage]) -> dict[str, list[float]]:
    """``{item self_ref: [confidence, characters]}`` for the items of ``doc`` on OCRed pages: the mean confidence
    of the OCR words whose box centre lies in the item's box (weighted by word length; the page's mean when no
    word centre falls inside), and the number of characters of those words."""
    out: dict[str, list[float]] = {}
    for item, _lvl in doc.iterate_items():
        for pv in getattr(item, "prov", None) or ():
            page = ocr.get(pv.page_no)
            if page is None:
                continue
            bb = pv.bbox
            tot = chars = 0.0
            for ln in page.lines:
                for w in ln.words:
                    cx, cy = (w.l + w.r) / 2, (w.t + w.b) / 2
                    if bb.l - 1 <= cx <= bb.r + 1 and bb.t - 1 <= cy <= bb.b + 1:
                        tot += w.conf * len(w.text)
                        chars += len(w.text)
            prev = out.get(item.self_ref)
            if chars:
                if prev is not None and prev[1]:
                    tot += prev[0] * prev[1]
                    chars += prev[1]
                out[item.self_ref] = [round(tot / chars, 4), chars]
            elif prev is None:
                out[item.self_ref] = [round(page.conf if page.conf is not None else 0.0, 4), 0]
    return out
