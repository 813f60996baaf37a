"""The Markdown export of a run: what a reviewer reads first.

In this order: the question and the full answer; the cited evidence (one row per citation ``[n]``: source, page,
section, score, verification, the quoted passage); the evaluation (verdict, gates, critiques); the plan; the steps
as a nested list; the configuration pins and the input files. A run without a recorded answer (a host that keeps its
answer to itself) lists the passages its tool calls returned instead, marked as retrieved. Built from
:func:`aisac_core.trace.report.run_report`, like the dashboard's run page and the HTML export.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.evidence.anchor import ocr_note
from aisac_core.trace.exports.software import aisac_version
from aisac_core.trace.pins import run_pins
from aisac_core.trace.queries import RunQueries, run_inputs
from aisac_core.trace.report import anchor_label, run_report
from aisac_core.trace.verify import verify_run

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: configuration pins shown in the summary, in order.
SHOWN_PINS = (
    "embedding_model_id",
    "sparse_model",
    "index_fingerprint",
    "parser_revision",
    "pdf_pipeline",
    "chunk_max_tokens",
    "retrieval",
)


def _cell(s: Any, limit: int = 400) -> str:
    """Text for a Markdown table cell: one line, pipes escaped, cut after ``limit`` characters."""
    text = " ".join(str("-" if s is None or s == "" else s).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def export_markdown(engine: Engine, run_id: str) -> str:
    """A run in Markdown (see the module docstring); evidence is verified against the files (sha256) without
    opening the vector store. Raises TraceError for an unknown run."""
    # long function: the report's sections in document order
    data = RunQueries(engine).get_run(run_id, include_results=True)
    r = run_report(dict(data))
    run = r["run"]
    checked = {a["chunk_id"]: a for a in verify_run(engine, run_id)["anchors"]}
    lines = [f"# aisac run `{run_id}`", ""]
    if r["question"]:
        lines += [f"**Question:** {r['question']}", ""]
    kinds = ", ".join(f"{k}: {v}" for k, v in run["by_kind"].items())
    statuses = ", ".join(f"{k}: {v}" for k, v in run["by_status"].items())
    lines += [
        f"- started: {run['started_at']} · {run['duration_s']} s · {run['events']} events ({kinds})",
        f"- status: {statuses} · servers: {', '.join(run['servers'])}",
        f"- software: aisac {aisac_version({'pins': run_pins(engine, run_id)})}",
        "",
    ]
    v = r["verdict"]
    if r["answer"]:
        lines += ["## Answer", "", r["answer"]["text"].strip(), ""]
        by = r["answer"].get("by") or "-"
        verdict = (
            f" · evaluation: **{v['label']}** · anchors: **{v.get('anchors') or '-'}** · support: "
            f"**{v.get('support') or 'not judged'}**"
            if v
            else ""
        )
        lines += [f"*{len(r['answer']['citations'])} citations · answer by {by}{verdict}*", ""]
    if r["answer"]:
        cards, title = r["cited"], "Evidence"
    else:
        cards, title = r["retrieved"], "Evidence (retrieved; no answer recorded)"
    if cards:
        lines += [
            f"## {title}",
            "",
            "| # | source | page | section | score | anchor | support | quoted passage |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for i, c in enumerate(cards, 1):
            chk: dict[str, Any] = dict(checked.get(c["chunk_id"]) or {})
            status = anchor_label(chk.get("status"))
            if chk.get("anchor_status") not in (None, "ok"):
                status += f" ({chk['anchor_status']})"
            source = c.get("title") or Path(c.get("path") or "?").name
            if c.get("url"):  # a database record's citation: its URL
                source = f"{source} <{c['url']}>"
            score = f"{c['score']:.3f}" if isinstance(c.get("score"), (int, float)) else "-"
            support = str(c.get("support") or "not judged")
            if isinstance(c.get("support_probability"), (int, float)):  # the learned judge's calibrated P
                support += f" (P {c['support_probability']:.2f})"
            page = f"{c.get('page')} ({note})" if (note := ocr_note(c)) else c.get("page")
            lines.append(
                f"| {c['n'] if c['n'] is not None else i} | {_cell(source, 120)} | {_cell(page)} | "
                f"{_cell(c.get('section'), 120)} | {score} | {status} | {support} | "
                f"{_cell(c.get('quote') or c.get('text'))} |"
            )
        lines.append("")
    if v or r["critiques"]:
        lines += ["## Evaluation", ""]
        if v:
            gates = ", ".join(f"{k} {'ok' if g['passed'] else 'failed'}" for k, g in v["gates"].items())
            judged = "" if v["content_judged"] else " · content: not judged (no model)"
            lines += [f"- verdict: **{v['label']}**{judged}" + (f" · gates: {gates}" if gates else "")]
            lines += [
                f"- anchors: **{v.get('anchors') or '-'}** (the cited bytes are still there) · support: "
                f"**{v.get('support') or 'not judged'}** (the cited sentence states the claim"
                + (f"; judged by {v['support_by']})" if v.get("support_by") else ")")
            ]
        lines += [
            f"- {c['label']}{' (' + c['aspect'] + ')' if c.get('aspect') else ''}: {c['message']}"
            + ("" if c.get("final", True) else " (an earlier attempt, re-planned)")
            for c in r["critiques"]
        ]
        lines.append("")
    plan = r["plan"]
    if plan and plan["nodes"]:
        deps: dict[str, list[str]] = {}
        for a, b in plan["edges"]:
            deps.setdefault(b, []).append(a)
        lines += (
            ["## Plan", ""]
            + [
                f"{i}. {n['label']}"
                + (f" (`{n['tool'] or n['helper']}`)" if n.get("tool") or n.get("helper") else "")
                + (f", after {', '.join(deps[n['id']])}" if deps.get(n["id"]) else "")
                for i, n in enumerate(plan["nodes"], 1)
            ]
            + [""]
        )
    if r["errors"]:
        lines += (
            ["## Errors", ""]
            + [f"- event {x['id']} `{x['tool']}` ({x['status']}): {x['error']}" for x in r["errors"]]
            + [""]
        )
    lines += ["## Steps", ""]

    def emit(nodes: list[dict[str, Any]], depth: int) -> None:
        for ev in nodes:
            args = json.dumps(ev["arguments"], ensure_ascii=False) if not isinstance(ev["arguments"], str) else ""
            args = args if len(args) <= 200 else args[:199] + "…"
            lines.append(
                f"{'  ' * depth}- **{ev['tool']}** ({ev['kind']}, {ev['status']}, {ev['latency_ms']:.1f} ms)"
                f" `{args}` → {ev['result_summary'] or ev['error'] or ''} (event {ev['id']}, result sha256 "
                f"`{(ev['result_sha256'] or '-')[:12]}`)"
            )
            emit(ev["children"], depth + 1)

    emit(data.get("tree", []), 0)
    pins = run_pins(engine, run_id) or {}
    if pins:
        lines += ["", "## Configuration", "", "| pin | value |", "|---|---|"]
        for k in SHOWN_PINS:
            if k in pins:
                val = json.dumps(pins[k]) if isinstance(pins[k], dict) else pins[k]
                lines.append(f"| {k} | `{_cell(val, 300)}` |")
    inputs = run_inputs(engine, run_id)
    if inputs:
        lines += ["", "## Input files", ""] + [
            f"- `{i.path}` sha256 `{(i.sha256 or '-')[:16]}` ({i.source})" for i in inputs
        ]
    return "\n".join(lines) + "\n"
