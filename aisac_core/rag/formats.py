"""File types and their conversion with docling.

A file is a *document* (parsed and embedded) or a *catalogued* data file (listed with metadata, never
embedded), by suffix: one table, :data:`FILE_FORMATS`, says which, and which built-in table loader of the data
registry reads it. Documents are converted by docling: PDF with the model-free ``NativePdfPipeline``
(text lines with fonts and boxes; aisac rebuilds reading order from them, :mod:`aisac_core.rag.pdf`) or,
on request, docling's standard layout-model pipeline; DOCX, PPTX, XLSX, HTML, Markdown, JATS XML and
LaTeX with docling's default backends (headings, tables and lists); plain text as Markdown.

PDFs are checked before conversion (a ``%PDF`` header, readable by pdfium, at least one page), so an
encrypted, damaged or renamed file fails with a message the user can act on.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

from aisac_core.errors import AisacError
from aisac_core.hashing import open_regular


@dataclass(frozen=True)
class FileFormat:
    """What aisac does with a file of one suffix.

    ``type``: the file type recorded for it (a document's or a catalogued file's ``file_type``); ``document``: rag
    parses and embeds it (else, under a registered root, it is only catalogued when it is a data file);
    ``table``: the kind of the data registry's built-in table loader that reads it (csv, excel, parquet, json,
    jsonl, calamine for .xls/.ods; :mod:`aisac_core.data.loaders`), None when ``data_load`` has no built-in loader for it.
    """

    type: str
    document: bool = False
    table: str | None = None


#: THE suffix table (lower-case suffix -> :class:`FileFormat`), read by the indexer, the catalogue and the data
#: registry's built-in table loaders; the tables below are views of it.
FILE_FORMATS: dict[str, FileFormat] = {
    ".pdf": FileFormat("pdf", document=True),
    ".docx": FileFormat("docx", document=True),
    ".pptx": FileFormat("pptx", document=True),
    ".xlsx": FileFormat("xlsx", document=True, table="excel"),
    ".html": FileFormat("html", document=True),
    ".htm": FileFormat("html", document=True),
    ".xhtml": FileFormat("html", document=True),
    ".md": FileFormat("md", document=True),
    ".markdown": FileFormat("md", document=True),
    ".nxml": FileFormat("jats", document=True),
    ".xml": FileFormat("jats", document=True),
    ".tex": FileFormat("latex", document=True),
    ".txt": FileFormat("txt", document=True, table="csv"),
    ".csv": FileFormat("csv", table="csv"),
    ".tsv": FileFormat("tsv", table="csv"),
    ".tab": FileFormat("tsv", table="csv"),
    ".xlsm": FileFormat("xlsx", table="excel"),
    ".xls": FileFormat("xls", table="calamine"),
    ".ods": FileFormat("ods", table="calamine"),
    ".parquet": FileFormat("parquet", table="parquet"),
    ".pq": FileFormat("parquet", table="parquet"),
    ".json": FileFormat("json", table="json"),
    ".jsonl": FileFormat("jsonl", table="jsonl"),
    ".ndjson": FileFormat("jsonl", table="jsonl"),
    ".h5": FileFormat("hdf5"),
    ".hdf5": FileFormat("hdf5"),
    ".nc": FileFormat("netcdf"),
    ".npy": FileFormat("npy"),
    ".npz": FileFormat("npz"),
    ".feather": FileFormat("feather"),
}
#: suffix -> file type, for files that are parsed and embedded.
DOCUMENT_TYPES = {s: f.type for s, f in FILE_FORMATS.items() if f.document}
#: suffix -> file type, for data files: catalogued (listed with metadata, never embedded) unless parsed as documents.
CATALOG_TYPES = {s: f.type for s, f in FILE_FORMATS.items() if f.table or not f.document}
#: suffix -> kind of the built-in table loader that reads it (csv, excel, parquet, json, jsonl).
TABLE_FORMATS = {s: f.table for s, f in FILE_FORMATS.items() if f.table}


class DocumentError(AisacError, ValueError):
    """A file cannot be parsed; the message says why in terms the user can act on."""


def file_type_of(path: Path) -> str | None:
    """The document type of ``path`` by suffix, or None when it is not a parseable document."""
    return DOCUMENT_TYPES.get(path.suffix.lower())


@functools.lru_cache(maxsize=8)  # a docling converter costs seconds to build: one per kind and pipeline
def _converter(kind: str, pdf_pipeline: str = "native") -> Any:
    """The docling converter for ``kind`` (``pdf`` with the ``native`` or ``standard`` pipeline, or any other
    format), built on first use and then shared (it holds parser configuration only, no store data)."""
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
    return conv


def check_pdf(path: Path) -> None:
    """Raise :class:`DocumentError` unless ``path`` is a readable PDF with at least one page (not a renamed
    file, not encrypted, not damaged or truncated)."""
    with open_regular(path) as f:
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
            raise DocumentError(
                f"{path.name} is encrypted (password protected): decrypt it, then index it again"
            ) from exc
        raise DocumentError(f"{path.name} is damaged or truncated and cannot be read as a PDF ({msg})") from exc
    if n == 0:
        raise DocumentError(f"{path.name} has no pages")


@dataclass(frozen=True)
class _Converted:
    """The part of docling's ``ConversionResult`` aisac reads, for a document converted by a backend directly."""

    document: Any
    pages: tuple[Any, ...] = ()


#: root elements of a JATS (and its predecessor, the NLM Journal Archiving and Publishing DTDs) document: a journal
#: article, or a PMC collection of them (JATS 1.3, ANSI/NISO Z39.96-2021, section "article" / "pmc-articleset")
JATS_ROOTS = ("article", "pmc-articleset")


def convert_jats(path: Path) -> Any:
    """Convert the JATS XML file ``path`` with docling's JATS backend, whatever its document type declaration:
    docling's format detection takes an XML file for JATS only when its DOCTYPE names ``JATS-journalpublishing`` or
    ``JATS-archive``, and refuses as "File format not allowed" the many articles without one, and those under the
    NLM DTDs that JATS succeeded (``archivearticle3.dtd``). The root element must be ``<article>`` (or a PMC
    ``<pmc-articleset>``); entities are not resolved and nothing is fetched (docling's parser: no DTD, no network).
    Raises DocumentError for malformed XML or another root element."""
    from docling.backend.xml.jats_backend import JatsDocumentBackend
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.document import InputDocument

    with open_regular(path) as f:
        data = f.read()
    if b"<!DOCTYPE" not in data[:4096]:  # docling's backend reads the internal DTD and fails without a DOCTYPE: an
        decl = re.match(rb"\s*<\?xml[^>]*\?>", data)  # empty one (no entities, nothing to load) after the XML
        at = decl.end() if decl else 0  # declaration leaves the document itself unchanged
        data = data[:at] + b"<!DOCTYPE article>" + data[at:]
    try:
        stream = BytesIO(data)
        in_doc = InputDocument(
            path_or_stream=stream, format=InputFormat.XML_JATS, backend=JatsDocumentBackend, filename=path.name
        )
        backend = JatsDocumentBackend(in_doc, BytesIO(data))
    except Exception as exc:  # docling wraps lxml's error: not well-formed XML
        cause = exc.__cause__ or exc
        raise DocumentError(f"{path.name} is not well-formed XML ({type(cause).__name__}: {cause})") from exc
    root = backend.tree.getroot()
    tag = root.tag.rsplit("}", 1)[-1] if isinstance(root.tag, str) else ""
    if tag not in JATS_ROOTS:
        raise DocumentError(
            f"{path.name} is XML but not a JATS article (its root element is <{tag or '?'}>, expected <article>); "
            "only JATS XML is indexed among .xml files"
        )
    try:
        return _Converted(document=backend.convert())
    except Exception as exc:  # docling raises for content its backend cannot map
        raise DocumentError(f"{path.name} could not be parsed: {type(exc).__name__}: {exc}") from exc


def convert(path: Path, ftype: str, pdf_pipeline: str) -> Any:
    """Convert ``path`` of type ``ftype`` (a value of :data:`DOCUMENT_TYPES`) with docling.

    ``pdf_pipeline``: ``native`` (model-free) or ``standard`` (docling's layout model). Returns docling's
    ``ConversionResult`` (``.document``; for PDFs also ``.pages`` with their text lines).

    Raises:
        DocumentError: not-a-PDF, encrypted or damaged PDF, or a docling failure (its message quoted).
    """
    if ftype == "pdf":
        check_pdf(path)
    if ftype == "jats":
        return convert_jats(path)
    conv = _converter("pdf" if ftype == "pdf" else "other", pdf_pipeline)
    source: Any = path
    if ftype == "txt":
        from docling.datamodel.base_models import DocumentStream

        with open_regular(path) as f:
            source = DocumentStream(name=path.stem + ".md", stream=BytesIO(f.read()))
    try:
        res = conv.convert(source, raises_on_error=False)
    except Exception as exc:  # docling raises for unsupported or malformed input
        raise DocumentError(f"{path.name} could not be parsed: {type(exc).__name__}: {exc}") from exc
    status = getattr(res.status, "name", str(res.status))
    if status not in ("SUCCESS", "PARTIAL_SUCCESS"):
        errs = "; ".join(e.error_message for e in (res.errors or []))[:300]
        raise DocumentError(f"{path.name} could not be parsed ({status.lower()}): {errs or 'no detail'}")
    return res
