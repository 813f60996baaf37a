"""The shared store on real files: SQLite settings and locking, the vector-store interface on both Qdrant
backends (Qdrant Edge and qdrant-client local mode), and the provenance rows written to the SQL store."""

from __future__ import annotations

import hashlib
import os
import random
import re
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from aisac_core.hashing import dumps
from aisac_core.store.pgvectors import PgVectorStore
from aisac_core.store.sql import StoreError, get_meta, make_engine, set_meta
from aisac_core.store.tables import StoreMeta, TraceEvent
from aisac_core.store.vectors import (
    Cond,
    EdgeVectorStore,
    QdrantClientVectorStore,
    VectorPoint,
    VectorStore,
    VectorStoreError,
    open_vector_store,
)

pytestmark = pytest.mark.both_engines

# ---- SQLite ------------------------------------------------------------------------------------------


@pytest.fixture
def db_url(tmp_path: Path, sql_url: str | None) -> str:
    return sql_url or f"sqlite:///{tmp_path / 'aisac.db'}"


@pytest.mark.sqlite_only
def test_sqlite_pragmas_in_force_on_every_connection(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        # two DBAPI connections open at once: each went through the connect listener
        raws = [engine.raw_connection(), engine.raw_connection()]
        for raw in raws:
            cur = raw.cursor()
            assert cur.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert cur.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
            assert cur.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
            assert raw.dbapi_connection.isolation_level is None
            cur.close()
        for raw in raws:
            raw.close()
        with engine.connect() as conn:  # and through SQLAlchemy
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
        # WAL is a property of the file: a plain sqlite3 connection sees it too
        raw = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        raw.close()
    finally:
        engine.dispose()


@pytest.mark.sqlite_only
def test_transactions_begin_immediate(db_url: str) -> None:
    """A session that has only read already holds the write lock (BEGIN IMMEDIATE), so another writer
    waits; with pysqlite's deferred default, the read would take no lock and the write would go through."""
    engine = make_engine(db_url)
    set_meta(engine, "k", "v")
    path = db_url.removeprefix("sqlite:///")
    try:
        with Session(engine) as s:
            assert s.exec(select(StoreMeta)).all()  # a read only
            other = sqlite3.connect(path, timeout=0.2, isolation_level=None)
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("UPDATE storemeta SET value = 'w' WHERE key = 'k'")
            s.rollback()
        other.execute("UPDATE storemeta SET value = 'w' WHERE key = 'k'")  # lock released
        other.close()
        assert get_meta(engine, "k") == "w"
    finally:
        engine.dispose()


def test_concurrent_read_modify_write_loses_no_update(db_url: str) -> None:
    """4 workers (each with its own engine, as separate processes would have) x 100 increments of one
    row through sqlmodel Sessions: all 400 survive. The pause between read and write invites the
    interleaving that loses updates under deferred transactions (SQLite) or READ COMMITTED without a row lock
    (PostgreSQL: the read locks its row, ``SELECT ... FOR UPDATE``; SQLite ignores the clause and relies on
    ``BEGIN IMMEDIATE``)."""
    setup = make_engine(db_url)
    set_meta(setup, "counter", "0")
    setup.dispose()
    workers, increments = 4, 100
    errors: list[BaseException] = []
    start = threading.Barrier(workers)

    def work() -> None:
        engine = make_engine(db_url)
        try:
            start.wait()
            for _ in range(increments):
                with Session(engine) as s:
                    row = s.get(StoreMeta, "counter", with_for_update=True)
                    assert row is not None
                    value = int(row.value)
                    time.sleep(0.0002)
                    row.value = str(value + 1)
                    s.add(row)
                    s.commit()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    check = make_engine(db_url)
    assert get_meta(check, "counter") == str(workers * increments)
    check.dispose()


def test_corrupt_sqlite_file_gives_store_error(tmp_path: Path) -> None:
    db = tmp_path / "aisac.db"
    db.write_bytes(b"this is not a database, just garbage bytes " * 100 + os.urandom(4096))
    with pytest.raises(StoreError) as ei:
        make_engine(f"sqlite:///{db}")
    msg = str(ei.value)
    assert str(db) in msg and "move it aside" in msg


@pytest.mark.parametrize(
    "url,expect",
    [
        ("not a url", "is not a SQLAlchemy URL"),
        ("postgresql+pg8000://u:s3cretpw@127.0.0.1:1/db", "no database driver for it is installed"),
        ("nosuchdb://u:s3cretpw@h/db", "no database driver for it is installed"),
        ("postgresql+psycopg://u:s3cretpw@127.0.0.1:1/db", "Check that the database server runs"),
    ],
)
def test_bad_sql_urls_are_one_clear_store_error(url: str, expect: str) -> None:
    """A wrong URL, a driver that is not installed, a server that is not there: a StoreError that says what to do,
    never the password."""
    with pytest.raises(StoreError, match=expect) as info:
        make_engine(url)
    assert "s3cretpw" not in str(info.value)


@pytest.mark.sqlite_only
def test_corrupt_store_through_core(settings) -> None:  # noqa: ANN001
    from aisac_core.context import AppContext

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = settings.data_dir / "aisac.db"
    db.write_bytes(os.urandom(16384))
    core = AppContext(settings)
    with pytest.raises(StoreError, match=re.escape(str(db))):
        _ = core.engine


def test_meta_and_canonical_json(db_url: str) -> None:
    engine = make_engine(db_url)
    assert get_meta(engine, "missing") is None
    set_meta(engine, "schema", "1")
    set_meta(engine, "schema", "2")
    assert get_meta(engine, "schema") == "2"
    engine.dispose()
    assert dumps({"b": 1, "a": "é"}) == '{"a":"é","b":1}'


# ---- vector stores (both backends) -------------------------------------------------------------------

BACKENDS = ["edge", "qdrant", "postgres"]
DIM = 8
#: postgres backend: the database standing in for each store folder, and the cluster (set by ``backend``)
_PG: dict[Any, Any] = {}


def _open(backend: str, root: Path) -> VectorStore:
    if backend == "postgres":  # one database per "folder": reopening the folder reopens the database
        if root not in _PG:
            _PG[root] = _PG["cluster"].create_database()
        return PgVectorStore(_PG[root])
    return EdgeVectorStore(root) if backend == "edge" else QdrantClientVectorStore(path=root)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        _PG["cluster"] = request.getfixturevalue("pgvector_server")
    return request.param


@pytest.fixture
def vs(backend: str, tmp_path: Path):  # noqa: ANN201
    store = _open(backend, tmp_path / "vs")
    store.ensure_collection("c", DIM)
    yield store
    store.close()


def _unit(i: int, dim: int = DIM) -> list[float]:
    v = [0.0] * dim
    v[i % dim] = 1.0
    return v


def _pid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


# Five points: dense axis i, sparse terms, payload with keyword and integer fields.
DOCS = {
    "a": dict(axis=0, terms=[101, 102], page=1, file_type="pdf", section_covers="methods"),
    "b": dict(axis=1, terms=[102, 103], page=2, file_type="pdf", section_covers="results"),
    "c": dict(axis=2, terms=[104], page=3, file_type="md", section_covers="results"),
    "d": dict(axis=3, terms=[105, 106], page=4, file_type="html", section_covers="other"),
    "e": dict(axis=4, terms=[102, 107], page=5, file_type="md", section_covers="methods"),
}


def _points() -> list[VectorPoint]:
    return [
        VectorPoint(
            id=_pid(k),
            dense=_unit(d["axis"]),
            sparse_indices=d["terms"],
            sparse_values=[1.0] * len(d["terms"]),
            payload={
                "doc_id": k,
                "page": d["page"],
                "file_type": d["file_type"],
                "section_covers": d["section_covers"],
                "text": f"doc {k}",
            },
        )
        for k, d in DOCS.items()
    ]


def _docs(hits) -> list[str]:  # noqa: ANN001
    return [h.payload["doc_id"] for h in hits]


def test_ensure_collection_create_reopen_recreate(backend: str, tmp_path: Path) -> None:
    root = tmp_path / "vs"
    s = _open(backend, root)
    assert s.ensure_collection("c", DIM) is True  # created
    assert s.ensure_collection("c", DIM) is False  # already there
    s.upsert("c", _points())
    s.flush()
    s.close()
    s = _open(backend, root)
    assert s.ensure_collection("c", DIM) is False  # reopened, not recreated
    assert s.count("c") == len(DOCS)
    assert _docs(s.query("c", dense=_unit(2), sparse=None, limit=1, mode="dense")) == ["c"]
    assert s.ensure_collection("c", 2 * DIM) is True  # another dimension: recreated, empty
    assert s.count("c") == 0
    s.upsert("c", [VectorPoint(_pid("x"), _unit(9, 2 * DIM), [1], [1.0], {"doc_id": "x"})])
    assert _docs(s.query("c", dense=_unit(9, 2 * DIM), sparse=None, limit=3, mode="dense")) == ["x"]
    s.close()
    s = _open(backend, root)  # the new dimension persists too
    assert s.ensure_collection("c", 2 * DIM) is False
    assert s.count("c") == 1
    s.close()


def test_persistence_across_close_and_reopen(backend: str, tmp_path: Path) -> None:
    root = tmp_path / "vs"
    s = _open(backend, root)
    s.ensure_collection("c", DIM)
    s.upsert("c", _points())
    s.delete("c", [Cond("doc_id", eq="d")])
    s.close()
    s = _open(backend, root)
    s.ensure_collection("c", DIM)
    assert s.count("c") == len(DOCS) - 1
    assert {h.payload["doc_id"] for h in s.retrieve("c", [_pid(k) for k in DOCS])} == set(DOCS) - {"d"}
    assert _docs(s.query("c", dense=None, sparse=([104], [1.0]), limit=3, mode="sparse")) == ["c"]
    s.close()


def test_dense_sparse_hybrid_queries(vs: VectorStore) -> None:
    vs.upsert("c", _points())
    # dense: nearest by cosine, best first
    q = [0.9, 0.3, 0.1, 0, 0, 0, 0, 0]
    dense = vs.query("c", dense=q, sparse=None, limit=3, mode="dense")
    assert _docs(dense) == ["a", "b", "c"]
    assert dense[0].score > dense[1].score > dense[2].score
    assert abs(dense[0].score - 0.9 / (0.91**0.5)) < 1e-4
    # sparse: only points sharing a term
    sparse = vs.query("c", dense=None, sparse=([104], [1.0]), limit=5, mode="sparse")
    assert _docs(sparse) == ["c"]
    # IDF: term 102 occurs in three points, 104 in one; every stored weight is 1.0, so without the IDF
    # modifier all four points would tie: with it, the point holding the rare term comes first
    idf = vs.query("c", dense=None, sparse=([102, 104], [1.0, 1.0]), limit=5, mode="sparse")
    assert _docs(idf)[0] == "c" and set(_docs(idf)) == {"a", "b", "c", "e"}
    assert idf[0].score > 1.2 * idf[1].score
    # no shared term: nothing, in sparse mode
    assert vs.query("c", dense=None, sparse=([999], [1.0]), limit=5, mode="sparse") == []
    assert vs.query("c", dense=None, sparse=([], []), limit=5, mode="sparse") == []
    # hybrid: RRF (k=60, 0-based ranks in Qdrant) of both lists. "d" is first in the dense list only;
    # "c" is first in the sparse list and also somewhere in the dense one, so it leads
    hyb = vs.query("c", dense=_unit(3), sparse=([104], [1.0]), limit=5, mode="hybrid")
    assert _docs(hyb)[:2] == ["c", "d"]
    assert hyb[1].score == pytest.approx(1 / 60, rel=1e-4)
    assert 1 / 60 + 1 / 65 <= hyb[0].score * (1 + 1e-4) and hyb[0].score <= (1 / 60 + 1 / 61) * (1 + 1e-4)
    # first in both lists
    both = vs.query("c", dense=_unit(2), sparse=([104], [1.0]), limit=5, mode="hybrid")
    assert _docs(both)[0] == "c" and both[0].score == pytest.approx(2 / 60, rel=1e-4)
    # hybrid with an empty sparse query falls back to dense
    assert _docs(vs.query("c", dense=_unit(4), sparse=([], []), limit=1, mode="hybrid")) == ["e"]
    # limit is honoured
    assert len(vs.query("c", dense=q, sparse=([102], [1.0]), limit=2, mode="hybrid")) == 2


def test_filters_eq_any_range(vs: VectorStore) -> None:
    vs.upsert("c", _points())
    q = dict(dense=_unit(0), sparse=([102], [1.0]), limit=10)
    assert sorted(_docs(vs.query("c", **q, conds=[Cond("file_type", eq="md")]))) == ["c", "e"]
    assert _docs(vs.query("c", **q, conds=[Cond("page", eq=2)])) == ["b"]
    assert sorted(_docs(vs.query("c", **q, conds=[Cond("doc_id", any=("a", "d", "zz"))]))) == ["a", "d"]
    assert sorted(_docs(vs.query("c", **q, conds=[Cond("page", gte=2, lte=4)]))) == ["b", "c", "d"]
    assert sorted(_docs(vs.query("c", **q, conds=[Cond("page", gte=4)]))) == ["d", "e"]
    assert sorted(_docs(vs.query("c", **q, conds=[Cond("page", lte=1)]))) == ["a"]
    combined = [Cond("section_covers", any=("methods", "results")), Cond("page", gte=2), Cond("file_type", eq="md")]
    for mode in ("hybrid", "dense", "sparse"):
        got = sorted(_docs(vs.query("c", **q, conds=combined, mode=mode)))
        assert got == (["c", "e"] if mode != "sparse" else ["e"]), mode  # "c" shares no sparse term
    assert vs.count("c", combined) == 2
    assert sorted(p["doc_id"] for _, p in vs.scroll_ids("c", combined)) == ["c", "e"]
    assert vs.query("c", **q, conds=[Cond("file_type", eq="docx")]) == []


def test_query_restricted_to_ids(vs: VectorStore) -> None:
    """``ids`` scores known candidates exactly (hybrid fusion looks up the score a list did not return)."""
    vs.upsert("c", _points())
    ids = [_pid("b"), _pid("c")]
    assert sorted(_docs(vs.query("c", dense=_unit(0), sparse=None, limit=10, mode="dense", ids=ids))) == ["b", "c"]
    got = vs.query("c", dense=None, sparse=([102], [1.0]), limit=10, mode="sparse", ids=[_pid("a"), _pid("c")])
    assert _docs(got) == ["a"]  # "c" has no term 102
    full = {h.id: h.score for h in vs.query("c", dense=None, sparse=([102], [1.0]), limit=10, mode="sparse")}
    assert got[0].score == pytest.approx(full[_pid("a")], rel=1e-5)  # the same score as unrestricted
    both = vs.query(
        "c",
        dense=_unit(1),
        sparse=None,
        limit=10,
        mode="dense",
        ids=[_pid(k) for k in "abc"],
        conds=[Cond("file_type", eq="pdf")],
    )
    assert _docs(both) == ["b", "a"]
    assert vs.query("c", dense=_unit(0), sparse=None, limit=10, mode="dense", ids=[]) == []


def test_postgres_sparse_scores_match_qdrant_edge_on_a_random_corpus(pgvector_server, tmp_path: Path) -> None:  # noqa: ANN001
    """BM25 with Qdrant's IDF modifier, unrestricted, restricted to ids, with payload conditions and both: the same
    points and scores (to float32 rounding) on PostgreSQL as on Qdrant Edge (the reference). Pins the PostgreSQL
    backend's single-statement sparse query (issue 44) against the engine whose scores it reproduces."""
    rng = random.Random(44)
    points = []
    for n in range(200):
        terms = rng.sample(range(1, 60), rng.randint(1, 12))  # small vocabulary: long posting lists, many ties
        points.append(
            VectorPoint(
                id=_pid(f"p{n}"),
                dense=_unit(n),
                sparse_indices=terms,
                sparse_values=[round(rng.uniform(0.2, 2.0), 3) for _ in terms],
                payload={"doc_id": f"d{n % 7}", "page": n % 11, "text": f"point {n}"},
            )
        )
    ref, other = EdgeVectorStore(tmp_path / "ref"), PgVectorStore(pgvector_server.create_database())
    try:
        for store in (ref, other):
            store.ensure_collection("c", DIM)
            store.upsert("c", points)
        ids = [p.id for p in points[::3]] + [_pid("absent")]
        for q in range(6):
            terms = rng.sample(range(1, 70), rng.randint(1, 15))  # terms 60-69 occur nowhere
            sparse = (terms, [round(rng.uniform(0.1, 1.0), 3) for _ in terms])
            for kw in (
                {},
                {"ids": ids},
                {"conds": [Cond("doc_id", any=("d1", "d3"))]},
                {"ids": ids, "conds": [Cond("page", gte=2, lte=8)]},
            ):
                want = {
                    h.id: h.score for h in ref.query("c", dense=None, sparse=sparse, limit=500, mode="sparse", **kw)
                }
                got = {
                    h.id: h.score for h in other.query("c", dense=None, sparse=sparse, limit=500, mode="sparse", **kw)
                }
                assert got.keys() == want.keys(), (q, kw)
                assert all(got[i] == pytest.approx(want[i], rel=1e-5) for i in want), (q, kw)
                top = other.query("c", dense=None, sparse=sparse, limit=20, mode="sparse", with_payload=False, **kw)
                best = sorted(want.values(), reverse=True)[:20]
                assert [h.score for h in top] == pytest.approx(best, rel=1e-5), (q, kw)
    finally:
        ref.close()
        other.close()


def test_postgres_store_survives_a_server_restart(tmp_path: Path) -> None:
    """The pooled connections die with the server; the next call reconnects by itself (one retry, no pre-ping
    round trip before every transaction) and nothing stored is lost. A call while the server is down is a clear
    VectorStoreError."""
    from pg_cluster import PgCluster, PgUnavailable, pgvector_bin

    try:
        cluster = PgCluster.start(pgvector_bin())
    except PgUnavailable as exc:
        pytest.skip(str(exc))
    try:
        store = PgVectorStore(cluster.create_database())
        store.ensure_collection("c", DIM)
        store.upsert("c", _points())
        q = dict(dense=None, sparse=([102], [1.0]), limit=5, mode="sparse")
        before = [(h.id, h.score) for h in store.query("c", **q)]  # type: ignore[arg-type]
        cluster.server_stop()
        cluster.server_start()  # the pooled connection is dead, and nothing has used it yet
        assert [(h.id, h.score) for h in store.query("c", **q)] == before  # type: ignore[arg-type]
        cluster.server_stop()
        cluster.server_start()
        store.upsert("c", _points()[:1])  # a write as the first call after a restart
        assert store.count("c") == len(DOCS)
        cluster.server_stop()
        try:
            with pytest.raises(VectorStoreError, match="PostgreSQL vector store"):
                store.count("c")
        finally:
            cluster.server_start()
        assert store.count("c") == len(DOCS)
        store.close()
    finally:
        cluster.stop()


def test_upsert_replaces_by_id_and_retrieve(vs: VectorStore) -> None:
    vs.upsert("c", _points())
    vs.upsert("c", [VectorPoint(_pid("a"), _unit(7), [300], [1.0], {"doc_id": "a", "page": 9, "text": "new"})])
    assert vs.count("c") == len(DOCS)
    got = vs.retrieve("c", [_pid("a"), _pid("b"), str(uuid.uuid4())])
    assert {h.id: h.payload["doc_id"] for h in got} == {_pid("a"): "a", _pid("b"): "b"}
    a = next(h for h in got if h.id == _pid("a"))
    assert a.payload["text"] == "new" and a.payload["page"] == 9 and a.score == 0.0
    assert _docs(vs.query("c", dense=_unit(7), sparse=None, limit=1, mode="dense")) == ["a"]
    assert vs.retrieve("c", []) == []
    vs.upsert("c", [])  # no-op


def test_dense_vectors_by_id(vs: VectorStore) -> None:
    """The stored dense vectors, by id (the dense feedback of hybrid search reads them); unknown ids left out."""
    vs.upsert("c", _points())
    got = vs.dense_vectors("c", [_pid("b"), _pid("e"), str(uuid.uuid4())])
    assert set(got) == {_pid("b"), _pid("e")}
    assert got[_pid("b")] == pytest.approx(_unit(1)) and got[_pid("e")] == pytest.approx(_unit(4))
    assert vs.dense_vectors("c", []) == {}


def test_delete_by_condition_and_count(vs: VectorStore) -> None:
    vs.upsert("c", _points())
    assert vs.count("c") == 5
    assert vs.count("c", [Cond("file_type", eq="pdf")]) == 2
    vs.delete("c", [Cond("file_type", eq="pdf")])
    assert vs.count("c") == 3
    assert vs.count("c", [Cond("file_type", eq="pdf")]) == 0
    vs.delete("c", [Cond("doc_id", any=("c", "d")), Cond("page", gte=4)])  # all conditions must hold: only d
    assert sorted(p["doc_id"] for _, p in vs.scroll_ids("c")) == ["c", "e"]
    vs.delete("c", [Cond("doc_id", eq="nobody")])
    assert vs.count("c") == 2
    with pytest.raises(ValueError, match="without a condition"):
        vs.delete("c", [])
    assert vs.count("c") == 2


def test_scroll_ids_pages_through_everything(vs: VectorStore) -> None:
    n = 1500  # more than one scroll page of 1000
    pts = [VectorPoint(_pid(f"p{i}"), _unit(i), [i % 50], [1.0], {"doc_id": f"d{i % 7}", "page": i}) for i in range(n)]
    for i in range(0, n, 500):
        vs.upsert("c", pts[i : i + 500])
    ids = [pid for pid, _ in vs.scroll_ids("c")]
    assert len(ids) == n and set(ids) == {p.id for p in pts}
    some = list(vs.scroll_ids("c", [Cond("doc_id", eq="d3")]))
    assert len(some) == sum(1 for i in range(n) if i % 7 == 3)
    assert all(p["doc_id"] == "d3" for _, p in some)
    assert vs.count("c", [Cond("page", gte=500, lte=1499)]) == 1000


def test_second_store_on_a_locked_folder(backend: str, tmp_path: Path) -> None:
    root = tmp_path / "vs"
    first = _open(backend, root)
    first.ensure_collection("c", DIM)
    first.upsert("c", _points())
    if backend == "postgres":  # a database is shared, not locked: a second process sees the first one's points
        second = _open(backend, root)
        assert second.ensure_collection("c", DIM) is False
        assert second.count("c") == len(DOCS)
        second.close()
        first.close()
        return
    with pytest.raises(VectorStoreError) as ei:
        second = _open(backend, root)
        second.ensure_collection("c", DIM)
    msg = str(ei.value)
    assert str(root) in msg
    if backend == "edge":
        assert "in use by another aisac process" in msg
    else:
        assert "locked while another process uses it" in msg
    first.close()
    third = _open(backend, root)  # the lock goes with the first store
    third.ensure_collection("c", DIM)
    assert third.count("c") == len(DOCS)
    third.close()


def test_edge_collection_must_be_opened_first(tmp_path: Path) -> None:
    s = EdgeVectorStore(tmp_path / "vs")
    with pytest.raises(VectorStoreError, match="ensure_collection"):
        s.count("nope")
    s.close()


def test_an_older_edge_collection_gets_the_payload_indexes_added_since(tmp_path: Path) -> None:
    """A collection made by an older release (here: one whose index of ``participant`` and ``ts`` is missing, as
    before the memory scopes) gets them when a writing process opens it; its points stay."""
    import qdrant_edge as qe

    from aisac_core.store.vectors import INTEGER_FIELDS, KEYWORD_FIELDS

    s = EdgeVectorStore(tmp_path / "vs")
    s.ensure_collection("c", DIM)
    shard = s._shards["c"]
    for f in ("participant", "ts"):
        shard.update(qe.UpdateOperation.delete_field_index(f))
    assert not {"participant", "ts"} & set(shard.info().payload_schema)
    s.close()
    again = EdgeVectorStore(tmp_path / "vs")
    assert again.ensure_collection("c", DIM) is False  # kept, not recreated
    assert set(KEYWORD_FIELDS) | set(INTEGER_FIELDS) <= set(again._shards["c"].info().payload_schema)
    again.close()


def test_open_vector_store_backends(tmp_path: Path) -> None:
    e = open_vector_store("edge", root=tmp_path / "e")
    q = open_vector_store("qdrant", root=tmp_path / "q")
    assert isinstance(e, EdgeVectorStore) and isinstance(q, QdrantClientVectorStore)
    e.close()
    q.close()
    with pytest.raises(ValueError, match="unknown vector backend"):
        open_vector_store("faiss", root=tmp_path / "f")


# ---- provenance ----------------------------------------------------------------------------------------


def test_record_tool_call_writes_a_row(db_url: str) -> None:
    from aisac_core.hashing import sha256_json
    from aisac_core.trace.recorder import list_events, record_tool_call

    engine = make_engine(db_url)
    args = {"query": "perovskite", "k": 3, "filters": {"file_type": "pdf"}}
    result = {
        "hits": [
            {"text": "t1", "anchor": {"chunk_id": "c-1", "sha256": "x"}},
            {"text": "t2", "anchor": {"chunk_id": "c-2"}},
            {"nested": [{"anchor": {"chunk_id": "c-1"}}]},
        ]
    }
    ev_id = record_tool_call(
        engine,
        run_id="run-a",
        server="rag",
        tool="rag_search",
        arguments=args,
        result=result,
        status="ok",
        error=None,
        latency_ms=12.34567,
    )
    with Session(engine) as s:
        row = s.get(TraceEvent, ev_id)
        assert row is not None
        assert row.run_id == "run-a" and row.server == "rag" and row.tool == "rag_search" and row.status == "ok"
        assert row.arguments_json == dumps(args)
        assert row.arguments_sha256 == hashlib.sha256(dumps(args).encode()).hexdigest()
        assert row.result_sha256 == sha256_json(result) == hashlib.sha256(dumps(result).encode()).hexdigest()
        assert row.anchor_ids_json == '["c-1","c-2"]'
        assert row.latency_ms == pytest.approx(12.346)
        assert row.error is None and row.created_at is not None
    # a failed call: no result hash, the error kept
    err_id = record_tool_call(
        engine,
        run_id="run-b",
        server="rag",
        tool="rag_search",
        arguments={"k": 0},
        result=None,
        status="tool_error",
        error="k must be an integer from 1 to 100",
        latency_ms=0.5,
    )
    evs = list_events(engine)
    assert [e["id"] for e in evs] == [err_id, ev_id]  # newest first
    assert evs[0]["result_sha256"] is None and evs[0]["status"] == "tool_error"
    assert evs[0]["error"].startswith("k must be") and evs[0]["anchor_ids"] == []
    assert [e["id"] for e in list_events(engine, run_id="run-a")] == [ev_id]
    assert list_events(engine, run_id="run-a")[0]["arguments"] == args
    # oversized arguments are stored truncated, but hashed whole
    big = {"text": "x" * 200_000}
    big_id = record_tool_call(
        engine,
        run_id="run-c",
        server="rag",
        tool="t",
        arguments=big,
        result={"ok": 1},
        status="ok",
        error=None,
        latency_ms=1,
    )
    with Session(engine) as s:
        row = s.get(TraceEvent, big_id)
        assert row is not None and len(row.arguments_json) == 100_000
        assert row.arguments_sha256 == sha256_json(big)
    engine.dispose()


def test_run_assigner_renews_after_idle_gap() -> None:
    from aisac_core.trace.recorder import RunAssigner, new_run_id

    ra = RunAssigner(idle_seconds=1.0)
    r1 = ra.run_for("client-1")
    assert r1.startswith("run-")
    assert ra.run_for("client-1") == r1
    other = ra.run_for("client-2")
    assert other != r1
    # calls closer than the gap keep the run alive, even when the run lasts longer than the gap
    time.sleep(0.6)
    assert ra.run_for("client-1") == r1
    time.sleep(0.6)
    assert ra.run_for("client-1") == r1
    # silence longer than the gap: a new run
    time.sleep(1.3)
    r2 = ra.run_for("client-1")
    assert r2 != r1 and r2.startswith("run-")
    assert ra.run_for("client-1") == r2
    assert len({new_run_id() for _ in range(50)}) == 50


@pytest.mark.sqlite_only
def test_corrupt_store_opened_from_two_threads_never_deadlocks(settings) -> None:  # noqa: ANN001
    """The owner's warm-up thread opens the vectors (and, for a new vector folder, marks every document stale
    through ``engine``) while a tool call's thread opens ``engine`` for its trace event. On a store whose SQL file is
    corrupt, ``engine`` never gets cached, so both threads keep re-entering it: the two must never wait on each other
    (seen as an owner that answered the tool error and then hung recording its trace event, so the host waited
    forever). Each round opens both at once on a new context and must end, with the store error, within seconds."""
    import threading

    from aisac_core.context import AppContext

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "aisac.db").write_bytes(b"not a database " * 200 + os.urandom(2048))
    errors: list[BaseException] = []
    for _ in range(30):
        core = AppContext(settings)
        start = threading.Barrier(3)

        def run(fn, start=start) -> None:  # noqa: ANN001
            start.wait()
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - any other error (a vector folder lock left held) fails below
                errors.append(exc)

        threads = [
            threading.Thread(target=run, args=(core.vectors,), daemon=True),
            threading.Thread(target=run, args=(lambda core=core: core.engine,), daemon=True),
        ]
        for t in threads:
            t.start()
        start.wait()
        for t in threads:
            t.join(20)
        assert not any(t.is_alive() for t in threads), "opening a corrupt store from two threads deadlocked"
        core.close()
    assert errors and all(isinstance(e, StoreError) and "move it aside" in str(e) for e in errors), errors
