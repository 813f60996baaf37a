"""Sheets: load time per shared workbook and peak memory, and the two bombs of issue 29 (each in its own process).

- per workbook of ../shared/data (tabular/tidyxl, formats/xlsx): wall time (the largest against 2 s, the
  table-structure classifier of :mod:`aisac_core.data.structure` included) of
  :func:`aisac_core.data.loaders.load_excel` over every sheet (open, sparse read, detection, frames) and the peak
  RSS of a fresh process doing it (``ru_maxrss``; the process's RSS after importing pandas and openpyxl is given too,
  so the load's own share is the difference);
- the extent bomb (a 4 KB workbook with a table at A1:C4 and one cell at ALL20000) and the merge bomb (a title
  merged over A2:CV20000): each must load or be refused within 2 s and 200 MB peak RSS (targets of issue 29).

``python -m bench --only sheets``. ``AISAC_BENCH_SHEETS_CODE=<folder>`` measures the code under that folder
(an export of an older commit) instead, for before/after figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import Context, table, target_cell, temp_dir

TARGET_S = 2.0
TARGET_MB = 200.0
_CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
import pandas, openpyxl
from aisac_core.data.loaders import load_excel
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
try:
    out = load_excel(__import__("pathlib").Path(sys.argv[1]), None, None)
    res = {"sheets": len(out), "loaded": sum(x[1] is not None for x in out),
           "errors": [n for x in out if x[1] is None for n in x[3] if "not loaded" in n][:3]}
except Exception as exc:
    res = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
res["s"] = time.perf_counter() - t
res["base_mb"] = base
res["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(res))
"""


def measure(path: Path, code: Path | None = None, timeout: float = 300.0) -> dict[str, Any]:
    """Load ``path`` in a fresh process (the code of ``code``, default this checkout's): seconds, peak and base RSS MB,
    sheets read and loaded, errors."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    else:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    try:
        p = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path.resolve())],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            cwd=tempfile.gettempdir(),  # not the checkout: ``-c`` puts the working folder first on sys.path
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:g} s", "s": timeout}
    if p.returncode:
        return {"error": f"exit {p.returncode}: {p.stderr.strip()[-200:]}"}
    result: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def run(ctx: Context) -> dict[str, Any]:
    """The sheets part; returns the JSON-ready result (shared workbooks skipped when absent)."""
    # the tests folder by path: an installed package may own the name "tests" (optimade 1.5 ships one)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from sheet_patterns import write_extent_bomb, write_merge_bomb

    t0 = time.perf_counter()
    code = Path(os.environ["AISAC_BENCH_SHEETS_CODE"]) if os.environ.get("AISAC_BENCH_SHEETS_CODE") else None
    books = sorted([*ctx.data_dir.glob("tabular/tidyxl/*.xlsx"), *ctx.data_dir.glob("formats/xlsx/*.xlsx")])
    rows: list[tuple[Any, ...]] = []
    per: dict[str, Any] = {}
    for path in books:
        m = measure(path, code)
        per[path.name] = m
        rows.append(
            (
                f"{path.name} ({path.stat().st_size / 1024:.0f} KB)",
                f"{m.get('loaded', '?')}/{m.get('sheets', '?')}",
                f"{m['s'] * 1000:.0f}" if "s" in m else "-",
                f"{m.get('peak_mb', 0):.0f} ({m.get('base_mb', 0):.0f})",
                m.get("error", ""),
                None,
            )
        )
    bombs: dict[str, Any] = {}
    with temp_dir(ctx, "sheets") as tmp:
        for name, write in (("extent bomb ALL20000", write_extent_bomb), ("merge bomb A2:CV20000", write_merge_bomb)):
            path = write(tmp / f"{name.split()[0]}.xlsx")
            m = measure(path, code, timeout=120)
            ok = "error" not in m and m["s"] <= TARGET_S and m["peak_mb"] <= TARGET_MB
            bombs[name] = {**m, "bytes": path.stat().st_size, "met": ok}
            rows.append(
                (
                    f"{name} ({path.stat().st_size / 1024:.1f} KB)",
                    f"{m.get('loaded', '?')}/{m.get('sheets', '?')}",
                    f"{m['s'] * 1000:.0f}" if "s" in m else "-",
                    f"{m.get('peak_mb', 0):.0f} ({m.get('base_mb', 0):.0f})",
                    "; ".join(m.get("errors", []))[:90] or m.get("error", ""),
                    target_cell(ok),
                )
            )
    table(
        "sheets: load_excel per workbook, fresh process each",
        [
            "workbook",
            "loaded/sheets",
            "ms",
            "peak RSS MB (after imports)",
            "errors",
            f"<= {TARGET_S:g} s, {TARGET_MB:g} MB",
        ],
        rows,
    )
    largest = max(books, key=lambda p: p.stat().st_size) if books else None
    summary = [
        {"metric": f"{k} s / peak MB", "value": f"{v['s']:.2f} / {v.get('peak_mb', 0):.0f}", "met": v["met"]}
        for k, v in bombs.items()
    ]
    if largest is not None:  # the largest shared workbook against 2 s, the table-structure classifier included
        m = per[largest.name]
        summary.insert(
            0,
            {
                "metric": f"largest shared workbook ({largest.name}) s / peak MB",
                "value": f"{m.get('s', float('nan')):.2f} / {m.get('peak_mb', 0):.0f}",
                "target": f"<= {TARGET_S:g} s",
                "met": "error" not in m and m.get("s", 1e9) <= TARGET_S,
            },
        )
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "code": str(code) if code else "this checkout",
        "summary": summary,
        "workbooks": per,
        "largest": largest.name if largest else None,
        "bombs": bombs,
        "targets": {"bomb_s": TARGET_S, "bomb_peak_mb": TARGET_MB},
    }
