"""The DataFrame registry: named tables loaded from files of the registered roots, with lineage.

Storage (docs/data.md "Registry"): every registered frame is written once as Parquet under
``<data_dir>/frames/`` and described by a :class:`DataFrameEntry` row in the shared SQL store (source path and
sha256, loader options in force, header rows detected; for derived frames the parent and the operation). Frames
are cached in-process (the last :data:`CACHE_FRAMES` used); after a restart they are read back from Parquet, so
nothing registered is lost.

Loaders: CSV/TSV/TXT (encoding: BOM, else strict UTF-8, else charset-normalizer's best guess, else latin-1;
delimiter: ``csv.Sniffer`` over ``, ; TAB |``), Excel ``.xlsx``/``.xlsm`` (every sheet, merged cells filled with
their top-left value), Parquet, JSON (records, columns or ``{"key": [records]}``) and JSON Lines.

Header detection (CSV and Excel, :func:`detect_table`): leading rows that are empty or hold a single cell in a
wider table are titles/notes and skipped; then every following row that has a text cell in a column whose
cells below (or in the lower half of the first 200 rows) are >= 80 % numeric is a header row (up to 10; blank rows between them are skipped). A table
without numeric columns gets one header row when its first row is all text. Multi-row headers are joined per
column with ``|`` (upper rows forward-filled across empty cells, repeated parts collapsed): brain_networks.csv's
``network / node / hemi`` rows give columns like ``1|1|lh``. ``header_rows`` overrides the count.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import json
import re
import threading
from collections import OrderedDict
from datetime import date, datetime, time as dtime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, select

from aisac_core.store.tables import DataFrameEntry
from aisac_core.errors import AisacError, resolve_in_roots

if TYPE_CHECKING:
    import pandas as pd

CACHE_FRAMES = 16
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
MAX_HEADER_ROWS = 10
NUMERIC_SHARE = 0.8
DETECT_ROWS = 200
NA_STRINGS = {"", "na", "n/a", "nan", "null", "none", "-", "--", "#n/a"}
AGG_FUNCS = ("count", "size", "sum", "mean", "median", "min", "max", "std", "var", "nunique", "first", "last")
FORMATS = {".csv": "csv", ".tsv": "csv", ".tab": "csv", ".txt": "csv", ".xlsx": "excel", ".xlsm": "excel",
           ".parquet": "parquet", ".pq": "parquet", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}


class DataError(AisacError):
    """Bad input to a data tool: unknown frame, unreadable file, refused query, bad argument."""


# -- detection ------------------------------------------------------------------------------------------------
def _kind(v: Any) -> str:
    """'empty', 'num' (numbers, booleans, dates, numeric strings) or 'text'."""
    if v is None:
        return "empty"
    if isinstance(v, (bool, int, float, datetime, date, dtime)):
        if isinstance(v, float) and v != v:
            return "empty"
        return "num"
    s = str(v).strip()
    if s.lower() in NA_STRINGS:
        return "empty"
    try:
        float(s)
        return "num"
    except ValueError:
        pass
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", s) or re.fullmatch(r"[-+]?\d+(\.\d+)?\s?%", s):
        return "num"  # 1,234.5 and 12 %
    return "text"


def detect_table(grid: list[list[Any]], header_rows: int | None = None,
                 merged: set[tuple[int, int]] | None = None) -> dict[str, Any]:
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
    while top < len(sample) and (count(sample[top]) == 0 or (count(sample[top]) == 1 and width >= 2
                                                             and count(sample[top + 1] if top + 1 < len(sample) else []) != 1)):
        if count(sample[top]):
            txt = next(str(v) for v in grid[top] if _kind(v) != "empty")
            notes.append(f"row {top + 1} skipped as a title/note: {txt[:80]!r}")
        top += 1
    # a column is numeric when >= 80 % of its cells below the first row, or of its cells in the lower half of the
    # sampled rows (short tables under a multi-row header), are numbers
    lower = sample[top + max(1, (len(sample) - top) // 2):]

    def share_numeric(rows: list[list[str]], j: int, need: int) -> bool:
        col = [r[j] for r in rows if j < len(r) and r[j] != "empty"]
        return len(col) >= need and sum(k == "num" for k in col) / len(col) >= NUMERIC_SHARE

    numeric = [share_numeric(sample[top + 1:top + 101], j, 2) or share_numeric(lower, j, 2 if len(lower) >= 4 else 1)
               for j in range(width)]
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
    used = [j for j in range(width) if any(j < len(sample[r]) and sample[r][j] != "empty"
                                           for r in header + list(range(data_start, len(sample))))]
    # names: upper header rows forward-filled across empty cells
    levels = []
    for n, r in enumerate(header):
        row = [grid[r][j] if j < len(grid[r]) else None for j in range(width)]
        vals = ["" if _kind(v) == "empty" and not (isinstance(v, str) and v.strip()) else _cell_text(v) for v in row]
        if n < len(header) - 1:
            last = ""
            for j in range(width):
                if vals[j]:
                    last = vals[j]
                elif last:
                    vals[j] = last
                    filled.add((r, j))
        levels.append(vals)
    names, seen = [], {}
    for j in used:
        parts: list[str] = []
        for r, lv in zip(header, levels):
            p = lv[j]
            if p and not (parts and parts[-1] == p and (r, j) in filled):
                parts.append(p)
        name = "|".join(parts) or f"col_{j + 1}"
        if name in seen:
            seen[name] += 1
            name = f"{name}.{seen[name]}"
        else:
            seen[name] = 0
        names.append(name)
    if len(header) > 1:
        notes.append(f"{len(header)}-row header (rows {', '.join(str(h + 1) for h in header)}): level names "
                     "joined with '|'")
    return {"top": top, "header": header, "data_start": data_start, "columns": used, "names": names,
            "notes": notes}


def _cell_text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v).strip()


# -- loaders --------------------------------------------------------------------------------------------------
def _detect_encoding(raw: bytes) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    try:
        raw.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(raw[:200_000]).best()
    return best.encoding if best is not None else "latin-1"


def _load_csv(path: Path, header_rows: int | None, suffix: str) -> tuple["pd.DataFrame", dict, list[str]]:
    import pandas as pd

    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"{path} is empty (no bytes or only whitespace): nothing to load")
    enc = _detect_encoding(raw)
    try:
        text = raw.decode(enc)
    except (UnicodeDecodeError, LookupError):
        enc, text = "latin-1", raw.decode("latin-1")
    sample = text[:64_000]
    try:
        delim = csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        delim = "\t" if suffix in (".tsv", ".tab") else ","
    grid = []
    for n, row in enumerate(csv.reader(io.StringIO(sample), delimiter=delim)):
        grid.append(row)
        if n >= DETECT_ROWS:
            break
    if len(grid) > DETECT_ROWS:
        grid = grid[:DETECT_ROWS]
    t = detect_table(grid, header_rows)
    try:
        body = pd.read_csv(io.StringIO(text), sep=delim, header=None, skiprows=t["data_start"],
                           skip_blank_lines=True, on_bad_lines="error")
    except pd.errors.EmptyDataError:
        body = pd.DataFrame()
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(f"cannot parse {path} as delimited text (delimiter {delim!r}, encoding {enc}): {exc}. "
                        "Check the file, or pass header_rows") from exc
    cols = [j for j in t["columns"] if j < body.shape[1]] if body.shape[1] else []
    body = body.iloc[:, cols] if cols else pd.DataFrame(columns=t["names"])
    body.columns = t["names"][:len(cols)] if cols else t["names"]
    before = len(body)
    body = body.dropna(how="all").reset_index(drop=True)
    notes = list(t["notes"])
    if before - len(body):
        notes.append(f"{before - len(body)} empty row(s) dropped")
    opts = {"encoding": enc, "delimiter": delim, "header_rows": len(t["header"]),
            "skipped_rows": t["top"], "data_start_row": t["data_start"] + 1}
    return body, opts, notes


def _load_excel(path: Path, sheet: str | int | None, header_rows: int | None) -> list[tuple[str, "pd.DataFrame", dict, list[str]]]:
    import openpyxl
    import pandas as pd

    try:
        wb = openpyxl.load_workbook(path, data_only=True)
    except Exception as exc:  # zipfile.BadZipFile, KeyError, InvalidFileException ...
        raise DataError(f"cannot open {path} as an Excel workbook ({type(exc).__name__}: {exc}); only .xlsx/.xlsm "
                        "are read (save .xls files as .xlsx)") from exc
    sheets = wb.worksheets
    if sheet is not None:
        if isinstance(sheet, int) or (isinstance(sheet, str) and sheet.isdigit() and sheet not in wb.sheetnames):
            k = int(sheet)
            if not 0 <= k < len(sheets):
                raise DataError(f"sheet index {k} out of range: {path.name} has {len(sheets)} sheet(s) "
                                f"({', '.join(wb.sheetnames)})")
            sheets = [sheets[k]]
        elif sheet in wb.sheetnames:
            sheets = [wb[sheet]]
        else:
            raise DataError(f"no sheet {sheet!r} in {path.name}; its sheets: {', '.join(wb.sheetnames)}")
    out = []
    for ws in sheets:
        grid = [list(r) for r in ws.iter_rows(values_only=True)]
        merged: set[tuple[int, int]] = set()
        for rng in ws.merged_cells.ranges:  # merged cells: every cell carries the top-left value
            v = ws.cell(rng.min_row, rng.min_col).value
            for r in range(rng.min_row - 1, min(rng.max_row, len(grid))):
                for c in range(rng.min_col - 1, rng.max_col):
                    if c < len(grid[r]):
                        grid[r][c] = v
                        if (r, c) != (rng.min_row - 1, rng.min_col - 1):
                            merged.add((r, c))
        if not any(_kind(v) != "empty" for row in grid for v in row):
            out.append((ws.title, None, {}, [f"sheet {ws.title!r} is empty: skipped"]))
            continue
        t = detect_table(grid, header_rows, merged)
        rows = [[r[j] if j < len(r) else None for j in t["columns"]] for r in grid[t["data_start"]:]]
        df = pd.DataFrame(rows, columns=t["names"])
        before = len(df)
        df = df.dropna(how="all").reset_index(drop=True).infer_objects()
        notes = list(t["notes"])
        if before - len(df):
            notes.append(f"{before - len(df)} empty row(s) dropped")
        if ws.merged_cells.ranges:
            notes.append(f"{len(ws.merged_cells.ranges)} merged range(s) filled with their top-left value")
        opts = {"sheet": ws.title, "header_rows": len(t["header"]), "skipped_rows": t["top"],
                "data_start_row": t["data_start"] + 1}
        out.append((ws.title, df, opts, notes))
    return out


def _load_json(path: Path, lines: bool) -> "pd.DataFrame":
    import pandas as pd

    if lines:
        try:
            return pd.read_json(path, lines=True)
        except ValueError as exc:
            raise DataError(f"cannot read {path} as JSON Lines: {exc}") from exc
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{path} is not valid JSON: {exc}") from exc
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


def _arrow_safe(df: "pd.DataFrame") -> tuple["pd.DataFrame", list[str]]:
    """String column names, and object columns of mixed types turned into text (Parquet needs one type)."""
    df = df.copy()
    df.columns = [str(c) for c in df.columns]
    changed = []
    for c in df.columns:
        if df[c].dtype == object:
            types = {type(v) for v in df[c].dropna()}
            if len(types) > 1 and not types <= {int, float, bool}:
                df[c] = df[c].map(lambda v: v if v is None or (isinstance(v, float) and v != v) else str(v))
                changed.append(c)
    return df, ([f"mixed-type column(s) stored as text: {', '.join(changed[:10])}"] if changed else [])


# -- query safety ---------------------------------------------------------------------------------------------
_ALLOWED_NODES = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Name, ast.Constant,
                  ast.Load, ast.And, ast.Or, ast.Not, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In,
                  ast.NotIn, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub,
                  ast.UAdd, ast.BitAnd, ast.BitOr, ast.Invert, ast.List, ast.Tuple, ast.Attribute, ast.Call,
                  ast.keyword)
#: methods and accessors a query may use (``col.str.contains('x')``, ``col.isna()``, ``col.dt.year``)
QUERY_ATTRS = frozenset({"str", "dt", "contains", "startswith", "endswith", "lower", "upper", "strip", "len",
                         "isna", "notna", "isnull", "notnull", "isin", "between", "abs", "year", "month", "day",
                         "hour", "minute", "second", "dayofweek", "match", "fullmatch"})
_BACKTICK = "__aisac_bt_"


def check_query(expr: str) -> str:
    """Validate a ``DataFrame.query`` expression and return it unchanged.

    Rule (docs/data.md "data_query"): the expression is parsed with :mod:`ast` (backtick-quoted column names
    replaced by placeholders) and every node must be a comparison, boolean or arithmetic operation, a name, a
    constant, a list/tuple, or an attribute/method among :data:`QUERY_ATTRS` called with constant arguments.
    ``@`` (local variable references), names or attributes starting with ``_`` (dunders, ``__import__``), any other
    attribute (``pd.io...``), any other call, and arithmetic between constants only (``2 ** 10 ** 10``, ``'x' *
    10 ** 9``: it would run in the server) are refused. At most 2,000 characters.

    Raises:
        DataError: naming the refused construct.
    """
    if not isinstance(expr, str) or not expr.strip():
        raise DataError("expr is empty: give a pandas query such as \"temperature > 300 and site == 'A'\"")
    if len(expr) > 2000:
        raise DataError(f"expr has {len(expr)} characters; the limit is 2,000")
    out, i, n, k = [], 0, len(expr), 0
    while i < n:  # strip backtick names, refuse '@' outside string literals
        ch = expr[i]
        if ch in "'\"":
            j = i + 1
            while j < n and expr[j] != ch:
                j += 2 if expr[j] == "\\" else 1
            out.append(expr[i:j + 1])
            i = j + 1
        elif ch == "`":
            j = expr.find("`", i + 1)
            if j < 0:
                raise DataError("expr has an unclosed backtick: quote column names like `my column`")
            out.append(f"{_BACKTICK}{k}")
            k += 1
            i = j + 1
        elif ch == "@":
            raise DataError("expr refused: '@' (references to local variables) is not allowed; write constants "
                            "into the expression")
        else:
            out.append(ch)
            i += 1
    try:
        tree = ast.parse("".join(out).strip(), mode="eval")
    except SyntaxError as exc:
        raise DataError(f"expr is not a valid query expression ({exc.msg}); example: \"a > 1 and b == 'x'\"") from exc
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise DataError(f"expr refused: {type(node).__name__} is not allowed in a query (only comparisons, "
                            "and/or/not, arithmetic, constants, lists and column names)")
        if isinstance(node, ast.Name) and node.id.startswith("_") and not node.id.startswith(_BACKTICK):
            raise DataError(f"expr refused: name {node.id!r} (names starting with '_' are not allowed)")
        if isinstance(node, ast.Attribute) and (node.attr.startswith("_") or node.attr not in QUERY_ATTRS):
            raise DataError(f"expr refused: attribute {node.attr!r}; allowed: {', '.join(sorted(QUERY_ATTRS))}")
        if isinstance(node, ast.BinOp) and not any(isinstance(x, ast.Name) for x in ast.walk(node)):
            raise DataError("expr refused: arithmetic between constants (e.g. 2 ** 10 ** 10) is not evaluated; "
                            "write the value itself")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Attribute):
                raise DataError("expr refused: only methods such as col.str.contains('x') or col.isin([1, 2]) may "
                                "be called")
            for a in list(node.args) + [kw.value for kw in node.keywords]:
                if not all(isinstance(x, (ast.Constant, ast.List, ast.Tuple, ast.UnaryOp, ast.USub, ast.UAdd,
                                          ast.Load)) for x in ast.walk(a)):
                    raise DataError("expr refused: method arguments must be constants")
    return expr


# -- registry -------------------------------------------------------------------------------------------------
def _json_rows(df: "pd.DataFrame") -> list[dict]:
    return json.loads(df.to_json(orient="records", date_format="iso", default_handler=str))


def _dtypes(df: "pd.DataFrame", limit: int = 200) -> dict[str, str]:
    return {str(c): str(t) for c, t in list(df.dtypes.items())[:limit]}


class Registry:
    """Registered frames of one store (SQL rows + Parquet files + an in-process LRU cache). Thread-safe."""

    def __init__(self, core: Any) -> None:
        from aisac_core.store.sql import ensure_tables

        self.core = core
        self.settings = core.settings
        self.dir = self.settings.data_dir / "frames"
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._results: OrderedDict[str, tuple[Any, dict]] = OrderedDict()  # query/aggregate results by id
        self._lock = threading.RLock()
        ensure_tables(core.engine, DataFrameEntry)

    # -- helpers
    def _check_name(self, name: str) -> str:
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise DataError(f"frame name {name!r} is invalid: 1-128 letters, digits, '_', '.', ':' or '-', starting "
                            "with a letter or digit")
        return name

    def _parquet(self, name: str) -> Path:
        return self.dir / f"{hashlib.sha1(name.encode()).hexdigest()[:20]}.parquet"

    def _entry(self, name: str) -> DataFrameEntry:
        with Session(self.core.engine) as db:
            e = db.get(DataFrameEntry, name)
        if e is None:
            raise DataError(f"unknown frame {name!r}; data_list shows the registered frames (data_load adds one)")
        return e

    def frame(self, name: str) -> "pd.DataFrame":
        """The frame registered as ``name`` (or a query/aggregate result id). Raises DataError when unknown."""
        import pandas as pd

        with self._lock:
            if name in self._results:
                return self._results[name][0]
            if name in self._cache:
                self._cache.move_to_end(name)
                return self._cache[name]
        e = self._entry(name)
        try:
            df = pd.read_parquet(e.parquet_path)
        except Exception as exc:
            raise DataError(f"the stored copy of frame {name!r} ({e.parquet_path}) cannot be read ({exc}); load it "
                            "again with data_load") from exc
        self._remember(name, df)
        return df

    def _remember(self, name: str, df: Any) -> None:
        with self._lock:
            self._cache[name] = df
            self._cache.move_to_end(name)
            while len(self._cache) > CACHE_FRAMES:
                self._cache.popitem(last=False)

    def _register(self, name: str, df: "pd.DataFrame", **lineage: Any) -> dict:
        df, notes = _arrow_safe(df)
        notes = list(lineage.pop("notes", [])) + notes
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self._parquet(name)
        tmp = path.with_suffix(".tmp")
        try:
            df.to_parquet(tmp, index=False)
        except Exception as exc:
            tmp.unlink(missing_ok=True)
            raise DataError(f"frame {name!r} cannot be stored as Parquet ({type(exc).__name__}: {exc})") from exc
        tmp.replace(path)
        with Session(self.core.engine) as db:
            old = db.get(DataFrameEntry, name)
            if old is not None:
                db.delete(old)
                db.flush()
            e = DataFrameEntry(name=name, rows=len(df), n_columns=df.shape[1], parquet_path=str(path),
                               columns_json=json.dumps([{"name": c, "dtype": str(t)} for c, t in df.dtypes.items()]),
                               notes_json=json.dumps(notes), **lineage)
            db.add(e)
            db.commit()
            db.refresh(e)
        self._remember(name, df)
        return {**self._summary(e), "replaced": old is not None}

    def _summary(self, e: DataFrameEntry) -> dict:
        cols = json.loads(e.columns_json)
        out = {"name": e.name, "kind": e.kind, "rows": e.rows, "columns": e.n_columns,
               "column_names": [c["name"] for c in cols[:100]],
               "dtypes": {c["name"]: c["dtype"] for c in cols[:100]}, "notes": json.loads(e.notes_json),
               "created_at": e.created_at.isoformat() if e.created_at else None}
        if e.kind == "file":
            out["source"] = {"path": e.source_path, "sha256": e.source_sha256, "format": e.format, "sheet": e.sheet,
                             "options": json.loads(e.options_json)}
        else:
            out["parent"] = e.parent
            out["operation"] = json.loads(e.operation_json or "null")
        return out

    # -- tools
    def load(self, path: str, name: str | None = None, sheet: str | int | None = None,
             header_rows: int | None = None) -> dict:
        """Load a file of a registered root and register it (replacing a frame of the same name).

        Args:
            path: file path (absolute, or relative to the first root); .csv .tsv .tab .txt .xlsx .xlsm .parquet
                .pq .json .jsonl .ndjson.
            name: frame name (default: the file name without extension); for a workbook read whole, every
                sheet is registered as ``<name>:<sheet>`` (just ``<name>`` when it has one sheet).
            sheet: Excel sheet name or 0-based index (default: every sheet).
            header_rows: number of header rows (0-10), overriding detection (CSV and Excel).

        Result: ``{frames: [{name, kind, rows, columns, column_names, dtypes, source: {path, sha256, format, sheet,
        options: {header_rows, encoding?, delimiter?, ...}}, notes, replaced}], notes}``.

        Raises:
            PathOutsideRootsError: the path is outside the registered roots (``..``, symlinks).
            DataError: missing, empty, oversized, corrupt or unsupported file; bad name, sheet or header_rows.
        """
        import pandas as pd

        s = self.settings
        p = resolve_in_roots(path, list(s.roots) + list(s.catalog_roots), what="path")
        if not p.is_file():
            raise DataError(f"no file at {p}" + (" (it is a folder)" if p.is_dir() else ""))
        fmt = FORMATS.get(p.suffix.lower())
        if fmt is None:
            raise DataError(f"unsupported file type {p.suffix or '(none)'!r}; supported: "
                            f"{', '.join(sorted(FORMATS))}" + (" (save .xls workbooks as .xlsx)"
                                                               if p.suffix.lower() == ".xls" else ""))
        size = p.stat().st_size
        if size > s.data_max_file_mb * 1024 * 1024:
            raise DataError(f"{p} has {size / 1e6:.0f} MB; the limit is {s.data_max_file_mb:g} MB "
                            "(AISAC_DATA_MAX_FILE_MB)")
        if size == 0:
            raise DataError(f"{p} is empty (0 bytes): nothing to load")
        if header_rows is not None and not 0 <= int(header_rows) <= MAX_HEADER_ROWS:
            raise DataError(f"header_rows must be 0..{MAX_HEADER_ROWS}, got {header_rows}")
        if sheet is not None and fmt != "excel":
            raise DataError(f"sheet applies to Excel workbooks only; {p.name} is {fmt}")
        base = self._check_name(name or re.sub(r"[^A-Za-z0-9_.-]", "_", p.stem).lstrip("_.-")[:100] or "frame")
        from aisac_core.hashing import sha256_file

        sha = sha256_file(p)
        common = {"kind": "file", "format": fmt, "source_path": str(p), "source_sha256": sha}
        frames, notes = [], []
        if fmt == "excel":
            loaded = _load_excel(p, sheet, header_rows)
            real = [x for x in loaded if x[1] is not None]
            notes += [n for x in loaded if x[1] is None for n in x[3]]
            if not real:
                raise DataError(f"{p.name}: every sheet is empty; nothing to load")
            for title, df, opts, n in real:
                fname = base if len(loaded) == 1 or sheet is not None else \
                    self._check_name(f"{base}:{re.sub(r'[^A-Za-z0-9_.-]', '_', title)}"[:128])
                frames.append(self._register(fname, df, sheet=title, options_json=json.dumps(opts), notes=n,
                                             **common))
            return {"frames": frames, "notes": notes}
        opts: dict[str, Any] = {}
        n: list[str] = []
        if fmt == "csv":
            df, opts, n = _load_csv(p, header_rows, p.suffix.lower())
        elif fmt == "parquet":
            if header_rows is not None:
                raise DataError("header_rows applies to CSV and Excel files only")
            try:
                df = pd.read_parquet(p)
            except Exception as exc:
                raise DataError(f"cannot read {p} as Parquet ({type(exc).__name__}: {exc}); the file is damaged or "
                                "not Parquet") from exc
        else:
            df = _load_json(p, lines=fmt == "jsonl")
        if df.shape[1] == 0:
            raise DataError(f"{p} holds no columns: nothing to load")
        if df.empty:
            n.append("the table has a header but no rows")
        frames.append(self._register(base, df, options_json=json.dumps(opts), notes=n, **common))
        return {"frames": frames, "notes": notes}

    def list(self) -> dict:
        """``{frames: [summary without column lists], count}``, newest first."""
        with Session(self.core.engine) as db:
            rows = db.exec(select(DataFrameEntry).order_by(DataFrameEntry.created_at.desc())).all()
        out = []
        for e in rows:
            s = self._summary(e)
            s.pop("dtypes", None)
            s["column_names"] = s["column_names"][:20]
            out.append(s)
        return {"frames": out, "count": len(out)}

    def preview(self, name: str, n: int = 10, where: str = "head") -> dict:
        """``{name, where, n, shape: [rows, cols], dtypes, rows: [records]}``; where = head | tail | sample
        (sample: ``DataFrame.sample(random_state=0)``, reproducible). n: 1..500."""
        if not 1 <= int(n) <= 500:
            raise DataError(f"n must be 1..500, got {n}")
        if where not in ("head", "tail", "sample"):
            raise DataError(f"where must be head, tail or sample, got {where!r}")
        df = self.frame(name)
        part = df.head(n) if where == "head" else df.tail(n) if where == "tail" else \
            df.sample(min(n, len(df)), random_state=0)
        return {"name": name, "where": where, "n": len(part), "shape": list(df.shape), "dtypes": _dtypes(df),
                "rows": _json_rows(part)}

    def describe(self, name: str, columns: list[str] | None = None) -> dict:
        """Per-column statistics: ``{name, shape, columns: {col: {dtype, count, nulls, mean?, std?, min?, 25%?,
        50%?, 75%?, max?, unique?, top?, freq?}}}`` (pandas ``describe(include="all")``)."""
        df = self.frame(name)
        cols = self._columns(df, columns)
        sub = df[cols] if cols else df
        if sub.shape[1] > 200:
            sub = sub.iloc[:, :200]
        desc = sub.describe(include="all") if len(sub) else None
        out = {}
        for c in sub.columns:
            d = {"dtype": str(sub[c].dtype), "count": int(sub[c].count()), "nulls": int(sub[c].isna().sum())}
            if desc is not None and c in desc.columns:
                for stat, v in desc[c].items():
                    if stat == "count" or v is None or (isinstance(v, float) and v != v):
                        continue
                    d[str(stat)] = v.item() if hasattr(v, "item") else (v if isinstance(v, (int, float)) else str(v))
            out[str(c)] = d
        return {"name": name, "shape": list(df.shape), "columns": out,
                "truncated": df.shape[1] > 200 and not columns}

    def _columns(self, df: Any, columns: list[str] | None) -> list[str]:
        if not columns:
            return []
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise DataError(f"unknown column(s) {missing}; the frame's columns: {list(map(str, df.columns[:50]))}")
        return list(columns)

    def _keep_result(self, df: Any, lineage: dict) -> str:
        rid = f"result:{hashlib.sha1(json.dumps(lineage, sort_keys=True, default=str).encode()).hexdigest()[:12]}"
        with self._lock:
            self._results[rid] = (df, lineage)
            while len(self._results) > 32:
                self._results.popitem(last=False)
        return rid

    def query(self, name: str, expr: str, columns: list[str] | None = None, limit: int = 50) -> dict:
        """Rows matching a pandas ``DataFrame.query`` expression (checked by :func:`check_query`).

        Result: ``{name, expr, matched, returned, truncated, columns, rows: [records], result_id}``; the full
        match is kept as ``result_id`` for data_save. limit: 1..1000."""
        if not 1 <= int(limit) <= 1000:
            raise DataError(f"limit must be 1..1000, got {limit}")
        check_query(expr)
        df = self.frame(name)
        cols = self._columns(df, columns)
        try:
            res = df.query(expr, engine="python", local_dict={}, global_dict={})
        except Exception as exc:
            raise DataError(f"query failed: {type(exc).__name__}: {exc}. Column names with spaces or symbols need "
                            "backticks, e.g. `my col` > 3") from exc
        if cols:
            res = res[cols]
        rid = self._keep_result(res, {"parent": name, "operation": {"op": "query", "expr": expr, "columns": cols}})
        return {"name": name, "expr": expr, "matched": len(res), "returned": min(limit, len(res)),
                "truncated": len(res) > limit, "columns": [str(c) for c in res.columns],
                "rows": _json_rows(res.head(limit)), "result_id": rid}

    def aggregate(self, name: str, by: list[str] | None, metrics: dict[str, list[str] | str],
                  limit: int = 200) -> dict:
        """Group by ``by`` (none: the whole frame) and compute ``metrics`` = {column: [function, ...]} with
        functions among :data:`AGG_FUNCS`. Result: ``{name, by, groups, returned, truncated, columns, rows,
        result_id}`` (columns named ``<column>_<function>``)."""
        df = self.frame(name)
        by = list(by or [])
        self._columns(df, by)
        if not metrics or not isinstance(metrics, dict):
            raise DataError("metrics is empty: give {column: [function, ...]}, e.g. {\"yield\": [\"mean\", \"max\"]}")
        spec: dict[str, list[str]] = {}
        for col, fns in metrics.items():
            fns = [fns] if isinstance(fns, str) else list(fns)
            bad = [f for f in fns if f not in AGG_FUNCS]
            if bad:
                raise DataError(f"unknown aggregate function(s) {bad}; allowed: {', '.join(AGG_FUNCS)}")
            spec[col] = fns
        self._columns(df, list(spec))
        import pandas as pd

        try:
            parts = {}
            for col, fns in spec.items():
                for f in fns:
                    if by:
                        parts[f"{col}_{f}"] = df.groupby(by, dropna=False)[col].agg(f)
                    else:
                        parts[f"{col}_{f}"] = pd.Series([df[col].agg(f)])
            res = pd.DataFrame(parts).reset_index() if by else pd.DataFrame(parts)
        except Exception as exc:
            raise DataError(f"aggregate failed: {type(exc).__name__}: {exc} (e.g. mean of a text column)") from exc
        if not 1 <= int(limit) <= 5000:
            raise DataError(f"limit must be 1..5000, got {limit}")
        rid = self._keep_result(res, {"parent": name, "operation": {"op": "aggregate", "by": by, "metrics": spec}})
        return {"name": name, "by": by, "groups": len(res), "returned": min(limit, len(res)),
                "truncated": len(res) > limit, "columns": [str(c) for c in res.columns],
                "rows": _json_rows(res.head(limit)), "result_id": rid}

    def save(self, name: str, new_name: str) -> dict:
        """Register a query/aggregate result (``result_id``) or a copy of a frame as ``new_name``, with lineage
        (parent frame and operation). Result: the new frame's summary. Raises DataError for an unknown
        name/result (results live in the server process) or a bad new name."""
        self._check_name(new_name)
        with self._lock:
            res = self._results.get(name)
        if res is not None:
            df, lin = res
            return self._register(new_name, df, kind="derived", parent=lin["parent"],
                                  operation_json=json.dumps(lin["operation"], default=str))
        if name.startswith("result:"):
            raise DataError(f"unknown result {name!r}: results of data_query/data_aggregate are kept for the last 32 "
                            "operations of this server process; run the query again")
        df = self.frame(name)
        return self._register(new_name, df, kind="derived", parent=name, operation_json=json.dumps({"op": "copy"}))

    def to_session(self, name: str, session: str, variable: str | None = None) -> dict:
        """Copy a frame into a code session as a pandas DataFrame variable (default: the frame name made an
        identifier). Result: ``{name, session, variable, shape, path}`` (the Parquet copy inside the session dir)."""
        df = self.frame(name)
        var = variable or re.sub(r"\W", "_", name).lstrip("_0123456789") or "df"
        sb = self.core.sandbox
        d = sb.session_dir(session) / "inputs"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{var}.parquet"
        df.to_parquet(path, index=False)
        reply = sb.load_frame(session, var, path)
        return {"name": name, "session": session, "variable": var, "shape": reply.get("shape"), "path": str(path),
                "notes": reply.get("notes", [])}
