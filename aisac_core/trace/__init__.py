"""The trace: one event per tool call, role step and model call, and everything read from it.

Modules: :mod:`~aisac_core.trace.recorder` (run ids, writing events), :mod:`~aisac_core.trace.pins` (input-file
and configuration pins), :mod:`~aisac_core.trace.otel` (OpenTelemetry spans), :mod:`~aisac_core.trace.queries`
(runs, event trees, events), :mod:`~aisac_core.trace.exports` (JSON bundle, Markdown, W3C PROV, RO-Crate),
:mod:`~aisac_core.trace.verify`, :mod:`~aisac_core.trace.replay`, :mod:`~aisac_core.trace.diff`,
:mod:`~aisac_core.trace.retention` (statistics, pruning) and :mod:`~aisac_core.trace.dashboard` (HTML pages).
The public names are re-exported here.
"""

from aisac_core.trace.diff import diff_runs
from aisac_core.trace.exports import EXPORT_FORMATS, export_run
from aisac_core.trace.otel import configure_otel, emit_span, otel_attributes, otel_enabled
from aisac_core.trace.pins import config_pins, pin_inputs, pin_run, run_pins
from aisac_core.trace.queries import (
    ERROR_STATUSES,
    TraceError,
    get_event,
    get_run,
    list_runs,
)
from aisac_core.trace.recorder import (
    MAX_STORED_RESULT,
    RunAssigner,
    anchor_ids,
    list_events,
    new_run_id,
    record_tool_call,
)
from aisac_core.trace.replay import compare_results, replay_run, replay_skip_reason
from aisac_core.trace.retention import prune_runs, trace_stats
from aisac_core.trace.verify import run_signature, verify_run

__all__ = [
    "ERROR_STATUSES", "EXPORT_FORMATS", "MAX_STORED_RESULT", "RunAssigner", "TraceError", "anchor_ids",
    "compare_results", "config_pins", "configure_otel", "diff_runs", "emit_span", "export_run", "get_event",
    "get_run", "list_events", "list_runs", "new_run_id", "otel_attributes", "otel_enabled", "pin_inputs", "pin_run",
    "prune_runs", "record_tool_call", "replay_run", "replay_skip_reason", "run_pins", "run_signature",
    "trace_stats", "verify_run",
]
