"""The paper-header model: a linear-chain CRF (Lafferty, McCallum & Pereira 2001, via python-crfsuite) that labels
the tokens of a paper's first page (title, author, affiliation, address, e-mail, abstract, keyword, pubnum, other),
trained on GROBID's header corpus (Lopez 2009, "GROBID: Combining Automatic Bibliographic Data Recognition and
Term Extraction for Scholarship Publications"; the dev portion in ``../shared/data/pdf_headers/grobid``) by
``bench/train_headers.py``.

The model sees per token the layout and lexical features of GROBID's header feature files (its
``FeaturesVectorHeader``): the token, its block and line position, indentation, font / size change, bold, italic,
capitalisation, digits, year, month, e-mail, URL, punctuation class and "largest font". GROBID's lexicon columns
(first/last names, common words, places) are left out: they need GROBID's word lists, which aisac does not have.
:func:`tokens_from_lines` computes the same features from aisac's own PDF text lines, so the model applies to every
PDF aisac parses; :func:`tokens_from_grobid` reads them from GROBID's feature files (training and evaluation).

Confidences: the title's and the author list's raw score (the smallest CRF marginal of the field's tokens and of
the tokens just around it), with the field's other :func:`calibration_features` for a logistic map, is mapped to a
probability by the map ``bench/train_headers.py`` chose per field by cross-validated ECE (isotonic regression,
Zadrozny & Elkan 2002; Platt's sigmoid; or a logistic regression over the features), fitted on out-of-fold scores -
each document scored by a CRF that did not see it (``header_calibration.json``):
``title_confidence`` is the estimated probability that the title is exactly right, ``authors_confidence`` that the
whole author list is. Figures and the reliability table: docs/rag.md, "Header model".
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aisac_core.calibration import isotonic
from aisac_core.rag.people import author_names

#: the labels the model gives (GROBID's header labels, the rare ones folded into ``other``)
LABELS = ("title", "author", "affiliation", "address", "email", "abstract", "keyword", "pubnum", "other")
MODEL_FILE = "header.crfsuite"
CALIBRATION_FILE = "header_calibration.json"
#: below this calibrated probability a title or author list is reported as uncertain (chosen on validation;
#: docs/rag.md, "Header model")
UNCERTAIN_BELOW = 0.5

#: GROBID's tokenisation delimiters (README of the shared corpus: Java StringTokenizer with these, kept as tokens)
_DELIMS = "(（[ •*,:;?.!/)）-−–‐«»„\"“”‘’'`$#@]*♦♥♣♠ 。、，・"
_TOKEN = re.compile("[" + re.escape(_DELIMS) + "]|[^\\s" + re.escape(_DELIMS) + "]+")
_MONTHS = {
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
}
_BOLD = re.compile(r"bold|medi|black|heavy|semibold|demi|cmbx|cmb\d|-bd|tb$|-b$|,b$|\.b$", re.I)
_ITALIC = re.compile(r"ital|obli|-it$|cmti\d|cmsl\d|cmmi\d|-i$|,i$", re.I)


@dataclass
class HeaderToken:
    """One token of a header with GROBID's header features (column names of the shared corpus README)."""

    text: str
    block: str = "BLOCKIN"  # BLOCKSTART / BLOCKIN / BLOCKEND
    line: str = "LINEIN"  # LINESTART / LINEIN / LINEEND
    indent: str = "ALIGNEDLEFT"  # ALIGNEDLEFT / LINEINDENT
    font: str = "SAMEFONT"  # NEWFONT / SAMEFONT
    size: str = "SAMEFONTSIZE"  # HIGHERFONT / SAMEFONTSIZE / LOWERFONT
    bold: bool = False
    italic: bool = False
    largest: bool = False
    #: index of the aisac line the token comes from (-1: a GROBID feature file)
    line_no: int = -1


def tokenize(text: str) -> list[str]:
    """``text`` split as GROBID splits header text: words, and each delimiter character (punctuation) as a token
    of its own; blanks dropped. Source: the shared corpus README (GROBID's StringTokenizer delimiters)."""
    return [t for t in _TOKEN.findall(unicodedata.normalize("NFKC", text)) if not t.isspace()]


def _caps(t: str) -> str:
    if not any(c.islower() for c in t) and not t.isdigit():
        return "ALLCAP"
    return "INITCAP" if t[:1].isupper() else "NOCAPS"


def _digits(t: str) -> str:
    if t.isdigit():
        return "ALLDIGIT"
    return "CONTAINSDIGITS" if any(c.isdigit() for c in t) else "NODIGIT"


def _punct(t: str) -> str:
    if t in "([{（":
        return "OPENBRACKET"
    if t in ")]}）":
        return "ENDBRACKET"
    if t == ".":
        return "DOT"
    if t == ",":
        return "COMMA"
    if t in "-−–‐—":
        return "HYPHEN"
    if t in "\"'`“”‘’«»„":
        return "QUOTE"
    if len(t) == 1 and not t.isalnum():
        return "PUNCT"
    return "NOPUNCT"


def _shape(t: str) -> str:
    s = re.sub(r"[A-Z]", "A", t)
    s = re.sub(r"[a-z]", "a", s)
    s = re.sub(r"\d", "0", s)
    return re.sub(r"(.)\1+", r"\1\1", s)[:6]


def _bucket(v: int, edges: Sequence[int]) -> str:
    for e in edges:
        if v <= e:
            return f"<={e}"
    return f">{edges[-1]}"


def token_features(tokens: Sequence[HeaderToken]) -> list[list[str]]:
    """CRFsuite attribute lists for ``tokens`` (one list of ``name=value`` strings per token): the token and its
    neighbours (lower case, +-2), prefixes and suffixes 1-4, word shape, the layout columns of the token and its
    neighbours (block, line, indentation, font and size change, bold, italic, largest font), capitalisation,
    digits, year, month, e-mail / URL membership and punctuation class, and a few conjunctions (GROBID's header
    template, ``header.template`` in the shared corpus, is the model for the choice)."""
    n = len(tokens)
    low = [t.text.lower() for t in tokens]
    caps = [_caps(t.text) for t in tokens]
    punct = [_punct(t.text) for t in tokens]
    in_email, in_url = _email_url(tokens)
    # lines: a token with LINESTART opens one
    line_of: list[int] = []
    for i, t in enumerate(tokens):
        line_of.append((line_of[-1] + (t.line == "LINESTART")) if i else 0)
    lines: dict[int, list[int]] = {}
    for i, li in enumerate(line_of):
        lines.setdefault(li, []).append(i)
    line_feats: dict[int, list[str]] = {}
    for li, idx in lines.items():
        words = [tokens[i].text for i in idx if tokens[i].text[:1].isalpha()]
        capr = sum(w[:1].isupper() for w in words) / len(words) if words else 0.0
        line_feats[li] = [
            "lfirst=" + low[idx[0]],
            "llast=" + low[idx[-1]],
            "llen=" + _bucket(len(idx), (1, 2, 3, 5, 8, 12, 20)),
            "lcap=" + _bucket(int(capr * 10), (3, 6, 9)),
            "lno=" + _bucket(li, (0, 1, 2, 3, 5, 8, 12, 20, 40)),
            "lbig=" + str(int(any(tokens[i].largest for i in idx))),
            "lcomma=" + _bucket(sum(tokens[i].text == "," for i in idx), (0, 1, 3)),
            "ldig=" + str(int(any(tokens[i].text.isdigit() for i in idx))),
        ]
    out: list[list[str]] = []
    for i, t in enumerate(tokens):
        w = t.text
        li = line_of[i]
        f = [
            "bias",
            *line_feats[li],
            *("p" + line_feats[li - 1][k] for k in (0, 2, 3, 5) if li - 1 in line_feats),
            *("n" + line_feats[li + 1][k] for k in (0, 2, 3, 5) if li + 1 in line_feats),
            "tno=" + _bucket(i, (5, 10, 20, 40, 80, 160, 320)),
            "w=" + low[i],
            "shape=" + _shape(w),
            "caps=" + caps[i],
            "dig=" + _digits(w),
            "single=" + str(int(len(w) == 1)),
            "punct=" + punct[i],
            "block=" + t.block,
            "line=" + t.line,
            "indent=" + t.indent,
            "font=" + t.font,
            "size=" + t.size,
            "bold=" + str(int(t.bold)),
            "italic=" + str(int(t.italic)),
            "largest=" + str(int(t.largest)),
            "year=" + str(int(bool(re.search(r"[12][0-9]{3}", w)))),
            "month=" + str(int(low[i].rstrip(".") in _MONTHS)),
            "email=" + str(int(in_email[i])),
            "url=" + str(int(in_url[i])),
            "largest|caps=" + str(int(t.largest)) + caps[i],
            "line|block=" + t.line + t.block,
            "bold|size=" + str(int(t.bold)) + t.size,
        ]
        for k in range(1, 5):
            if len(w) >= k:
                f.append(f"p{k}=" + w[:k])
                f.append(f"s{k}=" + w[-k:])
        for d in (-3, -2, -1, 1, 2, 3):
            j = i + d
            if 0 <= j < n:
                f.append(f"w[{d}]=" + low[j])
                if abs(d) == 1:
                    o = tokens[j]
                    f += [
                        f"caps[{d}]=" + caps[j],
                        f"punct[{d}]=" + punct[j],
                        f"block[{d}]=" + o.block,
                        f"line[{d}]=" + o.line,
                        f"size[{d}]=" + o.size,
                        f"largest[{d}]=" + str(int(o.largest)),
                        f"w[{d}]|w=" + low[j] + "|" + low[i] if d < 0 else f"w|w[{d}]=" + low[i] + "|" + low[j],
                    ]
            else:
                f.append(f"w[{d}]=" + ("BOS" if j < 0 else "EOS"))
        out.append(f)
    return out


def _email_url(tokens: Sequence[HeaderToken]) -> tuple[list[bool], list[bool]]:
    """Per token: part of an e-mail address (the run of word, dot, hyphen and underscore tokens around an ``@``
    inside one line) and part of a URL (from ``http`` / ``www`` to the line's end or a blank-like token)."""
    n = len(tokens)
    email = [False] * n
    url = [False] * n
    part = re.compile(r"[\w.+-]+")
    for i, t in enumerate(tokens):
        if t.text == "@":
            email[i] = True
            j = i - 1
            while j >= 0 and part.fullmatch(tokens[j].text):
                email[j] = True
                if tokens[j].line == "LINESTART":
                    break
                j -= 1
            j = i + 1
            while j < n and part.fullmatch(tokens[j].text) and tokens[j].line != "LINESTART":
                email[j] = True
                j += 1
        low = t.text.lower()
        if low in ("http", "https", "www") or low.startswith(("http", "www.")):
            j = i
            while j < n and (j == i or tokens[j].line != "LINESTART") and not re.fullmatch(r"[,;()]", tokens[j].text):
                url[j] = True
                j += 1
    return email, url


def tokens_from_grobid(lines: Sequence[str]) -> list[HeaderToken]:
    """Header tokens from the lines of a GROBID header feature file (32 space-separated columns; the shared corpus
    README). Raises ValueError on a line with fewer than 29 columns."""
    out: list[HeaderToken] = []
    for ln in lines:
        c = ln.split(" ")
        if not ln.strip():
            continue
        if len(c) < 29:
            raise ValueError(f"a GROBID header feature line has {len(c)} columns, 29+ expected: {ln[:80]!r}")
        out.append(
            HeaderToken(
                text=c[0],
                block=c[10],
                line=c[11],
                indent=c[12],
                font=c[13],
                size=c[14],
                bold=c[15] == "1",
                italic=c[16] == "1",
                largest=c[28] == "1",
            )
        )
    return out


def tokens_from_lines(lines: Sequence[Any], block_gap: float = 0.6) -> list[HeaderToken]:
    """Header tokens from aisac PDF text lines in reading order (objects with ``text, l, r, top, h, font``;
    points, ``top`` from the page top), with GROBID's features computed the way GROBID computes them from
    pdfalto's blocks and lines: a block is a run of lines in one column set in the same size, each starting at
    most ``block_gap`` line heights under the previous one; a line is indented when it starts more than one
    character width (half its height) right of the previous line; font and size changes compare each token with
    the previous one (font name, size rounded to the point), bold and italic come from the font name, "largest"
    marks the largest size in the header."""
    out: list[HeaderToken] = []
    if not lines:
        return out
    sizes = [round(x.h) for x in lines]
    big = max(sizes)
    prev: Any = None
    prev_font, prev_size = None, None
    for k, ln in enumerate(lines):
        toks = tokenize(ln.text)
        if not toks:
            continue
        new_block = prev is None or not (
            abs(ln.h - prev.h) <= 0.15 * max(ln.h, prev.h)
            and -0.5 * prev.h <= ln.top - (prev.top + prev.h) <= block_gap * max(ln.h, prev.h)
            and min(ln.r, prev.r) - max(ln.l, prev.l) > 0
        )
        nxt = next((x for x in lines[k + 1 :] if tokenize(x.text)), None)
        ends_block = nxt is None or not (
            abs(nxt.h - ln.h) <= 0.15 * max(ln.h, nxt.h)
            and -0.5 * ln.h <= nxt.top - (ln.top + ln.h) <= block_gap * max(ln.h, nxt.h)
            and min(ln.r, nxt.r) - max(ln.l, nxt.l) > 0
        )
        indent = "LINEINDENT" if prev is not None and not new_block and ln.l - prev.l > 0.5 * ln.h else "ALIGNEDLEFT"
        font = getattr(ln, "font", "") or ""
        size = round(ln.h)
        for i, t in enumerate(toks):
            if i == 0:
                fchange = "NEWFONT" if font != prev_font else "SAMEFONT"
                if prev_size is None or size > prev_size:
                    schange = "HIGHERFONT"
                elif size < prev_size:
                    schange = "LOWERFONT"
                else:
                    schange = "SAMEFONTSIZE"
            else:
                fchange, schange = "SAMEFONT", "SAMEFONTSIZE"
            out.append(
                HeaderToken(
                    text=t,
                    block=(
                        "BLOCKSTART"
                        if new_block and i == 0
                        else "BLOCKEND"
                        if ends_block and i == len(toks) - 1
                        else "BLOCKIN"
                    ),
                    line="LINESTART" if i == 0 else "LINEEND" if i == len(toks) - 1 else "LINEIN",
                    indent=indent,
                    font=fchange,
                    size=schange,
                    bold=bool(_BOLD.search(font)),
                    italic=bool(_ITALIC.search(font)),
                    largest=size == big,
                    line_no=k,
                )
            )
        prev, prev_font, prev_size = ln, font, size
    return out


@dataclass
class HeaderFields:
    """What the header model read: ``labels`` per token, ``title`` (text or None), ``authors_text`` (the author
    fields' texts, one per field), their raw scores (0..1, the smallest marginal of the field and its border) and
    calibrated confidences (0..1, probabilities; 0 without the field)."""

    labels: list[str] = field(default_factory=list)
    title: str | None = None
    title_tokens: list[int] = field(default_factory=list)
    authors_text: list[str] = field(default_factory=list)
    author_tokens: list[int] = field(default_factory=list)
    #: affiliation fields (an affiliation with the address after it), marks kept ("1 Department of ...")
    affiliations_text: list[str] = field(default_factory=list)
    title_raw: float = 0.0
    authors_raw: float = 0.0
    #: the inputs of the fields' calibration maps (:func:`calibration_features`; empty without marginals)
    title_features: dict[str, float] = field(default_factory=dict)
    authors_features: dict[str, float] = field(default_factory=dict)
    title_confidence: float = 0.0
    authors_confidence: float = 0.0
    #: per token, the index of its line in ``zone_lines`` (``HeaderToken.line_no``), and those line objects
    token_lines: list[int] = field(default_factory=list)
    zone_lines: list[Any] = field(default_factory=list)


def join_tokens(tokens: Sequence[HeaderToken]) -> str:
    """Text of ``tokens`` as printed: a space between tokens except before closing punctuation and after opening
    punctuation and around hyphens inside a word; a line-end hyphen before a lower-case word is removed."""
    out = ""
    for i, t in enumerate(tokens):
        w = t.text
        if i == 0:
            out = w
            continue
        p = tokens[i - 1].text
        if p in "-‐" and i >= 2 and tokens[i - 1].line == "LINEEND" and w[:1].islower():
            out = out[:-1] + w
        elif w in "'’" and p[-1:].isalpha() or p in "'’" and i >= 2 and tokens[i - 2].text[-1:].isalpha():
            out += w
        elif w in ",.;:)]}!?%" or p in "([{" or (w in "-‐" and t.line != "LINESTART" and p[-1:].isalnum()) or p == "‐":
            out += w
        elif p in "-" and tokens[i - 1].line != "LINEEND" and w[:1].isalnum() and i >= 2:
            out += w
        else:
            out += " " + w
    return re.sub(r"\s+", " ", out).strip()


_TITLE_LABEL = re.compile(r"^(title( page)?|article title|paper title)\s*[:.]?\s+(?=\S)", re.I)
#: trailing footnote marks: symbols, or two or more 1-2 digit marks ("Arch 1 2"); one number stays ("Part 2")
_TITLE_TAIL = re.compile(
    r"(\s*[*∗†‡§¶#]+)+(\s+\d{1,2})*$|(\s+\d{1,2}(\s*,)?){2,}$|\s+\d{1,2}\s*[*∗†‡§¶#,]+$|\s+by$|\s*[,;:]$"
)


def clean_title(text: str) -> str | None:
    """A title as a reader cites it: a leading field label ("Title:", "TITLE") and trailing footnote marks
    ("... Arch 1 2", "... Antibodies *"), a dangling "by" or separator removed; None when nothing with a letter
    is left."""
    t = _TITLE_LABEL.sub("", text.strip())
    for _ in range(2):
        t = _TITLE_TAIL.sub("", t).strip()
    return t if re.search(r"[^\W\d_]", t) else None


def fields_from_labels(
    tokens: Sequence[HeaderToken], labels: Sequence[str], marginals: Sequence[dict[str, float]] | None = None
) -> HeaderFields:
    """The title (the first run of ``title`` tokens, with runs that follow it within 3 tokens joined) and the
    author fields (each run of ``author`` tokens) of a labelled header; with ``marginals`` (per token, label ->
    probability) the raw scores too. Errors: none raised."""
    hf = HeaderFields(labels=[lab.removeprefix("I-") for lab in labels])
    runs: dict[str, list[list[int]]] = {}
    for i, lab in enumerate(labels):
        base = lab.removeprefix("I-")
        r = runs.setdefault(base, [])
        if r and r[-1][-1] == i - 1 and not lab.startswith("I-"):
            r[-1].append(i)
        else:
            r.append([i])
    title_runs = runs.get("title", [])
    if title_runs:
        sel = list(title_runs[0])
        for tr in title_runs[1:]:
            if tr[0] - sel[-1] <= 3:
                sel += tr
        hf.title_tokens = sel
        hf.title = clean_title(join_tokens([tokens[i] for i in sel]))
    for ar in runs.get("author", []):
        # an aisac line is one text cell: names in cells side by side on a row are separate fields
        cut = [ar[0]]
        for i in ar[1:]:
            if tokens[i].line_no != tokens[cut[-1]].line_no and tokens[i].line_no >= 0:
                hf.authors_text.append(join_tokens([tokens[j] for j in cut]))
                cut = []
            cut.append(i)
        hf.authors_text.append(join_tokens([tokens[j] for j in cut]))
        hf.author_tokens += ar
    for ar in runs.get("affiliation", []):
        end = ar[-1] + 1
        while end < len(hf.labels) and hf.labels[end] == "address":  # the address that completes it
            end += 1
        hf.affiliations_text.append(join_tokens([tokens[j] for j in range(ar[0], end)]))
    if marginals is not None:
        hf.title_raw = _field_score(hf.title_tokens, "title", marginals)
        hf.authors_raw = _field_score(hf.author_tokens, "author", marginals)
        hf.title_features, hf.authors_features = calibration_features(hf, tokens, marginals)
    return hf


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def calibration_features(
    hf: HeaderFields, tokens: Sequence[HeaderToken], marginals: Sequence[dict[str, float]]
) -> tuple[dict[str, float], dict[str, float]]:
    """The inputs of the title's and the author list's calibration maps (``bench/train_headers.py`` chooses among
    maps over subsets of them by cross-validated ECE; docs/rag.md "Header model"):

    - ``logit_raw``: logit of the raw score (:func:`_field_score`, the weakest token of the field or its border);
    - ``logit_mean``: logit of the field's mean token marginal (how sure the CRF is of the field as a whole);
    - ``log_tokens``: log of the field's token count; ``lines``: how many lines it spans;
    - title only: ``runs`` (title runs joined into one, minus one: a title interrupted by other labels),
      ``largest`` (share of its tokens in the page's largest font);
    - authors only: ``log_names`` (log of 1 + the names read), ``fields`` (author fields, log of 1 + their count).

    Both dicts are empty for a missing field."""

    def common(idx: Sequence[int], label: str, raw: float) -> dict[str, float]:
        mean = sum(marginals[i].get(label, 0.0) for i in idx) / len(idx)
        lines = len({tokens[i].line_no if tokens[i].line_no >= 0 else -1 for i in idx})
        if tokens[idx[0]].line_no < 0:  # a GROBID feature file: lines counted from LINESTART tokens
            lines = 1 + sum(tokens[i].line == "LINESTART" for i in idx[1:])
        return {
            "logit_raw": _logit(raw),
            "logit_mean": _logit(mean),
            "log_tokens": math.log(len(idx)),
            "lines": float(lines),
        }

    t: dict[str, float] = {}
    a: dict[str, float] = {}
    if hf.title_tokens:
        t = common(hf.title_tokens, "title", hf.title_raw)
        idx = hf.title_tokens
        t["runs"] = float(sum(1 for k in range(1, len(idx)) if idx[k] != idx[k - 1] + 1))
        t["largest"] = sum(tokens[i].largest for i in idx) / len(idx)
    if hf.author_tokens:
        a = common(hf.author_tokens, "author", hf.authors_raw)
        names = [n for x in hf.authors_text for n in author_names(x)]
        a["log_names"] = math.log1p(len(names))
        a["fields"] = math.log1p(len(hf.authors_text))
    return t, a


def _field_score(idx: Sequence[int], label: str, marginals: Sequence[dict[str, float]]) -> float:
    """The smallest of: the marginal of ``label`` on the field's tokens, and 1 - that marginal on the two tokens
    before and after each run of the field (a border token that may belong to the field)."""
    if not idx:
        return 0.0
    inside = set(idx)
    border = {j for i in idx for j in (i - 1, i + 1, i - 2, i + 2) if 0 <= j < len(marginals) and j not in inside}
    vals = [marginals[i].get(label, 0.0) for i in idx] + [1.0 - marginals[j].get(label, 0.0) for j in border]
    return max(0.0, min(vals))


def platt(raw: float, a: float, b: float) -> float:
    """Platt's sigmoid (Platt 1999, "Probabilistic outputs for support vector machines"): 1 / (1 + exp(a*x + b))
    with x = logit(raw) (``raw`` clipped to [1e-6, 1 - 1e-6])."""
    r = min(max(raw, 1e-6), 1 - 1e-6)
    x = math.log(r / (1 - r))
    z = a * x + b
    return 1.0 / (1.0 + math.exp(z)) if z > -700 else 1.0


def calibrate(raw: float, cal: dict[str, Any], features: dict[str, float] | None = None) -> float:
    """The calibrated probability of a field: piecewise linear between the isotonic breakpoints
    ``cal["isotonic"] = {x, y}`` of the raw score (clipped at both ends), Platt's sigmoid ``cal["platt"] = [a, b]``
    of it, or a logistic regression over the field's :func:`calibration_features`
    ``cal["logistic"] = {features: [names], coef: [...], intercept: c}`` (P = 1 / (1 + exp(-(coef . x + c))); Platt's
    scaling with more inputs than the score, Platt 1999). A logistic map without its features (None) falls back to
    ``logit_raw`` alone, the others at 0."""
    if "isotonic" in cal:
        return isotonic(raw, cal["isotonic"]["x"], cal["isotonic"]["y"])
    if "logistic" in cal:
        lg = cal["logistic"]
        f = features or {"logit_raw": _logit(raw)}
        z = float(lg["intercept"]) + sum(float(c) * f.get(n, 0.0) for n, c in zip(lg["features"], lg["coef"]))
        z = max(min(z, 50.0), -50.0)
        return 1.0 / (1.0 + math.exp(-z))
    return platt(raw, *cal["platt"])


class HeaderModel:
    """The trained CRF with its calibration; :func:`header_model` loads the shipped one once."""

    def __init__(self, model_path: str, calibration: dict[str, Any]) -> None:
        import pycrfsuite

        self._tagger = pycrfsuite.Tagger()
        self._tagger.open(model_path)
        self._lock = threading.Lock()
        self._known = set(self._tagger.labels())
        self.calibration = calibration

    def read(self, tokens: Sequence[HeaderToken]) -> HeaderFields:
        """Label ``tokens`` and read the title and author fields with calibrated confidences."""
        if not tokens:
            return HeaderFields()
        xseq = token_features(tokens)
        with self._lock:
            self._tagger.set(xseq)
            labels = list(self._tagger.tag())
            # marginals only where the raw scores look: the fields' tokens and two on each side of them
            first = fields_from_labels(tokens, labels)
            need = {j for i in first.title_tokens + first.author_tokens for j in range(i - 2, i + 3)}
            marg: list[dict[str, float]] = [{} for _ in tokens]
            for i in need:
                if 0 <= i < len(tokens):
                    marg[i] = {
                        lab: sum(self._tagger.marginal(x, i) for x in (lab, "I-" + lab) if x in self._known)
                        for lab in ("title", "author")
                    }
        hf = fields_from_labels(tokens, labels, marg)
        hf.token_lines = [t.line_no for t in tokens]
        cal = self.calibration
        if hf.title:
            hf.title_confidence = round(calibrate(hf.title_raw, cal["title"], hf.title_features), 3)
        if hf.authors_text:
            hf.authors_confidence = round(calibrate(hf.authors_raw, cal["authors"], hf.authors_features), 3)
        return hf


def model_files() -> tuple[Any, Any]:
    """The shipped model and calibration files (importlib resources of ``aisac_core.rag.models``)."""
    base = resources.files("aisac_core.rag") / "models"
    return base / MODEL_FILE, base / CALIBRATION_FILE


@functools.cache
def model_sha256() -> str:
    """sha256 of the shipped model file and its calibration (part of the index fingerprint: a new model
    re-processes the PDFs); "" when the model is absent."""
    m, c = model_files()
    h = hashlib.sha256()
    try:
        h.update(m.read_bytes())
        h.update(c.read_bytes())
    except OSError:
        return ""
    return h.hexdigest()


@functools.cache
def header_model() -> HeaderModel | None:
    """The shipped header model, loaded on first use (read-only: the same for every store); None when its files
    are absent (a reduced install)."""
    m, c = model_files()
    try:
        with resources.as_file(m) as mp:
            cal = json.loads(c.read_text(encoding="utf-8"))
            return HeaderModel(str(mp), cal)
    except (OSError, ValueError):
        return None
