"""Replay: re-execute a run's recorded tool calls against the current store and compare the results.

The core calls tools through a :class:`~aisac_core.ports.ToolPort` (the server layer passes one over the suite), so
this module knows no MCP. Result comparison (:func:`compare_results`) is shared with :mod:`aisac_core.trace.diff`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, cast

from aisac_core.hashing import dumps, sha256_json
from aisac_core.ports import ToolOutcome, ToolPort
from aisac_core.trace.pins import changed_pins, run_pins
from aisac_core.trace.queries import count_by, parse_json, require_events
from aisac_core.trace.recorder import new_run_id
from aisac_core.trace.results import Replayed, ReplayStep

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: result keys that measure time and change on every call: ignored when replay and diff compare results.
#: ``run_id``, ``event_id`` and ``job_id`` in a result name the recording, not its content.
VOLATILE_KEYS = frozenset(
    {
        "took_ms",
        "latency_ms",
        "elapsed_ms",
        "duration_ms",
        "elapsed_s",
        "took_s",
        "seconds",
        "created_at",
        "started_at",
        "finished_at",
        "updated_at",
        "timestamp",
        "run_id",
        "event_id",
        "job_id",
    }
)

#: tool-name words that mark a call as writing, destructive or non-deterministic (not replayed): the fallback for
#: tools without annotation hints (old traces, plugin tools), see :func:`replay_skip_reason`.
_SKIP_WORDS = re.compile(
    r"(^|_)(remove|delete|prune|forget|clear|drop|reset|cancel|stop|close|add|record|start|"
    r"create|new|put|set|save|write|update|index|load|register|upload|import|run|exec|replay|"
    r"job|status|fetch|download|submit)(_|$)"
)


# ---------------------------------------------------------------------------------------------- comparison


def strip_volatile(x: Any) -> Any:
    """``x`` without the keys of ``VOLATILE_KEYS`` at any depth (timings that change on every call)."""
    if isinstance(x, dict):
        return {k: strip_volatile(v) for k, v in x.items() if k not in VOLATILE_KEYS}
    if isinstance(x, list):
        return [strip_volatile(v) for v in x]
    return x


def json_changes(a: Any, b: Any, path: str = "$", limit: int = 20) -> list[str]:
    """JSON paths (``$.hits[0].chunk_id``; ``$.x[len 2 -> 3]`` for lists of another length) where ``a`` and ``b``
    differ, at most ``limit``."""
    out: list[str] = []

    def walk(x: Any, y: Any, p: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y), key=str):
                if k not in x or k not in y:
                    out.append(f"{p}.{k}")
                else:
                    walk(x[k], y[k], f"{p}.{k}")
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                out.append(f"{p}[len {len(x)} -> {len(y)}]")
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{p}[{i}]")
        elif x != y:
            out.append(p)

    walk(a, b, path)
    return out


def compare_results(
    sha_a: str | None, json_a: str | None, sha_b: str | None, json_b: str | None
) -> tuple[str, list[str]]:
    """``("same" | "changed", changed paths)``: equal sha256, or equal after removing volatile timing keys. When a
    stored result was truncated, only the sha256 decides."""
    if sha_a == sha_b:
        return "same", []
    va, ca = parse_json(json_a)
    vb, cb = parse_json(json_b)
    if ca and cb and va is not None and vb is not None:
        sa, sb = strip_volatile(va), strip_volatile(vb)
        if sa == sb:
            return "same", []
        return "changed", json_changes(sa, sb)
    return "changed", ["$ (stored result truncated: compared by sha256)"]


# ---------------------------------------------------------------------------------------------- replay


def _hint(annotations: Any, name: str) -> Any:
    """An annotation hint (``readOnlyHint``...) from a dict (:class:`~aisac_core.ports.ToolInfo`), a pydantic model
    with camelCase aliases (MCP ``ToolAnnotations``), or an object with the attribute."""
    if annotations is None:
        return None
    if not isinstance(annotations, dict) and hasattr(annotations, "model_dump"):
        annotations = annotations.model_dump(by_alias=True)
    if isinstance(annotations, dict):
        return annotations.get(name)
    return getattr(annotations, name, None)


_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
#: what a missing hint means (MCP specification, "Tool annotations": a tool is assumed to write, destructively, not
#: idempotently, to an open world unless its annotations say otherwise)
SPEC_DEFAULT_HINTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}


def replay_skip_reason(tool: str, annotations: Any = None) -> str | None:
    """Why a recorded tool call is not replayed, or None when it is.

    ``annotations``: the tool's MCP annotations (the live tool list's), as a dict (``ToolInfo.annotations``) or an
    object with ``readOnlyHint`` / ``destructiveHint`` / ``idempotentHint`` / ``openWorldHint`` attributes.
    ``trace_*`` tools read the trace itself: never replayed. When the tool declares any hint, the hints decide, in
    this order: ``openWorldHint`` true: skipped (its answer comes from outside the store, e.g. the web, so it is
    not reproducible); ``readOnlyHint`` true: replayed; ``destructiveHint`` true: skipped; any other write, also an
    idempotent one: skipped (a replay compares reads against the current store and never changes it: a write
    would duplicate data, start work, add turns or re-index). A hint left out means the specification's default
    (:data:`SPEC_DEFAULT_HINTS`). Without hints (tools of old versions, plugins), the name decides:
    a writing or time-dependent verb (``_SKIP_WORDS``: add, remove, index, run, job, status, fetch...) skips."""
    if tool.startswith("trace_"):
        return "reads the trace itself"
    hints = {h: _hint(annotations, h) for h in _HINTS}
    if any(v is not None for v in hints.values()):
        # a hint left out means the specification's default (a compact tool list sends only the others)
        hints = {h: SPEC_DEFAULT_HINTS[h] if v is None else v for h, v in hints.items()}
        if hints["openWorldHint"] is True:
            return "answers from outside the store (tool annotation openWorldHint): not reproducible, not replayed"
        if hints["readOnlyHint"] is True:
            return None
        if hints["destructiveHint"] is True:
            return "destructive (tool annotation destructiveHint): not replayed"
        kind = "idempotent, but " if hints["idempotentHint"] is True else ""
        return f"writes to the store (tool annotation readOnlyHint false; {kind}a replay never writes): not replayed"
    m = _SKIP_WORDS.search(tool.split("_", 1)[1] if "_" in tool else tool)
    if m:
        return f"writes to the store, starts work or depends on time/the web ('{m.group(2)}' in the name): not replayed"
    return None


def _error_text(outcome: ToolOutcome) -> str:
    if outcome.error is not None:
        return outcome.error
    obj = outcome.value
    return " ".join(str(x) for x in obj) if isinstance(obj, list) else str(obj)


class RunReplay:
    """Re-executing a recorded run: a part of :class:`~aisac_core.trace.service.TraceService`. Collaborators:
    ``engine`` (the store's SQL engine) and ``config_pins()`` (the store's configuration now, JSON-ready:
    :func:`aisac_core.trace.pins.config_pins`)."""

    engine: Engine

    def config_pins(self) -> dict[str, Any]:
        """The store's configuration now (provided by the service)."""
        raise NotImplementedError

    async def replay(
        self, run_id: str, tools: ToolPort, *, force: list[str] | None = None, replay_run_id: str | None = None
    ) -> Replayed:
        """Re-execute a run's recorded top-level tool calls in order against the current store and compare results.

        Calls go through ``tools`` (the suite's tools behind the provenance middleware, so they are recorded) with
        request ``_meta`` ``{"run_id": <replay run id>}``: under a new run id (``replay_run_id`` or ``replay-<new
        id>``), never into the original run. A call's result is compared as the middleware recorded it: the
        structured content, else the text blocks (:attr:`~aisac_core.ports.ToolOutcome.value`). Role steps and model
        calls are not tool calls: they are reproduced by the roles tool call that made them; when the run holds model
        calls, a tool with an ``llm`` argument (roles_route / roles_plan / roles_evaluate) is replayed with
        ``llm="replay"``, so its model answers come from the roles response cache only (an unseen request fails the
        step). Calls with a parent event are covered by their parent's replay. Calls skipped by
        :func:`replay_skip_reason` are listed with the reason; ``force`` names tools to replay anyway.

        Which calls are re-executed is decided from the tools' annotations in the live tool list
        (:func:`replay_skip_reason`; the tool name only for tools without hints).

        Per step: ``same`` (result sha256 equal, or equal once timing keys ``VOLATILE_KEYS`` are removed; a call
        that failed before and fails again with the same status is ``same`` too), ``changed`` (with the JSON
        paths that differ), ``failed`` (the replayed call failed where the original succeeded, or vice versa), or
        ``skipped`` (with the reason).

        Overall ``status``: ``failed`` when a step failed, else ``changed`` when one changed, else ``same`` when at least
        one call was re-executed, else ``not_replayed`` (every step skipped, or no tool call at all: nothing was
        compared; the steps say why, and ``message`` says what to do).

        ``pins_changed``: the configuration pins (:func:`aisac_core.trace.pins.changed_pins`) that differ between the
        run's recorded ones and ``config_pins()`` (the store's configuration now).

        Returns ``{run_id, replay_run_id, status (same | changed | failed | not_replayed), counts, steps: [{event_id,
        tool, status, reason?, changes?, original_sha256, replay_sha256, error?, llm?}], pins_changed, message?}``.
        Raises TraceError for an unknown run."""
        # long function: replaying a run's calls in order, each kind of call handled in place
        rows = require_events(self.engine, run_id)
        rid = replay_run_id or "replay-" + new_run_id()[4:]
        force_set = set(force or [])
        has_model_calls = any(r.kind == "model_call" for r in rows)
        available = {t.name: t for t in await tools.list_tools()}
        steps: list[dict[str, Any]] = []  # ReplayStep dicts, built from a common base
        for r in rows:
            base: dict[str, Any] = {"event_id": r.id, "tool": r.tool, "original_sha256": r.result_sha256}
            if r.kind != "tool_call":
                continue
            if r.parent_id is not None:
                steps.append({**base, "status": "skipped", "reason": f"child of event {r.parent_id}: replayed by it"})
                continue
            if r.tool not in available:
                steps.append({**base, "status": "failed", "reason": f"tool {r.tool} is not available in this suite"})
                continue
            reason = None if r.tool in force_set else replay_skip_reason(r.tool, available[r.tool].annotations)
            if reason:
                steps.append({**base, "status": "skipped", "reason": reason})
                continue
            args, complete = parse_json(r.arguments_json)
            if not complete or not isinstance(args, dict):
                steps.append({**base, "status": "skipped", "reason": "arguments were stored truncated"})
                continue
            props = (available[r.tool].input_schema or {}).get("properties", {})
            if "llm" in props and has_model_calls and args.get("llm") != "none":
                args = {**args, "llm": "replay"}  # model answers from the roles response cache only
                base["llm"] = "replay"
            try:
                outcome = await tools.call_tool(r.tool, args, meta={"run_id": rid})
                ok, obj = not outcome.is_error, outcome.value
                err = _error_text(outcome) if outcome.is_error else None
            except Exception as exc:  # a port that raises instead of returning the error: the step failed
                ok, err, obj = False, f"{type(exc).__name__}: {exc}", None
            new_sha = None if obj is None or not ok else sha256_json(obj)
            if r.status == "ok" and ok:
                status, changes = compare_results(r.result_sha256, r.result_json, new_sha, dumps(obj))
                steps.append(
                    {**base, "status": status, "replay_sha256": new_sha, **({"changes": changes} if changes else {})}
                )
            elif r.status != "ok" and not ok:
                steps.append(
                    {
                        **base,
                        "status": "same",
                        "replay_sha256": None,
                        "error": err,
                        "reason": "failed before and fails again",
                    }
                )
            else:
                steps.append(
                    {
                        **base,
                        "status": "failed",
                        "replay_sha256": new_sha,
                        "error": err or "",
                        "reason": "the original call failed but the replay succeeded" if ok else "the replay failed",
                    }
                )
        counts = count_by(steps)
        old_pins = run_pins(self.engine, run_id)
        pins_changed = changed_pins(old_pins, self.config_pins()) if old_pins else []
        executed = sum(1 for s in steps if "replay_sha256" in s)
        overall = (
            "failed"
            if counts.get("failed")
            else "changed"
            if counts.get("changed")
            else "same"
            if executed
            else "not_replayed"
        )
        out: Replayed = {
            "run_id": run_id,
            "replay_run_id": rid,
            "status": overall,
            "counts": counts,
            "steps": cast("list[ReplayStep]", steps),
            "pins_changed": pins_changed,
        }
        if overall == "not_replayed":
            out["message"] = "no call was re-executed, so nothing was compared: " + (
                "every step was skipped (see each step's reason); pass force=[tool names] to replay skipped tools anyway"
                if steps
                else "the run holds no top-level tool call"
            )
        return out
