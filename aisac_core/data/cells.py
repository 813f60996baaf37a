"""Cell values and A1 coordinates: the basics the sheet modules share (:mod:`aisac_core.data.regions`,
:mod:`aisac_core.data.headers`, :mod:`aisac_core.data.sheetgrid`)."""

from __future__ import annotations

import re
from datetime import date, datetime
from datetime import time as dtime
from typing import Any

from aisac_core.data.errors import DataError

NA_STRINGS = {"", "na", "n/a", "nan", "null", "none", "-", "--", "#n/a"}
A1_RE = re.compile(r"^\s*\$?([A-Za-z]{1,3})\$?(\d{1,7})\s*(?::\s*\$?([A-Za-z]{1,3})\$?(\d{1,7}))?\s*$")


#: statistical markers for a missing value that are never a label: ``[c]``, ``[x]``, ``[z]`` (ONS/GSS), ``(NA)``,
#: ``(X)``, ``(D)``, ``(S)``, ``(Z)`` (US Census Bureau), ``..``, ``...`` (UN, ONS); :mod:`aisac_core.data.structure`
#: keeps their meaning
_STAT_MARKER = re.compile(r"\[[a-z]{1,4}\]|\((NA|X|D|S|Z|B|N|F)\)|\.{2,3}|…")


def cell_kind(v: Any) -> str:
    """'empty', 'num' (numbers, booleans, dates, numeric strings such as ``1,234.5`` or ``12 %``) or 'text'.
    Statistical markers of a missing value (``[c]``, ``(NA)``, ``..``) are 'empty': a missing value, not a label."""
    if v is None:
        return "empty"
    if isinstance(v, (bool, int, float, datetime, date, dtime)):
        if isinstance(v, float) and v != v:
            return "empty"
        return "num"
    s = str(v).strip()
    if s.lower() in NA_STRINGS or _STAT_MARKER.fullmatch(s):
        return "empty"
    try:
        float(s)
        return "num"
    except ValueError:
        pass
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", s) or re.fullmatch(r"[-+]?\d+(\.\d+)?\s?%", s):
        return "num"
    return "text"


# -- A1 ranges ------------------------------------------------------------------------------------------------
def _col_number(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n


def col_letters(n: int) -> str:
    """1-based column number -> Excel letters (1 -> A, 28 -> AB)."""
    s = ""
    while n:
        n, r = divmod(n - 1, 26)
        s = chr(65 + r) + s
    return s


def to_a1(top: int, left: int, bottom: int, right: int) -> str:
    """0-based inclusive bounds -> ``"B3:F20"``."""
    return f"{col_letters(left + 1)}{top + 1}:{col_letters(right + 1)}{bottom + 1}"


def parse_range(text: str, n_rows: int | None = None, n_cols: int | None = None) -> tuple[int, int, int, int]:
    """An Excel A1 range (``"B3:F20"``, ``"$B$3:$F$20"``, one cell ``"C4"``) as 0-based inclusive ``(top, left,
    bottom, right)``. With ``n_rows``/``n_cols`` (the sheet's used size) the range must overlap the sheet.

    Raises:
        DataError: a malformed range, one whose end is above/left of its start, or one outside the sheet.
    """
    m = A1_RE.match(text or "")
    if not m:
        raise DataError(
            f"range {text!r} is not an Excel A1 range: use the form 'B3:F20' (columns as letters, "
            "rows as numbers from 1), or one cell like 'C4'"
        )
    c0, r0 = _col_number(m.group(1)), int(m.group(2))
    c1, r1 = (_col_number(m.group(3)), int(m.group(4))) if m.group(3) else (c0, r0)
    if r0 < 1 or r1 < 1:
        raise DataError(f"range {text!r}: rows are numbered from 1")
    if r1 < r0 or c1 < c0:
        raise DataError(
            f"range {text!r} ends above or left of where it starts: write it top-left first, e.g. "
            f"'{col_letters(min(c0, c1))}{min(r0, r1)}:{col_letters(max(c0, c1))}{max(r0, r1)}'"
        )
    if n_rows is not None and n_cols is not None and (r0 > n_rows or c0 > n_cols):
        used = to_a1(0, 0, max(n_rows, 1) - 1, max(n_cols, 1) - 1)
        raise DataError(f"range {text!r} lies outside the sheet: its used area is {used}")
    return r0 - 1, c0 - 1, r1 - 1, c1 - 1


# -- blocks ---------------------------------------------------------------------------------------------------


def cell_text(v: Any) -> str:
    """A cell value as the text a person reads: ``2.0`` -> ``2``, a midnight datetime -> its date."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, datetime):
        return v.date().isoformat() if v.time() == dtime(0) else v.isoformat()
    return str(v).strip()
