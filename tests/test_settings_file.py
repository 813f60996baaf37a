"""Settings belong to the store: ``<data_dir>/aisac.toml``, its priority, value forms, one-line errors."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from aisac_core.settings import Settings, behaviour_settings, read_settings_file, setting_sources
from aisac_core.settings_messages import settings_errors

AISAC = str(Path(sys.executable).parent / "aisac")


@pytest.fixture
def clean_env(monkeypatch):
    for k in [k for k in os.environ if k.upper().startswith("AISAC_")]:
        monkeypatch.delenv(k)
    return monkeypatch


def run(args: list[str], data_dir: Path, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    e.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1", **env)
    return subprocess.run(
        [AISAC, *args], env=e, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False
    )


def test_priority_constructor_then_environment_then_file_then_default(tmp_path, clean_env):
    d = tmp_path / "store"
    d.mkdir()
    (d / "aisac.toml").write_text(
        'lit_retries = 5\nroles_mode = "strict"\nroots = ["/from/file"]\nrun_idle_seconds = 60.0\n'
    )
    s = Settings(data_dir=d)
    assert (s.lit.retries, s.roles.mode, s.rag.roots, s.run_idle_seconds) == (5, "strict", [Path("/from/file")], 60.0)
    assert s.lit.timeout_s == 20.0  # default
    clean_env.setenv("AISAC_LIT_RETRIES", "7")
    clean_env.setenv("AISAC_RUN_IDLE_SECONDS", "30")
    s = Settings(data_dir=d)
    assert (s.lit.retries, s.run_idle_seconds, s.roles.mode) == (7, 30.0, "strict")
    s = Settings(data_dir=d, lit_retries=2, roles_mode="lite")
    assert (s.lit.retries, s.roles.mode) == (2, "lite")
    src = setting_sources(Settings(data_dir=d))
    assert src["lit_retries"]["source"] == "environment" and src["roles_mode"]["source"] == "aisac.toml"
    assert src["lit_timeout_s"]["source"] == "default"


def test_the_file_never_chooses_the_data_dir_and_names_itself_when_wrong(tmp_path, clean_env):
    d = tmp_path / "store"
    d.mkdir()
    (d / "aisac.toml").write_text('data_dir = "/elsewhere"\n')
    with pytest.raises(ValidationError) as exc:
        Settings(data_dir=d)
    assert "data_dir" in settings_errors(exc.value)[0] and str(d / "aisac.toml") in settings_errors(exc.value)[0]
    (d / "aisac.toml").write_text('vector_backend = "nope"\nlit_retries = 0\n')
    with pytest.raises(ValidationError) as exc:
        Settings(data_dir=d)
    lines = settings_errors(exc.value)
    assert len(lines) == 2 and all(str(d / "aisac.toml") in ln for ln in lines)
    assert any("vector_backend" in ln and "edge, qdrant" in ln for ln in lines)
    assert read_settings_file(tmp_path / "nothing-here") == {}


@pytest.mark.parametrize("form", ["plain", "pathsep", "json"])
def test_roots_accept_a_path_a_pathsep_list_and_a_json_list(tmp_path, clean_env, form):
    a, b = tmp_path / "a", tmp_path / "b"
    value = {"plain": str(a), "pathsep": f"{a}{os.pathsep}{b}", "json": json.dumps([str(a), str(b)])}[form]
    clean_env.setenv("AISAC_ROOTS", value)
    clean_env.setenv("AISAC_CATALOG_ROOTS", value)
    s = Settings(data_dir=tmp_path / "store")
    want = [a] if form == "plain" else [a, b]
    assert s.rag.roots == want and s.rag.catalog_roots == want


def test_bad_values_are_one_line_naming_variable_value_and_form(tmp_path, clean_env):
    clean_env.setenv("AISAC_LIT_RETRIES", "0")
    with pytest.raises(ValidationError) as exc:
        Settings(data_dir=tmp_path / "store")
    (line,) = settings_errors(exc.value)
    assert line.startswith("AISAC_LIT_RETRIES=0:") and "an integer >= 1 and <= 10" in line
    clean_env.delenv("AISAC_LIT_RETRIES")
    clean_env.setenv("AISAC_ROOTS", "[not json")
    with pytest.raises(ValidationError) as exc:
        Settings(data_dir=tmp_path / "store")
    (line,) = settings_errors(exc.value)
    assert line.startswith("AISAC_ROOTS=[not json:") and "JSON list of paths" in line


@pytest.mark.parametrize("command", [["serve"], ["status"], ["search", "x"], ["owner", "status"]])
@pytest.mark.parametrize(
    "bad", [{"AISAC_LIT_RETRIES": "0"}, {"AISAC_SANDBOX_CPU_S": "-1"}, {"AISAC_VECTOR_BACKEND": "mongo"}]
)
def test_every_command_prints_one_line_and_exits_2(tmp_path, command, bad):
    out = run(command, tmp_path / "store", **bad)
    ((var, value),) = bad.items()
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {var}={value}:") and "accepted:" in lines[0], out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_a_plain_root_path_works_in_every_command(tmp_path):
    out = run(["config", "show"], tmp_path / "store", AISAC_ROOTS=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["settings"]["roots"] == {"value": [str(tmp_path)], "source": "environment"}


def test_config_set_unset_show(tmp_path):
    d = tmp_path / "store"
    assert run(["config", "set", "roots", f"{tmp_path}{os.pathsep}/tmp"], d).returncode == 0
    assert run(["config", "set", "lit_replay", "true"], d).returncode == 0
    assert stat.S_IMODE((d / "aisac.toml").stat().st_mode) == 0o600
    bad = run(["config", "set", "lit_retries", "0"], d)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "lit_retries=0" in bad.stderr
    assert run(["config", "set", "no_such_setting", "1"], d).returncode == 2
    assert run(["config", "set", "data_dir", "/x"], d).returncode == 2
    shown = json.loads(run(["config", "show"], d).stdout)["settings"]
    assert shown["roots"]["value"] == [str(tmp_path), "/tmp"] and shown["lit_replay"] == {
        "value": True,
        "source": "aisac.toml",
    }
    assert run(["config", "unset", "lit_replay"], d).returncode == 0
    assert read_settings_file(d) == {"roots": [str(tmp_path), "/tmp"]}


def test_behaviour_settings_hold_no_secrets_and_no_per_host_settings(tmp_path, clean_env):
    """Roots are a host's own since issue 31 (two hosts with other roots share one owner): they are not among the
    store's behaviour settings and do not change the digest; a store setting (chunk size) does."""
    clean_env.setenv("AISAC_HTTP_TOKEN", "s3cret")
    values, digest = behaviour_settings(Settings(data_dir=tmp_path))
    assert "s3cret" not in json.dumps(values) and "lit_replay" in values
    assert "roots" not in values and "owner_idle_seconds" not in values
    assert behaviour_settings(Settings(data_dir=tmp_path, roots=[tmp_path]))[1] == digest
    assert behaviour_settings(Settings(data_dir=tmp_path, chunk_max_tokens=128))[1] != digest
    assert behaviour_settings(Settings(data_dir=tmp_path, warm=False))[1] == digest


def test_install_writes_the_settings_the_user_set(tmp_path):
    out = run(
        ["install", "vscode", "--print"],
        tmp_path / "store",
        AISAC_ROOTS=str(tmp_path),
        AISAC_ROLES_MODE="strict",
        AISAC_LIT_RETRIES="3",
        AISAC_HTTP_TOKEN="s3cret",
    )
    assert out.returncode == 0, out.stderr
    env = json.loads(out.stdout)["servers"]["aisac"]["env"]
    assert json.loads(env["AISAC_ROOTS"]) == [str(tmp_path)] and env["AISAC_ROLES_MODE"] == "strict"
    assert "AISAC_LIT_RETRIES" not in env and "AISAC_HTTP_TOKEN" not in env  # the default; a secret
    assert env["AISAC_DATA_DIR"] == str(tmp_path / "store")


def test_config_set_unknown_name_lists_the_valid_names(tmp_path):
    out = run(["config", "set", "rootz", "/x"], tmp_path / "store")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "did you mean roots?" in out.stderr and "valid names:" in out.stderr and "lit_replay" in out.stderr


def test_ask_rejects_a_bad_mode_before_any_owner_starts(tmp_path):
    store = tmp_path / "store"
    out = run(["ask", "What is Km?", "--mode", "ultra"], store)
    assert out.returncode != 0 and "mode 'ultra' is not one of lite, standard, strict" in out.stderr
    assert not (store / "owner.json").exists() and not (store / "owner.log").exists()


def test_index_of_nothing_indexable_says_why_and_fails(tmp_path):
    empty, junk = tmp_path / "empty", tmp_path / "junk"
    empty.mkdir()
    junk.mkdir()
    (junk / "a.xyz").write_text("x")
    (junk / "b.xyz").write_text("y")
    out = run(["index", str(empty), "--no-owner"], tmp_path / "store")
    assert out.returncode == 2 and "holds no files" in out.stderr and ".pdf" in out.stderr
    out = run(["index", str(junk), "--no-owner"], tmp_path / "store")
    assert out.returncode == 2 and "2 file(s) skipped as unsupported (2 .xyz)" in out.stderr


def test_help_texts_flow_without_gaps(tmp_path):
    """Command help is the docstring with its paragraphs' line breaks joined: no wide gaps inside a sentence."""
    import re

    out = run(["--help"], tmp_path / "store", COLUMNS="220")
    assert out.returncode == 0
    # wide enough for every summary: each stays on one line, its words one space apart
    assert "While the store's owner process runs, the owner indexes them" in out.stdout, out.stdout
    assert re.search(r"in the store's owner process while it runs\)", out.stdout), out.stdout
