"""The paper-header model (:mod:`aisac_core.rag.headers`) joined with the layout rules of
:mod:`aisac_core.rag.frontmatter`: the header zone of a first page, the model's reading of it, the arbitration
between the two readers, and people-shaped author names. docs/rag.md, "Header model"."""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from aisac_core.rag.frontmatter import _AFFILIATION, _EMAIL, _POSTAL, FrontMatter, _key, front_matter, pdf_info
from aisac_core.rag.headers import UNCERTAIN_BELOW, HeaderFields, header_model, tokens_from_lines
from aisac_core.rag.people import author_names, linked_affiliations

#: a model title or author list at or above this calibrated probability replaces a differing rules answer
#: (chosen a priori, docs/rag.md "Header model": where two readers differ, the model must be quite sure)
MODEL_OVERRIDES = 0.9
#: how a section heading that ends the header zone starts ("1 Introduction", "I. INTRODUCTION", "Background")
_BODY_START = re.compile(
    r"^((\d{1,2}|[IVX]{1,4})\.?\s+)?(introduction|background|motivation|overview)\s*$|^(\d{1,2}\.?)\s+[A-Z][a-z]+", re.I
)


def header_zone(ordered: Sequence[Any], limit: int = 140) -> list[Any]:
    """The lines of a first page (in reading order) that GROBID's header model sees: from the top down to the
    first body section heading ("1 Introduction", "I. INTRODUCTION"; the shared corpus README: the header zone
    ends where the body starts), at most ``limit`` lines."""
    out: list[Any] = []
    for ln in ordered:
        t = ln.text.strip()
        if out and len(t) <= 60 and _BODY_START.match(t) and not re.search(r"\d{4}|@", t):
            break
        out.append(ln)
        if len(out) >= limit:
            break
    return out


def read_header(ordered: Sequence[Any]) -> HeaderFields | None:
    """What the shipped header model (:mod:`aisac_core.rag.headers`) reads on a first page's lines in reading
    order (objects with ``text, l, r, top, h, font``); None when the model is not installed. Errors: none raised."""
    model = header_model()
    if model is None:
        return None
    zone = header_zone(ordered)
    if not zone:
        return None
    hf = model.read(tokens_from_lines(zone))
    hf.zone_lines = zone
    return hf


def _same(a: str, b: str) -> bool:
    ka, kb = _key(a), _key(b)
    return bool(ka) and (ka == kb or SequenceMatcher(None, ka, kb).ratio() >= 0.9)


def model_authors(header: HeaderFields) -> list[str]:
    """The author names of the header model's author fields, people-shaped (:func:`clean_name`), without repeats."""
    out: list[str] = []
    seen: set[str] = set()
    for text in header.authors_text:
        for n in author_names(text):
            c = clean_name(n)
            if c and _key(c) not in seen:
                seen.add(_key(c))
                out.append(c)
    return out[:50]


def clean_name(name: str) -> str | None:
    """A person's name as printed, tidied: ALL-CAPS words title-cased (initials and particles kept), initials
    glued to a surname spaced ("A.K.Bakarov" -> "A.K. Bakarov"), an e-mail, address or affiliation never a name
    (None), 1-6 words of which one at least is not an initial."""
    s = " ".join(name.split()).strip(" ,;:")
    if not s or _EMAIL.search(s) or _POSTAL.search(s) or _AFFILIATION.search(s):
        return None
    words = s.split()
    if len(words) > 6 or not any(len(w.strip(".")) > 1 for w in words):
        return None
    if s.isupper() and len(s) > 3:
        s = " ".join(w if re.fullmatch(r"([A-Z]\.)+|[A-Z]", w) else w.capitalize() for w in words)
    return re.sub(r"(?<=[A-Z]\.)(?=[A-Z][a-z\u00e0-\u017f]{2,})", " ", s)


def _title_then_authors(fm: FrontMatter, model_title: str) -> bool:
    """Whether the model's title is the rules' title followed by the author line the rules read (the model ran
    the title on into the names under it): the readers agree on the title."""
    kt, km = _key(fm.title or ""), _key(model_title)
    if not kt or not km.startswith(kt) or km == kt or not fm.authors:
        return False
    rest = model_title[len(fm.title or "") :] if model_title.startswith(fm.title or "") else model_title
    names = {_key(n) for n in author_names(rest)}
    return bool(names) and names <= {_key(n) for n in fm.authors}


def arbitrate(fm: FrontMatter, header: HeaderFields, first_lines: Sequence[Any]) -> FrontMatter:
    """The rules' answer ``fm`` and the header model's ``header`` made one (docs/rag.md, "Header model"):

    - title: where both readers agree (same letters, or 90 % alike, or the model's title is the rules' title run
      on into the rules' author line) the rules' text stays and its confidence is
      the model's calibrated probability; where the rules found none, or a different rules-only ("layout")
      title, the model's title is taken when its probability is at least :data:`MODEL_OVERRIDES` (a page
      extract has no title: a guess of the model stays out); otherwise the rules' title stays with confidence
      min(its rule score, 1 - the model's probability) - the model's probability that *its* different title
      is right bounds the rules' one;
    - authors: the same with the author lists (agreement: the same first author and at least half the names;
      a sure model's list that holds the rules' names and more replaces theirs).

    A field whose confidence ends below :data:`UNCERTAIN_BELOW` is flagged uncertain, unless both readers agree
    on it (the calibrated probability is then a conservative lower bound). Errors: none raised."""
    p_t = header.title_confidence if header.title else 0.0
    if header.title:
        if fm.title and (_same(fm.title, header.title) or _title_then_authors(fm, header.title)):
            fm.confidence, fm.title_reader = p_t, "both"
        elif not fm.title and p_t >= MODEL_OVERRIDES:
            fm.title, fm.title_lines, fm.title_source = header.title, _lines_of(header, first_lines), "layout"
            fm.confidence, fm.title_reader = p_t, "model"
        elif fm.title and fm.title_source == "layout" and p_t >= MODEL_OVERRIDES:
            fm.title, fm.title_lines = header.title, _lines_of(header, first_lines)
            fm.confidence, fm.title_reader = p_t, "model"
        elif fm.title:
            fm.confidence = round(min(fm.confidence, 1.0 - p_t), 3)
    elif fm.title and fm.title_source == "layout":
        fm.confidence = round(min(fm.confidence, 0.5), 3)  # the model sees no title where the rules see one
    names = model_authors(header)
    p_a = header.authors_confidence if names else 0.0
    if names:
        keys = [_key(n) for n in fm.authors]
        mk = [_key(n) for n in names]
        agree = bool(keys) and keys[0] == mk[0] and len(set(keys) & set(mk)) >= 0.5 * max(len(keys), len(mk))
        if agree:
            fm.authors_confidence, fm.authors_reader = p_a, "both"
            if p_a >= MODEL_OVERRIDES and set(keys) < set(mk) and fm.authors_source == "layout":
                fm.authors = names  # the model is sure of names the rules missed
        elif not fm.authors and p_a >= MODEL_OVERRIDES:
            fm.authors, fm.authors_source, fm.authors_confidence, fm.authors_reader = names, "layout", p_a, "model"
        elif fm.authors and fm.authors_source == "layout" and p_a >= MODEL_OVERRIDES:
            fm.authors, fm.authors_confidence, fm.authors_reader = names, p_a, "model"
        elif fm.authors:
            fm.authors_confidence = round(min(fm.authors_confidence, 1.0 - p_a), 3)
    by_key = {_key(n): n for n in fm.authors}
    fm.affiliations = {
        by_key[_key(n)]: affs
        for n, affs in linked_affiliations(header.authors_text, header.affiliations_text).items()
        if _key(n) in by_key
    }
    # two readers that agree (the rules and the model, independent of each other) are not flagged: the model's
    # probability is a lower bound there (its calibration does not know the agreement)
    fm.title_uncertain = bool(fm.title) and fm.confidence < UNCERTAIN_BELOW and fm.title_reader != "both"
    fm.authors_uncertain = bool(fm.authors) and fm.authors_confidence < UNCERTAIN_BELOW and fm.authors_reader != "both"
    return fm


def _lines_of(header: HeaderFields, first_lines: Sequence[Any]) -> list[Any]:
    """The first-page line objects the model's title tokens come from (``line_no`` indexes the header zone,
    whose lines are objects of ``first_lines``)."""
    zone_lines = header.zone_lines
    ids = {header.token_lines[i] for i in header.title_tokens if 0 <= header.token_lines[i] < len(zone_lines)}
    wanted = {id(zone_lines[i]) for i in ids}
    return [x for x in first_lines if id(x) in wanted]


def document_front_matter(
    lines: dict[int, list[Any]],
    sizes: dict[int, tuple[float, float]],
    body_h: float,
    body_font: str,
    path: str | Path | None,
    ordered_first: Sequence[Any] | None = None,
) -> FrontMatter:
    """:func:`front_matter` of a parsed PDF: ``lines`` are the text lines per page (1-based page numbers, page
    margins already stripped), ``sizes`` the page sizes, ``body_h`` / ``body_font`` the body text's line
    height and font, ``path`` the PDF file (its document info is read; None: layout only). The top 12 % of
    every other page gives the running headers and banners; ``ordered_first``: the first page's lines in reading
    order, read by the header model (None: the rules alone). Errors: none raised."""
    if not sizes:
        return FrontMatter()
    first = min(sizes)
    others = [x for p, ls in lines.items() if p != first for x in ls if x.top < 0.12 * sizes[p][1]]
    info = pdf_info(path) if path else {}
    fm = front_matter(lines.get(first, []), sizes[first], body_h, body_font, others, info)
    header = read_header(ordered_first) if ordered_first is not None else None
    return arbitrate(fm, header, lines.get(first, [])) if header is not None else fm
