"""Terminal escape sequences in file names and document titles are never printed raw by the CLI (issue 30).

The red team put escape sequences in a file name and a PDF title; ``aisac search`` printed them raw, so the
terminal cleared the screen, set its title and rendered a fake line. Here real ``aisac`` subprocesses index and
search such files; no control character may reach stdout or stderr (the output is not a terminal, so rich adds no
styling of its own: any ESC is a leak), the text is shown escaped, and ``--json`` stays valid JSON.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_settings

AISAC = str(Path(sys.executable).parent / "aisac")
#: clear screen + home, an OSC window-title sequence ended by BEL, a C1 CSI, a bidi override, a carriage return
EVIL = "\x1b[2J\x1b[H\x1b]0;owned\x07\x9b31m\u202e\r"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _run(args: list[str], data_dir: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", COLUMNS="200", AISAC_WARM="0")
    return subprocess.run(
        [AISAC, *args, "--data-dir", str(data_dir)], env=env, capture_output=True, text=True, timeout=600
    )


def _no_control(p: subprocess.CompletedProcess) -> None:
    for stream in (p.stdout, p.stderr):
        bad = sorted({hex(ord(c)) for c in CONTROL.findall(stream)})
        assert not bad, (bad, stream[:2000])


@pytest.fixture(scope="module")
def evil_store(tmp_path_factory, models_dir) -> tuple[Path, Path]:
    docs = tmp_path_factory.mktemp("evil-docs")
    (docs / f"notes{EVIL}.md").write_text(
        f"# Kiln log {EVIL} title\n\nThe kiln reached 1,250 degrees on the second firing {EVIL} of the tiles.\n",
        encoding="utf-8",
    )
    (docs / f"broken{EVIL}.pdf").write_bytes(b"not a pdf at all")  # fails: its name is in the failure line
    d = tmp_path_factory.mktemp("evil") / "store"
    make_settings(d, models_dir)
    return d, docs


def test_index_and_search_print_no_control_characters(evil_store):
    store, docs = evil_store
    out = _run(["index", str(docs)], store)
    assert out.returncode in (0, 1), out.stderr
    _no_control(out)
    assert "broken" in out.stderr and "\\u001b" in out.stderr  # the failing file is named, escaped
    out = _run(["search", "kiln second firing", "-k", "3"], store)
    assert out.returncode == 0, out.stderr
    _no_control(out)
    assert "\\u001b[2J" in out.stdout and "kiln" in out.stdout.lower()
    out = _run(["search", "kiln second firing", "-k", "3", "--json"], store)
    _no_control(out)
    res = json.loads(out.stdout)  # still valid JSON; the escapes decode back to the real characters
    assert res["hits"] and any("\x1b[2J" in h["path"] for h in res["hits"])


def test_clean_escapes_every_control_and_bidi_character_and_keeps_text():
    from rich.table import Table

    from aisac_servers.cli.safe import SafeConsole, clean

    assert clean("a\tb\nc") == "a\tb\nc" and clean("Résumé – ok") == "Résumé – ok"
    assert clean("x\x1b[31my\x07\x9b\u202e\r") == "x\\u001b[31my\\u0007\\u009b\\u202e\\u000d"
    assert json.loads(f'"{clean(chr(27) + chr(0x85))}"') == "\x1b\x85"  # the escape form is valid JSON
    console = SafeConsole(record=True, width=120, file=open(os.devnull, "w"))  # noqa: SIM115
    t = Table(title=f"title {EVIL}")
    t.add_column("path")
    t.add_row(f"/docs/a{EVIL}.pdf")
    console.print(t)
    console.print(f"plain {EVIL}", markup=False)
    text = console.export_text()
    assert not CONTROL.search(text) and text.count("\\u001b") >= 6
