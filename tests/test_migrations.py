"""Schema migrations of the SQL store (Alembic): a new store is created at head, a store written by release 0.1.0
(before the migrations) is adopted without losing a row, the models and the head revision agree, two processes
opening one new store at once both succeed, and the same revision runs on PostgreSQL."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import Session, SQLModel, create_engine, select

from aisac_core.store import migrations
from aisac_core.store.sql import StoreError, make_engine, schema_revision
from aisac_core.store.tables import Fact, TraceEvent, Turn

FIXTURE = Path(__file__).parent / "fixtures" / "stores" / "release-0.1.0.db"
AISAC = str(Path(sys.executable).parent / "aisac")
#: the newest revision: 0001 is the 0.1.0 baseline, 0002 widens sizes/mtimes to 64 bits and adds job leases
HEAD = "0045"  # issue 45 adds memory scopes (participant, host, started_at, speaker); the lead re-chains at merge


def _counts(db: Path) -> dict[str, int]:
    con = sqlite3.connect(db)
    try:
        names = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
        return {n: con.execute(f'select count(*) from "{n}"').fetchone()[0] for n in names if n != "alembic_version"}
    finally:
        con.close()


def _ddl(db: Path) -> list[str]:
    """Every CREATE statement of the file (whitespace folded), sorted; ``alembic_version`` left out."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("select sql from sqlite_master where sql is not null and name != 'alembic_version'")
        return sorted(" ".join(r[0].split()) for r in rows)
    finally:
        con.close()


def test_new_store_is_created_at_head(tmp_path: Path) -> None:
    db = tmp_path / "aisac.db"
    engine = make_engine(f"sqlite:///{db}")
    try:
        assert schema_revision(engine) == migrations.head_revision() == HEAD
        con = sqlite3.connect(db)
        assert con.execute("select version_num from alembic_version").fetchall() == [(HEAD,)]
        con.close()
        assert set(_counts(db)) == set(SQLModel.metadata.tables)
    finally:
        engine.dispose()
    again = make_engine(f"sqlite:///{db}")  # idempotent: a second open changes nothing
    assert schema_revision(again) == HEAD
    again.dispose()


def test_baseline_equals_the_release_schema(tmp_path: Path) -> None:
    """Revision 0001 creates exactly the tables, columns, types and indexes release 0.1.0 made, so stamping a 0.1.0
    store at 0001 is right."""
    db = tmp_path / "aisac.db"
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        command.upgrade(migrations.alembic_config(conn), migrations.BASELINE)
    engine.dispose()
    assert _ddl(db) == _ddl(FIXTURE)


def test_release_store_is_adopted_without_loss(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    data_dir.mkdir()
    db = data_dir / "aisac.db"
    shutil.copy(FIXTURE, db)
    before = _counts(db)
    assert "alembic_version" not in before and all(before.values()), before
    engine = make_engine(f"sqlite:///{db}")
    try:
        assert schema_revision(engine) == migrations.head_revision()
        after = _counts(db)  # every row kept; tables added by later migrations (embedding_cache) start empty
        assert {t: n for t, n in after.items() if t in before} == before
        assert all(n == 0 for t, n in after.items() if t not in before and t != "alembic_version")
        with Session(engine) as s:  # the rows read back through today's models
            turns = s.exec(select(Turn).order_by(Turn.created_at)).all()
            assert [t.content for t in turns] == [f"turn {i}" for i in range(4)]
            assert {f.object for f in s.exec(select(Fact)).all()} == {"412 K", "410 K"}
            assert {e.kind for e in s.exec(select(TraceEvent)).all()} == {"tool_call"}
    finally:
        engine.dispose()

    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_OWNER_MODE="false", AISAC_WARM="false")
    res = subprocess.run(
        [AISAC, "status", "--data-dir", str(data_dir), "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    st = json.loads(res.stdout)
    assert st["schema_revision"] == HEAD
    assert st["documents"] == {"indexed": 3, "failed": 1} and st["trace_events"] == 3
    res = subprocess.run(
        [AISAC, "status", "--data-dir", str(data_dir)], env=env, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"schema      revision {HEAD}" in res.stdout  # the human summary (--json above has every field)


def test_older_store_gains_missing_tables_columns_and_indexes(tmp_path: Path) -> None:
    """A store older than 0.1.0 (a table, a column and an index fewer) is brought to the baseline, rows kept."""
    db = tmp_path / "aisac.db"
    shutil.copy(FIXTURE, db)
    con = sqlite3.connect(db)
    con.execute("DROP TABLE lit_cache")
    con.execute("DROP INDEX ix_traceevent_run_created")
    con.execute("ALTER TABLE traceevent DROP COLUMN result_json")
    con.execute("DROP INDEX ix_turn_pair_user_id")
    con.execute("ALTER TABLE turn DROP COLUMN pair_user_id")
    con.commit()
    con.close()
    before = _counts(db)
    engine = make_engine(f"sqlite:///{db}")
    try:
        assert schema_revision(engine) == HEAD
        after = _counts(db)
        # the missing lit_cache table is created empty, and so is issue 33's embedding_cache
        assert after.pop("lit_cache") == 0 and after.pop("embedding_cache") == 0 and after == before
        con = sqlite3.connect(db)
        cols = {r[1] for r in con.execute("PRAGMA table_info(traceevent)")}
        idx = {r[1] for r in con.execute("PRAGMA index_list(traceevent)")}
        con.close()
        assert "result_json" in cols and "ix_traceevent_run_created" in idx
        with Session(engine) as s:
            assert all(t.pair_user_id is None for t in s.exec(select(Turn)).all())
    finally:
        engine.dispose()


def test_models_and_head_agree(tmp_path: Path) -> None:
    """Autogenerate finds nothing to change between the models and a database migrated to head."""
    engine = make_engine(f"sqlite:///{tmp_path / 'aisac.db'}")
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, SQLModel.metadata)
        assert diff == [], diff
    finally:
        engine.dispose()


def stamped_store(db: Path, revision: str) -> Path:
    """A new SQLite store at ``db`` whose ``alembic_version`` then claims ``revision`` (an older or a newer release's
    schema, as far as the migrations can tell)."""
    make_engine(f"sqlite:///{db}").dispose()
    con = sqlite3.connect(db)
    con.execute("UPDATE alembic_version SET version_num = ?", (revision,))
    con.commit()
    con.close()
    return db


def test_store_of_a_newer_release_is_refused(tmp_path: Path) -> None:
    db = stamped_store(tmp_path / "aisac.db", "9999")
    with pytest.raises(StoreError, match="newer"):
        make_engine(f"sqlite:///{db}")


def _at_once(fn, n: int) -> list[BaseException]:  # noqa: ANN001
    """Run ``fn`` in ``n`` threads released together (as ``n`` processes opening one store); the errors raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def work() -> None:
        try:
            start.wait()
            fn()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


def test_concurrent_first_open_threads(tmp_path: Path) -> None:
    """Four engines (as four processes would have) open one new store at the same moment: one migrates, the others
    wait for its transaction and find the store at head. Eight new stores in a row: the switch of a new file to WAL
    answered "database is locked" at once in about one round of five (SQLite does not wait on a busy journal-mode
    change), which the store now retries (``store.sql._set_wal``)."""
    for round_ in range(8):
        url = f"sqlite:///{tmp_path / f'aisac-{round_}.db'}"
        revisions: list[str | None] = []

        def work(url: str = url, revisions: list[str | None] = revisions) -> None:
            engine = make_engine(url)
            revisions.append(schema_revision(engine))
            engine.dispose()

        errors = _at_once(work, 4)
        assert not errors, errors
        assert revisions == [HEAD] * 4


def test_concurrent_first_open_processes(tmp_path: Path) -> None:
    db = tmp_path / "aisac.db"
    go = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "from aisac_core.store.sql import make_engine, schema_revision\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.005)\n"
        f"e = make_engine('sqlite:///{db}')\n"
        "print(schema_revision(e))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    time.sleep(1.0)  # all three imported and waiting
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1][-2000:] for o in outs]
    assert [o[0].strip() for o in outs] == [HEAD] * 3
    con = sqlite3.connect(db)
    assert con.execute("select count(*) from alembic_version").fetchone()[0] == 1
    con.close()


# ---- PostgreSQL (optional: needs the server binaries and the psycopg driver) -------------------------------------


@pytest.fixture
def pg_url(pg_server) -> str:  # noqa: ANN001
    return pg_server.create_database()


def test_migration_on_postgresql(pg_url: str) -> None:
    errors = _at_once(lambda: make_engine(pg_url).dispose(), 3)
    assert not errors, errors
    engine = create_engine(pg_url)
    try:
        assert schema_revision(engine) == HEAD
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), SQLModel.metadata)
        assert diff == [], diff
    finally:
        engine.dispose()
