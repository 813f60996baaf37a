"""What every benchmark part shares: paths, isolated stores, timing statistics, tables and JSON results.

Isolation: every part works in its own temporary folder (removed afterwards unless ``--keep``) and builds
its :class:`~aisac_core.settings.Settings` with an explicit ``data_dir`` and with every store location that
the environment could redirect (``sql_url``, ``qdrant_url``, roots) reset, so a benchmark never reads or
writes the user's store. Subprocesses (``aisac serve``) get the same treatment through their environment:
all ``AISAC_*`` variables are dropped, then ``AISAC_DATA_DIR`` and ``HF_HUB_OFFLINE=1`` are set.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Shared benchmark data: ``../shared/data`` relative to the repository root.
DEFAULT_DATA_DIR = (REPO_ROOT.parent / "shared" / "data").resolve()
RESULTS_DIR = REPO_ROOT / "bench" / "results"
#: The ``aisac`` console script of the virtualenv the benchmark runs in.
AISAC_BIN = Path(sys.executable).parent / "aisac"

#: tables keep their width when stdout is a pipe or a file (rich would fall back to 80 columns)
console = Console(highlight=False, width=None if sys.stdout.isatty() else 132)
err = Console(stderr=True, highlight=False)


@dataclass
class Context:
    """Options shared by all parts: data folder, results folder, whether to keep temp folders, extras."""

    data_dir: Path = DEFAULT_DATA_DIR
    results_dir: Path = RESULTS_DIR
    keep: bool = False
    study: bool = False
    options: dict[str, Any] = field(default_factory=dict)


class Skip(Exception):
    """A part cannot run (its data is absent); the message says what is missing."""


def skip_line(part: str, reason: str) -> None:
    """Print the one-line notice of a skipped part."""
    console.print(f"[yellow]SKIP[/yellow] {part}: {reason}")


@contextmanager
def temp_dir(ctx: Context, name: str) -> Iterator[Path]:
    """A fresh temporary folder for one part, removed on exit unless ``ctx.keep``."""
    path = Path(tempfile.mkdtemp(prefix=f"aisac-bench-{name}-"))
    try:
        yield path
    finally:
        if ctx.keep:
            err.print(f"kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def isolated_settings(data_dir: Path) -> Any:
    """Settings of a private store in ``data_dir``; environment overrides of store locations are ignored."""
    from aisac_core.settings import Settings

    return Settings(
        data_dir=data_dir,
        sql_url=None,
        qdrant_url=None,
        qdrant_api_key=None,
        roots=[],
        catalog_roots=[],
        vector_backend="edge",
    )


def make_core(data_dir: Path) -> Any:
    """A :class:`~aisac_core.context.AppContext` on a private store in ``data_dir``."""
    from aisac_core.context import AppContext

    return AppContext(isolated_settings(data_dir))


def example_notes(dest: Path) -> Path:
    """The demo corpus (the repository's ``examples/*.md``) copied into ``dest``/notes; returns that folder."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    notes = dest / "notes"
    notes.mkdir()
    for p in examples.glob("*.md"):
        (notes / p.name).write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
    return notes


def server_env(data_dir: Path) -> dict[str, str]:
    """Environment of an ``aisac serve`` subprocess on the private store ``data_dir`` (offline)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1")
    return env


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) with linear interpolation between order statistics (numpy's default)."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), p)) if len(values) else float("nan")


def latency_summary(ms: Sequence[float]) -> dict[str, float]:
    """n, p50, p95, p99, mean, min and max of latencies in milliseconds (rounded to 0.01 ms)."""
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "mean_ms": round(sum(ms) / len(ms), 2),
        "min_ms": round(min(ms), 2),
        "max_ms": round(max(ms), 2),
    }


def cpu_seconds() -> float:
    """CPU seconds used so far by this process (all its threads) and its waited-for children, user +
    system (``resource.getrusage``): the measure of work on a machine whose cores are shared."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class Timer:
    """``with Timer() as t: ...`` then ``t.seconds``: wall-clock time of the block (perf_counter)."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], caption: str | None = None, left: int = 1
) -> None:
    """Print a table; the first ``left`` columns are left-aligned, the others (figures) right-aligned."""
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i < left else "right", overflow="fold")
    for r in rows:
        t.add_row(*[fmt(v) for v in r])
    console.print(t)


def fmt(v: Any) -> str:
    """A cell: floats with 3 significant decimals (4 below 1), None as '-', the rest as str."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 1 else f"{v:,.2f}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def target_cell(ok: bool | None) -> str:
    """'met' / 'NOT met' / '-' for a target check."""
    return "-" if ok is None else ("[green]met[/green]" if ok else "[red]NOT met[/red]")


def machine_info() -> dict[str, Any]:
    """Where the figures were measured: host, CPUs, load average at the time, Python, git commit."""
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5
            ).stdout.strip()
            or None
        )
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--", "aisac_core", "servers"],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
        )
    except Exception:
        commit, dirty = None, None
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_1_5_15": load,
        "git_commit": commit,
        "aisac_core_modified": dirty,
        "time_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def write_result(ctx: Context, part: str, result: dict[str, Any]) -> Path:
    """Write ``result`` (plus machine info) to ``<results>/<part>.json`` and return the path."""
    ctx.results_dir.mkdir(parents=True, exist_ok=True)
    path = ctx.results_dir / f"{part}.json"
    payload = {"part": part, "machine": machine_info(), **result}
    path.write_text(json.dumps(payload, indent=1, ensure_ascii=False, default=str) + "\n")
    return path


#: the two messages a host opens an MCP stdio session with (MCP 2025-11-25, lifecycle: initialize, then the
#: initialized notification), as raw JSON-RPC for benchmarks that time a server from its first byte
HANDSHAKE_OPEN: tuple[dict[str, Any], ...] = (
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "aisac-bench", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
)
