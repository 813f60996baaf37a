"""Test support for the roles tests: a local OpenAI-compatible endpoint on 127.0.0.1 with prepared responses,
and a small indexed store of the project's own notes.

``ChatStub``: a real HTTP server (``http.server`` in a thread) answering ``POST /v1/chat/completions`` like an
OpenAI-compatible endpoint. ``script[role]`` is a list of replies, one per request of that role (the role is read
from the prompt: "You are the Router" ...); a reply is a string (the message content) or ``{"sleep": s}``
(answers after ``s`` seconds, for time-outs) or a callable taking the prompt and returning the reply (a model that
reacts to what its prompt says). Every request is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROLE_MARKERS = {
    "router": "You are the Router",
    "planner": "You are the Planner",
    "evaluator": "You are the Evaluator",
    "researcher": "You are the Researcher",
    "support": "You are the Support judge",
}
FIXTURES = Path(__file__).parent / "fixtures" / "roles"


def load_fixture(name: str) -> Any:
    """A prepared response of tests/fixtures/roles (JSON)."""
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


class ChatStub:
    """A local OpenAI-compatible chat endpoint with scripted replies (see module docstring)."""

    def __init__(self, script: dict[str, list[Any]] | None = None) -> None:
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                prompt = " ".join(m.get("content") or "" for m in body.get("messages", []) if m["role"] == "user")
                role = next((r for r, mark in ROLE_MARKERS.items() if mark in prompt), "unknown")
                stub.requests.append({"role": role, "body": body, "path": self.path})
                queue = stub.script.get(role) or []
                reply: Any = queue.pop(0) if queue else json.dumps({"error": f"no scripted reply for {role}"})
                if callable(reply):
                    reply = reply(prompt)
                if isinstance(reply, dict) and "sleep" in reply:
                    time.sleep(reply["sleep"])
                    reply = reply.get("then", "{}")
                if not isinstance(reply, str):
                    reply = json.dumps(reply)
                out = json.dumps(
                    {
                        "id": "chatcmpl-stub",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model"),
                        "system_fingerprint": "stub",
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:  # the client gave up (time-out test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def roles(self) -> list[str]:
        """The role of every request so far, in order."""
        return [r["role"] for r in self.requests]

    def __enter__(self) -> ChatStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def events(core: Any, run_id: str) -> list[dict[str, Any]]:
    """Trace events of a run (roles.store.run_events)."""
    from aisac_core.roles.store import run_events

    return run_events(core.engine, run_id)


def make_roles_core(tmp_path_factory: Any, models_dir: Path, embedder: Any) -> Any:
    """An application context on a store with two Markdown notes (heat transfer, enzyme kinetics) indexed."""
    from conftest import make_settings
    from fixtures_gen import ENZYME_MD, HEAT_MD

    from aisac_core.context import AppContext

    notes = tmp_path_factory.mktemp("roles-notes")
    (notes / "heat_transfer.md").write_text(HEAT_MD, encoding="utf-8")
    (notes / "enzyme_kinetics.md").write_text(ENZYME_MD, encoding="utf-8")
    c = AppContext(make_settings(tmp_path_factory.mktemp("roles") / "store", models_dir, warm=False), embedder=embedder)
    c.rag.indexer.run([notes])
    c.notes_dir = notes  # type: ignore[attr-defined]
    return c


def release(core: Any) -> None:
    """Undo make_roles_core."""
    core.close()


async def run_graph(core: Any, task: str, **kwargs: Any) -> dict[str, Any]:
    """The whole graph (:meth:`aisac_core.roles.service.RolesService.run`) with the tools of the suite built over
    ``core``."""
    from aisac_servers.serving.toolclient import SuiteTools

    async with SuiteTools(core) as tools:
        return dict(await core.roles.run(task, tools=tools, **kwargs))
