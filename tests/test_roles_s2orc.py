"""Acceptance 1: with no model, ``aisac ask "Which datasets does the S2ORC paper describe?"`` over an index of
../shared/data/pdfs answers with anchors from the S2ORC paper and prints the evaluator's report.

Indexing every shared PDF takes minutes on a small machine, so the store holds the S2ORC paper
(papermage/2020.acl-main.447.pdf, Lo et al., ACL 2020) and one other paper (SciBERT, 1903.10676), indexed once
per module; ``aisac ask`` runs as a real subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

QUESTION = "Which datasets does the S2ORC paper describe?"


@pytest.fixture(scope="module")
def s2orc_store(tmp_path_factory, models_dir, shared_embedder, embedding_pool):
    from conftest import SHARED_DATA, make_settings

    from aisac_core.context import AppContext

    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent (fresh clone): shared-data tests skipped")
    pdfs = SHARED_DATA.resolve() / "pdfs" / "papermage"
    s2orc, other = pdfs / "2020.acl-main.447.pdf", pdfs / "1903.10676.pdf"
    data_dir = tmp_path_factory.mktemp("s2orc") / "store"
    c = AppContext(make_settings(data_dir, models_dir, warm=False), embedder=shared_embedder)
    failures: list = []
    with embedding_pool.use(c.engine):  # the papers' chunk vectors, embedded once per run (conftest.EmbeddingPool)
        c.rag.indexer.run([s2orc, other], failures=failures)
    c.close()
    assert not failures, failures
    return data_dir, s2orc


def _ask(data_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "AISAC_ROLES_LLM": "auto", "AISAC_WARM": "0", "COLUMNS": "200"}
    env.pop("AISAC_ROLES_LLM_BASE_URL", None)
    aisac = str(Path(sys.executable).parent / "aisac")
    return subprocess.run(
        [aisac, "ask", QUESTION, "--data-dir", str(data_dir), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ask_without_model_cites_the_s2orc_paper(s2orc_store):
    data_dir, s2orc = s2orc_store
    p = _ask(data_dir, "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["llm"] == "none" and res["answer"]["by"] == "extractive"
    cites = res["answer"]["citations"]
    assert len(cites) >= 2 and all(c["path"] == str(s2orc) for c in cites), [c["path"] for c in cites]
    assert all(c["anchor"]["sha256"] and c["anchor"]["chunk_sha256"] for c in cites)
    text = res["answer"]["text"].lower()
    assert "s2orc" in text and ("corpus" in text or "dataset" in text)
    ev = res["evaluation"]
    assert ev["gates"]["evidence"]["passed"] and ev["passed"] and ev["mode"] == "standard"
    # no model judged the content: the verdict says only that the evidence checked out
    assert ev["verdict"] == "automatic checks passed" and ev["content_judged"] is False
    assert ev["content"] == "not judged (no model)"
    assert all(a["status"] == "ok" for a in ev["gates"]["evidence"]["anchors"])

    # the human output: the answer, the citations with anchors, the evaluator's report, the run id
    p2 = _ask(data_dir, "--mode", "strict")
    assert p2.returncode == 0, p2.stderr
    out = p2.stdout
    assert "run id: run-" in out and "citations:" in out and "2020.acl-main.447" not in out.split("citations:")[0]
    assert "evaluation (strict" in out and "evidence gate:" in out and "S2ORC" in out
    verdict_line = out.split("evaluation (strict")[1].splitlines()[0]
    # strict asks for 3 cited anchors; the extractive answer quotes only the sentences that answer (issue 28), so
    # strict may rightly fail its gate: the verdict then says so, and never claims a content check ("passed")
    assert "automatic checks passed" in verdict_line or "automatic checks failed" in verdict_line, verdict_line
    assert "passed" not in verdict_line
    assert "content: not judged (no model)" in out

    # every step of the run is in the trace
    from sqlmodel import Session, create_engine, select

    from aisac_core.store.tables import TraceEvent

    run_id = out.split("run id: ")[1].split()[0]
    eng = create_engine(f"sqlite:///{data_dir / 'aisac.db'}")
    with Session(eng) as s:
        rows = s.exec(select(TraceEvent).where(TraceEvent.run_id == run_id)).all()
    eng.dispose()
    kinds = {(r.kind, r.tool) for r in rows}
    assert {
        ("role_step", "router"),
        ("role_step", "coordinator"),
        ("role_step", "researcher"),
        ("role_step", "evaluator"),
        ("tool_call", "rag_search"),
    } <= kinds
