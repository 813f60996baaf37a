"""The MCP client's model as a roles backend (``llm='sampling'``).

Handshake-era connections ask the client with ``sampling/createMessage``; on 2026-07-28 connections there is no
back-channel, so the backend raises :class:`~aisac_core.roles.NeedInput` and the tool answers with an
``InputRequiredResult`` carrying the request (:func:`sampling_request`); the client re-enters the tool with the
reply under the request's hash.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import mcp_types as mt
from fastmcp import Context
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from aisac_core.roles import NeedInput, RoleModelError
from aisac_core.roles.backends import MAX_TOKENS, Backend


def stateless_protocol(ctx: Context) -> bool:
    """True when the request's negotiated MCP protocol version has no server-to-client back-channel (2026-07-28 and
    later: no ``sampling/createMessage`` request, the tool answers ``InputRequiredResult`` instead); False without a
    request context."""
    rc = ctx.request_context
    return rc is not None and rc.protocol_version in MODERN_PROTOCOL_VERSIONS


class SamplingBackend(Backend):
    """The MCP client's model through sampling (``ctx``: the fastmcp Context of the current tool call)."""

    name = "sampling"
    model = "client"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def complete(self, messages: list[dict[str, str]], *, key: str) -> str:
        """The client's reply to ``messages``. Raises :class:`~aisac_core.roles.NeedInput` on a 2026-07-28
        connection without the reply yet, :class:`~aisac_core.roles.RoleModelError` when sampling fails."""
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        convo = [m for m in messages if m["role"] != "system"]
        if stateless_protocol(self.ctx):  # 2026-07-28: no back-channel; the client re-enters with the reply
            got = (self.ctx.input_responses or {}).get(key)
            if got is None:
                raise NeedInput(key, system, convo)
            return _sample_text(got)
        sm = [_sampling_message(m) for m in convo]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # the id of the call that asks: the request rides that call's stream (an HTTP client needs no
                # GET stream; the stdio relay, which reads only its calls' streams, forwards it to its host)
                r = await self.ctx.session.create_message(
                    sm,
                    max_tokens=MAX_TOKENS,
                    system_prompt=system,
                    temperature=0,
                    related_request_id=self.ctx.origin_request_id,
                )
        except Exception as exc:
            raise RoleModelError(
                f"MCP sampling failed ({type(exc).__name__}: {exc}); the client may not offer "
                "sampling: use llm='none', an endpoint (AISAC_ROLES_LLM_BASE_URL) or the roles_* "
                "prompts with the submit tools"
            ) from exc
        return _sample_text(r)


def _sampling_message(m: dict[str, str]) -> mt.SamplingMessage:
    text = mt.TextContent(type="text", text=m["content"])
    role: Literal["user", "assistant"] = "assistant" if m["role"] == "assistant" else "user"  # system: sent apart
    return mt.SamplingMessage(role=role, content=text)


def _sample_text(result: Any) -> str:
    content = getattr(result, "content", None)
    if isinstance(content, list):
        return "".join(getattr(c, "text", "") for c in content)
    text: str | None = getattr(content, "text", None)
    if text is None:
        raise RoleModelError("the client's sampling reply holds no text")
    return text


def client_offers_sampling(ctx: Context | None) -> bool:
    """True when the MCP client of ``ctx`` declared the sampling capability."""
    if ctx is None:
        return False
    try:
        caps = ctx.session.client_capabilities
        return caps is not None and caps.sampling is not None
    except Exception:
        return False


def sampling_backend(ctx: Context | None) -> SamplingBackend | None:
    """The sampling backend of the tool call ``ctx`` for :func:`aisac_core.roles.backends.get_backend`, or None
    when there is no call or its client does not offer sampling."""
    return SamplingBackend(ctx) if ctx is not None and client_offers_sampling(ctx) else None


def sampling_request(need: NeedInput) -> mt.InputRequiredResult:
    """The ``InputRequiredResult`` asking the client to sample ``need`` (2026-07-28 connections)."""
    req = mt.CreateMessageRequest(
        params=mt.CreateMessageRequestParams(
            messages=[_sampling_message(m) for m in need.messages],
            system_prompt=need.system,
            max_tokens=MAX_TOKENS,
            temperature=0,
        )
    )
    return mt.InputRequiredResult(input_requests={need.key: req}, request_state=need.key)
