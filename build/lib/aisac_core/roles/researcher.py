"""The Researcher helper: collects the evidence the coordinator's steps returned and writes the answer.

Evidence items are taken from step results: every dict carrying an evidence ``anchor`` (rag hits, rag_get_chunk,
rag_read_sections, ...) is a *rag* item; every dict with a ``title`` and a paper identifier (doi, arxiv_id, pmid,
paper_id, openalex_id, s2_id) and no anchor is a *literature* item.

With no model the answer is *extractive* (:func:`extractive_answer`): the sentences of the evidence that share
most content words with the question, from documents named by the question first (a distinctive token such as
"S2ORC" found in a document's title, path or text), each followed by its citation number. With a model, the
``researcher`` prompt gives the numbered evidence and asks for ``{answer, citations}`` (``schemas/answer.json``).

Answer shape: ``{text, citations: [{n, kind: rag|literature, chunk_id?, doc_id?, title, path?, page?, section?,
score?, anchor?, quote? (the chunk's first 400 characters), ref?}], by: extractive|model, evidence_count}``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from aisac_core.evidence.anchor import is_anchor
from aisac_core.roles.backends import ask_json
from aisac_core.roles.prompts import render
from aisac_core.roles.schemas import load_schema

if TYPE_CHECKING:
    from aisac_core.context import AppContext
    from aisac_core.roles.backends import Backend

_ID_KEYS = ("doi", "arxiv_id", "pmid", "paper_id", "openalex_id", "s2_id", "pmcid")
_STOP = set("""a an and are as at be by can could did do does for from has have how in into is it its of on or that
the their this to was were what when where which who why will with would about describe described describes paper
papers""".split())
MAX_EVIDENCE = 12
#: characters of the cited chunk kept in a citation (``quote``), for the evaluator and the reader
QUOTE_CHARS = 400


def collect_evidence(results: dict[str, Any], only: list[str] | None = None) -> list[dict[str, Any]]:
    """Evidence items of step ``results`` (step id -> result), of the steps in ``only`` when given; rag items
    de-duplicated by chunk id (highest score kept), then literature items; best first."""
    rag: dict[str, dict[str, Any]] = {}
    lit: dict[str, dict[str, Any]] = {}

    def walk(x: Any, step: str) -> None:
        if isinstance(x, dict):
            a = x.get("anchor")
            if is_anchor(a):
                cid = a["chunk_id"]
                score = x.get("score") if x.get("score") is not None else a.get("score")
                item = {"kind": "rag", "chunk_id": cid, "doc_id": a.get("doc_id") or x.get("doc_id"),
                        "title": x.get("title"), "path": a.get("path") or x.get("path"), "page": a.get("page"),
                        "section": a.get("section"), "score": score, "text": x.get("text") or "", "anchor": a,
                        "step": step}
                old = rag.get(cid)
                if old is None or (score or 0) > (old.get("score") or 0):
                    rag[cid] = item
                return
            ident = next((str(x[k]) for k in _ID_KEYS if x.get(k)), None)
            if ident and isinstance(x.get("title"), str):
                lit.setdefault(ident, {"kind": "literature", "ref": ident, "title": x["title"],
                                       "text": str(x.get("abstract") or x.get("summary") or x.get("snippet") or ""),
                                       "year": x.get("year"), "url": x.get("url"), "step": step})
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
    CO2), which usually name a paper, dataset or system."""
    return [w for w in re.findall(r"[A-Za-z0-9][\w-]*", task) if re.search(r"\d|[A-Z]", w[1:]) and len(w) > 1]


#: near-synonyms that count as the same query term (6-character prefixes), so "datasets" matches "corpus"
_SYNONYMS = {"datase": {"corpus", "corpor", "benchm", "collec"}, "corpus": {"datase", "corpor"},
             "corpor": {"datase", "corpus"}, "method": {"approa", "techni"}, "result": {"perfor", "findin"}}


def _terms(text: str) -> set[str]:
    return {w[:6] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 2}


def _query_terms(task: str) -> set[str]:
    q = _terms(task)
    return q | {syn for t in q for syn in _SYNONYMS.get(t, ())}


def _sentences(text: str) -> list[str]:
    text = " ".join(text.split())
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])", text)
    return [p.strip() for p in parts if 40 <= len(p.strip()) <= 600]


def rank_evidence(task: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rag items ordered for citing: items of documents the question names (:func:`focus_tokens`) first, then by
    score; literature items after."""
    focus = [f.lower() for f in focus_tokens(task)]

    def named(i: dict[str, Any]) -> bool:
        hay = " ".join(str(i.get(k) or "") for k in ("title", "path", "text")).lower()
        return any(f in hay for f in focus)

    if focus:
        docs = {i.get("doc_id") for i in items if i["kind"] == "rag" and named(i)}
        key = lambda i: (0 if i.get("doc_id") in docs else 1, -(i.get("score") or 0))  # noqa: E731
    else:
        key = lambda i: -(i.get("score") or 0)  # noqa: E731
    rag = sorted((i for i in items if i["kind"] == "rag"), key=key)
    return rag + [i for i in items if i["kind"] != "rag"]


def citation(n: int, item: dict[str, Any]) -> dict[str, Any]:
    """The citation record of evidence ``item`` numbered ``n``."""
    if item["kind"] == "rag":
        return {"n": n, "kind": "rag", "chunk_id": item["chunk_id"], "doc_id": item.get("doc_id"),
                "title": item.get("title"), "path": item.get("path"), "page": item.get("page"),
                "section": item.get("section"), "score": item.get("score"), "anchor": item["anchor"],
                "quote": " ".join((item.get("text") or "").split())[:QUOTE_CHARS]}
    return {"n": n, "kind": "literature", "ref": item["ref"], "title": item.get("title"), "url": item.get("url"),
            "year": item.get("year")}


def extractive_answer(task: str, items: list[dict[str, Any]], max_sentences: int = 5) -> dict[str, Any]:
    """The no-model answer (module docstring): at most ``max_sentences`` sentences, at most two per chunk, each
    with its citation number; literature items listed after. An empty evidence list gives an answer saying so."""
    ranked = rank_evidence(task, items)
    if not ranked:
        return {"text": "No evidence was found in the indexed documents or the literature sources for this "
                        "question; index the relevant documents (aisac index PATH) and ask again.",
                "citations": [], "by": "extractive", "evidence_count": 0}
    q = _query_terms(task)
    n_terms = max(1, len(_terms(task)))
    focus = {f.lower() for f in focus_tokens(task)}
    scored: list[tuple[float, int, str]] = []
    rag = [i for i in ranked if i["kind"] == "rag"][:MAX_EVIDENCE]
    for rank, item in enumerate(rag):
        for sent in _sentences(item.get("text") or ""):
            st = _terms(sent)
            overlap = min(1.0, len(q & st) / n_terms)
            bonus = 0.3 if any(f in sent.lower() for f in focus) else 0.0
            scored.append((overlap + bonus + 0.2 * (item.get("score") or 0) - 0.02 * rank, rank, sent))
    scored.sort(key=lambda t: -t[0])
    chosen: list[tuple[int, str]] = []
    per_chunk: dict[int, int] = {}
    for _score, rank, sent in scored:
        if per_chunk.get(rank, 0) >= 2:
            continue
        chosen.append((rank, sent))
        per_chunk[rank] = per_chunk.get(rank, 0) + 1
        if len(chosen) >= max_sentences:
            break
    if not chosen:  # chunks without sentence structure (tables): cite the chunk starts
        chosen = [(r, " ".join((i.get("text") or "").split())[:300]) for r, i in enumerate(rag[:3])]
    numbers: dict[int, int] = {}
    lines = []
    for rank, sent in chosen:
        n = numbers.setdefault(rank, len(numbers) + 1)
        lines.append(f"- {sent} [{n}]")
    cites = [citation(n, rag[rank]) for rank, n in sorted(numbers.items(), key=lambda t: t[1])]
    lit = [i for i in ranked if i["kind"] == "literature"][:5]
    if lit:
        lines.append("Related literature:")
        for i in lit:
            n = len(cites) + 1
            cites.append(citation(n, i))
            lines.append(f"- {i['title']} ({i['ref']}) [{n}]")
    text = "Extractive answer from the indexed sources (no model configured):\n" + "\n".join(lines)
    return {"text": text, "citations": cites, "by": "extractive", "evidence_count": len(items)}


def prompt_values(task: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Values of the researcher prompt's placeholders (evidence numbered from 1)."""
    ev = []
    for n, i in enumerate(items, 1):
        src = (f"{i.get('title') or i.get('path')}, p. {i.get('page')}, section {i.get('section')}"
               if i["kind"] == "rag" else f"{i.get('title')} ({i.get('ref')})")
        ev.append(f"[{n}] {src}\n{' '.join((i.get('text') or '').split())[:800]}")
    return {"task": task, "evidence": "\n\n".join(ev) or "(none)", "schema": load_schema("answer")}


async def write_answer(core: "AppContext", task: str, items: list[dict[str, Any]], backend: "Backend | None", *,
                       run_id: str, parent_id: int | None) -> dict[str, Any]:
    """The answer from ``items``: by the model when ``backend`` is given, else :func:`extractive_answer`.
    Raises :class:`~aisac_core.roles.RoleModelError` when the model fails."""
    if backend is None or not items:
        return extractive_answer(task, items)
    chosen = rank_evidence(task, items)[:MAX_EVIDENCE]

    def check(obj: Any) -> list[str]:
        bad = [n for n in obj.get("citations", []) if not 1 <= n <= len(chosen)]
        return [f"$.citations: {bad} are not evidence numbers (1..{len(chosen)})"] if bad else []

    text, version = render("researcher", prompt_values(task, chosen), core.settings.roles.prompt_dir)
    got = await ask_json(core, backend, role="researcher", schema="answer", prompt=text, prompt_version=version,
                         run_id=run_id, parent_id=parent_id, check=check)
    out = got["output"]
    nums = sorted(set(out["citations"]) | {int(n) for n in re.findall(r"\[(\d+)\]", out["answer"])
                                            if 1 <= int(n) <= len(chosen)})
    return {"text": out["answer"], "citations": [citation(n, chosen[n - 1]) for n in nums], "by": "model",
            "evidence_count": len(items), "request_sha256": got["request_sha256"]}
