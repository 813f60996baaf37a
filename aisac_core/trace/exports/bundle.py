"""The JSON bundle of a run (format ``aisac-trace-bundle/1``): the machine-readable export every other one is
built from, and what retention writes before it deletes a run."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.trace.pins import run_pins
from aisac_core.trace.queries import event_dict, require_events, run_anchors, run_inputs, run_summary

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: bundle format id written into every JSON export (bump on incompatible change).
BUNDLE_FORMAT = "aisac-trace-bundle/1"


def safe_name(run_id: str) -> str:
    """``run_id`` with every character outside ``[A-Za-z0-9_.-]`` replaced by ``_`` (file names, PROV ids)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)


def export_dir(data_dir: Path) -> Path:
    """``<data dir>/trace_exports/`` (created when missing)."""
    d = data_dir / "trace_exports"
    d.mkdir(parents=True, exist_ok=True)
    return d


def export_bundle(engine: Engine, run_id: str, current_pins: dict[str, Any]) -> dict[str, Any]:
    """The JSON bundle of a run: ``{format, exported_at, run (summary), pins (recorded), current_pins (given: the
    store's configuration now, :func:`aisac_core.trace.pins.config_pins`), events (with arguments, stored result
    and hashes), inputs (pinned input files), anchors (cited)}``. Raises TraceError for an unknown run."""
    rows = require_events(engine, run_id)
    return {
        "format": BUNDLE_FORMAT,
        "exported_at": datetime.now(UTC).isoformat(),
        "run": run_summary(rows),
        "pins": run_pins(engine, run_id),
        "current_pins": current_pins,
        "events": [event_dict(r) for r in rows],
        "inputs": [
            {"event_id": i.event_id, "path": i.path, "sha256": i.sha256, "size": i.size, "source": i.source}
            for i in run_inputs(engine, run_id)
        ],
        "anchors": run_anchors(rows),
    }
