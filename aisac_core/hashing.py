"""The hashes aisac takes: of files, of texts and of JSON values. Every sha256 in a manifest row, an evidence anchor
or a trace event comes from here, so two places never hash the same thing two ways.

All digests are SHA-256 (FIPS 180-4) as lower-case hex.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO


def dumps(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces, UTF-8, non-JSON values through ``str``): the form every JSON hash in
    aisac is taken of, and the form trace rows store."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of ``text`` encoded as UTF-8 (a chunk's text: the chunk half of an evidence anchor)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(obj: Any) -> str:
    """Hex sha256 of the canonical JSON of ``obj`` (:func:`dumps`)."""
    return sha256_text(dumps(obj))


class NotRegularFileError(OSError):
    """A path that is not a regular file (a FIFO, a socket, a device, a folder) where a file's bytes were to be read:
    reading it could block for ever (a FIFO with no writer) or never end (a device)."""


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words: "regular file", "folder", "FIFO (named pipe)", "socket", "character
    device", "block device", "symlink" or "special file"."""
    for test, word in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "folder"),
        (stat.S_ISFIFO, "FIFO (named pipe)"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISLNK, "symlink"),
    ):
        if test(mode):
            return word
    return "special file"


def not_regular_reason(path: str | Path, mode: int) -> str:
    """The message for a non-regular ``path`` of mode ``mode``: what it is, and that only regular files are read."""
    return f"{path} is a {file_kind(mode)}, not a regular file: not read (aisac reads only regular files)"


def open_regular(path: str | Path) -> BinaryIO:
    """Open ``path`` for reading in binary mode, only when it is a regular file.

    The file is opened with ``O_NONBLOCK`` (opening a FIFO with no writer returns at once instead of waiting) and
    checked with ``fstat`` on the open descriptor before any byte is read, so a path swapped for a FIFO, a socket
    or a device between a check and the read cannot block the caller. The returned file is in blocking mode again
    (which makes no difference for a regular file).

    Raises:
        NotRegularFileError: ``path`` is a FIFO, socket, device or folder (the message says which).
        OSError: it cannot be opened (``FileNotFoundError`` when it is gone; a socket gives ``ENXIO``).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(not_regular_reason(path, st.st_mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def sha256_file(path: str | Path, bufsize: int = 1 << 20) -> str:
    """Hex sha256 of a regular file's bytes, read in ``bufsize`` blocks (memory stays flat for large files); the file
    is opened by :func:`open_regular`.

    Raises:
        NotRegularFileError: ``path`` is a FIFO, socket, device or folder.
        OSError: the file cannot be read (``FileNotFoundError`` when it is gone).
    """
    h = hashlib.sha256()
    with open_regular(path) as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()
