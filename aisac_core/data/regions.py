"""Finding the table in a spreadsheet: pure functions over a grid of cell values (rows of values, merged ranges
filled with their top-left value) plus the merged ranges and, optionally, the bold cells.

Rules (docs/data.md "Table regions"; XY-cut block segmentation as in Nagy & Seth 1984, header/body split by
column-type profile as in the spreadsheet table-detection literature, e.g. Koci et al. 2016):

1. **Blocks.** The used area is cut recursively at runs of >= 2 fully empty rows or >= 2 fully empty columns
   (XY-cut; one empty row or column, as in ledgers with spacer rows, stays inside a table). The block with the
   most non-empty cells is the table's block; content outside it is reported (``skipped_above`` /
   ``skipped_below`` quote it when it lies above/below).
2. **Column profile.** A column is numeric when >= 60 % of its non-empty cells in the block, or >= 80 % of those
   in the block's lower half, are numbers (numbers, booleans, dates, numeric strings).
3. **Body.** A row is *data* when at least half of its cells in numeric columns are numbers; the body starts at
   the first data row whose next three non-empty rows hold no header-like row (text in most numeric columns).
   A table without numeric columns starts its body after its first wide row (>= 60 % of the widest row).
4. **Header rows** are the non-empty rows right above the body. The lowest is the leaf row. A row above it is
   also a header row only when it looks like a group label row: it has a merged range, or its labels stand over
   columns the rows below leave empty (a label over a spanning group, or a "first" merged over two rows), or
   the rows below repeat labels (No/Yes under Child and Adult), or it and the leaf row are bold. Long text
   (> 60 characters) never makes a header. At most 10 rows. Rows above the header are notes/titles.
5. **Notes below.** After the last data row, rows with one cell, rows starting with ``Source``, ``Note``,
   ``*``, ``†`` or a footnote digit, and text-only rows filling less than half the width are footnotes; so are
   rows whose cells lie outside the table's columns (a second table to the side).
6. **Columns** are those with a header label or a body value; names join header rows with ``|`` (upper rows
   forward-filled across empty cells, a label repeated only by a fill written once), duplicates get ``.1``.
   A column without a header cell is ``col_N`` (N: sheet column number), or ``label`` for a text row-label column
   left of the first headed numeric column; merged-copy, stray-note and unit-sign (``$``) columns are dropped.
   Blocks: the first in reading order with >= half the cells of the largest (others in ``other_tables``); hour
   rows (1..24) and month-date rows count as header rows; form-field (``CC Name:``) and marker rows do not.
7. **Pivot.** Text row-label columns on the left, >= 2 numeric value columns, and either >= 2 header rows or
   value headers that are numbers/dates (years, months) - a cross-tab. ``unpivot`` turns it into a long frame.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from itertools import pairwise
from typing import Any

from aisac_core.data.cells import NA_STRINGS, cell_kind, cell_text, col_letters, parse_range, to_a1
from aisac_core.data.errors import DataError
from aisac_core.data.headers import MAX_HEADER_ROWS, _header_rows, header_names, join_header_levels
from aisac_core.data.layout import CONFIDENT, fine_kind, layout_confidence, summary_block_start

__all__ = [
    "MAX_HEADER_ROWS",
    "NA_STRINGS",
    "cell_kind",
    "col_letters",
    "detect_region",
    "header_names",
    "join_header_levels",
    "parse_range",
    "to_a1",
]
_text = cell_text

NUMERIC_SHARE = 0.6
LOWER_SHARE = 0.8
NOTE_RE = re.compile(r"^\s*(source|sources|note|notes|nb|n\.b\.|\*|†|‡|\(\d+\)|\d\)|[¹²³])", re.IGNORECASE)


# -- blocks ---------------------------------------------------------------------------------------------------
def _xy_cut(
    occ: list[list[bool]], box: tuple[int, int, int, int], depth: int = 0, grid: list[list[Any]] | None = None
) -> list[tuple[int, int, int, int]]:
    """Recursive XY-cut of ``box`` (top, left, bottom, right) at runs of >= 2 empty rows or columns, with the box
    shrunk to its content first; with ``grid``, also at one empty row or column between two parts that start with
    the same header labels (small multiples, panels repeating one header). Returns the leaf boxes."""
    t, l, b, r = box
    rows = [i for i in range(t, b + 1) if any(occ[i][l : r + 1])]
    if not rows:
        return []
    cols = [j for j in range(l, r + 1) if any(occ[i][j] for i in rows)]
    t, b, l, r = rows[0], rows[-1], cols[0], cols[-1]
    if depth > 40:
        return [(t, l, b, r)]
    for seq, horizontal in ((rows, True), (cols, False)):
        for a, nxt in zip(seq, seq[1:]):
            one = (t, l, a, r) if horizontal else (t, l, b, a)
            two = (nxt, l, b, r) if horizontal else (t, nxt, b, r)
            if (
                nxt - a > 2
                or (not horizontal and nxt - a == 2 and _side_by_side(occ, t, b, l, a, nxt, r))
                or (nxt - a == 2 and grid is not None and _same_head(grid, occ, one, two))
            ):
                return _xy_cut(occ, one, depth + 1, grid) + _xy_cut(occ, two, depth + 1, grid)
    return [(t, l, b, r)]


def _same_head(
    grid: list[list[Any]], occ: list[list[bool]], one: tuple[int, int, int, int], two: tuple[int, int, int, int]
) -> bool:
    """Whether two parts of a block start with the same labels: the first row with >= 2 cells of each holds the same
    texts (>= 2 of them), so the second part repeats the first's header (a panel of small multiples)."""

    def head(bx: tuple[int, int, int, int]) -> list[str]:
        t, l, b, r = bx
        for i in range(t, b + 1):
            cells = [grid[i][j] for j in range(l, r + 1) if occ[i][j]]
            if len(cells) >= 2:
                return sorted(str(v).strip() for v in cells if isinstance(v, str))
        return []

    h1 = head(one)
    return len(h1) >= 2 and h1 == head(two)


def _side_by_side(occ: list[list[bool]], t: int, b: int, l: int, a: int, nxt: int, r: int) -> bool:
    """Two tables beside each other with one empty column between them: the rows used left of the gap
    (columns ``l..a``) and right of it (``nxt..r``) overlap in at most a third of the shorter span."""
    left = [i for i in range(t, b + 1) if any(occ[i][l : a + 1])]
    right = [i for i in range(t, b + 1) if any(occ[i][nxt : r + 1])]
    if not left or not right:
        return False
    overlap = min(left[-1], right[-1]) - max(left[0], right[0]) + 1
    return overlap * 3 <= min(left[-1] - left[0], right[-1] - right[0]) + 1


def _row_text(grid: list[list[Any]], i: int, kinds: list[list[str]]) -> str:
    return " | ".join(_text(v) for v, k in zip(grid[i], kinds[i]) if k != "empty")[:120]


# -- detection ------------------------------------------------------------------------------------------------
def detect_region(
    grid: list[list[Any]],
    merged: list[tuple[int, int, int, int]] | None = None,
    bold: set[tuple[int, int]] | None = None,
    *,
    header_rows: int | None = None,
    skip_rows: int | None = None,
    cell_range: str | None = None,
    rows_map: Sequence[int] | None = None,
    cols_map: Sequence[int] | None = None,
    halign: Mapping[tuple[int, int], str] | None = None,
) -> dict[str, Any]:
    """Find the table in ``grid`` (rows of cell values, merged cells already carrying their top-left value).

    Args:
        merged: merged ranges as 0-based inclusive ``(top, left, bottom, right)``.
        bold: (row, column) of bold cells (optional evidence for multi-row headers).
        header_rows: fixes the number of header rows (0-10) above the body.
        skip_rows: rows of the sheet (or of ``cell_range``) to drop above the table; the table then starts at the
            first non-empty row after them (no note detection above).
        cell_range: an A1 range; only that block is read (no block search, no notes trimmed).
        rows_map, cols_map: the sheet's 0-based row/column of each grid row/column, for a compact grid
            (:mod:`aisac_core.data.sheetgrid`: long empty runs cut); ranges, ``col_N`` names, row numbers and
            ``skip_rows`` are the sheet's. Default: the grid is the sheet from A1.
        halign: (row, column) -> horizontal alignment, the evidence for how far group labels reach
            (:func:`aisac_core.data.layout.group_spans`).

    Returns ``{box: (top, left, bottom, right), range: "A3:F20", header: [row], body: [row], columns: [col],
    names: [str], skipped_above: [text], skipped_below: [text], pivot: {labels: [col], values: [col], levels:
    [name]} | None, notes: [str], other_tables: [A1], confidence: 0..1, ambiguous: {reasons, alternatives} |
    None}`` (rows/columns 0-based indices of ``grid``; ranges A1 of
    the sheet).

    Raises:
        DataError: malformed or out-of-sheet ``cell_range``; ``skip_rows`` leaving nothing; ``header_rows`` as
            large as the block or larger.
    """
    # long function: one scan of a sheet's rows; its cases share the running region state
    merged = list(merged or [])
    n_rows = len(grid)
    n_cols = max((len(r) for r in grid), default=0)
    rmap = list(rows_map) if rows_map is not None else list(range(n_rows))
    cmap = list(cols_map) if cols_map is not None else list(range(n_cols))

    def a1(t: int, l: int, b: int, r: int) -> str:
        return to_a1(rmap[t], cmap[l], rmap[b], cmap[r])

    def letter(j: int) -> str:
        return col_letters(cmap[j] + 1)

    kinds = [[cell_kind(v) for v in row] + ["empty"] * (n_cols - len(row)) for row in grid]
    occ = [[k != "empty" for k in row] for row in kinds]
    filled = {(i, j) for (t, l, b, r) in merged for i in range(t, b + 1) for j in range(l, r + 1) if (i, j) != (t, l)}
    notes: list[str] = []
    others: list[str] = []
    explicit = cell_range is not None
    if cell_range is not None:
        t, l, b, r = parse_range(cell_range, (rmap[-1] + 1) if rmap else 0, (cmap[-1] + 1) if cmap else 0)
        t, l = bisect_left(rmap, t), bisect_left(cmap, l)
        b, r = min(bisect_right(rmap, b), n_rows) - 1, min(bisect_right(cmap, r), n_cols) - 1
        if t > b or l > r:
            raise DataError(f"the range {cell_range} holds no values")
        box = (t, l, b, r)
    else:
        box = (0, 0, n_rows - 1, n_cols - 1)
    if skip_rows:
        if rmap[box[0]] + skip_rows > rmap[box[2]]:
            raise DataError(
                f"skip_rows={skip_rows} skips every row of the {'range' if explicit else 'sheet'} "
                f"({rmap[box[2]] - rmap[box[0]] + 1} rows): nothing is left to load"
            )
        box = (bisect_left(rmap, rmap[box[0]] + skip_rows), box[1], box[2], box[3])
    if not explicit:
        blocks = _xy_cut(occ, box, grid=grid)
        if not blocks:
            raise DataError("no cell with a value in the part of the sheet left after skip_rows")
        size = {bx: sum(sum(occ[i][bx[1] : bx[3] + 1]) for i in range(bx[0], bx[2] + 1)) for bx in blocks}
        biggest = max(size.values())
        box = min((bx for bx in blocks if size[bx] * 2 >= biggest), key=lambda bx: (bx[0], bx[1]))
        others = [a1(*bx) for bx in sorted(blocks) if bx != box and size[bx] >= 4]
        if len(blocks) > 1:
            notes.append(
                f"{len(blocks)} separate blocks of cells on the sheet; the first large one ({a1(*box)}) "
                "is the table (pass range= to read another)"
            )
    t, l, b, r = box
    rows = [i for i in range(t, b + 1) if any(occ[i][l : r + 1])]
    if not rows:
        raise DataError(f"the range {a1(*box)} holds no values")
    width = r - l + 1
    cols = range(l, r + 1)

    def count(i: int) -> int:
        return sum(occ[i][l : r + 1])

    # 2. column profile
    lower = rows[len(rows) // 2 :]

    def share(rs: list[int], j: int) -> tuple[int, int]:
        ks = [kinds[i][j] for i in rs if kinds[i][j] != "empty"]
        return sum(k == "num" for k in ks), len(ks)

    numeric = set()
    for j in cols:
        n, m = share(rows, j)
        n2, m2 = share(lower, j)
        if (m >= 2 and n >= 2 and n / m >= NUMERIC_SHARE) or (
            m2 >= 1 and n2 >= 1 and n2 / m2 >= LOWER_SHARE and n >= 2
        ):
            numeric.add(j)

    def cls(i: int) -> str:
        ks = [kinds[i][j] for j in numeric if kinds[i][j] != "empty"]
        if not ks or (width >= 3 and count(i) == 1 and ks[0] == "text"):
            return "label"  # a one-cell row is a section label or title, not a header
        nums = sum(k == "num" for k in ks)
        return "data" if nums * 2 >= len(ks) else "headerish"

    classes = {i: cls(i) for i in rows}
    data_rows = [i for i in rows if classes[i] == "data"]
    for i, nxt in pairwise(data_rows):  # e.g. hours 1..24 or month dates over the values
        prev = next((k for k in reversed(rows) if k < i), None)
        labelled = prev is not None and len({_text(grid[prev][j]) for j in numeric if kinds[prev][j] == "text"}) >= 2
        if (
            not labelled
            and _numeric_labels(grid, kinds, i, sorted(numeric), lower)
            and not _numeric_labels(grid, kinds, nxt, sorted(numeric), lower)
        ):
            classes[i] = "headerish"

    # 3. body start
    start_k = None
    if numeric:
        last_data = max((i for i in rows if classes[i] == "data"), default=-1)
        for k, i in enumerate(rows):  # a header-like row with no data under it is a footer, not a later header
            if classes[i] == "data" and not any(
                classes[x] == "headerish" and x < last_data for x in rows[k + 1 : k + 4]
            ):
                start_k = k
                break
    if start_k is None:  # no numeric columns (or no clean data row): the body follows the first wide row
        widest = max(count(i) for i in rows)
        # scattered one-cell rows (no row is wide): the first row is the header candidate, not an error
        first_wide = next((k for k, i in enumerate(rows) if count(i) >= max(2, 0.6 * widest) or width == 1), 0)
        start_k = min(first_wide + 1, len(rows) - 1) if len(rows) > 1 else 0
        if len(rows) == 1:
            start_k = 0
    if numeric and start_k:
        heads = [k for k in range(start_k) if classes[rows[k]] == "headerish"]
        if heads and rows[heads[-1] + 1] != rows[heads[-1]] + 1:  # label rows after a gap below the header: body
            start_k = heads[-1] + 1
        elif not heads:  # label rows directly above the data under another label row: data (names, titles)
            while (
                start_k >= 2
                and classes[rows[start_k - 1]] == "label" == classes[rows[start_k - 2]]
                and rows[start_k - 1] + 1 == rows[start_k]
                and rows[start_k - 2] + 1 == rows[start_k - 1]
                and count(rows[start_k - 2]) >= 2
            ):
                start_k -= 1
    while (
        start_k >= 2
        and width >= 3
        and count(rows[start_k - 1]) == 1
        and count(rows[start_k - 2]) >= 2
        and header_rows is None
    ):  # a one-cell section label right under the header belongs to the body
        start_k -= 1
    # 4. header rows
    above = rows[:start_k]
    types = {j: _dominant([fine_kind(grid[i][j]) for i in rows[start_k : start_k + 200] if occ[i][j]]) for j in cols}
    header: list[int] = []
    if header_rows is not None:
        if header_rows >= len(rows):
            raise DataError(
                f"header_rows={header_rows} but the table block {a1(*box)} has only {len(rows)} "
                f"non-empty row(s): at least one row must remain for data (pass a smaller header_rows "
                "or a wider range)"
            )
        detected = _header_rows(grid, kinds, occ, above, l, r, filled, merged, bold, col_types=types)
        if header_rows <= len(detected) or explicit or skip_rows:
            anchor = rows.index(detected[0]) if detected and not (explicit or skip_rows) else 0
        else:
            anchor = max(0, rows.index(detected[-1]) + 1 - header_rows) if detected else max(0, start_k - header_rows)
        header = rows[anchor : anchor + header_rows]
        start_k = anchor + header_rows
    elif explicit or skip_rows:
        header = _header_rows(grid, kinds, occ, above, l, r, filled, merged, bold, True, types)
        if not header and above and all(kinds[i][j] in ("text", "empty") for i in above[:1] for j in cols):
            header = above[:1]
        start_k = (rows.index(header[-1]) + 1) if header else 0
        if above and not header:
            start_k = 0
    else:
        header = _header_rows(grid, kinds, occ, above, l, r, filled, merged, bold, col_types=types)
    top_k = rows.index(header[0]) if header else start_k
    skipped_above = [_row_text(grid, i, kinds) for i in range(rows[top_k]) if any(occ[i])]
    # 5. body end and footnotes
    body = rows[start_k:]
    table_cols = {j for i in header + body[:3] for j in cols if occ[i][j]}
    end = len(body)
    while end > 0:
        i = body[end - 1]
        texts = [kinds[i][j] for j in cols if occ[i][j]]
        first = next((_text(grid[i][j]) for j in cols if occ[i][j]), "")
        if explicit:
            break
        if classes[i] == "data" and numeric:
            break
        if classes[i] == "headerish" and numeric and not explicit:  # text under value columns: a footer
            end -= 1
            continue
        note_like = (
            (len(texts) == 1 and width >= 2)
            or bool(NOTE_RE.match(first))
            or (all(k == "text" for k in texts) and len(texts) < 0.5 * len(table_cols) and bool(numeric))
        )
        if not note_like:
            break
        end -= 1
    if not explicit:  # a row whose cells lie mostly outside the table's columns ends the table
        for k, i in enumerate(body[:end]):
            if k < 1:
                continue
            cells = [j for j in cols if occ[i][j] and (i, j) not in filled]
            if (
                cells
                and sum(j not in table_cols for j in cells) * 2 > len(cells)
                and not any(j in table_cols for j in cells if kinds[i][j] == "num")
            ):
                end = k
                while end > 1 and sum(occ[body[end - 1]][l : r + 1]) == 1 and classes[body[end - 1]] != "data":
                    end -= 1  # the next section's one-cell title
                break
    body_rows = body[:end]
    if not explicit and body_rows:  # a summary block under the table (Mean, SD, Min, Max ...) is not data
        firsts = [
            next((cell_text(grid[i][j]) for j in cols if occ[i][j] and (i, j) not in filled), "") for i in body_rows
        ]
        gaps = [k > 0 and body_rows[k] - body_rows[k - 1] > 1 for k in range(len(body_rows))]
        cut = summary_block_start(firsts, gaps)
        if cut is not None:
            notes.append(
                f"{len(body_rows) - cut} row(s) below the table set aside as a summary block, not data "
                f"({', '.join(f for f in firsts[cut : cut + 6])}): listed in skipped_below"
            )
            body_rows = body_rows[:cut]
    skipped_below = [
        _row_text(grid, i, kinds)
        for i in range(body_rows[-1] + 1 if body_rows else rows[-1] + 1, n_rows)
        if any(occ[i])
    ]
    # 6. columns and names
    keep = [j for j in cols if any(occ[i][j] for i in body_rows) or any(occ[i][j] for i in header)]
    body_empty = [j for j in keep if not any(occ[i][j] for i in body_rows)]
    if body_rows and body_empty:
        keep = [j for j in keep if j not in body_empty]
        notes.append(
            f"{len(body_empty)} column(s) with a header but no values dropped "
            f"({', '.join(letter(j) for j in body_empty[:10])})"
        )
    keep = _drop_columns(grid, kinds, header, body_rows, keep, filled, notes, cmap)
    undecided: list[str] = []
    names = header_names(
        grid, header, keep, filled, cmap, merged=merged, halign=halign, numeric=numeric, undecided=undecided
    )
    names = _label_names(grid, kinds, header, keep, names, numeric, filled, cmap)
    # 8. confidence: below CONFIDENT (and no option given) the block as a plain grid with generated names
    below = [i for i in rows if body_rows and i > body_rows[-1]]
    alts: list[tuple[str, int]] = []
    confidence, reasons = layout_confidence(grid, kinds, header, body_rows, keep, numeric, below, undecided, alts)
    ambiguous = None
    if confidence < CONFIDENT:
        reading = {"header_rows": len(header), "range": "", "columns": names[:8]}
        grid_cols = [j for j in cols if any(occ[i][j] for i in rows)]
        options: list[dict[str, Any]] = [
            reading,
            {"header_rows": 0, "range": a1(rows[0], l, rows[-1], r), "columns": "col_N"},
        ]
        ambiguous = {"reasons": [_sheet_rows(x, rmap) for x in reasons], "alternatives": options}
        for what, k in alts:  # the readings the signs point to (not loadable by options: described)
            if what == "header_row":
                options.append(
                    {"header": f"row {rmap[k] + 1} (at the bottom)", "data": a1(rows[0], l, max(rows[0], k - 1), r)}
                )
            elif what == "header_column":
                options.append({"header": f"column {letter(k)} (at the right)"})
            else:
                options.append(
                    {"transposed": f"column {letter(k)} names the variables, one per row (transpose after loading)"}
                )
        if header_rows is None and not explicit and not skip_rows:
            first_row = header[0] if header else (body_rows[0] if body_rows else rows[0])
            last = body_rows[-1] if body_rows else rows[-1]
            reading["range"] = a1(first_row, min(keep) if keep else l, last, max(keep) if keep else r)
            header, body_rows, keep = [], rows, grid_cols
            names = [f"col_{cmap[j] + 1}" for j in keep]
            skipped_above = [_row_text(grid, i, kinds) for i in range(rows[0]) if any(occ[i])]
            skipped_below = []
            notes.append(
                "layout ambiguous (" + "; ".join(reasons[:2]) + "): loaded as a plain grid with "
                "generated column names; data_inspect shows the sheet, then pass header_rows, skip_rows or range"
            )
    # 7. pivot
    pivot = _pivot(grid, kinds, header, body_rows, keep, numeric, body_empty, l)
    if len(header) > 1:
        notes.append(
            f"{len(header)}-row header (rows {', '.join(str(rmap[h] + 1) for h in header)}): level names joined "
            "with '|'"
        )
    last = body_rows[-1] if body_rows else (header[-1] if header else rows[-1])
    first_row = header[0] if header else (body_rows[0] if body_rows else rows[0])
    rng = a1(first_row, min(keep) if keep else l, last, max(keep) if keep else r)
    return {
        "box": box,
        "range": rng,
        "header": header,
        "body": body_rows,
        "columns": keep,
        "names": names,
        "skipped_above": skipped_above,
        "skipped_below": skipped_below,
        "pivot": pivot,
        "notes": notes,
        "other_tables": others,
        "confidence": confidence,
        "ambiguous": ambiguous,
    }


def _dominant(kinds: list[str]) -> set[str]:
    """The kind of >= 60 % of a column's values (NUMERIC_SHARE), as a one-element set; empty when none dominates."""
    for k in set(kinds):
        if kinds.count(k) >= NUMERIC_SHARE * len(kinds):
            return {k}
    return set()


def _sheet_rows(text: str, rmap: Sequence[int]) -> str:
    """``row N`` (a grid index) in ``text`` as the sheet's 1-based row number."""
    return re.sub(r"\brow (\d+)", lambda m: f"row {rmap[int(m.group(1))] + 1}", text)


def _headed(
    grid: list[list[Any]], kinds: list[list[str]], header: list[int], j: int, filled: set[tuple[int, int]]
) -> bool:
    return any(kinds[i][j] != "empty" and (i, j) not in filled for i in header)


def _drop_columns(
    grid: list[list[Any]],
    kinds: list[list[str]],
    header: list[int],
    body: list[int],
    keep: list[int],
    filled: set[tuple[int, int]],
    notes: list[str],
    cmap: Sequence[int] | None = None,
) -> list[int]:
    """``keep`` without the columns a person would not read as columns (each dropped with a note): a column that
    holds only copies of a merged cell to its left; a column without a header cell holding one stray value
    (a note beside a table of >= 3 rows); a column without a header cell holding one repeated symbol
    (``$``, ``%``: the unit of its neighbour)."""
    out = []
    for j in keep:
        cl = col_letters((cmap[j] if cmap is not None else j) + 1)
        cells = [i for i in header + body if kinds[i][j] != "empty"]
        vals = {_text(grid[i][j]) for i in body if kinds[i][j] != "empty"}
        headed = _headed(grid, kinds, header, j, filled)
        if cells and all((i, j) in filled for i in cells):
            notes.append(f"column {cl} dropped: only copies of merged cells")
        elif not headed and len(body) >= 3 and len(cells) == 1:
            notes.append(f"column {cl} dropped: one stray cell beside the table ({_text(grid[cells[0]][j])[:40]!r})")
        elif not headed and len(vals) == 1 and not any(ch.isalnum() for ch in next(iter(vals))) and len(cells) >= 2:
            notes.append(f"column {cl} dropped: only the unit sign {next(iter(vals))!r}")
        else:
            out.append(j)
    return out


def _label_names(
    grid: list[list[Any]],
    kinds: list[list[str]],
    header: list[int],
    keep: list[int],
    names: list[str],
    numeric: set[int],
    filled: set[tuple[int, int]],
    cmap: Sequence[int] | None = None,
) -> list[str]:
    """Row-label columns of a statement/pivot layout without a header cell (text columns left of the first
    numeric column that has a header) are named ``label`` (``label.1``, ...) instead of ``col_N``."""
    first = next((j for j in keep if j in numeric and _headed(grid, kinds, header, j, filled)), None)
    if first is None:
        return names
    out, n = [], 0
    for j, name in zip(keep, names):
        if j < first and j not in numeric and name == f"col_{(cmap[j] if cmap is not None else j) + 1}":
            name = "label" if n == 0 else f"label.{n}"
            n += 1
        out.append(name)
    return out


def _numeric_labels(
    grid: list[list[Any]], kinds: list[list[str]], i: int, numeric: list[int], lower: list[int]
) -> bool:
    """Row ``i`` labels the numeric columns although its cells are numbers: >= 4 integers rising by one from left to
    right (hours 1..24, periods), or >= 2 dates over columns whose lower half holds no dates (months)."""
    cells = [j for j in numeric if kinds[i][j] == "num"]
    vals = [grid[i][j] for j in cells]
    if len(cells) >= 4 and all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in vals):
        try:
            nums = [float(v) for v in vals]
        except ValueError:
            return False
        return all(n.is_integer() for n in nums) and all(b - a == 1 for a, b in pairwise(nums))
    if len(cells) >= 2 and all(isinstance(v, (datetime, date)) for v in vals):
        return all(
            sum(isinstance(grid[k][j], (datetime, date)) for k in lower if k != i) * 2
            < max(1, sum(kinds[k][j] == "num" for k in lower if k != i))
            for j in cells
        )
    return False


def _pivot(
    grid: list[list[Any]],
    kinds: list[list[str]],
    header: list[int],
    body: list[int],
    keep: list[int],
    numeric: set[int],
    corner: list[int],
    left: int,
) -> dict[str, Any] | None:
    """A cross-tab: text row-label columns on the left, then >= 2 numeric value columns, with >= 2 header rows or
    number/date value headers. ``{labels, values, levels}`` or None."""
    if not header or len(body) < 1:
        return None
    k = 0
    while k < len(keep) and keep[k] not in numeric:
        k += 1
    labels, values = keep[:k], keep[k:]
    if not labels or len(values) < 2 or any(j not in numeric for j in values):
        return None
    leaf = header[-1]
    num_heads = all(
        cell_kind(grid[leaf][j]) == "num" or _MONTH.match(_text(grid[leaf][j]) or "")
        for j in values
        if j < len(grid[leaf])
    )
    if len(header) < 2 and not num_heads:
        return None
    levels = []
    for n, i in enumerate(header):
        name = next(
            (
                _text(grid[i][j])
                for j in reversed(corner + labels)
                if j < len(grid[i]) and kinds[i][j] == "text" and i != leaf
            ),
            "",
        )
        levels.append(name or (f"variable_{n + 1}" if len(header) > 1 else "variable"))
    return {"labels": labels, "values": values, "levels": levels}


_MONTH = re.compile(r"^(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|q[1-4]|\d{4})", re.IGNORECASE)
