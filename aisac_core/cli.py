"""The ``aisac`` command: index, search, serve, status.

Human output (tables, progress bars) goes to stderr except for the result a command exists to print
(``search`` hits, ``status``), which goes to stdout; ``aisac serve`` over stdio writes only JSON-RPC to
stdout.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="aisac: MCP servers for transparent, retrieval-grounded scientific assistance.")
err = Console(stderr=True)
out = Console()

DataDir = Annotated[Optional[Path], typer.Option("--data-dir", help="store folder (default: $AISAC_DATA_DIR "
                                                 "or the user data dir)", envvar="AISAC_DATA_DIR")]


def _core(data_dir: Path | None):  # noqa: ANN202
    from .config import Settings
    from .runtime import Core, set_core

    settings = Settings(data_dir=data_dir) if data_dir else Settings()
    core = Core(settings)
    set_core(core)
    return core


def _fail(msg: str, code: int = 1) -> None:
    err.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(code)


@app.command()
def index(
    paths: Annotated[list[Path], typer.Argument(help="files or folders to index")],
    catalog: Annotated[bool, typer.Option("--catalog", help="catalog only: list, do not embed")] = False,
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the run's counters and failures as JSON")] = False,
) -> None:
    """Index files and folders incrementally (unchanged files are skipped without being read)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .indexing import Counters, Indexer, IndexError_

    core = _core(data_dir)
    failures: list[dict[str, str]] = []
    counters = Counters()
    try:
        with Progress(TextColumn("[bold]indexing[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), console=err, transient=not err.is_terminal) as bar:
            task = bar.add_task("", total=None)

            def progress(done: int, total: int, name: str) -> None:
                bar.update(task, completed=done, total=total, description=name[:60])

            Indexer(core).run(paths, catalog_only=catalog, progress=progress, failures=failures, counters=counters)
    except IndexError_ as exc:
        _fail(str(exc))
    except Exception as exc:  # store errors carry their recovery step
        _fail(str(exc))
    finally:
        core.close()
    if as_json:
        print(json.dumps({"counters": counters.as_dict(), "failures": failures}, indent=1))
        return
    c = counters
    err.print(f"files: {c.files_seen} seen, {c.files_indexed} indexed, {c.files_skipped} unchanged, "
              f"{c.files_failed} failed, {c.files_pruned} removed, {c.files_catalogued} catalogued; "
              f"chunks: {c.chunks_embedded} embedded, {c.chunks_deleted} deleted; pages parsed: {c.pages_parsed}")
    for f in failures:
        err.print(f"[yellow]failed[/yellow] {f['path']}: {f['error']}")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="what to find")],
    k: Annotated[int, typer.Option("-k", help="number of hits (1-100)")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid, dense or sparse")] = "hybrid",
    filter_: Annotated[Optional[list[str]], typer.Option("--filter", help="key=value, e.g. path_glob=*.pdf, "
                                                          "page_from=2 (repeatable)")] = None,
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the raw result as JSON")] = False,
) -> None:
    """Search the index and print a table of hits with their anchors."""
    from .retrieval import SearchError
    from .retrieval import search as core_search

    filters: dict[str, object] = {}
    for f in filter_ or []:
        if "=" not in f:
            _fail(f"--filter takes key=value, got {f!r}")
        key, val = f.split("=", 1)
        filters[key] = int(val) if key in ("page_from", "page_to") and val.isdigit() else val
    core = _core(data_dir)
    try:
        res = core_search(core, query, k, filters or None, mode)
    except SearchError as exc:
        _fail(str(exc))
    except Exception as exc:
        _fail(str(exc))
    finally:
        core.close()
    if as_json:
        print(json.dumps(res.as_dict(), indent=1, ensure_ascii=False))
        return
    if not res.hits:
        out.print(res.message or "no hits")
        return
    t = Table(title=f"{len(res.hits)} hits for {query!r} ({res.mode}, {res.took_ms:.0f} ms)", show_lines=True)
    for col in ("#", "score", "document", "page", "section", "text"):
        t.add_column(col, overflow="fold")
    for i, h in enumerate(res.hits, 1):
        p = h.payload
        text = " ".join((p.get("text") or "").split())
        t.add_row(str(i), f"{h.score:.4f}", f"{Path(p.get('path', '')).name}\n{p.get('doc_id')}",
                  str(p.get("page") or "-"), p.get("section") or "-", text[:300] + ("…" if len(text) > 300 else ""))
    out.print(t)


@app.command()
def serve(
    server: Annotated[Optional[str], typer.Argument(help="one server (rag, memory); default: the whole suite")] = None,
    transport: Annotated[str, typer.Option(help="stdio (default) or http (streamable HTTP)")] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP bind address (loopback only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port")] = 8765,
    data_dir: DataDir = None,
) -> None:
    """Run the MCP suite (or one server) over stdio or streamable HTTP."""
    import logging

    logging.basicConfig(level=os.environ.get("AISAC_LOG_LEVEL", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if transport not in ("stdio", "http"):
        _fail(f"--transport must be stdio or http, got {transport!r}")
    if transport == "http" and host not in ("127.0.0.1", "localhost", "::1"):
        _fail("binding a non-loopback address needs bearer-token authentication, which this version does not "
              "offer yet; keep --host 127.0.0.1")
    _core(data_dir)
    from servers.suite import build

    try:
        mcp = build([server] if server else None)
    except ValueError as exc:
        _fail(str(exc))
    if transport == "stdio":
        mcp.run(transport="stdio", show_banner=False)
    else:
        mcp.run(transport="http", host=host, port=port, show_banner=False)


@app.command()
def status(data_dir: DataDir = None,
           as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False) -> None:
    """Documents, chunks, jobs, and where the store lives (and its size)."""
    from .runtime import store_status

    core = _core(data_dir)
    try:
        st = store_status(core)
    except Exception as exc:
        _fail(str(exc))
    finally:
        core.close()
    if as_json:
        print(json.dumps(st, indent=1))
        return
    t = Table(title="aisac store", show_header=False)
    t.add_column("what")
    t.add_column("value", overflow="fold")
    for key, val in st.items():
        if key != "recent_jobs":
            t.add_row(key, json.dumps(val) if isinstance(val, (dict, list)) else str(val))
    out.print(t)
    for j in st["recent_jobs"]:
        out.print(f"job {j['job_id']}: {j['status']} {j['done']}/{j['total']} ({j['finished_at'] or 'running'})")


def main() -> None:  # pragma: no cover
    """Entry point for ``python -m aisac_core.cli``."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
