"""Verification: are the evidence a run cited and the input files it named still what they were?

Also :func:`run_signature`, the cheap change marker the dashboard's live stream polls.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import case, func, inspect, literal, select

from aisac_core.hashing import sha256_file
from aisac_core.rag.results import Verification
from aisac_core.store.tables import TraceEvent
from aisac_core.trace.gaps import run_gap
from aisac_core.trace.queries import count_by, require_events, run_anchors, run_inputs
from aisac_core.trace.results import AnchorCheck, InputCheck, Verified

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: checks one anchor against the index (``aisac_core.rag.verify.AnchorVerifier.verify_full_anchor`` bound to the store's rag domain):
#: anchor dict in, rag's :class:`~aisac_core.rag.results.Verification` (``{status: ok | file_changed |
#: chunk_changed | missing, detail, ...}``) out
AnchorChecker = Callable[[dict[str, Any]], Verification]

#: verify_anchor status -> trace_verify verdict.
ANCHOR_VERDICT = {"ok": "unchanged", "file_changed": "changed", "chunk_changed": "changed", "missing": "missing"}


def run_signature(engine: Engine, run_id: str | None = None) -> str:
    """A string that changes whenever a run (or, without ``run_id``, the trace) changes: ``"<largest event
    id>.<events still running>.<events with a result>"`` (the last two are 0 without ``run_id``; role steps are
    written on entry and completed in place). The dashboard's live stream polls it."""
    t = inspect(TraceEvent).local_table
    if run_id is None:
        q = select(func.max(t.c.id), literal(0), literal(0))
    else:
        q = select(
            func.max(t.c.id), func.sum(case((t.c.status == "running", 1), else_=0)), func.count(t.c.result_sha256)
        ).where(t.c.run_id == run_id)
    with engine.connect() as conn:
        m, running, done = conn.execute(q).one()
    return f"{int(m or 0)}.{int(running or 0)}.{int(done or 0)}"


def _file_level(now: str | None, anchor: dict[str, Any]) -> dict[str, str]:
    """The verdict of an anchor from its file's current sha256 alone (``now``: None when the file is gone)."""
    st = "missing" if now is None else "unchanged" if now == anchor.get("sha256") else "changed"
    return {
        "status": st,
        "anchor_status": {"unchanged": "ok", "changed": "file_changed"}.get(st, st),
        "detail": "file-level check (sha256 of the file): "
        + (
            "the file is gone"
            if now is None
            else "the file is byte-identical"
            if st == "unchanged"
            else "the file's bytes changed; trace_verify in the server also looks for the passage"
        ),
    }


def verify_run(
    engine: Engine, run_id: str, *, check_anchor: AnchorChecker | None = None, data_dir: Path | None = None
) -> Verified:
    """Re-hash every evidence anchor a run cited and every input file it pinned.

    With ``check_anchor`` (:meth:`aisac_core.rag.verify.AnchorVerifier.verify_full_anchor` on the store's index: file sha256 and chunk
    text sha256), anchors go through it; its
    ``ok`` is reported ``unchanged``, ``file_changed`` / ``chunk_changed`` as ``changed`` (``anchor_status``
    keeps the detail: with ``file_changed`` the quoted passage is still in the new version) and ``missing`` as
    ``missing``. Input files are re-hashed against the pin: ``unchanged`` / ``changed`` / ``missing``.

    Without ``check_anchor``, anchors are checked at file level only (file sha256 against the anchor's), without
    opening the vector store: what a process that does not own the store (``aisac dashboard``) can do without
    taking the store's lock; a changed file is then reported ``changed`` / ``file_changed`` without looking for the
    passage.

    ``gap`` reports the run's trace events that are not in the store (:func:`aisac_core.trace.gaps.run_gap`: lost
    ones from its ``trace_gap`` events, and with ``data_dir`` the lost counts and pending events of that data dir's
    local journal); it does not change ``status``, which is about the evidence.

    Returns ``{run_id, status (unchanged | changed | missing: the worst item), counts, anchors: [{chunk_id,
    path, page, status, anchor_status, detail, event_id}], inputs: [{path, status, sha256, sha256_now, source,
    event_id}], gap: {lost, pending, runs, detail}}``. Raises TraceError for an unknown run."""
    rows = require_events(engine, run_id)
    hashes: dict[str, str | None] = {}

    def rehash(path: str) -> str | None:
        if path not in hashes:
            try:
                hashes[path] = sha256_file(Path(path))
            except OSError:
                hashes[path] = None
        return hashes[path]

    anchors_out: list[AnchorCheck] = []
    for a in run_anchors(rows):
        if check_anchor is not None:
            try:
                v = check_anchor({k: v for k, v in a.items() if k not in ("event_id", "title")})
                verdict = {
                    "status": ANCHOR_VERDICT.get(v["status"], "changed"),
                    "anchor_status": v["status"],
                    "detail": v.get("detail", ""),
                }
            except Exception as exc:  # one unverifiable anchor must not hide the others' verdicts
                verdict = {"status": "missing", "anchor_status": "error", "detail": f"{type(exc).__name__}: {exc}"}
        else:
            verdict = _file_level(rehash(a.get("path") or ""), a)
        anchors_out.append(
            {
                "chunk_id": a.get("chunk_id"),
                "path": a.get("path"),
                "page": a.get("page"),
                "event_id": a["event_id"],
                "status": verdict["status"],
                "anchor_status": verdict["anchor_status"],
                "detail": verdict["detail"],
            }
        )
    inputs_out: list[InputCheck] = []
    for i in run_inputs(engine, run_id):
        p = Path(i.path)
        if i.sha256 is None:
            try:
                st_ = p.stat()
                status = "unchanged" if (st_.st_size, st_.st_mtime_ns) == (i.size, i.mtime_ns) else "changed"
            except OSError:
                status = "missing"
            now = None
        else:
            now = rehash(i.path)
            status = "missing" if now is None else "unchanged" if now == i.sha256 else "changed"
        inputs_out.append(
            {
                "path": i.path,
                "status": status,
                "sha256": i.sha256,
                "sha256_now": now,
                "source": i.source,
                "event_id": i.event_id,
            }
        )
    counts = count_by([*anchors_out, *inputs_out])
    overall = "missing" if counts.get("missing") else "changed" if counts.get("changed") else "unchanged"
    return {
        "run_id": run_id,
        "status": overall,
        "counts": counts,
        "anchors": anchors_out,
        "inputs": inputs_out,
        "gap": run_gap(rows, run_id, data_dir),
    }
