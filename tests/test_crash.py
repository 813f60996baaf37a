"""Acceptance 3: ``kill -9`` of the indexer mid-run, then a re-run, gives the same chunks as a clean run."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures_gen import make_pdf

from conftest import make_settings

AISAC = str(Path(sys.executable).parent / "aisac")
TOPICS = ["boundary layer transition", "protein folding kinetics", "graphene thermal conductivity",
          "soil carbon sequestration", "turbulent premixed flames", "battery electrolyte decomposition",
          "ocean heat uptake", "crystal nucleation rates", "aerosol optical depth", "gene expression noise",
          "seismic wave attenuation", "polymer glass transition", "photocatalytic water splitting",
          "groundwater nitrate transport", "superconducting qubit coherence", "bacterial biofilm growth"]


def _corpus(root: Path) -> Path:
    root.mkdir(parents=True)
    for i, topic in enumerate(TOPICS):
        body = "\n\n".join(
            f"## Section {j}\n\nMeasurement series {j} on {topic} in sample {i}-{j}: the observed value was "
            f"{(i + 1) * (j + 3) * 1.37:.2f} units, with an uncertainty of {j + 1} percent. " * 3
            for j in range(6))
        (root / f"note_{i:02d}.md").write_text(f"# Study of {topic}\n\n{body}\n")
    make_pdf(root / "report_a.pdf")
    make_pdf(root / "report_b.pdf")
    return root


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1")
    return env


def _index(data_dir: Path, corpus: Path) -> dict:
    out = subprocess.run([AISAC, "index", str(corpus), "--json"], env=_env(data_dir), capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def _indexed_rows(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=30) as con:
            return con.execute("select count(*) from document where status='indexed'").fetchone()[0]
    except sqlite3.OperationalError:  # tables not created yet
        return 0


def _state(data_dir: Path, models_dir: Path) -> tuple[int, int, set[str]]:
    """(vector points, manifest chunk sum, point ids) of a store, read in-process after the runs."""
    from aisac_core.context import AppContext

    core = AppContext(make_settings(data_dir, models_dir))
    try:
        vs = core.vectors()
        ids = {pid for pid, _ in vs.scroll_ids("chunks")}
        with sqlite3.connect(data_dir / "aisac.db") as con:
            manifest = con.execute("select coalesce(sum(chunk_count),0) from document where status='indexed'").fetchone()[0]
        return vs.count("chunks"), manifest, ids
    finally:
        core.close()


@pytest.mark.slow
def test_kill_9_mid_run_then_rerun_converges(tmp_path, models_dir):
    corpus = _corpus(tmp_path / "corpus")
    clean = tmp_path / "clean"
    make_settings(clean, models_dir)
    ref = _index(clean, corpus)["counters"]
    assert ref["files_indexed"] == len(TOPICS) + 2 and ref["files_failed"] == 0
    ref_count, ref_manifest, ref_ids = _state(clean, models_dir)
    assert ref_count == ref_manifest == ref["chunks_embedded"]

    crashed = tmp_path / "crashed"
    make_settings(crashed, models_dir)
    kills = 0
    for threshold in (1, 5, 11):
        proc = subprocess.Popen([AISAC, "index", str(corpus)], env=_env(crashed), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            if _indexed_rows(crashed / "aisac.db") >= threshold:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.02)
        proc.wait(timeout=60)
    assert kills >= 2, "the indexer finished before it could be killed: make the corpus larger"
    _index(crashed, corpus)  # the re-run
    count, manifest, ids = _state(crashed, models_dir)
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
