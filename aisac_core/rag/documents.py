"""Parsing documents with docling into reading-ordered text, then into chunks with page anchors.

Formats: PDF (docling's model-free ``NativePdfPipeline``; aisac reconstructs reading order and
paragraphs from its text lines), DOCX, PPTX, XLSX, HTML, Markdown, JATS XML, LaTeX and plain text
(docling's default backends, which give headings, tables and lists).

Chunking: docling-core's ``HybridChunker`` (structure-aware, then token-bounded and peer-merged) with a
tokenizer built on the dense model's own ``tokenizer.json``, so a chunk never exceeds what the model
reads (256 tokens for MiniLM).

Output of :func:`parse_document`: a :class:`ParsedDocument` with the plain ``text`` (items in reading
order joined by blank lines; every anchor's char span indexes into it), the Markdown rendering, the
page count, the :class:`Chunk` list (text, text to embed with its heading context, pages, char span,
section path and ``section_covers`` label) and the ``structure`` (sections with levels, labels, page ranges
and chunk counts; figure/table captions; blocks in reading order; metadata: title, authors, year, DOI,
arXiv id), which the rag server's ``get_overview`` / ``read_sections`` read. PDF reconstruction rules and
their measured quality: docs/rag.md, "PDF structure".
"""

from __future__ import annotations

import re
import statistics
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from aisac_core.errors import AisacError

#: suffix -> file type, for files that are parsed and embedded.
DOCUMENT_TYPES = {
    ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx", ".html": "html", ".htm": "html",
    ".xhtml": "html", ".md": "md", ".markdown": "md", ".nxml": "jats", ".xml": "jats", ".tex": "latex",
    ".txt": "txt",
}
#: suffix -> file type, for files that are only catalogued (listed with metadata), never embedded.
CATALOG_TYPES = {
    ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".json": "json", ".jsonl": "jsonl",
    ".xlsx": "xlsx", ".xls": "xls", ".h5": "hdf5", ".hdf5": "hdf5", ".nc": "netcdf", ".npy": "npy",
    ".npz": "npz", ".feather": "feather",
}

#: Bumped whenever parsing or chunking output changes; enters the index fingerprint.
PARSER_REVISION = "aisac-parse-3"

#: Fixed section taxonomy (DESIGN.md "Documents"); headings map to it by keyword.
SECTION_LABELS = ("abstract", "introduction", "methods", "results", "discussion", "conclusion", "datasets",
                  "references", "other")
_SECTION_SYNONYMS: list[tuple[str, re.Pattern[str]]] = [
    # only at the start: "Summary of the campaign" is an abstract, "B.2 Partial summary annotation" is not
    ("abstract", re.compile(r"^(abstract|summary|executive summary|plain language summary)\b")),
    ("introduction", re.compile(r"\b(introduction|background|motivation)\b")),
    ("methods", re.compile(r"\b(methods?|methodology|materials|experimental( setup| design)?|approach|"
                           r"procedure|implementation|model)\b")),
    ("datasets", re.compile(r"\b(data ?sets?|data|corpus|corpora|benchmarks?)\b")),
    ("results", re.compile(r"\b(results?|findings|experiments?|evaluation|analysis)\b")),
    ("discussion", re.compile(r"\b(discussion|limitations?)\b")),
    ("conclusion", re.compile(r"\b(conclusions?|concluding|future work|outlook)\b")),
    ("references", re.compile(r"\b(references|bibliography|works cited|literature cited)\b")),
]


def section_label(heading: str | None) -> str:
    """The taxonomy label of a heading ("3.1 Materials and Methods" -> "methods"); "other" if none."""
    if not heading:
        return "other"
    # strip numbering ("3.1 ", "2. ", "IV. "), never the first letters of a word ("Introduction")
    h = re.sub(r"^(\d+(\.\d+)*\.?|[IVXivx]+\.)\s*|^[IVXivx]+\s+", "", heading.strip()).lower()
    for label, pat in _SECTION_SYNONYMS:
        if pat.search(h):
            return label
    return "other"


class DocumentError(AisacError, ValueError):
    """A file cannot be parsed; the message says why in terms the user can act on."""


@dataclass
class Chunk:
    """One retrievable unit of a document."""

    index: int
    text: str
    embed_text: str
    page: int | None
    page_end: int | None
    char_start: int
    char_end: int
    section: str
    section_covers: str


@dataclass
class ParsedDocument:
    """A parsed document: plain text, Markdown, title, page count and chunks."""

    file_type: str
    text: str
    markdown: str
    title: str | None
    pages: int | None
    chunks: list[Chunk] = field(default_factory=list)
    #: sections, captions, blocks and metadata (see :func:`_structure`); stored with the parsed text
    structure: dict[str, Any] = field(default_factory=dict)


def file_type_of(path: Path) -> str | None:
    """The document type of ``path`` by suffix, or None when it is not a parseable document."""
    return DOCUMENT_TYPES.get(path.suffix.lower())


# --------------------------------------------------------------------------------------------------
# converters (built once per process; docling converters are expensive to construct)
# --------------------------------------------------------------------------------------------------

_conv_lock = threading.Lock()
_converters: dict[str, Any] = {}


def _converter(kind: str, pdf_pipeline: str = "native") -> Any:
    key = f"{kind}:{pdf_pipeline}"
    with _conv_lock:
        if key in _converters:
            return _converters[key]
        from docling.datamodel.base_models import InputFormat
        from docling.document_converter import DocumentConverter

        if kind == "pdf":
            if pdf_pipeline == "standard":
                conv = DocumentConverter(allowed_formats=[InputFormat.PDF])
            else:
                from docling.datamodel.pipeline_options import NativePdfPipelineOptions
                from docling.document_converter import NativePdfFormatOption

                opts = NativePdfPipelineOptions()
                opts.generate_page_images = False
                opts.generate_picture_images = False  # PNG-encoding embedded bitmaps cost ~1/3 of a parse
                conv = DocumentConverter(format_options={InputFormat.PDF: NativePdfFormatOption(pipeline_options=opts)})
        else:
            conv = DocumentConverter()
        _converters[key] = conv
        return conv


def _check_pdf(path: Path) -> None:
    with open(path, "rb") as f:
        head = f.read(1024)
    if b"%PDF-" not in head:
        raise DocumentError(f"{path.name} is not a PDF (no %PDF header): it may be another file type renamed")
    import pypdfium2 as pdfium

    try:
        doc = pdfium.PdfDocument(str(path))
        n = len(doc)
        doc.close()
    except pdfium.PdfiumError as exc:
        msg = str(exc)
        if "password" in msg.lower():
            raise DocumentError(f"{path.name} is encrypted (password protected): decrypt it, then index it again")
        raise DocumentError(f"{path.name} is damaged or truncated and cannot be read as a PDF ({msg})")
    if n == 0:
        raise DocumentError(f"{path.name} has no pages")


def _convert(path: Path, ftype: str, pdf_pipeline: str) -> Any:
    if ftype == "pdf":
        _check_pdf(path)
    conv = _converter("pdf" if ftype == "pdf" else "other", pdf_pipeline)
    source: Any = path
    if ftype == "txt":
        from io import BytesIO

        from docling.datamodel.base_models import DocumentStream

        source = DocumentStream(name=path.stem + ".md", stream=BytesIO(path.read_bytes()))
    try:
        res = conv.convert(source, raises_on_error=False)
    except Exception as exc:  # docling raises for unsupported or malformed input
        raise DocumentError(f"{path.name} could not be parsed: {type(exc).__name__}: {exc}") from exc
    status = getattr(res.status, "name", str(res.status))
    if status not in ("SUCCESS", "PARTIAL_SUCCESS"):
        errs = "; ".join(e.error_message for e in (res.errors or []))[:300]
        raise DocumentError(f"{path.name} could not be parsed ({status.lower()}): {errs or 'no detail'}")
    return res


# --------------------------------------------------------------------------------------------------
# PDF reconstruction from text lines (model-free pipeline)
# --------------------------------------------------------------------------------------------------

_PAGE_NUM = re.compile(r"^\s*(page\s*)?[\divxlc]{1,5}(\s*(/|of)\s*\d+)?\s*$", re.I)
#: section numbering: "3", "3.1", "3.1.2", "IV.", appendix "A", "A.1" (then a capitalised word)
_NUMBERING = re.compile(r"^((?:[1-9]\d?)(?:\.\d{1,2}){0,3}\.?|[IVX]{1,5}\.|[A-H](?:\.\d{1,2}){0,2}\.?)\s+(?=[A-Z(])")
#: bold / heavy weight in a PDF font name ("NimbusRomNo9L-Medi", "LinLibertineTB", "CMBX10", "Arial-BoldMT")
_BOLD_FONT = re.compile(r"bold|medi|black|heavy|semibold|demi|cmbx|cmb\d|-bd|tb$|-b$|,b$|\.b$", re.I)
#: unnumbered headings that are top-level sections wherever they occur
_TOP_LEVEL_NAMES = re.compile(
    r"^(abstract|introduction|background|related work|methods?|methodology|materials and methods|experiments?|"
    r"experimental( section| setup)?|results?( and discussion)?|discussion|conclusions?|concluding remarks|"
    r"limitations|acknowledge?ments?|references|bibliography|works cited|literature cited|appendix|appendices|"
    r"supplementary (material|materials|information)|ethic(s|s statement|al considerations)|broader impacts?|"
    r"author contributions|data availability|code availability|funding|declarations?|competing interests|"
    r"conflicts? of interests?|keywords|ccs concepts|summary)\b", re.I)
#: a figure / table caption: "Figure 3:", "Fig. 2.", "Table 1:", "TABLE II"
_CAPTION = re.compile(r"^(fig(ure|\.)?|table|tab\.)\s*([0-9]+|[IVX]+)[a-z]?\s*[.:|]", re.I)
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>,;]+[^\s\"<>,;.)\]])")
_ARXIV = re.compile(r"arXiv:\s*(\d{4}\.\d{4,5})(v\d+)?", re.I)
_YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")


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


def _pdf_lines(res: Any) -> tuple[dict[int, list[_Line]], dict[int, tuple[float, float]], list[str]]:
    """Text lines per page (1-based) with font name and weight, page sizes, and the lines dropped because
    they run vertically (e.g. the arXiv stamp in the left margin; kept aside for metadata)."""
    sizes: dict[int, tuple[float, float]] = {}
    lines: dict[int, list[_Line]] = {}
    vertical: list[str] = []
    for page in res.pages:
        pno = page.page_no if page.page_no >= 1 else page.page_no + 1
        W, H = (page.size.width, page.size.height) if page.size else (612.0, 792.0)
        sizes[pno] = (W, H)
        pp = page.parsed_page
        out = lines.setdefault(pno, [])
        if pp is None:
            continue
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
            out.append(_Line(pno, text, bb.l, bb.r, bb.t, max(1.0, h), font, bool(_BOLD_FONT.search(font))))
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
    if prev.endswith("-") and len(prev) > 1 and prev[-2].isalpha() and nxt[:1].islower():
        return prev[:-1] + nxt  # de-hyphenate "connec-" + "tion"
    return prev + " " + nxt


def _letters_ratio(t: str) -> float:
    return sum(ch.isalpha() for ch in t) / max(1, len(t.replace(" ", "")))


def _heading_like_line(ln: _Line, body_h: float) -> bool:
    """A line typeset like a heading: bold (in a font other than the body font; see _reconstruct_pdf) or
    clearly larger than body text, short, mostly letters, not ending like running text (hyphen, comma)."""
    t = ln.text
    return (ln.bold or ln.h >= 1.4 * body_h) and len(t) <= 110 and _letters_ratio(t) >= 0.6 and \
        not t.endswith(("-", ",", ";")) and (t[:1] != "(" or bool(_NUMBERING.match(t)))


def _heading_level(text: str, has_numbered: bool, h: float, top_h: float, m: "re.Match[str] | None") -> int | None:
    """Level of a heading paragraph (1 = top-level section): from its numbering ("3" -> 1, "3.1" -> 2,
    appendix "A" -> 1); unnumbered: 1 for the usual top-level names (Abstract, References, ...) set at least
    0.85 x the size of the numbered top-level headings, else 1 in an unnumbered document when set as large as
    its largest headings, else 2."""
    if m:
        num = m.group(1).rstrip(".")
        if re.fullmatch(r"[IVX]+", num):
            return 1
        return min(3, num.count(".") + 1)
    if _TOP_LEVEL_NAMES.match(text) and len(text) <= 60 and (not has_numbered or h >= 0.85 * top_h):
        return 1
    if not has_numbered and h >= top_h - 0.5:
        return 1
    return 2


def _reconstruct_pdf(res: Any, name: str) -> Any:
    """A DoclingDocument in reading order with page provenance: title, section headings (level from
    numbering, weight and size), paragraphs, captions (label ``caption``), table rows kept as text blocks,
    reference entries. The document's ``_aisac_meta`` attribute carries metadata hints found on the page
    margins and vertical stamps (arXiv id, DOI, year)."""
    from docling_core.types.doc import BoundingBox, CoordOrigin, DocItemLabel, DoclingDocument, ProvenanceItem

    lines, sizes, vertical = _pdf_lines(res)
    removed = _strip_margins(lines, sizes)
    fonts: dict[str, int] = {}
    for ls in lines.values():
        for ln in ls:
            fonts[ln.font] = fonts.get(ln.font, 0) + len(ln.text)
    body_font = max(fonts, key=lambda f: fonts[f]) if fonts else ""
    body_hs = [ln.h for ls in lines.values() for ln in ls if ln.font == body_font]
    body_h = statistics.median(body_hs) if body_hs else 10.0
    for ls in lines.values():
        for ln in ls:
            if ln.font == body_font:
                ln.bold = False  # a bold body font (rare) says nothing
            elif re.fullmatch(r"/?[A-Za-z]{0,2}\d+", ln.font):
                # a bare resource key ("/F2": standard-14 fonts, not embedded) tells no weight: a font other than
                # the body's, set larger, counts as emphasis
                ln.bold = ln.h >= 1.1 * body_h

    # paragraphs per page: line gaps, same column, similar size, no change between heading-like and body lines
    paras_by_page: dict[int, list[list[_Line]]] = {}
    for pno in sorted(sizes):
        ordered = _reading_order(lines.get(pno, []), sizes[pno][0])
        # lines sharing their row with another line of the same column are table cells (or ruled layouts)
        in_row: set[int] = set()
        by_col: dict[int, list[_Line]] = {}
        for c, ln in ordered:
            by_col.setdefault(c, []).append(ln)
        for col_lines in by_col.values():
            srt = sorted(col_lines, key=lambda x: x.top)
            for i, a in enumerate(srt):
                for b in srt[i + 1:]:
                    if b.top - a.top >= 0.5 * min(a.h, b.h):
                        break
                    if a.r <= b.l or b.r <= a.l:
                        in_row.update((id(a), id(b)))
        paras: list[list[_Line]] = []
        last_col = None
        for c, ln in ordered:
            if paras and c == last_col:
                p = paras[-1][-1]
                gap = ln.top - (p.top + p.h)
                same_row = abs(ln.top - p.top) < 0.5 * min(ln.h, p.h)
                kind_same = _heading_like_line(ln, body_h) == _heading_like_line(p, body_h)
                # body lines vary in box height (sub/superscripts); heading lines of one level do not
                similar = abs(ln.h - p.h) <= (0.1 if _heading_like_line(ln, body_h) else 0.2) * max(ln.h, p.h)
                starts_caption = bool(_CAPTION.match(ln.text)) or (
                    _heading_like_line(ln, body_h) and bool(_NUMBERING.match(ln.text)))
                row_same = (id(ln) in in_row) == (id(p) in in_row)
                if (same_row or (-0.5 * p.h <= gap <= 0.7 * max(p.h, ln.h))) and similar and kind_same and \
                        not starts_caption and row_same:
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
            text = _join_lines(text, ln.text)
        return re.sub(r"\s+", " ", text).strip(), False

    # first pass: which paragraphs are headings, and is the document numbered?
    cands: list[tuple[int, list[_Line], str, bool, bool, float]] = []
    for pno in sorted(paras_by_page):
        for para in paras_by_page[pno]:
            text, is_table = para_text(para)
            if not text:
                continue
            h = statistics.mean(x.h for x in para)
            headingish = not is_table and len(para) <= 3 and len(text) <= 150 and \
                all(_heading_like_line(x, body_h) for x in para) and not text.endswith((".", ":", ",", ";")) and \
                not _CAPTION.match(text) and re.search(r"[^\W\d_]{3}", text) is not None and \
                not text[:1].islower() and \
                not (":" in text[:30] and not _NUMBERING.match(text))
            if headingish and not (_NUMBERING.match(text) or _TOP_LEVEL_NAMES.match(text) or h >= 1.4 * body_h or
                                   (len(para) == 1 and len(text) <= 60 and _letters_ratio(text) >= 0.65)):
                headingish = False
            cands.append((pno, para, text, is_table, headingish, h))
    # "A Glimpse into the Future" is no appendix A unless an appendix B (or A.1, or "A Appendix") exists too
    letters = any(hd and re.match(r"^(B(\.\d+)*\.?\s+[A-Z]|A\.\d|A\.?\s+(Appendi|Supplement))", t)
                  for _, _, t, _, hd, _ in cands)

    def numbering(t: str) -> "re.Match[str] | None":
        m = _NUMBERING.match(t)
        return None if m and m.group(1).rstrip(".") == "A" and not letters else m

    numbered_h = [h for _, _, t, _, hd, h in cands if hd and (m := numbering(t)) and "." not in
                  m.group(1).rstrip(".")]
    has_numbered = len(numbered_h) >= 1
    top_h = statistics.median(numbered_h) if numbered_h else max((h for *_, hd, h in cands if hd), default=body_h)

    doc = DoclingDocument(name=name)
    first = min(sizes) if sizes else 1
    first_h = max((ln.h for ln in lines.get(first, []) if ln.top < 0.45 * sizes[first][1]), default=0)
    title_done = False
    in_refs = False
    seen_top = False
    seen_headings: set[str] = set()
    for n, (pno, para, text, is_table, headingish, h) in enumerate(cands):
        bbox = BoundingBox(l=min(x.l for x in para), t=min(x.top for x in para),
                           r=max(x.r for x in para), b=max(x.top + x.h for x in para),
                           coord_origin=CoordOrigin.TOPLEFT)
        prov = ProvenanceItem(page_no=pno, bbox=bbox, charspan=(0, len(text)))
        if not title_done and pno == first and n <= 3 and len(text) <= 300 and \
                (h >= 1.3 * body_h or (h >= 1.15 * body_h and all(x.bold for x in para))) and \
                h >= first_h - 0.5 and para[0].top < 0.45 * sizes[pno][1] and not numbering(text):
            doc.add_title(text=text, prov=prov)  # the largest type in the top part of the first page
            title_done = True
            continue
        if headingish:
            num = numbering(text)
            level = _heading_level(text, has_numbered, h, top_h, num)
            if level is not None and level > 1 and not seen_top and not num:
                level = None  # front matter (authors, affiliations in bold) before the first section heading
            if level is not None and not num and not _TOP_LEVEL_NAMES.match(text) and (
                    text in seen_headings or not re.search(r"[^\W\d_]{5}|[^\W\d_A-Za-z]{2}", text)):
                level = None  # "Gold L" twice in a table is not a heading (and equal headings would merge chunks)
            if level is not None:
                seen_top = seen_top or level == 1
                seen_headings.add(text)
                doc.add_heading(text=text, level=level, prov=prov)
                if level == 1:
                    in_refs = section_label(text) == "references"
                continue
        if _CAPTION.match(text):
            doc.add_text(label=DocItemLabel.CAPTION, text=text, prov=prov)
        elif in_refs:
            doc.add_text(label=DocItemLabel.REFERENCE, text=text, prov=prov)
        else:
            doc.add_text(label=DocItemLabel.TEXT, text=text, prov=prov)
    doc._aisac_meta = {"margins": removed, "vertical": vertical}  # type: ignore[attr-defined]
    return doc


# --------------------------------------------------------------------------------------------------
# metadata and structure
# --------------------------------------------------------------------------------------------------


def _metadata(doc: Any, text: str, title: str | None) -> dict[str, Any]:
    """Title, authors, year, DOI and arXiv id from the first part of a document (PDF: its first pages,
    margins and the vertical arXiv stamp included). Fields not found are None / []."""
    extra = getattr(doc, "_aisac_meta", {}) or {}
    head = text[:6000]
    hay = "\n".join(list(extra.get("vertical", [])) + list(extra.get("margins", []))[:20] + [head])
    title_item = next(((getattr(it, "text", "") or "").strip() for it, _ in doc.iterate_items()
                       if str(getattr(it, "label", "")).endswith("title")), None)
    meta: dict[str, Any] = {"title": title_item or title, "authors": [], "year": None, "doi": None, "arxiv_id": None}
    if m := _ARXIV.search(hay):
        meta["arxiv_id"] = m.group(1) + (m.group(2) or "")
    if m := _DOI.search(hay):
        meta["doi"] = m.group(1)
    first_page = min((it.prov[0].page_no for it, _ in doc.iterate_items() if getattr(it, "prov", None)), default=None)
    page1 = "\n".join((getattr(it, "text", "") or "") for it, _ in doc.iterate_items()
                      if getattr(it, "prov", None) and it.prov[0].page_no == first_page) if first_page else head[:3000]
    from datetime import date

    years = [int(y) for y in _YEAR.findall("\n".join(list(extra.get("vertical", [])) + [page1]))
             if int(y) <= date.today().year]
    if meta["arxiv_id"]:
        meta["year"] = 2000 + int(meta["arxiv_id"][:2])  # arXiv ids start with YYMM
    elif years:
        meta["year"] = max(years)  # a first page cites earlier years, and states its own (venue, copyright)
    # authors: the block right after the title (PDF), names split on commas / "and" / wide gaps
    items = [(it, str(getattr(it, "label", ""))) for it, _ in doc.iterate_items()]
    for i, (it, lab) in enumerate(items):
        if lab.endswith("title"):
            for nxt, nlab in items[i + 1:i + 3]:
                t = (getattr(nxt, "text", "") or "").strip()
                if not nlab.endswith("text") or len(t) > 300 or "@" in t or _letters_ratio(t) < 0.6:
                    continue
                t = re.sub(r"[\d†‡∗*♠♢♦♣♡§¶,]+(?=\s|$)", ",", t)
                names = []
                for n in (n.strip(" ,;") for n in re.split(r",|\band\b|\s{2,}|;", t)):
                    toks = n.split()
                    if len(toks) == 4 and not any(x.endswith(".") for x in toks):  # "Nathan Dahlberg Margo Schlanger"
                        names += [" ".join(toks[:2]), " ".join(toks[2:])]
                    else:
                        names.append(n)
                names = [n for n in names if re.fullmatch(r"[A-Z][\w.'-]*(\s+[A-Z][\w.'-]*){1,3}", n)]
                if len(names) >= 1:
                    meta["authors"] = names[:50]
                    break
            break
    return meta


def _structure(doc: Any, text: str, offsets: dict[str, tuple[int, int]], chunks: list["Chunk"],
               title: str | None) -> dict[str, Any]:
    """The document's structure for overview and section reading (stored with the parsed text).

    ``sections``: every heading in reading order ``{title, number, level, label, page_start, page_end,
    char_start, char_end, chunk_count}`` (a section runs to the next heading of the same or a higher level;
    its char range and chunk count include its subsections); ``captions``: ``{kind, text, page}``;
    ``blocks``: ``[kind, page, char_start, char_end, section index or -1]`` per item in reading order
    (kind: heading, text, caption, table, reference, list); ``metadata``: see :func:`_metadata`."""
    blocks: list[list[Any]] = []
    sections: list[dict[str, Any]] = []
    captions: list[dict[str, Any]] = []
    stack: list[int] = []
    for item, _lvl in doc.iterate_items():
        ref = getattr(item, "self_ref", None)
        if ref not in offsets:
            continue
        s, e = offsets[ref]
        lab = str(getattr(item, "label", "")).split(".")[-1]
        page = item.prov[0].page_no if getattr(item, "prov", None) else None
        if lab == "section_header":
            level = int(getattr(item, "level", 1) or 1)
            t = (item.text or "").strip()
            m = _NUMBERING.match(t)
            while stack and sections[stack[-1]]["level"] >= level:
                stack.pop()
            # the innermost label wins ("3 Results > 3.1 Experimental setup" is methods); an unlabelled
            # subsection takes its parent's
            parent_label = next((sections[i]["label"] for i in reversed(stack) if sections[i]["label"] != "other"),
                                None)
            own = section_label(t)
            if stack and own in ("abstract", "references"):
                own = "other"  # an "Abstract" inside a section is a figure's text or an example, not the paper's
            sections.append({"title": t, "number": m.group(1).rstrip(".") if m else None, "level": level,
                             "label": own if own != "other" else (parent_label or "other"),
                             "page_start": page, "page_end": page,
                             "char_start": s, "char_end": len(text), "chunk_count": 0})
            stack.append(len(sections) - 1)
            kind = "heading"
        else:
            kind = {"title": "title", "caption": "caption", "table": "table", "reference": "reference",
                    "list_item": "list"}.get(lab, "text")
            if kind == "text" and "\n" in text[s:e] and " | " in text[s:e]:
                kind = "table"
            if kind == "caption":
                t = text[s:e]
                captions.append({"kind": "table" if t.lower().startswith("tab") else "figure", "text": t[:500],
                                 "page": page})
        for i in stack:
            if page is not None:
                sec = sections[i]
                sec["page_start"] = page if sec["page_start"] is None else min(sec["page_start"], page)
                sec["page_end"] = page if sec["page_end"] is None else max(sec["page_end"], page)
        blocks.append([kind, page, s, e, stack[-1] if stack else -1])
    # a section ends where the next heading of the same or a higher level starts
    for i, sec in enumerate(sections):
        for nxt in sections[i + 1:]:
            if nxt["level"] <= sec["level"]:
                sec["char_end"] = nxt["char_start"]
                break
    for ch in chunks:
        inner = None
        for sec in sections:
            if sec["char_start"] <= ch.char_start < sec["char_end"]:
                sec["chunk_count"] += 1
                inner = sec
        # one labelling for chunks and sections: the chunk takes its innermost section's label
        ch.section_covers = inner["label"] if inner else "other"
    return {"sections": sections, "captions": captions, "blocks": blocks,
            "metadata": _metadata(doc, text, title)}


# --------------------------------------------------------------------------------------------------
# chunking
# --------------------------------------------------------------------------------------------------


_chunkers: dict[tuple[int, int], Any] = {}


def _make_chunker(tokenizer: Any, max_tokens: int) -> Any:
    """A HybridChunker over ``tokenizer`` (built once per tokenizer and size: building costs ~10 ms)."""
    key = (id(tokenizer), max_tokens)
    if key not in _chunkers:
        _chunkers[key] = _build_chunker(tokenizer, max_tokens)
    return _chunkers[key]


class _VocabCachedTokenizer:
    """The tokenizer handed to semchunk (HybridChunker splits long items with it): the same ``encode``; and
    ``get_vocab``, which semchunk calls at every split only to learn the length of the longest token
    (``max_token_chars``, semchunk 3.x ``chunkerify``), answers with that longest token alone, computed once.
    Scanning MiniLM's 30,522-token vocabulary at every split took about a third of a paper's parse time."""

    _cache: dict[int, "_VocabCachedTokenizer"] = {}

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self._vocab: list[str] | None = None

    @classmethod
    def of(cls, tok: Any) -> "_VocabCachedTokenizer":
        if id(tok) not in cls._cache:
            cls._cache[id(tok)] = cls(tok)
        return cls._cache[id(tok)]

    def encode(self, text: str, add_special_tokens: bool = False) -> Any:
        return self.tok.encode(text, add_special_tokens=add_special_tokens)

    def get_vocab(self) -> list[str]:
        if self._vocab is None:
            self._vocab = [max(self.tok.get_vocab(), key=len)]
        return self._vocab


def _build_chunker(tokenizer: Any, max_tokens: int) -> Any:
    from docling_core.transforms.chunker.hybrid_chunker import HybridChunker
    from docling_core.transforms.chunker.tokenizer.base import BaseTokenizer

    class LocalTokenizer(BaseTokenizer):
        """docling-core tokenizer over a local ``tokenizers.Tokenizer`` (no hub access)."""

        model_config = {"arbitrary_types_allowed": True}
        tok: Any
        max_tokens: int

        def count_tokens(self, text: str) -> int:
            return len(self.tok.encode(text, add_special_tokens=False).ids)

        def get_max_tokens(self) -> int:
            return self.max_tokens

        def get_tokenizer(self) -> Any:
            return _VocabCachedTokenizer.of(self.tok)

    return HybridChunker(tokenizer=LocalTokenizer(tok=tokenizer, max_tokens=max_tokens), merge_peers=True)


def _item_text(item: Any, doc: Any) -> str:
    from docling_core.types.doc import TableItem

    if isinstance(item, TableItem):
        try:
            return item.export_to_markdown(doc)
        except Exception:
            return ""
    return (getattr(item, "text", "") or "").strip()


def _chunks(doc: Any, tokenizer: Any, max_tokens: int) -> tuple[str, list[Chunk], dict[str, tuple[int, int]]]:
    # canonical plain text: every item in reading order, blank line between items
    offsets: dict[str, tuple[int, int]] = {}
    parts: list[str] = []
    pos = 0
    for item, _lvl in doc.iterate_items():
        t = _item_text(item, doc)
        if not t:
            continue
        if parts:
            pos += 2
        offsets[item.self_ref] = (pos, pos + len(t))
        parts.append(t)
        pos += len(t)
    text = "\n\n".join(parts)

    titles = {(getattr(it, "text", "") or "").strip() for it, _ in doc.iterate_items()
              if str(getattr(it, "label", "")).endswith("title")}
    chunker = _make_chunker(tokenizer, max_tokens)
    out: list[Chunk] = []
    for ch in chunker.chunk(dl_doc=doc):
        body = (ch.text or "").strip()
        if not body:
            continue
        items = ch.meta.doc_items or []
        pages = sorted({p.page_no for it in items for p in (it.prov or [])})
        spans = [offsets[it.self_ref] for it in items if it.self_ref in offsets]
        start, end = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else (0, 0)
        # a split of a long item, or several items: narrow the span to the chunk's own text, whitespace
        # aside (the chunker may join words with a newline where the item text has a space)
        words = body.split()
        m = re.compile(r"\s+".join(map(re.escape, words))).search(text, start, max(end, start + len(body) + 1))
        if m:
            start, end = m.start(), m.end()
        elif words and (m := re.compile(r"\s+".join(map(re.escape, words[:8]))).search(text, start, end)):
            start = m.start()  # the chunk's text differs further on (markup): at least start where it does
        headings = list(ch.meta.headings or [])
        section = " > ".join(headings)
        # the label of the outermost heading that has one: "3 Results > 3.1 Experimental setup" is results
        covers = "other"
        for hd in headings:
            if hd in titles:  # the document's title is not a section ("Notes on materials ..." is not methods)
                continue
            covers = section_label(hd)
            if covers != "other":
                break
        embed = chunker.contextualize(chunk=ch)
        out.append(Chunk(index=len(out), text=body, embed_text=embed, page=pages[0] if pages else None,
                         page_end=pages[-1] if pages else None, char_start=start, char_end=end,
                         section=section, section_covers=covers))
    return text, out, offsets


def parse_document(path: Path, tokenizer: Any, max_tokens: int = 256, pdf_pipeline: str = "native") -> ParsedDocument:
    """Parse ``path`` and chunk it.

    Args:
        path: an existing file whose suffix is in :data:`DOCUMENT_TYPES`.
        tokenizer: a ``tokenizers.Tokenizer`` of the embedding model (truncation and padding off).
        max_tokens: chunk size bound in tokens of that tokenizer.
        pdf_pipeline: ``native`` (model-free, default) or ``standard`` (docling's layout model).

    Raises:
        DocumentError: empty file, unsupported type, not-a-PDF, encrypted or damaged PDF, parse failure,
            or no text at all (e.g. a scanned PDF without a text layer).
    """
    ftype = file_type_of(path)
    if ftype is None:
        raise DocumentError(f"{path.name}: unsupported file type {path.suffix or '(none)'}; supported: "
                            + ", ".join(sorted(DOCUMENT_TYPES)))
    if path.stat().st_size == 0:
        raise DocumentError(f"{path.name} is empty (0 bytes)")
    res = _convert(path, ftype, pdf_pipeline)
    pages = len(res.pages) if ftype == "pdf" else (len(res.document.pages) or None)
    if ftype == "pdf" and pdf_pipeline == "native":
        if not any(p.parsed_page is not None and any((c.text or "").strip() for c in p.parsed_page.textline_cells)
                   for p in res.pages):
            raise DocumentError(f"{path.name} has no text layer (a scanned or image-only PDF): nothing to index; "
                                "run OCR on it (e.g. ocrmypdf) and index the result")
        doc = _reconstruct_pdf(res, path.stem)
    else:
        doc = res.document
    text, chunks, offsets = _chunks(doc, tokenizer, max_tokens)
    if not chunks:
        hint = " (a scanned PDF without a text layer needs OCR first)" if ftype == "pdf" else ""
        raise DocumentError(f"{path.name} contains no extractable text{hint}")
    title = None
    for item, _lvl in doc.iterate_items():
        label = str(getattr(item, "label", ""))
        if label.endswith("title") or label.endswith("section_header"):
            title = (item.text or "").strip()[:300] or None
            break
    if title is None:
        title = chunks[0].text.split("\n", 1)[0][:200]
    try:
        markdown = doc.export_to_markdown()
    except Exception:
        markdown = text
    structure = _structure(doc, text, offsets, chunks, title if ftype != "pdf" else None)
    return ParsedDocument(file_type=ftype, text=text, markdown=markdown, title=title, pages=pages, chunks=chunks,
                          structure=structure)
