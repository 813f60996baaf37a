"""Crossref REST API client: ``/works`` search and ``/works/{doi}``.

API (Crossref REST API docs, api.crossref.org/swagger-ui): ``GET /works?query=..&rows=N`` (rows up to 1000)
returns ``{"status": "ok", "message": {"items": [...]}}``; ``GET /works/{doi}`` returns ``{"message": {...}}``
or 404 ``Resource not found.``. Years filter with ``filter=from-pub-date:YYYY,until-pub-date:YYYY``. The
polite pool is joined with ``mailto`` (the configured ``lit_mailto``).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aisac_core.literature.http import NotFound
from aisac_core.literature.paper import Paper

if TYPE_CHECKING:
    from aisac_core.literature.http import Fetcher

SERVICE = "crossref"
MAX_RESULTS = 1000


def _strip_tags(s: str | None) -> str | None:
    if not s:
        return None
    return " ".join(re.sub(r"<[^>]+>", " ", s).split()) or None


def _year(item: dict[str, Any]) -> int | None:
    for key in ("published", "issued", "published-print", "published-online", "created"):
        parts = (item.get(key) or {}).get("date-parts") or [[None]]
        if parts and parts[0] and parts[0][0]:
            return int(parts[0][0])
    return None


def to_paper(item: dict[str, Any]) -> Paper:
    """A Crossref work item as a :class:`Paper`."""
    doi = item.get("DOI")
    authors = []
    for a in item.get("author") or []:
        name = " ".join(x for x in (a.get("given"), a.get("family")) if x) or a.get("name")
        if name:
            authors.append(name)
    title = (item.get("title") or [None])[0]
    venue = (item.get("container-title") or [None])[0]
    pdf = next((lnk.get("URL") for lnk in item.get("link") or [] if lnk.get("content-type") == "application/pdf"), None)
    return Paper(
        source=SERVICE,
        source_id=doi or "",
        doi=doi,
        title=title,
        authors=authors,
        year=_year(item),
        venue=venue,
        abstract=_strip_tags(item.get("abstract")),
        url=item.get("URL"),
        pdf_url=pdf,
        citation_count=item.get("is-referenced-by-count"),
    )


def _parse_list(text: str) -> list[Paper]:
    data = json.loads(text)
    msg = data.get("message") if isinstance(data, dict) else None
    if not isinstance(msg, dict) or not isinstance(msg.get("items"), list):
        raise ValueError("no message.items in the Crossref answer")
    return [to_paper(it) for it in msg["items"] if it.get("DOI")]


def _parse_one(text: str) -> Paper:
    data = json.loads(text)
    msg = data.get("message") if isinstance(data, dict) else None
    if not isinstance(msg, dict) or not msg.get("DOI"):
        raise ValueError("no message.DOI in the Crossref answer")
    return to_paper(msg)


def _polite(f: Fetcher) -> dict[str, Any]:
    return {"mailto": f.lit.mailto} if f.lit.mailto else {}


async def search(
    f: Fetcher, query: str, k: int, year_from: int | None = None, year_to: int | None = None
) -> list[Paper]:
    """Up to ``k`` (≤ :data:`MAX_RESULTS`) works for ``query`` by relevance."""
    base = f.lit.crossref_url.rstrip("/")
    params: dict[str, Any] = {"query": query, "rows": min(k, MAX_RESULTS), **_polite(f)}
    flt = [
        x
        for x in (f"from-pub-date:{year_from}" if year_from else None, f"until-pub-date:{year_to}" if year_to else None)
        if x
    ]
    if flt:
        params["filter"] = ",".join(flt)
    papers, _c = await f.fetch(SERVICE, f"{base}/works", params, _parse_list, base_url=base)
    return papers


async def get(f: Fetcher, doi: str) -> Paper:
    """The work with ``doi`` (normalised). Raises NotFound on 404."""
    base = f.lit.crossref_url.rstrip("/")
    try:
        paper, _c = await f.fetch(SERVICE, f"{base}/works/{quote(doi, safe='')}", _polite(f), _parse_one, base_url=base)
    except NotFound as exc:
        raise NotFound(SERVICE, f"Crossref has no work with DOI {doi}") from exc
    return paper
