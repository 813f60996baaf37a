"""``aisac store``: operations on the store as a whole. ``aisac store migrate --to URL`` copies the store's SQL
database into another database (typically PostgreSQL) with :func:`aisac_core.store.copy.copy_store`, and with
``--vectors sql`` (or a PostgreSQL URL) the vectors into the PostgreSQL vector backend with
:func:`aisac_core.store.vectorcopy.copy_vectors`.

Without ``--vectors`` only the SQL store is read (never the vector store, which the owner process may hold), so the
command runs while the store's owner process serves it; rows the owner writes after the copy began are not copied,
so stop it first (``aisac owner stop``) for an exact copy. With ``--vectors`` the owner must be stopped (the local
vector folder is locked by one process).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from aisac_core.owner import SUPPORTED, live_owner

from .owner import load_settings
from .safe import SafeConsole

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.progress import Progress, TaskID

    from aisac_core.settings import Settings
    from aisac_core.store.vectorcopy import VectorsCopied
    from aisac_core.store.vectors import VectorStore

store_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="The store as a whole: copy its SQL database to another database (migrate).",
)
err = SafeConsole(stderr=True)

_DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", help="store folder (default: $AISAC_DATA_DIR or the user data dir)", envvar="AISAC_DATA_DIR"
    ),
]


def _fail(msg: str) -> None:
    err.print(f"[red]error:[/red] {escape(msg)}", soft_wrap=True)
    raise typer.Exit(1)


@store_app.command("migrate")
def migrate(
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="SQLAlchemy URL of the target database, e.g. "
            "postgresql+psycopg://user:password@host:5432/aisac (created tables; must hold "
            "no store rows unless --replace)",
        ),
    ],
    replace: Annotated[
        bool,
        typer.Option("--replace", help="delete the target's store rows first (in the same transaction as the copy)"),
    ] = False,
    batch: Annotated[int, typer.Option("--batch", min=1, help="rows per batch")] = 1000,
    vectors: Annotated[
        str,
        typer.Option(
            "--vectors",
            help="keep: the vectors stay where they are; sql: copy them into the --to database (pgvector, "
            "AISAC_VECTOR_URL=sql); or a postgresql+psycopg:// URL to copy them there",
        ),
    ] = "keep",
    data_dir: _DataDir = None,
) -> None:
    """Copy the store's SQL database (every table, one transaction on the target) into the database at --to,
    and with --vectors the vectors too (copied as stored, not re-embedded: the same search hits).

    With --vectors keep (the default) the vectors stay where they are and only the SQL store is read.
    Afterwards point the store at the copy (same data dir, same search hits):

    export AISAC_SQL_URL='postgresql+psycopg://aisac:SECRET@localhost/aisac'
    export AISAC_VECTOR_URL=sql   # after --vectors sql: the vectors are in the same database

    Example: aisac store migrate --to 'postgresql+psycopg://aisac:SECRET@localhost/aisac' --vectors sql
    """
    # long function: the `aisac migrate` command: copy, verify and report in order
    # loaded by this command only: `aisac --help` and `aisac serve` start without SQLAlchemy
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from aisac_core.store.copy import copy_store
    from aisac_core.store.sql import StoreError, make_engine, redact_url

    settings = load_settings(data_dir)
    if SUPPORTED and (info := live_owner(settings.data_dir)) is not None:
        err.print(
            f"note: the store's owner process (pid {info.pid}) is running; rows it writes after the copy "
            "begins are not copied (`aisac owner stop` first for an exact copy)",
            soft_wrap=True,
            markup=False,
        )
    vec_url = None if vectors == "keep" else to if vectors.lower() == "sql" else vectors
    if vec_url is not None and not vec_url.startswith("postgresql"):
        _fail(f"--vectors {vectors!r}: give keep, sql (the --to database) or a postgresql+psycopg:// URL")
    vec_source = _open_source_vectors(settings) if vec_url is not None else None  # its folder lock: fail early
    from aisac_core.context import AppContext
    from aisac_core.store.identity import StoreIdentityError

    source_url = settings.resolved_sql_url
    try:
        source = make_engine(source_url)
    except StoreError as exc:
        if vec_source is not None:
            vec_source.close()
        _fail(str(exc).replace(source_url, redact_url(source_url)))
    try:  # the store's identity, checked against these settings by the composition root before any row is read
        AppContext(settings).check_store(source)
    except StoreIdentityError as exc:
        if vec_source is not None:
            vec_source.close()
        source.dispose()
        _fail(str(exc))
    bar: Progress | None = None
    tasks: dict[str, TaskID] = {}

    def stop_bar() -> None:
        nonlocal bar
        if bar is not None:
            bar.stop()
            bar = None

    def progress(table: str, done: int, total: int) -> None:
        nonlocal bar
        if bar is None:  # started on the first table: an error before it stays one line
            bar = Progress(
                TextColumn("[bold]copying[/bold] {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=not err.is_terminal,
            )
            bar.start()
        if table not in tasks:
            tasks[table] = bar.add_task(table, total=total)
        bar.update(tasks[table], completed=done)

    try:
        res = copy_store(source, to, batch=batch, replace=replace, progress=progress)
    except Exception as exc:  # noqa: BLE001 - never a traceback; copy_store redacts its own messages
        stop_bar()
        if vec_source is not None:
            vec_source.close()
        why = str(exc) if isinstance(exc, StoreError) else f"the copy failed: {type(exc).__name__}: {exc}"
        _fail(why.replace(to, redact_url(to)))
    finally:
        stop_bar()
        source.dispose()
    err.print(
        f"copied {res['rows']} rows in {res['seconds']:.1f} s from {res['source']} to {res['target']}",
        soft_wrap=True,
        markup=False,
    )
    moved = None
    if vec_source is not None and vec_url is not None:
        moved = _copy_vectors(vec_source, vec_url, replace, progress, stop_bar)
        err.print(
            f"copied {moved['points']} vectors in {moved['seconds']:.1f} s ("
            + ", ".join(f"{k} {v}" for k, v in moved["collections"].items())
            + f") to {redact_url(vec_url)}",
            soft_wrap=True,
            markup=False,
        )
    _move_identity(settings, to, vec_url if moved is not None else None)
    t = Table(title="rows per table")
    t.add_column("table")
    t.add_column("rows", justify="right")
    for name, n in res["tables"].items():
        t.add_row(name, str(n))
    err.print(t)
    url = shlex.quote(res["target"])
    pw = "; put the password in place of ***" if "***" in res["target"] else ""
    where = settings.resolved_vector_url or settings.qdrant_url or settings.vectors_dir
    dd = f" --data-dir {shlex.quote(str(settings.data_dir))}" if data_dir else ""
    if moved is None:
        vec_env, vec_cfg, note = "", "", f"the vectors stay in {where}"
    else:
        vurl = "sql" if vec_url == to else shlex.quote(redact_url(vec_url or ""))
        vec_env, vec_cfg = f"\n  export AISAC_VECTOR_URL={vurl}", f"\n  aisac config set vector_url {vurl}{dd}"
        note = "the vectors are copied too"
    err.print(
        f"next: point this store at the copy ({note}){pw}:\n"
        f"  export AISAC_SQL_URL={url}{vec_env}\n"
        f"or, kept in the store's settings file:\n"
        f"  aisac config set sql_url {url}{dd}{vec_cfg}",
        soft_wrap=True,
        markup=False,
    )


def _move_identity(settings: Settings, to: str, vec_url: str | None) -> None:
    """The copy's identity record (copied with the rows) names where its vectors are now: the --vectors target when
    they were copied (so the processes pointed at the copy are accepted, :mod:`aisac_core.store.identity`)."""
    import dataclasses

    from aisac_core.rag.identity import vector_location
    from aisac_core.store.identity import read_identity, write_identity
    from aisac_core.store.sql import make_engine

    if vec_url is None:
        return
    target = make_engine(to)
    try:
        ident = read_identity(target)
        if ident is not None:
            moved = settings.updated(sql_url=to, vector_url="sql" if vec_url == to else vec_url)
            write_identity(
                target,
                dataclasses.replace(ident, vector_backend=moved.vector_kind, vector_location=vector_location(moved)),
            )
    finally:
        target.dispose()


def _open_source_vectors(settings: Settings) -> VectorStore:
    """The store's vector store as configured (its folder lock taken: the owner process must be stopped)."""
    from aisac_core.store.pgvectors import open_pg_vectors
    from aisac_core.store.vectors import VectorStoreError, open_vector_store

    try:
        if settings.vector_kind == "postgres":
            return open_pg_vectors(settings)
        return open_vector_store(settings.vector_kind, root=settings.vectors_dir, settings=settings)
    except VectorStoreError as exc:
        _fail(f"{exc} (copying the vectors needs the store's vector store: `aisac owner stop` first)")
        raise  # unreachable: _fail exits


def _copy_vectors(
    source: VectorStore,
    url: str,
    replace: bool,
    progress: Callable[[str, int, int], None],
    stop_bar: Callable[[], None],
) -> VectorsCopied:
    """Copy the vectors into the PostgreSQL vector store at ``url``; a failure exits with what to do."""
    from aisac_core.store.pgvectors import PgVectorStore
    from aisac_core.store.sql import redact_url
    from aisac_core.store.vectorcopy import copy_vectors
    from aisac_core.store.vectors import VectorStoreError

    target = None
    try:
        target = PgVectorStore(url)
        return copy_vectors(source, target, replace=replace, progress=progress)
    except VectorStoreError as exc:
        stop_bar()
        _fail(
            f"the SQL store was copied, the vectors were not: {str(exc).replace(url, redact_url(url))}. Run the "
            "migration again with --replace, or point the store at the copy with AISAC_VECTOR_URL and run "
            "`aisac index --repair` (re-embeds the missing vectors)"
        )
        raise  # unreachable: _fail exits
    finally:
        stop_bar()
        source.close()
        if target is not None:
            target.close()
