"""Memory scopes and session dates.

- ``memory_session`` gains ``participant`` (whose history it is), ``host`` (the MCP host that recorded it) and
  ``started_at`` (when the conversation took place, for sessions imported from elsewhere; None = ``created_at``),
  each indexed: recall and search filter on them.
- ``turn`` gains ``speaker`` (who said it, by name).

The ``dialogue`` vectors of an older store lack the payload fields these scopes filter on; the memory service
re-embeds them on its first use (:func:`aisac_core.memory.recall.reconcile_dialogue`, payload version 2).

Revision ID: 0045
Revises: 0033
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision = "0045"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_session") as batch:
        batch.add_column(sa.Column("participant", AutoString(), nullable=True))
        batch.add_column(sa.Column("host", AutoString(), nullable=True))
        batch.add_column(sa.Column("started_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_memory_session_participant", "memory_session", ["participant"], unique=False)
    op.create_index("ix_memory_session_host", "memory_session", ["host"], unique=False)
    op.create_index("ix_memory_session_started_at", "memory_session", ["started_at"], unique=False)
    with op.batch_alter_table("turn") as batch:
        batch.add_column(sa.Column("speaker", AutoString(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("turn") as batch:
        batch.drop_column("speaker")
    op.drop_index("ix_memory_session_started_at", table_name="memory_session")
    op.drop_index("ix_memory_session_host", table_name="memory_session")
    op.drop_index("ix_memory_session_participant", table_name="memory_session")
    with op.batch_alter_table("memory_session") as batch:
        batch.drop_column("started_at")
        batch.drop_column("host")
        batch.drop_column("participant")
