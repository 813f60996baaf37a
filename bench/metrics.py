"""Ranking metrics, written out so that every figure in the benchmark can be checked by hand."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of ``gains`` in rank order: sum_i g_i / log2(i + 1), i = 1, 2, ...

    The discount is the one of trec_eval and of most published nDCG figures (a smooth variant of
    Järvelin & Kekäläinen's log_b discount with b = 2).
    """
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at_k(ranking: Sequence[str], qrels: Mapping[str, float], k: int = 10) -> float:
    """Normalised discounted cumulative gain at ``k`` (Järvelin & Kekäläinen, "Cumulated gain-based
    evaluation of IR techniques", ACM TOIS 20(4), 2002).

    ``ranking`` lists document ids best first (duplicates are ignored after their first occurrence);
    ``qrels`` maps judged document ids to graded gains (0 = not relevant). The ideal ranking sorts all
    judged gains in decreasing order; a query without any positive gain scores 0.0 (such queries are
    best left out of the average by the caller).
    """
    seen: set[str] = set()
    gains: list[float] = []
    for d in ranking:
        if d in seen:
            continue
        seen.add(d)
        gains.append(float(qrels.get(d, 0)))
        if len(gains) == k:
            break
    ideal = dcg(sorted((float(g) for g in qrels.values() if g > 0), reverse=True)[:k])
    return dcg(gains) / ideal if ideal > 0 else 0.0


def recall_at_k(ranking: Sequence[str], qrels: Mapping[str, float], k: int = 100) -> float:
    """Fraction of the relevant documents (gain > 0) found in the first ``k`` distinct ids of ``ranking``."""
    relevant = {d for d, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    top: list[str] = []
    for d in ranking:
        if d not in top:
            top.append(d)
        if len(top) == k:
            break
    return len(relevant.intersection(top)) / len(relevant)


def mean(xs: Sequence[float]) -> float:
    """Arithmetic mean (0.0 of an empty sequence)."""
    return sum(xs) / len(xs) if xs else 0.0


def paired_randomization_test(a: Sequence[float], b: Sequence[float], rounds: int = 10000, seed: int = 0) -> float:
    """Two-sided p-value of the mean per-query difference ``a - b`` under random sign flips (Fisher's
    paired randomization test, recommended for IR by Smucker, Allan & Carterette, CIKM 2007).

    ``a`` and ``b`` hold one score per query, in the same query order.
    """
    import numpy as np

    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size == 0 or not np.any(d):
        return 1.0
    obs = abs(d.mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(rounds, d.size))
    perm = np.abs((signs * d).mean(axis=1))
    return float((np.count_nonzero(perm >= obs - 1e-12) + 1) / (rounds + 1))
