"""LLM backends of the roles and the one place a model is asked for JSON (:func:`ask_json`).

Backends (``Settings.roles.llm`` or a per-call ``llm``):

- ``openai``: any OpenAI-compatible chat-completions endpoint through the ``openai`` package
  (``roles_llm_base_url``, ``roles_llm_model``, the key read from the environment variable named by
  ``roles_llm_api_key_env``); temperature 0 and a fixed seed (``roles_llm_seed``), no client-side retries, a
  timeout of ``roles_llm_timeout_s``.
- ``sampling``: the MCP client's model, where the client offers sampling. The server serving the call builds
  that backend (``aisac_servers.serving.sampling``) and passes it in; it may raise :class:`~aisac_core.roles.NeedInput`
  (the client must answer the request and re-enter the tool).
- ``replay``: only the response cache; a request never seen before is an error.
- ``none`` (and ``auto`` without a base URL): no model; every role uses its deterministic fallback.

The host's own model (prompts + ``roles_submit_*`` tools) is not a backend: it drives the roles from outside.

Every request is hashed (sha256 of its canonical JSON: backend, model, role, prompt version, messages, schema
name, temperature, seed) and every response cached under that hash (:mod:`.store`), valid or not, so a traced run
replays exactly; every request is a ``model_call`` trace event under its role step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import anyio

from aisac_core.jsontypes import JSONObject, JSONValue
from aisac_core.roles import NeedInput, RoleModelError, RolesError
from aisac_core.roles.schemas import parse_json, validate
from aisac_core.roles.store import cache_get, cache_put, request_hash
from aisac_core.trace.recorder import record_tool_call

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

    from aisac_core.roles.env import RoleEnv
    from aisac_core.roles.shapes import ModelReply
    from aisac_core.settings import RolesSettings

SYSTEM = (
    "You are one role of aisac, a retrieval-grounded scientific assistant. Follow the instructions, use only "
    "the evidence given, and reply with a single JSON object that matches the schema, with no other text."
)
#: completion budget of one role reply (tokens)
MAX_TOKENS = 2000
LLM_CHOICES = ("auto", "none", "openai", "sampling", "replay")


class Backend:
    """A chat model: :meth:`complete` turns messages into reply text."""

    name = "none"
    model = "none"

    async def complete(self, messages: list[dict[str, str]], *, key: str) -> str:  # pragma: no cover - interface
        """The model's reply to ``messages`` ([{role: system|user|assistant, content}]); ``key`` is the request hash.
        Raises :class:`RoleModelError` when the model cannot answer."""
        raise NotImplementedError


class OpenAIBackend(Backend):
    """An OpenAI-compatible chat-completions endpoint (temperature 0, fixed seed, no retries)."""

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str, timeout_s: float, seed: int) -> None:
        from openai import OpenAI

        self.base_url, self.model, self.timeout_s, self.seed = base_url, model, timeout_s, seed
        self.client = OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)

    async def complete(self, messages: list[dict[str, str]], *, key: str) -> str:
        import openai

        def call() -> str:
            # role/content dicts are valid message params; openai types them as TypedDicts with literal roles
            params = cast("list[ChatCompletionMessageParam]", messages)
            r = self.client.chat.completions.create(
                model=self.model, messages=params, temperature=0, seed=self.seed, max_tokens=MAX_TOKENS
            )
            if not r.choices or r.choices[0].message.content is None:
                raise RoleModelError(f"the model endpoint {self.base_url} returned no message content")
            return r.choices[0].message.content

        try:
            return await anyio.to_thread.run_sync(call)
        except openai.APITimeoutError as exc:
            raise RoleModelError(
                f"the model endpoint {self.base_url} did not answer within {self.timeout_s:g} s "
                "(AISAC_ROLES_LLM_TIMEOUT_S); check that it runs, or use --llm none"
            ) from exc
        except openai.APIConnectionError as exc:
            raise RoleModelError(
                f"cannot reach the model endpoint {self.base_url} ({exc}); check "
                "AISAC_ROLES_LLM_BASE_URL, or use --llm none"
            ) from exc
        except openai.APIStatusError as exc:
            raise RoleModelError(
                f"the model endpoint {self.base_url} answered HTTP {exc.status_code}: "
                f"{str(exc)[:300]}; check the model name (AISAC_ROLES_LLM_MODEL) and the key "
                "(the variable named by AISAC_ROLES_LLM_API_KEY_ENV)"
            ) from exc


class ReplayBackend(Backend):
    """Answers only from the response cache (a run replayed from its trace)."""

    name = "replay"
    model = "cache"

    async def complete(self, messages: list[dict[str, str]], *, key: str) -> str:
        raise RoleModelError(
            f"replay: no cached model response for request {key[:16]}…; replay works for requests "
            "a traced run made with the same prompts, model and settings"
        )


def get_backend(settings: RolesSettings, llm: str | None = None, sampling: Backend | None = None) -> Backend | None:
    """The backend for ``llm`` (default ``settings.llm``, the roles settings); None means no model (deterministic
    fallbacks).

    ``sampling``: the MCP client's model (built by the serving MCP server; None outside an MCP tool call or when
    the client does not offer sampling), the backend of ``llm='sampling'``.

    Raises :class:`RolesError`: unknown choice; ``openai`` without a base URL; ``sampling`` without a sampling
    backend.
    """
    choice = llm or settings.llm
    if choice not in LLM_CHOICES:
        raise RolesError(f"llm must be one of {', '.join(LLM_CHOICES)}, got {choice!r}")
    if choice == "auto":
        choice = "openai" if settings.llm_base_url else "none"
    if choice == "none":
        return None
    if choice == "replay":
        return ReplayBackend()
    if choice == "sampling":
        if sampling is None:
            raise RolesError(
                "llm='sampling' needs an MCP client that offers sampling; this one does not. Use "
                "llm='none', an OpenAI-compatible endpoint, or the roles_* prompts with the submit tools"
            )
        return sampling
    if not settings.llm_base_url:
        raise RolesError(
            "llm='openai' needs an endpoint: set AISAC_ROLES_LLM_BASE_URL (e.g. "
            "http://127.0.0.1:8000/v1) and AISAC_ROLES_LLM_MODEL"
        )
    key = os.environ.get(settings.llm_api_key_env) or "none"  # local servers accept any key
    return OpenAIBackend(settings.llm_base_url, settings.llm_model, key, settings.llm_timeout_s, settings.llm_seed)


async def ask_json(
    env: RoleEnv,
    backend: Backend,
    *,
    role: str,
    schema: str,
    prompt: str,
    prompt_version: str,
    run_id: str,
    parent_id: int | None,
    check: Callable[[JSONValue], list[str]] | None = None,
) -> ModelReply:
    """Ask ``backend`` for a JSON object valid against ``schema`` (and ``check``, extra validation returning errors).

    A reply that is not JSON or violates the schema gets one repair request (the errors are sent back); a second
    violation raises :class:`RoleModelError` naming the errors. Every request is cached by hash and recorded as a
    ``model_call`` event (arguments: role, request sha256, backend, model, prompt version, repair flag; result:
    the reply text and whether it came from the cache).

    ``env``: the store's engine (cache, trace) and the roles settings (model name, seed).

    Returns ``{"output": obj, "request_sha256", "cached": bool, "repaired": bool}``.
    """
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    reply, key, cached = await _request(
        env, backend, role, schema, prompt_version, messages, run_id, parent_id, repair=False
    )
    errors = _errors(schema, reply, check)
    if not errors:
        return {"output": _object(reply), "request_sha256": key, "cached": cached, "repaired": False}
    repair = messages + [
        {"role": "assistant", "content": reply},
        {
            "role": "user",
            "content": "Your reply is not valid:\n- "
            + "\n- ".join(errors)
            + "\nReply again with the corrected JSON object only.",
        },
    ]
    reply2, key2, cached2 = await _request(
        env, backend, role, schema, prompt_version, repair, run_id, parent_id, repair=True
    )
    errors2 = _errors(schema, reply2, check)
    if errors2:
        raise RoleModelError(
            f"the {role} model's reply violated the {schema} schema after one repair attempt "
            f"({backend.name} {backend.model}): " + "; ".join(errors2[:8])
        )
    return {"output": _object(reply2), "request_sha256": key2, "cached": cached2, "repaired": True}


def _object(reply: str) -> JSONObject:
    """The JSON object of a reply :func:`_errors` found valid (every role schema's root is an object)."""
    obj = parse_json(reply)
    if not isinstance(obj, dict):  # not reached: the schema's root is an object, and the reply passed it
        raise RoleModelError(f"the model's reply is a JSON {type(obj).__name__}, not an object")
    return obj


def _errors(schema: str, reply: str, check: Callable[[JSONValue], list[str]] | None) -> list[str]:
    try:
        obj = parse_json(reply)
    except ValueError as exc:
        return [str(exc)]
    errs = validate(schema, obj)
    if not errs and check is not None:
        errs = check(obj)
    return errs


async def _request(
    env: RoleEnv,
    backend: Backend,
    role: str,
    schema: str,
    prompt_version: str,
    messages: list[dict[str, str]],
    run_id: str,
    parent_id: int | None,
    *,
    repair: bool,
) -> tuple[str, str, bool]:
    s = env.settings
    engine = env.engine
    # the key leaves the backend out and names the model, so ``replay`` (with the same settings) finds what an
    # ``openai`` run cached; sampling replies are keyed under the model "client".
    model = s.llm_model if backend.name == "replay" else backend.model
    request = {
        "role": role,
        "model": model,
        "prompt_version": prompt_version,
        "schema": schema,
        "messages": messages,
        "temperature": 0,
        "seed": s.llm_seed,
    }
    key = request_hash(request)
    t0 = time.perf_counter()
    cached_text = await anyio.to_thread.run_sync(cache_get, engine, key)
    args = {
        "role": role,
        "request_sha256": key,
        "backend": backend.name,
        "model": backend.model,
        "prompt_version": prompt_version,
        "schema": schema,
        "repair": repair,
        "prompt": messages[-1]["content"][:4000],
    }

    async def trace(result: dict[str, object] | None, status: str, error: str | None) -> None:
        """One ``model_call`` trace event of this request (off the event loop)."""
        latency_ms = (time.perf_counter() - t0) * 1000
        await anyio.to_thread.run_sync(
            lambda: record_tool_call(
                engine,
                run_id=run_id,
                server="roles",
                tool=f"{role}.model",
                arguments=args,
                result=result,
                status=status,
                error=error,
                latency_ms=latency_ms,
                kind="model_call",
                parent_id=parent_id,
            )
        )

    if cached_text is not None:
        await trace({"text": cached_text, "cached": True}, "ok", None)
        return cached_text, key, True
    try:
        text = await backend.complete(messages, key=key)
    except NeedInput:
        raise
    except RoleModelError as exc:
        msg = str(exc)
        await trace(None, "exception", msg)
        raise
    await anyio.to_thread.run_sync(
        lambda: cache_put(
            engine, key, backend=backend.name, model=backend.model, role=role, request=request, response=text
        )
    )
    await trace({"text": text, "cached": False}, "ok", None)
    return text, key, False
