"""The trace service: provenance of one store (recording, pins, queries, exports, verification, replay, diff,
statistics, retention, span export), built by the composition root (``AppContext.trace``).

The service is made of parts, each in the module of its domain and declaring only the collaborators it uses:
:class:`~aisac_core.trace.queries.RunQueries` (runs and events: ``engine``, ``summaries``),
:class:`~aisac_core.trace.diff.RunDiff` (``engine``), :class:`~aisac_core.trace.replay.RunReplay` (``engine``,
``config_pins()``), :class:`~aisac_core.trace.exports.RunExports` (``engine``, ``export_dir``, ``config_pins()``,
``images()``) and :class:`~aisac_core.trace.retention.TraceStatistics` (``engine``); the other trace functions take
only what they use (the SQL engine, a callable, a path). The service provides the collaborators for one store and
holds its per-process state: which runs already have configuration pins, the result-summary cache of its events, its
OpenTelemetry span export, the local journal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aisac_core.settings import HostRoots
from aisac_core.trace.diff import RunDiff
from aisac_core.trace.evidence_images import EvidenceImages
from aisac_core.trace.exports import RunExports
from aisac_core.trace.gaps import StoreGaps
from aisac_core.trace.journal import TraceJournal
from aisac_core.trace.otel import Otel
from aisac_core.trace.pins import config_pins, write_run_pins
from aisac_core.trace.queries import RunQueries, Summaries
from aisac_core.trace.recorder import record_tool_call
from aisac_core.trace.replay import RunReplay
from aisac_core.trace.results import Pruned, TraceGap, Verified
from aisac_core.trace.retention import TraceStatistics, prune_runs
from aisac_core.trace.verify import verify_run

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.rag.results import Verification
    from aisac_core.settings import Settings

#: runs whose configuration pins a service remembers as written (past that, it forgets and asks the store again)
MAX_PINNED_RUNS = 10_000


class RagIndex(Protocol):
    """What the trace uses of the rag domain (:class:`~aisac_core.rag.service.RagService` is one): the configuration
    pins read its ``embedder`` (the model id, part of the index fingerprint), and verification re-checks a run's
    anchors against its index (:meth:`~aisac_core.rag.verify.AnchorVerifier.verify_full_anchor`)."""

    @property
    def embedder(self) -> Embedder:
        """The store's dense + sparse embedder."""
        ...

    def verify_full_anchor(self, anchor: dict[str, Any], roots: HostRoots | None = None) -> Verification:
        """An evidence anchor checked against its file and the index (the rag domain's result type)."""
        ...


class TraceService(RunQueries, RunDiff, RunReplay, RunExports, TraceStatistics):
    """The trace of one store.

    Args:
        settings: the store's settings (``data_dir``: exports under ``trace_exports/``, page images under
            ``cache/pages/``; every setting is part of a run's configuration pins).
        engine: returns the store's SQL engine (called on use: building the service opens nothing, so the suite
            can mount the dashboard and answer ``tools/list`` before the store is opened).
        rag: returns the rag domain (:class:`RagIndex`), called on use: configuration pins (models, index
            fingerprint) and anchor verification against the index.
    """

    def __init__(self, settings: Settings, engine: Callable[[], Engine], rag: Callable[[], RagIndex]) -> None:
        self.settings = settings
        self._engine = engine
        self._rag = rag
        self.otel = Otel()
        self.summaries = Summaries()
        self._pinned: set[str] = set()
        self._lock = threading.Lock()
        self._journal: TraceJournal | None = None  # built on the first record
        self._gaps = StoreGaps()

    @property
    def engine(self) -> Engine:
        """The store's SQL engine (opened by the callable given to the service, on first use)."""
        return self._engine()

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self._engine = lambda: engine

    @property
    def export_dir(self) -> Path:
        """``<data dir>/trace_exports/`` (created on the first export)."""
        return self.settings.data_dir / "trace_exports"

    def images(self) -> EvidenceImages:
        """Page images of cited passages of this store, cached under ``<data dir>/cache/pages``."""
        return EvidenceImages(self.engine, self.settings.data_dir / "cache" / "pages")

    # ------------------------------------------------------------------------------------------ recording

    def record(self, **event: Any) -> int:
        """Write one trace event (:func:`aisac_core.trace.recorder.record_tool_call`: keyword arguments ``run_id,
        server, tool, arguments, result, status, error, latency_ms, kind, parent_id``); returns its id, or 0 when the
        SQL store is unreachable and the event waits in the local journal (:mod:`aisac_core.trace.journal`; written
        by a later call). Raises :class:`~aisac_core.trace.journal.TraceUnavailableError` then in strict audit mode
        (``AISAC_TRACE_STRICT``)."""
        with self._lock:
            if self._journal is None:
                self._journal = TraceJournal(
                    self.settings.data_dir,
                    lambda **ev: record_tool_call(self.engine, **ev),
                    strict=self.settings.trace_strict,
                )
        return int(self._journal.record(**event))

    def config_pins(self) -> dict[str, Any]:
        """The store's configuration now (:func:`aisac_core.trace.pins.config_pins`), JSON-ready."""
        return config_pins(self.settings, self._rag().embedder)

    def pinned(self, run_id: str) -> bool:
        """True when this service already wrote (or found) the configuration pins of ``run_id`` (no store access)."""
        return run_id in self._pinned

    def pin_run(self, run_id: str) -> bool:
        """Write the configuration pins of ``run_id`` unless the run has some; True when written. Runs seen by this
        service are not looked up again (at most :data:`MAX_PINNED_RUNS` remembered)."""
        with self._lock:
            if run_id in self._pinned:
                return False
        written = write_run_pins(self.engine, run_id, self.config_pins)
        with self._lock:
            if len(self._pinned) >= MAX_PINNED_RUNS:
                self._pinned.clear()
            self._pinned.add(run_id)
        return written

    # ------------------------------------------------------------------------------------------ checks

    def verify(self, run_id: str, *, use_index: bool = True, roots: HostRoots | None = None) -> Verified:
        """Re-hash a run's evidence anchors and input files (:func:`aisac_core.trace.verify.verify_run`).
        ``use_index``: anchors are checked against the index (file and passage: opens the vector store); False:
        file-level only (a process that does not own the store). ``roots``: the requesting host's roots, outside
        which no anchored file is read (None: the settings'). Raises TraceError for an unknown run."""

        def check(anchor: dict[str, Any]) -> Verification:
            return self._rag().verify_full_anchor(anchor, roots)

        return verify_run(
            self.engine, run_id, check_anchor=check if use_index else None, data_dir=self.settings.data_dir
        )

    def gaps(self) -> TraceGap:
        """Every trace event of this store that is not in it (:class:`aisac_core.trace.gaps.StoreGaps`): lost ones
        (``trace_gap`` events, counts not yet written) and those pending in this data dir's local journal."""
        return self._gaps.read(self.engine, self.settings.data_dir)

    # ------------------------------------------------------------------------------------------ exports, retention

    def prune(self, older_than_days: float, *, dry_run: bool = False) -> Pruned:
        """Delete runs older than ``older_than_days`` days, each exported as a JSON bundle first
        (:func:`aisac_core.trace.retention.prune_runs`). Raises TraceError for a bad number of days."""
        return prune_runs(
            self.engine, older_than_days, dry_run=dry_run, export=lambda rid: self.export(rid, "json")["path"]
        )
