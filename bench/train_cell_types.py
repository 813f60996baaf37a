"""Train the line classifier of table structure (:mod:`aisac_core.data.structure`) on the shared cell_types dev
portion, and write it into the package.

    .venv/bin/python bench/train_cell_types.py [--data ../shared/data/tabular/cell_types] [--no-write] [--nested]

``--nested``: nested cross-validation by workbook over all tables with the shipped setting and calibration recipe
(:func:`nested`), written to ``bench/data/cell_types_nested.json``; no model is written.

Deterministic (fixed seeds, one thread). Steps:

1. read every annotated table (SAUS sheets, Troy tables; line labels: Strudel's ``lines_strudel`` where present,
   else ``lines``) and split the workbooks 60 / 20 / 20 into train / validation / test per dataset
   (:func:`bench.cell_types.split_keys`, seed 47; all sheets of a workbook together);
2. line features (:func:`aisac_core.data.structure.line_features`) of the train and validation tables;
3. model choice on validation only: LightGBM in random-forest mode (Strudel's model family) and gradient boosting,
   a few settings each; the one with the best validation macro F1 is kept (trees: early stopping on validation);
4. the chosen setting is refitted on train + validation; the sheet confidence is calibrated against "table right"
   on out-of-fold scores of the train + validation sheets (5 folds by workbook: each sheet scored by a model that
   never saw it; :func:`aisac_core.data.structure.sheet_scores`) by Platt scaling (isotonic regression is
   cross-validated beside it and printed; see the comment at its call);
5. writes ``aisac_core/data/models/cell_lines.lgb`` and ``cell_lines.json`` (feature names, classes, Platt
   coefficients, threshold, the train/validation workbooks, validation and held-out figures) and prints the figures
   on the held-out test workbooks (the same as ``python -m bench --only cell_types``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aisac_core.data import structure as S  # noqa: E402
from aisac_core.data.forest import Forest  # noqa: E402
from bench.cell_types import NESTED_FILE, Table, print_figures, read_tables, score, split_keys  # noqa: E402

MODELS = REPO / "aisac_core" / "data" / "models"
SEED = 47
FOLDS = 5


def xy(tables: list[Table]) -> tuple[list[list[float]], list[int], list[float]]:
    """Feature rows, class indices and sample weights (inverse square root of class frequency) of the labelled
    non-empty lines."""
    X: list[list[float]] = []
    y: list[int] = []
    for t in tables:
        rows, feats = S.line_features(t.grid)
        for r, f in zip(rows, feats):
            lab = t.truth[r] if r < len(t.truth) else None
            if lab in S.CLASSES:
                X.append(f)
                y.append(S.CLASSES.index(lab))
    counts = [max(y.count(c), 1) for c in range(len(S.CLASSES))]
    w = [math.sqrt(max(counts) / counts[c]) for c in y]
    return X, y, w


def fit(X: list[list[float]], y: list[int], w: list[float], params: dict[str, Any], rounds: int) -> Any:
    """A LightGBM multiclass booster."""
    import lightgbm as lgb
    import numpy as np

    base = {
        "objective": "multiclass",
        "num_class": len(S.CLASSES),
        "verbosity": -1,
        "seed": SEED,
        "deterministic": True,
        "num_threads": 1,
        "force_row_wise": True,
    }
    ds = lgb.Dataset(np.asarray(X), label=np.asarray(y), weight=np.asarray(w), free_raw_data=False)
    return lgb.train({**base, **params}, ds, num_boost_round=rounds)


#: settings compared on validation; forests are kept to <= 63 leaves and 100 trees per class so the model file stays
#: a few MB and a sheet is classified in milliseconds
_RF = {"boosting": "rf", "bagging_fraction": 0.632, "bagging_freq": 1, "feature_fraction": 0.5, "min_data_in_leaf": 3}
_GB = {"learning_rate": 0.05, "feature_fraction": 0.8, "bagging_fraction": 0.8, "bagging_freq": 1, "lambda_l2": 1.0}
CANDIDATES: list[tuple[str, dict[str, Any], list[int]]] = [
    ("random forest 31 leaves", {**_RF, "num_leaves": 31}, [100]),
    ("random forest 63 leaves", {**_RF, "num_leaves": 63}, [100]),
    ("boosting 15 leaves", {**_GB, "num_leaves": 15, "min_data_in_leaf": 10}, [150, 300]),
]


def isotonic(scores: list[tuple[float, float]], right: list[bool]) -> dict[str, list[float]]:
    """Isotonic regression of "table right" on the first sheet score: its breakpoints for
    :func:`aisac_core.data.structure.calibrate`."""
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit([s[0] for s in scores], right)
    return {"x": [float(x) for x in iso.X_thresholds_], "y": [float(y) for y in iso.y_thresholds_]}


#: the inputs of the logistic calibration maps tried (:func:`aisac_core.data.structure.sheet_features`)
LOGISTIC_SETS: dict[str, tuple[str, ...]] = {
    "logistic score+margin": ("score", "log_lowest", "margin"),
    "logistic all": ("score", "log_lowest", "mean_boundary", "margin", "log_boundary", "no_header", "header_low"),
}
#: repeats of the 5-fold cross-validation of the calibration maps (each a different seeded shuffle of the
#: workbooks): over 225 tables one split's ECE moves by ~0.01-0.02, so one split would choose by noise
CV_REPEATS = 5


def logistic(feats: list[dict[str, float]], right: list[bool], names: tuple[str, ...]) -> dict[str, Any]:
    """Logistic regression (L2, C=1) of "table right" on the named sheet features: ``{features, coef, intercept}``
    for :func:`aisac_core.data.structure.calibrate`."""
    from sklearn.linear_model import LogisticRegression

    X = [[f.get(n, 0.0) for n in names] for f in feats]
    if len(set(right)) < 2:
        return {"features": list(names), "coef": [0.0] * len(names), "intercept": 4.0 if right[0] else -4.0}
    lr = LogisticRegression(C=1.0, max_iter=5000).fit(X, [int(r) for r in right])
    return {"features": list(names), "coef": [float(c) for c in lr.coef_[0]], "intercept": float(lr.intercept_[0])}


def compare_calibrations(
    keys: list[tuple[str, str]],
    scores: list[tuple[float, float]],
    feats: list[dict[str, float]],
    right: list[bool],
    quiet: bool = False,
) -> tuple[str, dict[str, Any]]:
    """Cross-validation of the calibration maps over the out-of-fold sheet scores: Platt scaling of the two sheet
    scores, isotonic regression of the first, and logistic regressions over more sheet features
    (:data:`LOGISTIC_SETS`), each over 5 folds by workbook repeated :data:`CV_REPEATS` times (seeded shuffles).
    Prints each map's mean Brier score and ECE; returns the name of the map with the lowest mean ECE among those
    whose mean Brier score is no worse than Platt scaling's (a map that gives every table the base rate has a low
    ECE and tells nothing), and the figures."""
    import numpy as np

    from bench.cell_types import ece

    y = np.array(right, dtype=float)
    names = ["platt", "isotonic", *LOGISTIC_SETS]
    eces: dict[str, list[float]] = {n: [] for n in names}
    briers: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(CV_REPEATS):
        folds = sorted(set(keys))
        random.Random(SEED + rep).shuffle(folds)
        fold = {k: n % FOLDS for n, k in enumerate(folds)}
        out = {n: np.zeros(len(y)) for n in names}
        for f in range(FOLDS):
            tr = [k for k in range(len(y)) if fold[keys[k]] != f]
            te = [k for k in range(len(y)) if fold[keys[k]] == f]
            maps: dict[str, dict[str, Any]] = {
                "platt": {"platt": platt([scores[k] for k in tr], [right[k] for k in tr])},
                "isotonic": {"isotonic": isotonic([scores[k] for k in tr], [right[k] for k in tr])},
            }
            for n, cols in LOGISTIC_SETS.items():
                maps[n] = {"logistic": logistic([feats[k] for k in tr], [right[k] for k in tr], cols)}
            for k in te:
                for n, m in maps.items():
                    out[n][k] = S.calibrate(scores[k], m, feats[k])
        for n in names:
            eces[n].append(ece(list(out[n]), right)[0])
            briers[n].append(float(np.mean((out[n] - y) ** 2)))
    figs = {n: {"ece": round(float(np.mean(eces[n])), 4), "brier": round(float(np.mean(briers[n])), 4)} for n in names}
    for n in names if not quiet else ():
        print(
            f"  calibration {n:22s} ({CV_REPEATS}x5-fold CV by workbook): Brier {figs[n]['brier']:.4f}, ECE "
            f"{figs[n]['ece']:.4f}"
        )
    ok = [n for n in names if figs[n]["brier"] <= figs["platt"]["brier"] + 1e-9]
    best = min(ok, key=lambda n: (figs[n]["ece"], n))
    return best, figs


def platt(scores: list[tuple[float, float]], right: list[bool]) -> list[float]:
    """Platt coefficients (a, b, c) of :func:`aisac_core.data.structure.calibrate`, fitted by logistic regression
    (L2, C=1) on validation sheet scores."""
    from sklearn.linear_model import LogisticRegression

    X = [[s[0], math.log(max(s[1], 1e-9))] for s in scores]
    if len(set(right)) < 2:
        return [0.0, 0.0, 4.0 if right and right[0] else -4.0]
    lr = LogisticRegression(C=1.0, max_iter=1000).fit(X, [int(r) for r in right])
    return [float(lr.coef_[0][0]), float(lr.coef_[0][1]), float(lr.intercept_[0])]


def fold_keys(tables: list[Table]) -> dict[tuple[str, str], int]:
    """The calibration fold of each workbook of ``tables`` (seeded shuffle of the sorted workbook keys, dealt into
    :data:`FOLDS` folds): the cross-fitting folds of :func:`main` and the outer folds of :func:`nested`."""
    keys = sorted({t.key for t in tables})
    random.Random(SEED).shuffle(keys)
    return {k: n % FOLDS for n, k in enumerate(keys)}


def sheet_rows(
    tables: list[Table], booster: Any
) -> list[tuple[tuple[str, str], tuple[float, float], dict[str, float], bool]]:
    """(workbook, sheet scores, sheet features, table right) of each table read by ``booster`` (uncalibrated)."""
    dummy: dict[str, Any] = {"platt": [0.0, 0.0, 0.0], "threshold": S.CONFIDENT_SHEET}
    out = []
    for t in tables:
        st = S.classify(t.grid, booster, dummy)
        plist = [[p[c] for c in S.CLASSES] for p in st.probs]
        out.append(
            (
                t.key,
                S.sheet_scores(plist, st.labels),
                S.sheet_features(plist, st.labels),
                not score([t], [st])["wrong_tables"],
            )
        )
    return out


def fit_map(
    rows: list[tuple[tuple[str, str], tuple[float, float], dict[str, float], bool]], quiet: bool = False
) -> dict[str, Any]:
    """The sheet-confidence calibration of out-of-fold ``rows`` (:func:`sheet_rows`): the map chosen by
    :func:`compare_calibrations` fitted on all of them, as the keys of ``cell_lines.json`` (``calibration_map``,
    ``calibration_cv``, ``platt`` always, ``isotonic`` or ``logistic`` when chosen)."""
    keys = [r[0] for r in rows]
    scores = [r[1] for r in rows]
    feats = [r[2] for r in rows]
    right = [r[3] for r in rows]
    chosen, cv = compare_calibrations(keys, scores, feats, right, quiet=quiet)
    out: dict[str, Any] = {"platt": platt(scores, right), "calibration_map": chosen, "calibration_cv": cv}
    if chosen == "isotonic":
        out["isotonic"] = isotonic(scores, right)
    elif chosen in LOGISTIC_SETS:
        out["logistic"] = logistic(feats, right, LOGISTIC_SETS[chosen])
    return out


def nested(
    part: dict[str, list[Table]], params: dict[str, Any], rounds: int, shipped: tuple[Any, dict[str, Any]]
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Nested cross-validation by workbook over ALL annotated tables: every table held out once, its structure read
    by a forest and its sheet confidence by a calibration map that never saw its workbook.

    Outer folds: the held-out test workbooks and the :data:`FOLDS` calibration folds of train + validation
    (:func:`fold_keys`). The test workbooks are read by the shipped model (``shipped``: forest fitted on train +
    validation, map fitted on their out-of-fold scores: the fixed-split figures). Fold ``k`` is read by a forest
    fitted on the other folds; its map is chosen and fitted (:func:`fit_map`) on out-of-fold scores of the other
    tables only: the test tables read by that same forest, and each other fold ``j`` read by a forest fitted without
    ``j`` and ``k``. The forest setting is the shipped one (``params``, ``rounds``: chosen once on validation).

    Returns the pooled figures (:func:`bench.cell_types.score`), one summary per outer fold, and one row per table
    (name, workbook, outer fold, sheet confidence, table right)."""
    fit_tables = part["train"] + part["val"]
    fold = fold_keys(fit_tables)
    by_fold = {k: [t for t in fit_tables if fold[t.key] == k] for k in range(FOLDS)}

    def forest(tables: list[Table]) -> Any:
        X, y, w = xy(tables)
        return fit(X, y, w, params, rounds)

    pairs: dict[tuple[int, int], Any] = {}
    outer: list[tuple[str, list[Table], Any, dict[str, Any]]] = [("test", part["test"], shipped[0], shipped[1])]
    for k in range(FOLDS):
        bk = forest([t for t in fit_tables if fold[t.key] != k])
        inner = sheet_rows(part["test"], bk)
        for j in range(FOLDS):
            if j != k:
                jk = (min(j, k), max(j, k))
                if jk not in pairs:
                    pairs[jk] = forest([t for t in fit_tables if fold[t.key] not in jk])
                inner += sheet_rows(by_fold[j], pairs[jk])
        meta = {**fit_map(inner, quiet=True), "threshold": S.CONFIDENT_SHEET}
        outer.append((f"fold {k}", by_fold[k], bk, meta))
    tables: list[Table] = []
    structs: list[Any] = []
    per_fold: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for name, held, booster, meta in outer:
        st = [S.classify(t.grid, booster, meta) for t in held]
        s = score(held, st)
        per_fold.append(
            {
                "outer": name,
                "tables": len(held),
                "map": meta.get("calibration_map", "platt"),
                "ece": round(s["ece"], 4),
                "tables_right": round(s["tables_right"], 4),
            }
        )
        print(f"  outer {name}: {per_fold[-1]}", flush=True)
        tables += held
        structs += st
        rows += [
            {
                "table": t.name,
                "workbook": list(t.key),
                "outer": name,
                "confidence": x.confidence,
                "right": not score([t], [x])["wrong_tables"],
            }
            for t, x in zip(held, st)
        ]
    return score(tables, structs), per_fold, rows


def run_nested(part: dict[str, list[Table]]) -> int:
    """``--nested``: :func:`nested` with the shipped forest setting and model; prints the pooled figures and each
    outer fold's, and records them in :data:`NESTED_FILE` with the sha256 of the model they measure."""
    import time

    t0 = time.perf_counter()
    shipped = S._model()
    name = str(shipped[1]["model"]).removeprefix("LightGBM ")
    rounds = int(shipped[1]["rounds"])
    params = next(p for n, p, _ in CANDIDATES if n == name)
    print(f"nested cross-validation: the shipped setting ({name}, {rounds} rounds)", flush=True)
    s, per_fold, rows = nested(part, params, rounds, shipped)
    print_figures("nested cross-validation, all tables (each held out once)", s)
    out = {
        "what": "nested cross-validation by workbook (bench/train_cell_types.py --nested)",
        "model_sha256": S.model_sha256(),
        "model": shipped[1]["model"],
        "rounds": rounds,
        "shipped_map": shipped[1].get("calibration_map", "platt"),
        "outer_folds": per_fold,
        "figures": {k: v for k, v in s.items() if k != "wrong_tables"},
        "rows": rows,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    NESTED_FILE.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {NESTED_FILE}; {out['seconds']:.0f} s")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "tabular" / "cell_types")
    ap.add_argument("--no-write", action="store_true", help="print the figures, write no model")
    ap.add_argument(
        "--no-test", action="store_true", help="stop after the calibration's cross-validation: no held-out figures"
    )
    ap.add_argument(
        "--nested",
        action="store_true",
        help="nested cross-validation by workbook over all tables with the shipped forest setting (every table held "
        "out once; :func:`nested`); writes the figures to bench/data/cell_types_nested.json, no model",
    )
    a = ap.parse_args()
    if not (a.data / "truth").is_dir():
        print(f"no cell_types folder at {a.data}", file=sys.stderr)
        return 2
    tables = read_tables(a.data)
    split = split_keys(tables)
    part = {k: [t for t in tables if t.key in v] for k, v in split.items()}
    print({k: len(v) for k, v in part.items()}, "tables (train / val / test)")
    if a.nested:
        return run_nested(part)
    Xtr, ytr, wtr = xy(part["train"])
    print(f"train lines: {len(ytr)}; features: {len(S.FEATURES)}")
    best: tuple[float, str, Any, int] | None = None
    dummy: dict[str, Any] = {"platt": [0.0, 0.0, 0.0], "threshold": S.CONFIDENT_SHEET}
    for name, params, rounds_list in CANDIDATES:
        for rounds in rounds_list:
            b = fit(Xtr, ytr, wtr, params, rounds)
            s = score(part["val"], [S.classify(t.grid, b, dummy) for t in part["val"]])
            print(
                f"  {name:20s} {rounds:4d} rounds: val macro F1 {s['macro_f1']:.3f}, line acc "
                f"{s['line_accuracy']:.3f}, tables right {s['tables_right']:.3f}"
            )
            crit = s["macro_f1"] + s["tables_right"]
            if best is None or crit > best[0] + 1e-9:
                best = (crit, name, b, rounds)
    assert best is not None
    _, name, _, rounds = best
    params = next(p for n, p, _ in CANDIDATES if n == name)
    print(f"chosen on validation (macro F1 + tables right): {name}, {rounds} rounds")
    # cross-fitting: the shipped model is fitted on train + validation; its sheet confidence is calibrated on
    # out-of-fold sheet scores (each sheet scored by a model fitted without its workbook: 5 folds by workbook)
    fit_tables = part["train"] + part["val"]
    fold = fold_keys(fit_tables)
    oof: list[tuple[tuple[str, str], tuple[float, float], dict[str, float], bool]] = []
    for f in range(FOLDS):
        Xf, yf, wf = xy([t for t in fit_tables if fold[t.key] != f])
        oof += sheet_rows([t for t in fit_tables if fold[t.key] == f], fit(Xf, yf, wf, params, rounds))
    oof_scores = [r[1] for r in oof]
    oof_feats = [r[2] for r in oof]
    oof_right = [r[3] for r in oof]
    # the map with the lowest cross-validated ECE among those no worse than Platt scaling in Brier score (isotonic
    # regression's steps reach 0 and 1 with 225 sheets - a certainty no load should claim - and it overfits:
    # Niculescu-Mizil and Caruana, ICML 2005, find Platt-type maps better below about 1,000 calibration examples)
    calib = fit_map(oof)
    coef = calib.pop("platt")
    print(f"calibration shipped: {calib['calibration_map']}")
    Xa, ya, wa = xy(fit_tables)
    booster = fit(Xa, ya, wa, params, rounds)
    meta: dict[str, Any] = {
        "model": "LightGBM " + name,
        "rounds": rounds,
        "classes": list(S.CLASSES),
        "features": list(S.FEATURES),
        "platt": coef,
        **calib,
        "threshold": S.CONFIDENT_SHEET,
        "truth": "lines_strudel where present, else lines",
        "seen_workbooks": sorted([list(k) for k in split["train"] | split["val"]]),
        "test_workbooks": sorted([list(k) for k in split["test"]]),
    }
    val = score(part["val"], [S.classify(t.grid, booster, meta) for t in part["val"]])
    oof_conf = [S.calibrate(x, meta, f) for x, f in zip(oof_scores, oof_feats)]
    from bench.cell_types import ece

    oof_ece, oof_rel = ece(oof_conf, oof_right)
    print(f"out-of-fold sheet confidence ({len(oof_conf)} train+validation sheets): ECE {oof_ece:.3f}; {oof_rel}")
    meta["calibration"] = {"sheets": len(oof_conf), "ece_out_of_fold": oof_ece, "reliability": oof_rel}
    if a.no_test:
        print("--no-test: no held-out figures, nothing written")
        return 0
    test = score(part["test"], [S.classify(t.grid, booster, meta) for t in part["test"]])
    print_figures("validation (model chosen here; in the final fit, so not held out)", val)
    print_figures("held-out test workbooks", test)
    meta["validation"] = {k: v for k, v in val.items() if k not in ("wrong_tables",)}
    meta["test"] = {k: v for k, v in test.items() if k not in ("wrong_tables",)}
    print("held-out tables not right:", ", ".join(test["wrong_tables"]))
    # the package evaluates the trees itself (aisac_core.data.forest.Forest: no LightGBM import at load time)
    Xv, _, _ = xy(part["val"] + part["test"])
    diff = float(abs(Forest(booster.model_to_string()).predict(Xv) - booster.predict(Xv)).max())
    print(f"Forest vs lightgbm.Booster.predict on {len(Xv)} lines: max |difference| {diff:.2e}")
    assert diff < 1e-9, diff
    if not a.no_write:
        MODELS.mkdir(parents=True, exist_ok=True)
        (MODELS / S.MODEL_FILE).write_text(booster.model_to_string(), encoding="utf-8")
        (MODELS / S.META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(
            f"wrote {MODELS / S.MODEL_FILE} ({(MODELS / S.MODEL_FILE).stat().st_size / 1024:.0f} KB) and {S.META_FILE}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
