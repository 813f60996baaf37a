"""Permissions of a store's files: the data dir is private to its user (0700), every file in it 0600.

The store holds memory turns, indexed documents, frames, session folders and the owner's bearer token, so nothing
in it is for other local users. aisac sets the process umask to 077 (``umask(2)``) before it creates anything, so
new files are 0600 and new folders 0700 whatever the user's umask, and it creates the data dir 0700. A data dir or
top-level file that a user (or an older aisac) left wider is reported with a warning that names the fix; aisac does
not narrow permissions a user set on purpose.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("aisac.store")

PRIVATE_UMASK = 0o077


def secure_data_dir(data_dir: Path) -> list[str]:
    """Set the process umask to 077, create ``data_dir`` (0700) if missing, and return one warning per wide entry:
    the data dir itself when group or others have any access, and each top-level file or folder readable or
    writable by them. Warnings are also logged (stderr). Never raises for permission problems; an unusable path
    raises OSError from ``mkdir`` as before."""
    os.umask(PRIVATE_UMASK)
    if not data_dir.exists():
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(data_dir, 0o700)
        return []
    warnings = permission_warnings(data_dir)
    for w in warnings:
        log.warning("%s", w)
    return warnings


def permission_warnings(data_dir: Path) -> list[str]:
    """Warnings for ``data_dir`` (group/other bits set) and its direct entries (group/other read or write bits
    set); symlinks are not followed. Empty when the store is private."""
    out: list[str] = []
    try:
        mode = stat.S_IMODE(os.stat(data_dir).st_mode)
    except OSError:
        return out
    if mode & 0o077:
        out.append(
            f"the data dir {data_dir} has mode {mode:04o}: other local users can reach the store (memory, "
            f"documents, the owner's token); run `chmod -R go-rwx {data_dir}`"
        )
        return out
    wide = []
    try:
        for e in os.scandir(data_dir):
            m = stat.S_IMODE(e.stat(follow_symlinks=False).st_mode)
            if not e.is_symlink() and m & 0o066:
                wide.append(f"{e.name} ({m:04o})")
    except OSError:
        return out
    if wide:
        out.append(
            f"store entries readable or writable by other users: {', '.join(sorted(wide)[:10])}; the data "
            f"dir is 0700, so they are not reachable now, but `chmod -R go-rwx {data_dir}` narrows them"
        )
    return out
