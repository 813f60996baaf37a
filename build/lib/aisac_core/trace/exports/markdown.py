"""The Markdown export of a run: a human summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.trace.exports.bundle import export_bundle
from aisac_core.trace.queries import ERROR_STATUSES, build_tree

if TYPE_CHECKING:
    from aisac_core.context import AppContext

#: configuration pins shown in the summary, in order.
SHOWN_PINS = ("embedding_model_id", "sparse_model", "index_fingerprint", "parser_revision", "pdf_pipeline",
              "chunk_max_tokens", "retrieval")


def _md_escape(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def export_markdown(app: "AppContext", run_id: str) -> str:
    """A human summary of a run in Markdown: times, counts, pins, errors, the steps as a nested list, the cited
    evidence and the input files. Raises TraceError for an unknown run."""
    b = export_bundle(app, run_id)
    run = b["run"]
    lines = [f"# aisac run `{run_id}`", "",
             f"- started: {run['started_at']}", f"- last event: {run['last_event_at']} ({run['duration_s']} s)",
             f"- events: {run['events']} ({', '.join(f'{k}: {v}' for k, v in run['by_kind'].items())})",
             f"- status: {', '.join(f'{k}: {v}' for k, v in run['by_status'].items())}",
             f"- servers: {', '.join(run['servers'])}", ""]
    pins = b["pins"] or {}
    if pins:
        lines += ["## Configuration", "", "| pin | value |", "|---|---|"]
        for k in SHOWN_PINS:
            if k in pins:
                val = json.dumps(pins[k]) if isinstance(pins[k], dict) else pins[k]
                lines.append(f"| {k} | `{_md_escape(val)}` |")
        lines.append("")
    errs = [e for e in b["events"] if e["status"] in ERROR_STATUSES]
    if errs:
        lines += ["## Errors", ""] + [f"- event {e['id']} `{e['tool']}` ({e['status']}): {e['error']}" for e in errs]
        lines.append("")
    lines += ["## Steps", ""]

    def emit(nodes: list[dict[str, Any]], depth: int) -> None:
        for e in nodes:
            args = json.dumps(e["arguments"], ensure_ascii=False) if not isinstance(e["arguments"], str) else ""
            args = args if len(args) <= 200 else args[:199] + "…"
            lines.append(f"{'  ' * depth}- **{e['tool']}** ({e['kind']}, {e['status']}, {e['latency_ms']:.1f} ms) "
                         f"`{args}` → {e['result_summary'] or e['error'] or ''} (event {e['id']}, result sha256 "
                         f"`{(e['result_sha256'] or '-')[:12]}`)")
            emit(e["children"], depth + 1)

    emit(build_tree(b["events"]), 0)
    if b["anchors"]:
        lines += ["", "## Evidence", "", "| # | source | page | section | score | chunk sha256 |",
                  "|---|---|---|---|---|---|"]
        for i, a in enumerate(b["anchors"], 1):
            lines.append(f"| {i} | {_md_escape(Path(a.get('path') or '?').name)} | {a.get('page') or '-'} | "
                         f"{_md_escape(a.get('section') or '-')} | "
                         f"{a.get('score') if a.get('score') is not None else '-'} "
                         f"| `{(a.get('chunk_sha256') or '')[:12]}` |")
    if b["inputs"]:
        lines += ["", "## Input files", ""] + [f"- `{i['path']}` sha256 `{(i['sha256'] or '-')[:16]}` ({i['source']})"
                                               for i in b["inputs"]]
    return "\n".join(lines) + "\n"
