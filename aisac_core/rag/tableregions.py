"""The learned table-region classifier of the PDF table reader (:mod:`aisac_core.rag.pdftables`): is a candidate region
the layout rules proposed a table of the ground truth's kind?

Each candidate (:func:`aisac_core.rag.pdftables.candidate_tables`) is described by :data:`FEATURES`, computed from the
parse alone (its grid, cells, caption, rulings and place on the page; :func:`region_features`). A logistic regression
(scikit-learn, fitted by ``bench/train_table_regions.py``; Cox, 1958) over the standardised features gives a logit;
an isotonic map fitted on cross-fitted (leave-one-document-out) logits turns it into the region's calibrated
probability (Zadrozny and Elkan, KDD 2002; :func:`aisac_core.calibration.isotonic`); a candidate is kept when that
probability reaches the model's threshold, chosen by leave-one-document-out adjacency F1 (Göbel et al., ICDAR 2013)
on the development documents of the ICDAR 2013 portion (and, by the policy chosen the same way, a captioned candidate
the hand rules keep is kept whatever its probability). The model is plain JSON (``models/table_regions.json``: the
weights, the map, the threshold, the policy, the cross-validated figures), read lazily without scikit-learn; its
sha256 (:func:`model_sha256`) is recorded with every table read (``detected.region_model_sha256``) and in the
configuration pins of traced runs. Figures: docs/rag.md, "Tables in PDFs".
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from aisac_core.calibration import isotonic
from aisac_core.errors import AisacError

if TYPE_CHECKING:
    from aisac_core.rag.pdftables import PdfTable

MODEL_PATH = Path(__file__).parent / "models" / "table_regions.json"

#: the features of a candidate region, in the model's order (all from the parse; shares in [0, 1])
FEATURES: tuple[str, ...] = (
    "log_rows",  # ln(grid rows)
    "log_cols",  # ln(grid columns)
    "fill",  # share of the grid's slots with text (spanning cells count every slot)
    "numeric_share",  # share of non-empty cells that are a number
    "digit_share",  # share of non-empty cells holding a digit
    "words_per_cell",  # ln(1 + mean words per non-empty cell)
    "prose_cells",  # share of non-empty cells of six words or more (running text)
    "table_caption",  # a "Table N" / "Exhibit N" caption next to it
    "figure_caption",  # a "Figure N" / "Chart N" caption next to it
    "beside_axis",  # in the plot area of a chart's value axis
    "ruled",  # read by its rulings (a ruling under every row)
    "width_share",  # width / page width
    "height_share",  # height / page height
    "row_cells_cv",  # coefficient of variation of non-empty cells per row
    "multi_rows",  # share of rows with text in two columns or more
    "pitch_cv",  # coefficient of variation of the gaps between consecutive rows' tops
    "rulings",  # ln(1 + horizontal rulings inside the region across half its width or more)
    "header_share",  # header rows / rows
    "label_rows",  # share of body rows whose first cell has letters
    "rules_keep",  # the hand rules' verdict (three rows, 40 % filled, no figure caption, no value axis)
)

_NUMBER = re.compile(r"^[-+\u2212\u2013(]?[$\u20ac\u00a3]?\d[\d,.\s\u00a0']*%?\)?\S{0,2}$")
_TABLE_CAPTION = re.compile(r"^(table|tab\.|exhibit)\s*[0-9IVXA-Z]", re.I)


class TableModelError(AisacError, RuntimeError):
    """The shipped table-region model is missing or unreadable (an install defect: reinstall aisac)."""


def _cv(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = statistics.fmean(values)
    return statistics.pstdev(values) / m if m > 0 else 0.0


def region_features(
    t: PdfTable,
    page_width: float,
    page_height: float,
    rules: Sequence[tuple[float, float, float]],
    *,
    ruled: bool,
    figure: bool,
    axis: bool,
    rules_keep: bool,
) -> dict[str, float]:
    """The :data:`FEATURES` of candidate table ``t`` on a page ``page_width`` x ``page_height`` points whose
    horizontal rulings are ``rules`` (``(y, x0, x1)``, origin top-left); ``ruled``, ``figure``, ``axis`` and
    ``rules_keep``: how the candidate was found and what the hand rules said of it
    (:func:`aisac_core.rag.pdftables.candidate_tables`)."""
    texts = [c for c in t.cells if c.text.strip()]
    n = max(1, len(texts))
    slots = sum((c.row_end - c.row + 1) * (c.col_end - c.col + 1) for c in texts)
    words = [len(c.text.split()) for c in texts]
    per_row = [0] * t.n_rows
    tops: dict[int, float] = {}
    for c in texts:
        per_row[c.row] += 1
        tops[c.row] = min(tops.get(c.row, c.bbox[1]), c.bbox[1])
    order = [tops[r] for r in sorted(tops)]
    gaps = [b - a for a, b in zip(order, order[1:]) if b > a]
    left, top, r, bot = t.bbox
    inside = [y for y, x0, x1 in rules if top - 2 <= y <= bot + 2 and min(x1, r) - max(x0, left) >= 0.5 * (r - left)]
    first = {c.row: c.text for c in texts if c.col == 0}
    body = range(t.header_rows, t.n_rows)
    return {
        "log_rows": math.log(max(1, t.n_rows)),
        "log_cols": math.log(max(1, t.n_cols)),
        "fill": slots / max(1, t.n_rows * t.n_cols),
        "numeric_share": sum(bool(_NUMBER.match(c.text.strip())) for c in texts) / n,
        "digit_share": sum(any(ch.isdigit() for ch in c.text) for c in texts) / n,
        "words_per_cell": math.log1p(statistics.fmean(words)) if words else 0.0,
        "prose_cells": sum(w >= 6 for w in words) / n,
        "table_caption": float(bool(t.caption and _TABLE_CAPTION.match(t.caption))),
        "figure_caption": float(figure),
        "beside_axis": float(axis),
        "ruled": float(ruled),
        "width_share": (r - left) / page_width if page_width > 0 else 0.0,
        "height_share": (bot - top) / page_height if page_height > 0 else 0.0,
        "row_cells_cv": _cv([float(k) for k in per_row]),
        "multi_rows": sum(k >= 2 for k in per_row) / max(1, t.n_rows),
        "pitch_cv": _cv(gaps),
        "rulings": math.log1p(len(inside)),
        "header_share": t.header_rows / max(1, t.n_rows),
        "label_rows": sum(bool(re.search(r"[A-Za-z]", first.get(k, ""))) for k in body) / max(1, len(body)),
        "rules_keep": float(rules_keep),
    }


@dataclass(frozen=True)
class RegionModel:
    """A fitted region classifier: logistic weights over standardised :data:`FEATURES`, the isotonic map from its
    logit to P(table region), the ``threshold`` on that probability above which a candidate is kept, and the policy
    for captioned candidates (``keep_captioned``)."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    iso_x: tuple[float, ...]
    iso_y: tuple[float, ...]
    threshold: float
    sha256: str
    #: keep a candidate with a "Table N" caption that the hand rules keep whatever its probability (a policy chosen
    #: by the training script's cross-validation, like the threshold)
    keep_captioned: bool = False

    def logit(self, features: Mapping[str, float]) -> float:
        """The model's logit for one candidate's ``features`` (a mapping holding every name of :data:`FEATURES`)."""
        z = self.intercept
        for name, m, s, w in zip(FEATURES, self.mean, self.scale, self.coef):
            z += w * (float(features[name]) - m) / s
        return z

    def probability(self, features: Mapping[str, float]) -> float:
        """The calibrated P(table region) of a candidate, in [0, 1] (the isotonic map of its logit)."""
        return min(1.0, max(0.0, isotonic(self.logit(features), self.iso_x, self.iso_y)))


def model_sha256() -> str:
    """sha256 (hex) of the shipped model file ``models/table_regions.json`` ("" when it is missing)."""
    try:
        return hashlib.sha256(MODEL_PATH.read_bytes()).hexdigest()
    except OSError:
        return ""


def parse_model(raw: bytes) -> RegionModel:
    """A :class:`RegionModel` from the JSON bytes the training script writes.

    Raises:
        ValueError: malformed (not JSON, other features, lengths that differ, a non-positive scale).
    """
    try:
        m = json.loads(raw)
        if list(m["features"]) != list(FEATURES):
            raise ValueError(f"features {m['features']} differ from this release's {list(FEATURES)}")
        r = RegionModel(
            mean=tuple(float(v) for v in m["mean"]),
            scale=tuple(float(v) for v in m["scale"]),
            coef=tuple(float(v) for v in m["coef"]),
            intercept=float(m["intercept"]),
            iso_x=tuple(float(v) for v in m["isotonic"]["x"]),
            iso_y=tuple(float(v) for v in m["isotonic"]["y"]),
            threshold=float(m["threshold"]),
            sha256=hashlib.sha256(raw).hexdigest(),
            keep_captioned=bool(m.get("keep_captioned", False)),
        )
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(str(exc)) from exc
    if not (len(r.mean) == len(r.scale) == len(r.coef) == len(FEATURES)) or min(r.scale) <= 0:
        raise ValueError("weights do not match the features")
    if len(r.iso_x) != len(r.iso_y) or not r.iso_x:
        raise ValueError("the isotonic map is empty or its breakpoints and values differ in length")
    return r


@cache
def load(path: Path = MODEL_PATH) -> RegionModel:
    """The region model in ``path`` (read once).

    Raises:
        TableModelError: the file is missing or malformed.
    """
    try:
        return parse_model(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise TableModelError(f"the table-region model {path} is unreadable ({exc}); reinstall aisac") from exc
