"""Memory: sessions, turns, dialogue recall and temporal facts (the memory server's logic; no MCP types).

Sessions and turns live in the SQL store (:class:`~aisac_core.store.sql.MemorySession`,
:class:`~aisac_core.store.sql.Turn`). A turn's ``created_at`` is assigned inside the ``BEGIN IMMEDIATE``
transaction that inserts it and is made strictly greater than the session's previous turn, so two
clients adding turns at once get one stable order: (created_at, id).

Dialogue index: when an assistant turn is added and the session has a user turn after its previous
assistant turn, the latest such user turn and the assistant turn form a pair, embedded (MiniLM dense +
BM25 sparse, the same embedder as documents) into the ``dialogue`` collection with payload
``{session_id, user_turn_id, assistant_turn_id, text, created_at}``. The SQL row commits first (it
records the pair in ``Turn.pair_user_id``); the vector upsert follows under a deterministic point id
(uuid5 of the assistant turn id), so a crash in between is repaired by :func:`reconcile_dialogue`, which
runs once per process on first use and upserts every pair the vector store lacks.

Recall (:func:`recall`): the last N turns of the session plus the related older pairs of any session
(hybrid convex fusion as in :mod:`aisac_core.rag.search`, pairs inside the last-N window excluded),
assembled within a token budget counted with the embedding model's tokenizer.

Facts (:class:`~aisac_core.store.sql.Fact`): ``(subject, predicate, object)`` valid from ``valid_at``
until ``invalid_at``. Recording a fact for a subject + predicate closes the fact that was valid at the
new ``valid_at`` (its ``invalid_at`` becomes the new ``valid_at``); a back-dated fact is inserted into
the timeline and closed by the next later one. Matching of subject and predicate is case-insensitive.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, delete, func, or_
from sqlmodel import Session, select

from aisac_core.store.tables import Fact, MemorySession, Turn
from aisac_core.hashing import dumps
from aisac_core.store.collections import DIALOGUE
from aisac_core.store.vectors import Cond, VectorPoint
from aisac_core.errors import AisacError

if TYPE_CHECKING:
    from aisac_core.context import AppContext

ROLES = ("user", "assistant", "router", "planner", "coordinator", "evaluator", "tool")
#: largest turn content, in characters
MAX_CONTENT_CHARS = 100_000
#: largest metadata / fact conditions, as canonical JSON characters
MAX_METADATA_CHARS = 100_000
MAX_QUERY_CHARS = 2_000
MAX_TITLE_CHARS = 500
MAX_FACT_FIELD_CHARS = 10_000
#: characters of a pair's text that are embedded and kept in the vector payload (MiniLM reads 256 tokens)
PAIR_TEXT_CHARS = 4_000
#: search hits carry at most this many characters of each turn's content (``truncated`` says so)
SNIPPET_CHARS = 2_000
#: keyword candidates read from SQL per search (newest first)
KEYWORD_CANDIDATES = 500
SEMANTIC_CANDIDATES = 100
_NS = uuid.UUID("6f1c2a52-4d0e-5a7b-9a51-3c0b7f0e4d21")


class MemoryInputError(AisacError, ValueError):
    """Bad memory input (unknown session, empty content, a limit exceeded, ...); the message says what
    was wrong and what is accepted."""


# ---------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------


def _utc(dt: datetime) -> datetime:
    """Aware UTC (a naive value is taken as UTC)."""
    return dt.astimezone(timezone.utc) if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def iso(dt: datetime | None) -> str | None:
    """ISO 8601 UTC with ``Z``."""
    if dt is None:
        return None
    return _utc(dt).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_time(value: str | None, name: str = "as_of") -> datetime | None:
    """Parse an ISO 8601 date or date-time (``2026-03-01``, ``2026-03-01T12:00:00Z``, ``...+02:00``;
    without an offset: UTC) to an aware UTC datetime; ``now`` is the current time. Raises MemoryInputError."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return _utc(value)
    if not isinstance(value, str) or not value.strip():
        raise MemoryInputError(f"{name} must be an ISO 8601 date or date-time string, e.g. '2026-03-01' or "
                               f"'2026-03-01T12:00:00Z', got {value!r}")
    v = value.strip()
    if v.lower() == "now":
        return _now()
    try:
        dt = datetime.fromisoformat(v[:-1] + "+00:00" if v.endswith(("Z", "z")) else v)
    except ValueError:
        raise MemoryInputError(f"{name} {value!r} is not an ISO 8601 date or date-time; use e.g. '2026-03-01', "
                               f"'2026-03-01T12:00:00Z' or '2026-03-01T14:00:00+02:00' (no offset = UTC)") from None
    return _utc(dt)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def point_id(assistant_turn_id: int) -> str:
    """Deterministic vector point id of the pair ending in ``assistant_turn_id``."""
    return str(uuid.uuid5(_NS, f"dialogue:{assistant_turn_id}"))


def _check_str(value: Any, name: str, limit: int, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        if not required and value == "":
            return None
        raise MemoryInputError(f"{name} is empty: give a non-empty string")
    if len(value) > limit:
        raise MemoryInputError(f"{name} is {len(value):,} characters long; the limit is {limit:,} characters")
    return value


def _check_json(value: Any, name: str) -> str:
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        raise MemoryInputError(f"{name} must be a JSON object (a dict), got {type(value).__name__}")
    text = dumps(value)
    if len(text) > MAX_METADATA_CHARS:
        raise MemoryInputError(f"{name} is {len(text):,} characters as JSON; the limit is {MAX_METADATA_CHARS:,}")
    return text


def _check_int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise MemoryInputError(f"{name} must be an integer from {lo} to {hi:,}, got {value!r}")
    return value


def _session(db: Session, session_id: str) -> MemorySession:
    if not isinstance(session_id, str) or not session_id:
        raise MemoryInputError("session_id is empty: memory_start_session returns one; memory_list_sessions lists them")
    row = db.get(MemorySession, session_id)
    if row is None:
        raise MemoryInputError(f"unknown session id {session_id!r}: memory_start_session creates one, "
                               "memory_list_sessions lists them")
    return row


def session_dict(s: MemorySession, turn_count: int | None = None, last_turn_at: datetime | None = None) -> dict:
    """JSON-ready session."""
    out: dict[str, Any] = {"session_id": s.id, "title": s.title, "project": s.project, "created_at": iso(s.created_at)}
    if turn_count is not None:
        out["turn_count"] = turn_count
        out["last_turn_at"] = iso(last_turn_at)
    return out


def turn_dict(t: Turn, max_chars: int | None = None) -> dict[str, Any]:
    """JSON-ready turn; content cut to ``max_chars`` (with ``truncated: true``) when given."""
    content = t.content
    truncated = max_chars is not None and len(content) > max_chars
    out = {"turn_id": t.id, "session_id": t.session_id, "role": t.role,
           "content": content[:max_chars] if truncated else content, "metadata": json.loads(t.metadata_json or "{}"),
           "parent_id": t.parent_id, "created_at": iso(t.created_at)}
    if t.pair_user_id is not None:
        out["answers_turn_id"] = t.pair_user_id
    if truncated:
        out["truncated"] = True
    return out


def _pair_text(user: str, assistant: str) -> str:
    text = f"User: {user.strip()}\nAssistant: {assistant.strip()}"
    return text[:PAIR_TEXT_CHARS]


# ---------------------------------------------------------------------------------------------------
# the vector side
# ---------------------------------------------------------------------------------------------------

_upsert_lock = threading.Lock()


class MemoryState:
    """Memory's state for one store (:attr:`aisac_core.context.AppContext.memory`): whether the dialogue collection
    was reconciled with the turns since the store opened."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.dialogue_reconciled = False


def _vs(core: "AppContext") -> Any:
    """The vector store with the dialogue collection; reconciles the pairs once per store."""
    vs = core.vectors()
    state = core.memory
    if not state.dialogue_reconciled:
        with state.lock:
            if not state.dialogue_reconciled:
                reconcile_dialogue(core, vs)
                state.dialogue_reconciled = True
    return vs


def _embed_pairs(core: "AppContext", pairs: list[tuple[Turn, Turn]]) -> list[VectorPoint]:
    texts = [_pair_text(u.content, a.content) for u, a in pairs]
    emb = core.embedder
    dense = emb.embed_documents(texts)
    sparse = emb.sparse_documents(texts)
    return [VectorPoint(point_id(a.id), dv, list(sv[0]), list(sv[1]),  # type: ignore[arg-type]
                        {"session_id": a.session_id, "user_turn_id": u.id, "assistant_turn_id": a.id, "text": text,
                         "created_at": iso(a.created_at)})
            for (u, a), text, dv, sv in zip(pairs, texts, dense, sparse)]


def _upsert(vs: Any, points: list[VectorPoint]) -> None:
    with _upsert_lock:
        vs.upsert(DIALOGUE, points)


def reconcile_dialogue(core: "AppContext", vs: Any | None = None, batch: int = 256) -> int:
    """Upsert every pair recorded in SQL that the ``dialogue`` collection lacks; returns how many.

    Cheap when nothing is missing (one count on each side). Runs after a crash between the SQL commit
    and the vector upsert, and after the collection was recreated (another embedding model)."""
    vs = vs or core.vectors()
    with Session(core.engine) as db:
        n_sql = db.exec(select(func.count()).select_from(Turn).where(Turn.pair_user_id.is_not(None))).one()
    if vs.count(DIALOGUE) >= n_sql:
        return 0
    present = {pid for pid, _ in vs.scroll_ids(DIALOGUE)}
    added = 0
    last_id = 0
    while True:
        with Session(core.engine) as db:
            rows = db.exec(select(Turn).where(Turn.pair_user_id.is_not(None), Turn.id > last_id)
                           .order_by(Turn.id).limit(batch * 8)).all()
            if not rows:
                break
            last_id = rows[-1].id  # type: ignore[assignment]
            missing = [a for a in rows if point_id(a.id) not in present]  # type: ignore[arg-type]
            users = {u.id: u for u in db.exec(select(Turn).where(Turn.id.in_([a.pair_user_id for a in missing]))).all()} \
                if missing else {}
        pairs = [(users[a.pair_user_id], a) for a in missing if a.pair_user_id in users]
        for i in range(0, len(pairs), batch):
            pts = _embed_pairs(core, pairs[i:i + batch])
            _upsert(vs, pts)
            added += len(pts)
    if added:
        vs.flush()
    return added


# ---------------------------------------------------------------------------------------------------
# sessions and turns
# ---------------------------------------------------------------------------------------------------


def start_session(core: "AppContext", title: str | None = None, project: str | None = None) -> dict[str, Any]:
    """Create a session: ``{session_id, title, project, created_at}``."""
    title = _check_str(title, "title", MAX_TITLE_CHARS, required=False)
    project = _check_str(project, "project", MAX_TITLE_CHARS, required=False)
    row = MemorySession(id="ses-" + uuid.uuid4().hex[:16], title=title, project=project, created_at=_now())
    with Session(core.engine) as db:
        db.add(row)
        db.commit()
        db.refresh(row)
        return session_dict(row, 0, None)


def add_turn(core: "AppContext", session_id: str, role: str, content: str, metadata: dict | None = None,
             parent_id: int | None = None) -> dict[str, Any]:
    """Append a turn; an assistant turn answering a user turn is embedded into the dialogue index.

    Returns ``{turn_id, session_id, role, created_at, parent_id, pair: {user_turn_id, assistant_turn_id} | None}``.
    Raises MemoryInputError: unknown session, invalid role, empty or over-long content, bad metadata,
    unknown parent.
    """
    if role not in ROLES:
        raise MemoryInputError(f"invalid role {role!r}: use one of {', '.join(ROLES)}")
    _check_str(content, "content", MAX_CONTENT_CHARS)
    meta = _check_json(metadata, "metadata")
    if parent_id is not None and (isinstance(parent_id, bool) or not isinstance(parent_id, int)):
        raise MemoryInputError(f"parent_id must be a turn id (integer), got {parent_id!r}")
    vs = _vs(core) if role == "assistant" else None  # open (and reconcile) before this turn commits
    with Session(core.engine) as db:  # one BEGIN IMMEDIATE transaction: order and pairing are race-free
        _session(db, session_id)
        if parent_id is not None:
            parent = db.get(Turn, parent_id)
            if parent is None or parent.session_id != session_id:
                raise MemoryInputError(f"parent_id {parent_id} is not a turn of session {session_id!r}")
        last = db.exec(select(Turn.created_at).where(Turn.session_id == session_id)
                       .order_by(Turn.created_at.desc(), Turn.id.desc()).limit(1)).first()
        now = _now()
        if last is not None and now <= _utc(last):
            now = _utc(last) + timedelta(microseconds=1)
        pair_user: Turn | None = None
        if role == "assistant":
            last_user = db.exec(select(Turn).where(Turn.session_id == session_id, Turn.role == "user")
                                .order_by(Turn.created_at.desc(), Turn.id.desc()).limit(1)).first()
            if last_user is not None:
                answered = db.exec(select(Turn.id).where(Turn.session_id == session_id, Turn.role == "assistant",
                                                         Turn.created_at > last_user.created_at).limit(1)).first()
                if answered is None:
                    pair_user = last_user
        row = Turn(session_id=session_id, role=role, content=content, metadata_json=meta, parent_id=parent_id,
                   pair_user_id=pair_user.id if pair_user else None, created_at=now)
        db.add(row)
        db.commit()
        db.refresh(row)
        if pair_user is not None:
            db.refresh(pair_user)
        out = {"turn_id": row.id, "session_id": session_id, "role": role, "created_at": iso(row.created_at),
               "parent_id": parent_id, "pair": None}
        pair = (pair_user, row) if pair_user is not None else None
    if pair is not None:  # after the commit: a crash here is repaired by reconcile_dialogue
        _upsert(vs, _embed_pairs(core, [pair]))
        out["pair"] = {"user_turn_id": pair[0].id, "assistant_turn_id": pair[1].id}
    return out


def _cursor_filter(db: Session, session_id: str, cursor: Any) -> Any:
    if cursor is None or cursor == "":
        return None
    try:
        cid = int(cursor)
    except (TypeError, ValueError):
        raise MemoryInputError(f"cursor {cursor!r} is not valid: pass next_cursor from the previous page") from None
    ref = db.get(Turn, cid)
    if ref is None or ref.session_id != session_id:
        raise MemoryInputError(f"cursor {cursor!r} is not a turn of session {session_id!r}: pass next_cursor "
                               "from the previous page of this session")
    return or_(Turn.created_at > ref.created_at, and_(Turn.created_at == ref.created_at, Turn.id > ref.id))


def count_tokens(core: "AppContext", texts: list[str]) -> list[int]:
    """Tokens of each text by the embedding model's tokenizer (no special tokens)."""
    if not texts:
        return []
    enc = core.embedder.tokenizer().encode_batch(texts, add_special_tokens=False)
    return [len(e.ids) for e in enc]


def _truncate_to_tokens(core: "AppContext", text: str, budget: int) -> str:
    enc = core.embedder.tokenizer().encode(text, add_special_tokens=False)
    if len(enc.ids) <= budget:
        return text
    if budget <= 0:
        return ""
    return text[:enc.offsets[budget - 1][1]]


def _render(t: Turn) -> str:
    return f"{t.role}: {t.content}"


def get_history(core: "AppContext", session_id: str, cursor: str | int | None = None, limit: int = 50,
                roles: list[str] | None = None, token_budget: int | None = None) -> dict[str, Any]:
    """Turns of a session, oldest first, from ``cursor``; optionally only ``roles``; at most ``limit`` turns
    and, with ``token_budget``, at most that many tokens (``role: content`` counted with the embedding
    tokenizer; a first turn larger than the budget is returned cut, with ``truncated: true``).

    Returns ``{session_id, turns, count, next_cursor, tokens}``; ``next_cursor`` is None at the end."""
    limit = _check_int(limit, "limit", 1, 500)
    if token_budget is not None:
        token_budget = _check_int(token_budget, "token_budget", 1, 1_000_000)
    if roles:
        bad = [r for r in roles if r not in ROLES]
        if bad:
            raise MemoryInputError(f"invalid role(s) {bad}: use {', '.join(ROLES)}")
    with Session(core.engine) as db:
        _session(db, session_id)
        q = select(Turn).where(Turn.session_id == session_id)
        cf = _cursor_filter(db, session_id, cursor)
        if cf is not None:
            q = q.where(cf)
        if roles:
            q = q.where(Turn.role.in_(roles))
        rows = db.exec(q.order_by(Turn.created_at, Turn.id).limit(limit + 1)).all()
    more = len(rows) > limit
    rows = rows[:limit]
    turns: list[dict[str, Any]] = []
    used = 0
    if token_budget is not None and rows:
        counts = count_tokens(core, [_render(t) for t in rows])
        for t, n in zip(rows, counts):
            if used + n > token_budget:
                if not turns:  # the first turn alone is over the budget: cut it so paging moves on
                    d = turn_dict(t)
                    head = len(t.role) + 2
                    d["content"] = _truncate_to_tokens(core, _render(t), token_budget)[head:]
                    d["truncated"] = True
                    turns.append(d)
                    used = token_budget
                more = True
                break
            turns.append(turn_dict(t))
            used += n
    else:
        turns = [turn_dict(t) for t in rows]
        used = sum(count_tokens(core, [_render(t) for t in rows])) if token_budget is not None else 0
    last_id = turns[-1]["turn_id"] if turns else None
    out: dict[str, Any] = {"session_id": session_id, "turns": turns, "count": len(turns),
                           "next_cursor": str(last_id) if more and last_id is not None else None}
    if token_budget is not None:
        out["tokens"] = used
        out["token_budget"] = token_budget
    return out


def list_sessions(core: "AppContext", project: str | None = None, limit: int = 50, offset: int = 0) -> dict[str, Any]:
    """Sessions, newest first: ``{sessions: [{session_id, title, project, created_at, turn_count,
    last_turn_at}], total, offset, next_offset}``."""
    limit = _check_int(limit, "limit", 1, 500)
    offset = _check_int(offset, "offset", 0, 10**9)
    with Session(core.engine) as db:
        base = select(MemorySession)
        cnt = select(func.count()).select_from(MemorySession)
        if project:
            base = base.where(MemorySession.project == project)
            cnt = cnt.where(MemorySession.project == project)
        total = db.exec(cnt).one()
        rows = db.exec(base.order_by(MemorySession.created_at.desc(), MemorySession.id).offset(offset).limit(limit)).all()
        stats = {sid: (n, last) for sid, n, last in db.exec(
            select(Turn.session_id, func.count(), func.max(Turn.created_at))
            .where(Turn.session_id.in_([r.id for r in rows])).group_by(Turn.session_id)).all()} if rows else {}
    sessions = []
    for r in rows:
        n, last = stats.get(r.id, (0, None))
        if isinstance(last, str):
            last = datetime.fromisoformat(last)
        sessions.append(session_dict(r, int(n), last))
    return {"sessions": sessions, "total": int(total), "offset": offset,
            "next_offset": offset + limit if offset + limit < total else None}


def _pair_hits(core: "AppContext", query: str, k: int, conds: list[Cond] | None = None) -> list[tuple[str, float, dict]]:
    """(point id, fused score, payload) of the top ``k`` dialogue pairs for ``query`` (hybrid convex fusion)."""
    from aisac_core.rag.search import PREFETCH, convex_fusion

    vs = _vs(core)
    emb = core.embedder
    hits = convex_fusion(vs, emb.embed_query(query), emb.sparse_query(query), k, conds or [],
                          max(PREFETCH, 2 * k), collection=DIALOGUE)
    return [(h.id, h.score, h.payload) for h in hits]


def recall(core: "AppContext", session_id: str, query: str, last_n: int = 10, k: int = 5,
           token_budget: int = 2000) -> dict[str, Any]:
    """The Router's context for ``query`` in a session: its last ``last_n`` turns and the ``k`` most related
    older user -> assistant pairs of any session (pairs inside the last-N window are left out), within
    ``token_budget`` tokens.

    Assembly: recent turns first, newest to oldest, while they fit (a newest turn larger than the whole
    budget is cut); then related pairs by descending score, each added whole if it fits (a pair that does
    not fit is skipped and counted in ``omitted``). Tokens are counted with the embedding model's
    tokenizer over ``role: content`` of each turn and ``user: ...\\nassistant: ...`` of each pair.
    ``score``: convex combination of min-max normalised dense cosine and BM25 over the candidates (0..1).
    """
    _check_str(query, "query", MAX_QUERY_CHARS)
    last_n = _check_int(last_n, "last_n", 0, 100)
    k = _check_int(k, "k", 0, 50)
    token_budget = _check_int(token_budget, "token_budget", 1, 100_000)
    t0 = time.perf_counter()
    with Session(core.engine) as db:
        s = _session(db, session_id)
        recent = list(reversed(db.exec(select(Turn).where(Turn.session_id == session_id)
                                       .order_by(Turn.created_at.desc(), Turn.id.desc()).limit(last_n)).all())) \
            if last_n else []
    window = {t.id for t in recent}
    related_raw: list[tuple[str, float, dict]] = []
    if k:
        related_raw = [h for h in _pair_hits(core, query, k + last_n)
                       if h[2].get("user_turn_id") not in window and h[2].get("assistant_turn_id") not in window][:k]
    # authoritative text from SQL (the payload keeps only the first PAIR_TEXT_CHARS)
    ids = [i for _, _, p in related_raw for i in (p.get("user_turn_id"), p.get("assistant_turn_id"))]
    with Session(core.engine) as db:
        turns_by_id = {t.id: t for t in db.exec(select(Turn).where(Turn.id.in_(ids))).all()} if ids else {}
        sess_ids = {t.session_id for t in turns_by_id.values()}
        titles = {r.id: r.title for r in db.exec(select(MemorySession).where(MemorySession.id.in_(sess_ids))).all()} \
            if sess_ids else {}
    used = 0
    omitted_recent = omitted_related = 0
    chosen_recent: list[dict[str, Any]] = []
    counts = count_tokens(core, [_render(t) for t in recent])
    for idx in range(len(recent) - 1, -1, -1):
        t, n = recent[idx], counts[idx]
        if used + n <= token_budget:
            d = turn_dict(t)
            d["tokens"] = n
            chosen_recent.append(d)
            used += n
            continue
        if not chosen_recent:
            d = turn_dict(t)
            cut = _truncate_to_tokens(core, _render(t), token_budget)
            d["content"] = cut[len(t.role) + 2:]
            d["truncated"] = True
            d["tokens"] = token_budget
            chosen_recent.append(d)
            used = token_budget
            omitted_recent = idx
        else:
            omitted_recent = idx + 1
        break
    chosen_recent.reverse()
    related: list[dict[str, Any]] = []
    cand = []
    for pid, score, p in related_raw:
        u, a = turns_by_id.get(p.get("user_turn_id")), turns_by_id.get(p.get("assistant_turn_id"))
        if u is None or a is None:  # deleted meanwhile
            continue
        cand.append((score, u, a))
    pair_counts = count_tokens(core, [f"user: {u.content}\nassistant: {a.content}" for _, u, a in cand])
    for (score, u, a), n in zip(cand, pair_counts):
        if used + n > token_budget:
            omitted_related += 1
            continue
        related.append({"score": round(score, 6), "session_id": u.session_id, "session_title": titles.get(u.session_id),
                        "user_turn_id": u.id, "assistant_turn_id": a.id, "user": u.content, "assistant": a.content,
                        "created_at": iso(a.created_at), "tokens": n})
        used += n
    return {"session_id": session_id, "session_title": s.title, "query": query, "recent": chosen_recent,
            "related": related, "tokens": used, "token_budget": token_budget,
            "omitted": {"recent": omitted_recent, "related": omitted_related},
            "took_ms": round((time.perf_counter() - t0) * 1000, 2)}


def search(core: "AppContext", query: str, session_id: str | None = None, roles: list[str] | None = None,
           mode: str = "hybrid", limit: int = 10, offset: int = 0) -> dict[str, Any]:
    """Keyword + semantic search over the turns of every session (or one).

    - keyword: turns whose content contains query words (case-insensitive substring; the newest
      :data:`KEYWORD_CANDIDATES` candidates), keyword score = share of the query's words found;
    - semantic: the :data:`SEMANTIC_CANDIDATES` best user -> assistant pairs (hybrid dense + BM25);
    - hybrid (default): both; a hit's score = 0.5 x semantic + 0.5 x keyword, a keyword hit inside a
      semantic pair merges into the pair.

    Hits: ``{kind: "pair" | "turn", score, semantic_score, keyword_score, session_id, turns: [...]}`` with
    turn contents cut to :data:`SNIPPET_CHARS` characters. Paged by ``offset`` over the ranked candidates.
    """
    import re

    _check_str(query, "query", MAX_QUERY_CHARS)
    if mode not in ("hybrid", "keyword", "semantic"):
        raise MemoryInputError(f"mode must be one of hybrid, keyword, semantic, got {mode!r}")
    limit = _check_int(limit, "limit", 1, 50)
    offset = _check_int(offset, "offset", 0, 10_000)
    if roles:
        bad = [r for r in roles if r not in ROLES]
        if bad:
            raise MemoryInputError(f"invalid role(s) {bad}: use {', '.join(ROLES)}")
    t0 = time.perf_counter()
    if session_id is not None:
        with Session(core.engine) as db:
            _session(db, session_id)
    words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", query) if len(w) > 1))[:20]
    # key: ("pair", assistant_id) or ("turn", turn_id) -> [semantic, keyword, turn ids]
    cands: dict[tuple[str, int], list[Any]] = {}
    turn_to_pair: dict[int, tuple[str, int]] = {}
    if mode in ("hybrid", "semantic"):
        conds = [Cond("session_id", eq=session_id)] if session_id else None
        for _pid, score, p in _pair_hits(core, query, SEMANTIC_CANDIDATES, conds):
            key = ("pair", int(p["assistant_turn_id"]))
            cands[key] = [score, 0.0, [int(p["user_turn_id"]), int(p["assistant_turn_id"])]]
            for tid in cands[key][2]:
                turn_to_pair[tid] = key
    if mode in ("hybrid", "keyword") and words:
        with Session(core.engine) as db:
            q = select(Turn.id, Turn.content, Turn.pair_user_id).where(or_(*[func.lower(Turn.content).contains(w) for w in words]))
            if session_id:
                q = q.where(Turn.session_id == session_id)
            if roles:
                q = q.where(Turn.role.in_(roles))
            rows = db.exec(q.order_by(Turn.created_at.desc(), Turn.id.desc()).limit(KEYWORD_CANDIDATES)).all()
        # a keyword hit on either turn of an embedded pair counts for the pair
        answered_by = {}
        user_ids = [tid for tid, _c, _p in rows]
        with Session(core.engine) as db:
            for i in range(0, len(user_ids), 500):
                answered_by.update({u: a for a, u in db.exec(select(Turn.id, Turn.pair_user_id).where(
                    Turn.pair_user_id.in_(user_ids[i:i + 500]))).all()})
        for tid, content, pair_user in rows:
            low = content.lower()
            kw = sum(1 for w in words if w in low) / len(words)
            key = turn_to_pair.get(tid)
            if key is None and (pair_user is not None or tid in answered_by):
                a_id = tid if pair_user is not None else answered_by[tid]
                key = ("pair", a_id)
                if key not in cands:
                    cands[key] = [0.0, 0.0, [pair_user if pair_user is not None else tid, a_id]]
            if key is not None:
                cands[key][1] = max(cands[key][1], kw)
            else:
                cands[("turn", tid)] = [0.0, kw, [tid]]
    w_sem, w_kw = {"hybrid": (0.5, 0.5), "semantic": (1.0, 0.0), "keyword": (0.0, 1.0)}[mode]
    ranked = sorted(cands.items(), key=lambda kv: (-(w_sem * kv[1][0] + w_kw * kv[1][1]), -kv[0][1]))
    total = len(ranked)
    page = ranked[offset:offset + limit]
    ids = [tid for _, v in page for tid in v[2]]
    with Session(core.engine) as db:
        turns = {t.id: t for t in db.exec(select(Turn).where(Turn.id.in_(ids))).all()} if ids else {}
    hits = []
    for (kind, _), (sem, kw, tids) in page:
        ts = [turns[t] for t in tids if t in turns]
        if roles:
            ts = [t for t in ts if t.role in roles] or ts
        if not ts:
            continue
        hits.append({"kind": kind, "score": round(w_sem * sem + w_kw * kw, 6), "semantic_score": round(sem, 6),
                     "keyword_score": round(kw, 6), "session_id": ts[0].session_id,
                     "turns": [turn_dict(t, SNIPPET_CHARS) for t in ts]})
    out: dict[str, Any] = {"hits": hits, "count": len(hits), "total": total, "offset": offset,
                           "next_offset": offset + limit if offset + limit < total else None, "mode": mode,
                           "took_ms": round((time.perf_counter() - t0) * 1000, 2)}
    if not hits:
        out["message"] = "no turn matched the query" + (" in this session" if session_id else "")
    return out


EXPORT_MAX_TURNS = 2000


def export_session(core: "AppContext", session_id: str, format: str = "markdown", cursor: str | int | None = None,
                   limit: int = 1000) -> dict[str, Any]:
    """A session with its turns (oldest first, at most ``limit`` per call; ``next_cursor`` continues) as
    JSON (``{session, turns, next_cursor}``) or Markdown (``{session_id, format, markdown, next_cursor}``)."""
    if format not in ("json", "markdown"):
        raise MemoryInputError(f"format must be 'json' or 'markdown', got {format!r}")
    limit = _check_int(limit, "limit", 1, EXPORT_MAX_TURNS)
    with Session(core.engine) as db:
        s = _session(db, session_id)
        total, last_at = db.exec(select(func.count(), func.max(Turn.created_at))
                                 .where(Turn.session_id == session_id)).one()
        if isinstance(last_at, str):
            last_at = datetime.fromisoformat(last_at)
        q = select(Turn).where(Turn.session_id == session_id)
        cf = _cursor_filter(db, session_id, cursor)
        if cf is not None:
            q = q.where(cf)
        rows = db.exec(q.order_by(Turn.created_at, Turn.id).limit(limit + 1)).all()
        first_no = 1
        if rows:
            first_no = db.exec(select(func.count()).select_from(Turn).where(
                Turn.session_id == session_id, or_(Turn.created_at < rows[0].created_at,
                                                   and_(Turn.created_at == rows[0].created_at, Turn.id < rows[0].id)))
            ).one() + 1
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = str(rows[-1].id) if more else None
    sd = session_dict(s, int(total), last_at)
    if format == "json":
        return {"session": sd, "turns": [turn_dict(t) for t in rows], "count": len(rows), "next_cursor": next_cursor}
    return {"session_id": session_id, "format": "markdown", "count": len(rows),
            "markdown": render_markdown(s, rows, int(total), first_no, next_cursor), "next_cursor": next_cursor}


def render_markdown(s: MemorySession, rows: list[Turn], total: int, first_no: int = 1,
                    next_cursor: str | None = None) -> str:
    """A readable Markdown transcript: a header with the session's metadata, then one section per turn
    (number, role, time, ids), its content, and its metadata as a JSON block when present."""
    lines = [f"# {s.title or 'Untitled session'}", "",
             f"- **session**: `{s.id}`", f"- **project**: {s.project or '-'}",
             f"- **created**: {iso(s.created_at)}", f"- **turns**: {total}"]
    if rows and (first_no != 1 or next_cursor):
        lines.append(f"- **this part**: turns {first_no}–{first_no + len(rows) - 1}")
    lines.append("")
    for i, t in enumerate(rows, start=first_no):
        ids = f"turn {t.id}" + (f", reply to {t.parent_id}" if t.parent_id else "") + \
              (f", answers {t.pair_user_id}" if t.pair_user_id else "")
        lines += ["---", "", f"### {i}. {t.role.capitalize()}", "", f"*{iso(t.created_at)} · {ids}*", "",
                  t.content.rstrip(), ""]
        meta = json.loads(t.metadata_json or "{}")
        if meta:
            lines += ["<details><summary>metadata</summary>", "", "```json",
                      json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=True), "```", "", "</details>", ""]
    if next_cursor:
        lines += ["---", "", f"*continued: export again with cursor `{next_cursor}`*", ""]
    return "\n".join(lines)


def session_markdown(core: "AppContext", session_id: str, max_turns: int = 1000) -> str:
    """The session as Markdown (the resource): its first ``max_turns`` turns, with a note when cut."""
    return export_session(core, session_id, "markdown", limit=max_turns)["markdown"]


def delete_session(core: "AppContext", session_id: str, confirm: bool = False) -> dict[str, Any]:
    """Delete a session, its turns and its dialogue pairs (facts are kept: they are beliefs with their own
    provenance, not part of the transcript). Requires ``confirm=True``."""
    if confirm is not True:
        raise MemoryInputError("deleting a session needs confirm=true (its turns and dialogue pairs are removed "
                               "for good; facts are kept)")
    with Session(core.engine) as db:
        _session(db, session_id)
        n_turns = db.exec(select(func.count()).select_from(Turn).where(Turn.session_id == session_id)).one()
        n_pairs = db.exec(select(func.count()).select_from(Turn).where(Turn.session_id == session_id,
                                                                      Turn.pair_user_id.is_not(None))).one()
        db.exec(delete(Turn).where(Turn.session_id == session_id))  # type: ignore[call-overload]
        db.exec(delete(MemorySession).where(MemorySession.id == session_id))  # type: ignore[call-overload]
        db.commit()
    vs = _vs(core)
    with _upsert_lock:
        vs.delete(DIALOGUE, [Cond("session_id", eq=session_id)])
    return {"deleted": session_id, "turns_deleted": int(n_turns), "pairs_deleted": int(n_pairs), "facts_kept": True}


# ---------------------------------------------------------------------------------------------------
# facts
# ---------------------------------------------------------------------------------------------------


def fact_dict(f: Fact) -> dict[str, Any]:
    """JSON-ready fact."""
    return {"fact_id": f.id, "subject": f.subject, "predicate": f.predicate, "object": f.object,
            "conditions": json.loads(f.conditions_json or "{}"), "valid_at": iso(f.valid_at),
            "invalid_at": iso(f.invalid_at), "source": f.source, "evidence_span": f.evidence_span,
            "run_id": f.run_id, "created_at": iso(f.created_at)}


def record_fact(core: "AppContext", subject: str, predicate: str, object: str, conditions: dict | None = None,
                valid_at: str | None = None, source: str | None = None, evidence_span: str | None = None,
                run_id: str | None = None) -> dict[str, Any]:
    """Record a fact valid from ``valid_at`` (default now). The fact of the same subject + predicate that
    was valid at ``valid_at`` is closed (its ``invalid_at`` set to ``valid_at``); when a later fact exists
    (a back-dated record), the new fact is closed at that fact's ``valid_at``.

    Returns ``{fact: {...}, superseded: {...} | None}``."""
    _check_str(subject, "subject", MAX_FACT_FIELD_CHARS)
    _check_str(predicate, "predicate", MAX_FACT_FIELD_CHARS)
    _check_str(object, "object", MAX_FACT_FIELD_CHARS)
    cond = _check_json(conditions, "conditions")
    for name, val in (("source", source), ("evidence_span", evidence_span), ("run_id", run_id)):
        if val is not None:
            _check_str(val, name, MAX_FACT_FIELD_CHARS)
    va = parse_time(valid_at, "valid_at") or _now()
    sk, pk = subject.strip().lower(), predicate.strip().lower()
    with Session(core.engine) as db:
        same = (Fact.subject_key == sk, Fact.predicate_key == pk)
        prev = db.exec(select(Fact).where(*same, Fact.valid_at <= va, or_(Fact.invalid_at.is_(None), Fact.invalid_at > va))
                       .order_by(Fact.valid_at.desc(), Fact.id.desc()).limit(1)).first()
        nxt = db.exec(select(Fact).where(*same, Fact.valid_at > va).order_by(Fact.valid_at, Fact.id).limit(1)).first()
        superseded = None
        if prev is not None:
            prev.invalid_at = va
            db.add(prev)
        row = Fact(subject=subject.strip(), predicate=predicate.strip(), object=object, subject_key=sk,
                   predicate_key=pk, conditions_json=cond, valid_at=va,
                   invalid_at=nxt.valid_at if nxt is not None else None, source=source,
                   evidence_span=evidence_span, run_id=run_id, created_at=_now())
        db.add(row)
        db.commit()
        db.refresh(row)
        if prev is not None:
            db.refresh(prev)
            superseded = fact_dict(prev)
        return {"fact": fact_dict(row), "superseded": superseded}


def query_facts(core: "AppContext", subject: str | None = None, predicate: str | None = None, object: str | None = None,
                as_of: str | None = None, limit: int = 50, offset: int = 0) -> dict[str, Any]:
    """Facts valid at ``as_of`` (default now: valid_at <= as_of < invalid_at, or still open), filtered by
    subject / predicate (case-insensitive, exact) and object (case-insensitive substring).

    Returns ``{facts, total, as_of, offset, next_offset}``."""
    at = parse_time(as_of, "as_of") or _now()
    limit = _check_int(limit, "limit", 1, 500)
    offset = _check_int(offset, "offset", 0, 10**9)
    conds = [Fact.valid_at <= at, or_(Fact.invalid_at.is_(None), Fact.invalid_at > at)]
    if subject:
        conds.append(Fact.subject_key == subject.strip().lower())
    if predicate:
        conds.append(Fact.predicate_key == predicate.strip().lower())
    if object:
        conds.append(func.lower(Fact.object).contains(object.strip().lower()))
    with Session(core.engine) as db:
        total = db.exec(select(func.count()).select_from(Fact).where(*conds)).one()
        rows = db.exec(select(Fact).where(*conds).order_by(Fact.subject_key, Fact.predicate_key, Fact.valid_at, Fact.id)
                       .offset(offset).limit(limit)).all()
    return {"facts": [fact_dict(f) for f in rows], "total": int(total), "as_of": iso(at), "offset": offset,
            "next_offset": offset + limit if offset + limit < total else None}


def fact_timeline(core: "AppContext", subject: str, predicate: str | None = None, limit: int = 100,
                  offset: int = 0) -> dict[str, Any]:
    """Every fact about ``subject`` (optionally one predicate), current and superseded, by valid_at:
    ``{subject, facts: [{..., current}], total, offset, next_offset}``."""
    _check_str(subject, "subject", MAX_FACT_FIELD_CHARS)
    limit = _check_int(limit, "limit", 1, 500)
    offset = _check_int(offset, "offset", 0, 10**9)
    conds = [Fact.subject_key == subject.strip().lower()]
    if predicate:
        conds.append(Fact.predicate_key == predicate.strip().lower())
    now = _now()
    with Session(core.engine) as db:
        total = db.exec(select(func.count()).select_from(Fact).where(*conds)).one()
        rows = db.exec(select(Fact).where(*conds).order_by(Fact.valid_at, Fact.id).offset(offset).limit(limit)).all()
    facts = []
    for f in rows:
        d = fact_dict(f)
        d["current"] = _utc(f.valid_at) <= now and (f.invalid_at is None or _utc(f.invalid_at) > now)
        facts.append(d)
    return {"subject": subject, "facts": facts, "total": int(total), "offset": offset,
            "next_offset": offset + limit if offset + limit < total else None}
