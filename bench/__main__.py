"""Command line of the benchmarks: ``python -m bench [--only quality,indexing,latency,startup,memory,tools] ...``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from . import PARTS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line (see ``python -m bench --help``)."""
    ap = argparse.ArgumentParser(
        prog="python -m bench", description="aisac benchmarks: tables on stdout, JSON in bench/results/."
    )
    ap.add_argument(
        "--only",
        action="append",
        metavar="PART[,PART]",
        help=f"run only these parts ({', '.join(PARTS)}); repeatable or comma-separated",
    )
    ap.add_argument(
        "--data", type=Path, default=None, help="shared data folder (default: ../shared/data from the repository root)"
    )
    ap.add_argument("--results", type=Path, default=None, help="folder for the JSON results (default: bench/results)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary stores (paths printed on stderr)")
    ap.add_argument("--study", action="store_true", help="quality: add the fusion study of docs/retrieval.md")
    ap.add_argument("--queries", type=int, default=0, help="latency, memory: number of queries (default: all 225)")
    ap.add_argument("--min-chunks", type=int, default=10_240, help="latency: chunks in the store (default 10240)")
    ap.add_argument("--runs", type=int, default=5, help="startup, owner: number of spawns per start case (default 5)")
    ap.add_argument("--claims", type=Path, default=None, help="support: a claims file in the SciFact format")
    ap.add_argument("--corpus", type=Path, default=None, help="support: the corpus of --claims (SciFact format)")
    ap.add_argument(
        "--llm",
        default="none",
        choices=("none", "openai"),
        help="support: judge with the configured OpenAI-compatible model instead of the learned judge",
    )
    ap.add_argument(
        "--pairs",
        type=Path,
        default=None,
        help="headers: a folder of GROBID header pairs (raw/ + tei/, or pairs.tsv) to evaluate on "
        "(default: the held-out split of shared/data/pdf_headers/grobid)",
    )
    ap.add_argument(
        "--peer-python",
        type=Path,
        default=None,
        help="cost: the python of a virtualenv with mcp-server-qdrant installed (else AISAC_BENCH_PEER_PYTHON)",
    )
    args = ap.parse_args(argv)
    if (args.claims is None) != (args.corpus is None):
        ap.error("--claims and --corpus go together")
    for f in (args.claims, args.corpus):
        if f is not None and not f.is_file():
            ap.error(f"no such file: {f}")
    parts: list[str] = []
    for item in args.only or []:
        for p in item.split(","):
            p = p.strip()
            if p and p not in PARTS:
                ap.error(f"unknown part {p!r}; choose from {', '.join(PARTS)}")
            if p and p not in parts:
                parts.append(p)
    args.parts = parts or list(PARTS)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the selected parts in order; returns the exit status (1 when a part raised an error)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # fastembed would retry a model hub for ~36 s otherwise
    args = parse_args(argv)
    from .common import (
        DEFAULT_DATA_DIR,
        RESULTS_DIR,
        Context,
        Skip,
        console,
        machine_info,
        skip_line,
        table,
        target_cell,
        write_result,
    )

    ctx = Context(
        data_dir=(args.data or DEFAULT_DATA_DIR).resolve(),
        results_dir=args.results or RESULTS_DIR,
        keep=args.keep,
        study=args.study,
        options={
            "queries": args.queries,
            "min_chunks": args.min_chunks,
            "runs": args.runs,
            "claims": args.claims,
            "corpus": args.corpus,
            "llm": args.llm,
            "pairs": args.pairs,
            "peer_python": args.peer_python,
        },
    )
    m = machine_info()
    console.print(
        f"[bold]aisac benchmarks[/bold]: {', '.join(args.parts)} | data {ctx.data_dir} | "
        f"{m['cpus']} CPUs, load {m['loadavg_1_5_15']} | commit {m['git_commit']}"
        f"{' + local changes' if m['aisac_core_modified'] else ''}"
    )
    if not ctx.data_dir.is_dir():
        console.print(f"[yellow]note[/yellow]: data folder {ctx.data_dir} is absent; data-bound parts will skip")
    t0 = time.perf_counter()
    status = 0
    summary: dict[str, Any] = {}
    for part in args.parts:
        mod = importlib.import_module(f"bench.{part}")
        console.rule(part)
        try:
            result = mod.run(ctx)
        except Skip as exc:
            skip_line(part, str(exc))
            result = {"status": "skipped", "reason": str(exc)}
        except Exception as exc:
            traceback.print_exc()
            console.print(f"[red]ERROR[/red] {part}: {type(exc).__name__}: {exc}")
            result = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
            status = 1
        path = write_result(ctx, part, result)
        summary[part] = {
            "status": result["status"],
            "summary": result.get("summary"),
            "reason": result.get("reason"),
            "seconds": result.get("seconds"),
            "json": str(path),
        }
    total = time.perf_counter() - t0
    rows = []
    for part, s in summary.items():
        if s["status"] != "ok":
            rows.append((part, s["status"], s.get("reason") or "", None, "-"))
            continue
        for r in s["summary"] or []:
            rows.append((part, r["metric"], r["value"], r.get("target"), target_cell(r.get("met"))))
    console.rule("summary")
    table(
        f"aisac benchmark summary ({total / 60:.1f} min)",
        ["part", "measure", "value", "target", "status"],
        rows,
        caption=f"JSON: {ctx.results_dir}/<part>.json and summary.json",
        left=2,
    )
    write_result(ctx, "summary", {"parts": summary, "total_seconds": round(total, 1)})
    return status


if __name__ == "__main__":
    sys.exit(main())
