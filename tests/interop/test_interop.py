"""Interop with outside MCP clients, all from npm, pinned in package.json:

- the official conformance suite (``@modelcontextprotocol/conformance server --url``) over streamable HTTP;
- the MCP Inspector CLI calling one tool of every server over stdio;
- the TypeScript SDK client (``sdk_client.mjs``) calling one tool of every server over stdio;
- the TypeScript SDK client at protocol 2025-11-25 (``sdk_polled_job.mjs``) running index jobs over stdio the way
  that version allows: a polled job (rag_index, then rag_job_status) and a foreground call with progress.
  (At 2026-07-28 the same SDK runs the index job as a task: tests/test_tasks.py.)

Needs Node.js and npm: ``npm ci`` runs here once (about 40 s, then cached in ~/.npm); without Node, or when the
npm registry is unreachable, the tests skip with a message. Versions are the newest that run on Node 20
(conformance 0.1.14+ and inspector 0.16+ need Node 22).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_settings
from fixtures_gen import PAGE_MARKERS

HERE = Path(__file__).resolve().parent
BIN = HERE / "node_modules" / ".bin"
AISAC = str(Path(sys.executable).parent / "aisac")

#: one harmless tool call per server that succeeds offline (lit runs in replay mode: every source answers
#: "replay_miss", which is a result, not an error)
PLAN = {
    "rag": ("rag_search", {"query": PAGE_MARKERS[1], "k": 2, "detail": "full"}),
    "memory": ("memory_list_sessions", {}),
    "lit": ("lit_search", {"query": "protein folding kinetics"}),
    "data": ("data_list", {}),
    "roles": ("roles_route", {"task": "What is the wall heat transfer coefficient?"}),
    "trace": ("trace_list_runs", {}),
}

#: conformance scenarios that do not apply to aisac, with the reason (each needs a fixture of the SDK's reference
#: "everything" server - a tool, resource or prompt of that exact name - or a capability aisac does not offer)
NOT_APPLICABLE = {
    "completion-complete": "needs completion/complete on the reference prompt test_prompt_with_arguments; aisac "
    "declares no completions capability",
    "tools-call-simple-text": "calls the reference tool test_simple_text (absent; the check accepts the error result)",
    "tools-call-image": "calls the reference tool test_image_content (aisac's data_code_run returns plots as PNG "
    "image content; tested in tests/test_sandbox.py)",
    "tools-call-audio": "calls the reference tool test_audio_content; aisac returns no audio",
    "tools-call-embedded-resource": "calls the reference tool test_embedded_resource",
    "tools-call-mixed-content": "calls the reference tool test_multiple_content_types",
    "tools-call-with-logging": "calls the reference tool test_tool_with_logging",
    "tools-call-with-progress": "calls the reference tool test_tool_with_progress (aisac's rag_index wait=true "
    "reports progress; tested in tests/test_mcp_server.py)",
    "tools-call-sampling": "calls the reference tool test_sampling; aisac does not use sampling",
    "tools-call-elicitation": "calls the reference tool test_elicitation; aisac does not elicit",
    "elicitation-sep1034-defaults": "calls the reference tool test_client_elicitation_defaults; aisac does not elicit",
    "elicitation-sep1330-enums": "calls a reference elicitation tool; aisac does not elicit",
    "server-sse-polling": "calls the reference tool test_reconnection",
    "resources-read-text": "reads the reference resource test://static-text",
    "resources-read-binary": "reads the reference resource test://static-binary",
    "resources-templates-read": "reads the reference template test://template/{id}/data",
    "resources-subscribe": "subscribes to test://watched-resource; aisac declares no resource subscriptions",
    "resources-unsubscribe": "unsubscribes from test://watched-resource; aisac declares no resource subscriptions",
    "prompts-get-simple": "gets the reference prompt test_simple_prompt",
    "prompts-get-with-args": "gets the reference prompt test_prompt_with_arguments",
    "prompts-get-embedded-resource": "gets the reference prompt test_prompt_with_embedded_resource",
    "prompts-get-with-image": "gets the reference prompt test_prompt_with_image",
}


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(AISAC_DATA_DIR=str(data_dir), HF_HUB_OFFLINE="1", AISAC_LIT_REPLAY="1", AISAC_ROLES_LLM="none")
    return env


@pytest.fixture(scope="session")
def node_tools() -> Path:
    """tests/interop/node_modules, installed with `npm ci` on first use; skip without Node or registry."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js/npm not installed: the interop suite (conformance, Inspector, TypeScript SDK) is skipped")
    if not (BIN / "conformance").exists() or not (BIN / "mcp-inspector").exists():
        out = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if out.returncode != 0:
            pytest.skip(f"npm ci failed (registry unreachable?): {out.stderr.strip()[-500:]}")
    return BIN


@pytest.fixture(scope="module")
def interop_store(tmp_path_factory, models_dir, corpus):  # noqa: ANN001, ANN201
    """A store with the corpus indexed; the owner daemon the stdio clients start is stopped at the end."""
    from aisac_core.owner import stop_owner

    data_dir = tmp_path_factory.mktemp("interop") / "store"
    make_settings(data_dir, models_dir)
    out = subprocess.run(
        [AISAC, "index", str(corpus), "--json"], env=_env(data_dir), capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    yield data_dir
    stop_owner(data_dir)


def _servers() -> list[str]:
    from aisac_servers.serving.suite import SERVERS

    return [n for n in SERVERS if n in PLAN]


def test_inspector_cli_calls_one_tool_of_every_server(node_tools, interop_store):
    env = _env(interop_store)
    for server in _servers():
        tool, args = PLAN[server]
        cmd = [str(node_tools / "mcp-inspector"), "--cli"]
        for k in ("AISAC_DATA_DIR", "HF_HUB_OFFLINE", "AISAC_LIT_REPLAY", "AISAC_ROLES_LLM"):
            cmd += ["-e", f"{k}={env[k]}"]
        cmd += [AISAC, "serve", server, "--method", "tools/call", "--tool-name", tool]
        for k, v in args.items():
            cmd += ["--tool-arg", f"{k}={v}"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"{server}: {out.stderr[-2000:]}"
        result = json.loads(out.stdout)
        assert not result.get("isError"), f"{server}: {out.stdout[:1000]}"
        if server == "rag":
            hit = result["structuredContent"]["hits"][0]
            assert hit["path"].endswith("report.pdf") and hit["page"] == 1


def test_typescript_sdk_client_calls_every_server(node_tools, interop_store):
    plan = [{"server": s, "tool": PLAN[s][0], "arguments": PLAN[s][1]} for s in _servers()]
    out = subprocess.run(
        ["node", str(HERE / "sdk_client.mjs"), AISAC, json.dumps(plan)],
        env=_env(interop_store),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=HERE,
    )
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert [x["server"] for x in lines] == [p["server"] for p in plan]
    for x in lines:
        assert not x["isError"] and all(t.startswith(x["server"] + "_") for t in x["tools"]), x
    rag = next(x for x in lines if x["server"] == "rag")
    assert rag["structured"]["hits"][0]["path"].endswith("report.pdf")


#: a tiny corpus per index job of the 2025-11-25 scenario (a few small Markdown files, so the jobs take ~1 s)
POLLED_NOTES = {
    "polled": {
        "pumps.md": "# Pump curves\n\nA centrifugal pump delivers less head as the flow rises; the duty point lies "
        "where the pump curve meets the system curve.\n",
        "valves.md": "# Control valves\n\nThe valve flow coefficient Cv is the flow of water in US gallons per "
        "minute at a pressure drop of 1 psi.\n",
    },
    "waited": {
        "fouling.md": "# Fouling\n\nDeposits on a heat exchanger wall add a fouling resistance in series with "
        "the film resistances.\n",
        "baffles.md": "# Baffles\n\nSegmental baffles in a shell-and-tube exchanger raise the shell-side "
        "velocity and the heat transfer coefficient.\n",
        "tubes.md": "# Tube pitch\n\nA triangular tube pitch packs more tubes in the shell than a square one.\n",
    },
}


def test_typescript_sdk_2025_11_25_runs_an_index_job_as_a_polled_job(node_tools, interop_store, tmp_path):
    """TypeScript SDK 1.32 at 2025-11-25 over stdio (relay to the owner): no tasks at that version, so a polled job
    (rag_index answers a job id, rag_job_status is polled to done) and a wait=true call whose progress strictly
    increases. The host's roots are the two tiny folders (sent by the relay as this host's own settings)."""
    folders = []
    for name, files in POLLED_NOTES.items():
        (tmp_path / name).mkdir()
        for fname, text in files.items():
            (tmp_path / name / fname).write_text(text, encoding="utf-8")
        folders.append(str(tmp_path / name))
    env = {**_env(interop_store), "AISAC_ROOTS": os.pathsep.join(folders)}
    out = subprocess.run(
        ["node", str(HERE / "sdk_polled_job.mjs"), AISAC, *folders],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=HERE,
    )
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert out.returncode == 0 and lines and all(x["ok"] for x in lines), out.stdout[-3000:] + out.stderr[-2000:]
    assert {x["check"] for x in lines} >= {
        "the server answers protocol 2025-11-25",
        "tools/list: the poll-style job tools, no taskSupport",
        "rag_job_status polled until done, every file indexed",
        "rag_index wait=true ends done, every file indexed",
        "progress notifications strictly increase, up to done",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_conformance_suite_over_http(node_tools, interop_store, tmp_path):
    port = _free_port()
    proc = subprocess.Popen(
        [AISAC, "serve", "--transport", "http", "--port", str(port), "--no-token"],  # loopback conformance run
        env=_env(interop_store),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        out = subprocess.run(
            [
                str(node_tools / "conformance"),
                "server",
                "--url",
                f"http://127.0.0.1:{port}/mcp",
                "-o",
                str(tmp_path / "results"),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=HERE,
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    results: dict[str, list[dict]] = {}
    for d in sorted((tmp_path / "results").iterdir()):
        name = re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", d.name).removeprefix("server-")
        results[name] = json.loads((d / "checks.json").read_text())
    assert len(results) >= 25, out.stdout[-3000:]
    rows, bad = [], []
    for name, checks in sorted(results.items()):
        ok = all(c["status"] in ("SUCCESS", "INFO", "WARNING") for c in checks)
        if name in NOT_APPLICABLE:
            rows.append(f"| {name} | n/a | {NOT_APPLICABLE[name]} |")
            continue
        rows.append(
            f"| {name} | {'pass' if ok else 'FAIL'} | "
            f"{sum(c['status'] == 'SUCCESS' for c in checks)}/{len(checks)} checks |"
        )
        if not ok:
            bad.append(
                f"{name}: "
                + "; ".join(f"{c['id']}: {c.get('errorMessage')}" for c in checks if c["status"] == "FAILURE")
            )
    print("\n| scenario | result | detail |\n|---|---|---|\n" + "\n".join(rows))
    assert not bad, bad
    applicable = [n for n in results if n not in NOT_APPLICABLE]
    assert {"server-initialize", "tools-list", "tools-call-error", "ping", "dns-rebinding-protection"} <= set(
        applicable
    )
