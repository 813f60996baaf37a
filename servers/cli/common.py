"""What the ``aisac`` commands share: the two consoles (results to stdout, everything else to stderr, control
characters escaped), the ``--data-dir`` / ``--no-owner`` options, settings, the running owner and one-line errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.markup import escape

from aisac_core.context import AppContext
from aisac_core.owner import OwnerInfo
from aisac_core.settings import Settings

from .owner import OwnerCallError, cli_owner, load_settings
from .safe import SafeConsole


def output_width() -> int | None:
    """The width the consoles wrap at: ``COLUMNS`` when set (a number), else the size of the terminal any of stdin,
    stdout or stderr is on (``aisac search x | less`` still has one), else None (rich's own default, 80, for output
    with no terminal at all)."""
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    for fd in (1, 2, 0):
        try:
            return os.get_terminal_size(fd).columns
        except OSError:  # not a terminal
            continue
    return None


err = SafeConsole(stderr=True, width=output_width())
out = SafeConsole(width=output_width())


DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", help="store folder (default: $AISAC_DATA_DIR or the user data dir)", envvar="AISAC_DATA_DIR"
    ),
]
NoOwner = Annotated[
    bool,
    typer.Option(
        "--no-owner",
        help="open the store in this process even while its owner "
        "process runs (which then holds it: the command fails)",
    ),
]


def _settings(data_dir: Path | None) -> Settings:
    """The command's settings; an invalid one prints one line per value and exits with code 2."""
    return load_settings(data_dir)


def _owner(settings: Settings, no_owner: bool) -> OwnerInfo | None:
    """The running owner to send the command to (None: open the store here); warns on other settings."""
    try:
        return cli_owner(
            settings, no_owner, warn=lambda m: err.print(f"[yellow]note:[/yellow] {escape(m)}", soft_wrap=True)
        )
    except OwnerCallError as exc:
        _fail(str(exc))


def _app(data_dir: Path | None) -> AppContext:
    """The application context of the store in ``data_dir`` (default: the configured one); close it when done."""
    return _core(_settings(data_dir))


def _core(settings: Settings, *, read_only: bool = False, adopt_settings: bool = False) -> AppContext:
    """The application context a command opens the store with: refused at once (one line, exit 1) when the settings
    split the store (:func:`aisac_core.store.guards.check_replica_store`); the store's identity is checked by the
    context before its first read or write (:meth:`AppContext.check_store`). ``read_only``: ``status``, ``search``,
    ``verify``; ``adopt_settings``: ``index --adopt-settings``. Close it when done."""
    from aisac_core.store.guards import SplitStoreError, check_replica_store

    try:
        check_replica_store(settings)
    except SplitStoreError as exc:
        _fail(str(exc))
    return AppContext(settings, read_only=read_only, adopt_settings=adopt_settings)


def _fail(msg: str, code: int = 1) -> NoReturn:
    err.print(f"[red]error:[/red] {escape(msg)}", soft_wrap=True)  # one line; '[data]' in a message is not markup
    raise typer.Exit(code)
