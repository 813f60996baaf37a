"""Project tools of the materials template: chemical formulas, molar masses, theoretical capacities.

Every public function here becomes an MCP tool ``project_<name>`` when the project is served
(``aisac serve --project DIR``). Raise ``ValueError`` for bad input: the client sees its message as a tool error.

Atomic weights come from ``data/tables/elements.csv`` (IUPAC CIAAW standard atomic weights, abridged to five
significant figures; conventional values for elements with an interval, e.g. Li 6.94).
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path

ELEMENTS_CSV = Path(__file__).resolve().parent.parent / "data" / "tables" / "elements.csv"
#: Faraday constant, C/mol (CODATA 2018, exact since the 2019 SI redefinition).
FARADAY = 96485.33212

_TOKEN = re.compile(r"([A-Z][a-z]?)|(\d+(?:\.\d+)?)|([(\[])|([)\]])")


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, str]]:
    with ELEMENTS_CSV.open(encoding="utf-8", newline="") as f:
        return {row["symbol"]: row for row in csv.DictReader(f)}


def _parse(formula: str) -> dict[str, float]:
    """Element -> amount of a formula with groups and hydrates: 'Ca(OH)2', 'CuSO4·5H2O', 'LiNi0.8Mn0.1Co0.1O2'."""
    if not formula or not formula.strip():
        raise ValueError("formula is empty; give e.g. 'LiFePO4' or 'CuSO4·5H2O'")
    # '.' is a decimal point (LiNi0.8Mn0.1Co0.1O2), never a hydrate dot
    parts = re.split(r"[·*]", formula.replace(" ", ""))
    total: dict[str, float] = {}
    for part in parts:
        m = re.match(r"^(\d+(?:\.\d+)?)?(.*)$", part)
        assert m is not None
        mult = float(m.group(1)) if m.group(1) else 1.0
        for el, n in _parse_group(m.group(2), formula).items():
            total[el] = total.get(el, 0.0) + n * mult
    return total


def _parse_group(text: str, formula: str) -> dict[str, float]:
    stack: list[dict[str, float]] = [{}]
    pos = 0
    last: dict[str, float] | str | None = None
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(
                f"cannot read {formula!r} at {text[pos:]!r}: use element symbols (Fe, not fe), digits and parentheses"
            )
        el, num, opn, cls = m.group(1), m.group(2), m.group(3), m.group(4)
        if el:
            if el not in _table():
                raise ValueError(
                    f"unknown element {el!r} in {formula!r} (the template's element table has "
                    f"{len(_table())} elements: add a row to data/tables/elements.csv)"
                )
            stack[-1][el] = stack[-1].get(el, 0.0) + 1.0
            last = el
        elif num:
            n = float(num)
            if isinstance(last, str):
                stack[-1][last] += n - 1.0
            elif isinstance(last, dict):
                for k, v in last.items():
                    stack[-1][k] = stack[-1].get(k, 0.0) + v * (n - 1.0)
            else:
                raise ValueError(f"a number without an element before it in {formula!r}")
            last = None
        elif opn:
            stack.append({})
            last = None
        elif cls:
            if len(stack) == 1:
                raise ValueError(f"unbalanced ')' in {formula!r}")
            group = stack.pop()
            for k, v in group.items():
                stack[-1][k] = stack[-1].get(k, 0.0) + v
            last = group
        pos = m.end()
    if len(stack) != 1:
        raise ValueError(f"unbalanced '(' in {formula!r}")
    if not stack[0]:
        raise ValueError(f"no element in {formula!r}")
    return stack[0]


def molar_mass(formula: str) -> dict:
    """Molar mass and composition of a chemical formula.

    Args:
        formula: e.g. ``"LiFePO4"``, ``"Ca(OH)2"``, ``"CuSO4·5H2O"`` (hydrate dot or ``*``), ``"LiNi0.8Mn0.1Co0.1O2"``
            (fractional amounts allowed; ``.`` is always a decimal point, write hydrates with ``·`` or ``*``).

    Returns:
        ``{"formula", "composition": {element: amount}, "molar_mass_g_per_mol", "mass_fractions": {element: 0..1}}``,
        molar mass rounded to 3 decimals, from the template's element table (IUPAC standard atomic weights).

    Raises:
        ValueError: empty formula, unknown element symbol, unbalanced parentheses.
    """
    comp = _parse(formula)
    table = _table()
    masses = {el: n * float(table[el]["atomic_weight"]) for el, n in comp.items()}
    total = sum(masses.values())
    return {
        "formula": formula,
        "composition": {k: round(v, 6) for k, v in comp.items()},
        "molar_mass_g_per_mol": round(total, 3),
        "mass_fractions": {k: round(v / total, 5) for k, v in masses.items()},
    }


def element(symbol: str) -> dict:
    """Properties of one element from the template's table.

    Args:
        symbol: element symbol, case as written (``"Fe"``).

    Returns: ``{"symbol", "name", "atomic_number", "atomic_weight_g_per_mol"}``.

    Raises:
        ValueError: the symbol is not in the table.
    """
    row = _table().get(symbol.strip())
    if row is None:
        raise ValueError(f"element {symbol!r} is not in the template's table; symbols are case-sensitive (Fe, Co)")
    return {
        "symbol": row["symbol"],
        "name": row["name"],
        "atomic_number": int(row["atomic_number"]),
        "atomic_weight_g_per_mol": float(row["atomic_weight"]),
    }


def theoretical_capacity(formula: str, electrons: float = 1.0) -> dict:
    """Theoretical specific capacity of an electrode material, Q = n F / (3.6 M).

    Args:
        formula: the material's formula (e.g. ``"LiFePO4"``).
        electrons: electrons (lithium ions) exchanged per formula unit, > 0 (default 1).

    Returns: ``{"formula", "electrons", "molar_mass_g_per_mol", "capacity_mAh_per_g"}`` (F = 96485.33212 C/mol;
    3.6 converts C/g to mAh/g). LiFePO4 with one electron gives 169.9 mAh/g.

    Raises:
        ValueError: bad formula, or electrons <= 0.
    """
    if not electrons > 0:
        raise ValueError(f"electrons must be > 0, got {electrons}")
    mm = molar_mass(formula)["molar_mass_g_per_mol"]
    return {
        "formula": formula,
        "electrons": electrons,
        "molar_mass_g_per_mol": mm,
        "capacity_mAh_per_g": round(electrons * FARADAY / (3.6 * mm), 2),
    }


_CANDIDATE = re.compile(r"(?<![A-Za-z0-9])(?:[A-Z][a-z]?|[(\[]|[)\]]|\d+(?:\.\d+)?|[·*])+(?![A-Za-z])")


def formulas_in_text(text: str) -> dict:
    """Find chemical formulas in a text and give the molar mass of each (the materials workflow runs this on every
    question, see extensions/graph.py).

    A candidate is a run of element symbols, digits and parentheses with at least two elements or one count
    (``LiFePO4``, ``Al2O3``, ``H2O``; not ``I`` or ``NMC``); every symbol must be in the element table.

    Args:
        text: any text, at most 20,000 characters.

    Returns: ``{"formulas": [{"formula", "molar_mass_g_per_mol", "composition"}], "count"}``, in order of first
    appearance, without repeats.

    Raises:
        ValueError: text longer than 20,000 characters.
    """
    if len(text) > 20_000:
        raise ValueError(f"text is {len(text)} characters long; the limit is 20000")
    found: dict[str, dict] = {}
    for m in _CANDIDATE.finditer(text):
        cand = m.group(0).strip("·*")
        if cand in found or not any(c.isupper() for c in cand):
            continue
        symbols = re.findall(r"[A-Z][a-z]?", cand)
        if len(symbols) < 2 and not re.search(r"\d", cand):
            continue
        try:
            res = molar_mass(cand)
        except ValueError:
            continue
        found[cand] = {
            "formula": cand,
            "molar_mass_g_per_mol": res["molar_mass_g_per_mol"],
            "composition": res["composition"],
        }
    return {"formulas": list(found.values()), "count": len(found)}
