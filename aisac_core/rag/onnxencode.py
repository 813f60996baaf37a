"""Dense sentence embeddings straight from an ONNX Runtime session: one tokenisation per text, batches
sorted by token length, threads set for the cores present.

This is the embedding loop of :class:`aisac_core.rag.embeddings.Embedder` for a model folder (the offline
MiniLM, or any folder with ``model.onnx`` and ``tokenizer.json`` of a BERT-style encoder whose first output
is the last hidden state). It computes what sentence-transformers' all-MiniLM-L6-v2 and fastembed compute
(mean of the token vectors over the attention mask, then L2 normalisation; Reimers & Gurevych 2019), but:

- every text is tokenised once (``tokenizers`` ``encode_batch``, truncated at ``max_tokens``), and the
  token counts drive the batching: texts are sorted by length and cut into batches of at most
  ``batch_size`` texts and ``max_batch_tokens`` padded tokens, so a batch pads to nearly its own length;
- ONNX Runtime's intra-op threads are the cores this process may run on (``os.sched_getaffinity``), with
  spinning off: a spinning worker burns CPU seconds while it waits, which on a shared machine is work taken
  from others (measured on the 2 shared cores: 2,242 tokens per CPU-second without spinning, 1,827-2,059
  with it; ``bench/indexing.py`` measures both the raw session and aisac's loop).

:func:`raw_throughput` measures the session alone on given texts (the reference of the indexing efficiency
figure in ``python -m bench --only indexing``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


def cores() -> int:
    """Cores this process may run on (its CPU affinity; ``os.cpu_count()`` where affinity is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass
class EncodeStats:
    """What :meth:`OnnxEncoder.encode` calls did: texts, real tokens, padded tokens (batch size x width summed
    over the batches: what the session computed) and session calls."""

    texts: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    batches: int = 0


class OnnxEncoder:
    """Mean-pooled, unit-length embeddings of a BERT-style ONNX encoder in ``model_dir``.

    Args:
        model_dir: folder with ``model.onnx`` and ``tokenizer.json``.
        max_tokens: truncation length including the two special tokens (256 for MiniLM).
        threads: ONNX Runtime intra-op threads (default: :func:`cores`).

    Thread-safe: one lock serialises :meth:`encode` (the session already uses every core).
    """

    def __init__(self, model_dir: Path, max_tokens: int, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_tokens)
        self.tokenizer = tok
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads or cores()
        so.inter_op_num_threads = 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(model_dir / "model.onnx"), so, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self._lock = threading.Lock()

    def encode(
        self, texts: Sequence[str], batch_size: int = 32, max_batch_tokens: int = 8192, stats: EncodeStats | None = None
    ) -> np.ndarray:
        """Unit vectors of ``texts`` in order, as a float32 array ``(len(texts), dim)``.

        Args:
            texts: the texts (may be empty).
            batch_size: at most this many texts per session call.
            max_batch_tokens: at most this many padded tokens per session call (bounds the memory of a batch).
            stats: filled with the counts of this call when given.
        """
        encs = self.tokenizer.encode_batch(list(texts))
        return self.encode_tokens([e.ids for e in encs], batch_size, max_batch_tokens, stats)

    def encode_tokens(
        self,
        ids: Sequence[Sequence[int]],
        batch_size: int = 32,
        max_batch_tokens: int = 8192,
        stats: EncodeStats | None = None,
    ) -> np.ndarray:
        """:meth:`encode` on texts already tokenised (token ids with the special tokens, truncated)."""
        n = len(ids)
        out: np.ndarray | None = None
        order = sorted(range(n), key=lambda i: len(ids[i]))
        st = stats if stats is not None else EncodeStats()
        st.texts += n
        start = 0
        with self._lock:
            while start < n:
                end = start + 1
                # sorted ascending: the batch's padded size is its last text's length times its size
                while (
                    end < n
                    and end - start < batch_size
                    and len(ids[order[end]]) * (end + 1 - start) <= max_batch_tokens
                ):
                    end += 1
                feed, mask = padded_feed([ids[i] for i in order[start:end]], self.inputs)
                hidden = self.session.run(None, feed)[0]
                vecs = _mean_pool_normalise(hidden, mask)
                if out is None:
                    out = np.empty((n, vecs.shape[1]), dtype=np.float32)
                out[order[start:end]] = vecs
                st.tokens += int(mask.sum())
                st.padded_tokens += int(mask.size)
                st.batches += 1
                start = end
        return out if out is not None else np.empty((0, 0), dtype=np.float32)


def padded_feed(batch: Sequence[Sequence[int]], inputs: Collection[str]) -> tuple[dict[str, Any], np.ndarray]:
    """The ONNX feed of one batch of token-id lists, right-padded with 0 to the longest (at least 1 column):
    ``input_ids``, plus ``attention_mask`` / ``token_type_ids`` (zeros) where the model has those ``inputs``.
    Returns ``(feed, mask)``; the mask is 1 over real tokens (BERT's input convention)."""
    width = max(1, max(len(b) for b in batch))
    input_ids = np.zeros((len(batch), width), dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=np.int64)
    for j, b in enumerate(batch):
        input_ids[j, : len(b)] = b
        mask[j, : len(b)] = 1
    feed: dict[str, Any] = {"input_ids": input_ids}
    if "attention_mask" in inputs:
        feed["attention_mask"] = mask
    if "token_type_ids" in inputs:
        feed["token_type_ids"] = np.zeros_like(input_ids)
    return feed, mask


def _mean_pool_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors over the attention mask, then L2-normalised (sentence-transformers' pooling)."""
    m = mask[:, :, None].astype(np.float32)
    summed = (hidden.astype(np.float32) * m).sum(axis=1)
    vecs = summed / np.clip(m.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    out: np.ndarray = (vecs / np.clip(norms, 1e-12, None)).astype(np.float32)
    return out


def raw_throughput(encoder: OnnxEncoder, texts: Sequence[str], batch_size: int = 32) -> dict[str, float]:
    """Tokens per CPU-second of the ONNX session alone on ``texts`` (tokenised and padded beforehand, outside
    the measurement; sorted by length, ``batch_size`` texts a call): the ceiling an embedding loop can reach.

    CPU seconds are the process's (``time.process_time``: every thread, ONNX Runtime's included), so other
    threads of the process must be idle while it runs. Returns ``{"tokens", "cpu_s", "tokens_per_cpu_s"}``.
    """
    encs = encoder.tokenizer.encode_batch(list(texts))
    ids = sorted((e.ids for e in encs), key=len)
    feeds = []
    tokens = 0
    for i in range(0, len(ids), batch_size):
        feed, mask = padded_feed(ids[i : i + batch_size], encoder.inputs)
        feeds.append(feed)
        tokens += int(mask.sum())
    t0 = time.process_time()
    for feed in feeds:
        encoder.session.run(None, feed)
    cpu = time.process_time() - t0
    return {"tokens": float(tokens), "cpu_s": round(cpu, 3), "tokens_per_cpu_s": round(tokens / cpu, 1) if cpu else 0.0}
