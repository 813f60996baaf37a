"""What the server makes of a worker's reply, which is untrusted data: the run's result (known fields only, as
text, capped), its figures (base64 PNG bytes, checked and kept in the server's own folder, never a path the worker
names). The checks after a run (threads left running, the disk quota) are the session's
(:mod:`aisac_core.sessions.session`).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aisac_core.hashing import sha256_bytes
from aisac_core.sessions.isolation import python_paths
from aisac_core.sessions.results import CodeRunDone, Figure
from aisac_core.settings import SandboxSettings

MAX_FIGURES = 20  # per run
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"  # PNG specification, section 5.2 (file signature)
#: the text fields of a reply that reach the result; everything else a worker sends is dropped or checked
REPLY_TEXT = ("stdout", "stderr", "result", "error", "error_type", "traceback")


def _sha256(data: bytes | str) -> str:
    return sha256_bytes(data.encode("utf-8", "replace") if isinstance(data, str) else data)


def _install_paths() -> list[tuple[str, str]]:
    """(folder, placeholder) of the server's installation, longest first: the aisac package folder, the Python
    installation's library folders and prefixes (:func:`aisac_core.sessions.isolation.python_paths`)."""
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


def _store_figure(figures_dir: Path, job_id: str, n: int, data: bytes) -> Path:
    """Keep a figure's bytes (the run's ``n``-th) in the server's own folder for the session (never in the session
    folder)."""
    figures_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = figures_dir / f"{job_id}-{n}.png"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


def _figures(
    settings: SandboxSettings, figures_dir: Path, job_id: str, items: Any, notes: list[str], paths: list[Path]
) -> list[Figure]:
    """Validate the figures of a reply (untrusted data): at most MAX_FIGURES, each base64 PNG bytes within
    ``AISAC_SANDBOX_FIGURE_MB``, the session's stored figures (in ``figures_dir``) within ``AISAC_SANDBOX_DISK_MB``;
    the paths of those kept are appended to ``paths``."""
    out: list[Figure] = []
    if not isinstance(items, list):
        return out
    cap = int(settings.figure_mb * 1024 * 1024)
    room = settings.disk_mb * 1024 * 1024 - sum(p.stat().st_size for p in figures_dir.glob("*.png"))
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
        path = _store_figure(figures_dir, job_id, len(paths) + 1, data)
        paths.append(path)
        given = f.get("name")
        name = given if isinstance(given, str) and len(given) <= 64 else f"figure-{i + 1}.png"
        out.append({"name": name, "path": str(path), "sha256": _sha256(data), "bytes": len(data)})
    return out


def finish(
    reply: dict[str, Any],
    notes: list[str],
    *,
    settings: SandboxSettings,
    session: str,
    cells: int,
    job_id: str,
    code_sha256: str,
    t0: float,
    started_at: str,
    state_lost: bool,
    figures_dir: Path,
    isolation: str,
    isolation_note: str,
    confinement: dict[str, Any],
) -> tuple[CodeRunDone, list[Path]]:
    """The result of run ``job_id`` of ``session`` from the worker's ``reply``, which is untrusted: only the known
    fields, as text, capped at ``output_chars`` (+100); tracebacks and errors without install paths
    (:func:`hide_paths`); figures checked and kept in ``figures_dir`` (:func:`_figures`); ``notes`` first, then at
    most 20 of the worker's (500 characters each), then one on weak isolation. ``cells``: the session's cell count
    (the cell number when the reply names none); ``t0``: ``time.perf_counter()`` at the start (``duration_ms``).
    Returns ``(result, paths of the stored figures)``; ``finished_at`` is now."""
    cap = settings.output_chars
    paths: list[Path] = []
    figures = _figures(settings, figures_dir, job_id, reply.get("figures"), notes, paths)
    text = {
        k: (v if isinstance(v, str) else json.dumps(v, default=str))[: cap + 100]
        for k in REPLY_TEXT
        if (v := reply.get(k)) is not None
    }
    for k in ("traceback", "error"):
        if k in text:
            text[k] = hide_paths(text[k])
    cell = reply.get("cell")
    stdout, stderr = text.pop("stdout", ""), text.pop("stderr", "")
    worker_notes = reply.get("notes")
    all_notes = notes + ([str(n)[:500] for n in worker_notes[:20]] if isinstance(worker_notes, list) else [])
    if isolation != "bwrap" or not confinement.get("seccomp") or not confinement.get("landlock"):
        held = (
            f"seccomp {'on' if confinement.get('seccomp') else 'OFF'}, Landlock "
            f"{'ABI ' + str(confinement['landlock']) if confinement.get('landlock') else 'OFF'}"
        )
        weak = (
            ""
            if confinement.get("landlock") or isolation == "bwrap"
            else (
                "; without Landlock or bubblewrap, C extensions in the session can read any file the server's user "
                "can (docs/data.md, Threat model)"
            )
        )
        all_notes.append(f"isolation: {isolation_note} ({held}){weak}")
    result: CodeRunDone = {
        "ok": reply.get("ok") is True,
        "status": "done",
        "session": session,
        "job_id": job_id,
        "cell": cell if isinstance(cell, int) else cells,
        "stdout": stdout,
        "stderr": stderr,
        "figures": figures,
        "notes": all_notes,
        "state_lost": state_lost,
        "duration_ms": round((time.perf_counter() - t0) * 1000, 2),
        "code_sha256": code_sha256,
        "output_sha256": _sha256(stdout + "\x00" + stderr + "\x00" + text.get("result", "")),
        "isolation": isolation,
        "started_at": started_at,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if "result" in text:  # the other text fields, in REPLY_TEXT's order
        result["result"] = text["result"]
    if reply.get("result_truncated") is True:
        result["result_truncated"] = True
    if "error" in text:
        result["error"] = text["error"]
    if "error_type" in text:
        result["error_type"] = text["error_type"]
    if "traceback" in text:
        result["traceback"] = text["traceback"]
    return result, paths
