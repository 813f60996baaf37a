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

from aisac_core.sessions import confine
from aisac_core.sessions.errors import SandboxError


class _Moved(Exception):
    """A folder of the session moved while the server walked it (its ``..`` is no longer the folder above)."""


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


def _names(dfd: int) -> list[str]:
    with os.scandir(dfd) as it:
        return [e.name for e in it]


def _walk(root: int) -> Iterator[tuple[int, str, os.stat_result]]:
    """(parent descriptor, name, lstat) of every entry below ``root``, at any depth, children before their folder;
    symlinks are reported, never followed. It holds two descriptors at a time whatever the depth: it goes down by
    opening a sub-folder (``O_NOFOLLOW``, checked to be the entry it listed) and back up through ``..``, checked to
    be the folder it came from (device and inode); a folder moved meanwhile raises :class:`_Moved`. The parent
    descriptor is valid until the next item is taken."""
    cur = os.dup(root)
    try:
        st0 = os.fstat(cur)
        # per level: (device, inode) of the folder, its names still to visit, its name and lstat in its parent
        stack: list[tuple[tuple[int, int], list[str], str, os.stat_result]] = [
            ((st0.st_dev, st0.st_ino), _names(cur), "", st0)
        ]
        while stack:
            names = stack[-1][1]
            if names:
                name = names.pop()
                try:
                    st = os.stat(name, dir_fd=cur, follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    yield cur, name, st
                    continue
                try:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=cur)
                except OSError:
                    continue
                try:
                    sst = os.fstat(sub)
                    if (sst.st_dev, sst.st_ino) != (st.st_dev, st.st_ino):
                        raise OSError(f"{name!r} changed while it was listed")
                    children = _names(sub)
                except OSError:
                    os.close(sub)
                    continue
                os.close(cur)
                cur = sub
                stack.append(((st.st_dev, st.st_ino), children, name, st))
                continue
            _ident, _left, name, st = stack.pop()
            if not stack:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=cur)
            pst = os.fstat(parent)
            if (pst.st_dev, pst.st_ino) != stack[-1][0]:
                os.close(parent)
                raise _Moved(name)
            os.close(cur)
            cur = parent
            yield cur, name, st
    finally:
        os.close(cur)


#: most entries (files, folders, links) a session folder may hold; each costs an inode, not a block
MAX_ENTRIES = 100_000


def usage(session_dir: Path) -> int:
    """Bytes the session folder occupies on disk, as ``du`` counts them: allocated blocks (``st_blocks * 512``, so a
    sparse file counts what it uses) of every entry at any depth, a file with several hard links once, links not
    followed. A folder with more than :data:`MAX_ENTRIES` entries counts as unbounded (``sys.maxsize``): empty files
    cost inodes; so does one whose folders keep moving while it is walked (three tries)."""
    for _ in range(3):
        total = entries = 0
        seen: set[tuple[int, int]] = set()
        try:
            with open_session_dir(session_dir) as root:
                for _dfd, _name, st in _walk(root):
                    entries += 1
                    if entries > MAX_ENTRIES:
                        return sys.maxsize
                    if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                        if (st.st_dev, st.st_ino) in seen:
                            continue
                        seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
        except _Moved:
            continue
        except (SandboxError, OSError):
            pass
        return total
    return sys.maxsize


def remove_changed_since(session_dir: Path, since: float) -> int:
    """Remove every file (and then empty folder) of the session folder, at any depth, whose status changed at or
    after ``since`` (``time.time()``; the inode change time cannot be set back by the session's code). Returns how
    many entries were removed."""
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
    except (SandboxError, OSError, _Moved):
        pass
    return removed


def _remove(dfd: int, name: str) -> None:
    """Remove the entry ``name`` under ``dfd`` (a folder with its contents, at any depth), never following a
    link."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=dfd)
            return
        sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
        try:
            for pfd, child, cst in _walk(sub):
                try:
                    if stat.S_ISDIR(cst.st_mode):
                        os.rmdir(child, dir_fd=pfd)
                    else:
                        os.unlink(child, dir_fd=pfd)
                except OSError:
                    pass
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=dfd)
    except (OSError, _Moved):
        pass


class _Mirror:
    """State of one :func:`mirror`: the top folder on disk (hard links are made by their path below it), the first
    copy of each multiply-linked file (tmpfs inode -> path below the top), and the disk budget (bytes of allocated
    blocks on disk, as ``du`` counts them)."""

    def __init__(self, top: int, budget: int | None) -> None:
        self.top = top
        self.links: dict[int, str] = {}
        self.budget = budget
        self.used = os.fstat(top).st_blocks * 512
        self.copied = 0
        self.refused = 0
        self.deep = 0  # folders below :data:`MIRROR_DEPTH` levels, not copied

    def fits(self, nbytes: int) -> bool:
        """Charge ``nbytes`` to the budget; False (and nothing charged) when they do not fit."""
        if self.budget is not None and self.used + nbytes > self.budget:
            self.refused += 1
            return False
        self.used += nbytes
        return True

    def copy_file(self, src: int, dst: int, name: str, st: os.stat_result) -> bool:
        """Copy the regular file ``name`` of ``src`` to ``dst`` hole for hole (:func:`confine.copy_data`) with its
        times; a copy over the budget is removed again. True when the copy is kept."""
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a FIFO or device since the listing
                return False
            if self.budget is not None and self.used + st.st_blocks * 512 > self.budget:  # known too big
                self.refused += 1
                return False
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dst)
            try:
                self.copied += confine.copy_data(fd, out)
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
                held = os.fstat(out).st_blocks * 512
            finally:
                os.close(out)
            if not self.fits(held):
                os.unlink(name, dir_fd=dst)
                return False
            return True
        finally:
            os.close(fd)

    def file(self, src: int, dst: int, name: str, rel: str, st: os.stat_result, old: os.stat_result | None) -> bool:
        """Bring the regular file ``name`` to ``dst``; True when ``dst`` keeps it."""
        if st.st_nlink > 1 and st.st_ino in self.links:  # a further name of a file copied in this mirror
            target = self.links[st.st_ino]
            first = os.stat(target, dir_fd=self.top, follow_symlinks=False)
            if old is not None and (old.st_dev, old.st_ino) == (first.st_dev, first.st_ino):
                return True
            if old is not None:
                _remove(dst, name)
            os.link(target, name, src_dir_fd=self.top, dst_dir_fd=dst, follow_symlinks=False)
            return True
        keep = False
        if (
            old is not None
            and stat.S_ISREG(old.st_mode)
            and (old.st_size, old.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
        ):  # unchanged since the last copy (a cell cannot set times: utime is refused)
            keep = self.fits(old.st_blocks * 512)
            if not keep:
                _remove(dst, name)
        else:
            if old is not None:
                _remove(dst, name)
            keep = self.copy_file(src, dst, name, st)
        if keep and st.st_nlink > 1:
            self.links[st.st_ino] = rel + name
        return keep

    def tree(self, src: int, dst: int, depth: int, rel: str) -> None:
        with os.scandir(src) as it:
            names = [e.name for e in it]
        kept: set[str] = set()
        for name in names:
            try:
                st = os.stat(name, dir_fd=src, follow_symlinks=False)
            except OSError:
                continue
            try:
                old: os.stat_result | None = os.stat(name, dir_fd=dst, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if stat.S_ISDIR(st.st_mode) and depth >= MIRROR_DEPTH:
                self.deep += 1
            elif stat.S_ISDIR(st.st_mode):
                if old is not None and not stat.S_ISDIR(old.st_mode):
                    _remove(dst, name)
                    old = None
                if old is None:
                    os.mkdir(name, 0o700, dir_fd=dst)
                a = os.open(name, _DIR_FLAGS, dir_fd=src)
                try:
                    b = os.open(name, _DIR_FLAGS, dir_fd=dst)
                    try:
                        self.tree(a, b, depth + 1, f"{rel}{name}/")
                        self.used += os.fstat(b).st_blocks * 512  # the folder's own blocks, once it is filled
                    finally:
                        os.close(b)
                finally:
                    os.close(a)
                kept.add(name)
            elif stat.S_ISREG(st.st_mode) and self.file(src, dst, name, rel, st, old):
                kept.add(name)
        with os.scandir(dst) as it:
            gone = [e.name for e in it if e.name not in kept]
        for name in gone:
            _remove(dst, name)


#: folders nested deeper than this are not copied from a worker's tmpfs to the disk (the copy recurses)
MIRROR_DEPTH = 64


def mirror(src: Path, dst: Path, budget: int | None = None) -> tuple[int, int, int]:
    """Make the session folder on disk ``dst`` hold what the worker's view of it ``src`` holds (its tmpfs, seen
    through ``/proc/<pid>/root``): plain folders and regular files with their modification times, sparse files
    with their holes and hard links as links, so that the folder takes on disk what it takes in the tmpfs; entries
    of other kinds (symlinks, FIFOs, sockets) and folders below 64 levels are not kept, and what ``src`` no longer
    holds is removed from ``dst``. Files whose size and modification time are unchanged are not copied again. No
    link is followed on either side. ``budget``: the most bytes of allocated blocks ``dst`` may hold (the disk
    quota, counted as ``du`` does); a file that would pass it is not kept.

    Returns ``(bytes copied, files refused over the budget, folders not copied for their depth)``. Raises SandboxError when either folder cannot be
    opened, OSError when ``dst`` cannot be written."""
    with open_session_dir(src) as a, open_session_dir(dst) as b:
        m = _Mirror(b, budget)
        m.tree(a, b, 0, "")
        return m.copied, m.refused, m.deep


def deleted_but_open(pid: int) -> int:
    """Bytes of allocated blocks (``st_blocks * 512``) of the regular files process ``pid`` holds open that have no
    name left (link count 0, ``fstat`` through ``/proc/<pid>/fd/N``, ``proc(5)``): space no folder walk sees, which
    only closing them - the end of the process - gives back. Each file is counted once; 0 when the process is gone.
    (Deleted files mapped into memory but closed count against the worker's address-space limit instead.)"""
    total = 0
    seen: set[tuple[int, int]] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 0 and (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def enforce_quota(session_dir: Path, since: float, quota: int, pid: int | None) -> tuple[int, int, int, int]:
    """The disk quota of a session folder under isolation ``none`` (no sized tmpfs holds it), after a run that
    started at ``since`` (``time.time()``): when the folder's allocated blocks (:func:`usage`) pass ``quota`` bytes,
    the files the run wrote are removed (:func:`remove_changed_since`); then the blocks worker ``pid`` holds in files
    deleted but open (:func:`deleted_but_open`; 0 for None). Returns ``(bytes used before, files removed (-1: under
    the quota, nothing removed), bytes used after, bytes held in deleted open files)``."""
    before = after = usage(session_dir)
    removed = -1
    if before > quota:
        removed = remove_changed_since(session_dir, since)
        after = usage(session_dir)
    return before, removed, after, deleted_but_open(pid) if pid is not None else 0
