"""Issue 28: the two verdicts of an answer's evidence (anchors, support), the rules of the model-free support judge,
a wrong answer with two well-formed citations marked "not supported" (model-free and with a stub model that judges
support), and the quote span a citation carries (re-checked by rag_verify_anchor).

The store holds the project's two Markdown notes (heat transfer, enzyme kinetics; tests/fixtures_gen.py), indexed
for real; the stub model is a real local HTTP endpoint (tests/roles_support.py ChatStub).
"""

from __future__ import annotations

import json

import anyio
import pytest
from roles_support import ChatStub, make_roles_core, release

from aisac_core.roles.asked import asked_type, has_number, numbers
from aisac_core.roles.support import (
    anchors_verdict,
    answer_verdict,
    claims_by_citation,
    judge_citation,
    off_question_beside_answer,
)


@pytest.fixture(scope="module")
def rcore(tmp_path_factory, models_dir, shared_embedder):
    c = make_roles_core(tmp_path_factory, models_dir, shared_embedder)
    yield c
    release(c)


# ---------------------------------------------------------------- rules (no store)
def test_asked_types_and_numbers():
    assert asked_type("How many queries does AutoScholarQuery include?") == "number"
    assert asked_type("What mass is assumed for the ultra light scalar field dark matter?") == "number"
    assert asked_type("What coalescence probability was obtained for photons?") == "number"
    assert asked_type("Which network simulator and version were used?") == "name"
    assert asked_type("Which tool is used to process each PDF when building S2ORC?") == "name"
    assert asked_type("Is CiteSee implemented as a Chrome extension?") == "yesno"
    assert asked_type("What is S2ORC?") == "definition"
    assert asked_type("What average standard deviation did the FINE annotations have?") == "number"
    assert asked_type("What does the average user prefer?") != "number"  # "average" asked for only after what
    assert numbers("a corpus of 81.1M papers and 9,280 summaries, 16 % of pairs [12] (Section 3)") == {
        "81.1m",
        "9280",
        "16%",
    }
    assert has_number("The simulation is based on ns-2 version 2.33.")
    assert not has_number("The mass of this Scalar Field is assumed ultra light [1].")
    assert not has_number("As shown in Table 2 and Section 4.1, the results hold [3, 4].")


def test_name_questions_by_a_general_rule_not_a_noun_list():
    """The noun asked for is read off the question (the phrase after which / what), so a noun no list holds works;
    "what" + a verb is not a name question."""
    from aisac_core.roles.asked import asked_head

    assert asked_type("Which spectrometer recorded the Raman spectra?") == "name"  # a noun in no list
    assert asked_head("Which spectrometer recorded the Raman spectra?") == "spectrometer"
    assert asked_head("On which two long-form summarization datasets was LongEval evaluated?") == "datasets"
    assert asked_head("What kind of catalyst was used?") == "catalyst"
    assert asked_head("What solvent was used for the extraction?") == "solvent"
    assert asked_head("What enzyme cleaves the bond?") == "enzyme"
    assert asked_type("What causes the drift in the sensor?") == "other"  # "causes the": a verb
    assert asked_type("What happens when the cell dries?") == "other"
    assert asked_type("Which is faster, A or B?") == "name" and asked_type("Who wrote the paper?") == "name"
    assert asked_type("What is S2ORC?") == "definition"


def test_how_many_counts_the_asked_noun():
    from aisac_core.roles.asked import counted_noun, counts_what, mentions_noun

    assert counted_noun("How many of the surveyed summarization papers report agreement?") == "paper"
    assert counted_noun("How many GPUs were used?") == "gpu" and mentions_noun("on a single GPU", "gpu")
    c = counted_noun("How many participants took part in the lab study?")
    assert counts_what("We recruited 12 participants for the study.", c) == "asked"
    assert counts_what("interviews with five researcher participants", counted_noun("How many researchers?"))
    assert counts_what("It is more effective than three baselines.", c) == "other"
    assert counts_what("The study took 1 hour and each participant was paid.", c) is None
    # "(N=10)" stands alone: the sentence does not only count other things
    assert counts_what("A lab study (N=10) shows it beats three baselines.", c) is None


def test_sentence_rules_keep_counts_and_prose_after_code():
    from aisac_core.roles.researcher import prose_after_code, subject_docs
    from aisac_core.roles.sentences import reject_reason

    assert reject_reason("13 papers mention that expert annotators are necessary for human evaluation here.") is None
    assert reject_reason("2 We exclude five papers from the survey because they were not relevant.") == "footnote"
    text = "12 >>> doc.images 13 [Image(np.array(...)), ...] In this example, papermage runs PDF2TextParser (using pdfplumber) to extract the text."
    a, b, sent = prose_after_code(text, 0, len(text))
    assert sent.startswith("In this example") and text[a:b] == sent
    items = [
        {"kind": "rag", "doc_id": "otsl", "title": "Table tokenization", "text": "OTSL and TableFormer ..."},
        {"kind": "rag", "doc_id": "other", "title": "Summaries", "text": "trained on two GPUs"},
    ]
    assert subject_docs("How many GPUs were used to train the OTSL TableFormer models?", items) == {"otsl"}


def test_judge_rules():
    q = "What is the size of the S2ORC corpus in papers?"
    right = "We introduce S2ORC, a large corpus of 81.1M English-language academic papers."
    assert judge_citation(q, right, right)["verdict"] == "supported"
    # every key term of the question must be in the cited sentence (or its title) for "supported"
    assert judge_citation("How many papers does S2ORC contain?", right, right)["verdict"] == "partly"
    wrong = judge_citation(q, "S2ORC contains 12M papers.", right)
    assert wrong["verdict"] == "not supported" and "12m" in wrong["reasons"][0]
    vague = "The mass of this Scalar Field is assumed ultra light."
    got = judge_citation("What mass is assumed for the scalar field dark matter?", vague, vague)
    assert got["verdict"] == "not supported" and "asks for a number" in got["reasons"][0]
    header = "Journal of Cosmology and Astroparticle Physics An IOP and SISSA journal"
    assert judge_citation("What is dark matter?", header, header)["verdict"] == "not supported"
    ref = "Kyle Lo, Lucy Lu Wang, and Daniel Weld. 2020. S2ORC: The Semantic Scholar Open Research Corpus. In Proceedings of ACL."
    assert judge_citation(q, ref, ref)["verdict"] == "not supported"
    assert answer_verdict(["supported", "not judged"]) == "supported"
    assert answer_verdict(["supported", "not supported"]) == "partly"
    assert answer_verdict(["not supported"]) == "not supported" and answer_verdict([]) == "not judged"
    assert anchors_verdict(["ok", "file_changed"]) == "intact" and anchors_verdict(["ok", "chunk_changed"]) == "changed"
    assert claims_by_citation("- Km is 0.42 mM [1][2]\n- kcat is 38 per second. Other text [3]") == {
        1: ["Km is 0.42 mM"],
        2: ["Km is 0.42 mM"],
        3: ["Other text"],
    }


# ---------------------------------------------------------------- roles_evaluate on a real store
def _two_citations(core):
    """Two rag_search hits (full anchors) about the lipase's Km, as a host would cite them."""

    hits = core.rag.search("Michaelis-Menten Km of the lipase", 3).as_dict()["hits"]
    return [h for h in hits if "0.42" in (h["text"] or "")][:1] + [h for h in hits if "0.42" not in (h["text"] or "")][
        :1
    ]


def _evaluate(core, answer, cites, llm="none"):
    return anyio.run(
        lambda: core.roles.evaluate(
            "What is the Km of the lipase?", answer, run_id="t-support", citations=cites, mode="lite", llm=llm
        )
    )


def test_wrong_answer_with_two_well_formed_citations_is_not_supported(rcore):
    cites = _two_citations(rcore)
    assert len(cites) == 2
    bad = _evaluate(rcore, "The Km of the lipase is 7.5 mM [1]. It was measured at 405 nm [2].", cites)
    assert bad["anchors"] == "intact"  # the cited bytes are there ...
    assert bad["support"]["verdict"] == "not supported", bad["support"]  # ... but they do not say that
    assert not bad["passed"]
    assert any(c["aspect"] == "support" and c["severity"] >= 0.9 for c in bad["critiques"])
    good = _evaluate(rcore, "The lipase has Km = 0.42 mM [1].", cites[:1])
    assert good["support"]["verdict"] == "supported", good["support"]
    assert good["support"]["citations"][0]["sentence"].startswith("The hydrolysis of p-nitrophenyl butyrate")
    assert good["passed"] and good["anchors"] == "intact"


def test_stub_model_judges_support_per_citation(rcore):
    cites = _two_citations(rcore)
    s = rcore.settings.roles
    saved = (s.llm, s.llm_base_url)
    no = json.dumps({"verdict": "not supported", "reason": "the sentence gives Km = 0.42 mM, not 7.5 mM"})
    crit = json.dumps({"critiques": []})
    with ChatStub({"support": [no, no], "evaluator": [crit]}) as stub:
        s.llm, s.llm_base_url = "openai", stub.url
        try:
            res = _evaluate(
                rcore, "The Km of the lipase is 7.5 mM [1]. It was measured at 405 nm [2].", cites, "openai"
            )
        finally:
            s.llm, s.llm_base_url = saved
    asked = [r for r in stub.requests if r["role"] == "support"]
    assert len(asked) == 2
    prompt = asked[0]["body"]["messages"][-1]["content"]
    assert "7.5 mM" in prompt and "Cited sentence:" in prompt  # the cited sentence is in front of the model
    assert res["support"]["by"] == "model" and res["support"]["verdict"] == "not supported"
    assert not res["passed"]


def test_extractive_citation_carries_its_span_and_verify_rechecks_it(rcore):
    from aisac_core.roles.researcher import collect_evidence, extractive_answer

    items = collect_evidence({"s1": rcore.rag.search("Km of the lipase", 4).as_dict()})
    ans = extractive_answer("What is the Km of the lipase?", items, embed=rcore.roles.embed_texts)
    c = ans["citations"][0]
    a, b = c["anchor"]["quote_span"]
    chunk = next(i["text"] for i in items if i.get("chunk_id") == c["chunk_id"])
    assert "0.42 mM" in chunk[a:b] and c["quote"] == " ".join(chunk[a:b].split())
    assert 0 <= a < b <= len(chunk)
    v = rcore.rag.verify_full_anchor(c["anchor"])
    assert v["status"] == "ok" and v["quote"] == c["quote"]
    outside = {**c["anchor"], "quote_span": [a, len(chunk) + 50]}
    v2 = rcore.rag.verify_full_anchor(outside)
    assert v2["quote"] is None and "outside the chunk" in v2["detail"]
    assert (
        "The sources do not state it"
        in extractive_answer(
            "What is the boiling point of liquid nitrogen in kelvin?", items, embed=rcore.roles.embed_texts
        )["text"]
    )


# ---------------------------------------------------------------- the highlighted span on the page image
PARA = [
    "Catalyst pellets were loaded into a fixed bed reactor and heated under nitrogen before each run.",
    "The feed was switched to methanol once the bed reached its set point and held for the whole test.",
    "After ten cycles the regenerated catalyst kept 87 percent of its initial activity, measured as the",
    "conversion of methanol at the standard space velocity. Coke was burnt off in air between cycles",
    "and the off-gas was analysed by an infrared detector to close the carbon balance of every run.",
]


def _para_pdf(path):
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Helvetica", 11)
    for i, line in enumerate(PARA):
        c.drawString(72, A4[1] - 100 - 14 * i, line)
    c.showPage()
    c.save()
    return path


def test_page_image_highlights_exactly_the_quoted_span(tmp_path, models_dir, shared_embedder):
    """The citation's span (not the chunk's first characters) is what is drawn; the
    highlighted boxes cover the span's words and at most one line without them."""
    import pypdfium2 as pdfium
    from conftest import make_settings

    from aisac_core.context import AppContext
    from aisac_core.roles.researcher import collect_evidence, extractive_answer
    from aisac_core.trace.pageimage import evidence_page

    pdf = _para_pdf(tmp_path / "durability.pdf")
    core = AppContext(make_settings(tmp_path / "store", models_dir, warm=False), embedder=shared_embedder)
    try:
        core.rag.indexer.run([pdf])
        items = collect_evidence(
            {"s": core.rag.search("activity of the regenerated catalyst after cycles", 3).as_dict()}
        )
        ans = extractive_answer(
            "What share of its initial activity did the regenerated catalyst keep after ten cycles?",
            items,
            embed=core.roles.embed_texts,
        )
    finally:
        core.close()
    c = ans["citations"][0]
    quote = c["quote"]
    assert quote.startswith("After ten cycles") and quote.endswith("space velocity."), quote
    img = evidence_page(pdf, 1, quote, cache_dir=tmp_path / "cache")
    assert img is not None and img.found and img.rects
    doc = pdfium.PdfDocument(str(pdf))
    page = doc[0]
    tp = page.get_textpage()
    w_pt, h_pt = page.get_size()
    scale = img.width / w_pt
    words = {w.strip(".,").lower() for w in quote.split()}
    covered: set[str] = set()
    lines_without_span = 0
    for x0, y0, x1, y1 in img.rects:
        text = tp.get_text_bounded(x0 / scale, h_pt - y1 / scale, x1 / scale, h_pt - y0 / scale)
        got = {w.strip(".,").lower() for w in text.split()}
        covered |= got & words
        lines_without_span += not (got & words)
        # a box never reaches the lines above or below the span
        assert not ({"nitrogen", "detector", "balance"} & got), text
    assert covered == words, words - covered
    assert lines_without_span <= 1 and len(img.rects) <= 3, img.rects
    doc.close()


def test_support_judging_does_not_block_the_event_loop():
    """The rules' embedding call runs in a worker thread: a ticker on the same event loop keeps ticking while a
    slow embedder judges a citation, and the verdict is what the synchronous rules give."""
    import time

    from aisac_core.roles.support import judge_answer

    chunk = "The lipase has a Michaelis constant Km of 0.42 mM at pH 7.5 and 30 degrees."
    answer = {
        "text": "- The Km of the lipase is 0.42 mM [1]",
        "citations": [{"n": 1, "kind": "rag", "anchor": {"chunk_id": "c1", "quote_span": [0, len(chunk)]}}],
    }

    def slow_embed(texts: list[str]) -> list[list[float]]:
        time.sleep(0.4)  # CPU-bound work in the real embedder
        return [[1.0, 0.0] for _ in texts]

    ticks = []

    async def main() -> dict:
        async def ticker() -> None:
            for _ in range(8):
                ticks.append(time.perf_counter())
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            got = await judge_answer(
                None,  # type: ignore[arg-type]  (no model: the environment is not used)
                "What is the Km of the lipase?",
                answer,
                None,
                chunk_text=lambda _cid: chunk,
                embed=slow_embed,
                run_id="r",
                parent_id=None,
            )
        return got

    got = anyio.run(main)
    assert len(ticks) == 8 and ticks[-1] - ticks[0] < 0.6  # the loop was free while the embedder slept
    want = judge_citation("What is the Km of the lipase?", "The Km of the lipase is 0.42 mM", chunk, slow_embed)
    assert got["citations"][0]["verdict"] == want["verdict"] == "supported"


def test_a_sentence_cut_by_a_chunk_boundary_is_judged_whole():
    """Two citations of one claim whose spans are the two parts of a sentence cut by a chunk boundary (the first
    running to its chunk's end without a sentence end, the second starting its chunk inside a sentence) are each
    judged against the whole sentence; the same parts of two different documents are not joined."""
    from aisac_core.roles.support import judge_answer

    first = "We filtered the corpus with heuristics. The resulting pretraining cor-"
    second = "pus contains 16.4B tokens, nearly five times larger than before. The vocabulary is new."
    chunks = {"c1": first, "c2": second}
    claim = "The resulting pretraining corpus contains 16.4B tokens, nearly five times larger than before."
    q = "How many tokens does the resulting pretraining corpus contain?"

    def judge(doc2: str) -> list[str]:
        answer = {
            "text": f"- {claim} [1][2]",
            "citations": [
                {"n": 1, "kind": "rag", "anchor": {"chunk_id": "c1", "doc_id": "d", "quote_span": [40, len(first)]}},
                {"n": 2, "kind": "rag", "anchor": {"chunk_id": "c2", "doc_id": doc2, "quote_span": [0, 65]}},
            ],
        }
        got = anyio.run(
            lambda: judge_answer(
                None,  # type: ignore[arg-type]  (no model: the environment is not used)
                q,
                answer,
                None,
                chunk_text=chunks.get,
                embed=None,
                run_id="r",
                parent_id=None,
            )
        )
        assert got["citations"][0]["sentence"] == "The resulting pretraining cor-"  # each keeps its own part
        return [c["verdict"] for c in got["citations"]]

    assert judge("d") == ["supported", "supported"]
    assert judge("other")[0] == "not supported"  # "16.4B" is not in the first part alone


def test_adjacent_chunk_reads_the_neighbour_in_the_same_document_version(rcore):
    """``adjacent_chunk`` (what completes a sentence cut by a chunk boundary) gives chunk index ± 1 of the same
    document version from the real index, None before the first and after the last chunk and for an unknown id."""

    hits = rcore.rag.search("wall heat transfer coefficient Nusselt", 10).as_dict()["hits"]
    heat = sorted(
        (rcore.rag.get_chunk(h["chunk_id"]) for h in hits if h["anchor"]["path"].endswith("heat_transfer.md")),
        key=lambda h: h["chunk_index"],
    )
    assert len(heat) >= 2, [h["chunk_index"] for h in heat]
    first, second = heat[0], heat[1]
    assert first["chunk_index"] == 0 and second["chunk_index"] == 1
    nxt = rcore.rag.adjacent_chunk(first["chunk_id"], 1)
    assert nxt is not None and nxt["chunk_id"] == second["chunk_id"] and nxt["text"] == second["text"]
    prev = rcore.rag.adjacent_chunk(second["chunk_id"], -1)
    assert prev is not None and prev["chunk_id"] == first["chunk_id"]
    assert rcore.rag.adjacent_chunk(first["chunk_id"], -1) is None
    count = rcore.rag.overview(first["anchor"]["doc_id"])["chunk_count"]
    last = rcore.rag.adjacent_chunk(first["chunk_id"], count - 1)
    assert last is not None and last["chunk_index"] == count - 1
    assert rcore.rag.adjacent_chunk(last["chunk_id"], 1) is None
    assert rcore.rag.adjacent_chunk("00000000-0000-0000-0000-000000000000", 1) is None
    assert rcore.roles.corpus.adjacent_chunk(first["chunk_id"], 1)["chunk_id"] == second["chunk_id"]  # the roles' view


def test_an_answer_no_cited_passage_supports_is_not_an_answer():
    """roles_run / aisac ask return "the sources do not state it" for an answer whose support verdict is not
    supported or contradicted, with the cited sentences as the closest passages and the written text withheld;
    a partly supported answer is returned as written."""
    from aisac_core.roles.researcher import NOT_STATED, abstain_unsupported

    answer = {"text": "- The Km of the lipase is 7.5 mM [1]", "citations": [{"n": 1, "kind": "rag"}], "by": "model"}
    cites = [{"n": 1, "verdict": "not supported", "reasons": ["the cited sentence does not state 7.5 mM"],
              "sentence": "The lipase has Km = 0.42 mM."}]  # fmt: skip
    got = abstain_unsupported(answer, {"support": {"verdict": "not supported", "citations": cites}})
    assert got["text"].startswith(NOT_STATED) and got["withheld"] == answer["text"] and got["stated"] is False
    assert got["closest"] == [{"n": 1, "sentence": "The lipase has Km = 0.42 mM.", "verdict": "not supported",
                               "reasons": ["the cited sentence does not state 7.5 mM"]}]  # fmt: skip
    against = abstain_unsupported(answer, {"support": {"verdict": "contradicted", "citations": cites}})
    assert "contradicts" in against["text"]
    for verdict in ("partly", "supported", "not judged"):
        assert abstain_unsupported(answer, {"support": {"verdict": verdict, "citations": cites}}) is answer


def test_a_passage_that_does_not_bear_on_the_question_supports_no_answer(shared_embedder):
    """Abstention is the support judge's decision: a cited sentence that states the claim (an extractive answer
    quotes it) but is no rationale for the question (the judge's calibrated rationale probability with the question
    as its claim below the model's rationale threshold) is "not supported", so the answer is withheld as "the
    sources do not state it"; the same sentence for a question it answers is judged on."""
    from aisac_core.roles.researcher import NOT_STATED, abstain_unsupported
    from aisac_core.roles.support_model import load_model

    embed = shared_embedder.embed_documents
    window = [
        "The lipase was purified from Candida rugosa by ammonium sulfate precipitation.",
        "The purified lipase has a Km of 0.42 mM for p-nitrophenyl butyrate.",
        "Activity was highest at 37 degrees and fell quickly above 50 degrees.",
    ]
    claim = window[1]
    t = load_model().thresholds["relevant"]
    off = judge_citation(
        "What is the boiling point of liquid nitrogen in kelvin?", claim, claim, embed, "", (window, 1)
    )
    assert off["by"] == "support model" and off["question_relevance"] < t, off
    assert off["verdict"] == "not supported" and "does not bear on the question" in off["reasons"][0]
    on = judge_citation("What is the Km of the purified lipase?", claim, claim, embed, "", (window, 1))
    assert on["question_relevance"] >= t and on["verdict"] in ("supported", "partly"), on
    answer = {"text": f"- {claim} [1]", "citations": [{"n": 1, "kind": "rag"}], "by": "extractive"}
    cites = [{"n": 1, "sentence": claim, **off}]
    got = abstain_unsupported(answer, {"support": {"verdict": answer_verdict([off["verdict"]]), "citations": cites}})
    assert got["text"].startswith(NOT_STATED) and got["closest"][0]["sentence"] == claim
    # beside a citation that bears on the question, the off-question one is "partly" and the answer stands
    records = [{"n": 1, **on}, {"n": 2, **off}]
    off_question_beside_answer(records)
    assert records[1]["verdict"] == "partly" and "does not bear on the question" in records[1]["reasons"][0]
    assert answer_verdict([r["verdict"] for r in records]) in ("supported", "partly")
    alone = [{"n": 2, **off}]
    off_question_beside_answer(alone)
    assert alone[0]["verdict"] == "not supported"
