"""The relational half of the shared store: SQLModel tables and a correctly configured engine.

SQLite settings (DESIGN.md "Store"): WAL journal, ``synchronous=NORMAL``, ``busy_timeout`` 30 s, and
every transaction opened with ``BEGIN IMMEDIATE``. pysqlite's own transaction handling defers the write
lock until the first write, so two read-modify-write transactions interleave and one update is lost;
``BEGIN IMMEDIATE`` takes the lock at the start (SQLAlchemy docs, "Serializable isolation / Savepoints /
Transactional DDL" for pysqlite; https://www.sqlite.org/lang_transaction.html).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, create_engine

from aisac_core.store.tables import StoreMeta
from aisac_core.errors import AisacError


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


def _add_missing_columns(engine: Engine) -> None:
    """Additive migration for SQLite: a column a newer version declares but the file lacks is added (NULL or its
    scalar default). Columns are never dropped or changed, so an older store opens without loss."""
    from sqlalchemy import inspect

    insp = inspect(engine)
    for table in SQLModel.metadata.sorted_tables:
        if not insp.has_table(table.name):
            continue
        have = {c["name"] for c in insp.get_columns(table.name)}
        for col in table.columns:
            if col.name in have:
                continue
            ddl = f'ALTER TABLE "{table.name}" ADD COLUMN "{col.name}" {col.type.compile(engine.dialect)}'
            default = getattr(col.default, "arg", None)
            if isinstance(default, (int, float, str)) and not callable(default):
                ddl += " DEFAULT " + (repr(default) if isinstance(default, str) else str(default))
            with engine.begin() as conn:
                conn.exec_driver_sql(ddl)


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with the SQLite settings above when the URL is SQLite; tables created.

    Raises :class:`StoreError` when the database file is not a database (corrupt or foreign).
    """
    is_sqlite = url.startswith("sqlite")
    kwargs: dict[str, Any] = {}
    if is_sqlite:
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    engine = create_engine(url, **kwargs)
    if is_sqlite:
        _sqlite_listeners(engine)
    try:
        SQLModel.metadata.create_all(engine)
        if is_sqlite:
            _add_missing_columns(engine)
    except Exception as exc:  # sqlite3.DatabaseError: file is not a database
        raise StoreError(
            f"cannot open the SQL store {url}: {exc}. If the file is corrupt, move it aside "
            "(the vector folder must then be re-indexed too: remove both and run `aisac index` again)."
        ) from exc
    return engine


def ensure_tables(engine: Engine, *models: type[SQLModel]) -> None:
    """Create the tables of ``models`` if they are missing (idempotent).

    Servers that own tables outside this module (literature cache, data registry, ...) call this at first use,
    so a store created by an older version gains the new tables without a migration step.
    """
    SQLModel.metadata.create_all(engine, tables=[m.__table__ for m in models])  # type: ignore[attr-defined]


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


