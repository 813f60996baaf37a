"""The relational half of the shared store: SQLModel tables and a correctly configured engine.

SQLite settings (DESIGN.md "Store"): WAL journal, ``synchronous=NORMAL``, ``busy_timeout`` 30 s, and
every transaction opened with ``BEGIN IMMEDIATE``. pysqlite's own transaction handling defers the write
lock until the first write, so two read-modify-write transactions interleave and one update is lost;
``BEGIN IMMEDIATE`` takes the lock at the start (SQLAlchemy docs, "Serializable isolation / Savepoints /
Transactional DDL" for pysqlite; https://www.sqlite.org/lang_transaction.html).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Column, Index, Text, event
from sqlalchemy.engine import Engine
from sqlmodel import Field, Session, SQLModel, create_engine
from aisac_core.errors import AisacError


def utcnow() -> datetime:
    """Timezone-aware now in UTC."""
    return datetime.now(timezone.utc)


class Document(SQLModel, table=True):
    """Manifest row of one indexed file (DESIGN.md "Incremental indexing").

    ``status``: ``indexing`` (vector writes may be under way; a re-run redoes the file),
    ``indexed``, ``failed`` (``error`` says why; the file's old chunks, if any, are kept).
    """

    doc_id: str = Field(primary_key=True)
    path: str = Field(index=True, unique=True)
    file_type: str
    size: int
    mtime_ns: int
    sha256: str
    fingerprint: str
    chunk_count: int = 0
    pages: int | None = None
    title: str | None = None
    status: str = "indexing"
    error: str | None = None
    indexed_at: datetime | None = None


class DocumentContent(SQLModel, table=True):
    """The parsed document: plain text (char spans of anchors index into it) and Markdown."""

    doc_id: str = Field(primary_key=True)
    text: str = Field(sa_column=Column(Text, nullable=False))
    markdown: str = Field(sa_column=Column(Text, nullable=False))
    #: issue 3: sections, captions, blocks and metadata of the parse (JSON; see aisac_core.rag.documents._structure)
    structure_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class CatalogEntry(SQLModel, table=True):
    """A file of a catalog-only root: listed with metadata, never embedded."""

    path: str = Field(primary_key=True)
    root: str = Field(index=True)
    file_type: str
    size: int
    mtime_ns: int
    meta_json: str = "{}"
    listed_at: datetime = Field(default_factory=utcnow)


class Job(SQLModel, table=True):
    """A background job (indexing). ``status``: queued, running, done, failed, interrupted."""

    job_id: str = Field(primary_key=True)
    kind: str
    status: str = "queued"
    params_json: str = "{}"
    total: int = 0
    done: int = 0
    counters_json: str = "{}"
    failures_json: str = "[]"
    message: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class TraceEvent(SQLModel, table=True):
    """One event of a run: a tool call of one server (the provenance middleware writes it), or a role step /
    model call (the roles server writes it). ``parent_id`` builds the tree run -> role steps -> tool calls."""

    __table_args__ = (Index("ix_traceevent_run_created", "run_id", "created_at"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    server: str
    tool: str
    arguments_json: str = Field(sa_column=Column(Text, nullable=False))
    arguments_sha256: str
    result_sha256: str | None = None
    status: str  # ok / tool_error / exception
    error: str | None = None
    latency_ms: float
    anchor_ids_json: str = "[]"
    created_at: datetime = Field(default_factory=utcnow, index=True)
    kind: str = "tool_call"  # tool_call / role_step / model_call
    parent_id: int | None = Field(default=None, index=True)
    result_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class MemorySession(SQLModel, table=True):
    """A memory session (a research thread): see :mod:`aisac_core.memory`."""

    __tablename__ = "memory_session"

    id: str = Field(primary_key=True)
    title: str | None = None
    project: str | None = Field(default=None, index=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)


class Turn(SQLModel, table=True):
    """One turn of a memory session. ``created_at`` strictly increases within a session (set inside the
    ``BEGIN IMMEDIATE`` transaction), so (created_at, id) is a stable order. ``pair_user_id``: on an
    assistant turn, the user turn it answers (the pair embedded into the ``dialogue`` collection)."""

    __table_args__ = (Index("ix_turn_session_created", "session_id", "created_at", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(index=True)
    role: str
    content: str = Field(sa_column=Column(Text, nullable=False))
    metadata_json: str = "{}"
    parent_id: int | None = None
    pair_user_id: int | None = Field(default=None, index=True)
    created_at: datetime = Field(default_factory=utcnow)


class Fact(SQLModel, table=True):
    """A temporal fact: valid from ``valid_at`` until ``invalid_at`` (open when None)."""

    __table_args__ = (Index("ix_fact_subject_predicate", "subject_key", "predicate_key", "valid_at"),)

    id: int | None = Field(default=None, primary_key=True)
    subject: str
    predicate: str
    object: str = Field(sa_column=Column(Text, nullable=False))
    subject_key: str  # lower-cased subject: matching is case-insensitive
    predicate_key: str
    conditions_json: str = "{}"
    valid_at: datetime
    invalid_at: datetime | None = None
    source: str | None = None
    evidence_span: str | None = None
    run_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class StoreMeta(SQLModel, table=True):
    """Key/value facts about the store (schema version, collection settings)."""

    key: str = Field(primary_key=True)
    value: str


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



