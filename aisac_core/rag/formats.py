"""File types and their conversion with docling.

A file is a *document* (parsed and embedded) or a *catalogued* data file (listed with metadata, never
embedded), by suffix. Documents are converted by docling: PDF with the model-free ``NativePdfPipeline``
(text lines with fonts and boxes; aisac rebuilds reading order from them, :mod:`aisac_core.rag.pdf`) or,
on request, docling's standard layout-model pipeline; DOCX, PPTX, XLSX, HTML, Markdown, JATS XML and
LaTeX with docling's default backends (headings, tables and lists); plain text as Markdown.

PDFs are checked before conversion (a ``%PDF`` header, readable by pdfium, at least one page), so an
encrypted, damaged or renamed file fails with a message the user can act on.
"""

from __future__ import annotations

import threading
from io import BytesIO
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


class DocumentError(AisacError, ValueError):
    """A file cannot be parsed; the message says why in terms the user can act on."""


def file_type_of(path: Path) -> str | None:
    """The document type of ``path`` by suffix, or None when it is not a parseable document."""
    return DOCUMENT_TYPES.get(path.suffix.lower())


# converters are built once per process: constructing a docling converter is expensive
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


def check_pdf(path: Path) -> None:
    """Raise :class:`DocumentError` unless ``path`` is a readable PDF with at least one page (not a renamed
    file, not encrypted, not damaged or truncated)."""
    with open(path, "rb") as f:
        head = f.read(1024)
    if b"%PDF-" not in head:
        raise DocumentError(f"{path.name} is not a PDF (no %PDF header): it may be another file type renamed")
    import pypdfium2 as pdfium  # the PDF stack (native library) loads only when a PDF is parsed
    from docling.utils.locks import pypdfium2_lock  # pdfium is not thread-safe: docling's process-wide lock

    try:
        with pypdfium2_lock:
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


def convert(path: Path, ftype: str, pdf_pipeline: str) -> Any:
    """Convert ``path`` of type ``ftype`` (a value of :data:`DOCUMENT_TYPES`) with docling.

    ``pdf_pipeline``: ``native`` (model-free) or ``standard`` (docling's layout model). Returns docling's
    ``ConversionResult`` (``.document``; for PDFs also ``.pages`` with their text lines).

    Raises:
        DocumentError: not-a-PDF, encrypted or damaged PDF, or a docling failure (its message quoted).
    """
    if ftype == "pdf":
        check_pdf(path)
    conv = _converter("pdf" if ftype == "pdf" else "other", pdf_pipeline)
    source: Any = path
    if ftype == "txt":
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
