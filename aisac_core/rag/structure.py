"""Document structure: the section taxonomy, sections with page ranges and chunk counts, captions, blocks in
reading order, and bibliographic metadata (title, authors, year, DOI, arXiv id).

Headings map to a fixed taxonomy (:data:`SECTION_LABELS`) by keyword; the structure of a parse
(:func:`document_structure`) is stored with its text and read by the rag server's ``get_overview`` and
``read_sections`` (:mod:`aisac_core.rag.sections`). How the rules were measured: docs/rag.md, "PDF structure".
"""

from __future__ import annotations

import re
from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aisac_core.rag.chunking import Chunk

#: Fixed section taxonomy; headings map to it by keyword.
SECTION_LABELS = (
    "abstract",
    "introduction",
    "methods",
    "results",
    "discussion",
    "conclusion",
    "datasets",
    "references",
    "other",
)
_SECTION_SYNONYMS: list[tuple[str, re.Pattern[str]]] = [
    # only at the start: "Summary of the campaign" is an abstract, "B.2 Partial summary annotation" is not
    ("abstract", re.compile(r"^(abstract|summary|executive summary|plain language summary)\b")),
    ("introduction", re.compile(r"\b(introduction|background|motivation)\b")),
    (
        "methods",
        re.compile(
            r"\b(methods?|methodology|materials|experimental( setup| design)?|approach|"
            r"procedure|implementation|model)\b"
        ),
    ),
    ("datasets", re.compile(r"\b(data ?sets?|data|corpus|corpora|benchmarks?)\b")),
    ("results", re.compile(r"\b(results?|findings|experiments?|evaluation|analysis)\b")),
    ("discussion", re.compile(r"\b(discussion|limitations?)\b")),
    ("conclusion", re.compile(r"\b(conclusions?|concluding|future work|outlook)\b")),
    ("references", re.compile(r"\b(references|bibliography|works cited|literature cited)\b")),
]


def section_label(heading: str | None) -> str:
    """The taxonomy label of a heading ("3.1 Materials and Methods" -> "methods"); "other" if none."""
    if not heading:
        return "other"
    # strip numbering ("3.1 ", "2. ", "IV. "), never the first letters of a word ("Introduction")
    h = re.sub(r"^(\d+(\.\d+)*\.?|[IVXivx]+\.)\s*|^[IVXivx]+\s+", "", heading.strip()).lower()
    for label, pat in _SECTION_SYNONYMS:
        if pat.search(h):
            return label
    return "other"


#: section numbering: "3", "3.1", "3.1.2", "IV.", appendix "A", "A.1" (then a capitalised word)
NUMBERING = re.compile(r"^((?:[1-9]\d?)(?:\.\d{1,2}){0,3}\.?|[IVX]{1,5}\.|[A-H](?:\.\d{1,2}){0,2}\.?)\s+(?=[A-Z(])")
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>,;]+[^\s\"<>,;.)\]])")
_ARXIV = re.compile(r"arXiv:\s*(\d{4}\.\d{4,5})(v\d+)?", re.I)
_YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")


def letters_ratio(t: str) -> float:
    """Share of letters among the non-space characters of ``t`` (0..1; 0 for an empty string)."""
    return sum(ch.isalpha() for ch in t) / max(1, len(t.replace(" ", "")))


def _metadata(doc: Any, text: str, title: str | None) -> dict[str, Any]:
    """Title, authors, year, DOI and arXiv id from the first part of a document (PDF: its first pages,
    margins and the vertical arXiv stamp included), with the title's ``confidence`` (0..1) and
    ``title_source`` ("layout", "pdf_info", "layout+pdf_info"; None without a title or for other formats).
    A PDF's title and authors come from :mod:`aisac_core.rag.frontmatter` (first-page layout + document
    info); other formats take the title item and the name block after it. Fields not found are None / []."""
    extra = getattr(doc, "_aisac_meta", {}) or {}
    front = extra.get("front")
    head = text[:6000]
    hay = "\n".join(list(extra.get("vertical", [])) + list(extra.get("margins", []))[:20] + [head])
    title_item = next(
        (
            (getattr(it, "text", "") or "").strip()
            for it, _ in doc.iterate_items()
            if str(getattr(it, "label", "")).endswith("title")
        ),
        None,
    )
    meta: dict[str, Any] = {
        "title": title_item or title,
        "authors": [],
        "year": None,
        "doi": None,
        "arxiv_id": None,
        "confidence": None,
        "title_source": None,
        "authors_source": None,
        "authors_confidence": None,
        "title_confidence": None,
        "title_uncertain": False,
        "authors_uncertain": False,
    }
    if front is not None:
        meta.update(
            title=front["title"],
            confidence=front["confidence"],
            title_confidence=front["confidence"] if front["title"] else None,
            title_source=front["title_source"],
            title_uncertain=bool(front.get("title_uncertain")),
        )
        if front.get("authors_source"):
            meta.update(
                authors_source=front["authors_source"],
                authors_confidence=front["authors_confidence"],
                authors_uncertain=bool(front.get("authors_uncertain")),
            )
        if front.get("affiliations"):
            meta["affiliations"] = dict(front["affiliations"])
    if m := _ARXIV.search(hay):
        meta["arxiv_id"] = m.group(1) + (m.group(2) or "")
    if m := _DOI.search(hay):
        meta["doi"] = m.group(1)
    first_page = min((it.prov[0].page_no for it, _ in doc.iterate_items() if getattr(it, "prov", None)), default=None)
    page1 = (
        "\n".join(
            (getattr(it, "text", "") or "")
            for it, _ in doc.iterate_items()
            if getattr(it, "prov", None) and it.prov[0].page_no == first_page
        )
        if first_page
        else head[:3000]
    )
    years = [
        int(y)
        for y in _YEAR.findall("\n".join(list(extra.get("vertical", [])) + [page1]))
        if int(y) <= date.today().year
    ]
    if meta["arxiv_id"]:
        meta["year"] = 2000 + int(meta["arxiv_id"][:2])  # arXiv ids start with YYMM
    elif years:
        meta["year"] = max(years)  # a first page cites earlier years, and states its own (venue, copyright)
    # authors: the block right after the title (PDF), names split on commas / "and" / wide gaps
    if front is not None:
        meta["authors"] = list(front["authors"])
        return meta
    items = [(it, str(getattr(it, "label", ""))) for it, _ in doc.iterate_items()]
    for i, (_it, lab) in enumerate(items):
        if lab.endswith("title"):
            for nxt, nlab in items[i + 1 : i + 3]:
                t = (getattr(nxt, "text", "") or "").strip()
                if not nlab.endswith("text") or len(t) > 300 or "@" in t or letters_ratio(t) < 0.6:
                    continue
                t = re.sub(r"[\d†‡∗*♠♢♦♣♡§¶,]+(?=\s|$)", ",", t)
                names = []
                for n in (n.strip(" ,;") for n in re.split(r",|\band\b|\s{2,}|;", t)):
                    toks = n.split()
                    if len(toks) == 4 and not any(x.endswith(".") for x in toks):  # "Nathan Dahlberg Margo Schlanger"
                        names += [" ".join(toks[:2]), " ".join(toks[2:])]
                    else:
                        names.append(n)
                names = [n for n in names if re.fullmatch(r"[A-Z][\w.'-]*(\s+[A-Z][\w.'-]*){1,3}", n)]
                if len(names) >= 1:
                    meta["authors"] = names[:50]
                    meta["authors_source"], meta["authors_confidence"] = "layout", 0.5
                    break
            break
    return meta


def document_structure(
    doc: Any, text: str, offsets: dict[str, tuple[int, int]], chunks: list[Chunk], title: str | None
) -> dict[str, Any]:
    """The document's structure for overview and section reading (stored with the parsed text).

    ``doc`` is the DoclingDocument, ``text`` its plain text, ``offsets`` the char span of each item in it
    (by ``self_ref``; :func:`aisac_core.rag.chunking.chunk_document`), ``chunks`` the document's chunks (each
    chunk's ``section_covers`` is set to its innermost section's label), ``title`` a fallback title.
    Returns ``{sections, captions, blocks, metadata}``:

    ``sections``: every heading in reading order ``{title, number, level, label, page_start, page_end,
    char_start, char_end, chunk_count}`` (a section runs to the next heading of the same or a higher level;
    its char range and chunk count include its subsections); ``captions``: ``{kind, text, page}``;
    ``blocks``: ``[kind, page, char_start, char_end, section index or -1]`` per item in reading order
    (kind: heading, text, caption, table, reference, list); ``metadata``: see :func:`_metadata`."""
    blocks: list[list[Any]] = []
    sections: list[dict[str, Any]] = []
    captions: list[dict[str, Any]] = []
    stack: list[int] = []
    for item, _lvl in doc.iterate_items():
        ref = getattr(item, "self_ref", None)
        if ref not in offsets:
            continue
        s, e = offsets[ref]
        lab = str(getattr(item, "label", "")).split(".")[-1]
        page = item.prov[0].page_no if getattr(item, "prov", None) else None
        if lab == "section_header":
            level = int(getattr(item, "level", 1) or 1)
            t = (item.text or "").strip()
            m = NUMBERING.match(t)
            while stack and sections[stack[-1]]["level"] >= level:
                stack.pop()
            # the innermost label wins ("3 Results > 3.1 Experimental setup" is methods); an unlabelled
            # subsection takes its parent's
            parent_label = next(
                (sections[i]["label"] for i in reversed(stack) if sections[i]["label"] != "other"), None
            )
            own = section_label(t)
            if stack and own in ("abstract", "references"):
                own = "other"  # an "Abstract" inside a section is a figure's text or an example, not the paper's
            sections.append(
                {
                    "title": t,
                    "number": m.group(1).rstrip(".") if m else None,
                    "level": level,
                    "label": own if own != "other" else (parent_label or "other"),
                    "page_start": page,
                    "page_end": page,
                    "char_start": s,
                    "char_end": len(text),
                    "chunk_count": 0,
                }
            )
            stack.append(len(sections) - 1)
            kind = "heading"
        else:
            kind = {
                "title": "title",
                "caption": "caption",
                "table": "table",
                "reference": "reference",
                "list_item": "list",
            }.get(lab, "text")
            if kind == "text" and "\n" in text[s:e] and " | " in text[s:e]:
                kind = "table"
            if kind == "caption":
                t = text[s:e]
                captions.append(
                    {"kind": "table" if t.lower().startswith("tab") else "figure", "text": t[:500], "page": page}
                )
        for i in stack:
            if page is not None:
                sec = sections[i]
                sec["page_start"] = page if sec["page_start"] is None else min(sec["page_start"], page)
                sec["page_end"] = page if sec["page_end"] is None else max(sec["page_end"], page)
        blocks.append([kind, page, s, e, stack[-1] if stack else -1])
    # a section ends where the next heading of the same or a higher level starts
    for i, sec in enumerate(sections):
        for nxt in sections[i + 1 :]:
            if nxt["level"] <= sec["level"]:
                sec["char_end"] = nxt["char_start"]
                break
    for ch in chunks:
        inner = None
        for sec in sections:
            if sec["char_start"] <= ch.char_start < sec["char_end"]:
                sec["chunk_count"] += 1
                inner = sec
        # one labelling for chunks and sections: the chunk takes its innermost section's label
        ch.section_covers = inner["label"] if inner else "other"
    meta = _metadata(doc, text, title)
    meta.update(_outline_meta(doc, sections))
    return {"sections": sections, "captions": captions, "blocks": blocks, "metadata": meta}


def _outline_meta(doc: Any, sections: list[dict[str, Any]]) -> dict[str, Any]:
    """``outline_source`` and ``outline_confidence`` (0..1) of the sections: "outline" when the document's own
    structure gave them (a PDF's bookmarks, confidence = share of its entries found on the pages; a DOCX / HTML /
    Markdown file's heading markup, 1.0), "layout" when PDF layout rules found them (0.7 with numbered
    headings, 0.5 without); both None without sections."""
    if not sections:
        return {"outline_source": None, "outline_confidence": None}
    extra = getattr(doc, "_aisac_meta", None)
    if not extra:
        return {"outline_source": "outline", "outline_confidence": 1.0}
    ol = extra.get("outline") or {}
    if ol.get("source") == "outline" and ol.get("entries"):
        return {"outline_source": "outline", "outline_confidence": round(min(1.0, ol["matched"] / ol["entries"]), 2)}
    numbered = any(s["number"] for s in sections)
    return {"outline_source": "layout", "outline_confidence": 0.7 if numbered else 0.5}
