"""The embedding cache: a dense vector per (model, embedded text), so re-indexing never embeds a text twice.

Revision ID: 0033
Revises: 0002
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision = "0033"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "embedding_cache",
        sa.Column("key", AutoString(), nullable=False),
        sa.Column("model", AutoString(), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index(op.f("ix_embedding_cache_model"), "embedding_cache", ["model"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_embedding_cache_model"), table_name="embedding_cache")
    op.drop_table("embedding_cache")
