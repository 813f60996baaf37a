"""What a question asks for, and whether a sentence has it: the rules shared by the extractive answer and the
model-free support judge.

- **asked type** (:func:`asked_type`): ``number`` ("how many / how much / how long ...", "what average / median
  ...", "what mass / probability / percentage / rate ...", "when", "which year"), ``yesno`` (a question starting
  with is / does / did / can ...),
  ``name`` (an interrogative "which", "who", "where", or "what" + a noun: :func:`asked_head`), ``definition`` ("what is X",
  "how does ... define"), else ``other``.
- **has the type** (:func:`has_type`): a ``number`` sentence states a number (digits, or a number word such as
  "five", "three times", "twice") that is not a citation marker, a section / figure / table / page number or a
  year (years count for "when / which year" questions); a ``name`` sentence holds a name-like token the question
  does not (a capital inside a word or a digit with letters: GPT-3, scispaCy, ns-2; a capitalised word not first in
  the sentence; a word after "using / called / named / via") in the answer's slot (:func:`names_the_asked`). Other
  types: any sentence.
- **key terms** (:func:`key_terms`): the question's content words (6-character prefixes, stop words and the words
  that only say what type is asked dropped), so "How many papers does S2ORC contain?" -> {papers, s2orc}.
- **numbers and entities** of a claim (:func:`numbers`, :func:`entities`): the digits-numbers (thousand separators
  and a trailing unit letter kept: 81.1M, 9,280, 21%) and the name-like tokens.

- **sentences** (:func:`sentence_spans`) with their character offsets in a chunk, and **front matter / running
  headers** (:func:`is_boilerplate`) that are never quoted and never count as support.

These rules are about English question forms and sentence surface features, not about any paper.
"""

from __future__ import annotations

import re

_STOP = set(
    """a an and are as at be by can could did do does for from has have how in into is it its of on or that the their
this to was were what when where which who whom why will with would about describe described describes paper papers
according than then there these those they them we our us you your i me my he she his her many much also any some
all each per over under between during after before used use using uses being been not no yes""".split()
)
#: words that only say what kind of answer is wanted ("how many", "what percentage"), not what it is about
_TYPE_WORDS = {
    "number",
    "numbe",
    "amount",
    "value",
    "size",
    "count",
    "long",
    "large",
    "big",
    "old",
    "often",
    "far",
    "high",
    "total",
    "name",
    "called",
    "year",
    "type",
    "kind",
}
_MEASURE = (
    r"mass|probability|probabilities|percentage|percent|fraction|share|proportion|number|size|value|amount|"
    r"speed-?up|rate|ratio|temperature|energy|length|count|accuracy|score|f1|gain|price|cost|population|year|age|"
    r"duration|time|frequency|density|concentration|weight|distance|radius|diameter|width|height|depth|voltage|"
    r"current|power|pressure|velocity|speed|efficiency|yield|dose|range|threshold|budget|latency|"
    r"precision|recall|error|loss|improvement|increase|decrease|reduction|boiling point|melting point|"
    r"deviation|variance|"
    r"how many|how much"
)
_NUMBER_Q = re.compile(
    r"\bhow\s+(?:many|much|long|large|big|old|fast|often|far|high|heavy|small|wide|deep|tall)\b|"
    r"\b(?:what|which)\b[^?]{0,40}?\b(?:" + _MEASURE + r")\b|^\s*when\b|\bin\s+(?:which|what)\s+year\b|"
    r"\b(?:what|which)\s+year\b|\b(?:what|which)\s+(?:average|mean|median|maximum|minimum|total)\b",
    re.I,
)
_YEAR_Q = re.compile(r"^\s*when\b|\byear\b|\bdate\b", re.I)
_YESNO_Q = re.compile(r"^\s*(?:is|are|was|were|does|do|did|can|could|has|have|had|will|would|should|may)\b", re.I)
#: "who / whom / where" ask for a name whatever follows
_WHO_Q = re.compile(r"^\s*(?:who|whom|whose)\b|\bwhere\b", re.I)
#: an interrogative "which" (first, after a preposition, or after a comma): asks to pick a named thing
_WHICH_Q = re.compile(r"(?:^|,)\s*(?:(?:in|on|for|at|from|by|with|to|of|under|during|into|between)\s+)?which\b", re.I)
#: a "which / what" followed by its noun phrase: the words up to the first auxiliary, preposition or verb-like word
_WH_PHRASE = re.compile(r"\b(which|what|whose)\s+((?:[\w/.+-]+\s*){1,6})", re.I)
_AUX = set(
    """is are was were be been being does do did has have had can could will would should may might must shall
    am""".split()
)
_PHRASE_END = _AUX | set(
    """of in on for to from by with at as that which who whom than into about over under between during after
    before per when where if whether and or used""".split()
)
_DETERMINERS = set("the a an this that these those its their his her our my your it them us one each".split())
_DEFINITION_Q = re.compile(r"^\s*what\s+(?:is|are|was|were|does|do|did)\b|\bdefine[sd]?\b|\bdefinition\b", re.I)
NUMBER_WORD = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    r"seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|hundreds|"
    r"thousand|thousands|million|millions|billion|dozen|twice|double|triple|half|single)\b",
    re.I,
)
_REF_NUMBER = re.compile(
    r"\b(?:section|sec\.|§|figure|fig\.|table|tab\.|page|p\.|pp\.|eq\.|equation|chapter|appendix|step|ref\.)\s*"
    r"[A-Z]?\d+(?:\.\d+)*",
    re.I,
)
_MARKER = re.compile(r"\[\d+(?:\s*[,;–-]\s*\d+)*\]")
_NUM = re.compile(r"(?<![\w.])[-+±~≈<>]?\d[\d,]*(?:\.\d+)?(?:\s?(?:%|[KMBkx]\b|×))?")
_YEAR = re.compile(r"^(?:1[6-9]|20)\d\d$")
_NAME_TOKEN = re.compile(r"\b(?:[A-Za-z]+[-/]?\d[\w.-]*|[a-z]+[A-Z][\w-]*|[A-Z][A-Z0-9]{1,}[\w-]*|[A-Z][a-z][\w-]*)")
_INTRO_NAME = re.compile(r"\b(?:using|called|named|via)\s+([A-Za-z][\w.-]+)")


def _verb(toks: list[str], i: int) -> bool:
    """Whether ``toks[i]`` reads as a verb: -ed, or -s followed by a determiner, a non-auxiliary function word or
    nothing ("what causes the ...", "what happens when ...")."""
    w, nxt = toks[i].lower(), (toks[i + 1].lower() if i + 1 < len(toks) else "")
    if w.endswith("ed") and len(w) > 4:
        return True
    return w.endswith("s") and not w.endswith("ss") and (nxt in _DETERMINERS or nxt in _PHRASE_END - _AUX)


def asked_head(question: str) -> str | None:
    """The noun a "which / what X ..." question asks for (lower case), or None: the last word of the phrase after
    *which* / *what* / *whose*, the phrase ending at the first auxiliary ("is", "was", "does"), preposition or
    "used" ("Which web framework was ..." -> ``framework``, "On which two summarization datasets was ..." ->
    ``datasets``, "What kind of catalyst ..." -> ``catalyst``). None when *what* is followed by an auxiliary ("What
    is X?": a definition) or by a verb (a word ending in -ed, or in -s followed by a determiner: "what causes the
    ...") — a small part-of-speech heuristic, no word list of nouns."""
    for m in _WH_PHRASE.finditer(question):
        wh = m.group(1).lower()
        toks: list[str] = re.findall(r"[\w/.+-]+", m.group(2))
        if not toks:
            continue
        first = toks[0].lower()
        if first in _AUX or first in _PHRASE_END:
            continue

        if wh == "what" and _verb(toks, 0):
            continue
        phrase: list[str] = []
        for i, t in enumerate(toks):
            if t.lower() in _PHRASE_END or (phrase and (t.lower() in _DETERMINERS or _verb(toks, i))):
                break
            phrase.append(t.lower())
        if phrase and phrase[-1] not in ("kind", "type", "sort"):
            return phrase[-1].strip(".")
        if phrase:  # "what kind of X": the noun after "of"
            rest = toks[len(phrase) :]
            if len(rest) > 1 and rest[0].lower() == "of":
                return str(rest[1]).lower().strip(".")
    return None


_HOW_MANY = re.compile(r"\bhow\s+many\s+((?:[\w-]+(?:\s+|[?.!]*$)){0,5})", re.I)
_COUNT = re.compile(
    r"(?:(?<![\w.])\d[\d,]*(?:\.\d+)?[kKMB]?|" + NUMBER_WORD.pattern + r")\s+((?:[A-Za-z][\w-]*[,.;:)]?\s*){0,5})", re.I
)


def noun_stem(word: str) -> str:
    """:func:`stem` of ``word`` without a plural -s ("GPUs" and "GPU" -> ``gpu``, "papers" -> ``paper``)."""
    w = word.lower()
    return stem(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)


def mentions_noun(text: str, noun: str) -> bool:
    """Whether ``text`` has a word whose :func:`noun_stem` is ``noun`` (a :func:`noun_stem` itself)."""
    return any(noun_stem(w) == noun for w in words(text))


def counted_noun(question: str) -> str | None:
    """The noun a "how many X" question counts, as a :func:`noun_stem`: the first plural word (ending in -s, not a
    function word) of the five after "how many" ("How many full-text LaTeX parses ..." -> ``parses``, "How many of
    the surveyed papers ..." -> ``papers``); None when there is none."""
    m = _HOW_MANY.search(question)
    if not m:
        return None
    for w in m.group(1).split():
        lw = w.lower().strip("?.!,")
        if len(lw) > 3 and lw.endswith("s") and not lw.endswith("ss") and lw not in _AUX | _DETERMINERS:
            return noun_stem(lw)
    return None


def counts_what(sentence: str, counted: str) -> str | None:
    """For a "how many X" question (``counted``: X's :func:`noun_stem`): ``"asked"`` when a number of ``sentence`` is
    followed by X after at most three modifiers ("12 participants", "five researcher participants"; not "1 hour and
    each participant"), ``"other"`` when every
    number is directly followed by another plural noun ("three baselines": a count of something else; a sentence
    that also has a number alone, "(N=10) ... three baselines", is not), else None (a number alone, "N=10")."""
    found = list(_COUNT.finditer(sentence))
    if not found:
        return None
    other = 0
    for m in found:
        after = m.group(1).split()
        for w in after[:4]:  # the counted noun, after modifiers only: "1.5M full-text LaTeX parses"
            if noun_stem(w.strip(",.;:()")) == counted:
                return "asked"
            if w.lower() in _STOP or w.lower() in _DETERMINERS or w[-1:] in ",.;:)":
                break
        nxt = after[0].lower().strip(",.;:()") if after else ""
        if len(nxt) > 3 and nxt.endswith("s") and not nxt.endswith("ss") and nxt not in _STOP:
            other += 1
    # a number the _COUNT pattern does not see (no word after it: "(N=10)") is not a count of something else
    stated = len(numbers(sentence)) + len(NUMBER_WORD.findall(sentence))
    return "other" if other == len(found) and stated <= len(found) else None


def asked_type(question: str) -> str:
    """``number``, ``yesno``, ``name``, ``definition`` or ``other`` (module docstring)."""
    if _YESNO_Q.search(question):
        return "yesno"
    if _NUMBER_Q.search(question):
        return "number"
    if _WHO_Q.search(question) or _WHICH_Q.search(question) or asked_head(question) is not None:
        return "name"
    if _DEFINITION_Q.search(question):
        return "definition"
    return "other"


def stem(word: str) -> str:
    """The 6-character prefix of a lower-cased word (the matching unit of key terms)."""
    return word.lower()[:6]


def words(text: str) -> list[str]:
    """Words of ``text`` (letters and digits, inner hyphens kept split)."""
    return re.findall(r"[A-Za-z0-9]+", text)


def key_terms(question: str) -> set[str]:
    """The question's content words as 6-character prefixes (module docstring)."""
    return {
        stem(w)
        for w in words(question)
        if w.lower() not in _STOP and len(w) > 2 and stem(w) not in _TYPE_WORDS and w.lower() not in _TYPE_WORDS
    }


def text_stems(text: str) -> set[str]:
    """The :func:`stem` of every word of ``text``, plus hyphenated words joined ("back-end" -> "backend") and words
    with a glued footnote digit trimmed ("Plain1" -> "plain")."""
    out = {stem(w) for w in words(text)}
    out |= {stem(m.replace("-", "")) for m in re.findall(r"[A-Za-z]+(?:-[A-Za-z]+)+", text)}
    out |= {stem(m[:-1]) for m in re.findall(r"\b[A-Za-z]{3,}\d\b", text)}
    return out


def coverage(terms: set[str], text: str) -> float:
    """Share of ``terms`` (6-character prefixes) found among the words of ``text`` (:func:`text_stems`; 1.0 when
    ``terms`` is empty)."""
    if not terms:
        return 1.0
    return len(terms & text_stems(text)) / len(terms)


def _clean_numbers(sentence: str) -> str:
    return _REF_NUMBER.sub(" ", _MARKER.sub(" ", sentence))


def numbers(text: str, *, years: bool = True) -> set[str]:
    """The numbers stated in ``text`` (citation markers and section / figure / table numbers dropped), normalised:
    thousand separators removed, a unit letter or % kept (``"81.1M"``, ``"9280"``, ``"21%"``); years only when
    ``years``."""
    out = set()
    for m in _NUM.finditer(_clean_numbers(text)):
        tok = m.group(0).lstrip("-+±~≈<>").replace(",", "").replace(" ", "")
        digits = re.match(r"\d+(?:\.\d+)?", tok)
        if not digits:
            continue
        if not years and _YEAR.match(tok):
            continue
        out.add(tok.lower())
    return out


_UNIT_AFTER = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?([A-Za-zµμ°Å][A-Za-zµμ°/²³-]{0,5}|%)(?![\w])")
_NOT_UNITS = _STOP | {"to", "and", "or", "of", "in", "at", "for", "per", "than", "times", "out", "new", "more", "less"}


def quantities(text: str) -> set[tuple[str, str]]:
    """``(number, unit)`` pairs of ``text``: a number followed by a short unit token ("0.42 mM", "2.4 kW", "16 %",
    "35k"), separators dropped, unit as written (case kept: mM is not Mm); words that are not units ("and", "per",
    "papers" is longer than 6) are skipped."""
    out = set()
    for m in _UNIT_AFTER.finditer(_clean_numbers(text)):
        unit = m.group(2)
        if unit.lower() in _NOT_UNITS or (len(unit) > 3 and unit.isalpha() and unit.islower()):
            continue
        out.add((m.group(1).replace(",", ""), unit))
    return out


def has_number(sentence: str, *, years: bool = False) -> bool:
    """Whether ``sentence`` states a number (module docstring): digits other than markers, section / figure numbers
    and (unless ``years``) years, or a number word."""
    return bool(numbers(sentence, years=years)) or bool(NUMBER_WORD.search(sentence))


def entities(text: str) -> set[str]:
    """Name-like tokens of ``text`` (module docstring), lower-cased; the first word of a sentence only when it has a
    capital or digit inside."""
    out = set()
    for m in _NAME_TOKEN.finditer(text):
        tok = m.group(0).rstrip(".-")
        start = m.start()
        before = text[:start].rstrip()
        first = not before or before[-1] in ".!?:;"
        plain_cap = re.fullmatch(r"[A-Z][a-z]+", tok) is not None
        if first and plain_cap:
            continue
        if plain_cap and tok.lower() in _STOP:
            continue
        if re.fullmatch(r"[A-Z]{2,}-[a-z]{3,}", tok):  # a compound adjective: "PDF-parsed", "LSTM-based"
            continue
        out.add(tok.lower())
    return out


def has_name(sentence: str, question: str) -> bool:
    """Whether ``sentence`` holds a name-like token the question does not (module docstring). A token that is a
    variant of one of the question's names does not count: it shares a part of four or more characters with it
    ("S2ORC-SCIBERT" or "BERT-Base" for a question about SciBERT): that is the question's subject, not an answer
    to it."""
    q = {w.lower() for w in words(question)}
    q_names = {p for e in entities(question) for p in re.split(r"[-/.]", e) if len(p) >= 4}

    def variant(e: str) -> bool:
        return any(len(p) >= 4 and (p in n or n in p) for p in re.split(r"[-/.]", e) for n in q_names)

    new = {e for e in entities(sentence) if not set(words(e.lower())) <= q and not variant(e)}
    if new:
        return True
    return any(
        m.group(1).lower() not in q and m.group(1).lower() not in _STOP and not variant(m.group(1).lower())
        for m in _INTRO_NAME.finditer(sentence)
    )


def names_other_kind(sentence: str, question: str) -> bool:
    """Whether ``sentence`` names a thing of another kind than the one a "which X" question asks for, where X is an
    acronym (GPU, CPU, LLM): the sentence has an acronym of the same length one letter away from X (a "TPU" for a
    "which GPU" question) and not X itself. It then answers a neighbouring question, not this one."""
    m = _WH_PHRASE.search(question)
    head = asked_head(question)
    if not m or not head:
        return False
    asked = next((t for t in re.findall(r"[A-Za-z]+", m.group(2)) if t.lower() == head.rstrip("s")), None)
    if asked is None or not re.fullmatch(r"[A-Z]{2,6}", asked):
        return False
    found = set(re.findall(r"\b[A-Z]{2,6}(?=s?\b)", sentence))
    if asked in found:
        return False
    return any(len(f) == len(asked) and sum(a != b for a, b in zip(f, asked)) == 1 for f in found)


#: words that introduce what was used, by whom or where ("using GPT-3", "by Google", "on a single AMD EPYC")
_INSTRUMENT = set("using use uses used with by via on in from called named".split())
#: words that name a part of the document, not a thing it used ("in Table 5", "in Section 3")
_REFERENCES = set("table tables figure figures fig section sections sec eq equation appendix chapter page".split())


def names_the_asked(sentence: str, question: str) -> bool:
    """For a "which / what X" question: whether ``sentence`` names X ("the CP/M operating system") or has a new
    name-like token (:func:`entities`; after "using / called / named / via" any word) in the slot of the answer:
    within the three words after a word that introduces an instrument, agent or place ("using", "with", "by",
    "on", "in", "from") in a sentence about the question's action (one of its words other than its names, X and
    "use": "using Adam" in a sentence on finetuning does not answer "which GPU was used to pretrain SciBERT"); or
    after one of the question's own words ("followed Nu = 0.17 Re^0.79" for "what correlation does it follow"),
    determiners and numbers skipped; or as the subject right before one of the question's own words or "used" in a
    verb form (after an auxiliary, or ending in -s / -ed: "GROBID is then used to process each PDF"; not the
    modifier in "the S2ORC pretraining corpus"). A sentence that only mentions some other new name elsewhere
    ("S2ORC can serve as a corpus" for "which GPU was used") does not answer it. Questions without an asked noun
    (who, where) pass."""
    head = asked_head(question)
    if not head:
        return True
    if mentions_noun(sentence, noun_stem(head)):
        return True
    q = {w.lower() for w in words(question)}
    relation = {stem(w) for w in q if w not in _STOP and len(w) > 2 and noun_stem(w) != noun_stem(head)}
    # the question's action, without its names and the generic "use": "pretrain" in "Which GPU was used to
    # pretrain SciBERT?". An instrument answers it only in a sentence about that action ("using Adam" in a
    # sentence about finetuning does not)
    q_names = {p for e in entities(question) for p in re.split(r"[-/.\s]", e)}
    action = {stem(w) for w in q - q_names if w not in _STOP and len(w) > 2 and not w.startswith("us")} - {stem(head)}
    about_action = not action or bool(action & text_stems(sentence))
    toks = re.findall(r"[A-Za-z][\w./+-]*|\S", sentence)

    def new_name(tok: str) -> bool:
        nl = tok.lower().rstrip(".,;:")
        return nl not in q and nl not in _STOP and nl not in _REFERENCES and bool(entities(f"x {tok}"))

    for i, t in enumerate(toks):
        low = t.lower()
        if (low not in _INSTRUMENT or not about_action) and stem(low) not in relation:
            continue
        # the subject before the verb: "GROBID is then used to", "Flask serves"; a verb is a word after an
        # auxiliary or one ending in -s / -ed ("S2ORC pretraining corpus" has none)
        if stem(low) in relation or low in ("used", "uses"):
            window = toks[max(0, i - 4) : i]
            before = [b for b in window if b.lower() not in _AUX and b.lower() not in ("then", "also")]
            verb = len(before) < len(window) or (low.endswith(("s", "ed")) and not low.endswith("ss"))
            if verb and before and new_name(before[-1]):
                return True
        for nxt in toks[i + 1 : i + 4]:
            nl = nxt.lower().rstrip(".,;:")
            if nl in _DETERMINERS or nl == "single" or nl.isdigit():
                continue
            if nl in q or nl in _STOP or nl in _REFERENCES:
                break
            if entities(f"x {nxt}") or low in ("using", "called", "named", "via"):
                return True
            break
    return False


def has_type(sentence: str, kind: str, question: str) -> bool:
    """Whether ``sentence`` has what a question of ``kind`` (:func:`asked_type`) asks for."""
    if kind == "number":
        return has_number(sentence, years=bool(_YEAR_Q.search(question)))
    if kind == "name":
        return (
            has_name(sentence, question)
            and names_the_asked(sentence, question)
            and not names_other_kind(sentence, question)
        )
    return True


#: a sentence ends after ``.!?`` and white space before a capital, digit, bracket or bullet - not after an
#: abbreviation that is followed by one ("Beltagy et al. (2019)", "e.g. BERT", "Fig. 3", "vs. 14.0") - and before a
#: bullet
_SENTENCE_BREAK = re.compile(
    r"(?<!\bal\.)(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bFig\.)(?<!\bEq\.)(?<!\bvs\.)(?<!\bcf\.)(?<!\bNo\.)"
    r"(?<=[.!?])\s+(?=[A-Z0-9(\[•])|\s+(?=[•▪◦]\s)"
)


def sentence_spans(text: str, min_chars: int = 40) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text`` (split after ``.!?`` followed by white space
    and a capital, digit or bracket, not after an abbreviation such as "et al.", and before a bullet ``•``),
    ``min_chars``-600 characters long once whitespace is collapsed, offsets into ``text``
    itself."""
    out = []
    start = 0
    for m in re.finditer(_SENTENCE_BREAK, text):
        out.append((start, m.start()))
        start = m.end()
    out.append((start, len(text.rstrip())))
    res = []
    for a, b in out:
        while a < b and text[a].isspace():
            a += 1
        n = len(" ".join(text[a:b].split()))
        if min_chars <= n <= 600:
            res.append((a, b))
    return res


_BOILERPLATE = re.compile(
    r"©|\bcopyright\b|permission to make digital|\bISBN\b|\bISSN\b|ACM Reference Format|\bdoi\.org\b|"
    r"\ban? (?:IOP|Springer|Elsevier|Wiley|ACM|IEEE)\b.{0,30}\bjournal\b|\bjournal of\b.{0,80}\bjournal\b|"
    r"all rights reserved|licensed under|\barXiv:\d{4}\.\d{4,5}|@[\w-]+\.(?:edu|org|com|ac)\b|"
    r"\bpreprint submitted\b|\bproceedings of the\b.{0,80}\b(?:conference|workshop)\b",
    re.I,
)


def is_boilerplate(sentence: str) -> bool:
    """Whether ``sentence`` is front matter or a running header/footer: copyright, permission and licence notices,
    ISBN/ISSN, "ACM Reference Format", DOI links, journal banners ("Journal of ... An IOP and SISSA journal"),
    arXiv identifiers, e-mail addresses, "Proceedings of the ... Conference". Such sentences are never quoted and
    never count as support."""
    return bool(_BOILERPLATE.search(sentence))
