"""``.xls`` (Excel 97-2003) and ``.ods`` (OpenDocument) workbooks, read by pandas through its ``calamine`` engine
(the Rust calamine reader, package ``python-calamine``), then found and labelled as :mod:`aisac_core.data.loaders`
does for ``.xlsx``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.data.cells import col_letters
from aisac_core.data.errors import DataError, WorkbookOpenError
from aisac_core.data.loaders import _pick_sheets, _sheets_out
from aisac_core.data.sheetgrid import SheetGrid, SheetLimits, read_dense

if TYPE_CHECKING:
    import pandas as pd


class CalamineSheets:
    """An open ``.xls``/``.ods`` workbook: ``names`` (its sheets), ``read(name) -> SheetGrid`` (values through
    ``pandas.read_excel(engine="calamine")``, merged ranges from calamine), ``close()``.

    Raises (constructor): DataError for a file calamine cannot open (damaged, encrypted, not that format)."""

    def __init__(self, path: Path, limits: SheetLimits | None = None, cell_range: str | None = None) -> None:
        from python_calamine import CalamineError, CalamineWorkbook

        self.path, self.limits, self.cell_range = path, limits, cell_range
        try:
            self.wb = CalamineWorkbook.from_path(str(path))
        except (CalamineError, OSError, ValueError) as exc:
            raise DataError(
                f"cannot open {path.name} as a {path.suffix.lower()} workbook ({type(exc).__name__}: "
                f"{str(exc)[:200]}): the file is damaged, encrypted or not that format"
            ) from exc
        self.names = [str(n) for n in self.wb.sheet_names]

    def read(self, name: str) -> SheetGrid:
        """One sheet as a compact :class:`SheetGrid`. Raises DataError when calamine cannot read it or past a limit."""
        import pandas as pd
        from python_calamine import CalamineError

        try:
            merged = self.wb.get_sheet_by_name(name).merged_cell_ranges or []
        except (CalamineError, ValueError):
            merged = []
        refs = [f"{_a1(m[0])}:{_a1(m[1])}" for m in merged]
        try:
            df = pd.read_excel(self.path, sheet_name=name, header=None, engine="calamine")
        except Exception as exc:  # noqa: BLE001 - calamine's errors vary by format
            raise DataError(f"sheet {name!r}: calamine cannot read it ({type(exc).__name__}: {exc})") from exc
        return read_dense(name, df.itertuples(index=False, name=None), refs, self.limits, self.cell_range)

    def close(self) -> None:
        """Close the workbook."""
        self.wb.close()


def _a1(rc: tuple[int, int]) -> str:
    return f"{col_letters(rc[1] + 1)}{rc[0] + 1}"


def load_calamine(
    path: Path,
    sheet: str | int | None,
    header_rows: int | None,
    *,
    skip_rows: int | None = None,
    cell_range: str | None = None,
    tidy: bool = False,
    sheet_limits: SheetLimits | None = None,
) -> list[tuple[str, pd.DataFrame | None, dict[str, Any], list[str]]]:
    """The sheets of an ``.xls``/``.ods`` workbook as :func:`aisac_core.data.loaders.load_excel` gives those of an
    ``.xlsx`` (same result, options and per-sheet errors); no styles, so no bold/alignment evidence.

    Raises:
        DataError: a file calamine cannot open, an unknown sheet, the errors of ``load_excel`` for the one sheet
            asked for.
    """
    book = CalamineSheets(path, sheet_limits, cell_range)
    try:
        chosen = _pick_sheets(path, book.names, book.names, sheet, cell_range)
        return _sheets_out(chosen, book.read, sheet is not None, header_rows, skip_rows, cell_range, tidy)
    finally:
        book.close()


def openpyxl_fallback(
    path: Path,
    sheet: str | int | None,
    header_rows: int | None,
    skip_rows: int | None,
    cell_range: str | None,
    tidy: bool,
    sheet_limits: SheetLimits | None,
    exc: WorkbookOpenError,
) -> list[tuple[str, pd.DataFrame | None, dict[str, Any], list[str]]]:
    """A workbook openpyxl cannot open (a missing or damaged part: an external link, styles, a drawing) read by
    calamine (:mod:`aisac_core.data.calamine_books`), which reads cell values only; each sheet's notes and
    ``detected.fallback`` say so and what is lost. Raises DataError naming both failures when calamine cannot
    read it either."""
    why = exc.cause
    try:
        out = load_calamine(
            path, sheet, header_rows, skip_rows=skip_rows, cell_range=cell_range, tidy=tidy, sheet_limits=sheet_limits
        )
    except DataError as exc2:
        raise DataError(
            f"cannot open {path} as an Excel workbook: openpyxl failed ({why}) and calamine failed ({exc2})"
        ) from exc
    lost = "cell styles (bold, alignment), formulas' text, comments; merged ranges only where calamine reads them"
    note = f"openpyxl cannot open this workbook ({why}): values read with calamine instead; lost: {lost}"
    for _, _, opts, notes in out:
        notes.insert(0, note)
        if isinstance(opts.get("detected"), dict):
            opts["detected"]["fallback"] = {"reader": "calamine", "openpyxl_error": why, "lost": lost}
    return out
