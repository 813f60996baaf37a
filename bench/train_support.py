"""Train the support judge (:mod:`aisac_core.roles.support_model`) on the shared SciFact train claims.

``python bench/train_support.py [--data ../shared/data] [--dry-run] [--oof-only] [--augment LABELS]
[--augment-models MODELS] [--rule RULE] [--nested | --nested-dev]``: deterministic (fixed split seed, lbfgs logistic regressions, no random state elsewhere). Steps:

1. claims of ``claims/scifact/claims_train.jsonl`` split by claim into train / validation / test (50 / 25 / 25 %,
   :func:`bench.support.split`: claims citing a common abstract stay together, so no abstract is in two parts);
   train + validation (the development claims) are dealt into :data:`FOLDS` folds by the same groups, and every
   choice below is made on **out-of-fold** predictions (each claim scored by models fitted on the other folds),
   so the calibration and thresholds rest on all 75 % instead of a 25 % validation part; the test part is only
   scored, once, at the end;
2. every (claim, cited abstract) pair becomes one passage; its sentences get the features of
   :func:`aisac_core.roles.support_model.passage_features` (MiniLM vectors cached under /tmp by
   :class:`bench.support.VectorCache`, never in the repository);
3. **rationale** model: logistic regression, sentence of a cited abstract -> is a gold rationale sentence
   (every cited abstract, with or without evidence); C chosen by out-of-fold average precision;
4. **support** and **contradict** models: logistic regressions on the passage vector
   (:func:`aisac_core.roles.support_model.passage_vector`: the passage's best rationale probabilities and the
   features of its most likely rationale sentences), passage -> labelled SUPPORT (CONTRADICT); C chosen by
   out-of-fold average precision; the final models are refitted on all development claims. The models named in
   :data:`AUGMENT_MODELS` (the contradict model) are fitted with **counterfactual** passages besides the real ones (:func:`counterfactuals`, the SciFact authors' recipe for
   contradicting claims: each SUPPORT / CONTRADICT passage's claim reversed, :func:`reverse_claim`, against the same
   abstract and rationale, labelled the other way); a counterfactual is on the training side exactly when its
   source passage is, and never scored;
5. calibration maps fitted on the out-of-fold predictions (each claim scored by models fitted without it):
   rationale probability -> P(rationale sentence), support score -> P(passage labelled SUPPORT), contradict score
   -> P(CONTRADICT); isotonic regression or Platt scaling, whichever has the lower cross-validated ECE
   (:func:`choose_calibration`);
6. thresholds chosen on the **cross-fitted** calibrated probabilities (each passage's out-of-fold score mapped by
   a calibration fitted on the other folds: neither its model nor its calibration saw it; the out-of-fold figures
   printed, ECE included, are of these too): rationale selection at the best F1; ``supported`` at the
   lowest calibrated P(support) whose precision has a 95 % Wilson lower bound >= :data:`TARGET_PRECISION` with at
   least :data:`MIN_ABOVE` passages above it, or, when no threshold reaches it, at the highest point precision
   (:func:`verdict_threshold`, rule :data:`THRESHOLD_RULE`); ``contradicts`` likewise; ``relevant`` (below it a
   passage does not bear on a claim or question: the evaluator's abstention) at the calibrated rationale probability that keeps :data:`RELEVANT_RECALL` of the gold rationale
   sentences;
7. the model file ``aisac_core/roles/models/support_scifact.json`` is written (coefficients, standardisation,
   isotonic breakpoints, thresholds, validation figures, sha256 of the training files) and the held-out test
   figures are printed (the same code as ``python -m bench --only support``; not with ``--oof-only``, which is
   for making choices).

``--nested`` measures the recipe instead by nested cross-validation over all claims (:func:`run_nested`, recorded
in ``bench/data/support_nested.json``), after the model is written; ``--nested-dev`` by nested cross-validation over
the development claims only, which is how the counterfactuals' models and the threshold rule were chosen (the
held-out claims play no part).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.support import (  # noqa: E402
    SPLIT_SEED,
    VectorCache,
    bootstrap,
    claim_groups,
    ece,
    evaluate,
    judge_records,
    load_claims,
    load_corpus,
    pairs,
    print_figures,
    split,
    texts_of,
)

MODEL_PATH = REPO / "aisac_core" / "roles" / "models" / "support_scifact.json"
C_GRID = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
#: out-of-fold precision wanted of a "supported" / "contradicts" verdict (the issue asks >= 0.90 held out)
TARGET_PRECISION = 0.9
#: at least this many out-of-fold passages above a verdict threshold (a threshold on a handful proves nothing)
MIN_ABOVE = 20
FOLDS = 5
#: share of the gold rationale sentences (out of fold) at or above the ``relevant`` threshold
RELEVANT_RECALL = 0.9


def features(records: list[dict[str, Any]], cache: VectorCache) -> list[np.ndarray]:
    """Feature rows of every record's sentences."""
    from aisac_core.roles.support_model import passage_features

    return [
        passage_features(r["claim"], r["sentences"], cache.get(r["claim"]), [cache.get(s) for s in r["sentences"]])
        for r in records
    ]


def fit_lr(x: np.ndarray, y: np.ndarray, c: float) -> dict[str, Any]:
    """Standardised logistic regression (scikit-learn, lbfgs): ``{C, mean, scale, coef, intercept}``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(x)
    scale = np.where(sc.scale_ > 0, sc.scale_, 1.0)
    lr = LogisticRegression(C=c, max_iter=5000).fit((x - sc.mean_) / scale, y)
    return {"C": c, "mean": sc.mean_, "scale": scale, "coef": lr.coef_[0], "intercept": float(lr.intercept_[0])}


def prob(part: dict[str, Any], x: np.ndarray) -> np.ndarray:
    z = ((x - part["mean"]) / part["scale"]) @ part["coef"] + part["intercept"]
    out: np.ndarray = 1 / (1 + np.exp(-np.clip(z, -40, 40)))
    return out


def isotonic(raw: np.ndarray, y: np.ndarray) -> dict[str, list[float]]:
    """Isotonic regression (scikit-learn, clipped out of bounds) as breakpoints ``{x, y}``."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, y)
    return {"x": [float(v) for v in iso.X_thresholds_], "y": [float(v) for v in iso.y_thresholds_]}


def platt(raw: np.ndarray, y: np.ndarray) -> dict[str, list[float]]:
    """Platt scaling (Platt 1999: a logistic regression on the logit of the raw score) written as breakpoints
    ``{x, y}`` on a 201-point grid of [0, 1], so that it is applied like the isotonic map (linear between them)."""
    from sklearn.linear_model import LogisticRegression

    def logit(v: np.ndarray) -> np.ndarray:
        v = np.clip(v, 1e-6, 1 - 1e-6)
        out: np.ndarray = np.log(v / (1 - v))
        return out

    lr = LogisticRegression(C=1e6, max_iter=5000).fit(logit(raw)[:, None], y)
    grid = np.linspace(0.0, 1.0, 201)
    return {"x": [float(v) for v in grid], "y": [float(v) for v in lr.predict_proba(logit(grid)[:, None])[:, 1]]}


def ece_of(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error, 10 equal-width bins (as :func:`bench.support.ece`)."""
    return ece(p.tolist(), y.astype(int).tolist(), bins)[0]


def choose_calibration(
    raw: np.ndarray, y: np.ndarray, fold: np.ndarray
) -> tuple[str, dict[str, list[float]], float, np.ndarray]:
    """Isotonic or Platt, whichever has the lower ECE when fitted on four folds of the out-of-fold scores and
    measured on the fifth (summed over the five): ``(kind, breakpoints fitted on all, cross-validated ECE,
    cross-fitted probabilities)``; the cross-fitted probabilities (each item mapped by a calibration that never saw
    it) are what the thresholds are chosen on and the out-of-fold figures report."""
    scores, preds = {}, {}
    for kind, fit in (("isotonic", isotonic), ("platt", platt)):
        pred = np.zeros(len(raw))
        for k in range(FOLDS):
            bp = fit(raw[fold != k], y[fold != k])
            pred[fold == k] = np.interp(raw[fold == k], bp["x"], bp["y"])
        scores[kind], preds[kind] = ece_of(pred, y), pred
    kind = min(scores, key=lambda k: scores[k])
    return kind, (isotonic if kind == "isotonic" else platt)(raw, y), scores[kind], preds[kind]


def rounded(x: Any) -> Any:
    """Arrays and floats rounded to 6 significant digits for the JSON file."""
    if isinstance(x, np.ndarray):
        return [float(f"{v:.6g}") for v in x.tolist()]
    if isinstance(x, float):
        return float(f"{x:.6g}")
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def folds_of(claims: list[dict[str, Any]], k: int = FOLDS) -> dict[Any, int]:
    """claim id -> fold (0..k-1): the :func:`bench.support.claim_groups` shuffled with the split seed, dealt in
    turn."""
    groups = claim_groups(claims)
    order = np.random.default_rng(SPLIT_SEED + 1).permutation(len(groups))
    return {c["id"]: j % k for j, i in enumerate(order) for c in groups[int(i)]}


#: a reversed direction of effect, both ways (:func:`reverse_claim` swaps the first such word of a claim)
_REVERSALS = (
    ("increase", "decrease"), ("increases", "decreases"), ("increased", "decreased"), ("increasing", "decreasing"),
    ("higher", "lower"), ("more", "less"), ("greater", "smaller"), ("fewer", "more"), ("positive", "negative"),
    ("positively", "negatively"), ("reduce", "increase"), ("reduces", "increases"), ("reduced", "increased"),
    ("reducing", "increasing"), ("reduction", "increase"), ("enhance", "reduce"), ("enhances", "reduces"),
    ("enhanced", "reduced"), ("promote", "inhibit"), ("promotes", "inhibits"), ("promoted", "inhibited"),
    ("inhibit", "promote"), ("inhibits", "promotes"), ("inhibited", "promoted"), ("inhibition", "promotion"),
    ("activate", "inhibit"), ("activates", "inhibits"), ("activated", "inhibited"), ("activation", "inhibition"),
    ("induce", "inhibit"), ("induces", "inhibits"), ("induced", "inhibited"), ("suppress", "promote"),
    ("suppresses", "promotes"), ("suppressed", "promoted"), ("upregulates", "downregulates"),
    ("upregulated", "downregulated"), ("up-regulates", "down-regulates"), ("up-regulated", "down-regulated"),
    ("upregulation", "downregulation"), ("improve", "worsen"), ("improves", "worsens"), ("improved", "worsened"),
    ("better", "worse"), ("elevated", "reduced"), ("lowers", "raises"), ("lowered", "raised"), ("rises", "falls"),
    ("risen", "fallen"), ("rose", "fell"), ("shorter", "longer"), ("beneficial", "harmful"),
    ("effective", "ineffective"), ("accelerates", "slows"), ("accelerated", "slowed"), ("gain", "loss"),
    ("low", "high"), ("declines", "rises"),
)  # fmt: skip
_SWAP: dict[str, str] = {}
for _a, _b in _REVERSALS:
    _SWAP.setdefault(_a, _b)
    _SWAP.setdefault(_b, _a)
_DIRECTION_WORD = re.compile(r"\b(" + "|".join(sorted(map(re.escape, _SWAP), key=len, reverse=True)) + r")\b", re.I)
_AUX = re.compile(r"\b(?:is|are|was|were|does|do|did|could|may|might|will|would|should|must|has|have|had)\b", re.I)
#: removing a negation, in this order (the first that matches applies)
_UNNEGATE: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (
        re.compile(r"\b(is|are|was|were|does|do|did|can|could|may|might|will|would|should|must|has|have|had) not\b", re.I),
        lambda m: m.group(1),
    ),
    (re.compile(r"\bcannot\b", re.I), lambda m: "can"),
    (re.compile(r"\b(\w+)n't\b", re.I), lambda m: m.group(1)),
    (re.compile(r"\bno\b", re.I), lambda m: "a"),
    (re.compile(r"\bnot\s+", re.I), lambda m: ""),
    (re.compile(r"\bwithout\b", re.I), lambda m: "with"),
    (re.compile(r"\bfails? to\s+", re.I), lambda m: ""),
)  # fmt: skip
_NOT_VERB = frozenset("this its his thus less series species analysis diagnosis".split())
_BEFORE_NOUN = frozenset("the a an of in and with for to by on".split())


def _cased(src: str, word: str) -> str:
    return word[:1].upper() + word[1:] if src[:1].isupper() else word


def reverse_claim(claim: str) -> str | None:
    """``claim`` reversed the way SciFact's annotators wrote its contradicting claims (Wadden et al., EMNLP 2020,
    section 3: a negation or reversal of an original claim): an existing negation removed ("is not required" ->
    "is required", "no relation" -> "a relation"), else the first direction-of-effect word swapped for its opposite
    ("increases" -> "decreases", "higher" -> "lower"), else a negation inserted ("can" -> "cannot", "is" -> "is not",
    "regulates" -> "does not regulate"). None when none applies. A rule of thumb for training data only (the
    counterfactual claims of :func:`counterfactuals`), never applied to what is judged."""
    for rx, edit in _UNNEGATE:
        m = rx.search(claim)
        if m:
            return " ".join((claim[: m.start()] + edit(m) + claim[m.end() :]).split())
    m = _DIRECTION_WORD.search(claim)
    if m:
        return claim[: m.start()] + _cased(m.group(1), _SWAP[m.group(1).lower()]) + claim[m.end() :]
    m = re.search(r"\bcan\b", claim, re.I)
    if m:
        return claim[: m.start()] + _cased(m.group(0), "cannot") + claim[m.end() :]
    m = _AUX.search(claim)
    if m:
        return claim[: m.end()] + " not" + claim[m.end() :]
    words = list(re.finditer(r"[A-Za-z][A-Za-z-]*", claim))
    for k, w in enumerate(words[1:9], 1):
        t = w.group(0)
        if (
            t.islower()
            and len(t) > 3
            and t.endswith("s")
            and not t.endswith(("ss", "us", "is", "ics", "ous"))
            and t not in _NOT_VERB
            and words[k - 1].group(0).lower() not in _BEFORE_NOUN
            and claim[w.end() : w.end() + 1] == " "
        ):
            stem = t[:-2] if t.endswith(("ches", "shes", "sses", "xes", "zes")) else t[:-1]
            return claim[: w.start()] + "does not " + stem + claim[w.end() :]
    return None


#: the label of a reversed claim against the same evidence
_REVERSED_LABEL = {"SUPPORT": "CONTRADICT", "CONTRADICT": "SUPPORT", "NEI": "NEI"}


def counterfactuals(records: list[dict[str, Any]], labels: tuple[str, ...]) -> list[tuple[int, dict[str, Any]]]:
    """Counterfactual training passages (the SciFact authors' recipe for contradicting claims): for each record
    whose label is in ``labels``, its claim reversed (:func:`reverse_claim`) against the same abstract and rationale
    sentences, labelled the opposite way (SUPPORT <-> CONTRADICT; an NEI passage stays NEI: a reversal alone does
    not make a passage bear on the claim). ``[(index of the source record, record)]``; used only to fit models on
    training folds, never as an evaluation row."""
    out = []
    for i, r in enumerate(records):
        if r["label"] not in labels:
            continue
        rc = reverse_claim(r["claim"])
        if rc and rc != r["claim"]:
            out.append(
                (i, {**r, "claim": rc, "label": _REVERSED_LABEL[r["label"]], "counterfactual_of": r["claim_id"]})
            )
    return out


def wilson_lower(k: float, n: float, z: float = 1.96) -> float:
    """The lower end of the Wilson score interval (Wilson, JASA 1927; 95 % at ``z`` 1.96) of a proportion ``k`` of
    ``n``; 0 when ``n`` is 0."""
    if n <= 0:
        return 0.0
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n)


#: which passage models are fitted with the counterfactual passages: chosen by nested cross-validation over the
#: development claims (``--nested-dev``): with them the support model's "supported" precision fell (0.78 against
#: 0.87), the contradict model's "contradicts" precision rose (0.71 against 0.66)
AUGMENT_MODELS: tuple[str, ...] = ("contradict",)
#: which passages get a counterfactual twin (:func:`counterfactuals`); chosen on the out-of-fold figures
AUGMENT_LABELS = ("SUPPORT", "CONTRADICT")


#: how a verdict threshold is chosen (:func:`verdict_threshold`); the shipped rule was chosen by nested
#: cross-validation over the development claims only (``--nested-dev``)
RULES = ("wilson", "wilson-point", "point")
THRESHOLD_RULE = "wilson-point"


def verdict_threshold(
    p: np.ndarray, hit: np.ndarray, target: float, min_n: int = 10, rule: str = THRESHOLD_RULE
) -> tuple[float, float, float]:
    """``(t, precision, wilson lower bound)`` of the verdict threshold ``t`` on the probabilities ``p`` (items
    ``p >= t``, at least ``min_n`` of them, are shown; ``hit`` says which are right). ``rule``:

    - ``wilson``: the lowest ``t`` whose items have a 95 % Wilson lower bound of their precision (:func:`wilson_lower`)
      >= ``target``; when none does, the ``t`` of the highest lower bound (the precision the data vouch for);
    - ``wilson-point``: the same, but when none reaches ``target``, the ``t`` of the highest point precision;
    - ``point``: the lowest ``t`` whose point precision is >= ``target``, else the highest point precision (ties:
      the lowest ``t``).

    ``(1.01, 0.0, 0.0)`` (never shown) without ``min_n`` items."""
    if rule not in RULES:
        raise ValueError(f"unknown threshold rule {rule!r}; one of {RULES}")
    by_lb, by_prec = (1.01, 0.0, 0.0), (1.01, 0.0, 0.0)
    for t in sorted(set(p.tolist())):
        m = p >= t
        n = int(m.sum())
        if n < min_n:
            break
        k = float(hit[m].sum())
        lb, prec = wilson_lower(k, n), k / n
        if (lb if rule != "point" else prec) >= target:
            return float(t), prec, lb
        if lb > by_lb[2]:
            by_lb = (float(t), prec, lb)
        if prec > by_prec[1]:
            by_prec = (float(t), prec, lb)
    return by_lb if rule == "wilson" else by_prec


def fit_judge(
    dev: list[dict[str, Any]],
    feats: list[np.ndarray],
    fold: np.ndarray,
    aug: list[tuple[int, dict[str, Any]]],
    aug_feats: list[np.ndarray],
    say: Callable[[str], None] = print,
    rule: str = THRESHOLD_RULE,
    augment_models: tuple[str, ...] = AUGMENT_MODELS,
) -> dict[str, Any]:
    """Steps 3-6 of the module docstring on the passages ``dev`` (feature rows ``feats``, folds ``fold``) with the
    counterfactual passages ``aug`` (:func:`counterfactuals`, rows ``aug_feats``) added to the training side of
    every fit of the support and contradict models (a counterfactual is in the training folds exactly when its
    source passage is; never scored). Returns ``{draft, thresholds, out_of_fold, calibration, cross: {rationale,
    support, contradict}, t_r}``: ``draft`` the model parts (coefficients, calibration, thresholds), the rest what
    the choices were made on."""
    from sklearn.metrics import average_precision_score

    from aisac_core.roles.support_model import passage_vector

    y_sent = [np.array([int(i in r["gold"]) for i in range(len(r["sentences"]))]) for r in dev]
    labels = np.array([r["label"] for r in dev])
    aug_src = np.array([i for i, _ in aug], dtype=int)
    aug_fold = fold[aug_src] if len(aug) else np.zeros(0, dtype=int)
    aug_labels = np.array([r["label"] for _, r in aug])

    def stack(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.vstack([feats[i] for i in idx]), np.concatenate([y_sent[i] for i in idx])

    def rationale_fold_models(c: float) -> list[dict[str, Any]]:
        return [fit_lr(*stack(np.flatnonzero(fold != k)), c) for k in range(FOLDS)]

    # 1. rationale model: C by out-of-fold average precision
    best_c, best_ap, r_models = C_GRID[0], -1.0, []
    for c in C_GRID:
        models = rationale_fold_models(c)
        got = [prob(models[fold[i]], feats[i]) for i in range(len(dev))]
        ap_c = float(average_precision_score(np.concatenate(y_sent), np.concatenate(got)))
        say(f"rationale C={c}: out-of-fold average precision {ap_c:.4f}")
        if ap_c > best_ap:
            best_c, best_ap, r_models = c, ap_c, models
    r_oof = [prob(r_models[fold[i]], feats[i]) for i in range(len(dev))]
    # 2. passage models on the passage vectors (rationale probabilities of the fold's own rationale model; a
    # counterfactual's by the model of its source passage's fold, which never saw that passage)
    vec = np.array([passage_vector(r_oof[i], feats[i]) for i in range(len(dev))])
    aug_vec = np.array([passage_vector(prob(r_models[aug_fold[j]], x), x) for j, x in enumerate(aug_feats)])
    passage: dict[str, dict[str, Any]] = {}
    for name, gold in (("support", "SUPPORT"), ("contradict", "CONTRADICT")):
        y = (labels == gold).astype(int)
        y_aug = (aug_labels == gold).astype(int)
        best: dict[str, Any] = {"ap": -1.0}
        for c in C_GRID:
            oof = np.zeros(len(dev))
            for k in range(FOLDS):
                if len(aug) and name in augment_models:
                    tr = aug_fold != k
                    m = fit_lr(np.vstack([vec[fold != k], aug_vec[tr]]), np.concatenate([y[fold != k], y_aug[tr]]), c)
                else:
                    m = fit_lr(vec[fold != k], y[fold != k], c)
                oof[fold == k] = prob(m, vec[fold == k])
            ap_c = float(average_precision_score(y, oof))
            say(f"{name} C={c}: out-of-fold average precision {ap_c:.4f}")
            if ap_c > best["ap"]:
                best = {"ap": ap_c, "C": c, "oof": oof}
        passage[name] = best
    # 3. final models on all development passages (and all counterfactuals)
    x_all, y_all = stack(np.arange(len(dev)))
    r_model = fit_lr(x_all, y_all, best_c)
    vec_all = np.array([passage_vector(prob(r_model, feats[i]), feats[i]) for i in range(len(dev))])
    final_fit: dict[str, dict[str, Any]] = {}
    for name, gold in (("support", "SUPPORT"), ("contradict", "CONTRADICT")):
        x_fit, y_fit = vec_all, labels
        if len(aug) and name in augment_models:
            x_fit = np.vstack([vec_all, np.array([passage_vector(prob(r_model, x), x) for x in aug_feats])])
            y_fit = np.concatenate([labels, aug_labels])
        final_fit[name] = fit_lr(x_fit, (y_fit == gold).astype(int), passage[name]["C"])
    s_model, c_model = final_fit["support"], final_fit["contradict"]
    # 4. calibration and thresholds on the out-of-fold predictions (data no model saw while fitted)
    r_raw = np.concatenate(r_oof)
    is_sup = (labels == "SUPPORT").astype(int)
    is_con = (labels == "CONTRADICT").astype(int)
    sent_fold = np.concatenate([[fold[i]] * len(y_sent[i]) for i in range(len(dev))])
    iso: dict[str, dict[str, list[float]]] = {}
    calibration: dict[str, dict[str, Any]] = {}
    cross: dict[str, np.ndarray] = {}
    for name, raw, y in (
        ("rationale", r_raw, np.concatenate(y_sent)),
        ("support", passage["support"]["oof"], is_sup),
        ("contradict", passage["contradict"]["oof"], is_con),
    ):
        kind, iso[name], cv_ece, cross[name] = choose_calibration(raw, y, sent_fold if name == "rationale" else fold)
        calibration[name] = {"kind": kind, "cross_validated_ece": cv_ece}
        say(f"calibration of {name}: {kind} (cross-validated ECE {cv_ece:.4f})")
    # thresholds on the cross-fitted probabilities: neither the models nor the calibration saw the items
    p_r, p_s, p_c = cross["rationale"], cross["support"], cross["contradict"]
    y_r = np.concatenate(y_sent)
    best_f1, t_r = -1.0, 0.5
    for t in sorted(set(p_r.tolist())):
        pred = p_r >= t
        tp = float((pred & (y_r == 1)).sum())
        f1 = 2 * tp / (pred.sum() + y_r.sum()) if pred.sum() + y_r.sum() else 0.0
        if f1 > best_f1:
            best_f1, t_r = f1, float(t)
    # the passage "bears on" a claim or question down to the probability that keeps RELEVANT_RECALL of the gold
    # rationale sentences (below it the evaluator withholds an answer: abstention errs towards answering)
    pos = np.sort(p_r[y_r == 1])
    t_rel = float(pos[int(math.floor((1 - RELEVANT_RECALL) * len(pos)))])
    say(f"relevance threshold (out of fold): {t_rel:.3f} keeps {float((pos >= t_rel).mean()):.3f} of the rationales")
    t_s, prec_s, lb_s = verdict_threshold(p_s, is_sup, TARGET_PRECISION, MIN_ABOVE, rule)
    t_c, prec_c, lb_c = verdict_threshold(p_c, is_con, TARGET_PRECISION, MIN_ABOVE, rule)
    # what the precision costs: the share of the SUPPORT passages (and of all passages) shown "supported"
    n_s, n_c = int((p_s >= t_s).sum()), int((p_c >= t_c).sum())
    cov_s = float((p_s >= t_s).mean())
    recall_s = float(is_sup[p_s >= t_s].sum() / max(is_sup.sum(), 1))
    say(f"supported at {t_s:.3f}: {100 * recall_s:.1f} % of the SUPPORT passages, {100 * cov_s:.1f} % of all")
    say(
        f"thresholds (out of fold): rationale {t_r:.3f} (F1 {best_f1:.3f}), supported {t_s:.3f} "
        f"({n_s} passages above, precision {prec_s:.3f}, Wilson 95 % lower bound {lb_s:.3f}), contradicts "
        f"{t_c:.3f} ({n_c} above, precision {prec_c:.3f}, lower bound {lb_c:.3f})"
    )
    return {
        "draft": {
            "rationale": rounded(r_model),
            "support": rounded(s_model),
            "contradict": rounded(c_model),
            "isotonic": iso,
        },
        # floored to 6 decimals: a threshold rounded up would exclude the passages it was chosen for
        "thresholds": {
            k: math.floor(v * 1e6) / 1e6
            for k, v in (("supported", t_s), ("contradicts", t_c), ("rationale", t_r), ("relevant", t_rel))
        },
        "out_of_fold": {
            "rationale_average_precision": best_ap,
            "support_average_precision": passage["support"]["ap"],
            "contradict_average_precision": passage["contradict"]["ap"],
            "rationale_f1": best_f1,
            "supported_precision": prec_s,
            "supported_precision_wilson_lower_95": lb_s,
            "supported_above": n_s,
            "supported_recall": recall_s,
            "supported_coverage": cov_s,
            "contradicts_precision": prec_c,
            "contradicts_precision_wilson_lower_95": lb_c,
            "contradicts_above": n_c,
        },
        "calibration": calibration,
        "cross": cross,
        "t_r": t_r,
    }


def oof_verdicts(final: Any, dev: list[dict[str, Any]], fit: dict[str, Any]) -> list[dict[str, Any]]:
    """The out-of-fold verdicts of :func:`fit_judge`'s cross-fitted probabilities: each passage judged by models
    and calibration maps that never saw it, with the thresholds of ``final``."""
    from aisac_core.roles.support_model import decide

    p_r, p_s, p_c = fit["cross"]["rationale"], fit["cross"]["support"], fit["cross"]["contradict"]
    bounds = np.concatenate([[0], np.cumsum([len(r["sentences"]) for r in dev])])
    t_r = final.thresholds["rationale"]
    out = []
    for i in range(len(dev)):
        rat = p_r[bounds[i] : bounds[i + 1]]
        verdict, _prob, _unc = decide(final, float(p_s[i]), float(p_c[i]))
        order = [int(j) for j in np.argsort(-rat, kind="stable")]
        chosen = [j for j in order if rat[j] >= t_r][:3] or (order[:1] if verdict != "does not address" else [])
        out.append(
            {
                "verdict": verdict,
                "p_support": float(p_s[i]),
                "p_contradict": float(p_c[i]),
                "rationale": chosen,
                "sentences": [{"i": j, "p_rationale": float(v)} for j, v in enumerate(rat)],
            }
        )
    return out


def prepared(
    records: list[dict[str, Any]], cache: VectorCache, augment: tuple[str, ...]
) -> tuple[list[np.ndarray], list[tuple[int, dict[str, Any]]], list[np.ndarray]]:
    """Feature rows of ``records``, their counterfactuals and the counterfactuals' feature rows (claims embedded
    into ``cache`` as needed)."""
    aug = counterfactuals(records, augment)
    cache.ensure([r["claim"] for _, r in aug])
    return features(records, cache), aug, features([r for _, r in aug], cache)


#: where ``--nested`` records its figures (printed by ``python -m bench --only support`` when they measured the
#: shipped model)
NESTED_FILE = REPO / "bench" / "data" / "support_nested.json"


def run_nested(
    dev_claims: list[dict[str, Any]],
    test_claims: list[dict[str, Any]],
    dev: list[dict[str, Any]],
    test: list[dict[str, Any]],
    cache: VectorCache,
    augment: tuple[str, ...],
    t0: float,
    rule: str = THRESHOLD_RULE,
    dev_only: bool = False,
    augment_models: tuple[str, ...] = AUGMENT_MODELS,
) -> int:
    """``--nested``: nested cross-validation over all claims (development + held-out), every claim's abstracts
    scored by models and calibration maps that never saw it. Outer folds: the held-out test claims (judged by the
    shipped model, fitted on the development claims, exactly as ``python -m bench --only support`` does) and the
    :data:`FOLDS` development folds (each judged by the whole recipe, :func:`fit_judge` with its own inner folds,
    C, calibration and thresholds, fitted on the other development folds and the held-out claims). Prints and writes
    to :data:`NESTED_FILE` the pooled figures (:func:`bench.support.evaluate`) with 95 % bootstrap intervals over
    claims (:func:`bench.support.bootstrap`), beside the fixed held-out part's; writes no model.

    ``dev_only`` (``--nested-dev``, for making choices): the development claims alone, each development fold judged
    by the recipe (threshold ``rule``, counterfactuals ``augment``) fitted on the other development folds; the
    held-out claims are neither fitted on nor scored, nothing is written."""
    from aisac_core.roles.support_model import SupportModel, load_model

    outer = folds_of(dev_claims)
    if dev_only:
        test, test_claims = [], []
    records: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    per_fold: list[dict[str, Any]] = []
    if not dev_only:
        shipped = load_model()
        records, verdicts = list(test), judge_records(test, cache, shipped)
        for v in verdicts:
            v["rationale_threshold"] = shipped.thresholds["rationale"]
        fixed = evaluate(test, verdicts, shipped.thresholds["rationale"])
        per_fold.append({"outer_fold": "held-out test (shipped model)", **_fold_row(fixed)})
    for k in range(FOLDS):
        train = [r for r in dev if outer[r["claim_id"]] != k] + list(test)
        held = [r for r in dev if outer[r["claim_id"]] == k]
        train_claims = [c for c in dev_claims if outer[c["id"]] != k] + list(test_claims)
        inner_of = folds_of(train_claims)
        inner = np.array([inner_of[r["claim_id"]] for r in train])
        feats, aug, aug_feats = prepared(train, cache, augment)
        fit = fit_judge(
            train, feats, inner, aug, aug_feats, say=lambda _msg: None, rule=rule, augment_models=augment_models
        )
        m = SupportModel(rounded({**fit["draft"], "thresholds": fit["thresholds"]}), f"nested-{k}")
        got = judge_records(held, cache, m)
        for v in got:
            v["rationale_threshold"] = m.thresholds["rationale"]
        f = evaluate(held, got, m.thresholds["rationale"])
        per_fold.append({"outer_fold": f"development fold {k}", **_fold_row(f), "thresholds": fit["thresholds"]})
        print(f"outer fold {k}: {_fold_row(f)} ({time.perf_counter() - t0:.0f} s)", flush=True)
        records += held
        verdicts += got
    pooled = evaluate(records, verdicts, 2.0)
    if dev_only:
        print_figures(
            f"nested cross-validation, development claims only (rule {rule}, counterfactuals {augment})", pooled
        )
        print(f"bootstrap 95 %: {bootstrap(records, verdicts)}")
        return 0
    print_figures("nested cross-validation, all claims (each judged by models that never saw it)", pooled)
    record = {
        "what": "nested cross-validation by claim group over all shared SciFact train claims "
        "(bench/train_support.py --nested)",
        "model_sha256": shipped.sha256,
        "recipe": {
            "counterfactuals": list(augment),
            "counterfactuals_in": list(augment_models),
            "threshold_rule": rule,
            "inner_folds": FOLDS,
            "outer_folds": FOLDS + 1,
        },
        "outer_folds": per_fold,
        "figures": {k: v for k, v in pooled.items() if k != "reliability"},
        "reliability": pooled["reliability"],
        "bootstrap_95": bootstrap(records, verdicts),
        "held_out": {k: v for k, v in fixed.items() if k != "reliability"},
        "held_out_bootstrap_95": bootstrap(test, verdicts[: len(test)]),
        "seconds": round(time.perf_counter() - t0),
    }
    NESTED_FILE.write_text(json.dumps(rounded(record), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {NESTED_FILE} ({time.perf_counter() - t0:.0f} s)")
    return 0


def _fold_row(f: dict[str, Any]) -> dict[str, Any]:
    """The headline figures of one outer fold."""
    return {
        "claims": f["claims"],
        "abstracts": f["abstracts"],
        "supported_above": f["supported"]["n_pred"],
        "supported_precision": round(f["supported"]["precision"], 4),
        "ece_support": round(f["ece_support"], 4),
    }


def main(argv: list[str] | None = None) -> int:
    """Train, write the model file (unless ``--dry-run``), print the out-of-fold and held-out figures; with
    ``--nested`` measure by nested cross-validation instead (:func:`run_nested`)."""
    from aisac_core.roles.support_model import FEATURES, SupportModel

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--dry-run", action="store_true", help="do not write the model file")
    ap.add_argument(
        "--augment",
        default=",".join(AUGMENT_LABELS),
        help="labels whose passages get a counterfactual (reversed-claim) twin in training, comma-separated "
        "(SUPPORT,CONTRADICT,NEI; 'none': no counterfactuals); the default is the shipped choice",
    )
    ap.add_argument(
        "--nested",
        action="store_true",
        help="nested cross-validation over all claims with the shipped recipe (writes bench/data/support_nested.json, "
        "no model)",
    )
    ap.add_argument(
        "--oof-only",
        action="store_true",
        help="print the out-of-fold figures only, not the held-out test claims' (for making choices)",
    )
    ap.add_argument(
        "--nested-dev",
        action="store_true",
        help="nested cross-validation over the development claims only, to compare recipes (prints, writes nothing)",
    )
    ap.add_argument(
        "--augment-models",
        default=",".join(AUGMENT_MODELS),
        help="passage models fitted with the counterfactuals, comma-separated (support,contradict); the default is "
        "the shipped choice",
    )
    ap.add_argument("--rule", choices=RULES, default=THRESHOLD_RULE, help="verdict threshold rule (verdict_threshold)")
    args = ap.parse_args(argv)
    augment = tuple(x for x in args.augment.upper().split(",") if x in _REVERSED_LABEL)
    models = tuple(x for x in args.augment_models.lower().split(",") if x in ("support", "contradict"))
    folder = args.data / "claims" / "scifact"
    t0 = time.perf_counter()
    claims = load_claims(folder / "claims_train.jsonl")
    parts = split(claims)
    dev_claims = parts["train"] + parts["validation"]
    corpus = load_corpus(folder / "corpus.jsonl", {d for c in claims for d in c["cited_doc_ids"]})
    dev, test = pairs(dev_claims, corpus), pairs(parts["test"], corpus)
    print(f"development (train + validation): {len(dev_claims)} claims, {len(dev)} cited abstracts")
    print(f"held-out test: {len(parts['test'])} claims, {len(test)} cited abstracts")
    cache = VectorCache()
    cache.ensure(texts_of(dev) + texts_of(test))
    print(f"vectors ready ({time.perf_counter() - t0:.0f} s)")
    if args.nested or args.nested_dev:
        return run_nested(dev_claims, parts["test"], dev, test, cache, augment, t0, args.rule, args.nested_dev, models)
    feats, aug, aug_feats = prepared(dev, cache, augment)
    print(f"counterfactual training passages ({'+'.join(augment) or 'none'}): {len(aug)}")
    fold_of = folds_of(dev_claims)
    fold = np.array([fold_of[r["claim_id"]] for r in dev])
    fit = fit_judge(dev, feats, fold, aug, aug_feats, rule=args.rule, augment_models=models)
    data_sha = {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in ("claims_train.jsonl", "corpus.jsonl")
    }
    model = {
        "name": "aisac support judge (SciFact)",
        "version": 3,
        "method": "logistic regressions (rationale per sentence; support, contradict per passage, fitted with "
        "counterfactual reversed-claim passages), calibration and thresholds (95 % Wilson lower bound of precision, "
        "else the best point precision) on out-of-fold predictions; bench/train_support.py",
        "embedding_model": "all-MiniLM-L6-v2 (int8 ONNX, aisac default)",
        "features": list(FEATURES),
        "split": {
            "seed": SPLIT_SEED,
            "claims": {k: len(v) for k, v in parts.items()},
            "folds": FOLDS,
            "fitted_on": "train + validation",
            "held_out": "test",
        },
        "counterfactuals": {"labels": list(augment), "passages": len(aug), "models": list(models)},
        "threshold_rule": args.rule,
        "training_data_sha256": data_sha,
        **fit["draft"],
        "thresholds": fit["thresholds"],
        "out_of_fold": fit["out_of_fold"],
        "calibration": fit["calibration"],
    }
    model = rounded(model)
    final = SupportModel(model, "final")
    print_figures("development claims, out of fold", evaluate(dev, oof_verdicts(final, dev, fit), fit["t_r"]))
    if not args.oof_only:
        verdicts = judge_records(test, cache, final)
        print_figures("held-out test claims", evaluate(test, verdicts, final.thresholds["rationale"]))
    if not args.dry_run:
        MODEL_PATH.parent.mkdir(parents=True, exist_ok=True)
        MODEL_PATH.write_text(json.dumps(model, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {MODEL_PATH} ({MODEL_PATH.stat().st_size:,} bytes)")
    print(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
