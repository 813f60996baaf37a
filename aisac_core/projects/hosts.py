"""Host set-up: write (or print) the MCP configuration of Claude Desktop, VS Code or Cursor for aisac.

Formats (checked against each host's documentation, see docs/hosts.md):

- Claude Desktop, ``claude_desktop_config.json``: ``{"mcpServers": {name: {"command", "args", "env"}}}``;
- VS Code, ``.vscode/mcp.json`` (workspace) or the user ``mcp.json``: ``{"servers": {name: {"type": "stdio",
  "command", "args", "env"}}, "inputs": [...]}``;
- Cursor, ``~/.cursor/mcp.json`` (global) or ``.cursor/mcp.json`` (project): ``{"mcpServers": {name: {...}}}``.

:func:`install` merges the aisac entry into an existing file (every other key and server kept), saves the old file
as ``<name>.bak-<UTC time>`` first, and writes atomically. :func:`render` gives the file content without writing.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aisac_core.errors import AisacError
from aisac_core.projects.manifest import load_manifest
from aisac_core.tool_profiles import ToolProfileError, check_value

HOSTS = ("claude-desktop", "vscode", "cursor")
#: the top-level key holding the servers, per host
SERVERS_KEY = {"claude-desktop": "mcpServers", "vscode": "servers", "cursor": "mcpServers"}


class HostConfigError(AisacError):
    """Unknown host, or an existing configuration file that cannot be read or merged."""


def _check_host(host: str) -> str:
    if host not in HOSTS:
        raise HostConfigError(f"unknown host {host!r}; choose one of: {', '.join(HOSTS)}")
    return host


def default_config_path(host: str, *, cwd: Path | None = None, home: Path | None = None) -> Path:
    """Where the host reads its MCP configuration.

    - claude-desktop: ``~/Library/Application Support/Claude/claude_desktop_config.json`` (macOS),
      ``%APPDATA%\\Claude\\claude_desktop_config.json`` (Windows), ``~/.config/Claude/claude_desktop_config.json``
      (Linux builds);
    - vscode: ``<cwd>/.vscode/mcp.json`` (the workspace);
    - cursor: ``~/.cursor/mcp.json`` (every project).
    """
    _check_host(host)
    home = home or Path.home()
    if host == "vscode":
        return (cwd or Path.cwd()) / ".vscode" / "mcp.json"
    if host == "cursor":
        return home / ".cursor" / "mcp.json"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if sys.platform.startswith("win"):
        return Path(os.environ.get("APPDATA", home / "AppData" / "Roaming")) / "Claude" / "claude_desktop_config.json"
    return home / ".config" / "Claude" / "claude_desktop_config.json"


def aisac_command() -> str:
    """Absolute path of the running ``aisac`` executable (hosts do not use the shell's PATH or virtualenv):
    the script this process was started as, else the one next to the Python interpreter, else ``aisac`` on PATH.

    Raises:
        HostConfigError: none found.
    """
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name in ("aisac", "aisac.exe") and argv0.exists():
        return str(argv0.resolve())
    for cand in (Path(sys.executable).parent / "aisac", Path(sys.executable).parent / "aisac.exe"):
        if cand.exists():
            return str(cand)
    found = shutil.which("aisac")
    if found:
        return str(Path(found).resolve())
    raise HostConfigError(
        "cannot find the aisac executable; install aisac (pip install -e .) and run this command "
        "with that installation's aisac"
    )


@dataclass
class Entry:
    """One server entry: its name in the host's file and the object stored under it."""

    name: str
    config: dict[str, Any]


#: settings never copied into a host's configuration file (secrets; the data dir is set on its own)
_NOT_COPIED = frozenset({"data_dir", "http_token", "qdrant_api_key"})


def host_env(settings: Any) -> dict[str, str]:
    """The ``AISAC_*`` variables of this process's environment whose settings differ from their defaults, in the
    form the host's ``aisac serve`` reads back (paths absolute, lists as JSON), for the host's ``env``: the host then
    sees what the user set here. Settings from the store's ``aisac.toml`` are not copied (every host reads that
    file); neither are the data dir (set separately) and secrets (``AISAC_HTTP_TOKEN``, ``AISAC_QDRANT_API_KEY``).

    ``settings``: a :class:`~aisac_core.settings.Settings`. Raises ValueError for an unreadable aisac.toml."""
    from aisac_core.settings import plain_value, setting_field, setting_sources

    out: dict[str, str] = {}
    for name, item in setting_sources(settings).items():
        if item["source"] != "environment" or name in _NOT_COPIED:
            continue
        value = item["value"]
        if value is None or value == plain_value(setting_field(name).get_default(call_default_factory=True)):
            continue
        out["AISAC_" + name.upper()] = value if isinstance(value, str) else json.dumps(value)
    return out


def server_entry(
    host: str,
    *,
    data_dir: Path,
    project: Path | None = None,
    command: str | None = None,
    env: dict[str, str] | None = None,
    tools: str | None = None,
) -> Entry:
    """The aisac server entry for ``host``: ``aisac serve`` (with ``--project DIR`` and ``--tools PROFILE``) and the
    store in ``env``.

    ``tools``: the tool profile the host sees (``core``, ``full``, ``all``, server names;
    :mod:`aisac_core.tool_profiles`), written as ``--tools`` into ``args``; None leaves it to the setting
    (``AISAC_TOOLS``, default ``all``).

    The name is ``aisac``, or ``aisac-<project id>`` with a project (so several projects can sit side by side).
    ``env``: further variables for the host's ``env`` (:func:`host_env`); the data dir and ``HF_HUB_OFFLINE=1``
    are always set.

    Raises:
        HostConfigError: unknown host, or a malformed ``tools`` value (naming the accepted values).
        :class:`~aisac_core.projects.manifest.BootstrapError`: the project does not load.
    """
    _check_host(host)
    args = ["serve"]
    name = "aisac"
    if project is not None:
        p = load_manifest(project)
        args += ["--project", str(p.root)]
        name = f"aisac-{p.id}"
    if tools is not None:
        try:
            args += ["--tools", check_value(tools)]
        except ToolProfileError as exc:
            raise HostConfigError(str(exc)) from exc
    cfg: dict[str, Any] = {}
    if host == "vscode":
        cfg["type"] = "stdio"
    cfg.update(
        command=command or aisac_command(),
        args=args,
        env={**(env or {}), "AISAC_DATA_DIR": str(Path(data_dir).expanduser().resolve()), "HF_HUB_OFFLINE": "1"},
    )
    return Entry(name, cfg)


def render(host: str, entry: Entry) -> dict[str, Any]:
    """The host's whole configuration file holding only ``entry`` (what ``aisac install HOST --print`` shows)."""
    return {SERVERS_KEY[_check_host(host)]: {entry.name: entry.config}}


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HostConfigError(
            f"{path}: cannot read the existing configuration ({exc.strerror}); fix its permissions"
        ) from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HostConfigError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); it was "
            "left untouched: fix it (comments are not supported here) or print the entry with "
            "--print and add it by hand"
        ) from exc
    if not isinstance(data, dict):
        raise HostConfigError(f"{path}: the top level is not a JSON object; it was left untouched: fix it")
    return data


@dataclass
class InstallResult:
    """What :func:`install` did."""

    path: Path
    backup: Path | None
    name: str
    replaced: bool
    content: dict[str, Any]


def install(host: str, entry: Entry, *, config_path: Path | None = None) -> InstallResult:
    """Merge ``entry`` into the host's configuration file (created when absent) and keep a backup of the old file.

    Every other top-level key and every other server is kept; an existing entry of the same name is replaced.
    The file is written to a temporary file and renamed over the old one, so a crash leaves the old or the new.

    Raises:
        HostConfigError: the existing file is not a JSON object, or its servers key is not an object (the file is
            left untouched).
    """
    key = SERVERS_KEY[_check_host(host)]
    path = Path(config_path or default_config_path(host)).expanduser()
    data = _read(path) if path.exists() else {}
    servers = data.get(key, {})
    if not isinstance(servers, dict):
        raise HostConfigError(f"{path}: {key!r} is not a JSON object; it was left untouched: fix it")
    replaced = entry.name in servers
    data[key] = {**servers, entry.name: entry.config}
    backup = None
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        n = 1
        while backup.exists():
            backup = backup.with_name(f"{path.name}.bak-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{n}")
            n += 1
        shutil.copy2(path, backup)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return InstallResult(path=path, backup=backup, name=entry.name, replaced=replaced, content=data)
