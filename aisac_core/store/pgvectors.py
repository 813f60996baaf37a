"""The vector port on PostgreSQL: pgvector for the dense side, an inverted index in SQL for the BM25 side.

One database can then hold the SQL store and the vectors, so any number of aisac processes (replicas) share both
(``AISAC_VECTOR_URL=postgresql+psycopg://...`` or ``AISAC_VECTOR_URL=sql``: the SQL store's own database).

Layout (schema ``aisac_vectors``, kept apart from the SQL store's tables and their migrations; a collection is
created at its dense dimension by :meth:`PgVectorStore.ensure_collection`, like a Qdrant collection):

- ``collection(name, dim)``: the collections and their dimension;
- ``p_<name>(id uuid primary key, dense vector(dim), payload jsonb)``: one row per point; an HNSW index with
  ``vector_cosine_ops`` (pgvector, https://github.com/pgvector/pgvector#hnsw) and payload indexes: GIN on
  ``payload->'<field>'`` for every keyword field (match, match-any, array members), B-tree on the numeric value
  of every integer field (match, range);
- ``t_<name>(term int, id uuid, weight real)``: the sparse vectors as postings, primary key ``(term, id)``.

Scores are the ones the Qdrant backends return, so the fusion in :mod:`aisac_core.rag.search` is unchanged:
dense = cosine similarity (``1 - (a <=> b)``); sparse = ``sum_t q_t * idf(t) * d_t`` with Qdrant's IDF modifier
``idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5) + 1)`` (N points in the collection, n_t of them with term t;
https://qdrant.tech/documentation/concepts/indexing/#idf-modifier), computed at query time so BM25 weights stay
right as the corpus grows. pgvector's own ``sparsevec`` (0.7+) is not used: the wheel-packaged server ships 0.6,
and an exact posting-list sum reproduces Qdrant's sparse scores to the float. RRF (``mode="hybrid"``) follows
Qdrant: ``score(d) = sum_i w_i / (k + rank_i(d))``, ranks from 0 as in Qdrant (Cormack, Clarke & Buettcher, SIGIR 2009).

Dense queries without conditions use the HNSW index (``hnsw.ef_search`` raised to at least the limit, so a
query gets all the neighbours it asks for); with conditions or ids they are exact (index scans off for the
transaction), because an HNSW scan filters after the walk and could return fewer points than exist.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from aisac_core.store.vectors import (
    INTEGER_FIELDS,
    KEYWORD_FIELDS,
    Cond,
    Mode,
    VectorHit,
    VectorPoint,
    VectorStore,
    VectorStoreError,
)

if TYPE_CHECKING:
    from aisac_core.settings import Settings

SCHEMA = "aisac_vectors"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
#: advisory lock key of collection (re)creation: replicas starting together create a collection once
_DDL_LOCK = 0x61697363_3332


class _Dropped(Exception):
    """The server closed the connection during a transaction of :meth:`PgVectorStore._run` (run it again)."""


def _num(field: str) -> str:
    """The immutable numeric expression of an integer payload field (indexed; NULL when it is not a number)."""
    return f"(CASE WHEN jsonb_typeof(payload->'{field}') = 'number' THEN (payload->>'{field}')::float8 END)"


def _vec(v: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


class PgVectorStore(VectorStore):
    """Collections in PostgreSQL with the pgvector extension; ``url`` is a SQLAlchemy ``postgresql+psycopg://`` URL.

    Raises :class:`VectorStoreError` when the server cannot be reached, or the ``vector`` extension is not
    installed on it and cannot be created (the message says what an administrator runs)."""

    def __init__(self, url: str, *, engine: Engine | None = None, read_only: bool = False) -> None:
        """``read_only``: create nothing (no extension, schema or table; a read-only role suffices): collections
        that do not exist are reported missing by :meth:`existing_dim`."""
        from aisac_core.store.sql import redact_url

        self.url = url
        self._where = redact_url(url)
        if not url.startswith("postgresql"):
            raise VectorStoreError(
                f"AISAC_VECTOR_URL={self._where}: the PostgreSQL vector store needs a postgresql+psycopg:// URL"
            )
        # no pool_pre_ping: a dropped connection is retried once in _run instead of pinging before every transaction
        self.engine = engine or create_engine(url, pool_size=5, max_overflow=10)
        self._dims: dict[str, int] = {}
        self._lock = threading.RLock()
        self._has_schema = True
        try:
            with self.engine.begin() as c:
                cur = c.connection.driver_connection.cursor()  # type: ignore[union-attr]  # open inside begin()
                if read_only:
                    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.collection",))
                    row = cur.fetchone()
                    self._has_schema = bool(row and row[0])
                    return
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
                cur.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
                if cur.fetchone() is None:
                    cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
                    if cur.fetchone() is None:
                        raise VectorStoreError(
                            f"the PostgreSQL server of {self._where} has no pgvector extension: install it on "
                            "the server (https://github.com/pgvector/pgvector#installation), or keep the vectors "
                            "in Qdrant (AISAC_VECTOR_BACKEND=qdrant with AISAC_QDRANT_URL)"
                        )
                    cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
                cur.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
                cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.collection (name text PRIMARY KEY, dim int NOT NULL)")
        except VectorStoreError:
            self.engine.dispose()
            raise
        except SQLAlchemyError as exc:
            self.engine.dispose()
            raise VectorStoreError(
                f"cannot open the PostgreSQL vector store {self._where}: {str(exc).splitlines()[0]}. The server "
                "must be reachable, and the role needs CREATE on the database the first time (the vector "
                "extension and the aisac_vectors schema)."
            ) from exc

    # -- helpers -----------------------------------------------------------------------------------

    @staticmethod
    def _tables(name: str) -> tuple[str, str]:
        if not _NAME.match(name):
            raise VectorStoreError(f"collection name {name!r}: use lower-case letters, digits and _")
        return f"{SCHEMA}.p_{name}", f"{SCHEMA}.t_{name}"

    def _run(self, fn: Any) -> Any:
        """``fn(cursor)`` in one transaction; a database error becomes a :class:`VectorStoreError`.

        A pooled connection the server dropped (a restart, an idle timeout) is found when it is used, and the
        transaction is run once more on a new connection (SQLAlchemy's "optimistic" disconnect handling): every
        ``fn`` of this store is one transaction whose repetition gives the same state (reads; upserts and deletes by
        id or condition; DDL under ``IF [NOT] EXISTS``). This replaces ``pool_pre_ping``, which sent one round trip
        more before each of the ~11 transactions of a hybrid search (docs/retrieval.md, "Cost")."""
        for attempt in (1, 2):
            try:
                with self.engine.begin() as c:
                    dbapi = c.connection.driver_connection
                    cur = dbapi.cursor()  # type: ignore[union-attr]  # open inside begin()
                    try:
                        return fn(cur)
                    except Exception:
                        if attempt == 1 and (getattr(dbapi, "broken", False) or getattr(dbapi, "closed", False)):
                            c.connection.invalidate()  # no rollback on a dead connection
                            raise _Dropped from None
                        raise
            except _Dropped:
                self.engine.dispose()  # the server went away: its other pooled connections are dead too
                continue
            except SQLAlchemyError as exc:
                if attempt == 1 and getattr(exc, "connection_invalidated", False):
                    continue
                raise VectorStoreError(
                    f"the PostgreSQL vector store {self._where} failed: {str(exc).splitlines()[0]}"
                ) from exc
            except Exception as exc:
                if type(exc).__module__.startswith("psycopg"):
                    raise VectorStoreError(f"the PostgreSQL vector store {self._where} failed: {exc}") from exc
                raise
        raise VectorStoreError(f"the PostgreSQL vector store {self._where} failed: the connection was lost twice")

    def _check(self, name: str) -> tuple[str, str]:
        if name not in self._dims:
            raise VectorStoreError(f"collection {name!r} is not open; call ensure_collection first")
        return self._tables(name)

    @staticmethod
    def _where_sql(conds: list[Cond] | None, ids: list[str] | None, alias: str = "") -> tuple[str, list[Any]]:
        a = f"{alias}." if alias else ""
        parts: list[str] = []
        args: list[Any] = []
        for c in conds or []:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", c.key):
                raise VectorStoreError(f"payload field {c.key!r}: use letters, digits and _")
            if c.eq is not None:
                parts.append(f"({a}payload->'{c.key}') @> %s::jsonb")
                args.append(json.dumps(c.eq))
            elif c.any is not None:
                parts.append(f"({a}payload->'{c.key}') ?| %s::text[]")
                args.append([str(x) for x in c.any])
            else:
                expr = _num(c.key).replace("payload", f"{a}payload")
                if c.gte is not None:
                    parts.append(f"{expr} >= %s")
                    args.append(float(c.gte))
                if c.lte is not None:
                    parts.append(f"{expr} <= %s")
                    args.append(float(c.lte))
        if ids is not None:
            parts.append(f"{a}id = ANY(%s::uuid[])")
            args.append(list(ids))
        return (" AND ".join(parts) if parts else "TRUE"), args

    # -- the port ----------------------------------------------------------------------------------

    def ensure_collection(self, name: str, dim: int) -> bool:
        pts, terms = self._tables(name)
        short = f"p_{name}"

        def go(cur: Any) -> bool:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
            cur.execute(f"SELECT dim FROM {SCHEMA}.collection WHERE name = %s", (name,))
            row = cur.fetchone()
            if row is not None and int(row[0]) == dim:
                # a collection made by an older release lacks the indexes of payload fields added since
                for f in KEYWORD_FIELDS:
                    cur.execute(f"CREATE INDEX IF NOT EXISTS {short}_k_{f} ON {pts} USING gin ((payload->'{f}'))")
                for f in INTEGER_FIELDS:
                    cur.execute(f"CREATE INDEX IF NOT EXISTS {short}_i_{f} ON {pts} ({_num(f)})")
                return False
            cur.execute(f"DROP TABLE IF EXISTS {terms}")
            cur.execute(f"DROP TABLE IF EXISTS {pts}")
            cur.execute(
                f"CREATE TABLE {pts} (id uuid PRIMARY KEY, dense vector({int(dim)}) NOT NULL, "
                "payload jsonb NOT NULL DEFAULT '{}'::jsonb)"
            )
            cur.execute(f"CREATE INDEX {short}_hnsw ON {pts} USING hnsw (dense vector_cosine_ops)")
            for f in KEYWORD_FIELDS:
                cur.execute(f"CREATE INDEX {short}_k_{f} ON {pts} USING gin ((payload->'{f}'))")
            for f in INTEGER_FIELDS:
                cur.execute(f"CREATE INDEX {short}_i_{f} ON {pts} ({_num(f)})")
            cur.execute(
                f"CREATE TABLE {terms} (term int NOT NULL, id uuid NOT NULL REFERENCES {pts}(id) ON DELETE CASCADE, "
                "weight real NOT NULL, PRIMARY KEY (term, id))"
            )
            cur.execute(f"CREATE INDEX t_{name}_id ON {terms} (id)")
            cur.execute(
                f"INSERT INTO {SCHEMA}.collection (name, dim) VALUES (%s, %s) "
                "ON CONFLICT (name) DO UPDATE SET dim = EXCLUDED.dim",
                (name, dim),
            )
            return True

        with self._lock:
            created = bool(self._run(go))
            self._dims[name] = dim
            return created

    def upsert(self, name: str, points: list[VectorPoint]) -> None:
        pts, terms = self._check(name)
        if not points:
            return
        dim = self._dims[name]
        for p in points:
            if len(p.dense) != dim:
                raise VectorStoreError(
                    f"point {p.id}: dense vector of {len(p.dense)} values, collection {name!r} has {dim}"
                )

        latest = {p.id: p for p in points}  # the last of duplicate ids wins
        ordered = [latest[i] for i in sorted(latest)]  # one lock order for concurrent writers

        def go(cur: Any) -> None:
            # the point rows first, in id order: their row locks make a concurrent upsert of the same ids (two
            # replicas embedding one pair) wait, and its DELETE below then sees this transaction's postings
            cur.executemany(
                f"INSERT INTO {pts} (id, dense, payload) VALUES (%s, %s::vector, %s::jsonb) "
                "ON CONFLICT (id) DO UPDATE SET dense = EXCLUDED.dense, payload = EXCLUDED.payload",
                [(p.id, _vec(p.dense), json.dumps(p.payload)) for p in ordered],
            )
            cur.execute(f"DELETE FROM {terms} WHERE id = ANY(%s::uuid[])", (list(latest),))
            with cur.copy(f"COPY {terms} (term, id, weight) FROM STDIN") as cp:
                for p in ordered:
                    weights: dict[int, float] = {}
                    for i, v in zip(p.sparse_indices, p.sparse_values):
                        weights[int(i)] = float(v)
                    for t, w in weights.items():
                        cp.write_row((t, p.id, w))

        self._run(go)

    def delete(self, name: str, conds: list[Cond]) -> None:
        pts, _ = self._check(name)
        if not conds:
            raise ValueError("refusing to delete without a condition")
        where, args = self._where_sql(conds, None)
        self._run(lambda cur: cur.execute(f"DELETE FROM {pts} WHERE {where}", args))

    def _dense(
        self, cur: Any, pts: str, dense: list[float], limit: int, where: str, args: list[Any], exact: bool
    ) -> list[tuple[str, float]]:
        if exact:
            cur.execute("SET LOCAL enable_indexscan = off")
        else:
            cur.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(int(limit), 1000))}")
        q = _vec(dense)
        tie = ", id" if exact else ""  # the HNSW index serves an ORDER BY on the distance alone
        cur.execute(
            f"SELECT id::text, 1 - (dense <=> %s::vector) FROM {pts} WHERE {where} "
            f"ORDER BY dense <=> %s::vector{tie} LIMIT %s",
            [q, *args, q, int(limit)],
        )
        return [(str(r[0]), float(r[1])) for r in cur.fetchall()]

    def _sparse(
        self,
        cur: Any,
        pts: str,
        terms: str,
        sparse: tuple[list[int], list[float]],
        limit: int,
        conds: list[Cond] | None,
        ids: list[str] | None,
    ) -> list[tuple[str, float]]:
        """The ``limit`` best points by BM25 (Qdrant's IDF modifier, module docstring) in one statement.

        The postings of the query terms are read through the primary key ``(term, id)`` (``term = ANY``; once, for
        both the document frequencies and the scores, when no ``ids`` are given; with ``ids``, the scores read only
        those points' postings), the collection size is counted in the same statement, and points with payload
        ``conds`` are a semi-join on the payload table. The CTEs are ``MATERIALIZED``: inlined, the planner
        re-counted the collection once per posting. (The earlier three statements joined every posting of the
        collection to the query terms by a sequential scan and restricted to ``ids`` after summing: 45-65 ms of
        server time per call at 10,240 chunks under load; docs/retrieval.md, "Cost".)"""
        qw: dict[int, float] = {}
        for i, v in zip(sparse[0], sparse[1]):
            qw[int(i)] = qw.get(int(i), 0.0) + float(v)
        idx = sorted(qw)
        where, args = self._where_sql(conds, None, "p")
        # points with payload conditions: a semi-join, so the planner may start from the payload indexes
        join = f" AND t.id IN (SELECT p.id FROM {pts} p WHERE {where})" if conds else ""
        if ids is None:
            # one read of the query terms' postings: their document frequencies and the scores both come from it
            post = f"post AS MATERIALIZED (SELECT term, id, weight FROM {terms} WHERE term = ANY(%s::int[])), "
            df_from, scored, only, post_args = "post", "post t", " WHERE TRUE", [idx]
            where_args: list[Any] = []
        else:
            # the document frequencies need every posting of the terms; the scores only the ids' (primary key)
            post, df_from, scored = "", f"{terms} WHERE term = ANY(%s::int[])", f"{terms} t"
            only, post_args, where_args = (
                " WHERE t.term = ANY(%s::int[]) AND t.id = ANY(%s::uuid[])",
                [],
                [idx, list(ids)],
            )
        # idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5) + 1), in float8 like Python's math.log of the same operands
        cur.execute(
            "WITH q AS (SELECT * FROM unnest(%s::int[], %s::float8[]) AS q(term, w)), "
            f"{post}df AS MATERIALIZED (SELECT term, count(*)::float8 AS df FROM {df_from} GROUP BY term), "
            f"n AS MATERIALIZED (SELECT count(*)::float8 AS n FROM {pts}), "
            "tw AS MATERIALIZED (SELECT df.term, q.w * ln((n.n - df.df + 0.5) / (df.df + 0.5) + 1) AS w "
            "FROM df JOIN q ON q.term = df.term CROSS JOIN n) "
            f"SELECT t.id::text, sum(t.weight * tw.w) AS score FROM {scored} JOIN tw ON tw.term = t.term"
            f"{only}{join} GROUP BY t.id ORDER BY score DESC, t.id LIMIT %s",
            [idx, [qw[t] for t in idx], *post_args, *([] if ids is None else [idx]), *where_args, *args, int(limit)],
        )
        return [(str(r[0]), float(r[1])) for r in cur.fetchall()]

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
        pts, terms = self._check(name)
        if ids is not None and not ids:
            return []
        has_sparse = sparse is not None and len(sparse[0]) > 0
        where, args = self._where_sql(conds, ids, "p")
        exact = bool(conds) or ids is not None

        def go(cur: Any) -> list[tuple[str, float]]:
            if mode == "sparse":
                return self._sparse(cur, pts, terms, sparse, limit, conds, ids) if has_sparse else []  # type: ignore[arg-type]  # has_sparse: not None
            if dense is None:
                raise VectorStoreError(f"a {mode} query needs a dense vector")
            if mode == "dense" or not has_sparse:
                return self._dense(cur, f"{pts} p", dense, limit, where, args, exact)
            lists = [
                self._dense(cur, f"{pts} p", dense, prefetch_limit, where, args, exact),
                self._sparse(cur, pts, terms, sparse, prefetch_limit, conds, ids),  # type: ignore[arg-type]  # has_sparse: not None
            ]
            w = weights or (1.0, 1.0)
            fused: dict[str, float] = {}
            for wi, lst in zip(w, lists):
                for rank, (pid, _s) in enumerate(lst):
                    fused[pid] = fused.get(pid, 0.0) + wi / (rrf_k + rank)
            return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]

        scored = self._run(go)
        if not with_payload or not scored:
            return [VectorHit(pid, s, {}) for pid, s in scored]
        payloads = {h.id: h.payload for h in self.retrieve(name, [pid for pid, _ in scored])}
        return [VectorHit(pid, s, payloads.get(pid, {})) for pid, s in scored]

    def retrieve(self, name: str, ids: list[str]) -> list[VectorHit]:
        pts, _ = self._check(name)
        if not ids:
            return []

        def go(cur: Any) -> list[VectorHit]:
            cur.execute(f"SELECT id::text, payload FROM {pts} WHERE id = ANY(%s::uuid[])", (list(ids),))
            return [VectorHit(str(r[0]), 0.0, dict(r[1] or {})) for r in cur.fetchall()]

        return list(self._run(go))

    def dense_vectors(self, name: str, ids: list[str]) -> dict[str, list[float]]:
        pts, _ = self._check(name)
        if not ids:
            return {}

        def go(cur: Any) -> dict[str, list[float]]:
            # pgvector's text form is "[x,y,...]", which is JSON
            cur.execute(f"SELECT id::text, dense::text FROM {pts} WHERE id = ANY(%s::uuid[])", (list(ids),))
            return {str(r[0]): [float(x) for x in json.loads(r[1])] for r in cur.fetchall()}

        return dict(self._run(go))

    def count(self, name: str, conds: list[Cond] | None = None) -> int:
        pts, _ = self._check(name)
        where, args = self._where_sql(conds, None)

        def go(cur: Any) -> int:
            cur.execute(f"SELECT count(*) FROM {pts} WHERE {where}", args)
            return int(cur.fetchone()[0])

        return int(self._run(go))

    def scroll_ids(
        self, name: str, conds: list[Cond] | None = None, keys: list[str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        pts, _ = self._check(name)
        where, args = self._where_sql(conds, None)
        after = "00000000-0000-0000-0000-000000000000"
        while True:

            def go(cur: Any, after: str = after) -> list[tuple[str, dict[str, Any]]]:
                sel = (
                    "payload"
                    if keys is None
                    else "(SELECT jsonb_object_agg(k, payload->k) FROM unnest(%s::text[]) k WHERE payload ? k)"
                )
                cur.execute(
                    f"SELECT id::text, {sel} FROM {pts} WHERE {where} AND id > %s::uuid ORDER BY id LIMIT 1000",
                    [*([] if keys is None else [list(keys)]), *args, after],
                )
                return [(str(r[0]), dict(r[1] or {})) for r in cur.fetchall()]

            page: list[tuple[str, dict[str, Any]]] = self._run(go)
            yield from page
            if len(page) < 1000:
                break
            after = page[-1][0]

    def existing_dim(self, name: str) -> int | None:
        self._tables(name)
        if not self._has_schema:  # opened read-only on a database no vector was ever written to
            return None

        def go(cur: Any) -> int | None:
            cur.execute(f"SELECT dim FROM {SCHEMA}.collection WHERE name = %s", (name,))
            row = cur.fetchone()
            return None if row is None else int(row[0])

        dim: int | None = self._run(go)
        if dim is not None:
            self._dims[name] = dim
        return dim

    def clear(self, name: str) -> None:
        """Delete every point of collection ``name`` (kept, empty)."""
        pts, terms = self._check(name)
        self._run(lambda cur: cur.execute(f"TRUNCATE {pts}, {terms}"))

    def scroll_points(self, name: str, batch: int = 256) -> Iterator[list[VectorPoint]]:
        pts, terms = self._check(name)
        after = "00000000-0000-0000-0000-000000000000"
        while True:

            def go(cur: Any, after: str = after) -> list[VectorPoint]:
                cur.execute(
                    f"SELECT id::text, dense::text, payload FROM {pts} WHERE id > %s::uuid ORDER BY id LIMIT %s",
                    (after, batch),
                )
                rows = cur.fetchall()
                cur.execute(
                    f"SELECT id::text, array_agg(term ORDER BY term), array_agg(weight ORDER BY term) FROM {terms} "
                    "WHERE id = ANY(%s::uuid[]) GROUP BY id",
                    ([r[0] for r in rows],),
                )
                sparse = {r[0]: (list(r[1]), list(r[2])) for r in cur.fetchall()}
                return [
                    VectorPoint(
                        str(r[0]),
                        [float(x) for x in json.loads(r[1])],
                        [int(t) for t in sparse.get(r[0], ([], []))[0]],
                        [float(w) for w in sparse.get(r[0], ([], []))[1]],
                        dict(r[2] or {}),
                    )
                    for r in rows
                ]

            page: list[VectorPoint] = self._run(go)
            if page:
                yield page
            if len(page) < batch:
                break
            after = page[-1].id

    def flush(self) -> None:  # every write commits its transaction
        return None

    def close(self) -> None:
        self.engine.dispose()


def open_pg_vectors(settings: Settings, *, read_only: bool = False) -> PgVectorStore:
    """The ``postgres`` vector backend of ``settings``: the database ``settings.resolved_vector_url``
    (``AISAC_VECTOR_URL``, or the SQL store's own with ``AISAC_VECTOR_URL=sql``). Raises :class:`VectorStoreError`
    when that is not a PostgreSQL database (e.g. ``sql`` with the SQLite store) or cannot be opened; ``read_only``:
    see :class:`PgVectorStore`."""
    url = settings.resolved_vector_url
    if url is None or not url.startswith("postgresql"):
        raise VectorStoreError(
            "the postgres vector backend needs a PostgreSQL database: set AISAC_VECTOR_URL to a "
            "postgresql+psycopg:// URL, or AISAC_VECTOR_URL=sql with a PostgreSQL AISAC_SQL_URL (the SQL store is "
            f"{'SQLite' if url and url.startswith('sqlite') else 'unset'})"
        )
    return PgVectorStore(url, read_only=read_only)
