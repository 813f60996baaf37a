"""Paper front matter from the first page's layout: title and authors, cross-checked with the PDF's own
document info (Title / Author) when that is not producer junk.

Rules (measured on the shared PDFs; docs/rag.md, "Title and authors"):

- Title candidates are first-page lines in the top half, outside the top 5 % banner strip, mostly letters,
  and not of a kind that is never a title: "Abstract", section names and numbered headings, captions, journal
  names / volume / ISSN / DOI / "Proceedings of ..." / copyright / URL lines, arXiv stamps, single letters, a
  running header (a line sharing its row with a bare page number, or repeated in the same size at the top of
  other pages), affiliation or e-mail lines, and author lists.
- Consecutive candidate lines join into a block when set in the same font and size (a title broken over 2-4
  lines), overlap horizontally and follow at a line gap; a smaller line still joins when it sits tight under
  the block, aligned with it (OCR'd title lines of uneven height).
- Blocks are scored by their size relative to body text (capped), with a bonus when author or affiliation
  lines follow and when they hold 3+ words; the best block clearly larger than body text wins. Without a size
  signal, the first block wins only when it is bold or followed by authors (a plain extract page has no title).
- Authors are read from the lines after the title, up to the abstract / first section / running text:
  names split on commas, "and", "&", cell gaps and superscript markers (digits, *, daggers, Greek letters,
  card suits); affiliation, address and e-mail parts are dropped; ALL-CAPS names are title-cased.
- The document info Title is used when it is no producer junk ("Microsoft Word - x.doc", "untitled", file
  names): agreeing with the layout title it raises the confidence; a layout title that is a cut-off prefix of
  it, or a page without a layout title, takes it when its text is printed on the first page.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from aisac_core.rag.ocr import OCR_FONT, OCR_FONT_BOLD
from aisac_core.rag.structure import letters_ratio

try:  # docling's process-wide pdfium lock: pdfium is not thread-safe
    from docling.utils.locks import pypdfium2_lock as _PDFIUM_LOCK
except ImportError:  # docling absent (a reduced install)
    _PDFIUM_LOCK = threading.Lock()

_CJK = r"\u3040-\u30ff\u3131-\u318e\uac00-\ud7a3\u4e00-\u9fff"
_NOT_TITLE = re.compile(
    # a line that starts like an abstract, keywords or a caption ("Abstract—We ...", "Figure 2: ...")
    r"^(a\s?b\s?s\s?t\s?r\s?a\s?c\s?t|abstract|keywords?|key words|index terms|"
    r"(fig(ure|\.)?|table|tab\.|listing|algorithm)\s*[0-9ivx]+)\b"
    # a line that is nothing but a section or article-kind name ("Notes on ..." or "Introduction to ..." may be titles)
    r"|^(summary|introduction|contents|table of contents|references|bibliography|acknowledge?ments?|appendix|"
    r"front cover|notes?|letters?|research article|original (article|paper|research)|review( article)?|article|"
    r"preprint|draft)\s*[:.]?\s*$"
    r"|^(journal|proceedings|transactions|annals|bulletin|acta|archives)\b|\bjournal of\b|\bproceedings of\b"
    r"|\b(journal|letters|magazine|proceedings|transactions)$|\bvol(ume)?\.?\s*\d|\bissn\b|\bisbn\b|\bno\.\s*\d|"
    r"\bpp\.\s*\d|\bpages?\s+\d+\s*[-–]|©|\(c\)\s*\d{4}|copyright|\bdoi\b|10\.\d{4,9}/|arxiv|https?://|www\.|"
    r"\bpublished\b|\breceived\b|\baccepted\b|\bcorresponding author",
    re.I,
)
_AFFILIATION = re.compile(
    r"univ\.|universi|institut|department|dept\.|\bschool of\b|college|laborator|\blab\b|-lab\b|"
    r"\b(research )?cent(er|re) (for|of)\b|faculty|academy of|\binc\.|\bcorp\.|\bltd\b|gmbh|\bllc\b|@|"
    r"(^|,)\s*(usa|u\.s\.a\.|uk|germany|china|japan|(south )?korea|france|italy|spain|canada|india|brazil|russia|"
    r"pakistan|australia|switzerland|netherlands|sweden|israel|singapore|taiwan|austria|belgium|denmark|finland|"
    r"norway|poland|portugal|ireland|mexico)\s*$",
    re.I,
)
_POSTAL = re.compile(r"\b(?!19\d\d\b|20\d\d\b)\d{4,6}\b|\b\d{3}-\d{3}\b|\b[A-Z]{1,2}\d{1,2}\s?\d[A-Z]{2}\b")
#: a numbered section heading ("3", "2.1", "IV."); a title may start "A New ..." (no appendix letters here)
_SECTION_NO = re.compile(r"^(\d{1,2}(\.\d{1,2})*\.?|[IVX]{1,5}\.)\s+\S")
_EMAIL = re.compile(r"\S+@\S+|\{[^}]*\}\s*@")
_MARKERS = "*∗†‡§¶♠♢♦♣♡♤♥□⋄◇○•#‖⊥⊤⋆★"
_MARKER_RUN = re.compile(r"(?:[\d" + _MARKERS + r"]+(?:\s*,\s*[\d" + _MARKERS + r"]+)*)|['’`´\"]{2,}")
_GREEK_MARK = re.compile(r"(?<=[a-zà-ÿ.])[α-ωϵϑ](?:\s*,\s*[α-ωϵϑ])*(?=[\s,∗*†‡]|$)")
_PARTICLES = {
    "de",
    "da",
    "del",
    "della",
    "der",
    "den",
    "di",
    "dos",
    "das",
    "du",
    "van",
    "von",
    "la",
    "le",
    "bin",
    "ibn",
    "al",
    "el",
    "ter",
    "y",
    "zu",
    "st.",
}
_NOT_NAME_WORDS = {
    "university",
    "institute",
    "department",
    "abstract",
    "the",
    "of",
    "for",
    "and",
    "keywords",
    "lab",
    "laboratory",
    "center",
    "centre",
    "school",
    "college",
    "research",
    "science",
    "sciences",
    "engineering",
    "technology",
    "computer",
    "introduction",
    "group",
    "faculty",
    "street",
    "road",
    "avenue",
    "email",
    "mail",
    "correspondence",
    "corresponding",
    "author",
    "authors",
    "ai",
}
_HONORIFIC = re.compile(r"^(dr|prof|professor|mr|mrs|ms|sir)\.?\s+", re.I)
_INFO_JUNK = re.compile(
    r"^(microsoft\s+\w+\s*-|untitled|title|document\d*|slide\s*\d*|presentation|"
    r"no title|none|unknown|paper|manuscript|main|article)\b|\.(docx?|pdf|tex|dvi|ps|rtf|odt|"
    r"indd|qxd|pptx?)\s*$",
    re.I,
)


@dataclass
class FrontMatter:
    """Front matter found on a first page: ``title`` (None when the page has no title block), the line
    objects it was read from (``title_lines``, layout only), ``authors`` (names as printed, markers stripped),
    ``confidence`` (0..1, 0 without a title) and ``title_source`` ("layout", "pdf_info", "layout+pdf_info" or
    None)."""

    title: str | None = None
    title_lines: list[Any] = field(default_factory=list)
    authors: list[str] = field(default_factory=list)
    confidence: float = 0.0
    title_source: str | None = None
    #: where the authors come from ("layout", "pdf_info", "layout+pdf_info"; None without authors) and how sure
    #: that is (0..1: 0.9 layout names the document info confirms, 0.75 layout alone, 0.6 document info alone)
    authors_source: str | None = None
    authors_confidence: float = 0.0
    #: which reader gave the title / authors: "model" (the header CRF, aisac_core.rag.headers), "rules" (the
    #: layout rules of this module), "both" (they agree) or None
    title_reader: str | None = None
    authors_reader: str | None = None
    #: the confidence is below :data:`aisac_core.rag.headers.UNCERTAIN_BELOW`: show the field as uncertain
    title_uncertain: bool = False
    authors_uncertain: bool = False
    #: author name -> the affiliations the page links to it by marks ("Ada Lovelace1" / "1 Department of ...")
    affiliations: dict[str, list[str]] = field(default_factory=dict)


def _nfkc(t: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", t).split())


def _key(t: str) -> str:
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", t).casefold())


def _words(t: str) -> list[str]:
    return re.findall(r"[^\W\d_]{2,}", t)


def pdf_info(path: str | Path) -> dict[str, str]:
    """The document info dict of the PDF at ``path`` (``{"Title": ..., "Author": ...}``, values stripped;
    empty strings for absent keys). Opens the file with pypdfium2 under docling's pdfium lock. Errors: none
    raised; an unreadable or encrypted file gives ``{}``."""
    import pypdfium2 as pdfium

    try:
        with _PDFIUM_LOCK:
            doc = pdfium.PdfDocument(str(path))
            try:
                meta = doc.get_metadata_dict()
            finally:
                doc.close()
    except (pdfium.PdfiumError, OSError, ValueError):
        return {}
    return {k: (meta.get(k) or "").strip() for k in ("Title", "Author")}


def clean_info_title(title: str | None) -> str | None:
    """The document info ``title`` when it can be a paper title, else None: producer junk ("Microsoft Word -
    paper.doc", "untitled", file names such as "OECS12_Matthiesen-Atature"), fewer than 2 words (4 CJK
    characters) and never-title kinds (:data:`_NOT_TITLE`) are refused."""
    t = _nfkc(title or "")
    if len(t) < 4 or _INFO_JUNK.search(t) or _NOT_TITLE.search(t):
        return None
    cjk = len(re.findall(f"[{_CJK}]", t))
    if cjk < 4 and (len(_words(t)) < 2 or " " not in t):
        return None
    return t


def _strip_markers(t: str) -> str:
    t = _EMAIL.sub(" ", t)
    t = _GREEK_MARK.sub(",", t)
    t = _MARKER_RUN.sub(",", t)
    return t


def _name(seg: str) -> str | None:
    """``seg`` as a person's name (2-5 words, capitalised but for particles; or CJK), else None."""
    s = _HONORIFIC.sub("", seg.strip(" ,;:.'’\"()[]{}")).strip()
    if not s:
        return None
    if re.fullmatch(f"[{_CJK}]{{2,4}}|[{_CJK}]( [{_CJK}]){{1,3}}", s):
        return s.replace(" ", "")
    toks = s.split()
    glued = len(toks) == 1 and re.fullmatch(r"([A-Z][a-z]?\.){1,3}\s?[A-Z][\w'’-]+", s)  # "D.Smirnov"
    if not glued and not 2 <= len(toks) <= 5:
        return None
    for tok in toks:
        if tok.lower() in _PARTICLES and tok is not toks[0]:
            continue
        if (
            tok.lower().strip(".") in _NOT_NAME_WORDS
            or not re.fullmatch(r"[^\W\d_][\w'’.-]*", tok)
            or not tok[0].isupper()
        ):
            return None
    if s.isupper() and len(s) > 3:
        s = " ".join(w if re.fullmatch(r"([A-Z]\.)+", w) else w.capitalize() for w in s.split())
    # initials glued to the surname by a PDF that lost the space: "A.K.Bakarov" -> "A.K. Bakarov"
    return re.sub(r"(?<=[A-Z]\.)(?=[A-Z][a-z\u00e0-\u017f]{2,})", " ", s)


def split_authors(text: str) -> list[str]:
    """Person names in an author line ``text`` (one PDF text line or a row's cells joined by two spaces):
    markers (digits, *, †, ‡, Greek letters, card suits), e-mails and affiliation parts removed, split on
    commas, semicolons, "and", "&" and wide gaps; a 4-word run without separator is read as two names.
    Returns [] when the line holds no name."""
    t = _strip_markers(text)
    has_sep = bool(re.search(r",|;|\s&\s|\band\b|\s{2,}|\|", t))
    names: list[str] = []
    in_affiliation = False  # after an affiliation part, the rest of the cell is its address ("..., New Haven")
    for seg in re.split(r"(\s{2,}|\|)|,|;|\s&\s|\band\b", t):
        if seg is None:
            continue
        if re.fullmatch(r"\s{2,}|\|", seg):
            in_affiliation = False  # a new cell
            continue
        seg = seg.strip()
        if not seg or in_affiliation or _AFFILIATION.search(seg) or _POSTAL.search(seg):
            in_affiliation = in_affiliation or bool(seg)
            continue
        toks = seg.split()
        if len(toks) == 4 and has_sep and not any(x.endswith(".") or x.lower() in _PARTICLES for x in toks):
            parts = [" ".join(toks[:2]), " ".join(toks[2:])]  # "Nathan Dahlberg Margo Schlanger"
        else:
            parts = [seg]
        for p in parts:
            if n := _name(p):
                names.append(n)
    return names


def is_affiliation(text: str) -> bool:
    """Whether a front-matter line is an affiliation, address or e-mail line (no author names in it)."""
    t = _strip_markers(text)
    return bool(_EMAIL.search(text) or _POSTAL.search(text) or _AFFILIATION.search(t)) and not split_authors(text)


def _author_line(text: str) -> bool:
    """An author list: 2+ names and nothing else, or one name carrying a marker."""
    t = text.strip()
    names = split_authors(t)
    if not names:
        return False
    if len(names) >= 2 and re.search(r",|;|\s&\s|\band\b|\s{2,}|\|", _strip_markers(t)):
        rest = _key(re.sub("|".join(re.escape(n) for n in names), "", _strip_markers(t)))
        return len(rest) <= 4 or bool(re.fullmatch(r"(and)+", rest))
    return bool(re.search(r"[\d" + _MARKERS + r"α-ω]\s*$", t)) or bool(re.fullmatch(f"[{_CJK} ]+\\W*", t))


def _prose(text: str) -> bool:
    if len(re.findall(f"[{_CJK}]", text)) > 25:
        return True
    ws = text.split()
    low = [w for w in ws if w[:1].islower() and w.lower() not in _PARTICLES]
    return len(ws) >= 7 and len(low) >= 0.5 * len(ws)


def _rows(lines: Sequence[Any]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for ln in sorted(lines, key=lambda x: (x.top, x.l)):
        if rows and abs(ln.top - rows[-1][0].top) < 0.5 * min(ln.h, rows[-1][0].h):
            rows[-1].append(ln)
        else:
            rows.append([ln])
    return [sorted(r, key=lambda x: x.l) for r in rows]


def _eligible(ln: Any, H: float, banned: set[int], cont: bool = False) -> bool:
    """Whether ``ln`` may be a title line; ``cont``: it would continue a title block in the same font and size,
    so it may start in lower case ("the Suppression of ...") and look like a name ("Prediction Models")."""
    t = ln.text.strip()
    if id(ln) in banned or ln.top < 0.05 * H or ln.top > 0.5 * H or len(t) > 250:
        return False
    if letters_ratio(t) < 0.5 or not (re.search(r"[^\W\d_]{3}", t) or len(re.findall(f"[{_CJK}]", t)) >= 2):
        return False
    if (
        _NOT_TITLE.search(t)
        or _SECTION_NO.match(t)
        or _EMAIL.search(t)
        or t.endswith((".", ";"))
        or (t[:1].islower() and not t[1:2].isupper() and not cont)
    ):
        return False
    return cont or not (is_affiliation(t) or _author_line(t))


def _same_face(a: str, b: str) -> bool:
    """Whether two lines' font names name one face. OCR lines count as one face whatever their weight: the OCR's
    weight is an estimate from stroke width (:mod:`aisac_core.rag.ocr`) that agrees with the born-digital fonts on
    F1 0.49 only (1,146 OCR lines of the 16 scanned benchmark pages, bench/ocr.py), so that the two lines of one printed
    title, one read bold and one not, would otherwise part (the scanned copy of 2206.10883 lost its title's
    second line)."""
    ocr = (OCR_FONT, OCR_FONT_BOLD)
    return a == b or (a in ocr and b in ocr)


def _continues(block: list[Any], ln: Any, banned: set[int], H: float) -> bool:
    p = block[-1]
    twin = _same_face(ln.font, p.font) and abs(ln.h - p.h) <= 0.05 * max(ln.h, p.h)
    if not _eligible(ln, H, banned, cont=twin) or len(block) >= 4:
        return False
    if min(p.r, ln.r) - max(p.l, ln.l) <= 0:
        return False
    gap = ln.top - (p.top + p.h)
    same_size = abs(ln.h - p.h) <= 0.05 * max(ln.h, p.h)
    aligned = abs(ln.l - p.l) <= 3 or abs((ln.l + ln.r) - (p.l + p.r)) <= 6
    # a twin line (same font and size) may sit further down: glyph boxes of some producers are half the font size
    if not _same_face(ln.font, p.font) or not -0.3 * p.h <= gap <= (2.0 if twin and len(block) == 1 else 0.8) * p.h:
        if not (twin and len(block) >= 2 and -0.3 * p.h <= gap <= 2.0 * p.h):
            return False
    if len(block) >= 2:  # keep the block's own line spacing
        g0 = block[1].top - (block[0].top + block[0].h)
        if gap > 1.4 * g0 + 2:
            return False
    return bool(same_size or (aligned and gap <= 0.45 * p.h and ln.h < p.h))


def _blocks(lines: Sequence[Any], H: float, banned: set[int]) -> list[list[Any]]:
    order = sorted(lines, key=lambda x: (x.top, x.l))
    used: set[int] = set()
    out: list[list[Any]] = []
    for i, ln in enumerate(order):
        if id(ln) in used or not _eligible(ln, H, banned):
            continue
        block = [ln]
        for nxt in order[i + 1 :]:
            if id(nxt) in used or nxt is ln:
                continue
            p = block[-1]
            if (
                abs(nxt.top - p.top) < 0.3 * p.h
                and nxt.l >= p.r
                and _same_face(nxt.font, p.font)
                and abs(nxt.h - p.h) <= 0.05 * p.h
                and nxt.l - p.r < 3 * p.h
                and _eligible(nxt, H, banned)
            ):
                block.append(nxt)  # the title's next cell on the same row
                continue
            if min(p.r, nxt.r) - max(p.l, nxt.l) <= 0 or nxt.top <= p.top:
                continue  # another column
            if _continues(block, nxt, banned, H):
                block.append(nxt)
                continue
            break
        used.update(id(x) for x in block)
        out.append(block)
    return out


def _block_text(block: list[Any]) -> str:
    """The lines of a title or author block as one text: a line-end hyphen dropped or kept by the word list
    (:class:`aisac_core.rag.printed.Hyphenation`: "Long-" + "form" stays "Long-form", "Summa-" + "rization" joins)."""
    from aisac_core.rag.printed import Hyphenation

    hyph = Hyphenation(())
    text = ""
    for ln in block:
        t = ln.text.strip()
        text = hyph.join(text, t) if text and t else (text or t)
    return _nfkc(text)


def _followed_by_authors(block: list[Any], rows: list[list[Any]], strict: bool = False) -> bool:
    bottom = max(x.top + x.h for x in block)
    after = [r for r in rows if r[0].top >= bottom - 1][:3]
    for r in after:
        t = "  ".join(x.text for x in r)
        one = split_authors(t)
        if (
            _author_line(t)
            or is_affiliation(t)
            or (not strict and len(one) == 1 and _key(one[0]) == _key(_strip_markers(t)))
        ):
            return True
    return False


def find_authors(lines: Sequence[Any], after: float) -> list[str]:
    """Author names from first-page ``lines`` (objects with ``text, l, r, top, h``) below ``after`` (the
    title's bottom, points from the page top), in reading order (rows top to bottom, cells left to right);
    scanning stops at the abstract, a section heading or running text. Returns up to 50 names, [] if none."""
    names: list[str] = []
    cell_of: dict[str, tuple[Any, int]] = {}  # name -> its line and row, when the row's cells give them
    idle = 0
    for ri, row in enumerate(_rows([x for x in lines if x.top >= after - 1])):
        t = "  ".join(x.text.strip() for x in row)
        if (
            re.match(r"^(a\s?b\s?s\s?t\s?r\s?a\s?c\s?t|abstract|summary|keywords?|index terms|introduction)\b", t, re.I)
            or _SECTION_NO.match(t)
            or len(names) >= 50
        ):
            break
        found = split_authors(t) if letters_ratio(t) >= 0.5 else []
        if found and not _prose(t):
            per_cell = [(n, x) for x in row for n in split_authors(x.text.strip())]
            if [n for n, _ in per_cell] == found:
                cell_of.update((n, (x, ri)) for n, x in per_cell if n not in names)
            names += [n for n in found if n not in names]
            idle = 0
            continue
        if _prose(t):
            break
        if names and not is_affiliation(t) and letters_ratio(t) >= 0.5:
            idle += 1
            if idle >= 3:
                break
    return _grid_order(names, cell_of)[:50]


def _grid_order(names: list[str], cell_of: dict[str, tuple[Any, int]]) -> list[str]:
    """Names of an author grid in reading order: a name set under another one of a multi-name row, in the same
    column and within 2.5 line heights (an ACM grid cell holding two authors, "Kyle Lo" over "Doug Downey"),
    follows that name rather than the whole next row. ``cell_of``: name -> (its line, its row's index)."""
    per_row: dict[int, int] = {}
    for _x, ri in cell_of.values():
        per_row[ri] = per_row.get(ri, 0) + 1
    out: list[str] = []
    under: dict[str, int] = {}  # host name -> names placed under it
    for n in names:
        host = None
        if n in cell_of and per_row[cell_of[n][1]] == 1:
            x = cell_of[n][0]
            for m in reversed(out):
                if m not in cell_of:
                    continue
                y, yr = cell_of[m]
                if (
                    per_row[yr] >= 2
                    and 0 < x.top - y.top <= 2.5 * max(x.h, y.h)
                    and min(x.r, y.r) - max(x.l, y.l) > 0.5 * min(x.r - x.l, y.r - y.l)
                ):
                    host = m
                    break
        if host is None:
            out.append(n)
            continue
        out.insert(out.index(host) + 1 + under.get(host, 0), n)
        under[host] = under.get(host, 0) + 1
    return out


def _merge_info_authors(names: list[str], info_author: str) -> list[str]:
    info = split_authors(info_author.replace(";", ",")) if info_author else []
    if not names:
        return info
    keys = {_key(n): n for n in info}
    return [keys.get(_key(n), n) for n in names]


def front_matter(
    first_lines: Sequence[Any],
    page_size: tuple[float, float],
    body_h: float,
    body_font: str,
    other_top_lines: Iterable[Any] = (),
    info: dict[str, str] | None = None,
) -> FrontMatter:
    """Title and authors of a document from its first page.

    Args:
        first_lines: the first page's text lines, objects with ``text, l, r, top, h, font`` (points, ``top``
            from the page top; vertical stamps and page numbers already removed).
        page_size: (width, height) of that page in points.
        body_h: the body text's median line height; body_font: the body font's name.
        other_top_lines: lines from the top part of the other pages (running headers and banners there mark
            the same text on page 1 as no title when set in the same size).
        info: the PDF's document info (:func:`pdf_info`), or None.

    Returns:
        a :class:`FrontMatter` of the layout rules (the header model joins in
        :func:`aisac_core.rag.frontmodel.document_front_matter`). Errors: none raised.
    """
    _, H = page_size
    rows = _rows(first_lines)
    banned: set[int] = set()
    for r in rows:  # a running header: text sharing its row with a bare page number
        if len(r) >= 3 or (len(r) >= 2 and any(re.fullmatch(r"\d{1,4}", x.text.strip()) for x in r)):
            banned.update(id(x) for x in r)
    repeated: dict[str, list[float]] = {}
    for x in other_top_lines:
        repeated.setdefault(_key(re.sub(r"\d+", "", x.text)), []).append(x.h)
    for x in first_lines:
        hs = repeated.get(_key(re.sub(r"\d+", "", x.text)))
        if hs and any(abs(h - x.h) <= 0.1 * x.h for h in hs):
            banned.add(id(x))
    best: tuple[float, list[Any], bool] | None = None
    blocks = _blocks(first_lines, H, banned)
    for b in blocks:
        h = max(x.h for x in b)
        rel = h / max(body_h, 1.0)
        text = _block_text(b)
        if len(text) > 300:
            continue
        auth = _followed_by_authors(b, rows)
        big = len(_words(text)) >= 3 or len(re.findall(f"[{_CJK}]", text)) >= 8
        score = min(rel, 2.5) + (0.6 if auth else 0) + (0.2 if big else 0)
        if rel >= 1.2 and (best is None or score > best[0]):
            best = (score, b, auth)
    fm = FrontMatter()
    if best is not None:
        _, block, auth = best
        rel = max(x.h for x in block) / max(body_h, 1.0)
        fm.confidence = (
            0.5
            + (0.15 if rel >= 1.4 else 0)
            + (0.2 if auth else 0)
            + (0.1 if len(_words(_block_text(block))) >= 3 else 0)
        )
    elif blocks:  # no size signal: the first block, when bold or followed by authors
        block = blocks[0]
        bold = block[0].font != body_font and re.search(
            r"bold|medi|black|heavy|semibold|demi|cmbx|-bd|tb$", block[0].font, re.I
        )
        auth = _followed_by_authors(block, rows, strict=True)
        if (bold or auth) and len(_block_text(block)) <= 200 and block[0].top < 0.25 * H:
            fm.confidence = 0.35 + (0.2 if auth else 0)
        else:
            block = []
    else:
        block = []
    if block:
        fm.title, fm.title_lines, fm.title_source = _block_text(block), block, "layout"
        fm.authors = find_authors(first_lines, max(x.top + x.h for x in block))
    info = info or {}
    itit = clean_info_title(info.get("Title"))
    if itit:
        page_key = _key(" ".join(x.text for x in first_lines))
        on_page = _key(itit) in page_key
        if fm.title and (
            _key(fm.title) == _key(itit) or SequenceMatcher(None, _key(fm.title), _key(itit)).ratio() >= 0.9
        ):
            fm.title_source, fm.confidence = "layout+pdf_info", max(fm.confidence, 0.95)
        elif fm.title and on_page and _key(itit).startswith(_key(fm.title)):
            fm.title, fm.title_source, fm.confidence = itit, "layout+pdf_info", 0.9  # a title cut at a line break
        elif on_page:
            fm.title, fm.title_lines, fm.title_source, fm.confidence = itit, [], "pdf_info", 0.7
    if fm.title is None:
        fm.confidence = 0.0
    layout_authors = list(fm.authors)
    fm.authors = _merge_info_authors(fm.authors, info.get("Author", "")) if fm.title else fm.authors
    info_keys = {_key(n) for n in split_authors(info.get("Author", "").replace(";", ","))}
    if layout_authors:
        agree = bool(info_keys) and any(_key(n) in info_keys for n in layout_authors)
        fm.authors_source = "layout+pdf_info" if agree else "layout"
        fm.authors_confidence = 0.9 if agree else 0.75
    elif fm.authors:
        fm.authors_source, fm.authors_confidence = "pdf_info", 0.6
    fm.confidence = round(min(1.0, fm.confidence), 2)
    if fm.title:
        fm.title_reader = "rules"
    if fm.authors:
        fm.authors_reader = "rules"
    return fm
