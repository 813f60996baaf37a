"""Text as printed on the page: the repairs a PDF's text layer needs before its words can be quoted.

Three artefacts of PDF text extraction, each repaired where aisac builds a PDF's text
(:func:`aisac_core.rag.pdf.reconstruct_pdf`), so that chunk text, quotes and anchors (char spans over the stored
text) all carry the repaired text:

- **spacing diacritics** (:func:`compose_diacritics`): TeX draws an accent as a glyph of its own over the base
  letter, and the text layer then holds the *spacing* form of the accent (U+00A8 DIAERESIS, U+00B4 ACUTE ACCENT,
  U+02C7 CARON, ...) beside the letter: "F¨arber", "Stanojevi´c", "Kry´sci ´nski". Each spacing accent next to a
  letter becomes the corresponding combining mark after that letter (the Unicode Standard 15.0, §7.9 "Combining
  Marks", and the compatibility decompositions of the spacing forms in UnicodeData.txt, e.g. U+00A8 ≡ U+0020
  U+0308), and the text is put in Normalization Form C (UAX #15): "Färber", "Stanojević", "Kryściński".
- **lost word spaces** (:func:`respace`): docling-parse joins two words when the PDF draws no space character and
  their glyphs are close ("Lucy LuWang"); pdfium's text page (FPDFText, PDF 32000-1:2008 §9.10) places a space
  from the glyph positions ("Lucy Lu Wang"). A line takes pdfium's spaces when both read the same characters
  (apart from whitespace and typographic variants); only spaces are added, no character changes.
- **line-end hyphens** (:class:`Hyphenation`): a word broken across lines ("machine-" + "readable",
  "connec-" + "tion") is joined without the hyphen only when the break is a typesetter's: the document's own
  vocabulary decides first (the form it uses elsewhere, joined or hyphenated), then an English word list (the
  word-frequency list of the ``pyspellchecker`` package, 160,572 words from OpenSubtitles and Wiktionary): a
  joined form that is a word is joined; two halves that are words while the joined form is not keep the hyphen
  ("machine-readable"); anything else is joined (a syllable break). A hyphen before a capital or a digit
  ("non-" + "English", "COVID-" + "19") is kept.

Measured on the shared PDFs against their Markdown ground truth: docs/rag.md, "Text as printed"
(``python -m bench --only text``).
"""

from __future__ import annotations

import functools
import gzip
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from aisac_core.rag.pdfpage import TYPOGRAPHIC_FOLD, pdfium_pages

#: spacing accents of PDF text layers -> the combining mark they stand for (UnicodeData.txt compatibility
#: decompositions: U+00A8 <compat> 0020 0308, U+00B4 <compat> 0020 0301, U+02D8 <compat> 0020 0306, ...; U+02C6,
#: U+02C7 and U+02DC are modifier letters with the same role in TeX's output). The ASCII forms (^ ` ~) are left
#: alone: in running text they are code or notation far more often than accents.
SPACING_ACCENTS: dict[str, str] = {
    "\u00a8": "\u0308",  # diaeresis
    "\u00b4": "\u0301",  # acute
    "\u02cb": "\u0300",  # modifier grave
    "\u02c6": "\u0302",  # circumflex
    "\u02dc": "\u0303",  # small tilde
    "\u00af": "\u0304",  # macron
    "\u02c9": "\u0304",  # modifier macron
    "\u02d8": "\u0306",  # breve
    "\u02d9": "\u0307",  # dot above
    "\u02da": "\u030a",  # ring above
    "\u02dd": "\u030b",  # double acute
    "\u02c7": "\u030c",  # caron
    "\u00b8": "\u0327",  # cedilla
    "\u02db": "\u0328",  # ogonek
}
_ACC = "[" + "".join(SPACING_ACCENTS) + "]"
_LETTER = r"[^\W\d_]"
#: an accent before its letter (TeX's order), possibly with a space the extractor put on either side of it: the
#: space before goes when a letter precedes it ("Kry´sci ´nski"), the space after when no letter precedes the accent
_BEFORE = re.compile(
    rf"(?P<pre>{_LETTER}) ?(?P<acc>{_ACC})(?P<base>{_LETTER})|(?<!{_LETTER})(?P<acc2>{_ACC}) ?(?P<base2>{_LETTER})"
)
#: an accent set under its letter (cedilla, ogonek) follows that letter in TeX's output ("Lourenc¸o")
_BELOW = re.compile(rf"(?P<base>{_LETTER})(?P<acc>[\u00b8\u02db])")
#: an accent after its letter, with neither a letter nor a digit following ("a¨ "; not "MSˆ2", TeX's \^{})
_AFTER = re.compile(rf"(?P<base>{_LETTER})(?P<acc>{_ACC})(?![^\W_])")


def compose_diacritics(text: str) -> str:
    """``text`` with each spacing accent next to a letter made the combining mark of that letter, then NFC (module
    docstring): a cedilla or ogonek of the letter before it, another accent of the letter after it (TeX's order)
    or, with no letter after it, of the letter before: "F¨arber" -> "Färber", "Lourenc¸o" -> "Lourenço", "Kry´sci ´nski" -> "Kryściński", "( ˜ 𝑥" -> "( 𝑥̃" (no precomposed form:
    the letter and its combining mark). An accent next to no letter (a digit, punctuation, a line of its own) is
    left as it is ("MSˆ2": a TeX ``\\^{}``). Idempotent; a text without spacing accents is only put in NFC."""
    if any(ch in SPACING_ACCENTS for ch in text):

        def before(m: re.Match[str]) -> str:
            if m.group("acc") is not None:
                return m.group("pre") + m.group("base") + SPACING_ACCENTS[m.group("acc")]
            return m.group("base2") + SPACING_ACCENTS[m.group("acc2")]

        text = _BELOW.sub(lambda m: m.group("base") + SPACING_ACCENTS[m.group("acc")], text)
        text = _BEFORE.sub(before, text)
        text = _AFTER.sub(lambda m: m.group("base") + SPACING_ACCENTS[m.group("acc")], text)
    return unicodedata.normalize("NFC", text)


def spacing_accents(text: str) -> int:
    """The number of spacing accents (:data:`SPACING_ACCENTS`) in ``text``: the "¨"-style artefacts left."""
    return sum(text.count(ch) for ch in SPACING_ACCENTS)


def _fold(ch: str) -> str:
    return unicodedata.normalize("NFKC", ch).translate(TYPOGRAPHIC_FOLD)


def _plain_letter(ch: str) -> bool:
    """A letter of running text: not a mathematical alphanumeric symbol (U+1D400-U+1D7FF: a formula's "𝛽𝑄𝐴")."""
    return ch.isalpha() and not "\U0001d400" <= ch <= "\U0001d7ff"


def respace(parsed: str, glyphs: str) -> str:
    """``parsed`` (a line as docling-parse read it) with the word spaces of ``glyphs`` (the same line as pdfium
    read it from the glyph positions) that it lacks: "Lucy LuWang" + "Lucy Lu Wang" -> "Lucy Lu Wang". Only spaces
    are added, between two letters or after a comma or semicolon before a letter, and only when both texts hold the
    same characters apart from whitespace, spacing accents (which the two place differently) and typographic
    variants (NFKC, dashes, apostrophes); otherwise ``parsed`` is returned unchanged."""
    if not glyphs or parsed == glyphs:
        return parsed

    def counted(ch: str) -> str:
        return "" if ch.isspace() or ch in SPACING_ACCENTS else _fold(ch)

    # pdfium may set an accent apart, with a space on one side (no word space) or on both (one word space)
    glyphs = re.sub(rf" ?{_ACC} ?", lambda m: " " if len(m.group(0)) == 3 else "", glyphs)
    flat_a = "".join(counted(ch) for ch in parsed)
    if not flat_a or flat_a != "".join(counted(ch) for ch in glyphs):
        return parsed
    spaced: set[int] = set()  # the positions in the common characters after which glyphs has a space
    k = 0
    for ch in glyphs:
        if ch.isspace() and k:
            spaced.add(k)
        k += len(counted(ch))
    out: list[str] = []
    k = 0
    prev = " "
    for ch in parsed:
        # between two letters ("LuWang"), or after a comma or semicolon before a letter ("Ciorascu,Wendy"); not
        # around other punctuation, where pdfium's gaps are a code font's or a formula's ("log(add(3, 5))")
        if k in spaced and _plain_letter(ch) and (_plain_letter(prev) or prev in ",;"):
            out.append(" ")
        out.append(ch)
        k += len(counted(ch))
        prev = ch
    return "".join(out)


_WORD = re.compile(r"[^\W\d_]+(?:[-\u2010][^\W\d_]+)*")


@functools.cache
def word_frequencies() -> Mapping[str, int]:
    """The English word list (lower case -> frequency, read only) of the ``pyspellchecker`` package
    (``spellchecker/resources/en.json.gz``, 160,572 words), read once on first use (0.2 s); empty when the package
    is missing (the document's own vocabulary then decides alone)."""
    try:
        from importlib.resources import files

        raw = (files("spellchecker") / "resources" / "en.json.gz").read_bytes()
    except (ImportError, FileNotFoundError, OSError):
        return MappingProxyType({})
    data = json.loads(gzip.decompress(raw))
    return MappingProxyType({str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {})


class Hyphenation:
    """Line-end hyphen decisions for one document (module docstring): built from all its line texts in the order of
    the text layer, whose words (runs of letters, hyphenated compounds as one word and as their parts; not the two
    halves of a word broken at a line end) are the document's vocabulary. ``words``: the word list (lower case ->
    frequency); default :func:`word_frequencies`."""

    def __init__(self, lines: Iterable[str], words: Mapping[str, int] | None = None) -> None:
        self.vocab: Counter[str] = Counter()
        broken = False
        for t in lines:
            toks = _WORD.findall(t)
            if broken and toks and t.lstrip()[:1].isalpha():
                toks = toks[1:]  # the second half of a word broken at the end of the line before is no word
            broken = t.rstrip().endswith(("-", "\u2010"))
            if broken and toks:
                toks = toks[:-1]  # nor is the first half
            for w in toks:
                w = w.lower().replace("\u2010", "-")
                self.vocab[w] += 1
                if "-" in w:
                    self.vocab.update(w.split("-"))
        self.words = word_frequencies() if words is None else words
        #: decisions taken, ``(first half with hyphen, second half, joined?)``, in order (the bench's sample)
        self.decisions: list[tuple[str, str, bool]] = []

    def join_word(self, head: str, tail: str) -> bool:
        """Whether ``head`` (the letters before a line-end hyphen, e.g. "connec") and ``tail`` (the letters that
        start the next line, "tion") are one word broken by the typesetter (join without the hyphen) rather than a
        hyphenated compound (keep the hyphen)."""
        joined, kept = (head + tail).lower(), f"{head}-{tail}".lower()
        cj, ck = self.vocab.get(joined, 0), self.vocab.get(kept, 0)
        if cj != ck:
            return cj > ck
        if joined in self.words:
            return True
        h, t = head.lower(), tail.lower()
        halves = all(len(x) >= 2 and (x in self.words or self.vocab.get(x, 0) >= 2) for x in (h, t))
        return not halves

    def join(self, prev: str, nxt: str) -> str:
        """Two consecutive lines of one paragraph as one text: a line-end hyphen after a letter is dropped when
        :meth:`join_word` says so ("connec-" + "tion ..." -> "connection ..."), kept with no space otherwise
        ("machine-" + "readable" -> "machine-readable"; before a capital or a digit: "non-English", "COVID-19");
        any other pair is joined with one space."""
        if len(prev) > 1 and prev[-1] in "-\u2010" and prev[-2].isalpha() and nxt[:1].isalnum():
            if not nxt[:1].islower():
                return prev + nxt
            head_m = re.search(r"[^\W\d_]+$", prev[:-1])
            tail_m = re.match(r"[^\W\d_]+", nxt)
            if head_m and tail_m:
                j = self.join_word(head_m.group(0), tail_m.group(0))
                self.decisions.append((prev[head_m.start() :], tail_m.group(0), j))
                return prev[:-1] + nxt if j else prev + nxt
            return prev[:-1] + nxt
        return prev + " " + nxt


def glyph_texts(path: object, boxes: dict[int, list[tuple[float, float, float, float]]]) -> dict[int, list[str]]:
    """pdfium's text (spaces placed from the glyph positions) inside each box ``(l, t, r, b)`` (points, origin top
    left) of ``boxes`` (1-based page -> boxes), per page in the same order; an empty string for a box of a page
    pdfium cannot read (rotated, missing), and no pages at all when the file cannot be opened."""
    out: dict[int, list[str]] = {}
    if path is None or not boxes:
        return out
    try:
        with pdfium_pages(path, list(boxes)) as pages:
            for pno, page in pages:
                bxs = boxes[pno]
                if page.get_rotation() % 360:
                    out[pno] = [""] * len(bxs)
                    continue
                H = page.get_height()
                tp = page.get_textpage()
                # each line box less a tenth of its height at the top and the bottom: glyphs of the lines above
                # and below stay out, an apostrophe or a superscript of the line itself stays in
                out[pno] = [
                    tp.get_text_bounded(
                        left=l - 0.5, bottom=H - (t + 9 * b) / 10, right=r + 0.5, top=H - (9 * t + b) / 10
                    )
                    for l, t, r, b in bxs  # noqa: E741
                ]
    except Exception:  # the parsed text stands when pdfium cannot read the file
        return {}
    return out


def form_text_lines(
    path: object, covered: dict[int, list[tuple[float, float, float, float]]]
) -> dict[int, list[tuple[str, float, float, float, float]]]:
    """Text the page prints that docling-parse does not read: the text of form XObjects (PDF 32000-1:2008 §8.10; an
    included PDF figure or a boxed passage drawn as one), as ``(text, l, t, r, b)`` lines (points, origin top left)
    per 1-based page of ``covered`` (the boxes of the lines already read there). A line is one of pdfium's text
    rectangles whose centre lies inside a form object on the page and that overlaps none of the ``covered`` boxes
    (1 pt slack), with 2+ letters; pdfium places its word spaces from the glyph positions. Pages without a form
    object, rotated pages and files pdfium cannot read give none."""
    out: dict[int, list[tuple[str, float, float, float, float]]] = {}
    if path is None or not covered:
        return out
    try:
        import pypdfium2.raw as pdfium_c

        with pdfium_pages(path, list(covered)) as pages:
            for pno, page in pages:
                boxes = covered[pno]
                if page.get_rotation() % 360:
                    continue
                forms = [o.get_bounds() for o in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_FORM,), max_depth=1)]
                if not forms:
                    continue
                H = page.get_height()
                tp = page.get_textpage()
                rows: list[tuple[str, float, float, float, float]] = []
                for i in range(tp.count_rects()):
                    x0, y0, x1, y1 = tp.get_rect(i)
                    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
                    if not any(a <= cx <= c and b <= cy <= d for a, b, c, d in forms):
                        continue
                    l, t, r, b = x0, H - y1, x1, H - y0  # noqa: E741
                    if any(l < br + 1 and bl - 1 < r and t < bb + 1 and bt - 1 < b for bl, bt, br, bb in boxes):
                        continue
                    text = " ".join(tp.get_text_bounded(x0, y0, x1, y1).replace("\x02", "-").split())
                    if sum(ch.isalpha() for ch in text) >= 2:
                        rows.append((text, l, t, r, b))
                if rows:
                    out[pno] = rows
    except Exception:  # the parsed lines stand when pdfium cannot read the file
        return {}
    return out
