"""NCBI E-utilities client for PubMed: esearch (ids), esummary (search hits), efetch (one full record).

API (NCBI Bookshelf NBK25499, "The E-utilities In-Depth"): ``esearch.fcgi?db=pubmed&term=..&retmax=N``
returns ``eSearchResult/IdList/Id`` (retmax up to 10,000); ``esummary.fcgi?db=pubmed&id=a,b`` returns
``eSummaryResult/DocSum`` items; ``efetch.fcgi?db=pubmed&id=..&retmode=xml`` returns
``PubmedArticleSet/PubmedArticle``. ``tool``, ``email`` (the configured mailto) and ``api_key`` (from the
environment variable named by ``lit_ncbi_api_key_env``) are sent on every call, as NCBI asks.
An ``<ERROR>`` element in a 200 answer is reported as a refused request.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

from aisac_core.literature.http import NotFound, ServiceError
from aisac_core.literature.paper import Paper

if TYPE_CHECKING:
    from aisac_core.literature.http import Fetcher

SERVICE = "pubmed"
MAX_RESULTS = 10000
#: ids per esummary request (NCBI advises POST above ~200 ids; smaller GETs keep URLs short)
SUMMARY_BATCH = 200


def _common(f: Fetcher) -> dict[str, Any]:
    lit = f.lit
    p: dict[str, Any] = {"tool": "aisac"}
    if lit.mailto:
        p["email"] = lit.mailto
    key = os.environ.get(lit.ncbi_api_key_env)
    if key:
        p["api_key"] = key
    return p


def _root(text: str, expected: str) -> ET.Element:
    root = ET.fromstring(text.encode("utf-8"))
    if root.tag != expected:
        raise ValueError(f"expected <{expected}>, got <{root.tag}>")
    err = root.findtext("ERROR")
    if err:
        raise ServiceError(SERVICE, f"PubMed refused the request: {err.strip()}", kind="refused")
    return root


def parse_esearch(text: str) -> list[str]:
    """PMIDs of an eSearchResult (empty list when nothing matched)."""
    root = _root(text, "eSearchResult")
    return [i.text.strip() for i in root.findall("IdList/Id") if i.text]


def _year(s: str | None) -> int | None:
    m = re.search(r"\b(1[89]\d\d|20\d\d)\b", s or "")
    return int(m.group(1)) if m else None


def parse_esummary(text: str) -> list[Paper]:
    """Papers of an eSummaryResult (version 1 DocSums)."""
    root = _root(text, "eSummaryResult")
    out = []
    for ds in root.findall("DocSum"):
        pmid = (ds.findtext("Id") or "").strip()
        items = {it.get("Name"): it for it in ds.findall("Item")}

        def val(name: str) -> str | None:
            it = items.get(name)
            return (it.text or "").strip() or None if it is not None else None

        ids = {
            it.get("Name"): (it.text or "").strip()
            for it in (items["ArticleIds"].findall("Item") if "ArticleIds" in items else [])
        }
        doi = val("DOI") or ids.get("doi")
        eloc = val("ELocationID") or ""
        if not doi and "doi:" in eloc:
            doi = eloc.split("doi:", 1)[1].strip().split()[0]
        authors = [(a.text or "").strip() for a in items["AuthorList"].findall("Item")] if "AuthorList" in items else []
        pmc = ids.get("pmc") or ids.get("pmcid")
        out.append(
            Paper(
                source=SERVICE,
                source_id=pmid,
                pmid=pmid,
                title=val("Title"),
                authors=authors,
                year=_year(val("PubDate")),
                venue=val("FullJournalName") or val("Source"),
                doi=doi,
                pmcid=pmc if pmc and pmc.upper().startswith("PMC") else None,
                url=f"https://pubmed.ncbi.nlm.nih.gov/{pmid}/",
                open_access=True if pmc else None,
            )
        )
    return out


def parse_efetch(text: str) -> list[Paper]:
    """Papers of a PubmedArticleSet (efetch, retmode=xml), with abstracts."""
    root = _root(text, "PubmedArticleSet")
    out = []
    for art in root.findall("PubmedArticle"):
        mc = art.find("MedlineCitation")
        if mc is None:
            continue
        pmid = (mc.findtext("PMID") or "").strip()
        a = mc.find("Article")
        at = a.find("ArticleTitle") if a is not None else None
        title = "".join(at.itertext()).strip() if at is not None else None
        parts = []
        for t in a.findall("Abstract/AbstractText") if a is not None else []:
            txt = " ".join("".join(t.itertext()).split())
            parts.append(f"{t.get('Label')}: {txt}" if t.get("Label") else txt)
        authors = []
        for au in a.findall("AuthorList/Author") if a is not None else []:
            name = " ".join(x for x in (au.findtext("ForeName"), au.findtext("LastName")) if x) or au.findtext(
                "CollectiveName"
            )
            if name:
                authors.append(name.strip())
        year = _year(a.findtext("Journal/JournalIssue/PubDate/Year") if a is not None else None) or _year(
            a.findtext("Journal/JournalIssue/PubDate/MedlineDate") if a is not None else None
        )
        ids = {i.get("IdType"): (i.text or "").strip() for i in art.findall("PubmedData/ArticleIdList/ArticleId")}
        doi = ids.get("doi") or next(
            (
                e.text
                for e in (a.findall("ELocationID") if a is not None else [])
                if e.get("EIdType") == "doi" and e.text
            ),
            None,
        )
        pmc = ids.get("pmc")
        out.append(
            Paper(
                source=SERVICE,
                source_id=pmid,
                pmid=pmid,
                title=title,
                authors=authors,
                year=year,
                venue=a.findtext("Journal/Title") if a is not None else None,
                abstract=" ".join(parts) or None,
                doi=doi,
                pmcid=pmc or None,
                url=f"https://pubmed.ncbi.nlm.nih.gov/{pmid}/",
                open_access=True if pmc else None,
            )
        )
    return out


async def search(
    f: Fetcher, query: str, k: int, year_from: int | None = None, year_to: int | None = None
) -> list[Paper]:
    """esearch for up to ``k`` (≤ :data:`MAX_RESULTS`) PMIDs by relevance, then esummary for their records
    (:data:`SUMMARY_BATCH` ids per request)."""
    base = f.lit.pubmed_url.rstrip("/")
    params = {
        **_common(f),
        "db": "pubmed",
        "term": query,
        "retmax": min(k, MAX_RESULTS),
        "retmode": "xml",
        "sort": "relevance",
    }
    if year_from or year_to:
        params.update(datetype="pdat", mindate=str(year_from or 1800), maxdate=str(year_to or 3000))
    ids, _c = await f.fetch(SERVICE, f"{base}/esearch.fcgi", params, parse_esearch, base_url=base)
    if not ids:
        return []
    papers: list[Paper] = []
    for i in range(0, len(ids), SUMMARY_BATCH):  # NCBI: long id lists belong in several requests (or a POST)
        sparams = {**_common(f), "db": "pubmed", "id": ",".join(ids[i : i + SUMMARY_BATCH]), "retmode": "xml"}
        batch, _c = await f.fetch(SERVICE, f"{base}/esummary.fcgi", sparams, parse_esummary, base_url=base)
        papers.extend(batch)
    order = {pmid: i for i, pmid in enumerate(ids)}
    return sorted(papers, key=lambda p: order.get(p.pmid or "", len(order)))


async def get(f: Fetcher, pmid: str) -> Paper:
    """The full PubMed record of ``pmid`` (efetch). Raises NotFound when PubMed returns no article."""
    base = f.lit.pubmed_url.rstrip("/")
    params = {**_common(f), "db": "pubmed", "id": pmid, "retmode": "xml"}
    papers, _c = await f.fetch(SERVICE, f"{base}/efetch.fcgi", params, parse_efetch, base_url=base)
    hit = next((p for p in papers if p.pmid == pmid), papers[0] if papers else None)
    if hit is None:
        raise NotFound(SERVICE, f"PubMed has no article with PMID {pmid}")
    return hit
