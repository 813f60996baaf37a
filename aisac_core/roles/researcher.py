"""The Researcher helper: collects the evidence the coordinator's steps returned and writes the answer.

Evidence items are taken from step results: every dict carrying an evidence ``anchor`` (rag hits, rag_get_chunk,
rag_read_sections, ...) is a *rag* item; every dict with a ``title`` and a paper identifier (doi, arxiv_id, pmid,
paper_id, openalex_id, s2_id) and no anchor is a *literature* item.

With no model the answer is *extractive* (:func:`extractive_answer`): the sentences of the evidence that share
most content words with the question, from documents named by the question first (a distinctive token such as
"S2ORC" found in a document's title, path or text), each followed by its citation number(s). A "what is / what
does X do" question prefers sentences that define X and the abstract / introduction; a "how many / how much"
question prefers sentences with a number (:func:`score_sentence`). Table dumps, reference-list entries,
captions, footnotes and marker-only sentences are never quoted, citation markers are stripped from the quoted
text, near-duplicates are merged (rules: :mod:`aisac_core.roles.sentences`). With a model, the
``researcher`` prompt gives the numbered evidence and asks for ``{answer, citations}`` (``schemas/answer.json``).

Answer shape: ``{text, citations: [{n, kind: rag|literature, chunk_id?, doc_id?, title, path?, page?, section?,
score?, anchor?, quote? (the chunk's first 400 characters), ref?}], by: extractive|model, evidence_count}``.

The module is longer than 600 lines because collecting, ranking, quoting, completing and abstaining are one pipeline
over the same evidence items (:class:`~aisac_core.roles.shapes.EvidenceItem`); split, each part would import the rest.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import TYPE_CHECKING, cast

import anyio

from aisac_core.evidence.anchor import is_anchor
from aisac_core.roles.asked import NUMBER_WORD, is_boilerplate, sentence_spans, text_stems
from aisac_core.roles.backends import ask_json
from aisac_core.roles.prompts import render
from aisac_core.roles.schemas import load_schema
from aisac_core.roles.sentences import (
    continued_from,
    cut_at_end,
    cut_at_start,
    has_quantity,
    is_definition,
    join_cut,
    mentions,
    near_duplicate,
    question_kind,
    question_subject,
    reject_reason,
    strip_markers,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aisac_core.jsontypes import JSONValue
    from aisac_core.rag.results import AnchorDict
    from aisac_core.roles.backends import Backend
    from aisac_core.roles.env import Embed, Neighbour, ResearchEnv
    from aisac_core.roles.shapes import Answer, Citation, Evaluation, EvidenceItem

_ID_KEYS = ("doi", "arxiv_id", "pmid", "paper_id", "openalex_id", "s2_id", "pmcid")
_STOP = set(
    """a an and are as at be by can could did do does for from has have how in into is it its of on or that
the their this to was were what when where which who why will with would about describe described describes paper
papers""".split()
)
MAX_EVIDENCE = 12
#: characters of the cited chunk kept in a citation (``quote``), for the evaluator and the reader
QUOTE_CHARS = 400


def _str(v: object) -> str | None:
    """A string field of a tool result (None when absent or of another JSON type)."""
    return v if isinstance(v, str) else None


def _int(v: object) -> int | None:
    """An integer field of a tool result (None when absent or of another JSON type; a boolean is no integer)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: object) -> float | None:
    """A number field of a tool result (None when absent or of another JSON type; a boolean is no number)."""
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def collect_evidence(results: Mapping[str, object], only: list[str] | None = None) -> list[EvidenceItem]:
    """Evidence items of step ``results`` (step id -> result), of the steps in ``only`` when given; rag items
    de-duplicated by chunk id (highest score kept), then literature items; best first."""
    rag: dict[str, EvidenceItem] = {}
    lit: dict[str, EvidenceItem] = {}

    def walk(x: object, step: str) -> None:
        if isinstance(x, dict):
            a = x.get("anchor")
            if isinstance(a, dict) and is_anchor(a):
                cid: str = a["chunk_id"]
                score = _num(x.get("score")) if x.get("score") is not None else _num(a.get("score"))
                item: EvidenceItem = {
                    "kind": "rag",
                    "chunk_id": cid,
                    "doc_id": _str(a.get("doc_id")) or _str(x.get("doc_id")),
                    "title": _str(x.get("title")),
                    "path": _str(a.get("path")) or _str(x.get("path")),
                    "page": _int(a.get("page")),
                    "section": _str(a.get("section")),
                    "score": score,
                    "text": _str(x.get("text")) or "",
                    "anchor": cast("AnchorDict", a),  # a tool result's anchor JSON (is_anchor: a string chunk_id)
                    "step": step,
                    "label": _str(x.get("section_covers")) or _str(a.get("section_covers")),
                }
                old = rag.get(cid)
                if old is None or (score or 0) > (old.get("score") or 0):
                    rag[cid] = item
                return
            ident = next((str(x[k]) for k in _ID_KEYS if x.get(k)), None)
            if ident and isinstance(x.get("title"), str):
                lit.setdefault(
                    ident,
                    {
                        "kind": "literature",
                        "ref": ident,
                        "title": _str(x.get("title")),
                        "text": str(x.get("abstract") or x.get("summary") or x.get("snippet") or ""),
                        "year": _int(x.get("year")),
                        "url": _str(x.get("url")),
                        "step": step,
                    },
                )
                return
            for v in x.values():
                walk(v, step)
        elif isinstance(x, list):
            for v in x:
                walk(v, step)

    for sid, res in results.items():
        if only is None or sid in only:
            walk(res, sid)
    items = sorted(rag.values(), key=lambda i: -(i.get("score") or 0)) + list(lit.values())
    return items


def focus_tokens(task: str) -> list[str]:
    """Distinctive tokens of a question: words with a capital after the first letter or a digit (S2ORC, BERT,
    CO2), which usually name a paper, dataset or system; and runs of capitalised words not first in the question
    ("Paper Plain", "Hamburg"), which name one too."""
    out = [w for w in re.findall(r"[A-Za-z0-9][\w-]*", task) if re.search(r"\d|[A-Z]", w[1:]) and len(w) > 1]
    for m in re.finditer(r"(?<=[\w,;:)'] )[A-Z][a-z]+\b(?![\w-])(?:[ -][A-Z][\w-]*)*", task):
        phrase = m.group(0)
        if phrase.lower() not in _STOP and phrase not in out:
            out.append(phrase)
    return out


#: near-synonyms that count as the same query term (6-character prefixes), so "datasets" matches "corpus"
_SYNONYMS = {
    "datase": {"corpus", "corpor", "benchm", "collec"},
    "corpus": {"datase", "corpor"},
    "corpor": {"datase", "corpus"},
    "method": {"approa", "techni"},
    "result": {"perfor", "findin"},
}


def _terms(text: str) -> set[str]:
    return {w[:6] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 2}


def _query_terms(task: str) -> set[str]:
    q = _terms(task)
    return q | {syn for t in q for syn in _SYNONYMS.get(t, ())}


def _sentences(text: str) -> list[str]:
    text = " ".join(text.split())
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])", text)
    return [p.strip() for p in parts if 40 <= len(p.strip()) <= 600]


_BACK_MATTER = re.compile(
    r"acknowledg|author contributions?|contributions of|funding|ethic|broader impact|"
    r"checklist|datasheet",
    re.I,
)
_REFERENCE_SECTION = re.compile(r"\b(references|bibliography|works cited|literature cited)\b", re.I)


def is_reference_item(item: EvidenceItem) -> bool:
    """Whether a rag evidence item comes from a reference list (section label ``references`` or a heading path
    ending in References / Bibliography)."""
    last = str(item.get("section") or "").split(" > ")[-1]
    return item.get("label") == "references" or bool(_REFERENCE_SECTION.search(last))


def _named_docs(task: str, items: list[EvidenceItem]) -> set[str | None]:
    """doc ids of the rag items whose document the question names: a :func:`focus_tokens` token in the title,
    path or text, or a definition question's subject (:func:`~aisac_core.roles.sentences.question_subject`) in
    the title or path."""
    focus = [f.lower() for f in focus_tokens(task)]
    subject = question_subject(task)
    out = set()
    for i in items:
        if i["kind"] != "rag":
            continue
        head = f"{i.get('title') or ''} {PurePath(str(i.get('path') or '')).name}"  # not the folders' names
        hay = " ".join(str(i.get(k) or "") for k in ("title", "path", "text")).lower()
        if any(f in hay for f in focus) or (subject and mentions(head, subject)):
            out.add(i.get("doc_id"))
    return out


def subject_docs(task: str, items: list[EvidenceItem]) -> set[str | None]:
    """doc ids of the rag items whose document names the most of the question's :func:`focus_tokens` (in its
    items' titles, paths and texts): "How many GPUs trained the OTSL TableFormer models?" -> the document naming
    OTSL and TableFormer, not the one that only mentions GPUs. Empty when no document names any."""
    focus = {f.lower() for f in focus_tokens(task)}
    found: dict[str | None, set[str]] = {}
    for i in items:
        if i["kind"] != "rag":
            continue
        hay = " ".join(str(i.get(k) or "") for k in ("title", "path", "text")).lower()
        found.setdefault(i.get("doc_id"), set()).update(f for f in focus if f in hay)
    best = max((len(v) for v in found.values()), default=0)
    return {d for d, v in found.items() if best and len(v) == best}


def rank_evidence(task: str, items: list[EvidenceItem]) -> list[EvidenceItem]:
    """Rag items ordered for citing: items of documents the question names (:func:`_named_docs`) first (for a
    definition question their abstract / introduction items first), then by score; reference-list items last;
    literature items after."""
    docs = _named_docs(task, items)
    overview = question_kind(task) in ("definition", "quantity")

    def key(i: EvidenceItem) -> tuple[int, int, int, float]:
        front = overview and i.get("label") in ("abstract", "introduction")
        return (
            1 if is_reference_item(i) else 0,
            0 if i.get("doc_id") in docs else 1,
            0 if front else 1,
            -(i.get("score") or 0),
        )

    rag = sorted((i for i in items if i["kind"] == "rag"), key=key)
    return rag + [i for i in items if i["kind"] != "rag"]


def citation(n: int, item: EvidenceItem, spans: list[tuple[int, int]] | None = None) -> Citation:
    """The citation record of evidence ``item`` numbered ``n``. ``spans``: the quoted sentences' character spans in
    the chunk text; the anchor gains ``quote_span`` (from the first span's start to the last one's end) and
    ``quote`` is that text (whitespace collapsed). Without spans, ``quote`` is the chunk's first
    :data:`QUOTE_CHARS` characters, cut at a word boundary, and the anchor has no ``quote_span``."""
    if item["kind"] == "rag":
        text = item.get("text") or ""
        anchor = item["anchor"].copy()
        if spans:
            a, b = min(s[0] for s in spans), max(s[1] for s in spans)
            anchor["quote_span"] = [a, b]
            quote = " ".join(text[a:b].split())
        else:
            anchor.pop("quote_span", None)
            quote = " ".join(text.split())
            if len(quote) > QUOTE_CHARS:
                quote = quote[:QUOTE_CHARS].rsplit(" ", 1)[0] + " …"
        return {
            "n": n,
            "kind": "rag",
            "chunk_id": item["chunk_id"],
            "doc_id": item.get("doc_id"),
            "title": item.get("title"),
            "path": item.get("path"),
            "page": item.get("page"),
            "section": item.get("section"),
            "score": item.get("score"),
            "anchor": anchor,
            "quote": quote,
        }
    return {
        "n": n,
        "kind": "literature",
        "ref": item["ref"],
        "title": item.get("title"),
        "url": item.get("url"),
        "year": item.get("year"),
    }


def score_sentence(task: str, sentence: str, item: EvidenceItem, *, rank: int, named: bool) -> float:
    """How well ``sentence`` (of rag evidence ``item``, ``rank`` in :func:`rank_evidence` order, ``named``: its
    document is named by the question) answers ``task``: query-term overlap (0..1), +0.3 for a focus token or a
    sentence of a document the question names, +0.2
    x the item's score, -0.02 x rank; a definition question adds +0.8 for a defining sentence
    (:func:`~aisac_core.roles.sentences.is_definition`) and +0.3 / +0.15 for the abstract / introduction; a
    quantity question adds +0.4 for a number (:func:`~aisac_core.roles.sentences.has_quantity`, or a number word:
    "four features") and -0.4 without one; -0.4 in back matter (acknowledgements, author contributions, funding,
    ethics), -0.3 for a URL, -0.15 for a fragment starting in lower case, -0.3 for one without a sentence end (a
    sentence cut at a chunk or page end)."""
    q, n_terms = _query_terms(task), max(1, len(_terms(task)))
    focus = {f.lower() for f in focus_tokens(task)}
    score = min(1.0, len(q & _terms(sentence)) / n_terms)
    score += 0.3 if named or any(f in sentence.lower() for f in focus) else 0.0
    score += 0.2 * (item.get("score") or 0) - 0.02 * rank
    kind = question_kind(task)
    if kind == "definition":
        if is_definition(sentence, question_subject(task), named):
            score += 0.8
        score += {"abstract": 0.3, "introduction": 0.15}.get(item.get("label") or "", 0.0)
    elif kind == "quantity":
        score += 0.4 if has_quantity(sentence) or NUMBER_WORD.search(sentence) else -0.4
        score += {"abstract": 0.15, "introduction": 0.1}.get(item.get("label") or "", 0.0)
    if _BACK_MATTER.search(str(item.get("section") or "")):
        score -= 0.4
    if re.search(r"https?://|www\.|github\.com", sentence):
        score -= 0.3
    if sentence[:1].islower():
        score -= 0.15
    if not re.search(r"[.!?:;][\"”')\]]*$", sentence):  # cut at a chunk or page end: "improving readers' 26"
        score -= 0.3
    return score


#: the statement of an answer when no retrieved sentence has what the question asks for
NOT_STATED = "The sources do not state it"
#: an answer is given only when its best sentence, with its document's title and section, holds at least this
#: share of the question's key terms (:func:`aisac_core.roles.asked.key_terms`) ...
ANSWER_MIN_COVERAGE = 0.4
#: ... and is at least this close in meaning to the question (MiniLM cosine; applied when an embedder is given).
#: Both calibrated on bench/data/answers_dev.json: round figures below the answered questions' values and above
#: those of the questions the papers do not answer (docs/roles.md has the figures).
ANSWER_MIN_SIM = 0.3
#: a number / name / yes-no question is answered with its best sentence, plus the best sentence of another passage
#: that also meets the bar (has the asked type, coverage, similarity) and scores at least this share of the best: a
#: second source for the evidence gate (0: any such sentence)
SECOND_SHARE = 0.0
#: sentences embedded per question (the best by the other terms of the score): bounds the cost of a question
EMBED_TOP = 40
#: weight of the question-sentence cosine similarity (MiniLM, unit vectors) in a sentence's score
SIM_WEIGHT = 0.8


def prose_after_code(text: str, a: int, b: int) -> tuple[int, int, str]:
    """The prose that follows a code listing inside the sentence span ``(a, b)`` of ``text``: from the first capital
    after the listing's last code line (a ``>>>`` prompt, ``import``, an assignment) that starts a run of words (a
    capitalised word and two lower-case ones: "In this example, ..."); ``(a, b, "")`` when there is none."""
    seg = text[a:b]
    ends = [m.end() for m in re.finditer(r">>>|\bimport\s+\w+|\w\s=\s", seg)]
    if not ends:
        return a, b, ""
    m = re.compile(r"\s+(?=[A-Z][a-z]*,?\s+[a-z]+,?\s+[a-z]+)").search(seg, ends[-1])
    if not m:
        return a, b, ""
    start = a + m.end()
    sent = " ".join(text[start:b].split())
    return (start, b, sent) if len(sent) >= 40 else (a, b, "")


def term_weights(terms: set[str], sentences: list[str]) -> dict[str, float]:
    """Weight of each key term (6-character prefix): its inverse document frequency among ``sentences``,
    ``log((n + 1) / (df + 0.5))`` (the BM25 form, Robertson & Zaragoza 2009, kept positive), so a term most
    candidates share weighs little."""
    import math

    sets = [text_stems(s) for s in sentences]
    n = len(sets)
    return {t: math.log((n + 1) / (sum(t in st for st in sets) + 0.5)) for t in terms}


def weighted_coverage(weight: dict[str, float], sentence: str) -> float:
    """Share of the key terms' total :func:`term_weights` weight found in ``sentence`` (1.0 without terms)."""
    total = sum(weight.values())
    if total <= 0:
        return 1.0
    have = text_stems(sentence)
    return sum(w for t, w in weight.items() if t in have) / total


def _cosines(embed: Embed | None, question: str, sentences: list[str]) -> list[float]:
    """Cosine similarity of ``question`` with each sentence (``embed``: texts -> unit vectors), 0.0 without
    ``embed``."""
    if embed is None or not sentences:
        return [0.0] * len(sentences)
    vecs = embed([question, *sentences])
    q = vecs[0]
    return [float(sum(a * b for a, b in zip(q, v))) for v in vecs[1:]]


#: closest passages listed with an answer that says the sources do not state it
CLOSEST = 3


#: a candidate sentence of the extractive answer: ``(score, rank of its passage, sentence, span in the chunk, states
#: the asked type, coverage of the question's terms, its completion from the adjacent chunk: (rank, span, whether
#: the completion comes first) or None)``
Candidate = tuple[float, int, str, tuple[int, int], bool, float, "tuple[int, tuple[int, int], bool] | None"]


def closest_passages(cands: list[Candidate], rag: list[EvidenceItem]) -> list[dict[str, object]]:
    """The :data:`CLOSEST` best candidate sentences (by their score without the similarity term) of an answer that
    says the sources do not state it: ``[{sentence, title, page, section, chunk_id}]``, one per passage; without
    candidates (every passage left out), the first sentence of each of the best retrieved passages. They are
    listed apart from the answer (``closest``), never as its statement."""
    out: list[dict[str, object]] = []
    seen: set[int] = set()
    if not cands:
        for rank, item in enumerate(rag):
            text = item.get("text") or ""
            spans = sentence_spans(text)
            if spans and not is_reference_item(item):
                a, b = spans[0]
                cands = [*cands, (0.0, rank, " ".join(text[a:b].split()), (a, b), False, 0.0, None)]
    for c in sorted(cands, key=lambda c: -(c[0] + 0.3 * c[5])):
        if c[1] in seen:
            continue
        seen.add(c[1])
        item = rag[c[1]]
        out.append(
            {
                "sentence": c[2],
                "title": item.get("title"),
                "page": item.get("page"),
                "section": item.get("section"),
                "chunk_id": item.get("chunk_id"),
            }
        )
        if len(out) >= CLOSEST:
            break
    return out


def abstain_unsupported(answer: Answer, evaluation: Evaluation) -> Answer:
    """The answer a run returns: ``answer`` itself, unless the evaluation's support verdict
    (:func:`aisac_core.roles.support.answer_verdict`) is ``not supported`` or ``contradicted``: no cited passage
    supports it above the support judge's threshold, so it is not an answer. Then the text says
    :data:`NOT_STATED`, ``closest`` lists the cited sentences with their verdicts (the closest passages), the
    withheld text is kept in ``withheld`` (and the trace keeps the attempt as written), ``stated`` is False."""
    sup = evaluation.get("support")
    if sup is None or sup["verdict"] not in ("not supported", "contradicted") or not (answer.get("text") or "").strip():
        return answer
    closest: list[dict[str, object]] = []
    for r in sup["citations"]:
        if r.get("sentence") and len(closest) < CLOSEST:
            closest.append(
                {
                    "n": r.get("n"),
                    "sentence": r.get("sentence"),
                    "verdict": r.get("verdict"),
                    "reasons": r.get("reasons"),
                }
            )
    why = "contradicts the answer" if sup["verdict"] == "contradicted" else "supports the answer"
    text = (
        f"{NOT_STATED}: no cited passage {why} above the support judge's threshold"
        if sup["verdict"] == "not supported"
        else f"{NOT_STATED}: a cited passage {why}"
    )
    return {**answer, "text": text + ".", "withheld": answer.get("text"), "closest": closest, "stated": False}


def _not_stated(task: str, items: list[EvidenceItem], rag: list[EvidenceItem], kind: str) -> Answer:
    what = {"number": "a number", "name": "a name", "yesno": "a yes or no", "definition": "a definition"}.get(
        kind, "an answer"
    )
    text = (
        f"Extractive answer from the indexed sources (no model configured):\n{NOT_STATED}: none of the "
        f"{len(rag)} retrieved passages has a sentence that gives {what} for this question."
    )
    return {"text": text, "citations": [], "by": "extractive", "evidence_count": len(items), "stated": False}


def continuations(
    item: EvidenceItem, neighbour: Neighbour | None, pool: list[EvidenceItem]
) -> dict[tuple[int, int], tuple[str, int, tuple[int, int], bool]]:
    """Sentences of rag ``item`` cut by its chunk's boundaries, completed from the adjacent chunk: ``{span of the
    part in this chunk: (whole sentence, rank of the other chunk in pool, the other part's span in it, other part
    first)}``. The chunk's first words are completed when they begin inside a sentence (:func:`cut_at_start`) and
    the previous chunk's last words stop without a sentence end (:func:`cut_at_end`); its last words likewise with
    the next chunk. Parts of any length count ("cor-" + "pus contains ..."). ``neighbour(chunk_id, delta)`` gives
    the adjacent chunk (a rag hit) or None; a chunk already among the evidence is reused, another is appended to
    ``pool`` (the evidence list) so that it can be cited."""
    out: dict[tuple[int, int], tuple[str, int, tuple[int, int], bool]] = {}
    text, cid = item.get("text") or "", item.get("chunk_id")
    spans = sentence_spans(text, min_chars=1)
    if neighbour is None or not spans or not cid:
        return out
    for (a, b), delta in ((spans[0], -1), (spans[-1], 1)):
        mine = " ".join(text[a:b].split())
        if not (cut_at_start(mine) if delta < 0 else cut_at_end(mine)):
            continue
        hit = neighbour(cid, delta)
        if not hit:
            continue
        got = next((i for i in pool if i.get("chunk_id") == hit.get("chunk_id")), None)
        if got is None:
            got = collect_evidence({item.get("step") or "adjacent": [hit]})[0]
            pool.append(got)
        other = got.get("text") or ""
        o_spans = sentence_spans(other, min_chars=1)
        if not o_spans:
            continue
        oa, ob = o_spans[-1] if delta < 0 else o_spans[0]
        theirs = " ".join(other[oa:ob].split())
        if not (cut_at_end(theirs) if delta < 0 else cut_at_start(theirs)):
            continue
        whole = join_cut(theirs, mine) if delta < 0 else join_cut(mine, theirs)
        out[(a, b)] = (whole, pool.index(got), (oa, ob), delta < 0)
    return out


def extractive_answer(
    task: str,
    items: list[EvidenceItem],
    max_sentences: int | None = None,
    embed: Embed | None = None,
    neighbour: Neighbour | None = None,
) -> Answer:
    """The no-model answer: the sentences of the retrieved passages that best answer ``task``, each followed by its
    citation number(s), each citation carrying the sentence's span in its chunk (``anchor.quote_span``, ``quote``);
    literature items listed after. An empty evidence list gives an answer saying so.

    Candidates are the quotable sentences (:mod:`aisac_core.roles.sentences` rules; reference lists and front
    matter / running headers (:func:`is_boilerplate`) never) of all retrieved rag passages (at most
    :data:`MAX_EVIDENCE`). Score: :func:`score_sentence` + :data:`SIM_WEIGHT` x the cosine similarity of question
    and sentence (``embed``: texts -> unit vectors, the store's MiniLM embedder; none: 0) + 0.3 x the share of the
    question's key terms in the sentence, its document's title and section + 0.3 x the share of their
    :func:`term_weights` (idf among the candidates) in the sentence + 0.2 when the sentence has the asked type
    (:func:`aisac_core.roles.asked.has_type`) + 0.1 when a name question's asked noun
    (:func:`aisac_core.roles.asked.asked_head`: "which *simulator*") is in the sentence; for "how many X", +0.2
    when a number of the sentence counts X and -0.3 when its numbers all count other things
    (:func:`aisac_core.roles.asked.counts_what`); a passage that never names X (nor do its title and section)
    gives no candidate. A number / name / yes-no question that names a document (:func:`_named_docs`) is answered
    only from the documents that name most of its names (:func:`subject_docs`). Prose glued after a code
    listing is kept (:func:`prose_after_code`). A candidate is repaired before it is scored (line-end hyphens
    "pa- pers", glued footnote marks, citation markers: :func:`aisac_core.roles.sentences.strip_markers`), and a
    sentence with the asked number / name that continues the subject of the sentence before it ("It contains ...",
    "The latter ...": :func:`aisac_core.roles.sentences.continued_from`) is scored and quoted with that sentence (one span covering both).
    A question asking for a number keeps only sentences with one, a
    name question only those naming something in the answer's slot (:func:`aisac_core.roles.asked.has_type`). A
    sentence cut by the chunk's boundary is completed from the adjacent chunk (:func:`continuations`;
    ``neighbour(chunk_id, delta)`` reads it from the index, None: no completion) and cites both. When no sentence has the asked type, or (with ``embed``) no such
    sentence covers at least :data:`ANSWER_MIN_COVERAGE` of the key terms and is at least :data:`ANSWER_MIN_SIM`
    similar (only the :data:`EMBED_TOP` best by the other terms are embedded), the answer says :data:`NOT_STATED`. ``check`` in the result gives the best
    sentence's coverage and similarity. A number / name / yes-no
    question is answered with its best sentence (plus one from another passage scoring at least
    :data:`SECOND_SHARE` of it), others with up to three (``max_sentences`` overrides);
    near-duplicates are merged (one sentence, the citations of both)."""
    # long function: candidate sentences scored and gated in one place, so the answer rules read in order
    from aisac_core.roles.asked import (
        asked_head,
        asked_type,
        counted_noun,
        counts_what,
        coverage,
        has_type,
        key_terms,
        mentions_noun,
        stem,
        text_stems,
    )

    ranked = rank_evidence(task, items)
    if not ranked:
        return {
            "text": "No evidence was found in the indexed documents or the literature sources for this "
            "question; index the relevant documents (aisac index PATH) and ask again.",
            "citations": [],
            "by": "extractive",
            "evidence_count": 0,
        }
    kind = asked_type(task)
    head = asked_head(task) if kind == "name" else None
    counted = counted_noun(task) if kind == "number" else None
    precise = kind in ("number", "name", "yesno") and not max_sentences
    limit = max_sentences or (2 if precise else 3)
    rag = [i for i in ranked if i["kind"] == "rag"][:MAX_EVIDENCE]
    docs = _named_docs(task, rag)
    subjects = subject_docs(task, rag)
    skipped = 0  # passages left out by the two rules above (they cannot answer this question)
    terms = key_terms(task)
    cands: list[Candidate] = []
    retrieved = list(rag)  # the adjacent chunks that complete cut sentences are appended to rag (to be cited)
    for rank, item in enumerate(retrieved):
        if is_reference_item(item):
            continue
        text = item.get("text") or ""
        context = f"{item.get('title') or ''} {item.get('section') or ''} {PurePath(str(item.get('path') or '')).stem}"
        # a precise question that names a paper / system ("How many GPUs trained the OTSL models?") is answered
        # from the documents that name it, not from another paper's "two GPUs"
        if precise and subjects and item.get("doc_id") not in subjects:
            skipped += 1
            continue
        joined = continuations(item, neighbour, rag)  # sentences cut by the chunk's edges, completed
        # "how many X": a passage that never names X cannot state their count ("how many GPUs" over a page
        # that never mentions a GPU)
        if counted and not mentions_noun(f"{text} {context} {' '.join(j[0] for j in joined.values())}", counted):
            skipped += 1
            continue
        plain = sorted(set(sentence_spans(text)))
        for a, b in sorted(set(plain) | set(joined)):
            sent = joined[(a, b)][0] if (a, b) in joined else " ".join(text[a:b].split())
            # "It contains 81.1M papers.": a sentence with the asked number / name that continues the subject of
            # the sentence before it is read (and quoted) with that sentence
            prev = None
            if kind in ("number", "name") and (a, b) not in joined and has_type(sent, kind, task):
                prev = continued_from(text, plain, (a, b), sent)
            if prev is not None:
                a, sent = prev[0], f"{' '.join(text[prev[0] : prev[1]].split())} {sent}"
            why = reject_reason(sent)
            if why == "code":  # prose glued after a code listing: "... 13 [Image(...)] In this example, ..."
                a, b, sent = prose_after_code(text, a, b)
                why = reject_reason(sent) if sent else why
            if why is not None or is_boilerplate(sent):
                continue
            sent = strip_markers(sent)  # line-end hyphens, footnote marks repaired before scoring
            named = item.get("doc_id") in docs
            base = score_sentence(task, sent, item, rank=rank, named=named)
            cov = coverage(terms, f"{sent} {context}")
            if head and stem(head) in text_stems(sent):  # the asked kind of thing named: "the simulator ns-2"
                base += 0.1
            if counted:  # "how many participants": "12 participants" counts them, "three baselines" other things
                base += {"asked": 0.2, "other": -0.3}.get(counts_what(sent, counted) or "", 0.0)
            rest = joined[(a, b)][1:] if (a, b) in joined else None
            cands.append((base, rank, sent, (a, b), has_type(sent, kind, task), cov, rest))
    # key terms weighted by rarity among the candidates (idf): the term that sets the asked fact apart ("tiny" in
    # "how long are the tiny summaries of X") counts more than the ones every candidate shares ("summaries", "X")
    weight = term_weights(terms, [c[2] for c in cands])
    wcov = {c[2]: weighted_coverage(weight, c[2]) for c in cands}
    # only the best candidates by the other terms are embedded (the similarity term is at most SIM_WEIGHT)
    order = sorted(range(len(cands)), key=lambda i: -(cands[i][0] + 0.3 * cands[i][5]))[:EMBED_TOP]
    if embed is not None:
        cands = [cands[i] for i in order]
    sims = _cosines(embed, task, [c[2] for c in cands])
    scored = [
        (
            base + SIM_WEIGHT * sim + 0.3 * cov + 0.3 * wcov[sent] + (0.2 if typed else 0.0),
            rank,
            sent,
            span,
            cov,
            sim,
            rest,
        )
        for (base, rank, sent, span, typed, cov, rest), sim in zip(cands, sims)
        if typed or kind not in ("number", "name")
    ]
    scored.sort(key=lambda t: -t[0])
    check: dict[str, str | float | None] = {"kind": kind, "coverage": None, "similarity": None}
    if scored:
        check.update(coverage=round(scored[0][4], 3), similarity=round(scored[0][5], 3) if embed else None)
    if embed is not None:  # the best sentences that meet the bar (coverage and similarity), else none
        scored = [t for t in scored if t[4] >= ANSWER_MIN_COVERAGE and t[5] >= ANSWER_MIN_SIM]
        if scored:
            check.update(coverage=round(scored[0][4], 3), similarity=round(scored[0][5], 3))
    if (cands or skipped) and not scored:
        return {
            **_not_stated(task, items, retrieved, kind),
            "check": check,
            "closest": closest_passages(cands, retrieved),
        }
    chosen: list[tuple[list[int], str, dict[int, tuple[int, int]]]] = []
    per_chunk: dict[int, int] = {}
    for score, rank, sent, span, _cov, _sim, rest in scored:
        clean = strip_markers(sent).lstrip("•▪◦ ")
        dup = next((c for c in chosen if near_duplicate(c[1], clean)), None)
        if dup is not None:  # one sentence, the citations of both; the longer wording is kept
            if rank not in dup[0] and len(dup[0]) < 3:
                dup[0].append(rank)
                dup[2][rank] = span
            if len(clean) > len(dup[1]):
                if rank in dup[2] and rest is None:  # the quote's span follows the wording kept (same chunk)
                    dup[2][rank] = span
                chosen[chosen.index(dup)] = (dup[0], clean, dup[2])
            continue
        if per_chunk.get(rank, 0) >= 2 or len(chosen) >= limit:
            continue
        # a precise question: the best sentence, and a second only from another passage scoring nearly as well
        if precise and chosen and (rank in per_chunk or score < SECOND_SHARE * scored[0][0]):
            continue
        if rest is not None:  # a sentence completed from the adjacent chunk cites both, in reading order
            other, o_span, first = rest
            chosen.append(([other, rank] if first else [rank, other], clean, {rank: span, other: o_span}))
        else:
            chosen.append(([rank], clean, {rank: span}))
        per_chunk[rank] = per_chunk.get(rank, 0) + 1
    numbers: dict[int, int] = {}
    spans: dict[int, list[tuple[int, int]]] = {}
    lines = []
    for ranks, sent, where in chosen:
        refs = "".join(f"[{numbers.setdefault(r, len(numbers) + 1)}]" for r in ranks)
        for r in ranks:
            spans.setdefault(r, []).append(where[r])
        lines.append(f"- {sent} {refs}")
    if not chosen:  # only tables, captions or reference lists: point to them, never quote them
        for r, i in enumerate(rag[:3]):
            n = numbers.setdefault(r, len(numbers) + 1)
            lines.append(
                f"- passage on p. {i.get('page')} ({i.get('section') or 'no section'}): a table, caption "
                f"or list, not quoted [{n}]"
            )
    cites = [citation(n, rag[rank], spans.get(rank)) for rank, n in sorted(numbers.items(), key=lambda t: t[1])]
    lit = [i for i in ranked if i["kind"] == "literature"][:5]
    if lit:
        lines.append("Related literature:")
        for i in lit:
            n = len(cites) + 1
            cites.append(citation(n, i))
            lines.append(f"- {i['title']} ({i['ref']}) [{n}]")
    text = "Extractive answer from the indexed sources (no model configured):\n" + "\n".join(lines)
    return {
        "text": text,
        "citations": cites,
        "by": "extractive",
        "evidence_count": len(items),
        "stated": bool(chosen),
        "check": check,
    }


def prompt_values(task: str, items: list[EvidenceItem]) -> dict[str, object]:
    """Values of the researcher prompt's placeholders (evidence numbered from 1)."""
    ev = []
    for n, i in enumerate(items, 1):
        src = (
            f"{i.get('title') or i.get('path')}, p. {i.get('page')}, section {i.get('section')}"
            if i["kind"] == "rag"
            else f"{i.get('title')} ({i.get('ref')})"
        )
        ev.append(f"[{n}] {src}\n{' '.join((i.get('text') or '').split())[:800]}")
    return {"task": task, "evidence": "\n\n".join(ev) or "(none)", "schema": load_schema("answer")}


async def write_answer(
    env: ResearchEnv,
    task: str,
    items: list[EvidenceItem],
    backend: Backend | None,
    *,
    run_id: str,
    parent_id: int | None,
) -> Answer:
    """The answer from ``items``: by the model when ``backend`` is given, else :func:`extractive_answer`.
    Raises :class:`~aisac_core.roles.RoleModelError` when the model fails."""
    if backend is None or not items:
        # embeds up to EMBED_TOP sentences: a worker thread, not the event loop
        embed, neighbour = env.embed_texts, env.corpus.adjacent_chunk
        return await anyio.to_thread.run_sync(lambda: extractive_answer(task, items, embed=embed, neighbour=neighbour))
    chosen = rank_evidence(task, items)[:MAX_EVIDENCE]

    def check(obj: JSONValue) -> list[str]:  # obj: valid against the answer schema ({answer, citations: [int]})
        listed = obj.get("citations", []) if isinstance(obj, dict) else []
        bad = [
            n for n in (listed if isinstance(listed, list) else []) if isinstance(n, int) and not 1 <= n <= len(chosen)
        ]
        return [f"$.citations: {bad} are not evidence numbers (1..{len(chosen)})"] if bad else []

    text, version = render("researcher", prompt_values(task, chosen), env.settings.prompt_dir)
    got = await ask_json(
        env,
        backend,
        role="researcher",
        schema="answer",
        prompt=text,
        prompt_version=version,
        run_id=run_id,
        parent_id=parent_id,
        check=check,
    )
    out = got["output"]  # valid against the answer schema: {answer: str, citations: [int]}
    said = str(out["answer"])
    listed = out["citations"]
    model_cited = {n for n in listed if isinstance(n, int)} if isinstance(listed, list) else set()
    nums = sorted(model_cited | {int(n) for n in re.findall(r"\[(\d+)\]", said) if 1 <= int(n) <= len(chosen)})
    from aisac_core.roles.support import cited_sentence, claims_by_citation

    claims = claims_by_citation(said)

    def span_of(n: int) -> list[tuple[int, int]] | None:
        # the chunk sentence the model's claim [n] rests on (most shared numbers, then words)
        text = chosen[n - 1].get("text") or ""
        if chosen[n - 1]["kind"] != "rag" or not text or n not in claims:
            return None
        _sent, (a, b) = cited_sentence(text, None, " ".join(claims[n]))
        return [(a, b)]

    return {
        "text": said,
        "citations": [citation(n, chosen[n - 1], span_of(n)) for n in nums],
        "by": "model",
        "evidence_count": len(items),
        "request_sha256": got["request_sha256"],
    }
