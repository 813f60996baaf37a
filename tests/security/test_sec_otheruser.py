"""Another local user can neither read nor call anything of a store it does not own (issue 30, acceptance 4).

As root the test creates a throwaway system account (``useradd --system``, removed at teardown), runs one store's
owner daemon (on its Unix socket), an ``aisac serve --transport http`` proxy (token generated) and an ``aisac
dashboard`` (token) as the store's user, then probes everything as the other account with the system Python
(standard library only, ``subprocess.run(user=...)``): reading the database, ``owner.json`` (the token) and
``owner.log``, listing the data dir, connecting to the owner's socket, calling the HTTP server and the dashboard
without the token. Every probe must fail; the same probe run as the store's user succeeds (so it can tell).
The data dir is probed twice: wide open (0755, as a user may have made it: the files' and the socket's own 0600
modes hold) and as aisac creates it (0700).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_settings, stop_process

AISAC = str(Path(sys.executable).parent / "aisac")
#: the other account's interpreter: the system Python (the test's venv lives where other accounts cannot read)
SYSTEM_PYTHON = "/usr/bin/python3"
INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
)
#: what the other account runs: each probe's outcome as JSON (standard library only)
PROBE = r"""
import json, os, socket, sys, urllib.error, urllib.request
a = json.loads(sys.argv[1])
out = {}
for p in a["files"]:
    try:
        with open(p, "rb") as fh:
            fh.read(1)
        out[p] = "read"
    except OSError as e:
        out[p] = f"refused {e.errno}"
try:
    os.listdir(a["store"])
    out["list"] = "listed"
except OSError as e:
    out["list"] = f"refused {e.errno}"
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(a["socket"])
    body = a["init"].encode()
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    out["socket"] = "connected: " + s.recv(64).decode(errors="replace").split("\r\n")[0]
except OSError as e:
    out["socket"] = f"refused {e.errno}"
for name, (url, method, headers) in a["http"].items():
    data = a["init"].encode() if method == "POST" else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        out[name] = urllib.request.urlopen(req, timeout=20).status
    except urllib.error.HTTPError as e:
        out[name] = e.code
    except OSError as e:
        out[name] = f"error {e}"
print(json.dumps(out))
"""
MCP = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def other_user() -> Iterator[tuple[int, int]]:
    """(uid, gid) of a throwaway system account, deleted at teardown."""
    if os.geteuid() != 0:
        pytest.skip("creating another local user needs root (useradd)")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("useradd/userdel are not installed")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} (the other account's interpreter) is missing")
    import pwd

    name = f"aisac-other-{secrets.token_hex(3)}"
    made = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"useradd failed: {made.stderr.strip()}")
    try:
        pw = pwd.getpwnam(name)
        yield pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def _env(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_DATA_DIR=str(store), AISAC_WARM="0")
    return env


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


def _probe(args: dict, user: tuple[int, int] | None) -> dict:
    kw: dict = {} if user is None else {"user": user[0], "group": user[1], "extra_groups": []}
    r = subprocess.run(
        [SYSTEM_PYTHON, "-I", "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        timeout=120,
        **kw,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_another_local_user_reads_and_calls_nothing(tmp_path: Path, models_dir: Path, other_user) -> None:
    base = Path(tempfile.mkdtemp(prefix="aisac-ou-", dir="/tmp"))
    os.chmod(base, 0o755)  # the folder above the store is open: only the store's own modes keep others out
    store = base / "store"
    make_settings(store, models_dir)
    env = _env(store)
    procs: list[subprocess.Popen] = []
    try:
        started = subprocess.run(  # the owner daemon, as a host's first `aisac serve` starts it
            [
                sys.executable,
                "-c",
                "from aisac_core.owner import ensure_owner\nfrom aisac_core.settings import Settings\n"
                "print(ensure_owner(Settings()).socket)",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == str(store / "owner.sock")
        http_port, dash_port = _port(), _port()
        serve = subprocess.Popen(
            [AISAC, "serve", "--transport", "http", "--port", str(http_port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(serve)
        dash = subprocess.Popen(
            [AISAC, "dashboard", "--port", str(dash_port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(dash)
        assert serve.stderr is not None and dash.stderr is not None
        deadline = time.monotonic() + 120
        text = ""
        while time.monotonic() < deadline and not re.search(r"Authorization: Bearer (\S+)'", text):
            text += serve.stderr.readline()
        token = re.search(r"Authorization: Bearer (\S+)'", text).group(1)  # type: ignore[union-attr]
        dash_token = re.search(r"\?token=(\S+)", dash.stderr.readline()).group(1)  # type: ignore[union-attr]
        _wait_port(http_port, deadline)
        _wait_port(dash_port, deadline)

        mcp = f"http://127.0.0.1:{http_port}/mcp"
        board = f"http://127.0.0.1:{dash_port}"
        files = [str(store / n) for n in ("aisac.db", "owner.json", "owner.log")]
        args = {
            "files": files,
            "store": str(store),
            "socket": str(store / "owner.sock"),
            "init": INIT,
            "http": {
                "serve_mcp": [mcp, "POST", MCP],
                "serve_mcp_wrong_token": [mcp, "POST", {**MCP, "Authorization": "Bearer " + "x" * 43}],
                "serve_dashboard": [mcp.replace("/mcp", "/dashboard/"), "GET", {}],
                "dashboard": [board + "/", "GET", {}],
                "dashboard_wrong_token": [board + "/?token=" + "x" * 43, "GET", {}],
            },
        }
        refused = {"serve_mcp": 401, "serve_mcp_wrong_token": 401, "serve_dashboard": 401}
        for mode in (0o755, 0o700):  # a data dir left open by its user, then as aisac makes it
            os.chmod(store, mode)
            got = _probe(args, other_user)
            assert all(got[f].startswith("refused 13") for f in files), got  # EACCES
            assert got["socket"] == "refused 13", got
            assert got["list"] == ("listed" if mode == 0o755 else "refused 13"), got
            assert {k: got[k] for k in refused} == refused, got
            assert got["dashboard"] == 401 and got["dashboard_wrong_token"] == 401, got

        # the same probes as the store's own user get through (the probe can tell), and with the tokens
        mine = {
            **args,
            "http": {
                "serve_mcp": [mcp, "POST", {**MCP, "Authorization": f"Bearer {token}"}],
                "dashboard": [f"{board}/?token={dash_token}", "GET", {}],
            },
        }
        got = _probe(mine, None)
        assert all(got[f] == "read" for f in files), got
        # the socket answers its own user, and still wants the token (defence in depth)
        assert got["socket"] == "connected: HTTP/1.1 401 Unauthorized", got
        assert got["serve_mcp"] == 200 and got["dashboard"] == 200, got
    finally:
        for p in procs:
            stop_process(p)
        subprocess.run([AISAC, "owner", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)
