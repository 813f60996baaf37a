"""Every table of the SQL store, registered in one place (``SQLModel.metadata``): the Alembic migrations in
:mod:`aisac_core.store.migrations` are written against exactly these models, and a test checks that the newest
revision and the models agree.

Tables by domain: documents, chunks metadata, catalog and jobs (rag); trace events, inputs and run pins (trace);
sessions, turns and facts (memory); the literature response cache; the DataFrame registry (data); the roles' model
cache and submissions; store facts (``store_meta``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, Column, Index, Text
from sqlmodel import Field, SQLModel

# SQLModel is re-exported: its metadata, imported from here, holds every table below
__all__ = [
    "CatalogEntry",
    "DataFrameEntry",
    "Document",
    "DocumentContent",
    "EmbeddingCacheEntry",
    "Fact",
    "Job",
    "LitCacheEntry",
    "MemorySession",
    "RoleModelCache",
    "RoleSubmission",
    "SQLModel",
    "StoreMeta",
    "TraceEvent",
    "TraceInput",
    "TraceRunPin",
    "Turn",
    "utcnow",
]


def utcnow() -> datetime:
    """Timezone-aware now in UTC."""
    return datetime.now(UTC)


# ---- rag, trace, memory, store facts
class Document(SQLModel, table=True):
    """Manifest row of one indexed file: a file is skipped when size and mtime (then sha256) match, re-embedded
    when its content or the index fingerprint changed.

    ``status``: ``indexing`` (vector writes may be under way; a re-run redoes the file),
    ``indexed``, ``failed`` (``error`` says why; the file's old chunks, if any, are kept).
    """

    doc_id: str = Field(primary_key=True)
    path: str = Field(index=True, unique=True)
    file_type: str
    #: bytes and nanoseconds since the epoch: 64-bit (an mtime in ns passed 2**31 in 1970)
    size: int = Field(sa_column=Column(BigInteger, nullable=False))
    mtime_ns: int = Field(sa_column=Column(BigInteger, nullable=False))
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
    #: sections, captions, blocks and metadata of the parse (JSON; see aisac_core.rag.structure.document_structure)
    structure_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class EmbeddingCacheEntry(SQLModel, table=True):
    """A dense vector computed once for a text: ``key`` is sha256 of the model id and the embedded text
    (:func:`aisac_core.rag.embedcache.cache_key`), so an unchanged chunk text, in the same or another
    document, is never embedded twice by the same model. ``vector``: ``dim`` float32 values, little-endian."""

    __tablename__ = "embedding_cache"
    key: str = Field(primary_key=True)
    model: str = Field(index=True)
    dim: int
    vector: bytes


class CatalogEntry(SQLModel, table=True):
    """A file of a catalog-only root: listed with metadata, never embedded."""

    path: str = Field(primary_key=True)
    root: str = Field(index=True)
    file_type: str
    size: int = Field(sa_column=Column(BigInteger, nullable=False))
    mtime_ns: int = Field(sa_column=Column(BigInteger, nullable=False))
    meta_json: str = "{}"
    listed_at: datetime = Field(default_factory=utcnow)


class Job(SQLModel, table=True):
    """A background job (``index``, ``catalog``, ``roles``). ``status``: queued, running, done, failed, interrupted.

    Any process serving the store may run a queued job: it claims the row (``lease_owner``, ``lease_expires_at``)
    and renews the lease while it works; a ``running`` job whose lease expired belongs to a process that died and
    is claimed again (``attempts`` counts the claims). See :mod:`aisac_core.store.jobqueue`.
    """

    __table_args__ = (Index("ix_job_status_created", "status", "created_at"),)

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
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    attempts: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    #: the finished job's result (JSON) where the job kind has one (a ``roles_run`` answer and evaluation)
    result_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


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
    #: whose history this is (a person or an agent): a recall / search scope
    participant: str | None = Field(default=None, index=True)
    #: the MCP host (client) the session was recorded from: a recall / search scope
    host: str | None = Field(default=None, index=True)
    #: when the conversation took place (a session imported from elsewhere); None = ``created_at``
    started_at: datetime | None = Field(default=None, index=True)


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
    #: who said it, by name (``Caroline``), when the role alone does not tell
    speaker: str | None = None


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


# ---- literature
class LitCacheEntry(SQLModel, table=True):
    """A cached successful response of a literature service (see the module docstring)."""

    __tablename__ = "lit_cache"

    key: str = Field(primary_key=True)
    service: str = Field(index=True)
    request_json: str = Field(sa_column=Column(Text, nullable=False))
    content_type: str | None = None
    body: str = Field(sa_column=Column(Text, nullable=False))
    created_at: float = Field(index=True)  # epoch seconds


# ---- data
class DataFrameEntry(SQLModel, table=True):
    """One registered frame and its lineage."""

    __tablename__ = "data_frame"

    name: str = Field(primary_key=True)
    kind: str  # file | derived
    format: str | None = None
    source_path: str | None = None
    source_sha256: str | None = None
    sheet: str | None = None
    options_json: str = "{}"  # loader options in force (given and detected)
    parent: str | None = None
    operation_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    rows: int = 0
    n_columns: int = 0
    columns_json: str = Field(default="[]", sa_column=Column(Text, nullable=False))
    parquet_path: str = ""
    notes_json: str = "[]"
    created_at: datetime = Field(default_factory=utcnow)


# ---- trace
class TraceInput(SQLModel, table=True):
    """An input file a tool call named, with its sha256 when the call was recorded (trace_verify re-hashes it).

    ``source``: ``hashed`` (the file named in the arguments, hashed when the event was written), ``manifest``
    (a file of a folder argument, hash taken from the index manifest), ``unhashed`` (larger than
    ``MAX_HASH_BYTES``: size + mtime only).
    """

    __tablename__ = "trace_input"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    event_id: int = Field(index=True)
    path: str
    sha256: str | None = None
    size: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    mtime_ns: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    source: str = "hashed"


class TraceRunPin(SQLModel, table=True):
    """Configuration pins of a run (models, embedding model, parser fingerprint, retrieval settings), written when
    the run's first event passes the middleware of a server process."""

    __tablename__ = "trace_run_pin"

    run_id: str = Field(primary_key=True)
    pins_json: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


# ---- roles
class RoleModelCache(SQLModel, table=True):
    """One model response, by the sha256 of the canonical JSON of its request."""

    __tablename__ = "roles_model_cache"

    request_sha256: str = Field(primary_key=True)
    backend: str
    model: str
    role: str
    request_json: str = Field(sa_column=Column(Text, nullable=False))
    response_text: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class RoleSubmission(SQLModel, table=True):
    """A role output submitted by the host's model (``roles_submit_*``); ``valid`` False keeps the errors."""

    __tablename__ = "roles_submission"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    role: str  # route / plan / critique
    payload_json: str = Field(sa_column=Column(Text, nullable=False))
    valid: bool
    errors_json: str = "[]"
    trace_event_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
