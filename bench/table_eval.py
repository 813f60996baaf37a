"""The ICDAR 2013 Table Competition's scores: table regions and the adjacency-relation F1 of table structure.

Source: M. Göbel, T. Hassan, E. Oro, G. Orsi, "ICDAR 2013 Table Competition", Proc. ICDAR 2013, pp. 1449-1453,
and the structure metric of M. Göbel, T. Hassan, E. Oro, G. Orsi, "A methodology for evaluating algorithms for
table understanding in PDF documents", DocEng 2012. The rules as implemented (README of
``../shared/data/pdf_tables/icdar2013``, checked there against the competition's Java tool):

1. cells are laid on the grid (index + the region's ``row-increment`` / ``col-increment``; a spanning cell fills every
   slot it covers); a cell's text is normalised (NFKC, every whitespace removed, lower case) and a cell whose text is
   then empty is *blank* and takes no part;
2. in every grid row each non-blank cell is related to the next *different* non-blank cell to its right
   (horizontal), in every column to the next one below (vertical); a pair of cells gives at most one relation per
   direction;
3. a relation is ``(text 1, text 2, direction, blank slots between them)``: positions are not part of it;
4. result and ground truth relations are compared as multisets: correct = size of the intersection; precision =
   correct / result relations, recall = correct / ground-truth relations.

Per document, result tables are paired one to one with ground-truth tables by the overlap of their regions (page and
bounding box; Hungarian assignment, :func:`scipy.optimize.linear_sum_assignment`); an unpaired ground-truth table
counts all its relations as missed, an unpaired result table all its relations as false. Where a document has two
ground truths (``…a`` / ``…b``) the better-scoring one is kept. Two overall figures: the per-document mean (P and R
averaged over documents, F1 of the means: Namysl et al. 2023) and the micro / cumulative one (counts summed).

Regions: a result region is correct when it lies on the page of a ground-truth region and their intersection over
union is at least :data:`REGION_IOU` (a one-to-one matching per page); this is a box measure, not the competition's
completeness / purity over text instructions.
"""

from __future__ import annotations

import re
import unicodedata
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: a result region matches a ground-truth region at this intersection over union or more
REGION_IOU = 0.5

Box = tuple[float, float, float, float]  # x1, y1, x2, y2 (any consistent orientation)
Relation = tuple[str, str, str, int]


@dataclass
class GridCell:
    """One cell on a table grid: rows ``r0..r1`` and columns ``c0..c1`` (inclusive), its ``text`` and ``page``."""

    r0: int
    c0: int
    r1: int
    c1: int
    text: str
    page: int = 1
    bbox: Box | None = None


@dataclass
class EvalTable:
    """A table: its regions as ``(page, bbox)`` pairs (PDF points, origin bottom-left as in the competition files)
    and its cells."""

    regions: list[tuple[int, Box]] = field(default_factory=list)
    cells: list[GridCell] = field(default_factory=list)


def normalise(text: str) -> str:
    """A cell's text as compared: NFKC, every whitespace character removed, lower case."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text)).lower()


def relations(cells: Sequence[GridCell]) -> Counter[Relation]:
    """The adjacency relations of one table (module docstring, rules 1-3) as a multiset."""
    slots: dict[tuple[int, int], int] = {}
    texts = [normalise(c.text) for c in cells]
    for i, c in enumerate(cells):
        for r in range(c.r0, c.r1 + 1):
            for k in range(c.c0, c.c1 + 1):
                slots.setdefault((r, k), i)
    if not slots:
        return Counter()
    rows = sorted({r for r, _ in slots})
    cols = sorted({k for _, k in slots})
    r_lo, r_hi, c_lo, c_hi = rows[0], rows[-1], cols[0], cols[-1]
    seen: dict[tuple[int, int, str], int] = {}

    def walk(line: list[int | None], direction: str) -> None:
        prev: int | None = None
        blanks = 0
        for idx in line:
            if idx is None or not texts[idx]:
                if prev is not None:
                    blanks += 1
                continue
            if idx == prev:
                continue
            if prev is not None:
                seen.setdefault((prev, idx, direction), blanks)
            prev, blanks = idx, 0

    for r in range(r_lo, r_hi + 1):
        walk([slots.get((r, k)) for k in range(c_lo, c_hi + 1)], "h")
    for k in range(c_lo, c_hi + 1):
        walk([slots.get((r, k)) for r in range(r_lo, r_hi + 1)], "v")
    return Counter((texts[a], texts[b], d, n) for (a, b, d), n in seen.items())


def _int(el: ET.Element, name: str, default: int | None = None) -> int:
    v = el.get(name)
    if v is None or v == "":
        if default is None:
            raise ValueError(f"attribute {name} missing on <{el.tag}>")
        return default
    return int(float(v))


def _box(el: ET.Element | None) -> Box | None:
    if el is None:
        return None
    try:
        return (float(el.get("x1", "")), float(el.get("y1", "")), float(el.get("x2", "")), float(el.get("y2", "")))
    except ValueError:
        return None


def read_structure(path: Path) -> list[EvalTable]:
    """The tables of a ``*-str.xml`` file (grid positions with the regions' increments applied)."""
    out: list[EvalTable] = []
    for t in ET.parse(path).getroot().iter("table"):
        tab = EvalTable()
        for reg in t.iter("region"):
            page = _int(reg, "page", 1)
            dr, dc = _int(reg, "row-increment", 0), _int(reg, "col-increment", 0)
            boxes = []
            for c in reg.iter("cell"):
                r0, c0 = _int(c, "start-row") + dr, _int(c, "start-col") + dc
                r1 = _int(c, "end-row", _int(c, "start-row")) + dr
                c1 = _int(c, "end-col", _int(c, "start-col")) + dc
                content = c.find("content")
                bb = _box(c.find("bounding-box"))
                tab.cells.append(
                    GridCell(r0, c0, r1, c1, (content.text or "") if content is not None else "", page, bb)
                )
                if bb is not None:
                    boxes.append(bb)
            rb = _box(reg.find("bounding-box"))
            if rb is None and boxes:
                rb = (
                    min(b[0] for b in boxes),
                    min(b[1] for b in boxes),
                    max(b[2] for b in boxes),
                    max(b[3] for b in boxes),
                )
            if rb is not None:
                tab.regions.append((page, rb))
        out.append(tab)
    return out


def read_regions(path: Path) -> list[tuple[int, Box]]:
    """The table regions of a ``*-reg.xml`` file as ``(page, bbox)``."""
    out = []
    for reg in ET.parse(path).getroot().iter("region"):
        bb = _box(reg.find("bounding-box"))
        if bb is not None:
            out.append((_int(reg, "page", 1), bb))
    return out


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes (corners in any order)."""
    ax1, ax2 = sorted((a[0], a[2]))
    ay1, ay2 = sorted((a[1], a[3]))
    bx1, bx2 = sorted((b[0], b[2]))
    by1, by2 = sorted((b[1], b[3]))
    iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
    ih = max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    return inter / union if union > 0 else 0.0


def _overlap(a: EvalTable, b: EvalTable) -> float:
    return sum(iou(ra, rb) for pa, ra in a.regions for pb, rb in b.regions if pa == pb)


@dataclass
class DocScore:
    """Adjacency counts of one document: relations in the result, in the ground truth, and correct ones."""

    result: int
    truth: int
    correct: int

    @property
    def precision(self) -> float:
        return self.correct / self.result if self.result else (1.0 if not self.truth else 0.0)

    @property
    def recall(self) -> float:
        return self.correct / self.truth if self.truth else 1.0


def score_document(result: Sequence[EvalTable], truth: Sequence[EvalTable]) -> DocScore:
    """Adjacency counts of one document's result tables against its ground-truth tables (one-to-one pairing by
    region overlap; unpaired tables count all their relations as false or missed)."""
    from scipy.optimize import linear_sum_assignment

    rel_r = [relations(t.cells) for t in result]
    rel_t = [relations(t.cells) for t in truth]
    n_res = sum(sum(c.values()) for c in rel_r)
    n_tru = sum(sum(c.values()) for c in rel_t)
    correct = 0
    if result and truth:
        import numpy as np

        cost = np.zeros((len(result), len(truth)))
        for i, a in enumerate(result):
            for j, b in enumerate(truth):
                ov = _overlap(a, b)
                # overlap first; among overlapping pairs, the one sharing more relations
                cost[i, j] = -(ov * 1e6 + sum((rel_r[i] & rel_t[j]).values())) if ov > 0 else 0.0
        rows, cols = linear_sum_assignment(cost)
        for i, j in zip(rows, cols):
            if cost[i, j] < 0:
                correct += sum((rel_r[i] & rel_t[j]).values())
    return DocScore(n_res, n_tru, correct)


def region_counts(result: Iterable[tuple[int, Box]], truth: Iterable[tuple[int, Box]]) -> tuple[int, int, int]:
    """``(result regions, truth regions, matched)``: one-to-one matching per page at IoU >= :data:`REGION_IOU`."""
    from scipy.optimize import linear_sum_assignment

    res, tru = list(result), list(truth)
    matched = 0
    for page in {p for p, _ in res} & {p for p, _ in tru}:
        a = [b for p, b in res if p == page]
        t = [b for p, b in tru if p == page]
        import numpy as np

        m = np.array([[iou(x, y) for y in t] for x in a])
        rows, cols = linear_sum_assignment(-m)
        matched += int(sum(m[i, j] >= REGION_IOU for i, j in zip(rows, cols)))
    return len(res), len(tru), matched


def prf(correct: int, result: int, truth: int) -> tuple[float, float, float]:
    """Precision, recall and F1 from counts (P = 1 with nothing returned and nothing to find)."""
    p = correct / result if result else (1.0 if not truth else 0.0)
    r = correct / truth if truth else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)
