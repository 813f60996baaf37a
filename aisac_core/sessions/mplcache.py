"""Matplotlib's font list for code sessions, built by the server and copied into each session, never shared back.

Building the font list (``fontlist-v*.json`` in ``MPLCONFIGDIR``) takes seconds, so a fresh session should not
build its own. But a list a session built is the session's data: a cell can edit it, and a list collected from one
session and handed to the next would carry that edit into every later session. So the server builds the list once
in a process of its own that runs no session code (``python -I -c "import matplotlib.font_manager"``), keeps it in
its cache folder, and copies it into a session's ``.matplotlib`` folder each time the session's worker starts,
through :func:`aisac_core.sessions.sessionfs.write_file` (no symlink followed). :class:`FontLists` (one per
:class:`~aisac_core.sessions.manager.SandboxManager`) starts at most one build at a time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from importlib import metadata
from pathlib import Path

from platformdirs import user_cache_dir

from aisac_core.sessions import sessionfs
from aisac_core.sessions.errors import SandboxError


def cache_dir() -> Path | None:
    """The server's font-list folder for the installed matplotlib (``<user cache>/aisac/matplotlib-<version>``), or
    None when matplotlib is not installed."""
    try:
        version = metadata.version("matplotlib")
    except metadata.PackageNotFoundError:
        return None
    return Path(os.environ.get("AISAC_MPL_CACHE") or user_cache_dir("aisac")) / f"matplotlib-{version}"


def build(target: Path) -> bool:
    """Build the font list into ``target`` (atomically: in a temporary folder renamed into place). True when
    ``target`` holds a list afterwards."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = Path(tempfile.mkdtemp(prefix=".mpl-", dir=target.parent))
    try:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp),
            "MPLCONFIGDIR": str(tmp),
            "MPLBACKEND": "Agg",
            "LANG": "C.UTF-8",
        }
        subprocess.run(
            [sys.executable, "-I", "-c", "import matplotlib.font_manager"],
            env=env,
            timeout=300,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if any(tmp.glob("fontlist-*.json")):
            try:
                tmp.rename(target)
            except OSError:  # another process was first
                pass
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return any(target.glob("fontlist-*.json"))


class FontLists:
    """The server's font lists, seeded into sessions; builds one in the background when it is missing (one build
    per target folder at a time). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._building: set[Path] = set()

    def _build_once(self, target: Path) -> None:
        try:
            build(target)
        finally:
            with self._lock:
                self._building.discard(target)

    def seed(self, session_dir: Path) -> bool:
        """Copy the server's font list into ``session_dir/.matplotlib`` (replacing whatever the session left
        there); True when copied. When the list is not built yet, start building it in the background and return
        False (that session builds its own, slower, once)."""
        target = cache_dir()
        if target is None:
            return False
        lists = sorted(target.glob("fontlist-*.json")) if target.is_dir() else []
        if not lists:
            with self._lock:
                if target in self._building:
                    return False
                self._building.add(target)
            threading.Thread(target=self._build_once, args=(target,), name="mpl-font-cache", daemon=True).start()
            return False
        try:
            for f in lists:
                sessionfs.write_file(session_dir, f".matplotlib/{f.name}", f.read_bytes())
        except (OSError, SandboxError):
            return False
        return True
