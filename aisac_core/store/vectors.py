"""The vector half of the shared store: one interface, two Qdrant backends.

- :class:`EdgeVectorStore` (default): Qdrant Edge (``qdrant-edge-py``), in-process and persistent, one
  shard folder per collection, write-ahead log on, HNSW for dense vectors, sparse vectors with the IDF
  modifier, RRF fusion and payload indexes.
- :class:`QdrantClientVectorStore`: ``qdrant-client`` against a Qdrant server (``qdrant_url``) or its
  local mode (a folder; for tests and small stores). The same code serves both; only the server takes the
  connection options (:func:`client_kwargs`: API key, TLS, timeout) and the collection layout
  (:func:`collection_kwargs`: shards, replication, write consistency).

Every collection holds one dense vector ``dense`` (cosine) and one sparse vector ``bm25`` (IDF applied
by Qdrant at query time, so BM25 weights stay right as the corpus grows). Reciprocal rank fusion:
score(d) = sum_i w_i / (k + rank_i(d)) (Cormack, Clarke & Buettcher, SIGIR 2009, k = 60).
"""

from __future__ import annotations

import os
import shutil
import ssl
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from aisac_core.errors import AisacError

if TYPE_CHECKING:
    from aisac_core.settings import Settings

try:
    import fcntl
except ImportError:  # Windows: no flock; the embedded stores take their own folder locks there
    fcntl = None  # type: ignore[assignment]  # the module does not exist there

#: Payload fields with an index, created with every collection by both backends (filters on them are cheap):
#: keyword indexes (exact match, match-any) and integer indexes (match, range). Other payload fields (``text``) can
#: still be returned but not filtered on efficiently. https://qdrant.tech/documentation/manage-data/indexing/
KEYWORD_FIELDS = (
    "doc_id",
    "path",
    "file_type",
    "section",
    "section_covers",
    "sha256",
    "session_id",
    # memory scopes (the ``dialogue`` collection, :class:`aisac_core.memory.common.Scope`)
    "project",
    "participant",
    "host",
)
#: ``ts`` / ``t_lo`` / ``t_hi``: a dialogue point's time and the hull of the days it mentions (seconds since the epoch)
INTEGER_FIELDS = ("page", "chunk_index", "ts", "t_lo", "t_hi")

DENSE = "dense"
SPARSE = "bm25"


@dataclass(frozen=True)
class Cond:
    """One filter condition on a payload field: equality, membership, or an inclusive numeric range."""

    key: str
    eq: str | int | None = None
    any: tuple[str, ...] | None = None
    gte: float | None = None
    lte: float | None = None


@dataclass
class VectorPoint:
    """A point to store: UUID string id, dense vector, sparse vector (indices, values), payload."""

    id: str
    dense: list[float]
    sparse_indices: list[int]
    sparse_values: list[float]
    payload: dict[str, Any]


@dataclass
class VectorHit:
    """A scored point: id, score (cosine, BM25 or RRF depending on the query), payload."""

    id: str
    score: float
    payload: dict[str, Any] = field(default_factory=dict)


Mode = Literal["hybrid", "dense", "sparse"]


class VectorStoreError(AisacError, RuntimeError):
    """The vector store cannot be opened or used; the message names the folder and what to do."""


class VectorStore(ABC):
    """Collections of points with a dense and a sparse vector and a JSON payload."""

    @abstractmethod
    def ensure_collection(self, name: str, dim: int) -> bool:
        """Create ``name`` for ``dim``-d dense vectors if missing; recreate it (empty) when its
        dimension differs. Returns True when the collection was (re)created."""

    @abstractmethod
    def upsert(self, name: str, points: list[VectorPoint]) -> None:
        """Insert or replace points by id."""

    @abstractmethod
    def delete(self, name: str, conds: list[Cond]) -> None:
        """Delete every point matching all ``conds``."""

    @abstractmethod
    def query(
        self,
        name: str,
        *,
        dense: list[float] | None,
        sparse: tuple[list[int], list[float]] | None,
        limit: int,
        conds: list[Cond] | None = None,
        mode: Mode = "hybrid",
        prefetch_limit: int = 100,
        rrf_k: int = 60,
        weights: tuple[float, float] | None = None,
        ids: list[str] | None = None,
        with_payload: bool = True,
    ) -> list[VectorHit]:
        """Top ``limit`` points: dense (cosine), sparse (BM25 with IDF) or both fused by RRF.

        ``ids``, when given, restricts the query to those point ids (besides ``conds``): this scores
        known candidates exactly, e.g. the BM25 score of a hit that only the dense query found.
        ``with_payload=False`` returns ids and scores only (empty payloads), which is much cheaper for
        long candidate lists.
        """

    @abstractmethod
    def retrieve(self, name: str, ids: list[str]) -> list[VectorHit]:
        """Points by id (score 0), payload included; unknown ids are left out."""

    @abstractmethod
    def dense_vectors(self, name: str, ids: list[str]) -> dict[str, list[float]]:
        """The stored dense vector of each point of ``ids`` (``{id: vector}``; unknown ids are left out).
        Used by the dense pseudo-relevance feedback of hybrid search (:mod:`aisac_core.rag.search`)."""

    @abstractmethod
    def count(self, name: str, conds: list[Cond] | None = None) -> int:
        """Exact number of points matching ``conds`` (all points when None)."""

    @abstractmethod
    def scroll_ids(
        self, name: str, conds: list[Cond] | None = None, keys: list[str] | None = None
    ) -> Iterable[tuple[str, dict[str, Any]]]:
        """Every (id, payload) matching ``conds``; with ``keys``, the payload holds those fields only (cheap)."""

    def existing_dim(self, name: str) -> int | None:
        """Open collection ``name`` if it exists (without creating it); its dense dimension, None when it does not
        exist. Raises :class:`VectorStoreError` where a backend cannot tell (then :meth:`ensure_collection`)."""
        raise VectorStoreError(f"{type(self).__name__} cannot open a collection without its dimension")

    def scroll_points(self, name: str, batch: int = 256) -> Iterator[list[VectorPoint]]:
        """Every point of ``name`` whole (dense and sparse vectors, payload), ``batch`` points at a time: what
        :func:`aisac_core.store.vectorcopy.copy_vectors` reads. Raises :class:`VectorStoreError` where a backend
        cannot read its vectors back."""
        raise VectorStoreError(f"{type(self).__name__} cannot read its vectors back; re-index into the target")

    @abstractmethod
    def flush(self) -> None:
        """Make every write durable."""

    @abstractmethod
    def close(self) -> None:
        """Release the store (and its folder lock)."""


def _point(pid: str, vector: Any, payload: Any) -> VectorPoint:
    """A :class:`VectorPoint` from a Qdrant record's named vectors (``{dense: [...], bm25: SparseVector}``)."""
    vec = vector if isinstance(vector, dict) else {}
    sp = vec.get(SPARSE)
    return VectorPoint(
        pid,
        [float(x) for x in vec.get(DENSE) or []],
        [int(i) for i in getattr(sp, "indices", None) or []],
        [float(v) for v in getattr(sp, "values", None) or []],
        dict(payload or {}),
    )


def _missing_indexes(schema: dict[str, Any] | None) -> list[tuple[str, bool]]:
    """The payload indexes a collection lacks, ``(field, is_integer)``: those of fields added since an older release."""
    have = set(schema or {})
    return [(f, False) for f in KEYWORD_FIELDS if f not in have] + [(f, True) for f in INTEGER_FIELDS if f not in have]


class FolderLock:
    """An exclusive, non-blocking ``flock`` on ``folder/aisac.lock`` (holding the holder's pid), until :meth:`release`.

    Raises :class:`~aisac_core.store.vectors.VectorStoreError` when another process (or another open store in this
    process) holds it; the message names the folder, the holder's pid and what to do."""

    def __init__(self, folder: Path) -> None:
        self.fd: int | None = None
        if fcntl is None:
            return
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "aisac.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise VectorStoreError(
                f"the vector store {folder} is in use by another aisac process (pid {holder}): a local vector "
                "folder is locked while another process uses it. Stop that process, or reach the store through it "
                "(aisac serve over HTTP); several processes share vectors only in PostgreSQL (AISAC_VECTOR_URL) or "
                "on a Qdrant server"
            ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None


# --------------------------------------------------------------------------------------------------
# Qdrant Edge
# --------------------------------------------------------------------------------------------------


class EdgeVectorStore(VectorStore):
    """Qdrant Edge backend: a shard per collection under ``root`` (``root/<name>``).

    A collection this process creates gets its payload indexes (:data:`KEYWORD_FIELDS`, :data:`INTEGER_FIELDS`)
    just before its first point is written, not at creation: an index filters nothing in an empty collection, and
    each costs a write to the shard (~7 ms CPU and a dozen ``fsync`` calls), 30 for the two collections every store
    opens, many of which are never written (a store whose memory holds no dialogue). A collection opened again
    gets the indexes it lacks at once, as before (one made by an older release, or one never written)."""

    def __init__(self, root: Path) -> None:
        import qdrant_edge as qe  # the backend in use only: a server never loads both

        self._qe = qe
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._folder_lock = FolderLock(root)  # one process per folder, whatever AISAC_OWNER_MODE says
        self._shards: dict[str, Any] = {}
        #: collections created here whose payload indexes wait for the first write (see the class)
        self._unindexed: set[str] = set()
        self._lock = threading.RLock()

    def _shard(self, name: str) -> Any:
        shard = self._shards.get(name)
        if shard is None:
            raise VectorStoreError(f"collection {name!r} is not open; call ensure_collection first")
        return shard

    def _open(self, name: str) -> Any | None:
        path = self.root / name
        if not path.exists() or not any(path.iterdir()):
            return None
        try:
            return self._qe.EdgeShard.load(str(path))
        except Exception as exc:  # the shard folder is locked or damaged
            msg = str(exc)
            if "WouldBlock" in msg or "lock" in msg.lower():
                raise VectorStoreError(
                    f"the vector store {path} is in use by another aisac process. Stop it, or point "
                    "this process at the same store through that process (aisac serve over HTTP)."
                ) from exc
            raise VectorStoreError(
                f"cannot open the vector store {path}: {msg}. If it is damaged, move the folder "
                "aside and re-index (aisac index); the manifest will re-embed every file."
            ) from exc

    def ensure_collection(self, name: str, dim: int) -> bool:
        qe = self._qe
        with self._lock:
            shard = self._shards.get(name) or self._open(name)
            if shard is not None:
                info = shard.info()  # raises if the shard is unusable
                stored_dim = self._dense_dim(name, shard)
                if stored_dim in (None, dim):
                    self._index(shard, info.payload_schema)
                    self._unindexed.discard(name)
                    self._shards[name] = shard
                    return False
                shard.close()
                shutil.rmtree(self.root / name)
            cfg = qe.EdgeConfig(
                vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
                sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            )
            shard = qe.EdgeShard.create(str(self.root / name), cfg)
            (self.root / name / "aisac-dim").write_text(str(dim))
            self._unindexed.add(name)  # indexed before its first point (see the class)
            self._shards[name] = shard
            return True

    def _index(self, shard: Any, schema: dict[str, Any] | None) -> None:
        """Create the payload indexes ``shard`` lacks (:func:`_missing_indexes`)."""
        qe = self._qe
        for f, integer in _missing_indexes(schema):
            kind = qe.PayloadSchemaType.Integer if integer else qe.PayloadSchemaType.Keyword
            shard.update(qe.UpdateOperation.create_field_index(f, kind))

    def _dense_dim(self, name: str, shard: Any) -> int | None:
        marker = self.root / name / "aisac-dim"
        return int(marker.read_text()) if marker.exists() else None

    def _filter(self, conds: list[Cond] | None, ids: list[str] | None = None) -> Any:
        if not conds and ids is None:
            return None
        qe = self._qe
        must = []
        for c in conds or []:
            if c.eq is not None:
                must.append(qe.FieldCondition(c.key, match=qe.MatchValue(c.eq)))
            elif c.any is not None:
                must.append(qe.FieldCondition(c.key, match=qe.MatchAny(list(c.any))))
            else:
                must.append(qe.FieldCondition(c.key, range=qe.RangeFloat(gte=c.gte, lte=c.lte)))
        if ids is not None:
            must.append(qe.HasIdCondition(set(ids)))
        return qe.Filter(must=must)

    def upsert(self, name: str, points: list[VectorPoint]) -> None:
        qe = self._qe
        if not points:
            return
        pts = [
            qe.Point(
                p.id,
                {DENSE: list(map(float, p.dense)), SPARSE: qe.SparseVector(p.sparse_indices, p.sparse_values)},
                p.payload,
            )
            for p in points
        ]
        shard = self._shard(name)
        if name in self._unindexed:
            with self._lock:
                if name in self._unindexed:
                    self._index(shard, shard.info().payload_schema)
                    self._unindexed.discard(name)
        shard.update(qe.UpdateOperation.upsert_points(pts))

    def delete(self, name: str, conds: list[Cond]) -> None:
        if not conds:
            raise ValueError("refusing to delete without a condition")
        self._shard(name).update(self._qe.UpdateOperation.delete_points_by_filter(self._filter(conds)))

    def query(
        self,
        name: str,
        *,
        dense: list[float] | None,
        sparse: tuple[list[int], list[float]] | None,
        limit: int,
        conds: list[Cond] | None = None,
        mode: Mode = "hybrid",
        prefetch_limit: int = 100,
        rrf_k: int = 60,
        weights: tuple[float, float] | None = None,
        ids: list[str] | None = None,
        with_payload: bool = True,
    ) -> list[VectorHit]:
        qe = self._qe
        if ids is not None and not ids:
            return []
        flt = self._filter(conds, ids)
        shard = self._shard(name)
        dq = qe.Query.Nearest(list(map(float, dense)), using=DENSE) if dense is not None else None
        sq = (
            qe.Query.Nearest(qe.SparseVector(list(sparse[0]), list(map(float, sparse[1]))), using=SPARSE)
            if sparse is not None and len(sparse[0])
            else None
        )
        if mode == "dense" or (mode == "hybrid" and sq is None):
            req = qe.QueryRequest(limit=limit, query=dq, filter=flt, with_payload=with_payload)
        elif mode == "sparse":
            if sq is None:
                return []
            req = qe.QueryRequest(limit=limit, query=sq, filter=flt, with_payload=with_payload)
        else:
            pre = [
                qe.Prefetch(limit=prefetch_limit, query=dq, filter=flt),
                qe.Prefetch(limit=prefetch_limit, query=sq, filter=flt),
            ]
            fusion = qe.Fusion.Rrf(k=rrf_k, weights=list(weights) if weights else None)
            req = qe.QueryRequest(limit=limit, prefetches=pre, query=fusion, filter=flt, with_payload=with_payload)
        return [VectorHit(str(p.id), float(p.score), dict(p.payload or {})) for p in shard.query(req)]

    def retrieve(self, name: str, ids: list[str]) -> list[VectorHit]:
        if not ids:
            return []
        recs = self._shard(name).retrieve(list(ids), with_payload=True, with_vector=False)
        return [VectorHit(str(r.id), 0.0, dict(r.payload or {})) for r in recs]

    def dense_vectors(self, name: str, ids: list[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        recs = self._shard(name).retrieve(list(ids), with_payload=False, with_vector=True)
        return {str(r.id): list(r.vector[DENSE] if isinstance(r.vector, dict) else r.vector) for r in recs}

    def count(self, name: str, conds: list[Cond] | None = None) -> int:
        return int(self._shard(name).count(self._qe.CountRequest(exact=True, filter=self._filter(conds))))

    def scroll_ids(
        self, name: str, conds: list[Cond] | None = None, keys: list[str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        qe = self._qe
        offset = None
        while True:
            req = qe.ScrollRequest(
                offset=offset,
                limit=1000,
                filter=self._filter(conds),
                with_payload=list(keys) if keys is not None else True,
                with_vector=False,
            )
            recs, offset = self._shard(name).scroll(req)
            for r in recs:
                yield str(r.id), dict(r.payload or {})
            if offset is None or not recs:
                break

    def existing_dim(self, name: str) -> int | None:
        with self._lock:
            shard = self._shards.get(name) or self._open(name)
            dim = None if shard is None else self._dense_dim(name, shard)
            if shard is not None and dim is not None:
                self._shards[name] = shard
            return dim

    def scroll_points(self, name: str, batch: int = 256) -> Iterator[list[VectorPoint]]:
        qe = self._qe
        offset = None
        while True:
            req = qe.ScrollRequest(offset=offset, limit=batch, with_payload=True, with_vector=True)
            recs, offset = self._shard(name).scroll(req)
            if recs:
                yield [_point(str(r.id), r.vector, r.payload) for r in recs]
            if offset is None or not recs:
                break

    def flush(self) -> None:
        with self._lock:
            for s in self._shards.values():
                s.flush()

    def close(self) -> None:
        with self._lock:
            for s in self._shards.values():
                try:
                    s.flush()
                    s.close()
                except Exception:
                    pass
            self._shards.clear()
            self._folder_lock.release()


# --------------------------------------------------------------------------------------------------
# qdrant-client (server, or local mode)
# --------------------------------------------------------------------------------------------------


def client_kwargs(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of ``qdrant_client.QdrantClient(...)`` for ``settings`` (backend ``qdrant``).

    Local mode (no ``qdrant_url``): ``{"path": "<data_dir>/qdrant"}`` and nothing else. A server: ``url`` (REST,
    e.g. ``http://qdrant:6333``; a URL without a scheme gets ``https://`` when ``qdrant_https`` is true, or is unset
    and an API key is set - qdrant-client's rule - else ``http://``, since qdrant-client would read the host of
    ``qdrant:6333`` as a scheme), ``api_key`` (str or None; sent as the ``api-key`` header), and only when set:
    ``https`` (bool; unset, the URL's scheme decides), ``timeout`` (int seconds per request; qdrant-client's
    default is 5), ``verify`` (an :class:`ssl.SSLContext` trusting ``qdrant_ca_file``, a PEM file or a folder of
    hashed certificates; qdrant-client passes unknown keyword arguments to its httpx client). Parameters:
    https://python-client.qdrant.tech/qdrant_client.qdrant_client and https://qdrant.tech/documentation/security/.

    Raises :class:`VectorStoreError` when ``qdrant_ca_file`` cannot be read as certificates."""
    if not settings.qdrant_url:
        return {"path": str(settings.vectors_dir)}
    url, tls = settings.qdrant_url, settings.qdrant_https
    if "://" not in url:
        url = ("https://" if (tls if tls is not None else settings.qdrant_api_key is not None) else "http://") + url
    kw: dict[str, Any] = {"url": url, "api_key": settings.qdrant_api_key}
    if settings.qdrant_https is not None:
        kw["https"] = settings.qdrant_https
    if settings.qdrant_timeout_s is not None:
        kw["timeout"] = settings.qdrant_timeout_s
    if settings.qdrant_ca_file is not None:
        ca = Path(settings.qdrant_ca_file).expanduser()
        try:
            kw["verify"] = (
                ssl.create_default_context(capath=str(ca))
                if ca.is_dir()
                else ssl.create_default_context(cafile=str(ca))
            )
        except (OSError, ssl.SSLError) as exc:
            raise VectorStoreError(
                f"AISAC_QDRANT_CA_FILE={ca}: cannot load CA certificates from it ({exc}); give a "
                "PEM file or a folder of hashed certificates (c_rehash)"
            ) from exc
    return kw


def collection_kwargs(settings: Settings) -> dict[str, Any]:
    """The extra keyword arguments of ``create_collection`` for collections aisac creates on a Qdrant server:
    ``shard_number``, ``replication_factor``, ``write_consistency_factor`` (ints >= 1), each only when set (unset:
    the server's defaults, https://qdrant.tech/documentation/scaling/distributed_deployment/). ``{}`` in local mode,
    which has no shards or replicas (it would accept and ignore them). They apply when a collection is created only;
    change an existing one with Qdrant's own API (``PATCH /collections/{name}``, replicas) or let aisac recreate it."""
    if not settings.qdrant_url:
        return {}
    pairs = (
        ("shard_number", settings.qdrant_shard_number),
        ("replication_factor", settings.qdrant_replication_factor),
        ("write_consistency_factor", settings.qdrant_write_consistency_factor),
    )
    return {k: v for k, v in pairs if v is not None}


class QdrantClientVectorStore(VectorStore):
    """qdrant-client backend: ``url`` for a Qdrant server, else local mode in folder ``path``.

    ``options``: more ``QdrantClient`` keyword arguments for a server (``https``, ``timeout``, ``verify``; see
    :func:`client_kwargs`); ``collection_options``: more ``create_collection`` arguments for a server (see
    :func:`collection_kwargs`). Local mode takes neither. :meth:`from_settings` builds both from the settings."""

    def __init__(
        self,
        *,
        url: str | None = None,
        path: Path | None = None,
        api_key: str | None = None,
        options: dict[str, Any] | None = None,
        collection_options: dict[str, Any] | None = None,
    ) -> None:
        from qdrant_client import QdrantClient, models  # the backend in use only (~0.5 s of imports)

        self.m = models
        self.collection_options = dict(collection_options or {}) if url else {}
        self._folder_lock: FolderLock | None = None
        try:
            if url:
                self.client = QdrantClient(url=url, api_key=api_key, **(options or {}))
            else:
                assert path is not None
                path.mkdir(parents=True, exist_ok=True)
                self._folder_lock = FolderLock(path)
                self.client = QdrantClient(path=str(path))
        except VectorStoreError:
            raise
        except Exception as exc:
            if self._folder_lock is not None:
                self._folder_lock.release()
            where = url or path
            raise VectorStoreError(
                f"cannot open the Qdrant store {where}: {exc}. A local-mode folder is locked while another "
                "process uses it; a server URL must be reachable."
            ) from exc

    @classmethod
    def from_settings(cls, settings: Settings) -> QdrantClientVectorStore:
        """The store the ``qdrant_*`` settings describe: a server at ``qdrant_url`` with every connection and
        collection option, else local mode in ``settings.vectors_dir``. Raises :class:`VectorStoreError`."""
        kw = client_kwargs(settings)
        if "path" in kw:
            return cls(path=Path(kw["path"]))
        url, api_key = kw.pop("url"), kw.pop("api_key")
        return cls(url=url, api_key=api_key, options=kw, collection_options=collection_kwargs(settings))

    def ensure_collection(self, name: str, dim: int) -> bool:
        m = self.m
        if self.client.collection_exists(name):
            info = self.client.get_collection(name)
            vecs = info.config.params.vectors
            cur = vecs[DENSE].size if isinstance(vecs, dict) else None
            if cur == dim:  # (local mode neither lists nor uses payload indexes)
                for f, integer in [] if self._folder_lock is not None else _missing_indexes(info.payload_schema):
                    kind = m.PayloadSchemaType.INTEGER if integer else m.PayloadSchemaType.KEYWORD
                    self.client.create_payload_index(name, f, kind)
                return False
            self.client.delete_collection(name)
        try:
            self.client.create_collection(
                name,
                vectors_config={DENSE: m.VectorParams(size=dim, distance=m.Distance.COSINE)},
                sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
                **self.collection_options,
            )
        except Exception:
            if self.client.collection_exists(name):  # another process (a replica starting too) created it first
                return False
            raise
        if self._folder_lock is None:  # a server; local mode keeps no payload index (it warns and ignores them)
            for f in KEYWORD_FIELDS:
                self.client.create_payload_index(name, f, m.PayloadSchemaType.KEYWORD)
            for f in INTEGER_FIELDS:
                self.client.create_payload_index(name, f, m.PayloadSchemaType.INTEGER)
        return True

    def existing_dim(self, name: str) -> int | None:
        if not self.client.collection_exists(name):
            return None
        vecs = self.client.get_collection(name).config.params.vectors
        return int(vecs[DENSE].size) if isinstance(vecs, dict) else None

    def _filter(self, conds: list[Cond] | None, ids: list[str] | None = None) -> Any:
        if not conds and ids is None:
            return None
        m = self.m
        must = []
        for c in conds or []:
            if c.eq is not None:
                must.append(m.FieldCondition(key=c.key, match=m.MatchValue(value=c.eq)))
            elif c.any is not None:
                must.append(m.FieldCondition(key=c.key, match=m.MatchAny(any=list(c.any))))
            else:
                must.append(m.FieldCondition(key=c.key, range=m.Range(gte=c.gte, lte=c.lte)))
        if ids is not None:
            must.append(m.HasIdCondition(has_id=list(ids)))
        return m.Filter(must=must)

    def upsert(self, name: str, points: list[VectorPoint]) -> None:
        m = self.m
        if not points:
            return
        self.client.upsert(
            name,
            points=[
                m.PointStruct(
                    id=p.id,
                    vector={
                        DENSE: list(map(float, p.dense)),
                        SPARSE: m.SparseVector(indices=p.sparse_indices, values=p.sparse_values),
                    },
                    payload=p.payload,
                )
                for p in points
            ],
            wait=True,
        )

    def delete(self, name: str, conds: list[Cond]) -> None:
        if not conds:
            raise ValueError("refusing to delete without a condition")
        self.client.delete(name, points_selector=self.m.FilterSelector(filter=self._filter(conds)), wait=True)

    def query(
        self,
        name: str,
        *,
        dense: list[float] | None,
        sparse: tuple[list[int], list[float]] | None,
        limit: int,
        conds: list[Cond] | None = None,
        mode: Mode = "hybrid",
        prefetch_limit: int = 100,
        rrf_k: int = 60,
        weights: tuple[float, float] | None = None,
        ids: list[str] | None = None,
        with_payload: bool = True,
    ) -> list[VectorHit]:
        m = self.m
        if ids is not None and not ids:
            return []
        flt = self._filter(conds, ids)
        sv = (
            m.SparseVector(indices=list(sparse[0]), values=list(map(float, sparse[1])))
            if sparse is not None and len(sparse[0])
            else None
        )
        dv = list(map(float, dense)) if dense is not None else None
        if mode == "dense" or (mode == "hybrid" and sv is None):
            res = self.client.query_points(
                name, query=dv, using=DENSE, limit=limit, query_filter=flt, with_payload=with_payload
            )
        elif mode == "sparse":
            if sv is None:
                return []
            res = self.client.query_points(
                name, query=sv, using=SPARSE, limit=limit, query_filter=flt, with_payload=with_payload
            )
        else:
            rrf = m.RrfQuery(rrf=m.Rrf(k=rrf_k, weights=list(weights) if weights else None))
            res = self.client.query_points(
                name,
                prefetch=[
                    m.Prefetch(query=dv, using=DENSE, limit=prefetch_limit, filter=flt),
                    m.Prefetch(query=sv, using=SPARSE, limit=prefetch_limit, filter=flt),
                ],
                query=rrf,
                limit=limit,
                query_filter=flt,
                with_payload=with_payload,
            )
        return [VectorHit(str(p.id), float(p.score), dict(p.payload or {})) for p in res.points]

    def retrieve(self, name: str, ids: list[str]) -> list[VectorHit]:
        if not ids:
            return []
        recs = self.client.retrieve(name, ids=list(ids), with_payload=True)
        return [VectorHit(str(r.id), 0.0, dict(r.payload or {})) for r in recs]

    def dense_vectors(self, name: str, ids: list[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        recs = self.client.retrieve(name, ids=list(ids), with_payload=False, with_vectors=[DENSE])
        out: dict[str, list[float]] = {}
        for r in recs:
            v = r.vector[DENSE] if isinstance(r.vector, dict) else r.vector
            out[str(r.id)] = [float(x) for x in cast(list[float], v)]
        return out

    def count(self, name: str, conds: list[Cond] | None = None) -> int:
        return int(self.client.count(name, count_filter=self._filter(conds), exact=True).count)

    def scroll_ids(
        self, name: str, conds: list[Cond] | None = None, keys: list[str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        offset = None
        while True:
            recs, offset = self.client.scroll(
                name,
                scroll_filter=self._filter(conds),
                limit=1000,
                offset=offset,
                with_payload=list(keys) if keys is not None else True,
                with_vectors=False,
            )
            for r in recs:
                yield str(r.id), dict(r.payload or {})
            if offset is None or not recs:
                break

    def flush(self) -> None:  # writes use wait=True
        return None

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:
            pass
        if self._folder_lock is not None:
            self._folder_lock.release()


def open_vector_store(
    backend: str, *, root: Path, url: str | None = None, api_key: str | None = None, settings: Settings | None = None
) -> VectorStore:
    """The configured Qdrant backend: ``edge`` in ``root``; ``qdrant`` at ``url`` or in local mode in ``root``. With
    ``settings``, ``qdrant`` is built from them instead (:meth:`QdrantClientVectorStore.from_settings`: URL, key,
    TLS, timeout, sharding; local mode in ``settings.vectors_dir``). The ``postgres`` backend is
    :func:`aisac_core.store.pgvectors.open_pg_vectors`. Raises ValueError (another backend)."""
    if backend == "edge":
        return EdgeVectorStore(root)
    if backend == "qdrant":
        if settings is not None:
            return QdrantClientVectorStore.from_settings(settings)
        return QdrantClientVectorStore(url=url, path=None if url else root, api_key=api_key)
    raise ValueError(f"unknown vector backend {backend!r}: use 'edge' or 'qdrant' (postgres: open_pg_vectors)")
