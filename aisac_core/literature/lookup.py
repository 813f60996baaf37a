"""The literature service as rag's :class:`aisac_core.ports.PaperLookup`: a paper's title and authors by the DOI or
arXiv id printed on it (identifiers first, as reference managers do). Answers go through
:meth:`aisac_core.literature.service.LiteratureService.get`, so they are cached in the store, rate-limited and
replayable like every other lookup.

An overview must not hang on the network: a lookup reads the response cache first; on a miss it starts one
background request per identifier (which fills the cache) and waits for it at most ``wait_s`` seconds. Offline the
request fails, the layout reading stands, and the next overview (after :data:`RETRY_AFTER_S`) tries again - the
registry's answer fills in once the network is back."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aisac_core.errors import AisacError

if TYPE_CHECKING:
    from aisac_core.literature.service import LiteratureService

log = logging.getLogger("aisac.literature")

#: the order in which a source's record names the title source (Crossref is the DOI registry's own record)
_PREFERRED = ("crossref", "arxiv", "openalex", "pubmed", "semanticscholar")
#: seconds before an identifier whose network lookup failed is tried again
RETRY_AFTER_S = 300.0


def _record(res: Any) -> dict[str, Any] | None:
    if not isinstance(res, dict):
        return None
    paper = res.get("paper")
    if not isinstance(paper, dict) or not paper.get("title"):
        return None
    answered = [n for n, st in (res.get("sources") or {}).items() if isinstance(st, dict) and st.get("status") == "ok"]
    given = [s.get("source", "") for s in paper.get("sources") or []] or answered or [paper.get("source", "")]
    source = next((p for p in _PREFERRED if p in given), given[0] if given else "literature")
    return {"title": paper["title"], "authors": list(paper.get("authors") or []), "source": source}


class IdentifierLookup:
    """:class:`aisac_core.ports.PaperLookup` over a literature service (``service``: a zero-argument callable
    giving it, so that building rag does not build the literature service)."""

    def __init__(self, service: Callable[[], LiteratureService]) -> None:
        self._service = service
        self._lock = threading.Lock()
        self._running: dict[str, threading.Thread] = {}
        self._failed: dict[str, float] = {}  # identifier -> monotonic time of its last failed network lookup

    def _get(self, svc: LiteratureService, identifier: str) -> dict[str, Any] | None:
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["r"] = asyncio.run(svc.get(identifier))
            except (AisacError, OSError, ValueError, TimeoutError) as exc:
                log.info("identifier lookup of %s: %s", identifier, exc)

        t = threading.Thread(target=work, name="aisac-id-lookup", daemon=True)
        t.start()
        t.join()
        return _record(box.get("r"))

    def _refresh(self, identifier: str) -> None:
        try:
            rec = self._get(self._service(), identifier)
        except Exception as exc:  # a background thread: log, never raise
            log.warning("identifier lookup of %s failed: %s", identifier, exc)
            rec = None
        with self._lock:
            self._running.pop(identifier, None)
            if rec is None:
                self._failed[identifier] = time.monotonic()

    def lookup(self, identifier: str, wait_s: float = 3.0) -> dict[str, Any] | None:
        """``{title, authors, source}`` of the paper ``identifier`` (DOI or arXiv id) names, from the cache; on a
        miss from the network, in a background request awaited at most ``wait_s`` seconds. None when not
        answered (yet): offline, throttled, not found, still running. Never raises."""
        try:
            rec = self._get(self._service().cache_only(), identifier)
        except Exception as exc:
            log.warning("identifier lookup of %s failed: %s", identifier, exc)
            return None
        if rec is not None:
            return rec
        with self._lock:
            t = self._running.get(identifier)
            last = self._failed.get(identifier)
            if t is None and (last is None or time.monotonic() - last >= RETRY_AFTER_S):
                t = threading.Thread(target=self._refresh, args=(identifier,), name="aisac-id-refresh", daemon=True)
                self._running[identifier] = t
                t.start()
        if t is None:
            return None
        t.join(max(0.0, wait_s))
        if t.is_alive():
            return None
        try:
            return self._get(self._service().cache_only(), identifier)
        except Exception:
            return None
