"""Does the vector store hold what the manifest says? Per document, by chunk ids; and the repair.

The manifest (:class:`~aisac_core.store.tables.Document`) promises, for every ``indexed`` document, the points
``point_id(doc_id, sha256, i)`` for ``i < chunk_count`` (:func:`aisac_core.rag.indexer.point_id`). A split store -
replicas that each kept vectors in a private folder, a vector folder restored from another day, a crash outside the
indexer's write order - breaks that promise without the manifest knowing: status reported 0 stale documents while
half the corpus could not be found. :meth:`VectorAudit.check_vectors` compares both sides by id:

- ``missing``: promised points the store lacks (per document);
- ``orphan``: points no manifest row promises (another version of a file, a removed file), other than those of
  documents being indexed right now (``indexing``: their points are written before the row says ``indexed``).

:meth:`VectorAudit.repair_vectors` deletes the orphans and re-embeds exactly the documents with missing points (their
fingerprint is cleared, so the incremental indexer re-parses and re-embeds them and skips everything else).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from aisac_core.rag.indexer import point_id
from aisac_core.store.collections import CHUNKS
from aisac_core.store.tables import Document
from aisac_core.store.vectors import Cond

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.indexer import Counters, Indexer
    from aisac_core.rag.results import VectorCheck
    from aisac_core.store.vectors import VectorStore

#: documents named in a check's result (the counts cover all)
LIST_LIMIT = 20


class VectorAudit:
    """The manifest against the vector store, by chunk id: :meth:`check_vectors` and :meth:`repair_vectors`. A part of
    :class:`~aisac_core.rag.service.RagService`. The collaborators these methods use: ``engine`` (the manifest),
    :meth:`vectors` (the ``chunks`` collection) and :attr:`indexer` (re-embeds the documents a repair finds short of
    vectors)."""

    engine: Engine

    if TYPE_CHECKING:

        def vectors(self) -> VectorStore:
            """The vector store with the ``chunks`` collection ready (:meth:`RagService.vectors`)."""
            ...

        @property
        def indexer(self) -> Indexer:
            """The store's indexer (:attr:`RagService.indexer`)."""
            ...

    def _scan(self) -> tuple[dict[str, list[str]], dict[tuple[str, str], list[str]], dict[str, Any]]:
        """(missing point ids per doc_id, orphan point ids per (doc_id, sha256), manifest rows by doc_id)."""
        with Session(self.engine) as db:
            rows = {r.doc_id: r for r in db.exec(select(Document)).all()}
        expected: dict[str, str] = {}
        for r in rows.values():
            if r.status == "indexed":
                for i in range(r.chunk_count):
                    expected[point_id(r.doc_id, r.sha256, i)] = r.doc_id
        busy = {d for d, r in rows.items() if r.status == "indexing"}
        present: set[str] = set()
        orphans: dict[tuple[str, str], list[str]] = defaultdict(list)
        for pid, payload in self.vectors().scroll_ids(CHUNKS, keys=["doc_id", "sha256"]):
            present.add(pid)
            if pid not in expected:
                doc = str(payload.get("doc_id", ""))
                if doc not in busy:
                    orphans[(doc, str(payload.get("sha256", "")))].append(pid)
        missing: dict[str, list[str]] = defaultdict(list)
        for pid, doc in expected.items():
            if pid not in present:
                missing[doc].append(pid)
        return dict(missing), dict(orphans), rows

    def check_vectors(self) -> VectorCheck:
        """Compare the manifest with the ``chunks`` collection by point id.

        Returns ``{"missing_vectors": int, "orphan_vectors": int, "documents_missing_vectors": int,
        "missing_in": [{"doc_id", "path", "missing", "chunks"}, ...] (at most 20), "checked_chunks": int}``.
        Reads every point id of the collection (no vectors, two payload fields): seconds for 10^5 chunks.
        Raises what opening the store raises."""
        missing, orphans, rows = self._scan()
        listed = sorted(missing.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:LIST_LIMIT]
        return {
            "missing_vectors": sum(len(v) for v in missing.values()),
            "orphan_vectors": sum(len(v) for v in orphans.values()),
            "documents_missing_vectors": len(missing),
            "missing_in": [
                {"doc_id": d, "path": rows[d].path, "missing": len(v), "chunks": rows[d].chunk_count} for d, v in listed
            ],
            "checked_chunks": sum(r.chunk_count for r in rows.values() if r.status == "indexed"),
        }

    def repair_vectors(
        self, counters: Counters | None = None, failures: list[dict[str, str]] | None = None
    ) -> dict[str, Any]:
        """Make the vector store hold exactly what the manifest promises: delete the orphan points, then re-embed the
        documents with missing points (only those: their fingerprint is cleared and the store's :attr:`indexer` runs on their paths,
        adding to ``counters`` and ``failures``; a file that is gone is left for an index run of its folder to prune). Returns ``{"orphans_deleted": int, "documents_reembedded": int,
        "missing_before": int, "missing_after": int, "orphan_after": int}``. Raises what indexing raises."""
        missing, orphans, rows = self._scan()
        vs = self.vectors()
        deleted = 0
        for (doc, sha), ids in orphans.items():
            conds = [Cond("doc_id", eq=doc)] + ([Cond("sha256", eq=sha)] if sha else [])
            if doc in rows and rows[doc].status == "indexed" and sha == rows[doc].sha256:
                conds.append(Cond("chunk_index", gte=rows[doc].chunk_count))  # extra chunks of the current version
            if doc:
                vs.delete(CHUNKS, conds)
                deleted += len(ids)
        if missing:
            with Session(self.engine) as db:
                for r in db.exec(select(Document).where(col(Document.doc_id).in_(list(missing)))).all():
                    r.fingerprint = ""
                    db.add(r)
                db.commit()
            paths = [Path(rows[d].path) for d in missing if Path(rows[d].path).is_file()]
            if paths:  # a file that is gone keeps its row until an index run of its folder prunes it
                self.indexer.run(paths, counters=counters, failures=failures)
        vs.flush()
        after = self.check_vectors()
        return {
            "orphans_deleted": deleted,
            "documents_reembedded": len(missing),
            "missing_before": sum(len(v) for v in missing.values()),
            "missing_after": after["missing_vectors"],
            "orphan_after": after["orphan_vectors"],
        }
