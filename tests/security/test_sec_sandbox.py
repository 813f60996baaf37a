"""Attacks on the code-session boundary, run as an attacker would: from inside a cell, with the Python-level guards
bypassed the ways that work (a library module's ``os``, ``sys.modules``, ``importlib``, C extensions).

Each test asserts containment - no secret in any returned text or image (after base64 decoding), no file outside
the session changed, the server process alive and small, the store intact - once per isolation mode: ``bwrap``
(skipped where bubblewrap cannot run) and ``none`` (the worker's own seccomp filter and Landlock rules; tests that
need Landlock skip where the kernel has none, as docs/data.md "Threat model" says).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import time
from pathlib import Path

import pytest

from aisac_core.sessions.confine import landlock_abi
from aisac_core.sessions.isolation import detect_isolation
from aisac_core.sessions.manager import SandboxManager
from aisac_core.settings import SandboxSettings

SECRET = "aisac-secret-token-5f0c1d"
#: a cell's way around the import allow-list: the ``os`` module a library already imported
OS = "import pandas as pd\nos_ = getattr(pd.io.common, 'os')\nmods = os_.sys.modules\n"


@pytest.fixture(scope="module", params=["bwrap", "unshare", "none"])
def box(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """A sandbox manager per isolation mode over a store that holds secrets (a fake owner token, a SQLite file)
    next to a canary folder outside every session."""
    mode = request.param
    if detect_isolation(mode)[0] != mode:
        pytest.skip(f"isolation {mode} cannot run here: {detect_isolation(mode)[1]}")
    d = tmp_path_factory.mktemp(f"sec-{mode}")
    data = d / "store"
    data.mkdir(mode=0o700)
    (data / "owner.json").write_text(json.dumps({"token": SECRET}))
    (data / "aisac.db").write_text(f"SQLite stand-in {SECRET}")
    canary = d / "canary"
    canary.mkdir()
    (canary / "victim.txt").write_text("untouched")
    m = SandboxManager(
        SandboxSettings(
            isolation=mode,
            cpu_s=30,
            memory_mb=1024,
            job_threshold_s=60,
            timeout_s=60,
            output_chars=20_000,
            file_mb=16,
            max_sessions=16,
            disk_mb=64,
            figure_mb=1,
            reply_mb=8,
        ),
        data / "sessions",
    )
    m.test_canary = canary  # type: ignore[attr-defined]
    m.test_data = data  # type: ignore[attr-defined]
    yield m
    m.shutdown()


def needs_landlock(box: SandboxManager) -> None:
    if box.isolation == "none" and landlock_abi() == 0:
        pytest.skip(
            "isolation none without Landlock: a C extension can read any file the server's user can "
            "(docs/data.md, Threat model)"
        )


def run(box: SandboxManager, session: str, code: str) -> tuple[dict, list[bytes]]:
    return box.run(session, code)


def leaked(result: dict, images: list[bytes]) -> bool:
    """Whether the secret appears in the result (any field) or in any image's bytes."""
    return SECRET in json.dumps(result) or any(SECRET.encode() in b for b in images)


def canary_intact(box: SandboxManager) -> bool:
    c = box.test_canary  # type: ignore[attr-defined]
    return sorted(p.name for p in c.iterdir()) == ["victim.txt"] and (c / "victim.txt").read_text() == "untouched"


def alive(box: SandboxManager, session: str) -> None:
    r, _ = run(box, session, "1 + 1")
    assert r["ok"] and r["result"] == "2", r


FORGE = (
    OS
    + """
import json as _j
_s = mods['struct']
def forge(obj):
    body = _j.dumps(obj).encode()
    for fd in range(3, 12):
        try:
            os_.write(fd, _s.pack('>I', len(body)) + body)
        except OSError:
            pass
"""
)


def test_forged_figure_paths_are_never_opened(box: SandboxManager) -> None:
    owner = str(box.test_data / "owner.json")  # type: ignore[attr-defined]
    code = FORGE + (
        f"forge({{'ok': True, 'seq': 1, 'cell': 1, 'figures': [{{'path': {owner!r}}}, "
        "{'path': '/etc/shadow'}, {'name': 'x.png', 'png_b64': 'bm90IGEgcG5n'}]})\n"
    )
    r, images = run(box, "forge-fig", code)
    assert not leaked(r, images)
    assert all(img.startswith(b"\x89PNG") for img in images)
    alive(box, "forge-fig")


def test_forged_length_header_is_capped(box: SandboxManager) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r, _ = run(
        box,
        "forge-len",
        OS + "_s = mods['struct']\nfor fd in range(3, 12):\n    try:\n"
        "        os_.write(fd, _s.pack('>I', 0xFFFFFFF0) + b'x' * 65536)\n"
        "    except OSError:\n        pass\nimport time\ntime.sleep(5)\n",
    )
    assert r["ok"] is False and "limit" in r["error"], r
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: no 4 GiB buffer
    alive(box, "forge-len")


def test_forged_garbage_reply_stops_only_that_worker(box: SandboxManager) -> None:
    alive(box, "bystander")
    run(box, "bystander", "kept = 7")
    r, _ = run(
        box,
        "forge-junk",
        OS + "for fd in range(3, 12):\n    try:\n"
        "        os_.write(fd, b'\\x00\\x00\\x00\\x05{{{{{')\n    except OSError:\n"
        "        pass\nimport time\ntime.sleep(5)\n",
    )
    assert r["ok"] is False and "not JSON" in r["error"], r
    alive(box, "forge-junk")
    r, _ = run(box, "bystander", "kept")
    assert r["ok"] and r["result"] == "7"


def test_forged_reply_cannot_desynchronise_later_calls(box: SandboxManager) -> None:
    r, _ = run(
        box, "forge-seq", FORGE + "for n in range(1, 6):\n    forge({'ok': True, 'seq': n, 'result': 'FORGED'})\n'real'"
    )
    r2, _ = run(box, "forge-seq", "40 + 2")
    assert r2.get("result") in ("42", None) and r2.get("result") != "FORGED"
    alive(box, "forge-seq")


def test_forged_reply_fields_are_capped_and_typed(box: SandboxManager) -> None:
    r, _ = run(
        box,
        "forge-big",
        FORGE + "forge({'ok': True, 'seq': 1, 'stdout': 'y' * 3_000_000, "
        "'notes': ['n'] * 10_000, 'cell': 'x', 'figures': 'nope'})\n",
    )
    assert len(json.dumps(r)) < 200_000
    alive(box, "forge-big")


def test_server_writes_never_follow_planted_symlinks(box: SandboxManager) -> None:
    canary = box.test_canary  # type: ignore[attr-defined]
    rel = os.path.relpath(canary, box.root / "plant")
    code = OS + (
        f"os_.makedirs('a/b', exist_ok=True)\nos_.chdir('a/b')\n"
        f"for name in ('inputs', '.matplotlib', 'artifacts'):\n"
        f"    try:\n        os_.symlink('../../{rel}', '../../' + name)\n    except OSError as e:\n"
        f"        print('refused', name, e)\n"
        f"os_.chdir('../..')\n"
    )
    run(box, "plant", code)
    for name in ("inputs", ".matplotlib", "artifacts"):  # what a cell could have planted, made sure here
        p = box.root / "plant" / name
        if not p.is_symlink():
            if p.is_dir():
                shutil.rmtree(p)
            p.symlink_to(canary)
    box.write_input("plant", "frame.parquet", b"PAR1 server data")  # data_to_session's write
    box.reset("plant")  # a fresh worker: the font list is seeded again
    r, images = run(box, "plant", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n1")
    assert canary_intact(box)
    assert not (box.root / "plant" / "inputs").is_symlink()
    assert (box.root / "plant" / "inputs" / "frame.parquet").read_bytes() == b"PAR1 server data"
    assert not leaked(r, images)


def test_hard_link_input_is_not_written_through(box: SandboxManager) -> None:
    victim = box.test_canary / "victim.txt"  # type: ignore[attr-defined]
    d = box.session_dir("hardlink") / "inputs"
    d.mkdir(exist_ok=True)
    try:
        os.link(victim, d / "x.parquet")  # what a cell with a bypass could do (same file system)
    except OSError:
        pytest.skip("no hard links across these folders")
    box.write_input("hardlink", "x.parquet", b"new data")
    assert canary_intact(box)


def test_no_process_creation_even_past_the_audit_hook(box: SandboxManager) -> None:
    for code in (
        "os_.system('touch pwned-system')",
        "os_.execv('/bin/sh', ['sh', '-c', 'touch pwned-exec'])",
        "os_.posix_spawn('/bin/sh', ['sh', '-c', 'touch pwned-spawn'], {})",
        "mods['_posixsubprocess'].fork_exec(['/bin/sh'], [b'/bin/sh'], True, (), None, None, -1, -1, -1, "
        "-1, -1, -1, -1, -1, False, False, None, None, None, -1, None, False)",
        "mods['subprocess'].run(['/bin/sh', '-c', 'touch pwned-sub'])",
        "os_.fork()",
    ):
        r, _ = run(box, "proc", OS + code)
        assert r["ok"] is False, (code, r)
        alive(box, "proc")
    assert not list((box.root / "proc").glob("pwned*"))


def test_no_process_creation_at_the_system_call_level(box: SandboxManager) -> None:
    """Past every Python guard (the original fork_exec, reached before the worker replaced it, is not reachable;
    so the check is the kernel's): the worker reports its seccomp filter in force."""
    run(box, "sc", "1")
    assert box._sessions["sc"].confinement.get("seccomp") is True, box._sessions["sc"].confinement


def test_never_uid_0_inside_bubblewrap(box: SandboxManager) -> None:
    if box.isolation != "bwrap":
        pytest.skip("isolation none runs the worker as the server's user")
    r, _ = run(box, "uid", OS + "(os_.getuid(), os_.getgid(), os_.geteuid())")
    assert r["ok"] and "0" not in r["result"].replace("65534", ""), r


@pytest.mark.parametrize("target", ["owner.json", "aisac.db", "/etc/shadow", "/root/.bash_history"])
def test_c_extension_cannot_read_secrets(box: SandboxManager, target: str) -> None:
    needs_landlock(box)
    path = str(box.test_data / target) if not target.startswith("/") else target  # type: ignore[attr-defined]
    code = OS + (
        f"fs = mods['importlib'].import_module('pyarrow.fs')\n"
        f"fs.LocalFileSystem().open_input_stream({path!r}).read().decode('latin-1')"
    )
    r, images = run(box, f"cread-{target.strip('/').replace('/', '_')}", code)
    assert r["ok"] is False and not leaked(r, images), r


@pytest.mark.parametrize("target", ["owner.json", "aisac.db"])
def test_python_cannot_read_store_files(box: SandboxManager, target: str) -> None:
    r, images = run(box, "pyread", OS + f"open({str(box.test_data / target)!r}).read()")  # type: ignore[attr-defined]
    assert r["ok"] is False and not leaked(r, images)
    r, images = run(box, "pyread", OS + f"os_.open({str(box.test_data / target)!r}, os_.O_RDONLY)")  # type: ignore[attr-defined]
    assert r["ok"] is False and not leaked(r, images)


def test_c_extension_cannot_write_outside(box: SandboxManager) -> None:
    needs_landlock(box)
    victim = str(box.test_canary / "victim.txt")  # type: ignore[attr-defined]
    code = OS + (
        f"fs = mods['importlib'].import_module('pyarrow.fs')\n"
        f"s = fs.LocalFileSystem().open_output_stream({victim!r})\ns.write(b'owned')\ns.close()"
    )
    r, _ = run(box, "cwrite", code)
    assert r["ok"] is False and canary_intact(box), r


def test_sessions_cannot_read_each_other(box: SandboxManager) -> None:
    needs_landlock(box)
    run(box, "alice", f"open('diary.txt', 'w').write({SECRET!r})")
    other = str(box.root / "alice" / "diary.txt")
    for code in (
        f"open({other!r}).read()",
        OS + f"mods['importlib'].import_module('pyarrow.fs').LocalFileSystem().open_input_stream({other!r}).read()",
    ):
        r, images = run(box, "mallory", code)
        assert r["ok"] is False and not leaked(r, images), r


def test_server_environment_and_memory_unreachable(box: SandboxManager) -> None:
    needs_landlock(box)
    os.environ["AISAC_TEST_SECRET"] = SECRET
    try:
        code = OS + "ppid = os_.getppid()\nopen(f'/proc/{ppid}/environ', 'rb').read().decode('latin-1')"
        r, images = run(box, "environ", code)
        assert not leaked(r, images)
        r, images = run(box, "environ", OS + "open(f'/proc/{os_.getppid()}/mem', 'rb').read(16)")
        assert r["ok"] is False and not leaked(r, images)
    finally:
        os.environ.pop("AISAC_TEST_SECRET", None)


def test_cannot_signal_the_server(box: SandboxManager) -> None:
    r, _ = run(box, "sig", OS + "os_.kill(os_.getppid(), 9)")
    assert r["ok"] is False
    r, _ = run(box, "sig", OS + "mods['signal'].pthread_kill(1, 9)")
    assert r["ok"] is False
    alive(box, "sig")  # and this test process, the server, is still here


def test_no_socket_even_from_loaded_modules(box: SandboxManager) -> None:
    for code in (
        "mods['socket'].socket().connect(('127.0.0.1', 9))",
        "mods['_socket'].socket(2, 1)",
        "mods['socket'].socket(1, 1).connect('/run/docker.sock')",
    ):
        r, _ = run(box, "sock", OS + code)
        assert r["ok"] is False and ("refused" in r["error"] or "not permitted" in r["error"].lower()), (code, r)


def test_thread_cannot_outlive_its_run(box: SandboxManager) -> None:
    r, _ = run(
        box,
        "spin",
        OS + "th = mods['threading']\nt = th.Thread(target=lambda: [None for _ in iter(int, 1)])\nt.start()\n'started'",
    )
    assert any("thread" in n for n in r["notes"]), r
    pid = box.worker_pid("spin")
    if pid is not None:  # the worker lives on only without the thread: it uses no CPU once the run is over
        ticks = lambda: sum(int(x) for x in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13])  # noqa: E731
        t0 = ticks()
        time.sleep(1.0)
        assert ticks() - t0 < 20, "a thread of the cell still burns CPU after the run"
    alive(box, "spin")


def test_disk_quota_per_session(box: SandboxManager) -> None:
    code = (
        "for i in range(12):\n    with open(f'blob{i}.bin', 'wb') as f:\n        f.write(b'x' * (8 * 2**20))\n'written'"
    )
    r, _ = run(box, "quota", code)
    assert any("disk quota exceeded" in n for n in r["notes"]) or "disk quota" in r.get("error", ""), r
    total = sum(p.stat().st_size for p in (box.root / "quota").rglob("*") if p.is_file())
    assert total <= 64 * 2**20
    alive(box, "quota")


def test_sparse_file_is_capped(box: SandboxManager) -> None:
    r, _ = run(box, "sparse", "f = open('sparse.bin', 'wb')\nf.seek(2**40)\nf.write(b'x')\nf.close()")
    assert r["ok"] is False, r
    alive(box, "sparse")


def test_figure_bombs_are_bounded(box: SandboxManager) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = (
        "import matplotlib.pyplot as plt\nimport numpy as np\nfor i in range(25):\n"
        "    fig = plt.figure(figsize=(20, 20))\n    plt.imshow(np.random.rand(400, 400))\n"
    )
    r, images = run(box, "figbomb", code)
    assert len(images) <= 20 and all(len(b) <= 2**20 for b in images)
    assert any("figure" in n for n in r["notes"]), r["notes"]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 300_000  # KiB
    job = box._jobs[r["job_id"]]
    assert all(isinstance(p, Path) for p in job.figures)  # the job keeps file paths, not image bytes


def test_font_cache_poisoning_does_not_reach_other_sessions(box: SandboxManager) -> None:
    run(box, "poison", "import matplotlib.pyplot as plt\nplt.plot([1])\n1")
    mpl = box.root / "poison" / ".matplotlib"
    for f in mpl.glob("fontlist-*.json"):
        f.write_text('{"_version": "bogus", "ttflist": [], "afmlist": []}')
    run(box, "poison", OS + "open('.matplotlib/fontlist-v390.json', 'w').write('{not json')")
    r, images = run(box, "fresh", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title('ok')\n1")
    assert r["ok"] and len(images) == 1, r


def test_session_folders_are_private(box: SandboxManager) -> None:
    run(box, "perm", "open('x.txt', 'w').write('1')")
    assert stat.S_IMODE((box.root / "perm").stat().st_mode) == 0o700
    assert stat.S_IMODE(box.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(box.state.stat().st_mode) == 0o700


def test_session_name_cannot_escape(box: SandboxManager) -> None:
    from aisac_core.sessions.errors import SandboxError

    for name in ("../x", ".state", "/etc", "a/b", "", "x" * 100, "a\x00b", "s1\n", "s1\r", "s1\n\n", "\ns1", "sé"):
        with pytest.raises(SandboxError, match="session name"):
            box.run(name, "1")
    # issue 38: 's1\n' passed ``re.match`` with '$' (which allows a trailing newline) and made a folder named so
    box.session_dir("named")  # the sessions folder exists: what a bad name would have made is visible
    assert not [p.name for p in box.root.iterdir() if not p.name.isascii() or not p.name.isprintable()]


def test_identifiers_that_become_file_names_are_matched_whole(box: SandboxManager) -> None:
    """The variable a frame is loaded into names its Parquet copy, and ``write_input`` writes the name it is given:
    both are matched whole against closed ASCII sets (no newline, no '/', no non-ASCII letter)."""
    from aisac_core.sessions.errors import SandboxError

    for var in ("df\n", "d/f", "dé", "_df", "1df", "", "x" * 65):
        with pytest.raises(SandboxError, match="variable name"):
            box.load_frame("names", var, box.root / "names" / "inputs" / "x.parquet")
    for name in ("x.parquet\n", "../x", "a/b", ".hidden", "é.parquet", ""):
        with pytest.raises(SandboxError, match="file name"):
            box.write_input("names", name, b"data")
    inputs = box.root / "names" / "inputs"
    assert not inputs.exists() or not list(inputs.iterdir())


def test_server_survives_everything(box: SandboxManager) -> None:
    t0 = time.monotonic()
    alive(box, "final")
    assert canary_intact(box)
    assert json.loads((box.test_data / "owner.json").read_text())["token"] == SECRET  # type: ignore[attr-defined]
    assert time.monotonic() - t0 < 30


def test_forged_early_reply_cannot_hang_the_next_call(box: SandboxManager) -> None:
    """A cell forges its reply and keeps running: the next call's (large) request waits for room in the pipe only
    until its wall time, then the worker is stopped - the server never blocks for good."""
    box.settings.timeout_s, old = 3.0, box.settings.timeout_s
    try:
        r, _ = run(
            box,
            "hang",
            FORGE + "f = getattr(mods['sys'], '_get' + 'frame')(0)\n"
            "while 'req' not in getattr(f, 'f_lo' + 'cals'):\n"
            "    f = getattr(f, 'f_ba' + 'ck')\n"
            "tag = getattr(f, 'f_lo' + 'cals')['req']['seq']\n"
            "forge({'ok': True, 'seq': tag, 'result': 'early'})\nimport time\n"
            "time.sleep(3600)",
        )
    finally:
        box.settings.timeout_s = old
    assert r.get("result") == "early", r  # the forged reply was taken: the cell still sleeps
    t0 = time.monotonic()
    r, _ = box.run("hang", "x = '" + "y" * 500_000 + "'\nlen(x)", timeout_s=3)
    assert time.monotonic() - t0 < 20 and r["ok"] is False and "wall time" in r["error"], r
    alive(box, "hang")


def test_inode_flood_counts_against_the_quota(box: SandboxManager, monkeypatch: pytest.MonkeyPatch) -> None:
    from aisac_core.sessions import sessionfs

    monkeypatch.setattr(sessionfs, "MAX_ENTRIES", 5_000)  # the same check as at 100,000, in a second
    code = (
        "import pandas as pd\nos_ = getattr(pd.io.common, 'os')\nos_.makedirs('f', exist_ok=True)\n"
        "for i in range(8_000):\n    open(f'f/{i}', 'w').close()\n'done'"
    )
    r, _ = run(box, "inodes", code)
    assert any("disk quota exceeded" in n and "entries" in n for n in r["notes"]) or "quota" in r.get("error", ""), r
    assert sum(1 for _ in (box.root / "inodes").rglob("*")) <= 5_000
    alive(box, "inodes")
