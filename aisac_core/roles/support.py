"""The two verdicts of an answer's evidence, named plainly: **anchors** (are the cited bytes still there?) and
**support** (does the cited sentence state the claim?).

Anchors (:func:`anchors_verdict`), from :meth:`aisac_core.rag.verify.AnchorVerifier.verify_full_anchor`: ``intact`` (status ``ok``, or
``file_changed`` with the passage still found), ``changed`` (``chunk_changed``: the passage is gone), ``missing``
(document or file gone). The answer's anchors verdict is the worst of its citations'.

Support, per rag citation (:func:`judge_citation`): the *claim* is the answer sentence(s) carrying the citation
marker ``[n]``; the *cited sentence* is the text of the anchor's ``quote_span`` inside the chunk (the chunk text is
read from the index, never from the caller), or, without a valid span, the chunk sentence that shares most numbers
and words with the claim. Without a model the judgement is, in this order:

1. the cited sentence is front matter, a running header / footer or a reference-list entry
   (:func:`aisac_core.roles.asked.is_boilerplate`, :func:`aisac_core.roles.sentences.is_reference_entry`):
   **not supported** (and the citation never counts toward the evidence gate);
2. a number of the claim (digits, unit letter or % kept; :func:`aisac_core.roles.asked.numbers`) is absent from the
   cited sentence, or present without the unit the claim gives it ("7.5 mM" against "pH 7.5";
   :func:`aisac_core.roles.asked.quantities`): **not supported**;
3. the question asks for a number / name (:func:`aisac_core.roles.asked.asked_type`) and the cited sentence has
   none: **not supported**;
4. with the store's embedder, the **learned support judge** (:mod:`aisac_core.roles.support_model`, trained on
   SciFact by ``bench/train_support.py``) reads the cited sentence with :data:`CONTEXT_SENTENCES` sentences on
   each side (:func:`citation_context`) and gives calibrated P(support) and P(contradict) of the claim:
   **contradicted** at or above its ``contradicts`` threshold; **not supported** when the passage does not bear on
   the question: the judge's calibrated rationale probability of the cited sentence with the question as its claim
   (``question_relevance``) below its ``relevant`` threshold (the probability that keeps 90 % of SciFact's gold
   rationale sentences out of fold; this is how the judge decides abstention: an answer none of whose citations
   passes is withheld as "the sources do not state it" by
   :func:`aisac_core.roles.researcher.abstain_unsupported`; beside a citation of the same answer that bears on the
   question, it is **partly** instead: :func:`off_question_beside_answer`); the claim is *stated* at or above its ``supported``
   threshold, or when the claim carries numbers (all found with their units, rule 2) and P(support) is at least
   ``UNCERTAIN_FLOOR`` (exact evidence the SciFact judge does not weigh: its claims seldom carry numbers); a stated
   claim is then checked against the question (rule 5); not stated: **partly** when uncertain (P(support) or
   P(contradict) >= ``UNCERTAIN_FLOOR``), else **not supported**. The record carries ``probability``,
   ``p_support``, ``p_contradict``, ``question_relevance`` and the model's sha256; ``by`` is
   ``support model``;
5. a stated claim is **partly** supported when a name-like token of the claim is absent from the cited sentence,
   or a key term of the question is absent from it and its document's title, or the question-sentence cosine is
   below :data:`QUESTION_SIM` (it states something, not the answer to this question); otherwise **supported**;
6. without an embedder, rule 4 is: the claim's content words mostly absent (coverage < 0.5) and the claim
   semantically far (cosine < :data:`CLAIM_SIM`, not computed without an embedder): **not supported**; then rule 5
   (``by``: ``rules``).

With a model (``backend``), the ``support`` prompt shows the question, the claim and the cited sentence and the
model answers ``{verdict: supported|partly|not supported|contradicted, reason}`` per citation; rule 1 still
applies first. A citation without a claim sentence, a literature citation, or an answer without rag citations is
**not judged**. The answer's support verdict: ``contradicted`` when a judged citation contradicts its claim,
``supported`` when every judged citation is, ``not supported`` when none is ``supported`` or ``partly``, else
``partly``; ``not judged`` when none was judged.

The similarity thresholds are calibrated on bench/data/answers_dev.json (MiniLM cosine of question and cited
sentence: answers stating the fact mostly above 0.45, unrelated sentences mostly below 0.3); they are round
figures set between the two, not fitted per question.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import anyio

from aisac_core.roles.asked import (
    asked_type,
    coverage,
    entities,
    has_type,
    is_boilerplate,
    key_terms,
    numbers,
    quantities,
    sentence_spans,
    text_stems,
)
from aisac_core.roles.sentences import cut_at_end, cut_at_start, is_reference_entry, join_cut, strip_markers
from aisac_core.roles.support_model import UNCERTAIN_FLOOR

if TYPE_CHECKING:
    from aisac_core.roles.backends import Backend
    from aisac_core.roles.env import ChunkText, Embed, RoleEnv
    from aisac_core.roles.shapes import Answer, Citation, CitationJudgement, CitationSupport, SupportReport

SUPPORT_VERDICTS = ("supported", "partly", "not supported", "contradicted", "not judged")
ANCHOR_VERDICTS = ("intact", "changed", "missing")
#: question - cited sentence cosine below which support is at most "partly"
QUESTION_SIM = 0.3
#: claim - cited sentence cosine below which a claim with few shared words is "not supported"
CLAIM_SIM = 0.5
#: sentences on each side of the cited one that the learned judge reads with it
CONTEXT_SENTENCES = 1
_MARK = re.compile(r"\[(\d+)\]")


def anchor_word(status: str | None) -> str:
    """``intact`` / ``changed`` / ``missing`` for a :meth:`~aisac_core.rag.verify.AnchorVerifier.verify_full_anchor` status."""
    return {"ok": "intact", "file_changed": "intact", "chunk_changed": "changed"}.get(str(status), "missing")


def anchors_verdict(statuses: list[str | None]) -> str:
    """The worst :func:`anchor_word` of ``statuses``; ``missing`` for an empty list (nothing to check)."""
    found = [anchor_word(s) for s in statuses]
    for w in ("missing", "changed"):
        if w in found:
            return w
    return "intact" if found else "missing"


def claims_by_citation(text: str) -> dict[int, list[str]]:
    """Citation number -> the answer sentences that carry its marker ``[n]`` (markers and list bullets removed)."""
    out: dict[int, list[str]] = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.lower().startswith("related literature"):
            continue
        for sent in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9])|(?<=\])\s+(?=[A-Z])", line):
            marks = {int(m) for m in _MARK.findall(sent)}
            claim = strip_markers(_MARK.sub("", sent)).lstrip("-• ").strip()
            for n in marks:
                if claim:
                    out.setdefault(n, []).append(claim)
    return out


def _spans(text: str) -> list[tuple[int, int]]:
    return sentence_spans(text) or ([(0, len(text))] if text.strip() else [])


def cited_sentence(chunk: str, span: object, claim: str) -> tuple[str, list[int]]:
    """The cited sentence of ``chunk`` and its span: ``span`` when it is a valid ``[start, end]`` inside ``chunk``,
    else the chunk sentence sharing most numbers, then words, with ``claim``."""
    if (
        isinstance(span, list | tuple)
        and len(span) == 2
        and all(isinstance(x, int) for x in span)
        and 0 <= span[0] < span[1] <= len(chunk)
    ):
        return " ".join(chunk[span[0] : span[1]].split()), [span[0], span[1]]
    nums, terms = numbers(claim), key_terms(claim)
    best: tuple[float, int, int] = (-1.0, 0, len(chunk))
    for a, b in _spans(chunk):
        s = chunk[a:b]
        score = len(nums & numbers(s)) + coverage(terms, s)
        if score > best[0]:
            best = (score, a, b)
    return " ".join(chunk[best[1] : best[2]].split()), [best[1], best[2]]


def _sims(embed: Embed | None, question: str, claim: str, cited: str) -> tuple[float | None, float | None]:
    """Cosines (question, cited) and (claim, cited): one embedding call of the three texts; None without ``embed``."""
    if embed is None:
        return None, None
    vq, vc, vs = embed([question, claim, cited])
    if not vq or not vc or not vs:
        return None, None
    return float(sum(x * y for x, y in zip(vq, vs))), float(sum(x * y for x, y in zip(vc, vs)))


def is_not_evidence(sentence: str) -> str | None:
    """Why ``sentence`` can never support a claim (front matter / running header, reference entry), or None."""
    if is_boilerplate(sentence):
        return "front matter or a running header/footer, not evidence"
    if is_reference_entry(sentence):
        return "a reference-list entry, not evidence"
    return None


def _question_reasons(question: str, claim: str, cited: str, qsim: float | None, title: str) -> list[str]:
    """Why the cited sentence does not answer ``question`` although it may state the claim (rule 5 of the module
    docstring): names of the claim absent from it, key terms of the question absent from it and its title, or
    question-sentence cosine below :data:`QUESTION_SIM`."""
    reasons = []
    cited_low = cited.lower()
    lost = sorted(e for e in entities(claim) - entities(cited) if e not in cited_low and e not in question.lower())
    if lost:
        reasons.append(f"names of the claim absent from the cited sentence: {', '.join(lost[:5])}")
    missing = sorted(key_terms(question) - text_stems(f"{cited} {title}"))
    if missing:
        reasons.append(f"key terms of the question absent from the cited sentence: {', '.join(missing)}")
    if qsim is not None and qsim < QUESTION_SIM:
        reasons.append(f"the cited sentence is far from the question (cosine {qsim:.2f} < {QUESTION_SIM})")
    return reasons


def _rules_rest(
    question: str, claim: str, cited: str, qsim: float | None, csim: float | None, title: str
) -> CitationJudgement:
    """Rule 6 of the module docstring (no embedder: the learned judge needs one), then rule 5."""
    claim_cov = coverage(key_terms(claim), cited)
    if claim_cov < 0.5 and (csim is None or csim < CLAIM_SIM):
        why = f"the cited sentence shares {claim_cov:.0%} of the claim's words and is not close in meaning"
        return {"verdict": "not supported", "reasons": [why], "question_similarity": qsim, "claim_similarity": csim}
    reasons = _question_reasons(question, claim, cited, qsim, title)
    verdict = "partly" if reasons else "supported"
    return {"verdict": verdict, "reasons": reasons, "question_similarity": qsim, "claim_similarity": csim}


def _learned(
    question: str, claim: str, window: list[str], at: int, embed: Embed, title: str
) -> CitationJudgement | None:
    """Rules 4 and 5 of the module docstring: the learned judge (:mod:`aisac_core.roles.support_model`) on the cited
    sentence ``window[at]`` and its neighbours, then the question's checks: ``{verdict, reasons, probability,
    p_support, p_contradict, question_relevance, off_question, rationale, question_similarity, claim_similarity,
    model_sha256}``, or None when ``embed`` gives no vectors."""
    from aisac_core.roles.support_model import judge_vectors, load_model

    vecs = embed([claim, question, *window])
    if len(vecs) != len(window) + 2 or any(not v for v in vecs):
        return None
    model = load_model()
    got = judge_vectors(claim, window, vecs[0], vecs[2:], model)
    asked = judge_vectors(question, window, vecs[1], vecs[2:], model)
    cited = window[at]
    qsim = float(sum(x * y for x, y in zip(vecs[1], vecs[2 + at])))
    csim = float(sum(x * y for x, y in zip(vecs[0], vecs[2 + at])))
    t = model.thresholds
    rec: CitationJudgement = {
        "probability": got["p_support"],
        "p_support": got["p_support"],
        "p_contradict": got["p_contradict"],
        "question_relevance": asked["sentences"][at]["p_rationale"],
        "rationale": got["rationale"],
        "question_similarity": round(qsim, 4),
        "claim_similarity": round(csim, 4),
        "model_sha256": got["model_sha256"],
    }
    if got["verdict"] == "contradicts":
        why = f"the cited passage contradicts the claim (P(contradict) {got['p_contradict']:.2f})"
        return {**rec, "verdict": "contradicted", "probability": got["p_contradict"], "reasons": [why]}
    # abstention is the same decision: a cited passage that does not bear on the question (the judge's calibrated
    # rationale probability with the question as its claim below its ``relevant`` threshold) does not support an
    # answer to it, whatever it states
    relevance = float(rec["question_relevance"])
    if relevance < t["relevant"]:
        why = (
            f"the cited passage does not bear on the question (P(rationale) {relevance:.2f} < {t['relevant']:.2f}, "
            "the judge's relevance threshold)"
        )
        return {**rec, "verdict": "not supported", "reasons": [why], "off_question": True}
    rec["off_question"] = False
    # every number of the claim is in the cited sentence with its unit (rule 2 passed): exact evidence that the
    # SciFact-trained judge does not weigh (its claims seldom carry numbers)
    exact = bool(numbers(claim)) and got["p_support"] >= UNCERTAIN_FLOOR
    if got["verdict"] == "supports" or exact:
        reasons = _question_reasons(question, claim, cited, qsim, title)
        return {**rec, "verdict": "partly" if reasons else "supported", "reasons": reasons}
    below = f"P(support) {got['p_support']:.2f} < {t['supported']:.2f}, the threshold chosen for high precision"
    if got["uncertain"]:
        return {**rec, "verdict": "partly", "reasons": [f"uncertain: {below}"]}
    return {**rec, "verdict": "not supported", "reasons": [f"the cited passage does not address the claim ({below})"]}


def judge_citation(
    question: str,
    claim: str,
    cited: str,
    embed: Embed | None = None,
    title: str = "",
    context: tuple[list[str], int] | None = None,
) -> CitationJudgement:
    """Support of ``claim`` by ``cited`` for ``question`` (rules of the module docstring): ``{verdict, reasons:
    [str], question_similarity, claim_similarity, by}`` plus, when the learned judge decided, ``probability,
    p_support, p_contradict, question_relevance, rationale, model_sha256``. ``embed``: texts -> unit vectors
    (None: the model-free rules 4-6 decide); ``title``: the cited document's title (counts for the question's key
    terms in those rules); ``context``: the passage around the cited sentence as ``(sentences, index of the cited
    one)`` (default: the cited sentence alone)."""
    reasons: list[str] = []
    bad = is_not_evidence(cited)
    if bad:
        return {
            "verdict": "not supported",
            "reasons": [bad],
            "question_similarity": None,
            "claim_similarity": None,
            "by": "rules",
        }
    out: CitationJudgement = {
        "verdict": "not supported",
        "reasons": reasons,
        "question_similarity": None,
        "claim_similarity": None,
        "by": "rules",
    }
    missing_nums = sorted(numbers(claim) - numbers(cited))
    if missing_nums:
        reasons.append(f"the cited sentence does not state {', '.join(missing_nums)}")
        return out
    lost_units = sorted(f"{n} {u}" for n, u in quantities(claim) - quantities(cited) if (n, u) not in quantities(cited))
    if lost_units:
        reasons.append(f"the cited sentence does not state {', '.join(lost_units)} (the number with its unit)")
        return out
    kind = asked_type(question)
    if kind in ("number", "name") and not has_type(cited, kind, question):
        reasons.append(f"the question asks for a {kind}; the cited sentence states none")
        return out
    if embed is not None:
        window, at = context if context and 0 <= context[1] < len(context[0]) else ([cited], 0)
        window = [" ".join(s.split()) for s in window]
        window[at] = " ".join(cited.split())
        got = _learned(question, " ".join(claim.split()), window, at, embed, title)
        if got is not None:
            return {**got, "by": "support model"}
    qsim, csim = _sims(embed, question, claim, cited)
    return {**_rules_rest(question, claim, cited, qsim, csim, title), "by": "rules"}


def citation_context(chunk: str, span: list[int], width: int = CONTEXT_SENTENCES) -> tuple[list[str], int]:
    """The sentences of ``chunk`` around the cited ``span`` (``width`` on each side, whitespace collapsed) and the
    index of the cited one among them: the passage the learned judge reads (SciFact's unit is the cited abstract;
    a chunk's neighbourhood keeps the cost per citation bounded)."""
    spans = _spans(chunk)
    if len(span) != 2 or not spans:
        return [], 0
    at = next((i for i, (a, b) in enumerate(spans) if a <= span[0] < b), None)
    if at is None:
        return [], 0
    lo, hi = max(0, at - width), min(len(spans), at + width + 1)
    return [" ".join(chunk[a:b].split()) for a, b in spans[lo:hi]], at - lo


async def _judge_in_thread(
    question: str, claim: str, cited: str, embed: Embed | None, title: str, context: tuple[list[str], int] | None = None
) -> CitationJudgement:
    """:func:`judge_citation` in a worker thread (it embeds the claim, the question and the passage: CPU-bound, and
    must not block the event loop); same result."""
    return await anyio.to_thread.run_sync(lambda: judge_citation(question, claim, cited, embed, title, context))


def answer_verdict(verdicts: list[str]) -> str:
    """The answer's support verdict from its citations' (module docstring)."""
    judged = [v for v in verdicts if v != "not judged"]
    if not judged:
        return "not judged"
    if "contradicted" in judged:
        return "contradicted"
    if all(v == "supported" for v in judged):
        return "supported"
    if any(v in ("supported", "partly") for v in judged):
        return "partly"
    return "not supported"


def off_question_beside_answer(records: list[CitationSupport]) -> None:
    """A citation judged ``not supported`` only because its passage does not bear on the question
    (``off_question``, rule 4) fails the answer only when no other citation of it does: beside a citation that
    bears on the question and is ``supported`` or ``partly``, it becomes ``partly`` (its reason kept), so the answer
    stands and is not re-planned for a side sentence. Changes ``records`` (the citation records of one answer) in
    place."""
    if not any(r.get("off_question") is False and r["verdict"] in ("supported", "partly") for r in records):
        return
    for r in records:
        if r.get("off_question") and r["verdict"] == "not supported":
            r["verdict"] = "partly"


def joined_across_chunks(cited: list[tuple[Citation, str, str | None, str, list[int]]]) -> dict[int, str]:
    """Cited sentences that are two parts of one sentence cut by a chunk boundary: two citations of the same claim
    and document, the first's span running to its chunk's end without a sentence end, the second's starting at its
    chunk's start inside a sentence (:func:`aisac_core.roles.sentences.cut_at_end` / ``cut_at_start``). Returns
    ``{index in cited: the whole sentence}`` for both, so that each is judged against the whole."""
    out: dict[int, str] = {}
    for i, (c1, claim1, chunk1, sent1, span1) in enumerate(cited):
        for j, (c2, claim2, chunk2, sent2, span2) in enumerate(cited):
            if i == j or not claim1 or claim1 != claim2 or not chunk1 or not chunk2 or len(span1) != 2:
                continue
            if len(span2) != 2 or c1["anchor"].get("doc_id") != c2["anchor"].get("doc_id"):
                continue
            if chunk1[span1[1] :].strip() or chunk2[: span2[0]].strip():
                continue
            if cut_at_end(sent1) and cut_at_start(sent2):
                out[i] = out[j] = join_cut(sent1, sent2)
    return out


async def judge_answer(
    env: RoleEnv,
    task: str,
    answer: Answer,
    backend: Backend | None,
    *,
    chunk_text: ChunkText,
    embed: Embed | None,
    run_id: str,
    parent_id: int | None,
) -> SupportReport:
    """Support of every rag citation of ``answer`` (``{text, citations}``) for question ``task``: ``{verdict, by:
    rules|model, citations: [{n, verdict, reasons, sentence, quote_span, evidence: bool, by?}], ms_per_citation}``.

    ``chunk_text``: chunk id -> the chunk's text in the index (None: unknown, the citation is not judged);
    it and the rules (their embedding call) run in a worker thread, never on the event loop;
    ``embed``: texts -> unit vectors or None. With ``backend`` the model judges each citation (``support`` prompt);
    when the model fails for a citation, the rules judge it (its ``by`` says ``rules``, a reason says why)."""
    from aisac_core.roles import RoleModelError
    from aisac_core.roles.backends import ask_json
    from aisac_core.roles.prompts import render
    from aisac_core.roles.schemas import load_schema

    claims = claims_by_citation(answer.get("text") or "")
    out: list[CitationSupport] = []
    t0 = time.perf_counter()
    n_judged = 0
    cited: list[tuple[Citation, str, str | None, str, list[int]]] = []
    for c in answer.get("citations") or []:
        if c.get("kind", "rag") != "rag" or not isinstance(c.get("anchor"), dict):
            continue
        n = c.get("n")
        # index reads and embedding run in a worker thread: the event loop keeps serving other calls meanwhile
        chunk = await anyio.to_thread.run_sync(chunk_text, c["anchor"].get("chunk_id") or c.get("chunk_id") or "")
        claim = " ".join(claims.get(int(n), [])) if isinstance(n, int) else ""
        sent, span = (
            cited_sentence(chunk, c["anchor"].get("quote_span"), claim or task) if chunk is not None else ("", [])
        )
        cited.append((c, claim, chunk, sent, span))
    whole = joined_across_chunks(cited)
    for i, (c, claim, chunk, sent, span) in enumerate(cited):
        n = c.get("n")
        rec: CitationSupport = {"n": n, "verdict": "not judged", "reasons": [], "sentence": None, "quote_span": None}
        if chunk is None:
            rec["reasons"] = ["the cited chunk is not in the index"]
        else:
            rec["sentence"], rec["quote_span"] = sent, span
            sent = whole.get(i, sent)  # a sentence cut by a chunk boundary is judged whole
            bad = is_not_evidence(sent)
            rec["evidence"] = bad is None
            if not claim:
                rec["reasons"] = ["no answer sentence carries this citation"]
            elif bad or backend is None:
                n_judged += 1
                ctx = citation_context(chunk, span) if i not in whole else ([], 0)
                judged = await _judge_in_thread(
                    task, claim, sent, embed, str(c.get("title") or ""), ctx if ctx[0] else None
                )
                rec = {**rec, **judged}
            else:
                n_judged += 1
                text, version = render(
                    "support",
                    {"task": task, "n": n, "claim": claim, "cited": sent, "schema": load_schema("support")},
                    env.settings.prompt_dir,
                )
                try:
                    got = await ask_json(
                        env,
                        backend,
                        role="support",
                        schema="support",
                        prompt=text,
                        prompt_version=version,
                        run_id=run_id,
                        parent_id=parent_id,
                    )
                except RoleModelError as exc:  # the support model / rules judge instead, and say so
                    ctx = citation_context(chunk, span) if i not in whole else ([], 0)
                    judged = await _judge_in_thread(
                        task, claim, sent, embed, str(c.get("title") or ""), ctx if ctx[0] else None
                    )
                    rec = {**rec, **judged}
                    rec["reasons"] = [*rec["reasons"], f"model failed ({str(exc)[:200]}): judged without it"]
                else:
                    reply = got["output"]  # valid against the support schema: verdict and reason are strings
                    rec["verdict"], rec["reasons"], rec["by"] = str(reply["verdict"]), [str(reply["reason"])], "model"
        out.append(rec)
    off_question_beside_answer(out)
    ms = (time.perf_counter() - t0) * 1000
    return {
        "verdict": answer_verdict([r["verdict"] for r in out]),
        "by": "model"
        if backend is not None
        else ("support model" if any(r.get("by") == "support model" for r in out) else "rules"),
        "citations": out,
        "ms_per_citation": round(ms / n_judged, 2) if n_judged else None,
    }
