"""Answers: does ``aisac ask`` without a model state the fact asked for, and is "supported" shown only when it does?

Dev set: ``bench/data/answers_dev.json`` (questions written by reading the shared PDFs' text, with the exact answer
text; some the papers do not answer). The PDFs it names are indexed into a private store (set
``AISAC_BENCH_ANSWERS_STORE`` to a folder to keep and reuse that store between runs), then each question runs
through :func:`aisac_servers.cli.ask._ask_here` (what ``aisac ask`` runs in-process) with ``llm="none"``.

Measures:

- **fact stated**: the answer text contains an expected string (case, whitespace and line-end hyphenation
  ignored); for an unanswerable question, the answer says "the sources do not state it";
- **support shown**: the evaluation's ``support.verdict`` is ``supported`` (before support verdicts existed, when no support
  verdict existed, the green "evidence verified" verdict is counted as what a reader took for "supported");
- **support precision**: of the answers shown as supported, the share that state the fact;
  **false supported**: answers shown as supported that do not state it (target 0);
- time per question (the whole ``aisac ask`` run, in-process, warm model) and support-judging time per citation.

Targets: fact stated in >= 85 % of answers, 0 false "supported". The held-out set
``bench/data/answers_heldout.json`` (papers of ``pdf_metadata/grobid`` the rules were not written on) is run after
the dev set into its own store (``<store>-heldout``) and reported apart, without a fact-stated target.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from .common import Context, Skip, make_core, table, temp_dir

DEV_SET = Path(__file__).parent / "data" / "answers_dev.json"
HELDOUT_SET = Path(__file__).parent / "data" / "answers_heldout.json"
NOT_STATED = "the sources do not state it"


def norm(s: str) -> str:
    """Lower case, soft hyphens and PDF hyphen marks dropped, words broken at a line end re-joined, whitespace
    collapsed."""
    s = s.replace("\u00ad", "").replace("\ufffe", "").replace("\u2011", "-")
    s = re.sub(r"(?<=\w)- (?=\w)", "", s)
    return " ".join(s.split()).lower()


def fact_stated(q: dict[str, Any], text: str) -> bool:
    """Whether answer ``text`` states the fact of dev question ``q`` (module docstring)."""
    body = norm(text.split("Related literature:")[0])
    if q.get("expect", 0) is None:
        return NOT_STATED in body
    if NOT_STATED in body and not any(norm(e) in body for e in q["expect_any"]):
        return False
    if q.get("expect_all"):
        return all(norm(e) in body for e in q["expect_all"])
    return any(norm(e) in body for e in q["expect_any"])


def shown_supported(ev: dict[str, Any]) -> bool:
    """Whether the evaluation shows the answer as supported (module docstring)."""
    sup = ev.get("support")
    if isinstance(sup, dict):
        return sup.get("verdict") == "supported"
    return ev.get("verdict") == "evidence verified"


def ask_all(ctx: Context, set_path: Path, store: Path) -> tuple[list[dict[str, Any]], float]:
    """Index the PDFs of question set ``set_path`` (under ``<data>/<pdf_root>``, default ``pdfs``) into ``store``
    (once: a marker file) and ask every question as ``aisac ask`` does without a model. Returns the per-question
    records and the indexing time in seconds (0 when the store was reused). Raises Skip when a PDF is missing."""
    import anyio

    from aisac_servers.cli.ask import _ask_here

    qset = json.loads(set_path.read_text())
    pdfs = [ctx.data_dir / qset.get("pdf_root", "pdfs") / p for p in qset["pdfs"]]
    missing = [str(p) for p in pdfs if not p.is_file()]
    if missing:
        raise Skip(f"{set_path.name}: PDFs missing: {', '.join(missing[:3])}")
    marker = store / ".bench-indexed"
    core = make_core(store)
    core.settings.warm = False
    per_q: list[dict[str, Any]] = []
    t_index = 0.0
    try:
        if not marker.exists():
            t = time.perf_counter()
            failures: list[Any] = []
            core.rag.indexer.run(pdfs, failures=failures)
            t_index = time.perf_counter() - t
            if failures:
                raise RuntimeError(f"indexing failed: {failures}")
            marker.touch()
        for q in qset["questions"]:
            t = time.perf_counter()
            res = anyio.run(lambda q=q: _ask_here(core, q["q"], None, "none", None))
            secs = time.perf_counter() - t
            ans, ev = res["answer"] or {}, res["evaluation"] or {}
            support = ev.get("support") if isinstance(ev.get("support"), dict) else {}
            per_q.append(
                {
                    "q": q["q"],
                    "type": q["type"],
                    "set": q.get("set", "original"),
                    "stated": fact_stated(q, ans.get("text") or ""),
                    "supported_shown": shown_supported(ev),
                    "support": support.get("verdict"),
                    "support_ms_per_citation": support.get("ms_per_citation"),
                    "seconds": round(secs, 2),
                    "answer": ans.get("text"),
                    "check": ans.get("check"),
                    "support_citations": support.get("citations"),
                }
            )
    finally:
        core.close()
    return per_q, t_index


def report(title: str, per_q: list[dict[str, Any]], t_index: float) -> dict[str, Any]:
    """Print the table of one question set (fact stated per type and set, supported shown, times, misses) and
    return its figures: ``{stated, questions, false_supported, unanswerable_stated, unanswerable, support_precision,
    time_per_question_s, support_ms_per_citation}``."""
    unanswerable = [p for p in per_q if p["type"] == "none"]
    n_sup = sum(p["supported_shown"] for p in per_q)
    false_sup = sum(p["supported_shown"] and not p["stated"] for p in per_q)
    false_sup_unans = sum(p["supported_shown"] for p in unanswerable)
    stated_all = sum(p["stated"] for p in per_q)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for p in per_q:
        by_type.setdefault(p["type"], []).append(p)
    rows = [
        (t, len(ps), sum(p["stated"] for p in ps), f"{100 * sum(p['stated'] for p in ps) / len(ps):.0f} %")
        for t, ps in sorted(by_type.items())
    ]
    rows.append(("all", len(per_q), stated_all, f"{100 * stated_all / len(per_q):.0f} %"))
    for name in sorted({p["set"] for p in per_q}):  # the first 41 and the questions added later, apart
        ps = [p for p in per_q if p["set"] == name]
        if len(ps) < len(per_q):
            n_ok = sum(p["stated"] for p in ps)
            rows.append((f"set: {name}", len(ps), n_ok, f"{100 * n_ok / len(ps):.0f} %"))
    secs = sorted(p["seconds"] for p in per_q)
    sup_ms = [p["support_ms_per_citation"] for p in per_q if p["support_ms_per_citation"] is not None]
    precision = (n_sup - false_sup) / n_sup if n_sup else None
    table(
        title,
        ["type", "questions", "fact stated", "share"],
        rows,
        caption=(
            f"shown supported {n_sup}, of which wrong {false_sup} (unanswerable {false_sup_unans}); support "
            f"precision {'-' if precision is None else f'{100 * precision:.0f} %'}; time per question p50 "
            f"{secs[len(secs) // 2]:.2f} s, max {secs[-1]:.2f} s; support judging "
            f"{(sum(sup_ms) / len(sup_ms)) if sup_ms else float('nan'):.1f} ms per citation; index {t_index:.0f} s"
        ),
    )
    for p in per_q:
        if not p["stated"] or (p["supported_shown"] and not p["stated"]):
            print(
                f"MISS [{p['type']}] {p['q']} (support: {p['support']}, check {p['check']})\n"
                f"   {str(p['answer'])[:400]!r}"
            )
    return {
        "stated": stated_all,
        "questions": len(per_q),
        "false_supported": false_sup,
        "unanswerable_stated": sum(p["stated"] for p in unanswerable),
        "unanswerable": len(unanswerable),
        "support_precision": precision,
        "time_per_question_s": {"p50": secs[len(secs) // 2], "max": secs[-1]},
        "support_ms_per_citation": (sum(sup_ms) / len(sup_ms)) if sup_ms else None,
    }


def run(ctx: Context) -> dict[str, Any]:
    """The answers part: the dev set (targets) and the held-out set (reported, no target); returns the JSON-ready
    result."""
    t0 = time.perf_counter()
    keep = os.environ.get("AISAC_BENCH_ANSWERS_STORE")
    with temp_dir(ctx, "answers") as tmp:
        store = Path(keep) if keep else tmp / "store"
        per_q, t_index = ask_all(ctx, DEV_SET, store)
        dev = report("answers: dev set, no model (aisac ask in-process)", per_q, t_index)
        held: dict[str, Any] | None = None
        held_q: list[dict[str, Any]] = []
        try:
            held_q, t_held = ask_all(ctx, HELDOUT_SET, store.parent / f"{store.name}-heldout")
            held = report("answers: held-out set (papers the rules were not written on)", held_q, t_held)
        except Skip as exc:
            print(f"held-out set skipped: {exc}")
    acc = dev["stated"] / dev["questions"]
    summary = [
        {
            "metric": "fact stated (share of all dev questions)",
            "value": round(acc, 3),
            "target": 0.85,
            "met": acc >= 0.85,
        },
        {"metric": "false supported", "value": dev["false_supported"], "target": 0, "met": dev["false_supported"] == 0},
        {
            "metric": "unanswerable -> not stated",
            "value": dev["unanswerable_stated"],
            "target": dev["unanswerable"],
            "met": dev["unanswerable_stated"] == dev["unanswerable"],
        },
    ]
    if held is not None:
        summary.append(
            {
                "metric": "held-out: fact stated (share)",
                "value": round(held["stated"] / held["questions"], 3),
                "target": None,
                "met": None,
            }
        )
        summary.append(
            {
                "metric": "held-out: false supported",
                "value": held["false_supported"],
                "target": 0,
                "met": held["false_supported"] == 0,
            }
        )
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": summary,
        "answerable": dev["questions"] - dev["unanswerable"],
        "support_precision": dev["support_precision"],
        "time_per_question_s": dev["time_per_question_s"],
        "support_ms_per_citation": dev["support_ms_per_citation"],
        "questions": per_q,
        "heldout": {**held, "questions": held_q} if held is not None else None,
    }
