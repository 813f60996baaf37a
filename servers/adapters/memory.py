"""The memory server: sessions, turns, dialogue recall and temporal facts.

A thin adapter over :mod:`aisac_core.memory`. Mounted by the suite under the ``memory`` namespace, so the
tools are ``memory_start_session``, ``memory_add_turn``, ``memory_get_history``, ``memory_recall``,
``memory_search``, ``memory_list_sessions``, ``memory_export_session``, ``memory_delete_session``,
``memory_record_fact``, ``memory_query_facts``, ``memory_fact_timeline`` and the resource template
``aisac://memory/sessions/{session_id}``, whose ``session_id`` :func:`complete` completes (newest sessions first).
Each tool calls the store's :class:`~aisac_core.memory.service.MemoryService` (``app.memory``) through
:func:`~aisac_servers.serving.common.call_core`; the output schemas are derived from the result types the core declares
(:mod:`aisac_core.memory.results`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import anyio
from fastmcp.exceptions import ResourceError
from pydantic import Field

from aisac_core.context import AppContext
from aisac_core.memory import results as R
from aisac_core.memory.common import MemoryInputError, Scope
from aisac_core.settings import HOST_MEMORY_SCOPE

from ..serving.common import AisacServer, App, call_core, request_meta
from ..serving.completions import by_prefix
from ..shapes.annotations import hints

server = AisacServer(
    "memory",
    instructions=(
        "Conversation memory: memory_start_session, memory_add_turn per turn, memory_recall for a question's "
        "context; temporal facts."
    ),
)


Role = Literal["user", "assistant", "router", "planner", "coordinator", "evaluator", "tool"]
SessionId = Annotated[str, Field(description="ses-... (memory_list_sessions)")]
#: the session resource as the suite mounts it (the template a completion request names)
SESSION_URI = "aisac://memory/sessions/{session_id}"
#: the ``_meta`` key of a request's default memory scope (a JSON object, :class:`ScopeArg`)
SCOPE_META = "aisac/memory_scope"


#: a scope argument: which turns a recall or search may return (keys in the description; every key given must hold)
ScopeArg = Annotated[dict[str, str] | None, Field(description="session_id, project, participant, host, since, until")]


def connection_scope(app: AppContext) -> Scope:
    """The default scope of the calling connection: the request's ``_meta`` ``aisac/memory_scope``, else the host
    setting ``memory_scope`` the relay sent (on a shared owner), else this server's own setting
    (``AISAC_MEMORY_SCOPE``). Raises MemoryInputError when it is not a valid scope."""
    meta = request_meta(SCOPE_META)
    if meta is not None:
        return Scope.parse(meta, f"_meta {SCOPE_META}")
    raw = HOST_MEMORY_SCOPE.get() or app.settings.memory_scope
    if not raw:
        return Scope()
    try:
        value = json.loads(raw)
    except ValueError:
        raise MemoryInputError(f"the memory_scope setting is not JSON: {raw[:200]!r}") from None
    return Scope.parse(value, "the memory_scope setting")


def _scoped(app: AppContext, scope: dict[str, str] | None) -> Scope:
    return Scope.parse(dict(scope) if scope else None).over(connection_scope(app))


@server.tool(annotations=hints("Start a session"))
async def start_session(
    title: Annotated[str | None, Field(description="short title, <= 500 characters")] = None,
    project: Annotated[str | None, Field(description="project name (a filter of memory_list_sessions)")] = None,
    participant: Annotated[str | None, Field(description="whose history")] = None,
    started_at: Annotated[str | None, Field(description="ISO date it took place")] = None,
    app: AppContext = App,
) -> R.Session:
    """Start a new research thread (session) before its first turn; to continue a thread, find its
    session_id with memory_list_sessions instead. Returns the session with its session_id."""

    def start_session_scoped() -> R.Session:
        d = connection_scope(app)
        return app.memory.start_session(title, project or d.project, participant or d.participant, d.host, started_at)

    return await call_core(start_session_scoped)


@server.tool(annotations=hints("Add a turn"))
async def add_turn(
    session_id: SessionId,
    role: Annotated[str, Field(description="user, assistant, router, planner, coordinator, evaluator or tool")],
    content: Annotated[str, Field(description="1 to 100,000 characters")],
    metadata: Annotated[dict[str, Any] | None, Field(description="any JSON object (plan, tools used, ...)")] = None,
    parent_id: Annotated[int | None, Field(description="turn_id this turn replies to")] = None,
    speaker: Annotated[str | None, Field(description="speaker's name")] = None,
    app: AppContext = App,
) -> R.AddedTurn:
    """Append a turn to a session; memory_recall finds it later, an assistant turn answering the latest user turn
    together with it (``pair``)."""
    return await call_core(app.memory.add_turn, session_id, role, content, metadata, parent_id, speaker)


@server.tool(annotations=hints("Read a session's turns", read_only=True))
async def get_history(
    session_id: SessionId,
    cursor: Annotated[str | None, Field(description="next_cursor of the previous page")] = None,
    limit: Annotated[int, Field(description="turns per page, 1-500")] = 50,
    roles: Annotated[list[Role] | None, Field(description="only these roles")] = None,
    token_budget: Annotated[int | None, Field(description="end the page before this many tokens")] = None,
    app: AppContext = App,
) -> R.History:
    """Read a session's transcript verbatim, oldest first, page by page (``next_cursor`` is null on the last
    page). For the context of a new question use memory_recall; to find turns by content, memory_search."""
    return await call_core(app.memory.get_history, session_id, cursor, limit, roles, token_budget)


@server.tool(annotations=hints("Recall context", read_only=True))
async def recall(
    session_id: SessionId,
    query: Annotated[str, Field(description="what the next step is about, e.g. the user's new question")],
    last_n: Annotated[int, Field(description="recent turns of this session, 0-100")] = 10,
    k: Annotated[int, Field(description="related older exchanges, 0-50")] = 5,
    token_budget: Annotated[int, Field(description="most tokens in all, 1-100,000")] = 2000,
    scope: ScopeArg = None,
    hops: Annotated[int, Field(description="2: multi-hop")] = 1,
    app: AppContext = App,
) -> R.Recall:
    """Context for a follow-up question: the session's last turns plus the older exchanges most related to
    ``query`` (``score`` 0-1), within ``token_budget``. memory_get_history gives a transcript."""

    def recall_scoped() -> R.Recall:
        return app.memory.recall(session_id, query, last_n, k, token_budget, _scoped(app, scope), hops)

    return await call_core(recall_scoped)


@server.tool(annotations=hints("Search past turns", read_only=True))
async def search(
    query: Annotated[str, Field(description="words or a question")],
    session_id: Annotated[str | None, Field(description="only this session")] = None,
    roles: Annotated[list[Role] | None, Field(description="keyword hits only from these roles")] = None,
    mode: Literal["hybrid", "keyword", "semantic"] = "hybrid",
    limit: Annotated[int, Field(description="1-50")] = 10,
    offset: Annotated[int, Field(description="hits to skip")] = 0,
    scope: ScopeArg = None,
    app: AppContext = App,
) -> R.Search:
    """Look up what was said, in all sessions or a scope: turns containing the query's words and similar
    exchanges, best first (``score`` 0-1), paged. Turn text is cut at 2,000 characters (memory_get_history has it
    whole). No hit is not an error."""

    def search_scoped() -> R.Search:
        return app.memory.search(query, session_id, list(roles or []) or None, mode, limit, offset, _scoped(app, scope))

    return await call_core(search_scoped)


@server.tool(annotations=hints("List sessions", read_only=True))
async def list_sessions(
    project: Annotated[str | None, Field(description="only this project")] = None,
    limit: Annotated[int, Field(description="1-500")] = 50,
    offset: int = 0,
    app: AppContext = App,
) -> R.Sessions:
    """Find a session to continue: sessions newest first with title, project and turn count, paged."""
    return await call_core(app.memory.list_sessions, project, limit, offset)


@server.tool(annotations=hints("Export a session", read_only=True))
async def export_session(
    session_id: SessionId,
    format: Literal["markdown", "json"] = "markdown",
    cursor: Annotated[str | None, Field(description="next_cursor of the previous part")] = None,
    limit: Annotated[int, Field(description="turns per part, 1-2,000")] = 1000,
    app: AppContext = App,
) -> R.Export:
    """A whole session for a person to read (Markdown: each turn with role, time and metadata) or as JSON,
    in parts (pass ``next_cursor`` until null). The resource aisac://memory/sessions/{session_id} is the
    same Markdown."""
    return await call_core(app.memory.export_session, session_id, format, cursor, limit)


@server.tool(annotations=hints("Delete a session", destructive=True, idempotent=True))
async def delete_session(
    session_id: SessionId, confirm: Annotated[bool, Field(description="must be true")] = False, app: AppContext = App
) -> R.Deleted:
    """Delete a session with its turns and indexed exchanges, for good; facts are kept. Only when the user
    asks for it."""
    return await call_core(app.memory.delete_session, session_id, confirm)


@server.tool(annotations=hints("Record a fact"))
async def record_fact(
    subject: Annotated[str, Field(description="e.g. 'hypothesis H1'")],
    predicate: Annotated[str, Field(description="e.g. 'status'")],
    object: Annotated[str, Field(description="the value, e.g. 'supported'")],
    conditions: Annotated[dict[str, Any] | None, Field(description="e.g. {'temperature_K': 323}")] = None,
    valid_at: Annotated[str | None, Field(description="ISO 8601, default now")] = None,
    source: Annotated[str | None, Field(description="doc id, DOI, turn id, ...")] = None,
    evidence_span: Annotated[str | None, Field(description="supporting text or anchor")] = None,
    fact_run_id: Annotated[str | None, Field(description="run that produced it")] = None,
    app: AppContext = App,
) -> R.Recorded:
    """Record a belief that holds from ``valid_at`` on, such as a measured value or a hypothesis's status
    (conversation goes in memory_add_turn). It closes the earlier fact with the same subject and predicate,
    returned as ``superseded``."""
    return await call_core(
        app.memory.record_fact, subject, predicate, object, conditions, valid_at, source, evidence_span, fact_run_id
    )


@server.tool(annotations=hints("Query facts", read_only=True))
async def query_facts(
    subject: Annotated[str | None, Field(description="exact, any case")] = None,
    predicate: Annotated[str | None, Field(description="exact, any case")] = None,
    object: Annotated[str | None, Field(description="text the value contains")] = None,
    as_of: Annotated[str | None, Field(description="ISO 8601 time, default now")] = None,
    limit: Annotated[int, Field(description="1-500")] = 50,
    offset: int = 0,
    app: AppContext = App,
) -> R.Facts:
    """What was believed at a time (``as_of``, default now): the facts valid then, filtered. For how one
    subject's facts changed, use memory_fact_timeline."""
    return await call_core(app.memory.query_facts, subject, predicate, object, as_of, limit, offset)


@server.tool(annotations=hints("Fact timeline", read_only=True))
async def fact_timeline(
    subject: Annotated[str, Field(description="any case")],
    predicate: Annotated[str | None, Field(description="only this predicate")] = None,
    limit: Annotated[int, Field(description="1-500")] = 100,
    offset: int = 0,
    app: AppContext = App,
) -> R.Timeline:
    """How the beliefs about one subject changed: every fact, current (``current``) and superseded, by
    ``valid_at``."""
    return await call_core(app.memory.fact_timeline, subject, predicate, limit, offset)


#: the same template as the memory server itself declares it (the suite mounts it as :data:`SESSION_URI`)
LOCAL_SESSION_URI = "aisac://sessions/{session_id}"


@server.resource(LOCAL_SESSION_URI, name="memory_session", mime_type="text/markdown")
async def session_resource(session_id: str, app: AppContext = App) -> str:
    """A memory session as Markdown (its first 1,000 turns; memory_export_session pages through longer ones)."""
    try:
        return await anyio.to_thread.run_sync(app.memory.session_markdown, session_id)
    except MemoryInputError as exc:
        raise ResourceError(str(exc)) from exc


#: most values a completion answers with (the MCP limit is 100)
COMPLETIONS = 100


def session_ids(app: AppContext, prefix: str = "") -> list[str]:
    """Session ids starting with ``prefix``, newest first (among the 500 newest sessions), at most 100."""
    ids = [s["session_id"] for s in app.memory.list_sessions(None, 500, 0)["sessions"]]
    return [i for i in ids if i.startswith(prefix or "")][:COMPLETIONS]


#: completion of the session resource's ``session_id`` (session ids by prefix, newest first)
complete = by_prefix({(uri, "session_id"): session_ids for uri in (SESSION_URI, LOCAL_SESSION_URI)})
server.add_completion_handler(complete)
