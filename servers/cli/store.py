"""``aisac store``: operations on the store as a whole. ``aisac store migrate --to URL`` copies the store's SQL
database into another database (typically PostgreSQL) with :func:`aisac_core.store.copy.copy_store`.

Only the SQL store is read (never the vector store, which the owner process may hold), so the command runs while the
store's owner process serves it; rows the owner writes after the copy began are not copied, so stop it first
(``aisac owner stop``) for an exact copy.
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
    from rich.progress import Progress, TaskID

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
    data_dir: _DataDir = None,
) -> None:
    """Copy the store's SQL database (every table, one transaction on the target) into the database at --to.

    The vectors stay where they are; only the SQL store is read.
    Afterwards point the store at the copy (same data dir, same search hits):

    export AISAC_SQL_URL='postgresql+psycopg://aisac:SECRET@localhost/aisac'

    Example: aisac store migrate --to 'postgresql+psycopg://aisac:SECRET@localhost/aisac'
    """
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
    source_url = settings.resolved_sql_url
    try:
        source = make_engine(source_url)
    except StoreError as exc:
        _fail(str(exc).replace(source_url, redact_url(source_url)))
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
    except StoreError as exc:
        stop_bar()
        _fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - never a traceback; copy_store redacts its own messages
        stop_bar()
        _fail(f"the copy failed: {type(exc).__name__}: {str(exc).replace(to, redact_url(to))}")
    finally:
        stop_bar()
        source.dispose()
    err.print(
        f"copied {res['rows']} rows in {res['seconds']:.1f} s from {res['source']} to {res['target']}",
        soft_wrap=True,
        markup=False,
    )
    t = Table(title="rows per table")
    t.add_column("table")
    t.add_column("rows", justify="right")
    for name, n in res["tables"].items():
        t.add_row(name, str(n))
    err.print(t)
    url = shlex.quote(res["target"])
    pw = "; put the password in place of ***" if "***" in res["target"] else ""
    vectors = settings.qdrant_url or settings.vectors_dir
    err.print(
        f"next: point this store at the copy (the vectors stay in {vectors}){pw}:\n"
        f"  export AISAC_SQL_URL={url}\n"
        f"or, kept in the store's settings file:\n"
        f"  aisac config set sql_url {url}"
        + (f" --data-dir {shlex.quote(str(settings.data_dir))}" if data_dir else ""),
        soft_wrap=True,
        markup=False,
    )
