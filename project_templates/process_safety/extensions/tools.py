"""Project tools of the process-safety template: flammability classification and a hazard score.

Every public function here becomes an MCP tool ``project_<name>`` when the project is served. Raise ``ValueError``
for bad input: the client sees its message as a tool error.

Sources of the thresholds:
- GHS flammable liquids (UN GHS, Rev. 9, chapter 2.6, table 2.6.1): category 1 flash point < 23 °C and initial
  boiling point <= 35 °C; 2: flash point < 23 °C and boiling point > 35 °C; 3: 23 <= flash point <= 60 °C;
  4: 60 < flash point <= 93 °C.
- NFPA 704 flammability rating: 4 flash point < 22.8 °C and boiling point < 37.8 °C; 3 flash point < 22.8 °C and
  boiling point >= 37.8 °C, or 22.8 <= flash point < 37.8 °C; 2: 37.8 <= flash point < 93.3 °C; 1: >= 93.3 °C.
- The 0-100 hazard score is this template's own illustrative weighting (not a standard): 60 % from the NFPA rating,
  40 % from the width of the flammable range (UFL - LFL, capped at 40 vol-%). Adapt it to your site's method.
"""

from __future__ import annotations

import csv
from pathlib import Path

SUBSTANCES_CSV = Path(__file__).resolve().parent.parent / "data" / "tables" / "substances.csv"


def _ghs_category(fp: float, bp: float) -> int | None:
    if fp < 23:
        return 1 if bp <= 35 else 2
    if fp <= 60:
        return 3
    if fp <= 93:
        return 4
    return None


def _nfpa(fp: float, bp: float) -> int:
    if fp < 22.8:
        return 4 if bp < 37.8 else 3
    if fp < 37.8:
        return 3
    if fp < 93.3:
        return 2
    return 1


def hazard_score(
    flash_point_c: float, boiling_point_c: float, lfl_vol_pct: float | None = None, ufl_vol_pct: float | None = None
) -> dict:
    """Flammability classification and a 0-100 hazard score of a liquid.

    Args:
        flash_point_c: closed-cup flash point, °C.
        boiling_point_c: initial boiling point, °C (>= flash point).
        lfl_vol_pct / ufl_vol_pct: lower / upper flammability limits in air, vol-% (optional, both or neither;
            0 < LFL < UFL <= 100).

    Returns: ``{"ghs_category": 1-4 or None (not classified as flammable), "nfpa_flammability": 1-4,
    "flammable_range_vol_pct": float or None, "hazard_score": 0-100, "basis": str}`` (thresholds: module docstring).

    Raises:
        ValueError: boiling point below flash point, limits given singly or out of order.
    """
    if boiling_point_c < flash_point_c:
        raise ValueError(
            f"boiling point {boiling_point_c} °C is below the flash point {flash_point_c} °C; check the "
            "values (both in °C)"
        )
    if (lfl_vol_pct is None) != (ufl_vol_pct is None):
        raise ValueError("give both lfl_vol_pct and ufl_vol_pct, or neither")
    rng = None
    if lfl_vol_pct is not None and ufl_vol_pct is not None:
        if not 0 < lfl_vol_pct < ufl_vol_pct <= 100:
            raise ValueError(f"need 0 < LFL < UFL <= 100 vol-%, got LFL {lfl_vol_pct}, UFL {ufl_vol_pct}")
        rng = round(ufl_vol_pct - lfl_vol_pct, 3)
    nfpa = _nfpa(flash_point_c, boiling_point_c)
    score = 60 * nfpa / 4 + (40 * min(rng, 40) / 40 if rng is not None else 0)
    return {
        "ghs_category": _ghs_category(flash_point_c, boiling_point_c),
        "nfpa_flammability": nfpa,
        "flammable_range_vol_pct": rng,
        "hazard_score": round(score, 1),
        "basis": "GHS Rev.9 table 2.6.1; NFPA 704; score = 60*NFPA/4 + 40*min(UFL-LFL, 40)/40 (template's own)",
    }


def substance_hazard(substance: str) -> dict:
    """The hazard score of a substance listed in the template's table ``data/tables/substances.csv``.

    Args:
        substance: name as in the table, case-insensitive (e.g. ``"toluene"``).

    Returns: the table row (flash point, boiling point, limits) merged with :func:`hazard_score`'s result.

    Raises:
        ValueError: the substance is not in the table (the message lists those that are).
    """
    with SUBSTANCES_CSV.open(encoding="utf-8", newline="") as f:
        rows = {r["substance"].lower(): r for r in csv.DictReader(f)}
    row = rows.get(substance.strip().lower())
    if row is None:
        raise ValueError(
            f"{substance!r} is not in data/tables/substances.csv (it lists {', '.join(sorted(rows))}); "
            "add a row or call project_hazard_score with the values"
        )
    res = hazard_score(
        float(row["flash_point_c"]), float(row["boiling_point_c"]), float(row["lfl_vol_pct"]), float(row["ufl_vol_pct"])
    )
    return {
        "substance": row["substance"],
        "cas": row["cas"],
        "flash_point_c": float(row["flash_point_c"]),
        "boiling_point_c": float(row["boiling_point_c"]),
        "lfl_vol_pct": float(row["lfl_vol_pct"]),
        "ufl_vol_pct": float(row["ufl_vol_pct"]),
        **res,
    }
