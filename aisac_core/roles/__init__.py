"""The roles: Router, Planner, Coordinator (with its Researcher helper) and Evaluator.

- :mod:`.schemas`: the JSON Schemas of every role output and the validation with fixable error messages;
- :mod:`.prompts`: the versioned prompt files and the project overlay;
- :mod:`.backends`: the LLM backends (OpenAI-compatible endpoint, replay from the cache, none; the MCP client's
  model is a backend the MCP server builds) and the response cache keyed by request hash;
- :mod:`.router`, :mod:`.planner`, :mod:`.evaluator`: each role, with a deterministic fallback that needs no model;
- :mod:`.graph`: the workflow graph as data and the headless run behind ``aisac ask`` and ``roles_run``;
- :mod:`.tools`: the suite's tools as the roles see them, through a :class:`~aisac_core.ports.ToolPort`;
- :mod:`.researcher`: evidence from step results, the extractive (no-model) or model-written answer;
- :mod:`.store`: submissions of the host's own model (``roles_submit_*``), the model cache, the role steps in the
  trace; :mod:`.jobs`: background ``roles_run`` jobs;
- :mod:`.service`: :class:`~aisac_core.roles.service.RolesService`, what the tools call (built by the application
  context); :mod:`.env`: what the role functions need from it (protocols); :mod:`.results`: the result types.
"""

from __future__ import annotations

from aisac_core.errors import AisacError


class RolesError(AisacError, ValueError):
    """Bad input to a role (unknown mode, invalid plan, schema violation); the message says what to fix."""


class RoleModelError(AisacError, RuntimeError):
    """The configured model failed (unreachable, timed out, or its reply violated the schema after one repair)."""


class NeedInput(Exception):
    """Raised by a backend that cannot reach the model itself (MCP sampling on a 2026-07-28 connection): the
    tool must ask its client to answer ``messages`` (with the ``system`` prompt) and is re-entered with the reply
    under ``key`` (the request hash). Not an error: a role step interrupted by it is recorded as
    ``input_required``."""

    def __init__(self, key: str, system: str, prompt_messages: list[dict[str, str]]) -> None:
        super().__init__(f"the client must sample request {key}")
        self.key, self.system, self.messages = key, system, prompt_messages


MODES = ("lite", "standard", "strict")
#: Evidence gate per mode: minimum number of verified anchors cited, and the minimum retrieval score each counted
#: anchor needs. Scores are rag_search hybrid scores (0..1, min-max normalised over the candidates, see
#: docs/retrieval.md); the counts 1 / 2 / 3 and the score thresholds are aisac's own choice, not from a published
#: source.
MODE_GATES = {
    "lite": {"min_anchors": 1, "min_score": 0.1},
    "standard": {"min_anchors": 2, "min_score": 0.25},
    "strict": {"min_anchors": 3, "min_score": 0.4},
}


def check_mode(mode: str | None, default: str = "standard") -> str:
    """``mode`` or ``default``, checked against :data:`MODES`. Raises :class:`RolesError`."""
    mode = mode or default
    if mode not in MODES:
        raise RolesError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode
