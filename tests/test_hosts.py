"""Host set-up: `aisac install claude-desktop | vscode | cursor [--project DIR] [--print]`.

The host formats are checked against JSON Schemas written from each host's documentation (VS Code: "MCP configuration
reference", code.visualstudio.com/docs/copilot/reference/mcp-configuration; Claude Desktop and Cursor: the
``mcpServers`` object with ``command`` / ``args`` / ``env``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

AISAC = str(Path(sys.executable).parent / "aisac")
STRINGS = {"type": "array", "items": {"type": "string"}}
ENV = {"type": "object", "additionalProperties": {"type": ["string", "null"]}}
#: VS Code mcp.json: "servers" maps names to server objects; a stdio server needs "type": "stdio" and "command"
VSCODE_SCHEMA = {
    "type": "object",
    "properties": {
        "servers": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["type", "command"],
                "properties": {
                    "type": {"const": "stdio"},
                    "command": {"type": "string", "minLength": 1},
                    "args": STRINGS,
                    "env": ENV,
                    "envFile": {"type": "string"},
                    "cwd": {"type": "string"},
                },
                "additionalProperties": False,
            },
        },
        "inputs": {"type": "array"},
    },
    "required": ["servers"],
}
#: Claude Desktop claude_desktop_config.json and Cursor mcp.json: "mcpServers" with command / args / env
MCPSERVERS_SCHEMA = {
    "type": "object",
    "properties": {
        "mcpServers": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["command"],
                "properties": {"command": {"type": "string", "minLength": 1}, "args": STRINGS, "env": ENV},
                "additionalProperties": False,
            },
        }
    },
    "required": ["mcpServers"],
}
SCHEMAS = {"vscode": VSCODE_SCHEMA, "claude-desktop": MCPSERVERS_SCHEMA, "cursor": MCPSERVERS_SCHEMA}


def run(args: list[str], store: Path, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_DATA_DIR=str(store), HOME=str(home), COLUMNS="200")
    return subprocess.run([AISAC, *args], env=env, capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    from aisac_core.projects import init_project

    p = tmp_path_factory.mktemp("proj") / "battery-lab"
    init_project(p, "materials")
    return p


def test_print_vscode_matches_the_documented_format(tmp_path, project):
    """Acceptance 3: `aisac install vscode --print` is a valid VS Code mcp.json (and writes nothing)."""
    out = run(["install", "vscode", "--print", "--project", str(project)], tmp_path / "store", tmp_path, tmp_path)
    assert out.returncode == 0, out.stderr
    cfg = json.loads(out.stdout)
    jsonschema.validate(cfg, VSCODE_SCHEMA)
    entry = cfg["servers"]["aisac-battery-lab"]
    assert entry["command"] == AISAC and entry["args"] == ["serve", "--project", str(project)]
    assert entry["env"] == {"AISAC_DATA_DIR": str(tmp_path / "store"), "HF_HUB_OFFLINE": "1"}
    assert not (tmp_path / ".vscode").exists()


@pytest.mark.parametrize("host", ["claude-desktop", "cursor", "vscode"])
def test_render_each_host(tmp_path, host):
    from aisac_core.projects.hosts import render, server_entry

    cfg = render(host, server_entry(host, data_dir=tmp_path / "store", command="/opt/aisac/bin/aisac"))
    jsonschema.validate(cfg, SCHEMAS[host])
    key = "servers" if host == "vscode" else "mcpServers"
    assert cfg[key]["aisac"]["args"] == ["serve"] and cfg[key]["aisac"]["command"] == "/opt/aisac/bin/aisac"


def test_install_merges_and_keeps_a_backup(tmp_path, project):
    from aisac_core.projects.hosts import install, server_entry

    path = tmp_path / "claude_desktop_config.json"
    old = {"globalShortcut": "Ctrl+Space", "mcpServers": {"fs": {"command": "npx", "args": ["-y", "fs-server"]}}}
    path.write_text(json.dumps(old))
    res = install(
        "claude-desktop", server_entry("claude-desktop", data_dir=tmp_path / "s", project=project), config_path=path
    )
    new = json.loads(path.read_text())
    jsonschema.validate(new, MCPSERVERS_SCHEMA)
    assert new["globalShortcut"] == "Ctrl+Space" and new["mcpServers"]["fs"] == old["mcpServers"]["fs"]
    assert new["mcpServers"]["aisac-battery-lab"]["args"][-1] == str(project) and not res.replaced
    assert res.backup is not None and json.loads(res.backup.read_text()) == old
    res2 = install(
        "claude-desktop", server_entry("claude-desktop", data_dir=tmp_path / "s2", project=project), config_path=path
    )
    assert res2.replaced and res2.backup != res.backup and json.loads(res2.backup.read_text()) == new
    final = json.loads(path.read_text())
    assert len(final["mcpServers"]) == 2
    assert final["mcpServers"]["aisac-battery-lab"]["env"]["AISAC_DATA_DIR"] == str(tmp_path / "s2")


def test_install_creates_a_new_file_without_backup(tmp_path):
    from aisac_core.projects.hosts import install, server_entry

    path = tmp_path / "deep" / ".cursor" / "mcp.json"
    res = install("cursor", server_entry("cursor", data_dir=tmp_path / "s", command="/x/aisac"), config_path=path)
    assert res.backup is None and json.loads(path.read_text()) == {
        "mcpServers": {
            "aisac": {
                "command": "/x/aisac",
                "args": ["serve"],
                "env": {"AISAC_DATA_DIR": str(tmp_path / "s"), "HF_HUB_OFFLINE": "1"},
            }
        }
    }


@pytest.mark.parametrize(
    "content,msg",
    [
        ('{"servers": {', r"not valid JSON \(line 1, column \d+: .*\); it was left untouched"),
        ("[1, 2]", r"the top level is not a JSON object; it was left untouched"),
        ('{"servers": []}', r"'servers' is not a JSON object; it was left untouched"),
    ],
)
def test_unreadable_existing_file_is_left_untouched(tmp_path, content, msg):
    from aisac_core.projects.hosts import HostConfigError, install, server_entry

    path = tmp_path / "mcp.json"
    path.write_text(content)
    with pytest.raises(HostConfigError, match=msg):
        install("vscode", server_entry("vscode", data_dir=tmp_path, command="/x/aisac"), config_path=path)
    assert path.read_text() == content and list(tmp_path.iterdir()) == [path]


def test_default_paths(tmp_path, monkeypatch):
    from aisac_core.projects import hosts

    assert hosts.default_config_path("vscode", cwd=tmp_path) == tmp_path / ".vscode" / "mcp.json"
    assert hosts.default_config_path("cursor", home=tmp_path) == tmp_path / ".cursor" / "mcp.json"
    monkeypatch.setattr(hosts.sys, "platform", "darwin")
    assert (
        hosts.default_config_path("claude-desktop", home=tmp_path)
        == tmp_path / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    )
    monkeypatch.setattr(hosts.sys, "platform", "linux")
    assert (
        hosts.default_config_path("claude-desktop", home=tmp_path)
        == tmp_path / ".config" / "Claude" / "claude_desktop_config.json"
    )


def test_cli_install_writes_the_default_locations(tmp_path, project):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    out = run(["install", "vscode"], tmp_path / "store", work, home)
    assert out.returncode == 0, out.stderr
    assert "added the 'aisac' server in" in out.stderr
    jsonschema.validate(json.loads((work / ".vscode" / "mcp.json").read_text()), VSCODE_SCHEMA)
    out = run(["install", "cursor", "--project", str(project)], tmp_path / "store", work, home)
    assert out.returncode == 0, out.stderr
    cfg = json.loads((home / ".cursor" / "mcp.json").read_text())
    assert cfg["mcpServers"]["aisac-battery-lab"]["args"] == ["serve", "--project", str(project)]
    out = run(["install", "emacs"], tmp_path / "store", work, home)
    assert (
        out.returncode == 1
        and out.stderr.strip() == "error: unknown host 'emacs'; choose one of: claude-desktop, vscode, cursor"
    )
    out = run(["install", "cursor", "--project", str(tmp_path / "nowhere")], tmp_path / "store", work, home)
    assert out.returncode == 1 and "no project manifest there" in out.stderr and "Traceback" not in out.stderr


def test_documented_vscode_example_matches_print(tmp_path, project):
    """docs/hosts.md's `aisac install vscode --print` example is valid and has the shape the command prints."""
    import re

    from aisac_core.projects.hosts import render, server_entry

    doc = (Path(__file__).resolve().parents[1] / "docs" / "hosts.md").read_text()
    sec = doc.split("## One command: `aisac install`", 1)[1].split("\n## ", 1)[0]
    example = json.loads(re.search(r"```json\n(.*?)```", sec, re.S).group(1))
    jsonschema.validate(example, VSCODE_SCHEMA)
    printed = render("vscode", server_entry("vscode", data_dir=tmp_path, project=project))
    (ex_name, ex), (pr_name, pr) = next(iter(example["servers"].items())), next(iter(printed["servers"].items()))
    assert list(ex) == list(pr) and ex["args"][:2] == pr["args"][:2] and set(ex["env"]) == set(pr["env"])
    assert ex_name.startswith("aisac-") and pr_name == "aisac-battery-lab"


def test_install_writes_the_tool_profile(tmp_path):
    """``--tools`` goes into the host's ``args``; a bad profile is refused with the accepted values, nothing written."""
    from aisac_core.projects.hosts import HostConfigError, server_entry

    entry = server_entry("cursor", data_dir=tmp_path / "store", command="/x/aisac", tools="Core, lit")
    assert entry.config["args"] == ["serve", "--tools", "core,lit"]
    assert server_entry("cursor", data_dir=tmp_path, command="/x/aisac").config["args"] == ["serve"]
    with pytest.raises(HostConfigError, match="core, full"):
        server_entry("cursor", data_dir=tmp_path, command="/x/aisac", tools="co re")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    out = run(["install", "cursor", "--tools", "core"], tmp_path / "store", work, home)
    assert out.returncode == 0, out.stderr
    assert json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["aisac"]["args"] == [
        "serve",
        "--tools",
        "core",
    ]
    out = run(["install", "cursor", "--tools", "core,bogus", "--print"], tmp_path / "store", work, home)
    assert out.returncode == 1 and "bogus" in out.stderr and "core, full" in out.stderr, out.stderr


def test_install_writes_the_hosts_roots(tmp_path):
    """Roots go into the host's entry only when the user chose them (issue 42: the current folder is never assumed,
    nor VS Code's or Cursor's ``${workspaceFolder}``, which a host that declares roots gives itself): ``--root`` (or
    ``--roots``), repeatable; without one, no AISAC_ROOTS and a note saying how to add them; a folder that does not
    exist is refused."""
    work, other = tmp_path / "work", tmp_path / "papers"
    work.mkdir()
    other.mkdir()
    for host in ("claude-desktop", "vscode", "cursor"):
        out = run(["install", host, "--print"], tmp_path / "store", work, tmp_path)
        assert out.returncode == 0, out.stderr
        key = "servers" if host == "vscode" else "mcpServers"
        assert "AISAC_ROOTS" not in json.loads(out.stdout)[key]["aisac"]["env"], out.stdout
        assert "no roots set" in out.stderr and "--root /folder/of/papers" in out.stderr, out.stderr
    out = run(["install", "cursor", "--print", "--root", str(other)], tmp_path / "s", work, work)
    assert json.loads(json.loads(out.stdout)["mcpServers"]["aisac"]["env"]["AISAC_ROOTS"]) == [str(other)]
    assert "no roots set" not in out.stderr
    out = run(["install", "vscode", "--print", "--roots", str(other), "--roots", str(work)], tmp_path / "s", work, work)
    assert json.loads(json.loads(out.stdout)["servers"]["aisac"]["env"]["AISAC_ROOTS"]) == [str(other), str(work)]
    out = run(["install", "vscode", "--print", "--roots", str(tmp_path / "nowhere")], tmp_path / "s", work, work)
    assert out.returncode != 0 and "not a folder" in out.stderr and "Traceback" not in out.stderr


def test_install_asks_for_roots_on_a_terminal(tmp_path):
    """On a terminal, ``aisac install`` without ``--root`` asks for the folders (saying what roots are) and writes
    the answer; a real pseudo-terminal, a real ``aisac`` process."""
    import pty
    import select

    papers = tmp_path / "my papers"
    papers.mkdir()
    cfg = tmp_path / "claude.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_DATA_DIR=str(tmp_path / "store"), HOME=str(tmp_path), COLUMNS="200")
    pid, fd = pty.fork()
    if pid == 0:  # the child: aisac on the terminal
        os.chdir(tmp_path)
        os.execve(AISAC, [AISAC, "install", "claude-desktop", "--tools", "core", "--config", str(cfg)], env)
    seen = b""
    answered = False
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 60)
            assert ready, f"aisac install is silent: {seen[-500:]!r}"
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            if not answered and b"roots:" in seen and b"may read" in seen:
                os.write(fd, f"{papers}\n".encode())
                answered = True
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert answered and os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")[-2000:]
    roots = json.loads(json.loads(cfg.read_text())["mcpServers"]["aisac"]["env"]["AISAC_ROOTS"])
    assert roots == [str(papers)]
