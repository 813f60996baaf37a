"""The catalogue: data files (CSV, TSV, Parquet, JSON, Excel, HDF5, ...) listed with cheap metadata, never embedded.

Files of catalog-only roots, and data files met while indexing a folder, get one
:class:`~aisac_core.store.tables.CatalogEntry` row each (path, root, type, size, mtime, metadata); a file whose
size and mtime are unchanged is not read again. The data server opens the files on demand.
"""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, select

from aisac_core.archives import ArchiveLimits, check_archive
from aisac_core.errors import check_path_text, expand_user, resolve_link
from aisac_core.hashing import dumps, open_regular
from aisac_core.rag.formats import CATALOG_TYPES
from aisac_core.rag.results import Catalog
from aisac_core.store.sql import lock
from aisac_core.store.tables import CatalogEntry, utcnow

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


def catalogue_file(engine: Engine, path: Path, root: Path, limits: ArchiveLimits | None = None) -> None:
    """Write (or refresh) the catalogue row of ``path``, found under ``root``; skipped when the row's size and
    mtime equal the file's. ``limits``: decompression limits for Excel files (None: the defaults). Raises OSError
    when the file cannot be stat'ed."""
    st = path.stat()
    ftype = CATALOG_TYPES.get(path.suffix.lower(), path.suffix.lower().lstrip(".") or "unknown")
    with Session(engine) as s:
        lock(s, "catalog", str(path))
        row = s.get(CatalogEntry, str(path))
        if row is not None and row.size == st.st_size and row.mtime_ns == st.st_mtime_ns:
            return
        meta = catalog_metadata(path, ftype, limits)
        row = row or CatalogEntry(
            path=str(path), root=str(root), file_type=ftype, size=st.st_size, mtime_ns=st.st_mtime_ns
        )
        row.root, row.file_type, row.size, row.mtime_ns = str(root), ftype, st.st_size, st.st_mtime_ns
        row.meta_json, row.listed_at = dumps(meta), utcnow()
        s.add(row)
        s.commit()


def catalog_metadata(path: Path, ftype: str, limits: ArchiveLimits | None = None) -> dict[str, Any]:
    """Cheap metadata of a data file: CSV/TSV columns and row count (files up to 64 MiB), Excel sheet
    names, JSON top-level type. Never loads a large file whole; an Excel file is first checked against ``limits``
    (:func:`aisac_core.archives.check_archive`; openpyxl reads its shared strings whole). A failure is reported as
    ``meta["metadata_error"]`` (at most 300 characters), never raised."""
    meta: dict[str, Any] = {}
    try:
        open_regular(path).close()  # a FIFO, socket or device is refused before anything reads it
        if ftype in ("csv", "tsv"):
            with open(path, newline="", encoding="utf-8", errors="replace") as f:
                sample = f.read(65536)
                try:
                    dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
                    delim = dialect.delimiter
                except csv.Error:
                    delim = "\t" if ftype == "tsv" else ","
                first = next(csv.reader([sample.splitlines()[0]], delimiter=delim)) if sample else []
                meta.update(delimiter=delim, columns=first[:200])
            if path.stat().st_size <= 64 << 20:
                with open(path, "rb") as f:
                    meta["rows"] = max(0, sum(1 for _ in f) - 1)
        elif ftype == "xlsx":
            check_archive(path, limits)
            from openpyxl import (
                load_workbook,  # ~0.2 s to import: only when an Excel file is catalogued
            )

            wb = load_workbook(path, read_only=True)
            meta["sheets"] = wb.sheetnames
            wb.close()
        elif ftype in ("json", "jsonl") and path.stat().st_size <= 16 << 20:
            if ftype == "jsonl":
                with open(path, "rb") as f:
                    meta["records"] = sum(1 for line in f if line.strip())
            else:
                obj = json.loads(path.read_text(encoding="utf-8"))
                meta["top_level"] = type(obj).__name__
                if isinstance(obj, list):
                    meta["records"] = len(obj)
    except RecursionError:
        meta["metadata_error"] = "JSON nested too deeply to read (over about 1,000 levels)"
    except Exception as exc:
        meta["metadata_error"] = str(exc)[:300]
    return meta


def catalog_entries(
    engine: Engine, *, root: str | None = None, file_type: str | None = None, limit: int = 100, offset: int = 0
) -> Catalog:
    """Catalogued files of the store whose SQL engine is ``engine``, paged: ``{entries: [{path, root, file_type, size, modified (ISO 8601, UTC), meta}], total,
    next_offset}``; ``root`` keeps files under that folder, ``file_type`` files of that type (``csv``, ...).

    Raises :class:`~aisac_core.errors.BadPathError` for a ``root`` that is blank, holds a NUL byte or is a symlink
    loop."""
    prefix = None
    if root:
        check_path_text(root, what="root")
        r = expand_user(root, what="root")
        try:
            prefix = str(r.resolve())
        except (RuntimeError, OSError):  # a symlink loop: the strict resolution says so
            prefix = str(resolve_link(r, what="root"))
    with Session(engine) as s:
        q = select(CatalogEntry).order_by(CatalogEntry.path)
        if prefix:
            q = q.where(CatalogEntry.path.startswith(prefix))
        if file_type:
            q = q.where(CatalogEntry.file_type == file_type)
        rows = s.exec(q).all()
    page = rows[offset : offset + limit]
    return {
        "entries": [
            {
                "path": r.path,
                "root": r.root,
                "file_type": r.file_type,
                "size": r.size,
                "modified": datetime.fromtimestamp(r.mtime_ns / 1e9, UTC).isoformat(),
                "meta": json.loads(r.meta_json),
            }
            for r in page
        ],
        "total": len(rows),
        "next_offset": offset + limit if offset + limit < len(rows) else None,
    }
