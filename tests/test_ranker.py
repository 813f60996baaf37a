"""The learned ranker of hybrid search and its calibrated relevance (aisac_core.rag.ranker), for real: the shipped
model file, the features on hand-built candidates, hybrid search over the project's indexed corpus (every hit
carries its probability; an off-topic query is told "no relevant passage" and keeps its hits), the wire form, the
configuration pins, and a broken model file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from aisac_core.context import AppContext
from aisac_core.rag import ranker
from aisac_core.rag import search as retrieval


def test_shipped_model_matches_the_features_and_is_monotone() -> None:
    r = ranker.load()
    assert r.sha256 == ranker.model_sha256() and len(r.sha256) == 64
    assert r.coef.shape == (len(ranker.FEATURES),) and 0.0 < r.threshold < 1.0
    assert list(r.iso_x) == sorted(r.iso_x) and list(r.iso_y) == sorted(r.iso_y)  # isotonic: non-decreasing
    assert 0.0 <= r.iso_y[0] <= r.iso_y[-1] <= 1.0
    m = json.loads(ranker.MODEL_PATH.read_text())
    assert m["script"] == "bench/train_ranker.py" and set(m["trained_on"]) == {"Cranfield", "SciFact train"}
    # a higher logit never gets a lower probability
    ps = [r.probability(z) for z in np.linspace(-10, 10, 41)]
    assert ps == sorted(ps)
    # the threshold a host reads about is the shipped one (a retrained model must update the docs)
    root = Path(__file__).resolve().parents[1]
    for doc in ("docs/rag.md", "docs/retrieval.md", "servers/adapters/rag.py"):
        assert f"({r.threshold:.2f})" in (root / doc).read_text() or f"threshold {r.threshold:.2f}" in (
            root / doc
        ).read_text().replace("**", ""), doc


def _cand(
    i: int, doc: str, fused: float, cos: float, text: str, title: str = "", section: str = ""
) -> ranker.Candidate:
    return ranker.Candidate(
        chunk_id=f"c{i}",
        cos=cos,
        bm25=3.0 * fused,
        dense_norm=cos / 0.8,
        bm25_norm=fused,
        fused=fused,
        rank_dense=i,
        rank_bm25=i,
        rank_fused=i,
        payload={"doc_id": doc, "title": title, "section": section, "text": text, "chunk_index": i},
    )


def test_features_on_hand_built_candidates() -> None:
    cands = [
        _cand(
            0, "d1", 0.9, 0.8, "The lipase lost half of its activity.", "Lipase stability", "Lipase stability > Results"
        ),
        _cand(1, "d1", 0.6, 0.5, "Buffers were prepared fresh."),
        _cand(2, "d2", 0.3, 0.2, "Corrosion of steel in brine.", "Steel", "Methods"),
    ]
    x = ranker.features("half-life of the lipases", cands)
    f = {name: x[:, j] for j, name in enumerate(ranker.FEATURES)}
    assert x.shape == (3, len(ranker.FEATURES))
    # query terms {half, life, lipas}: "lipase" and "half" in the first chunk's text, none in the others
    assert f["cover_text"].tolist() == pytest.approx([2 / 3, 0.0, 0.0])
    assert f["cover_title"].tolist() == pytest.approx([1 / 3, 0.0, 0.0])
    assert f["cover_section"].tolist() == pytest.approx([0.0, 0.0, 0.0])  # "Results" only; the title is left out
    assert f["cos_gap"].tolist() == pytest.approx([0.0, -0.3, -0.6])
    assert f["doc_chunks"].tolist() == pytest.approx([math.log(2), math.log(2), 0.0])
    assert f["doc_gap"].tolist() == pytest.approx([0.0, -0.3, 0.0])
    assert f["fused_rank"].tolist() == pytest.approx([1.0, 1 / math.log2(3), 0.5])
    assert f["rrf"][0] == pytest.approx(60 / 61) and f["query_terms"][0] == pytest.approx(math.log(4))
    assert f["chunk_pos"].tolist() == pytest.approx([0.0, math.log(2), math.log(3)])
    assert ranker.features("anything", []).shape == (0, len(ranker.FEATURES))
    scored = ranker.score("half-life of the lipases", cands)
    assert scored[0][0] > scored[2][0] and all(0.0 <= p <= 1.0 for _, p in scored)


def test_hybrid_hits_carry_a_calibrated_relevance(indexed_core: AppContext) -> None:
    res = indexed_core.rag.search("Michaelis-Menten constant of the fungal lipase", k=5)
    assert res.hits and all(h.relevance is not None and 0.0 <= h.relevance <= 1.0 for h in res.hits)
    rel = [h.relevance or 0.0 for h in res.hits]
    assert res.hits[0].payload["path"].endswith("enzyme_kinetics.md")
    # the verdict is the threshold's, and the right document scores far above an off-topic query's best
    thr = ranker.load().threshold
    assert res.no_relevant_passage is (max(rel) < thr)
    assert (res.note is not None) is res.no_relevant_passage
    off = indexed_core.rag.search("a chocolate cake recipe with buttercream frosting for a birthday party", k=5)
    assert max(rel) > 2 * max(h.relevance or 0.0 for h in off.hits)
    out = res.as_dict()
    assert out["no_relevant_passage"] is res.no_relevant_passage
    assert out["hits"][0]["relevance"] == round(res.hits[0].relevance or 0.0, 4)
    # dense and sparse modes have no ranker: no probability, no verdict
    dense = indexed_core.rag.search("Michaelis-Menten constant of the fungal lipase", k=3, mode="dense")
    assert all(h.relevance is None for h in dense.hits) and "no_relevant_passage" not in dense.as_dict()


def test_off_topic_query_is_told_no_relevant_passage_and_keeps_its_hits(indexed_core: AppContext) -> None:
    res = indexed_core.rag.search("a chocolate cake recipe with buttercream frosting for a birthday party", k=5)
    assert res.hits, "the closest passages are kept"
    assert res.no_relevant_passage is True, [(h.payload["path"], h.relevance) for h in res.hits]
    thr = ranker.load().threshold
    assert max(h.relevance or 0.0 for h in res.hits) < thr
    assert res.note and "no relevant passage" in res.note and f"{thr:.2f}" in res.note


def test_fused_order_by_default_and_relevance_order_when_re_ranking(
    indexed_core: AppContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "storage modulus and loss modulus under oscillatory shear"
    assert retrieval.RERANK is False  # the shipped default (docs/retrieval.md, "Learned ranker")
    fused = indexed_core.rag.search(query, k=8).hits
    assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)
    monkeypatch.setattr(retrieval, "RERANK", True)
    ranked = indexed_core.rag.search(query, k=8).hits
    rel = [h.relevance or 0.0 for h in ranked]
    assert rel == sorted(rel, reverse=True) and ranked[0].payload["path"].endswith("glossary.html")
    # the same candidates' probabilities, whichever order they are shown in
    both = {h.chunk_id: h.relevance for h in fused}.keys() & {h.chunk_id: h.relevance for h in ranked}.keys()
    assert both and all(
        next(a.relevance for a in fused if a.chunk_id == c) == next(b.relevance for b in ranked if b.chunk_id == c)
        for c in both
    )


def test_config_pins_carry_the_ranker_model(indexed_core: AppContext) -> None:
    from aisac_core.trace.pins import config_pins

    pins = config_pins(indexed_core.settings, indexed_core.embedder)
    assert pins["ranker_model_sha256"] == ranker.model_sha256()
    assert pins["retrieval"]["RERANK"] == retrieval.RERANK


@pytest.mark.parametrize(
    "text", ["", "{not json", json.dumps({"features": ["cos"], "mean": [0], "scale": [1], "coef": [1]})]
)
def test_a_broken_model_file_is_a_clear_error(tmp_path: Path, text: str) -> None:
    bad = tmp_path / "ranker.json"
    bad.write_text(text)
    with pytest.raises(ranker.RankerError, match="unreadable.*reinstall aisac"):
        ranker.load(bad)
    with pytest.raises(ranker.RankerError, match="unreadable"):
        ranker.load(tmp_path / "missing.json")
