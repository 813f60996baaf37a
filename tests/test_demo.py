"""The README's first command, `make demo` (examples/demo.py), end to end as a user runs it: a real subprocess on a
throwaway store ($AISAC_DATA_DIR), indexing the examples (and ../shared/data/pdfs when present), then a real MCP
client over stdio through the owner daemon. The demo checks every search hit's evidence anchor against the file and
the chunk text, answers a question with roles_run and verifies the run's provenance; it exits 0 only when every
step worked.

Its store's embedding cache is seeded from the run's :class:`conftest.EmbeddingPool` (the papermage papers'
chunk vectors, which tests/test_extractive.py and tests/test_roles_s2orc.py embed too) and the demo's new vectors go
back to the pool: the vectors are the model's own, the demo's subprocess still parses, chunks, indexes and searches
everything (its queries are embedded by the model), and a text is embedded once per run instead of once per file.
The pool's lock is held for the demo's run; under `make test` this file runs first in the pool's chain
(conftest.POOL_CHAINS: the pool's users one after another on one worker), so no other file waits for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_demo_runs_and_says_ok(tmp_path: Path, embedding_pool) -> None:  # noqa: ANN001
    from aisac_core.context import AppContext
    from aisac_core.settings import Settings

    store = tmp_path / "store"
    # only the SQL store is opened here (migrated, as the demo's first `aisac index` would); the demo's subprocess
    # still assembles the offline model in the data dir and opens the vector store itself
    app = AppContext(Settings(data_dir=store))
    try:
        with embedding_pool.use(app.engine):
            _run_the_demo(store)
    finally:
        app.close()


def _run_the_demo(store: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AISAC_")},
        "AISAC_DATA_DIR": str(store),
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "160",
    }
    try:
        p = subprocess.run(
            [sys.executable, str(REPO / "examples" / "demo.py")],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:  # the demo stops the owner daemon itself; make sure it is gone even when the demo failed midway
        subprocess.run(
            [sys.executable, "-m", "aisac_servers.cli", "owner", "stop"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    assert "demo ok" in p.stdout and "tool calls traced under run" in p.stdout, p.stdout[-3000:]
