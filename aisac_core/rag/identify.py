"""Identifiers first: a paper that prints its DOI or arXiv id (or carries it in the PDF's metadata) is looked up
by it, and the registry's title and authors win over the layout reading (what reference managers do).

The lookup is a :class:`aisac_core.ports.PaperLookup` the composition root hands to the rag service (backed by the
literature service: cached, rate-limited, replayable); rag never imports the literature package. It runs when an
overview is asked for, so a lookup that could not be answered (offline) fills in at a later overview once the
network is back: the layout reading stands meanwhile and says so (``title_source: "layout"``,
``identifier_lookup: "unanswered"``).

A registry record is taken only when it is about this file: its title is printed in the first pages' text, or is
at least 80 % alike (difflib ratio of the letter keys) to the layout title - a DOI cited in the first page's text
(data sets, companion papers) names another paper.
"""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher
from typing import Any

from aisac_core.ports import PaperLookup


def _key(t: str) -> str:
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", t).casefold())


def identifier_of(meta: dict[str, Any]) -> str | None:
    """The identifier to look a document up by: its DOI, else ``arXiv:<id>``, else None."""
    if meta.get("doi"):
        return str(meta["doi"])
    if meta.get("arxiv_id"):
        return "arXiv:" + str(meta["arxiv_id"])
    return None


def apply_identifier(meta: dict[str, Any], first_text: str, lookup: PaperLookup | None) -> dict[str, Any]:
    """``meta`` (an overview's metadata: title, authors, doi, arxiv_id, ...) with the registry's title and authors
    when its identifier answers (``title_source`` / ``authors_source`` = the registry: "crossref", "arxiv",
    "openalex", ...; the layout's reading kept in ``layout_title`` / ``layout_authors``; confidences 1.0, not
    uncertain). Without an identifier or a lookup ``meta`` is returned unchanged; an unanswered lookup sets
    ``identifier_lookup: "unanswered"`` (the layout answers alone), a record about another paper
    ``"mismatch"``. ``first_text``: the text of the document's first pages. Errors: none raised."""
    ident = identifier_of(meta)
    if ident is None or lookup is None:
        return meta
    out = dict(meta)
    out["identifier"] = ident
    rec = lookup.lookup(ident)
    if rec is None or not rec.get("title"):
        out["identifier_lookup"] = "unanswered"
        return out
    title = " ".join(str(rec["title"]).split())
    title = re.sub(r"\s*<[^>]+>\s*", " ", title).strip()  # Crossref titles may carry JATS markup
    tk = _key(title)
    alike = bool(meta.get("title")) and SequenceMatcher(None, tk, _key(str(meta["title"]))).ratio() >= 0.8
    if not tk or not (tk in _key(first_text) or alike):
        out["identifier_lookup"] = "mismatch"
        return out
    out.update(
        identifier_lookup="answered",
        layout_title=meta.get("title"),
        layout_authors=list(meta.get("authors") or []),
        title=title,
        title_source=rec.get("source") or "literature",
        confidence=1.0,
        title_confidence=1.0,
        title_uncertain=False,
    )
    if rec.get("authors"):
        out.update(
            authors=[str(a) for a in rec["authors"]],
            authors_source=rec.get("source") or "literature",
            authors_confidence=1.0,
            authors_uncertain=False,
        )
    return out
