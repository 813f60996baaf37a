"""The table-loader registry: what reads a file into frames for ``data_load``, built-in or an extension's.

A loader is registered for a suffix through the ``aisac_register_table_loaders`` hook (:mod:`aisac_core.plugins`);
the built-in formats register there too (:mod:`aisac_core.data.builtin`: :data:`BUILTIN_LOADERS`, one per kind of
the one suffix table :data:`aisac_core.rag.formats.TABLE_FORMATS`, over the readers of
:mod:`aisac_core.data.loaders`). Every loader runs through one dispatch, :func:`read_table`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.archives import ArchiveLimits
from aisac_core.data.calamine_books import load_calamine, openpyxl_fallback
from aisac_core.data.errors import DataError, WorkbookOpenError
from aisac_core.data.loaders import load_csv, load_excel, load_json, load_parquet
from aisac_core.data.sheetgrid import SheetLimits
from aisac_core.errors import AisacError
from aisac_core.rag.formats import TABLE_FORMATS

if TYPE_CHECKING:
    import pandas as pd

#: a table a loader read: ``(sheet title or None, frame or None (an empty sheet: skipped, its notes say so), loader
#: options in force (JSON-able), notes)``
LoadedTable = tuple["str | None", "pd.DataFrame | None", dict[str, Any], list[str]]
#: the options ``data_load`` passes on to a table loader besides the path (a loader declares those it takes)
LOAD_OPTIONS = ("sheet", "cell_range", "tidy", "skip_rows", "header_rows")
#: the error when a loader does not take an option that was given (the built-in loaders' terms)
_NOT_TAKEN = {
    "sheet": "sheet applies to workbooks (.xlsx .xlsm .xls .ods) and PDF tables only; {name} is {fmt}",
    "cell_range": "range applies to Excel workbooks only; {name} is {fmt}: use skip_rows and header_rows for "
    "delimited text",
    "tidy": "tidy applies to Excel workbooks only; {name} is {fmt}",
    "skip_rows": "skip_rows applies to CSV and Excel files only",
    "header_rows": "header_rows applies to CSV, Excel and PDF tables only",
}


@dataclass(frozen=True)
class TableLoader:
    """A table loader that takes options: ``read(path, **options) -> [LoadedTable]``.

    ``format``: the name recorded as the frame's ``source.format``; ``options``: the keywords ``read`` takes, among
    :data:`LOAD_OPTIONS` and ``limits`` (the store's :class:`~aisac_core.archives.ArchiveLimits`, always passed
    when taken). A plain function of the path returning a DataFrame is a loader too (format ``plugin``, no options).
    """

    format: str
    read: Callable[..., list[LoadedTable]]
    options: frozenset[str] = frozenset()

    def __call__(self, path: Path, **options: Any) -> list[LoadedTable]:
        return self.read(path, **options)


def _read_csv(path: Path, *, header_rows: int | None = None, skip_rows: int | None = None) -> list[LoadedTable]:
    df, opts, notes = load_csv(path, header_rows, path.suffix.lower(), skip_rows)
    return [(None, df, opts, notes)]


def _read_excel(
    path: Path,
    *,
    limits: ArchiveLimits | None = None,
    sheet_limits: SheetLimits | None = None,
    sheet: str | int | None = None,
    header_rows: int | None = None,
    skip_rows: int | None = None,
    cell_range: str | None = None,
    tidy: bool = False,
) -> list[LoadedTable]:
    try:
        return list(
            load_excel(
                path,
                sheet,
                header_rows,
                limits,
                skip_rows=skip_rows,
                cell_range=cell_range,
                tidy=bool(tidy),
                sheet_limits=sheet_limits,
            )
        )
    except WorkbookOpenError as exc:  # never lose a workbook: its values through calamine
        return list(openpyxl_fallback(path, sheet, header_rows, skip_rows, cell_range, bool(tidy), sheet_limits, exc))


def _read_calamine(
    path: Path,
    *,
    sheet_limits: SheetLimits | None = None,
    sheet: str | int | None = None,
    header_rows: int | None = None,
    skip_rows: int | None = None,
    cell_range: str | None = None,
    tidy: bool = False,
) -> list[LoadedTable]:
    return list(
        load_calamine(
            path,
            sheet,
            header_rows,
            skip_rows=skip_rows,
            cell_range=cell_range,
            tidy=bool(tidy),
            sheet_limits=sheet_limits,
        )
    )


def _read_parquet(path: Path) -> list[LoadedTable]:
    return [(None, load_parquet(path), {}, [])]


def _read_json(path: Path) -> list[LoadedTable]:
    return [(None, load_json(path, lines=False), {}, [])]


def _read_pdf(path: Path, *, sheet: str | int | None = None, header_rows: int | None = None) -> list[LoadedTable]:
    from aisac_core.data.pdftables import read_pdf_tables

    return read_pdf_tables(path, sheet=sheet, header_rows=header_rows)


def _read_jsonl(path: Path) -> list[LoadedTable]:
    return [(None, load_json(path, lines=True), {}, [])]


#: the built-in loaders by kind (the values of :data:`~aisac_core.rag.formats.TABLE_FORMATS`)
BUILTIN_LOADERS: dict[str, TableLoader] = {
    "csv": TableLoader("csv", _read_csv, frozenset({"header_rows", "skip_rows"})),
    "excel": TableLoader("excel", _read_excel, frozenset({"limits", "sheet_limits", *LOAD_OPTIONS})),
    "calamine": TableLoader("calamine", _read_calamine, frozenset({"sheet_limits", *LOAD_OPTIONS})),
    "parquet": TableLoader("parquet", _read_parquet),
    "json": TableLoader("json", _read_json),
    "jsonl": TableLoader("jsonl", _read_jsonl),
    # tables read out of a PDF's text layer, every cell anchored (aisac_core.data.pdftables)
    "pdf": TableLoader("pdf", _read_pdf, frozenset({"sheet", "header_rows"})),
}


def builtin_table_loaders() -> dict[str, TableLoader]:
    """``{".suffix": loader}`` of the built-in formats: every suffix of the one suffix table
    (:data:`~aisac_core.rag.formats.TABLE_FORMATS`) with its kind's loader, and ``.pdf`` (the tables of a PDF,
    :mod:`aisac_core.data.pdftables`; a PDF is a document to the indexer and a set of tables to ``data_load``)."""
    return {**{suffix: BUILTIN_LOADERS[kind] for suffix, kind in TABLE_FORMATS.items()}, ".pdf": BUILTIN_LOADERS["pdf"]}


def loader_format(loader: Callable[..., Any]) -> str:
    """The format name a loader records (``plugin`` for a plain function)."""
    fmt = getattr(loader, "format", None)
    return fmt if isinstance(fmt, str) and fmt else "plugin"


def _loader_name(loader: Callable[..., Any]) -> str:
    fn = getattr(loader, "read", loader)
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def table_loader_for(loaders: Mapping[str, Callable[..., Any]], path: Path) -> Callable[..., Any]:
    """The loader of ``path`` among ``loaders`` (``{".suffix" (lower case): loader}``, the built-ins and the
    extensions' alike: :func:`aisac_core.plugins.table_loaders`).

    Raises:
        DataError: no loader for the file's suffix (the message lists the supported ones).
    """
    loader = loaders.get(path.suffix.lower())
    if loader is None:
        raise DataError(f"unsupported file type {path.suffix or '(none)'!r}; supported: {', '.join(sorted(loaders))}")
    return loader


def read_table(
    loader: Callable[..., Any],
    path: Path,
    *,
    limits: ArchiveLimits | None = None,
    sheet_limits: SheetLimits | None = None,
    **options: Any,
) -> tuple[str, list[LoadedTable]]:
    """Read ``path`` with ``loader``: the one dispatch of every table loader, built-in or an extension's.

    ``options``: :data:`LOAD_OPTIONS` (None/False: not given); each one given must be taken by the loader
    (``loader.options``; a plain function takes none). ``limits`` and ``sheet_limits`` (the per-sheet bounds of
    :mod:`aisac_core.data.sheetgrid`) are passed to a loader that takes them. The loader
    returns a DataFrame or a list of :data:`LoadedTable`. Result: ``(format, [LoadedTable])``.

    Raises:
        DataError: an option the loader does not take; the loader's own DataError; any other exception of the
            loader (named, with the file); a result that is not a DataFrame or a list of loaded tables.
    """
    unknown = set(options) - set(LOAD_OPTIONS)
    if unknown:
        raise TypeError(f"read_table got unknown options {sorted(unknown)}; it takes {', '.join(LOAD_OPTIONS)}")
    fmt = loader_format(loader)
    takes = getattr(loader, "options", None) or frozenset()
    given = {k: options[k] for k in LOAD_OPTIONS if options.get(k) is not None and options.get(k) is not False}
    for k in given:
        if k not in takes:
            raise DataError(_NOT_TAKEN[k].format(name=path.name, fmt=fmt))
    if "limits" in takes:
        given["limits"] = limits
    if "sheet_limits" in takes:
        given["sheet_limits"] = sheet_limits
    suffix = path.suffix.lower()
    try:
        res = loader(path, **given)
    except (AisacError, MemoryError):
        raise
    except Exception as exc:
        raise DataError(
            f"the table loader for {suffix} ({_loader_name(loader)}) cannot read {path.name}: "
            f"{type(exc).__name__}: {str(exc)[:300]}"
        ) from exc
    tables = [(None, res, {}, [])] if _is_frame(res) else res
    if not (
        isinstance(tables, list)
        and all(isinstance(t, tuple) and len(t) == 4 and (t[1] is None or _is_frame(t[1])) for t in tables)
    ):
        raise DataError(
            f"the table loader registered for {suffix} ({_loader_name(loader)}) returned "
            f"{type(res).__name__}, not a pandas DataFrame; fix the extension's "
            "aisac_register_table_loaders"
        )
    return fmt, tables


def _is_frame(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "columns")
