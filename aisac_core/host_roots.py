"""Roots a host gives over MCP (``roots/list``): its ``file://`` URIs as folders, and the ones that do not exist.

MCP 2025-11-25, "Roots": a client that declares the ``roots`` capability answers the server's ``roots/list`` request
with ``{"roots": [{"uri": "file:///...", "name": "..."}]}`` and sends ``notifications/roots/list_changed`` when they
change; root URIs are ``file://`` URIs (RFC 8089). aisac uses them as the connection's corpus roots (what
``rag_index``, ``data_load``, ``lit_import`` and anchor checks may read), in place of the ``AISAC_ROOTS`` setting,
which applies only to a host that does not declare the capability (docs/hosts.md, "Roots").

Plain Python (no MCP library): the stdio relay (``aisac_servers.owner``) and the server's own middleware both use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

__all__ = ["RootsFromHost", "missing_roots", "roots_from_host"]


class RootsFromHost(NamedTuple):
    """The folders of a host's roots (``paths``), and one note per root that is not a local ``file://`` URI
    (``skipped``)."""

    paths: tuple[Path, ...]
    skipped: tuple[str, ...]


def roots_from_host(result: Any) -> RootsFromHost:
    """The folders of a ``roots/list`` result ``{"roots": [{"uri", "name"?}, ...]}`` (a dict, or an object with a
    ``roots`` attribute whose items have ``uri``).

    A root must be a ``file://`` URI of this machine (empty host or ``localhost``, RFC 8089 section 2); its path is
    percent-decoded and made absolute; duplicates are dropped, order kept. Anything else (another scheme, another
    host, a relative or empty path) is skipped with a note naming it. Never raises: a malformed answer gives no
    paths and a note."""
    items = result.get("roots") if isinstance(result, dict) else getattr(result, "roots", None)
    if not isinstance(items, list):
        return RootsFromHost((), ("the host's roots/list answer has no 'roots' list",))
    paths: list[Path] = []
    skipped: list[str] = []
    for item in items:
        uri = item.get("uri") if isinstance(item, dict) else getattr(item, "uri", None)
        uri = str(uri) if uri is not None else ""
        parts = urlsplit(uri)
        path = unquote(parts.path)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost") or not path.startswith("/"):
            skipped.append(f"root {uri!r} is not a file:// URI of this machine (RFC 8089): skipped")
            continue
        p = Path(path)
        if p not in paths:
            paths.append(p)
    return RootsFromHost(tuple(paths), tuple(skipped))


def missing_roots(paths: Iterable[Path]) -> list[Path]:
    """The roots among ``paths`` that are not existing folders (reported at start: a host's ``${workspaceFolder}``
    left unexpanded, a moved folder), in their order."""
    return [p for p in paths if not Path(p).expanduser().is_dir()]
