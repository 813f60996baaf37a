"""Which columns a group label of a multi-row header covers, and how sure the detection is of a sheet's layout.

**Group label spans** (upper header rows; docs/data.md "Header labels"). A label covers:

- a merged cell: exactly its merged columns (never the empty cells after it);
- ``centerContinuous`` (Excel's "centre across selection"): its cell and the empty cells right of it that carry the
  same alignment (the selection it is centred across);
- an unmerged label aligned ``left`` or not aligned (text's default, "general", draws left to right): the empty
  cells to its right up to the next label;
- ``right``: the empty cells to its left back to the previous label, over value (numeric) columns only (a row-label
  column at the left is not a group member);
- ``center`` without a merge: an empty neighbour cell claimed by no other label is undecidable (a centred label in
  one cell does not say how far it reaches).

An empty cell claimed by two labels (a left-aligned label followed by a right-aligned one with a gap between) or by
one that cannot say is **undecidable**: it is reported, never filled by guess. This is the evidence a person reads
(Excel draws unmerged text by its alignment); it does not depend on the sheet's cells' exact positions.

**Confidence** (:func:`layout_confidence`): 1.0 minus a penalty per sign that the reading may be wrong - an
undecidable group label, a header-like text row below the data (headers at the bottom), a text column right of the
data with labels in every row (headers at the right), a block whose rows each hold one type while its columns mix
types (a transposed table). Below :data:`CONFIDENT` the load reports the layout as ambiguous with the alternatives
and registers the safest reading: the block as a plain grid with generated column names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: below this confidence a sheet's layout is reported as ambiguous and loaded as a plain grid
CONFIDENT = 0.75
_LEFTISH = (None, "left", "general", "justify", "distributed", "fill")


def group_spans(
    labels: Mapping[int, str],
    lo: int,
    hi: int,
    merged_end: Mapping[int, int],
    halign: Mapping[int, str],
    numeric: set[int],
    heads: set[int],
    parent: Mapping[int, str] | None = None,
) -> tuple[dict[int, str], list[int]]:
    """The label of each column ``lo..hi`` of one upper header row.

    Args:
        labels: column -> text of the row's own label cells (not merge copies).
        merged_end: column of a merged label -> the last column of its merge.
        halign: column -> horizontal alignment of the row's cells (labels and empty cells alike).
        numeric: the body's numeric (value) columns; heads: columns with a header cell in the rows below.
        parent: column -> the label of the row above (its spans): a label never reaches under another parent.

    Returns ``(spans, undecided)``: column -> label (the label's own columns and those it covers), and the empty
    columns two labels claim or a centred label might cover (module docstring)."""
    spans: dict[int, str] = dict(labels)
    claims: dict[int, list[int]] = {}
    undecided: set[int] = set()
    cols = sorted(labels)
    for k, j in enumerate(cols):
        prev = cols[k - 1] if k else lo - 1
        nxt = cols[k + 1] if k + 1 < len(cols) else hi + 1
        a = halign.get(j)
        if j in merged_end:
            for e in range(j + 1, min(merged_end[j], hi) + 1):
                spans[e] = labels[j]
            continue
        if a == "centerContinuous":
            e = j + 1
            while e < nxt and halign.get(e) == "centerContinuous":
                claims.setdefault(e, []).append(j)
                e += 1
            continue
        if a in _LEFTISH:
            for e in range(j + 1, nxt):
                if e in heads:
                    claims.setdefault(e, []).append(j)
        elif a == "right":
            e = j - 1
            while e > prev and e in numeric:
                claims.setdefault(e, []).append(j)
                e -= 1
        elif a == "center":  # the empty cells centred with it, to its right up to the next label
            centred = ("center", "centerContinuous")
            e = j + 1
            spread = False
            while e < min(nxt, hi + 1) and halign.get(e) in centred:
                if e in heads:
                    claims.setdefault(e, []).append(j)
                    spread = True
                e += 1
            e = j - 1  # a group label (it spreads right): centred empties on its left no centred label reaches
            reached = not spread or (k > 0 and halign.get(prev) in centred)
            while e > max(prev, lo - 1) and halign.get(e) in centred and not reached:
                if e in heads and e in numeric:
                    undecided.add(e)
                e -= 1
    merged_cover = {e for j, end in merged_end.items() for e in range(j, end + 1)}
    up = parent or {}
    for e, who in claims.items():
        if e in merged_cover or e in labels:
            continue
        who = [j for j in who if up.get(j, "") == up.get(e, "")]
        if not who:
            continue
        if len(who) == 1 and e not in undecided:
            spans[e] = labels[who[0]]
        else:
            undecided.add(e)
    return spans, sorted(e for e in undecided if e not in labels and e not in merged_cover)


def fine_kind(v: Any) -> str:
    """``bool``, ``date`` (dates, times), ``num`` (numbers) or ``text`` (anything else, numeric strings too)."""
    from datetime import date, datetime, time

    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (datetime, date, time)):
        return "date"
    if isinstance(v, (int, float)):
        return "num"
    return "text"


def layout_confidence(
    grid: Sequence[Sequence[Any]],
    kinds: Sequence[Sequence[str]],
    header: list[int],
    body: list[int],
    columns: list[int],
    numeric: set[int],
    below: list[int],
    undecided: list[str],
    alternatives: list[tuple[str, int]] | None = None,
) -> tuple[float, list[str]]:
    """``(confidence 0..1, reasons)`` of a detected table (module docstring). ``below``: non-empty rows under the
    body (skipped as notes); ``undecided``: descriptions of undecidable group label columns. ``alternatives``
    (out): the other readings the signs point to, as ``("header_row", row)``, ``("header_column", column)`` or
    ``("transposed", label column)``."""
    alts = alternatives if alternatives is not None else []
    reasons: list[str] = []
    score = 1.0
    if undecided:
        score -= 0.4
        reasons += undecided[:3]
    num_cols = [j for j in columns if j in numeric]
    last_rows = ([body[-1]] if body else []) + below[:1]
    for i in last_rows:  # no header on top, a header-like row at the data's end or right under it
        texts = {str(grid[i][j]).strip() for j in num_cols if kinds[i][j] == "text"}
        if not header and len(num_cols) >= 2 and len(texts) * 2 > len(num_cols) and i <= body[-1] + 1:
            score -= 0.4
            reasons.append(f"row {i} at the data's end holds labels over the value columns (a header at the bottom?)")
            alts.append(("header_row", i))
            break
    if not header and body and len(columns) >= 3:
        last = columns[-1]
        if last not in numeric and all(kinds[i][last] == "text" for i in body) and len(num_cols) >= 2:
            score -= 0.4
            reasons.append("no header row, and the last column labels every row (headers at the right?)")
            alts.append(("header_column", last))
    full = [i for i in body if sum(kinds[i][j] != "empty" for j in columns[1:]) >= max(2, (len(columns) - 1) // 2)]
    if len(full) >= 3 and len(columns) >= 3 and all(kinds[i][columns[0]] == "text" for i in body):
        per_row = [{fine_kind(grid[i][j]) for j in columns[1:] if kinds[i][j] != "empty"} for i in full]
        kinds_seen = set().union(*per_row)
        if all(len(t) == 1 for t in per_row) and len(kinds_seen) >= 3:
            score -= 0.5
            reasons.append("each row holds one type (text, numbers, dates...) across the columns (a transposed table?)")
            alts.append(("transposed", columns[0]))
    return max(0.0, round(score, 2)), reasons


def unpivot(df: Any, n_labels: int, levels: list[str], value_name: str = "value") -> Any:
    """A wide pivot frame (first ``n_labels`` columns row labels, the rest value columns named ``a|b``) as a long
    frame: row labels (forward-filled down), one column per header level (names ``levels``), ``value``."""
    import pandas as pd

    ids = list(df.columns[:n_labels])
    wide = df.copy()
    wide[ids] = wide[ids].ffill()
    long = wide.melt(id_vars=ids, var_name="__col__", value_name=value_name)
    parts = (
        long["__col__"].astype(str).str.split("|", n=len(levels) - 1, expand=True)
        if len(levels) > 1
        else pd.DataFrame({0: long["__col__"].astype(str)})
    )
    for n, name in enumerate(levels):
        long.insert(n_labels + n, _unique(name, ids), parts[n] if n in parts.columns else None)
    return long.drop(columns="__col__").dropna(subset=[value_name]).reset_index(drop=True)


def _unique(name: str, taken: list[str]) -> str:
    while name in taken:
        name += "_"
    return name


#: the label of a summary-statistic row (descriptive statistics as lab sheets and survey exports print them under
#: a table: "Mean", "SD", "Std. Dev.", "SEM", "Min", "Max", "N", "Median", "25th percentile", "CV %")
SUMMARY_LABEL = re.compile(
    r"^(mean|average|avg\.?|median|mode|geometric mean|harmonic mean|s\.?d\.?|std\.?( ?dev(\.|iation)?)?|"
    r"st\.? ?dev\.?|standard (deviation|error)( of (the )?mean)?|s\.?e\.?(m\.?)?|variance|var\.?|"
    r"min(\.|imum)?|max(\.|imum)?|range|n|count|sum|total|grand total|c\.?v\.?( ?%)?|coefficient of variation|"
    r"iqr|interquartile range|q[13]|(lower|upper) quartile|\d{1,2}(st|nd|rd|th) percentile|p\d{1,2}|skewness|"
    r"kurtosis|mad)\s*[:=]?$",
    re.I,
)
#: the title of a summary block ("Summary", "Summary statistics", "Descriptive statistics")
SUMMARY_TITLE = re.compile(r"^(summary( statistics)?|descriptive statistics|statistics|summary of .{1,60})\s*:?$", re.I)


def summary_block_start(firsts: Sequence[str], blank_before: Sequence[bool]) -> int | None:
    """Where a summary block under a table's body starts, or None: the body's non-empty rows are given by their
    first non-empty cell's text (``firsts``) and whether an empty row separates each from the row above
    (``blank_before``). A summary block follows an empty row after at least two body rows, and every row of it
    is a summary statistic (:data:`SUMMARY_LABEL`: "Mean", "SD", "Min", "Max", "N" ...), two at least, under an
    optional title ("Summary", "Descriptive statistics"). Such rows describe the table's rows; they are none of
    them (a summary block one empty row below a table was once loaded as 6 data rows). Errors: none."""
    for k in range(2, len(firsts)):
        if not blank_before[k]:
            continue
        block = [f.strip() for f in firsts[k:]]
        stats = block[1:] if SUMMARY_TITLE.match(block[0]) else block
        if len(stats) >= 2 and all(SUMMARY_LABEL.match(x) for x in stats):
            return k
    return None
