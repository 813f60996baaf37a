"""One worksheet's cells read sparsely, with bounded work: the grid region detection reads, and the map
``data_inspect`` shows.

Why: a sheet's declared dimension (``<dimension ref="A1:ALL20000"/>``) and openpyxl's dense iteration make one stray
cell far away cost every cell in between (20 million for ALL20000), and openpyxl's full mode creates one object per
cell of each merged range (2 million for A2:CV20000). Here a workbook is opened in openpyxl's read-only mode (no
merged-cell expansion, sheets streamed) and each sheet's XML is parsed row by row with openpyxl's own sheet parser
(:class:`openpyxl.worksheet._reader.WorkSheetParser`, the parser read-only mode itself iterates with), keeping only
the cells that exist in the file. Then:

- the **used range** is the extent of the cells that hold a value (not the declared dimension);
- the **compact grid**: runs of more than :data:`GAP_KEEP` empty rows (columns) are cut to :data:`GAP_KEEP`, so a
  stray cell 20,000 rows down costs a few rows, while the block structure (tables apart by >= 2 empty rows or
  columns, XY-cut of :mod:`aisac_core.data.regions`) is kept; ``rows``/``cols`` map compact indices back to the
  sheet's (0-based), so every range and column name reported is the sheet's own;
- **limits** (:class:`SheetLimits`, settings ``AISAC_DATA_MAX_SHEET_CELLS`` and ``AISAC_DATA_MAX_MERGED_CELLS``): a
  sheet whose file holds more cells, or whose compact grid is larger, than ``max_cells``, or whose merged ranges
  cover more than ``max_merged_cells`` cells, is refused with a :class:`DataError` naming the limit and the setting
  (the parse stops as soon as the cell count passes the limit).

Merged ranges are filled with their top-left value at the compact grid's positions only (the detection reads them
as the sheet shows them). Styles kept per cell (compact coordinates): bold, a solid fill colour, the horizontal
alignment (``left``, ``center``, ``right``, ``centerContinuous``, ...).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from aisac_core.data.cells import cell_kind, parse_range, to_a1
from aisac_core.data.errors import DataError

#: empty rows (columns) kept of a longer empty run: >= 2 keeps "tables apart" (regions' XY-cut), 3 keeps a margin
GAP_KEEP = 3
#: style records kept per sheet (bold/fill/alignment evidence); a sheet styled cell by cell beyond this keeps the first
MAX_STYLED = 200_000


@dataclass(frozen=True)
class SheetLimits:
    """Bounds of one sheet's load (settings ``AISAC_DATA_MAX_SHEET_CELLS``, ``AISAC_DATA_MAX_MERGED_CELLS``).

    ``max_cells``: cells in the sheet's file (values and formatted empties) and cells of the compact grid;
    ``max_merged_cells``: cells covered by merged ranges in total. Defaults: 2,000,000 and 200,000 (about 1 GB of
    parse at the cell limit is out of reach: a sheet at the limit costs some 20 s and a few hundred MB)."""

    max_cells: int = 2_000_000
    max_merged_cells: int = 200_000


@dataclass
class SheetGrid:
    """A sheet read by :func:`read_sheet`: ``grid`` (compact rows of values, merged ranges filled), ``rows``/``cols``
    (compact index -> the sheet's 0-based row/column), ``merged`` (compact ``(top, left, bottom, right)``),
    ``merged_a1`` (the sheet's own merged ranges as A1, those overlapping the grid), ``styles`` (compact
    ``(row, col)`` -> ``(bold, fill, halign)``), ``n_cells`` (cells holding a value), ``used`` (the used range as
    A1, or None for an empty sheet), ``declared`` (the sheet's declared dimension, when it gives one)."""

    title: str
    grid: list[list[Any]]
    rows: list[int]
    cols: list[int]
    merged: list[tuple[int, int, int, int]] = field(default_factory=list)
    merged_a1: list[str] = field(default_factory=list)
    styles: dict[tuple[int, int], tuple[bool, str | None, str | None]] = field(default_factory=dict)
    n_cells: int = 0
    used: str | None = None
    declared: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def bold(self) -> set[tuple[int, int]]:
        """Compact (row, col) of bold cells."""
        return {k for k, s in self.styles.items() if s[0]}

    def halign(self) -> dict[tuple[int, int], str]:
        """Compact (row, col) -> horizontal alignment, for cells that set one."""
        return {k: s[2] for k, s in self.styles.items() if s[2]}


def _keep(occupied: list[int], lo: int | None = None) -> list[int]:
    """Sorted indices to keep: every occupied index and up to GAP_KEEP of each empty run (before the first too)."""
    if not occupied:
        return []
    out: list[int] = []
    first = occupied[0]
    start = max(0 if lo is None else lo, first - GAP_KEEP)
    out.extend(range(start, first))
    for a, b in zip(occupied, occupied[1:]):
        out.append(a)
        out.extend(range(a + 1, min(b, a + 1 + GAP_KEEP)))
    out.append(occupied[-1])
    return out


class _Styles:
    """Style ids -> (bold, fill, halign), cached per workbook (openpyxl read-only workbooks keep the style tables)."""

    def __init__(self, wb: Any) -> None:
        self.wb = wb
        self.cache: dict[int, tuple[bool, str | None, str | None] | None] = {}

    def get(self, sid: int) -> tuple[bool, str | None, str | None] | None:
        if sid in self.cache:
            return self.cache[sid]
        out = None
        try:
            arr = self.wb._cell_styles[sid]
            font = self.wb._fonts[arr.fontId]
            fill = self.wb._fills[arr.fillId]
            align = self.wb._alignments[arr.alignmentId]
            bold = bool(getattr(font, "b", False))
            colour = None
            if getattr(fill, "patternType", None) == "solid":
                rgb = getattr(getattr(fill, "fgColor", None), "rgb", None)
                colour = rgb if isinstance(rgb, str) else "theme"
            h = getattr(align, "horizontal", None)
            h = h if h in ("left", "center", "right", "centerContinuous", "justify", "distributed") else None
            if bold or colour or h:
                out = (bold, colour, h)
        except (IndexError, AttributeError, TypeError):
            out = None
        self.cache[sid] = out
        return out


def read_sheet(
    wb: Any, ws: Any, limits: SheetLimits | None = None, cell_range: str | None = None, with_styles: bool = True
) -> SheetGrid:
    """The cells of ``ws`` (a worksheet of ``wb``, an openpyxl workbook opened with ``read_only=True,
    data_only=True``) as a compact :class:`SheetGrid` (module docstring). ``cell_range`` (A1): only the cells inside
    it are kept (the detection then reads that block).

    Raises:
        DataError: the sheet passes a limit of ``limits`` (the message names the limit, its setting and what to
            do), or ``cell_range`` is malformed.
    """
    from openpyxl.worksheet._reader import WorkSheetParser

    lim = limits or SheetLimits()
    title = ws.title
    box = parse_range(cell_range) if cell_range else None
    styles_of = _Styles(wb) if with_styles else None
    vrows: list[int] = []
    vcols: list[array[int]] = []
    vvals: list[list[Any]] = []
    styled: dict[tuple[int, int], tuple[bool, str | None, str | None]] = {}
    parsed = 0
    declared = None
    ext: tuple[int, int] | None = None
    with ws._get_source() as src:
        parser = WorkSheetParser(
            src,
            ws._shared_strings,
            data_only=True,
            epoch=wb.epoch,
            date_formats=wb._date_formats,
            timedelta_formats=wb._timedelta_formats,
        )
        for idx, cells in parser.parse():
            parsed += len(cells) + 1
            if parsed > lim.max_cells:
                raise DataError(
                    f"sheet {title!r} holds more than {lim.max_cells:,} cells (limit AISAC_DATA_MAX_SHEET_CELLS): "
                    "not read; raise the setting to load it, or save the part you need as its own sheet or CSV"
                )
            r = idx - 1
            if box is not None and cells:
                ext = _extend(ext, r, [c["column"] - 1 for c in cells if c["value"] is not None])
            if box is not None and not box[0] <= r <= box[2]:
                continue
            cs: array[int] = array("i")
            vs: list[Any] = []
            for c in cells:
                col = c["column"] - 1
                if box is not None and not box[1] <= col <= box[3]:
                    continue
                v = c["value"]
                sid = c["style_id"]
                if sid and styles_of is not None and len(styled) < MAX_STYLED:
                    st = styles_of.get(sid)
                    if st is not None:
                        styled[(r, col)] = st
                if v is None or (isinstance(v, str) and not v.strip()):
                    continue
                cs.append(col)
                vs.append(v)
            if vs:
                vrows.append(r)
                vcols.append(cs)
                vvals.append(vs)
        merges = [m.ref for m in (parser.merged_cells.mergeCell if parser.merged_cells else [])]
    if cell_range:
        _check_range(cell_range, ext)
    try:
        dims = ws.calculate_dimension() if getattr(ws, "_max_row", None) else None
        declared = dims if dims and dims != "A1:A1" else None
    except (ValueError, TypeError, AttributeError):
        declared = None
    return compact(title, vrows, vcols, vvals, merges, lim, cell_range, styled, declared)


def compact(
    title: str,
    vrows: list[int],
    vcols: list[array[int]],
    vvals: list[list[Any]],
    merges: list[str],
    limits: SheetLimits,
    cell_range: str | None = None,
    styled: dict[tuple[int, int], tuple[bool, str | None, str | None]] | None = None,
    declared: str | None = None,
) -> SheetGrid:
    """The compact :class:`SheetGrid` of a sheet's value cells: ``vrows`` (0-based rows holding values, ascending),
    per row its columns ``vcols`` and values ``vvals``; ``merges`` (A1 merged ranges), ``styled`` (sheet
    ``(row, col)`` -> style). ``cell_range``: the cells were cut to it (its top-left rows/columns are kept, and
    it must overlap the used area). Raises DataError past ``limits`` or for a range outside the sheet."""
    lim = limits
    styled = styled or {}
    box = parse_range(cell_range) if cell_range else None
    n_cells = sum(len(v) for v in vvals)
    mranges: list[tuple[int, int, int, int]] = []
    area = 0
    for ref in merges:
        try:
            t, l, b, rr = parse_range(str(ref))
        except DataError:
            continue
        if box is not None and (b < box[0] or t > box[2] or rr < box[1] or l > box[3]):
            continue
        mranges.append((t, l, b, rr))
        area += (b - t + 1) * (rr - l + 1)
    if area > lim.max_merged_cells:
        big = max(mranges, key=lambda m: (m[2] - m[0] + 1) * (m[3] - m[1] + 1))
        raise DataError(
            f"sheet {title!r}: merged ranges cover {area:,} cells (the largest {to_a1(*big)}), more than the limit of "
            f"{lim.max_merged_cells:,} (AISAC_DATA_MAX_MERGED_CELLS): not read. Pass range= to read a block beside "
            "the merged area, or raise the setting"
        )
    g = SheetGrid(title, [], [], [], n_cells=n_cells, declared=declared)
    if not n_cells:
        return g
    occ_cols = sorted({c for cs in vcols for c in cs})
    rows = _keep(vrows, box[0] if box else None)
    cols = _keep(occ_cols, box[1] if box else None)
    if box is not None:  # the range's own top-left rows/columns (skip_rows counts from them)
        rows = sorted(set(rows) | set(range(box[0], min(box[0] + GAP_KEEP, rows[0]))))
        cols = sorted(set(cols) | set(range(box[1], min(box[1] + GAP_KEEP, cols[0]))))
    if len(rows) * len(cols) > lim.max_cells:
        raise DataError(
            f"sheet {title!r}: its cells spread over {len(rows):,} rows x {len(cols):,} columns even with empty "
            f"runs cut ({len(rows) * len(cols):,} cells), more than AISAC_DATA_MAX_SHEET_CELLS={lim.max_cells:,}: "
            "not read. Pass range= to read one block, or raise the setting"
        )
    g.used = to_a1(vrows[0], occ_cols[0], vrows[-1], occ_cols[-1])
    rpos = {r: k for k, r in enumerate(rows)}
    cpos = {c: k for k, c in enumerate(cols)}
    width = len(cols)
    grid: list[list[Any]] = [[None] * width for _ in rows]
    for r, cs, vs in zip(vrows, vcols, vvals):
        line = grid[rpos[r]]
        for c, v in zip(cs, vs):
            line[cpos[c]] = v
    for t, l, b, rr in mranges:
        t2, b2 = bisect_left(rows, t), bisect_right(rows, b) - 1
        l2, r2 = bisect_left(cols, l), bisect_right(cols, rr) - 1
        if t2 > b2 or l2 > r2:
            continue
        g.merged_a1.append(to_a1(t, l, b, rr))
        if rows[t2] != t or cols[l2] != l:  # the top-left cell is empty and cut away: nothing to fill
            continue
        g.merged.append((t2, l2, b2, r2))
        v = grid[t2][l2]
        for i in range(t2, b2 + 1):
            for j in range(l2, r2 + 1):
                grid[i][j] = v
    g.grid, g.rows, g.cols = grid, rows, cols
    g.styles = {(rpos[r], cpos[c]): s for (r, c), s in styled.items() if r in rpos and c in cpos}
    if len(styled) >= MAX_STYLED:
        g.notes.append(f"styles read for the first {MAX_STYLED:,} formatted cells only")
    if declared and declared != g.used:
        d = parse_range(declared)
        if (d[2] - d[0] + 1) * (d[3] - d[1] + 1) > 4 * len(rows) * width:
            g.notes.append(f"the sheet declares the extent {declared}; its cells with values span {g.used}")
    return g


def read_dense(
    title: str, rows: Any, merges: list[str], limits: SheetLimits | None = None, cell_range: str | None = None
) -> SheetGrid:
    """A compact :class:`SheetGrid` from dense rows of values (``rows``: an iterable of row sequences from A1, as
    pandas' ``read_excel(header=None)`` gives for ``.xls``/``.ods``); ``merges``: A1 merged ranges. Raises
    DataError past ``limits``."""
    lim = limits or SheetLimits()
    box = parse_range(cell_range) if cell_range else None
    vrows: list[int] = []
    vcols: list[array[int]] = []
    vvals: list[list[Any]] = []
    ext: tuple[int, int] | None = None
    for r, row in enumerate(rows):
        if box is not None:
            ext = _extend(ext, r, [c for c, v in enumerate(row) if cell_kind(v) != "empty"])
        if box is not None and not box[0] <= r <= box[2]:
            continue
        cs: array[int] = array("i")
        vs: list[Any] = []
        for c, v in enumerate(row):
            if box is not None and not box[1] <= c <= box[3]:
                continue
            if cell_kind(v) == "empty" and not (isinstance(v, str) and v.strip()):
                continue
            cs.append(c)
            vs.append(v)
        if vs:
            vrows.append(r)
            vcols.append(cs)
            vvals.append(vs)
    if sum(len(v) for v in vvals) > lim.max_cells:
        raise DataError(
            f"sheet {title!r} holds more than {lim.max_cells:,} cells (limit AISAC_DATA_MAX_SHEET_CELLS): "
            "not read; raise the setting to load it"
        )
    if cell_range:
        _check_range(cell_range, ext)
    return compact(title, vrows, vcols, vvals, merges, lim, cell_range)


def _extend(ext: tuple[int, int] | None, r: int, cols: list[int]) -> tuple[int, int] | None:
    """The (last row, last column) holding a value so far, with row ``r``'s value columns ``cols``."""
    if not cols:
        return ext
    return (r, max(max(cols), ext[1] if ext else 0))


def _check_range(cell_range: str, ext: tuple[int, int] | None) -> None:
    """DataError when ``cell_range`` starts below or right of the sheet's last value (``ext``)."""
    n_rows, n_cols = (ext[0] + 1, ext[1] + 1) if ext else (0, 0)
    parse_range(cell_range, n_rows, n_cols)


def grid_has_values(grid: list[list[Any]]) -> bool:
    """Whether any cell of ``grid`` holds a value (per :func:`aisac_core.data.regions.cell_kind`)."""
    return any(cell_kind(v) != "empty" for row in grid for v in row)
