"""The compact form of ``rag_search``'s result (presentation only: the result types of the rag tools are declared
once, in :mod:`aisac_core.rag.results`): each hit keeps the keys a model works with and a snippet of its text
(:func:`compact`).
"""

from __future__ import annotations

import re
from typing import NotRequired

from pydantic import with_config
from typing_extensions import TypedDict

from aisac_core.rag.results import OPEN, SearchResultDict, SearchResultOf


@with_config(OPEN)
class CompactHit(TypedDict):
    # detail="full" gives the whole hit (aisac_core.rag.results.HitDict: also path, anchor, ...)
    chunk_id: str
    doc_id: str | None
    title: str | None
    page: int | None
    section: str | None
    score: float | None
    #: hybrid: calibrated probability (0-1) that the passage is relevant (aisac_core.rag.ranker)
    relevance: NotRequired[float | None]
    text: str | None
    #: a passage read by OCR from a page image says so ("ocr"), with its mean word confidence (0-1)
    source: NotRequired[str]
    ocr_confidence: NotRequired[float | None]


#: rag_search's default result (detail="full": :data:`aisac_core.rag.results.SearchResultDict`)
CompactSearchResult = SearchResultOf[CompactHit]


#: characters of chunk text a compact search result carries in all (split over its hits; each hit gets at least
#: :data:`MIN_SNIPPET`, at most :data:`MAX_SNIPPET`): rag_search k=10 stays under 6,000 characters of JSON
TEXT_BUDGET = 3200
MIN_SNIPPET, MAX_SNIPPET = 200, 1500
_WORD = re.compile(r"\w{3,}", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def snippet(text: str, query: str, budget: int) -> str:
    """The part of ``text`` (at most ``budget`` characters) around the sentence sharing most words with ``query``;
    "…" marks a cut at either end. Whole ``text`` when it fits."""
    text = " ".join(text.split())
    if len(text) <= budget:
        return text
    words = {w.lower() for w in _WORD.findall(query)}
    starts, pos = [0], 0
    for m in _SENTENCE_END.finditer(text):
        starts.append(m.end())
    best, best_score = 0, -1
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else len(text)
        score = len(words & {w.lower() for w in _WORD.findall(text[s:e])})
        if score > best_score:
            best, best_score = s, score
    pos = best
    if len(text) - pos < budget:  # near the end: show the last ``budget`` characters, cut at a word start
        pos = max(0, len(text) - budget + 1)
        pos = text.find(" ", pos) + 1 if pos > 0 and " " in text[pos:] else pos
    head = "…" if pos > 0 else ""
    room = budget - len(head)
    if len(text) - pos <= room:
        return head + text[pos:]
    cut = text.rfind(" ", pos, pos + room - 1)
    cut = cut if cut > pos else pos + room - 1
    return head + text[pos:cut] + "…"


def _short_section(section: str | None, title: str | None) -> str | None:
    """The heading path without a leading document title; only its innermost heading when still long."""
    if not section:
        return None
    parts = [p.strip() for p in section.split(" > ") if p.strip()]
    if len(parts) > 1 and title and parts[0].lower() == title.strip().lower():
        parts = parts[1:]
    short = " > ".join(parts)
    return parts[-1] if len(short) > 80 and parts else short or None


def compact(full: SearchResultDict, query: str) -> CompactSearchResult:
    """A compact search result from the full one (``aisac_core.rag.search.SearchResult.as_dict``): each hit keeps
    ``chunk_id`` (its anchor id), ``doc_id``, ``title``, ``page``, a short ``section``, ``score`` and a ``text``
    snippet (:func:`snippet`, the budget split over the hits)."""
    hits = full.get("hits") or []
    per_hit = max(MIN_SNIPPET, min(MAX_SNIPPET, TEXT_BUDGET // max(1, len(hits))))
    out_hits: list[CompactHit] = []
    for h in hits:
        ch: CompactHit = {
            "chunk_id": h["chunk_id"],
            "doc_id": h.get("doc_id"),
            "title": h.get("title"),
            "page": h.get("page"),
            "section": _short_section(h.get("section"), h.get("title")),
            "score": h.get("score"),
            "text": snippet(h.get("text") or "", query, per_hit),
        }
        if "relevance" in h:
            ch["relevance"] = h["relevance"]
        a = h.get("anchor") or {}
        if a.get("source") == "ocr":
            ch["source"] = "ocr"
            ch["ocr_confidence"] = a.get("ocr_confidence")
        out_hits.append(ch)
    out: CompactSearchResult = {
        "hits": out_hits,
        "count": full["count"],
        "mode": full["mode"],
        "took_ms": full["took_ms"],
    }
    if "message" in full:
        out["message"] = full["message"]
    if "no_relevant_passage" in full:
        out["no_relevant_passage"] = full["no_relevant_passage"]
    if "note" in full:
        out["note"] = full["note"]
    return out
