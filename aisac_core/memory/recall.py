"""The dialogue index and what reads it: user -> assistant pairs embedded into the ``dialogue`` collection, their
repair (:func:`reconcile_dialogue`), recall within a token budget (:func:`recall`) and keyword + semantic search
over the turns (:func:`search`).

The functions take what they use of one store's memory: its engine, embedder, vector store, or the
:class:`~aisac_core.memory.common.MemoryParts` of its :class:`~aisac_core.memory.service.MemoryService` (which holds
the per-store state: the reconciled flag and the lock that serialises dialogue writes)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from aisac_core.memory.common import (
    KEYWORD_CANDIDATES,
    MAX_QUERY_CHARS,
    PAIR_TEXT_CHARS,
    ROLES,
    SEMANTIC_CANDIDATES,
    SNIPPET_CHARS,
    MemoryInputError,
    MemoryParts,
    _check_int,
    _check_str,
    _session,
    iso,
    stored_id,
    turn_dict,
)
from aisac_core.memory.results import Recall, RelatedPair, Search, SearchHit
from aisac_core.memory.results import Turn as TurnResult
from aisac_core.rag.search import PREFETCH, convex_fusion
from aisac_core.store.collections import DIALOGUE
from aisac_core.store.tables import MemorySession, Turn
from aisac_core.store.vectors import Cond, VectorPoint

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.store.vectors import VectorStore

_NS = uuid.UUID("6f1c2a52-4d0e-5a7b-9a51-3c0b7f0e4d21")


def point_id(assistant_turn_id: int) -> str:
    """Deterministic vector point id of the pair ending in ``assistant_turn_id``."""
    return str(uuid.uuid5(_NS, f"dialogue:{assistant_turn_id}"))


def _pair_text(user: str, assistant: str) -> str:
    text = f"User: {user.strip()}\nAssistant: {assistant.strip()}"
    return text[:PAIR_TEXT_CHARS]


def embed_pairs(embedder: Embedder, pairs: list[tuple[Turn, Turn]]) -> list[VectorPoint]:
    """The dialogue points of (user turn, assistant turn) pairs: dense + sparse vectors of their text, payload
    ``{session_id, user_turn_id, assistant_turn_id, text, created_at}``."""
    texts = [_pair_text(u.content, a.content) for u, a in pairs]
    dense = embedder.embed_documents(texts)
    sparse = embedder.sparse_documents(texts)
    return [
        VectorPoint(
            point_id(stored_id(a.id)),
            dv,
            list(sv[0]),
            list(sv[1]),
            {
                "session_id": a.session_id,
                "user_turn_id": u.id,
                "assistant_turn_id": a.id,
                "text": text,
                "created_at": iso(a.created_at),
            },
        )
        for (u, a), text, dv, sv in zip(pairs, texts, dense, sparse)
    ]


#: seconds of look-back of an incremental sync: a pair whose transaction took a lower turn id but committed after
#: a higher one was seen is still caught (transactions of add_turn last milliseconds)
SYNC_LOOKBACK_S = 60.0


def reconcile_dialogue(
    engine: Engine,
    embedder: Embedder,
    vs: VectorStore,
    lock: threading.Lock,
    batch: int = 256,
    after_id: int = 0,
    since: datetime | None = None,
) -> tuple[int, int]:
    """Upsert every pair recorded in SQL whose point (by id, :func:`point_id`) the ``dialogue`` collection of ``vs``
    lacks, embedded ``batch`` at a time, each upsert under ``lock``; returns ``(pairs added, highest assistant turn
    id seen)``.

    Compared by ids, not counts: equal counts can hide a missing pair behind an orphan point, and another process
    sharing the vectors adds pairs on its own. ``after_id`` 0: every pair in SQL against every point id in the
    collection (a process's first use; after a crash between the SQL commit and the vector upsert; after the
    collection was recreated for another embedding model). ``after_id`` > 0: only pairs with a higher assistant
    turn id, or created at or after ``since`` (the look-back for transactions that committed out of id order),
    looked up by id in the collection (cheap: run before every recall, so one replica's recall sees the pairs
    another replica recorded even when that replica died before embedding them)."""
    present: set[str] | None = {pid for pid, _ in vs.scroll_ids(DIALOGUE)} if after_id <= 0 else None
    added = 0
    last_id = 0
    high = max(after_id, 0)
    while True:
        with Session(engine) as db:
            q = select(Turn).where(col(Turn.pair_user_id).is_not(None), col(Turn.id) > last_id)
            if after_id > 0:
                newer = col(Turn.id) > after_id
                q = q.where(or_(newer, col(Turn.created_at) >= since) if since is not None else newer)
            rows = db.exec(q.order_by(col(Turn.id)).limit(batch * 8)).all()
            if not rows:
                break
            last_id = stored_id(rows[-1].id)
            high = max(high, last_id)
            if present is None:
                have = {h.id for h in vs.retrieve(DIALOGUE, [point_id(stored_id(a.id)) for a in rows])}
            else:
                have = present
            missing = [a for a in rows if point_id(stored_id(a.id)) not in have]
            users = (
                {
                    u.id: u
                    for u in db.exec(select(Turn).where(col(Turn.id).in_([a.pair_user_id for a in missing]))).all()
                }
                if missing
                else {}
            )
        pairs = [(users[a.pair_user_id], a) for a in missing if a.pair_user_id in users]
        for i in range(0, len(pairs), batch):
            pts = embed_pairs(embedder, pairs[i : i + batch])
            with lock:
                vs.upsert(DIALOGUE, pts)
            added += len(pts)
    if added:
        vs.flush()
    return added, high


def count_tokens(embedder: Embedder, texts: list[str]) -> list[int]:
    """Tokens of each text by the embedding model's tokenizer (no special tokens)."""
    if not texts:
        return []
    enc = embedder.tokenizer().encode_batch(texts, add_special_tokens=False)
    return [len(e.ids) for e in enc]


def truncate_to_tokens(embedder: Embedder, text: str, budget: int) -> str:
    """The longest start of ``text`` of at most ``budget`` tokens (the embedding model's tokenizer)."""
    enc = embedder.tokenizer().encode(text, add_special_tokens=False)
    if len(enc.ids) <= budget:
        return text
    if budget <= 0:
        return ""
    return text[: enc.offsets[budget - 1][1]]


def render(t: Turn) -> str:
    """A turn as its tokens are counted: ``role: content``."""
    return f"{t.role}: {t.content}"


def _pair_hits(
    mem: MemoryParts, query: str, k: int, conds: list[Cond] | None = None
) -> list[tuple[str, float, dict[str, Any]]]:
    """(point id, fused score, payload) of the top ``k`` dialogue pairs for ``query`` (hybrid convex fusion with
    theoretical min-max normalisation, no pseudo-relevance feedback: a dialogue holds too few pairs for it)."""
    vs = mem.dialogue()
    emb = mem.embedder
    hits = convex_fusion(
        vs, emb.embed_query(query), emb.sparse_query(query), k, conds or [], max(PREFETCH, 2 * k), collection=DIALOGUE
    )
    return [(h.id, h.score, h.payload) for h in hits]


def recall(
    mem: MemoryParts, session_id: str, query: str, last_n: int = 10, k: int = 5, token_budget: int = 2000
) -> Recall:
    """The Router's context for ``query`` in a session: its last ``last_n`` turns and the ``k`` most related
    older user -> assistant pairs of any session (pairs inside the last-N window are left out), within
    ``token_budget`` tokens.

    Assembly: recent turns first, newest to oldest, while they fit (a newest turn larger than the whole
    budget is cut); then related pairs by descending score, each added whole if it fits (a pair that does
    not fit is skipped and counted in ``omitted``). Tokens are counted with the embedding model's
    tokenizer over ``role: content`` of each turn and ``user: ...\\nassistant: ...`` of each pair.
    ``score`` (0..1): 0.5 x cosine / best cosine + 0.5 x BM25 / best BM25 over the candidates (theoretical
    min-max normalisation, floors 0, Bruch, Gai & Ingber, ACM TOIS 42(1), 2023; see
    :func:`aisac_core.rag.search.normalise`): the worst of a few candidates is not forced to 0, so two
    equally relevant pairs score alike.

    ``last_n`` 0-100, ``k`` 0-50, ``token_budget`` 1-100,000. Returns ``{session_id, session_title, query, recent,
    related, tokens, token_budget, omitted: {recent, related}, took_ms}``. Raises MemoryInputError on an unknown
    session, an empty or over-long query or a value out of range.
    """
    _check_str(query, "query", MAX_QUERY_CHARS)
    last_n = _check_int(last_n, "last_n", 0, 100)
    k = _check_int(k, "k", 0, 50)
    token_budget = _check_int(token_budget, "token_budget", 1, 100_000)
    t0 = time.perf_counter()
    embedder = mem.embedder
    with Session(mem.engine) as db:
        s = _session(db, session_id)
        recent = (
            list(
                reversed(
                    db.exec(
                        select(Turn)
                        .where(col(Turn.session_id) == session_id)
                        .order_by(col(Turn.created_at).desc(), col(Turn.id).desc())
                        .limit(last_n)
                    ).all()
                )
            )
            if last_n
            else []
        )
    window = {t.id for t in recent}
    related_raw: list[tuple[str, float, dict[str, Any]]] = []
    if k:
        related_raw = [
            h
            for h in _pair_hits(mem, query, k + last_n)
            if h[2].get("user_turn_id") not in window and h[2].get("assistant_turn_id") not in window
        ][:k]
    # authoritative text from SQL (the payload keeps only the first PAIR_TEXT_CHARS)
    ids = [i for _, _, p in related_raw for i in (p.get("user_turn_id"), p.get("assistant_turn_id"))]
    with Session(mem.engine) as db:
        turns_by_id = {t.id: t for t in db.exec(select(Turn).where(col(Turn.id).in_(ids))).all()} if ids else {}
        sess_ids = {t.session_id for t in turns_by_id.values()}
        titles = (
            {r.id: r.title for r in db.exec(select(MemorySession).where(col(MemorySession.id).in_(sess_ids))).all()}
            if sess_ids
            else {}
        )
    used = 0
    omitted_recent = omitted_related = 0
    chosen_recent: list[TurnResult] = []
    counts = count_tokens(embedder, [render(t) for t in recent])
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
            cut = truncate_to_tokens(embedder, render(t), token_budget)
            d["content"] = cut[len(t.role) + 2 :]
            d["truncated"] = True
            d["tokens"] = token_budget
            chosen_recent.append(d)
            used = token_budget
            omitted_recent = idx
        else:
            omitted_recent = idx + 1
        break
    chosen_recent.reverse()
    related: list[RelatedPair] = []
    cand = []
    for _pid, score, p in related_raw:
        u, a = turns_by_id.get(p.get("user_turn_id")), turns_by_id.get(p.get("assistant_turn_id"))
        if u is None or a is None:  # deleted meanwhile
            continue
        cand.append((score, u, a))
    pair_counts = count_tokens(embedder, [f"user: {u.content}\nassistant: {a.content}" for _, u, a in cand])
    for (score, u, a), n in zip(cand, pair_counts):
        if used + n > token_budget:
            omitted_related += 1
            continue
        related.append(
            {
                "score": round(score, 6),
                "session_id": u.session_id,
                "session_title": titles.get(u.session_id),
                "user_turn_id": stored_id(u.id),
                "assistant_turn_id": stored_id(a.id),
                "user": u.content,
                "assistant": a.content,
                "created_at": iso(a.created_at),
                "tokens": n,
            }
        )
        used += n
    return {
        "session_id": session_id,
        "session_title": s.title,
        "query": query,
        "recent": chosen_recent,
        "related": related,
        "tokens": used,
        "token_budget": token_budget,
        "omitted": {"recent": omitted_recent, "related": omitted_related},
        "took_ms": round((time.perf_counter() - t0) * 1000, 2),
    }


#: a search candidate: ("pair", assistant turn id) or ("turn", turn id)
_Key = tuple[Literal["pair", "turn"], int]


def search(
    mem: MemoryParts,
    query: str,
    session_id: str | None = None,
    roles: list[str] | None = None,
    mode: str = "hybrid",
    limit: int = 10,
    offset: int = 0,
) -> Search:
    """Keyword + semantic search over the turns of every session (or one).

    - keyword: turns whose content contains query words (case-insensitive substring; the newest
      :data:`KEYWORD_CANDIDATES` candidates), keyword score = share of the query's words found;
    - semantic: the :data:`SEMANTIC_CANDIDATES` best user -> assistant pairs (hybrid dense + BM25);
    - hybrid (default): both; a hit's score = 0.5 x semantic + 0.5 x keyword, a keyword hit inside a
      semantic pair merges into the pair.

    Hits: ``{kind: "pair" | "turn", score, semantic_score, keyword_score, session_id, turns: [...]}`` with
    turn contents cut to :data:`SNIPPET_CHARS` characters. Paged by ``offset`` over the ranked candidates.
    Returns ``{hits, count, total, offset, next_offset, mode, took_ms, message?}`` (``message`` when nothing
    matched). Raises MemoryInputError on an unknown session or role, a bad mode, limit (1-50) or offset.
    """
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
        with Session(mem.engine) as db:
            _session(db, session_id)
    words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", query) if len(w) > 1))[:20]
    # key: ("pair", assistant_id) or ("turn", turn_id) -> [semantic, keyword, turn ids]
    cands: dict[_Key, list[Any]] = {}
    turn_to_pair: dict[int, _Key] = {}
    if mode in ("hybrid", "semantic"):
        conds = [Cond("session_id", eq=session_id)] if session_id else None
        for _pid, score, p in _pair_hits(mem, query, SEMANTIC_CANDIDATES, conds):
            pair_key: _Key = ("pair", int(p["assistant_turn_id"]))
            cands[pair_key] = [score, 0.0, [int(p["user_turn_id"]), int(p["assistant_turn_id"])]]
            for tid in cands[pair_key][2]:
                turn_to_pair[tid] = pair_key
    if mode in ("hybrid", "keyword") and words:
        with Session(mem.engine) as db:
            q = select(col(Turn.id), col(Turn.content), col(Turn.pair_user_id)).where(
                or_(*[func.lower(col(Turn.content)).contains(w, autoescape=True) for w in words])
            )
            if session_id:
                q = q.where(col(Turn.session_id) == session_id)
            if roles:
                q = q.where(col(Turn.role).in_(roles))
            rows = db.exec(q.order_by(col(Turn.created_at).desc(), col(Turn.id).desc()).limit(KEYWORD_CANDIDATES)).all()
        # a keyword hit on either turn of an embedded pair counts for the pair
        answered_by: dict[int, int] = {}
        user_ids = [tid for tid, _c, _p in rows]
        with Session(mem.engine) as db:
            for i in range(0, len(user_ids), 500):
                answered_by.update(
                    {
                        stored_id(u): stored_id(a)
                        for a, u in db.exec(
                            select(col(Turn.id), col(Turn.pair_user_id)).where(
                                col(Turn.pair_user_id).in_(user_ids[i : i + 500])
                            )
                        ).all()
                    }
                )
        for row_id, content, pair_user in rows:
            tid = stored_id(row_id)
            low = content.lower()
            kw = sum(1 for w in words if w in low) / len(words)
            key: _Key | None = turn_to_pair.get(tid)
            if key is None and (pair_user is not None or tid in answered_by):
                a_id = tid if pair_user is not None else answered_by[tid]
                hit_pair: _Key = ("pair", a_id)
                key = hit_pair
                if hit_pair not in cands:
                    cands[hit_pair] = [0.0, 0.0, [pair_user if pair_user is not None else tid, a_id]]
            if key is not None:
                cands[key][1] = max(cands[key][1], kw)
            else:
                cands[("turn", tid)] = [0.0, kw, [tid]]
    w_sem, w_kw = {"hybrid": (0.5, 0.5), "semantic": (1.0, 0.0), "keyword": (0.0, 1.0)}[mode]
    ranked = sorted(cands.items(), key=lambda kv: (-(w_sem * kv[1][0] + w_kw * kv[1][1]), -kv[0][1]))
    total = len(ranked)
    page = ranked[offset : offset + limit]
    ids = [tid for _, v in page for tid in v[2]]
    with Session(mem.engine) as db:
        turns = {t.id: t for t in db.exec(select(Turn).where(col(Turn.id).in_(ids))).all()} if ids else {}
    hits: list[SearchHit] = []
    for (kind, _), (sem, kw, tids) in page:
        ts = [turns[t] for t in tids if t in turns]
        if roles:
            ts = [t for t in ts if t.role in roles] or ts
        if not ts:
            continue
        hits.append(
            {
                "kind": kind,
                "score": round(w_sem * sem + w_kw * kw, 6),
                "semantic_score": round(sem, 6),
                "keyword_score": round(kw, 6),
                "session_id": ts[0].session_id,
                "turns": [turn_dict(t, SNIPPET_CHARS) for t in ts],
            }
        )
    out: Search = {
        "hits": hits,
        "count": len(hits),
        "total": total,
        "offset": offset,
        "next_offset": offset + limit if offset + limit < total else None,
        "mode": mode,
        "took_ms": round((time.perf_counter() - t0) * 1000, 2),
    }
    if not hits:
        out["message"] = "no turn matched the query" + (" in this session" if session_id else "")
    return out
