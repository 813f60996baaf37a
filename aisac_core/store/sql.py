"""The relational half of the shared store: a correctly configured engine whose schema is migrated on open.

The tables are in :mod:`aisac_core.store.tables`, their schema history in :mod:`aisac_core.store.migrations`.
Two engines are supported, with the same guarantees for read-modify-write transactions:

- **SQLite** (the embedded default): WAL journal, ``synchronous=NORMAL``, ``busy_timeout`` 30 s, and every
  transaction opened with ``BEGIN IMMEDIATE``. pysqlite's own transaction handling defers the write lock until the
  first write, so two read-modify-write transactions interleave and one update is lost; ``BEGIN IMMEDIATE`` takes
  the lock at the start (SQLAlchemy docs, "Serializable isolation / Savepoints / Transactional DDL" for pysqlite;
  https://www.sqlite.org/lang_transaction.html). Writers are serialised, so :func:`lock` has nothing to add.
- **PostgreSQL** (``postgresql+psycopg://...``, the ``aisac[postgres]`` extra): READ COMMITTED, the server's
  default, with explicit locks where a transaction reads what it then writes: :func:`lock` takes a
  transaction-scoped advisory lock on a name (https://www.postgresql.org/docs/15/explicit-locking.html#ADVISORY-LOCKS),
  rows read for update use ``SELECT ... FOR UPDATE`` (``with_for_update``; SQLite ignores the clause), and job
  claims ``FOR UPDATE SKIP LOCKED`` (:mod:`aisac_core.store.jobqueue`). ``pool_pre_ping`` replaces connections the
  server closed (a restart, an idle timeout).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlmodel import Session, create_engine

from aisac_core.errors import AisacError
from aisac_core.store.tables import StoreMeta


def sqlite_listeners(engine: Engine, *, read_only: bool = False) -> None:
    """Configure every connection of a SQLite ``engine`` as the store needs it: transactions under our control,
    ``busy_timeout`` 30 s, and either the writer's settings (WAL, ``synchronous=NORMAL``, foreign keys, every
    transaction ``BEGIN IMMEDIATE``) or, with ``read_only``, ``query_only`` and deferred ``BEGIN`` (a WAL snapshot at
    the first read that never takes the write lock; used to copy a store while its owner keeps writing)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Hand transaction control to us (the "begin" listener below).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=30000")
        if read_only:
            cur.execute("PRAGMA query_only=ON")
        else:
            _set_wal(cur)
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _set_wal(cur: Any, *, timeout: float = 30.0) -> None:
    """Put the database of ``cur`` in WAL mode (persistent: a store already in it is left alone).

    Switching a new database to WAL needs an exclusive lock, and SQLite answers ``SQLITE_BUSY`` at once, without
    calling the busy handler, when another connection is switching it or reading it at that moment
    (https://www.sqlite.org/wal.html, "Activating And Configuring WAL Mode"; seen when several processes open a new
    store together). So the switch is retried for up to ``timeout`` seconds (the ``busy_timeout`` above), with
    backoff from 1 ms to 50 ms; after that the ``database is locked`` error goes to the caller."""
    import sqlite3
    import time

    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            mode = cur.execute("PRAGMA journal_mode").fetchone()
            if mode and str(mode[0]).lower() == "wal":
                return
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for ``url`` with the SQLite settings above when the URL is SQLite; schema migrated to the newest
    revision (:func:`aisac_core.store.migrations.upgrade`: a new store gets every table, a store of an older
    release is brought up to date without losing a row).

    ``read_only`` (``aisac status``, ``search``, ``verify``): nothing is created or migrated - a SQLite file is opened
    with ``query_only`` and must exist, and the schema must be at this aisac's newest revision (else
    :class:`StoreError` says which command migrates it) - so a read-only database role is enough.

    Raises :class:`StoreError` when the database file is not a database (corrupt or foreign), when it was
    written by a newer aisac (a schema revision these migrations do not know), when ``url`` is not a SQLAlchemy URL,
    names a driver that is not installed, or a server that cannot be reached (the message never shows a password).
    """
    is_sqlite = url.startswith("sqlite")
    if read_only and is_sqlite:
        path = make_url(url).database
        if path and path != ":memory:" and not Path(path).exists():
            raise StoreError(
                f"there is no aisac store at {path} yet: index documents first (aisac index PATH), or give the "
                "store's folder (--data-dir / AISAC_DATA_DIR)"
            )
    kwargs: dict[str, Any] = {}
    if is_sqlite:
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(url, **kwargs)
    except (ImportError, NoSuchModuleError) as exc:  # a dialect or driver that is not installed (before ArgumentError:
        # NoSuchModuleError is one)
        raise StoreError(
            f"cannot open the SQL store {redact_url(url)}: no database driver for it is installed "
            f"({_first_line(exc)}). For PostgreSQL: pip install 'aisac[postgres]' (psycopg 3) and use "
            "a postgresql+psycopg:// URL"
        ) from exc
    except ArgumentError as exc:  # not a URL at all
        raise StoreError(
            f"the SQL store URL (setting sql_url, AISAC_SQL_URL) is not a SQLAlchemy URL "
            f"({_first_line(exc)}); give e.g. postgresql+psycopg://USER:PASSWORD@HOST:5432/DATABASE, or "
            "unset it for the SQLite file in the data dir"
        ) from exc
    if is_sqlite:
        sqlite_listeners(engine, read_only=read_only)
    if read_only:
        _check_schema(engine, url)
        return engine
    from alembic.util import (
        CommandError,  # alembic loads when a store opens, not when a server starts (~150 ms)
    )

    from aisac_core.store import migrations

    try:
        migrations.upgrade(engine)
    except CommandError as exc:  # a revision id the scripts do not have
        engine.dispose()
        raise StoreError(
            f"the SQL store {url} has a schema newer than this aisac knows ({exc}); upgrade aisac to open it."
        ) from exc
    except Exception as exc:  # sqlite3.DatabaseError: file is not a database; a server that refuses the connection
        engine.dispose()
        if not is_sqlite:
            raise StoreError(
                f"cannot open the SQL store {redact_url(url)}: {_first_line(exc)}. Check that the database server "
                "runs and accepts this URL (host, port, user, password, database name), and that the driver is "
                "installed (pip install 'aisac[postgres]')."
            ) from exc
        raise StoreError(
            f"cannot open the SQL store {url}: {exc}. If the file is corrupt, move it aside "
            "(the vector folder must then be re-indexed too: remove both and run `aisac index` again)."
        ) from exc
    return engine


def _check_schema(engine: Engine, url: str) -> None:
    """For a read-only engine: the store's schema must be at this aisac's newest revision (nothing is migrated).
    Raises :class:`StoreError` (the engine disposed) naming what to run otherwise."""
    from aisac_core.store import migrations

    where = redact_url(url)
    try:
        rev = migrations.current_revision(engine)
    except Exception as exc:
        engine.dispose()
        raise StoreError(
            f"cannot open the SQL store {where}: {_first_line(exc)}. Check that the database server runs and "
            "accepts this URL (host, port, user, password, database name)."
        ) from exc
    head = migrations.head_revision()
    if rev == head:
        return
    engine.dispose()
    if rev is None:
        raise StoreError(
            f"the SQL store {where} holds no aisac store yet: index documents first (aisac index PATH), or point "
            "AISAC_SQL_URL at the store's database"
        )
    if rev not in migrations.known_revisions():
        raise StoreError(f"the SQL store {where} has a schema newer than this aisac knows ({rev}); upgrade aisac.")
    raise StoreError(
        f"the SQL store {where} is at schema revision {rev}, this aisac reads {head}: a read-only command does not "
        "migrate it; run a writing command first (aisac index, or any server), with a role that may alter tables"
    )


def redact_url(url: str | URL) -> str:
    """``url`` with its password shown as ``***`` (for status output, logs and error messages); text that is not a
    URL comes back as ``<not a URL>``, since it might be a secret itself."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<not a URL>"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]


def lock(session: Any, *names: str) -> None:
    """Serialise this transaction with every other transaction that locks the same name, until it ends.

    ``session``: a SQLModel/SQLAlchemy ``Session`` or ``Connection`` inside a transaction; ``names``: parts of the
    lock name (joined with U+001F), e.g. ``lock(db, "turn", session_id)``. PostgreSQL: a transaction-scoped
    advisory lock on the 64-bit hash of the name (``pg_advisory_xact_lock(hashtextextended(name, 0))``; a hash
    collision only serialises two unrelated transactions). SQLite: nothing to do, ``BEGIN IMMEDIATE`` already serialises
    every writing transaction. Use it first in a transaction that reads rows and then writes depending on what
    it read (get-or-create, "the newest row", supersede): without it, READ COMMITTED lets two of them interleave.
    """
    bind = session.get_bind() if hasattr(session, "get_bind") else session
    if bind.dialect.name != "postgresql":
        return
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:n, 0))"), {"n": "\x1f".join(names)})


def schema_revision(engine: Engine) -> str | None:
    """The schema revision the store is at (``"0001"``, ...), or None when it was never migrated."""
    from aisac_core.store import migrations  # with alembic, when a store opens (see make_engine)

    return migrations.current_revision(engine)


class StoreError(AisacError, RuntimeError):
    """The store cannot be opened or used; the message names the file and the recovery step."""


def get_meta(engine: Engine, key: str) -> str | None:
    """Value of a :class:`StoreMeta` key, or None."""
    with Session(engine) as s:
        row = s.get(StoreMeta, key)
        return row.value if row else None


def set_meta(engine: Engine, key: str, value: str) -> None:
    """Set a :class:`StoreMeta` key."""
    with Session(engine) as s:
        row = s.get(StoreMeta, key) or StoreMeta(key=key, value=value)
        row.value = value
        s.add(row)
        s.commit()
