"""aisac's user-facing errors and the one path check every tool that takes a file path uses.

Every exception deriving from :class:`AisacError` is a *user* error: its message says what was wrong and what to do,
and the server adapters (``servers/serving/common.py``) turn it into an MCP tool error with that message. Anything else is an
internal error (logged on stderr, reported as such).

Paths from a client go through :func:`check_path_text` (a non-empty string without NUL bytes) and
:func:`resolve_in_roots` (symlinks resolved, a loop reported, the result inside a registered root);
:func:`resolve_link` and :func:`inside_roots` are the same checks for a path met while walking a folder.
"""

from __future__ import annotations

import errno
from pathlib import Path

#: how much of a client's path a message quotes (a 100,000-character path is not echoed back whole)
QUOTE_CHARS = 200


class AisacError(Exception):
    """A user-facing error (bad input, missing object, refused operation); the message is shown to the client."""


class PathOutsideRootsError(AisacError, ValueError):
    """A path that does not resolve inside any registered root (``..`` or a symlink escape, or a foreign folder)."""


class BadPathError(AisacError, ValueError):
    """A path argument that is not a usable path: empty or blank, holding a NUL byte, or a symlink loop."""


def quote_path(path: object) -> str:
    """``repr`` of a client's path cut to :data:`QUOTE_CHARS` characters (with ``…`` when cut), for messages."""
    s = str(path)
    return repr(s) if len(s) <= QUOTE_CHARS else repr(s[:QUOTE_CHARS]) + f"… ({len(s):,} characters)"


def check_path_text(path: object, *, what: str = "path") -> str:
    """Check that a client's path is a usable string before it touches the file system.

    Args:
        path: the value a client gave (str or Path).
        what: the argument's name, for the message.

    Returns: the path as a ``str`` (unchanged).

    Raises:
        BadPathError: not a string/Path, empty or only whitespace, or holding a NUL byte (the operating system
            cannot name such a file; Python raises an unclear ``ValueError: embedded null byte``).
    """
    if not isinstance(path, (str, Path)):
        raise BadPathError(f"{what} must be a string naming a file or folder, got {type(path).__name__}")
    s = str(path)
    if not s.strip():
        raise BadPathError(
            f"{what} is empty: give a file or folder path (absolute, or relative to the first registered root)"
        )
    if "\x00" in s:
        raise BadPathError(
            f"{what} {quote_path(s)} contains a NUL byte (\\x00), which no file name can hold: give "
            "a plain file or folder path"
        )
    return s


def expand_user(path: str | Path, *, what: str = "path") -> Path:
    """``Path(path).expanduser()``, with an unknown ``~user`` as a clear error.

    Raises:
        BadPathError: ``~name`` names no user on this machine (Python raises an unclear RuntimeError).
    """
    try:
        return Path(path).expanduser()
    except RuntimeError as exc:
        raise BadPathError(
            f"{what} {quote_path(path)} starts with '~' but names no user of this machine: give an "
            "absolute path or one relative to the first registered root"
        ) from exc


def resolve_link(path: Path, *, what: str = "path") -> Path:
    """``path`` with every symlink resolved (strictly: each link must lead somewhere).

    Raises:
        BadPathError: a symlink loop (``a -> b -> a``, or a link to itself), a link whose target does not exist,
            or a path that cannot be resolved (permission denied).
    """
    try:
        return Path(path).resolve(strict=True)
    except RuntimeError as exc:  # Python 3.11-3.12 report a loop as RuntimeError("Symlink loop from ...")
        raise BadPathError(
            f"{what} {quote_path(path)} is a symlink loop (its links lead back to themselves): "
            "point the link at a real file or folder, or remove it"
        ) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadPathError(
                f"{what} {quote_path(path)} is a symlink loop (its links lead back to themselves): "
                "point the link at a real file or folder, or remove it"
            ) from exc
        if exc.errno == errno.ENOENT and Path(path).is_symlink():
            raise BadPathError(f"{what} {quote_path(path)} is a symlink whose target does not exist") from exc
        if exc.errno == errno.ENOENT:
            raise BadPathError(f"{what} {quote_path(path)} does not exist") from exc
        raise BadPathError(f"{what} {quote_path(path)} cannot be resolved ({exc.strerror or exc})") from exc


def _cut(path: object) -> str:
    """``str(path)`` cut to :data:`QUOTE_CHARS` characters (``…`` when cut), unquoted."""
    s = str(path)
    return s if len(s) <= QUOTE_CHARS else s[:QUOTE_CHARS] + "…"


def inside_roots(path: Path, roots: list[Path]) -> bool:
    """Whether the resolved ``path`` is one of the resolved ``roots`` or lies under one (no I/O on ``path``)."""
    return any(path == r or path.is_relative_to(r) for r in roots)


def resolve_in_roots(path: str | Path, roots: list[Path], *, what: str = "path") -> Path:
    """Resolve ``path`` (absolute, or relative to the first root) and check it lies inside one of ``roots``.

    Symlinks are resolved first, so a link pointing out of a root is refused like a ``..`` path.

    Args:
        path: the path a client gave (str or Path).
        roots: registered root folders (``Settings.roots`` + ``Settings.catalog_roots`` or a server's own list).
        what: the argument's name, for the message.

    Returns: the resolved absolute path (it need not exist).

    Raises:
        BadPathError: empty path, a NUL byte, or a symlink loop.
        PathOutsideRootsError: no roots registered, or the resolved path is outside every root.
    """
    check_path_text(path, what=what)
    if not roots:
        raise PathOutsideRootsError(
            f"{what} {quote_path(path)} refused: no root folders are registered. Register one with AISAC_ROOTS "
            "(or the project manifest's data sources) and pass a path inside it."
        )
    resolved_roots = [Path(r).expanduser().resolve() for r in roots]
    p = expand_user(path, what=what)
    if not p.is_absolute():
        p = resolved_roots[0] / p
    try:
        p = p.resolve()
    except (RuntimeError, OSError):  # a symlink loop (RuntimeError up to Python 3.12, OSError ELOOP later)
        p = resolve_link(p, what=what)  # raises BadPathError with the reason
    if inside_roots(p, resolved_roots):
        return p
    raise PathOutsideRootsError(
        f"{what} {quote_path(path)} resolves to {_cut(p)}, which is outside the registered roots "
        f"({', '.join(str(r) for r in resolved_roots)}); '..' and symlinks leading out of a root are refused. "
        "Pass a path inside one of these roots."
    )
