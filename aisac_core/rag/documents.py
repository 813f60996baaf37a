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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aisac_core.archives import ArchiveError, ArchiveLimits, check_archive, is_office_zip
from aisac_core.rag.chunking import Chunk, chunk_document
from aisac_core.rag.formats import DOCUMENT_TYPES, DocumentError, convert, file_type_of
from aisac_core.rag.pdf import has_text_layer, reconstruct_pdf
from aisac_core.rag.structure import document_structure

#: Bumped whenever parsing or chunking output changes; enters the index fingerprint.
PARSER_REVISION = "aisac-parse-6"  # 6: the header model reads titles and authors


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


def parse_document(
    path: Path, tokenizer: Any, max_tokens: int = 256, pdf_pipeline: str = "native", limits: ArchiveLimits | None = None
) -> ParsedDocument:
    """Parse ``path`` and chunk it.

    Args:
        path: an existing file whose suffix is in :data:`~aisac_core.rag.formats.DOCUMENT_TYPES`.
        tokenizer: a ``tokenizers.Tokenizer`` of the embedding model (truncation and padding off).
        max_tokens: chunk size bound in tokens of that tokenizer.
        pdf_pipeline: ``native`` (model-free, default) or ``standard`` (docling's layout model).
        limits: decompression limits for DOCX/PPTX/XLSX (ZIP archives), checked before docling opens the file
            (:func:`aisac_core.archives.check_archive`); None: the defaults (512 MB unpacked, ratio 100).

    Returns:
        the :class:`ParsedDocument` (at least one chunk).

    Raises:
        DocumentError: empty file, unsupported type, not-a-PDF, encrypted or damaged PDF, an Office file refused
            as a possible decompression bomb, parse failure, or no text at all (e.g. a scanned PDF without a text
            layer).
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
    if ftype == "pdf" and pdf_pipeline == "native":
        if not has_text_layer(res):
            raise DocumentError(
                f"{path.name} has no text layer (a scanned or image-only PDF): nothing to index; "
                "run OCR on it (e.g. ocrmypdf) and index the result"
            )
        doc = reconstruct_pdf(res, path.stem)
    else:
        doc = res.document
    text, chunks, offsets = chunk_document(doc, tokenizer, max_tokens)
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
    return ParsedDocument(
        file_type=ftype, text=text, markdown=markdown, title=title, pages=pages, chunks=chunks, structure=structure
    )
