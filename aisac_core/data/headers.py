"""Header rows and column names of a detected table (rules 4 and 6 of :mod:`aisac_core.data.regions`): which rows
above the body are header rows, and the names joined from them, group labels spread by
:func:`aisac_core.data.layout.group_spans`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

from aisac_core.data.cells import cell_kind, col_letters
from aisac_core.data.cells import cell_text as _text
from aisac_core.data.layout import group_spans

MAX_HEADER_ROWS = 10
LONG_TEXT = 60


def _header_rows(
    grid: list[list[Any]],
    kinds: list[list[str]],
    occ: list[list[bool]],
    above: list[int],
    l: int,
    r: int,
    filled: set[tuple[int, int]],
    merged: list[tuple[int, int, int, int]],
    bold: set[tuple[int, int]] | None,
    from_top: bool = False,
    col_types: Mapping[int, set[str]] | None = None,
) -> list[int]:
    """The header rows among ``above`` (non-empty rows above the body, top to bottom): the leaf row and the group
    label rows over it (module docstring, rule 4). ``from_top``: the first row of ``above`` is the table's top.
    ``col_types``: per column the kinds of its body values (text, num, date, bool); a group label reaching over
    columns of different kinds is a note, not a group (a group gathers columns of one kind: Female over 0-6 and
    7-10), and stops the header there."""
    if not above:
        return []
    cols = range(l, r + 1)
    leaf = above[-1]
    width = r - l + 1
    leaf_cells = [j for j in cols if occ[leaf][j]]
    if not leaf_cells:
        return []
    if any(len(_text(grid[leaf][j])) > LONG_TEXT for j in leaf_cells) or (
        len(leaf_cells) == 1 and width >= 3 and not from_top
    ):
        return []
    header = [leaf]
    below = {j for j in leaf_cells}
    for i in reversed(above[:-1]):
        if len(header) >= MAX_HEADER_ROWS:
            break
        cells = [j for j in cols if occ[i][j]]
        if any(len(_text(grid[i][j])) > LONG_TEXT for j in cells) or i + 1 != header[0]:
            break
        if any(
            kinds[i][j] == "num"
            and (i, j) not in filled
            and not (isinstance(grid[i][j], (datetime, date)) or re.fullmatch(r"(19|20)\d\d", _text(grid[i][j])))
            for j in cells
        ):
            break  # a data row, not a label row (years and dates may label columns)
        has_merge = any(t == i and rr > ll for (t, ll, b, rr) in merged if l <= ll <= r) or any(
            (i, j) in filled for j in cells
        )
        covers_gap = any(j not in below for j in cells)
        lower_labels = [_text(grid[header[0]][j]) for j in cols if occ[header[0]][j] and (header[0], j) not in filled]
        repeats = len(lower_labels) != len(set(lower_labels))
        spans = len(cells) >= 1 and any(not occ[i][j + 1] and occ[header[0]][j + 1] for j in cells if j + 1 <= r)
        both_bold = bool(bold and all((i, j) in bold for j in cells) and all((leaf, j) in bold for j in leaf_cells))
        texts = [_text(grid[i][j]) for j in cells if (i, j) not in filled]
        if texts and all(x.endswith(":") for x in texts):
            break  # form fields above the table ("CC Name:"), not column labels
        if len(texts) >= 3 and len(set(texts)) == 1 and not has_merge:
            break  # a marker row (x over every column)
        repeats = repeats or len(texts) != len(set(texts))
        num_leaf = any(kinds[header[0]][j] == "num" for j in cells)
        covers_gap = covers_gap and len(cells) >= 2
        if len(cells) == 1 and width >= 3 and not has_merge:
            break  # a one-cell row over a wide table is a title
        if not (has_merge or covers_gap or repeats or both_bold or num_leaf or spans and repeats):
            break
        if col_types is not None and _mixed_span(i, cells, below, r, filled, col_types):
            break
        header.insert(0, i)
        below |= set(cells)
    return header


def _mixed_span(
    i: int, cells: list[int], below: set[int], r: int, filled: set[tuple[int, int]], col_types: Mapping[int, set[str]]
) -> bool:
    """Whether a label of row ``i`` reaches (up to the next label, over the header columns ``below``) over body
    columns of different value kinds (num, date, bool: each column's dominant kind; text columns, such as row
    labels beside the values, do not count)."""
    labels = [j for j in cells if (i, j) not in filled]
    for k, j in enumerate(labels):
        nxt = labels[k + 1] if k + 1 < len(labels) else r + 1
        span = [c for c in range(j, nxt) if c in below or c == j]
        kinds = set().union(*(col_types.get(c, set()) for c in span)) - {"text"} if span else set()
        if len(span) >= 2 and len(kinds) >= 2:
            return True
    return False


def header_names(
    grid: list[list[Any]],
    header: list[int],
    columns: list[int],
    filled: set[tuple[int, int]] | None = None,
    cmap: Sequence[int] | None = None,
    *,
    merged: Sequence[tuple[int, int, int, int]] = (),
    halign: Mapping[tuple[int, int], str] | None = None,
    numeric: set[int] | None = None,
    undecided: list[str] | None = None,
) -> list[str]:
    """Column names from the header rows: parts joined with ``|``, an upper row's labels spread over the columns
    their merge or alignment gives (:func:`aisac_core.data.layout.group_spans`; without ``halign`` every label is
    read as left-aligned), a part repeated only by a fill written once, ``col_N`` (sheet column number) without any
    header cell, duplicates suffixed ``.1``, ``.2``. ``undecided`` (out): one line per column whose group label
    cannot be decided (left without one)."""
    filled = set(filled or ())
    if not columns:
        return []
    lo, hi = min(columns), max(columns)
    kept = set(columns)
    own = set(filled)
    levels: list[dict[int, str]] = []
    for n, i in enumerate(header):
        row = grid[i]
        vals = {j: (_text(row[j]) if j < len(row) and cell_kind(row[j]) != "empty" else "") for j in range(lo, hi + 1)}
        if n < len(header) - 1:
            heads = {
                j
                for j in range(lo, hi + 1)
                if any(j < len(grid[k]) and cell_kind(grid[k][j]) != "empty" for k in header[n + 1 :])
            }
            labels = {j: v for j, v in vals.items() if v and (i, j) not in own and j in kept and j in heads}
            ends = {l: r for (t, l, b, r) in merged if t <= i <= b and l in labels and r > l}
            align = {j: a for (r, j), a in (halign or {}).items() if r == i}
            parent = levels[-1] if levels else None
            spans, open_cols = group_spans(labels, lo, hi, ends, align, set(numeric or ()), heads, parent)
            for j, v in spans.items():
                if j not in labels and (vals[j] == "" or (i, j) in own):
                    vals[j] = v
                    filled.add((i, j))
            for j in open_cols:
                if j in kept and undecided is not None:
                    letter = col_letters((cmap[j] if cmap is not None else j) + 1)
                    undecided.append(
                        f"column {letter}: which group label of the header covers it is not decidable from the "
                        "merges and alignment"
                    )
        levels.append(vals)
    return join_header_levels(header, levels, columns, filled, cmap)


def join_header_levels(
    header: list[int],
    levels: Sequence[Sequence[str] | Mapping[int, str]],
    columns: Any,
    filled: set[tuple[int, int]],
    cmap: Sequence[int] | None = None,
) -> list[str]:
    """Column names from header rows: per column in ``columns`` (0-based indexes), the labels of its header
    ``levels`` (one list of labels per row of ``header``) joined with ``|``, a label carried over from a merged or
    group cell (``(row, column)`` in ``filled``) not repeated; ``col_N`` (1-based) for a column without a label;
    a repeated name gets ``.1``, ``.2``... (pandas' convention)."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for j in columns:
        parts: list[str] = []
        for i, lv in zip(header, levels):
            p = lv[j]
            if p and not (parts and parts[-1] == p and (i, j) in filled):
                parts.append(p)
        name = "|".join(parts) or f"col_{(cmap[j] if cmap is not None else j) + 1}"
        if name in seen:
            seen[name] += 1
            name = f"{name}.{seen[name]}"
        else:
            seen[name] = 0
        names.append(name)
    return names
