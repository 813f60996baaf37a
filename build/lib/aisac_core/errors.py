"""aisac's user-facing errors and the one path check every tool that takes a file path uses.

Every exception deriving from :class:`AisacError` is a *user* error: its message says what was wrong and what to do,
and the server adapters (``servers/common.py``) turn it into an MCP tool error with that message. Anything else is an
internal error (logged on stderr, reported as such).
"""

from __future__ import annotations

from pathlib import Path


class AisacError(Exception):
    """A user-facing error (bad input, missing object, refused operation); the message is shown to the client."""


class PathOutsideRootsError(AisacError, ValueError):
    """A path that does not resolve inside any registered root (``..`` or a symlink escape, or a foreign folder)."""


def resolve_in_roots(path: str | Path, roots: list[Path], *, what: str = "path") -> Path:
    """Resolve ``path`` (absolute, or relative to the first root) and check it lies inside one of ``roots``.

    Symlinks are resolved first, so a link pointing out of a root is refused like a ``..`` path.

    Args:
        path: the path a client gave (str or Path).
        roots: registered root folders (``Settings.roots`` + ``Settings.catalog_roots`` or a server's own list).
        what: the argument's name, for the message.

    Returns: the resolved absolute path (it need not exist).

    Raises:
        PathOutsideRootsError: no roots registered, or the resolved path is outside every root.
    """
    if not roots:
        raise PathOutsideRootsError(
            f"{what} {str(path)!r} refused: no root folders are registered. Register one with AISAC_ROOTS "
            "(or the project manifest's data sources) and pass a path inside it.")
    resolved_roots = [Path(r).expanduser().resolve() for r in roots]
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = resolved_roots[0] / p
    p = p.resolve()
    for r in resolved_roots:
        if p == r or p.is_relative_to(r):
            return p
    raise PathOutsideRootsError(
        f"{what} {str(path)!r} resolves to {p}, which is outside the registered roots "
        f"({', '.join(str(r) for r in resolved_roots)}); '..' and symlinks leading out of a root are refused. "
        "Pass a path inside one of these roots.")
