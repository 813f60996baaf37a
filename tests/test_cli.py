"""The `aisac` command as a user types it (real subprocesses on a temporary store)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_settings

AISAC = str(Path(sys.executable).parent / "aisac")


def run(
    args: list[str], data_dir: Path, timeout: int = 600, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", COLUMNS="160", **(extra_env or {}))
    return subprocess.run(
        [AISAC, *args, "--data-dir", str(data_dir)], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory, models_dir, corpus) -> Path:
    d = tmp_path_factory.mktemp("cli") / "store"
    make_settings(d, models_dir)
    out = run(["index", str(corpus)], d)
    assert out.returncode == 0, out.stderr
    assert "5 indexed" in out.stderr and "1 catalogued" in out.stderr
    return d


def test_index_again_reads_nothing(cli_store, corpus):
    out = run(["index", str(corpus), "--json"], cli_store)
    c = json.loads(out.stdout)["counters"]
    assert c["files_read"] == 0 and c["chunks_embedded"] == 0 and c["files_skipped"] == 5


def test_search_prints_a_table_of_hits(cli_store):
    out = run(["search", "Michaelis constant of the lipase", "-k", "3"], cli_store)
    assert out.returncode == 0, out.stderr
    assert "enzyme_kinetics.md" in out.stdout and "3 hits" in out.stdout
    js = json.loads(
        run(["search", "zeolite coking", "-k", "2", "--json", "--filter", "file_type=pdf"], cli_store).stdout
    )
    assert js["hits"][0]["page"] == 2 and all(h["file_type"] == "pdf" for h in js["hits"])


def test_status_reports_documents_chunks_and_store(cli_store):
    st = json.loads(run(["status", "--json"], cli_store).stdout)
    assert st["documents"] == {"indexed": 5}
    assert st["chunks_in_manifest"] == st["chunks_in_vector_store"] > 0
    assert st["catalogued_files"] == 1 and st["stale_documents"] == 0
    assert st["data_dir"] == str(cli_store) and st["store_bytes"] > 0
    assert st["code_isolation"]["mode"] in ("bwrap", "unshare", "none", "unavailable") and st["code_isolation"]["note"]
    assert st["trace_gap"] == {"lost": 0, "pending": 0, "runs": [], "detail": ""}  # no trace event lost or waiting


def test_cli_errors_are_clear(cli_store, tmp_path):
    out = run(["index", str(tmp_path / "missing")], cli_store)
    assert out.returncode == 1 and "path not found" in out.stderr and "Traceback" not in out.stderr
    out = run(["search", "heat", "-k", "0"], cli_store)
    assert out.returncode == 1 and "k must be an integer from 1 to 100" in out.stderr
    out = run(["search", "heat", "--filter", "colour=red"], cli_store)
    assert out.returncode == 1 and "unknown filter key" in out.stderr
    out = run(["serve", "nope"], cli_store)
    assert out.returncode == 1 and "unknown server" in out.stderr


def test_second_process_on_a_locked_store_gets_a_clear_error(tmp_path, models_dir, corpus):
    from aisac_core.context import AppContext

    d = tmp_path / "store"
    holder = AppContext(make_settings(d, models_dir))
    holder.vectors()  # this process now owns the embedded vector store
    try:
        out = run(["index", str(corpus / "notes")], d)
        assert out.returncode == 1
        assert "in use by another aisac process" in out.stderr and "Traceback" not in out.stderr
    finally:
        holder.close()


def test_help_texts_name_no_internal_work_items():
    """`aisac --help` and every command's --help say what a command does, never which work item added it."""
    import re

    from typer.main import get_command
    from typer.testing import CliRunner

    from aisac_servers.cli.main import app

    runner = CliRunner()
    commands = sorted(get_command(app).commands)  # type: ignore[attr-defined]
    assert {"index", "search", "serve", "status", "ask", "init", "install", "owner", "dashboard"} <= set(commands)
    internal = re.compile(r"\bissue\s*#?\d|DESIGN\.md", re.I)
    for args in [["--help"], *[[c, "--help"] for c in commands]]:
        res = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert res.exit_code == 0, (args, res.output)
        assert not internal.search(res.output), (args, internal.search(res.output).group(0), res.output)


def test_status_prints_a_short_summary_and_json_on_demand(cli_store, tmp_path):
    """Issue 42: ``aisac status`` speaks plainly (a few lines; ``--json`` for every field); a root that does not exist
    is reported (stderr, and ``missing_roots`` in the JSON)."""
    out = run(["status"], cli_store)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) <= 14 and lines[-1] == "(aisac status --json prints every field)", out.stdout
    assert any(x.startswith("documents") and "indexed" in x for x in lines) and "{" not in out.stdout, out.stdout
    missing = tmp_path / "gone"
    env_roots = {"AISAC_ROOTS": json.dumps([str(missing)])}
    out = run(["status", "--json"], cli_store, extra_env=env_roots)
    assert json.loads(out.stdout)["missing_roots"] == [str(missing)]
    assert f"the root {missing} is not an existing folder" in out.stderr, out.stderr


def test_index_exits_1_when_a_file_failed_and_shows_plain_progress(tmp_path, models_dir, corpus):
    """Non-zero exit when any file failed (each named); progress as plain lines on stderr when it is not a terminal."""
    d = tmp_path / "store"
    make_settings(d, models_dir)
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(corpus / "notes" / "enzyme_kinetics.md", docs / "good.md")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not a PDF body \n%%EOF")
    out = run(["index", str(docs), "--no-owner"], d)
    assert out.returncode == 1, out.stderr
    assert "1 indexed" in out.stderr and "1 failed" in out.stderr and "broken.pdf" in out.stderr, out.stderr
    assert "indexing: 2/2 files" in out.stderr and "\x1b[" not in out.stderr, out.stderr  # plain, no escape codes
    out = run(["index", str(docs), "--no-owner", "--json"], d)
    assert out.returncode == 1 and json.loads(out.stdout)["failures"][0]["path"].endswith("broken.pdf")


def test_ctrl_c_says_what_was_kept(tmp_path, models_dir, corpus):
    """Ctrl-C (SIGINT) during ``aisac index``: one line saying what was kept, exit 130."""
    from conftest import unique_corpus

    d = tmp_path / "store"
    make_settings(d, models_dir)
    big = unique_corpus(tmp_path / "big")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1")
    p = subprocess.Popen(
        [AISAC, "index", str(big), "--no-owner", "--data-dir", str(d)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as from a terminal: a shell running the suite in the background (`make test &`) ignores SIGINT, and an
        # ignored signal stays ignored across exec (POSIX), so Python would never raise KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        first = p.stderr.readline()
        while first and not first.startswith("indexing: "):
            first = p.stderr.readline()
        assert first.startswith("indexing: "), first
        p.send_signal(signal.SIGINT)
        rest = p.stderr.read()
        assert p.wait(timeout=120) == 130, rest
    finally:
        if p.poll() is None:
            p.kill()
    said = [x for x in rest.splitlines() if x.startswith("interrupted:")]
    assert len(said) == 1 and "kept" in said[0] and "Traceback" not in rest and "Aborted" not in rest, rest


def test_output_width_comes_from_the_environment(monkeypatch):
    from aisac_servers.cli.common import output_width

    monkeypatch.setenv("COLUMNS", "173")
    assert output_width() == 173
