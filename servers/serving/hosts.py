"""Per-host settings on a shared owner: what one host connection sees and may reach, applied per request.

The store's owner serves every host of the store. Settings that keep the store consistent (embedding model,
chunking, parser, SQL and vector stores) are the owner's: a host with others is refused
(:func:`aisac_core.owner.ensure_owner`). The settings of :data:`aisac_core.settings.PER_HOST` belong to the host
connection instead; a relay (:mod:`aisac_servers.owner.relay`) sends them with every request in the header
:data:`~aisac_servers.base.proxying.HOST_HEADER` (JSON ``{roots, tools, roles_llm, roles_mode, memory_scope}``) and
:class:`HostView` applies them for that request only:

- ``roots``: the corpus roots of the request (:data:`aisac_servers.serving.common.REQUEST_ROOTS`, which the tools
  pass to the services as their ``roots`` argument; a client that declares roots gives its own, :class:`ClientRoots`): ``rag_index``, ``data_load``,
  ``lit_import`` resolve paths in the host's roots, so two hosts with other roots work side by side, each refused the
  other's folders;
- ``roles_llm`` / ``roles_mode``: the defaults of a ``roles_*`` tool's ``llm`` and ``mode`` arguments;
- ``memory_scope``: the connection's default memory scope (:data:`aisac_core.settings.HOST_MEMORY_SCOPE`), which
  the memory tools apply where a call leaves a scope key open;
- ``tools``: the profile is applied by the relay itself (it filters lists and refuses calls), so a request that came
  through a proxy (header ``X-Aisac-Client``) sees the whole suite; a direct client of a user-started HTTP owner gets
  that server's own profile (``aisac serve --transport http --tools core``).

Only a server that trusts its callers with the store's files honours the header (``accept_host_settings``: the owner
daemon, a loopback HTTP owner): its bearer token is readable only by the user (``owner.json``, 0600), who could start
an owner with any roots anyway. A server on another interface ignores it.
"""

from __future__ import annotations

import json
import logging
import re
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from fastmcp.exceptions import DisabledError, NotFoundError
from fastmcp.server.dependencies import get_http_headers
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from aisac_core.context import AppContext
from aisac_core.host_roots import missing_roots, roots_from_host
from aisac_core.settings import HOST_MEMORY_SCOPE, HostRoots
from aisac_core.tool_profiles import ToolProfile, filter_instructions

from ..base.proxying import CLIENT_HEADER, HOST_HEADER, ROOTS_WAIT_S
from ..shapes.toollist import scrubbed
from .common import REQUEST_ROOTS, MissingResource

log = logging.getLogger("aisac.owner")

#: JSON-RPC "invalid params": an unknown tool or prompt, a prompt's missing argument (MCP 2025-11-25, error handling)
INVALID_PARAMS = -32602
#: "resource not found" up to MCP 2025-11-25 (retired at 2026-07-28, which uses :data:`INVALID_PARAMS`)
RESOURCE_NOT_FOUND = -32002
_MISSING = re.compile(r"Missing required arguments?: \{?([^}]*)\}?")

#: the roles tools' arguments whose default a host setting gives (argument -> flat setting name)
_ROLES_DEFAULTS = {"llm": "roles_llm", "mode": "roles_mode"}


def _headers() -> dict[str, str]:
    return get_http_headers(include={CLIENT_HEADER.lower(), HOST_HEADER.lower()})  # {} outside an HTTP request


def host_of_request(accept: bool) -> dict[str, Any] | None:
    """The per-host settings the current request carries (header :data:`HOST_HEADER`), or None (no header, not
    honoured, or not a JSON object)."""
    if not accept:
        return None
    raw = _headers().get(HOST_HEADER.lower())
    if not raw:
        return None
    try:
        val = json.loads(raw)
    except ValueError:
        log.warning("ignored a malformed %s header", HOST_HEADER)
        return None
    return val if isinstance(val, dict) else None


class HostView(Middleware):
    """Applies the requesting host's settings (module docstring). ``profile``: the server's own tool profile, for
    clients that reach it directly (None: every tool); ``accept_host_settings``: honour the relays' header."""

    def __init__(self, app: AppContext, profile: ToolProfile | None = None, *, accept_host_settings: bool) -> None:
        self.app = app
        self.profile = profile  # ``all`` too: it hides tools_search / tools_call, which the owner serves
        self.accept = accept_host_settings
        self.client_roots = ClientRoots()

    # -------------------------------------------------------------------------------------------- the profile

    def _profile(self) -> ToolProfile | None:
        """The profile of the current request: None through a proxy (which applies the host's own), else the
        server's."""
        if self.profile is None or _headers().get(CLIENT_HEADER.lower()):
            return None
        return self.profile

    async def on_list_tools(self, context: MiddlewareContext, call_next: CallNext) -> Sequence[Any]:
        pr = self._profile()
        tools: Sequence[Any] = await call_next(context)
        if pr is None:
            return tools
        kept = [t for t in tools if pr.lists(t.name)]
        names = {t.name for t in kept}
        hidden = {t.name for t in tools if t.name not in names and not (pr.search and pr.allows(t.name))}
        return [scrubbed(t, hidden) for t in kept]

    async def on_list_prompts(self, context: MiddlewareContext, call_next: CallNext) -> Sequence[Any]:
        pr = self._profile()
        prompts = await call_next(context)
        return prompts if pr is None else [p for p in prompts if pr.allows_prompt(p.name)]

    async def on_list_resources(self, context: MiddlewareContext, call_next: CallNext) -> Sequence[Any]:
        pr = self._profile()
        res = await call_next(context)
        return res if pr is None else [r for r in res if pr.allows_uri(str(r.uri))]

    async def on_list_resource_templates(self, context: MiddlewareContext, call_next: CallNext) -> Sequence[Any]:
        pr = self._profile()
        res = await call_next(context)
        return res if pr is None else [r for r in res if pr.allows_uri(str(r.uri_template))]

    async def on_initialize(self, context: MiddlewareContext, call_next: CallNext) -> Any:
        return self._instructions(await call_next(context))

    async def on_discover(self, context: MiddlewareContext, call_next: CallNext) -> Any:
        """The 2026-07-28 discovery result, without the ``logging`` capability (deprecated at that version)."""
        result = self._instructions(await call_next(context))
        caps = getattr(result, "capabilities", None)
        if caps is not None and getattr(caps, "logging", None) is not None:
            result = result.model_copy(update={"capabilities": caps.model_copy(update={"logging": None})})
        return result

    def _instructions(self, result: Any) -> Any:
        pr = self._profile()
        text = getattr(result, "instructions", None)
        if pr is None or not isinstance(text, str):
            return result
        return result.model_copy(update={"instructions": filter_instructions(text, pr.servers)})

    # -------------------------------------------------------------------------------------------- requests

    def _roots(self, host: dict[str, Any] | None) -> HostRoots | None:
        roots = host.get("roots") if host is not None else None
        if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
            return None
        return HostRoots(tuple(Path(r) for r in roots), tuple(self.app.settings.rag.catalog_roots))

    async def _request_roots(self, context: MiddlewareContext, host: dict[str, Any] | None) -> HostRoots | None:
        """The roots of the request: a relay's host header (the relay asked its host, :mod:`..owner.hostroots`), else
        the roots the connected client declares (``roots/list``, :class:`ClientRoots`), else None (the settings'
        ``roots``, i.e. ``AISAC_ROOTS``)."""
        if host is not None:
            return self._roots(host)
        paths = await self.client_roots.of(context)
        if paths is None:
            return None
        return HostRoots(paths, tuple(self.app.settings.rag.catalog_roots))

    async def on_notification(self, context: MiddlewareContext, call_next: CallNext) -> Any:
        if context.method == "notifications/roots/list_changed":
            self.client_roots.forget(context)  # asked again at the connection's next request
        return await call_next(context)

    async def on_call_tool(self, context: MiddlewareContext, call_next: CallNext) -> Any:
        pr = self._profile()
        name = context.message.name
        if pr is not None and not pr.allows(name):
            raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}: this server exposes the tool profile {pr.value!r}")
        host = host_of_request(self.accept)
        if host is not None and name.startswith("roles_"):
            args = dict(context.message.arguments or {})
            for arg, setting in _ROLES_DEFAULTS.items():
                if args.get(arg) is None and host.get(setting) is not None and _takes(context, arg):
                    args[arg] = host[setting]
            context = context.copy(message=context.message.model_copy(update={"arguments": args}))
        token = REQUEST_ROOTS.set(await self._request_roots(context, host))
        scope = host.get("memory_scope") if host is not None else None
        scope_token = HOST_MEMORY_SCOPE.set(scope if isinstance(scope, str) else None)
        try:
            return await call_next(context)
        except (NotFoundError, DisabledError) as exc:  # MCP "Tools", error handling: an unknown tool is a protocol
            raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}; list the tools with tools/list") from exc
        finally:
            HOST_MEMORY_SCOPE.reset(scope_token)
            REQUEST_ROOTS.reset(token)

    async def on_read_resource(self, context: MiddlewareContext, call_next: CallNext) -> Any:
        pr = self._profile()
        uri = str(context.message.uri)
        if pr is not None and not pr.allows_uri(uri):
            raise MCPError(_not_found_code(context), f"Resource not found: {uri!r}")
        token = REQUEST_ROOTS.set(await self._request_roots(context, host_of_request(self.accept)))
        try:
            return await call_next(context)
        except MissingResource as exc:  # a template's URI naming nothing that exists: not found, not internal
            raise MCPError(_not_found_code(context), str(exc)) from exc
        except MCPError as exc:
            if exc.code in (INVALID_PARAMS, RESOURCE_NOT_FOUND) and "not found" in exc.message.lower():
                raise MCPError(_not_found_code(context), exc.message) from exc
            raise
        except (NotFoundError, DisabledError) as exc:
            raise MCPError(_not_found_code(context), f"Resource not found: {uri!r}") from exc
        finally:
            REQUEST_ROOTS.reset(token)

    async def on_get_prompt(self, context: MiddlewareContext, call_next: CallNext) -> Any:
        pr = self._profile()
        name = context.message.name
        if pr is not None and not pr.allows_prompt(name):
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}; list the prompts with prompts/list")
        try:
            return await call_next(context)
        except (NotFoundError, DisabledError) as exc:
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}; list the prompts with prompts/list") from exc
        except Exception as exc:
            # fastmcp names the prompt by its unprefixed function name and answers -32603: name the listed prompt
            # and the missing arguments, as invalid params (MCP "Prompts", error handling)
            missing = _MISSING.search(str(exc))
            if missing is None:
                raise
            raise MCPError(INVALID_PARAMS, f"prompt {name!r}: missing required argument(s) {missing.group(1)}") from exc


class ClientRoots:
    """The roots a directly connected client declares (MCP 2025-11-25, "Roots"), per connection: asked with
    ``roots/list`` at the connection's first request that needs them, kept until the client sends
    ``notifications/roots/list_changed``. Only on handshake-era connections (the 2026-07-28 protocol deprecates the
    capability, SEP-2577): a client that does not declare it, or whose answer fails or gives no usable root, gets
    None (the settings' roots, ``AISAC_ROOTS``), with a warning on stderr."""

    def __init__(self) -> None:
        #: connection (MCP session id: stable for a handshake-era connection) -> its roots; the oldest forgotten first
        self._known: OrderedDict[str, tuple[Path, ...] | None] = OrderedDict()

    @staticmethod
    def _connection(context: MiddlewareContext) -> tuple[Any, str] | None:
        """``(session, connection id)`` of a handshake-era client that declares roots, else None."""
        ctx = context.fastmcp_context
        if ctx is None:
            return None
        try:
            session = ctx.session
            key = ctx.session_id
        except RuntimeError:  # no session (a background task without one)
            return None
        version = getattr(ctx.request_context, "protocol_version", None) if ctx.request_context else None
        if version in MODERN_PROTOCOL_VERSIONS:
            return None
        caps = getattr(session, "client_capabilities", None)
        return (session, key) if caps is not None and getattr(caps, "roots", None) is not None else None

    def forget(self, context: MiddlewareContext) -> None:
        conn = self._connection(context)
        if conn is not None:
            self._known.pop(conn[1], None)

    async def of(self, context: MiddlewareContext) -> tuple[Path, ...] | None:
        """The connection's roots as folders, or None (see the class docstring)."""
        conn = self._connection(context)
        if conn is None:
            return None
        session, key = conn
        if key in self._known:
            self._known.move_to_end(key)
            return self._known[key]
        paths: tuple[Path, ...] | None = None
        try:
            with warnings.catch_warnings(), anyio.fail_after(ROOTS_WAIT_S):
                warnings.simplefilter("ignore")  # deprecated at 2026-07-28 only; this is a handshake-era session
                result = await session.list_roots()
            got = roots_from_host(result)
            for note in got.skipped:
                log.warning("%s", note)
            paths = got.paths or None
            if paths is None:
                log.warning("the client gave no usable root folder: AISAC_ROOTS applies to its calls")
            for p in missing_roots(got.paths):
                log.warning("the client's root %s is not an existing folder", p)
        except Exception as exc:  # noqa: BLE001 - a client that cannot answer keeps the settings' roots
            log.warning("the client declares roots but roots/list failed (%s): AISAC_ROOTS applies", exc)
        self._known[key] = paths
        while len(self._known) > MAX_CONNECTIONS:
            self._known.popitem(last=False)
        return paths


#: connections whose roots :class:`ClientRoots` keeps (an HTTP server's many sessions: the oldest asked again)
MAX_CONNECTIONS = 1024


#: the roles tools and which of the host-defaulted arguments each takes
_ROLES_ARGS = {
    "roles_route": ("llm", "mode"),
    "roles_plan": ("llm",),
    "roles_evaluate": ("llm", "mode"),
    "roles_run": ("llm", "mode"),
}


def _takes(context: MiddlewareContext, arg: str) -> bool:
    """Whether the tool of the call takes the argument ``arg`` (``llm``, ``mode``)."""
    return arg in _ROLES_ARGS.get(context.message.name, ())


def _not_found_code(context: MiddlewareContext) -> int:
    """The code of "resource not found" at the request's protocol version (-32002 up to 2025-11-25, -32602 after)."""
    ctx = context.fastmcp_context
    rc = ctx.request_context if ctx is not None else None
    version = getattr(rc, "protocol_version", None)
    return INVALID_PARAMS if version is None or version in MODERN_PROTOCOL_VERSIONS else RESOURCE_NOT_FOUND
