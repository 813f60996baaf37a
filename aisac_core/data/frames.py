"""The DataFrame registry: named tables loaded from files of the registered roots, with lineage.

Storage (docs/data.md "Registry"): every registered frame is written once as Parquet under
``<data_dir>/frames/`` and described by a :class:`DataFrameEntry` row in the shared SQL store (source path and
sha256, loader options in force, header rows detected; for derived frames the parent and the operation). Frames
are cached in-process (the last :data:`CACHE_FRAMES` used); after a restart they are read back from Parquet, so
nothing registered is lost.

Files are read by :mod:`aisac_core.data.loaders` (formats, encodings, header detection); queries and aggregates
are checked and run by :mod:`aisac_core.data.query`.
"""

from __future__ import annotations

import io
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sqlmodel import Session, col, select

from aisac_core.archives import ArchiveLimits
from aisac_core.data.errors import DataError
from aisac_core.data.loaders import MAX_COLUMNS, MAX_HEADER_ROWS, WIDE_COLUMNS, arrow_safe
from aisac_core.data.query import AGG_FUNCS, aggregate_frame, check_columns, check_query, metric_spec, select_rows
from aisac_core.data.readers import read_table, table_loader_for
from aisac_core.data.results import (
    AggregateResult,
    DescribeResult,
    FrameSummary,
    InspectResult,
    ListResult,
    LoadResult,
    PreviewResult,
    QueryResult,
    ToSessionResult,
)
from aisac_core.data.sheetgrid import SheetLimits
from aisac_core.errors import quote_path, resolve_in_roots
from aisac_core.hashing import sha256_file, sha256_json, sha256_text
from aisac_core.sessions.names import check_variable
from aisac_core.settings import DataSettings, HostRoots
from aisac_core.store.sql import lock
from aisac_core.store.tables import DataFrameEntry

if TYPE_CHECKING:
    import pandas as pd
    from sqlalchemy.engine import Engine

    from aisac_core.sessions.manager import SandboxManager

__all__ = ["AGG_FUNCS", "CACHE_FRAMES", "DataError", "FrameRegistry", "NAME_RE", "TableLoader", "check_query"]

#: a table loader an extension registers: the file's path in, a pandas DataFrame out
TableLoader = Callable[[Path], Any]

CACHE_FRAMES = 16
#: columns a frame summary lists by name (the count is always complete; a note says when the list is cut)
SUMMARY_COLUMNS = 100
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")  # matched whole (fullmatch)


def _json_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(df.to_json(orient="records", date_format="iso", default_handler=str))
    return rows


def _dtypes(df: pd.DataFrame, limit: int = 200) -> dict[str, str]:
    return {str(c): str(t) for c, t in list(df.dtypes.items())[:limit]}


class FrameRegistry:
    """Registered frames of one store (SQL rows + Parquet files + an in-process LRU cache). Thread-safe.

    Args:
        engine: the store's SQL engine (the ``data_frame`` table).
        frames_dir: the folder of the Parquet copies (``<data_dir>/frames``, created on the first registration).
        loaders: table loaders by lower-case suffix (``{".ext": loader}``) that extensions register
            (:func:`aisac_core.plugins.table_loaders`).
        settings: the data settings (file size and archive limits).
        roots: the registered folders files are loaded from (``roots`` + ``catalog_roots``).
        sandbox: gives the code-session manager (called by :meth:`to_session` only, so it starts on demand).
    """

    def __init__(
        self,
        engine: Engine,
        frames_dir: Path,
        loaders: Mapping[str, TableLoader],
        settings: DataSettings,
        roots: Sequence[Path],
        sandbox: Callable[[], SandboxManager],
    ) -> None:
        self.engine = engine
        self.dir = frames_dir
        self.loaders = dict(loaders)
        self.settings = settings
        self._roots = list(roots)
        self.limits = ArchiveLimits(
            max_unpacked_mb=float(settings.max_unpacked_mb), max_ratio=float(settings.max_unpack_ratio)
        )
        self._sandbox = sandbox
        self._cache: OrderedDict[str, pd.DataFrame] = OrderedDict()
        self._results: OrderedDict[str, tuple[pd.DataFrame, dict[str, Any]]] = (
            OrderedDict()
        )  # query/aggregate results by id
        self._lock = threading.RLock()

    @property
    def roots(self) -> list[Path]:
        """The registered folders files are loaded from (``roots`` + ``catalog_roots``)."""
        return list(self._roots)

    def _allowed(self, host: HostRoots | None) -> list[Path]:
        """The folders of a request: the requesting host's roots and catalogue roots (``host``), else the
        registered ones."""
        return self.roots if host is None else [*host.roots, *host.catalog_roots]

    # -- helpers
    def _check_name(self, name: str) -> str:
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise DataError(
                f"frame name {name!r} is invalid: 1-128 letters, digits, '_', '.', ':' or '-', starting "
                "with a letter or digit"
            )
        return name

    def _parquet(self, name: str) -> Path:
        return self.dir / f"{sha256_text(name)[:20]}.parquet"

    def _entry(self, name: str) -> DataFrameEntry:
        with Session(self.engine) as db:
            e = db.get(DataFrameEntry, name)
        if e is None:
            raise DataError(f"unknown frame {name!r}; data_list shows the registered frames (data_load adds one)")
        return e

    def frame(self, name: str) -> pd.DataFrame:
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
            raise DataError(
                f"the stored copy of frame {name!r} ({e.parquet_path}) cannot be read ({exc}); load it "
                "again with data_load"
            ) from exc
        self._remember(name, df)
        return df

    def _remember(self, name: str, df: Any) -> None:
        with self._lock:
            self._cache[name] = df
            self._cache.move_to_end(name)
            while len(self._cache) > CACHE_FRAMES:
                self._cache.popitem(last=False)

    def _register(self, name: str, df: pd.DataFrame, **lineage: Any) -> FrameSummary:
        df, notes = arrow_safe(df)
        notes = list(lineage.pop("notes", [])) + notes
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self._parquet(name)
        tmp = path.with_suffix(".tmp")
        # a wide frame: no dictionary pages or statistics per column (they are most of a wide file's size and of
        # the memory writing it takes)
        wide: dict[str, Any] = (
            {"use_dictionary": False, "write_statistics": False} if df.shape[1] > WIDE_COLUMNS else {}
        )
        try:
            df.to_parquet(tmp, index=False, **wide)
        except Exception as exc:
            tmp.unlink(missing_ok=True)
            raise DataError(f"frame {name!r} cannot be stored as Parquet ({type(exc).__name__}: {exc})") from exc
        tmp.replace(path)
        with Session(self.engine) as db:
            lock(db, "frame", name)
            old = db.get(DataFrameEntry, name)
            old_path = old.parquet_path if old is not None else None
            if old is not None:
                db.delete(old)
                db.flush()
            e = DataFrameEntry(
                name=name,
                rows=len(df),
                n_columns=df.shape[1],
                parquet_path=str(path),
                columns_json=json.dumps([{"name": c, "dtype": str(t)} for c, t in df.dtypes.items()]),
                notes_json=json.dumps(notes),
                **lineage,
            )
            db.add(e)
            db.commit()
            db.refresh(e)
        if old_path and Path(old_path) != path and Path(old_path).parent == self.dir:
            Path(old_path).unlink(missing_ok=True)  # this store's copy under an earlier file-naming scheme
        self._remember(name, df)
        return {**self._summary(e), "replaced": old is not None}

    def _summary(self, e: DataFrameEntry) -> FrameSummary:
        cols = json.loads(e.columns_json)
        notes = json.loads(e.notes_json)
        if len(cols) > SUMMARY_COLUMNS:
            notes = notes + [
                f"column_names and dtypes list the first {SUMMARY_COLUMNS} of {len(cols):,} columns (all "
                "are loaded; data_describe(columns=[...]) and data_query(columns=[...]) reach any)"
            ]
        out: FrameSummary = {
            "name": e.name,
            "kind": e.kind,
            "rows": e.rows,
            "columns": e.n_columns,
            "column_names": [c["name"] for c in cols[:SUMMARY_COLUMNS]],
            "dtypes": {c["name"]: c["dtype"] for c in cols[:SUMMARY_COLUMNS]},
            "notes": notes,
            "created_at": e.created_at.isoformat() if e.created_at else None,
        }
        if e.kind == "file":
            options = json.loads(e.options_json)
            if isinstance(options, dict) and "cells" in options:  # a PDF table's cell anchors: data_preview shows them
                options = {k: v for k, v in options.items() if k != "cells"}
                options["cell_anchors"] = len(json.loads(e.options_json)["cells"])
            out["source"] = {
                "path": e.source_path,
                "sha256": e.source_sha256,
                "format": e.format,
                "sheet": e.sheet,
                "options": options,
            }
        else:
            out["parent"] = e.parent
            out["operation"] = json.loads(e.operation_json or "null")
        return out

    # -- tools
    def load(
        self,
        path: str,
        name: str | None = None,
        sheet: str | int | None = None,
        header_rows: int | None = None,
        skip_rows: int | None = None,
        cell_range: str | None = None,
        tidy: bool = False,
        roots: HostRoots | None = None,
    ) -> LoadResult:
        """Load a file of a registered root and register it (replacing a frame of the same name). ``roots``: the
        requesting host's roots (None: the registered ones).

        Args:
            path: file path (absolute, or relative to the first root); .csv .tsv .tab .txt .xlsx .xlsm .xls .ods .parquet
                .pq .json .jsonl .ndjson (:data:`aisac_core.rag.formats.TABLE_FORMATS`), or a suffix an extension
                registers a loader for (``aisac_register_table_loaders``).
            name: frame name (default: the file name without extension); for a workbook read whole, every
                sheet is registered as ``<name>:<sheet>`` (just ``<name>`` when it has one sheet).
            sheet: Excel sheet name or 0-based index (default: every sheet).
            header_rows: number of header rows (0-10), overriding detection (CSV and Excel).
            skip_rows: rows (lines) to drop above the table (0-1,000,000), overriding title/note detection (CSV and
                Excel; with ``cell_range``, counted from the range's first row).
            cell_range: Excel A1 range such as ``"B3:F20"``: only that block is read (Excel; needs ``sheet`` for a
                workbook of several sheets).
            tidy: unpivot a pivot export (row labels, header levels over numeric cells) into a long frame
                ``labels..., levels..., value`` (Excel).

        Result: ``{frames: [{name, kind, rows, columns, column_names, dtypes, detected: {sheet, range, header_rows,
        skipped_above, skipped_below, pivot, tidy, other_tables, confidence, ambiguous?: {reasons, alternatives},
        inspect?}, source: {path, sha256, format, sheet, options: {header_rows,
        skipped_rows, data_start_row, detected, encoding?, delimiter?, ...}}, notes, replaced}], notes}``.

        A workbook's sheets load one by one: a sheet that fails (a limit, an internal error) is named in ``notes``
        and the others load; a sheet whose layout is ambiguous (``detected.confidence`` < 0.75) is registered as a
        plain grid with ``col_N`` names and ``detected.ambiguous`` lists why and the alternatives.

        Raises:
            PathOutsideRootsError: the path is outside the registered roots (``..``, symlinks).
            BadPathError: an empty path, a NUL byte in it, or a symlink loop.
            DataError: missing, empty, oversized, corrupt or unsupported file; an XLSX refused as a possible
                decompression bomb (AISAC_DATA_MAX_UNPACKED_MB / _MAX_UNPACK_RATIO); a CSV not in the accepted form
                (the line and the problem named); JSON nested too deeply; bad name, sheet or header_rows;
                skip_rows negative or leaving nothing; a malformed range or one outside the sheet; range or tidy
                on a file that is not a workbook; tidy on a table without numeric value columns; header_rows or
                skip_rows on a file whose loader does not take them; an extension's loader that fails or returns no
                DataFrame.
        """
        s = self.settings
        p = resolve_in_roots(path, self._allowed(roots), what="path")
        try:
            is_file, is_dir = p.is_file(), p.is_dir()
        except OSError as exc:  # e.g. a name longer than the file system allows
            raise DataError(f"cannot read {quote_path(path)}: {exc.strerror or exc}") from exc
        if not is_file:
            raise DataError(f"no file at {quote_path(p)}" + (" (it is a folder)" if is_dir else ""))
        # the built-in loaders and the extensions' alike (aisac_register_table_loaders), one dispatch: read_table
        loader = table_loader_for(self.loaders, p)
        size = p.stat().st_size
        if size > s.max_file_mb * 1024 * 1024:
            raise DataError(f"{p} has {size / 1e6:.0f} MB; the limit is {s.max_file_mb:g} MB (AISAC_DATA_MAX_FILE_MB)")
        if size == 0:
            raise DataError(f"{p} is empty (0 bytes): nothing to load")
        if header_rows is not None and not 0 <= int(header_rows) <= MAX_HEADER_ROWS:
            raise DataError(f"header_rows must be 0..{MAX_HEADER_ROWS}, got {header_rows}")
        if skip_rows is not None and (isinstance(skip_rows, bool) or not 0 <= int(skip_rows) <= 1_000_000):
            raise DataError(f"skip_rows must be 0..1,000,000 (rows to drop above the table), got {skip_rows!r}")
        base = self._check_name(name or re.sub(r"[^A-Za-z0-9_.-]", "_", p.stem).lstrip("_.-")[:100] or "frame")
        sha = sha256_file(p)
        fmt, loaded = read_table(
            loader,
            p,
            limits=self.limits,
            sheet_limits=SheetLimits(int(s.max_sheet_cells), int(s.max_merged_cells)),
            sheet=sheet,
            header_rows=header_rows,
            skip_rows=skip_rows,
            cell_range=cell_range,
            tidy=tidy,
        )
        notes = [n for x in loaded if x[1] is None for n in x[3]]  # empty sheets, skipped
        if all(x[1] is None for x in loaded):
            errors = [x[2]["error"] for x in loaded if x[2].get("error")]
            if errors:
                raise DataError(f"{p.name}: no sheet loaded: " + "; ".join(errors[:5]))
            raise DataError(f"{p.name}: every sheet is empty; nothing to load")
        common = {"kind": "file", "format": fmt, "source_path": str(p), "source_sha256": sha}
        frames: list[FrameSummary] = []
        for title, df, opts, n in loaded:
            if df is None:
                continue
            n = list(n)
            if title is None:  # a file of one table (a workbook's sheets are checked by the region detection)
                if df.shape[1] == 0:
                    raise DataError(f"{p} holds no columns: nothing to load")
                if df.shape[1] > MAX_COLUMNS:
                    n.append(
                        f"columns {MAX_COLUMNS + 1:,} to {df.shape[1]:,} ({df.shape[1] - MAX_COLUMNS:,} columns) "
                        f"not loaded: a frame holds at most {MAX_COLUMNS:,} columns"
                    )
                    df = df.iloc[:, :MAX_COLUMNS]
                if df.empty:
                    n.append("the table has a header but no rows")
            fname = (
                base
                if len(loaded) == 1 or sheet is not None or title is None
                else self._check_name(f"{base}:{re.sub(r'[^A-Za-z0-9_.-]', '_', title)}"[:128])
            )
            frames.append(
                self._register(fname, df, sheet=title, options_json=json.dumps(opts, default=str), notes=n, **common)
            )
            if title is not None or "detected" in opts:  # a workbook's sheet always says what was detected
                frames[-1]["detected"] = opts.get("detected")
        return {"frames": frames, "notes": notes}

    def inspect(self, path: str, sheet: str | None = None, roots: HostRoots | None = None) -> InspectResult:
        """A compact map of a workbook's sheets for choosing data_load's options (:mod:`aisac_core.data.inspect`):
        ``{path, sheets: [{sheet, used, blocks: [A1], map}], notes}``, each map within 4,000 characters.

        Raises:
            PathOutsideRootsError, BadPathError: as :meth:`load`. DataError: no such file, not a workbook
                (.xlsx .xlsm .xls .ods), one that cannot be opened, an unknown sheet.
        """
        from aisac_core.data.inspect import inspect_workbook

        p = resolve_in_roots(path, self._allowed(roots), what="path")
        if not p.is_file():
            raise DataError(f"no file at {quote_path(p)}")
        s = self.settings
        return cast(  # a plain dict of the InspectResult shape
            InspectResult, inspect_workbook(p, sheet, SheetLimits(int(s.max_sheet_cells), int(s.max_merged_cells)))
        )

    def cells(self, name: str) -> list[dict[str, Any]]:
        """The cells of a frame read out of a PDF table (:mod:`aisac_core.data.pdftables`), one per non-empty cell:
        ``{row, column, text, anchor}``: ``row`` the frame's 0-based row (None for a header cell), ``column`` the frame
        column, ``text`` the cell text, ``anchor`` its :class:`~aisac_core.evidence.anchor.Anchor` (with ``bbox``)
        that ``rag_verify_anchor`` re-checks. ``[]`` for any other frame.

        Raises:
            DataError: no frame of that name."""
        with self._lock:
            if name in self._results:
                return []
        e = self._entry(name)
        if e.kind != "file" or e.format != "pdf":
            return []
        cells = json.loads(e.options_json).get("cells") or []
        return [c for c in cells if isinstance(c, dict)]

    def preview(self, name: str, n: int = 10, where: str = "head") -> PreviewResult:
        """``{name, where, n, shape: [rows, cols], dtypes, rows: [records], cells?}``; where = head | tail | sample
        (sample: ``DataFrame.sample(random_state=0)``, reproducible). n: 1..500. ``cells``, for a frame read out of
        a PDF table: the cell anchors (:meth:`cells`) of the header and of the rows shown."""
        if not 1 <= int(n) <= 500:
            raise DataError(f"n must be 1..500, got {n}")
        if where not in ("head", "tail", "sample"):
            raise DataError(f"where must be head, tail or sample, got {where!r}")
        df = self.frame(name)
        part = (
            df.head(n)
            if where == "head"
            else df.tail(n)
            if where == "tail"
            else df.sample(min(n, len(df)), random_state=0)
        )
        out: PreviewResult = {
            "name": name,
            "where": where,
            "n": len(part),
            "shape": list(df.shape),
            "dtypes": _dtypes(df),
            "rows": _json_rows(part),
        }
        shown = {int(i) for i in part.index if isinstance(i, int) or hasattr(i, "__index__")}
        cells = [c for c in self.cells(name) if c.get("row") is None or c.get("row") in shown]
        if cells:
            out["cells"] = cells
        return out

    def describe(self, name: str, columns: list[str] | None = None) -> DescribeResult:
        """Per-column statistics: ``{name, shape, columns: {col: {dtype, count, nulls, mean?, std?, min?, 25%?,
        50%?, 75%?, max?, unique?, top?, freq?}}}`` (pandas ``describe(include="all")``)."""
        df = self.frame(name)
        cols = check_columns(df, columns)
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
        return {"name": name, "shape": list(df.shape), "columns": out, "truncated": df.shape[1] > 200 and not columns}

    def _keep_result(self, df: pd.DataFrame, lineage: dict[str, Any]) -> str:
        rid = f"result:{sha256_json(lineage)[:12]}"
        with self._lock:
            self._results[rid] = (df, lineage)
            while len(self._results) > 32:
                self._results.popitem(last=False)
        return rid

    def query(self, name: str, expr: str, columns: list[str] | None = None, limit: int = 50) -> QueryResult:
        """Rows matching a pandas ``DataFrame.query`` expression (checked by :func:`check_query`).

        Result: ``{name, expr, matched, returned, truncated, columns, rows: [records], result_id}``; the full
        match is kept as ``result_id`` for data_save. limit: 1..1000."""
        if not 1 <= int(limit) <= 1000:
            raise DataError(f"limit must be 1..1000, got {limit}")
        check_query(expr)
        df = self.frame(name)
        cols = check_columns(df, columns)
        res = select_rows(df, expr, cols)
        rid = self._keep_result(res, {"parent": name, "operation": {"op": "query", "expr": expr, "columns": cols}})
        return {
            "name": name,
            "expr": expr,
            "matched": len(res),
            "returned": min(limit, len(res)),
            "truncated": len(res) > limit,
            "columns": [str(c) for c in res.columns],
            "rows": _json_rows(res.head(limit)),
            "result_id": rid,
        }

    def aggregate(
        self, name: str, by: list[str] | None, metrics: dict[str, list[str] | str], limit: int = 200
    ) -> AggregateResult:
        """Group by ``by`` (none: the whole frame) and compute ``metrics`` = {column: [function, ...]} with
        functions among :data:`AGG_FUNCS`. Result: ``{name, by, groups, returned, truncated, columns, rows,
        result_id}`` (columns named ``<column>_<function>``)."""
        df = self.frame(name)
        by = list(by or [])
        check_columns(df, by)
        spec = metric_spec(metrics)
        check_columns(df, list(spec))
        res = aggregate_frame(df, by, spec)
        if not 1 <= int(limit) <= 5000:
            raise DataError(f"limit must be 1..5000, got {limit}")
        rid = self._keep_result(res, {"parent": name, "operation": {"op": "aggregate", "by": by, "metrics": spec}})
        return {
            "name": name,
            "by": by,
            "groups": len(res),
            "returned": min(limit, len(res)),
            "truncated": len(res) > limit,
            "columns": [str(c) for c in res.columns],
            "rows": _json_rows(res.head(limit)),
            "result_id": rid,
        }

    def save(self, name: str, new_name: str) -> FrameSummary:
        """Register a query/aggregate result (``result_id``) or a copy of a frame as ``new_name``, with lineage
        (parent frame and operation). Result: the new frame's summary. Raises DataError for an unknown
        name/result (results live in the server process) or a bad new name."""
        self._check_name(new_name)
        with self._lock:
            res = self._results.get(name)
        if res is not None:
            df, lin = res
            return self._register(
                new_name,
                df,
                kind="derived",
                parent=lin["parent"],
                operation_json=json.dumps(lin["operation"], default=str),
            )
        if name.startswith("result:"):
            raise DataError(
                f"unknown result {name!r}: results of data_query/data_aggregate are kept for the last 32 "
                "operations of this server process; run the query again"
            )
        df = self.frame(name)
        return self._register(new_name, df, kind="derived", parent=name, operation_json=json.dumps({"op": "copy"}))

    def to_session(self, name: str, session: str, variable: str | None = None) -> ToSessionResult:
        """Copy a frame into a code session as a pandas DataFrame variable (default: the frame name made an
        identifier). Result: ``{name, session, variable, shape, path}`` (the Parquet copy inside the session dir)."""
        df = self.frame(name)
        var = variable or re.sub(r"[^A-Za-z0-9_]", "_", name).lstrip("_0123456789")[:64] or "df"
        sb = self._sandbox()
        check_variable(var)  # before anything is written: the variable names the Parquet copy
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        path = sb.write_input(session, f"{var}.parquet", buf.getvalue())  # no link a cell planted is followed
        reply = sb.load_frame(session, var, path)
        return {
            "name": name,
            "session": session,
            "variable": var,
            "shape": reply.get("shape"),
            "path": str(path),
            "notes": reply.get("notes", []),
        }

    def list(self) -> ListResult:
        """``{frames: [summary without column lists], count}``, newest first."""
        with Session(self.engine) as db:
            rows = db.exec(select(DataFrameEntry).order_by(col(DataFrameEntry.created_at).desc())).all()
        out: list[FrameSummary] = []
        for e in rows:
            s = self._summary(e)
            s.pop("dtypes", None)
            s["column_names"] = s["column_names"][:20]
            out.append(s)
        return {"frames": out, "count": len(out)}
