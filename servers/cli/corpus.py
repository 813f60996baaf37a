"""``aisac index``, ``aisac search`` and ``aisac verify``: the corpus commands (through the store's owner while one
runs). ``search`` and ``verify`` open the store read-only: they create, migrate and mark nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from aisac_core.evidence.anchor import ocr_note
from aisac_core.settings import host_settings

from .common import DataDir, NoOwner, _core, _fail, _owner, _settings, err, out
from .owner import index_via_owner, search_via_owner, verify_via_owner
from .safe import safe_print


def index(
    paths: Annotated[list[Path] | None, typer.Argument(help="files or folders to index")] = None,
    catalog: Annotated[bool, typer.Option("--catalog", help="catalog only: list, do not embed")] = False,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="compare the manifest with the vector store by chunk id: delete orphan vectors and re-embed "
            "exactly the documents whose vectors are missing (then PATHS, if any, as usual)",
        ),
    ] = False,
    adopt_settings: Annotated[
        bool,
        typer.Option(
            "--adopt-settings",
            help="record this process's embedding model, chunker and parser settings as the store's, where they "
            "differ (a shared store refuses them otherwise); every document is then re-embedded. Stop the other "
            "processes on the store first, and start them with the same settings",
        ),
    ] = False,
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the run's counters and failures as JSON")] = False,
    no_owner: NoOwner = False,
) -> None:
    """Index files and folders incrementally (unchanged files are skipped without being read). While the store's
    owner process runs, the owner indexes them (rag_index) and its progress is shown here: a bar on a terminal, plain
    lines on stderr otherwise. Exits 1 when any file failed (each is named), 130 on Ctrl-C after one line saying what
    was kept."""
    # long function: the `aisac index` command: its options, the owner or in-process path, progress and the report
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from aisac_core.rag.indexer import Counters
    from aisac_core.rag.planning import IndexingError

    if not paths and not repair:
        _fail("give files or folders to index (or --repair alone to repair the vector store)", 2)
    settings = _settings(data_dir)
    info = _owner(settings, no_owner)
    if adopt_settings and info is not None:
        _fail(
            f"the store's owner process (pid {info.pid}) holds the store: stop it (aisac owner stop) and run "
            "aisac index --adopt-settings again"
        )
    if repair and info is not None:
        _fail(
            f"the store's owner process (pid {info.pid}) holds the vector store: stop it (aisac owner stop) and run "
            "aisac index --repair again"
        )
    failures: list[dict[str, str]] = []
    counters = Counters()
    repaired: dict[str, Any] | None = None
    core = _core(settings, adopt_settings=adopt_settings) if info is None else None
    try:
        with Progress(
            TextColumn("[bold]indexing[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=err,
            transient=not err.is_terminal,
            disable=not err.is_terminal,  # no terminal: plain lines instead (below)
        ) as bar:
            task = bar.add_task("", total=None)
            plain = PlainProgress() if not err.is_terminal else None

            def progress(done: float, total: float | None, name: str | None) -> None:
                bar.update(task, completed=done, total=total, description=(name or "")[:60])
                if plain is not None:
                    plain(done, total, name)

            if core is not None:
                if repair:
                    repaired = core.rag.repair_vectors(counters, failures)
                if paths:
                    core.rag.indexer.run(
                        paths, catalog_only=catalog, progress=progress, failures=failures, counters=counters
                    )
            else:
                assert info is not None
                got = index_via_owner(info, paths or [], catalog, progress, host_settings(settings))
                counters = Counters(**{k: v for k, v in got["counters"].items() if k in Counters.__dataclass_fields__})
                failures = got["failures"]
    except IndexingError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        c = counters
        where = (
            "the store's owner goes on with its job (aisac status shows it)"
            if info is not None
            else ("each file is whole in the store or absent")
        )
        err.print(
            f"interrupted: {c.files_indexed} files indexed and {c.files_skipped} unchanged are kept ({where}); run the "
            "same command again to index the rest",
            soft_wrap=True,
            markup=False,
        )
        raise typer.Exit(130) from None
    except Exception as exc:  # store errors carry their recovery step; the owner's errors its message
        _fail(str(exc))
    finally:
        if core is not None:
            core.close()
    if as_json:
        out_json: dict[str, Any] = {"counters": counters.as_dict(), "failures": failures}
        if repaired is not None:
            out_json["repair"] = repaired
        safe_print(json.dumps(out_json, indent=1))
        if failures:
            raise typer.Exit(1)
        return
    if repaired is not None:
        err.print(
            f"repair: {repaired['orphans_deleted']} orphan vectors deleted, {repaired['documents_reembedded']} "
            f"documents re-embedded ({repaired['missing_before']} missing vectors); now "
            f"{repaired['missing_after']} missing, {repaired['orphan_after']} orphan"
        )
    c = counters
    err.print(
        f"files: {c.files_seen} seen, {c.files_indexed} indexed, {c.files_skipped} unchanged, "
        f"{c.files_failed} failed, {c.files_pruned} removed, {c.files_catalogued} catalogued; "
        f"chunks: {c.chunks_embedded} embedded, {c.chunks_deleted} deleted; pages parsed: {c.pages_parsed}"
    )
    for f in failures:
        err.print(f"[yellow]failed[/yellow] {f['path']}: {f['error']}")
    # nothing could be indexed: say what was there and why it was skipped
    if c.files_seen == 0 and not failures and repaired is None:
        _fail(_nothing_indexed(paths or []), code=2)
    if failures:  # a script must see that some files are not searchable
        raise typer.Exit(1)


class PlainProgress:
    """Progress as plain lines on stderr when it is not a terminal (a log, CI, ``make demo | tee``): one line per
    file done (``indexing: 3/9 files, <name>``), at most one every :attr:`every` seconds, and the last one."""

    every = 2.0

    def __init__(self) -> None:
        self._last = -1.0
        self._done = -1.0

    def __call__(self, done: float, total: float | None, name: str | None) -> None:
        now = time.monotonic()
        last = total is not None and done >= total
        if done == self._done or (now - self._last < self.every and not last):
            return
        self._last, self._done = now, done
        of = f"/{total:.0f}" if total else ""
        err.print(f"indexing: {done:.0f}{of} files{', ' + name if name else ''}", soft_wrap=True, markup=False)


def _nothing_indexed(paths: list[Path]) -> str:
    """Why an index run saw no file: the given folders are empty, or hold only files of unsupported types (named
    with their counts, up to 10,000 files looked at), and the supported types."""
    from collections import Counter

    from aisac_core.rag.formats import FILE_FORMATS

    found: Counter[str] = Counter()
    looked = 0
    for p in paths:
        for f in [p] if p.is_file() else (x for x in p.rglob("*") if x.is_file()) if p.is_dir() else []:
            found[f.suffix.lower() or "(no extension)"] += 1
            looked += 1
            if looked >= 10_000:
                break
    supported = ", ".join(sorted(FILE_FORMATS))
    if not found:
        where = ", ".join(str(p) for p in paths)
        return f"nothing to index: {where} holds no files; supported types: {supported}"
    kinds = ", ".join(f"{n} {ext}" for ext, n in found.most_common(8))
    return f"nothing indexed: {looked} file(s) skipped as unsupported ({kinds}); supported types: {supported}"


def search(
    query: Annotated[str, typer.Argument(help="what to find")],
    k: Annotated[int, typer.Option("-k", help="number of hits (1-100)")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid, dense or sparse")] = "hybrid",
    filter_: Annotated[
        list[str] | None, typer.Option("--filter", help="key=value, e.g. path_glob=*.pdf, page_from=2 (repeatable)")
    ] = None,
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the raw result as JSON")] = False,
    no_owner: NoOwner = False,
) -> None:
    """Search the index and print a table of hits with their anchors (through the store's owner process while it
    runs)."""
    filters: dict[str, object] = {}
    for f in filter_ or []:
        if "=" not in f:
            _fail(f"--filter takes key=value, got {f!r}")
        key, val = f.split("=", 1)
        filters[key] = int(val) if key in ("page_from", "page_to") and val.isdigit() else val
    settings = _settings(data_dir)
    info = _owner(settings, no_owner)
    core = _core(settings, read_only=True) if info is None else None
    res: Mapping[str, Any]
    try:
        if core is not None:
            res = core.rag.search(query, k, filters or None, mode).as_dict()
        else:
            assert info is not None  # no core exactly when the owner runs
            res = search_via_owner(info, query, k, filters or None, mode)
    except Exception as exc:  # noqa: BLE001 - a search error (or the owner's tool error) is one line for the user
        _fail(str(exc))
    finally:
        if core is not None:
            core.close()
    if as_json:
        safe_print(json.dumps(res, indent=1, ensure_ascii=False))
        return
    hits = res["hits"]
    if not hits:
        out.print(res.get("message") or "no hits")
        return
    t = Table(title=f"{len(hits)} hits for {query!r} ({res['mode']}, {res['took_ms']:.0f} ms)", show_lines=True)
    for col in ("#", "score", "document", "page", "section", "text"):
        t.add_column(col, overflow="fold")
    for i, h in enumerate(hits, 1):
        text = " ".join((h.get("text") or "").split())
        t.add_row(
            str(i),
            f"{h['score']:.4f}",
            f"{Path(h.get('path') or '').name}\n{h.get('doc_id')}",
            str(h.get("page") or "-") + (f"\n{note}" if (note := ocr_note(h)) else ""),
            h.get("section") or "-",
            text[:300] + ("…" if len(text) > 300 else ""),
        )
    out.print(t)


def verify(
    anchor: Annotated[
        str,
        typer.Argument(
            help="an evidence anchor as JSON (a search hit's 'anchor', optionally with the hit's 'text'), a chunk id, "
            "or - to read it from stdin"
        ),
    ],
    data_dir: DataDir = None,
    no_owner: NoOwner = False,
) -> None:
    """Check that cited evidence still holds: re-hash the file and the chunk text of an anchor and print the result as
    JSON (status ok, file_changed, chunk_changed or missing; exit code 0 for ok and file_changed, else 3). Read-only;
    with registered roots, a file outside them is refused."""
    raw = typer.get_text_stream("stdin").read() if anchor == "-" else anchor
    given: str | dict[str, Any] = raw.strip()
    if raw.lstrip().startswith("{"):
        try:
            given = json.loads(raw)
        except ValueError as exc:
            _fail(f"the anchor is not valid JSON ({exc}); give a search hit's anchor object or its chunk_id", 2)
    settings = _settings(data_dir)
    info = _owner(settings, no_owner)
    core = _core(settings, read_only=True) if info is None else None
    try:
        if core is not None:
            got: dict[str, Any] = dict(core.rag.verify_anchor(given))
        else:
            assert info is not None  # no core exactly when the owner runs
            got = verify_via_owner(info, given)
    except Exception as exc:  # noqa: BLE001 - an anchor or store error is one line for the user
        _fail(str(exc))
    finally:
        if core is not None:
            core.close()
    safe_print(json.dumps(got, indent=1, ensure_ascii=False))
    if got.get("status") not in ("ok", "file_changed"):
        raise typer.Exit(3)
