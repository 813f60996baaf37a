"""What the server makes of a worker's reply, which is untrusted data: the run's result (known fields only, as
text, capped), its figures (base64 PNG bytes, checked and kept in the server's own folder, never a path the worker
names), and the checks after every run (threads left running, the session's disk quota).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.data import sessionfs
from aisac_core.data.errors import SandboxError
from aisac_core.data.isolation import Worker, deleted_but_open, kill, pause, python_paths, session_view
from aisac_core.data.results import CodeRun, Figure
from aisac_core.hashing import sha256_bytes

if TYPE_CHECKING:
    from aisac_core.data.sandbox import Job, SandboxManager, Session

MAX_FIGURES = 20  # per run
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"  # PNG specification, section 5.2 (file signature)
#: the text fields of a reply that reach the result; everything else a worker sends is dropped or checked
REPLY_TEXT = ("stdout", "stderr", "result", "error", "error_type", "traceback")


def _sha256(data: bytes | str) -> str:
    return sha256_bytes(data.encode("utf-8", "replace") if isinstance(data, str) else data)


def sync(m: SandboxManager, s: Session, w: Worker | None, wait: bool = False) -> str | None:
    """Copy the session's tmpfs (bwrap/unshare) to its folder on disk, the worker ``w`` stopped first
    (:func:`aisac_core.data.sessionfs.mirror`; ``wait``: until the kernel reports it stopped - before it is
    killed; after a run the copy does not wait: a file still changing is copied again next time). Returns a note
    when the folder is full (the kernel refused writes past ``AISAC_SANDBOX_DISK_MB``), else None; a no-op under
    isolation ``none`` and for a worker that is gone."""
    if not m.tmpfs or w is None or w.proc.poll() is not None:
        return None
    pause(w, wait=wait)
    view = session_view(w, s.dir, m.isolation)
    quota = m.settings.disk_mb * 1024 * 1024
    with s.sync_lock:
        try:
            _copied, refused, deep = sessionfs.mirror(view, s.dir, quota)
            fs = os.statvfs(view)
        except (OSError, SandboxError):
            return None
    if refused:
        return (
            f"disk quota exceeded: {refused} file(s) of the session were not copied to its folder on disk, where "
            f"they would pass {quota / 2**20:,.0f} MB of allocated blocks (AISAC_SANDBOX_DISK_MB); they stay in "
            "the live session only"
        )
    if deep:
        return (
            f"{deep} folder(s) nested deeper than {sessionfs.MIRROR_DEPTH} levels stay in the live session only: "
            "they are not copied to the session folder on disk and are gone when the worker restarts"
        )
    if fs.f_favail == 0:
        return (
            f"disk quota exceeded: the session folder holds the most entries it may ({sessionfs.MAX_ENTRIES:,}); "
            "creating more failed (No space left on device)"
        )
    if fs.f_bavail * fs.f_frsize < max(quota // 100, 64 * 1024):
        return (
            f"disk quota exceeded: the session folder is full ({quota / 2**20:,.0f} MB, AISAC_SANDBOX_DISK_MB); "
            "writes past it failed (No space left on device)"
        )
    return None


def after_run(m: SandboxManager, s: Session, reply: dict[str, Any], notes: list[str], t_start: float) -> None:
    """Checks after every run: threads the run left running stop the worker (state lost). Under isolation ``none``
    (no tmpfs): a session folder over its disk quota (allocated blocks, any depth) loses the files this run wrote
    (their inode change time is at or after ``t_start``); when files the worker deleted but keeps open
    (:func:`~aisac_core.data.isolation.deleted_but_open`) still put it over, the worker is stopped, which releases
    them (state lost)."""
    stray = reply.pop("stray_threads", 0)
    if stray and s.worker is not None:
        kill(s.worker)
        s.worker = None
        s.lost = (
            f"cell {reply.get('cell')} left {stray if isinstance(stray, int) else 'some'} thread(s) running; "
            "the worker was stopped so that nothing outlives its run"
        )
        notes.append(f"session state lost: {s.lost}")
    if m.tmpfs:  # the kernel holds the quota (a sized tmpfs); Manager.sync noted a full folder
        return
    quota = m.settings.disk_mb * 1024 * 1024
    used = sessionfs.usage(s.dir)
    if used > quota:
        removed = sessionfs.remove_changed_since(s.dir, t_start)
        held = f"more than {sessionfs.MAX_ENTRIES:,} entries" if used == sys.maxsize else f"{used / 2**20:,.0f} MB"
        notes.append(
            f"disk quota exceeded: the session folder held {held}, over the limit of "
            f"{quota / 2**20:,.0f} MB (AISAC_SANDBOX_DISK_MB); the {removed} file(s) this run wrote were "
            "removed"
        )
        used = sessionfs.usage(s.dir)
    w = s.worker
    hidden = deleted_but_open(w.pid) if w is not None else 0
    if hidden and used + hidden > quota and w is not None:  # only the worker's end releases those blocks
        kill(w)
        s.worker = None
        s.lost = (
            f"cell {reply.get('cell')} kept {hidden / 2**20:,.0f} MB in deleted files open, which with the "
            f"session folder passes the disk quota of {quota / 2**20:,.0f} MB (AISAC_SANDBOX_DISK_MB); the worker "
            "was stopped to release them"
        )
        notes.append(f"session state lost: {s.lost}")


def _install_paths() -> list[tuple[str, str]]:
    """(folder, placeholder) of the server's installation, longest first: the aisac package folder, the Python
    installation's library folders and prefixes (:func:`aisac_core.data.isolation.python_paths`)."""
    pairs = {str(Path(__file__).resolve().parents[2]): "<aisac>"}
    for p in python_paths():
        name = p.name if p.name in ("site-packages", "dist-packages") else "python"
        pairs.setdefault(str(p), f"<{name}>")
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)}:
        pairs.setdefault(os.path.realpath(prefix), "<python>")
        pairs.setdefault(prefix, "<python>")
    return sorted(pairs.items(), key=lambda kv: -len(kv[0]))


def hide_paths(text: str) -> str:
    """``text`` (a traceback or error shown to a cell's caller) with every folder of the server's installation
    replaced by a placeholder (``<aisac>``, ``<site-packages>``, ``<python>``): a cell learns no install path
    from its errors."""
    for folder, mark in _install_paths():
        if folder and folder != "/":
            text = text.replace(folder + "/", mark + "/").replace(folder, mark)
    return text


def _store_figure(m: SandboxManager, s: Session, job: Job, name: str, data: bytes) -> Path:
    """Keep a figure's bytes in the server's own folder for the session (never in the session folder)."""
    d = m.state / s.name / "figures"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = d / f"{job.job_id}-{len(job.figures) + 1}.png"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


def _figures(m: SandboxManager, s: Session, job: Job, items: Any, notes: list[str]) -> list[Figure]:
    """Validate the figures of a reply (untrusted data): at most MAX_FIGURES, each base64 PNG bytes within
    ``AISAC_SANDBOX_FIGURE_MB``, the session's stored figures within ``AISAC_SANDBOX_DISK_MB``."""
    out: list[Figure] = []
    if not isinstance(items, list):
        return out
    cap = int(m.settings.figure_mb * 1024 * 1024)
    room = m.settings.disk_mb * 1024 * 1024 - sum(
        p.stat().st_size for p in (m.state / s.name / "figures").glob("*.png")
    )
    for i, f in enumerate(items):
        if not isinstance(f, dict):
            continue
        if i >= MAX_FIGURES:
            notes.append(f"{len(items) - MAX_FIGURES} more figure(s) dropped: at most {MAX_FIGURES} per run")
            break
        if "error" in f:
            notes.append(str(f["error"])[:500])
            continue
        b64 = f.get("png_b64")
        try:
            data = (
                base64.b64decode(b64, validate=True) if isinstance(b64, str) and len(b64) <= cap * 4 // 3 + 4 else b""
            )
        except (binascii.Error, ValueError):
            data = b""
        if not data.startswith(PNG_MAGIC) or len(data) > cap:
            notes.append(f"figure {i + 1} dropped: not a PNG image of at most {cap:,} bytes")
            continue
        if len(data) > room:
            notes.append(f"figure {i + 1} dropped: the session's stored figures reached AISAC_SANDBOX_DISK_MB")
            continue
        room -= len(data)
        path = _store_figure(m, s, job, str(f.get("name", "")), data)
        job.figures.append(path)
        given = f.get("name")
        name = given if isinstance(given, str) and len(given) <= 64 else f"figure-{i + 1}.png"
        out.append({"name": name, "path": str(path), "sha256": _sha256(data), "bytes": len(data)})
    return out


def finish(
    m: SandboxManager, s: Session, job: Job, reply: dict[str, Any], notes: list[str], state_lost: bool
) -> tuple[CodeRun, list[Path]]:
    """The run's result from the worker's reply, which is untrusted: only the known fields, as text, capped; and
    the paths of the run's stored figures."""
    cap = m.settings.output_chars
    figures = _figures(m, s, job, reply.get("figures"), notes)
    text = {
        k: (v if isinstance(v, str) else json.dumps(v, default=str))[: cap + 100]
        for k in REPLY_TEXT
        if (v := reply.get(k)) is not None
    }
    for k in ("traceback", "error"):
        if k in text:
            text[k] = hide_paths(text[k])
    cell = reply.get("cell")
    result: CodeRun = {
        "ok": reply.get("ok") is True,
        "session": s.name,
        "cell": cell if isinstance(cell, int) else s.cells,
        "job_id": job.job_id,
        "status": "done",
        "stdout": text.pop("stdout", ""),
        "stderr": text.pop("stderr", ""),
    }
    if "result" in text:  # the other text fields, in REPLY_TEXT's order
        result["result"] = text["result"]
    if "error" in text:
        result["error"] = text["error"]
    if "error_type" in text:
        result["error_type"] = text["error_type"]
    if "traceback" in text:
        result["traceback"] = text["traceback"]
    if reply.get("result_truncated") is True:
        result["result_truncated"] = True
    worker_notes = reply.get("notes")
    result["figures"] = figures
    result["notes"] = notes + ([str(n)[:500] for n in worker_notes[:20]] if isinstance(worker_notes, list) else [])
    result["state_lost"] = state_lost
    result["duration_ms"] = round((time.perf_counter() - job.t0) * 1000, 2)
    result["code_sha256"] = job.code_sha256
    result["output_sha256"] = _sha256(
        result["stdout"] + "\x00" + result["stderr"] + "\x00" + str(result.get("result", ""))
    )
    result["isolation"] = m.isolation
    conf = s.confinement
    if m.isolation != "bwrap" or not conf.get("seccomp") or not conf.get("landlock"):
        held = (
            f"seccomp {'on' if conf.get('seccomp') else 'OFF'}, Landlock "
            f"{'ABI ' + str(conf['landlock']) if conf.get('landlock') else 'OFF'}"
        )
        weak = (
            ""
            if conf.get("landlock") or m.isolation == "bwrap"
            else (
                "; without Landlock or bubblewrap, C extensions in the session can read any file the server's user "
                "can (docs/data.md, Threat model)"
            )
        )
        result["notes"].append(f"isolation: {m.isolation_note} ({held}){weak}")
    return result, job.figures


def stored_images(job: Job) -> list[bytes]:
    """The PNG bytes of a job's figures, read from the server's own folder."""
    out = []
    for p in job.figures:
        try:
            out.append(p.read_bytes())
        except OSError:
            pass
    return out
