"""Sentence rules of the no-model (extractive) answer: which evidence sentences may be quoted, how they are
cleaned, and which ones answer a definition or a quantity question.

Rules (measured on the papermage PDFs of the shared test data, tests/fixtures/paper_questions.json):

- **not quotable** (:func:`reject_reason`): table dumps (cells joined by ``" | "``, or runs of three or more
  numeric cells, or mostly numbers), reference-list entries ("Name. 2020. Title. In Proceedings of ...",
  "[20] A. Author ..."), caption fragments ("Figure 1: ...", "Table 2: ..." anywhere in the sentence, since a
  chunk boundary may glue a caption to body text), sentences that are mostly markers or symbols, and
  sentences with fewer than six words once markers are removed, footnote text glued into the body (a sentence
  starting with a lone footnote number: "7 pronounced ...", "1 The dataset can be accessed via ...", but not a
  count: a number, a plural noun and a lower-case word, "13 papers mention that ..."), and code
  listings glued to a sentence ("... Recipes: 1 from papermage import CoreRecipe 2 recipe = ...").
- **cleaning** also drops section pointers "(§2)" and re-joins words broken at a line end ("guide- lines").
- **cleaning** (:func:`strip_markers`): numeric citation markers ``[12]``, ``[3, 4]``, ``[3-5]``, unicode
  superscripts, footnote daggers, and footnote numbers glued to punctuation ("word.12 ", "S2ORC, 1 a large")
  are removed; author-year citations ("(Smith et al., 2020)") are kept.
- **duplicates** (:func:`near_duplicate`): two sentences are the same when their word sets overlap by at least
  80 % (Jaccard), e.g. the abstract's sentence repeated in the introduction.
- **definition questions** (:func:`question_kind` ``"definition"``: "What is/are X?", "What does X do?") prefer
  sentences that define: "X is/are a ...", "X, a ...", "We present/introduce/propose X", "In this paper, we
  ..." (:func:`is_definition`).
- **quantity questions** ("How many/much ...", "What is the number/size/value ...") prefer sentences with a
  number that is not a year (:func:`has_quantity`).
"""

from __future__ import annotations

import re

_BRACKET_MARKER = re.compile(r"\s*\[\d+(?:\s*[,;–-]\s*\d+)*\]")
_SUPERSCRIPT = re.compile(r"[\u00b9\u00b2\u00b3\u2070-\u2079\u2020\u2021\u2217]+")
_SECTION_REF = re.compile(r"\s*\(\s*§\s*[\dA-Z][\d.,;\s–-]*\)")  # "(§2)", "(§4.1, 5)"
#: a word broken at a line end: "guide- lines" (not "pre- and post-")
_BROKEN_WORD = re.compile(r"(?<=[a-z])- (?!(?:and|or|to|vs|nor|versus)\b)(?=[a-z])")
_CODE = re.compile(r"\bfrom [\w.]+ import \w|^\s*import \w|\b[a-z_]\w* = [A-Za-z_][\w.]*\(|[{};]\s*$|=>|::")
#: a footnote number glued to punctuation after a word: "writing.1 ", "S2ORC,1 a"
_GLUED_FOOTNOTE = re.compile(r"(?<=[A-Za-z)][.,;:])\d{1,2}(?=\s|$)")
#: a footnote number after a comma, followed by an article or relative pronoun: "S2ORC, 1 a large corpus"
_SPACED_FOOTNOTE = re.compile(r"(?<=[A-Za-z)],)\s\d{1,2}(?=\s+(?:a|an|the|which|who|that)\b)")
#: a footnote's text glued into the body: "7 pronounced ...", "2 We exclude five papers ..." (a lone number first);
#: not a count that starts a sentence: a number, a plural noun, a lower-case word ("13 papers mention that ...")
_FOOTNOTE_START = re.compile(r"^\d{1,2}\s+(?![%x×]|[A-Z]?[a-z]*\s*(?:of|out)\b|[a-z]+[^s\W]?s\s+[a-z])[A-Za-z\"“]")
_TRAILING_FOOTNOTE = re.compile(r"(?<=[a-z][.!?])\s?\d{1,2}$")
_NUMERIC_CELL = re.compile(r"^[-+±~<>≈]?\(?\d[\d,.]*%?\)?$|^n/a$|^-$")
_CAPTION = re.compile(r"(^|\s)(Figure|Fig\.|Table|Tab\.)\s*[A-Z]?\d+[a-z]?\s*[:.|]", re.I)
_REFERENCE_PATTERNS = [
    re.compile(r"^\[\d+\]\s+\S"),  # "[20] Graham Dove and ..."
    re.compile(r"\.\s(19|20)\d\d[a-z]?\.\s"),  # "Anne-Laure Fayard. 2020. Monsters ..."
    re.compile(r"\bet al\.,?\s(19|20)\d\d[a-z]?\.\s"),
    re.compile(r"\b(In )?Proceedings of (the )?\d*"),
    re.compile(r"\barXiv preprint\b|\barXiv:\d{4}\.\d{4,5}\b|\bpp\.\s*\d|\bVol\.\s*\d|\bdoi:\s*10\.", re.I),
    re.compile(r"\b[A-Z][a-z]+, [A-Z]\.(?: ?[A-Z]\.)?,? (?:and |& )?[A-Z][a-z]+, [A-Z]\."),  # "Lo, K., Wang, L."
]
_URL = re.compile(r"https?://\S+|\bwww\.\S+|\bgithub\.com/\S+")
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(\s?(?:%|[KMB]\b|k\b|million|billion|thousand))?")
_DEFINITION_Q = re.compile(r"^\s*what\s+(?:is|are|was|were|does|do|did)\b", re.I)
_QUANTITY_Q = re.compile(
    r"\bhow\s+(?:many|much|large|big|long)\b|\bwhat\s+(?:is|was|are|were)\s+the\s+(?:number|size|"
    r"value|amount|percentage|proportion|share|count)\b|\bwhat\s+(?:percentage|fraction|share)\b",
    re.I,
)
_WE_DEFINE = re.compile(
    r"\b(?:we|this (?:position )?(?:paper|work|article|study))\s+(?:first\s+|also\s+)?"
    r"(?:present|introduce|propose|describe|release|develop|build|create|design|argue|"
    r"contribute|offer)s?\b",
    re.I,
)
_IN_THIS_PAPER = re.compile(r"\bin this (?:position )?(?:paper|work|article),?\s+we\b", re.I)
_TRAILING_VERBS = {
    "do",
    "does",
    "argue",
    "propose",
    "present",
    "introduce",
    "show",
    "contain",
    "offer",
    "provide",
    "describe",
    "study",
    "mean",
    "find",
    "achieve",
    "measure",
    "evaluate",
    "include",
}
_GENERIC = {
    "the",
    "a",
    "an",
    "paper",
    "position",
    "system",
    "tool",
    "toolkit",
    "dataset",
    "corpus",
    "method",
    "framework",
    "approach",
    "study",
    "work",
    "article",
    "model",
    "benchmark",
}


def strip_markers(sentence: str) -> str:
    """``sentence`` without numeric citation markers, superscripts, daggers, glued footnote numbers and section
    pointers "(§2)" (module docstring), words broken at a line end re-joined ("guide- lines"), whitespace
    normalised. Author-year citations are kept."""
    s = _BRACKET_MARKER.sub("", sentence)
    s = _SECTION_REF.sub("", s)
    s = _BROKEN_WORD.sub("", s)
    s = _SUPERSCRIPT.sub("", s)
    s = _GLUED_FOOTNOTE.sub("", s)
    s = _SPACED_FOOTNOTE.sub("", s)
    s = _TRAILING_FOOTNOTE.sub("", s)
    s = re.sub(r"\s+([,.;:!?)])", r"\1", s)
    s = re.sub(r"\(\s*\)", "", s)
    return " ".join(s.split())


def _numeric_cells(tokens: list[str]) -> int:
    """The longest run of numeric tokens in ``tokens``."""
    best = run = 0
    for t in tokens:
        run = run + 1 if _NUMERIC_CELL.match(t.strip("()")) else 0
        best = max(best, run)
    return best


def is_table_dump(text: str) -> bool:
    """Whether ``text`` is a flattened table: two or more ``" | "`` cell joins, or a run of at least three numeric
    cells, or more than 40 % numeric tokens."""
    if text.count(" | ") >= 2 or re.search(r"\|\s*\|", text):
        return True
    tokens = text.split()
    if not tokens:
        return False
    if _numeric_cells(tokens) >= 3:
        return True
    nums = sum(bool(_NUMERIC_CELL.match(t.strip("(),;"))) for t in tokens)
    return len(tokens) >= 4 and nums / len(tokens) > 0.4


def is_reference_entry(text: str) -> bool:
    """Whether ``text`` looks like a reference-list entry ("Name. 2020. Title. In Proceedings of ...", "[20] A.
    Author ...", "arXiv preprint", "pp. 12", "Lo, K., Wang, L.")."""
    return sum(bool(p.search(text)) for p in _REFERENCE_PATTERNS) >= (
        1 if _REFERENCE_PATTERNS[0].search(text) or _REFERENCE_PATTERNS[1].search(text) else 2
    )


def is_caption(text: str) -> bool:
    """Whether ``text`` holds a figure or table caption ("Figure 1: ...", "Table 2. ...")."""
    return bool(_CAPTION.search(text))


def reject_reason(sentence: str) -> str | None:
    """Why ``sentence`` (as found in the evidence, before :func:`strip_markers`) must not be quoted: ``"table"``,
    ``"reference"``, ``"caption"``, ``"footnote"`` (a footnote's text: a lone number first), ``"code"`` (a code
    listing: "from x import y", "a = f(...)"), ``"markers"`` (mostly
    markers, symbols or too short) — or None."""
    if is_table_dump(sentence):
        return "table"
    if is_reference_entry(sentence):
        return "reference"
    if is_caption(sentence):
        return "caption"
    if _FOOTNOTE_START.match(sentence):
        return "footnote"
    if _CODE.search(sentence):
        return "code"
    clean = strip_markers(_URL.sub(" ", sentence))
    words = re.findall(r"[A-Za-z]{2,}", clean)
    letters = sum(ch.isalpha() for ch in clean) / max(1, len(clean.replace(" ", "")))
    if len(words) < 6 or letters < 0.6 or len(strip_markers(sentence)) < 0.6 * len(sentence):
        return "markers"
    return None


def _words(s: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", s.lower()))


def near_duplicate(a: str, b: str, threshold: float = 0.8) -> bool:
    """Whether sentences ``a`` and ``b`` say the same: word-set Jaccard >= ``threshold`` or one's words contain
    the other's (case, punctuation and markers ignored)."""
    wa, wb = _words(strip_markers(a)), _words(strip_markers(b))
    if not wa or not wb:
        return False
    inter = len(wa & wb)
    return inter / len(wa | wb) >= threshold or (inter == min(len(wa), len(wb)) and min(len(wa), len(wb)) >= 6)


def question_kind(task: str) -> str:
    """``"quantity"`` (how many / how much / what is the number ...), ``"definition"`` (what is / what does X
    do), or ``"other"``."""
    if _QUANTITY_Q.search(task):
        return "quantity"
    if _DEFINITION_Q.search(task):
        return "definition"
    return "other"


def question_subject(task: str) -> str | None:
    """The entity a definition question asks about: "What does the CiteSee tool do?" -> "CiteSee", "What is Paper
    Plain?" -> "Paper Plain"; None when the question is not a definition question or names nothing."""
    m = re.match(r"^\s*what\s+(is|are|was|were|does|do|did)\s+(.+?)[\s?.!]*$", task, re.I)
    if not m:
        return None
    words = m.group(2).split()
    if m.group(1).lower() in ("does", "do", "did") and len(words) > 1 and words[-1].lower() in _TRAILING_VERBS:
        words = words[:-1]
    # generic words in lower case only: "the position paper" goes, "Paper Plain" stays
    while words and (words[0].lower() == "the" or words[0] in _GENERIC):
        words = words[1:]
    while words and words[-1] in _GENERIC:
        words = words[:-1]
    return " ".join(words) or None


def mentions(sentence: str, subject: str | None) -> bool:
    """Whether ``sentence`` names ``subject`` (case-insensitive; any hyphen or space variant)."""
    if not subject:
        return False
    pat = r"[\s-]?".join(re.escape(w) for w in re.split(r"[\s-]+", subject) if w)
    return bool(re.search(pat, sentence, re.I))


def is_definition(sentence: str, subject: str | None, own_document: bool) -> bool:
    """Whether ``sentence`` defines ``subject``: "X is/are a|an|the ...", "X, a|an ...", "We present/introduce X"
    (any of them naming ``subject``); "We present/introduce ..." and "In this paper, we ..." also count
    without the name when the sentence comes from the document the question names (``own_document``)."""
    s = strip_markers(sentence)
    if subject and mentions(s, subject):
        pat = r"[\s-]?".join(re.escape(w) for w in re.split(r"[\s-]+", subject) if w)
        if re.search(pat + r"\)?\s*(?:,\s*)?(?:is|are|was)\s+(?:a|an|the|one)\b", s, re.I):
            return True
        if re.search(pat + r"\)?\s*(?:\([^)]*\))?\s*,\s*(?:a|an)\s", s, re.I):
            return True
        if _WE_DEFINE.search(s) and re.search(_WE_DEFINE.pattern + r"[^.]{0,60}?" + pat, s, re.I):
            return True
    return own_document and bool(_IN_THIS_PAPER.search(s) or _WE_DEFINE.search(s))


def has_quantity(sentence: str) -> bool:
    """Whether ``sentence`` states a number that is not a year (1900-2049) or a section/figure number."""
    for m in _NUMBER.finditer(strip_markers(sentence)):
        num, unit = m.group(1), m.group(2)
        if unit or "," in num or "." in num:
            return True
        if not re.fullmatch(r"(19|20[0-4])\d", num) and len(num) >= 2:
            return True
    return False


_SENTENCE_END = re.compile(r"[.!?:;][\"”')\]]*$")
#: an abbreviation that ends no sentence ("Beltagy et al." before "(2019) report ...")
_ABBREVIATION_END = re.compile(r"\b(?:et al|e\.g|i\.e|Fig|Eq|vs|cf|No)\.$")


def cut_at_end(sentence: str) -> bool:
    """Whether ``sentence`` stops without a sentence end (``.!?:;``, closing quotes or brackets allowed) or with an
    abbreviation ("et al."): a sentence cut at a chunk or page end ("The resulting corpus cor-")."""
    s = sentence.rstrip()
    return not _SENTENCE_END.search(s) or bool(_ABBREVIATION_END.search(s))


def cut_at_start(sentence: str) -> bool:
    """Whether ``sentence`` begins inside a sentence: with a lower-case letter ("pus contains 16.4B tokens") or a
    parenthesised year or number ("(2019) report ...")."""
    return bool(re.match(r"[a-z]|\(\d", sentence.lstrip()))


def join_cut(head: str, tail: str) -> str:
    """The two parts of a sentence cut by a chunk boundary as one: a word hyphenated at the cut is re-joined
    ("cor-" + "pus" -> "corpus"), other parts are joined with a space."""
    head, tail = head.rstrip(), tail.lstrip()
    if re.search(r"[A-Za-z]-$", head) and tail[:1].islower():
        return head[:-1] + tail
    return f"{head} {tail}"


#: a sentence that continues the subject of the one before it ("It", "These", "The latter" ...): anaphora, read
#: with its antecedent sentence (Halliday & Hasan 1976, reference as cohesion)
_CONTINUES = re.compile(
    r"^(?:It|Its|They|Their|Them|These|This|Those|Such|Both|The latter|The former|Here|He|She|His|Her)\b"
)


def continued_from(
    text: str, spans: list[tuple[int, int]], span: tuple[int, int], sentence: str
) -> tuple[int, int] | None:
    """The span of the sentence of ``text`` right before ``span`` when ``sentence`` continues its subject
    (:data:`_CONTINUES`: it opens with a pronoun or "the latter" / "these"), else None. ``spans``: the sentence
    spans of ``text`` in order."""
    if not _CONTINUES.match(sentence):
        return None
    before = [s for s in spans if s[1] <= span[0]]
    return before[-1] if before else None
