"""Tables of a PDF as grids of cells: regions found in the text layer, rows, columns and spanning headers recovered
from the positions of the text segments.

Input: the text segments of docling's model-free native pipeline (``parsed_page.textline_cells``: docling-parse splits
a printed line at wide gaps, so the cells of a table row arrive as separate segments, each with its box). Steps, per
page (coordinates in PDF points, origin top-left):

1. **Lines**: segments whose vertical extents overlap by half the smaller height form one line; a *prose* segment
   (at least :data:`PROSE_WIDTH` of the page wide and six words or more) is running text and never table material.
2. **Regions**: a table is a run of lines with two or more non-prose segments ("multi-segment lines"), allowing single
   segments inside it (wrapped labels, group rows) when a multi-segment line follows within the run's line pitch;
   the run is extended upwards by header lines closer than :data:`HEADER_GAP` pitches and stops at a caption
   ("Table 3:"), a prose line or a gap. A region needs :data:`MIN_ROWS` multi-segment lines and two columns. A region
   of labels only (no number) directly above a region with numbers, over the same columns and with nothing but a
   ruling between them, is that table's header (a multi-line header set off by a rule and a gap).
3. **Columns**: the union of the x-intervals of the segments of the region's body lines (those with the most common
   larger number of segments); a segment overlapping several columns is a spanning cell; in the header a spanning
   segment covers every column slot (gap midpoints as borders) it reaches into by :data:`SPAN_REACH` points.
4. **Rows**: the header is the run of lines above the first line with a segment in the first column (when the top
   left is empty); header lines without spanning segments are stacked per column into one row (a label printed on
   several lines is one cell). In the body a line with segments in the first column and another column starts a
   row; a line without a first-column segment, or with only one, joins the nearest row when closer than
   :data:`JOIN_PITCH` of the row pitch (wrapped labels, values centred on a two-line label), else is a row of its own.

5. **Other layouts**: a row or column label continued in lower case on the next line is one (row- or column-spanning)
   cell (:func:`_wrapped_labels`, :func:`_wrapped_header`); a footnote line under the first column is not a row
   (:data:`_FOOTNOTE`); text beside a chart's value axis is no table (:func:`_value_axes`); a table ruled under every
   row is read by its rulings where no table was found there (:func:`_ruled_table`).

6. **Which candidates are tables**: every region steps 1-5 propose (:func:`candidate_tables`, including those of two
   rows, sparse grids, figures' labels and text beside a value axis, which the hand rules drop) is scored by a
   learned classifier (:mod:`aisac_core.rag.tableregions`: logistic regression over region features, isotonic
   calibration fitted out of fold); a candidate is kept when its calibrated probability reaches the model's
   threshold, or, by the model's cross-validated policy, when it has a "Table N" caption and the hand rules keep it
   (:func:`find_tables`). The probability is the table's ``confidence``.

Every cell keeps its page, its box (the union of its segments' boxes) and its text (segments joined by a space, in
reading order). Measured on the ICDAR 2013 Table Competition set (Göbel et al., ICDAR 2013): ``python -m bench --only
pdf_tables``; figures in docs/rag.md, "Tables in PDFs". The thresholds were chosen on the development documents of
that set (``bench/pdf_tables.py``, split by document), not on the held-out ones; the region classifier is trained by
``bench/train_table_regions.py`` on those development documents, its choices made by leave-one-document-out
cross-validation.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aisac_core.rag.pdfpage import PROSE_WIDTH, Segment, exact_texts, page_rulings, page_segments

#: widest x-range (points) a table's column projection covers (a page is at most 14,400 pt wide: PDF 32000-1 Annex C)
MAX_SPAN = 15_000
#: share of the page height at the top and at the bottom whose lines are running heads, not table lines
MARGIN = 0.06
#: rows a table needs
MIN_TABLE_ROWS = 3
#: share of a table's grid slots that hold text (below: the labels of a chart)
MIN_FILL = 0.4
#: multi-segment lines a table needs
MIN_ROWS = 2
#: header lines above a table's first multi-segment line join it when closer than this many row pitches
HEADER_GAP = 1.6
#: a gap larger than this many row pitches (top to top) ends a table
BREAK_GAP = 2.6
#: a single-segment line further than this many row pitches below the last table line starts something else
SPLIT_GAP = 1.6
#: row rulings (across half the table or more) that make the rulings, not the line spacing, delimit the rows
MIN_RULES = 2
#: ... and at least this share of the row boundaries the spacing rules find
RULED_SHARE = 0.6
#: a line without a first-column segment joins the nearest row when its centre is closer than this share of the pitch
JOIN_PITCH = 0.75
#: a column is x covered by segments of more than this share of a table's lines
COLUMN_SUPPORT = 0.15
#: a header segment spans a column slot it reaches into by at least this many points
SPAN_REACH = 3.0

#: a region of labels only, of at most this many lines, directly above a table is its header (a separate region
#: when a rule and a gap set it off) ...
HEADER_FRAGMENT_LINES = 6
#: ... when the table's first line is at most this many text heights below the label region's last line
HEADER_FRAGMENT_GAP = 4.0

_FIGURE = re.compile(r"^(figure|fig\.?|chart|graph)\s*[0-9IVXA-Z]", re.I)
_CAPTION = re.compile(r"^(table|tab\.|exhibit|figure|fig\.?|chart|graph)\s*[0-9IVXA-Z]", re.I)


@dataclass
class TableCell:
    """One cell of a recovered table: grid rows ``row..row_end`` and columns ``col..col_end`` (inclusive, 0-based),
    its ``text`` (segments joined by spaces), its page (1-based) and its box ``(l, t, r, b)`` in PDF points with the
    origin at the top left of the page."""

    row: int
    col: int
    row_end: int
    col_end: int
    text: str
    page: int
    bbox: tuple[float, float, float, float]


@dataclass
class PdfTable:
    """A table found on one page: its ``bbox`` (points, origin top-left), the ``caption`` printed above or below it
    when one was found, the number of ``header_rows`` the layout put above the body, and its ``cells``."""

    page: int
    bbox: tuple[float, float, float, float]
    n_rows: int
    n_cols: int
    header_rows: int
    cells: list[TableCell] = field(default_factory=list)
    caption: str | None = None
    #: calibrated probability that this is a table region (:func:`find_tables`; None before classification)
    confidence: float | None = None

    def grid(self) -> list[list[str]]:
        """The table as ``n_rows`` lists of ``n_cols`` strings (a spanning cell's text in its top-left slot, "" in
        the other slots it covers and in empty slots)."""
        out = [["" for _ in range(self.n_cols)] for _ in range(self.n_rows)]
        for c in self.cells:
            out[c.row][c.col] = c.text
        return out


def _is_prose(s: Segment, width: float) -> bool:
    return (s.r - s.l) >= PROSE_WIDTH * width and len(s.text.split()) >= 6


def _lines(segs: list[Segment]) -> list[list[Segment]]:
    """Segments grouped into printed lines (vertical overlap >= half the smaller height), top to bottom."""
    lines: list[list[Segment]] = []
    spans: list[tuple[float, float]] = []
    for s in sorted(segs, key=lambda x: (x.cy, x.l)):
        if lines:
            t, b = spans[-1]
            if min(b, s.b) - max(t, s.t) >= 0.5 * min(s.h, b - t):
                lines[-1].append(s)
                spans[-1] = (min(t, s.t), max(b, s.b))
                continue
        lines.append([s])
        spans.append((s.t, s.b))
    return [sorted(ln, key=lambda x: x.l) for ln in lines]


def _top(ln: list[Segment]) -> float:
    return min(s.t for s in ln)


def _cy(ln: list[Segment]) -> float:
    return (min(s.t for s in ln) + max(s.b for s in ln)) / 2


def _paragraph_segments(lines: list[list[Segment]]) -> set[int]:
    """Segments of a column of running text (a two-column page): five words or more, with another such segment
    starting at the same left edge (2 pt) at most 2.5 line heights above or below."""
    wordy = sorted((s for ln in lines for s in ln if len(s.text.split()) >= 5 and len(s.text) >= 30), key=lambda x: x.l)
    out: set[int] = set()
    for i, s in enumerate(wordy):
        k = i + 1
        while k < len(wordy) and wordy[k].l - s.l <= 2:
            o = wordy[k]
            if 0 < abs(o.t - s.t) <= 2.5 * s.h:
                out.update((id(s), id(o)))
            k += 1
    # the column those segments form (same left edge, top to bottom, no gap over 2.5 line heights): a segment of
    # words inside the x-range of the column's nearest lines (within a line and a half above or below: a paragraph's
    # indented first line, a short last line) is of that column too
    para = sorted((s for s in wordy if id(s) in out), key=lambda x: (round(x.l / 2), x.t))
    blocks: list[list[Segment]] = []
    for s in para:
        b = blocks[-1] if blocks else None
        if b is not None and abs(s.l - b[0].l) <= 2 and s.t - b[-1].t <= 2.5 * s.h:
            b.append(s)
        else:
            blocks.append([s])
    for b in blocks:
        if len(b) < 3:
            continue
        x_l, h = b[0].l, statistics.median(s.h for s in b)
        for ln in lines:
            for s in ln:
                if id(s) in out or s.l < x_l - 1 or len(re.findall(r"[A-Za-z]{2,}", s.text)) < 3:
                    continue
                near = [o.r for o in b if abs(o.t - s.t) <= 1.5 * h]
                if near and s.r <= max(near) + 2:
                    out.add(id(s))
    return out


def _regions(lines: list[list[Segment]], width: float) -> list[list[list[Segment]]]:
    """Runs of lines that form tables (module docstring, step 2); prose segments are dropped from the lines."""
    para = _paragraph_segments(lines)
    table_lines = [[s for s in ln if not _is_prose(s, width) and id(s) not in para] for ln in lines]
    prose = [any(_is_prose(s, width) or id(s) in para for s in ln) for ln in lines]
    multi = [len(ln) >= 2 for ln in table_lines]
    n = len(lines)
    used = [False] * n
    out: list[list[list[Segment]]] = []
    blocks: list[list[int]] = []
    for k, ln in enumerate(table_lines):
        if ln and _CAPTION.match(ln[0].text):  # a caption line is no table line, even when cut in two
            multi[k] = False
            prose[k] = True
            table_lines[k] = []
    i = 0
    while i < n:
        if not multi[i] or used[i]:
            i += 1
            continue
        # grow downwards
        block = [i]
        j = i + 1
        pitches: list[float] = []
        skipped: list[int] = []
        while j < n:
            if prose[j] and not table_lines[j]:
                # beside the table's last line (its first lines may hold a running head or the other column's text)
                x_lo = min(s.l for s in table_lines[block[-1]])
                x_hi = max(s.r for s in table_lines[block[-1]])
                if all(s.r <= x_lo or s.l >= x_hi for s in lines[j]) and len(skipped) < 12:
                    skipped.append(j)  # running text of the other column of the page, beside the table
                    j += 1
                    continue
                break
            if not table_lines[j]:
                break
            if _CAPTION.match(table_lines[j][0].text) and not multi[j]:
                break
            if not multi[j] and len(skipped) < 12:
                x_lo = min(s.l for x in block if multi[x] for s in table_lines[x])
                x_hi = max(s.r for x in block if multi[x] for s in table_lines[x])
                if all(s.r <= x_lo or s.l >= x_hi for s in lines[j]):
                    skipped.append(j)  # a short line of the other column of the page
                    j += 1
                    continue
            gap = _top(table_lines[j]) - _top(table_lines[block[-1]])
            pitch = statistics.median(pitches) if pitches else 1.6 * table_lines[block[-1]][0].h
            if gap > BREAK_GAP * pitch:
                break
            if multi[j]:
                block.append(j)
                pitches.append(gap)
                j += 1
                continue
            # a single segment: kept when a multi-segment line follows closely, and not after a gap (a title between
            # two stacked tables)
            if gap > SPLIT_GAP * pitch:
                break
            k = j
            while k < n and not multi[k] and table_lines[k] and not prose[k] and k - j < 3:
                k += 1
            if (
                k < n
                and multi[k]
                and _top(table_lines[k]) - _top(table_lines[block[-1]]) <= BREAK_GAP * pitch * (k - j + 1)
            ):
                block.extend(range(j, k))
                j = k
                continue
            break
        n_multi = sum(multi[x] for x in block)
        if n_multi < MIN_ROWS:
            i = block[-1] + 1
            continue
        pitch = statistics.median(pitches) if pitches else 1.6 * table_lines[i][0].h
        # header lines above
        lo = min(s.l for x in block for s in table_lines[x])
        hi = max(s.r for x in block for s in table_lines[x])
        k = block[0] - 1
        while k >= 0 and not used[k]:
            tl = table_lines[k]
            if not tl or prose[k] or _CAPTION.match(tl[0].text):
                break
            if _top(table_lines[block[0]]) - _top(tl) > HEADER_GAP * pitch * (1 if multi[k] else 0.9):
                break
            if min(s.l for s in tl) < lo - 0.1 * (hi - lo) or max(s.r for s in tl) > hi + 0.1 * (hi - lo):
                break
            if not any(s.l < hi and s.r > lo for s in tl):
                break  # a note beside the table's columns ("(%)" over the right margin)
            block.insert(0, k)
            k -= 1
        for x in block:
            used[x] = True
        out.append([table_lines[x] for x in block])
        blocks.append(block)
        i = block[-1] + 1
    return _join_header_fragments(lines, out, blocks)


def _numeric(text: str) -> bool:
    return bool(_NUMERIC.match(text.strip()))


def _join_header_fragments(
    lines: list[list[Segment]], out: list[list[list[Segment]]], blocks: list[list[int]]
) -> list[list[list[Segment]]]:
    """A region of column labels only (no number in it, at most :data:`HEADER_FRAGMENT_LINES` lines) directly above
    a region with numbers, over the same columns and with nothing between them but a ruling, is that table's header
    (a header printed on several lines, set off from the body by a rule and a gap, is found as a region of its own)."""
    joined: list[list[list[Segment]]] = []
    kept: list[list[int]] = []
    for reg, blk in zip(out, blocks):
        if joined:
            prev, pblk = joined[-1], kept[-1]
            segs_prev = [sg for ln in prev for sg in ln]
            segs = [sg for ln in reg for sg in ln]
            lo, hi = min(sg.l for sg in segs), max(sg.r for sg in segs)
            plo, phi = min(sg.l for sg in segs_prev), max(sg.r for sg in segs_prev)
            margin = 0.1 * (hi - lo)
            h = statistics.median(sg.h for sg in segs_prev)
            between = range(pblk[-1] + 1, blk[0])
            if (
                len(prev) <= HEADER_FRAGMENT_LINES
                and not any(_numeric(sg.text) for sg in segs_prev)
                and any(_numeric(sg.text) for sg in segs)
                and plo >= lo - margin
                and phi <= hi + margin
                and _top(reg[0]) - _top(prev[-1]) <= HEADER_FRAGMENT_GAP * h
                and all(all(sg.r <= lo or sg.l >= hi for sg in lines[x]) for x in between)
            ):
                joined[-1] = prev + reg
                kept[-1] = pblk + blk
                continue
        joined.append(reg)
        kept.append(blk)
    return joined


def _interval_union(ivs: list[tuple[float, float]]) -> list[list[float]]:
    """The union of x-intervals sorted by their left end: intervals that overlap or lie within 0.5 pt of each other
    become one ``[left, right]`` (a column of text segments)."""
    cols: list[list[float]] = []
    for lo, hi in ivs:
        if cols and lo <= cols[-1][1] + 0.5:
            cols[-1][1] = max(cols[-1][1], hi)
        else:
            cols.append([lo, hi])
    return cols


def _union_columns(lines: list[list[Segment]]) -> list[tuple[float, float]]:
    """Column x-intervals as the union of the segments of the body lines (those with at least the median larger number of segments)."""
    counts = [len(ln) for ln in lines if len(ln) >= 2]
    if not counts:
        return []
    need = max(2, int(statistics.median(counts)))
    cols = _interval_union(sorted((s.l, s.r) for ln in lines if len(ln) >= need for s in ln))
    # widen the columns by the other lines' segments that overlap exactly one column
    for ln in lines:
        if len(ln) >= need:
            continue
        for s in ln:
            hit = [k for k, (lo, hi) in enumerate(cols) if s.l < hi and s.r > lo]
            if len(hit) == 1:
                c = cols[hit[0]]
                c[0], c[1] = min(c[0], s.l), max(c[1], s.r)
    merged: list[list[float]] = []
    for c in cols:
        if merged and c[0] <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], c[1])
        else:
            merged.append(list(c))
    return [(c[0], c[1]) for c in merged]


def _projection_columns(lines: list[list[Segment]]) -> list[tuple[float, float]]:
    """Column x-intervals: the runs of x covered by the segments of more than :data:`COLUMN_SUPPORT` of the lines (at
    least one); a header spanning several columns, or a long label, covers a gap in a few lines only."""
    if not any(len(ln) >= 2 for ln in lines):
        return []
    lo = int(min(s.l for ln in lines for s in ln))
    # a hostile PDF may place text far off the page: the projection spans at most MAX_SPAN points
    hi = min(int(max(s.r for ln in lines for s in ln)) + 2, lo + MAX_SPAN)
    cover = [0] * (hi - lo + 1)
    for ln in lines:
        seen = [False] * len(cover)
        for s in ln:
            for x in range(int(s.l) - lo, min(len(cover), int(s.r) - lo + 1)):
                seen[x] = True
        for x, v in enumerate(seen):
            cover[x] += v
    need = max(1, int(COLUMN_SUPPORT * len(lines)))
    cols: list[tuple[float, float]] = []
    start: int | None = None
    for x, c in enumerate(cover + [0]):
        if c > need and start is None:
            start = x
        elif c <= need and start is not None:
            cols.append((start + lo, x - 1 + lo + 1))
            start = None
    return cols


def _columns(lines: list[list[Segment]]) -> list[tuple[float, float]]:
    """Column x-intervals: the union of the body lines' segments (:func:`_union_columns`), each split where the
    projection of those lines (:func:`_projection_columns`) finds two or more columns inside it (a header or a long
    label that bridged a gap)."""
    union = _union_columns(lines)
    counts = [len(ln) for ln in lines if len(ln) >= 2]
    need = max(2, int(statistics.median(counts))) if counts else 2
    proj = _projection_columns([ln for ln in lines if len(ln) >= need])
    out: list[tuple[float, float]] = []
    for lo, hi in union:
        inner = [(a, b) for a, b in proj if a >= lo - 1 and b <= hi + 1]
        out.extend(inner if len(inner) >= 2 else [(lo, hi)])
    if len(lines) >= 4:
        # a column only one line has text in (a header label set off its column) is no column
        support = [sum(any(s.l < hi and s.r > lo for s in ln) for ln in lines) for lo, hi in out]
        kept = [c for c, n in zip(out, support) if n >= 2]
        out = kept if len(kept) >= 2 else out
    return out


def _span(s: Segment, cols: list[tuple[float, float]], header: bool) -> tuple[int, int]:
    hit = [k for k, (lo, hi) in enumerate(cols) if s.l < hi - 0.5 and s.r > lo + 0.5]
    if not hit:
        cx = (s.l + s.r) / 2
        k = min(range(len(cols)), key=lambda k: min(abs(cx - cols[k][0]), abs(cx - cols[k][1])))
        return k, k
    a, b = min(hit), max(hit)
    if header and a != b or header and len(s.text) > 3:
        # a spanning header reaches into the slots (borders at gap midpoints) beside its columns
        borders = [(cols[k][1] + cols[k + 1][0]) / 2 for k in range(len(cols) - 1)]
        while a > 0 and s.l < borders[a - 1] - SPAN_REACH:
            a -= 1
        while b < len(cols) - 1 and s.r > borders[b] + SPAN_REACH:
            b += 1
    return a, b


_CONTINUES = re.compile(r"(-|,|\band|\bor|\bof|\bthe|\bin|\bfor|\bwith|\bto|/)$", re.I)


def _body_rows(
    body: list[list[tuple[Segment, int, int]]], rules: Sequence[float] = ()
) -> list[list[tuple[Segment, int, int]]]:
    """Body lines grouped into rows (module docstring, step 4); with :data:`MIN_RULES` row rulings or more, the lines
    between two rulings are one row."""
    if not body:
        return []
    plain = _spaced_rows(body, rules)
    if len(rules) >= MIN_RULES and len(rules) >= RULED_SHARE * (len(plain) - 1):
        ruled: dict[int, list[tuple[Segment, int, int]]] = {}
        for ln in body:
            cy = _cy([s for s, _, _ in ln])
            ruled.setdefault(sum(y < cy for y in rules), []).extend(ln)
        return [ruled[k] for k in sorted(ruled)]
    return plain


def _spaced_rows(
    body: list[list[tuple[Segment, int, int]]], rules: Sequence[float]
) -> list[list[tuple[Segment, int, int]]]:
    """Body lines grouped into rows by spacing and continuation cues; never across a ruling."""
    tops = [min(s.t for s, _, _ in ln) for ln in body]
    dists = [b - a for a, b in zip(tops, tops[1:]) if b > a]
    hs = [s.h for ln in body for s, _, _ in ln]
    d = max(statistics.median(dists) if dists else 0.0, 0.8 * statistics.median(hs))
    stub = sum(any(a == 0 for _, a, _ in ln) for ln in body) >= 0.6 * len(body)
    rows: list[list[tuple[Segment, int, int]]] = []
    last_top = 0.0
    for ln, top in zip(body, tops):
        if not rows:
            rows.append(list(ln))
            last_top = top
            continue
        row = rows[-1]
        cols_l = {c for _, a, b in ln for c in range(a, b + 1)}
        cols_r = {c for _, a, b in row for c in range(a, b + 1)}
        has0, vals = 0 in cols_l, bool(cols_l - {0})
        full_r = 0 in cols_r and bool(cols_r - {0})
        close = top - last_top < JOIN_PITCH * d
        first = min(ln, key=lambda x: x[0].l)[0].text
        label_r = " ".join(s.text for s, a, _ in sorted(row, key=lambda x: x[0].t) if a == 0)
        merge = False
        if close:
            merge = not (has0 and vals and full_r)
        elif has0 and not vals and stub:
            # a wrapped row label: starts in lower case or with a bracket, or the label above is unfinished
            merge = first[:1].islower() or first[:1] in "([" or bool(label_r and _CONTINUES.search(label_r))
        elif not has0 and stub and not (cols_l & {c for c in cols_r if c > 0} and first[:1].isupper()):
            merge = first[:1].islower() and top - last_top < 1.3 * d
        if merge and any(last_top < y < top for y in rules):
            merge = False
        if merge:
            row.extend(ln)
        else:
            rows.append(list(ln))
        last_top = top
    return rows


def _row_rules(lines: list[list[Segment]], rules: list[tuple[float, float, float]]) -> list[float]:
    """The y of the horizontal rulings across at least half of the table's width, inside its vertical extent."""
    x_l = min(s.l for ln in lines for s in ln)
    x_r = max(s.r for ln in lines for s in ln)
    top = min(s.t for ln in lines for s in ln)
    bot = max(s.b for ln in lines for s in ln)
    ys = sorted(y for y, x0, x1 in rules if top < y < bot and min(x_r, x1) - max(x_l, x0) >= 0.5 * (x_r - x_l))
    out: list[float] = []
    for y in ys:
        if not out or y - out[-1] > 2.0:
            out.append(y)
    return out


#: a footnote or source line under a table: a note marker (a letter, asterisks, daggers) before a capital, or
#: "Source:", "Note:" (the notes of statistical tables, e.g. "a U.S. EPA, 1995b")
_FOOTNOTE = re.compile(r"^(([a-z]|\*{1,3}|[\u2020\u2021\u00a7])\s+[A-Z(]|(sources?|notes?)\s*:)", re.I)
#: a year as a column label (1900-2099, optionally with a footnote letter or a period: "2009", "2010e", "2011p")
_YEAR = re.compile(r"^(19|20)\d\d[a-z*]?$")
_NUMERIC = re.compile(r"^[-+\u2212\u2013(]?[$\u20ac\u00a3]?\d[\d,.\s\u00a0']*%?\)?\S{0,2}$")


def _header_extent(
    lines: list[list[Segment]], placed: list[list[tuple[Segment, int, int]]], n_head: int, rules: list[float]
) -> int:
    """The number of header lines: a ruling under the first lines (in the top half, below the layout's header)
    closes the header; else the lines of column labels (text only, two or more columns; at most three) right above
    the first line with figures join the header."""
    n = len(lines)
    for y in rules:
        k = sum(max(s.b for s in ln) <= y + 1 for ln in lines)
        if 1 <= k <= max(1, n // 2) and k > n_head and all(min(s.t for s in ln) >= y - 1 for ln in lines[k:]):
            return k
        if k >= 1:
            break
    # column labels: up to three text-only lines (two columns or more) above the first line with figures; a line
    # of years over the value columns (nothing in the first column) is a line of labels too
    k = n_head
    while k < min(n - 2, n_head + 3):
        here = placed[k]
        years = all(_YEAR.match(s.text.strip()) and a > 0 for s, a, _ in here)
        if any(_NUMERIC.match(s.text) for s, _, _ in here) and not years:
            break
        if len({a for _, a, _ in here}) < 2 and not (k == 0 and all(a == 0 for _, a, _ in here)):
            break  # (the table's first line may be a label over its first column alone: "Production capacity:")
        k += 1
    if k > n_head and any(_NUMERIC.match(s.text) for s, a, _ in placed[k] if a > 0):
        return k
    return n_head


def _join_cells(cells: list[TableCell], segs: list[list[Segment]], j: int, k: int) -> None:
    """Cell ``k`` joins cell ``j`` (the one above it): ``j`` spans down to ``k``'s row, its text and box grow."""
    above, b = cells[j], cells[k].bbox
    above.row_end = max(above.row_end, cells[k].row_end)
    segs[j] = sorted(segs[j] + segs[k], key=lambda x: (round(x.cy / 2), x.l))
    above.text = " ".join(x.text for x in segs[j])
    above.bbox = (
        min(above.bbox[0], b[0]),
        min(above.bbox[1], b[1]),
        max(above.bbox[2], b[2]),
        max(above.bbox[3], b[3]),
    )


def _wrapped_header(
    cells: list[TableCell], segs: list[list[Segment]], header_rows: int
) -> tuple[list[TableCell], list[list[Segment]]]:
    """A column label wrapped onto the next header row ("Total" over "population", beside a row of sub-labels
    under spanning headers; "(pg/L)" under "Wildlife criterion"): a header cell starting in lower case or with a
    bracket joins the cell above it that covers its columns, unless other cells of its row are under that one."""
    head = [k for k, c in enumerate(cells) if c.row < header_rows]
    drop: set[int] = set()
    for k in sorted(head, key=lambda k: (cells[k].row, cells[k].col)):
        c = cells[k]
        if not c.text.strip()[:1].islower() and c.text.strip()[:1] not in "([":
            continue
        above = [j for j in head if j not in drop and cells[j].row_end == c.row - 1]
        j = next((j for j in above if cells[j].col <= c.col and c.col_end <= cells[j].col_end), None)
        if j is None:
            continue
        a = cells[j]
        beside = [
            o
            for o in head
            if o != k and cells[o].row == c.row and cells[o].col <= a.col_end and cells[o].col_end >= a.col
        ]
        if beside:
            continue  # sub-labels under a spanning header, not its second line
        _join_cells(cells, segs, j, k)
        drop.add(k)
    keep = [k for k in range(len(cells)) if k not in drop]
    return [cells[k] for k in keep], [segs[k] for k in keep]


def _wrapped_labels(
    cells: list[TableCell], segs: list[list[Segment]], header_rows: int
) -> tuple[list[TableCell], list[list[Segment]]]:
    """A row label wrapped onto the next row, where that row has values of its own (a label over a "Count" and a
    "Percentage" row): the first-column cell that continues the label above (starts in lower case, where fewer than
    a third of the first column's labels do) joins it as one cell spanning both rows."""
    first = {c.row: k for k, c in enumerate(cells) if c.col == 0 and c.col_end == 0}
    rows_with_values = {c.row for c in cells if c.col > 0 and c.text.strip()}
    lower = sum(cells[k].text.strip()[:1].islower() for k in first.values())
    if 3 * lower >= len(first):
        return cells, segs  # labels in lower case are the table's style, not a label's second line
    drop: set[int] = set()
    for r in sorted(first):
        k, j = first[r], first.get(r - 1)
        if r - 1 < header_rows or j is None or j in drop or cells[j].row_end != r - 1:
            continue
        text = cells[k].text.strip()
        if not text[:1].islower() or r not in rows_with_values or r - 1 not in rows_with_values:
            continue
        _join_cells(cells, segs, j, k)
        drop.add(k)
    keep = [k for k in range(len(cells)) if k not in drop]
    return [cells[k] for k in keep], [segs[k] for k in keep]


def _merge_overlapping(cells: list[TableCell], segs: list[list[Segment]]) -> list[TableCell]:
    """Cells of one row whose boxes overlap by half the narrower one's width (a formula's pieces printed over each
    other) become one cell, its text in reading order, so that each cell's box holds its text alone (its anchor
    re-verifies). ``segs``: each cell's segments."""
    out: list[TableCell] = []
    out_segs: list[list[Segment]] = []
    for c, cs in sorted(zip(cells, segs), key=lambda x: (x[0].row, x[0].col)):
        p = out[-1] if out and out[-1].row == c.row else None
        if p is not None:
            ov = min(p.bbox[2], c.bbox[2]) - max(p.bbox[0], c.bbox[0])
            vo = min(p.bbox[3], c.bbox[3]) - max(p.bbox[1], c.bbox[1])
            narrow = min(p.bbox[2] - p.bbox[0], c.bbox[2] - c.bbox[0])
            if ov > 0.5 * narrow and vo > 0:
                p.col_end = max(p.col_end, c.col_end)
                out_segs[-1] = sorted(out_segs[-1] + cs, key=lambda x: (round(x.cy / 2), x.l))
                p.text = " ".join(x.text for x in out_segs[-1])
                p.bbox = (
                    min(p.bbox[0], c.bbox[0]),
                    min(p.bbox[1], c.bbox[1]),
                    max(p.bbox[2], c.bbox[2]),
                    max(p.bbox[3], c.bbox[3]),
                )
                continue
        out.append(c)
        out_segs.append(list(cs))
    return out


def _structure(
    page: int, lines: list[list[Segment]], rules: Sequence[tuple[float, float, float]] = ()
) -> PdfTable | None:
    cols = _columns(lines)
    if len(cols) < 2:
        return None
    while len(lines) > MIN_TABLE_ROWS and _FOOTNOTE.match(" ".join(s.text for s in lines[-1])):
        if any(s.r > cols[1][0] for s in lines[-1]):
            break  # text in the value columns: a row
        lines = lines[:-1]  # a footnote or source line under the table (in its first column only): not a row of it
    placed = [[(s, *_span(s, cols, False)) for s in ln] for ln in lines]
    first_col = [any(a == 0 for _, a, _ in ln) for ln in placed]
    # the header: lines above the first line with a first-column segment, when the top left is empty
    n_head = 0
    if not first_col[0]:
        n_head = next((k for k, f in enumerate(first_col) if f), 0)
    n_head = _header_extent(lines, placed, n_head, _row_rules(lines, _joined_rules(rules)))
    rows: list[list[tuple[Segment, int, int]]] = []
    # header rows: lines with a spanning segment stand alone; the others stack per column
    head_start = len(rows)
    for ln in lines[:n_head]:
        placed_h = [(s, *_span(s, cols, True)) for s in ln]
        spanning = any(a != b for _, a, b in placed_h)
        if rows and not spanning and len(rows) > head_start and not rows[-1][0][0].text.startswith("\x00"):
            prev = rows[-1]
            if not any(a != b for _, a, b in prev):
                prev.extend(placed_h)
                continue
        rows.append(placed_h)
    header_rows = len(rows)
    body = _body_rows(placed[n_head:], _row_rules(lines[n_head:], list(rules)) if len(lines) > n_head else [])
    rows.extend(body)
    cells: list[TableCell] = []
    cell_segs: list[list[Segment]] = []
    for r, row in enumerate(rows):
        by_slot: dict[tuple[int, int], list[Segment]] = {}
        for s, a, b in row:
            # a segment over a slot already taken by a wider one stays with it
            key = next((k for k in by_slot if k[0] <= a and b <= k[1]), None) or (a, b)
            by_slot.setdefault(key, []).append(s)
        taken: set[int] = set()
        for (a, b), segs in sorted(by_slot.items()):
            if any(c in taken for c in range(a, b + 1)):
                a = b = next((c for c in range(a, b + 1) if c not in taken), a)
            taken.update(range(a, b + 1))
            segs.sort(key=lambda x: (round(x.cy / 2), x.l))
            cell_segs.append(segs)
            cells.append(
                TableCell(
                    row=r,
                    col=a,
                    row_end=r,
                    col_end=b,
                    text=" ".join(x.text for x in segs),
                    page=page,
                    bbox=(
                        min(x.l for x in segs),
                        min(x.t for x in segs),
                        max(x.r for x in segs),
                        max(x.b for x in segs),
                    ),
                )
            )
    cells, cell_segs = _wrapped_header(cells, cell_segs, header_rows)
    cells, cell_segs = _wrapped_labels(cells, cell_segs, header_rows)
    cells = _merge_overlapping(cells, cell_segs)
    segs_all = [s for ln in lines for s in ln]
    bbox = (
        min(s.l for s in segs_all),
        min(s.t for s in segs_all),
        max(s.r for s in segs_all),
        max(s.b for s in segs_all),
    )
    return PdfTable(page=page, bbox=bbox, n_rows=len(rows), n_cols=len(cols), header_rows=header_rows, cells=cells)


#: rulings of one ruled table share their left and right ends within this many points
RULE_ALIGN = 4.0
#: a ruled table needs this many row bands with text
MIN_RULED_ROWS = 3


def _joined_rules(rules: Sequence[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Horizontal rulings with the pieces of one ruling drawn end to end (same y within 1 pt, at most 3 pt apart;
    a ruling drawn cell by cell) joined: ``(y, x0, x1)``."""
    joined: list[list[float]] = []
    for y, x0, x1 in sorted(rules, key=lambda r: (round(r[0]), r[1])):
        j = joined[-1] if joined else None
        if j is not None and abs(j[0] - y) <= 1.0 and x0 <= j[2] + 3:
            j[2] = max(j[2], x1)
        else:
            joined.append([y, x0, x1])
    return [(y, x0, x1) for y, x0, x1 in joined]


def _ruled_sets(rules: Sequence[tuple[float, float, float]]) -> list[tuple[float, float, list[float]]]:
    """Sets of horizontal rulings with the same left and right ends (:data:`RULE_ALIGN`): ``(x0, x1, ys)``, ``ys``
    top to bottom, rulings within 2 pt of each other counted once. Pieces of one ruling drawn end to end (within
    3 pt) are joined first."""
    sets: list[tuple[float, float, list[float]]] = []
    for y, x0, x1 in sorted(_joined_rules(rules)):
        for a, b, ys in sets:
            if abs(a - x0) <= RULE_ALIGN and abs(b - x1) <= RULE_ALIGN:
                if y - ys[-1] > 2.0:
                    ys.append(y)
                break
        else:
            sets.append((x0, x1, [y]))
    return [s for s in sets if len(s[2]) >= MIN_RULED_ROWS + 1]


def _ruled_table(page: int, segs: list[Segment], x0: float, x1: float, ys: list[float]) -> PdfTable | None:
    """A table drawn with a ruling under every row (text cells of several lines, bullet lists, that the spacing of
    the lines cannot delimit): the rows are the bands between the rulings ``ys`` from ``x0`` to ``x1``, the columns
    the union of the x-intervals of the segments below the first band; every segment belongs to the band its centre
    is in and to the column(s) it overlaps. None unless :data:`MIN_RULED_ROWS` bands hold text, there are two
    columns or more, and most bands have text in two columns."""
    inside = [s for s in segs if x0 - 1 <= (s.l + s.r) / 2 <= x1 + 1 and ys[0] < s.cy < ys[-1]]
    bands: list[list[Segment]] = [[] for _ in ys[:-1]]
    for s in inside:
        k = sum(y < s.cy for y in ys) - 1
        if 0 <= k < len(bands):
            bands[k].append(s)
    limits = [(ys[k], ys[k + 1]) for k, b in enumerate(bands) if b]
    bands = [b for b in bands if b]
    if len(bands) < MIN_RULED_ROWS:
        return None
    cols = _interval_union(sorted((s.l, s.r) for b in bands[1:] for s in b))
    if len(cols) < 2:
        return None
    colspans = [(c[0], c[1]) for c in cols]
    multi = 0
    cells: list[TableCell] = []
    for r, band in enumerate(bands):
        by_slot: dict[tuple[int, int], list[Segment]] = {}
        for s in band:
            a, b = _span(s, colspans, r == 0)
            key = next((k for k in by_slot if k[0] <= a and b <= k[1]), None) or (a, b)
            by_slot.setdefault(key, []).append(s)
        multi += len(by_slot) >= 2
        taken: set[int] = set()
        for (a, b), ss in sorted(by_slot.items()):
            if any(c in taken for c in range(a, b + 1)):
                return None  # overlapping cells: not a grid
            taken.update(range(a, b + 1))
            ss.sort(key=lambda x: (round(x.cy / 2), x.l))
            # the box stays between the band's rulings (docling may give a line of a cell the height of two lines),
            # so that it holds this cell's text alone and its anchor re-verifies
            top, bot = limits[r]
            box = (
                min(x.l for x in ss),
                max(top, min(x.t for x in ss)),
                max(x.r for x in ss),
                min(bot, max(x.b for x in ss)),
            )
            cells.append(TableCell(r, a, r, b, " ".join(x.text for x in ss), page, box))
    if multi < 0.6 * len(bands):
        return None
    head = 0 if any(_numeric(c.text) for c in cells if c.row == 0) else 1
    bbox = (
        min(c.bbox[0] for c in cells),
        min(c.bbox[1] for c in cells),
        max(c.bbox[2] for c in cells),
        max(c.bbox[3] for c in cells),
    )
    return PdfTable(page=page, bbox=bbox, n_rows=len(bands), n_cols=len(cols), header_rows=head, cells=cells)


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def _covers(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Whether boxes ``a`` and ``b`` share more than half the smaller one's area."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return False
    small = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return iw * ih > 0.5 * small


#: a chart's value axis: at least this many lone numbers, one above the other, in an arithmetic progression
MIN_TICKS = 4


def _value_axes(lines: list[list[Segment]]) -> list[tuple[float, float, float]]:
    """The value axes of charts on a page, as ``(left, top, bottom)``: :data:`MIN_TICKS` or more lines holding one
    number alone, right-aligned (2 pt), whose values are a linear function of their height on the page (within 3 %:
    tick labels "80 60 40 0", a tick hidden by a bar's label left out). Text next to such an axis is a chart's labels
    and legend, not a table."""
    lone: list[tuple[float, Segment, float]] = []
    for ln in lines:
        if len(ln) == 1 and re.fullmatch(r"-?\d[\d,]*(\.\d+)?%?", ln[0].text.strip()):
            try:
                lone.append((ln[0].r, ln[0], float(ln[0].text.strip().rstrip("%").replace(",", ""))))
            except ValueError:
                continue
    axes: list[tuple[float, float, float]] = []
    used: set[int] = set()
    for i, (r, _, _) in enumerate(lone):
        if i in used:
            continue
        col = [k for k in range(i, len(lone)) if abs(lone[k][0] - r) <= 2.0]
        run = [col[0]]
        for k in col[1:]:
            (_, s0, v0), (_, sk, vk) = lone[run[0]], lone[k]
            if sk.t - s0.t <= 0 or vk == v0:
                break
            slope = (vk - v0) / (sk.t - s0.t)
            if len(run) >= 2:
                (_, s1, v1) = lone[run[1]]
                ref = (v1 - v0) / (s1.t - s0.t)
                if abs(slope - ref) > 0.03 * abs(ref):
                    break
            run.append(k)
        if len(run) >= MIN_TICKS:
            used.update(run)
            segs = [lone[x][1] for x in run]
            axes.append((min(x.l for x in segs), min(x.t for x in segs), max(x.b for x in segs)))
    return axes


def _beside_axis(t: PdfTable, axes: list[tuple[float, float, float]]) -> bool:
    """Whether table ``t`` lies in the plot area of one of ``axes`` (its middle between the axis's top and bottom
    ticks, right of the axis's left edge)."""
    cy = (t.bbox[1] + t.bbox[3]) / 2
    return any(top - 5 <= cy <= bot + 5 and t.bbox[0] >= left - 2 for left, top, bot in axes)


@dataclass
class Candidate:
    """A table the layout rules proposed (:func:`candidate_tables`): the recovered ``table``, the region features the
    learned region classifier reads (:data:`aisac_core.rag.tableregions.FEATURES`) and ``rules_keep``, the hand rules'
    own verdict (three rows, 40 % of the grid filled, no figure caption, not beside a chart's value axis)."""

    table: PdfTable
    features: dict[str, float]
    rules_keep: bool


def candidate_tables(res: Any) -> list[Candidate]:
    """Every table region the layout rules propose in a docling native-pipeline ``ConversionResult`` (module
    docstring, steps 1-5), in page and reading order, with its caption, cells (the PDF's own characters) and region
    features; :func:`find_tables` keeps those the region classifier accepts. Regions of two rows, sparse grids,
    figures' labels and text beside a chart's value axis are candidates too (with ``rules_keep`` False)."""
    from aisac_core.rag.tableregions import region_features

    out: list[Candidate] = []
    rulings = page_rulings(getattr(getattr(res, "input", None), "file", None))
    for pno, (W, H, segs) in sorted(page_segments(res).items()):
        # running heads and page numbers: a line in the top or bottom margin is never table material
        kept_segs = [s for s in segs if s.t >= MARGIN * H and s.b <= (1 - MARGIN) * H]
        lines = _lines(kept_segs)
        axes = _value_axes(lines)
        rules = rulings.get(pno, [])
        page_out: list[Candidate] = []
        for region in _regions(lines, W):
            t = _structure(pno, region, rules)
            if t is None or t.n_rows < MIN_ROWS:
                continue
            t.caption = _caption_near(lines, t)
            filled = sum((c.row_end - c.row + 1) * (c.col_end - c.col + 1) for c in t.cells if c.text.strip())
            figure = bool(t.caption and _FIGURE.match(t.caption))
            axis = _beside_axis(t, axes)
            keep = t.n_rows >= MIN_TABLE_ROWS and filled >= MIN_FILL * t.n_rows * t.n_cols and not figure and not axis
            feats = region_features(t, W, H, rules, ruled=False, figure=figure, axis=axis, rules_keep=keep)
            page_out.append(Candidate(t, feats, keep))
        # tables ruled under every row whose text the line spacing did not make a table of (cells of several lines)
        mine = [c.table.bbox for c in page_out if c.rules_keep]
        for x0, x1, ys in _ruled_sets(rules):
            if any(_overlaps((x0, ys[0], x1, ys[-1]), b) for b in mine):
                continue
            t = _ruled_table(pno, kept_segs, x0, x1, ys)
            if t is not None:
                t.caption = _caption_near(lines, t)
                figure = bool(t.caption and _FIGURE.match(t.caption))
                feats = region_features(t, W, H, rules, ruled=True, figure=figure, axis=False, rules_keep=True)
                page_out.append(Candidate(t, feats, True))
                mine.append(t.bbox)
        out.extend(page_out)
    cells = [c for cand in out for c in cand.table.cells]
    texts = exact_texts(getattr(getattr(res, "input", None), "file", None), [(c.page, c.bbox, c.text) for c in cells])
    for c, text in zip(cells, texts):
        c.text = text
    return out


def find_tables(res: Any) -> list[PdfTable]:
    """The tables of a docling native-pipeline ``ConversionResult`` (module docstring), in page and reading order,
    each with the caption found next to it and its ``confidence``: the calibrated probability, from the learned region
    classifier (:mod:`aisac_core.rag.tableregions`), that it is a table region of the ground truth's kind (IoU >= 0.5).
    A candidate (:func:`candidate_tables`) is kept when that probability reaches the model's threshold (chosen by
    cross-validated adjacency F1, docs/rag.md); of two overlapping kept candidates the more probable one stays.

    Raises:
        TableModelError: the shipped region model is missing or unreadable.
    """
    from aisac_core.rag.tableregions import load

    model = load()
    cands = candidate_tables(res)
    probs = [model.probability(c.features) for c in cands]
    forced = [model.keep_captioned and c.rules_keep and c.features["table_caption"] > 0 for c in cands]
    chosen = select_candidates(cands, probs, model.threshold, forced)
    for k in chosen:
        cands[k].table.confidence = round(probs[k], 4)
    return [cands[k].table for k in chosen]


def select_candidates(
    cands: Sequence[Candidate], probs: Sequence[float], threshold: float, forced: Sequence[bool] | None = None
) -> list[int]:
    """Indices (ascending: page and reading order) of the candidates kept: probability ``>= threshold`` or ``forced``
    (the model's policy for captioned tables the hand rules keep, :class:`aisac_core.rag.tableregions.RegionModel`),
    and of two on a page whose intersection is more than half the smaller one's area the forced, else the more
    probable one (the earlier on a tie)."""
    force = list(forced) if forced is not None else [False] * len(cands)
    kept: list[int] = []
    for i in sorted(range(len(cands)), key=lambda k: (not force[k], -probs[k], k)):
        if probs[i] < threshold and not force[i]:
            continue
        t = cands[i].table
        if any(cands[k].table.page == t.page and _covers(cands[k].table.bbox, t.bbox) for k in kept):
            continue
        kept.append(i)
    return sorted(kept)


def _caption_near(lines: list[list[Segment]], t: PdfTable) -> str | None:
    """The caption line closest above (or else below) the table, within four line pitches."""
    x_l, top, x_r, bot = t.bbox
    best: tuple[float, str] | None = None
    for ln in lines:
        s = ln[0]
        if not _CAPTION.match(s.text) or s.r < x_l or s.l > x_r:
            continue
        d = top - s.b if s.b <= top + 1 else (s.t - bot if s.t >= bot - 1 else None)
        if d is None or d > 4 * 12:
            continue
        if best is None or d < best[0]:
            best = (d, " ".join(x.text for x in ln))
    return best[1] if best else None
