"""The memory server: sessions, turns, dialogue recall and temporal facts.

A thin adapter over :mod:`aisac_core.memory`. Mounted by the suite under the ``memory`` namespace, so the
tools are ``memory_start_session``, ``memory_add_turn``, ``memory_get_history``, ``memory_recall``,
``memory_search``, ``memory_list_sessions``, ``memory_export_session``, ``memory_delete_session``,
``memory_record_fact``, ``memory_query_facts``, ``memory_fact_timeline`` and the resource template
``aisac://memory/sessions/{session_id}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from fastmcp import FastMCP
from fastmcp.exceptions import ResourceError
from pydantic import Field

from aisac_core.context import AppContext

from .common import App, call_core

server = FastMCP(
    "memory",
    instructions=(
        "Remember research threads: sessions of turns (user, assistant, router, planner, coordinator, evaluator, "
        "tool), recall of the recent turns plus related older exchanges within a token budget, keyword + "
        "semantic search, and temporal facts (beliefs valid from/until a time, queried as of any time)."
    ),
)



class _LazyMemory:
    """``aisac_core.memory``, imported on first use: its SQL imports would slow the server's start."""

    def __getattr__(self, name: str) -> Any:
        from aisac_core import memory

        return getattr(memory, name)


mem = _LazyMemory()

Role = Literal["user", "assistant", "router", "planner", "coordinator", "evaluator", "tool"]
SessionId = Annotated[str, Field(description="session id from memory_start_session (ses-...)")]


@server.tool
async def start_session(
    title: Annotated[str | None, Field(description="short title of the thread (<= 500 characters)")] = None,
    project: Annotated[str | None, Field(description="project name, for filtering memory_list_sessions")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Start a memory session (a research thread).

    Result: ``{session_id, title, project, created_at, turn_count: 0, last_turn_at: null}`` (times are
    ISO 8601 UTC). Errors: title or project over 500 characters."""
    return await call_core(mem.start_session, app, title, project)


@server.tool
async def add_turn(
    session_id: SessionId,
    role: Annotated[str, Field(description="user, assistant, router, planner, coordinator, evaluator or tool")],
    content: Annotated[str, Field(description="the turn's text, 1 to 100,000 characters")],
    metadata: Annotated[dict[str, Any] | None, Field(
        description="optional JSON object: scratchpad, action log, plan patches, tool names, ...")] = None,
    parent_id: Annotated[int | None, Field(description="optional turn_id this turn replies to (same session)")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Append a turn to a session. Order is by ``created_at``, strictly increasing within a session even
    when several clients write at once. An assistant turn that answers a user turn (the latest user turn
    after the previous assistant turn) is embedded with it into the dialogue index, for memory_recall and
    memory_search.

    Result: ``{turn_id, session_id, role, created_at, parent_id, pair: {user_turn_id, assistant_turn_id} | null}``.
    Errors: unknown session id; invalid role (the error lists the roles); empty content; content over
    100,000 characters (the error names the limit); metadata not an object or over 100,000 characters as
    JSON; parent_id not a turn of this session."""
    return await call_core(mem.add_turn, app, session_id, role, content, metadata, parent_id)


@server.tool
async def get_history(
    session_id: SessionId,
    cursor: Annotated[str | None, Field(description="next_cursor of the previous page; omit for the start")] = None,
    limit: Annotated[int, Field(description="turns per page, 1 to 500")] = 50,
    roles: Annotated[list[Role] | None, Field(description="only these roles")] = None,
    token_budget: Annotated[int | None, Field(
        description="stop the page before it exceeds this many tokens (embedding tokenizer)")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """A session's turns, oldest first, one page at a time.

    Result: ``{session_id, turns: [{turn_id, session_id, role, content, metadata, parent_id, created_at,
    answers_turn_id?, truncated?}], count, next_cursor, tokens?, token_budget?}``; ``next_cursor`` is null
    on the last page. Tokens are counted with the embedding model's (MiniLM WordPiece) tokenizer over
    ``role: content``; when the first turn of a page alone exceeds ``token_budget`` it is cut and marked
    ``truncated``. Errors: unknown session id; bad cursor; limit outside 1..500; invalid role."""
    return await call_core(mem.get_history, app, session_id, cursor, limit, roles, token_budget)


@server.tool
async def recall(
    session_id: SessionId,
    query: Annotated[str, Field(description="what the next step is about (the user's new question)")],
    last_n: Annotated[int, Field(description="recent turns of this session to include, 0 to 100")] = 10,
    k: Annotated[int, Field(description="related older exchanges (from any session) to include, 0 to 50")] = 5,
    token_budget: Annotated[int, Field(description="most tokens for the whole context, 1 to 100,000")] = 2000,
    app: AppContext = App,
) -> dict[str, Any]:
    """The Router's context: the session's last ``last_n`` turns plus the ``k`` older user -> assistant
    exchanges of any session most related to ``query`` (pairs already among the last turns are left out),
    assembled within ``token_budget``.

    Tokens are counted with the embedding model's tokenizer (MiniLM WordPiece; an LLM's tokenizer differs,
    so leave some margin). Assembly: recent turns newest to oldest while they fit (a newest turn larger than
    the budget is cut, ``truncated: true``), then related pairs by score, each whole if it fits.

    Result: ``{session_id, session_title, query, recent: [{turn_id, role, content, metadata, created_at,
    tokens, ...}] (oldest first), related: [{score, session_id, session_title, user_turn_id,
    assistant_turn_id, user, assistant, created_at, tokens}], tokens, token_budget, omitted: {recent,
    related}, took_ms}``. ``score``: 0.5 x dense cosine + 0.5 x BM25, each min-max normalised over the
    candidates (0..1). Errors: unknown session id; empty query; last_n, k or token_budget out of range."""
    return await call_core(mem.recall, app, session_id, query, last_n, k, token_budget)


@server.tool
async def search(
    query: Annotated[str, Field(description="words or a question")],
    session_id: Annotated[str | None, Field(description="only this session; omit for all sessions")] = None,
    roles: Annotated[list[Role] | None, Field(description="keyword hits only from these roles")] = None,
    mode: Annotated[Literal["hybrid", "keyword", "semantic"], Field(
        description="hybrid (default) = keyword + semantic; keyword; semantic")] = "hybrid",
    limit: Annotated[int, Field(description="hits per page, 1 to 50")] = 10,
    offset: Annotated[int, Field(description="hits to skip (paging), 0 to 10,000")] = 0,
    app: AppContext = App,
) -> dict[str, Any]:
    """Search the turns of every session (or one): keyword (turns containing the query's words) and
    semantic (user -> assistant pairs by dense + BM25 similarity).

    Result: ``{hits: [{kind: "pair" | "turn", score, semantic_score, keyword_score, session_id, turns:
    [{turn_id, role, content (<= 2,000 characters, truncated: true when cut), metadata, created_at, ...}]}],
    count, total, offset, next_offset, mode, took_ms, message?}``. ``keyword_score`` = share of the query's
    words found; ``score`` = 0.5 x semantic + 0.5 x keyword in hybrid mode. No hits is not an error.
    Errors: empty query; unknown session id; unknown mode; limit or offset out of range; invalid role."""
    return await call_core(mem.search, app, query, session_id, roles, mode, limit, offset)


@server.tool
async def list_sessions(
    project: Annotated[str | None, Field(description="only this project")] = None,
    limit: Annotated[int, Field(description="sessions per page, 1 to 500")] = 50,
    offset: Annotated[int, Field(description="sessions to skip")] = 0,
    app: AppContext = App,
) -> dict[str, Any]:
    """Sessions, newest first, one page at a time.

    Result: ``{sessions: [{session_id, title, project, created_at, turn_count, last_turn_at}], total, offset,
    next_offset}`` (``next_offset`` null on the last page). Errors: limit outside 1..500; negative offset."""
    return await call_core(mem.list_sessions, app, project, limit, offset)


@server.tool
async def export_session(
    session_id: SessionId,
    format: Annotated[Literal["markdown", "json"], Field(description="markdown (readable) or json")] = "markdown",
    cursor: Annotated[str | None, Field(description="next_cursor of the previous part; omit for the start")] = None,
    limit: Annotated[int, Field(description="turns per part, 1 to 2,000")] = 1000,
    app: AppContext = App,
) -> dict[str, Any]:
    """Export a session with its turns, oldest first (long sessions come in parts: pass ``next_cursor``).

    Result (markdown): ``{session_id, format, count, markdown, next_cursor}``: a title, the session's id,
    project, creation time and turn count, then each turn numbered with its role, time, ids and content,
    and its metadata as a JSON block. Result (json): ``{session: {...}, turns: [...], count, next_cursor}``.
    Errors: unknown session id; unknown format; bad cursor; limit out of range."""
    return await call_core(mem.export_session, app, session_id, format, cursor, limit)


@server.tool
async def delete_session(
    session_id: SessionId,
    confirm: Annotated[bool, Field(description="must be true: deletion cannot be undone")] = False,
    app: AppContext = App,
) -> dict[str, Any]:
    """Delete a session, its turns and its embedded exchanges. Facts are kept (they are beliefs with
    their own source and run id, not part of the transcript).

    Result: ``{deleted, turns_deleted, pairs_deleted, facts_kept: true}``.
    Errors: confirm is not true; unknown session id."""
    return await call_core(mem.delete_session, app, session_id, confirm)


@server.tool
async def record_fact(
    subject: Annotated[str, Field(description="what the fact is about, e.g. 'hypothesis H1'")],
    predicate: Annotated[str, Field(description="the property, e.g. 'status' or 'activation_energy_kJ_mol'")],
    object: Annotated[str, Field(description="the value, e.g. 'supported' or '250 +- 12'")],
    conditions: Annotated[dict[str, Any] | None, Field(
        description="optional JSON object of conditions, e.g. {'temperature_K': 323}")] = None,
    valid_at: Annotated[str | None, Field(
        description="ISO 8601 time from which it holds (default now; no offset = UTC)")] = None,
    source: Annotated[str | None, Field(description="where it comes from: doc id, DOI, turn id, ...")] = None,
    evidence_span: Annotated[str | None, Field(description="the supporting text or an anchor reference")] = None,
    fact_run_id: Annotated[str | None, Field(description="run id that produced the fact")] = None,
    app: AppContext = App,
) -> dict[str, Any]:
    """Record a temporal fact. The fact with the same subject + predicate (case-insensitive) that was
    valid at ``valid_at`` is closed: its ``invalid_at`` becomes this ``valid_at``. A back-dated fact is
    closed at the next later fact's ``valid_at``.

    Result: ``{fact: {fact_id, subject, predicate, object, conditions, valid_at, invalid_at, source,
    evidence_span, run_id, created_at}, superseded: {...} | null}``.
    Errors: empty subject, predicate or object; a field over 10,000 characters; malformed valid_at;
    conditions not an object."""
    return await call_core(mem.record_fact, app, subject, predicate, object, conditions, valid_at, source,
                           evidence_span, fact_run_id)


@server.tool
async def query_facts(
    subject: Annotated[str | None, Field(description="exact subject (case-insensitive)")] = None,
    predicate: Annotated[str | None, Field(description="exact predicate (case-insensitive)")] = None,
    object: Annotated[str | None, Field(description="text the object contains (case-insensitive)")] = None,
    as_of: Annotated[str | None, Field(
        description="ISO 8601 time: the beliefs valid then (default now), e.g. '2026-03-01T12:00:00Z'")] = None,
    limit: Annotated[int, Field(description="facts per page, 1 to 500")] = 50,
    offset: Annotated[int, Field(description="facts to skip")] = 0,
    app: AppContext = App,
) -> dict[str, Any]:
    """The facts valid at ``as_of`` (valid_at <= as_of, and invalid_at later or open), filtered.

    Result: ``{facts: [{fact_id, subject, predicate, object, conditions, valid_at, invalid_at, source,
    evidence_span, run_id, created_at}], total, as_of, offset, next_offset}``.
    Errors: malformed as_of (the error shows accepted forms); limit or offset out of range."""
    return await call_core(mem.query_facts, app, subject, predicate, object, as_of, limit, offset)


@server.tool
async def fact_timeline(
    subject: Annotated[str, Field(description="the subject (case-insensitive)")],
    predicate: Annotated[str | None, Field(description="only this predicate")] = None,
    limit: Annotated[int, Field(description="facts per page, 1 to 500")] = 100,
    offset: Annotated[int, Field(description="facts to skip")] = 0,
    app: AppContext = App,
) -> dict[str, Any]:
    """Every fact about a subject, current and superseded, ordered by ``valid_at``: what was believed when,
    and what replaced it.

    Result: ``{subject, facts: [{fact_id, predicate, object, valid_at, invalid_at, current, ...}], total,
    offset, next_offset}``. Errors: empty subject; limit or offset out of range."""
    return await call_core(mem.fact_timeline, app, subject, predicate, limit, offset)


@server.resource("aisac://sessions/{session_id}", mime_type="text/markdown")
async def session_resource(session_id: str, app: AppContext = App) -> str:
    """A memory session as Markdown (its first 1,000 turns; memory_export_session pages through longer ones)."""
    try:
        return await anyio.to_thread.run_sync(mem.session_markdown, app, session_id)
    except mem.MemoryInputError as exc:
        raise ResourceError(str(exc)) from exc
