"""Tables of a PDF as frames, every cell with an evidence anchor: the ``.pdf`` table loader of ``data_load``.

The tables are found and their rows, columns and spanning headers recovered by :mod:`aisac_core.rag.pdftables`. Which
rows are the header is then read by the same line classifier as spreadsheets and CSV files
(:mod:`aisac_core.data.structure`, Strudel-style, with its calibrated confidence): when the model is confident
(confidence >= its threshold) its reading is used; otherwise the layout's header (the lines above the first row
with a row label, :mod:`aisac_core.rag.pdftables`) is kept, with the confidence the model gives that reading and the
model's own reading reported as the alternative. ``header_rows`` overrides both.

Each table becomes one frame (``<name>:p<page>_t<k>``, the k-th table of that page; a PDF with one table: ``<name>``):
header rows joined per column into the column names (``|`` between levels, as for CSV and Excel), body rows as records, numbers written
as text (``100 000``, ``1,234``) and statistical markers made numeric as for CSV
(:func:`aisac_core.data.tablemodel.numbers_and_markers`). The frame's source options hold, for every non-empty cell,
a *cell anchor* (:class:`aisac_core.evidence.anchor.Anchor` with ``bbox``; :func:`cell_anchor`) that
``rag_verify_anchor`` re-checks against the file and the run page highlights.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.data.errors import DataError
from aisac_core.data.structure import classify, reading_confidence
from aisac_core.data.tablemodel import frame_of_rows, numbers_and_markers, reading, summary
from aisac_core.evidence.anchor import Anchor
from aisac_core.hashing import sha256_file, sha256_text
from aisac_core.rag.tableregions import model_sha256 as region_model_sha256

if TYPE_CHECKING:
    from aisac_core.data.readers import LoadedTable
    from aisac_core.rag.pdftables import PdfTable

#: most tables one PDF registers (the first ones in page order; a note says how many were left)
MAX_TABLES = 200


def cell_anchor(
    path: Path, sha256: str, table_id: str, row: int, col: int, text: str, page: int, bbox: tuple[float, ...]
) -> dict[str, Any]:
    """The anchor of one table cell: the :class:`~aisac_core.evidence.anchor.Anchor` JSON form with ``chunk_id``
    ``cell:<table_id>:r<row>c<col>`` (grid row and column of the table, 0-based), ``chunk_sha256`` the sha256 of the
    cell ``text`` and ``bbox`` its box on ``page`` (points, origin top-left)."""
    from aisac_core.rag.indexer import doc_id_of_path

    a = Anchor(
        chunk_id=f"cell:{table_id}:r{row}c{col}",
        doc_id=doc_id_of_path(path),
        path=str(path),
        sha256=sha256,
        section=None,
        page=page,
        char_span=(None, None),
        chunk_sha256=sha256_text(text),
        bbox=(bbox[0], bbox[1], bbox[2], bbox[3]),
    )
    return a.to_dict()


def _names(header: list[list[str]], width: int) -> list[str]:
    names: list[str] = []
    seen: dict[str, int] = {}
    for c in range(width):
        parts: list[str] = []
        for row in header:
            v = " ".join(row[c].split()) if c < len(row) else ""
            if v and (not parts or parts[-1] != v):
                parts.append(v)
        name = "|".join(parts) or f"col_{c + 1}"
        if name in seen:
            seen[name] += 1
            name = f"{name} ({seen[name]})"
        else:
            seen[name] = 1
        names.append(name)
    return names


def table_frame(
    t: PdfTable, path: Path, sha256: str, table_id: str, header_rows: int | None = None
) -> tuple[Any, dict[str, Any], list[str]]:
    """One recovered table as ``(frame, options, notes)``: the header decided as the module docstring says; options
    ``{"detected": {page, bbox, caption, header_rows, layout_header_rows, confidence, uncertain, structure,
    region_confidence, region_model_sha256},
    "cells": [{"row": frame row or None for a header cell, "column": frame column name, "text", "anchor"}]}``."""
    import pandas as pd

    filled = [["" for _ in range(t.n_cols)] for _ in range(t.n_rows)]
    for c in t.cells:  # spanning cells fill every slot they cover (as merged cells of a sheet)
        for r in range(c.row, c.row_end + 1):
            for k in range(c.col, c.col_end + 1):
                filled[r][k] = c.text
    st = classify(filled)
    rd = reading(st)
    layout_h = t.header_rows
    notes: list[str] = []
    model_h = rd["body"][0] if rd and rd["body"] else None
    if header_rows is not None:
        n_head, by, conf = (
            int(header_rows),
            "argument",
            reading_confidence(st, list(range(int(header_rows))), int(header_rows)),
        )
    elif model_h is not None and not st.uncertain:
        n_head, by, conf = model_h, "model", st.confidence
    else:
        n_head, by = layout_h, "layout"
        conf = reading_confidence(st, list(range(layout_h)), layout_h) if rd else 0.0
    n_head = min(n_head, t.n_rows)
    uncertain = conf < 0.5
    if uncertain:
        notes.append(f"header rows uncertain (table-structure confidence {conf:.2f}): {n_head} row(s) read as header")
    names = _names(filled[:n_head], t.n_cols)
    body = [[c for c in r] for r in _plain(t)[n_head:]]
    df = frame_of_rows(body) if body else pd.DataFrame(columns=range(t.n_cols))
    df = df.reindex(columns=range(t.n_cols)) if df.shape[1] != t.n_cols else df
    df.columns = names
    df, _markers, more = numbers_and_markers(df)
    notes += more
    cells = []
    for c in t.cells:
        if not c.text.strip():
            continue
        cells.append(
            {
                "row": c.row - n_head if c.row >= n_head else None,
                "column": names[c.col],
                "text": c.text,
                "anchor": cell_anchor(path, sha256, table_id, c.row, c.col, c.text, c.page, c.bbox),
            }
        )
    detected = {
        "page": t.page,
        "bbox": [round(x, 2) for x in t.bbox],
        "caption": t.caption,
        "table_id": table_id,
        "header_rows": n_head,
        "header_by": by,
        "layout_header_rows": layout_h,
        "confidence": round(conf, 4),
        "uncertain": uncertain,
        "structure": summary(st),
        # the learned region classifier's calibrated P(table region) and which model gave it (docs/rag.md)
        "region_confidence": t.confidence,
        "region_model_sha256": region_model_sha256()[:16],
    }
    if by != "model" and model_h is not None and model_h != n_head:
        detected["ambiguous"] = {
            "reasons": [
                f"the table-structure model reads {model_h} header row(s) (its confidence {st.confidence:.2f})"
            ],
            "alternatives": [{"by": "model", "header_rows": model_h}],
        }
    return df, {"detected": detected, "cells": cells}, notes


def _plain(t: PdfTable) -> list[list[str]]:
    """The grid with a spanning cell's text in its first slot only (the records of the frame)."""
    return t.grid()


def read_pdf_tables(path: Path, *, sheet: str | int | None = None, header_rows: int | None = None) -> list[LoadedTable]:
    """The ``.pdf`` table loader: every table of the PDF at ``path`` (module docstring), or the one ``sheet`` names
    (``"p<page>_t<k>"`` or a 0-based index in page order).

    Raises:
        DataError: not a readable PDF (encrypted, damaged, no text layer), no table found, or no table ``sheet``.
    """
    from aisac_core.rag.formats import DocumentError, check_pdf, convert
    from aisac_core.rag.ocr import pages_needing_ocr
    from aisac_core.rag.pdftables import find_tables

    try:
        check_pdf(path)
        res = convert(path, "pdf", "native")
    except DocumentError as exc:
        raise DataError(str(exc)) from exc
    if len(pages_needing_ocr(res)) == len(res.pages):
        raise DataError(
            f"{path.name} has no text layer (a scanned PDF): tables are read from a PDF's own text layer only. "
            "`aisac index` reads a scan's text by OCR for search; for its tables, run OCR that writes a text layer "
            "(e.g. ocrmypdf) and load the result"
        )
    tables = find_tables(res)
    if not tables:
        raise DataError(
            f"{path.name}: no table found in its text layer (tables drawn as images, or text without aligned "
            "columns, are not read)"
        )
    sha = sha256_file(path)
    titles: list[str] = []
    per_page: dict[int, int] = {}
    for t in tables:
        per_page[t.page] = per_page.get(t.page, 0) + 1
        titles.append(f"p{t.page}_t{per_page[t.page]}")
    chosen = list(range(len(tables)))
    if sheet is not None:
        if isinstance(sheet, int) or (isinstance(sheet, str) and re.fullmatch(r"\d+", sheet)):
            k = int(sheet)
            if not 0 <= k < len(tables):
                raise DataError(f"{path.name} has {len(tables)} table(s): table index {k} does not exist")
            chosen = [k]
        elif sheet in titles:
            chosen = [titles.index(sheet)]
        else:
            raise DataError(f"{path.name} has no table {sheet!r}; its tables: {', '.join(titles[:40])}")
    notes: list[str] = []
    if len(chosen) > MAX_TABLES:
        notes.append(f"{len(chosen) - MAX_TABLES} table(s) after the first {MAX_TABLES} not loaded")
        chosen = chosen[:MAX_TABLES]
    out: list[LoadedTable] = []
    single = len(tables) == 1 and sheet is None
    for k in chosen:
        df, opts, n = table_frame(tables[k], path, sha, f"{sha[:12]}:{titles[k]}", header_rows)
        out.append((None if single else titles[k], df, opts, n + (notes if k == chosen[0] else [])))
    return out
