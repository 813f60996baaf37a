"""The learned support judge: does a cited passage **support**, **contradict** or **not address** a claim?

The task is SciFact's (Wadden et al., "Fact or Fiction: Verifying Scientific Claims", EMNLP 2020,
doi:10.18653/v1/2020.emnlp-main.609): given a claim and a passage split into sentences, select the *rationale*
sentences (those that bear on the claim) and label the passage SUPPORT, CONTRADICT or NOT ENOUGH INFO. The paper's
VeriSci pipeline does both steps with RoBERTa-large; here both are logistic regressions (scikit-learn, trained by
``bench/train_support.py`` on the shared SciFact train claims, split by claim) over features computed offline:

- the MiniLM cosine of claim and sentence, its rank and its gap to the passage's best, the cosines of the
  neighbouring sentences;
- term overlap (share of the claim's word stems and word pairs in the sentence, plain and weighted by the inverse
  sentence frequency inside the passage, Jaccard, rapidfuzz's token-set and partial ratios), number overlap;
- negation, hedging, "no effect" and direction-of-effect cues (increase / decrease words) of claim and
  sentence, and whether they disagree;
- the sentence's place in the passage and its section label in a structured abstract ("RESULTS", "CONCLUSIONS");
- pairwise claim x sentence features for contradiction: whether the claim states no effect
  and whether claim and sentence differ in it, and the direction disagreement / agreement, negation-parity and
  no-effect disagreements and the cosine each multiplied by the sentence's idf-weighted coverage of the claim (a
  disagreement counts as much as the sentence is about the claim's terms);
- local polarity (round three): the direction of the effect the sentence states *next to the claim's object*
  (:func:`claim_targets`: "reduces **dialysis risk**"), negations before it reversing it, against the claim's own
  direction (:func:`claim_polarity`, :func:`local_polarity`), so that "X decreases apoptosis" meets "X
  overexpression increased chemotherapy-induced apoptosis" as a reversal even when the sentence also has a
  decrease word elsewhere.

Three models: **rationale** (is this sentence a rationale of the claim?), then, on the passage's vector (its best
rationale probabilities and the features of its most likely rationale sentences, :func:`passage_vector`),
**support** (is the passage labelled SUPPORT?) and **contradict** (CONTRADICT?). Each passage probability is mapped
to a calibrated one by a calibration map (isotonic regression or Platt scaling, whichever had the lower
cross-validated ECE; stored as breakpoints under ``isotonic``) fitted on out-of-fold scores (never on the claims
the models were fitted on). The verdict (:func:`decide`):
``supports`` when P(support) >= the ``supported`` threshold, ``contradicts`` when P(contradict) >= the
``contradicts`` threshold, else ``does not address`` (``uncertain`` set when either probability is at least
:data:`UNCERTAIN_FLOOR`: the passage is on the claim, the judge cannot say which way). Both thresholds were chosen on
the validation claims for high precision; a third, ``relevant``, is the rationale probability below which a passage
does not bear on a claim (or a question: the evaluator's abstention) at all; their values, the figures and the
training data's hash are in the model
file (``models/support_scifact.json``), whose sha256 (:func:`model_sha256`) is reported with every verdict.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from typing import Literal, TypedDict

import numpy as np
import numpy.typing as npt
from rapidfuzz import fuzz

from aisac_core.errors import AisacError
from aisac_core.jsontypes import JSONObject, JSONValue

MODEL_FILE = "support_scifact.json"
VERDICTS = ("supports", "contradicts", "does not address")
#: a passage whose calibrated P(support) or P(contradict) is at least this, without reaching its threshold, is
#: reported as ``uncertain`` (on the claim's subject, direction not decided)
UNCERTAIN_FLOOR = 0.3
#: section labels of structured abstracts (SciFact's ``structured`` abstracts; the label opens the sentence)
_FINDING_LABEL = re.compile(r"^\s*(?:RESULTS?|CONCLUSIONS?|FINDINGS|INTERPRETATION|MAIN RESULTS)\b")
_SETUP_LABEL = re.compile(
    r"^\s*(?:BACKGROUND|OBJECTIVES?|AIMS?|METHODS?|DESIGN|SETTING|CONTEXT|INTRODUCTION|PURPOSE)\b"
)
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nor|neither|without|cannot|fail(?:s|ed)?|lack(?:s|ed|ing)?|absen(?:t|ce)|"
    r"unaffected|unrelated|independent(?:ly)? of|insufficient|unable)\b|n't\b",
    re.I,
)
_HEDGE = re.compile(
    r"\b(?:may|might|could|suggests?|suggested|possibl[ey]|potential(?:ly)?|likely|unclear|whether|appears?|"
    r"propose[sd]?|hypothesi[sz]e[sd]?|unknown)\b",
    re.I,
)
_UP = re.compile(
    r"\b(?:increas\w*|higher|greater|more|elevat\w*|enhanc\w*|promot\w*|induc\w*|activat\w*|up-?regulat\w*|"
    r"rais\w*|improv\w*|stimulat\w*|exacerbat\w*|accelerat\w*|augment\w*|gain\w*|boost\w*|amplif\w*|risk)\b",
    re.I,
)
_DOWN = re.compile(
    r"\b(?:decreas\w*|lower\w*|less|reduc\w*|inhibit\w*|suppress\w*|down-?regulat\w*|declin\w*|impair\w*|"
    r"attenuat\w*|prevent\w*|block\w*|diminish\w*|protect\w*|slow\w*|loss|deplet\w*|abolish\w*|decline|fewer)\b",
    re.I,
)
#: "no significant difference", "did not change": a finding of no effect (contradicts a claim of one)
_NO_EFFECT = re.compile(
    r"\b(?:no|not|nor|without)\b[^.;]{0,40}\b(?:significant|differ\w*|effect\w*|chang\w*|associat\w*|"
    r"correlat\w*|increas\w*|decreas\w*|improv\w*|reduc\w*|affect\w*|alter\w*|impact\w*)",
    re.I,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]*|\d+(?:\.\d+)?")
_NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
_STOP = frozenset(
    """a an and are as at be by can could did do does for from has have in into is it its of on or that the their
    this to was were with which who whom than then there these those they we our not no also may might been being
    both between during after before such via using used use""".split()
)
#: names of the hand-made features, in order (the element-wise product of the embeddings follows them)
FEATURES = (
    "cosine",
    "cosine_gap_to_best",
    "is_best_cosine",
    "cosine_rank_share",
    "neighbour_cosine",
    "claim_coverage",
    "claim_coverage_idf",
    "jaccard",
    "claim_has_number",
    "claim_numbers_found",
    "sentence_has_number",
    "claim_negations",
    "sentence_negations",
    "negation_parity_differs",
    "sentence_hedges",
    "claim_up",
    "claim_down",
    "sentence_up",
    "sentence_down",
    "direction_differs",
    "direction_agrees",
    "position",
    "is_last",
    "finding_section",
    "setup_section",
    "log_chars",
    "log_sentences",
    "best_cosine",
    "token_set_ratio",
    "partial_ratio",
    "claim_bigrams_found",
    "claim_log_words",
    "claim_hedges",
    "sentence_no_effect",
    # pairwise (claim x sentence) features for contradiction: a disagreement counts in proportion to how much of
    # the claim the sentence is about (the idf-weighted coverage)
    "claim_no_effect",
    "no_effect_differs",
    "direction_differs_on_topic",
    "direction_agrees_on_topic",
    "negation_differs_on_topic",
    "no_effect_differs_on_topic",
    "cosine_on_topic",
    # local polarity (round three): the direction of the effect stated next to the claim's object in the sentence,
    # against the claim's own direction (:func:`claim_polarity`, :func:`local_polarity`)
    "claim_polarity",
    "sentence_polarity",
    "polarity_differs",
    "polarity_agrees",
    "polarity_differs_on_topic",
    "polarity_agrees_on_topic",
    "polarity_found",
)

#: words that state a positive relation or effect when nothing else gives a direction ("is effective", "is required
#: for", "is associated with"): SciFact's contradicting claims are mostly the original claim negated or reversed
#: (Wadden et al. 2020, section 3: annotators wrote a negation of each claim), so the polarity of the relation
#: matters as much as its terms
_POSITIVE = re.compile(
    r"^(?:effective\w*|efficac\w*|benefi\w*|success\w*|better|superior|protect\w*|improv\w*|promot\w*|requir\w*|"
    r"necessar\w*|essential|crucial|critical|important|associat\w*|correlat\w*|link\w*|caus\w*|lead\w*|leads|"
    r"result\w*|contribut\w*|mediat\w*|regulat\w*|control\w*|depend\w*)$"
)
#: one-word negations (and "little": "had little effect") that reverse the polarity of what follows
_NEGATION_WORD = re.compile(
    r"^(?:not|no|never|none|nor|neither|without|cannot|fail\w*|lack\w*|absen\w*|unaffected|unrelated|independent|"
    r"insufficient|unable|little|null|n't)$"
)
#: a direction word counts for an object this many words before it (or :data:`_AFTER` after it); a negation this
#: many words before the object reverses it. Round figures, chosen once on the development claims (out of fold)
_BEFORE, _AFTER, _NEG_SPAN = 5, 2, 8

Vector = Sequence[float]
Embed = Callable[[list[str]], list[list[float]]]


class PassageScores(TypedDict):
    """The three models' scores of one passage (:func:`passage_scores`): per-sentence rationale probabilities (raw
    and calibrated), the support and contradict models' raw scores and their calibrated probabilities."""

    rationale_raw: npt.NDArray[np.float64]
    rationale: npt.NDArray[np.float64]
    support_raw: float
    contradict_raw: float
    p_support: float
    p_contradict: float


class SentenceScore(TypedDict):
    """One passage sentence's calibrated rationale probability (``i``: its index in the passage)."""

    i: int
    p_rationale: float


class PassageJudgement(TypedDict):
    """The support judge's decision on one passage (:func:`judge_vectors`, :func:`judge_passage`)."""

    verdict: Literal["supports", "contradicts", "does not address"]
    probability: float
    uncertain: bool
    p_support: float
    p_contradict: float
    rationale: list[int]
    sentences: list[SentenceScore]
    model_sha256: str


class SupportModelError(AisacError, ValueError):
    """The support model file is missing or malformed, or the judge was given bad input."""


def stems(text: str) -> set[str]:
    """Content-word stems of ``text``: lower-cased words of 3+ characters outside a small stop list, cut to 6
    characters (so "increased" and "increases" match), plus numbers as written."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if w[0].isdigit():
            out.add(w)
        elif len(w) >= 3 and w not in _STOP:
            out.add(w[:6])
    return out


def _count(rx: re.Pattern[str], text: str) -> int:
    return len(rx.findall(text))


def _direction(text: str) -> tuple[int, int]:
    return int(bool(_UP.search(text))), int(bool(_DOWN.search(text)))


def _word_direction(word: str) -> int:
    """+1 for a word of increase or of a positive relation, -1 for a word of decrease, 0 otherwise (both: 0)."""
    up, down = bool(_UP.fullmatch(word)), bool(_DOWN.fullmatch(word))
    if up != down:
        return 1 if up else -1
    return 1 if not up and _POSITIVE.match(word) else 0


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def claim_targets(claim: str) -> set[str]:
    """Stems (6 characters) of the claim's *object*: the first three content words after its first direction word
    ("reduces **dialysis risk**"), or all its content words when it has none."""
    ws = _words(claim)
    content = [w for w in ws if w not in _STOP and len(w) >= 3 and not _word_direction(w)]
    for i, w in enumerate(ws):
        if _word_direction(w):
            obj = [x for x in ws[i + 1 :] if x not in _STOP and len(x) >= 3 and not _word_direction(x)][:3]
            if obj:
                return {x[:6] for x in obj}
    return {x[:6] for x in content}


def claim_polarity(claim: str) -> int:
    """The claim's direction: the sign of its direction words' sum (+1 increase / positive relation, -1
    decrease), reversed by an odd number of negations; 0 when it states none."""
    ws = _words(claim)
    total = sum(_word_direction(w) for w in ws)
    pol = (total > 0) - (total < 0)
    if pol and sum(1 for w in ws if _NEGATION_WORD.match(w)) % 2:
        pol = -pol
    return pol


def local_polarity(sentence: str, targets: set[str]) -> tuple[int, int]:
    """``(polarity, found)``: at every occurrence of a ``targets`` stem in ``sentence``, the direction of the nearest
    direction word before it (up to :data:`_BEFORE` words) or after it (:data:`_AFTER`), reversed by an odd number
    of negations in the :data:`_NEG_SPAN` words before it ("was **not** associated with an **increased** risk");
    ``polarity`` is the sign of their sum, ``found`` how many occurrences had a direction."""
    ws = _words(sentence)
    total = found = 0
    for i, w in enumerate(ws):
        if w in _STOP or len(w) < 3 or w[:6] not in targets:
            continue
        d = 0
        for j in [*range(i - 1, max(-1, i - 1 - _BEFORE), -1), *range(i + 1, min(len(ws), i + 1 + _AFTER))]:
            d = _word_direction(ws[j])
            if d:
                break
        if not d:
            continue
        negs = sum(1 for j in range(max(0, i - _NEG_SPAN), i) if _NEGATION_WORD.match(ws[j]))
        total += -d if negs % 2 else d
        found += 1
    return (total > 0) - (total < 0), found


def passage_features(
    claim: str, sentences: Sequence[str], claim_vec: Vector, sentence_vecs: Sequence[Vector]
) -> npt.NDArray[np.float64]:
    """Feature rows of every sentence of a passage against ``claim``: an array
    ``(len(sentences), len(FEATURES))``, the hand-made :data:`FEATURES` in order. ``claim_vec`` and
    ``sentence_vecs``: unit vectors of the same embedder (MiniLM, 384 floats each).

    Raises :class:`SupportModelError` when the sentences and vectors differ in number or a passage is empty."""
    n = len(sentences)
    if n == 0 or len(sentence_vecs) != n:
        raise SupportModelError(f"a passage needs sentences with one vector each (got {n} and {len(sentence_vecs)})")
    c = np.asarray(claim_vec, dtype=np.float64)
    s = np.asarray(sentence_vecs, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != c.shape[0]:
        raise SupportModelError(f"vectors of different sizes: claim {c.shape}, sentences {s.shape}")
    cos = s @ c
    best = float(cos.max())
    order = np.argsort(-cos, kind="stable")
    rank = np.empty(n, dtype=np.float64)
    rank[order] = np.arange(n, dtype=np.float64)
    c_stems = stems(claim)
    s_stems = [stems(x) for x in sentences]
    idf = {t: math.log((n + 1) / (sum(t in st for st in s_stems) + 0.5)) for t in c_stems}
    idf_total = sum(idf.values())
    c_nums = set(_NUM.findall(claim))
    c_neg = _count(_NEGATION, claim)
    c_up, c_down = _direction(claim)
    c_words = [w for w in _WORD.findall(claim.lower()) if w not in _STOP]
    c_bigrams = {(a[:6], b[:6]) for a, b in zip(c_words, c_words[1:])}
    c_low = claim.lower()
    c_no_effect = bool(_NO_EFFECT.search(claim))
    c_targets = claim_targets(claim)
    # the claim read the way a sentence is read (the direction next to its own object), so that a sentence that
    # repeats the claim agrees with it; the claim's overall direction where its object has none
    c_local, c_found = local_polarity(claim, c_targets)
    c_pol = c_local if c_found else claim_polarity(claim)
    rows = np.zeros((n, len(FEATURES)), dtype=np.float64)
    for i, sent in enumerate(sentences):
        st = s_stems[i]
        shared = c_stems & st
        s_neg = _count(_NEGATION, sent)
        s_up, s_down = _direction(sent)
        neighbours = [cos[j] for j in (i - 1, i + 1) if 0 <= j < n]
        s_no_effect = bool(_NO_EFFECT.search(sent))
        on_topic = sum(idf[t] for t in shared) / idf_total if idf_total > 0 else 0.0
        differs = bool((c_up and s_down and not s_up) or (c_down and s_up and not s_down))
        s_pol, found = local_polarity(sent, c_targets)
        pol_differs, pol_agrees = float(c_pol * s_pol < 0), float(c_pol * s_pol > 0)
        rows[i] = (
            cos[i],
            cos[i] - best,
            float(rank[i] == 0),
            rank[i] / max(n - 1, 1),
            max(neighbours) if neighbours else 0.0,
            len(shared) / len(c_stems) if c_stems else 0.0,
            on_topic,
            len(shared) / len(c_stems | st) if c_stems | st else 0.0,
            float(bool(c_nums)),
            len(c_nums & set(_NUM.findall(sent))) / len(c_nums) if c_nums else 0.0,
            float(bool(_NUM.search(sent))),
            min(c_neg, 2),
            min(s_neg, 2),
            float((c_neg % 2) != (s_neg % 2)),
            min(_count(_HEDGE, sent), 2),
            c_up,
            c_down,
            s_up,
            s_down,
            float(differs),
            float((c_up and s_up) or (c_down and s_down)),
            i / max(n - 1, 1),
            float(i == n - 1),
            float(bool(_FINDING_LABEL.match(sent))),
            float(bool(_SETUP_LABEL.match(sent))),
            math.log1p(len(sent)),
            math.log(n),
            best,
            fuzz.token_set_ratio(c_low, sent.lower()) / 100.0,
            fuzz.partial_ratio(c_low, sent.lower()) / 100.0,
            len(c_bigrams & _bigrams(sent)) / len(c_bigrams) if c_bigrams else 0.0,
            math.log1p(len(c_words)),
            min(_count(_HEDGE, claim), 2),
            float(s_no_effect),
            float(c_no_effect),
            float(c_no_effect != s_no_effect),
            float(differs) * on_topic,
            float((c_up and s_up) or (c_down and s_down)) * on_topic,
            float((c_neg % 2) != (s_neg % 2)) * on_topic,
            float(c_no_effect != s_no_effect) * on_topic,
            cos[i] * on_topic,
            c_pol,
            s_pol,
            pol_differs,
            pol_agrees,
            pol_differs * on_topic,
            pol_agrees * on_topic,
            min(found, 3),
        )
    return rows


def _bigrams(text: str) -> set[tuple[str, str]]:
    ws = [w for w in _WORD.findall(text.lower()) if w not in _STOP]
    return {(a[:6], b[:6]) for a, b in zip(ws, ws[1:])}


def _sigmoid(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    out: npt.NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))
    return out


def _object(value: JSONValue) -> JSONObject:
    """A JSON object of the model file; :class:`TypeError` (a malformed model) for another JSON value."""
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _number(value: JSONValue) -> float:
    """A number of the model file as a float (strings of numbers too, as ``float`` reads them); :class:`TypeError`
    (a malformed model) for an object, an array, a boolean or null."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


class SupportModel:
    """The shipped model (``models/support_scifact.json``): three logistic regressions (coefficients over
    standardised features) and three calibration maps (breakpoints of an isotonic or Platt map), with the thresholds
    chosen on out-of-fold predictions."""

    def __init__(self, data: JSONObject, sha256: str) -> None:
        try:
            self.data = data
            self.sha256 = sha256
            self.thresholds: dict[str, float] = {k: _number(v) for k, v in _object(data["thresholds"]).items()}
            self._lr = {name: self._linear(_object(data[name])) for name in ("rationale", "support", "contradict")}
            self._iso = {
                name: (np.asarray(_object(v)["x"], dtype=np.float64), np.asarray(_object(v)["y"], dtype=np.float64))
                for name, v in _object(data["isotonic"]).items()
            }
            for key in ("supported", "contradicts", "rationale", "relevant"):
                _ = self.thresholds[key]
            for key in ("rationale", "support", "contradict"):
                _ = self._iso[key]
        except (KeyError, TypeError, ValueError) as exc:
            raise SupportModelError(f"malformed support model: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _linear(
        part: JSONObject,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
        mean = np.asarray(part["mean"], dtype=np.float64)
        scale = np.asarray(part["scale"], dtype=np.float64)
        coef = np.asarray(part["coef"], dtype=np.float64)
        if not (mean.shape == scale.shape == coef.shape):
            raise ValueError("mean, scale and coef differ in length")
        return mean, scale, coef, _number(part["intercept"])

    def probability(self, name: str, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Raw (uncalibrated) probability of logistic model ``name`` for feature rows ``x`` (``(n, d)``): ``rationale``
        on :func:`passage_features` rows, ``support`` / ``contradict`` on :func:`passage_vector` rows."""
        mean, scale, coef, b = self._lr[name]
        if x.shape[1] != coef.shape[0]:
            raise SupportModelError(f"features have {x.shape[1]} columns, the model {coef.shape[0]}")
        return _sigmoid(((x - mean) / scale) @ coef + b)

    def calibrated(self, name: str, raw: npt.NDArray[np.float64] | float) -> npt.NDArray[np.float64]:
        """Isotonic map ``name`` (``rationale`` / ``support`` / ``contradict``) of raw scores: linear between the
        breakpoints fitted on validation, constant beyond them (as scikit-learn's ``IsotonicRegression`` with
        ``out_of_bounds="clip"``)."""
        xs, ys = self._iso[name]
        out: npt.NDArray[np.float64] = np.interp(np.asarray(raw, dtype=np.float64), xs, ys)
        return out


@lru_cache(maxsize=1)
def load_model() -> SupportModel:
    """The shipped support model, read once (lazily) from the package. Raises :class:`SupportModelError` when it is
    missing or malformed."""
    try:
        raw = resources.files("aisac_core.roles").joinpath("models", MODEL_FILE).read_bytes()
    except (FileNotFoundError, OSError) as exc:
        raise SupportModelError(f"support model {MODEL_FILE} is missing; run bench/train_support.py") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise SupportModelError(f"support model {MODEL_FILE} is not JSON: {exc}") from exc
    return SupportModel(data, hashlib.sha256(raw).hexdigest())


def model_sha256() -> str:
    """sha256 of the shipped model file (part of what identifies a verdict)."""
    return load_model().sha256


def passage_vector(r: npt.NDArray[np.float64], x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The passage's feature vector for the support and contradict models, from its sentences' raw rationale
    probabilities ``r`` (``(n,)``) and feature rows ``x`` (``(n, len(FEATURES))``): the best and second-best
    rationale probability and their sum over the passage, then the features of the most likely rationale
    sentence, then the mean features of the two most likely (``3 + 2 len(FEATURES)`` values)."""
    order = np.argsort(-r, kind="stable")
    second = float(r[order[1]]) if len(r) > 1 else 0.0
    head = np.array([float(r[order[0]]), second, float(r.sum())], dtype=np.float64)
    out: npt.NDArray[np.float64] = np.concatenate([head, x[order[0]], x[order[:2]].mean(axis=0)])
    return out


def passage_scores(model: SupportModel, x: npt.NDArray[np.float64]) -> PassageScores:
    """Raw and calibrated scores of one passage from its sentences' feature rows ``x``: ``{rationale_raw: [n],
    rationale: [n] (calibrated), support_raw, contradict_raw, p_support, p_contradict}``: the rationale model per
    sentence, then the support and contradict models on :func:`passage_vector`, each mapped by its
    calibration."""
    r = model.probability("rationale", x)
    v = passage_vector(r, x)[None, :]
    sup_raw = float(model.probability("support", v)[0])
    con_raw = float(model.probability("contradict", v)[0])
    return {
        "rationale_raw": r,
        "rationale": model.calibrated("rationale", r),
        "support_raw": sup_raw,
        "contradict_raw": con_raw,
        "p_support": float(model.calibrated("support", sup_raw)),
        "p_contradict": float(model.calibrated("contradict", con_raw)),
    }


def decide(
    model: SupportModel, p_support: float, p_contradict: float
) -> tuple[Literal["supports", "contradicts", "does not address"], float, bool]:
    """``(verdict, probability, uncertain)`` from the calibrated probabilities: ``supports`` when ``p_support`` is
    at least the ``supported`` threshold (with its probability), else ``contradicts`` when ``p_contradict`` is at
    least the ``contradicts`` threshold, else ``does not address`` with probability ``1 - max(p_support,
    p_contradict)``; ``uncertain`` when neither threshold is reached but one probability is >= :data:`UNCERTAIN_FLOOR`."""
    t = model.thresholds
    if p_support >= t["supported"] and p_support >= p_contradict:
        return "supports", p_support, False
    if p_contradict >= t["contradicts"]:
        return "contradicts", p_contradict, False
    if p_support >= t["supported"]:
        return "supports", p_support, False
    top = max(p_support, p_contradict)
    return "does not address", 1.0 - top, top >= UNCERTAIN_FLOOR


def judge_vectors(
    claim: str,
    sentences: Sequence[str],
    claim_vec: Vector,
    sentence_vecs: Sequence[Vector],
    model: SupportModel | None = None,
) -> PassageJudgement:
    """The verdict on one passage (its ``sentences``, in order) for ``claim``, from precomputed unit vectors:
    ``{verdict: supports|contradicts|does not address, probability, uncertain, p_support, p_contradict,
    rationale: [sentence indices, best first, at most 3], sentences: [{i, p_rationale}], model_sha256}``.

    Rationale sentences are those whose calibrated rationale probability reaches the ``rationale`` threshold (the
    best one always when the verdict is not ``does not address``). Raises :class:`SupportModelError` on bad input."""
    m = model or load_model()
    x = passage_features(claim, sentences, claim_vec, sentence_vecs)
    sc = passage_scores(m, x)
    verdict, prob, uncertain = decide(m, sc["p_support"], sc["p_contradict"])
    pr = sc["rationale"]
    order = [int(i) for i in np.argsort(-pr, kind="stable")]
    chosen = [i for i in order if pr[i] >= m.thresholds["rationale"]][:3]
    if not chosen and verdict != "does not address":
        chosen = order[:1]
    return {
        "verdict": verdict,
        "probability": round(prob, 4),
        "uncertain": uncertain,
        "p_support": round(sc["p_support"], 4),
        "p_contradict": round(sc["p_contradict"], 4),
        "rationale": chosen,
        "sentences": [{"i": i, "p_rationale": round(float(pr[i]), 4)} for i in range(len(sentences))],
        "model_sha256": m.sha256,
    }


def judge_passage(
    claim: str, sentences: Sequence[str], embed: Embed, model: SupportModel | None = None
) -> PassageJudgement:
    """:func:`judge_vectors` embedding ``claim`` and ``sentences`` with ``embed`` (texts -> unit vectors, the
    store's MiniLM embedder; one call). Raises :class:`SupportModelError` for an empty claim or passage or when the
    embedder returns no vectors."""
    claim = " ".join((claim or "").split())
    sents = [" ".join(s.split()) for s in sentences if s and s.strip()]
    if not claim or not sents:
        raise SupportModelError("the support judge needs a claim and at least one passage sentence")
    vecs = embed([claim, *sents])
    if len(vecs) != len(sents) + 1 or any(not v for v in vecs):
        raise SupportModelError("the embedder returned no vectors: the support judge needs the MiniLM embedder")
    return judge_vectors(claim, sents, vecs[0], vecs[1:], model)
