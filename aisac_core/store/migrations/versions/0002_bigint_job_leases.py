"""64-bit sizes and modification times; job leases.

- ``size`` and ``mtime_ns`` of ``document``, ``catalogentry`` and ``trace_input`` become ``BIGINT``: a modification
  time in nanoseconds since the epoch does not fit PostgreSQL's 32-bit ``INTEGER`` (SQLite's ``INTEGER`` was
  always 64-bit, so there only the declared type changes).
- ``job`` gains ``lease_owner``, ``lease_expires_at`` and ``attempts`` (any process serving the store claims a
  queued job with ``SELECT ... FOR UPDATE SKIP LOCKED`` and holds it by renewing the lease), ``result_json`` (the
  result of a finished ``roles_run`` job, readable by every process) and an index on ``(status, created_at)`` for
  the claim.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

#: table -> (column, nullable) changed from INTEGER to BIGINT
WIDENED = {
    "document": [("size", False), ("mtime_ns", False)],
    "catalogentry": [("size", False), ("mtime_ns", False)],
    "trace_input": [("size", True), ("mtime_ns", True)],
}


def upgrade() -> None:
    for table, columns in WIDENED.items():
        with op.batch_alter_table(table) as batch:
            for name, nullable in columns:
                batch.alter_column(name, existing_type=sa.Integer(), type_=sa.BigInteger(), existing_nullable=nullable)
    with op.batch_alter_table("job") as batch:
        batch.add_column(sa.Column("lease_owner", AutoString(), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("attempts", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("result_json", sa.Text(), nullable=True))
    op.create_index("ix_job_status_created", "job", ["status", "created_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_job_status_created", table_name="job")
    with op.batch_alter_table("job") as batch:
        batch.drop_column("result_json")
        batch.drop_column("attempts")
        batch.drop_column("lease_expires_at")
        batch.drop_column("lease_owner")
    for table, columns in WIDENED.items():
        with op.batch_alter_table(table) as batch:
            for name, nullable in columns:
                batch.alter_column(name, existing_type=sa.BigInteger(), type_=sa.Integer(), existing_nullable=nullable)
