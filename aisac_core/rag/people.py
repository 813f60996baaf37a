"""Author names as people, and authors linked to affiliations by the marks the page prints: the name side of
the paper-header model (:mod:`aisac_core.rag.headers`). docs/rag.md, "Header model"."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_NAME_MARKS = "*∗†‡§¶♠♢♦♣♡♤♥□⋄◇○•#‖⊥⊤⋆★✉"
_HONORIFIC_RE = re.compile(r"^(dr|prof|professor|mr|mrs|ms|sir)\.?\s+", re.I)
_NOT_NAME = re.compile(
    r"@|https?:|www\.|\b(univ|universi\w*|institut\w*|department|dept|school|college|laborator\w*|faculty|"
    r"cent(er|re)|hospital|inc|ltd|gmbh|corresponding|author|e-?mail|abstract|equal|contribution)\b",
    re.I,
)


def author_names(text: str) -> list[str]:
    """Person names in an author field ``text`` (one line or several): e-mails removed, affiliation marks
    (digits, letters glued after a name as superscripts are not seen here, ``* † ‡ §`` and the like) removed,
    honorifics dropped, split on commas, semicolons, "and", "&" and marks; a segment of initials only ("J." in
    "Smith, J.") joins the name before it. Segments holding an address or affiliation word, an e-mail or no
    capitalised word are no names. Returns names as printed (single spaces)."""
    t = unicodedata.normalize("NFKC", text)
    t = re.sub(r"\S+@\S+|\{[^}]*\}\s*@\S*", ",", t)
    t = re.sub(r"\(\s*[\d,\s" + re.escape(_NAME_MARKS) + r"a-z]*\)", ",", t)  # "(1,2)" mark groups
    t = re.sub(r"(?<!\w)\d+(?!\w)|[" + re.escape(_NAME_MARKS) + r"]", ",", t)  # marks become separators
    t = re.sub(r"(?<=[a-z\u00e0-\u017f])\d+", ",", t)  # "Smith1"
    t = re.sub(r"(?<=[a-z\u00e0-\u017f])[α-ωϵϑ]+(?=[\s,]|$)|(?<![^\s,])[α-ωϵϑ](?=[\s,]|$)", ",", t)  # "Loα", "ω"
    parts = re.split(r"[,;|/]|\s&\s|\band\b|\bAND\b|\bund\b|\bet\b|\by\b(?=\s+[A-Z])", t)
    names: list[str] = []
    for p in parts:
        s = _HONORIFIC_RE.sub("", " ".join(p.split()).strip(" :'\"()[]{}-–")).strip()
        s = re.sub(r"(?<=[^\W\d_]{2})\.$", "", s).lstrip(". ")  # a sentence dot, not an initial's
        s = re.sub(r",?\s*(ph\.?\s?d|m\.?\s?d|jr|sr|ii|iii)\.?$", "", s, flags=re.I).strip()
        if not s or _NOT_NAME.search(s) or not re.search(r"[^\W\d_]", s):
            continue
        if re.fullmatch(r"([A-Z]\.?\s?-?){1,3}", s) and names:  # "Smith, J." -> initials of the name before
            names[-1] = names[-1] + " " + s
            continue
        words = s.split()
        if len(words) > 6 or not any(w[:1].isupper() for w in words):
            continue
        names.append(s)
    return names


#: a mark tying an author to an affiliation: a number or a symbol (letters glued to a name cannot be told apart)
_MARK = r"(?:\d{1,2}|[*∗†‡§¶#])"


def linked_affiliations(authors_text: Sequence[str], affiliations_text: Sequence[str]) -> dict[str, list[str]]:
    """Authors linked to their affiliations by the marks the page prints ("Ada Lovelace1,2" and "1 Department of
    ..."): name -> affiliation texts (marks removed), for the names that carry a mark some affiliation starts
    with. A page without marks, or a single affiliation for all, links nothing ({}). Errors: none raised."""
    affs: dict[str, str] = {}
    for a in affiliations_text:
        m = re.match(rf"^\s*({_MARK})\s*[.,)]?\s*(?=[^\W\d_])(.*)$", a)
        if m and not re.match(r"(corresponding|equal|e-?mail|these authors|present address)", m.group(2), re.I):
            affs.setdefault(m.group(1), m.group(2).strip(" ,;"))  # a footnote is no affiliation
    if not affs:
        return {}
    out: dict[str, list[str]] = {}
    for text in authors_text:
        t = unicodedata.normalize("NFKC", text)
        t = re.sub(r"\S+@\S+", " ", t)
        for seg in re.split(r";|,\s*(?![\d*∗†‡§¶#](?:\s|,|$))|\s+and\s+|\s&\s", t):
            m = re.match(rf"^\s*(.*?[^\W\d_])\s*((?:{_MARK}\s*,?\s*)+)$", seg)
            if not m:
                continue
            names = author_names(m.group(1))
            marks = re.findall(_MARK, m.group(2))
            linked = [affs[k] for k in marks if k in affs]
            if len(names) == 1 and linked:
                out[names[0]] = linked
    return out
