"""The Cranfield collection (Cleverdon 1967): 1,400 aerodynamics abstracts, 225 queries, graded qrels.

Files (``shared/data/retrieval/cranfield``): ``cran.all.1400`` (records ``.I`` id, ``.T`` title, ``.A``
authors, ``.B`` bibliographic source, ``.W`` abstract), ``cran.qry`` (``.I`` and ``.W``), ``cranqrel``
(``qid docid code``) and ``cranqrel.readme``.

Two quirks, both handled here:

- The ``.I`` numbers in ``cran.qry`` run 001, 002, 004, 008, ... (gaps), while ``cranqrel`` numbers the
  queries 1..225 in file order. Queries are therefore renumbered 1..225 in the order they appear.
- ``cranqrel`` codes follow Cleverdon's scale (``cranqrel.readme``), where a *lower* code is *more*
  relevant: 1 = complete answer, 2 = high relevance, 3 = useful background, 4 = minimum interest,
  5 = no interest (never listed). Every query also carries exactly one pair with code ``-1``; the readme
  does not define it, it is not a relevance degree, and it is read as "judged, not relevant".

Graded gains (:data:`GAINS`) reverse the scale so that more relevant means more gain, linearly:
code 1 -> 4, 2 -> 3, 3 -> 2, 4 -> 1, -1 -> 0. For binary measures (recall) a document is relevant when
its gain is > 0, i.e. codes 1..4.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: Cleverdon relevance code -> graded gain (see the module docstring).
GAINS: dict[int, int] = {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}


@dataclass
class CranDoc:
    """One Cranfield document: id (``.I``), title (``.T``) and abstract (``.W``), whitespace-normalised."""

    doc_id: str
    title: str
    abstract: str

    @property
    def text(self) -> str:
        """Title and abstract, the text every system under test sees."""
        return f"{self.title}\n\n{self.abstract}".strip()


@dataclass
class Cranfield:
    """Documents, queries (``qid`` 1..225 as strings) and graded qrels ``{qid: {doc_id: gain}}``."""

    docs: list[CranDoc]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def _records(text: str) -> list[dict[str, str]]:
    recs: list[dict[str, str]] = []
    cur: dict[str, str] | None = None
    field = None
    for line in text.splitlines():
        m = re.match(r"^\.([ITABW])\b\s*(.*)$", line)
        if m:
            tag, rest = m.group(1), m.group(2)
            if tag == "I":
                cur = {"I": rest.strip()}
                recs.append(cur)
                field = None
            else:
                field = tag
                assert cur is not None
                cur.setdefault(field, "")
            continue
        if cur is not None and field is not None:
            cur[field] += " " + line
    return [{k: " ".join(v.split()) for k, v in r.items()} for r in recs]


def load(folder: Path) -> Cranfield:
    """Read the collection in ``folder``; raises FileNotFoundError when a file is missing."""
    docs = [CranDoc(r["I"], r.get("T", ""), r.get("W", "")) for r in _records((folder / "cran.all.1400").read_text())]
    queries = {str(i + 1): r.get("W", "") for i, r in enumerate(_records((folder / "cran.qry").read_text()))}
    qrels: dict[str, dict[str, int]] = {}
    for line in (folder / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        qid, did, code = parts[0], parts[1], int(parts[2])
        qrels.setdefault(qid, {})[did] = GAINS.get(code, 0)
    return Cranfield(docs, queries, qrels)
