"""SciFact (Wadden et al., EMNLP 2020) in BEIR format: biomedical abstracts, scientific claims as queries.

Files (``shared/data/retrieval/scifact_dev``): ``corpus.jsonl`` (one JSON object a line: ``_id``, ``title``,
``text``; in the shared copy every title is empty), ``queries.jsonl`` (``_id``, ``text``: a claim) and
``qrels/train.tsv`` (BEIR: a header line ``query-id corpus-id score``, tab-separated, score 1 = relevant).
The shared copy holds 2,101 abstracts and 83 claims that have judgements. Gains are binary (score as given);
a document without a judgement counts as not relevant. Loaded into the same shape as Cranfield
(:class:`bench.cranfield.Cranfield`), so one quality harness runs both.
"""

from __future__ import annotations

import json
from pathlib import Path

from .cranfield import CranDoc, Cranfield

FILES = ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv")


def load(folder: Path) -> Cranfield:
    """Read the collection in ``folder``; only queries with at least one judgement are kept (all 83 here).

    Raises FileNotFoundError when a file is missing, ValueError on a malformed line."""
    docs = []
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            docs.append(
                CranDoc(str(d["_id"]), " ".join(str(d.get("title") or "").split()), " ".join(d["text"].split()))
            )
    qrels: dict[str, dict[str, int]] = {}
    for i, line in enumerate((folder / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if i == 0 and parts[0] == "query-id":
            continue
        if len(parts) >= 3:
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    queries = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            if str(q["_id"]) in qrels:
                queries[str(q["_id"])] = " ".join(q["text"].split())
    return Cranfield(docs, queries, qrels)
