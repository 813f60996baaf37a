"""The training script of the learned ranker (bench/train_ranker.py): its folds, metrics, calibration and threshold
helpers on hand-made data, and the SciFact train split and its partial-corpus rule on the shared data (skipped
when ../shared/data is absent). The full training run is a benchmark (docs/retrieval.md), not a test."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the bench package (the training script)

from bench import scifact_full  # noqa: E402
from bench import train_ranker as T  # noqa: E402
from bench.cranfield import CranDoc, Cranfield  # noqa: E402


def _query(col: str, qid: str, labels: list[int]) -> T.Query:
    n = len(labels)
    x = np.column_stack([np.asarray(labels, dtype=float) + 0.1 * np.arange(n), np.arange(n, dtype=float)])
    docs = [f"{qid}-{i}" for i in range(n)]
    return T.Query(col, qid, x, np.asarray(labels), docs, {d: g for d, g in zip(docs, labels) if g})


def test_folds_are_per_collection_balanced_and_deterministic() -> None:
    qs = [_query("a", str(i), [1, 0]) for i in range(10)] + [_query("b", str(i), [0, 1]) for i in range(5)]
    f = T.folds(qs)
    assert f == T.folds(qs)  # seeded
    assert sorted(f[:10]) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4] and sorted(f[10:]) == [0, 1, 2, 3, 4]


def test_ndcg_of_a_reordering_and_the_fused_order() -> None:
    q = _query("a", "1", [0, 0, 1])
    assert T.ndcg(q, None) == pytest.approx(0.5)  # relevant at rank 3: 1/log2(4)
    assert T.ndcg(q, np.asarray([0.0, 0.0, 1.0])) == pytest.approx(1.0)


def test_ece_and_threshold_on_known_values() -> None:
    p = np.asarray([0.05] * 10 + [0.95] * 10)
    y = np.asarray([0] * 10 + [1] * 9 + [0])
    e, rows = T.ece(p, y)
    assert e == pytest.approx(0.5 * 0.05 + 0.5 * 0.05)
    assert rows == [("0.0-0.1", 10, 0.05, 0.0), ("0.9-1.0", 10, 0.95, 0.9)]
    # the smallest multiple of 0.05 with >= 80 % relevant above it (and at least 20 hits)
    p2 = np.concatenate([np.full(20, 0.3), np.full(30, 0.72)])
    y2 = np.concatenate([np.zeros(20), np.ones(25), np.zeros(5)])
    assert T.threshold(p2, y2) == 0.35
    assert T.threshold(np.full(30, 0.9), np.zeros(30)) == 0.95  # never precise enough: the highest


def test_logistic_fit_and_isotonic_map_rank_the_relevant_first() -> None:
    qs = [_query("a", str(i), [0, 1, 0, 0]) for i in range(12)]
    m = T.fit(qs, 1.0)
    z = T.logits(m, qs[0].x)
    assert int(np.argmax(z)) == 1
    xs, ys = T.fit_isotonic(np.concatenate([T.logits(m, q.x) for q in qs]), np.concatenate([q.y for q in qs]))
    assert xs == sorted(xs) and ys == sorted(ys) and T.calibrate(np.asarray([z[1]]), xs, ys)[0] > 0.9


def test_first_docs_turns_claims_without_their_abstracts_into_no_answer_queries() -> None:
    col = Cranfield(
        [CranDoc("30", "", "c"), CranDoc("1000", "", "a"), CranDoc("200", "", "b")],
        {"q1": "x", "q2": "y"},
        {"q1": {"1000": 1, "30": 1}, "q2": {"30": 1}},
    )
    sub, none = T.first_docs(col, 2)  # file names cran-0030, cran-0200, cran-1000: the first two
    assert [d.doc_id for d in sub.docs] == ["30", "200"]
    assert sub.qrels == {"q1": {"30": 1}, "q2": {"30": 1}} and none == []
    sub, none = T.first_docs(col, 1)
    assert sub.qrels["q1"] == {"30": 1} and none == []
    col.qrels["q2"] = {"1000": 1}
    assert T.first_docs(col, 2)[1] == ["q2"]
    assert T.first_docs(col, None) == (col, [])


def test_scifact_train_split_from_shared_data(shared_data: Path) -> None:
    folder = shared_data / "claims" / "scifact"
    if not all((folder / f).exists() for f in scifact_full.FILES):
        pytest.skip("../shared/data/claims/scifact is absent")
    col = scifact_full.load(folder)
    assert len(col.docs) == 5183 and len(col.queries) == 807
    assert all(col.qrels[q] and all(g == 1 for g in col.qrels[q].values()) for q in col.queries)
    ids = {d.doc_id for d in col.docs}
    assert all(d in ids for r in col.qrels.values() for d in r)  # every cited abstract is in the corpus
    sub, none = T.first_docs(col, 2000)
    assert len(sub.docs) == 2000 and len(none) == 388  # the figures of docs/retrieval.md


def test_cached_candidates_are_re_described_with_the_current_features() -> None:
    """The candidate cache keeps candidates, not features: describe() rebuilds features and labels from them."""
    import pickle

    from aisac_core.rag import ranker

    def cand(i: int, path: str, text: str) -> ranker.Candidate:
        payload = {"doc_id": f"d{i}", "path": path, "title": "", "section": "", "text": text, "chunk_index": 0}
        return ranker.Candidate(f"c{i}", 0.5 - 0.1 * i, 2.0, 0.5, 0.4, 0.6 - 0.1 * i, i, i, i, payload)

    cands = (cand(0, "/s/cran-0042.md", "lipase half-life"), cand(1, "/s/cran-0007.md", "steel corrosion"))
    q = T.describe("SciFact train", "q1", "half-life of lipases", cands, {"42": 1})
    assert q.docs == ["42", "7"] and q.y.tolist() == [1, 0]
    assert np.array_equal(q.x, ranker.features("half-life of lipases", cands))
    again = pickle.loads(pickle.dumps(q))  # what the cache stores
    q2 = T.describe(again.col, again.qid, again.text, again.cands, again.qrels)
    assert np.array_equal(q2.x, q.x) and q2.y.tolist() == q.y.tolist()
