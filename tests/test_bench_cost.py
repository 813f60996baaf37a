"""The cost benchmark of issue 44 (bench/cost.py): its command-line option, how it finds mcp-server-qdrant's
interpreter, and that the peer's indexing loop it runs there is valid Python. The measurement itself is a benchmark
(``python -m bench --only cost --peer-python PATH``; docs/retrieval.md, "Cost"), not a test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the bench package

from bench import cost  # noqa: E402
from bench.__main__ import parse_args  # noqa: E402
from bench.common import Context  # noqa: E402


def test_peer_python_from_the_option_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AISAC_BENCH_PEER_PYTHON", raising=False)
    assert cost.peer_python(Context()) is None
    assert cost.peer_python(Context(options={"peer_python": tmp_path / "absent"})) is None  # a wrong path: not used
    exe = tmp_path / "python"
    exe.write_text("")
    assert cost.peer_python(Context(options={"peer_python": exe})) == exe
    monkeypatch.setenv("AISAC_BENCH_PEER_PYTHON", str(exe))
    assert cost.peer_python(Context()) == exe
    args = parse_args(["--only", "cost", "--peer-python", str(exe)])
    assert args.parts == ["cost"] and args.peer_python == exe


def test_the_peer_loop_is_valid_python_with_the_peers_own_store_call() -> None:
    compile(cost.PEER, "<peer>", "exec")
    assert "QdrantConnector" in cost.PEER and "specific_model_path" in cost.PEER
