"""The embedding cache and the ONNX loop: a re-index of a corpus where 10 % of the documents changed embeds
only their changed chunks (issue 33, acceptance 3); a text shared by two documents is embedded once; the
ONNX loop computes the vectors fastembed computes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aisac_core.context import AppContext
from aisac_core.rag.embedcache import cache_key, clear

TOPICS = [
    "enzyme kinetics and the Michaelis constant",
    "heat transfer through a composite wall",
    "the orbital period of a binary pulsar",
    "soil moisture and crop yield in dry summers",
    "the boiling point of water at altitude",
    "gene expression in yeast under heat shock",
    "turbulent flow behind a cylinder",
    "charge transport in organic semiconductors",
    "the age of groundwater from tritium",
    "glacier retreat measured by satellite",
]


def _doc(i: int, topic: str, last: str) -> str:
    """A Markdown document of three sections (three chunks at a chunk size of 64 tokens)."""
    return (
        f"# Report {i}: {topic}\n\n"
        f"## Background\n\nThis report {i} studies {topic}. " + "The setting is described in detail. " * 6 + "\n\n"
        f"## Method\n\nWe measured {topic} in report {i} with care. " + "Each step was repeated twice. " * 6 + "\n\n"
        f"## Result\n\n{last}\n"
    )


@pytest.fixture
def small_chunks(tmp_path: Path, models_dir: Path):  # noqa: ANN201
    from conftest import make_settings

    c = AppContext(make_settings(tmp_path / "store", models_dir, rag={"chunk_max_tokens": 64}))
    yield c
    c.close()


def test_reindex_after_10_percent_changed_embeds_only_changed_chunks(small_chunks: AppContext, tmp_path: Path) -> None:
    core = small_chunks
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, t in enumerate(TOPICS):
        (corpus / f"doc{i}.md").write_text(_doc(i, t, f"The result of report {i} was as expected."))
    first = core.rag.indexer.run([corpus])
    assert first.files_indexed == 10 and first.chunks_cached == 0
    assert first.chunks_embedded >= 30, "each document must span several chunks for the test to mean anything"
    texts0 = core.embedder.stats.texts
    # 10 % of the documents change: one document gets a new last section, its other chunks stay as they were
    (corpus / "doc3.md").write_text(_doc(3, TOPICS[3], "Yields fell by a third in the driest plots, unlike report 2."))
    again = core.rag.indexer.run([corpus])
    assert again.files_indexed == 1 and again.files_skipped == 9
    # every chunk of the changed file is stored anew, but only its changed ones went through the model: the
    # unchanged sections (title, background, method) come from the cache
    changed = again.chunks_embedded - again.chunks_cached
    assert again.chunks_cached >= 2 and 1 <= changed <= 2
    assert core.embedder.stats.texts - texts0 == changed
    # the stored vectors are those of the model, whether from the cache or not
    hits = core.rag.search("driest plots yields fell", k=3, mode="dense").hits
    assert hits and hits[0].payload["path"].endswith("doc3.md")


def test_text_shared_by_two_documents_is_embedded_once(small_chunks: AppContext, tmp_path: Path) -> None:
    core = small_chunks
    corpus = tmp_path / "c2"
    corpus.mkdir()
    body = "# Shared note\n\nThe calibration constant of the spectrometer is 4.2 counts per photon.\n"
    (corpus / "a.md").write_text(body)
    (corpus / "b.md").write_text(body)
    c = core.rag.indexer.run([corpus])
    assert c.files_indexed == 2 and c.chunks_embedded == 2 and c.chunks_cached == 1
    assert cache_key("m", "t") != cache_key("n", "t") != cache_key("m", "u")  # the model is part of the key
    assert clear(core.engine, "another model") == 0
    assert clear(core.engine) >= 1
    # with the cache emptied, a re-index of changed content embeds again (nothing stale is served)
    (corpus / "a.md").write_text(body + "\nMeasured again in May.\n")
    c = core.rag.indexer.run([corpus])
    assert c.files_indexed == 1 and c.chunks_cached == 0


def test_onnx_loop_matches_fastembed(small_chunks: AppContext) -> None:
    from fastembed import TextEmbedding

    emb = small_chunks.embedder
    texts = ["short", "a somewhat longer sentence about heat transfer " * 3, "x", "enzyme kinetics " * 40]
    ours = np.asarray(emb.embed_documents(texts))
    model_dir = small_chunks.settings.models_dir / "all-MiniLM-L6-v2-int8"
    ref = np.asarray(
        list(TextEmbedding("sentence-transformers/all-MiniLM-L6-v2", specific_model_path=str(model_dir)).embed(texts))
    )
    assert ours.shape == ref.shape == (4, emb.dim)
    assert np.abs(ours - ref).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert np.abs(np.asarray(emb.embed_query(texts[1])) - ref[1]).max() < 1e-5
