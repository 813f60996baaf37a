"""The stdio side of a proxy to the store's owner: a message-level relay over one long-lived HTTP connection.

``aisac serve`` over stdio, while another process owns the store, runs :class:`StdioRelay`: every JSON-RPC message
the host writes on stdin is POSTed as is to the owner's streamable HTTP endpoint (bearer token from ``owner.json``)
over the owner's Unix socket (loopback TCP when it has none, :func:`aisac_servers.base.proxying.owner_http_client`)
through one pooled keep-alive ``httpx`` client and one MCP session, and every message of the answer (a JSON body or
the events of a server-sent-event stream: progress, log messages, server requests, the response) is written back
to stdout as one line. The relay never decodes tool results, so progress notifications reach the caller that asked
for them (the owner sends them on that request's stream, with the caller's progress token).

Around the bytes the relay adds only:

- ``X-Aisac-Client``: a random id made at start, sent with every request, so the owner groups this host's calls
  into runs of their own (:class:`aisac_servers.serving.suite.ProvenanceMiddleware`);
- ``X-Aisac-Host``: this host's own settings (:data:`aisac_core.settings.PER_HOST`: roots, tool profile, roles
  LLM and mode), which the owner applies to each of its requests (:mod:`aisac_servers.serving.hosts`): two hosts
  with other roots or profiles share one owner, each seeing its own;
- the owner's lifecycle: before each request a ``stat`` of ``owner.json`` says whether the owner changed; when it
  did, or the connection is refused, :func:`aisac_core.owner.ensure_owner` finds (or starts) the owner and the
  host's ``initialize`` is replayed to it, so the host never sees the change. A call cut mid-way because the owner
  died gets :data:`aisac_servers.base.proxying.OWNER_STOPPED` as a tool error;
- ``names``: only the tools and prompts of those namespaces (``rag_*``) and their ``aisac://<name>/`` resources are
  listed or callable; ``profile``: likewise for a tool profile (``aisac serve --tools core``,
  :mod:`aisac_core.tool_profiles`), whose instructions keep only the lines of its servers.

This module imports neither fastmcp nor the suite, and httpx (~0.13 s of CPU, with its TLS stack) only when the relay
first talks to the owner: a relay whose store has an answer catalogue answers ``initialize`` and ``tools/list``
before it loads httpx or looks for the owner (:meth:`StdioRelay._warm`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio

from aisac_core.owner import (
    OWNER_FILE,
    OwnerError,
    OwnerInfo,
    OwnerSettingsDriftError,
    aisac_version,
    ensure_owner,
    process_running,
    wait_for_exit,
)
from aisac_core.tool_profiles import ToolProfile, filter_instructions, of_servers, scrub_text

from ..base.proxying import CLIENT_HEADER, HOST_HEADER, OWNER_STOPPED, owner_http_client
from .catalog import CACHEABLE, AnswerCatalog
from .hostroots import NEEDS_ROOTS, HostRootsAsker

if TYPE_CHECKING:  # an annotation only: pydantic's settings machinery (~0.15 s of imports) loads with the caller's
    import httpx

    from aisac_core.settings import Settings

log = logging.getLogger("aisac.owner")

#: the per-request envelope key of the stateless (2026) protocol era: requests carrying it need routing headers
_MODERN_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
_NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_LISTS = {
    "tools/list": ("tools", "name"),
    "prompts/list": ("prompts", "name"),
    "resources/list": ("resources", "uri"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate"),
}
#: seconds the background start of the owner waits for the host's ``tools/list`` (answered from the catalogue first)
WARM_AFTER_LIST_S = 0.5
#: seconds between two checks, while a request waits for the owner's answer, that the owner process still runs: an
#: owner that died without closing the connection (a child process still holding its socket) cuts the call at once
WATCH_OWNER_S = 0.5
#: seconds the owner has to answer a protocol request that does no work (handshake, lists, ping); past it the host
#: gets an error naming the owner's log, not silence. Tool calls, prompts and resource reads run as long as they need
#: while the owner process lives (a code run, an index job waited on).
ANSWER_TIMEOUT_S = 20.0
_OPEN_ENDED = frozenset({"tools/call", "prompts/get", "resources/read"})


def _not_sent() -> tuple[type[Exception], ...]:
    """httpx errors raised before the request reached the owner (safe to send again to a new owner)."""
    import httpx

    return (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


#: requests refused while the owner serves other settings than this host's (listing and pinging still work)
DRIFT_REFUSED = ("tools/call", "resources/read", "prompts/get", "completion/complete")


class _Retry(Exception):
    """The owner refused the request before running it (its session or token is gone): reconnect, send again."""


class StdioRelay:
    """Relay a host's stdio JSON-RPC stream to the store's owner over streamable HTTP (see the module docstring).

    ``settings``: the store's settings (``data_dir``, owner timeouts); ``names``: namespaces to expose (None: all);
    ``profile``: a tool profile to expose instead (wins over ``names``; a full profile exposes everything);
    ``client_id``: the id sent as ``X-Aisac-Client`` (default: a fresh uuid). :meth:`run` blocks until stdin closes.
    """

    def __init__(
        self,
        settings: Settings,
        names: list[str] | None = None,
        client_id: str | None = None,
        *,
        profile: ToolProfile | None = None,
    ) -> None:
        self.settings = settings
        self.prefixes = tuple(f"{n}_" for n in names or ())
        self.uri_prefixes = tuple(f"aisac://{n}/" for n in names or ())
        profile = profile if profile is not None else of_servers(names) if names else None
        # filtered even for ``all``: the owner also serves tools_search / tools_call, which only ``full`` lists
        self.profile = profile
        self.client_id = client_id or uuid.uuid4().hex
        from aisac_core.settings import host_settings  # loaded with ``settings`` already

        # this host's own settings (roots, profile, roles LLM and mode), applied by the owner to each request; the
        # roots are the host's own when it declares the roots capability (hostroots.py)
        self.roots = HostRootsAsker(self._emit, host_settings(settings))
        self.info: OwnerInfo | None = None
        self._stamp: tuple[int, int] | None = None
        #: a call was cut by the owner (connection lost mid-answer): the next lookup checks that the owner it finds is
        #: not the one dying (a process killed with SIGKILL holds its lock until its last thread is gone)
        self._cut = False
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._init_body: dict[str, Any] | None = None  # the host's initialize request, replayed to a new owner
        self._initialized: dict[str, Any] | None = None
        self._owner_lock = anyio.Lock()
        self._http: httpx.AsyncClient | None = None
        self._http_where: str | None = None  # the owner's socket (or "" for TCP) the client connects to
        self._old_http: list[httpx.AsyncClient] = []  # clients of an earlier owner address, closed at the end
        self._replays = 0
        self.drift: str | None = None  # the drift error while the owner serves other settings than this host's
        # ids of the host's requests it cancelled (notifications/cancelled): their answers are not relayed (MCP
        # 2025-11-25, "Cancellation": the receiver must not send a response for a cancelled request)
        self._cancelled: set[Any] = set()
        self._inflight: set[Any] = set()  # ids of the host's requests under way
        # the owner's listing answers kept in the store: initialize and tools/list answered at once (catalog.py)
        self.catalog = AnswerCatalog(settings.data_dir, aisac_version())
        self._tg: anyio.abc.TaskGroup | None = None
        self._warming = False
        self._warm_done = False
        self._init_from_catalog = False
        self._listed: anyio.Event | None = None  # set once the host's first tools/list is answered (made in _main)

    # ---------------------------------------------------------------------------------------------- output

    def _emit(self, msg: dict[str, Any] | str) -> None:
        line = msg if isinstance(msg, str) else json.dumps(msg, separators=(",", ":"), ensure_ascii=False)
        if "\n" in line:
            line = json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False)
        out = sys.stdout.buffer
        out.write(line.encode() + b"\n")
        out.flush()

    def _error(self, msg: dict[str, Any], text: str) -> None:
        """Answer request ``msg`` with ``text``: a tool error for ``tools/call``, a JSON-RPC error otherwise."""
        if "id" not in msg or msg["id"] in self._cancelled:
            return
        if msg.get("method") == "tools/call":
            result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
            if _modern(msg):
                result["resultType"] = "complete"
            self._emit({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        else:
            self._emit({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32603, "message": text}})

    # ---------------------------------------------------------------------------------------------- namespaces

    def _refused(self, msg: dict[str, Any]) -> str | None:
        """Why ``msg`` is outside the exposed namespaces or profile (None: forward it)."""
        pr = self.profile
        if pr is None:
            return None
        method, params = msg.get("method"), msg.get("params") or {}
        name = str(params.get("name", ""))
        if (method == "tools/call" and not pr.allows(name)) or (method == "prompts/get" and not pr.allows_prompt(name)):
            return (
                f"unknown {'tool' if method == 'tools/call' else 'prompt'} {params.get('name')!r}: this server "
                f"exposes the tool profile {pr.value!r} (aisac serve --tools)"
            )
        uri = str(params.get("uri", ""))
        if method == "resources/read" and not pr.allows_uri(uri):
            return f"unknown resource {uri}"
        return None

    def _filter(self, method: str, msg: dict[str, Any]) -> dict[str, Any]:
        """The response ``msg`` to a list request, keeping only the exposed namespaces or profile (and, in the
        answer to ``initialize``, only the instructions of the exposed servers)."""
        key = _LISTS.get(method)
        result = msg.get("result")
        pr = self.profile
        if pr is not None and isinstance(result, dict) and isinstance(result.get("instructions"), str):
            result = {**result, "instructions": filter_instructions(result["instructions"], pr.servers)}
            msg = {**msg, "result": result}
        if pr is None or key is None or not isinstance(result, dict) or key[0] not in result:
            return msg
        field, attr = key

        def ok(item: dict[str, Any]) -> bool:
            val = str(item.get(attr, ""))
            if method == "tools/list":
                return pr.lists(val)
            if attr == "name":
                return pr.allows_prompt(val)
            return pr.allows_uri(val)

        items = [i for i in result[field] if ok(i)]
        if method == "tools/list":  # descriptions name no tool this host cannot call
            kept = {str(i.get("name")) for i in items}
            hidden = {
                str(i.get("name"))
                for i in result[field]
                if str(i.get("name")) not in kept and not (pr.search and pr.allows(str(i.get("name"))))
            }
            items = [_scrub_tool(i, hidden) for i in items]
        return {**msg, "result": {**result, field: items}}

    # ---------------------------------------------------------------------------------------------- the owner

    def _owner_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.settings.data_dir / OWNER_FILE)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_ino

    async def _owner(self, force: bool = False) -> OwnerInfo:
        """The current owner; when it changed (or ``force``), find or start it and replay the host's initialize."""
        if not force and self.info is not None and self._owner_stamp() == self._stamp:
            return self.info
        async with self._owner_lock:
            if not force and self.info is not None and self._owner_stamp() == self._stamp:
                return self.info
            old = self.info
            try:
                info = await anyio.to_thread.run_sync(ensure_owner, self.settings)
                if self._cut and old is not None and info.pid == old.pid:
                    info = await anyio.to_thread.run_sync(self._unless_dying, info)
                self._cut = False
                self.drift = None
            except OwnerSettingsDriftError as exc:
                if exc.info is None:
                    raise
                info, self.drift = exc.info, str(exc)  # listing works; calls get the drift error (below)
            stamp = None if self.drift else self._owner_stamp()  # drift: check again at every request
            if force or old is None or (info.pid, info.url, info.token) != (old.pid, old.url, old.token):
                if old is not None:
                    log.warning("the store's owner changed (pid %s -> %s): reconnecting", old.pid, info.pid)
                self.session_id = None
                if self._init_body is not None:
                    await self._replay_initialize(info, self._init_body)
            # published once the session is open: a concurrent request (the relay answered initialize from the
            # answer catalogue) must not reach the owner before it
            self.info, self._stamp = info, stamp
            return info

    def _unless_dying(self, info: OwnerInfo) -> OwnerInfo:
        """After a cut call, ``info`` (still named by ``owner.json``, its lock still held) may be an owner in the middle
        of exiting: sending to it would cut the next call too. Wait up to 2 s for it to exit; when it does, find or
        start the next owner (:func:`ensure_owner`), else it is alive and ``info`` stands."""
        if wait_for_exit(info.pid, 2.0):
            log.warning("the store's owner (pid %s) has exited: finding the next one", info.pid)
            return ensure_owner(self.settings)
        return info

    async def _replay_initialize(self, info: OwnerInfo, init_body: dict[str, Any]) -> None:
        """Open a new MCP session on a new owner with the host's own initialize request ``init_body`` (answer not
        relayed)."""
        self._replays += 1
        body = {**init_body, "id": f"aisac-relay-init-{self._replays}"}
        with anyio.fail_after(ANSWER_TIMEOUT_S):  # a handshake does no work: an owner silent this long is stuck
            await self._open_session(info, body, init_body)

    async def _open_session(self, info: OwnerInfo, body: dict[str, Any], init_body: dict[str, Any]) -> None:
        async with self._client(info).stream("POST", info.url, json=body, headers=self._headers(info, body)) as r:
            if r.status_code >= 400:
                raise OwnerError(f"the owner refused the session ({r.status_code}): {(await r.aread())[:300]!r}")
            self.session_id = r.headers.get("mcp-session-id")
            async for m in self._messages(r):
                if isinstance(m, dict) and "result" in m:
                    self._remember(init_body, m)
        if self._initialized is not None:
            await (
                await self._client(info).post(
                    info.url, json=self._initialized, headers=self._headers(info, self._initialized)
                )
            ).aclose()

    def _client(self, info: OwnerInfo) -> httpx.AsyncClient:
        """The pooled client reaching the owner ``info`` where it listens (its Unix socket, else TCP)."""
        where = info.socket or ""
        if self._http is None or self._http_where != where:
            import httpx  # here, not at the top: see the module docstring

            if self._http is not None:
                self._old_http.append(self._http)
            self._http = owner_http_client(
                info,
                timeout=httpx.Timeout(None, connect=10.0, write=60.0),
                limits=httpx.Limits(max_keepalive_connections=8, keepalive_expiry=600),
            )
            self._http_where = where
        return self._http

    def _headers(self, info: OwnerInfo, msg: dict[str, Any]) -> dict[str, str]:
        h = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            CLIENT_HEADER: self.client_id,
            HOST_HEADER: self.roots.header,
        }
        if info.token:
            h["authorization"] = f"Bearer {info.token}"
        version = _modern(msg)
        if version:  # stateless era: routing headers per request
            h["mcp-protocol-version"] = version
            h["mcp-method"] = str(msg.get("method"))
            name_key = _NAME_BEARING.get(str(msg.get("method")))
            value = (msg.get("params") or {}).get(name_key) if name_key else None
            if value is not None:
                h["mcp-name"] = _header_value(str(value))
            return h
        if self.session_id:
            h["mcp-session-id"] = self.session_id
        if self.protocol_version:
            h["mcp-protocol-version"] = self.protocol_version
        return h

    # ---------------------------------------------------------------------------------------------- forwarding

    async def _messages(self, r: httpx.Response) -> AsyncIterator[Any]:
        """The JSON-RPC messages of an owner's response: its JSON body, or the data of its SSE events."""
        ctype = r.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            data: list[str] = []
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    text = "\n".join(data)
                    data = []
                    if text.strip():
                        yield json.loads(text)
            return
        raw = await r.aread()
        if raw.strip():
            body = json.loads(raw)
            for m in body if isinstance(body, list) else [body]:
                yield m

    async def _send(self, msg: dict[str, Any]) -> None:
        """POST one message and relay the answer; reconnects and sends again when it never reached the owner. While
        the owner runs with other settings than this host's (and could not be restarted), the session still opens
        and lists, but every call is answered with the drift error naming the settings and the fix."""
        import httpx

        retry_on: tuple[type[Exception], ...] = (_Retry, *_not_sent())  # never reached the owner: send again
        for attempt in range(3):
            try:
                info = await self._owner(force=attempt > 0)
                if self.drift and msg.get("method") in DRIFT_REFUSED:
                    self._error(msg, self.drift)
                    return
                await self._post(info, msg)
                return
            except retry_on as exc:
                log.warning("owner unreachable (%s): reconnecting", type(exc).__name__)
                self._stamp = None
                if attempt == 2:
                    self._error(msg, f"the aisac owner process cannot be reached ({type(exc).__name__}); retry")
            except OwnerError as exc:
                self._error(msg, str(exc))
                return
            except TimeoutError:
                log.warning(
                    "the owner did not answer %s id=%s within %g s", msg.get("method"), msg.get("id"), ANSWER_TIMEOUT_S
                )
                self._stamp = None  # check the owner again before the next request
                pid = f" (pid {self.info.pid})" if self.info is not None else ""
                self._error(
                    msg,
                    f"the aisac owner process{pid} did not answer {msg.get('method')} within "
                    f"{ANSWER_TIMEOUT_S:.0f} s: it is overloaded or stuck. See {self.settings.data_dir / 'owner.log'}; "
                    "`aisac owner stop` restarts it at the next request",
                )
                return
            except (httpx.TransportError, anyio.EndOfStream, anyio.ClosedResourceError) as exc:
                log.warning(
                    "call cut: the owner process stopped (%s) during %s id=%s",
                    type(exc).__name__,
                    msg.get("method"),
                    msg.get("id"),
                )
                self._stamp = None  # check the owner again before the next request
                self._cut = True
                self._error(msg, OWNER_STOPPED)
                return

    async def _post(self, info: OwnerInfo, msg: dict[str, Any]) -> None:
        """POST ``msg`` and relay its answer; never waits forever: a request is cut when the owner process is gone
        (checked every :data:`WATCH_OWNER_S`: :class:`anyio.EndOfStream`, reported as :data:`OWNER_STOPPED`), and a
        request outside :data:`_OPEN_ENDED` unanswered after :data:`ANSWER_TIMEOUT_S` raises :class:`TimeoutError`."""
        gone = False

        async def watch(scope: anyio.CancelScope) -> None:
            nonlocal gone
            while True:
                await anyio.sleep(WATCH_OWNER_S)
                if not process_running(info.pid):
                    gone = True
                    scope.cancel()
                    return

        bound = None if msg.get("method") in _OPEN_ENDED else ANSWER_TIMEOUT_S
        error: Exception | None = None  # raised after the task group (which would wrap it in an exception group)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch, scope)
                try:
                    with anyio.fail_after(bound):
                        await self._exchange(info, msg)
                except Exception as exc:  # noqa: BLE001 - re-raised below, as it was
                    error = exc
                tg.cancel_scope.cancel()
        if gone:
            raise anyio.EndOfStream  # the owner died mid-call: OWNER_STOPPED for the host (_send)
        if error is not None:
            raise error

    async def _exchange(self, info: OwnerInfo, msg: dict[str, Any]) -> None:
        import httpx

        method = msg.get("method")
        async with self._client(info).stream("POST", info.url, json=msg, headers=self._headers(info, msg)) as r:
            if (
                "id" in msg
                and method not in (None, "initialize")
                and (r.status_code == 401 or (r.status_code == 404 and "mcp-session-id" in r.request.headers))
            ):
                await r.aread()
                raise _Retry(f"HTTP {r.status_code}")  # the owner restarted: its token or our session is unknown
            if method == "initialize" and r.status_code < 400:
                self.session_id = r.headers.get("mcp-session-id")
            if r.status_code == 202:
                return
            got_answer = False
            async for m in self._messages(r):
                if "id" in msg and m.get("id") == msg["id"] and ("result" in m or "error" in m):
                    got_answer = True
                    if msg["id"] in self._cancelled:
                        continue
                    self._remember(msg, m)
                    if method == "initialize" and isinstance(m.get("result"), dict):
                        self.protocol_version = m["result"].get("protocolVersion")
                    m = self._filter(str(method), m)
                self._emit(m)
            if "id" in msg and "method" in msg and not got_answer and msg["id"] not in self._cancelled:
                try:
                    body = (await r.aread())[:300]
                except httpx.StreamConsumed:  # an event stream, read above
                    body = b""
                log.warning("owner answered HTTP %s to %s without a result: %r", r.status_code, method, body)
                self._error(msg, f"the aisac owner answered HTTP {r.status_code} without a result")

    def _version_of(self, msg: dict[str, Any]) -> str | None:
        if msg.get("method") == "initialize":
            return str((msg.get("params") or {}).get("protocolVersion") or "") or None
        return _modern(msg) or self.protocol_version

    def _from_catalog(self, msg: dict[str, Any]) -> bool:
        """Answer a listing request from the store's answer catalogue (and connect to the owner in the background);
        False when it has no answer for it, or the owner's session is already open (then the owner answers)."""
        method = msg.get("method")
        if method not in CACHEABLE or "id" not in msg or (msg.get("params") or {}).get("cursor"):
            return False
        if method == "tools/list" and self.info is not None and self._warm_done:
            return False
        result = self.catalog.get(str(method), self._version_of(msg))
        if not isinstance(result, dict):
            return False
        self._emit(self._filter(str(method), {"jsonrpc": "2.0", "id": msg["id"], "result": result}))
        if method == "initialize":
            self._init_body, self._init_from_catalog = msg, True
            self.protocol_version = result.get("protocolVersion")
        elif method == "tools/list" and self._listed is not None:
            self._listed.set()
        self._start_warm()
        return True

    def _start_warm(self) -> None:
        if not self._warming and self._tg is not None:
            self._warming = True
            self._tg.start_soon(self._warm)

    async def _warm(self) -> None:
        """Find or start the owner (and open this host's session with it) in the background, once the host's first
        ``tools/list`` is answered (or :data:`WARM_AFTER_LIST_S` after ``initialize``): its CPU (finding the owner,
        loading httpx, the session's handshake) then never delays the answers a host waits for to show its tools.
        A request that needs the owner before that finds it itself (:meth:`_owner`)."""
        if self._listed is not None:
            with anyio.move_on_after(WARM_AFTER_LIST_S):
                await self._listed.wait()
        try:
            await self._owner()
        except Exception as exc:  # noqa: BLE001 - each request reports the owner's trouble itself
            log.warning("the owner is not ready (%s); the next request tries again", exc)
        finally:
            self._warm_done = True

    def _remember(self, msg: dict[str, Any], answer: dict[str, Any]) -> None:
        method = str(msg.get("method"))
        if (
            method in CACHEABLE
            and isinstance(answer.get("result"), dict)
            and not (msg.get("params") or {}).get("cursor")
        ):
            self.catalog.put(method, self._version_of(msg), answer["result"])

    async def _handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if self.roots.takes(msg):  # the host's answer to the relay's own roots/list
            return
        if method == "initialize":
            self.roots.on_initialize(msg)
        elif method in ("notifications/initialized", "notifications/roots/list_changed") and self.roots.declared:
            if self._tg is not None:
                self._tg.start_soon(self.roots.ask)  # the host's roots, asked once the handshake ends and on change
            if method == "notifications/roots/list_changed":
                return  # the relay's business: the owner sees the roots in each request's host header
        elif method in NEEDS_ROOTS:
            await self.roots.ready()
        if (
            msg.get("method") == "notifications/initialized"
            and self._init_from_catalog
            and not self._warm_done
            and self.session_id is None
        ):
            self._initialized = msg  # sent by the initialize replay that opens the session with the owner
            return
        if self._from_catalog(msg):
            return
        if msg.get("method") == "notifications/cancelled":
            rid = (msg.get("params") or {}).get("requestId")
            if rid in self._inflight:
                self._cancelled.add(rid)
        refused = self._refused(msg)
        if refused is not None:
            if "id" in msg:  # an unknown tool, prompt or resource is a protocol error (MCP "Tools"/"Resources")
                code = -32002 if msg.get("method") == "resources/read" and not _modern(msg) else -32602
                self._emit({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": code, "message": refused}})
            return
        rid = msg.get("id") if "method" in msg else None
        if rid is not None:
            self._inflight.add(rid)
        try:
            await self._send(msg)
        finally:
            if rid is not None:
                self._inflight.discard(rid)
                self._cancelled.discard(rid)
        # remembered once sent (a replay before the first session would open a second one)
        if msg.get("method") == "initialize":
            self._init_body = msg
        elif msg.get("method") == "notifications/initialized":
            self._initialized = msg

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        self._listed = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                while line := await reader.readline():
                    if not line.strip():
                        continue
                    try:
                        body = json.loads(line)
                    except ValueError:
                        self._emit({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
                        continue
                    for msg in body if isinstance(body, list) else [body]:  # a batch: its messages one by one
                        if not isinstance(msg, dict):
                            continue
                        # requests run concurrently; the handshake, notifications and responses in order
                        if "id" in msg and "method" in msg and msg["method"] != "initialize":
                            tg.start_soon(self._handle, msg)
                        else:
                            await self._handle(msg)
                await self._cancel_inflight()
                tg.cancel_scope.cancel()  # stdin closed: the host is gone
        finally:
            await self._close()

    async def _cancel_inflight(self) -> None:
        """The host closed stdin with requests under way: tell the owner they are cancelled (MCP "Cancellation"), so
        each call ends on the record as cancelled (its trace event) instead of running on for nobody."""
        info = self.info
        if info is None or not self._inflight:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            for rid in list(self._inflight):
                note = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": rid, "reason": "the host disconnected (stdin closed)"},
                }
                with contextlib.suppress(Exception):  # the owner may be gone too: nothing left to tell
                    await (
                        await self._client(info).post(info.url, json=note, headers=self._headers(info, note))
                    ).aclose()

    async def _close(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._http is not None:
                if self.session_id and self.info is not None:  # end the MCP session on the owner (best effort)
                    with contextlib.suppress(Exception), anyio.fail_after(2):  # the owner may be gone already
                        await self._http.delete(self.info.url, headers=self._headers(self.info, {}))
                await self._http.aclose()
            for old in self._old_http:
                await old.aclose()

    def run(self) -> None:
        """Relay until the host closes stdin. Raises nothing for owner trouble (each request gets an error)."""
        anyio.run(self._main)


def _modern(msg: dict[str, Any]) -> str | None:
    """The protocol version of a request of the stateless (2026) era (its ``_meta`` envelope), else None."""
    params = msg.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return str(meta[_MODERN_VERSION_KEY]) if isinstance(meta, dict) and meta.get(_MODERN_VERSION_KEY) else None


def _scrub_tool(tool: dict[str, Any], hidden: set[str]) -> dict[str, Any]:
    """A ``tools/list`` entry whose description and argument descriptions name no tool of ``hidden``."""
    if not hidden:
        return tool
    out = {**tool, "description": scrub_text(str(tool.get("description") or ""), hidden)}
    schema = tool.get("inputSchema")
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        props = {
            k: {**v, "description": scrub_text(v["description"], hidden)}
            if isinstance(v, dict) and isinstance(v.get("description"), str)
            else v
            for k, v in schema["properties"].items()
        }
        out["inputSchema"] = {**schema, "properties": props}
    return out


def _header_value(value: str) -> str:
    """``value`` as an HTTP header value (printable ASCII as is, else the protocol's base64 form)."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    # the MCP library loads here, for a rare non-ASCII name only: the relay starts without it (~0.3 s of imports)
    from mcp.shared.inbound import encode_header_value

    return encode_header_value(value)
