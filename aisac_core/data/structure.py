"""Line classification of spreadsheet / CSV tables, learned from published annotations (Strudel-style).

A table's non-empty lines (rows) are classified as ``metadata`` (title, units above the table), ``header`` (column
labels), ``group`` (a section label leading a block of rows), ``data``, ``derived`` (totals, subtotals) or
``notes`` (footnotes, sources below the table), as in L. Jiang, G. Vitagliano, F. Naumann, "Structure Detection
in Verbose CSV Files", EDBT 2021 (Strudel): one multi-class tree ensemble over *content* features (value types,
string shape of the line's cells), *context* features (the neighbouring non-empty lines, empty lines around, the
column's dominant type) and *computational* features (whether the line's numbers are the sum of the lines above
or below it). As in Strudel the model is a random forest (LightGBM's ``rf`` mode, chosen on validation over
gradient boosting), trained by ``bench/train_cell_types.py`` on the dev portion of the SAUS and Troy annotations
(``../shared/data/tabular/cell_types``, split by workbook) and shipped as ``models/cell_lines.lgb`` (LightGBM text
model, evaluated by :class:`aisac_core.data.forest.Forest`) with ``models/cell_lines.json`` (feature names,
classes, the sheet-confidence calibration, the workbooks it saw, held-out figures).

Cells are then labelled from their line and column (:func:`cell_labels`): in a data/derived line a text cell left of
the first numeric column is a ``LeftAttribute``; statistical markers (``..``, ``[c]``, ``(NA)``, ``-``, ``*``) are
missing values (:func:`marker_meaning`), never labels.

**Sheet confidence** (:func:`classify`): the probability that the table's header rows and body rows are all
right: a logistic map (:func:`calibrate`; chosen by cross-validated ECE over Platt scaling, isotonic regression
and logistic maps by ``bench/train_cell_types.py``) fitted on out-of-fold scores of the train and validation
workbooks, of the sum of log-probabilities of the chosen top/header/body/bottom part over the lines at the table's
boundaries, the lowest part probability (:func:`sheet_scores`) and the smallest part margin on a boundary line
(:func:`sheet_features`). Below :data:`CONFIDENT_SHEET` a loader reports the table as uncertain.

Formatting (bold, merges, fonts) is not among the features: the annotated tables are CSV renderings without it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aisac_core.calibration import isotonic
from aisac_core.data.errors import DataError
from aisac_core.data.forest import Forest

#: the line classes (Strudel's six; empty lines are not classified)
CLASSES = ("metadata", "header", "group", "data", "derived", "notes")
#: the part of the table each class belongs to, for the "table right" judgement and the sheet confidence
PART = {"metadata": "top", "header": "header", "group": "body", "data": "body", "derived": "body", "notes": "bottom"}
#: below this calibrated sheet confidence the structure is reported as uncertain (chosen on validation workbooks:
#: bench/train_cell_types.py; docs/data.md "Learned table structure")
CONFIDENT_SHEET = 0.5
#: lines classified in a long table: the first HEAD_LINES and the last TAIL_LINES non-empty lines; the lines between
#: are body lines of the same classifier run over a window around each (see :func:`classify`)
HEAD_LINES = 1500
TAIL_LINES = 300
#: rows beyond each window classified with it (context features look at most 20 non-empty lines away)
MARGIN = 60
#: columns the classifier reads (the features of a wider table are those of its first columns)
MAX_COLUMNS = 256
#: rows above a line searched for the block it may total (computational features)
SUM_WINDOW = 40

MODEL_FILE = "cell_lines.lgb"
META_FILE = "cell_lines.json"

# Statistical markers for a missing value and what they mean (ONS, Eurostat, US Census Bureau conventions).
MARKERS: dict[str, str] = {
    "..": "not available",
    "...": "not available",
    "…": "not available",
    ".": "not available",
    ":": "not available",
    "-": "nil or not applicable",
    "–": "nil or not applicable",
    "—": "nil or not applicable",
    "--": "nil or not applicable",
    "x": "suppressed (confidential)",
    "X": "suppressed (confidential)",
    "*": "suppressed or unreliable",
    "**": "suppressed or unreliable",
    "***": "suppressed or unreliable",
    "[c]": "confidential",
    "[x]": "not available",
    "[z]": "not applicable",
    "[u]": "low reliability",
    "[w]": "no cases",
    "[low]": "rounds to zero",
    "(NA)": "not available",
    "(X)": "not applicable",
    "(D)": "withheld to avoid disclosure",
    "(S)": "does not meet publication standards",
    "(Z)": "rounds to zero",
    "(B)": "base too small",
    "(NA) ": "not available",
    "NA": "not available",
    "N/A": "not available",
    "n/a": "not available",
    "n.a.": "not available",
    "na": "not available",
    "F": "too unreliable to be published",
}
_MARKER_RE = re.compile(r"^(\[[a-z]{1,4}\]|\([A-Z]{1,2}\)|\.{1,3}|…|[-–—]{1,2}|\*{1,3}|:|[xX]|n\.?/?a\.?|N/?A)$")
_NUM_RE = re.compile(r"^[-+\u2212\u2013]?\(?[-+]?[$\u20ac\u00a3]?\d[\d,.\s\u00a0'\u202f]*%?\)?(\s?[a-zA-Z*]{1,2})?$")
_PLAIN_RE = re.compile(r"^-?\d+(\.\d+)?$")
_YEAR_RE = re.compile(r"^(1[89]\d\d|20\d\d)(\.0)?$")
_WORD_RE = re.compile(r"[A-Za-z]{2,}")


def marker_meaning(value: Any) -> str | None:
    """The meaning of a statistical marker for a missing value (``..``, ``[c]``, ``(NA)``, ``-``, ``*``, ...), or
    None when ``value`` is not one. Sources: ONS / GSS "Symbols in tables" (``[c]``, ``[x]``, ``[z]``), Eurostat
    (``:``), US Census Bureau Statistical Abstract (``(NA)``, ``(X)``, ``(D)``, ``(S)``, ``(Z)``, ``(B)``)."""
    if not isinstance(value, str):
        return None
    s = value.strip()
    if not s or len(s) > 6:
        return None
    if s in MARKERS:
        return MARKERS[s]
    return "missing (statistical marker)" if _MARKER_RE.match(s) else None


def value_kind(v: Any) -> str:
    """``empty | num | year | marker | date | text`` for one cell value (a CSV string or a typed workbook value).
    Numbers as statistical tables write them (``18 080``, ``1,234.5``, ``(123)``, ``12 %``, a footnote letter
    after them) count as ``num``; an integral value 1800-2099 as ``year``."""
    if v is None:
        return "empty"
    if isinstance(v, bool):
        return "num"
    if isinstance(v, int | float):
        if isinstance(v, float) and v != v:
            return "empty"
        if float(v).is_integer() and 1800 <= v <= 2099:
            return "year"
        return "num"
    if not isinstance(v, str):
        return "date" if hasattr(v, "year") else "text"
    s = v.strip().replace("\u00a0", " ")
    if not s:
        return "empty"
    if _PLAIN_RE.match(s):  # the common case, decided without the slower patterns below
        return "year" if _YEAR_RE.match(s) else "num"
    if marker_meaning(s) is not None:
        return "marker"
    if _YEAR_RE.match(s):
        return "year"
    if _NUM_RE.match(s):
        return "num"
    return "text"


def parse_number(v: Any) -> float | None:
    """A cell's number (``18 080`` -> 18080, ``(12)`` -> -12, ``1,234.5`` -> 1234.5), None if it holds none."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return None if v != v else float(v)
    if not isinstance(v, str):
        return None
    if _PLAIN_RE.match(v.strip()):
        return float(v)
    s = v.strip().replace("\u00a0", "").replace("\u202f", "").replace(" ", "").replace("'", "")
    s = re.sub(r"[a-zA-Z*]{1,2}$", "", s).rstrip("%").replace("$", "").replace("€", "").replace("£", "")
    neg = s.startswith("(") and s.endswith(")")
    s = s.strip("()").replace("\u2212", "-").replace("\u2013", "-")
    if s.count(",") and (s.count(".") or s.count(",") > 1 or len(s.split(",")[-1]) == 3):
        s = s.replace(",", "")
    else:
        s = s.replace(",", ".")
    try:
        x = float(s)
    except ValueError:
        return None
    return -x if neg else x


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v).replace("\u00a0", " ")


@dataclass
class _Line:
    """Per-line summaries the features are computed from."""

    kinds: list[str]
    texts: list[str]
    nums: dict[int, float]
    filled: list[int]

    @property
    def n(self) -> int:
        return len(self.filled)


def _lines(grid: Sequence[Sequence[Any]], width: int) -> list[_Line]:
    out = []
    for row in grid:
        kinds, texts, nums, filled = [], [], {}, []
        for j in range(width):
            v = row[j] if j < len(row) else None
            k = value_kind(v)
            kinds.append(k)
            texts.append(_text(v).strip() if k != "empty" else "")
            if k != "empty":
                filled.append(j)
                if k in ("num", "year"):
                    x = parse_number(v)
                    if x is not None:
                        nums[j] = x
        out.append(_Line(kinds, texts, nums, filled))
    return out


_KEYWORDS = {
    "total": re.compile(r"\b(total|all|sum|subtotal|overall|average|mean|median)\b", re.I),
    "source": re.compile(r"^\W*(source|sources|note|notes|footnote|see|\d{1,2}\s|[a-z]\s|\*|-\s|\(\d\)|\[\d\])", re.I),
    "unit": re.compile(r"\b(in (thousands|millions|billions|percent|dollars)|per cent|percent|\bunits?\b)", re.I),
    "title": re.compile(r"^(table|figure|chart|no\.)\s", re.I),
}

#: names of the line features, in the model's column order
FEATURES: tuple[str, ...] = (
    "n_filled",
    "frac_filled",
    "first_col",
    "last_col_frac",
    "frac_num",
    "frac_year",
    "frac_text",
    "frac_marker",
    "frac_num_rest",
    "first_kind_text",
    "first_kind_num",
    "first_len",
    "first_indent",
    "first_words",
    "first_colon",
    "first_upper",
    "kw_total",
    "kw_source",
    "kw_unit",
    "kw_title",
    "max_len",
    "mean_text_len",
    "one_long",
    "col_type_match",
    "col_num_cols_text",
    "pos_frac",
    "idx_top",
    "idx_bottom",
    "empty_above",
    "empty_below",
    "numrows_above",
    "numrows_below",
    "before_first_numrow",
    "after_last_numrow",
    "prev_frac_filled",
    "prev_frac_num",
    "prev_first_col",
    "next_frac_filled",
    "next_frac_num",
    "next_first_col",
    "next2_frac_num",
    "prev_same_cols",
    "next_same_cols",
    "sum_above",
    "sum_below",
    "row_sum_col",
    "width",
)


def line_features(
    grid: Sequence[Sequence[Any]], n_total: int | None = None, offset: int = 0
) -> tuple[list[int], list[list[float]]]:
    """Features of every non-empty line of ``grid`` (rows of cell values: CSV strings or typed workbook values).

    Returns ``(rows, X)``: the 0-based indices of the non-empty rows and one feature vector per such row, in the
    order of :data:`FEATURES` (content, context and computational features after Strudel, Jiang et al. EDBT 2021,
    section 4.1). ``n_total``, ``offset``: for a window of a longer grid, the grid's length and the window's first
    row (the relative position is the grid's)."""
    # long function: the features of the structure model, in the order the trained model expects them
    width = max((len(r) for r in grid), default=0)
    # trailing empty columns do not count
    lines = _lines(grid, width)
    width = max((ln.filled[-1] + 1 for ln in lines if ln.filled), default=0)
    rows = [i for i, ln in enumerate(lines) if ln.filled]
    if not rows:
        return [], []
    # column profile: the dominant kind of each column over the non-empty lines
    col_counts: list[dict[str, int]] = [{} for _ in range(width)]
    for i in rows:
        for j in lines[i].filled:
            if j < width:
                k = "num" if lines[i].kinds[j] in ("num", "year", "marker") else lines[i].kinds[j]
                col_counts[j][k] = col_counts[j].get(k, 0) + 1
    col_major = [max(c, key=lambda k: c[k]) if c else "empty" for c in col_counts]
    numeric_cols = {j for j in range(width) if col_major[j] == "num"}

    def is_numrow(ln: _Line) -> bool:
        return ln.n >= 2 and sum(ln.kinds[j] in ("num", "marker") for j in ln.filled) / ln.n >= 0.5

    numrow = [is_numrow(lines[i]) for i in rows]
    num_before = [0] * len(rows)
    acc = 0
    for p in range(len(rows)):
        num_before[p] = acc
        acc += numrow[p]
    total_num = acc
    first_num = next((p for p in range(len(rows)) if numrow[p]), len(rows))
    last_num = max((p for p in range(len(rows)) if numrow[p]), default=-1)
    import numpy as np

    V = np.full((len(rows), max(width, 1)), np.nan)
    for p, i in enumerate(rows):
        for j, x in lines[i].nums.items():
            if j < width:
                V[p, j] = x
    X: list[list[float]] = []
    n_rows = len(grid) if n_total is None else n_total
    for p, i in enumerate(rows):
        ln = lines[i]
        n = ln.n
        ks = [ln.kinds[j] for j in ln.filled]
        first = ln.filled[0]
        ft = ln.texts[first]
        fk = ln.kinds[first]
        rest = [ln.kinds[j] for j in ln.filled[1:]]
        text_cells = [ln.texts[j] for j in ln.filled if ln.kinds[j] == "text"]
        raw_first = grid[i][first] if first < len(grid[i]) else ""
        indent = len(raw_first) - len(raw_first.lstrip(" \u00a0")) if isinstance(raw_first, str) else 0
        joined = " ".join(ln.texts[j] for j in ln.filled)
        match = sum(
            1
            for j in ln.filled
            if (("num" if ln.kinds[j] in ("num", "year", "marker") else ln.kinds[j]) == col_major[j])
        )
        num_cols_text = sum(1 for j in ln.filled if j in numeric_cols and ln.kinds[j] == "text")
        prev = lines[rows[p - 1]] if p > 0 else None
        nxt = lines[rows[p + 1]] if p + 1 < len(rows) else None
        nxt2 = lines[rows[p + 2]] if p + 2 < len(rows) else None
        empty_above = i - rows[p - 1] - 1 if p > 0 else i
        empty_below = rows[p + 1] - i - 1 if p + 1 < len(rows) else n_rows - i - 1

        def frac_num(x: _Line | None) -> float:
            return sum(x.kinds[j] in ("num", "year", "marker") for j in x.filled) / x.n if x is not None else -1.0

        def same_cols(x: _Line | None, ln: _Line = ln) -> float:
            if x is None:
                return -1.0
            a, b = set(ln.filled), set(x.filled)
            return len(a & b) / len(a | b)

        X.append(
            [
                float(n),
                n / max(width, 1),
                float(min(first, 10)),
                (ln.filled[-1] + 1) / max(width, 1),
                sum(k == "num" for k in ks) / n,
                sum(k == "year" for k in ks) / n,
                sum(k == "text" for k in ks) / n,
                sum(k == "marker" for k in ks) / n,
                (sum(k in ("num", "marker") for k in rest) / len(rest)) if rest else -1.0,
                float(fk == "text"),
                float(fk in ("num", "year")),
                float(min(len(ft), 200)),
                float(min(indent, 20)),
                float(min(len(ft.split()), 40)),
                float(ft.endswith(":")),
                float(ft.isupper()),
                float(bool(_KEYWORDS["total"].search(ft))),
                float(bool(_KEYWORDS["source"].match(ft))),
                float(bool(_KEYWORDS["unit"].search(joined))),
                float(bool(_KEYWORDS["title"].match(ft))),
                float(min(max(len(ln.texts[j]) for j in ln.filled), 300)),
                (sum(len(t) for t in text_cells) / len(text_cells)) if text_cells else 0.0,
                float(n == 1 and len(ft) > 40),
                match / n,
                float(num_cols_text),
                (i + offset) / max(n_rows - 1, 1),
                float(min(p, 20)),
                float(min(len(rows) - 1 - p, 20)),
                float(min(empty_above, 5)),
                float(min(empty_below, 5)),
                float(min(num_before[p], 20)),
                float(min(total_num - num_before[p] - numrow[p], 20)),
                float(p < first_num),
                float(p > last_num),
                prev.n / max(width, 1) if prev else -1.0,
                frac_num(prev),
                float(min(prev.filled[0], 10)) if prev else -1.0,
                nxt.n / max(width, 1) if nxt else -1.0,
                frac_num(nxt),
                float(min(nxt.filled[0], 10)) if nxt else -1.0,
                frac_num(nxt2),
                same_cols(prev),
                same_cols(nxt),
                _sum_of(lines, rows, p, -1, V),
                _sum_of(lines, rows, p, +1, V),
                _row_sum_col(ln),
                float(min(width, 60)),
            ]
        )
    return rows, X


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(0.011 * max(abs(a), abs(b)), 1.01)


def _sum_of(lines: list[_Line], rows: list[int], p: int, step: int, V: Any) -> float:
    """Share of the line's numeric cells equal to the sum of k >= 2 consecutive non-empty lines above (``step``
    -1) or below (+1) it, in the same column; the best k (the computational feature of Strudel). The lines summed:
    after any lines without numbers next to it, the following lines with numbers, up to :data:`SUM_WINDOW` of them
    and the next line without numbers. ``V``: the numbers of every non-empty line (NaN: none), shape (lines,
    columns). Equal within 1.1 % (or 1.01 in absolute value, for rounded published figures)."""
    import numpy as np

    ln = lines[rows[p]]
    cols = [j for j in ln.nums if j > 0 or len(ln.nums) == 1]
    if not cols:
        return 0.0
    has = ~np.isnan(V).all(axis=1)
    q = p + step
    while 0 <= q < len(rows) and not has[q]:
        q += step
    seg: list[int] = []
    while 0 <= q < len(rows) and has[q] and len(seg) < SUM_WINDOW:
        seg.append(q)
        q += step
    if len(seg) < 2:
        return 0.0
    S = V[np.ix_(seg, cols)]
    seen = np.cumsum(~np.isnan(S), axis=0)
    sums = np.cumsum(np.nan_to_num(S), axis=0)
    target = np.array([ln.nums[j] for j in cols])
    tol = np.maximum(0.011 * np.maximum(np.abs(sums), np.abs(target)), 1.01)
    ok = (seen >= 2) & (np.abs(sums - target) <= tol)
    return float(ok[1:].sum(axis=1).max() / len(cols))


def _row_sum_col(ln: _Line) -> float:
    """1 when one numeric cell of the line is the sum of the others (a Total column), else 0."""
    vals = [ln.nums[j] for j in sorted(ln.nums)]
    if len(vals) < 3:
        return 0.0
    s = sum(vals)
    return float(any(_close(s - v, v) for v in (vals[0], vals[-1])))


# -- the model ---------------------------------------------------------------------------------------------------
@dataclass
class Structure:
    """A table's structure as the line classifier reads it.

    ``rows``: 0-based grid rows of the non-empty lines; ``labels``: their class (:data:`CLASSES`); ``probs``: the
    model's class probabilities of each (not calibrated); ``confidence``: the calibrated probability that the
    header and body rows are all right; ``uncertain``: confidence below :data:`CONFIDENT_SHEET`;
    ``alternatives``: other readings worth reporting (header rows / body start) with their probabilities."""

    rows: list[int]
    labels: list[str]
    probs: list[dict[str, float]]
    confidence: float
    uncertain: bool
    alternatives: list[dict[str, Any]] = field(default_factory=list)

    def by_row(self) -> dict[int, str]:
        """Row -> class."""
        return dict(zip(self.rows, self.labels))

    def rows_of(self, *classes: str) -> list[int]:
        """The rows of the given classes, in order."""
        return [r for r, lab in zip(self.rows, self.labels) if lab in classes]


@functools.lru_cache(maxsize=1)
def _model() -> tuple[Forest, dict[str, Any]]:
    """The shipped model and its metadata (loaded once, lazily). Raises DataError when the model file is absent."""
    pkg = resources.files("aisac_core.data") / "models"
    try:
        text = (pkg / MODEL_FILE).read_text(encoding="utf-8")
        meta = json.loads((pkg / META_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, OSError) as exc:
        raise DataError(
            f"the table-structure model ({MODEL_FILE}) is missing from the package: reinstall aisac, or rebuild it "
            "with python bench/train_cell_types.py"
        ) from exc
    meta["sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Forest(text), meta


def model_sha256() -> str:
    """sha256 (hex) of the shipped model file, recorded with every frame the model read (``detected.structure``);
    '' when the model is absent."""
    try:
        return str(_model()[1]["sha256"])
    except DataError:
        return ""


def predict_proba(X: list[list[float]], booster: Any = None) -> list[list[float]]:
    """Class probabilities (order of :data:`CLASSES`) of feature vectors ``X`` (:func:`line_features`), by the
    shipped model or ``booster``."""
    import numpy as np

    if not X:
        return []
    b = booster if booster is not None else _model()[0]
    out = b.predict(np.asarray(X, dtype=float))
    return [list(map(float, r)) for r in out]


def decode(probs: list[list[float]]) -> list[str]:
    """Line classes from probabilities, with the order a table has (Strudel's post-processing is per line; this
    adds one sound rule): a ``header`` line below the first body line is kept only when its probability is clear
    (a repeated header or a second table); a ``metadata`` line below the first body line becomes ``notes`` and a
    ``notes`` line above the first header/body line becomes ``metadata``."""
    labels = [CLASSES[max(range(len(CLASSES)), key=lambda c: p[c])] for p in probs]
    first_body = next((k for k, lab in enumerate(labels) if PART[lab] in ("body", "header")), len(labels))
    for k, lab in enumerate(labels):
        if lab == "notes" and k < first_body:
            labels[k] = "metadata"
        elif lab == "metadata" and k > first_body:
            labels[k] = "notes"
    return labels


#: body lines at each end of the body counted in the sheet score (the boundary of the table)
EDGE_LINES = 3


def sheet_scores(probs: list[list[float]], labels: list[str]) -> tuple[float, float]:
    """The two scores the sheet confidence is calibrated from, over the probability of each line's chosen part
    (top / header / body / bottom, summing the classes of a part): the sum of its logarithm over the lines that
    set the table's boundaries - every line outside the body and the first and last :data:`EDGE_LINES` body lines -
    and its lowest value over all lines. Counting only the boundary lines keeps the score independent of the
    table's length (a long body of plain data lines does not lower it)."""
    if not probs:
        return 0.0, 1.0
    part_p = []
    for p, lab in zip(probs, labels):
        part = PART[lab]
        part_p.append(sum(p[c] for c, name in enumerate(CLASSES) if PART[name] == part))
    body = [k for k, lab in enumerate(labels) if PART[lab] == "body"]
    inner = set(body[EDGE_LINES:-EDGE_LINES]) if len(body) > 2 * EDGE_LINES else set()
    logs = [math.log(max(x, 1e-9)) for k, x in enumerate(part_p) if k not in inner]
    return sum(logs), min(part_p)


def sheet_features(probs: list[list[float]], labels: list[str]) -> dict[str, float]:
    """The inputs of the sheet-confidence calibration maps (``bench/train_cell_types.py`` chooses among maps over
    subsets of them by cross-validated ECE; docs/data.md "Learned table structure"), from the probability of each
    line's chosen part (top / header / body / bottom) over the boundary lines of :func:`sheet_scores`:

    - ``score``, ``log_lowest``: the two :func:`sheet_scores`;
    - ``mean_boundary``: the mean part probability of the boundary lines;
    - ``margin``: the smallest gap, over the boundary lines, between the chosen part's probability and the best
      other part's (a line the model nearly put in another part);
    - ``log_boundary``: log of 1 + the number of boundary lines; ``no_header``: 1 when no line is a header;
    - ``header_low``: the lowest part probability among the header lines (1 without header lines).

    Empty ``probs``: ``{}``."""
    if not probs:
        return {}
    parts = ("top", "header", "body", "bottom")
    part_p: list[dict[str, float]] = []
    for p in probs:
        d = dict.fromkeys(parts, 0.0)
        for c, name in enumerate(CLASSES):
            d[PART[name]] += p[c]
        part_p.append(d)
    chosen = [part_p[k][PART[lab]] for k, lab in enumerate(labels)]
    body = [k for k, lab in enumerate(labels) if PART[lab] == "body"]
    inner = set(body[EDGE_LINES:-EDGE_LINES]) if len(body) > 2 * EDGE_LINES else set()
    edge = [k for k in range(len(labels)) if k not in inner]
    margins = [chosen[k] - max(v for q, v in part_p[k].items() if q != PART[labels[k]]) for k in edge]
    header = [chosen[k] for k, lab in enumerate(labels) if PART[lab] == "header"]
    score, lowest = sheet_scores(probs, labels)
    return {
        "score": score,
        "log_lowest": math.log(max(lowest, 1e-9)),
        "mean_boundary": sum(chosen[k] for k in edge) / len(edge),
        "margin": min(margins),
        "log_boundary": math.log1p(len(edge)),
        "no_header": float(not header),
        "header_low": min(header, default=1.0),
    }


def calibrate(scores: tuple[float, float], meta: dict[str, Any], features: dict[str, float] | None = None) -> float:
    """The calibrated sheet confidence of :func:`sheet_scores` (and, for a logistic map, :func:`sheet_features`):
    isotonic regression of "table right" on the first score (``meta["isotonic"] = {x, y}``: its breakpoints, linear
    between them and constant beyond, as scikit-learn's ``IsotonicRegression`` predicts; Zadrozny and Elkan, KDD
    2002); a logistic regression over named sheet features (``meta["logistic"] = {features, coef, intercept}``:
    ``1 / (1 + exp(-(coef . x + intercept)))``, Platt's scaling with more inputs; without ``features`` only
    ``score`` and ``log_lowest`` are known, the others count 0); or Platt scaling
    ``1 / (1 + exp(-(a * score + b * log(lowest) + c)))`` with ``meta["platt"] = (a, b, c)`` (J. Platt 1999)."""
    iso = meta.get("isotonic")
    if iso:
        return isotonic(scores[0], iso["x"], iso["y"])
    lg = meta.get("logistic")
    if lg:
        f = features or {"score": scores[0], "log_lowest": math.log(max(scores[1], 1e-9))}
        z = float(lg["intercept"]) + sum(float(c) * f.get(n, 0.0) for n, c in zip(lg["features"], lg["coef"]))
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))
    a, b, c = meta["platt"]
    z = a * scores[0] + b * math.log(max(scores[1], 1e-9)) + c
    return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))


def classify(grid: Sequence[Sequence[Any]], booster: Any = None, meta: dict[str, Any] | None = None) -> Structure:
    """The line classes of ``grid`` (rows of cell values, merged cells filled or not) with the calibrated sheet
    confidence. ``booster``/``meta`` default to the shipped model.

    Long tables: only the first :data:`HEAD_LINES` and last :data:`TAIL_LINES` rows are classified (the rows between
    are body rows of the loaders' readings); only the first :data:`MAX_COLUMNS` columns are read.

    Raises:
        DataError: the shipped model is missing."""
    if booster is None or meta is None:
        booster, meta = _model()
    grid = [r[:MAX_COLUMNS] for r in grid] if any(len(r) > MAX_COLUMNS for r in grid) else grid
    n = len(grid)
    if n > HEAD_LINES + TAIL_LINES + 2 * MARGIN:
        # each window is classified with MARGIN rows beyond it, so the context features of its last (first) lines
        # are those of the whole table (they look at most 20 non-empty lines away)
        head_rows, head_x = line_features(grid[: HEAD_LINES + MARGIN], n, 0)
        start = n - TAIL_LINES - MARGIN
        tail_rows, tail_x = line_features(grid[start:], n, start)
        keep_h = [k for k, r in enumerate(head_rows) if r < HEAD_LINES]
        keep_t = [k for k, r in enumerate(tail_rows) if r + start >= n - TAIL_LINES]
        rows = [head_rows[k] for k in keep_h] + [tail_rows[k] + start for k in keep_t]
        X = [head_x[k] for k in keep_h] + [tail_x[k] for k in keep_t]
    else:
        rows, X = line_features(grid)
    probs = predict_proba(X, booster)
    labels = decode(probs)
    conf = calibrate(sheet_scores(probs, labels), meta, sheet_features(probs, labels)) if rows else 0.0
    st = Structure(
        rows=rows,
        labels=labels,
        probs=[dict(zip(CLASSES, p)) for p in probs],
        confidence=round(conf, 4),
        uncertain=conf < float(meta.get("threshold", CONFIDENT_SHEET)),
    )
    st.alternatives = _alternatives(st)
    return st


def reading_confidence(st: Structure, header: Sequence[int], body_start: int, body_end: int | None = None) -> float:
    """The calibrated confidence of another reading of the same lines: rows above ``header`` (or above
    ``body_start`` when there is no header) are the top, ``header`` the header, ``body_start..body_end`` the body
    (default: to the model's last body line), the rest the bottom; scored with the model's line probabilities
    and the same calibration as the model's own reading (:func:`sheet_scores`, :func:`calibrate`)."""
    if not st.rows:
        return 0.0
    _, meta = _model()
    hs = set(header)
    first = min([*hs, body_start])
    if body_end is None:
        body_end = max((r for r, lab in zip(st.rows, st.labels) if PART[lab] == "body"), default=body_start)
    parts: list[str] = []
    for r in st.rows:
        if r in hs:
            parts.append("header")
        elif r < first:
            parts.append("top")
        elif body_start <= r <= body_end:
            parts.append("body")
        else:
            parts.append("bottom" if r > body_end else "header")
    labels = [next(c for c in CLASSES if PART[c] == part) for part in parts]
    plist = [[p[c] for c in CLASSES] for p in st.probs]
    return calibrate(sheet_scores(plist, labels), meta, sheet_features(plist, labels))


def _alternatives(st: Structure) -> list[dict[str, Any]]:
    """Other readings of the header: lines whose header probability is between 0.2 and 0.5 (so not chosen) or a
    chosen header line whose probability is below 0.8."""
    alts = []
    for r, lab, p in zip(st.rows, st.labels, st.probs):
        h = p["header"]
        if (lab != "header" and 0.2 <= h) or (lab == "header" and h < 0.8):
            other = max((c for c in CLASSES if c != lab), key=lambda c: p[c])
            alts.append(
                {"row": r + 1, "chosen": lab, "p": round(p[lab], 3), "alternative": other, "p_alt": round(p[other], 3)}
            )
    return alts[:10]


def cell_labels(grid: Sequence[Sequence[Any]], st: Structure) -> dict[tuple[int, int], str]:
    """Cell classes (TUTA/Strudel vocabulary: MetaData, TopAttribute, LeftAttribute, Group, Data, Derived, Notes)
    of the non-empty cells, from their line class and column: in data/derived lines, text cells left of the first
    column holding numbers in most body lines are LeftAttribute; markers are Data (a missing value)."""
    body = st.rows_of("data", "derived")
    width = max((len(r) for r in grid), default=0)
    numeric_share = [0] * width
    for r in body:
        for j, v in enumerate(grid[r]):
            if value_kind(v) in ("num", "year", "marker"):
                numeric_share[j] += 1
    first_value_col = next((j for j in range(width) if body and numeric_share[j] >= len(body) / 2), width)
    names = {
        "metadata": "MetaData",
        "header": "TopAttribute",
        "group": "Group",
        "data": "Data",
        "derived": "Derived",
        "notes": "Notes",
    }
    out: dict[tuple[int, int], str] = {}
    for r, lab in zip(st.rows, st.labels):
        for j, v in enumerate(grid[r]):
            k = value_kind(v)
            if k == "empty":
                continue
            if lab in ("data", "derived") and j < first_value_col and k == "text":
                out[(r, j)] = "LeftAttribute"
            else:
                out[(r, j)] = names[lab]
    return out
