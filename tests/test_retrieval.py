"""Search over the indexed corpus, for real: hybrid / dense / sparse, filters, evidence anchors, chunk
look-up, document listing, and the qdrant-client backend against Qdrant Edge.

``indexed_core`` (conftest) is the project's corpus indexed once per session in a Qdrant Edge store;
``qdrant_core`` below is the same corpus in a qdrant-client local-mode store. Both are read-only here.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

import pytest
from conftest import make_settings
from fixtures_gen import PAGE_MARKERS

from aisac_core.context import AppContext
from aisac_core.hashing import sha256_file
from aisac_core.rag.indexer import doc_id_for
from aisac_core.rag.search import FILTER_KEYS, MAX_K, SearchError

#: distinctive query -> the file that answers it
QUERIES = {
    "Michaelis-Menten constant of the fungal lipase": "notes/enzyme_kinetics.md",
    "storage modulus and loss modulus under oscillatory shear": "glossary.html",
    "stainless steel coupons corrosion in saline passivation": "summary.docx",
    "Nusselt number of a packed bed of alumina spheres": "notes/heat_transfer.md",
    PAGE_MARKERS[1]: "report.pdf",
    PAGE_MARKERS[2]: "report.pdf",
}


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _rel(hit_or_path, corpus: Path) -> str:  # noqa: ANN001
    path = hit_or_path if isinstance(hit_or_path, str) else hit_or_path.payload["path"]
    return Path(path).relative_to(corpus).as_posix()


@pytest.fixture(scope="module")
def qdrant_core(tmp_path_factory: pytest.TempPathFactory, models_dir: Path, corpus: Path, shared_embedder):  # noqa: ANN001, ANN201
    c = AppContext(
        make_settings(tmp_path_factory.mktemp("qdrant-store") / "store", models_dir, vector_backend="qdrant"),
        embedder=shared_embedder,
    )
    c.rag.indexer.run([corpus])
    yield c
    c.close()


# ---- modes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_distinctive_query_finds_its_document(indexed_core: AppContext, corpus: Path, mode: str, query: str) -> None:
    res = indexed_core.rag.search(query, k=5, mode=mode)
    assert res.mode == mode and res.message is None
    assert res.hits, query
    assert _rel(res.hits[0], corpus) == QUERIES[query], [(_rel(h, corpus), h.score) for h in res.hits]
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores, reverse=True)
    assert len({h.chunk_id for h in res.hits}) == len(res.hits)


def test_hybrid_scores(indexed_core: AppContext, monkeypatch: pytest.MonkeyPatch) -> None:
    from aisac_core.rag import search as retrieval

    for query in QUERIES:
        assert all(0.0 <= h.score <= 1.0 + 1e-9 for h in indexed_core.rag.search(query, k=10).hits)
    # without pseudo-relevance feedback the BM25 list is the query's own: best on both lists -> 1.0
    monkeypatch.setattr(retrieval, "PRF_CHUNKS", 0)
    monkeypatch.setattr(retrieval, "DENSE_PRF_CHUNKS", 0)
    for query in QUERIES:
        hits = indexed_core.rag.search(query, k=10).hits
        dense = indexed_core.rag.search(query, k=1, mode="dense").hits[0]
        sparse = indexed_core.rag.search(query, k=1, mode="sparse").hits[0]
        if dense.chunk_id == sparse.chunk_id:  # first in both lists: first in the fusion
            assert hits[0].chunk_id == dense.chunk_id
        if retrieval.FUSION == "convex":  # normalised scores, combined convexly: in [0, 1]
            assert all(0.0 <= h.score <= 1.0 + 1e-9 for h in hits)
            if dense.chunk_id == sparse.chunk_id:
                assert hits[0].score == pytest.approx(1.0)


def test_dense_feedback_moves_the_query_towards_the_best_chunks(
    indexed_core: AppContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rocchio on the embedding: q' = w q + (1 - w) mean(v of the best chunks), unit length; off at 0 chunks."""
    import numpy as np

    from aisac_core.rag import search as retrieval

    monkeypatch.setattr(retrieval, "DENSE_PRF_CHUNKS", 3)
    vs = indexed_core.vectors()
    query = next(iter(QUERIES))
    q = indexed_core.embedder.embed_query(query)
    order = [h.chunk_id for h in indexed_core.rag.search(query, k=5, mode="dense").hits]
    new = retrieval.dense_feedback(vs, "chunks", q, order)
    assert new is not None and np.linalg.norm(new) == pytest.approx(1.0, abs=1e-5)
    fb = np.mean([vs.dense_vectors("chunks", [i])[i] for i in order[: retrieval.DENSE_PRF_CHUNKS]], axis=0)
    w = retrieval.DENSE_PRF_QUERY_WEIGHT
    want = w * np.asarray(q) + (1 - w) * fb
    assert np.allclose(new, want / np.linalg.norm(want), atol=1e-5)
    assert float(np.dot(new, fb)) > float(np.dot(q, fb))  # closer to the feedback chunks than the query was
    assert retrieval.dense_feedback(vs, "chunks", q, []) is None
    monkeypatch.setattr(retrieval, "DENSE_PRF_CHUNKS", 0)
    assert retrieval.dense_feedback(vs, "chunks", q, order) is None


def test_dense_feedback_is_skipped_when_the_dense_first_pass_has_a_clear_winner(
    indexed_core: AppContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Selective feedback: no Rocchio when the best dense cosine beats the second by DENSE_PRF_CLEAR_GAP."""
    from aisac_core.rag import search as retrieval

    gap = retrieval.DENSE_PRF_CLEAR_GAP
    assert gap is not None and 0 < gap < 1
    assert retrieval.clear_winner({"a": 0.80, "b": 0.80 - gap}, gap)  # the boundary counts as clear
    assert not retrieval.clear_winner({"a": 0.80, "b": 0.80 - gap / 2, "c": 0.1}, gap)
    assert retrieval.clear_winner({"a": 0.3}, gap) and not retrieval.clear_winner({}, gap)
    assert not retrieval.clear_winner({"a": 0.9, "b": 0.1}, None)  # None: feedback always
    monkeypatch.setattr(retrieval, "DENSE_PRF_CHUNKS", 3)
    vs = indexed_core.vectors()
    query = next(iter(QUERIES))
    q = indexed_core.embedder.embed_query(query)
    order = [h.chunk_id for h in indexed_core.rag.search(query, k=5, mode="dense").hits]
    clear = {order[0]: 0.9, order[1]: 0.9 - 2 * gap}
    flat = {order[0]: 0.9, order[1]: 0.9 - gap / 2}
    assert retrieval.dense_feedback(vs, "chunks", q, order, clear) is None
    assert retrieval.dense_feedback(vs, "chunks", q, order, flat) is not None
    monkeypatch.setattr(retrieval, "DENSE_PRF_CLEAR_GAP", None)
    assert retrieval.dense_feedback(vs, "chunks", q, order, clear) is not None


def test_page_marker_hits_its_page(indexed_core: AppContext) -> None:
    for page, marker in PAGE_MARKERS.items():
        top = indexed_core.rag.search(marker, k=1).hits[0].payload
        assert top["page"] == page and marker in top["text"]


def test_k_bounds_the_hits(indexed_core: AppContext) -> None:
    total = indexed_core.vectors().count("chunks")
    assert total > 5
    assert len(indexed_core.rag.search("heat", k=2, mode="dense").hits) == 2
    assert len(indexed_core.rag.search("heat", k=MAX_K, mode="dense").hits) == total
    assert len(indexed_core.rag.search("heat", k=1).hits) == 1


# ---- filters -------------------------------------------------------------------------------------------


def _hits(core: AppContext, query: str, filters: dict, k: int = 20, mode: str = "hybrid"):  # noqa: ANN202
    return core.rag.search(query, k=k, filters=filters, mode=mode).hits


def test_filter_doc_id(indexed_core: AppContext, corpus: Path) -> None:
    did = doc_id_for(corpus / "notes" / "heat_transfer.md")
    hits = _hits(indexed_core, "enzyme kinetics", {"doc_id": did})
    assert hits and {h.payload["doc_id"] for h in hits} == {did}
    two = [did, doc_id_for(corpus / "glossary.html")]
    hits = _hits(indexed_core, "enzyme kinetics", {"doc_id": two}, mode="dense")
    assert {h.payload["doc_id"] for h in hits} == set(two)


def test_filter_path_glob(indexed_core: AppContext, corpus: Path) -> None:
    hits = _hits(indexed_core, "measurements", {"path_glob": "*.md"}, mode="dense")
    assert {_rel(h, corpus) for h in hits} == {"notes/heat_transfer.md", "notes/enzyme_kinetics.md"}
    hits = _hits(indexed_core, "measurements", {"path_glob": "*/notes/heat*"}, mode="dense")
    assert {_rel(h, corpus) for h in hits} == {"notes/heat_transfer.md"}
    res = indexed_core.rag.search("measurements", filters={"path_glob": "*.pptx"})
    assert res.hits == [] and "no indexed document matches" in (res.message or "")


def test_filter_page_range(indexed_core: AppContext) -> None:
    q = "perovskite catalyst"
    assert {h.payload["page"] for h in _hits(indexed_core, q, {"page_from": 2})} == {2}
    assert {h.payload["page"] for h in _hits(indexed_core, q, {"page_to": 1})} == {1}
    assert {h.payload["page"] for h in _hits(indexed_core, q, {"page_from": 1, "page_to": 2})} == {1, 2}
    assert _hits(indexed_core, q, {"page_from": 3}) == []
    # only paged documents (PDF) have pages: a page filter keeps to them
    assert {h.payload["file_type"] for h in _hits(indexed_core, "heat transfer", {"page_from": 1}, mode="dense")} == {
        "pdf"
    }


def test_filter_file_type(indexed_core: AppContext) -> None:
    assert {h.payload["file_type"] for h in _hits(indexed_core, "enzyme", {"file_type": "pdf"}, mode="dense")} == {
        "pdf"
    }
    assert {
        h.payload["file_type"] for h in _hits(indexed_core, "enzyme", {"file_type": ["html", "docx"]}, mode="dense")
    } == {"html", "docx"}
    assert _hits(indexed_core, "enzyme", {"file_type": "pptx"}) == []


def test_filter_section(indexed_core: AppContext, corpus: Path) -> None:
    hits = _hits(indexed_core, "temperature", {"section": "results"}, mode="dense")
    assert hits and {h.payload["section_covers"] for h in hits} == {"results"}
    assert {_rel(h, corpus) for h in hits} == {"notes/heat_transfer.md", "notes/enzyme_kinetics.md"}
    hits = _hits(indexed_core, "temperature", {"section": ["abstract", "conclusion"]}, mode="dense")
    assert {h.payload["section_covers"] for h in hits} == {"abstract", "conclusion"}


def test_filters_combine(indexed_core: AppContext, corpus: Path) -> None:
    hits = _hits(indexed_core, "how was it measured", {"file_type": "md", "section": "methods"}, mode="dense")
    assert len(hits) == 2
    assert {_rel(h, corpus) for h in hits} == {"notes/heat_transfer.md", "notes/enzyme_kinetics.md"}
    assert all(h.payload["section_covers"] == "methods" for h in hits)
    hits = _hits(
        indexed_core, "how was it measured", {"path_glob": "*enzyme*", "section": "methods", "file_type": "md"}
    )
    assert [_rel(h, corpus) for h in hits] == ["notes/enzyme_kinetics.md"]
    # doc_id and path_glob intersect: disjoint -> nothing, with the reason
    res = indexed_core.rag.search(
        "enzyme", filters={"doc_id": doc_id_for(corpus / "notes" / "enzyme_kinetics.md"), "path_glob": "*heat*"}
    )
    assert res.hits == [] and "no indexed document matches" in (res.message or "")
    hits = _hits(
        indexed_core,
        "perovskite",
        {"file_type": "pdf", "page_from": 1, "page_to": 1, "doc_id": doc_id_for(corpus / "report.pdf")},
    )
    assert [h.payload["page"] for h in hits] == [1]


# ---- bad input -----------------------------------------------------------------------------------------


def test_unknown_filter_key_lists_accepted_keys(indexed_core: AppContext) -> None:
    with pytest.raises(SearchError) as ei:
        indexed_core.rag.search("enzyme", filters={"author": "x", "file_type": "md"})
    msg = str(ei.value)
    assert "author" in msg
    for key in FILTER_KEYS:
        assert key in msg


@pytest.mark.parametrize("k", [0, -1, 10**6, MAX_K + 1, True, "3", 2.0, None])
def test_k_out_of_range(indexed_core: AppContext, k) -> None:  # noqa: ANN001
    with pytest.raises(SearchError, match=f"k must be an integer from 1 to {MAX_K}"):
        indexed_core.rag.search("enzyme", k=k)


@pytest.mark.parametrize("query", ["", "   \n\t", None])
def test_empty_query(indexed_core: AppContext, query) -> None:  # noqa: ANN001
    with pytest.raises(SearchError, match="query is empty"):
        indexed_core.rag.search(query)


@pytest.mark.parametrize(
    ("filters", "match"),
    [
        ({"page_from": 0}, "page_from must be a page number"),
        ({"page_to": "2"}, "page_to must be a page number"),
        ({"page_from": 3, "page_to": 2}, "is after page_to"),
        ({"doc_id": ""}, "doc_id must be"),
        ({"doc_id": []}, "doc_id must be"),
        ({"path_glob": ""}, "path_glob must be"),
        ({"file_type": [1]}, "file_type must be"),
        ({"section": ""}, "section must be"),
    ],
)
def test_bad_filter_values(indexed_core: AppContext, filters: dict, match: str) -> None:
    with pytest.raises(SearchError, match=match):
        indexed_core.rag.search("enzyme", filters=filters)


def test_bad_mode_and_long_query(indexed_core: AppContext) -> None:
    with pytest.raises(SearchError, match="mode must be one of hybrid, dense, sparse"):
        indexed_core.rag.search("enzyme", mode="fuzzy")
    with pytest.raises(SearchError, match="limit is 2000"):
        indexed_core.rag.search("x" * 2001)


def test_query_without_hits_says_why(indexed_core: AppContext) -> None:
    res = indexed_core.rag.search("qwxzyvjj blorptastic", mode="sparse")
    assert res.hits == [] and "no chunk shares a term" in (res.message or "")
    res = indexed_core.rag.search("the", mode="sparse")  # a stopword only: an empty sparse query
    assert res.hits == [] and res.message
    # hybrid still answers from the dense side
    assert indexed_core.rag.search("qwxzyvjj blorptastic").hits


def test_empty_index_says_so(fast_core: AppContext) -> None:
    res = fast_core.rag.search("enzyme")
    assert res.hits == [] and "index is empty" in (res.message or "")
    assert res.as_dict()["count"] == 0 and "message" in res.as_dict()


# ---- anchors, chunks, documents ------------------------------------------------------------------------


def test_hits_carry_complete_anchors(indexed_core: AppContext, corpus: Path) -> None:
    seen_docs = set()
    for query in QUERIES:
        res = indexed_core.rag.search(query, k=5).as_dict()
        assert res["count"] == len(res["hits"]) > 0
        for h in res["hits"]:
            a = h["anchor"]
            assert set(a) == {
                "chunk_id",
                "doc_id",
                "path",
                "sha256",
                "section",
                "page",
                "char_span",
                "chunk_sha256",
                "score",
            }
            assert a["chunk_id"] == h["chunk_id"] and a["doc_id"] == h["doc_id"] and a["path"] == h["path"]
            assert a["score"] == h["score"]
            path = Path(a["path"])
            assert a["doc_id"] == doc_id_for(path)
            assert a["sha256"] == sha256_file(path)
            assert a["chunk_sha256"] == hashlib.sha256(h["text"].encode("utf-8")).hexdigest()
            found = indexed_core.rag.document(a["doc_id"])
            assert found is not None and found[1] is not None
            text = found[1].text
            start, end = a["char_span"]
            assert 0 <= start < end <= len(text)
            assert _norm(text[start:end]) == _norm(h["text"])
            if h["file_type"] == "pdf":
                assert a["page"] in (1, 2)
            else:
                assert a["page"] is None
            assert a["section"] == (h["section"] or None)
            seen_docs.add(a["doc_id"])
    assert len(seen_docs) == 5


def test_get_chunk_round_trip(indexed_core: AppContext) -> None:
    hit = indexed_core.rag.search(PAGE_MARKERS[1], k=1).as_dict()["hits"][0]
    chunk = indexed_core.rag.get_chunk(hit["chunk_id"])
    assert chunk is not None
    assert chunk["score"] is None and chunk["anchor"]["score"] is None
    # a chunk looked up by id has no search score and no probability of relevance (hybrid hits carry one)
    expected = dict(hit, score=None, relevance=None, anchor=dict(hit["anchor"], score=None))
    assert chunk == expected
    assert indexed_core.rag.get_chunk(str(uuid.uuid4())) is None
    assert indexed_core.rag.get_chunk("not-a-uuid") is None


def test_list_documents_paging(indexed_core: AppContext, corpus: Path) -> None:
    everything = indexed_core.rag.list_documents()
    assert everything["total"] == 5 and everything["next_offset"] is None
    paths = [d["path"] for d in everything["documents"]]
    assert paths == sorted(paths)
    first = indexed_core.rag.list_documents(limit=2)
    assert [d["path"] for d in first["documents"]] == paths[:2] and first["next_offset"] == 2
    middle = indexed_core.rag.list_documents(limit=2, offset=2)
    assert [d["path"] for d in middle["documents"]] == paths[2:4] and middle["next_offset"] == 4
    last = indexed_core.rag.list_documents(limit=2, offset=4)
    assert [d["path"] for d in last["documents"]] == paths[4:] and last["next_offset"] is None
    assert indexed_core.rag.list_documents(offset=10)["documents"] == []
    md = indexed_core.rag.list_documents(file_type="md")
    assert md["total"] == 2 and {d["file_type"] for d in md["documents"]} == {"md"}
    assert [d["path"] for d in indexed_core.rag.list_documents(path_glob="*.pdf")["documents"]] == [
        str(corpus / "report.pdf")
    ]
    assert indexed_core.rag.list_documents(status="failed")["total"] == 0
    doc = everything["documents"][0]
    assert set(doc) >= {
        "doc_id",
        "path",
        "file_type",
        "title",
        "pages",
        "chunk_count",
        "status",
        "sha256",
        "indexed_at",
    }
    pdf = next(d for d in everything["documents"] if d["file_type"] == "pdf")
    assert pdf["pages"] == 2 and pdf["title"] == "Notes on materials durability" and pdf["status"] == "indexed"
    assert sum(d["chunk_count"] for d in everything["documents"]) == indexed_core.vectors().count("chunks")


def test_get_document(indexed_core: AppContext, corpus: Path) -> None:
    found = indexed_core.rag.document(doc_id_for(corpus / "notes" / "heat_transfer.md"))
    assert found is not None
    row, content = found
    assert row.title == "Convective heat transfer in a packed bed" and content is not None
    assert "## Results" in content.markdown and "Nu = 0.17" in content.text
    assert indexed_core.rag.document("0" * 16) is None


# ---- the qdrant-client backend -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "dense", "sparse"])
def test_qdrant_client_backend_agrees_with_edge(
    indexed_core: AppContext, qdrant_core: AppContext, corpus: Path, mode: str
) -> None:
    assert qdrant_core.settings.vector_backend == "qdrant"
    assert qdrant_core.vectors().count("chunks") == indexed_core.vectors().count("chunks")
    for query, expected in QUERIES.items():
        edge = indexed_core.rag.search(query, k=3, mode=mode).hits
        qc = qdrant_core.rag.search(query, k=3, mode=mode).hits
        assert _rel(qc[0], corpus) == expected
        assert qc[0].chunk_id == edge[0].chunk_id  # point ids are deterministic: the same chunk
        assert qc[0].score == pytest.approx(edge[0].score, rel=1e-3, abs=1e-4)
        if mode != "hybrid":
            assert [h.chunk_id for h in qc] == [h.chunk_id for h in edge]
    res = qdrant_core.rag.search("stainless", k=5, filters={"file_type": "docx", "section": "abstract"})
    assert res.hits and {h.payload["file_type"] for h in res.hits} == {"docx"}


# ---- contextual chunk header and fusion over few candidates --------------------------------------------

TITLED = (
    "# Zanthoxylum quasar survey\n\nWe describe the field campaign in short.\n\n# Instruments\n\n"
    "The spectrograph was cooled to 80 K and calibrated against argon lamps before each night of observing.\n\n"
    "# Results\n\nNine objects showed broad emission lines, and two of them varied within a week.\n"
)
TWIN = (
    "# Lipase half-life at 60 C\n\nThe lipase lost half of its activity after 12 minutes at 60 C in phosphate "
    "buffer.\n\n# Lipase half-life at 70 C\n\nAt 70 C the lipase lost half of its activity within 3 minutes in "
    "phosphate buffer.\n"
)


@pytest.fixture
def small_core(fast_core: AppContext, tmp_path: Path) -> tuple[AppContext, Path]:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "survey.md").write_text(TITLED)
    (folder / "lipase.md").write_text(TWIN)
    (folder / "other.md").write_text("# Corrosion of X65 steel\n\nA siderite layer protects X65 steel in CO2 brine.\n")
    fast_core.rag.indexer.run([folder])
    return fast_core, folder


def test_title_header_enters_dense_and_bm25(small_core: tuple[AppContext, Path]) -> None:
    from aisac_core.rag.chunking import indexed_text

    core, folder = small_core
    did = doc_id_for(folder / "survey.md")
    # "Zanthoxylum" occurs only in the title, which docling does not keep in the heading path of the later
    # sections: BM25 finds those chunks through the contextual header alone
    sparse = core.rag.search("zanthoxylum", k=10, mode="sparse").hits
    assert {h.payload["section"] for h in sparse} == {"Zanthoxylum quasar survey", "Instruments", "Results"}
    assert {h.payload["doc_id"] for h in sparse} == {did}
    # the dense vector is that of title + heading path + text, and the stored text stays the chunk alone
    hit = next(
        h
        for h in core.rag.search("argon lamp calibration", k=10, mode="dense", filters={"doc_id": did}).hits
        if h.payload["section"] == "Instruments"
    )
    text = hit.payload["text"]
    assert (
        not text.startswith("Zanthoxylum") and hit.payload["text_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    )
    emb = core.embedder
    q = emb.embed_query("argon lamp calibration")
    with_header = emb.embed_documents(
        [indexed_text(f"Instruments\n{text}", "Zanthoxylum quasar survey", "Instruments")]
    )[0]
    without = emb.embed_documents([f"Instruments\n{text}"])[0]

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b))  # unit vectors: the dot product is the cosine

    assert hit.score == pytest.approx(cos(q, with_header), abs=2e-3)
    assert abs(cos(q, with_header) - cos(q, without)) > 5e-3
    # a title the heading path already carries is not repeated
    assert (
        indexed_text("Zanthoxylum quasar survey\nWe describe", "Zanthoxylum quasar survey", "Zanthoxylum quasar survey")
        == "Zanthoxylum quasar survey\nWe describe"
    )


def test_normalise_theoretical_min_max() -> None:
    from aisac_core.rag.search import normalise

    two = {"a": 0.62, "b": 0.58}
    assert normalise(two, ["a", "b"], None) == {"a": 1.0, "b": 0.0}  # min-max over two collapses
    tmm = normalise(two, ["a", "b"], 0.0)
    assert tmm["a"] == 1.0 and tmm["b"] == pytest.approx(0.58 / 0.62)
    assert normalise({"a": -0.2, "b": 0.4}, ["a", "b"], 0.0)["a"] == 0.0  # below the floor: 0
    assert normalise({"a": 0.0}, ["a", "b"], 0.0) == {"a": 0.0, "b": 0.0}


def test_two_similar_chunks_score_alike_under_a_filter(small_core: tuple[AppContext, Path]) -> None:
    core, folder = small_core
    res = core.rag.search(
        "lipase half-life at high temperature", k=10, filters={"doc_id": doc_id_for(folder / "lipase.md")}
    )
    assert len(res.hits) == 2
    a, b = (h.score for h in res.hits)
    assert b > 0.7 and a - b < 0.2, (a, b)  # min-max over these two candidates gave 1.0 and 0.0
