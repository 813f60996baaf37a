"""Parsing a document: docling conversion, then chunks with page anchors and the document's structure.

The steps, one module each: :mod:`~aisac_core.rag.formats` (file types, docling conversion),
:mod:`~aisac_core.rag.pdf` (reading order and paragraphs of a PDF from its text lines),
:mod:`~aisac_core.rag.chunking` (plain text and token-bounded chunks), :mod:`~aisac_core.rag.structure`
(sections, captions, metadata).

Output of :func:`parse_document`: a :class:`ParsedDocument` with the plain ``text`` (items in reading
order joined by blank lines; every anchor's char span indexes into it), the Markdown rendering, the
page count, the :class:`~aisac_core.rag.chunking.Chunk` list (text, text to embed with its heading context,
pages, char span, section path and ``section_covers`` label) and the ``structure`` (sections with levels,
labels, page ranges and chunk counts; figure/table captions; blocks in reading order; metadata: title,
authors, year, DOI, arXiv id), which the rag server's ``get_overview`` / ``read_sections`` read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.archives import ArchiveError, ArchiveLimits, check_archive, is_office_zip
from aisac_core.rag.chunking import Chunk, chunk_document
from aisac_core.rag.formats import DOCUMENT_TYPES, DocumentError, convert, file_type_of
from aisac_core.rag.ocr import OcrOptions, engine, missing_engine_message, ocr_document, pages_needing_ocr
from aisac_core.rag.pdf import reconstruct_pdf
from aisac_core.rag.structure import document_structure

if TYPE_CHECKING:
    from aisac_core.settings import Settings

#: Bumped whenever parsing or chunking output changes; enters the index fingerprint.
PARSER_REVISION = "aisac-parse-8"  # 8: PDF text as printed (word spaces from glyphs, accents composed, NFC, hyphens)


@dataclass
class ParsedDocument:
    """A parsed document: plain text, Markdown, title, page count and chunks."""

    file_type: str
    text: str
    markdown: str
    title: str | None
    pages: int | None
    chunks: list[Chunk] = field(default_factory=list)
    #: sections, captions, blocks and metadata (:func:`~aisac_core.rag.structure.document_structure`), stored
    #: with the parsed text
    structure: dict[str, Any] = field(default_factory=dict)
    #: the 1-based pages read by OCR (empty for a born-digital file) and the seconds the OCR took
    ocr_pages: list[int] = field(default_factory=list)
    ocr_seconds: float = 0.0


def parse_document(
    path: Path,
    tokenizer: Any,
    max_tokens: int = 256,
    pdf_pipeline: str = "native",
    limits: ArchiveLimits | None = None,
    ocr: OcrOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ParsedDocument:
    """Parse ``path`` and chunk it.

    Args:
        path: an existing file whose suffix is in :data:`~aisac_core.rag.formats.DOCUMENT_TYPES`.
        tokenizer: a ``tokenizers.Tokenizer`` of the embedding model (truncation and padding off).
        max_tokens: chunk size bound in tokens of that tokenizer.
        pdf_pipeline: ``native`` (model-free, default) or ``standard`` (docling's layout model).
        limits: decompression limits for DOCX/PPTX/XLSX (ZIP archives), checked before docling opens the file
            (:func:`aisac_core.archives.check_archive`); None: the defaults (512 MB unpacked, ratio 100).
        ocr: how PDF pages without a usable text layer are read (:mod:`aisac_core.rag.ocr`); None: the defaults
            (Tesseract at 300 dpi, at most 200 pages and 900 s per document).
        progress: ``progress(done, total)`` after each OCRed page (long scans); an exception it raises (a
            cancelled job) propagates and stops the document between two pages.

    Returns:
        the :class:`ParsedDocument` (at least one chunk).

    Raises:
        DocumentError: empty file, unsupported type, not-a-PDF, encrypted or damaged PDF, an Office file refused
            as a possible decompression bomb, parse failure, or no text at all (e.g. a scanned PDF without a text
            layer where OCR is off or Tesseract is missing, naming the packages to install), or OCR refused
            (:class:`~aisac_core.rag.ocr.OcrError`: page or time limit reached, language data missing).
    """
    ftype = file_type_of(path)
    if ftype is None:
        raise DocumentError(
            f"{path.name}: unsupported file type {path.suffix or '(none)'}; supported: "
            + ", ".join(sorted(DOCUMENT_TYPES))
        )
    if path.stat().st_size == 0:
        raise DocumentError(f"{path.name} is empty (0 bytes)")
    if is_office_zip(path):
        try:
            check_archive(path, limits)
        except ArchiveError as exc:
            raise DocumentError(f"{exc} (file skipped)") from exc
    res = convert(path, ftype, pdf_pipeline)
    pages = len(res.pages) if ftype == "pdf" else (len(res.document.pages) or None)
    ocr_pages: dict[int, Any] = {}
    ocr_items: dict[str, list[float]] | None = None
    if ftype == "pdf" and pdf_pipeline == "native":
        scanned = pages_needing_ocr(res)
        opts = ocr or OcrOptions()
        if scanned and (not opts.enabled or engine() is None):
            if len(scanned) == len(res.pages):
                if not opts.enabled:
                    raise DocumentError(
                        f"{path.name} has no text layer (a scanned or image-only PDF): nothing to index; OCR is "
                        "off (setting AISAC_OCR=off): set AISAC_OCR=auto, or run OCR on it (e.g. ocrmypdf) and "
                        "index the result"
                    )
                raise DocumentError(missing_engine_message(path.name))
            scanned = []  # a mixed PDF without OCR: its text pages are indexed (the structure lists the others)
        if scanned:
            ocr_pages = ocr_document(path, scanned, opts, progress)
        doc = reconstruct_pdf(res, path.stem, ocr_pages or None)
        ocr_meta = (getattr(doc, "_aisac_meta", None) or {}).get("ocr") or {}
        ocr_items = ocr_meta.get("items")
    else:
        doc = res.document
    text, chunks, offsets = chunk_document(doc, tokenizer, max_tokens, ocr_items)
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
    structure = document_structure(doc, text, offsets, chunks, title if ftype != "pdf" else None)
    meta = structure.get("metadata") or {}
    if meta.get("title_uncertain") and meta.get("title"):
        # below the header model's threshold a guess is not presented as the title (hits, citations): the file
        # name, the guess beside it (aisac_core.rag.headers.UNCERTAIN_BELOW)
        title = f"{path.name} (title uncertain: {meta['title']!r})"
    if ocr_pages:
        confs = [p.conf for p in ocr_pages.values() if p.conf is not None]
        opts, eng = ocr or OcrOptions(), engine()
        # in the metadata, so rag_get_overview shows which pages were read by OCR, how and how confidently
        structure.setdefault("metadata", {})["ocr"] = {
            "pages": sorted(ocr_pages),
            "engine": eng.pin(opts.language) if eng else None,
            "dpi": opts.dpi,
            "mean_confidence": round(sum(confs) / len(confs), 3) if confs else None,
            "seconds": round(sum(p.seconds for p in ocr_pages.values()), 2),
        }
    return ParsedDocument(
        file_type=ftype,
        text=text,
        markdown=markdown,
        title=title,
        pages=pages,
        chunks=chunks,
        structure=structure,
        ocr_pages=sorted(ocr_pages),
        ocr_seconds=sum(p.seconds for p in ocr_pages.values()),
    )


def parse_as_configured(
    path: Path, settings: Settings, tokenizer: Any, progress: Callable[[int, int], None] | None = None
) -> ParsedDocument:
    """:func:`parse_document` with the options of ``settings``: chunk size (``rag.chunk_max_tokens``), PDF pipeline
    (``rag.pdf_pipeline``), archive limits (:meth:`ArchiveLimits.from_settings`) and OCR
    (:meth:`OcrOptions.from_settings`) - how the indexer reads a file, and so how a changed file is re-read to verify
    an anchor. Same arguments otherwise, same result and errors (:class:`DocumentError`)."""
    return parse_document(
        path,
        tokenizer,
        settings.rag.chunk_max_tokens,
        settings.rag.pdf_pipeline,
        limits=ArchiveLimits.from_settings(settings),
        ocr=OcrOptions.from_settings(settings),
        progress=progress,
    )
