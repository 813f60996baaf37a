"""``data_inspect``: a compact map of a workbook's sheets that a model can read to choose ``data_load``'s options.

Per sheet (each read sparsely and bounded as for loading, :mod:`aisac_core.data.sheetgrid`): the used range (and the
declared extent when it differs), the blocks of cells (XY-cut, :mod:`aisac_core.data.regions`: tables apart by
>= 2 empty rows or columns), merged ranges with their top-left text and alignment, runs of bold and filled cells
per row, and the first rows and columns of each block with cell coordinates (``B3='Name'``). The map of one sheet
is cut to :data:`MAX_CHARS` characters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aisac_core.data.cells import cell_kind, col_letters, to_a1
from aisac_core.data.errors import DataError
from aisac_core.data.regions import _xy_cut
from aisac_core.data.sheetgrid import SheetGrid, SheetLimits

#: most characters of one sheet's map
MAX_CHARS = 4000
_SHOW_ROWS, _SHOW_COLS, _SHOW_BLOCKS = 4, 6, 8
#: most columns listed per block (every populated column up to this many)
_SHOW_COLUMNS = 40


def _v(v: Any) -> str:
    s = v.isoformat()[:10] if hasattr(v, "isoformat") else str(v)
    s = s.strip().replace("\n", " ")
    return repr(s[:24] + ("…" if len(s) > 24 else "")) if isinstance(v, str) else s


def sheet_map(g: SheetGrid) -> tuple[str, list[str]]:
    """``(map text, block ranges A1)`` of one read sheet (module docstring), the text within :data:`MAX_CHARS`."""
    if not g.n_cells:
        return f"sheet {g.title!r}: empty", []
    R, C = g.rows, g.cols

    def a1(i: int, j: int) -> str:
        return f"{col_letters(C[j] + 1)}{R[i] + 1}"

    occ = [[cell_kind(v) != "empty" for v in row] for row in g.grid]
    blocks = sorted(_xy_cut(occ, (0, 0, len(R) - 1, len(C) - 1), grid=g.grid))
    names = [to_a1(R[t], C[l], R[b], C[r]) for t, l, b, r in blocks]  # noqa: E741
    head = [
        f"sheet {g.title!r}: used {g.used}, {g.n_cells:,} cells" + (f", declared {g.declared}" if g.declared else "")
    ]
    head.append(f"blocks ({len(blocks)}): " + ", ".join(names[:20]) + (" ..." if len(names) > 20 else ""))
    if g.merged_a1:
        aligned = []
        for (t, l, _b, _r), ref in zip(g.merged, g.merged_a1):  # noqa: E741
            how = g.styles.get((t, l), (False, None, None))[2]
            aligned.append(f"{ref}={_v(g.grid[t][l])}" + (f"({how})" if how else ""))
        head.append(f"merged ({len(g.merged_a1)}): " + ", ".join(aligned[:12]) + (" ..." if len(aligned) > 12 else ""))
    runs: list[str] = []
    for i in sorted({i for i, _ in g.styles})[:30]:
        for k, what in ((0, "bold"), (1, "fill")):
            js = sorted(j for (r, j), s in g.styles.items() if r == i and s[k] and occ[i][j])
            if js:
                runs.append(f"{what} {a1(i, js[0])}:{a1(i, js[-1])}" if len(js) > 1 else f"{what} {a1(i, js[0])}")
        al = sorted(
            (j, s[2]) for (r, j), s in g.styles.items() if r == i and s[2] in ("right", "center", "centerContinuous")
        )
        if al and any(occ[i][j] for j, _ in al):
            runs.append(f"{al[0][1]} {a1(i, al[0][0])}:{a1(i, al[-1][0])}")
    if runs:
        head.append("styles: " + "; ".join(runs[:24]) + (" ..." if len(runs) > 24 else ""))
    lines = list(head)
    for (t, l, b, r), name in list(zip(blocks, names))[:_SHOW_BLOCKS]:  # noqa: E741
        lines.append(f"block {name}:")
        shown = [i for i in range(t, b + 1) if any(occ[i][l : r + 1])][:_SHOW_ROWS]
        for i in shown:
            cells = [f"{a1(i, j)}={_v(g.grid[i][j])}" for j in range(l, r + 1) if occ[i][j]][:_SHOW_COLS]
            more = sum(occ[i][l : r + 1]) - len(cells)
            lines.append("  " + " ".join(cells) + (f" (+{more})" if more > 0 else ""))
        first_col = [f"{a1(i, l)}={_v(g.grid[i][l])}" for i in range(t, b + 1) if occ[i][l]][
            _SHOW_ROWS : _SHOW_ROWS + 6
        ]
        if first_col:
            lines.append("  first column further down: " + " ".join(first_col))
        lines.extend(_columns_and_rows(g, occ, (t, l, b, r), a1))
    if len(blocks) > _SHOW_BLOCKS:
        lines.append(f"... {len(blocks) - _SHOW_BLOCKS} more block(s): pass sheet and look at the ranges above")
    text = "\n".join(lines)
    if len(text) > MAX_CHARS:
        text = text[: MAX_CHARS - 20].rsplit("\n", 1)[0] + "\n... (cut)"
    return text, names


def _columns_and_rows(g: SheetGrid, occ: list[list[bool]], box: tuple[int, int, int, int], a1: Any) -> list[str]:
    """Two lines of a block's map: every populated column (its first cell and how many cells it holds), so a
    header or a column that starts below the first rows is visible; and the row classes the table-structure model
    (:mod:`aisac_core.data.structure`) reads, runs of rows per class with its calibrated confidence, so the rows a
    load sets aside (titles, notes, totals) are named."""
    from aisac_core.data.structure import classify

    t, l, b, r = box  # noqa: E741
    cols = []
    for j in range(l, r + 1):
        filled = [i for i in range(t, b + 1) if occ[i][j]]
        if filled:
            cols.append(f"{a1(filled[0], j)}={_v(g.grid[filled[0]][j])}({len(filled)})")
    out = [
        f"  columns ({len(cols)}, first cell and cell count): "
        + " ".join(cols[:_SHOW_COLUMNS])
        + (f" ... (+{len(cols) - _SHOW_COLUMNS})" if len(cols) > _SHOW_COLUMNS else "")
    ]
    filled_merge = {
        (i, j) for (a, c, e, f) in g.merged for i in range(a, e + 1) for j in range(c, f + 1) if (i, j) != (a, c)
    }
    block = [
        [None if (i, j) in filled_merge else g.grid[i][j] for j in range(l, min(r + 1, len(g.grid[i])))]
        for i in range(t, b + 1)
    ]
    try:
        st = classify(block)
    except DataError:
        return out
    runs: list[tuple[str, int, int]] = []
    for row, lab in zip(st.rows, st.labels):
        sheet_row = g.rows[t + row] + 1
        if runs and runs[-1][0] == lab:
            runs[-1] = (lab, runs[-1][1], sheet_row)
        else:
            runs.append((lab, sheet_row, sheet_row))
    text = "; ".join(f"{a}-{z} {lab}" if z > a else f"{a} {lab}" for lab, a, z in runs[:16])
    out.append(
        f"  rows by the table-structure model (confidence {st.confidence:.2f}"
        + (", uncertain" if st.uncertain else "")
        + f"): {text}"
        + (" ..." if len(runs) > 16 else "")
    )
    return out


def inspect_workbook(path: Path, sheet: str | None = None, limits: SheetLimits | None = None) -> dict[str, Any]:
    """The map of every sheet of a workbook (or of ``sheet``): ``{path, sheets: [{sheet, used, blocks: [A1], map}],
    notes}``; a sheet past a limit gives its error as its map. ``.xlsx``/``.xlsm`` through openpyxl (with styles),
    ``.xls``/``.ods`` through pandas' calamine engine (values and ``.xls`` merges, no styles).

    Raises:
        DataError: not a workbook, one that cannot be opened, an unknown sheet.
    """
    import warnings

    import openpyxl

    from aisac_core.data.sheetgrid import read_sheet

    if path.suffix.lower() in (".xls", ".ods"):
        return _inspect_calamine(path, sheet, limits)
    if path.suffix.lower() not in (".xlsx", ".xlsm"):
        raise DataError(f"data_inspect reads workbooks (.xlsx .xlsm .xls .ods); {path.name} is not one")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
        except Exception as exc:  # noqa: BLE001 - BadZipFile, KeyError, InvalidFileException ...
            try:  # never lose a workbook: the values through calamine, as data_load reads it
                res = _inspect_calamine(path, sheet, limits)
            except DataError:
                raise DataError(f"cannot open {path.name} as an Excel workbook ({type(exc).__name__}: {exc})") from exc
            res["notes"] = [
                f"openpyxl cannot open it ({type(exc).__name__}: {str(exc)[:160]}): values read with calamine, no styles"
            ]
            return res
        try:
            sheets = list(wb.worksheets)
            if sheet is not None:
                if sheet not in wb.sheetnames:
                    raise DataError(f"no sheet {sheet!r} in {path.name}; its sheets: {', '.join(wb.sheetnames)}")
                sheets = [wb[sheet]]
            out = []
            for ws in sheets:
                try:
                    g = read_sheet(wb, ws, limits)
                    text, blocks = sheet_map(g)
                    out.append({"sheet": ws.title, "used": g.used, "blocks": blocks, "map": text})
                except DataError as exc:
                    out.append({"sheet": ws.title, "used": None, "blocks": [], "map": str(exc)})
        finally:
            wb.close()
    return {"path": str(path), "sheets": out, "notes": []}


def _inspect_calamine(path: Path, sheet: str | None, limits: SheetLimits | None) -> dict[str, Any]:
    """:func:`inspect_workbook` of an ``.xls``/``.ods`` workbook (read as :func:`aisac_core.data.loaders.load_calamine`
    reads it)."""
    from aisac_core.data.calamine_books import CalamineSheets

    book = CalamineSheets(path, limits)
    names, read = book.names, book.read
    try:
        if sheet is not None and sheet not in names:
            raise DataError(f"no sheet {sheet!r} in {path.name}; its sheets: {', '.join(names)}")
        out = []
        for name in [sheet] if sheet is not None else names:
            try:
                g = read(name)
                text, blocks = sheet_map(g)
                out.append({"sheet": name, "used": g.used, "blocks": blocks, "map": text})
            except DataError as exc:
                out.append({"sheet": name, "used": None, "blocks": [], "map": str(exc)})
    finally:
        book.close()
    return {"path": str(path), "sheets": out, "notes": ["no styles in .xls/.ods maps (calamine reads values)"]}
