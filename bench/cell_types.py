"""Cell types: the learned line classifier of table structure (:mod:`aisac_core.data.structure`) on annotated tables.

``python -m bench --only cell_types [--data DIR]``: DIR is a folder in the shared ``cell_types`` format
(``files/<dataset>/...`` and ``truth/<dataset>.json``; README of ``../shared/data/tabular/cell_types``) or a data
folder holding one at ``tabular/cell_types``. Tables of the workbooks the shipped model was trained or calibrated on
(listed in ``cell_lines.json``) are left out, so on the shared dev folder the figures are those of the held-out
workbooks, and on any other folder of that format every table counts.

Prints, against the line labels (Strudel's own ``lines_strudel`` where a record has them, else ``lines``):

- line accuracy over the non-empty labelled lines, precision / recall / F1 per class and the macro F1 (6 classes);
- recall of the data and the header lines ("data/header accuracy");
- the share of tables whose lines are all in the right part (title / header / body / notes: header and data rows
  exactly right) and the share with every line's class right;
- the sheet confidence's expected calibration error (10 equal-width bins) and its reliability table.
"""

from __future__ import annotations

import csv
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import Context, Skip, table

TARGET_MACRO_F1 = 0.85
TARGET_ACC = 0.95
TARGET_TABLES = 0.85
TARGET_ECE = 0.05
SEED = 47


@dataclass
class Table:
    """One annotated table: ``key`` (dataset, workbook), ``name``, ``grid`` (rows of cell values), ``truth`` (one
    line label per grid row, None where unlabelled), ``path`` (its file) and ``csv`` (whether the file is the
    table itself, a CSV)."""

    key: tuple[str, str]
    name: str
    grid: list[list[Any]]
    truth: list[str | None]
    path: Path | None = None
    csv: bool = False


def find_folder(path: Path) -> Path:
    """The cell_types folder at ``path`` or ``path/tabular/cell_types``. Raises Skip when neither holds truth/."""
    for cand in (path, path / "tabular" / "cell_types"):
        if (cand / "truth").is_dir():
            return cand
    raise Skip(f"no cell_types folder (truth/ and files/) at {path} or {path / 'tabular' / 'cell_types'}")


def _read_grid(folder: Path, rec: dict[str, Any]) -> list[list[Any]]:
    path = folder / "files" / rec["dataset"] / rec["file"]
    n = int(rec["n_rows"])
    first = int(rec.get("first_row") or 1) - 1
    if rec["format"] == "csv":
        with open(path, encoding="utf-8", newline="") as fh:
            rows: list[list[Any]] = [list(r) for r in csv.reader(fh)]
    else:
        from python_calamine import CalamineWorkbook

        wb = CalamineWorkbook.from_path(str(path))
        try:
            rows = [
                [None if v == "" else v for v in r]
                for r in wb.get_sheet_by_name(rec["sheet"]).to_python(skip_empty_area=False)
            ]
        finally:
            wb.close()
    rows = rows[first : first + n]
    rows += [[] for _ in range(n - len(rows))]
    return rows


def read_tables(folder: Path, truth_key: str = "lines_strudel") -> list[Table]:
    """Every annotated table of a cell_types folder (records whose file is missing are skipped)."""
    out = []
    for tf in sorted((folder / "truth").glob("*.json")):
        for rec in json.loads(tf.read_text(encoding="utf-8"))["records"]:
            truth = rec.get(truth_key) or rec.get("lines")
            if not truth or not (folder / "files" / rec["dataset"] / rec["file"]).is_file():
                continue
            out.append(
                Table(
                    key=(rec["dataset"], rec.get("source_file") or rec["file"]),
                    name=f"{rec['dataset']}/{rec['file']}" + (f"[{rec['sheet']}]" if rec.get("sheet") else ""),
                    grid=_read_grid(folder, rec),
                    truth=list(truth),
                    path=folder / "files" / rec["dataset"] / rec["file"],
                    csv=rec["format"] == "csv" and int(rec.get("first_row") or 1) == 1,
                )
            )
    return out


def split_keys(tables: list[Table], seed: int = SEED) -> dict[str, set[tuple[str, str]]]:
    """Workbooks split 60 / 20 / 20 into train / validation / test per dataset, by a seeded shuffle (all sheets of
    a workbook together)."""
    out: dict[str, set[tuple[str, str]]] = {"train": set(), "val": set(), "test": set()}
    for ds in sorted({t.key[0] for t in tables}):
        keys = sorted({t.key for t in tables if t.key[0] == ds})
        random.Random(f"{seed}:{ds}").shuffle(keys)
        n = len(keys)
        a, b = round(0.6 * n), round(0.8 * n)
        out["train"] |= set(keys[:a])
        out["val"] |= set(keys[a:b])
        out["test"] |= set(keys[b:])
    return out


def predict_tables(tables: list[Table], booster: Any = None, meta: dict[str, Any] | None = None) -> list[Any]:
    """The :class:`~aisac_core.data.structure.Structure` of each table (shipped model unless given)."""
    from aisac_core.data.structure import classify

    return [classify(t.grid, booster, meta) for t in tables]


def ece(conf: list[float], right: list[bool], bins: int = 10) -> tuple[float, list[tuple[str, int, float, float]]]:
    """Expected calibration error over ``bins`` equal-width bins (Naeini et al. 2015; Guo et al. 2017) and the
    reliability table ``(bin, n, mean confidence, share right)``."""
    rows = []
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        idx = [k for k, c in enumerate(conf) if (lo <= c < hi) or (b == bins - 1 and c == 1.0)]
        if not idx:
            continue
        mc = sum(conf[k] for k in idx) / len(idx)
        acc = sum(right[k] for k in idx) / len(idx)
        total += len(idx) / max(len(conf), 1) * abs(mc - acc)
        rows.append((f"{lo:.1f}-{hi:.1f}", len(idx), mc, acc))
    return total, rows


def score(tables: list[Table], structs: list[Any]) -> dict[str, Any]:
    """Line and table figures of predictions ``structs`` against ``tables``' truth (module docstring)."""
    from aisac_core.data.structure import CLASSES, PART

    tp = dict.fromkeys(CLASSES, 0)
    fp = dict.fromkeys(CLASSES, 0)
    fn = dict.fromkeys(CLASSES, 0)
    n_lines = ok_lines = 0
    parts_right: list[bool] = []
    all_right: list[bool] = []
    conf: list[float] = []
    wrong: list[str] = []
    for t, st in zip(tables, structs):
        pred = st.by_row()
        t_ok = t_all = True
        for i, lab in enumerate(t.truth):
            if lab is None or lab == "empty":
                continue
            p = pred.get(i, "empty")
            n_lines += 1
            ok_lines += p == lab
            if p == lab:
                tp[lab] += 1
            else:
                fn[lab] += 1
                if p in fp:
                    fp[p] += 1
                t_all = False
                if PART.get(p) != PART[lab]:
                    t_ok = False
        parts_right.append(t_ok)
        all_right.append(t_all)
        conf.append(st.confidence)
        if not t_ok:
            wrong.append(t.name)
    per = {}
    for c in CLASSES:
        p = tp[c] / (tp[c] + fp[c]) if tp[c] + fp[c] else 0.0
        r = tp[c] / (tp[c] + fn[c]) if tp[c] + fn[c] else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        per[c] = {"precision": p, "recall": r, "f1": f, "support": tp[c] + fn[c]}
    present = [c for c in CLASSES if per[c]["support"]]
    e, rel = ece(conf, parts_right)
    from .headers import ece_if_calibrated, ece_interval

    return {
        "tables": len(tables),
        "lines": n_lines,
        "line_accuracy": ok_lines / max(n_lines, 1),
        "macro_f1": sum(per[c]["f1"] for c in present) / max(len(present), 1),
        "per_class": per,
        "data_accuracy": per["data"]["recall"],
        "header_accuracy": per["header"]["recall"],
        "tables_right": sum(parts_right) / max(len(tables), 1),
        "tables_all_lines_right": sum(all_right) / max(len(tables), 1),
        "ece": e,
        "ece_95": ece_interval(conf, parts_right, groups=[t.key for t in tables]),
        "ece_if_calibrated": ece_if_calibrated(conf),
        "reliability": rel,
        "mean_confidence": sum(conf) / max(len(conf), 1),
        "wrong_at_0.9": sum(1 for c, r in zip(conf, parts_right) if c >= 0.9 and not r),
        "n_at_0.9": sum(1 for c in conf if c >= 0.9),
        "uncertain": sum(1 for st in structs if st.uncertain),
        "wrong_tables": wrong[:40],
    }


def loader_figures(tables: list[Table]) -> dict[str, Any]:
    """The CSV tables loaded by ``data_load``'s CSV loader (:func:`aisac_core.data.loaders.load_csv`): the share
    whose header row count, first data row and row count are exactly those of the truth (header rows: the header
    lines above the first body line; rows: the data, derived and group lines, but group lines of one cell, which
    become the group column), next to the header rules alone
    (:func:`aisac_core.data.loaders.detect_table`: header rows and first data row; they never leave out notes
    below), the loaded tables' wrong loads at confidence >= 0.9, and the ECE of the confidence the load reports
    (``detected.confidence``, the model's own or, where it defers to the rules, the one it gives their reading)
    against "loaded right"."""
    from aisac_core.data.loaders import detect_table, load_csv

    ok = rules = wrong_high = high = n = 0
    confs: list[float] = []
    rights: list[bool] = []
    for t in tables:
        if not t.csv or t.path is None:
            continue
        body = [i for i, lab in enumerate(t.truth) if lab in ("data", "derived", "group")]
        if not body:
            continue
        header = [i for i, lab in enumerate(t.truth) if lab == "header" and i < body[0]]
        # rows of the frame: the body's lines but the section labels (a group line of one cell: a column)
        n_body = sum(
            1
            for i in body
            if any(str(v).strip() for v in t.grid[i])
            and not (t.truth[i] == "group" and sum(1 for v in t.grid[i] if str(v).strip()) == 1)
        )
        df, opts, _ = load_csv(t.path, None, ".csv")
        right = opts["header_rows"] == len(header) and opts["data_start_row"] == body[0] + 1 and len(df) == n_body
        r = detect_table([[str(v) for v in row] for row in t.grid])
        n += 1
        ok += right
        rules += r["header"] == header and r["data_start"] == body[0]
        conf = opts["detected"].get("confidence", 1.0)
        confs.append(float(conf))
        rights.append(bool(right))
        high += conf >= 0.9
        wrong_high += conf >= 0.9 and not right
    e, rel = ece(confs, rights)
    return {
        "tables": n,
        "loaded_right": ok,
        "rules_header_right": rules,
        "at_0.9": high,
        "wrong_at_0.9": wrong_high,
        "ece": round(e, 4),
        "reliability": rel,
    }


#: Strudel's published line-classification figures (Jiang et al., EDBT 2021), for the comparison row. The paper is
#: not reachable from this environment; see docs/data.md "Learned table structure" for what is compared.
PUBLISHED: dict[str, Any] = {}


def print_figures(title: str, s: dict[str, Any]) -> None:
    """The figures of :func:`score` as tables on stdout."""
    from aisac_core.data.structure import CLASSES

    rows = [
        (
            c,
            s["per_class"][c]["support"],
            s["per_class"][c]["precision"],
            s["per_class"][c]["recall"],
            s["per_class"][c]["f1"],
        )
        for c in CLASSES
    ]
    table(
        f"{title}: lines per class ({s['tables']} tables, {s['lines']} lines)",
        ["class", "lines", "precision", "recall", "F1"],
        rows,
    )
    table(
        f"{title}: summary",
        ["measure", "value", "target"],
        [
            ("line accuracy", s["line_accuracy"], None),
            ("macro F1 (6 classes)", s["macro_f1"], f">= {TARGET_MACRO_F1}"),
            ("data line accuracy (recall)", s["data_accuracy"], f">= {TARGET_ACC}"),
            ("header line accuracy (recall)", s["header_accuracy"], f">= {TARGET_ACC}"),
            ("tables right (header, body, notes rows)", s["tables_right"], f">= {TARGET_TABLES}"),
            ("tables with every line's class right", s["tables_all_lines_right"], None),
            ("sheet confidence ECE (10 bins)", s["ece"], f"<= {TARGET_ECE}"),
            ("  its bootstrap 95 % interval", str(s["ece_95"]), None),
            ("  ECE of a calibrated reader by chance (mean, 95th pct)", str(s["ece_if_calibrated"]), None),
            ("wrong tables at confidence >= 0.9", f"{s['wrong_at_0.9']} of {s['n_at_0.9']}", None),
            ("tables flagged uncertain", s["uncertain"], None),
        ],
    )
    table(
        f"{title}: reliability of the sheet confidence",
        ["bin", "tables", "mean confidence", "share right"],
        s["reliability"],
    )


#: the figures of ``python bench/train_cell_types.py --nested`` (nested cross-validation over all shared tables)
NESTED_FILE = Path(__file__).resolve().parent / "data" / "cell_types_nested.json"


def nested_record(sha: str) -> dict[str, Any] | None:
    """The recorded nested cross-validation (:data:`NESTED_FILE`) when it measured the model of sha256 ``sha``;
    None when absent or recorded for another model (then ``bench/train_cell_types.py --nested`` re-takes it)."""
    if not NESTED_FILE.is_file():
        return None
    rec: dict[str, Any] = json.loads(NESTED_FILE.read_text(encoding="utf-8"))
    return rec if rec.get("model_sha256") == sha else None


def run(ctx: Context) -> dict[str, Any]:
    """The cell_types part (module docstring); skipped when the folder is absent."""
    from aisac_core.data.structure import _model, model_sha256

    t0 = time.perf_counter()
    folder = find_folder(ctx.data_dir)
    booster, meta = _model()
    seen = {tuple(k) for k in meta.get("seen_workbooks", [])}
    every = read_tables(folder)
    tables = [t for t in every if t.key not in seen]
    if not tables:
        raise Skip(f"every table of {folder} was used to train or calibrate the model")
    t1 = time.perf_counter()
    structs = predict_tables(tables, booster, meta)
    secs = time.perf_counter() - t1
    s = score(tables, structs)
    print_figures(f"cell_types ({folder})", s)
    lf = loader_figures(tables)
    table(
        f"cell_types: the CSV tables through data_load's CSV loader ({lf['tables']} tables)",
        ["measure", "value"],
        [
            ("header rows, first data row and row count exactly right", f"{lf['loaded_right']} / {lf['tables']}"),
            (
                "header rules alone: header rows and first data row right",
                f"{lf['rules_header_right']} / {lf['tables']}",
            ),
            ("wrong loads at confidence >= 0.9", f"{lf['wrong_at_0.9']} of {lf['at_0.9']}"),
            ("ECE of the confidence the load reports (10 bins; 'loaded right')", lf["ece"]),
        ],
    )
    print(
        f"classified {s['lines']} lines of {len(tables)} tables in {secs:.1f} s "
        f"({1000 * secs / max(len(tables), 1):.0f} ms per table); model sha256 {model_sha256()[:12]}"
    )
    nest = nested_record(model_sha256()) if len(tables) < len(every) else None
    if nest is not None:
        n = nest["figures"]
        print_figures(f"nested cross-validation over all {n['tables']} tables (each held out once; recorded)", n)
        table(
            "cell_types: the fixed held-out split beside nested cross-validation (bench/train_cell_types.py --nested)",
            ["measure", "held-out test workbooks", "nested CV, all tables"],
            [
                ("tables", s["tables"], n["tables"]),
                ("line accuracy", s["line_accuracy"], n["line_accuracy"]),
                (f"macro F1 (>= {TARGET_MACRO_F1})", s["macro_f1"], n["macro_f1"]),
                (f"data line accuracy (>= {TARGET_ACC})", s["data_accuracy"], n["data_accuracy"]),
                (f"header line accuracy (>= {TARGET_ACC})", s["header_accuracy"], n["header_accuracy"]),
                (f"tables right (>= {TARGET_TABLES})", s["tables_right"], n["tables_right"]),
                (f"sheet confidence ECE (<= {TARGET_ECE})", s["ece"], n["ece"]),
                ("  bootstrap 95 % by workbook", str(s["ece_95"]), str(n["ece_95"])),
                (
                    "  a calibrated reader by chance (mean, 95th pct)",
                    str(s["ece_if_calibrated"]),
                    str(n["ece_if_calibrated"]),
                ),
                (
                    "wrong tables at confidence >= 0.9",
                    f"{s['wrong_at_0.9']} of {s['n_at_0.9']}",
                    f"{n['wrong_at_0.9']} of {n['n_at_0.9']}",
                ),
            ],
        )
    elif len(tables) < len(every):
        print("no nested cross-validation recorded for this model: python bench/train_cell_types.py --nested")
    # the acceptance's ECE is taken where n resolves it: nested cross-validation over all tables when recorded
    e_fig = nest["figures"]["ece"] if nest is not None else s["ece"]
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "folder": str(folder),
        "summary": [
            {
                "metric": "line macro F1",
                "value": round(s["macro_f1"], 3),
                "target": f">= {TARGET_MACRO_F1}",
                "met": s["macro_f1"] >= TARGET_MACRO_F1,
            },
            {
                "metric": "data / header line accuracy",
                "value": f"{s['data_accuracy']:.3f} / {s['header_accuracy']:.3f}",
                "target": f">= {TARGET_ACC}",
                "met": min(s["data_accuracy"], s["header_accuracy"]) >= TARGET_ACC,
            },
            {
                "metric": "tables right",
                "value": round(s["tables_right"], 3),
                "target": f">= {TARGET_TABLES}",
                "met": s["tables_right"] >= TARGET_TABLES,
            },
            {
                "metric": "sheet confidence ECE" + (", held-out split" if nest is not None else ""),
                "value": round(s["ece"], 3),
                "target": f"<= {TARGET_ECE}",
                "met": s["ece"] <= TARGET_ECE,
            },
        ]
        + (
            []
            if nest is None
            else [
                {
                    "metric": "sheet confidence ECE (nested CV)",
                    "value": round(e_fig, 3),
                    "target": f"<= {TARGET_ECE}",
                    "met": e_fig <= TARGET_ECE,
                }
            ]
        ),
        "nested": nest,
        "figures": {k: v for k, v in s.items()},
        "loader": lf,
        "model_sha256": model_sha256(),
        "classify_seconds": round(secs, 2),
        "published": PUBLISHED,
    }
