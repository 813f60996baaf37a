"""Alembic migrations of the SQL store, run in code: no ``alembic.ini`` is needed.

:func:`upgrade` brings a database to the newest revision (``head``) inside one transaction of the caller, so two
processes opening the same new store one after the other (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a transaction-level
advisory lock) never both create the tables: the second waits for the first, then finds the store at head.

A store written before the migrations existed (tables made by SQLModel's ``create_all``, no ``alembic_version`` table)
is adopted: the tables and columns of the baseline revision ``0001`` it lacks are added (columns it has are never
changed or dropped), then it is stamped at ``0001`` and upgraded from there.

New revisions: ``alembic.command.revision(alembic_config(), message, autogenerate=True)`` with
``sqlalchemy.url`` set on that config to a database at head writes a file into ``versions/``; review it, name its
``revision`` with the next number (``0002``, ...).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, MetaData, create_engine, inspect, text
from sqlalchemy.engine import Engine

from aisac_core.store.tables import SQLModel

__all__ = [
    "BASELINE",
    "SCRIPT_LOCATION",
    "alembic_config",
    "current_revision",
    "head_revision",
    "known_revisions",
    "upgrade",
]

#: folder of ``env.py``, ``script.py.mako`` and ``versions/``
SCRIPT_LOCATION = Path(__file__).resolve().parent
#: the revision that equals the schema of the last release made without migrations (0.1.0)
BASELINE = "0001"
#: key of the PostgreSQL advisory lock held while migrating ("aisa" in ASCII)
_PG_LOCK_KEY = 0x61697361


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic :class:`Config` for the store's scripts; ``connection`` (optional) is the one ``env.py`` uses."""
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_LOCATION))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest revision id of the scripts (e.g. ``"0001"``)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


@lru_cache(maxsize=1)
def known_revisions() -> frozenset[str]:
    """Every revision id of the scripts (a store at another one was written by a newer aisac)."""
    return frozenset(s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions())


def current_revision(bind: Engine | Connection) -> str | None:
    """The revision a database is stamped at, or None (new or never migrated)."""
    if isinstance(bind, Engine):
        with bind.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    return MigrationContext.configure(bind).get_current_revision()


def upgrade(engine: Engine) -> str:
    """Bring the database of ``engine`` to the newest revision in one transaction; returns that revision.

    Idempotent: a database already at head is left alone. Raises whatever the driver or Alembic raise (e.g.
    ``alembic.util.CommandError`` for a revision these scripts do not know: a store written by a newer aisac).
    """
    with engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE (store.sql) takes the write lock here
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        current = current_revision(conn)
        if current == head_revision():
            return current
        cfg = alembic_config(conn)
        if current is None and _is_unversioned_store(conn):
            _adopt(conn)
            command.stamp(cfg, BASELINE)
        command.upgrade(cfg, "head")
        return head_revision()


def _is_unversioned_store(conn: Connection) -> bool:
    """True when the database has tables of the store but no ``alembic_version`` (made by ``create_all``)."""
    have = set(inspect(conn).get_table_names())
    return "alembic_version" not in have and bool(have & set(_baseline_names()))


@lru_cache(maxsize=1)
def _baseline_names() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Table name -> (column names, index names) of revision :data:`BASELINE`, read from a scratch in-memory SQLite
    database migrated to it (so the adoption below targets that revision, not whatever the models say today)."""
    scratch = create_engine("sqlite://")
    try:
        with scratch.begin() as conn:
            command.upgrade(alembic_config(conn), BASELINE)
            md = MetaData()
            md.reflect(conn)
    finally:
        scratch.dispose()
    return {
        t.name: (frozenset(c.name for c in t.columns), frozenset(i.name for i in t.indexes if i.name))
        for t in md.tables.values()
        if t.name != "alembic_version"
    }


def _adopt(conn: Connection) -> None:
    """Add to an unversioned store the baseline tables, columns and indexes it lacks (definitions from the models).

    A missing column is added nullable with the model's scalar default as its SQL default (existing rows get it);
    columns present are never changed or dropped, so an older store opens without loss.
    """
    insp = inspect(conn)
    have_tables = set(insp.get_table_names())
    baseline = _baseline_names()
    models = SQLModel.metadata.tables
    missing = [models[name] for name in baseline if name not in have_tables and name in models]
    SQLModel.metadata.create_all(conn, tables=missing)
    for name, (columns, indexes) in baseline.items():
        if name not in have_tables or name not in models:
            continue
        table = models[name]
        have_cols = {c["name"] for c in insp.get_columns(name)}
        for col in table.columns:
            if col.name not in columns or col.name in have_cols:
                continue
            ddl = f'ALTER TABLE "{name}" ADD COLUMN "{col.name}" {col.type.compile(conn.dialect)}'
            default = getattr(col.default, "arg", None)
            if isinstance(default, bool):
                ddl += f" DEFAULT {int(default)}"
            elif isinstance(default, (int, float)):
                ddl += f" DEFAULT {default}"
            elif isinstance(default, str):
                ddl += " DEFAULT '" + default.replace("'", "''") + "'"
            conn.exec_driver_sql(ddl)
        have_idx = {i["name"] for i in insp.get_indexes(name)}
        for idx in table.indexes:
            if idx.name in indexes and idx.name not in have_idx:
                idx.create(conn)
