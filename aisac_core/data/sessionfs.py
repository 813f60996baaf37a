"""The server's own file operations inside a session folder, which a session's code controls and may booby-trap.

A cell can replace any file or folder of its session with a symlink (relative or absolute), a hard link, a FIFO or
a folder, and can do so between two operations of the server. So the server never passes a path under a session
folder to ``open``: it walks from a directory descriptor of the session folder, one component at a time, with
``O_NOFOLLOW`` (``openat(2)``), refuses anything that is not a plain directory or regular file, and never truncates
a file with more than one link. Directory walks use ``os.scandir`` on descriptors and never follow symlinks.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aisac_core.data.errors import SandboxError


class _TooDeep(Exception):
    """A session folder nested deeper than the walk goes."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." or "\x00" in p for p in parts):
        raise SandboxError(f"invalid name inside a session folder: {rel!r}")
    return parts


@contextmanager
def open_session_dir(session_dir: Path) -> Iterator[int]:
    """A descriptor of ``session_dir`` itself (opened with ``O_NOFOLLOW``: a session folder that was replaced by a
    symlink is refused). Raises SandboxError."""
    try:
        fd = os.open(session_dir, _DIR_FLAGS)
    except OSError as exc:
        raise SandboxError(f"the session folder {session_dir} cannot be opened safely ({exc.strerror})") from exc
    try:
        yield fd
    finally:
        os.close(fd)


def _subdir(dfd: int, name: str, create: bool) -> int:
    """Open (creating if asked) the plain directory ``name`` under ``dfd``; a symlink or other file in its place is
    removed first when ``create``, else refused."""
    for _ in range(3):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dfd)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(name, 0o700, dir_fd=dfd)
            except FileExistsError:
                pass
        except (NotADirectoryError, OSError) as exc:  # ELOOP (a symlink) or ENOTDIR (a file)
            if not create or isinstance(exc, PermissionError):
                raise
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                raise
            os.unlink(name, dir_fd=dfd)
    raise SandboxError(f"the session folder entry {name!r} keeps changing; try again")


def write_file(session_dir: Path, rel: str, data: bytes) -> Path:
    """Write ``data`` to ``session_dir/rel`` (``rel``: ``name`` or ``sub/name``; sub-folders created 0700) without
    following any symlink and without writing through a hard link: an existing non-regular entry or a file with
    more than one link is unlinked and a new file (0600) is created with ``O_EXCL``. Returns the path.
    Raises SandboxError when the folder or the entry cannot be made safe."""
    parts = _parts(rel)
    try:
        with open_session_dir(session_dir) as root:
            dfd = os.dup(root)
            try:
                for p in parts[:-1]:
                    nfd = _subdir(dfd, p, create=True)
                    os.close(dfd)
                    dfd = nfd
                name = parts[-1]
                try:
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        raise SandboxError(f"{rel!r} in the session folder is a folder; remove it or pick another name")
                    os.unlink(name, dir_fd=dfd)
                except FileNotFoundError:
                    pass
                fd = os.open(
                    name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd
                )
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            finally:
                os.close(dfd)
    except OSError as exc:
        raise SandboxError(f"cannot write {rel!r} into the session folder ({exc.strerror or exc})") from exc
    return session_dir.joinpath(*parts)


def _walk(dfd: int, depth: int = 0) -> Iterator[tuple[int, str, os.stat_result]]:
    """(parent descriptor, name, lstat) of every entry below ``dfd``, depth first, children before their folder;
    symlinks are reported, never followed. Raises _TooDeep for folders nested deeper than 64 levels."""
    with os.scandir(dfd) as it:
        entries = list(it)
    for e in entries:
        try:
            st = os.stat(e.name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            if depth >= 64:
                raise _TooDeep(e.name)
            try:
                sub = os.open(e.name, _DIR_FLAGS, dir_fd=dfd)
            except OSError:
                continue
            try:
                yield from _walk(sub, depth + 1)
            finally:
                os.close(sub)
        yield dfd, e.name, st


#: most entries (files, folders, links) a session folder may hold; each costs an inode, not a block
MAX_ENTRIES = 100_000


def usage(session_dir: Path) -> int:
    """Bytes the session folder occupies on disk: allocated blocks (``st_blocks * 512``, so sparse files count what
    they use) of every entry, links not followed. A folder with more than :data:`MAX_ENTRIES` entries, or nested
    deeper than 64 levels, counts as unbounded (``sys.maxsize``): empty files cost inodes, and the walk stops
    there."""
    total = entries = 0
    try:
        with open_session_dir(session_dir) as root:
            for _dfd, _name, st in _walk(root):
                total += st.st_blocks * 512
                entries += 1
                if entries > MAX_ENTRIES:
                    return sys.maxsize
    except _TooDeep:
        return sys.maxsize
    except (SandboxError, OSError):
        pass
    return total


def remove_changed_since(session_dir: Path, since: float) -> int:
    """Remove every file (and then empty folder) of the session folder whose status changed at or after ``since``
    (``time.time()``; the inode change time cannot be set back by the session's code). Returns how many entries
    were removed."""
    removed = 0
    try:
        with open_session_dir(session_dir) as root:
            for dfd, name, st in _walk(root):  # consumed lazily: each descriptor is open while its entries are
                if st.st_ctime < since:
                    continue
                try:
                    if stat.S_ISDIR(st.st_mode):
                        os.rmdir(name, dir_fd=dfd)
                    else:
                        os.unlink(name, dir_fd=dfd)
                    removed += 1
                except OSError:
                    pass
    except (SandboxError, OSError, _TooDeep):
        pass
    return removed


def _remove(dfd: int, name: str, depth: int = 0) -> None:
    """Remove the entry ``name`` under ``dfd`` (a folder with its contents), never following a link."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=dfd)
            return
        if depth < 64:
            sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            try:
                with os.scandir(sub) as it:
                    children = [e.name for e in it]
                for c in children:
                    _remove(sub, c, depth + 1)
            finally:
                os.close(sub)
        os.rmdir(name, dir_fd=dfd)
    except OSError:
        pass


def _copy_file(src: int, dst: int, name: str, st: os.stat_result) -> int:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a FIFO or device since the listing
            return 0
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dst)
        n = 0
        try:
            while (k := os.sendfile(out, fd, None, 1 << 24)) > 0:
                n += k
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
        return n
    finally:
        os.close(fd)


def _mirror(src: int, dst: int, depth: int) -> int:
    with os.scandir(src) as it:
        names = [e.name for e in it]
    kept: set[str] = set()
    copied = 0
    for name in names:
        try:
            st = os.stat(name, dir_fd=src, follow_symlinks=False)
        except OSError:
            continue
        try:
            old: os.stat_result | None = os.stat(name, dir_fd=dst, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if stat.S_ISDIR(st.st_mode) and depth < 64:
            if old is not None and not stat.S_ISDIR(old.st_mode):
                _remove(dst, name)
                old = None
            if old is None:
                os.mkdir(name, 0o700, dir_fd=dst)
            a = os.open(name, _DIR_FLAGS, dir_fd=src)
            try:
                b = os.open(name, _DIR_FLAGS, dir_fd=dst)
                try:
                    copied += _mirror(a, b, depth + 1)
                finally:
                    os.close(b)
            finally:
                os.close(a)
            kept.add(name)
        elif stat.S_ISREG(st.st_mode):
            kept.add(name)
            if (
                old is not None
                and stat.S_ISREG(old.st_mode)
                and old.st_nlink == 1
                and (old.st_size, old.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
            ):
                continue
            if old is not None:
                _remove(dst, name)
            copied += _copy_file(src, dst, name, st)
    with os.scandir(dst) as it:
        gone = [e.name for e in it if e.name not in kept]
    for name in gone:
        _remove(dst, name)
    return copied


def mirror(src: Path, dst: Path) -> int:
    """Make the session folder on disk ``dst`` hold what the worker's view of it ``src`` holds (its tmpfs, seen
    through ``/proc/<pid>/root``): plain folders and regular files with their modification times; entries of other
    kinds (links, FIFOs, sockets) are not kept, and what ``src`` no longer holds is removed from ``dst``. Files whose
    size and modification time are unchanged are not copied again. No link is followed on either side. Returns the
    bytes copied. Raises SandboxError when either folder cannot be opened, OSError when ``dst`` cannot be
    written."""
    with open_session_dir(src) as a, open_session_dir(dst) as b:
        return _mirror(a, b, 0)
