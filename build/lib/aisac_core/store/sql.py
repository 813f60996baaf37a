"""The relational half of the shared store: a correctly configured engine whose schema is migrated on open.

The tables are in :mod:`aisac_core.store.tables`, their schema history in :mod:`aisac_core.store.migrations`.
SQLite settings: WAL journal, ``synchronous=NORMAL``, ``busy_timeout`` 30 s, and
every transaction opened with ``BEGIN IMMEDIATE``. pysqlite's own transaction handling defers the write
lock until the first write, so two read-modify-write transactions interleave and one update is lost;
``BEGIN IMMEDIATE`` takes the lock at the start (SQLAlchemy docs, "Serializable isolation / Savepoints /
Transactional DDL" for pysqlite; https://www.sqlite.org/lang_transaction.html).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from aisac_core.errors import AisacError
from aisac_core.store.tables import StoreMeta


def _sqlite_listeners(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Hand transaction control to us (the "begin" listener below).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with the SQLite settings above when the URL is SQLite; schema migrated to the newest
    revision (:func:`aisac_core.store.migrations.upgrade`: a new store gets every table, a store of an older
    release is brought up to date without losing a row).

    Raises :class:`StoreError` when the database file is not a database (corrupt or foreign), or when it was
    written by a newer aisac (a schema revision these migrations do not know).
    """
    is_sqlite = url.startswith("sqlite")
    kwargs: dict[str, Any] = {}
    if is_sqlite:
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    engine = create_engine(url, **kwargs)
    if is_sqlite:
        _sqlite_listeners(engine)
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
    except Exception as exc:  # sqlite3.DatabaseError: file is not a database
        engine.dispose()
        raise StoreError(
            f"cannot open the SQL store {url}: {exc}. If the file is corrupt, move it aside "
            "(the vector folder must then be re-indexed too: remove both and run `aisac index` again)."
        ) from exc
    return engine


def schema_revision(engine: Engine) -> str | None:
    """The schema revision the store is at (``"0001"``, ...), or None when it was never migrated."""
    from aisac_core.store import migrations

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


