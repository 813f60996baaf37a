"""OpenAlex client: ``/works`` search, single works by DOI / PMID / PMCID / W id, references and citations.

API (docs.openalex.org, "Works"): ``GET /works?search=..&per-page=N`` (per-page up to 200) returns
``{"meta": {...}, "results": [...]}``; ``GET /works/{id}`` accepts ``W123``, ``https://doi.org/<doi>``,
``pmid:<n>`` and ``pmcid:<id>``. Years filter with ``filter=publication_year:YYYY-YYYY``; citing works with
``filter=cites:W123``; works by id with ``filter=openalex:W1|W2``. Abstracts come as an inverted index
(word -> positions) and are rebuilt. ``mailto`` joins the polite pool.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from aisac_core.literature.http import NotFound
from aisac_core.literature.paper import Paper, parse_arxiv_id

if TYPE_CHECKING:
    from aisac_core.literature.http import Fetcher

SERVICE = "openalex"
MAX_RESULTS = 200


def rebuild_abstract(inv: dict[str, list[int]] | None) -> str | None:
    """Text from OpenAlex's ``abstract_inverted_index``."""
    if not inv:
        return None
    pos = sorted((i, w) for w, idx in inv.items() for i in idx)
    return " ".join(w for _i, w in pos) or None


def _tail(url: str | None) -> str | None:
    return url.rstrip("/").rsplit("/", 1)[-1] if url else None


def to_paper(w: dict[str, Any]) -> Paper:
    """An OpenAlex work as a :class:`Paper`."""
    ids = w.get("ids") or {}
    wid = _tail(w.get("id")) or ""
    pmid = _tail(ids.get("pmid"))
    pmcid = _tail(ids.get("pmcid"))
    if pmcid and not pmcid.upper().startswith("PMC"):
        pmcid = "PMC" + pmcid
    arxiv = None
    for loc in w.get("locations") or []:
        lp = (loc or {}).get("landing_page_url") or ""
        if "arxiv.org/abs/" in lp:
            arxiv = parse_arxiv_id(lp)
            break
    oa = w.get("open_access") or {}
    best = w.get("best_oa_location") or {}
    src = (w.get("primary_location") or {}).get("source") or {}
    return Paper(
        source=SERVICE,
        source_id=wid,
        openalex_id=wid,
        doi=w.get("doi"),
        title=w.get("title") or w.get("display_name"),
        authors=[
            (a.get("author") or {}).get("display_name") or a.get("raw_author_name") or ""
            for a in w.get("authorships") or []
        ],
        year=w.get("publication_year"),
        venue=src.get("display_name"),
        abstract=rebuild_abstract(w.get("abstract_inverted_index")),
        pmid=pmid,
        pmcid=pmcid,
        arxiv_id=arxiv,
        url=w.get("doi") or w.get("id"),
        pdf_url=best.get("pdf_url") or oa.get("oa_url"),
        open_access=oa.get("is_oa"),
        citation_count=w.get("cited_by_count"),
    )


def _parse_list(text: str) -> list[Paper]:
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ValueError("no results in the OpenAlex answer")
    return [to_paper(w) for w in data["results"]]


def _parse_one(text: str) -> tuple[Paper, list[str]]:
    data = json.loads(text)
    if not isinstance(data, dict) or not data.get("id"):
        raise ValueError("no work id in the OpenAlex answer")
    return to_paper(data), [_tail(r) or "" for r in data.get("referenced_works") or []]


def _polite(f: Fetcher) -> dict[str, Any]:
    return {"mailto": f.lit.mailto} if f.lit.mailto else {}


def work_path(kind: str, value: str) -> str:
    """The ``/works/{id}`` id for an identifier kind (doi, pmid, pmcid, openalex)."""
    return {"doi": f"https://doi.org/{value}", "pmid": f"pmid:{value}", "pmcid": f"pmcid:{value}", "openalex": value}[
        kind
    ]


async def search(
    f: Fetcher, query: str, k: int, year_from: int | None = None, year_to: int | None = None
) -> list[Paper]:
    """Up to ``k`` (≤ :data:`MAX_RESULTS`) works for ``query`` by relevance."""
    base = f.lit.openalex_url.rstrip("/")
    params: dict[str, Any] = {"search": query, "per-page": min(k, MAX_RESULTS), **_polite(f)}
    if year_from and year_to:
        params["filter"] = f"publication_year:{year_from}-{year_to}"
    elif year_from:
        params["filter"] = f"publication_year:>{year_from - 1}"
    elif year_to:
        params["filter"] = f"publication_year:<{year_to + 1}"
    papers, _c = await f.fetch(SERVICE, f"{base}/works", params, _parse_list, base_url=base)
    return papers


async def get_with_refs(f: Fetcher, kind: str, value: str) -> tuple[Paper, list[str]]:
    """The work and its referenced work ids. Raises NotFound on 404."""
    base = f.lit.openalex_url.rstrip("/")
    try:
        return (
            await f.fetch(SERVICE, f"{base}/works/{work_path(kind, value)}", _polite(f), _parse_one, base_url=base)
        )[0]
    except NotFound as exc:
        raise NotFound(SERVICE, f"OpenAlex has no work for {kind} {value}") from exc


async def get(f: Fetcher, kind: str, value: str) -> Paper:
    """The work for an identifier of ``kind`` doi / pmid / pmcid / openalex. Raises NotFound on 404."""
    return (await get_with_refs(f, kind, value))[0]


async def references(f: Fetcher, kind: str, value: str, k: int) -> list[Paper]:
    """Works the paper cites (its ``referenced_works``, fetched in one ``filter=openalex:`` call, ≤ 100)."""
    _paper, refs = await get_with_refs(f, kind, value)
    refs = [r for r in refs if re.match(r"^W\d+$", r)][: min(k, 100)]
    if not refs:
        return []
    base = f.lit.openalex_url.rstrip("/")
    params = {"filter": "openalex:" + "|".join(refs), "per-page": len(refs), **_polite(f)}
    papers, _c = await f.fetch(SERVICE, f"{base}/works", params, _parse_list, base_url=base)
    return papers


async def citations(f: Fetcher, kind: str, value: str, k: int) -> list[Paper]:
    """Works citing the paper (``filter=cites:W..``), up to ``k`` (≤ 200)."""
    paper = await get(f, kind, value)
    base = f.lit.openalex_url.rstrip("/")
    params = {"filter": f"cites:{paper.openalex_id}", "per-page": min(k, MAX_RESULTS), **_polite(f)}
    papers, _c = await f.fetch(SERVICE, f"{base}/works", params, _parse_list, base_url=base)
    return papers
