"""What every server adapter shares: the application context a tool works on, running core calls off the event loop
with clear MCP tool errors, the safety net every tool error passes (:func:`safe_message`: capped below 2,000
characters, never quoting SQL), and the typed boundary every tool result passes (:class:`AisacServer`: a tool's
output schema is its result type's, and its result is validated against that type before it leaves)."""

from __future__ import annotations

import functools
import logging
import re
import types
from collections.abc import Callable
from contextvars import ContextVar
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import anyio
import mcp_types as mt
from fastmcp import FastMCP
from fastmcp.dependencies import Depends
from fastmcp.exceptions import ResourceError, ToolError
from fastmcp.resources.base import ResourceResult
from fastmcp.server.dependencies import get_context
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.server.providers.aggregate import AggregateProvider
from fastmcp.server.providers.local_provider import LocalProvider
from fastmcp.tools.base import ToolResult
from fastmcp.tools.function_tool import FunctionTool
from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python
from typing_extensions import is_typeddict

from aisac_core.context import AppContext
from aisac_core.errors import AisacError
from aisac_core.settings import HostRoots

from ..shapes.results_schema import output_schema

log = logging.getLogger("aisac.servers")

#: key of a tool result's ``_meta`` under which a tool that returns a compact form (rag_search's default hits) hands
#: the full result to the provenance middleware; the middleware records it and removes the key before the client
#: sees the result (in-band, no side channel)
FULL_RESULT_META = "io.aisac/full-result"
T = TypeVar("T")

#: longest tool error message sent to a client; longer ones are cut with a note (the whole goes to the log)
MAX_ERROR_CHARS = 1900
#: marks of a database error text that quotes SQL: SQLAlchemy's ``[SQL: ...]`` and background link, DB-API error
#: class names, statements (upper-case keywords, as SQLAlchemy and drivers print them)
SQL_PATTERN = re.compile(
    r"\[SQL: |\[parameters: |sqlalche\.me/"
    r"|\bSELECT\b[^\n]{0,400}?\bFROM\b|\bINSERT INTO\b|\bDELETE FROM\b|\bUPDATE\s+\w+\s+SET\b|\bCREATE TABLE\b"
)
#: the parts of a SQLAlchemy error text that quote the statement, its parameters (user data) and the help link
_END = r"(?=\s*(?:\[parameters: |\(Background on this error at: |$|[.;,)\n]))"
_SQL_PARTS = (
    re.compile(r"\s*\(Background on this error at: https?://sqlalche\.me/[^\s)]*\)"),
    re.compile(r"\s*\[parameters: .*?\]" + _END, re.S),
    re.compile(r"\s*\[SQL: .*?\]" + _END, re.S),
)
SQL_NOTE = "(SQL statement left out; the server log on stderr has the full error)"
_LOG_CHARS = 20_000  # how much of a replaced or cut message the log keeps
_DRIVER = re.compile(r"\((?:sqlite3|psycopg2?|pymysql|asyncpg)\.[A-Za-z.]*\)\s*")


def _db_reason(message: str) -> str:
    """The driver's own reason from a SQLAlchemy error text (``(sqlite3.OperationalError) database is locked
    [SQL: ...]`` -> ``database is locked``), or "" when there is none or it quotes SQL itself."""
    head = message.split("[SQL:", 1)[0]
    m = _DRIVER.search(head)
    reason = (head[m.end() :] if m else head).strip()
    reason = reason.splitlines()[0].strip() if reason else ""
    return "" if not reason or SQL_PATTERN.search(reason) else reason[:200]


def safe_message(message: str, *, what: str = "the call") -> str:
    """A tool error message fit for a client.

    - empty, or ending in ``:`` with nothing after it -> a message saying that ``what`` failed without a reason
      (the log has the detail);
    - quoting SQL (:data:`SQL_PATTERN`: SQLAlchemy's ``[SQL: ...]`` and ``[parameters: ...]``, ``SELECT ... FROM``,
      ``INSERT INTO``, its sqlalche.me link) -> the same message with those parts (and DB-API class markers such as
      ``(sqlite3.OperationalError)``) taken out and :data:`SQL_NOTE` added; when SQL remains after that, a message
      saying ``what`` failed in the database with the driver's short reason; the original is logged on stderr;
    - longer than :data:`MAX_ERROR_CHARS` (1,900) -> cut, with a note giving the full length (logged whole).

    Args:
        message: the error text.
        what: what failed, for the replacement messages (``"rag_search"``).

    Returns: the message to send (at most 1,900 characters).
    """
    msg = str(message or "")
    if not msg.strip():
        log.warning("%s failed with an empty error message", what)
        return (
            f"{what} failed without an error message; the server log on stderr may have details. Check the "
            "arguments and try again."
        )
    if msg.rstrip().endswith(":"):  # "Error calling tool 'x': " around an exception without a message
        log.warning("%s failed with an error without a message: %r", what, msg)
        return (
            f"{msg.rstrip().rstrip(':')} (the error gave no message; the server log on stderr may have "
            "details). Check the arguments and try again."
        )
    if SQL_PATTERN.search(msg):
        log.warning("%s: database error (its SQL not shown to the client): %s", what, msg[:_LOG_CHARS])
        stripped = msg
        for part in _SQL_PARTS:
            stripped = part.sub("", stripped)
        stripped = _DRIVER.sub("", stripped).strip()
        if stripped and not SQL_PATTERN.search(stripped):  # the message without its SQL still says what happened
            return _cap(f"{stripped} {SQL_NOTE}", what)
        reason = _db_reason(msg)
        internal = "internal error: " if msg.startswith("internal error") else ""
        return (
            f"{internal}{what} failed in the database"
            + (f" ({reason})" if reason else "")
            + "; the statement is not shown here (the server log on stderr has the full error). Check the "
            "arguments - very long texts or out-of-range numbers are typical causes - and try again."
        )
    return _cap(msg, what)


def _cap(msg: str, what: str) -> str:
    """``msg`` cut to :data:`MAX_ERROR_CHARS` with a note giving its full length (logged whole)."""
    if len(msg) > MAX_ERROR_CHARS:
        log.warning("%s: error message of %d characters cut for the client: %s", what, len(msg), msg[:_LOG_CHARS])
        note = f" … [cut: the message has {len(msg):,} characters; the server log on stderr has more]"
        return msg[: MAX_ERROR_CHARS - len(note)] + note
    return msg


def tool_error(message: str, *, what: str = "the call") -> ToolError:
    """A :class:`ToolError` whose message passed :func:`safe_message` (raise it: ``raise tool_error(...)``)."""
    return ToolError(safe_message(message, what=what))


class SafeErrors(Middleware):
    """Passes every tool and resource error of the server it is added to through :func:`safe_message` (also errors
    fastmcp itself raised, e.g. ``Error calling tool 'x': <exception>`` for an exception outside :func:`call_core`)."""

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        try:
            return await call_next(context)
        except ToolError as exc:
            msg = str(exc)
            safe = safe_message(msg, what=getattr(context.message, "name", "the call"))
            if safe != msg:
                raise ToolError(safe) from exc
            raise

    async def on_read_resource(
        self,
        context: MiddlewareContext[mt.ReadResourceRequestParams],
        call_next: CallNext[mt.ReadResourceRequestParams, ResourceResult],
    ) -> ResourceResult:
        try:
            return await call_next(context)
        except ResourceError as exc:
            msg = str(exc)
            safe = safe_message(msg, what=f"reading {str(getattr(context.message, 'uri', 'the resource'))[:200]}")
            if safe != msg:
                raise type(exc)(safe) from exc  # a MissingResource stays one
            raise


#: the roots of the connection whose request is being served (set per request by
#: :class:`aisac_servers.serving.hosts.HostView`: the client's own ``roots/list``, or a relay's host header); None:
#: the settings' roots. Read only here, at the MCP boundary: tools pass it to the services as their ``roots``
#: argument (:func:`request_roots`).
REQUEST_ROOTS: ContextVar[HostRoots | None] = ContextVar("aisac_request_roots", default=None)


def request_roots() -> HostRoots | None:
    """The roots of the request being served (:data:`REQUEST_ROOTS`), for a service's ``roots`` argument."""
    return REQUEST_ROOTS.get()


class MissingResource(ResourceError):
    """A resource read whose URI matches a template but names nothing that exists (a document not indexed, a run
    without events): "resource not found", -32002 at MCP 2025-11-25 and -32602 at 2026-07-28
    (:class:`aisac_servers.serving.hosts.HostView`), not the internal error -32603 a plain ResourceError gives."""


class _LookupInTurn(AggregateProvider):
    """Finds a tool by asking each provider in turn instead of all at once: fastmcp's aggregate provider runs one
    task per provider (an anyio task group) for every lookup, and each ``tools/call`` looks its tool up in the suite
    and again in the mounted server. aisac's providers answer from memory at once (a mounted server under another
    namespace returns None without work), so the same answer costs no tasks. The answer is the same: the highest
    version among the providers that have the tool, a provider's error handled as the aggregate does."""

    async def _get_tool(self, name: str, version: Any = None) -> Any:
        results: list[Any] = []
        for provider in self.providers:
            try:
                results.append(await provider.get_tool(name, version))
            except Exception as exc:  # noqa: BLE001 - handed to the aggregate's own error policy below
                results.append(exc)
        return self._get_highest_version_result(results, f"get_tool({name!r})")


def _branches(annotation: Any) -> list[Any]:
    """The alternatives of a union annotation (nested unions and ``Annotated`` unions flattened), else ``[it]``."""
    inner = get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
    if get_origin(inner) in (Union, types.UnionType):
        return [b for arg in get_args(inner) for b in _branches(arg)]
    return [annotation]


def _is_record(tp: Any) -> bool:
    """Whether ``tp`` is a TypedDict (or a parametrised generic one such as ``SearchResultOf[CompactHit]``), also
    inside ``Annotated``."""
    tp = get_args(tp)[0] if get_origin(tp) is Annotated else tp
    return is_typeddict(tp) or is_typeddict(get_origin(tp))


def result_type(annotation: Any) -> Any | None:
    """The declared result type in a tool's return annotation, or None when it declares none.

    The result type is a TypedDict (or a parametrised generic TypedDict such as ``SearchResultOf[CompactHit]``), or
    a union of them (a tagged union such as a pending or a finished run); the branches a tool may return besides it
    are left out: :class:`~mcp_types.InputRequiredResult` (an ask for input, sent as it is) and
    :class:`~fastmcp.tools.base.ToolResult` (content blocks built around the typed result, see :func:`typed_result`).
    A project's own tools (``-> int``, no annotation) declare none: fastmcp serves them as before."""
    if _is_record(annotation):
        return annotation
    branches = _branches(annotation)
    kept = [b for b in branches if not (isinstance(b, type) and issubclass(b, ToolResult | mt.InputRequiredResult))]
    if not kept or not all(_is_record(b) for b in kept):
        return None
    if len(kept) == len(branches):  # the annotation is the union itself (a discriminator, if any, kept)
        return annotation
    return kept[0] if len(kept) == 1 else Union[tuple(kept)]  # noqa: UP007 - built at run time


@functools.cache  # one adapter per result type, built on first use
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def checked(tp: Any, value: Any, *, tool: str) -> Any:
    """``value`` (a tool's result) validated against its result type ``tp``: a new value of exactly that type's
    shape (pydantic's validation: undeclared keys of a closed type, a missing required key or a value of another
    JSON type are errors; an open type keeps its other keys).

    Raises:
        ToolError: ``value`` is not of type ``tp`` - a defect of the server, not of the call: the message says so
            and names the first few mismatches; the whole validation error goes to the log.
    """
    try:
        return _adapter(tp).validate_python(value)
    except ValidationError as exc:
        log.error("%s: result outside its declared type %s: %s", tool, getattr(tp, "__name__", tp), exc)
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors(include_url=False)[:3]
        )
        raise tool_error(
            f"internal error: the result of {tool} does not match its declared type ({where}), so it was not "
            "sent; this is a defect of the server (the server log on stderr has details). The call itself may have "
            "taken effect: check with the matching list or status tool before repeating a call that changes data",
            what=tool,
        ) from exc


def typed_result(tp: Any, value: Any, *, content: list[Any], meta: dict[str, Any] | None = None) -> ToolResult:
    """A tool result with content blocks of its own (images, resource links) around a typed result: the structured
    content is ``value`` as its result type ``tp`` serialises it (the tool's return annotation names ``tp``; the
    boundary validates it again, :class:`TypedTool`).

    Args:
        tp: the result type (a TypedDict).
        value: the result, of type ``tp``.
        content: the content blocks (a text block with the JSON of the result first, as MCP asks of a tool with
            structured content, then images or resource links).
        meta: the result's ``_meta``.
    """
    structured = _adapter(tp).dump_python(value, mode="json")
    return ToolResult(content=content, structured_content=structured, meta=meta)


class TypedTool(FunctionTool):
    """A function tool whose result passes through its declared type (:func:`result_type` of its return annotation)
    before it leaves: :func:`checked` validates it (a raw :class:`ToolResult` 's structured content too), then
    fastmcp serialises it through the same type."""

    def convert_result(self, raw_value: Any) -> ToolResult:
        tp = result_type(self.return_type)
        if tp is None:
            return super().convert_result(raw_value)
        if isinstance(raw_value, ToolResult):
            if raw_value.structured_content is None:
                return raw_value
            value = checked(tp, raw_value.structured_content, tool=self.name)
            return raw_value.model_copy(update={"structured_content": to_jsonable_python(value)})
        return super().convert_result(checked(tp, raw_value, tool=self.name))


class _TypedProvider(LocalProvider):
    """The local tool storage of an :class:`AisacServer`: a function tool with a declared result type is registered
    as a :class:`TypedTool` whose output schema is :func:`~aisac_servers.shapes.results_schema.output_schema` of that
    type (the one schema helper; a tool does not give its own)."""

    def _add_component(self, component: Any) -> Any:
        if type(component) is FunctionTool and (tp := result_type(component.return_type)) is not None:
            component = component.model_copy(update={"output_schema": output_schema(tp)})
            component.__class__ = TypedTool  # a subclass without fields of its own: the same tool, typed
        return super()._add_component(component)


class AisacServer(FastMCP, _LookupInTurn):
    """A fastmcp server as aisac's servers and the suite use it.

    - Typed boundary: every tool whose return annotation names a result type (:func:`result_type`) advertises that
      type's output schema (:func:`~aisac_servers.shapes.results_schema.output_schema`) and returns its result
      through it (:class:`TypedTool`).
    - Per-call overhead (docs/retrieval.md "Serving under load"): tools are looked up in turn
      (:class:`_LookupInTurn`), and schemas are not dereferenced by fastmcp (``dereference_schemas=False`` unless
      given): the output schemas come inlined and the suite's ``tools/list`` inlines every input ``$ref`` once
      (:mod:`aisac_servers.shapes.toollist`); fastmcp's dereferencing, in the suite and again in each mounted
      server, was about 65 % of a ``tools/list``.

    Takes :class:`~fastmcp.FastMCP` 's arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("dereference_schemas", False)
        super().__init__(*args, **kwargs)
        self._local_provider.__class__ = _TypedProvider  # the same storage, registering typed tools


def current_app() -> AppContext:
    """The :class:`~aisac_core.context.AppContext` of the suite serving the current request: the lifespan of the
    suite (:func:`aisac_servers.serving.suite.build`) yields it as ``{"app": ...}``; a mounted server reads the root's.

    Raises:
        ToolError: no suite lifespan is running (a server used without the suite).
    """
    rc = get_context().request_context
    lc = rc.lifespan_context if rc is not None else None
    app = lc.get("app") if isinstance(lc, dict) else None
    if not isinstance(app, AppContext):
        raise ToolError(
            "this server runs without aisac's application context: serve it through the suite "
            "(`aisac serve`, or aisac_servers.serving.suite.build())"
        )
    return app


#: default of a tool parameter ``app: AppContext = App``: fastmcp injects the application context and leaves the
#: parameter out of the tool's input schema.
App: Any = Depends(current_app)


def _generic_message(exc: Exception) -> str | None:
    """A clear message for exception types that mean a bad argument wherever they come from, else None."""
    text = str(exc)
    if isinstance(exc, ValueError) and "null byte" in text:
        return (
            "an argument contains a NUL byte (\\x00), which no file name or stored text may hold: remove it "
            "and try again"
        )
    if isinstance(exc, OverflowError):
        return (
            f"a number in the arguments is out of range ({text[:200]}): integers must fit in 64 bits and "
            "durations or dates within the calendar; pass a smaller value"
        )
    if isinstance(exc, RecursionError):
        return (
            "the input is nested too deeply to process (more than about 1,000 levels of lists or objects): "
            "flatten it and try again"
        )
    return None


async def call_core(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in a worker thread and turn its failures into clear :class:`ToolError` s.

    aisac's user errors (:class:`~aisac_core.errors.AisacError`) become a ToolError with their message; a NUL byte
    in an argument, an out-of-range number (OverflowError) or too deep nesting (RecursionError) get a clear message
    naming the problem; anything else becomes a ToolError naming the failure (the traceback goes to the log, on
    stderr), never a raw traceback to the client. Every message passes :func:`safe_message` (at most 1,900
    characters, no SQL)."""
    what = getattr(fn, "__name__", "the call")
    what = "the call" if what == "<lambda>" else what
    try:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
    except ToolError as exc:
        msg = str(exc)
        safe = safe_message(msg, what=what)
        if safe != msg:
            raise ToolError(safe) from exc
        raise
    except AisacError as exc:
        raise tool_error(str(exc), what=what) from exc
    except Exception as exc:
        generic = _generic_message(exc)
        if generic is not None:
            log.warning("%s: %s: %s", what, type(exc).__name__, str(exc)[:2000])
            raise ToolError(generic) from exc
        log.exception("internal error in %s", getattr(fn, "__name__", fn))
        raise tool_error(
            f"internal error ({type(exc).__name__}: {exc}); the server log on stderr has details", what=what
        ) from exc


def request_meta(key: str) -> Any:
    """The value of ``key`` in the current request's ``_meta`` (None outside a request or when absent)."""
    try:
        rc = get_context().request_context
    except RuntimeError:
        return None
    meta = getattr(rc, "meta", None) if rc is not None else None
    if meta is None:
        return None
    if isinstance(meta, dict):
        return meta.get(key)
    return (getattr(meta, "model_extra", None) or {}).get(key, getattr(meta, key, None))
