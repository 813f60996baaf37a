"""The store's identity (``aisac_core.store.identity``) on real stores and real processes.

On one PostgreSQL-with-pgvector database (the ``pgserver`` wheel; skipped with the reason where it is missing) holding
a store indexed by replica A:

- every command (``status``, ``search``, ``verify``, ``index``) run by a replica with a mismatched setting - no vector
  URL (a private folder), another chunk size, another model file - is refused before it touches the store, naming each
  difference and the setting, and a ``pg_dump`` of the database before and after is byte-identical;
- ``status``, ``search`` and ``verify`` succeed through a read-only database role (nothing created, migrated, marked);
- a replica whose roots exclude a document cannot read it to verify an anchor (a clear error);
- ``aisac status --json`` with the database down prints JSON with the error and the local journal's pending count.

On SQLite, in process: a store made before identities is adopted by its first writing process (a read-only one records
nothing); a writing process on a store of its own adopts new model/chunker settings, a read-only one refuses them;
``adopt_settings`` is needed on a shared store; a job taken over never shows less progress than was recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_settings, store_env
from sqlmodel import Session
from test_replicas import _notes

from aisac_core.context import AppContext
from aisac_core.store.identity import IDENTITY_KEY, StoreIdentityError, read_identity
from aisac_core.store.readonly import ReadOnlyStoreError
from aisac_core.store.tables import StoreMeta

AISAC = str(Path(sys.executable).parent / "aisac")


def _aisac(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AISAC, *args], env={**env, "COLUMNS": "200"}, input=stdin, capture_output=True, text=True, timeout=300
    )


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The ``aisac`` command run in this process (the same code as the console script, without ~3 s of start-up per
    run) with ``env``'s ``AISAC_*`` settings in force; the result in the form of a subprocess's."""
    from typer.testing import CliRunner

    from aisac_servers.cli.main import app

    overrides: dict[str, str | None] = {k: None for k in os.environ if k.startswith("AISAC_")}
    overrides.update({k: v for k, v in env.items() if k.startswith(("AISAC_", "HF_"))})
    r = CliRunner().invoke(app, list(args), env=overrides)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    return " ".join((r.stderr + r.stdout).split())


# ---- two replicas on one PostgreSQL ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_store(tmp_path_factory: pytest.TempPathFactory, models_dir: Path, pgvector_server):  # noqa: ANN001, ANN201
    """A store on one PostgreSQL database (SQL and vectors, ``AISAC_VECTOR_URL=sql``) with 3 notes indexed by replica
    A; returns (cluster, database URL, A's environment, the notes, a search hit's anchor)."""
    tmp = tmp_path_factory.mktemp("identity")
    url = pgvector_server.create_database()
    notes = _notes(tmp / "notes", 3, 80)
    env_a = store_env(make_settings(tmp / "replica-a", models_dir, sql_url=url), AISAC_VECTOR_URL="sql")
    r = _aisac(env_a, "index", str(tmp / "notes"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["counters"]["files_indexed"] == 3
    r = _cli(env_a, "search", "catalyst perovskite", "-k", "1", "--json")
    assert r.returncode == 0, r.stderr
    hit = json.loads(r.stdout)["hits"][0]
    return pgvector_server, url, env_a, notes, {**hit["anchor"], "text": hit["text"]}


def _dump(cluster, url: str) -> bytes:  # noqa: ANN001
    """``pg_dump`` of the database at ``url`` (schema and every row, in a stable order)."""
    db = url.rsplit("/", 1)[1]
    r = subprocess.run(
        [str(cluster.bin_dir / "pg_dump"), "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "aisac", db],
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def _other_model(folder: Path, models_dir: Path) -> Path:
    """A model folder like the default's but with another ``model.onnx`` (one byte changed: never loaded here, the
    check refuses it first)."""
    shutil.copytree(models_dir, folder, copy_function=os.link)
    onnx = folder / "model.onnx"
    data = bytearray(onnx.read_bytes())
    data[-1] ^= 1
    onnx.unlink()
    onnx.write_bytes(bytes(data))
    (folder / "aisac-assembled.json").unlink()
    return folder


def test_every_command_with_a_mismatched_setting_is_refused_and_the_database_is_unchanged(
    pg_store, tmp_path: Path, models_dir: Path
) -> None:  # noqa: ANN001
    cluster, url, env_a, notes, anchor = pg_store
    before = _dump(cluster, url)
    base = store_env(make_settings(tmp_path / "replica-b", models_dir, sql_url=url))
    other = _other_model(tmp_path / "other-model", models_dir)
    cases = {  # mismatch -> (environment of replica B, what its refusal must name)
        "no vector URL": (
            {**base, "AISAC_ALLOW_PRIVATE_VECTORS": "true"},
            ["vector_backend: the store has 'postgres', this process 'edge'", "AISAC_VECTOR_URL"],
        ),
        "another chunk size": (
            {**base, "AISAC_VECTOR_URL": "sql", "AISAC_CHUNK_MAX_TOKENS": "128"},
            ["chunk_max_tokens: the store has 256, this process 128", "AISAC_CHUNK_MAX_TOKENS"],
        ),
        "another model file": (
            {**base, "AISAC_VECTOR_URL": "sql", "AISAC_EMBEDDING_MODEL": str(other)},
            ["embedding_model_sha256: the store has", "AISAC_EMBEDDING_MODEL"],
        ),
    }
    commands = {
        "status": ["status", "--json"],
        "search": ["search", "catalyst", "-k", "3"],
        "verify": ["verify", json.dumps(anchor)],
        "index": ["index", str(notes[0].parent)],
    }
    runs = [(case, cmd) for case in cases for cmd in commands]
    results = [_cli(cases[case][0], *commands[cmd]) for case, cmd in runs]
    for (case, cmd), r in zip(runs, results):
        msg = _one_line(r)
        assert r.returncode == 1, (case, cmd, msg)
        assert "settings differ from the store's" in msg and "nothing was read or written" in msg, (case, cmd, msg)
        for part in cases[case][1]:
            assert part in msg, (case, cmd, part, msg)
        assert "Traceback" not in r.stderr, (case, cmd)
        if cmd == "status":  # --json: still JSON, with the error
            assert "settings differ" in json.loads(r.stdout)["error"]
    # the console script itself, as a user types it (one real process)
    r = _aisac(cases["another chunk size"][0], "search", "catalyst")
    assert r.returncode == 1 and "chunk_max_tokens: the store has 256, this process 128" in _one_line(r), r.stderr
    # a replica server with other settings does not start (refused before it listens)
    r = _aisac(cases["another model file"][0], "serve", "--transport", "http", "--port", "1", "--no-token")
    assert r.returncode == 1 and "embedding_model_sha256: the store has" in _one_line(r), r.stderr[-2000:]
    # without the opt-in the split itself is refused first, for every command
    r = _cli(base, "status")
    assert r.returncode == 1 and "AISAC_VECTOR_URL=sql" in _one_line(r) and "AISAC_ALLOW_PRIVATE_VECTORS" in r.stderr
    assert _dump(cluster, url) == before  # nothing was created, marked stale, migrated or recorded
    assert not (tmp_path / "replica-b" / "vectors").exists()  # nor a private vector folder made
    # and a server's context alike refuses its first call, before any read or write
    from aisac_core.settings import Settings

    with pytest.raises(StoreIdentityError, match="chunk_max_tokens"):
        ctx = AppContext(
            Settings(data_dir=tmp_path / "replica-b", sql_url=url, vector_url="sql", rag={"chunk_max_tokens": 128})
        )
        try:
            ctx.rag.status()
        finally:
            ctx.close()
    assert _dump(cluster, url) == before
    # replica A's own settings are accepted
    r = _cli(env_a, "status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["stale_documents"] == 0, r.stderr


def test_read_only_commands_work_through_a_read_only_role(pg_store, tmp_path: Path, models_dir: Path) -> None:  # noqa: ANN001
    cluster, url, _env_a, notes, anchor = pg_store
    import psycopg

    db = url.rsplit("/", 1)[1]
    with psycopg.connect(f"host=127.0.0.1 port={cluster.port} user=aisac dbname={db}", autocommit=True) as c:
        c.execute("DO $$BEGIN CREATE ROLE reader LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END$$")
        c.execute(f'GRANT CONNECT ON DATABASE "{db}" TO reader')
        for schema in ("public", "aisac_vectors"):
            c.execute(f"GRANT USAGE ON SCHEMA {schema} TO reader")
            c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO reader")
    ro_url = url.replace("//aisac@", "//reader@")
    before = _dump(cluster, url)
    env = store_env(make_settings(tmp_path / "reader", models_dir, sql_url=ro_url), AISAC_VECTOR_URL="sql")
    st = _aisac(env, "status", "--json")
    assert st.returncode == 0, st.stderr
    got = json.loads(st.stdout)
    assert got["documents"] == {"indexed": 3} and got["chunks_in_vector_store"] == got["chunks_in_manifest"] > 0
    assert got["vector_check"]["missing_vectors"] == 0 and got["stale_documents"] == 0
    se = _cli(env, "search", "catalyst perovskite", "-k", "3", "--json")
    assert se.returncode == 0, se.stderr
    assert json.loads(se.stdout)["hits"][0]["chunk_id"] == anchor["chunk_id"]
    ve = _aisac(env, "verify", "-", stdin=json.dumps(anchor))
    assert ve.returncode == 0, ve.stderr
    assert json.loads(ve.stdout)["status"] == "ok"
    assert _dump(cluster, url) == before
    # the role really is read-only: a writing command through it fails (and says so), changing nothing
    ix = _cli(env, "index", str(notes[0]))
    assert ix.returncode == 1 and "Traceback" not in ix.stderr and "permission denied" in _one_line(ix).lower()
    assert _dump(cluster, url) == before


def test_a_replica_whose_roots_exclude_a_document_cannot_read_it_to_verify(
    pg_store, tmp_path: Path, models_dir: Path
) -> None:  # noqa: ANN001
    _cluster, url, _env_a, notes, anchor = pg_store
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = store_env(
        make_settings(tmp_path / "replica-c", models_dir, sql_url=url),
        AISAC_VECTOR_URL="sql",
        AISAC_ROOTS=json.dumps([str(elsewhere)]),
    )
    r = _cli(env, "verify", json.dumps(anchor))
    msg = _one_line(r)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "outside this process's registered roots" in msg and str(elsewhere) in msg
    assert "AISAC_ROOTS" in msg
    ok = _cli({**env, "AISAC_ROOTS": json.dumps([str(notes[0].parent)])}, "verify", json.dumps(anchor))
    assert ok.returncode == 0 and json.loads(ok.stdout)["status"] == "ok", ok.stderr


def test_status_json_with_the_database_down_prints_json_with_the_pending_events(
    tmp_path: Path, models_dir: Path
) -> None:
    import socket

    with socket.socket() as s:  # a port where no server listens: the database is down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+psycopg://aisac@127.0.0.1:{port}/aisac"
    s = make_settings(tmp_path / "store", models_dir, sql_url=url)
    from aisac_core.trace.journal import JOURNAL

    lines = [
        json.dumps({"run_id": run, "step": i, "tool": "rag_search"}) for run, i in [("r1", 1), ("r1", 2), ("r2", 1)]
    ]
    (s.data_dir / JOURNAL).write_text("\n".join(lines) + "\n")
    r = _aisac(store_env(s, AISAC_VECTOR_URL="sql"), "status", "--json")
    assert r.returncode == 1
    got = json.loads(r.stdout)
    assert "cannot open the SQL store" in got["error"] and str(port) in got["error"]
    assert got["trace_gap"]["pending"] == 3 and got["trace_gap"]["runs"] == ["r1", "r2"]
    assert "Traceback" not in r.stderr


# ---- one machine (SQLite), in process ------------------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path, models_dir: Path, shared_embedder):  # noqa: ANN001, ANN201
    """A SQLite store with 2 notes indexed; returns (settings, notes folder)."""
    s = make_settings(tmp_path / "store", models_dir)
    _notes(tmp_path / "notes", 2, 60)
    core = AppContext(s, embedder=shared_embedder)
    try:
        core.rag.indexer.run([tmp_path / "notes"])
    finally:
        core.close()
    return s, tmp_path / "notes"


def _identity(s, shared_embedder):  # noqa: ANN001, ANN202
    core = AppContext(s, read_only=True, embedder=shared_embedder)
    try:
        return read_identity(core.engine)
    finally:
        core.close()


def test_a_store_made_before_identities_is_adopted_by_its_first_writing_process(small, shared_embedder) -> None:  # noqa: ANN001
    s, _notes_dir = small
    ident = _identity(s, shared_embedder)
    assert ident is not None and ident.chunk_max_tokens == 256 and ident.vector_location == "embedded:vectors"
    assert ident.embedding_dim == 384 and ident.embedding_model_sha256 and len(ident.embedding_model_sha256) == 64
    core = AppContext(s, embedder=shared_embedder)
    with Session(core.engine) as db:  # as a store of an earlier release: no record
        row = db.get(StoreMeta, IDENTITY_KEY)
        assert row is not None
        db.delete(row)
        db.commit()
    core.close()
    ro = AppContext(s, read_only=True, embedder=shared_embedder)
    try:  # a read-only process reads it as it is and records nothing
        assert ro.rag.status()["documents"] == {"indexed": 2}
        assert ro.identity is None and read_identity(ro.engine) is None
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            ro.vectors().ensure_collection("chunks", 384)
    finally:
        ro.close()
    core = AppContext(s, embedder=shared_embedder)
    try:  # the first writing process records its own settings, and refuses nothing
        assert core.rag.status()["stale_documents"] == 0
        assert read_identity(core.engine) == ident
    finally:
        core.close()


def test_changed_settings_on_a_store_of_ones_own(small, shared_embedder) -> None:  # noqa: ANN001
    s, notes_dir = small
    s128 = s.updated(chunk_max_tokens=128)
    ro = AppContext(s128, read_only=True, embedder=shared_embedder)
    with pytest.raises(StoreIdentityError, match="chunk_max_tokens: the store has 256, this process 128"):
        ro.rag.status()
    ro.close()
    moved = AppContext(s.updated(vector_backend="qdrant"), embedder=shared_embedder)
    with pytest.raises(StoreIdentityError, match="vector_backend: the store has 'edge', this process 'qdrant'"):
        moved.rag.status()  # where the store is is never adopted, even by a writing process
    moved.close()
    core = AppContext(s128, embedder=shared_embedder)
    try:  # a writing process on a store of its own (SQLite) adopts it: the fingerprint re-embeds, as before
        assert core.rag.status()["stale_documents"] == 2
        core.rag.indexer.run([notes_dir])
        assert core.rag.status()["stale_documents"] == 0
        assert read_identity(core.engine).chunk_max_tokens == 128  # type: ignore[union-attr]
    finally:
        core.close()


def test_a_shared_store_needs_adopt_settings(pg_store, tmp_path: Path, models_dir: Path, shared_embedder) -> None:  # noqa: ANN001
    _cluster, url, _env_a, _notes_list, _anchor = pg_store
    from aisac_core.store.identity import check_identity, differences
    from aisac_core.store.sql import make_engine

    engine = make_engine(url)
    try:
        stored = read_identity(engine)
        assert stored is not None and stored.vector_location == "sql" and stored.vector_backend == "postgres"
        import dataclasses

        here = dataclasses.replace(stored, chunk_max_tokens=128)
        assert [d.item for d in differences(stored, here)] == ["chunk_max_tokens"]
        with pytest.raises(StoreIdentityError, match="--adopt-settings"):
            check_identity(engine, here, write=True, shared=True)
        assert read_identity(engine) == stored
        moved = dataclasses.replace(stored, vector_location="postgresql://elsewhere:5432/v")
        with pytest.raises(StoreIdentityError, match="vector_location"):
            check_identity(engine, moved, write=True, shared=True, adopt=True)  # never adopted
        same_file_elsewhere = dataclasses.replace(stored, embedding_model="dir:/another/path")
        assert differences(stored, same_file_elsewhere) == []  # the model file's hash decides, not its path
    finally:
        engine.dispose()


def test_a_job_taken_over_never_shows_less_progress(small, shared_embedder) -> None:  # noqa: ANN001
    from datetime import timedelta

    from aisac_core.hashing import dumps
    from aisac_core.store.tables import Job, utcnow

    s, notes_dir = small
    _notes(notes_dir, 4, 60, seed=11)  # two more notes (4 files, 2 of them new)
    core = AppContext(s, embedder=shared_embedder)
    try:
        with Session(core.engine) as db:  # a process held it, recorded 3 of 4 files done, and died
            db.add(
                Job(
                    job_id="job-taken",
                    kind="index",
                    status="running",
                    params_json=dumps({"paths": [str(notes_dir)], "catalog_only": False}),
                    total=4,
                    done=3,
                    lease_owner="gone:1:a",
                    lease_expires_at=utcnow() - timedelta(seconds=60),
                    attempts=1,
                )
            )
            db.commit()
        jm = core.rag.jobs
        shown: list[int] = []
        update = jm.queue.update

        def watch(job_id: str, **fields: object) -> bool:  # every progress write, as a status reader sees it
            if "done" in fields:
                shown.append(int(fields["done"]))  # type: ignore[call-overload]
            return update(job_id, **fields)

        jm.queue.update = watch  # type: ignore[method-assign]
        jm.resume()
        deadline = time.monotonic() + 120
        while (st := jm.status("job-taken")) is not None and st["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, st
            time.sleep(0.1)
        assert st is not None and st["status"] == "done" and st["attempts"] == 2, st
        assert shown and min(shown) >= 3 and st["done"] == 4, shown
    finally:
        core.close()


def test_replicas_opening_a_new_store_together_record_one_identity(pg_store) -> None:  # noqa: ANN001
    """Eight writing processes' checks on a new database at once (threads, an engine each): one record, no error."""
    import threading

    from aisac_core.store.identity import check_identity
    from aisac_core.store.sql import make_engine

    cluster, url, _env_a, _notes_list, _anchor = pg_store
    new = cluster.create_database()
    engine = make_engine(url)
    try:
        here = read_identity(engine)
    finally:
        engine.dispose()
    assert here is not None
    engines = [make_engine(new) for _ in range(8)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(engines))

    def check(e) -> None:  # noqa: ANN001
        start.wait()
        try:
            check_identity(e, here, write=True, shared=True)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=check, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert errors == [] and read_identity(engines[0]) == here
    finally:
        for e in engines:
            e.dispose()
