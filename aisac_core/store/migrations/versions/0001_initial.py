"""Initial schema: every table of the store as release 0.1.0 created it (SQLModel ``create_all``).

A store written by 0.1.0 has exactly these tables, columns, types and indexes, so it is stamped at this revision
instead of running it (:func:`aisac_core.store.migrations.upgrade`). ``AutoString`` renders as ``VARCHAR`` (with
SQLModel's default length where a dialect needs one), as the models' ``str`` fields do.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

#: in creation order (downgrade drops them in reverse)
TABLES = [
    "document",
    "documentcontent",
    "catalogentry",
    "job",
    "traceevent",
    "memory_session",
    "turn",
    "fact",
    "storemeta",
    "lit_cache",
    "data_frame",
    "trace_input",
    "trace_run_pin",
    "roles_model_cache",
    "roles_submission",
]


def upgrade() -> None:
    # long function: the initial schema, one create_table per table (an Alembic migration is never edited)
    op.create_table(
        "document",
        sa.Column("doc_id", AutoString(), nullable=False),
        sa.Column("path", AutoString(), nullable=False),
        sa.Column("file_type", AutoString(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("mtime_ns", sa.Integer(), nullable=False),
        sa.Column("sha256", AutoString(), nullable=False),
        sa.Column("fingerprint", AutoString(), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("pages", sa.Integer(), nullable=True),
        sa.Column("title", AutoString(), nullable=True),
        sa.Column("status", AutoString(), nullable=False),
        sa.Column("error", AutoString(), nullable=True),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("doc_id"),
    )
    op.create_index("ix_document_path", "document", ["path"], unique=True)

    op.create_table(
        "documentcontent",
        sa.Column("doc_id", AutoString(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("markdown", sa.Text(), nullable=False),
        sa.Column("structure_json", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("doc_id"),
    )

    op.create_table(
        "catalogentry",
        sa.Column("path", AutoString(), nullable=False),
        sa.Column("root", AutoString(), nullable=False),
        sa.Column("file_type", AutoString(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("mtime_ns", sa.Integer(), nullable=False),
        sa.Column("meta_json", AutoString(), nullable=False),
        sa.Column("listed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("path"),
    )
    op.create_index("ix_catalogentry_root", "catalogentry", ["root"], unique=False)

    op.create_table(
        "job",
        sa.Column("job_id", AutoString(), nullable=False),
        sa.Column("kind", AutoString(), nullable=False),
        sa.Column("status", AutoString(), nullable=False),
        sa.Column("params_json", AutoString(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("counters_json", AutoString(), nullable=False),
        sa.Column("failures_json", AutoString(), nullable=False),
        sa.Column("message", AutoString(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("job_id"),
    )

    op.create_table(
        "traceevent",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", AutoString(), nullable=False),
        sa.Column("server", AutoString(), nullable=False),
        sa.Column("tool", AutoString(), nullable=False),
        sa.Column("arguments_json", sa.Text(), nullable=False),
        sa.Column("arguments_sha256", AutoString(), nullable=False),
        sa.Column("result_sha256", AutoString(), nullable=True),
        sa.Column("status", AutoString(), nullable=False),
        sa.Column("error", AutoString(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("anchor_ids_json", AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", AutoString(), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_traceevent_created_at", "traceevent", ["created_at"], unique=False)
    op.create_index("ix_traceevent_parent_id", "traceevent", ["parent_id"], unique=False)
    op.create_index("ix_traceevent_run_created", "traceevent", ["run_id", "created_at"], unique=False)
    op.create_index("ix_traceevent_run_id", "traceevent", ["run_id"], unique=False)

    op.create_table(
        "memory_session",
        sa.Column("id", AutoString(), nullable=False),
        sa.Column("title", AutoString(), nullable=True),
        sa.Column("project", AutoString(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_memory_session_created_at", "memory_session", ["created_at"], unique=False)
    op.create_index("ix_memory_session_project", "memory_session", ["project"], unique=False)

    op.create_table(
        "turn",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", AutoString(), nullable=False),
        sa.Column("role", AutoString(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("metadata_json", AutoString(), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("pair_user_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_turn_pair_user_id", "turn", ["pair_user_id"], unique=False)
    op.create_index("ix_turn_session_created", "turn", ["session_id", "created_at", "id"], unique=False)
    op.create_index("ix_turn_session_id", "turn", ["session_id"], unique=False)

    op.create_table(
        "fact",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("subject", AutoString(), nullable=False),
        sa.Column("predicate", AutoString(), nullable=False),
        sa.Column("object", sa.Text(), nullable=False),
        sa.Column("subject_key", AutoString(), nullable=False),
        sa.Column("predicate_key", AutoString(), nullable=False),
        sa.Column("conditions_json", AutoString(), nullable=False),
        sa.Column("valid_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("invalid_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("source", AutoString(), nullable=True),
        sa.Column("evidence_span", AutoString(), nullable=True),
        sa.Column("run_id", AutoString(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_fact_subject_predicate", "fact", ["subject_key", "predicate_key", "valid_at"], unique=False)

    op.create_table(
        "storemeta",
        sa.Column("key", AutoString(), nullable=False),
        sa.Column("value", AutoString(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )

    op.create_table(
        "lit_cache",
        sa.Column("key", AutoString(), nullable=False),
        sa.Column("service", AutoString(), nullable=False),
        sa.Column("request_json", sa.Text(), nullable=False),
        sa.Column("content_type", AutoString(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_lit_cache_created_at", "lit_cache", ["created_at"], unique=False)
    op.create_index("ix_lit_cache_service", "lit_cache", ["service"], unique=False)

    op.create_table(
        "data_frame",
        sa.Column("name", AutoString(), nullable=False),
        sa.Column("kind", AutoString(), nullable=False),
        sa.Column("format", AutoString(), nullable=True),
        sa.Column("source_path", AutoString(), nullable=True),
        sa.Column("source_sha256", AutoString(), nullable=True),
        sa.Column("sheet", AutoString(), nullable=True),
        sa.Column("options_json", AutoString(), nullable=False),
        sa.Column("parent", AutoString(), nullable=True),
        sa.Column("operation_json", sa.Text(), nullable=True),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("n_columns", sa.Integer(), nullable=False),
        sa.Column("columns_json", sa.Text(), nullable=False),
        sa.Column("parquet_path", AutoString(), nullable=False),
        sa.Column("notes_json", AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )

    op.create_table(
        "trace_input",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", AutoString(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("path", AutoString(), nullable=False),
        sa.Column("sha256", AutoString(), nullable=True),
        sa.Column("size", sa.Integer(), nullable=True),
        sa.Column("mtime_ns", sa.Integer(), nullable=True),
        sa.Column("source", AutoString(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_trace_input_event_id", "trace_input", ["event_id"], unique=False)
    op.create_index("ix_trace_input_run_id", "trace_input", ["run_id"], unique=False)

    op.create_table(
        "trace_run_pin",
        sa.Column("run_id", AutoString(), nullable=False),
        sa.Column("pins_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id"),
    )

    op.create_table(
        "roles_model_cache",
        sa.Column("request_sha256", AutoString(), nullable=False),
        sa.Column("backend", AutoString(), nullable=False),
        sa.Column("model", AutoString(), nullable=False),
        sa.Column("role", AutoString(), nullable=False),
        sa.Column("request_json", sa.Text(), nullable=False),
        sa.Column("response_text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("request_sha256"),
    )

    op.create_table(
        "roles_submission",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", AutoString(), nullable=False),
        sa.Column("role", AutoString(), nullable=False),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("valid", sa.Boolean(), nullable=False),
        sa.Column("errors_json", AutoString(), nullable=False),
        sa.Column("trace_event_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_roles_submission_run_id", "roles_submission", ["run_id"], unique=False)


def downgrade() -> None:
    for name in reversed(TABLES):
        op.drop_table(name)
