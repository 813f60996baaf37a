"""A PDF's own outline (bookmarks) as section headings, and table-of-contents pages, for layout reconstruction
(:mod:`aisac_core.rag.pdf`).

The document outline is what the producing program (LaTeX ``hyperref``, Word's "create bookmarks", Chromium's
``--generate-pdf-document-outline``) wrote from the real section structure: titles, nesting and target pages
(ISO 32000-1, 12.3.3 "Document outline"). When it is present and plausible it is the outline; the layout's
heading rules only fill in what it lacks (front and back matter such as Abstract or References, which many
outlines omit, and headings deeper than the outline goes).

- **Reading** (:func:`pdf_outline`): every bookmark to depth 6 with its level and target page (pypdfium2,
  under docling's pdfium lock). A single root entry that repeats the document's title (some templates nest every
  section under it) is dropped and its children move up one level.
- **Plausible** (:func:`plausible_outline`): at least two entries, target pages within the document and mostly
  non-decreasing (at least 80 % of consecutive pairs), entries not all on one page of a multi-page document
  (which is what a one-entry-per-file or broken outline looks like), titles of 1-200 characters.
- **Matching** (:func:`match_outline`): each entry, in order, is looked for among the paragraphs from the
  last match on, on its target page or the page after (a destination may point just above a heading at a
  page's foot): one to four consecutive lines of a paragraph that spell the entry's title (letters and digits
  compared, case and spacing ignored, with or without its number) are the heading; lines glued above or under
  it are split off as paragraphs of their own. The
  outline is used when at least half of its entries are found.
- **Contents pages** (:func:`toc_pages`): a page with a "Contents" heading and 3+ entry lines, or with 5+
  dot-leader lines, or where 5+ lines and 40 % of the lines are entries (words, then a page number after dot
  leaders or a gap) whose page numbers do not go down (80 % of consecutive pairs; a table's last column does
  go down), is a table of contents; its lines are never headings.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # docling's process-wide pdfium lock: pdfium is not thread-safe
    from docling.utils.locks import pypdfium2_lock as _PDFIUM_LOCK
except ImportError:  # docling absent (a reduced install)
    _PDFIUM_LOCK = threading.Lock()

_NUMBER = re.compile(r"^\s*((?:\d{1,2}(?:\.\d{1,2}){0,3}|[IVXLC]{1,6}|[A-Z](?:\.\d{1,2}){0,2})\.?)\s+(?=\S)")
TOC_HEADING = re.compile(r"^\s*(table of )?contents\s*$|^\s*inhalt(sverzeichnis)?\s*$|^\s*sommaire\s*$", re.I)
#: a contents line: an entry's words, then dot leaders or a gap, then its page number
_TOC_LINE = re.compile(r"^(?:[\dA-Z][\d.]*\.?\s+)?[^\W\d_].*?[^\W\d_].*?(?:(?:\.\s?){3,}|\s+)(\d{1,4})\s*$")


@dataclass
class OutlineEntry:
    """One bookmark: its ``title``, nesting ``level`` (1 = top) and target ``page`` (1-based; None unknown)."""

    title: str
    level: int
    page: int | None


def heading_key(t: str) -> str:
    """``t`` reduced to its letters and digits, case-folded: how headings and outline titles are compared."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", t).casefold())


def _unnumbered(t: str) -> str:
    return _NUMBER.sub("", t, count=1)


def pdf_outline(path: str | Path, title: str | None = None) -> list[OutlineEntry]:
    """The bookmarks of the PDF at ``path`` in document order, levels from 1 (see the module docstring for the
    dropped title root). ``title``: the document's title, if known. Errors: none raised; an unreadable file or
    one without bookmarks gives []."""
    import pypdfium2 as pdfium

    out: list[OutlineEntry] = []
    try:
        with _PDFIUM_LOCK:
            doc = pdfium.PdfDocument(str(path))
            try:
                for bm in doc.get_toc(max_depth=6):
                    t = " ".join((bm.get_title() or "").split())
                    dest = bm.get_dest()
                    idx = dest.get_index() if dest is not None else None
                    out.append(OutlineEntry(t, bm.level + 1, idx + 1 if isinstance(idx, int) and idx >= 0 else None))
                    if len(out) >= 2000:
                        break
            finally:
                doc.close()
    except (pdfium.PdfiumError, OSError, ValueError):
        return []
    roots = [e for e in out if e.level == 1]
    if len(roots) == 1 and len(out) > 1 and title and heading_key(roots[0].title) == heading_key(title):
        out = [OutlineEntry(e.title, e.level - 1, e.page) for e in out if e is not roots[0]]
    return [e for e in out if e.title]


def plausible_outline(entries: Sequence[OutlineEntry], npages: int) -> bool:
    """Whether ``entries`` (:func:`pdf_outline`) can be a document's outline; rules in the module docstring."""
    if len(entries) < 2 or any(not 1 <= len(e.title) <= 200 for e in entries):
        return False
    pages = [e.page for e in entries if e.page is not None]
    if any(p > npages for p in pages):
        return False
    if len(pages) >= 2:
        ups = sum(b >= a for a, b in zip(pages, pages[1:]))
        if ups < 0.8 * (len(pages) - 1):
            return False
        if npages >= 3 and len(set(pages)) == 1 and len(pages) >= 4:
            return False
    return True


def match_outline(
    entries: Sequence[OutlineEntry], paras: Sequence[tuple[int, Sequence[Any]]], line_text: Callable[[Any], str]
) -> dict[int, tuple[OutlineEntry, int, int]]:
    """Which paragraph is which outline entry.

    Args:
        entries: the outline (:func:`pdf_outline`), in document order.
        paras: ``(page, lines)`` of every paragraph in reading order.
        line_text: the text of one line object.

    Returns:
        ``{paragraph index: (entry, a, n)}``: the entry whose title lines ``a`` to ``a + n`` of the paragraph spell
        (lines above and below are text glued to the heading). Entries not found are left out.
    """
    found: dict[int, tuple[OutlineEntry, int, int]] = {}
    start = 0
    for e in entries:
        want = {heading_key(e.title), heading_key(_unnumbered(e.title))} - {""}
        if not want:
            continue
        for i in range(start, len(paras)):
            pno, lines = paras[i]
            if e.page is not None and pno > e.page + 1:
                break
            if (e.page is not None and pno < e.page) or i in found:
                continue
            hit = _spelled(want, [line_text(x) for x in lines[:60]])
            if hit is not None:
                found[i] = (e, hit[0], hit[1])
                start = i + 1
                break
    return found


def _spelled(want: set[str], texts: list[str]) -> tuple[int, int] | None:
    """``(a, n)``: lines ``a`` to ``a + n`` (at most 4) of ``texts`` spell one of the keys ``want``, or None."""
    for a in range(len(texts)):
        acc = ""
        for n in range(1, min(4, len(texts) - a) + 1):
            acc += texts[a + n - 1]
            k, ku = heading_key(acc), heading_key(_unnumbered(acc))
            if k in want or ku in want:
                return a, n
            if not any(w.startswith(k) or (ku and w.startswith(ku)) for w in want):
                break
    return None


def respace(printed: str, title: str) -> str:
    """The heading as printed, with the spaces the page lost put back from the outline's ``title``
    ("2 BACKGROUNDANDRELATEDWORK" + "2 Background and related work" -> "2 BACKGROUND AND RELATED WORK"); the
    printed text when it already has them; the outline's title when the two differ in more than spaces and case."""
    p, t = "".join(printed.split()), "".join(title.split())
    if p.casefold() != t.casefold():
        return title if heading_key(printed) == heading_key(title) else " ".join(printed.split())
    out, i = [], 0
    for ch in " ".join(title.split()):
        if ch == " ":
            out.append(" ")
        else:
            out.append(p[i])
            i += 1
    return "".join(out)


def toc_pages(lines: dict[int, list[Any]], line_text: Callable[[Any], str]) -> set[int]:
    """The pages (1-based) that are a table of contents: rule in the module docstring."""
    out: set[int] = set()
    for pno, ls in lines.items():
        texts = [line_text(x).strip() for x in ls if line_text(x).strip()]
        if not texts:
            continue
        heading = any(TOC_HEADING.match(t) for t in texts[:15])
        nums = [int(m.group(1)) for t in texts if (m := _TOC_LINE.match(t))]
        leaders = sum(bool(re.search(r"(\.\s?){3,}\s*[\divxlc]{1,4}\s*$", t, re.I)) for t in texts)
        # page numbers of a contents page never go down (a table's last column does)
        rising = len(nums) >= 2 and sum(b >= a for a, b in zip(nums, nums[1:])) >= 0.8 * (len(nums) - 1)
        if (
            (heading and len(nums) >= 3)
            or leaders >= 5
            or (rising and len(nums) >= 5 and len(nums) >= 0.4 * len(texts))
        ):
            out.add(pno)
    return out
