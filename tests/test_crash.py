"""Acceptance 3: ``kill -9`` of the indexer mid-run, then a re-run, gives the same chunks as a clean run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_settings
from fixtures_gen import make_pdf
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError, ProgrammingError

pytestmark = pytest.mark.both_engines

AISAC = str(Path(sys.executable).parent / "aisac")
TOPICS = [
    "boundary layer transition",
    "protein folding kinetics",
    "graphene thermal conductivity",
    "soil carbon sequestration",
    "turbulent premixed flames",
    "battery electrolyte decomposition",
    "ocean heat uptake",
    "crystal nucleation rates",
    "aerosol optical depth",
    "gene expression noise",
    "seismic wave attenuation",
    "polymer glass transition",
    "photocatalytic water splitting",
    "groundwater nitrate transport",
    "superconducting qubit coherence",
    "bacterial biofilm growth",
]


def _corpus(root: Path) -> Path:
    root.mkdir(parents=True)
    for i, topic in enumerate(TOPICS):
        body = "\n\n".join(
            f"## Section {j}\n\nMeasurement series {j} on {topic} in sample {i}-{j}: the observed value was "
            f"{(i + 1) * (j + 3) * 1.37:.2f} units, with an uncertainty of {j + 1} percent. " * 3
            for j in range(6)
        )
        (root / f"note_{i:02d}.md").write_text(f"# Study of {topic}\n\n{body}\n")
    make_pdf(root / "report_a.pdf")
    make_pdf(root / "report_b.pdf")
    return root


def _env(data_dir: Path, sql_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1", **({"AISAC_SQL_URL": sql_url} if sql_url else {}))
    if sql_url:  # one process at a time on each database, vectors in its own folder: the documented opt-in of the
        # split-store guard, which covers every command (docs/deployment.md)
        env["AISAC_ALLOW_PRIVATE_VECTORS"] = "true"
    return env


def _url(data_dir: Path, sql_url: str | None) -> str:
    return sql_url or f"sqlite:///{data_dir / 'aisac.db'}"


def _index(data_dir: Path, corpus: Path, sql_url: str | None) -> dict:
    out = subprocess.run(
        [AISAC, "index", str(corpus), "--json"],
        env=_env(data_dir, sql_url),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def _engine(data_dir: Path, sql_url: str | None) -> Engine:
    return create_engine(_url(data_dir, sql_url), connect_args={"timeout": 30} if sql_url is None else {})


def _scalar(data_dir: Path, sql_url: str | None, sql: str, engine: Engine | None = None) -> int:
    """One number from the store's SQL database (0 while its tables do not exist yet), through ``engine`` when given
    (the polling loop keeps one: an engine per poll cost the test ~10 CPU s), else through an engine of its own."""
    if sql_url is None and not (data_dir / "aisac.db").exists():
        return 0  # (checked first: connecting would create an empty SQLite file)
    own = engine is None
    eng = _engine(data_dir, sql_url) if engine is None else engine
    try:
        with eng.connect() as con:
            return int(con.execute(text(sql)).scalar() or 0)
    except OperationalError:
        return 0
    except ProgrammingError:  # PostgreSQL: relation does not exist yet
        return 0
    finally:
        if own:
            eng.dispose()


def _state(data_dir: Path, models_dir: Path, sql_url: str | None) -> tuple[int, int, set[str]]:
    """(vector points, manifest chunk sum, point ids) of a store, read in-process after the runs."""
    from aisac_core.context import AppContext

    core = AppContext(make_settings(data_dir, models_dir, sql_url=sql_url))
    try:
        vs = core.vectors()
        ids = {pid for pid, _ in vs.scroll_ids("chunks")}
        manifest = _scalar(
            data_dir, sql_url, "select coalesce(sum(chunk_count),0) from document where status='indexed'"
        )
        return vs.count("chunks"), manifest, ids
    finally:
        core.close()


@pytest.fixture
def second_sql_url(request: pytest.FixtureRequest, sql_engine: str) -> str | None:
    """Another fresh database on the same engine as ``sql_url`` (None: SQLite, a file per data dir)."""
    return None if sql_engine == "sqlite" else request.getfixturevalue("pg_server").create_database()


@pytest.mark.slow
def test_kill_9_mid_run_then_rerun_converges(tmp_path, models_dir, sql_url, second_sql_url):
    corpus = _corpus(tmp_path / "corpus")
    clean = tmp_path / "clean"
    make_settings(clean, models_dir)
    ref = _index(clean, corpus, sql_url)["counters"]
    assert ref["files_indexed"] == len(TOPICS) + 2 and ref["files_failed"] == 0
    ref_count, ref_manifest, ref_ids = _state(clean, models_dir, sql_url)
    assert ref_count == ref_manifest == ref["chunks_embedded"]

    crashed = tmp_path / "crashed"
    make_settings(crashed, models_dir)
    kills = 0
    poll = _engine(crashed, second_sql_url)
    for threshold in (1, 5, 11):
        proc = subprocess.Popen(
            [AISAC, "index", str(corpus)],
            env=_env(crashed, second_sql_url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            done = _scalar(crashed, second_sql_url, "select count(*) from document where status='indexed'", poll)
            if done >= threshold:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.02)
        proc.wait(timeout=60)
    poll.dispose()
    assert kills >= 2, "the indexer finished before it could be killed: make the corpus larger"
    _index(crashed, corpus, second_sql_url)  # the re-run
    count, manifest, ids = _state(crashed, models_dir, second_sql_url)
    assert count == manifest == ref_count
    assert ids == ref_ids  # same deterministic points: no duplicate, no orphan


def test_edge_upserts_survive_kill_9_without_flush(tmp_path):
    """The indexer flushes segments only every few seconds: it relies on Qdrant Edge's write-ahead log to
    keep every upsert of a killed process. This checks that assumption on the real store."""
    root = tmp_path / "vectors"
    code = f"""
import os
from pathlib import Path
from aisac_core.store.vectors import EdgeVectorStore, VectorPoint
vs = EdgeVectorStore(Path({str(root)!r}))
vs.ensure_collection("c", 4)
vs.upsert("c", [VectorPoint(id="00000000-0000-0000-0000-%012d" % i, dense=[1.0, 0.5, 0.25, float(i)],
                            sparse_indices=[i], sparse_values=[1.0], payload={{"doc_id": "d"}}) for i in range(300)])
os.kill(os.getpid(), 9)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    from aisac_core.store.vectors import EdgeVectorStore

    vs = EdgeVectorStore(root)
    try:
        vs.ensure_collection("c", 4)
        assert vs.count("c") == 300
    finally:
        vs.close()
