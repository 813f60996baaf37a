"""The trace: one event per tool call, role step and model call, and everything read from it.

Modules: :mod:`~aisac_core.trace.recorder` (run ids, writing events), :mod:`~aisac_core.trace.pins` (input-file
and configuration pins), :mod:`~aisac_core.trace.otel` (OpenTelemetry spans), :mod:`~aisac_core.trace.queries`
(runs, event trees, events), :mod:`~aisac_core.trace.exports` (JSON bundle, Markdown, W3C PROV, RO-Crate),
:mod:`~aisac_core.trace.verify`, :mod:`~aisac_core.trace.replay`, :mod:`~aisac_core.trace.diff`,
:mod:`~aisac_core.trace.retention` (statistics, pruning) and :mod:`~aisac_core.trace.dashboard` (HTML pages).
Import from those modules; this package root stays empty, so loading one of them (the suite's middleware loads
the recorder, pins and otel) does not load the others.
"""
