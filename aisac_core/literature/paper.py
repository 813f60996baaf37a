"""The common :class:`Paper` record, identifier parsing and normalisation, and merging across sources.

Identifier forms (:func:`parse_identifier`):

- DOI: ``10.<registrant>/<suffix>``, optionally with ``doi:`` or a resolver prefix (``https://doi.org/``,
  ``http://dx.doi.org/``); normalised to lower case without the prefix (DOIs are case-insensitive,
  DOI Handbook §2.4). The arXiv DOIs ``10.48550/arXiv.<id>`` are read as arXiv ids.
- arXiv: new style ``YYMM.NNNN[N][vV]`` (since 2007) or old style ``archive[.SC]/YYMMNNN[vV]``, optionally
  with ``arXiv:`` or an ``arxiv.org/abs/`` / ``/pdf/`` URL (arXiv help, "Understanding the arXiv identifier").
- PMID: ``pmid:<digits>`` or bare digits (1-9 of them); PMCID: ``PMC<digits>``.
- Semantic Scholar: a 40-hex paper id, ``s2:<id>`` or ``CorpusId:<n>``; OpenAlex: ``W<digits>``.

Merging (:func:`merge_papers`): records are grouped when they share a DOI, an arXiv id (without version),
a PMID, or a normalised title (lower case, letters and digits only) with the same year; within a group the
first non-empty value in source order wins, the citation count is the largest given, and ``sources`` lists
every contributing (source, source_id).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from aisac_core.errors import AisacError

#: the sources, in the order their values win when records merge
SOURCES = ("arxiv", "pubmed", "crossref", "openalex", "semantic_scholar")


class LiteratureError(AisacError):
    """Bad input to a literature tool or an answer that cannot be used; the message says what to do."""


class Paper(BaseModel):
    """One paper as one source (or several, merged) describes it.

    ``doi``: lower case, no resolver prefix; ``arxiv_id``: with version when the source gives one,
    ``arxiv_id_base`` without; ``open_access``: True/False when the source says, else None;
    ``citation_count``: as given by the source (None when not given); ``retrieved_at``: UTC ISO 8601.
    """

    source: str
    source_id: str
    title: str | None = None
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    venue: str | None = None
    abstract: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    arxiv_id_base: str | None = None
    pmid: str | None = None
    pmcid: str | None = None
    s2_id: str | None = None
    openalex_id: str | None = None
    url: str | None = None
    pdf_url: str | None = None
    open_access: bool | None = None
    citation_count: int | None = None
    retrieved_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    sources: list[dict[str, str]] = Field(default_factory=list)

    def model_post_init(self, __context: Any) -> None:  # noqa: D401
        if self.doi:
            self.doi = normalise_doi(self.doi) or self.doi.strip().lower()
        if self.arxiv_id and not self.arxiv_id_base:
            self.arxiv_id_base = strip_version(self.arxiv_id)
        if self.title:
            self.title = " ".join(self.title.split())
        if not self.sources:
            self.sources = [{"source": self.source, "source_id": self.source_id}]


# --------------------------------------------------------------------------------------------------
# identifiers
# --------------------------------------------------------------------------------------------------

_DOI_PREFIX = re.compile(r"^(?:doi:\s*|https?://(?:dx\.)?doi\.org/|(?:dx\.)?doi\.org/)", re.I)
_DOI = re.compile(r"^10\.\d{4,9}/\S+$")
_ARXIV_NEW = re.compile(r"^(\d{4}\.\d{4,5})(v\d+)?$")
_ARXIV_OLD = re.compile(r"^([a-z][a-z\-]+(?:\.[A-Z]{2})?/\d{7})(v\d+)?$")
_ARXIV_PREFIX = re.compile(r"^(?:arxiv:\s*|https?://(?:export\.)?arxiv\.org/(?:abs|pdf)/)", re.I)


def normalise_doi(raw: str) -> str | None:
    """``raw`` as a normalised DOI (lower case, no ``doi:``/resolver prefix), or None when it is not a DOI."""
    s = _DOI_PREFIX.sub("", raw.strip())
    s = s.strip().rstrip(".").lower()
    return s if _DOI.match(s) else None


def strip_version(arxiv_id: str) -> str:
    """An arXiv id without its ``vN`` suffix."""
    return re.sub(r"v\d+$", "", arxiv_id)


def parse_arxiv_id(raw: str) -> str | None:
    """The arXiv id in ``raw`` (with version if given), or None. Accepts ``arXiv:``, abs/pdf URLs, ``.pdf``."""
    s = _ARXIV_PREFIX.sub("", raw.strip())
    s = re.sub(r"\.pdf$", "", s)
    if _ARXIV_NEW.match(s) or _ARXIV_OLD.match(s):
        return s
    return None


def parse_identifier(raw: str) -> tuple[str, str]:
    """Classify an identifier: returns ``(kind, value)`` with kind in doi, arxiv, pmid, pmcid, s2, openalex.

    Raises:
        LiteratureError: empty, a malformed DOI (``10.`` or ``doi:`` that does not parse), or an unknown form.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise LiteratureError(
            "identifier is empty: give a DOI (10.1038/...), an arXiv id (2104.12255), "
            "a PMID (pmid:12345), a PMCID (PMC123456) or a Semantic Scholar id"
        )
    s = raw.strip()
    low = s.lower()
    if low.startswith("10.48550/arxiv.") or "doi.org/10.48550/arxiv." in low:
        aid = parse_arxiv_id(s[low.index("arxiv.") + len("arxiv.") :])
        if aid:
            return "arxiv", aid
    if low.startswith(
        ("10.", "doi:", "https://doi.org", "http://doi.org", "http://dx.doi.org", "https://dx.doi.org", "doi.org/")
    ):
        doi = normalise_doi(s)
        if doi is None:
            raise LiteratureError(
                f"malformed DOI {raw!r}: a DOI is '10.<4-9 digit registrant>/<suffix>' (e.g. 10.1038/nature12373), "
                "optionally prefixed with 'doi:' or 'https://doi.org/'"
            )
        return "doi", doi
    aid = parse_arxiv_id(s)
    if aid:
        return "arxiv", aid
    m = re.match(r"^(?:pmid:\s*)?(\d{1,9})$", s, re.I)
    if m:
        return "pmid", m.group(1)
    m = re.match(r"^(?:pmcid:\s*)?(PMC\d+)$", s, re.I)
    if m:
        return "pmcid", m.group(1).upper()
    m = re.match(r"^(?:s2:\s*)?([0-9a-f]{40})$", s, re.I)
    if m:
        return "s2", m.group(1).lower()
    m = re.match(r"^corpusid:\s*(\d+)$", s, re.I)
    if m:
        return "s2", f"CorpusId:{m.group(1)}"
    m = re.match(r"^(?:https?://openalex\.org/)?(W\d+)$", s, re.I)
    if m:
        return "openalex", m.group(1).upper()
    raise LiteratureError(
        f"unrecognised identifier {raw!r}: give a DOI (10.1038/...), an arXiv id (2104.12255 or hep-th/9901001), "
        "a PMID (pmid:12345 or digits), a PMCID (PMC123456), a Semantic Scholar id (40 hex digits or "
        "CorpusId:123) or an OpenAlex work id (W123)"
    )


# --------------------------------------------------------------------------------------------------
# merging
# --------------------------------------------------------------------------------------------------


def normalise_title(title: str | None) -> str | None:
    """Lower-cased title with accents folded and everything but letters and digits removed (None if empty)."""
    if not title:
        return None
    t = unicodedata.normalize("NFKD", title)
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    t = re.sub(r"[^a-z0-9]+", "", t)
    return t or None


def _keys(p: Paper) -> list[str]:
    keys = []
    if p.doi:
        keys.append("doi:" + p.doi)
    if p.arxiv_id_base:
        keys.append("arxiv:" + p.arxiv_id_base.lower())
    if p.pmid:
        keys.append("pmid:" + p.pmid)
    nt = normalise_title(p.title)
    if nt and p.year:
        keys.append(f"title:{nt}:{p.year}")
    return keys


_MERGE_FIELDS = (
    "title",
    "authors",
    "year",
    "venue",
    "abstract",
    "doi",
    "arxiv_id",
    "arxiv_id_base",
    "pmid",
    "pmcid",
    "s2_id",
    "openalex_id",
    "url",
    "pdf_url",
    "open_access",
)


def _combine(group: list[Paper]) -> Paper:
    order = sorted(group, key=lambda p: SOURCES.index(p.source) if p.source in SOURCES else len(SOURCES))
    first = order[0]
    data = first.model_dump()
    for f in _MERGE_FIELDS:
        for p in order:
            v = getattr(p, f)
            if v not in (None, "", []):
                data[f] = v
                break
    if any(p.open_access for p in order):
        data["open_access"] = True
    counts = [p.citation_count for p in order if p.citation_count is not None]
    data["citation_count"] = max(counts) if counts else None
    # a PDF from arXiv or a stated open-access link is preferred over a publisher link
    oa_pdf = next((p.pdf_url for p in order if p.pdf_url and (p.source == "arxiv" or p.open_access)), None)
    data["pdf_url"] = oa_pdf or data["pdf_url"]
    seen: list[dict[str, str]] = []
    for p in order:
        for s in p.sources:
            if s not in seen:
                seen.append(s)
    data["sources"] = seen
    return Paper(**data)


def merge_papers(ranked: dict[str, list[Paper]], k: int | None = None) -> list[Paper]:
    """Merge per-source ranked lists into one de-duplicated list.

    Groups are formed transitively over shared keys (DOI, arXiv id without version, PMID, normalised
    title + year). Order: reciprocal rank fusion, score = sum over sources of 1 / (60 + rank) (Cormack,
    Clarke & Büttcher, SIGIR 2009, with their k = 60), ties by first appearance. ``k`` truncates.
    """
    items: list[tuple[Paper, float]] = []
    for _source, papers in ranked.items():
        for rank, p in enumerate(papers, 1):
            items.append((p, 1.0 / (60 + rank)))
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, (p, _s) in enumerate(items):
        for key in _keys(p):
            if key in owner:
                a, b = find(i), find(owner[key])
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                owner[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(items)):
        groups.setdefault(find(i), []).append(i)
    scored = []
    for root, idx in groups.items():
        score = sum(items[i][1] for i in idx)
        scored.append((-score, root, _combine([items[i][0] for i in idx])))
    scored.sort(key=lambda t: (t[0], t[1]))
    out = [p for _s, _r, p in scored]
    return out[:k] if k is not None else out
