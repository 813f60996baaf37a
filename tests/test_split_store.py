"""Guards against a split store, on real processes and real stores.

- ``aisac serve`` refuses a server SQL store with vectors private to the process (naming both settings), unless
  ``AISAC_ALLOW_PRIVATE_VECTORS`` opts in;
- an embedded vector folder is locked by one process at a time, whatever ``AISAC_OWNER_MODE`` says: a second
  process fails with a clear message and the first one keeps working;
- ``aisac status`` compares the manifest with the vector store by chunk id (a split store built on purpose: the
  vectors of two documents lost, one orphan added) and ``aisac index --repair`` re-embeds exactly those documents.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import http_server, make_settings, store_env
from fastmcp import Client
from test_replicas import _notes

from aisac_core.settings import Settings
from aisac_core.store.guards import SplitStoreError, check_replica_store
from aisac_core.store.vectors import Cond, VectorPoint

AISAC = str(Path(sys.executable).parent / "aisac")
PG = "postgresql+psycopg://someone@db.example:5432/aisac"


def test_serve_refuses_private_vectors_on_a_server_sql_store(tmp_path: Path, models_dir: Path) -> None:
    s = make_settings(tmp_path / "store", models_dir)
    env = store_env(s, AISAC_SQL_URL=PG)  # refused before any connection: the server need not exist
    r = subprocess.run(
        [AISAC, "serve", "--transport", "http", "--port", "1"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1
    msg = " ".join(r.stderr.split())
    assert "AISAC_SQL_URL=postgresql+psycopg://someone@db.example:5432/aisac" in msg
    assert "AISAC_VECTOR_URL=sql" in msg and "AISAC_ALLOW_PRIVATE_VECTORS=true" in msg
    assert "Traceback" not in r.stderr


def test_which_settings_are_split(tmp_path: Path) -> None:
    with pytest.raises(SplitStoreError, match="AISAC_VECTOR_BACKEND=edge"):
        check_replica_store(Settings(data_dir=tmp_path, sql_url=PG))
    with pytest.raises(SplitStoreError, match="AISAC_VECTOR_BACKEND=qdrant"):
        check_replica_store(Settings(data_dir=tmp_path, sql_url=PG, vector_backend="qdrant"))  # local mode
    for ok in (
        Settings(data_dir=tmp_path),  # the laptop: SQLite and an embedded folder
        Settings(data_dir=tmp_path, sql_url=PG, vector_url="sql"),
        Settings(data_dir=tmp_path, sql_url=PG, vector_url="postgresql+psycopg://v@vec:5432/v"),
        Settings(data_dir=tmp_path, sql_url=PG, vector_backend="qdrant", qdrant_url="http://qdrant:6333"),
        Settings(data_dir=tmp_path, sql_url=PG, allow_private_vectors=True),  # opted in: one process
    ):
        check_replica_store(ok)
    assert Settings(data_dir=tmp_path, sql_url=PG, vector_url="SQL").resolved_vector_url == PG
    assert Settings(data_dir=tmp_path, sql_url=PG, vector_url="sql").server_store
    with pytest.raises(ValueError, match="postgresql"):
        Settings(data_dir=tmp_path, vector_url="http://qdrant:6333")


pytestmark = pytest.mark.anyio


async def test_an_embedded_folder_has_one_process_whatever_owner_mode_says(tmp_path: Path, models_dir: Path) -> None:
    s = make_settings(tmp_path / "store", models_dir)
    env = store_env(s, AISAC_OWNER_MODE="false", AISAC_WARM="true")
    notes = _notes(tmp_path / "notes", 3, 80)
    with http_server(env, timeout=120) as url:
        async with Client(url, timeout=120) as c:
            r = await c.call_tool("rag_search", {"query": "catalyst", "k": 3})  # the store is open here
            assert not r.is_error
            second = subprocess.run(
                [AISAC, "index", str(notes[1])], env=env, capture_output=True, text=True, timeout=300
            )
            assert second.returncode == 1, second.stderr
            msg = " ".join(second.stderr.split())
            assert "in use by another aisac process (pid" in msg and str(s.vectors_dir) in msg, msg
            assert "Traceback" not in second.stderr
            # the first process is unharmed: it indexes and finds
            job = (await c.call_tool("rag_index", {"path": str(notes[2])})).structured_content["job_id"]
            for _ in range(600):
                st = (await c.call_tool("rag_job_status", {"job_id": job})).structured_content
                if st["status"] not in ("queued", "running"):
                    break
                await asyncio.sleep(0.2)
            assert st["status"] == "done", st
            hits = (await c.call_tool("rag_search", {"query": "catalyst perovskite", "k": 5})).structured_content
            assert hits["hits"]


def _status(env: dict[str, str]) -> dict:
    r = subprocess.run([AISAC, "status", "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_status_finds_a_split_store_and_repair_re_embeds_exactly_what_is_missing(
    tmp_path: Path, models_dir: Path
) -> None:
    from aisac_core.context import AppContext

    s = make_settings(tmp_path / "store", models_dir)
    env = store_env(s)
    notes = _notes(tmp_path / "notes", 6, 80)
    core = AppContext(s)
    try:
        core.rag.indexer.run([tmp_path / "notes"])
        docs = {d["path"]: d for d in core.rag.list_documents()["documents"]}
        lost = [docs[str(notes[1].resolve())], docs[str(notes[4].resolve())]]
        vs = core.vectors()
        for d in lost:  # the split: these documents' vectors live "in another replica's folder"
            vs.delete("chunks", [Cond("doc_id", eq=d["doc_id"])])
        dim = core.embedder.dim
        orphan = VectorPoint(str(uuid.uuid4()), [1.0] + [0.0] * (dim - 1), [1], [1.0], {"doc_id": "gone0000"})
        vs.upsert("chunks", [orphan])
        before_ok = {d["doc_id"] for d in docs.values()} - {d["doc_id"] for d in lost}
    finally:
        core.close()
    st = _status(env)
    vc = st["vector_check"]
    assert vc["missing_vectors"] == sum(d["chunk_count"] for d in lost) > 0
    assert vc["documents_missing_vectors"] == 2 and vc["orphan_vectors"] == 1
    assert {m["doc_id"] for m in vc["missing_in"]} == {d["doc_id"] for d in lost}
    assert st["stale_documents"] == 0  # the manifest alone cannot see it
    r = subprocess.run([AISAC, "index", "--repair", "--json"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["repair"]["orphans_deleted"] == 1 and got["repair"]["documents_reembedded"] == 2
    assert got["repair"]["missing_after"] == 0 and got["repair"]["orphan_after"] == 0
    assert got["counters"]["files_indexed"] == 2  # exactly the two, nothing else re-embedded
    assert got["counters"]["chunks_embedded"] == sum(d["chunk_count"] for d in lost)
    vc = _status(env)["vector_check"]
    assert vc["missing_vectors"] == 0 and vc["orphan_vectors"] == 0
    core = AppContext(s)
    try:  # the untouched documents kept their vectors (same ids), the lost ones are back
        for d in docs.values():
            n = core.vectors().count("chunks", [Cond("doc_id", eq=d["doc_id"])])
            assert n == d["chunk_count"], (d["doc_id"], d["doc_id"] in before_ok)
    finally:
        core.close()
    r = subprocess.run([AISAC, "index"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--repair" in r.stderr
