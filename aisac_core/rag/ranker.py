"""The learned ranker of hybrid search and the calibrated probability of relevance every hybrid hit carries.

After the hand-set fusion (:func:`aisac_core.rag.search.convex_fusion`: TM2C2 over dense cosine and BM25, RM3 and
dense feedback) has put its candidates in order, the best :data:`DEPTH` of them are described by the signals aisac
already computes (:data:`FEATURES`: the dense cosine of the query as typed and after feedback, BM25 raw and
normalised, the fused score and its rank, reciprocal ranks in each list, the share of query terms in the chunk
text, in the document title and in the section headings (the fields of BM25F, Robertson, Zaragoza & Taylor, CIKM
2004), the chunk's position in its document, and document-level aggregation of chunk scores) and scored by a
logistic model (:func:`score`), whose output an isotonic map (:func:`aisac_core.calibration.isotonic`, Zadrozny &
Elkan, KDD 2002) turns into P(relevant): the probability that the hit's document is judged relevant to the query.

The model, its feature scaling, the isotonic map and the threshold :data:`Ranker.threshold` are fitted by
``bench/train_ranker.py`` (deterministic; Cranfield and the SciFact train claims in ``../shared``, folds by query,
the isotonic map fitted on out-of-fold scores) and shipped as numbers in ``models/ranker.json`` (read lazily, no
scikit-learn at run time); :func:`model_sha256` goes into the configuration pins of every traced run. Figures,
the threshold's precision and ECE (10 equal-width bins): docs/retrieval.md, "Learned ranker".
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from aisac_core.calibration import isotonic
from aisac_core.errors import AisacError

MODEL_PATH = Path(__file__).parent / "models" / "ranker.json"
#: candidates of the fused order the ranker re-scores (at least k); the rest keep the fused order after them
DEPTH = 50
#: the features, in the model's order (each documented in :func:`features`)
FEATURES = (
    "cos",
    "cos_gap",
    "dense_norm",
    "bm25_norm",
    "bm25_log",
    "fused",
    "fused_rank",
    "rrf",
    "cover_text",
    "cover_title",
    "cover_section",
    "chunk_pos",
    "doc_chunks",
    "doc_gap",
    "query_terms",
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class RankerError(AisacError, RuntimeError):
    """The shipped ranker model is missing or malformed (a broken install: reinstall aisac)."""


@dataclass(frozen=True)
class Candidate:
    """One fused candidate chunk: its id, the signals of the fusion and its payload.

    ``cos``: cosine of the query as typed; ``dense`` / ``bm25``: the final pass's raw dense and BM25 scores (after
    feedback); ``dense_norm`` / ``bm25_norm`` / ``fused``: their TM2C2 normalisations and combination;
    ``rank_dense`` / ``rank_bm25`` / ``rank_fused``: 0-based ranks among the candidates.
    """

    chunk_id: str
    cos: float
    bm25: float
    dense_norm: float
    bm25_norm: float
    fused: float
    rank_dense: int
    rank_bm25: int
    rank_fused: int
    payload: dict[str, Any]


@cache
def _stopwords() -> frozenset[str]:
    path = Path(__file__).parent / "english_stopwords.txt"
    return frozenset(w.strip() for w in path.read_text(encoding="utf-8").split() if w.strip())


@cache
def _stemmer() -> Any:
    # the stemmer of aisac's BM25 model (fastembed's Qdrant/bm25 depends on it)
    from py_rust_stemmers import SnowballStemmer

    return SnowballStemmer("english")


def terms(text: str, within: set[str] | None = None) -> set[str]:
    """The distinct index terms of ``text``: lower-cased words, English stopwords removed, Snowball-stemmed (the
    analysis of aisac's BM25 model, so "coverage" counts the terms BM25 matched). With ``within`` (a query's
    terms), only the terms of ``within`` that ``text`` holds: just the words sharing a term's first three letters
    are stemmed (Snowball keeps a word's first three letters but in a handful of irregular forms, such as
    "dying"), which makes a chunk's coverage about ten times cheaper."""
    words = set(_WORD.findall(text.lower())) - _stopwords()
    if within is not None:
        heads = {t[:3] for t in within}
        words = {w for w in words if w[:3] in heads}
    words = {w for w in words if len(w) < 40}
    got = set(_stemmer().stem_words(sorted(words))) if words else set()
    return got if within is None else got & within


def features(query: str, cands: Sequence[Candidate], rows: int | None = None) -> np.ndarray:
    """The feature matrix (one row per candidate, columns :data:`FEATURES`) of ``cands`` for ``query``; with
    ``rows``, only the first ``rows`` candidates' rows (the statistics over the candidates still use them all).

    - ``cos``: dense cosine of the query as typed (absolute: it tells an unrelated collection from a related one);
      ``cos_gap``: ``cos`` minus the best candidate's.
    - ``dense_norm``, ``bm25_norm``, ``fused``: the fusion's normalised scores (TM2C2, Bruch, Gai & Ingber, TOIS
      2023); ``bm25_log``: ``log(1 + BM25)``; ``fused_rank``: ``1 / log2(rank + 2)`` (the DCG discount);
      ``rrf``: ``30 * (1/(60 + rank_dense + 1) + 1/(60 + rank_bm25 + 1))``, reciprocal rank fusion (Cormack,
      Clarke & Buettcher, SIGIR 2009) scaled to at most 1.
    - ``cover_text`` / ``cover_title`` / ``cover_section``: the share of the query's terms (:func:`terms`) found in
      the chunk text, the document title and the heading path (fields as in BM25F).
    - ``chunk_pos``: ``log(1 + chunk_index)``; ``doc_chunks``: ``log`` of the number of candidates from the same
      document; ``doc_gap``: the best fused score of the chunk's document minus its own (document aggregation).
    - ``query_terms``: ``log(1 + number of query terms)``.
    """
    q = terms(query)
    nq = max(1, len(q))
    best_cos = max((c.cos for c in cands), default=0.0)
    per_doc: dict[str, list[float]] = {}
    for c in cands:
        per_doc.setdefault(str(c.payload.get("doc_id")), []).append(c.fused)
    out = []
    for c in cands[: len(cands) if rows is None else rows]:
        p = c.payload
        title = str(p.get("title") or "")
        heads = [h for h in str(p.get("section") or "").split(" > ") if h and h.strip() != title.strip()]
        doc = per_doc[str(p.get("doc_id"))]
        out.append(
            [
                c.cos,
                c.cos - best_cos,
                c.dense_norm,
                c.bm25_norm,
                math.log1p(max(0.0, c.bm25)),
                c.fused,
                1.0 / math.log2(c.rank_fused + 2),
                30.0 * (1.0 / (61 + c.rank_dense) + 1.0 / (61 + c.rank_bm25)),
                len(terms(str(p.get("text") or ""), q)) / nq,
                len(terms(title, q)) / nq,
                len(terms(" ".join(heads), q)) / nq,
                math.log1p(int(p.get("chunk_index") or 0)),
                math.log(len(doc)),
                c.fused - max(doc),
                math.log1p(len(q)),
            ]
        )
    return np.asarray(out, dtype=np.float64).reshape(len(out), len(FEATURES))


@dataclass(frozen=True)
class Ranker:
    """A fitted ranker: logistic weights over standardised :data:`FEATURES`, the isotonic map from its logit to
    P(relevant), and the threshold above which a hit is called relevant (chosen by the training script on
    out-of-fold data, docs/retrieval.md)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    iso_x: tuple[float, ...]
    iso_y: tuple[float, ...]
    threshold: float
    sha256: str

    def logits(self, x: np.ndarray) -> np.ndarray:
        """The model's logit of each row of ``x`` (shape ``(n, len(FEATURES))``)."""
        z = (x - self.mean) / self.scale
        out: np.ndarray = z @ self.coef + self.intercept
        return out

    def probability(self, logit: float) -> float:
        """The calibrated P(relevant) of a logit (isotonic map fitted out of fold), in [0, 1]."""
        return min(1.0, max(0.0, isotonic(logit, self.iso_x, self.iso_y)))


def model_sha256() -> str:
    """sha256 (hex) of the shipped model file ``models/ranker.json`` ("" when it is missing)."""
    try:
        return hashlib.sha256(MODEL_PATH.read_bytes()).hexdigest()
    except OSError:
        return ""


@cache
def load(path: Path = MODEL_PATH) -> Ranker:
    """The ranker in ``path`` (read once). Raises :class:`RankerError` when it is missing or malformed."""
    try:
        raw = path.read_bytes()
        m = json.loads(raw)
        if list(m["features"]) != list(FEATURES):
            raise ValueError(f"features {m['features']} differ from this release's {list(FEATURES)}")
        r = Ranker(
            mean=np.asarray(m["mean"], dtype=np.float64),
            scale=np.asarray(m["scale"], dtype=np.float64),
            coef=np.asarray(m["coef"], dtype=np.float64),
            intercept=float(m["intercept"]),
            iso_x=tuple(float(v) for v in m["isotonic"]["x"]),
            iso_y=tuple(float(v) for v in m["isotonic"]["y"]),
            threshold=float(m["threshold"]),
            sha256=hashlib.sha256(raw).hexdigest(),
        )
        if not (r.mean.shape == r.scale.shape == r.coef.shape == (len(FEATURES),)) or not np.all(r.scale > 0):
            raise ValueError("weights do not match the features")
        for arr in (r.mean, r.scale, r.coef):
            arr.flags.writeable = False  # shared by every store: read only
        return r
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RankerError(f"the ranker model {path} is unreadable ({exc}); reinstall aisac") from exc


def score(
    query: str, cands: Sequence[Candidate], ranker: Ranker | None = None, rows: int | None = None
) -> list[tuple[float, float]]:
    """``(logit, P(relevant))`` of each candidate, or of the first ``rows`` (the shipped model unless ``ranker``
    is given). Raises :class:`RankerError` when the shipped model is unreadable."""
    if not cands:
        return []
    r = ranker or load()
    z = r.logits(features(query, cands, rows))
    return [(float(v), r.probability(float(v))) for v in z]
