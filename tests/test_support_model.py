"""The learned support judge (aisac_core.roles.support_model) and its SciFact bench (bench/support.py): the shipped
model loads and is what the verdicts name, features and verdicts on real MiniLM vectors, clear errors on bad input,
and the bench's scoring on the shared SciFact claims (skipped without ../shared/data)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from aisac_core.errors import AisacError
from aisac_core.roles.support_model import (
    FEATURES,
    SupportModelError,
    judge_passage,
    judge_vectors,
    load_model,
    model_sha256,
    passage_features,
)

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package (bench/support.py) is imported from the checkout
    sys.path.insert(0, str(REPO))

PASSAGE = [
    "Chronic kidney disease affects about one in ten adults worldwide.",
    "We followed 2,400 patients for five years.",
    "Treatment with drug X reduced the risk of dialysis by 30% compared with placebo.",
    "Adverse events were rare in both groups.",
]


def test_shipped_model_is_small_json_and_named_by_its_hash():
    raw = resources.files("aisac_core.roles").joinpath("models", "support_scifact.json").read_bytes()
    assert len(raw) < 1_000_000
    data = json.loads(raw)
    assert data["features"] == list(FEATURES)
    m = load_model()
    assert m.sha256 == hashlib.sha256(raw).hexdigest() == model_sha256()
    assert 0 < m.thresholds["rationale"] < 1 and 0 < m.thresholds["supported"] <= 1.01
    # the relevance (abstention) threshold keeps more rationale sentences than the selection threshold
    assert 0 < m.thresholds["relevant"] < m.thresholds["rationale"]
    assert data["calibration"]["support"]["cross_validated_ece"] <= 0.1
    # the calibration maps are monotone probabilities (isotonic / Platt breakpoints)
    for name in ("rationale", "support", "contradict"):
        ys = np.asarray(data["isotonic"][name]["y"])
        assert ys.min() >= 0 and ys.max() <= 1 and np.all(np.diff(ys) >= -1e-12)


def test_features_and_bad_input():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(5, 8))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    x = passage_features("Drug X reduces dialysis risk.", PASSAGE, vecs[0], vecs[1:])
    assert x.shape == (4, len(FEATURES))
    i = FEATURES.index
    assert x[2, i("claim_coverage")] > x[0, i("claim_coverage")]  # "drug", "reduce", "dialys", "risk" are in 2
    assert x[3, i("is_last")] == 1.0 and x[0, i("position")] == 0.0
    # pairwise features: a claim of the opposite direction / a negated claim disagrees with the sentence in
    # proportion to how much of the claim it covers; a claim of no effect against a finding of one
    bp = ["Patients were recruited in two hospitals.", "Treatment with drug X lowered blood pressure in patients."]
    up = passage_features("Drug X raises blood pressure in patients.", bp, vecs[0], vecs[1:3])
    assert up[1, i("direction_differs_on_topic")] > 0.3 and up[0, i("direction_differs_on_topic")] == 0.0
    assert up[1, i("direction_agrees_on_topic")] == 0.0
    neg = passage_features("Drug X does not lower blood pressure in patients.", bp, vecs[0], vecs[1:3])
    assert neg[1, i("negation_differs_on_topic")] > 0.3 and neg[1, i("direction_agrees_on_topic")] > 0.3
    none = passage_features("Drug X has no effect on blood pressure in patients.", bp, vecs[0], vecs[1:3])
    assert none[1, i("claim_no_effect")] == 1.0 and none[1, i("no_effect_differs_on_topic")] > 0.3
    assert x[2, i("claim_no_effect")] == 0.0 and x[2, i("no_effect_differs")] == 0.0
    # local polarity: the sentence reverses the claim next to the claim's object, although it also has a word of the
    # claim's direction elsewhere (the global direction features see both directions and call it neither)
    rev = ["DUSP4 overexpression increased chemotherapy-induced apoptosis, whereas DUSP4 depletion dampened it."]
    got = passage_features("DUSP4 decreases apoptosis.", rev, vecs[0], vecs[1:2])
    assert got[0, i("claim_polarity")] == -1.0 and got[0, i("sentence_polarity")] == 1.0
    assert got[0, i("polarity_differs")] == 1.0 and got[0, i("polarity_differs_on_topic")] > 0.2
    assert got[0, i("polarity_found")] == 1.0 and got[0, i("direction_differs")] == 0.0
    # a negation before the object reverses its direction: "not associated with an increased risk" against a claim
    # of an increased risk; and the same finding agrees with the claim stated in the negative
    neg_rev = ["ADHD medication use was not associated with increased cardiovascular events."]
    got = passage_features("ADHD medications increase cardiovascular events.", neg_rev, vecs[0], vecs[1:2])
    assert got[0, i("claim_polarity")] == 1.0 and got[0, i("sentence_polarity")] == -1.0
    assert got[0, i("polarity_differs")] == 1.0 and got[0, i("polarity_agrees")] == 0.0
    got = passage_features("ADHD medications do not increase cardiovascular events.", neg_rev, vecs[0], vecs[1:2])
    assert got[0, i("claim_polarity")] == -1.0 and got[0, i("polarity_agrees")] == 1.0
    # a sentence that repeats the claim agrees with it: the claim is read as a sentence is (the direction next to its
    # object), not by its overall negation count (the dev-set answer judged "contradicted" by itself at P 0.90)
    said = (
        "While comprehension was not the primary objective of Paper Plain, improving readers' understanding of "
        "medical papers is also important for ensuring they have productive conversations with their providers."
    )
    got = passage_features(said, [said], vecs[0], vecs[1:2])
    assert got[0, i("polarity_differs")] == 0.0 and got[0, i("claim_polarity")] == got[0, i("sentence_polarity")]
    # a sentence that does not mention the claim's object has no polarity for it
    got = passage_features("Drug X reduces dialysis risk.", PASSAGE[:1], vecs[0], vecs[1:2])
    assert got[0, i("polarity_found")] == 0.0 and got[0, i("sentence_polarity")] == 0.0
    with pytest.raises(SupportModelError, match="one vector each"):
        passage_features("claim", PASSAGE, vecs[0], vecs[1:3])
    with pytest.raises(SupportModelError) as err:
        judge_passage("   ", PASSAGE, lambda texts: [[1.0] for _ in texts])
    assert isinstance(err.value, AisacError)
    with pytest.raises(SupportModelError, match="no vectors"):
        judge_passage("claim", PASSAGE, lambda texts: [[] for _ in texts])


def test_verdicts_on_real_vectors(shared_embedder):
    embed = shared_embedder.embed_documents
    stated = judge_passage(PASSAGE[2], PASSAGE, embed)
    other = judge_passage("The Eiffel tower is repainted every seven years with 60 tonnes of paint.", PASSAGE, embed)
    assert stated["p_support"] > other["p_support"]
    assert stated["rationale"][0] == 2  # the sentence that states the claim is the best rationale
    assert other["verdict"] == "does not address" and not other["uncertain"]
    assert other["sentences"][0]["p_rationale"] < stated["sentences"][2]["p_rationale"]
    for got in (stated, other):
        assert 0 <= got["probability"] <= 1 and got["model_sha256"] == model_sha256()
    # the same verdict from precomputed vectors
    vecs = embed([PASSAGE[2], *PASSAGE])
    assert judge_vectors(PASSAGE[2], PASSAGE, vecs[0], vecs[1:]) == stated


def test_bench_scoring_and_split(tmp_path):
    from bench.support import ece, evaluate, load_claims, split

    probs, hits = [0.05] * 20 + [0.95] * 20, [0] * 19 + [1] + [1] * 19 + [0]
    value, rows = ece(probs, hits)
    assert value == pytest.approx(0.0) and [r["n"] for r in rows] == [20, 20]
    assert ece([0.9] * 10, [0] * 10)[0] == pytest.approx(0.9)
    # the ECE that sampling alone gives: none for certain probabilities, more for fewer items; outcomes drawn from
    # their own probabilities stay below its 95th percentile far more often than not, a shifted one does not
    from bench.support import ece_by_chance

    assert ece_by_chance([0.0] * 5 + [1.0] * 5) == {"median": 0.0, "p95": 0.0}
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 1, 250).tolist()
    small, large = ece_by_chance(p[:50], draws=300), ece_by_chance(p, draws=300)
    assert 0 < large["median"] < large["p95"] < small["p95"]
    calibrated = [ece(p, (rng.random(250) < np.array(p)).astype(int).tolist())[0] for _ in range(20)]
    assert sum(v <= large["p95"] for v in calibrated) >= 15
    shifted = (rng.random(250) < np.clip(np.array(p) + 0.2, 0, 1)).astype(int).tolist()
    assert ece(p, shifted)[0] > large["p95"]
    bad = tmp_path / "claims.jsonl"
    bad.write_text('{"id": 1, "claim": "x", "cited_doc_ids": [3]}\n{"id": 2}\n')
    with pytest.raises(ValueError, match=r"claims.jsonl:2: not a SciFact claim"):
        load_claims(bad)
    claims = [{"id": i, "claim": f"c{i}", "evidence": {}, "cited_doc_ids": [i // 2]} for i in range(40)]
    parts = split(claims)
    assert sum(len(v) for v in parts.values()) == 40
    docs = {k: {d for c in v for d in c["cited_doc_ids"]} for k, v in parts.items()}
    assert not (docs["train"] & docs["test"]) and not (docs["validation"] & docs["test"])  # by claim group
    # one supported abstract with its rationale first, one no-evidence claim abstained on
    recs = [
        {"claim_id": 1, "label": "SUPPORT", "gold": {1}, "rationales": [[1]], "sentences": ["a", "b"]},
        {"claim_id": 2, "label": "NEI", "gold": set(), "rationales": [], "sentences": ["a", "b"]},
    ]
    verdicts = [
        {"verdict": "supports", "rationale": [1], "p_support": 0.9, "p_contradict": 0.0,
         "sentences": [{"i": 0, "p_rationale": 0.1}, {"i": 1, "p_rationale": 0.8}]},
        {"verdict": "does not address", "rationale": [], "p_support": 0.1, "p_contradict": 0.0,
         "sentences": [{"i": 0, "p_rationale": 0.1}, {"i": 1, "p_rationale": 0.2}]},
    ]  # fmt: skip
    f = evaluate(recs, verdicts, 0.5)
    assert f["abstract_level"]["f1"] == 1.0 and f["sentence_level"]["f1"] == 1.0
    assert f["supported"]["precision"] == 1.0 and f["no_evidence_no_supported"] == 1.0


def test_bench_cli_needs_claims_and_corpus_together(tmp_path):
    from bench.__main__ import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--only", "support", "--claims", str(tmp_path / "c.jsonl")])
    with pytest.raises(SystemExit):
        parse_args(["--only", "support", "--claims", str(tmp_path / "c"), "--corpus", str(tmp_path / "d")])


def test_judge_on_shared_scifact_claims(shared_data: Path, shared_embedder):
    """A few held-out SciFact claims judged against their cited abstracts with real vectors: the figures are
    computed, and no claim without evidence gets a "supports" verdict more often than the bench's target allows."""
    from bench.support import evaluate, load_claims, load_corpus, pairs, split

    folder = shared_data / "claims" / "scifact"
    test = split(load_claims(folder / "claims_train.jsonl"))["test"][:12]
    recs = pairs(test, load_corpus(folder / "corpus.jsonl", {d for c in test for d in c["cited_doc_ids"]}))
    embed = shared_embedder.embed_documents
    verdicts = [judge_passage(r["claim"], r["sentences"], embed) for r in recs]
    f = evaluate(recs, verdicts, load_model().thresholds["rationale"])
    assert f["claims"] == 12 and 0 <= f["ece_support"] <= 1
    assert f["rationale_selection"]["recall"] > 0  # some gold rationale sentences are found
    if f["no_evidence_claims"]:
        assert f["no_evidence_no_supported"] >= 0.8


def test_a_contradicted_citation_is_shown_as_such_with_its_probability():
    """The run page's evidence card shows a contradicted citation in the error colour with the judge's calibrated
    probability; the CSS gives that class the error colour."""
    from aisac_core.trace.runpage import CSS, _card_html

    card = {"n": 2, "title": "Paper", "text": "Drug X increased the risk.", "quote": "Drug X increased the risk.",
            "support": "contradicted", "support_probability": 0.62, "score": 0.5}  # fmt: skip
    html = _card_html(card, None, None, link_event=False)
    assert "badge support s-contradicted" in html and "support: contradicted (P 0.62)" in html
    rule = re.search(r"[^}]*\.s-contradicted[^{]*\{([^}]*)\}", CSS)
    assert rule and "color:var(--err)" in rule.group(1)


def test_bench_support_with_a_configured_model(tmp_path, monkeypatch):
    """--llm openai: the configured OpenAI-compatible model (a local stub endpoint here) judges every claim and
    cited abstract through the support prompt, and the bench reports its label figures."""
    from roles_support import ChatStub

    from bench.common import Context
    from bench.support import run

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"doc_id": 1, "title": "", "abstract": ["Drug X lowers blood pressure.", "It was safe."]}) + "\n"
        + json.dumps({"doc_id": 2, "title": "", "abstract": ["Weather was mild in May."]}) + "\n"
    )  # fmt: skip
    claims = tmp_path / "claims.jsonl"
    claims.write_text(
        json.dumps({"id": 1, "claim": "Drug X lowers blood pressure.", "cited_doc_ids": [1],
                    "evidence": {"1": [{"sentences": [0], "label": "SUPPORT"}]}}) + "\n"
        + json.dumps({"id": 2, "claim": "Drug X cures colds.", "cited_doc_ids": [2], "evidence": {}}) + "\n"
    )  # fmt: skip

    def reply(prompt: str) -> str:
        ok = "Drug X lowers blood pressure." in prompt.split("Cited sentence:")[1]
        return json.dumps({"verdict": "supported" if ok else "not supported", "reason": "stub"})

    with ChatStub({"support": [reply, reply]}) as stub:
        monkeypatch.setenv("AISAC_ROLES_LLM_BASE_URL", stub.url)
        got = run(Context(results_dir=tmp_path, options={"claims": claims, "corpus": corpus, "llm": "openai"}))
    assert len([r for r in stub.requests if r["role"] == "support"]) == 2
    f = got["figures"]
    assert got["judged_by"] == "openai" and f["label_accuracy"] == 1.0
    assert f["supported"]["precision"] == 1.0 and f["no_evidence_no_supported"] == 1.0


def test_counterfactual_claims_reverse_the_claim():
    """bench/train_support.py's counterfactual training passages (the SciFact authors' recipe for contradicting
    claims): a negation is removed, else the first direction word swapped, else a negation inserted; the reversed
    claim is labelled the other way against the same evidence, and only labelled passages get one."""
    from bench.train_support import counterfactuals, reverse_claim

    assert reverse_claim("Klf4 is not required for proper myeloid cell differentiation.") == (
        "Klf4 is required for proper myeloid cell differentiation."
    )
    assert reverse_claim("There is no relation between erythromycin use and stenosis.") == (
        "There is a relation between erythromycin use and stenosis."
    )
    assert reverse_claim("Risedronate increases risk of fractures.") == "Risedronate decreases risk of fractures."
    assert reverse_claim("Elevated DNA levels are associated with mortality.") == (
        "Reduced DNA levels are associated with mortality."
    )
    assert reverse_claim("Mutant mice can form plaques.") == "Mutant mice cannot form plaques."
    assert reverse_claim("Migraine with aura is associated with stroke.") == (
        "Migraine with aura is not associated with stroke."
    )
    assert reverse_claim("GATA3 regulates self-renewal of stem cells.") == (
        "GATA3 does not regulate self-renewal of stem cells."
    )
    assert reverse_claim("Mitochondria play a major role in apoptosis.") is None
    recs = [
        {"claim_id": 1, "claim": "Drug X lowers blood pressure.", "label": "SUPPORT", "gold": {0}},
        {"claim_id": 2, "claim": "Drug X does not lower blood pressure.", "label": "CONTRADICT", "gold": {0}},
        {"claim_id": 3, "claim": "Drug X raises blood pressure.", "label": "NEI", "gold": set()},
        {"claim_id": 4, "claim": "Mitochondria play a major role in apoptosis.", "label": "SUPPORT", "gold": {1}},
    ]
    got = counterfactuals(recs, ("SUPPORT", "CONTRADICT"))
    assert [(i, r["claim"], r["label"], r["gold"]) for i, r in got] == [
        (0, "Drug X raises blood pressure.", "CONTRADICT", {0}),
        (1, "Drug X does lower blood pressure.", "SUPPORT", {0}),
    ]
    assert [r["label"] for _, r in counterfactuals(recs, ("NEI",))] == ["NEI"]


def test_verdict_threshold_rules_and_wilson_bound():
    """The "supported" threshold rule of bench/train_support.py: the 95 % Wilson lower bound (Wilson 1927) of the
    precision above a threshold, the lowest threshold whose bound reaches the target, else the best point precision
    (or the best bound); never a threshold with fewer than ``min_n`` items above."""
    from bench.train_support import verdict_threshold, wilson_lower

    assert wilson_lower(0, 0) == 0.0
    assert wilson_lower(25, 28) == pytest.approx(0.7281, abs=1e-4)  # 25 of 28 vouches for 0.73 only
    assert wilson_lower(35, 35) > 0.9 > wilson_lower(34, 34)
    # 40 items: the top 14 right, then 80 % right, then the last 10 wrong
    p = np.linspace(1.0, 0.01, 40)
    hit = np.array([1] * 10 + [1, 1, 1, 1, 0] * 4 + [0] * 10)
    t, prec, lb = verdict_threshold(p, hit, 0.9, min_n=10, rule="point")
    assert (p >= t).sum() >= 10 and prec >= 0.9  # the point estimate reaches 0.90 on the top items
    t2, prec2, lb2 = verdict_threshold(p, hit, 0.9, min_n=10, rule="wilson-point")
    # no bound reaches 0.90 (14 of 14 vouch for 0.78): the best precision, at its lowest threshold (14 items)
    assert lb2 < 0.9 and prec2 == 1.0 and (p >= t2).sum() == 14
    t3, _prec3, lb3 = verdict_threshold(p, hit, 0.9, min_n=10, rule="wilson")
    assert lb3 >= lb2 and lb3 == pytest.approx(wilson_lower(int(hit[p >= t3].sum()), int((p >= t3).sum())))
    assert verdict_threshold(p[:5], hit[:5], 0.9, min_n=10) == (1.01, 0.0, 0.0)
    with pytest.raises(ValueError, match="unknown threshold rule"):
        verdict_threshold(p, hit, 0.9, rule="best")


def test_bootstrap_intervals_and_the_nested_record():
    """The bench's bootstrap over claims brackets the figures it resamples, and the committed nested
    cross-validation record (bench/train_support.py --nested) measured the shipped model: a new model without a
    new record fails here."""
    from bench.support import bootstrap, nested_record

    recs = [{"claim_id": i // 2, "label": "SUPPORT" if i % 3 else "NEI"} for i in range(60)]
    verdicts = [{"verdict": "supports" if i % 2 else "does not address", "p_support": 0.2 + 0.6 * (i % 2)}
                for i in range(60)]  # fmt: skip
    b = bootstrap(recs, verdicts, draws=200)
    shown = [r["label"] == "SUPPORT" for r, v in zip(recs, verdicts) if v["verdict"] == "supports"]
    lo, hi = b["supported_precision"]
    assert lo <= sum(shown) / len(shown) <= hi and 0 <= b["ece_support"][0] <= b["ece_support"][1] <= 1
    assert bootstrap(recs, verdicts, draws=200) == b  # fixed seed
    assert nested_record("0" * 64) is None
    rec = nested_record(model_sha256())
    assert rec is not None, "bench/data/support_nested.json is stale: run python bench/train_support.py --nested"
    assert rec["figures"]["claims"] == 807 and len(rec["outer_folds"]) == 6
