"""The store's answer catalogue: the owner's answers to the listing requests, kept in the store for a fast start.

A stdio relay (:mod:`aisac_servers.owner.relay`) keeps the owner's unfiltered answers to ``initialize``,
``server/discover`` and ``tools/list`` (first page) in ``<data dir>/answer-catalog.json`` (0600), keyed by the
request's method and protocol version, under the aisac version that produced them. The next relay of the same
store and version answers those requests from the file at once, applying its own profile, while the owner starts
(or the session with it opens) in the background: a host sees its tools in a fraction of a second even when no
owner runs. A catalogue of another aisac version is ignored and rewritten; an unreadable one is ignored.

Imports no MCP library (the relay must start fast).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

#: the file in the data dir
CATALOG_FILE = "answer-catalog.json"
#: the requests answered from the catalogue (their answers depend only on the aisac version, the store's
#: servers and the protocol version; each relay filters them by its own profile)
CACHEABLE = frozenset({"initialize", "server/discover", "tools/list"})


def catalog_key(method: str, protocol_version: str | None) -> str:
    """The catalogue key of a request: ``"<method> <protocol version>"``."""
    return f"{method} {protocol_version or '-'}"


class AnswerCatalog:
    """The answer catalogue of the store in ``data_dir`` for aisac ``version`` (module docstring)."""

    def __init__(self, data_dir: Path, version: str) -> None:
        self.path = data_dir / CATALOG_FILE
        self.version = version
        self.entries: dict[str, Any] = self._read()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if (
            not isinstance(data, dict)
            or data.get("version") != self.version
            or not isinstance(data.get("entries"), dict)
        ):
            return {}
        return dict(data["entries"])

    def get(self, method: str, protocol_version: str | None) -> Any | None:
        """The kept result of ``method`` at ``protocol_version``, or None."""
        return self.entries.get(catalog_key(method, protocol_version))

    def put(self, method: str, protocol_version: str | None, result: Any) -> None:
        """Keep ``result`` (an unfiltered owner answer) and write the file (atomically, 0600; best effort: a store
        that cannot be written just has no catalogue)."""
        key = catalog_key(method, protocol_version)
        if self.entries.get(key) == result:
            return
        self.entries[key] = result
        tmp = self.path.with_name(f".{CATALOG_FILE}.{os.getpid()}")
        with contextlib.suppress(OSError):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"version": self.version, "entries": self.entries}, f, separators=(",", ":"))
            os.replace(tmp, self.path)


def has_catalog(data_dir: Path) -> bool:
    """Whether the store in ``data_dir`` has an answer catalogue of this aisac version (a cheap check: the file's
    version field)."""
    from aisac_core.owner import aisac_version

    return bool(AnswerCatalog(data_dir, aisac_version()).entries)
