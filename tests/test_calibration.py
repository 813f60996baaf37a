"""The shared isotonic calibration map reads breakpoints exactly as scikit-learn's IsotonicRegression predicts."""

from __future__ import annotations

import numpy as np
import pytest

from aisac_core.calibration import isotonic


def test_isotonic_map_matches_scikit_learn_inside_and_beyond_the_breakpoints() -> None:
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    score = rng.uniform(-3, 3, 400)
    right = (rng.uniform(0, 1, 400) < 1 / (1 + np.exp(-2 * score))).astype(float)
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(score, right)
    xs, ys = list(iso.X_thresholds_), list(iso.y_thresholds_)
    probe = np.concatenate([rng.uniform(-5, 5, 300), np.asarray(xs)])
    ours = np.array([isotonic(float(x), xs, ys) for x in probe])
    assert np.allclose(ours, iso.predict(probe), atol=1e-12)


def test_isotonic_map_edge_cases() -> None:
    assert isotonic(0.3, [], []) == 0.0
    assert isotonic(5.0, [1.0, 2.0], [0.2, 0.8]) == 0.8 and isotonic(-5.0, [1.0, 2.0], [0.2, 0.8]) == 0.2
    assert isotonic(1.5, [1.0, 2.0], [0.2, 0.8]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="2 breakpoints but 1 values"):
        isotonic(0.5, [0.0, 1.0], [0.5])
