"""Alembic environment of the SQL store.

Run by :func:`aisac_core.store.migrations.upgrade` with the caller's connection (already inside its transaction) in
``config.attributes["connection"]``; from the ``alembic`` command line, ``sqlalchemy.url`` of the config names the
database instead.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from aisac_core.store import tables

config = context.config
target_metadata = tables.SQLModel.metadata


def _configure(*, connection: Connection | None = None, url: str | None = None, literal_binds: bool = False) -> None:
    """``context.configure`` with the options every mode shares."""
    context.configure(
        connection=connection,
        url=url,
        literal_binds=literal_binds,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )


def _url() -> str:
    """``sqlalchemy.url`` of the config (the ``alembic`` command line names the database there)."""
    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("no connection given and no sqlalchemy.url in the alembic config")
    return url


if context.is_offline_mode():
    _configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif config.attributes.get("connection") is not None:
    _configure(connection=config.attributes["connection"])
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = create_engine(_url())
    with engine.begin() as connection:
        _configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
