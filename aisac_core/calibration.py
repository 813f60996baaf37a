"""Calibration maps shared by the learned readers (paper headers, table structure): a raw model score to a probability.

The maps are fitted by the training scripts (``bench/train_*.py``) with scikit-learn and shipped as plain numbers in
the model files, so reading them needs no scikit-learn at run time.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence


def isotonic(x: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    """The isotonic calibration map at ``x``: ``ys`` interpolated linearly between the breakpoints ``xs`` (ascending)
    and constant beyond them, exactly as scikit-learn's ``IsotonicRegression(out_of_bounds="clip").predict`` evaluates
    its fitted thresholds (isotonic calibration: Zadrozny and Elkan, KDD 2002). 0.0 when there are no breakpoints.

    Raises:
        ValueError: ``xs`` and ``ys`` differ in length.
    """
    if len(xs) != len(ys):
        raise ValueError(f"isotonic map: {len(xs)} breakpoints but {len(ys)} values")
    if not xs:
        return 0.0
    if x <= xs[0]:
        return float(ys[0])
    if x >= xs[-1]:
        return float(ys[-1])
    k = bisect.bisect_right(xs, x)
    x0, x1, y0, y1 = xs[k - 1], xs[k], ys[k - 1], ys[k]
    return float(y0 + (y1 - y0) * (x - x0) / (x1 - x0)) if x1 > x0 else float(y1)
