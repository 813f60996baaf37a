"""Where the owner listens: its Unix socket in the data dir (0600), or loopback TCP when the path is too long for
``sun_path`` (issue 30). Real sockets, and one real owner daemon in a data dir whose path is too long."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import make_settings

from aisac_core.owner import SUN_PATH_MAX, OwnerError, bind_unix_socket, owner_socket_path, remove_socket


def _long_dir(tmp_path: Path) -> Path:
    d = tmp_path
    while len(os.fsencode(d / "owner.sock")) <= SUN_PATH_MAX:
        d = d / ("x" * 40)
    return d


def test_socket_path_or_the_reason_there_is_none(tmp_path):
    assert owner_socket_path(tmp_path) == (tmp_path / "owner.sock", None)
    path, why = owner_socket_path(_long_dir(tmp_path))
    assert path is None and why is not None
    assert "too long for a Unix socket" in why and "loopback TCP" in why and "shorter --data-dir" in why


def test_socket_is_0600_replaces_a_dead_owners_and_refuses_other_files(tmp_path):
    old = os.umask(0o022)  # a permissive umask: the socket's mode must not depend on it
    path = tmp_path / "owner.sock"
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # what a killed owner leaves behind
    try:
        sock = bind_unix_socket(path)
    finally:
        os.umask(old)
    try:
        assert stat.S_ISSOCK(path.stat().st_mode) and stat.S_IMODE(path.stat().st_mode) == 0o600
        with socket.socket(socket.AF_UNIX) as c:
            c.connect(str(path))
    finally:
        remove_socket(path, sock)
        sock.close()
    assert not path.exists()
    path.write_text("not a socket")
    with pytest.raises(OwnerError, match="is not a socket"):
        bind_unix_socket(path)


def test_a_data_dir_too_long_for_a_socket_gets_a_loopback_owner_with_its_token(tmp_path, models_dir):
    from aisac_servers.base.proxying import owner_mcp_transport

    store = _long_dir(tmp_path) / "store"
    make_settings(store, models_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_DATA_DIR=str(store), AISAC_WARM="0")
    code = (
        "from aisac_core.owner import ensure_owner\nfrom aisac_core.settings import Settings\nensure_owner(Settings())"
    )
    try:
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr
        from aisac_core.owner import live_owner

        info = live_owner(store)
        assert info is not None and info.socket is None and info.token
        assert info.url.startswith("http://127.0.0.1:") and "too long for a Unix socket" in (info.socket_note or "")
        assert "loopback TCP" in info.listening() and not (store / "owner.sock").exists()

        async def tools() -> int:
            from fastmcp import Client

            async with Client(owner_mcp_transport(info)) as c:
                return len(await c.list_tools())

        assert anyio.run(tools) > 10
    finally:
        subprocess.run([str(Path(sys.executable).parent / "aisac"), "owner", "stop"], env=env, timeout=60)
