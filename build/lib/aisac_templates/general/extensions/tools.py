"""Project tools of the general template: a unit conversion to show how project tools work.

Every public function (no leading ``_``) becomes an MCP tool ``project_<name>`` when the project is served with
``aisac serve --project DIR``. Give each one type annotations (they become the tool's input schema) and a docstring
(the tool's description). Raise ``ValueError`` for bad input: the client sees the message as a tool error.
"""

from __future__ import annotations

_TO_KELVIN = {"K": (1.0, 0.0), "C": (1.0, 273.15), "F": (5 / 9, 273.15 - 32 * 5 / 9)}


def convert_temperature(value: float, from_unit: str, to_unit: str) -> dict:
    """Convert a temperature between kelvin, degrees Celsius and degrees Fahrenheit.

    Args:
        value: the temperature in ``from_unit``.
        from_unit / to_unit: ``"K"``, ``"C"`` or ``"F"``.

    Returns: ``{"value", "unit"}`` rounded to 6 decimals (T/K = T/°C + 273.15; T/°F = 9/5 T/°C + 32, exact SI
    definitions).

    Raises:
        ValueError: unknown unit, or a result below absolute zero.
    """
    for u in (from_unit, to_unit):
        if u not in _TO_KELVIN:
            raise ValueError(f"unknown unit {u!r}; use 'K', 'C' or 'F'")
    a, b = _TO_KELVIN[from_unit]
    kelvin = value * a + b
    if kelvin < 0:
        raise ValueError(f"{value} {from_unit} is below absolute zero")
    a2, b2 = _TO_KELVIN[to_unit]
    return {"value": round((kelvin - b2) / a2, 6), "unit": to_unit}
