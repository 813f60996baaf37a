"""Queries and aggregates over a frame: the allow-list check of ``DataFrame.query`` expressions
(:func:`check_query`), running a checked query (:func:`select_rows`) and group-by aggregates
(:func:`aggregate_frame`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from aisac_core.data.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

#: aggregate functions data_aggregate accepts (pandas names)
AGG_FUNCS = ("count", "size", "sum", "mean", "median", "min", "max", "std", "var", "nunique", "first", "last")

_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.Name,
    ast.Constant,
    ast.Load,
    ast.And,
    ast.Or,
    ast.Not,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.USub,
    ast.UAdd,
    ast.BitAnd,
    ast.BitOr,
    ast.Invert,
    ast.List,
    ast.Tuple,
    ast.Attribute,
    ast.Call,
    ast.keyword,
)
#: methods and accessors a query may use (``col.str.contains('x')``, ``col.isna()``, ``col.dt.year``)
QUERY_ATTRS = frozenset(
    {
        "str",
        "dt",
        "contains",
        "startswith",
        "endswith",
        "lower",
        "upper",
        "strip",
        "len",
        "isna",
        "notna",
        "isnull",
        "notnull",
        "isin",
        "between",
        "abs",
        "year",
        "month",
        "day",
        "hour",
        "minute",
        "second",
        "dayofweek",
        "match",
        "fullmatch",
    }
)
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
            out.append(expr[i : j + 1])
            i = j + 1
        elif ch == "`":
            j = expr.find("`", i + 1)
            if j < 0:
                raise DataError("expr has an unclosed backtick: quote column names like `my column`")
            out.append(f"{_BACKTICK}{k}")
            k += 1
            i = j + 1
        elif ch == "@":
            raise DataError(
                "expr refused: '@' (references to local variables) is not allowed; write constants into the expression"
            )
        else:
            out.append(ch)
            i += 1
    try:
        tree = ast.parse("".join(out).strip(), mode="eval")
    except SyntaxError as exc:
        raise DataError(f"expr is not a valid query expression ({exc.msg}); example: \"a > 1 and b == 'x'\"") from exc
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise DataError(
                f"expr refused: {type(node).__name__} is not allowed in a query (only comparisons, "
                "and/or/not, arithmetic, constants, lists and column names)"
            )
        if isinstance(node, ast.Name) and node.id.startswith("_") and not node.id.startswith(_BACKTICK):
            raise DataError(f"expr refused: name {node.id!r} (names starting with '_' are not allowed)")
        if isinstance(node, ast.Attribute) and (node.attr.startswith("_") or node.attr not in QUERY_ATTRS):
            raise DataError(f"expr refused: attribute {node.attr!r}; allowed: {', '.join(sorted(QUERY_ATTRS))}")
        if isinstance(node, ast.BinOp) and not any(isinstance(x, ast.Name) for x in ast.walk(node)):
            raise DataError(
                "expr refused: arithmetic between constants (e.g. 2 ** 10 ** 10) is not evaluated; "
                "write the value itself"
            )
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Attribute):
                raise DataError(
                    "expr refused: only methods such as col.str.contains('x') or col.isin([1, 2]) may be called"
                )
            for a in list(node.args) + [kw.value for kw in node.keywords]:
                if not all(
                    isinstance(x, (ast.Constant, ast.List, ast.Tuple, ast.UnaryOp, ast.USub, ast.UAdd, ast.Load))
                    for x in ast.walk(a)
                ):
                    raise DataError("expr refused: method arguments must be constants")
    return expr


def check_columns(df: pd.DataFrame, columns: list[str] | None) -> list[str]:
    """``columns`` as a list ([] when none given). Raises DataError naming the columns the frame lacks."""
    if not columns:
        return []
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f"unknown column(s) {missing}; the frame's columns: {list(map(str, df.columns[:50]))}")
    return list(columns)


def select_rows(df: pd.DataFrame, expr: str, columns: list[str]) -> pd.DataFrame:
    """The rows of ``df`` matching ``expr`` (already passed through :func:`check_query`; evaluated by pandas'
    python engine with no local or global names), only ``columns`` when given. Raises DataError when pandas
    cannot evaluate it."""
    try:
        res = df.query(expr, engine="python", local_dict={}, global_dict={})
    except Exception as exc:
        raise DataError(
            f"query failed: {type(exc).__name__}: {exc}. Column names with spaces or symbols need "
            "backticks, e.g. `my col` > 3"
        ) from exc
    return res[columns] if columns else res


def metric_spec(metrics: Any) -> dict[str, list[str]]:
    """``{column: function | [function, ...]}`` normalised to ``{column: [function, ...]}``. Raises DataError when
    empty or not a dict, or for a function outside :data:`AGG_FUNCS`."""
    if not metrics or not isinstance(metrics, dict):
        raise DataError('metrics is empty: give {column: [function, ...]}, e.g. {"yield": ["mean", "max"]}')
    spec: dict[str, list[str]] = {}
    for col, fns in metrics.items():
        fns = [fns] if isinstance(fns, str) else list(fns)
        bad = [f for f in fns if f not in AGG_FUNCS]
        if bad:
            raise DataError(f"unknown aggregate function(s) {bad}; allowed: {', '.join(AGG_FUNCS)}")
        spec[col] = fns
    return spec


def aggregate_frame(df: pd.DataFrame, by: list[str], spec: dict[str, list[str]]) -> pd.DataFrame:
    """Group ``df`` by ``by`` (none: the whole frame, one row) and compute ``spec`` (:func:`metric_spec`); the
    result's columns are the group keys then ``<column>_<function>``. Raises DataError when a function does not
    apply (mean of a text column)."""
    import pandas as pd

    try:
        parts = {}
        for col, fns in spec.items():
            for f in fns:
                if by:
                    parts[f"{col}_{f}"] = df.groupby(by, dropna=False)[col].agg(f)
                else:
                    parts[f"{col}_{f}"] = pd.Series([df[col].agg(f)])
        return pd.DataFrame(parts).reset_index() if by else pd.DataFrame(parts)
    except Exception as exc:
        raise DataError(f"aggregate failed: {type(exc).__name__}: {exc} (e.g. mean of a text column)") from exc
