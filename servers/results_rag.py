"""Result shapes of the rag server's tools (their output schemas in ``tools/list``) and the compact search result.

The tools return the plain dicts :mod:`aisac_core.rag` builds (and, for ``rag_search``, the compact hits the adapter
derives from them: :func:`compact`). A host's model pays for every schema token in every conversation, so the
types declare the keys a model works with; the others (hashes, sizes, times, bookkeeping) pass through undeclared
(``extra="allow"``: kept in the result, and no ``additionalProperties: false``) and are named in the tool's
description. Optional keys are ``NotRequired``, ``| None`` where the core gives None.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict
from typing_extensions import NotRequired, TypedDict

from .results_schema import schema

_OPEN = ConfigDict(extra="allow")  # results carry more keys than declared (listed in the tool's description)


class Hit(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]  # detail="full" adds path, anchor, ...
    chunk_id: str
    doc_id: str | None
    title: str | None
    page: int | None
    section: str | None
    score: float | None
    text: str | None


class FullHit(Hit):
    path: str | None
    anchor: dict[str, Any]  # AnchorDict's keys, named in rag_get_chunk's description (fewer schema tokens)


class SearchResult(TypedDict):
    hits: list[Hit]
    count: int
    mode: str
    took_ms: float
    message: NotRequired[str]


class Overview(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    doc_id: str
    title: str | None
    path: str
    pages: int | None
    metadata: dict[str, Any]
    sections: list[dict[str, Any]]
    labels: dict[str, Any]
    captions: list[dict[str, Any]]


class SectionText(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    doc_id: str
    title: str | None
    text: str
    blocks: list[dict[str, Any]]
    tokens: int
    total_tokens: int
    next_cursor: int | None


class Verification(TypedDict):
    status: Literal["ok", "file_changed", "chunk_changed", "missing"]
    chunk_id: str | None
    doc_id: str | None
    path: str | None
    detail: str
    sha256_now: str | None
    current_chunk_id: str | None


class DocumentRow(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    doc_id: str
    title: str | None
    path: str
    status: str
    error: str | None


class Documents(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    documents: list[DocumentRow]
    total: int
    next_offset: int | None


class Removed(TypedDict):
    removed: str
    chunks_deleted: int


class CatalogEntry(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    path: str
    file_type: str | None
    meta: dict[str, Any]


class Catalog(TypedDict):
    entries: list[CatalogEntry]
    total: int
    next_offset: int | None


class StoreStatus(TypedDict):
    __pydantic_config__ = _OPEN  # type: ignore[misc]
    documents: dict[str, int]
    chunks_in_vector_store: int
    stale_documents: int
    recent_jobs: list[dict[str, Any]]
    permission_warnings: list[str]


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


def compact(full: dict[str, Any], query: str) -> dict[str, Any]:
    """A compact search result from the full one (``aisac_core.rag.search.SearchResult.as_dict``): each hit keeps
    ``chunk_id`` (its anchor id), ``doc_id``, ``title``, ``page``, a short ``section``, ``score`` and a ``text``
    snippet (:func:`snippet`, the budget split over the hits)."""
    hits = full.get("hits") or []
    per_hit = max(MIN_SNIPPET, min(MAX_SNIPPET, TEXT_BUDGET // max(1, len(hits))))
    out_hits = [{"chunk_id": h["chunk_id"], "doc_id": h.get("doc_id"), "title": h.get("title"), "page": h.get("page"),
                 "section": _short_section(h.get("section"), h.get("title")), "score": h.get("score"),
                 "text": snippet(h.get("text") or "", query, per_hit)} for h in hits]
    return {**full, "hits": out_hits}


def out_schema(tp: Any) -> dict[str, Any]:
    """The lean output schema of ``tp`` (:func:`aisac_servers.results_schema.schema`) with ``required`` kept only
    at the top level: nested rows list their keys and types, the description says which are optional."""
    out = schema(tp)

    def strip(node: Any) -> Any:
        if isinstance(node, list):
            return [strip(x) for x in node]
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "required"}
        return node

    return {k: (v if k in ("required", "type") else strip(v)) for k, v in out.items()}
