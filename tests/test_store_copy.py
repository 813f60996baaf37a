"""``aisac store migrate`` / :func:`aisac_core.store.copy.copy_store`: a store's SQL database copied into another
database (SQLite, real PostgreSQL) serves the same data over the same vectors: the same search hits, memory turns,
facts and trace; refusals (non-empty target, same database, source behind head); the CLI never prints a password."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_settings
from sqlmodel import Session, SQLModel, func, select
from test_migrations import stamped_store

from aisac_core.store.copy import copy_store
from aisac_core.store.sql import StoreError, make_engine
from aisac_core.store.tables import Turn

AISAC = str(Path(sys.executable).parent / "aisac")
QUERIES = ["methods used in the experiment", "results and discussion"]
SECRET = "s3cr3t-Pa55word"


def _open(data_dir: Path, models_dir: Path, embedder, sql_url: str | None = None):
    from aisac_core.context import AppContext

    c = AppContext(make_settings(data_dir, models_dir, sql_url=sql_url), embedder=embedder)
    return c


def _snapshot(core) -> dict:
    """What the store serves: search hits (ids, rounded scores), per-table counts, history, facts, trace."""
    from aisac_core.trace.recorder import list_events

    hits = {q: [h.as_dict() for h in core.rag.search(q, 5).hits] for q in QUERIES}
    with Session(core.engine) as db:
        counts = {t.name: db.exec(select(func.count()).select_from(t)).one() for t in SQLModel.metadata.sorted_tables}
    sessions = core.memory.list_sessions()["sessions"]
    history = {s["session_id"]: core.memory.get_history(s["session_id"])["turns"] for s in sessions}
    events = [{k: v for k, v in e.items() if k != "latency_ms"} for e in list_events(core.engine, limit=100)]
    return {
        "hits": hits,
        "counts": counts,
        "sessions": sessions,
        "history": history,
        "facts": {k: v for k, v in core.memory.fact_timeline("sample A").items() if k != "as_of"},
        "events": events,
    }


@pytest.fixture(scope="module")
def source_store(tmp_path_factory: pytest.TempPathFactory, models_dir: Path, corpus: Path, shared_embedder):
    """A store with rows in many tables: indexed corpus (documents, contents, job), memory (session, turns, a
    dialogue pair), facts (one superseded), trace events. Yields (data_dir, snapshot). Tests only read it."""
    from aisac_core.trace.recorder import record_tool_call

    data_dir = tmp_path_factory.mktemp("copy-src") / "store"
    core = _open(data_dir, models_dir, shared_embedder)
    try:
        core.rag.indexer.run([corpus])
        sid = core.memory.start_session(title="thread", project="p")["session_id"]
        core.memory.add_turn(sid, "user", "What did the methods section use?")
        core.memory.add_turn(sid, "assistant", "A calorimeter, per the methods.")
        core.memory.record_fact("sample A", "melting point", "412 K", valid_at="2024-01-01T00:00:00Z")
        core.memory.record_fact("sample A", "melting point", "410 K", valid_at="2025-06-01T12:30:00+02:00")
        for i in range(3):
            record_tool_call(
                core.engine,
                run_id="run-1",
                server="rag",
                tool="rag_search",
                arguments={"q": i},
                result={"hits": []},
                status="ok",
                error=None,
                latency_ms=1.5,
            )
        snap = _snapshot(core)
    finally:
        core.close()
    assert all(snap["hits"].values()) and snap["counts"]["document"] and snap["counts"]["turn"] == 2
    assert snap["counts"]["fact"] == 2 and snap["counts"]["traceevent"] == 3
    return data_dir, snap


def _check_copy(source_store, models_dir: Path, embedder, target: str) -> None:
    data_dir, snap = source_store
    src = make_engine(f"sqlite:///{data_dir / 'aisac.db'}")
    seen: list[tuple[str, int, int]] = []
    try:
        res = copy_store(src, target, batch=2, progress=lambda *a: seen.append(a))
    finally:
        src.dispose()
    assert res["tables"] == snap["counts"] and res["rows"] == sum(snap["counts"].values())
    assert "alembic_version" not in res["tables"] and SECRET not in json.dumps(res)
    assert ("turn", 2, 2) in seen and ("turn", 0, 2) in seen
    core = _open(data_dir, models_dir, embedder, sql_url=target)
    try:
        assert _snapshot(core) == snap  # same hits over the same vectors, same rows, same times
        sid = snap["sessions"][0]["session_id"]
        new = core.memory.add_turn(sid, "user", "a turn written after the move")
        assert new["turn_id"] > max(t["turn_id"] for t in snap["history"][sid])  # ids continue past the copy
        with Session(core.engine) as db:
            assert all(t.created_at is not None for t in db.exec(select(Turn)).all())
    finally:
        core.close()


def test_sqlite_to_sqlite(source_store, models_dir: Path, shared_embedder, tmp_path: Path) -> None:
    target = tmp_path / "copy.db"
    _check_copy(source_store, models_dir, shared_embedder, f"sqlite:///{target}")
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)


@pytest.fixture
def pg_target(pg_server) -> str:
    """A fresh PostgreSQL database's URL, with a password (the test cluster trusts local logins, never asks for it)."""
    return pg_server.create_database().replace("//aisac@", f"//aisac:{SECRET}@")


def test_sqlite_to_postgresql(source_store, models_dir: Path, shared_embedder, pg_target: str, tmp_path: Path) -> None:
    _check_copy(source_store, models_dir, shared_embedder, pg_target)
    back = make_engine(pg_target)  # and back: PostgreSQL (read in one REPEATABLE READ snapshot) -> SQLite
    try:
        res = copy_store(back, f"sqlite:///{tmp_path / 'back.db'}", batch=3)
        with pytest.raises(StoreError, match="source store itself"):  # another name of the same server + database
            copy_store(back, pg_target.replace("@127.0.0.1:", "@localhost:"), replace=True)
    finally:
        back.dispose()
    counts = source_store[1]["counts"]
    assert res["tables"] == {**counts, "turn": counts["turn"] + 1} and SECRET not in json.dumps(res)
    assert res["source"].startswith("postgresql+psycopg://aisac:***@")


def test_refusals(source_store, tmp_path: Path) -> None:
    data_dir, snap = source_store
    db = data_dir / "aisac.db"
    src = make_engine(f"sqlite:///{db}")
    try:
        with pytest.raises(StoreError, match="source store itself"):
            copy_store(src, f"sqlite:///{db}")
        with pytest.raises(StoreError, match="source store itself"):  # another spelling of the same file
            copy_store(src, f"sqlite:///{data_dir}/../store/aisac.db")
        target = f"sqlite:///{tmp_path / 'copy.db'}"
        copy_store(src, target)
        with pytest.raises(StoreError, match=r"already holds store rows \(.*turn 2.*--replace"):
            copy_store(src, target)
        assert copy_store(src, target, replace=True)["rows"] == sum(snap["counts"].values())
        with pytest.raises(StoreError, match="not a database URL"):
            copy_store(src, "no url")
        with pytest.raises(StoreError, match="batch"):
            copy_store(src, target, batch=0)
        (tmp_path / "alias.db").symlink_to(db)
        with pytest.raises(StoreError, match="source store itself"):  # a symlink to the store file
            copy_store(src, f"sqlite:///{tmp_path / 'alias.db'}", replace=True)
    finally:
        src.dispose()
    # a source behind the newest revision (as a store of an older release would be until opened once)
    old = stamped_store(tmp_path / "old.db", "0000")
    from sqlalchemy import create_engine

    behind = create_engine(f"sqlite:///{old}")
    try:
        with pytest.raises(StoreError, match="schema revision 0000"):
            copy_store(behind, f"sqlite:///{tmp_path / 'other.db'}")
        assert not (tmp_path / "other.db").exists()  # the file the refused copy created is removed
    finally:
        behind.dispose()


def test_failed_copy_writes_nothing_and_hides_the_password(source_store, pg_target: str) -> None:
    """A target that cannot take a row (a CHECK added on the target) rolls the whole copy back; messages are one
    line without the password."""
    from sqlalchemy import create_engine, text

    data_dir, _snap = source_store
    make_engine(pg_target).dispose()
    pg = create_engine(pg_target)
    with pg.begin() as c:
        c.execute(text("ALTER TABLE turn ADD CONSTRAINT no_turns CHECK (false)"))
    src = make_engine(f"sqlite:///{data_dir / 'aisac.db'}")
    try:
        with pytest.raises(StoreError) as err:
            copy_store(src, pg_target)
        msg = str(err.value)
        assert "table turn" in msg and "rolled back" in msg and SECRET not in msg and "***" in msg
        assert "\n" not in msg
        with pg.connect() as c:
            assert c.execute(text("SELECT count(*) FROM document")).scalar_one() == 0
        with pytest.raises(StoreError) as err:  # a refused connection: the message names the target, no password
            copy_store(src, pg_target.rsplit(":", 1)[0] + ":1/nope")
        assert SECRET not in str(err.value) and "cannot open the target" in str(err.value)
    finally:
        src.dispose()
        pg.dispose()


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_DATA_DIR=str(data_dir), AISAC_OWNER_MODE="false", COLUMNS="200")
    return subprocess.run(
        [AISAC, "store", "migrate", *args], check=False, env=env, capture_output=True, text=True, timeout=300
    )


def test_cli(source_store, tmp_path: Path, pg_target: str) -> None:
    data_dir, snap = source_store
    res = _cli(data_dir, "--to", pg_target)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout + res.stderr
    assert SECRET not in out and "Traceback" not in out
    assert "export AISAC_SQL_URL=" in out and "aisac:***@" in out and "aisac config set sql_url" in out
    assert f"{sum(snap['counts'].values())} rows" in out and "traceevent" in out
    again = _cli(data_dir, "--to", pg_target)  # the target now holds rows
    assert again.returncode == 1
    err = again.stdout + again.stderr
    assert SECRET not in err and "Traceback" not in err and "--replace" in err
    assert err.strip().startswith("error:") and len(err.strip().splitlines()) == 1
    assert _cli(data_dir, "--to", pg_target, "--replace").returncode == 0
    bad = _cli(data_dir, "--to", pg_target.rsplit(":", 1)[0] + ":1/nope")
    assert bad.returncode == 1 and SECRET not in bad.stdout + bad.stderr and "Traceback" not in bad.stderr
    same = _cli(data_dir, "--to", f"sqlite:///{data_dir / 'aisac.db'}")
    assert same.returncode == 1 and "source store itself" in same.stderr


def test_times_stay_utc_whatever_the_servers_zone(source_store, pg_target: str) -> None:
    """SQLite holds naive UTC times; they land as the same instants in timestamptz columns of a PostgreSQL database
    whose session time zone is not UTC (a naive value would be read in that zone, 5:30 h off)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    data_dir, _snap = source_store
    pg = create_engine(pg_target)
    with pg.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"ALTER DATABASE \"{make_url(pg_target).database}\" SET timezone TO 'Asia/Kolkata'"))
    pg.dispose()
    src = make_engine(f"sqlite:///{data_dir / 'aisac.db'}")
    try:
        copy_store(src, pg_target)
    finally:
        src.dispose()
    con = sqlite3.connect(data_dir / "aisac.db")
    want = sorted(r[0][:26] for r in con.execute("SELECT created_at FROM turn UNION ALL SELECT valid_at FROM fact"))
    con.close()
    pg = create_engine(pg_target)
    try:
        with pg.connect() as c:
            assert c.execute(text("SHOW timezone")).scalar_one() == "Asia/Kolkata"
            got = sorted(
                c.execute(
                    text(
                        "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') FROM turn UNION ALL "
                        "SELECT to_char(valid_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') FROM fact"
                    )
                ).scalars()
            )
    finally:
        pg.dispose()
    assert got == want


def test_cli_copies_the_vectors_into_pgvector(
    source_store, models_dir: Path, shared_embedder, pgvector_server, tmp_path: Path
) -> None:
    """``--vectors sql``: the SQL rows and the vectors (chunks and dialogue, as stored) move into one PostgreSQL
    database; the store then answers with the same hits over pgvector, nothing re-embedded."""
    from aisac_core.context import AppContext
    from aisac_core.store.collections import CHUNKS, DIALOGUE

    data_dir, snap = source_store
    src = _open(data_dir, models_dir, shared_embedder)
    try:  # the source's dialogue points: its exchange is two (the user turn alone and the pair; every turn is indexed),
        # and a turn another test wrote through a SQL-only copy lands in this same vector folder
        dialogue = src.vectors().count(DIALOGUE)
    finally:
        src.close()
    assert dialogue >= 2
    url = pgvector_server.create_database().replace("//aisac@", f"//aisac:{SECRET}@")
    bad = _cli(data_dir, "--to", url, "--vectors", "http://qdrant:6333")
    assert bad.returncode == 1 and "--vectors" in bad.stderr and "Traceback" not in bad.stderr
    res = _cli(data_dir, "--to", url, "--vectors", "sql")
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout + res.stderr
    assert SECRET not in out and "Traceback" not in out
    assert "export AISAC_VECTOR_URL=sql" in out and "aisac config set vector_url sql" in out
    assert f"dialogue {dialogue})" in out, out
    core = AppContext(make_settings(data_dir, models_dir, sql_url=url, vector_url="sql"), embedder=shared_embedder)
    try:
        vs = core.vectors()
        assert type(vs).__name__ == "PgVectorStore" and vs.count(DIALOGUE) == dialogue
        with core.engine.connect() as db:
            chunks = db.exec_driver_sql("select sum(chunk_count) from document where status = 'indexed'").scalar()
        assert chunks and vs.count(CHUNKS) == chunks and f"(chunks {chunks}, dialogue {dialogue})" in out
        for q, hits in snap["hits"].items():  # the same chunks, in the same order
            assert [h.as_dict()["chunk_id"] for h in core.rag.search(q, 5).hits] == [h["chunk_id"] for h in hits]
    finally:
        core.close()
