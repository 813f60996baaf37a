"""The no-model (extractive) answer and the no-model evaluator wording.

Unit tests of the sentence rules (aisac_core/roles/sentences.py) and of :func:`extractive_answer` on made-up
evidence; then, on the papermage PDFs of the shared test data, the questions of tests/fixtures/paper_questions.json
(written by reading the papers) answered the way ``aisac ask`` answers them without a model: a definition question
must quote the paper's defining sentence, a quantity question the number, and no answer may quote a table dump,
a reference-list entry or a citation marker. The store is indexed once per module; two questions run as a real
``aisac ask`` subprocess (``--json`` and the human output), the others in-process through the same function.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aisac_core.roles.evaluator import NOT_JUDGED, verdict
from aisac_core.roles.researcher import extractive_answer
from aisac_core.roles.sentences import (
    has_quantity,
    is_definition,
    is_reference_entry,
    is_table_dump,
    near_duplicate,
    question_kind,
    question_subject,
    reject_reason,
    strip_markers,
)

FIXTURE = Path(__file__).parent / "fixtures" / "paper_questions.json"
#: a one-page, table-heavy excerpt indexed next to the papers (table dumps must not be quoted from it)
DISTRACTOR = "1903.10676.pdf"

# ---------------------------------------------------------------- checks of a quoted answer (independent regexes)
MARKER = re.compile(r"\[\d+(?:,\s*\d+)*\]")
SUPERSCRIPT = re.compile(r"[\u00b9\u00b2\u00b3\u2070-\u2079]")
TABLE_CELLS = re.compile(r"(?:\S+ \| ){2,}")
NUMERIC_RUN = re.compile(r"(?<!\S)(?:[-+]?\d[\d.,]*%?\s+){2}[-+]?\d[\d.,]*%?(?!\S)")
REFERENCE = re.compile(r"\.\s(?:19|20)\d\d[a-z]?\.\s|\bIn Proceedings of\b|\barXiv preprint\b")


def norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def quoted(text: str) -> list[str]:
    """The quoted sentences of an extractive answer, without their trailing citation numbers."""
    body = text.split("Related literature:")[0]
    out = []
    for line in body.splitlines():
        if line.startswith("- "):
            assert re.search(r"(\[\d+\])+$", line), f"no citation after the sentence: {line!r}"
            out.append(re.sub(r"\s*(\[\d+\])+$", "", line[2:]))
    return out


def answer_problems(text: str) -> list[str]:
    """Table dumps, reference entries, markers or superscripts in the quoted sentences of ``text``."""
    bad = []
    for s in quoted(text):
        for name, rx in (
            ("marker", MARKER),
            ("superscript", SUPERSCRIPT),
            ("table cells", TABLE_CELLS),
            ("numeric run", NUMERIC_RUN),
            ("reference entry", REFERENCE),
        ):
            if rx.search(s):
                bad.append(f"{name}: {s[:160]}")
    return bad


# ---------------------------------------------------------------- unit tests of the sentence rules
def test_table_dumps_are_recognised():
    assert is_table_dump("BC5CDR | 88.85 | 90.01 | JNLPBA | 77.59")
    assert is_table_dump("NCBI-disease (Dogan et al., 2014) 89.36 84.06 86.88 86.39 88.57")
    assert is_table_dump("Average 73.58 77.16 76.01 79.27")
    assert not is_table_dump(
        "We observe that SCIBERT outperforms BERT-Base on computer science tasks (+3.55 F1 with "
        "finetuning and +1.13 F1 without)."
    )
    assert not is_table_dump("switching to a finer granularity reduces variance (e.g., std-dev from 18.5 to 6.8).")
    assert reject_reason("yes | S2ORC (full) multi yes | PubMed | bio, med no | ACL Anthology comp ling") == "table"


def test_reference_entries_are_recognised():
    assert is_reference_entry(
        "[20] Graham Dove and Anne-Laure Fayard. 2020. Monsters, Metaphors, and Machine "
        "Learning. Proceedings of the 2020 CHI Conference on Human Factors in Computing"
    )
    assert is_reference_entry(
        "Kyle Lo, Lucy Lu Wang, Mark Neumann, Rodney Kinney, and Daniel Weld. 2020. S2ORC: The "
        "Semantic Scholar Open Research Corpus. In Proceedings of ACL, pages 4969-4983."
    )
    assert is_reference_entry(
        "Beltagy et al. 2019. SciBERT: A pretrained language model for scientific text. In Proceedings of EMNLP."
    )
    # body text with author-year citations is not a reference entry
    assert not is_reference_entry(
        "Citation graphs like the Microsoft Academic Graph (MAG) (Shen et al., 2018) have "
        "had widespread application in bibliometrics."
    )
    assert not is_reference_entry("The results were published in the Proceedings of the conference last year.")


def test_markers_are_stripped_and_marker_only_sentences_rejected():
    assert (
        strip_markers("models leverage the latent knowledge in pretrained LMs [10, 24, 78].")
        == "models leverage the latent knowledge in pretrained LMs."
    )
    assert strip_markers("as shown before [3-5] and later [12].") == "as shown before and later."
    assert (
        strip_markers("We introduce S2ORC, 1 a large corpus of 81.1M papers.")
        == "We introduce S2ORC, a large corpus of 81.1M papers."
    )
    assert (
        strip_markers("AI-assisted writing.1 The models¹² are large†.") == "AI-assisted writing. The models are large."
    )
    assert strip_markers("We describe the construction of S2ORC (§2).") == "We describe the construction of S2ORC."
    # author-year citations and numbers stay
    s = "Citation graphs (Tang et al., 2008) cover 81.1M papers and 73% of them [4]."
    assert strip_markers(s) == "Citation graphs (Tang et al., 2008) cover 81.1M papers and 73% of them."
    assert reject_reason("See [12] [13], [14] and also [15] [16] for [17]; [18] [19].") == "markers"
    assert reject_reason("[12] [13], [14] see [15] [16] and [17]; [18] [19].") is not None
    assert reject_reason("Figure 1: Inline citations and references to figures and tables are annotated.") == "caption"
    assert (
        reject_reason('7 pronounced "stork" 8 The papers included in S2ORC are a curated subset of papers.')
        == "footnote"
    )
    assert reject_reason("called Recipes: 1 from papermage import CoreRecipe 2 recipe = CoreRecipe 3 doc = x") == "code"
    assert reject_reason("We introduce S2ORC, a large corpus of 81.1M English-language academic papers.") is None


def test_near_duplicates():
    a = "We introduce papermage, an open-source Python toolkit for processing scientific documents."
    b = "In this work, we've introduced papermage, an open-source Python toolkit for processing scientific documents."
    assert near_duplicate(a, a.upper()) and near_duplicate(a, a.replace("documents.", "documents [3]."))
    assert near_duplicate(
        a,
        "We introduce papermage, an open-source Python toolkit for analyzing and processing "
        "visually-rich, structured scientific documents.",
    )
    assert not near_duplicate(a, "papermage offers clean and intuitive abstractions for representing documents.")
    assert not near_duplicate(
        a,
        b.replace("papermage", "PaSa")
        .replace("Python toolkit", "search agent")
        .replace("processing scientific documents", "finding papers"),
    )


def test_question_kinds_and_definitions():
    assert question_kind("How many papers does S2ORC contain?") == "quantity"
    assert question_kind("What percentage of papers do not perform human evaluation?") == "quantity"
    assert question_kind("What does PaSa do?") == "definition"
    assert question_kind("Which datasets does the S2ORC paper describe?") == "other"
    assert question_subject("What does PaSa do?") == "PaSa"
    assert question_subject("What is Paper Plain?") == "Paper Plain"
    assert question_subject("What does the Beyond Summarization position paper argue?") == "Beyond Summarization"
    pasa = (
        "We introduce PaSa, an advanced Paper Search agent powered by large language models. PaSa can "
        "autonomously make a series of decisions."
    )
    assert is_definition(pasa, "PaSa", own_document=False)
    assert is_definition("PaSa is an advanced paper search agent powered by large language models.", "PaSa", False)
    assert is_definition("In this paper, we present a new agent for academic search.", "PaSa", own_document=True)
    assert not is_definition("In this paper, we present a new agent for academic search.", "PaSa", own_document=False)
    assert not is_definition("PaSa outperforms Google Scholar by 37.78% in recall@20.", "PaSa", True)
    assert has_quantity("a collection of 9,280 expert-authored summaries") and has_quantity("81.1M papers")
    assert not has_quantity("published in 2020 by two authors") and not has_quantity("see Section 3 for details")


def _item(
    cid: str,
    text: str,
    *,
    doc: str = "d1",
    score: float = 0.8,
    label: str = "other",
    section: str = "1 Introduction",
    title: str = "PaSa: An LLM Agent for Comprehensive Academic Paper Search",
):
    anchor = {
        "chunk_id": cid,
        "doc_id": doc,
        "path": f"/p/{doc}.pdf",
        "page": 1,
        "section": section,
        "sha256": "0" * 64,
        "chunk_sha256": "1" * 64,
        "char_span": [0, len(text)],
        "score": score,
    }
    return {
        "kind": "rag",
        "chunk_id": cid,
        "doc_id": doc,
        "title": title,
        "path": f"/p/{doc}.pdf",
        "page": 1,
        "section": section,
        "score": score,
        "text": text,
        "anchor": anchor,
        "step": "search",
        "label": label,
    }


def test_extractive_answer_prefers_the_defining_sentence_and_filters_the_rest():
    items = [
        _item(
            "c1",
            "PaSa outperforms Google Scholar by 37.78% in recall@20 and 39.90% in recall@50 [12]. PaSa "
            "also beats PaperFinder on the RealScholarQuery benchmark in all metrics.",
            score=0.95,
            section="4 Results",
            label="results",
        ),
        _item(
            "c2",
            "PaSa | 37.78 | 39.90 | 0.61\nGoogle | 12.1 | 14.0 | 0.20\nPaperFinder 31.2 33.5 0.44 0.51",
            score=0.9,
            section="4 Results",
            label="results",
        ),
        _item(
            "c3",
            "We introduce PaSa, an advanced Paper Search agent powered by large language models [3, 4]. PaSa "
            "can autonomously make a series of decisions, including invoking search tools, reading papers, "
            "and selecting relevant references.",
            score=0.7,
            section="Abstract",
            label="abstract",
        ),
        _item(
            "c4",
            "Lo, K., Wang, L., and Weld, D. 2020. S2ORC: The Semantic Scholar Open Research Corpus. In "
            "Proceedings of ACL, pages 4969-4983. PaSa is cited here as an agent for academic search in "
            "the list of references.",
            score=0.99,
            section="References",
            label="references",
        ),
        _item(
            "c5",
            "We introduce PaSa, an advanced Paper Search agent powered by large language models. It reads "
            "papers and selects references for the user.",
            score=0.6,
            section="1 Introduction",
            label="introduction",
        ),
    ]
    ans = extractive_answer("What does PaSa do?", items)
    lines = quoted(ans["text"])
    assert lines[0] == "We introduce PaSa, an advanced Paper Search agent powered by large language models.", lines
    # the same sentence from the abstract and the introduction: one line, both citations
    first = ans["text"].splitlines()[1]
    assert re.search(r"\[\d\]\[\d\]$", first), first
    assert sum("We introduce PaSa" in s for s in lines) == 1
    assert not answer_problems(ans["text"]), ans["text"]
    cited = {c["chunk_id"] for c in ans["citations"]}
    assert "c2" not in cited and "c4" not in cited  # table dump and reference list never quoted
    assert {c["n"] for c in ans["citations"]} == set(range(1, len(ans["citations"]) + 1))


def test_extractive_answer_for_a_quantity_question_quotes_the_number():
    items = [
        _item(
            "a",
            "PaSa is trained with reinforcement learning on a synthetic dataset. The agent reads papers "
            "and expands citations when it needs to.",
            score=0.9,
        ),
        _item(
            "b",
            "We build AutoScholarQuery, a synthetic but high-quality academic query dataset with 35k "
            "fine-grained academic queries and corresponding papers.",
            score=0.6,
            label="abstract",
        ),
    ]
    ans = extractive_answer("How many queries does AutoScholarQuery contain?", items, max_sentences=2)
    assert "35k" in quoted(ans["text"])[0]


def test_a_sentence_cut_by_a_chunk_boundary_is_quoted_whole_and_cites_both_chunks():
    """The fact sits in the second half of a sentence whose first half ends the previous chunk ("... pretraining
    cor-" / "pus contains 16.4B tokens ..."): the answer quotes the whole sentence, re-joins the hyphenated word
    and cites both chunks, each with the span of its part; the adjacent chunk is fetched when it was not
    retrieved, and not when the edge sentence is whole."""
    a_text = (
        "We also remove paragraphs with too many symbols using heuristic filters. The resulting pretraining "
        "corpus of the Open Research Corpus is then tokenized, and its size is reported below. The resulting cor-"
    )
    b_text = (
        "pus contains 16.4B tokens, nearly five times larger than the corpus used for SciBERT. The vocabulary "
        "is built with SentencePiece on the same corpus."
    )
    a, b = _item("a", a_text, score=0.9), _item("b", b_text, score=0.3)
    calls: list[tuple[str, int]] = []

    def neighbour(cid: str, delta: int) -> dict[str, Any] | None:
        calls.append((cid, delta))
        return {"a": {1: b}, "b": {-1: a}}.get(cid, {}).get(delta)

    q = "How many tokens does the resulting pretraining corpus contain?"
    ans = extractive_answer(q, [a], neighbour=neighbour)
    first = ans["text"].splitlines()[1]
    assert "The resulting corpus contains 16.4B tokens, nearly five times larger" in first, ans["text"]
    assert first.endswith("[1][2]"), first
    by_chunk = {c["chunk_id"]: c for c in ans["citations"]}
    assert set(by_chunk) == {"a", "b"}
    qa, qb = by_chunk["a"]["anchor"]["quote_span"], by_chunk["b"]["anchor"]["quote_span"]
    assert a_text[qa[0] : qa[1]] == "The resulting cor-" and qa[1] == len(a_text)
    assert b_text[qb[0] : qb[1]].startswith("pus contains 16.4B") and qb[0] == 0
    # retrieved the other way round (only the second chunk): the same sentence, in reading order
    ans = extractive_answer(q, [b], neighbour=neighbour)
    assert "The resulting corpus contains 16.4B tokens" in ans["text"], ans["text"]
    assert [c["chunk_id"] for c in ans["citations"]] == ["a", "b"]
    # a chunk whose edge sentences are whole asks for no neighbour
    calls.clear()
    extractive_answer(
        q, [_item("c", "The corpus contains 16.4B tokens. It is five times larger than before.")], neighbour=neighbour
    )
    assert calls == []


def test_a_name_question_is_answered_only_by_a_sentence_naming_something_in_the_answer_slot():
    """ "Which X ..." needs a sentence that names X or has a new name where the answer goes (after "using", "with",
    "by", or the question's own verb): a sentence that only mentions another name elsewhere is no answer, and
    without one the answer says the sources do not state it."""
    from aisac_core.roles.asked import has_type, names_the_asked

    q = "Which GPU was used to pretrain SciBERT?"
    assert not names_the_asked("As the corpus for SciBERT is not public, S2ORC can serve as a corpus.", q)
    assert names_the_asked("We pretrain SciBERT on 8 NVIDIA V100 GPUs for a week.", q)
    assert names_the_asked("SciBERT was pretrained using Megatron on a cluster.", q)  # the slot, not the type
    # an instrument of another action is no answer: "using Adam" while finetuning, for a question on pretraining
    assert not names_the_asked("S2ORC-SCIBERT is finetuned on all tasks using Adam (Kingma and Ba, 2014).", q)
    assert not names_the_asked("The resulting S2ORC pretraining corpus contains 16.4B tokens.", q)  # a modifier
    assert names_the_asked("GROBID is then used to process each PDF.", "Which tool is used to process each PDF?")
    assert not has_type("SciBERT is pretrained on a single TPU v3-8 for a week.", "name", q)  # another kind
    assert not has_type("S2ORC-SCIBERT and BERT-Base are pretrained for a week.", "name", q)  # the subject's kin
    wf = "What correlation does the wall heat transfer coefficient follow?"
    assert has_type("The wall heat transfer coefficient followed Nu = 0.17 Re^0.79 within 8 percent.", "name", wf)
    ans = extractive_answer(
        "Which JavaScript framework was used to build the Paper Plain interface?",
        [
            _item(
                "p",
                "Shown is the Paper Plain interface and the features it provides to readers. We built the "
                "interface iteratively with twelve participants over four design rounds.",
            )
        ],
    )
    assert "The sources do not state it" in ans["text"] and not ans["citations"], ans["text"]


def test_extractive_answer_with_only_tables_points_to_them_without_quoting():
    ans = extractive_answer(
        "What is the F1 of SciBERT?",
        [_item("t", "BC5CDR | 88.85 | 90.01\nJNLPBA | 77.59 | 77.28\nNCBI | 89.36 | 88.57")],
    )
    assert "88.85" not in ans["text"] and "not quoted [1]" in ans["text"] and len(ans["citations"]) == 1


def test_verdict_wording():
    assert verdict(True, False) == "automatic checks passed" and verdict(False, False) == "automatic checks failed"
    assert verdict(True, True) == "passed" and verdict(False, True) == "failed"
    assert NOT_JUDGED == "not judged (no model)"


# ---------------------------------------------------------------- the papermage papers of the shared test data
def _questions() -> list[dict[str, Any]]:
    fx = json.loads(FIXTURE.read_text())
    return [{**q, "pdf": p["pdf"]} for p in fx["papers"] for q in p["questions"]]


QUESTIONS = _questions()
#: the questions that run as a real ``aisac ask`` subprocess (the others run in-process, the same code path)
SUBPROCESS = ("What is S2ORC?", "How many papers does S2ORC contain?")


@pytest.fixture(scope="module")
def paper_store(tmp_path_factory, models_dir, shared_embedder, embedding_pool):
    from conftest import SHARED_DATA, make_settings

    from aisac_core.context import AppContext

    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent (fresh clone): shared-data tests skipped")
    pdfs = SHARED_DATA.resolve() / "pdfs" / "papermage"
    files = [pdfs / n for n in dict.fromkeys([q["pdf"] for q in QUESTIONS] + [DISTRACTOR])]
    if not all(f.is_file() for f in files):
        pytest.skip(f"papermage PDFs missing in {pdfs}")
    data_dir = tmp_path_factory.mktemp("papers") / "store"
    c = AppContext(make_settings(data_dir, models_dir, warm=False), embedder=shared_embedder)
    failures: list = []
    with embedding_pool.use(c.engine):  # the papers' chunk vectors, embedded once per run (conftest.EmbeddingPool)
        c.rag.indexer.run(files, failures=failures)
    c.close()
    assert not failures, failures
    return data_dir


@pytest.fixture(scope="module")
def in_process_answers(paper_store, models_dir, shared_embedder):
    """question -> run result, by :func:`aisac_servers.cli.ask._ask_here` (what ``aisac ask`` runs) with no model."""
    import anyio
    from conftest import make_settings

    from aisac_core.context import AppContext
    from aisac_servers.cli.ask import _ask_here

    c = AppContext(make_settings(paper_store, models_dir, warm=False), embedder=shared_embedder)
    try:
        return {
            q["question"]: anyio.run(lambda q=q: _ask_here(c, q["question"], None, "none", None))
            for q in QUESTIONS
            if q["question"] not in SUBPROCESS
        }
    finally:
        c.close()


def _ask(data_dir: Path, question: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "AISAC_ROLES_LLM": "auto", "AISAC_WARM": "0", "COLUMNS": "200"}
    env.pop("AISAC_ROLES_LLM_BASE_URL", None)
    aisac = str(Path(sys.executable).parent / "aisac")
    return subprocess.run(
        [aisac, "ask", question, "--data-dir", str(data_dir), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _check(q: dict[str, Any], res: dict[str, Any]) -> None:
    ans, ev = res["answer"], res["evaluation"]
    assert ans["by"] == "extractive", ans
    text = ans["text"]
    assert any(norm(e) in norm(text) for e in q["expect_any"]), (
        f"{q['question']}: expected one of {q['expect_any']} in\n{text}"
    )
    assert not answer_problems(text), answer_problems(text)
    assert ev["passed"] and ev["verdict"] == "automatic checks passed" and ev["content_judged"] is False
    assert ev["content"] == NOT_JUDGED


@pytest.mark.parametrize("q", [q for q in QUESTIONS if q["question"] not in SUBPROCESS], ids=lambda q: q["question"])
def test_paper_question_without_model(q, in_process_answers):
    _check(q, in_process_answers[q["question"]])


def test_aisac_ask_json_and_human_output(paper_store, shared_data):
    by_q = {q["question"]: q for q in QUESTIONS}
    p = _ask(paper_store, SUBPROCESS[0], "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    _check(by_q[SUBPROCESS[0]], res)
    s2orc = str(shared_data / "pdfs" / "papermage" / "2020.acl-main.447.pdf")
    assert res["answer"]["citations"][0]["path"] == s2orc

    p2 = _ask(paper_store, SUBPROCESS[1])
    assert p2.returncode == 0, p2.stderr
    out = p2.stdout
    assert "81.1M" in out.split("citations:")[0]
    assert "automatic checks passed" in out and "content: not judged (no model)" in out, out
    assert ": passed" not in out.split("evaluation")[1].splitlines()[0]  # not the with-a-model verdict


def test_a_number_in_the_next_sentence_is_quoted_with_the_sentence_it_continues():
    """'It' continues the subject of the sentence before it: the number it states is quoted with that sentence (one
    citation whose span covers both), and the line-end hyphen of the PDF ("pa- pers") is repaired in the quote."""
    text = (
        "Background material is summarised in Section 2 of this paper, before the method. "
        "We release the RealScholarQuery benchmark of scholarly queries written by researchers. "
        "It contains 50 fine-grained queries collected from 12 AI pa- pers."
    )
    ans = extractive_answer("How many queries does the RealScholarQuery benchmark contain?", [_item("c1", text)])
    lines = quoted(ans["text"])
    assert lines[0] == (
        "We release the RealScholarQuery benchmark of scholarly queries written by researchers. "
        "It contains 50 fine-grained queries collected from 12 AI papers."
    ), lines
    span = ans["citations"][0]["anchor"]["quote_span"]
    assert text[span[0] : span[1]].startswith("We release") and text[span[0] : span[1]].endswith("pa- pers.")


def test_the_kept_longer_wording_of_a_merged_sentence_is_the_quoted_span():
    """A sentence and the same sentence read with its continuation are near-duplicates: the longer wording is kept,
    and the citation's span is that wording's span, so the support judge reads what the answer quotes."""
    text = (
        "In all, we have submitted two runs, one run for English and the other for German. "
        "They have achieved f-measures of 0.64 and 0.61 respectively."
    )
    ans = extractive_answer("How many runs were submitted?", [_item("c1", text)])
    line = quoted(ans["text"])[0]
    span = ans["citations"][0]["anchor"]["quote_span"]
    assert " ".join(text[span[0] : span[1]].split()) == line, (line, span)


def test_not_stated_lists_the_closest_passages_apart_from_the_answer():
    """A number question that no sentence answers says the sources do not state it; the closest candidate sentences
    are listed in ``closest`` (one per passage, at most three), never in the answer text."""
    items = [
        _item("c1", "PaSa is an agent that searches for papers with a large language model and reads them in turn."),
        _item("c2", "The crawler of PaSa expands the citation network of the papers it has already read.", doc="d2"),
    ]
    ans = extractive_answer("How many GPUs trained the PaSa crawler?", items)
    assert "The sources do not state it" in ans["text"] and ans["citations"] == []
    closest = ans["closest"]
    assert 1 <= len(closest) <= 3 and len({c["chunk_id"] for c in closest}) == len(closest)
    assert all(c["sentence"] not in ans["text"] for c in closest)
