"""Alembic environment of the SQL store.

Run by :func:`aisac_core.store.migrations.upgrade` with the caller's connection (already inside its transaction) in
``config.attributes["connection"]``; from the ``alembic`` command line, ``sqlalchemy.url`` of the config names the
database instead.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from aisac_core.store import tables

config = context.config
target_metadata = tables.SQLModel.metadata
_OPTIONS = {"target_metadata": target_metadata, "render_as_batch": True, "compare_type": True}

if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True, **_OPTIONS)
    with context.begin_transaction():
        context.run_migrations()
elif config.attributes.get("connection") is not None:
    context.configure(connection=config.attributes["connection"], **_OPTIONS)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as connection:
        context.configure(connection=connection, **_OPTIONS)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
