"""What the PROV and RO-Crate exports share: the software that shaped a run (aisac's version, the models and the
parser revision from the run's configuration pins) and event times rounded outward to milliseconds."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from typing import Any

#: the project's home page (the ``url`` of the software in the RO-Crate).
AISAC_URL = (
    "https://aisac.invalid/"  # no public home yet: the reserved .invalid domain (RFC 2606) of its PROV namespace
)
#: the run pins naming the models and parser a run's results depend on (:func:`aisac_core.trace.pins.config_pins`).
MODEL_PINS = ("embedding_model_id", "sparse_model", "parser_revision", "index_fingerprint", "pdf_pipeline")


def aisac_version(b: dict[str, Any]) -> str:
    """aisac's version when the run was made (its pins, ``packages.aisac``), else the installed one, else
    ``unknown``. ``b``: the JSON bundle."""
    pins = b.get("pins") or {}
    recorded = (pins.get("packages") or {}).get("aisac") if isinstance(pins, dict) else None
    if recorded:
        return str(recorded)
    try:
        return version("aisac")
    except PackageNotFoundError:
        return "unknown"


def software_pins(b: dict[str, Any]) -> dict[str, str]:
    """The models and parser revision of a run (``MODEL_PINS`` found in its pins; the ``retrieval`` constants
    are not repeated), as strings. ``b``: the JSON bundle."""
    pins = b.get("pins") or {}
    return {k: str(pins[k]) for k in MODEL_PINS if isinstance(pins, dict) and pins.get(k) is not None}


def start_ms(iso: str) -> datetime:
    """An event's start (ISO 8601) rounded down to the millisecond: with :func:`end_ms`, a child's interval stays
    within its parent's after rounding (RO-Crate and PROV readers expect at most millisecond precision)."""
    t = datetime.fromisoformat(iso)
    return t - timedelta(microseconds=t.microsecond % 1000)


def end_ms(iso: str) -> datetime:
    """An event's end (ISO 8601) rounded up to the millisecond (see :func:`start_ms`)."""
    t = datetime.fromisoformat(iso)
    rest = t.microsecond % 1000
    return t if rest == 0 else t + timedelta(microseconds=1000 - rest)


def iso_ms(t: datetime) -> str:
    """``t`` as ISO 8601 with milliseconds (``2026-11-28T14:23:20.123+00:00``)."""
    return t.isoformat(timespec="milliseconds")


def duration_ms(start: datetime, end: datetime) -> int:
    """Whole milliseconds from ``start`` to ``end`` (rounded up)."""
    return math.ceil((end - start).total_seconds() * 1000)
