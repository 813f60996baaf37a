"""Alembic migrations of the SQL store."""
