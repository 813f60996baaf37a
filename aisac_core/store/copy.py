"""Copy a store's SQL database into another database: typically the embedded SQLite file into PostgreSQL.

The vectors are not copied: they stay where they are (the data dir's Qdrant Edge folder, or the Qdrant server),
and the copy holds the same ids, so a store opened with ``AISAC_SQL_URL=<target>`` over the same data dir returns
the same search hits, sessions, facts and trace.

Usage (CLI, see ``aisac store migrate --help``)::

    aisac store migrate --to 'postgresql+psycopg://aisac:SECRET@db.example.org/aisac'
    export AISAC_SQL_URL='postgresql+psycopg://aisac:SECRET@db.example.org/aisac'

In code: ``copy_store(make_engine(settings.resolved_sql_url), target_url)``. The target is brought to the newest
schema revision first (the same Alembic migrations as every store), then every table of ``SQLModel.metadata`` is
copied in one transaction on the target (all or nothing), in batches streamed from the source. On SQLite the
source is read through a separate read-only connection in one deferred transaction: a consistent snapshot that
never blocks the store's own writer (the owner process may keep running; what it writes later is not copied).
Passwords of URLs never appear in results or messages (``***``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from sqlalchemy import DateTime, Integer, create_engine, func, select, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import NullPool

from aisac_core.store import migrations
from aisac_core.store.sql import StoreError, make_engine, redact_url, sqlite_listeners
from aisac_core.store.tables import SQLModel

__all__ = ["copy_store"]

#: how much of a driver's message an error quotes
_MSG_CHARS = 500


def _scrub(msg: str, *urls: URL) -> str:
    """``msg`` with every password of ``urls`` (plain and URL-encoded) replaced by ``***``, cut to a readable size."""
    for u in urls:
        if u.password:
            pw = str(u.password)
            for form in {pw, quote_plus(pw), quote(pw, safe="")}:
                msg = msg.replace(form, "***")
    msg = " ".join(msg.split())
    return msg if len(msg) <= _MSG_CHARS else msg[:_MSG_CHARS] + "…"


def _why(exc: BaseException) -> str:
    """The driver's own message of a database error (SQLAlchemy's wrapper appends the SQL and every parameter)."""
    return str(exc.orig) if isinstance(exc, DBAPIError) and exc.orig is not None else str(exc) or type(exc).__name__


def _sqlite_file(url: URL) -> Path | None:
    """The resolved file of a SQLite URL; None for other databases and in-memory SQLite."""
    if (
        url.get_backend_name() != "sqlite"
        or url.database in (None, "", ":memory:")
        or url.query.get("mode") == "memory"
    ):
        return None
    db = url.database
    return Path(db.removeprefix("file:")).expanduser().resolve()


def _same_by_url(a: URL, b: URL) -> bool:
    """Whether two URLs name the same database (same SQLite file; same backend, host, port and database name)."""
    fa, fb = _sqlite_file(a), _sqlite_file(b)
    if fa is not None or fb is not None:
        return fa == fb or (fa is not None and fb is not None and fa.exists() and fb.exists() and fa.samefile(fb))
    if a.get_backend_name() != b.get_backend_name():
        return False
    return ((a.host or "").lower(), a.port, a.database) == ((b.host or "").lower(), b.port, b.database)


def _identity(conn: Connection) -> tuple[Any, ...] | None:
    """What identifies the database behind a connection (None: unknown), to catch two URLs naming one database."""
    if conn.dialect.name == "postgresql":
        return tuple(
            conn.execute(
                text(
                    "SELECT current_database(), current_schema(), pg_postmaster_start_time()::text, "
                    "current_setting('port')"
                )
            ).one()
        )
    if conn.dialect.name == "sqlite":
        for _seq, name, path in conn.exec_driver_sql("PRAGMA database_list").all():
            if name == "main" and path:
                return ("sqlite", str(Path(path).resolve()))
    return None


@contextmanager
def _reader(source: Engine) -> Iterator[Connection]:
    """A connection reading ``source`` in one transaction (one consistent snapshot), never holding a write lock."""
    if _sqlite_file(source.url) is None:  # PostgreSQL & co.; in-memory SQLite has no second connection
        conn = source.connect()
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        try:
            with conn.begin():
                yield conn
        finally:
            conn.close()
        return
    # the store's engine opens every transaction with BEGIN IMMEDIATE (the write lock): read with our own engine
    ro = create_engine(source.url, poolclass=NullPool, connect_args={"check_same_thread": False, "timeout": 30})
    sqlite_listeners(ro, read_only=True)

    try:
        with ro.connect() as conn, conn.begin():
            yield conn
    finally:
        ro.dispose()


def _utc(value: Any) -> Any:
    """A datetime as timezone-aware UTC (SQLite gives naive datetimes, which the store writes in UTC)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value


def _is_datetime(type_: Any) -> bool:
    """Whether a column type holds datetimes (``DateTime``, or a decorator over it such as SQLModel's UTCDateTime)."""
    return isinstance(type_, DateTime) or isinstance(getattr(type_, "impl", None), DateTime)


def copy_store(
    source: Engine,
    target_url: str,
    *,
    batch: int = 1000,
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Copy every table of the store (``SQLModel.metadata``; not ``alembic_version``) from ``source`` into the
    database at ``target_url``.

    Args:
        source: the engine of the store to copy (e.g. ``make_engine(settings.resolved_sql_url)``); only read.
        target_url: SQLAlchemy URL of the target (``postgresql+psycopg://user:pw@host/db``, ``sqlite:///file``);
            it is opened with :func:`aisac_core.store.sql.make_engine`, which migrates it to the newest revision.
        batch: rows per fetch from the source and per insert into the target (>= 1).
        replace: delete the target's rows of the store tables first (in the copy's transaction) instead of refusing
            a target that holds rows.
        progress: called as ``progress(table, rows_done, rows_total)`` when a table starts and after each batch.

    Returns:
        ``{"source": url, "target": url, "tables": {table: rows}, "rows": total, "seconds": s}``, both URLs with the
        password as ``***``. The copy is one transaction on the target: on any error nothing is written. Integer
        primary-key sequences of a PostgreSQL target are moved past the copied ids; datetimes are stored as UTC.

    Raises:
        StoreError: ``target_url`` is not a URL or its driver is missing; the source is not at the newest schema
            revision; source and target are the same database; the target cannot be opened, is of a newer aisac,
            or already holds rows (without ``replace``); a row cannot be written; the row counts differ afterwards.
            Messages never show a password.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise StoreError(f"batch must be a positive integer, got {batch!r}")
    try:
        tgt_url = make_url(target_url)
    except ArgumentError as exc:
        shown = repr(target_url) if "@" not in str(target_url) else "(not shown: it may hold a password)"
        raise StoreError(
            f"the target {shown} is not a database URL: give a SQLAlchemy URL such as "
            "postgresql+psycopg://user:password@host:5432/dbname or sqlite:////path/to/aisac.db"
        ) from exc
    src_url = source.url
    red_src, red_tgt = redact_url(src_url), redact_url(tgt_url)
    if _same_by_url(src_url, tgt_url):
        raise StoreError(f"the target {red_tgt} is the source store itself: give the URL of another database")
    head = migrations.head_revision()
    t0 = time.perf_counter()
    new_file = (f := _sqlite_file(tgt_url)) is not None and not f.exists()
    try:
        target = make_engine(target_url)
    except Exception as exc:  # noqa: BLE001 - make_engine's StoreError, a missing driver, a refused login
        hint = (
            " (the URL's database driver is not installed; for PostgreSQL: `pip install 'aisac[postgres]'` and a "
            "postgresql+psycopg:// URL)"
            if isinstance(exc, (ImportError, ArgumentError))
            else ""
        )
        cause = exc.__cause__ if isinstance(exc, StoreError) and isinstance(exc.__cause__, DBAPIError) else exc
        raise StoreError(f"cannot open the target {red_tgt}{hint}: {_scrub(_why(cause), tgt_url, src_url)}") from None
    tables: dict[str, int] = {}
    current, ok = "", False
    try:
        with _reader(source) as rconn:
            rev = migrations.current_revision(rconn)
            if rev != head:
                raise StoreError(
                    f"the source store {red_src} is at schema revision {rev or 'none'}, not {head}: "
                    "open it once with this aisac (e.g. `aisac status`) to migrate it, then retry"
                )
            if (ident := _identity(rconn)) is not None and ident == _identity_of(target):
                raise StoreError(f"the target {red_tgt} is the source store itself: give the URL of another database")
            with target.begin() as tconn:
                _check_empty(tconn, replace, red_tgt)
                for table in SQLModel.metadata.sorted_tables:
                    current = table.name
                    tables[table.name] = _copy_table(rconn, tconn, table, batch, progress)
                _reset_sequences(tconn)
                for table in SQLModel.metadata.sorted_tables:
                    got = tconn.execute(select(func.count()).select_from(table)).scalar_one()
                    if got != tables[table.name]:
                        raise StoreError(
                            f"table {table.name}: {tables[table.name]} rows read but {got} in the "
                            f"target {red_tgt}; nothing was written (the copy was rolled back)"
                        )
        ok = True
    except StoreError as exc:
        raise StoreError(_scrub(str(exc), tgt_url, src_url)) from None
    except Exception as exc:  # noqa: BLE001 - a driver error while reading or writing: one line, no SQL or values
        where = f" (table {current})" if current else ""
        raise StoreError(
            f"copying {red_src} into {red_tgt} failed{where}: {_scrub(_why(exc), tgt_url, src_url)}; "
            "nothing was written to the target (the copy was rolled back)"
        ) from None
    finally:
        target.dispose()
        if new_file and f is not None:  # a file this call created: private (0600) like the store's, or removed
            for p in (f, f.with_name(f.name + "-wal"), f.with_name(f.name + "-shm")):
                if p.exists() and ok:
                    os.chmod(p, 0o600)
                elif p.exists():
                    p.unlink()
    return {
        "source": red_src,
        "target": red_tgt,
        "tables": tables,
        "rows": sum(tables.values()),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def _identity_of(engine: Engine) -> tuple[Any, ...] | None:
    with engine.connect() as conn:
        return _identity(conn)


def _check_empty(tconn: Connection, replace: bool, red_tgt: str) -> None:
    """Refuse a target holding rows of the store tables, or (``replace``) delete them in the open transaction."""
    held = {}
    for table in SQLModel.metadata.sorted_tables:
        n = tconn.execute(select(func.count()).select_from(table)).scalar_one()
        if n:
            held[table.name] = n
    if held and not replace:
        listed = ", ".join(f"{k} {v}" for k, v in held.items())
        raise StoreError(
            f"the target {red_tgt} already holds store rows ({listed}): choose an empty database, or "
            "pass --replace (replace=True) to delete those rows and copy over them"
        )
    if held:
        for table in reversed(SQLModel.metadata.sorted_tables):
            tconn.execute(table.delete())


def _copy_table(
    rconn: Connection, tconn: Connection, table: Any, batch: int, progress: Callable[[str, int, int], None] | None
) -> int:
    """Stream ``table`` (ordered by primary key) from ``rconn`` into ``tconn`` in batches; returns the rows copied."""
    total = rconn.execute(select(func.count()).select_from(table)).scalar_one()
    if progress:
        progress(table.name, 0, total)
    cols = list(table.columns)
    stamps = [i for i, c in enumerate(cols) if _is_datetime(c.type)]
    stmt = select(*cols).order_by(*table.primary_key.columns).execution_options(yield_per=batch)
    done = 0
    for part in rconn.execute(stmt).partitions(batch):
        rows = []
        for r in part:
            vals = list(r)
            for i in stamps:
                vals[i] = _utc(vals[i])
            rows.append({c.key: v for c, v in zip(cols, vals)})
        tconn.execute(table.insert(), rows)
        done += len(rows)
        if progress:
            progress(table.name, done, total)
    if done != total:
        raise StoreError(f"table {table.name}: counted {total} rows but read {done}")
    return done


def _reset_sequences(tconn: Connection) -> None:
    """PostgreSQL: move each integer autoincrement primary key's sequence past the highest copied id."""
    if tconn.dialect.name != "postgresql":
        return
    quote_ident = tconn.dialect.identifier_preparer.format_table
    for table in SQLModel.metadata.sorted_tables:
        col = table.autoincrement_column
        if col is None or not isinstance(col.type, Integer):
            continue
        qt, qc = quote_ident(table), tconn.dialect.identifier_preparer.quote(col.name)
        tconn.execute(
            text(f"SELECT setval(pg_get_serial_sequence(:t, :c), COALESCE(MAX({qc}), 0) + 1, false) FROM {qt}"),
            {"t": qt, "c": col.name},
        )
