"""Semantic Scholar Academic Graph API client, written from its public documentation
(api.semanticscholar.org/api-docs/graph):

- ``GET /paper/search?query=..&limit=N&fields=..&year=YYYY-YYYY`` (limit ≤ 100) ->
  ``{"total", "offset", "next", "data": [paper, ...]}``;
- ``GET /paper/{paper_id}?fields=..`` -> paper; ``paper_id`` is the S2 sha, ``CorpusId:n``, ``DOI:..``,
  ``ARXIV:..`` (no version), ``PMID:..``, ``PMCID:..`` or ``URL:..``; 404 ``{"error": "Paper not found"}``;
- ``GET /paper/{paper_id}/references?fields=..&limit=N`` -> ``{"data": [{"citedPaper": paper}]}`` and
  ``/citations`` -> ``{"data": [{"citingPaper": paper}]}`` (limit ≤ 1000).

A paper has ``paperId, externalIds {DOI, ArXiv, PubMed, PubMedCentral, CorpusId}, url, title, abstract, venue,
year, citationCount, isOpenAccess, openAccessPdf {url}, authors [{name}]``. The API key (optional) goes in the
``x-api-key`` header, read from the environment variable named by ``lit_s2_api_key_env``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aisac_core.literature.http import NotFound
from aisac_core.literature.paper import Paper, strip_version

if TYPE_CHECKING:
    from aisac_core.literature.http import Fetcher

SERVICE = "semantic_scholar"
MAX_RESULTS = 100
MAX_GRAPH = 1000
FIELDS = (
    "paperId,externalIds,url,title,abstract,venue,year,citationCount,isOpenAccess,openAccessPdf,authors,"
    "journal,publicationDate"
)


def to_paper(d: dict[str, Any] | None) -> Paper | None:
    """An S2 paper object as a :class:`Paper` (None when it is not an object or has no paperId, e.g. an unresolved
    reference)."""
    if not isinstance(d, dict) or not d.get("paperId"):
        return None
    ext = d.get("externalIds") or {}
    pmc = ext.get("PubMedCentral")
    oapdf = (d.get("openAccessPdf") or {}).get("url") or None
    venue = d.get("venue") or ((d.get("journal") or {}).get("name"))
    return Paper(
        source=SERVICE,
        source_id=d["paperId"],
        s2_id=d["paperId"],
        title=d.get("title"),
        authors=[a.get("name", "") for a in d.get("authors") or [] if a.get("name")],
        year=d.get("year"),
        venue=venue or None,
        abstract=d.get("abstract"),
        doi=ext.get("DOI"),
        arxiv_id=ext.get("ArXiv"),
        pmid=str(ext["PubMed"]) if ext.get("PubMed") else None,
        pmcid=f"PMC{pmc}" if pmc else None,
        url=d.get("url"),
        pdf_url=oapdf,
        open_access=d.get("isOpenAccess"),
        citation_count=d.get("citationCount"),
    )


def paper_id(kind: str, value: str) -> str:
    """The S2 ``paper_id`` for an identifier kind (doi, arxiv, pmid, pmcid, s2)."""
    if kind == "doi":
        return f"DOI:{value}"
    if kind == "arxiv":
        return f"ARXIV:{strip_version(value)}"
    if kind == "pmid":
        return f"PMID:{value}"
    if kind == "pmcid":
        return f"PMCID:{value.upper().removeprefix('PMC')}"
    return value


def _headers(f: Fetcher) -> dict[str, str]:
    key = os.environ.get(f.lit.s2_api_key_env)
    return {"x-api-key": key} if key else {}


def _parse_search(text: str) -> list[Paper]:
    data = json.loads(text)
    if not isinstance(data, dict) or "data" not in data and "total" not in data:
        raise ValueError("no data in the Semantic Scholar answer")
    return [p for p in (to_paper(d) for d in data.get("data") or []) if p]


def _parse_one(text: str) -> Paper:
    p = to_paper(json.loads(text))
    if p is None:
        raise ValueError("no paperId in the Semantic Scholar answer")
    return p


def _parse_edges(key: str) -> Callable[[str], list[Paper]]:
    def parse(text: str) -> list[Paper]:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise ValueError("no data list in the Semantic Scholar answer")
        return [p for p in (to_paper((e or {}).get(key)) for e in data["data"]) if p]

    return parse


async def search(
    f: Fetcher, query: str, k: int, year_from: int | None = None, year_to: int | None = None
) -> list[Paper]:
    """Up to ``k`` (≤ :data:`MAX_RESULTS`) papers for ``query`` by relevance."""
    base = f.lit.s2_url.rstrip("/")
    params: dict[str, Any] = {"query": query, "limit": min(k, MAX_RESULTS), "fields": FIELDS}
    if year_from or year_to:
        params["year"] = f"{year_from or ''}-{year_to or ''}"
    papers, _c = await f.fetch(
        SERVICE, f"{base}/paper/search", params, _parse_search, headers=_headers(f), base_url=base
    )
    return papers


async def get(f: Fetcher, kind: str, value: str) -> Paper:
    """The paper for an identifier. Raises NotFound on 404."""
    base = f.lit.s2_url.rstrip("/")
    pid = paper_id(kind, value)
    try:
        paper, _c = await f.fetch(
            SERVICE,
            f"{base}/paper/{quote(pid, safe=':/')}",
            {"fields": FIELDS},
            _parse_one,
            headers=_headers(f),
            base_url=base,
        )
    except NotFound as exc:
        raise NotFound(SERVICE, f"Semantic Scholar has no paper {pid}") from exc
    return paper


async def _edges(f: Fetcher, kind: str, value: str, k: int, which: str, key: str) -> list[Paper]:
    base = f.lit.s2_url.rstrip("/")
    pid = paper_id(kind, value)
    try:
        papers, _c = await f.fetch(
            SERVICE,
            f"{base}/paper/{quote(pid, safe=':/')}/{which}",
            {"fields": FIELDS, "limit": min(k, MAX_GRAPH)},
            _parse_edges(key),
            headers=_headers(f),
            base_url=base,
        )
    except NotFound as exc:
        raise NotFound(SERVICE, f"Semantic Scholar has no paper {pid}") from exc
    return papers


async def references(f: Fetcher, kind: str, value: str, k: int) -> list[Paper]:
    """Papers the paper cites (up to ``k`` ≤ 1000)."""
    return await _edges(f, kind, value, k, "references", "citedPaper")


async def citations(f: Fetcher, kind: str, value: str, k: int) -> list[Paper]:
    """Papers citing the paper (up to ``k`` ≤ 1000)."""
    return await _edges(f, kind, value, k, "citations", "citingPaper")
