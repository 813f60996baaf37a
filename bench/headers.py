"""Header model evaluation on GROBID-format pairs: ``python -m bench --only headers [--pairs DIR]``.

``DIR`` holds pairs in the format of the shared corpus (``shared/data/pdf_headers/grobid``, see its README): a
``pairs.tsv`` (``doc_id raw_file tei_file ...``) or, without it, ``raw/*.training.header`` paired with
``tei/*.tei.xml`` by GROBID's rule. Without ``--pairs`` the held-out test documents of the shared corpus are used
(the split of ``bench/train_headers.py``).

Figures (docs/rag.md, "Header model"):

- title exact match: the predicted title (tokens labelled ``title``) equals the annotated ``<titlePart>`` text,
  compared on letters and digits (case-folded, NFKC; GROBID's "soft" matching ignores punctuation and case the
  same way), over all documents with an annotated title;
- author-name precision / recall / F1: names split from the predicted author fields and from the annotated
  ``<docAuthor>`` elements by :func:`aisac_core.rag.headers.author_names`, matched one to one on their
  letter keys; micro-averaged over documents;
- full author list right (the predicted name list equals the annotated one as a set);
- ECE (10 equal-width bins; Guo et al. 2017, "On Calibration of Modern Neural Networks") of ``title_confidence``
  against "title exactly right" and of ``authors_confidence`` against "author list right", over the documents
  where the model reports the field (a confidence comes with a field), with the reliability tables; the share of
  fields reported >= 0.9 that are wrong.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aisac_core.rag.headers import (
    UNCERTAIN_BELOW,
    HeaderFields,
    HeaderModel,
    HeaderToken,
    header_model,
    model_sha256,
    tokenize,
    tokens_from_grobid,
)
from aisac_core.rag.people import author_names

#: TEI element (tag, or tag[type]) -> label (the shared README's table; GROBID's labels outside LABELS -> other)
_TEI_LABEL = {
    "titlePart": "title",
    "docAuthor": "author",
    "affiliation": "affiliation",
    "address": "address",
    "email": "email",
    "div[abstract]": "abstract",
    "keyword": "keyword",
    "keywords": "keyword",
    "idno": "pubnum",
}
#: the documents the README names as one paper twice: kept on the same side of the split
_SAME_PAPER = (("1093.", "1103."), ("1101.", "1110."), ("1042._IJDLS_V1.5", "SSRN-id1425692-2"))


@dataclass
class HeaderDoc:
    """One pair: its id, the feature file's tokens, the labels aligned to them (None: unaligned token), the
    annotated title and author texts."""

    doc_id: str
    tokens: list[HeaderToken]
    labels: list[str | None]
    title: str
    authors: list[str] = field(default_factory=list)


def _norm(t: str) -> str:
    t = unicodedata.normalize("NFKC", t)
    t = re.sub("[\u2010-\u2015\u2212]", "-", t)
    t = re.sub("[\u2022\u2023\u25e6\u2043\u2219]", "•", t)
    return t.replace("（", "(").replace("）", ")")


def key(t: str) -> str:
    """Letters and digits of ``t``, NFKC, case-folded: the comparison key of titles and names. A trailing
    footnote mark (1-2 digits or a symbol after the last word: "Real-Time Scheduling 1", "Antibodies *") is no
    part of the title a reader cites and is dropped first."""
    t = re.sub(r"(?<=\w)\s+(\d{1,2}|[^\w\s()]+)\s*$", "", unicodedata.normalize("NFKC", t).strip())
    return re.sub(r"[\W_]+", "", t.casefold())


def _tei_spans(path: Path) -> tuple[list[tuple[str, str]], str, list[str]]:
    """(label, text) pieces of a TEI file's ``<front>`` in document order, the title text, the author texts."""
    root = ET.parse(path).getroot()
    front = root.find(".//front")
    if front is None:
        raise ValueError(f"{path.name}: no <front> element")
    pieces: list[tuple[str, str]] = []
    titles: list[str] = []
    authors: list[str] = []

    def walk(el: ET.Element, label: str | None) -> None:
        tag = el.tag.split("}")[-1]
        lab = _TEI_LABEL.get(f"{tag}[{el.get('type')}]") or _TEI_LABEL.get(tag) if tag != "lb" else None
        if tag == "title" and el.get("level") == "j":
            lab = "other"
        if tag == "div" and el.get("type") != "abstract":
            lab = None
        cur = lab or label
        if lab == "title" and label is None:
            titles.append(" ".join("".join(el.itertext()).split()))
        if lab == "author":
            authors.append(" ".join("".join(el.itertext()).split()))
        if lab:  # a field starts: its first token is labelled "I-<label>" (GROBID's convention)
            pieces.append(("I-" + lab, ""))
        if el.text:
            pieces.append((cur or "other", el.text))
        for ch in el:
            walk(ch, cur)
            if ch.tail:
                pieces.append((cur or "other", ch.tail))

    walk(front, None)
    return pieces, " ".join(titles[:1]), authors


def align(tokens: Sequence[HeaderToken], pieces: Sequence[tuple[str, str]]) -> list[str | None]:
    """Labels of the feature-file ``tokens`` from the TEI ``pieces``, by GROBID's trainer rule (shared README,
    "Turning a pair into a labelled token sequence"): each token is compared with the next 7 TEI tokens; a match
    takes that token's label and moves past it; a lone unlabelled token between two equal labels takes them."""
    tei: list[tuple[str, str]] = []
    start: str | None = None
    for lab, text in pieces:
        if lab.startswith("I-"):
            start = lab
            continue
        for w in tokenize(_norm(text)):
            tei.append((_norm(w), start if start and start[2:] == lab else lab))
            start = None
    out: list[str | None] = []
    pos = 0
    for t in tokens:
        w = _norm(t.text)
        got = None
        for j in range(pos, min(pos + 7, len(tei))):
            if tei[j][0] == w:
                got = tei[j][1]
                pos = j + 1
                break
        out.append(got)
    for i in range(1, len(out) - 1):
        a, b = out[i - 1], out[i + 1]
        if out[i] is None and a is not None and b is not None and a.removeprefix("I-") == b.removeprefix("I-"):
            out[i] = a.removeprefix("I-")
    return out


def _pairs(folder: Path) -> list[tuple[str, Path, Path]]:
    raw, tei = folder / "raw", folder / "tei"
    listing = folder / "pairs.tsv"
    out: list[tuple[str, Path, Path]] = []
    if listing.is_file():
        for i, row in enumerate(listing.read_text(encoding="utf-8").splitlines()):
            c = row.split("\t")
            if i == 0 and c[0] == "doc_id" or len(c) < 3:
                continue
            out.append((c[0], raw / c[1], tei / c[2]))
        return out
    for tp in sorted(tei.glob("*.tei.xml")):  # GROBID's rule: xml:id without its leading "_", then file names
        m = re.search(r'xml:id="_?([^"]+)"', tp.read_text(encoding="utf-8", errors="replace")[:2000])
        n = m.group(1) if m else tp.name.removesuffix(".tei.xml")
        cands = [raw / f"{n}.header", raw / f"{n}.training.header", *sorted(raw.glob(f"{n}._*"))]
        cands.append(raw / tp.name.replace(".tei.xml", ""))
        rp = next((c for c in cands if c.is_file()), None)
        if rp is not None:
            out.append((n, rp, tp))
    return out


def load_docs(folder: Path) -> list[HeaderDoc]:
    """The aligned pairs of a GROBID-format ``folder``. Raises FileNotFoundError when it has no pairs."""
    docs = []
    for doc_id, rp, tp in _pairs(folder):
        if not rp.is_file() or not tp.is_file():
            continue
        toks = tokens_from_grobid(rp.read_text(encoding="utf-8").splitlines())
        pieces, title, authors = _tei_spans(tp)
        docs.append(HeaderDoc(doc_id, toks, align(toks, pieces), title, authors))
    if not docs:
        raise FileNotFoundError(f"no GROBID header pairs (raw/ + tei/ or pairs.tsv) in {folder}")
    return docs


def _group_key(doc_id: str) -> str:
    for a, b in _SAME_PAPER:
        if doc_id.startswith((a, b)):
            return a
    return doc_id


def group_of(d: HeaderDoc) -> str:
    """The paper a document belongs to: its id, or the first id of a pair the README names as one paper twice."""
    return _group_key(d.doc_id)


def split_of(docs: Sequence[HeaderDoc]) -> dict[str, str]:
    """doc_id -> "train" / "validation" / "test" (60 / 20 / 20 % by a sha1 of the paper's group key; the
    README's duplicate papers, and documents with identical feature files, share a group)."""
    by_content: dict[str, str] = {}
    out: dict[str, str] = {}
    for d in docs:
        gkey = group_of(d)
        content = hashlib.sha1(" ".join(t.text for t in d.tokens).encode()).hexdigest()
        gkey = by_content.setdefault(content, gkey)
        h = int(hashlib.sha1(("aisac-headers-1:" + gkey).encode()).hexdigest(), 16) % 10
        out[d.doc_id] = "train" if h < 6 else "validation" if h < 8 else "test"
    return out


def ece(conf: Sequence[float], right: Sequence[bool], bins: int = 10) -> tuple[float, list[dict[str, Any]]]:
    """Expected calibration error over ``bins`` equal-width bins (Guo et al. 2017: sum over bins of
    |bin| / n * |accuracy - mean confidence|; a confidence of exactly 1.0 falls in the last bin) and the
    reliability table (per non-empty bin: range, n, mean confidence, accuracy)."""
    n = len(conf)
    count = [0] * bins
    csum = [0.0] * bins
    hits = [0] * bins
    for c, r in zip(conf, right):
        b = min(max(int(c * bins), 0), bins - 1)
        if b > 0 and c < b / bins:  # the same bin as lo <= c < hi where c * bins rounds across an edge
            b -= 1
        elif b < bins - 1 and c >= (b + 1) / bins:
            b += 1
        count[b] += 1
        csum[b] += c
        hits[b] += bool(r)
    table: list[dict[str, Any]] = []
    total = 0.0
    for b in range(bins):
        if not count[b]:
            continue
        mc, acc = csum[b] / count[b], hits[b] / count[b]
        total += count[b] / n * abs(acc - mc)
        table.append(
            {
                "bin": f"{b / bins:.1f}-{(b + 1) / bins:.1f}",
                "n": count[b],
                "confidence": round(mc, 3),
                "accuracy": round(acc, 3),
            }
        )
    return (round(total, 4) if n else 0.0), table


def _ece_many(conf: Any, right: Any, bins: int = 10) -> Any:
    """:func:`ece` of each row of the 2-D arrays ``conf`` / ``right`` (numpy; the same bins), unrounded."""
    import numpy as np

    reps, n = conf.shape
    b = np.minimum((conf * bins).astype(int), bins - 1)
    b = np.where((b > 0) & (conf < b / bins), b - 1, b)
    b = np.where((b < bins - 1) & (conf >= (b + 1) / bins), b + 1, b)
    flat = (b + bins * np.arange(reps)[:, None]).ravel()
    csum = np.bincount(flat, weights=conf.ravel(), minlength=reps * bins).reshape(reps, bins)
    hits = np.bincount(flat, weights=right.ravel().astype(float), minlength=reps * bins).reshape(reps, bins)
    return np.abs(hits - csum).sum(axis=1) / n  # sum over bins of |bin|/n * |acc - conf| = |hits - csum| / n


def ece_interval(
    conf: Sequence[float], right: Sequence[bool], reps: int = 1000, seed: int = 37, groups: Sequence[Any] | None = None
) -> tuple[float, float] | None:
    """A 95 % percentile-bootstrap interval of :func:`ece` (Efron & Tibshirani 1993): ``reps`` resamples with
    replacement (fixed seed), the 2.5th and 97.5th percentiles; None for fewer than 10 fields. Without ``groups``
    the fields are resampled; with ``groups`` (one key per field: its document or workbook) whole groups are, so
    fields of one document stay together (a cluster bootstrap: Davison & Hinkley 1997, section 3.8). ECE is biased
    upward in small samples (a perfectly calibrated reader still shows the binomial noise of each bin), so the
    interval says how far a figure over ~100 documents can move by chance."""
    import numpy as np

    n = len(conf)
    if n < 10:
        return None
    c = np.asarray(conf, dtype=float)
    r = np.asarray(right, dtype=bool)
    rng = np.random.default_rng(seed)
    if groups is None:
        idx = rng.integers(0, n, size=(reps, n))
        vals = np.sort(_ece_many(c[idx], r[idx]))
    else:
        if len(groups) != n:
            raise ValueError(f"ece_interval: {len(groups)} group keys for {n} fields")
        members: dict[Any, list[int]] = {}
        for i, g in enumerate(groups):
            members.setdefault(g, []).append(i)
        blocks = list(members.values())
        out = []
        for _ in range(reps):
            pick = np.concatenate([blocks[j] for j in rng.integers(0, len(blocks), size=len(blocks))])
            out.append(float(_ece_many(c[pick][None, :], r[pick][None, :])[0]))
        vals = np.sort(np.array(out))
    return round(float(vals[int(0.025 * reps)]), 4), round(float(vals[min(reps - 1, int(0.975 * reps))]), 4)


def ece_if_calibrated(conf: Sequence[float], reps: int = 1000, seed: int = 37) -> tuple[float, float] | None:
    """The ECE a perfectly calibrated reader would show on fields with these confidences, from sampling noise
    alone: each field drawn right with probability its confidence, ``reps`` times (fixed seed); returns the mean
    and the 95th percentile. A measured ECE under that percentile is within chance of perfect calibration. None for
    fewer than 10 fields."""
    import numpy as np

    n = len(conf)
    if n < 10:
        return None
    c = np.broadcast_to(np.asarray(conf, dtype=float), (reps, n))
    drawn = np.random.default_rng(seed).random((reps, n)) < c
    vals = np.sort(_ece_many(c, drawn))
    return round(float(vals.mean()), 4), round(float(vals[int(0.95 * reps)]), 4)


def judge(doc: HeaderDoc, hf: HeaderFields) -> dict[str, Any]:
    """Per document: title right, author names (tp, predicted, annotated), author list right, confidences."""
    title_ok = bool(hf.title) and key(hf.title or "") == key(doc.title)
    gold = [key(n) for a in doc.authors for n in author_names(a)]
    pred = [key(n) for a in hf.authors_text for n in author_names(a)]
    left = list(gold)
    tp = 0
    for p in pred:
        if p in left:
            left.remove(p)
            tp += 1
    return {
        "doc": doc.doc_id,
        "title_ok": title_ok,
        "title": hf.title,
        "gold_title": doc.title,
        "tp": tp,
        "n_pred": len(pred),
        "n_gold": len(gold),
        "authors_ok": sorted(pred) == sorted(gold),
        "title_confidence": hf.title_confidence,
        "authors_confidence": hf.authors_confidence,
        "title_raw": hf.title_raw,
        "authors_raw": hf.authors_raw,
        "title_features": hf.title_features,
        "authors_features": hf.authors_features,
    }


def _paper(row: dict[str, Any]) -> str:
    """The bootstrap group of a :func:`judge` row: its paper (the README's duplicate papers are one)."""
    return _group_key(str(row["doc"]))


def figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Title exact match, author-name P/R/F1, author lists right, ECE and reliability tables of ``rows``
    (:func:`judge` results)."""
    n = len(rows)
    tp = sum(r["tp"] for r in rows)
    npred = sum(r["n_pred"] for r in rows)
    ngold = sum(r["n_gold"] for r in rows)
    p = tp / npred if npred else 0.0
    rc = tp / ngold if ngold else 0.0
    # a confidence is reported with a field: the ECE is over the documents where the model gives one
    t_rep = [r for r in rows if r["title"]]
    a_rep = [r for r in rows if r["n_pred"]]
    t_ece, t_tab = ece([r["title_confidence"] for r in t_rep], [r["title_ok"] for r in t_rep])
    a_ece, a_tab = ece([r["authors_confidence"] for r in a_rep], [r["authors_ok"] for r in a_rep])
    hi_t = [r for r in rows if r["title_confidence"] >= 0.9]
    hi_a = [r for r in rows if r["authors_confidence"] >= 0.9]
    low_t = [r for r in rows if r["title_confidence"] < UNCERTAIN_BELOW]
    return {
        "documents": n,
        "title_exact": round(sum(r["title_ok"] for r in rows) / n, 4) if n else 0.0,
        "author_precision": round(p, 4),
        "author_recall": round(rc, 4),
        "author_f1": round(2 * p * rc / (p + rc), 4) if p + rc else 0.0,
        "author_lists_right": round(sum(r["authors_ok"] for r in rows) / n, 4) if n else 0.0,
        "titles_reported": len(t_rep),
        "author_lists_reported": len(a_rep),
        "title_ece": t_ece,
        "authors_ece": a_ece,
        "title_ece_95": ece_interval(
            [r["title_confidence"] for r in t_rep], [r["title_ok"] for r in t_rep], groups=[_paper(r) for r in t_rep]
        ),
        "authors_ece_95": ece_interval(
            [r["authors_confidence"] for r in a_rep],
            [r["authors_ok"] for r in a_rep],
            groups=[_paper(r) for r in a_rep],
        ),
        "title_ece_if_calibrated": ece_if_calibrated([r["title_confidence"] for r in t_rep]),
        "authors_ece_if_calibrated": ece_if_calibrated([r["authors_confidence"] for r in a_rep]),
        "title_reliability": t_tab,
        "authors_reliability": a_tab,
        "title_wrong_at_0.9": round(sum(not r["title_ok"] for r in hi_t) / len(hi_t), 4) if hi_t else None,
        "authors_wrong_at_0.9": round(sum(not r["authors_ok"] for r in hi_a) / len(hi_a), 4) if hi_a else None,
        "title_uncertain": len(low_t),
        "title_right_when_uncertain": sum(r["title_ok"] for r in low_t),
    }


def evaluate(model: HeaderModel, docs: Sequence[HeaderDoc]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Figures of ``model`` on ``docs`` and the per-document rows."""
    rows = [judge(d, model.read(d.tokens)) for d in docs if d.title]
    return figures(rows), rows


#: the figures of ``python -m bench.train_headers --nested`` (nested cross-validation over all shared documents)
NESTED_FILE = Path(__file__).resolve().parent / "data" / "headers_nested.json"


def nested_record(sha: str) -> dict[str, Any] | None:
    """The recorded nested cross-validation (:data:`NESTED_FILE`) when it measured the model of sha256 ``sha``;
    None when absent or recorded for another model (then ``python -m bench.train_headers --nested`` re-takes it)."""
    if not NESTED_FILE.is_file():
        return None
    rec: dict[str, Any] = json.loads(NESTED_FILE.read_text(encoding="utf-8"))
    return rec if rec.get("model_sha256") == sha else None


def _nested_rows(fig: dict[str, Any], nest: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    n = nest["figures"]
    return [
        ("documents", fig["documents"], n["documents"]),
        ("title exact match (>= 0.85)", fig["title_exact"], n["title_exact"]),
        ("author-name precision", fig["author_precision"], n["author_precision"]),
        ("author-name recall", fig["author_recall"], n["author_recall"]),
        ("author-name F1 (>= 0.90)", fig["author_f1"], n["author_f1"]),
        ("full author list right", fig["author_lists_right"], n["author_lists_right"]),
        ("title ECE (<= 0.05)", fig["title_ece"], n["title_ece"]),
        ("  bootstrap 95 % by document", str(fig["title_ece_95"]), str(n["title_ece_95"])),
        (
            "  a calibrated reader by chance (mean, 95th pct)",
            str(fig["title_ece_if_calibrated"]),
            str(n["title_ece_if_calibrated"]),
        ),
        ("authors ECE (<= 0.05)", fig["authors_ece"], n["authors_ece"]),
        ("  bootstrap 95 % by document", str(fig["authors_ece_95"]), str(n["authors_ece_95"])),
        (
            "  a calibrated reader by chance (mean, 95th pct)",
            str(fig["authors_ece_if_calibrated"]),
            str(n["authors_ece_if_calibrated"]),
        ),
        ("titles >= 0.9 that are wrong (<= 0.10)", fig["title_wrong_at_0.9"], n["title_wrong_at_0.9"]),
        ("author lists >= 0.9 that are wrong (<= 0.10)", fig["authors_wrong_at_0.9"], n["authors_wrong_at_0.9"]),
    ]


def _ece_targets(fig: dict[str, Any], label: str) -> list[dict[str, Any]]:
    """The summary rows of issue 37's calibration target (ECE <= 0.05) for the title and author-list confidence of
    ``fig`` (keys ``title_ece``, ``authors_ece``), named with ``label`` (which split or run they come from)."""
    return [
        {"metric": f"{f} ECE{label}", "value": fig[f"{f}_ece"], "target": "<= 0.05", "met": fig[f"{f}_ece"] <= 0.05}
        for f in ("title", "authors")
    ]


def run(ctx: Any) -> dict[str, Any]:
    """The headers part: figures on ``--pairs DIR`` (every pair) or on the shared corpus's held-out test split."""
    from .common import DEFAULT_DATA_DIR, Skip, console, table

    pairs = ctx.options.get("pairs")
    model = header_model()
    if model is None:
        raise Skip("the header model is not installed (aisac_core/rag/models/header.crfsuite)")
    if pairs:
        folder = Path(pairs)
        if not folder.is_dir():
            raise Skip(f"--pairs {folder}: no such folder")
        docs = load_docs(folder)
        what = f"all {len(docs)} pairs of {folder}"
    else:
        folder = (ctx.data_dir or DEFAULT_DATA_DIR) / "pdf_headers" / "grobid"
        if not folder.is_dir():
            raise Skip(f"{folder} is absent")
        alld = load_docs(folder)
        sp = split_of(alld)
        docs = [d for d in alld if sp[d.doc_id] == "test"]
        what = f"held-out test split of the shared corpus ({len(docs)} of {len(alld)} documents)"
    t0 = time.perf_counter()
    fig, rows = evaluate(model, docs)
    secs = time.perf_counter() - t0
    console.print(f"header model on the {what}")
    table(
        "header model",
        ["measure", "value"],
        [
            ("documents", fig["documents"]),
            ("title exact match", fig["title_exact"]),
            ("author-name precision", fig["author_precision"]),
            ("author-name recall", fig["author_recall"]),
            ("author-name F1", fig["author_f1"]),
            ("full author list right", fig["author_lists_right"]),
            ("title ECE (10 bins) [bootstrap 95 %]", f"{fig['title_ece']} {fig['title_ece_95']}"),
            ("authors ECE (10 bins) [bootstrap 95 %]", f"{fig['authors_ece']} {fig['authors_ece_95']}"),
            ("title ECE of a calibrated reader by chance (mean, 95th pct)", fig["title_ece_if_calibrated"]),
            ("authors ECE of a calibrated reader by chance (mean, 95th pct)", fig["authors_ece_if_calibrated"]),
            ("titles >= 0.9 that are wrong", fig["title_wrong_at_0.9"]),
            ("author lists >= 0.9 that are wrong", fig["authors_wrong_at_0.9"]),
            (
                f"titles below {UNCERTAIN_BELOW} (uncertain) / right among them",
                f"{fig['title_uncertain']} / {fig['title_right_when_uncertain']}",
            ),
            ("seconds per document", round(secs / max(1, len(docs)), 4)),
        ],
    )
    for name in ("title", "authors"):
        table(
            f"reliability: {name}",
            ["bin", "n", "mean confidence", "accuracy"],
            [(b["bin"], b["n"], b["confidence"], b["accuracy"]) for b in fig[f"{name}_reliability"]],
        )
    nest = None if pairs else nested_record(model_sha256())
    if nest is not None:
        table(
            "header model: the fixed held-out split beside nested cross-validation over all documents "
            "(each held out once; bench/train_headers.py --nested)",
            ["measure", "held-out test split", "nested CV, all documents"],
            _nested_rows(fig, nest),
        )
        for name in ("title", "authors"):
            table(
                f"reliability, nested cross-validation: {name}",
                ["bin", "n", "mean confidence", "accuracy"],
                [(b["bin"], b["n"], b["confidence"], b["accuracy"]) for b in nest["figures"][f"{name}_reliability"]],
            )
    elif not pairs:
        console.print("no nested cross-validation recorded for this model: python -m bench.train_headers --nested")
    # the acceptance's ECE is taken where n resolves it: nested cross-validation over all documents when recorded
    ecefig = nest["figures"] if nest is not None else fig
    where = " (nested CV)" if nest is not None else ""
    split = ", held-out split" if nest is not None else ""
    summary = [
        {
            "metric": "title exact match",
            "value": fig["title_exact"],
            "target": ">= 0.85",
            "met": fig["title_exact"] >= 0.85,
        },
        {"metric": "author-name F1", "value": fig["author_f1"], "target": ">= 0.90", "met": fig["author_f1"] >= 0.90},
        *_ece_targets(fig, split),
    ]
    if nest is not None:
        summary += _ece_targets(ecefig, where)
    return {
        "status": "ok",
        "what": what,
        "figures": fig,
        "rows": rows,
        "nested": None if nest is None else {k: v for k, v in nest.items() if k != "rows"},
        "seconds": round(secs, 2),
        "summary": summary,
    }
