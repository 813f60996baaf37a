"""Data lineage of a run, read from its recorded data tool calls: which frame each call used or made, the files the
frames came from and the files code cells wrote. The PROV and RO-Crate exports draw usage and generation from it.

The data tools' results and arguments carry what is needed (:mod:`aisac_core.data.results`):

- ``data_load`` generates one frame per loaded table (``frames[].name``) from its source file (``frames[].source``:
  ``path``, ``sha256``);
- ``data_save`` generates a frame from its parent (``parent``); ``data_preview`` / ``data_describe`` /
  ``data_query`` / ``data_aggregate`` use the frame they name (``name``);
- ``data_to_session`` uses a frame (``name``) and binds it to a variable (``variable``, default the frame name) of a
  code session (``session``);
- ``data_code_run`` (a cell) uses every frame bound in its session before it whose variable the cell's code names
  (a whole-word match of the identifier in the source: what a cell reads is decided by its code; a frame reached
  only through ``globals()`` or through a variable an earlier cell derived is not seen) and generates the files
  it wrote (``figures[]``: ``path``, ``sha256``), its result read as a finished
  :data:`~aisac_core.sessions.results.CodeRun` (a result recorded by an older release, which that type does not
  fit, as it was recorded).

A frame's source file is an input of every call that used the frame (``files_used``). Frames are versioned by the
event that made them: loading a name again makes a new frame.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from aisac_core.sessions.results import CODE_RUN

__all__ = ["EventLineage", "Frame", "data_lineage"]

#: data tools that read one frame named by their ``name`` argument.
FRAME_READERS = ("data_preview", "data_describe", "data_query", "data_aggregate")


@dataclass(frozen=True)
class Frame:
    """One version of a named frame: ``key`` (``frame-<event id>-<name>``, unique in the run), ``name``, the
    event that made it, its source file (``path``, ``sha256``; None for a derived frame) and its parent frame's
    key (derived frames)."""

    key: str
    name: str
    event_id: int
    path: str | None = None
    sha256: str | None = None
    parent: str | None = None


@dataclass
class EventLineage:
    """What one event used and generated: frames (:class:`Frame`), files used (``{path, sha256}``: the sources
    of the frames it used) and files generated (``{path, sha256}``: files a cell wrote)."""

    frames_used: list[Frame] = field(default_factory=list)
    frames_generated: list[Frame] = field(default_factory=list)
    files_used: list[dict[str, Any]] = field(default_factory=list)
    files_generated: list[dict[str, Any]] = field(default_factory=list)


def _key(event_id: int, name: str) -> str:
    return f"frame-{event_id}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"


def _sources(frames: Sequence[Frame], by_key: Mapping[str, Frame]) -> list[dict[str, Any]]:
    """The source files of ``frames``, following derived frames to their file-loaded ancestors (no repeats)."""
    out: dict[str, dict[str, Any]] = {}
    for f in frames:
        cur: Frame | None = f
        seen: set[str] = set()
        while cur is not None and cur.key not in seen:
            seen.add(cur.key)
            if cur.path:
                out.setdefault(cur.path, {"path": cur.path, "sha256": cur.sha256})
            cur = by_key.get(cur.parent) if cur.parent else None
    return list(out.values())


def _figures(res: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The files a code cell's result lists (``figures[]``: ``{path, sha256}``): none while it runs."""
    try:
        run = CODE_RUN.validate_python(res)
    except ValidationError:  # recorded by an older release: its figures as they were recorded
        return [
            {"path": str(g["path"]), "sha256": g.get("sha256")}
            for g in res.get("figures") or []
            if isinstance(g, dict) and g.get("path")
        ]
    if run["status"] == "running":
        return []
    return [{"path": g["path"], "sha256": g["sha256"]} for g in run["figures"]]


def data_lineage(events: Sequence[Mapping[str, Any]]) -> dict[int, EventLineage]:
    """Lineage of a run's data calls (see the module docstring). ``events``: the run's events oldest first, as
    in the JSON bundle (``id``, ``tool``, ``status``, ``arguments`` and ``result`` parsed). Calls that did not
    succeed generate nothing (a failed cell still used its frames). Returns ``{event id: EventLineage}`` for
    the events with any lineage."""
    current: dict[str, Frame] = {}  # frame name -> its latest version
    by_key: dict[str, Frame] = {}
    sessions: dict[str, dict[str, Frame]] = {}  # session -> variable -> frame bound there
    out: dict[int, EventLineage] = {}
    for e in events:
        tool, eid = str(e.get("tool") or ""), int(e["id"])
        args = e.get("arguments") if isinstance(e.get("arguments"), dict) else {}
        res = e.get("result") if isinstance(e.get("result"), dict) else {}
        assert isinstance(args, dict) and isinstance(res, dict)
        ok = e.get("status") == "ok"
        lin = EventLineage()
        if tool == "data_load" and ok:
            for fr in res.get("frames") or []:
                if not isinstance(fr, dict) or not fr.get("name"):
                    continue
                src = fr.get("source") if isinstance(fr.get("source"), dict) else {}
                assert isinstance(src, dict)
                f = Frame(_key(eid, str(fr["name"])), str(fr["name"]), eid, src.get("path"), src.get("sha256"))
                lin.frames_generated.append(f)
        elif tool == "data_save" and ok and res.get("name"):
            parent = current.get(str(res.get("parent") or args.get("name") or ""))
            f = Frame(_key(eid, str(res["name"])), str(res["name"]), eid, parent=parent.key if parent else None)
            lin.frames_generated.append(f)
            if parent is not None:
                lin.frames_used.append(parent)
        elif tool in FRAME_READERS or tool == "data_to_session":
            used = current.get(str(args.get("name") or ""))
            if used is not None:
                lin.frames_used.append(used)
                if tool == "data_to_session" and ok and args.get("session"):
                    var = str(res.get("variable") or args.get("variable") or used.name)
                    sessions.setdefault(str(args["session"]), {})[var] = used
        elif tool == "data_code_run":
            code = str(args.get("code") or "")
            bound = sessions.get(str(args.get("session") or ""), {})
            lin.frames_used += [f for var, f in bound.items() if re.search(rf"(?<![\w.]){re.escape(var)}\b", code)]
            if ok:
                lin.files_generated += _figures(res)
        for f in lin.frames_generated:
            current[f.name] = f
            by_key[f.key] = f
            if f.path:
                lin.files_used.append({"path": f.path, "sha256": f.sha256})
        lin.files_used += [s for s in _sources(lin.frames_used, by_key) if s not in lin.files_used]
        if lin.frames_used or lin.frames_generated or lin.files_used or lin.files_generated:
            out[eid] = lin
    return out
