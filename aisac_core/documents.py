"""Parsing documents with docling into reading-ordered text, then into chunks with page anchors.

Formats: PDF (docling's model-free ``NativePdfPipeline``; aisac reconstructs reading order and
paragraphs from its text lines), DOCX, PPTX, XLSX, HTML, Markdown, JATS XML, LaTeX and plain text
(docling's default backends, which give headings, tables and lists).

Chunking: docling-core's ``HybridChunker`` (structure-aware, then token-bounded and peer-merged) with a
tokenizer built on the dense model's own ``tokenizer.json``, so a chunk never exceeds what the model
reads (256 tokens for MiniLM).

Output of :func:`parse_document`: a :class:`ParsedDocument` with the plain ``text`` (items in reading
order joined by blank lines; every anchor's char span indexes into it), the Markdown rendering, the
page count and the :class:`Chunk` list (text, text to embed with its heading context, pages, char span,
section path and ``section_covers`` label).
"""

from __future__ import annotations

import re
import statistics
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
PARSER_REVISION = "aisac-parse-2"

#: Fixed section taxonomy (DESIGN.md "Documents"); headings map to it by keyword.
SECTION_LABELS = ("abstract", "introduction", "methods", "results", "discussion", "conclusion", "datasets",
                  "references", "other")
_SECTION_SYNONYMS: list[tuple[str, re.Pattern[str]]] = [
    ("abstract", re.compile(r"\b(abstract|summary)\b")),
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


class DocumentError(ValueError):
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
_NUMBERED_HEADING = re.compile(r"^(\d+(\.\d+){0,3}\.?|[IVX]+\.|[A-Z]\.)\s+[A-Z][^.!?]{1,80}$")


@dataclass
class _Line:
    page: int
    text: str
    l: float  # noqa: E741
    r: float
    top: float  # distance from the top of the page
    h: float


def _pdf_lines(res: Any) -> tuple[dict[int, list[_Line]], dict[int, tuple[float, float]]]:
    sizes: dict[int, tuple[float, float]] = {}
    for pno, page in res.document.pages.items():
        sizes[pno] = (page.size.width, page.size.height)
    lines: dict[int, list[_Line]] = {}
    for item in res.document.texts:
        text = (item.text or "").strip()
        if not text or not item.prov:
            continue
        prov = item.prov[0]
        W, H = sizes.get(prov.page_no, (612.0, 792.0))
        bb = prov.bbox.to_top_left_origin(page_height=H)
        lines.setdefault(prov.page_no, []).append(
            _Line(prov.page_no, text, bb.l, bb.r, bb.t, max(1.0, bb.b - bb.t)))
    return lines, sizes


def _strip_margins(lines: dict[int, list[_Line]], sizes: dict[int, tuple[float, float]]) -> None:
    """Remove page numbers and running headers/footers (text repeated in the margins of many pages)."""
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
    repeated = {k for k, c in margin_keys.items() if npages >= 3 and c >= max(2, 0.5 * npages)}
    for pno, ls in lines.items():
        H = sizes[pno][1]
        keep = []
        for ln in ls:
            in_margin = ln.top < 0.08 * H or ln.top > 0.92 * H
            if in_margin and (_PAGE_NUM.match(ln.text) or key(ln.text) in repeated):
                continue
            keep.append(ln)
        lines[pno] = keep


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
            out.extend((c, ln) for cc, ln in sorted(band, key=lambda p: (p[1].top, p[1].l)) if cc == c)
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


def _reconstruct_pdf(res: Any, name: str) -> Any:
    """A DoclingDocument of paragraphs (and guessed headings) in reading order, with page provenance."""
    from docling_core.types.doc import BoundingBox, CoordOrigin, DocItemLabel, DoclingDocument, ProvenanceItem

    lines, sizes = _pdf_lines(res)
    _strip_margins(lines, sizes)
    all_h = [ln.h for ls in lines.values() for ln in ls]
    body_h = statistics.median(all_h) if all_h else 10.0
    doc = DoclingDocument(name=name)
    title_done = False
    for pno in sorted(sizes):
        ordered = _reading_order(lines.get(pno, []), sizes[pno][0])
        paras: list[list[_Line]] = []
        last_col = None
        for c, ln in ordered:
            if paras and c == last_col:
                p = paras[-1][-1]
                gap = ln.top - (p.top + p.h)
                similar = abs(ln.h - p.h) <= 0.2 * max(ln.h, p.h)
                if -0.5 * p.h <= gap <= 0.7 * max(p.h, ln.h) and similar:
                    paras[-1].append(ln)
                    continue
            paras.append([ln])
            last_col = c
        for para in paras:
            text = para[0].text
            for ln in para[1:]:
                text = _join_lines(text, ln.text)
            text = re.sub(r"\s+", " ", text).strip()
            if not text:
                continue
            bbox = BoundingBox(l=min(x.l for x in para), t=min(x.top for x in para),
                               r=max(x.r for x in para), b=max(x.top + x.h for x in para),
                               coord_origin=CoordOrigin.TOPLEFT)
            prov = ProvenanceItem(page_no=pno, bbox=bbox, charspan=(0, len(text)))
            h = statistics.mean(x.h for x in para)
            if not title_done and pno == min(sizes) and len(text) <= 300 and h >= 1.3 * body_h and \
                    h >= max((x.h for x in lines.get(pno, [])), default=0) - 0.5:
                doc.add_title(text=text, prov=prov)  # the largest type on the first page
                title_done = True
                continue
            is_heading = len(para) <= 2 and len(text) <= 90 and not text.endswith((".", ",", ";")) and (
                h >= 1.15 * body_h or bool(_NUMBERED_HEADING.match(text)))
            if is_heading and re.search(r"[A-Za-z]{3}", text):
                doc.add_heading(text=text, level=1, prov=prov)
            else:
                doc.add_text(label=DocItemLabel.TEXT, text=text, prov=prov)
    return doc


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
            return self.tok

    return HybridChunker(tokenizer=LocalTokenizer(tok=tokenizer, max_tokens=max_tokens), merge_peers=True)


def _item_text(item: Any, doc: Any) -> str:
    from docling_core.types.doc import TableItem

    if isinstance(item, TableItem):
        try:
            return item.export_to_markdown(doc)
        except Exception:
            return ""
    return (getattr(item, "text", "") or "").strip()


def _chunks(doc: Any, tokenizer: Any, max_tokens: int) -> tuple[str, list[Chunk]]:
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
        covers = "other"
        for hd in reversed(headings):
            if hd in titles:  # the document's title is not a section ("Notes on materials ..." is not methods)
                continue
            covers = section_label(hd)
            if covers != "other":
                break
        embed = chunker.contextualize(chunk=ch)
        out.append(Chunk(index=len(out), text=body, embed_text=embed, page=pages[0] if pages else None,
                         page_end=pages[-1] if pages else None, char_start=start, char_end=end,
                         section=section, section_covers=covers))
    return text, out


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
    doc = _reconstruct_pdf(res, path.stem) if ftype == "pdf" and pdf_pipeline == "native" else res.document
    text, chunks = _chunks(doc, tokenizer, max_tokens)
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
    return ParsedDocument(file_type=ftype, text=text, markdown=markdown, title=title, pages=pages, chunks=chunks)
