"""The built-in table loaders, registered through the ``aisac_register_table_loaders`` hook like an extension's."""

from __future__ import annotations

from aisac_core.data.readers import TableLoader, builtin_table_loaders
from aisac_core.plugins import hookimpl


@hookimpl
def aisac_register_table_loaders() -> dict[str, TableLoader]:
    """CSV/TSV/TXT, Excel, Parquet, JSON and JSON Lines: every suffix of the one suffix table
    (:data:`aisac_core.rag.formats.TABLE_FORMATS`)."""
    return builtin_table_loaders()
