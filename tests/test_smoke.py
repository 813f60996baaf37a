"""A quick end-to-end check of the fixtures: the corpus indexes and a page marker is found on its page."""

from fixtures_gen import PAGE_MARKERS


def test_corpus_indexes_and_finds_page_marker(indexed_core):
    res = indexed_core.rag.search(PAGE_MARKERS[2], k=3)
    assert res.hits, res.message
    top = res.hits[0].payload
    assert top["path"].endswith("report.pdf")
    assert top["page"] == 2
