"""The host's own roots, asked by the stdio relay (:class:`aisac_servers.owner.relay.StdioRelay`) for its owner.

A host that declares the ``roots`` capability in its ``initialize`` request (MCP 2025-11-25, "Roots") is asked
``roots/list`` by the relay once the handshake ends, and again on each ``notifications/roots/list_changed``; the
answer's ``file://`` folders (:func:`aisac_core.host_roots.roots_from_host`) replace the ``roots`` of the per-host
settings the relay sends its owner with every request (``X-Aisac-Host``, :mod:`aisac_servers.serving.hosts`), so each
host sharing one owner gets its own roots, and ``AISAC_ROOTS`` applies only to a host that declares no roots. A tool
call, resource read or prompt waits for the first answer (at most :data:`ROOTS_WAIT_S`); a host that does not answer,
answers an error or gives no usable root keeps ``AISAC_ROOTS`` (a warning on stderr says so). A root that is not an
existing folder is reported on stderr.

Plain Python, like the relay: no MCP library, no httpx.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio

from aisac_core.host_roots import missing_roots, roots_from_host

from ..base.proxying import ROOTS_WAIT_S

log = logging.getLogger("aisac.owner")

#: the ids of the relay's own ``roots/list`` requests to the host (never ids the host's own requests use)
_ID_PREFIX = "aisac-relay-roots-"
#: requests that read the host's files, which wait for its roots
NEEDS_ROOTS = frozenset({"tools/call", "resources/read", "prompts/get"})


class HostRootsAsker:
    """Asks a stdio host for its roots and keeps the per-host settings header in step (module docstring).

    ``emit``: writes one JSON-RPC message to the host (stdout); ``host``: the per-host settings
    (:func:`aisac_core.settings.host_settings`), whose ``roots`` the host's own replace."""

    def __init__(self, emit: Callable[[dict[str, Any]], None], host: dict[str, Any]) -> None:
        self.emit = emit
        self.host = dict(host)
        self.header = _dump(self.host)
        self.declared = False
        #: the roots in force for this host: ``("host", [paths])`` once the host answered, else ``("settings", ...)``
        self.source = "settings"
        self._n = 0
        self._waiting: dict[str, tuple[anyio.Event, list[Any]]] = {}
        self._first: anyio.Event | None = None
        self._latest: anyio.Event | None = None  # set when the latest roots/list is answered (or given up)

    def on_initialize(self, msg: dict[str, Any]) -> None:
        """Note whether the host's ``initialize`` request declares the ``roots`` capability."""
        caps = (msg.get("params") or {}).get("capabilities")
        self.declared = isinstance(caps, dict) and isinstance(caps.get("roots"), dict)
        if self.declared and self._first is None:
            self._first = anyio.Event()

    def takes(self, msg: dict[str, Any]) -> bool:
        """Whether ``msg`` (from the host) answers one of the relay's own ``roots/list`` requests (then it is kept
        here, not relayed to the owner)."""
        rid = msg.get("id")
        if "method" in msg or not isinstance(rid, str) or rid not in self._waiting:
            return False
        event, box = self._waiting.pop(rid)
        box.append(msg)
        event.set()
        return True

    async def ready(self) -> None:
        """Wait (at most :data:`ROOTS_WAIT_S`) for the host's answer to the relay's latest ``roots/list`` (the first
        one, or the one after a ``list_changed``), when it declared roots: a call made after the change sees it."""
        pending = self._latest if self._latest is not None else self._first
        if pending is not None and not pending.is_set():
            with anyio.move_on_after(ROOTS_WAIT_S):
                await pending.wait()

    async def ask(self) -> None:
        """Send ``roots/list`` to the host, wait for its answer (at most :data:`ROOTS_WAIT_S`) and apply it."""
        if not self.declared:
            return
        self._n += 1
        rid = f"{_ID_PREFIX}{self._n}"
        event, box = anyio.Event(), list[Any]()
        self._waiting[rid] = (event, box)
        done = self._latest = anyio.Event()
        try:
            self.emit({"jsonrpc": "2.0", "id": rid, "method": "roots/list"})
            with anyio.move_on_after(ROOTS_WAIT_S):
                await event.wait()
            self._waiting.pop(rid, None)
            self._apply(box[0] if box else None)
        finally:
            done.set()
            if self._first is not None:
                self._first.set()

    def _apply(self, answer: dict[str, Any] | None) -> None:
        if answer is None or not isinstance(answer.get("result"), dict):
            why = "did not answer" if answer is None else f"answered an error {answer.get('error')!r}"
            log.warning(
                "the host declares roots but %s to roots/list: its roots stay as they were (AISAC_ROOTS at first)", why
            )
            return
        got = roots_from_host(answer["result"])
        for note in got.skipped:
            log.warning("%s", note)
        if not got.paths:
            log.warning("the host gave no usable root folder: its roots stay as they were (AISAC_ROOTS at first)")
            return
        for p in missing_roots(got.paths):
            log.warning("the host's root %s is not an existing folder: nothing in it can be indexed or loaded", p)
        self.source = "host"
        self.header = _dump({**self.host, "roots": [str(p) for p in got.paths]})
        log.info("roots from the host: %s", ", ".join(str(p) for p in got.paths))


def _dump(host: dict[str, Any]) -> str:
    return json.dumps(host, separators=(",", ":"), ensure_ascii=True)
