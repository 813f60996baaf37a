"""arXiv API client (Atom feed): search and look-up by id.

API: ``GET <lit_arxiv_url>?search_query=...&id_list=...&start=0&max_results=N`` returns an Atom 1.0 feed with
``opensearch:totalResults`` and one ``entry`` per paper (arXiv API User Manual, "Query interface" and
"Details of the Atom results"). ``max_results`` is capped at 2000 per call (User Manual §3.1.1.3). A bad id
gives an error entry (``<id>...api/errors#...</id>``, HTTP 400); an unknown id gives an empty feed.
Politeness (one request per 3 s, one connection) is enforced by :mod:`.http`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from aisac_core.literature.http import NotFound
from aisac_core.literature.paper import LiteratureError, Paper, parse_arxiv_id

if TYPE_CHECKING:
    from aisac_core.literature.http import Fetcher
    from aisac_core.settings import LiteratureSettings

SERVICE = "arxiv"
MAX_RESULTS = 2000
NS = {
    "a": "http://www.w3.org/2005/Atom",
    "arxiv": "http://arxiv.org/schemas/atom",
    "os": "http://a9.com/-/spec/opensearch/1.1/",
}


def build_query(query: str, year_from: int | None, year_to: int | None) -> str:
    """arXiv ``search_query``: a query with a field prefix (``ti:``, ``au:``, ``abs:``, ``all:``...) is kept,
    else every word becomes ``all:word`` joined with AND; years add ``submittedDate:[YYYY01010000 TO ...]``."""
    q = query.strip()
    if not re.search(r"\b(ti|au|abs|co|jr|cat|rn|id|all|submittedDate):", q):
        words = [w for w in re.findall(r"[\w\-\.]+", q) if w.upper() not in {"AND", "OR", "ANDNOT"}]
        q = " AND ".join(f"all:{w}" for w in words) or f'all:"{q}"'
    if year_from or year_to:
        lo = f"{year_from or 1991}01010000"
        hi = f"{year_to or 9999}12312359"
        q = f"({q}) AND submittedDate:[{lo} TO {hi}]"
    return q


def parse_feed(text: str, lit: LiteratureSettings) -> list[Paper]:
    """Papers of an Atom feed. Raises LiteratureError for an arXiv error entry, ParseError for bad XML."""
    root = ET.fromstring(text.encode("utf-8") if isinstance(text, str) else text)
    if root.tag != f"{{{NS['a']}}}feed":
        raise ValueError(f"not an Atom feed (root element {root.tag})")
    out: list[Paper] = []
    for e in root.findall("a:entry", NS):
        eid = (e.findtext("a:id", "", NS) or "").strip()
        if "/api/errors" in eid:
            raise LiteratureError(f"arXiv refused the request: {(e.findtext('a:summary', '', NS) or '').strip()}")
        aid = parse_arxiv_id(eid.rsplit("/abs/", 1)[-1]) or eid.rsplit("/abs/", 1)[-1]
        published = e.findtext("a:published", "", NS) or ""
        doi = e.findtext("arxiv:doi", None, NS)
        pdf = next((lnk.get("href") for lnk in e.findall("a:link", NS) if lnk.get("title") == "pdf"), None)
        out.append(
            Paper(
                source=SERVICE,
                source_id=aid,
                title=(e.findtext("a:title", "", NS) or "").strip() or None,
                authors=[(a.findtext("a:name", "", NS) or "").strip() for a in e.findall("a:author", NS)],
                year=int(published[:4]) if published[:4].isdigit() else None,
                venue=(e.findtext("arxiv:journal_ref", None, NS) or None),
                abstract=" ".join((e.findtext("a:summary", "", NS) or "").split()) or None,
                doi=doi.strip() if doi else None,
                arxiv_id=aid,
                url=f"https://arxiv.org/abs/{aid}",
                pdf_url=lit.arxiv_pdf_url.format(id=aid) if pdf or aid else None,
                open_access=True,
            )
        )
    return out


async def search(
    f: Fetcher, query: str, k: int, year_from: int | None = None, year_to: int | None = None
) -> list[Paper]:
    """Up to ``k`` (≤ :data:`MAX_RESULTS`) papers for ``query``, by relevance."""
    lit = f.lit
    params = {
        "search_query": build_query(query, year_from, year_to),
        "start": 0,
        "max_results": min(k, MAX_RESULTS),
        "sortBy": "relevance",
        "sortOrder": "descending",
    }
    papers, _cached = await f.fetch(
        SERVICE, lit.arxiv_url, params, lambda t: parse_feed(t, lit), base_url=lit.arxiv_url
    )
    return papers


async def get(f: Fetcher, arxiv_id: str) -> Paper:
    """The paper with ``arxiv_id`` (with or without version). Raises NotFound for an empty feed."""
    lit = f.lit
    params = {"id_list": arxiv_id, "start": 0, "max_results": 1}
    papers, _cached = await f.fetch(
        SERVICE, lit.arxiv_url, params, lambda t: parse_feed(t, lit), base_url=lit.arxiv_url
    )
    if not papers:
        raise NotFound(SERVICE, f"arXiv has no paper {arxiv_id!r} (empty feed): check the id")
    return papers[0]
