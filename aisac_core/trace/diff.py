"""Diff: two runs' tool calls side by side (e.g. a run and its replay)."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, cast

from aisac_core.trace.pins import changed_pins, run_pins
from aisac_core.trace.queries import count_by, require_events
from aisac_core.trace.replay import compare_results
from aisac_core.trace.results import Diff, DiffStep, PinChange

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


class RunDiff:
    """Two runs side by side: a part of :class:`~aisac_core.trace.service.TraceService`. Collaborator: ``engine``
    (the store's SQL engine)."""

    engine: Engine

    def diff(self, run_a: str, run_b: str) -> Diff:
        """Compare two runs' tool calls step by step.

        Steps are aligned by (tool, arguments sha256) with difflib's longest matching blocks; aligned steps are
        ``same`` or ``changed`` (results compared as in replay, :func:`~aisac_core.trace.replay.compare_results`; a
        different status is ``changed``), unaligned ones ``only_a`` / ``only_b``. Also the pins that differ. Returns
        ``{run_a, run_b, counts, steps: [{status, tool, event_a, event_b, changes?}], pins_changed: [{pin, a, b}]}``.
        Raises TraceError for an unknown run."""
        ra = [r for r in require_events(self.engine, run_a) if r.kind == "tool_call"]
        rb = [r for r in require_events(self.engine, run_b) if r.kind == "tool_call"]
        ka = [(r.tool, r.arguments_sha256) for r in ra]
        kb = [(r.tool, r.arguments_sha256) for r in rb]
        steps: list[dict[str, Any]] = []
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=ka, b=kb, autojunk=False).get_opcodes():
            if op == "equal":
                for x, y in zip(ra[i1:i2], rb[j1:j2]):
                    if x.status != y.status:
                        st, ch = "changed", [f"status {x.status} -> {y.status}"]
                    else:
                        st, ch = compare_results(x.result_sha256, x.result_json, y.result_sha256, y.result_json)
                    steps.append(
                        {
                            "status": st,
                            "tool": x.tool,
                            "event_a": x.id,
                            "event_b": y.id,
                            **({"changes": ch} if ch else {}),
                        }
                    )
            else:
                steps += [{"status": "only_a", "tool": x.tool, "event_a": x.id, "event_b": None} for x in ra[i1:i2]]
                steps += [{"status": "only_b", "tool": y.tool, "event_a": None, "event_b": y.id} for y in rb[j1:j2]]
        pa, pb = run_pins(self.engine, run_a) or {}, run_pins(self.engine, run_b) or {}
        pins: list[PinChange] = [{"pin": k, "a": pa.get(k), "b": pb.get(k)} for k in changed_pins(pa, pb)]
        return {
            "run_a": run_a,
            "run_b": run_b,
            "counts": count_by(steps),
            "steps": cast("list[DiffStep]", steps),
            "pins_changed": pins,
        }
