"""Sandboxed code sessions (aisac_core.sessions.manager): real worker subprocesses, real limits, real attacks.

Each attack runs in its own session and must (1) come back as a clear ``ok: false`` result (or a contained
success, e.g. truncated output), (2) leave that session usable, and (3) leave another session's state intact.
CPU limits are small here (2 s per run) so the runaway-loop tests stay quick.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from pydantic import TypeAdapter
from sqlmodel import Session, select

from aisac_core.context import AppContext
from aisac_core.sessions.manager import SandboxError, SandboxManager
from aisac_core.sessions.results import CodeRun
from aisac_core.settings import SandboxSettings, Settings
from aisac_core.store.tables import TraceEvent
from aisac_servers.serving.suite import build


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    d = tmp_path_factory.mktemp("sandbox")
    m = SandboxManager(
        SandboxSettings(
            cpu_s=2, memory_mb=1024, job_threshold_s=30, timeout_s=60, output_chars=10_000, file_mb=8, max_sessions=12
        ),
        d / "store" / "sessions",
    )
    yield m
    m.shutdown()


@pytest.fixture(scope="module")
def bystander(sb):  # noqa: ANN001, ANN201
    """A session holding state that every attack must leave alone."""
    r, _ = sb.run("bystander", "secret = 41")
    assert r["ok"], r
    return "bystander"


def run(sb, session: str, code: str, **kw):  # noqa: ANN001, ANN201
    result, _images = sb.run(session, code, **kw)
    return result


def test_state_persists_across_three_calls(sb) -> None:  # noqa: ANN001
    assert run(sb, "keep", "x = 20")["ok"]
    assert run(sb, "keep", "y = x + 1\nprint('y is', y)")["stdout"] == "y is 21\n"
    r = run(sb, "keep", "x + y")
    assert r["ok"] and r["result"] == "41" and r["state_lost"] is False
    names = {v["name"]: v for v in sb.variables("keep")["variables"]}
    assert names["x"]["type"] == "int" and names["y"]["repr"] == "21"


def test_plot_comes_back_as_png_and_artifact(sb) -> None:  # noqa: ANN001
    r, images = sb.run(
        "plot",
        "import matplotlib.pyplot as plt\nimport numpy as np\n"
        "plt.plot(np.arange(10), np.arange(10) ** 2)\nplt.title('squares')",
    )
    assert r["ok"], r
    assert len(images) == 1 and images[0].startswith(b"\x89PNG\r\n\x1a\n")
    fig = r["figures"][0]
    assert Path(fig["path"]).is_file() and fig["bytes"] == len(images[0])
    # the server keeps its copy outside the session folder (which the session's code controls); the session keeps its
    assert not Path(fig["path"]).is_relative_to(sb.root / "plot")
    assert (sb.root / "plot" / "artifacts" / fig["name"]).read_bytes() == images[0]


def test_numpy_pandas_scipy_and_seeds(sb) -> None:  # noqa: ANN001
    code = (
        "import numpy as np, pandas as pd, random\nfrom scipy import stats\n"
        "df = pd.DataFrame({'a': np.random.rand(5)})\n(round(float(df.a.sum()), 6), random.random(), "
        "round(float(stats.norm.cdf(0)), 3))"
    )
    a, b = run(sb, "seed1", code), run(sb, "seed2", code)
    assert a["ok"], a
    assert a["result"] == b["result"]  # same seeds in two fresh sessions
    assert a["result"].endswith("0.5)")


def test_writes_inside_session_dir_allowed(sb) -> None:  # noqa: ANN001
    r = run(sb, "files", "with open('out.txt', 'w') as f:\n    f.write('hello')\nopen('out.txt').read()")
    assert r["ok"] and r["result"] == "'hello'"
    assert (sb.root / "files" / "out.txt").read_text() == "hello"


ATTACKS = {
    "import_os": ("import os", "ImportError", "not allowed"),
    "import_subprocess": ("import subprocess", "ImportError", "not allowed"),
    "import_socket": ("import socket", "ImportError", "not allowed"),
    "import_ctypes": ("from ctypes import CDLL", "ImportError", "not allowed"),
    "read_passwd": ("open('/etc/passwd').read()", "PermissionError", "refused"),
    "write_outside": ("open('/tmp/aisac-escape.txt', 'w').write('x')", "PermissionError", "refused"),
    "write_outside_dotdot": ("open('../escape.txt', 'w').write('x')", "PermissionError", "refused"),
    "dunder_escape": ("[c for c in ().__class__.__base__.__subclasses__()]", "SandboxViolation", "not available"),
    "getattr_escape_system": (
        "import pandas as pd\nos_ = getattr(pd.io.common, 'os')\nos_.system('id')",
        "PermissionError",
        "refused",
    ),
    "fork_bomb": (
        "import pandas as pd\nos_ = getattr(pd.io.common, 'os')\nwhile True:\n    os_.fork()",
        "PermissionError",
        "os.fork",
    ),
    "socket_via_real_import": (  # reaches builtins.__import__ through os.sys.modules: it is the guarded one too
        "import pandas as pd\nos_ = getattr(pd.io.common, 'os')\n"
        "imp = getattr(os_.sys.modules['builtins'], '__im' + 'port__')\n"
        "imp('socket').create_connection(('127.0.0.1', 9), timeout=2)",
        "ImportError",
        "socket",
    ),
    "infinite_loop": ("while True:\n    pass", "CpuLimitExceeded", "CPU time limit"),
    "allocate_20gb": ("import numpy as np\na = np.ones(20 * 2**30 // 8)", "MemoryError", "memory"),
    "allocate_20gb_list": ("a = bytearray(20 * 2**30)", "MemoryError", "memory"),
    "syntax_error": ("def f(:\n  pass", "SyntaxError", "line 1"),
    "exception": ("def f():\n    raise ValueError('bad value 7')\nf()", "ValueError", "bad value 7"),
    "big_file": ("with open('big.bin', 'wb') as f:\n    f.write(b'x' * (64 * 2**20))", "OSError", "large"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_contained(sb, bystander: str, name: str) -> None:  # noqa: ANN001
    code, error_type, needle = ATTACKS[name]
    t0 = time.monotonic()
    r = run(sb, f"atk-{name}", code)
    assert r["ok"] is False, r
    if error_type:
        assert r["error_type"] == error_type, r
    assert needle.lower() in (r["error"] + r.get("traceback", "")).lower(), r
    assert time.monotonic() - t0 < 30
    after = run(sb, f"atk-{name}", "1 + 1")  # the attacked session still answers
    assert after["ok"] and after["result"] == "2", after
    other = run(sb, bystander, "secret + 1")  # and other sessions keep their state
    assert other["ok"] and other["result"] == "42" and not other["state_lost"], other


def test_print_100mb_truncated_with_note(sb) -> None:  # noqa: ANN001
    r = run(sb, "bigprint", "print('x' * 100_000_000)")
    assert r["ok"] and len(r["stdout"]) == 10_000
    assert any("stdout truncated" in n and "99,990,001" in n for n in r["notes"])
    r = run(sb, "bigprint", "for i in range(200_000):\n    print(i)")
    assert r["ok"] and len(r["stdout"]) == 10_000


def test_no_network_at_os_level(sb) -> None:  # noqa: ANN001
    if sb.isolation == "none":
        pytest.skip("no OS isolation on this machine (bwrap/unshare unavailable)")
    # The audit hook refuses sockets; the namespace is checked from outside: the worker has no network interface
    # but loopback, which /proc/net/dev (readable by the parent) of the worker's pid shows.
    run(sb, "net", "1")
    pid = next(s["pid"] for s in sb.list()["sessions"] if s["session"] == "net")
    if sb.isolation == "bwrap":  # pid is the worker inside the PID namespace; use bwrap's child via /proc
        proc_pid = sb.worker_pid("net")
    else:
        proc_pid = pid
    ifaces = [ln.split(":")[0].strip() for ln in Path(f"/proc/{proc_pid}/net/dev").read_text().splitlines()[2:]]
    assert ifaces == ["lo"], ifaces


def test_wall_timeout_kills_and_next_call_reports_state_lost(sb) -> None:  # noqa: ANN001
    assert run(sb, "slow", "v = 1")["ok"]
    t0 = time.monotonic()
    r = run(sb, "slow", "import time\ntime.sleep(30)", timeout_s=1.5)
    assert time.monotonic() - t0 < 10
    assert r["ok"] is False and r["error_type"] == "TimeoutError" and "wall time" in r["error"]
    nxt = run(sb, "slow", "'v' in dir()")
    assert nxt["ok"] and nxt["state_lost"] is True and nxt["result"] == "False"
    assert any("session state lost" in n for n in nxt["notes"])
    again = run(sb, "slow", "1")
    assert again["state_lost"] is False  # reported once


def test_killed_worker_reported_as_state_lost(sb) -> None:  # noqa: ANN001
    assert run(sb, "crash", "z = 5")["ok"]
    w = sb._sessions["crash"].worker
    os.killpg(w.proc.pid, signal.SIGKILL)
    w.proc.wait(timeout=10)
    r = run(sb, "crash", "'z' in dir()")
    assert r["ok"] and r["state_lost"] is True and r["result"] == "False"
    assert any("session state lost" in n and "SIGKILL" in n for n in r["notes"])


def test_long_run_returns_job_and_status_polls(tmp_path: Path) -> None:
    m = SandboxManager(SandboxSettings(job_threshold_s=0.3, cpu_s=5), tmp_path / "sessions")
    try:
        r, _ = m.run("j", "import time\ntime.sleep(1.5)\n'done'")
        assert r["ok"] is False and r["pending"] and r["status"] == "running" and r["job_id"].startswith("job-")
        run_result = TypeAdapter(CodeRun)  # every key a result carries is declared (extra keys refused)
        run_result.validate_python(r)
        with pytest.raises(SandboxError, match="busy"):
            m.run("j", "1")
        st, _ = m.job_status(r["job_id"])
        assert st["status"] == "running"
        run_result.validate_python(st)
        deadline = time.monotonic() + 30
        while st["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            st, _ = m.job_status(r["job_id"])
        assert st["ok"] and st["result"] == "'done'" and st["finished_at"]
        run_result.validate_python(st)
        with pytest.raises(SandboxError, match="unknown job"):
            m.job_status("job-nope")
        # a reset stops a running job: the job reports it, the session starts fresh without a "lost" note
        r, _ = m.run("j", "import time\ntime.sleep(30)")
        assert r["pending"]
        assert m.reset("j")["killed_job"] == r["job_id"]
        st, _ = m.job_status(r["job_id"])
        deadline = time.monotonic() + 15
        while st["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
            st, _ = m.job_status(r["job_id"])
        assert st["ok"] is False and "stopped by data_code_session_reset" in st["error"]
        nxt, _ = m.run("j", "1")
        assert nxt["ok"] and nxt["state_lost"] is False
    finally:
        m.shutdown()


def test_reset_close_and_bad_input(sb) -> None:  # noqa: ANN001
    assert run(sb, "rc", "q = 1")["ok"]
    assert sb.reset("rc")["reset"]
    r = run(sb, "rc", "'q' in dir()")
    assert r["result"] == "False" and r["state_lost"] is False  # a reset is not a loss
    assert sb.close("rc")["closed"]
    assert "rc" not in {s["session"] for s in sb.list()["sessions"]}
    with pytest.raises(SandboxError, match="unknown session"):
        sb.variables("rc")
    with pytest.raises(SandboxError, match="invalid"):
        sb.run("../evil", "1")
    with pytest.raises(SandboxError, match="empty"):
        sb.run("ok", "   ")
    with pytest.raises(SandboxError, match="timeout_s"):
        sb.run("ok", "1", timeout_s=0)


def test_lru_idle_worker_evicted_at_max_sessions(tmp_path: Path) -> None:
    m = SandboxManager(SandboxSettings(max_sessions=2), tmp_path / "sessions")
    try:
        assert m.run("e1", "a = 1")[0]["ok"]
        time.sleep(1.1)  # last-used times have a resolution of one second
        assert m.run("e2", "b = 2")[0]["ok"]
        assert m.run("e3", "c = 3")[0]["ok"]  # e1 (least recently used) is stopped
        alive = {s["session"]: s["alive"] for s in m.list()["sessions"]}
        assert alive == {"e1": False, "e2": True, "e3": True}
        r, _ = m.run("e1", "'a' in dir()")
        assert r["state_lost"] and any("make room" in n for n in r["notes"])
        # every live worker busy: a new session is refused with a clear error
        j1, _ = m.run("e1", "import time\ntime.sleep(20)", wait_s=0.1)
        j2, _ = m.run("e3", "import time\ntime.sleep(20)", wait_s=0.1)
        assert j1["pending"] and j2["pending"]
        with pytest.raises(SandboxError, match="busy worker"):
            m.run("e4", "1")
    finally:
        m.shutdown()


def test_restart_reports_state_lost(tmp_path: Path) -> None:
    st = SandboxSettings()
    m1 = SandboxManager(st, tmp_path / "sessions")
    assert m1.run("p", "k = 3")[0]["ok"]
    m1.shutdown()
    m2 = SandboxManager(st, tmp_path / "sessions")  # a new server process on the same store
    try:
        r, _ = m2.run("p", "'k' in dir()")
        assert r["state_lost"] is True and any("server restarted" in n for n in r["notes"])
    finally:
        m2.shutdown()


def test_isolation_reported(sb) -> None:  # noqa: ANN001
    info = sb.list()
    assert info["isolation"] in ("bwrap", "unshare", "none") and info["isolation_note"]
    assert "numpy" in info["allowed_imports"] and "os" not in info["allowed_imports"]
    assert info["limits"]["memory_mb"] == 1024


@pytest.mark.anyio
async def test_mcp_code_run_plot_image_and_trace(tmp_path: Path) -> None:
    core = AppContext(Settings(data_dir=tmp_path / "store", warm=False, sandbox_cpu_s=5))
    try:
        async with Client(build(["data"], app=core)) as client:
            for code in ("a = 2", "b = a * 3", "a + b"):
                res = await client.call_tool("data_code_run", {"session": "m", "code": code})
            assert res.structured_content["ok"] and res.structured_content["result"] == "8"
            res = await client.call_tool(
                "data_code_run",
                {"session": "m", "code": "import matplotlib.pyplot as plt\nplt.bar(['x', 'y'], [a, b])\nNone"},
            )
            kinds = [c.type for c in res.content]
            assert kinds[0] == "text" and kinds.count("image") == 1
            img = next(c for c in res.content if c.type == "image")
            assert img.mime_type == "image/png"
            bad = await client.call_tool("data_code_run", {"session": "m", "code": "import os"})
            assert bad.structured_content["ok"] is False and "not allowed" in bad.structured_content["error"]
            with pytest.raises(ToolError, match="empty"):
                await client.call_tool("data_code_run", {"session": "m", "code": ""})
            v = await client.call_tool("data_code_variables", {"session": "m"})
            assert {x["name"] for x in v.structured_content["variables"]} >= {"a", "b"}
            lst = await client.call_tool("data_code_session_list", {})
            assert lst.structured_content["sessions"][0]["session"] == "m"
        with Session(core.engine) as db:
            evs = db.exec(select(TraceEvent).where(TraceEvent.tool == "data_code_run").order_by(TraceEvent.id)).all()
        oks = [json.loads(e.result_json)["ok"] if e.result_json else None for e in evs]
        assert oks[:5] == [True, True, True, True, False]
        last = json.loads(evs[4].result_json)
        assert "error" in last and last["code_sha256"] and last["output_sha256"]
        assert json.loads(evs[0].arguments_json)["code"] == "a = 2"
    finally:
        core.sandbox.shutdown()
        core.close()


@pytest.mark.anyio
async def test_code_run_results_are_the_tagged_union_at_the_boundary(tmp_path: Path) -> None:
    """data_code_run and data_code_job_status return a CodeRun: ``running`` (CodeRunPending) or ``done``
    (CodeRunDone, every key but the five conditional ones present), each validating against the tool's output schema
    (oneOf the two closed variants; the listing a host reads names the same keys) and against the core type; a done
    result missing a required key, or carrying an undeclared one, is refused by both."""
    import jsonschema

    from aisac_core.sessions.results import CODE_RUN, CodeRun
    from aisac_servers.shapes.results_schema import output_schema

    schema = output_schema(CodeRun)

    core = AppContext(Settings(data_dir=tmp_path / "store", warm=False, sandbox_cpu_s=5, sandbox_job_threshold_s=0.3))
    try:
        async with Client(build(["data"], app=core)) as client:
            listed = {t.name: t.output_schema for t in await client.list_tools()}
            assert set(listed["data_code_run"]["properties"]) == set(schema["properties"])
            assert listed["data_code_job_status"]["properties"] == listed["data_code_run"]["properties"]
            assert {
                v["properties"]["status"].get("const") or tuple(v["properties"]["status"]["enum"])
                for v in schema["oneOf"]
            } == {"running", ("done", "cancelled")}
            first = await client.call_tool("data_code_run", {"session": "u", "code": "import time\ntime.sleep(1.2)\n7"})
            pending = first.structured_content
            assert pending["status"] == "running" and pending["pending"] is True and pending["ok"] is False
            assert set(pending) == {
                "ok",
                "pending",
                "status",
                "session",
                "job_id",
                "code_sha256",
                "started_at",
                "elapsed_s",
                "error",
            }
            jsonschema.validate(pending, schema)
            jsonschema.validate(pending, listed["data_code_run"])
            done = pending
            for _ in range(100):
                done = (
                    await client.call_tool("data_code_job_status", {"job_id": pending["job_id"]})
                ).structured_content
                if done["status"] != "running":
                    break
                time.sleep(0.1)
            assert done["status"] == "done" and done["ok"] and done["result"] == "7", done
            jsonschema.validate(done, schema)
            jsonschema.validate(done, listed["data_code_job_status"])
            required = set(schema["oneOf"][1]["required"])
            assert required <= set(done) and {"cell", "stdout", "figures", "finished_at"} <= required
            assert "pending" not in done and done["code_sha256"] == pending["code_sha256"]
        CODE_RUN.validate_python(done)
        for bad in ({k: v for k, v in done.items() if k != "cell"}, {**done, "extra": 1}):
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(bad, schema)
            with pytest.raises(ValueError):
                CODE_RUN.validate_python(bad)
    finally:
        core.sandbox.shutdown()
        core.close()
