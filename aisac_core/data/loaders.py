"""Reading table files into DataFrames, with header detection.

Loaders (wrapped as the built-in table loaders by :mod:`aisac_core.data.readers`, which registers them through the
``aisac_register_table_loaders`` hook like an extension's and runs every loader through one dispatch): CSV/TSV/TXT
(encoding: BOM, else strict UTF-8, else charset-normalizer's best guess, else latin-1;
delimiter: ``csv.Sniffer`` over ``, ; TAB |``), Excel ``.xlsx``/``.xlsm`` (every sheet, merged cells filled with
their top-left value), Parquet, JSON (records, columns or ``{"key": [records]}``) and JSON Lines.

Header detection (CSV and Excel, :func:`detect_table`): leading rows that are empty or hold a single cell in a
wider table are titles/notes and skipped; then every following row that has a text cell in a column whose
cells below (or in the lower half of the first 200 rows) are >= 80 % numeric is a header row (up to 10; blank rows
between them are skipped). A table without numeric columns gets one header row when its first row is all text.
Multi-row headers are joined per column with ``|`` (upper rows forward-filled across empty cells, repeated parts
collapsed): brain_networks.csv's ``network / node / hemi`` rows give columns like ``1|1|lh``. ``header_rows``
overrides the count.

pandas, openpyxl and charset-normalizer are imported when a file needs them (they are slow to import).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.archives import ArchiveError, ArchiveLimits, check_archive
from aisac_core.data.errors import DataError, WorkbookOpenError
from aisac_core.data.layout import unpivot
from aisac_core.data.regions import cell_kind, detect_region, join_header_levels
from aisac_core.data.sheetgrid import SheetGrid, SheetLimits, read_sheet
from aisac_core.data.structure import CONFIDENT_SHEET, classify
from aisac_core.data.tablemodel import (
    MODEL_CSV_CHARS,
    all_rows,
    apply_decision,
    csv_decision,
    csv_dialect,
    detect_encoding,
    frame_of_rows,
    model_override,
    numbers_and_markers,
    report_structure,
    section_column,
    sheet_structure,
    skip_preamble,
)

if TYPE_CHECKING:
    import pandas as pd

MAX_HEADER_ROWS = 10
NUMERIC_SHARE = 0.8
DETECT_ROWS = 200
NA_STRINGS = {"", "na", "n/a", "nan", "null", "none", "-", "--", "#n/a"}


# -- detection ------------------------------------------------------------------------------------------------
_kind = cell_kind


def detect_table(
    grid: list[list[Any]], header_rows: int | None = None, merged: set[tuple[int, int]] | None = None
) -> dict[str, Any]:
    """Find the table in a grid of cells (rows of values; strings for CSV, typed values for Excel).

    Returns ``{top, header: [row indices], data_start, columns: [kept column indices], names: [str], notes}``.
    See the module docstring for the rules. ``header_rows`` (>= 0) fixes the number of header rows. ``merged``:
    (row, column) of cells filled from a merged range (not its top-left cell); a header part repeated only because
    of a fill (merged or forward-filled) is collapsed, a genuinely repeated label (network 1, node 1) is kept.
    """
    filled = set(merged or ())
    notes: list[str] = []
    sample = [[_kind(v) for v in row] for row in grid[:DETECT_ROWS]]
    width = max((max((j + 1 for j, k in enumerate(r) if k != "empty"), default=0) for r in sample), default=0)

    def count(r: list[str]) -> int:
        return sum(k != "empty" for k in r)

    top = 0
    while top < len(sample) and (
        count(sample[top]) == 0
        or (count(sample[top]) == 1 and width >= 2 and count(sample[top + 1] if top + 1 < len(sample) else []) != 1)
    ):
        if count(sample[top]):
            txt = next(str(v) for v in grid[top] if _kind(v) != "empty")
            notes.append(f"row {top + 1} skipped as a title/note: {txt[:80]!r}")
        top += 1
    # a column is numeric when >= 80 % of its cells below the first row, or of its cells in the lower half of the
    # sampled rows (short tables under a multi-row header), are numbers
    lower = sample[top + max(1, (len(sample) - top) // 2) :]

    def share_numeric(rows: list[list[str]], j: int, need: int) -> bool:
        col = [r[j] for r in rows if j < len(r) and r[j] != "empty"]
        return len(col) >= need and sum(k == "num" for k in col) / len(col) >= NUMERIC_SHARE

    numeric = [
        share_numeric(sample[top + 1 : top + 101], j, 2) or share_numeric(lower, j, 2 if len(lower) >= 4 else 1)
        for j in range(width)
    ]
    header: list[int] = []
    i = top
    if header_rows is not None:
        while i < len(grid) and len(header) < header_rows:
            if i >= len(sample) or count(sample[i]):
                header.append(i)
            i += 1
    else:
        while i < min(len(sample), top + MAX_HEADER_ROWS + 3) and len(header) < MAX_HEADER_ROWS:
            r = sample[i]
            if not count(r):
                if header:
                    i += 1
                    continue
                break
            if any(k == "text" and j < width and numeric[j] for j, k in enumerate(r)):
                header.append(i)
                i += 1
                continue
            break
        if not header and top < len(sample) and not any(numeric):
            first = sample[top]
            if count(first) and all(k in ("text", "empty") for k in first):
                header = [top]
                i = top + 1
    while i < len(sample) and not count(sample[i]):
        i += 1
    data_start = i
    # columns: those with any content in the header or the body sample
    used = [
        j
        for j in range(width)
        if any(j < len(sample[r]) and sample[r][j] != "empty" for r in header + list(range(data_start, len(sample))))
    ]
    # names: upper header rows forward-filled across empty cells
    levels = []
    for n, hr in enumerate(header):
        row = [grid[hr][j] if j < len(grid[hr]) else None for j in range(width)]
        vals = ["" if _kind(v) == "empty" and not (isinstance(v, str) and v.strip()) else _cell_text(v) for v in row]
        if n < len(header) - 1:
            last = ""
            for j in range(width):
                if vals[j]:
                    last = vals[j]
                elif last:
                    vals[j] = last
                    filled.add((hr, j))
        levels.append(vals)
    names = join_header_levels(header, levels, used, filled)
    if len(header) > 1:
        notes.append(
            f"{len(header)}-row header (rows {', '.join(str(h + 1) for h in header)}): level names joined with '|'"
        )
    return {"top": top, "header": header, "data_start": data_start, "columns": used, "names": names, "notes": notes}


def _cell_text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v).strip()


# -- loaders --------------------------------------------------------------------------------------------------
#: header detection reads whole rows: up to DETECT_ROWS, stopping after DETECT_CHARS characters once it has
#: DETECT_MIN_ROWS rows (titles + a 10-row header + data), and after DETECT_MAX_CHARS once it has 3 (very wide files)
DETECT_CHARS = 64_000
DETECT_MIN_ROWS = MAX_HEADER_ROWS + 4
DETECT_MAX_CHARS = 8_000_000
#: a frame with more columns than this is "wide": its blocks are joined after parsing (see load_csv)
WIDE_COLUMNS = 1000
#: most columns a frame holds; further columns are not loaded and a note names them. Each column costs about 10 KB
#: of memory through parsing and the Parquet copy whatever its length (100,000 columns: ~1 GB, ~10 s), so this bounds
#: what one small, very wide file can take.
MAX_COLUMNS = 100_000
#: the delimited-text form every parse error message names
CSV_FORM = (
    "one record per line with the same number of fields on every line; a field holding the delimiter, a "
    "quote or a line break enclosed in double quotes, a quote inside it doubled (RFC 4180)"
)


def _detect_grid(text: str, delim: str, path: Path) -> list[list[str]]:
    """The first rows of ``text`` for header detection (whole rows, however wide; see DETECT_* above). Raises
    DataError when not even the first row can be read (e.g. one field over Python's csv limit of 131,072
    characters)."""
    grid: list[list[str]] = []
    chars = 0
    reader = csv.reader(io.StringIO(text), delimiter=delim)
    try:
        for row in reader:
            grid.append(row)
            chars += sum(len(v) for v in row) + len(row)
            n = len(grid)
            if (
                n >= DETECT_ROWS
                or (chars >= DETECT_CHARS and n >= DETECT_MIN_ROWS)
                or (chars >= DETECT_MAX_CHARS and n >= 3)
            ):
                break
    except csv.Error as exc:
        if not grid:
            raise DataError(
                f"cannot parse {path.name} as delimited text: line {reader.line_num}: {exc}. Accepted form: {CSV_FORM}"
            ) from exc
    return grid


def _parse_error(path: Path, delim: str, enc: str, exc: Exception) -> DataError:
    """A clear DataError for a pandas parse failure: the line, what is wrong in plain words, the accepted form."""
    raw = " ".join(str(exc).split())
    m = re.search(r"EOF inside string starting at row (\d+)", raw)
    if m:
        what = f'a quoted field opened on line {int(m.group(1)) + 1} is never closed (a " without its closing ")'
    elif m := re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", raw):
        what = f"line {m.group(2)} has {m.group(3)} fields where the lines before it have {m.group(1)}"
    else:
        what = raw.replace("Error tokenizing data. ", "").replace("C error: ", "")[:300]
    return DataError(
        f"cannot parse {path.name} as delimited text (delimiter {delim!r}, encoding {enc}): {what}. "
        f"Accepted form: {CSV_FORM}. Fix the file, or pass header_rows when the header was misdetected"
    )


def load_csv(
    path: Path, header_rows: int | None, suffix: str, skip_rows: int | None = None
) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    """A delimited text file (``suffix``: its lower-case extension, the delimiter fallback) as ``(frame, options,
    notes)``; options: ``{encoding, delimiter, header_rows, skipped_rows, data_start_row, detected: {sheet: None,
    range: None, header_rows, skipped_above, skipped_below: [], pivot: False, tidy: False}}``. ``skip_rows``: lines
    dropped above the table before header detection.

    Every column is loaded up to :data:`MAX_COLUMNS` (100,000; header detection reads whole rows, however wide);
    further columns, and columns without a header and without any value, are left out and named in the notes.

    Raises:
        DataError: an empty file, or one that is not delimited text in the accepted form (the message names the
            line and what is wrong there: an unclosed quote, a line with more fields than the others).
    """
    # long function: the CSV path's fallbacks (dialect, preamble, header) in the order they are tried
    import pandas as pd

    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"{path} is empty (no bytes or only whitespace): nothing to load")
    enc = detect_encoding(raw)
    try:
        text = raw.decode(enc)
    except (UnicodeDecodeError, LookupError):
        enc, text = "latin-1", raw.decode("latin-1")
    del raw
    sample = text[:64_000]
    dialect = csv_dialect(text)
    if dialect is not None:
        delim = dialect[0]
    else:
        try:
            delim = csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
        except csv.Error:
            delim = "\t" if suffix in (".tsv", ".tab") else ","
    grid = _detect_grid(text, delim, path)
    notes: list[str] = []
    seen_width = max((len(r) for r in grid), default=0)
    usecols = None
    if seen_width > MAX_COLUMNS:
        grid = [r[:MAX_COLUMNS] for r in grid]
        usecols = list(range(MAX_COLUMNS))
        notes.append(
            f"columns {MAX_COLUMNS + 1:,} to {seen_width:,} ({seen_width - MAX_COLUMNS:,} columns) not "
            f"loaded: a frame holds at most {MAX_COLUMNS:,} columns"
        )
    if skip_rows:
        if skip_rows >= len(grid) and len(grid) < DETECT_ROWS:
            raise DataError(
                f"skip_rows={skip_rows} skips every line of {path.name} ({len(grid)} lines): nothing is left to load"
            )
        grid = [[] for _ in grid[:skip_rows]] + grid[skip_rows:]
    grid, preamble, pre_text = skip_preamble(grid) if header_rows is None and not skip_rows else (grid, 0, [])
    if pre_text:
        notes.append(
            f"{preamble} preamble line(s) (titles/notes, fewer fields than the table) skipped: {pre_text[0]!r}"
        )
    t = detect_table(grid, header_rows)
    st, decision, full, rows, groups = None, None, None, None, None
    if header_rows is None and not skip_rows and usecols is None:
        full = all_rows(text, delim) if len(text) <= MODEL_CSV_CHARS else None
        if full is not None and preamble:
            full = [[] for _ in full[:preamble]] + full[preamble:]
        st = classify(full if full is not None else grid)
        decision = csv_decision(st, t)
        try:
            t, rows, groups = apply_decision(decision, grid, t, full, detect_table)
        except ValueError as exc:
            raise _parse_error(path, delim, enc, exc) from exc
    try:
        if decision is not None and rows is not None:
            body = frame_of_rows(rows)
        else:
            body = pd.read_csv(
                io.StringIO(text),
                sep=delim,
                header=None,
                skiprows=t["data_start"],
                skip_blank_lines=True,
                on_bad_lines="error",
                usecols=usecols,
            )
    except pd.errors.EmptyDataError:
        body = pd.DataFrame()
    except (pd.errors.ParserError, ValueError, csv.Error) as exc:
        raise _parse_error(path, delim, enc, exc) from exc
    notes = list(t["notes"]) + notes
    width = body.shape[1]
    if width > WIDE_COLUMNS:  # read_csv gives one block per column: joined, column-wise work takes seconds, not minutes
        body = body.copy()
    if width:
        detected = dict(zip(t["columns"], t["names"]))
        has_value = body.notna().any(axis=0).to_numpy()
        keep = [j for j in range(width) if j in detected or has_value[j]]
        taken = set(t["names"])
        names = []
        for j in keep:
            name = detected.get(j)
            if name is None:  # a value in a column the detection rows left empty (it starts further down)
                name = f"col_{j + 1}"
                while name in taken:
                    name += "_"
                taken.add(name)
            names.append(name)
        kept = set(keep)
        dropped = [j + 1 for j in range(width) if j not in kept]
        if len(keep) < width:
            body = body.iloc[:, keep]
        body.columns = names
        if dropped:
            shown = ", ".join(str(j) for j in dropped[:20]) + (", ..." if len(dropped) > 20 else "")
            notes.append(
                f"{len(dropped)} column(s) without a header and without any value dropped (column number(s) {shown})"
            )
    else:
        body = pd.DataFrame(columns=t["names"])
    if groups is not None and len(groups) == len(body):  # section labels (group lines) as a column
        body.insert(0, "group" if "group" not in body.columns else "group_", groups)
        notes.append(
            f"section label line(s) moved into column {body.columns[0]!r}: {sorted(set(filter(None, groups)))[:5]}"
        )
    before = len(body)
    body = body.dropna(how="all").reset_index(drop=True)
    if before - len(body):
        notes.append(f"{before - len(body)} empty row(s) dropped")
    body, markers, more = numbers_and_markers(body)
    notes.extend(more)
    above = [n.split(": ", 1)[-1].strip("'\"") for n in t["notes"] if "skipped as a title" in n]
    if preamble:
        above = pre_text + above
    opts = {
        "encoding": enc,
        "delimiter": delim,
        "header_rows": len(t["header"]),
        "skipped_rows": t["top"],
        "data_start_row": t["data_start"] + 1,
        "detected": {
            "sheet": None,
            "range": None,
            "header_rows": len(t["header"]),
            "skipped_above": above,
            "skipped_below": list(t.get("summary_below", []))[:20],
            "pivot": False,
            "tidy": False,
        },
    }
    if markers:
        opts["detected"]["markers"] = markers
    if st is not None and decision is not None:
        report_structure(opts, notes, st, decision, full if full is not None else grid)
    if skip_rows:
        opts["skip_rows"] = skip_rows
    return body, opts, notes


def load_excel(
    path: Path,
    sheet: str | int | None,
    header_rows: int | None,
    limits: ArchiveLimits | None = None,
    *,
    skip_rows: int | None = None,
    cell_range: str | None = None,
    tidy: bool = False,
    sheet_limits: SheetLimits | None = None,
) -> list[tuple[str, pd.DataFrame | None, dict[str, Any], list[str]]]:
    """The sheets of a workbook (``sheet``: a name or 0-based index, None: every sheet) as ``[(title, frame,
    options, notes)]``; an empty sheet gives ``frame`` None and a note.

    The table of each sheet is found by :func:`aisac_core.data.regions.detect_region` (notes and titles above and
    below skipped, offset tables, multi-row headers, pivot exports); ``header_rows``, ``skip_rows`` (rows dropped
    above the table), ``cell_range`` (an A1 range such as ``"B3:F20"``: only that block) and ``tidy`` (unpivot a
    pivot export into ``labels..., levels..., value``) override it. ``options``: ``{sheet, header_rows,
    skipped_rows, data_start_row, detected: {sheet, range, header_rows, skipped_above, skipped_below, pivot,
    tidy}}``.

    Before openpyxl opens it, the workbook (a ZIP archive) is checked against ``limits`` (None: the defaults, 512 MB
    unpacked and ratio 100; :func:`aisac_core.archives.check_archive`), so a decompression bomb is refused without
    being unpacked. Each sheet is read sparsely and bounded by ``sheet_limits`` (:mod:`aisac_core.data.sheetgrid`:
    the used range from the cells, not the declared dimension; cells and merged areas limited), and loads or fails
    on its own: a failing sheet gives ``frame`` None, ``options {"error"}`` and a note naming it.

    Raises:
        DataError: a workbook refused as a possible decompression bomb, one that cannot be opened, an unknown
            sheet, ``cell_range`` without ``sheet`` on a workbook of several sheets; for the one sheet asked for by
            ``sheet``: a malformed or out-of-sheet range, ``skip_rows``/``header_rows`` leaving no data, ``tidy`` on
            a table with no numeric value columns, a sheet past a limit.
    """
    import openpyxl

    try:
        check_archive(path, limits)
    except ArchiveError as exc:
        raise DataError(str(exc)) from exc
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from exc
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # openpyxl warns about unsupported images, headers, extensions
        try:  # read-only: sheets streamed, merged ranges not expanded into cell objects (sheetgrid)
            wb = openpyxl.load_workbook(path, data_only=True, read_only=True)
        except Exception as exc:  # noqa: BLE001 - zipfile.BadZipFile, KeyError, InvalidFileException ...
            raise WorkbookOpenError(
                f"cannot open {path} as an Excel workbook ({type(exc).__name__}: {exc}); .xlsx/.xlsm are read "
                "with openpyxl, .xls/.ods with calamine",
                f"{type(exc).__name__}: {str(exc)[:200]}",
            ) from exc
    try:
        sheets = _pick_sheets(path, list(wb.worksheets), list(wb.sheetnames), sheet, cell_range)

        def read(ws: Any) -> SheetGrid:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return read_sheet(wb, ws, sheet_limits, cell_range)

        return _sheets_out(sheets, read, sheet is not None, header_rows, skip_rows, cell_range, tidy)
    finally:
        wb.close()


def _pick_sheets(
    path: Path, sheets: list[Any], names: list[str], sheet: str | int | None, cell_range: Any
) -> list[Any]:
    """The sheets asked for (a name or 0-based index; None: all). Raises DataError for an unknown sheet or a range
    without a sheet on a workbook of several."""
    if sheet is not None:
        if isinstance(sheet, int) or (isinstance(sheet, str) and sheet.isdigit() and sheet not in names):
            k = int(sheet)
            if not 0 <= k < len(sheets):
                raise DataError(
                    f"sheet index {k} out of range: {path.name} has {len(sheets)} sheet(s) ({', '.join(names)})"
                )
            sheets = [sheets[k]]
        elif sheet in names:
            sheets = [sheets[names.index(sheet)]]
        else:
            raise DataError(f"no sheet {sheet!r} in {path.name}; its sheets: {', '.join(names)}")
    if cell_range is not None and len(sheets) > 1:
        raise DataError(
            f"range {cell_range!r} needs sheet=: {path.name} has {len(sheets)} sheets ({', '.join(names[:20])})"
        )
    return sheets


def _sheets_out(
    sheets: list[Any],
    read: Any,
    one: bool,
    header_rows: int | None,
    skip_rows: int | None,
    cell_range: str | None,
    tidy: bool,
) -> list[tuple[str, pd.DataFrame | None, dict[str, Any], list[str]]]:
    """Each sheet read (``read(sheet) -> SheetGrid``) and turned into a frame on its own: a sheet that fails (a
    limit, a bad option, an internal error) gives ``frame`` None, ``options {"error": message}`` and a note naming
    it, and the other sheets still load. With ``one`` (a sheet asked for by name) its error is raised."""
    out: list[tuple[str, pd.DataFrame | None, dict[str, Any], list[str]]] = []
    for item in sheets:
        title = item if isinstance(item, str) else str(item.title)
        try:
            g = read(item)
            if not g.n_cells:
                if cell_range is not None:
                    raise DataError(f"sheet {title!r} is empty: range {cell_range!r} holds no values")
                out.append((title, None, {}, [f"sheet {title!r} is empty: skipped"]))
                continue
            res = sheet_frame(
                title,
                g.grid,
                g.merged,
                g.bold,
                header_rows=header_rows,
                skip_rows=skip_rows,
                cell_range=cell_range,
                tidy=tidy,
                sheet=g,
            )
            res[3].extend(g.notes)
            out.append(res)
        except DataError as exc:
            if one:
                raise
            text = str(exc)
            text = text.removeprefix(f"sheet {title!r}: ")
            msg = f"sheet {title!r} not loaded: {text} (data_inspect maps the sheet)"
            out.append((title, None, {"error": msg}, [msg]))
        except (RecursionError, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001 - one sheet's detection failure must not lose the others
            msg = (
                f"sheet {title!r} not loaded: the layout detection failed ({type(exc).__name__}: {str(exc)[:200]}); "
                "data_inspect shows its layout, then pass sheet= with range=, header_rows= or skip_rows="
            )
            if one:
                raise DataError(msg) from exc
            out.append((title, None, {"error": msg}, [msg]))
    return out


def sheet_frame(
    title: str,
    grid: list[list[Any]],
    merged: list[tuple[int, int, int, int]],
    bold: set[tuple[int, int]] | None = None,
    *,
    header_rows: int | None = None,
    skip_rows: int | None = None,
    cell_range: str | None = None,
    tidy: bool = False,
    sheet: SheetGrid | None = None,
) -> tuple[str, pd.DataFrame, dict[str, Any], list[str]]:
    """One sheet's grid (merged cells filled) as ``(title, frame, options, notes)`` (see :func:`load_excel`);
    ``sheet``: the compact grid's :class:`SheetGrid` (its row/column maps and styles), None for a grid from A1.
    Raises DataError for bad ``header_rows``/``skip_rows``/``cell_range``, or ``tidy`` without value columns."""
    # long function: a sheet's structure decisions (header, group column, summary blocks) applied in order
    import pandas as pd

    rmap = sheet.rows if sheet is not None else list(range(len(grid)))
    t = detect_region(
        grid,
        merged,
        bold,
        header_rows=header_rows,
        skip_rows=skip_rows,
        cell_range=cell_range,
        rows_map=rmap,
        cols_map=sheet.cols if sheet is not None else None,
        halign=sheet.halign() if sheet is not None else None,
    )
    learned = None
    if header_rows is None and skip_rows is None and cell_range is None:
        learned = sheet_structure(grid, merged, t, rmap)
        reread = model_override(learned, rmap) if not t.get("ambiguous") else None
        if reread is not None and learned is not None:  # the model's confident reading replaces the rules'
            t = detect_region(
                grid,
                merged,
                bold,
                header_rows=reread[0],
                skip_rows=reread[1],
                rows_map=rmap,
                cols_map=sheet.cols if sheet is not None else None,
                halign=sheet.halign() if sheet is not None else None,
            )
            learned = (learned[0], learned[0]["confidence"], [reread[2]])
    cols, names = t["columns"], t["names"]
    rows = [[grid[i][j] if j < len(grid[i]) else None for j in cols] for i in t["body"]]
    notes = list(t["notes"])
    if t["header"]:  # a repeat of the header row further down (stacked tables, page breaks) is not data
        leaf = [
            _cell_text(v) if _kind(v) != "empty" else ""
            for v in (grid[t["header"][-1]][j] if j < len(grid[t["header"][-1]]) else None for j in cols)
        ]
        before = len(rows)
        rows = [
            r
            for r in rows
            if sum(bool(x) for x in leaf) < 2 or [_cell_text(v) if _kind(v) != "empty" else "" for v in r] != leaf
        ]
        if before - len(rows):
            notes.append(f"{before - len(rows)} repeat(s) of the header row inside the table dropped")
    if learned is not None and not tidy:  # section labels the model reads as group lines: a column, not rows
        rows, names = section_column(rows, t["body"], rmap, set(learned[0].get("group_rows", [])), names, notes)
    df = pd.DataFrame(rows, columns=names).dropna(how="all").reset_index(drop=True).infer_objects()
    df, markers, more = numbers_and_markers(df)
    notes.extend(more)
    if t["skipped_above"]:
        notes.append(
            f"{len(t['skipped_above'])} row(s) above the table skipped as titles/notes: "
            f"{t['skipped_above'][0][:80]!r}" + (" ..." if len(t["skipped_above"]) > 1 else "")
        )
    if t["skipped_below"]:
        notes.append(
            f"{len(t['skipped_below'])} row(s) below the table skipped as notes/footnotes: "
            f"{t['skipped_below'][0][:80]!r}" + (" ..." if len(t["skipped_below"]) > 1 else "")
        )
    if merged:
        notes.append(f"{len(merged)} merged range(s) filled with their top-left value")
    pivot = t["pivot"]
    if tidy:
        if pivot is None:
            numeric = [k for k, c in enumerate(df.columns) if pd.api.types.is_numeric_dtype(df[c])]
            first = numeric[0] if numeric else 0
            if not numeric or first == 0 or numeric != list(range(first, df.shape[1])):
                raise DataError(
                    f"tidy=True needs a pivot table (text row-label columns on the left, numeric value "
                    f"columns on the right); sheet {title!r} ({t['range']}) has columns "
                    f"{list(df.columns)[:8]}: pass range= to select the pivot block, or leave tidy off"
                )
            pivot = {
                "labels": cols[:first],
                "values": cols[first:],
                "levels": ["variable"]
                if len(t["header"]) < 2
                else [f"variable_{n + 1}" for n in range(len(t["header"]))],
            }
        df = unpivot(df, len(pivot["labels"]), pivot["levels"])
        notes.append(
            f"pivot unpivoted: {len(pivot['labels'])} row-label column(s), header level(s) "
            f"{', '.join(pivot['levels'])}, {len(pivot['values'])} value column(s) -> {len(df)} rows"
        )
    elif pivot is not None:
        notes.append(
            "looks like a pivot export (row labels, header levels over numeric cells): tidy=True gives the long frame"
        )
    top = t["header"][0] if t["header"] else (t["body"][0] if t["body"] else 0)
    detected = {
        "sheet": title,
        "range": t["range"],
        "header_rows": len(t["header"]),
        "skipped_above": t["skipped_above"][:20],
        "skipped_below": t["skipped_below"][:20],
        "pivot": pivot is not None,
        "tidy": bool(tidy),
        "other_tables": t.get("other_tables", [])[:10],
        "confidence": t.get("confidence", 1.0),
    }
    if markers:
        detected["markers"] = markers
    if learned is not None:
        structure, conf, more = learned
        detected["structure"] = {k: v for k, v in structure.items() if k != "group_rows"}  # used above, not shown
        detected["confidence"] = round(min(detected["confidence"], conf if conf is not None else 1.0), 4)
        notes.extend(more)
        if detected["confidence"] < CONFIDENT_SHEET and not t.get("ambiguous"):
            t["ambiguous"] = {
                "reasons": [f"the table-structure model gives this reading confidence {conf:.2f}"],
                "alternatives": [detected["structure"].get("model_reading") or {"header_rows": "as loaded"}],
            }
    if t.get("ambiguous"):
        detected["ambiguous"] = t["ambiguous"]
    if t.get("ambiguous") or detected["other_tables"]:
        detected["inspect"] = "data_inspect maps this sheet's blocks; data_load with range= reads another reading"
    opts = {
        "sheet": title,
        "header_rows": len(t["header"]),
        "skipped_rows": rmap[top] if top < len(rmap) else top,
        "data_start_row": (rmap[t["body"][0]] + 1) if t["body"] else None,
        "detected": detected,
    }
    if skip_rows:
        opts["skip_rows"] = skip_rows
    if cell_range:
        opts["range"] = cell_range
    return title, df, opts, notes


def load_json(path: Path, lines: bool) -> pd.DataFrame:
    """A JSON file (records, columns or ``{"key": [records]}``) or, with ``lines``, JSON Lines as a frame. Raises
    DataError for invalid JSON, JSON nested deeper than Python's recursion limit (about 1,000 levels), or JSON that
    is not a table."""
    try:
        return _load_json(path, lines)
    except RecursionError as exc:  # json_normalize of records nested hundreds of levels deep
        raise DataError(
            f"{path.name} is nested too deeply to turn into a table (over about "
            f"{sys.getrecursionlimit():,} levels): use a list of flat records"
        ) from exc


def _load_json(path: Path, lines: bool) -> pd.DataFrame:
    import pandas as pd

    if lines:
        try:
            return pd.read_json(path, lines=True)
        except ValueError as exc:
            raise DataError(f"cannot read {path} as JSON Lines (one JSON record per line): {str(exc)[:300]}") from exc
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except RecursionError as exc:
        raise DataError(
            f"{path.name} is nested too deeply to read: Python's JSON parser stops at about "
            f"{sys.getrecursionlimit():,} levels of lists/objects. Accepted form: a list of records "
            '([{"column": value, ...}, ...]), an object of columns, or {"key": [records]}, nested a '
            "few levels at most"
        ) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{path} is not valid JSON: {str(exc)[:300]}") from exc
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) == 1 and all(isinstance(x, dict) for x in lists[0]):
            data = lists[0]
        elif all(isinstance(v, list) for v in data.values()):
            return pd.DataFrame(data)
        elif all(isinstance(v, dict) for v in data.values()):
            return pd.DataFrame.from_dict(data, orient="index")
        else:
            data = [data]
    if isinstance(data, list) and all(isinstance(x, dict) for x in data):
        return pd.json_normalize(data)
    if isinstance(data, list):
        return pd.DataFrame({"value": data})
    raise DataError(f"{path}: JSON of type {type(data).__name__} is not a table; use a list of records")


def load_parquet(path: Path) -> pd.DataFrame:
    """A Parquet file as a frame. Raises DataError for a damaged file or one that is not Parquet."""
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except Exception as exc:
        raise DataError(
            f"cannot read {path} as Parquet ({type(exc).__name__}: {exc}); the file is damaged or not Parquet"
        ) from exc


def arrow_safe(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """String column names, and object columns of mixed types turned into text (Parquet needs one type)."""
    df = df.copy()
    df.columns = [str(c) for c in df.columns]
    changed = []
    for i, t in enumerate(df.dtypes.tolist()):
        if str(t) == "object":
            col = df.iloc[:, i]
            types = {type(v) for v in col.dropna()}
            if len(types) > 1 and not types <= {int, float, bool}:
                as_text = col.map(lambda v: v if v is None or (isinstance(v, float) and v != v) else str(v))
                df.isetitem(i, as_text.to_numpy(dtype=object))
                changed.append(df.columns[i])
    return df, ([f"mixed-type column(s) stored as text: {', '.join(changed[:10])}"] if changed else [])
