"""Heading hygiene for PDF layout reconstruction (:mod:`aisac_core.rag.pdf`): what a section heading may not be,
and repairs of headings whose inter-word spaces the PDF lost.

A line typeset like a heading (bold or large) is still no section heading when it is

- text inside a figure or a table: it sits in a run of short non-body lines (axis labels, legends, cells) of
  three or more lines, or next to table cells / numeric rows, or right before a "Figure N" caption, or it is
  set smaller than body text (:func:`figure_debris`);
- an equation: math symbols, math-alphabet letters, an "(3)" equation number (:func:`math_like`);
- a run-in paragraph start: a bold phrase followed, on the same line, by text in the body font
  ("Reward Design We conduct RL training on the"), which is read as body text (:func:`run_in_split`);
- a sentence fragment: it starts with a number and a lower-case word, ends with a lower-case function word,
  or holds a sentence break (:func:`heading_problem`).

:func:`repair_heading` restores the space after a section number ("2RelatedWork" -> "2 Related Work") and
splits CamelCase joins of ordinary words, never acronyms or product names ("SciBERT", "GitHub", "LaTeX").
Thresholds were set on the shared papers (docs/rag.md, "PDF structure") and checked on papers not used to set
them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

#: a figure / table caption start: "Figure 3:", "Fig. 2.", "Table 1:", "TABLE II", "Table 2" (no punctuation)
CAPTION_START = re.compile(r"^(fig(ure|\.)?|table|tab\.)\s*([0-9]+|[IVX]+)[a-z]?\b", re.I)
_BARE_NUMBER = re.compile(r"^\s*(\d{1,2}(\.\d{1,2}){0,3}|[IVX]{1,5}|[A-H])\.?\s*$")
_MATH_CHARS = set("=∑∏∫√∂∇∆∞≈≠≤≥±×÷∈∉⊂⊆∪∩∀∃→←↔⇒⇔∝∼≃≡⊕⊗^|")
#: lower-case words a heading never ends with (a line cut mid-sentence does)
_FUNCTION_WORDS = frozenset(
    "a an the of in on at to for with by from and or nor but is are was were be been that which as than then "
    "we our its their this these those into onto via if when where while whose".split()
)
#: words that start a CamelCase join in headings ("RelatedWork", "FutureWork", "KeyQuestion")
_COMMON_WORDS = frozenset(
    "related work future key term data study case user design system model models method methods results "
    "analysis review reading research learning training evaluation discussion conclusion introduction "
    "experiments experimental background question questions answer answers definition definitions "
    "limitations section paper papers task tasks setup overview approach problem statement main general "
    "human social ethical broader impact further additional open source first second final".split()
)
#: word endings of ordinary English words (left part of a join: "Creating|Multi", "Repeated|Measures")
_WORD_END = re.compile(
    r"(ing|ed|tion|tions|sion|ment|ments|ness|ity|ive|ives|al|ous|ary|ory|ure|ent|ence|"
    r"ance|ies|ers|ors|ists|ics|ism|able|ible|ful|less)$"
)


class LineLike(Protocol):
    """The fields of a text line that the rules read (``aisac_core.rag.pdf._Line``)."""

    text: str
    l: float  # noqa: E741
    r: float
    top: float
    h: float


def repair_heading(text: str) -> str:
    """``text`` with lost spaces restored: after a section number ("2RelatedWork", "4.2Methods",
    "IV.Results"), around "&" ("Background &Terminology"), and inside CamelCase joins of two ordinary words
    ("RelatedWork" -> "Related Work", "CreatingMulti-LexSum" -> "Creating Multi-LexSum"). A join is split
    only at a lower->upper case boundary where both parts are words of 3+ letters (the right one capitalised,
    then lower case) and the left part is a common heading word or has an ordinary English word ending;
    "SciBERT", "LaTeX", "GitHub", "CiteSee", "PubMed", "OpenAI" stay as they are."""
    t = re.sub(
        r"^((?:[1-9]\d?)(?:\.\d{1,2}){0,3}\.?|[IVX]{1,5}\.|[A-H]\.\d{1,2}(?:\.\d{1,2})?\.?)(?=[A-Z][a-z])", r"\1 ", text
    )
    t = re.sub(r"(?<=\w)&(?=\s)|(?<=\s)&(?=\w)|(?<=[a-z])&(?=[A-Z])", " & ", t)
    t = re.sub(r"\s{2,}", " ", t)

    def split(m: re.Match[str]) -> str:
        left, right = m.group(1), m.group(2)
        lw = left.lower()
        if lw in _COMMON_WORDS or right.lower() in _COMMON_WORDS or (len(left) >= 5 and _WORD_END.search(lw)):
            return left + " " + right
        return m.group(0)

    # a word made of exactly "Left" + "Right" parts ("RelatedWork"); "Multi-LexSum" splits only at the join
    return re.sub(r"(?<![A-Za-z])([A-Z]?[a-z]{2,})([A-Z][a-z]{2,})(?![A-Za-z])", split, t)


def math_like(text: str) -> bool:
    """Whether ``text`` reads as an equation: an equation number "(3)" at the end after math, a math-alphabet
    letter (U+1D400-1D7FF), or at least 8 % math symbols (=, sums, arrows, set signs; ``_MATH_CHARS``)
    among its non-space characters, or any "=", sum or integral sign."""
    s = text.replace(" ", "")
    if not s:
        return False
    if any(0x1D400 <= ord(ch) <= 0x1D7FF for ch in s) or any(ch in "=∑∏∫√" for ch in s):
        return True
    math = sum(ch in _MATH_CHARS for ch in s)
    return math / len(s) >= 0.08 or (math >= 1 and re.search(r"\(\d{1,3}\)\s*$", text) is not None)


#: an author in a reference entry: "Arbona V", "Smith JA", "Smith, J.", "J. Smith", "van der Berg A"
_REF_AUTHOR = r"(?:[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)?,?\s+[A-Z]{1,3}\.?|[A-Z]\.(?:\s?[A-Z]\.)*\s+[A-Z][\w'’-]+)"


def reference_entry(text: str) -> bool:
    """Whether ``text`` reads like an entry of a reference list: a list number ("40.", "[12]", "12)") followed by
    two or more author names in citation form ("40. Arbona V, Manzi M, ..."), or an entry with "et al." or a
    parenthesised year after the names. Such a line is never a heading."""
    t = text.strip()
    m = re.match(r"^(\[\d{1,3}\]|\d{1,3}[.)])\s+", t)
    if not m:
        return False
    rest = t[m.end() :]
    if re.match(rf"^{_REF_AUTHOR}\s*(?:[,;&]|\band\b)\s*{_REF_AUTHOR}", rest):
        return True
    return bool(re.match(rf"^{_REF_AUTHOR}", rest) and re.search(r"\bet al\b|\((19|20)\d\d[a-z]?\)", rest))


def heading_problem(text: str) -> str | None:
    """Why ``text`` cannot be a section heading, or None. Reasons: ``long`` (over 120 characters),
    ``caption`` (starts like "Figure 3" / "Table 2"), ``math`` (:func:`math_like`), ``digits`` (under half
    letters), ``table-cell`` (holds " | "), ``fragment`` (ends with a lower-case function word or a comma,
    or starts with a number and a lower-case word), ``reference`` (a reference-list entry,
    :func:`reference_entry`), ``run-in`` (a sentence break inside: "Data Classes. We
    ..."; numbered headings may hold "RQ1: ..."), ``missing-space`` (a number glued to a word,
    "2RelatedWork"). Used to reject heading candidates and, in tests, to check the headings of real papers."""
    t = text.strip()
    letters = sum(ch.isalpha() for ch in t)
    nonspace = max(1, len(t.replace(" ", "")))
    if len(t) > 120:
        return "long"
    if CAPTION_START.match(t):
        return "caption"
    if " | " in t or t.startswith("|") or t.endswith("|"):
        return "table-cell"
    if math_like(t):
        return "math"
    if letters / nonspace < 0.5:
        return "digits"
    if re.match(r"^(\d+(\.\d+)*\.?|[A-H](\.\d+)+\.?)[A-Z][a-z]", t):
        return "missing-space"
    words = t.split()
    last = words[-1] if words else ""
    if t.endswith(",") or (len(words) >= 2 and last in _FUNCTION_WORDS):
        return "fragment"
    if re.match(r"^\d+(\.\d+)*\s+[a-z]", t):
        return "fragment"
    if reference_entry(t):
        return "reference"
    numbered = re.match(r"^(\d+(\.\d+)*\.?|[A-H](\.\d+)*\.?|[IVX]+\.)\s", t) is not None
    if (
        not numbered
        and re.search(r"[a-z)][.?!:;]\s+\S", t)
        and not re.search(r"\b(et al|vs|e\.g|i\.e|cf|Fig|Eq|No|St|Dr|Avg)[.:]\s", t)
    ):
        return "run-in"
    return None


def run_in_split(words: Sequence[tuple[str, bool, bool]]) -> int:
    """Number of leading words of a line that form a run-in heading, or 0. ``words``: the line's words in
    order as ``(text, bold, in the body font)``. A run-in heading is 1-10 bold words followed by at least two
    more words, most of them in the body font ("Selecting PDFs | We remove PDFs which are less"); a heading
    whose last word is set in italics or code ("... with magelib") is no run-in."""
    n = 0
    while n < len(words) and words[n][1]:
        n += 1
    rest = words[n:]
    return n if 1 <= n <= 10 and len(rest) >= 2 and sum(w[2] for w in rest) >= 0.6 * len(rest) else 0


def figure_debris(
    seq: Sequence[LineLike],
    body: Sequence[bool],
    strong: Sequence[bool],
    in_row: Sequence[bool],
    short_line: Sequence[bool],
    body_h: float,
) -> list[bool]:
    """Which lines of one page sit in a figure or table area.

    ``seq``: the page's lines in reading order; ``body[i]``: line i is a body line (body size, not bold, wide
    or ending a sentence); ``strong[i]``: a numbered heading or a usual top-level name, which is never
    debris; ``in_row[i]``: the line shares its row with another line of its column (table cells, figure
    labels); ``short_line[i]``: the line spans under 55 % of its column; ``body_h``: the body text height.
    Lines between body lines, strong headings and captions form runs; a run is debris when it has 3+ short
    lines, holds two table cells or a mostly-numeric line (a bare section number "1" beside its heading is
    neither), ends right
    before a "Figure N" caption, or starts right after a "Table N" caption. Lines set smaller than 0.8 x
    body height are debris wherever they are (figure text is small). Returns one flag per line."""
    n = len(seq)
    out = [False] * n
    i = 0
    while i < n:
        if body[i] or strong[i] or CAPTION_START.match(seq[i].text):
            i += 1
            continue
        j = i
        while j < n and not (body[j] or strong[j] or CAPTION_START.match(seq[j].text)):
            j += 1
        run = range(i, j)
        before_fig = j < n and re.match(r"(?i)fig", seq[j].text) is not None and CAPTION_START.match(seq[j].text)
        after_tab = (
            i > 0
            and re.match(r"(?i)tab", seq[i - 1].text) is not None
            and CAPTION_START.match(seq[i - 1].text) is not None
        )
        numeric = any(
            sum(ch.isalpha() for ch in seq[k].text) < 0.5 * len(seq[k].text.replace(" ", ""))
            and not _BARE_NUMBER.match(seq[k].text)
            for k in run
        )
        short = sum(short_line[k] for k in run)
        cells = sum(in_row[k] and not _BARE_NUMBER.match(seq[k].text) for k in run) >= 2
        if short >= 3 or cells or numeric or before_fig or after_tab:
            for k in run:
                out[k] = True
        i = j
    for k in range(n):
        if seq[k].h < 0.8 * body_h:
            out[k] = True
    return out


def ends_open(text: str) -> bool:
    """Whether a heading line ends mid-phrase (a comma or a lower-case function word): its next line
    continues it ("7.2 How does X affect reading difficulty, understanding, and" + "ability to ...")."""
    words = text.split()
    return bool(words) and (text.endswith(",") or words[-1] in _FUNCTION_WORDS)
