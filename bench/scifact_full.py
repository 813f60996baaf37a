"""SciFact's full train split (Wadden et al., EMNLP 2020) as a retrieval collection: 807 claims over the full
5,183-abstract corpus (BEIR's ``scifact`` train split; Thakur et al., "BEIR", NeurIPS Datasets 2021).

Files (``shared/data/claims/scifact``): ``corpus.jsonl`` (``doc_id``, ``title``, ``abstract``: a list of
sentences) and ``claims_train.jsonl`` (``id``, ``claim``, ``evidence``, ``cited_doc_ids``). A claim's relevant
abstracts are its ``cited_doc_ids`` (gain 1), as in BEIR's qrels (the cited abstracts are the ones the
annotators read; an abstract cited without a rationale is still on the claim's topic). Loaded into the shape of
:class:`bench.cranfield.Cranfield`, so one harness runs both collections. The SciFact *test* claims are how the
project is measured and are not used anywhere here.
"""

from __future__ import annotations

import json
from pathlib import Path

from .cranfield import CranDoc, Cranfield

FILES = ("corpus.jsonl", "claims_train.jsonl")


def load(folder: Path) -> Cranfield:
    """Read the corpus and the train claims in ``folder`` (``shared/data/claims/scifact``); every claim has at
    least one cited abstract. Raises FileNotFoundError when a file is missing, ValueError on a malformed line."""
    docs = []
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            docs.append(
                CranDoc(
                    str(d["doc_id"]),
                    " ".join(str(d.get("title") or "").split()),
                    " ".join(" ".join(d["abstract"]).split()),
                )
            )
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for line in (folder / "claims_train.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            c = json.loads(line)
            cited = [str(x) for x in c.get("cited_doc_ids") or []]
            if cited:
                queries[str(c["id"])] = " ".join(str(c["claim"]).split())
                qrels[str(c["id"])] = {d: 1 for d in cited}
    return Cranfield(docs, queries, qrels)
