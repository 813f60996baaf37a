"""The dialogue index and what reads it: user -> assistant pairs embedded into the ``dialogue`` collection, their
repair (:func:`reconcile_dialogue`), recall within a token budget (:meth:`DialogueRecall.recall`) and keyword + semantic search
over the turns (:meth:`DialogueRecall.search`).

The functions take what they use of one store's memory (its engine, embedder, vector store); recall and search are
the methods of :class:`DialogueRecall`, a part of :class:`~aisac_core.memory.service.MemoryService` (which holds the
per-store state: the reconciled flag and the lock that serialises dialogue writes) declaring the collaborators it
uses."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast

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
    Scope,
    _check_int,
    _check_str,
    _now,
    _session,
    _utc,
    iso,
    stored_id,
    turn_dict,
    turn_time,
)
from aisac_core.memory.results import Recall, RelatedPair, Search, SearchHit, TimeMention, TimeRange
from aisac_core.memory.results import Turn as TurnResult
from aisac_core.memory.timeexpr import MONTHS, day_seconds, resolve, span_seconds
from aisac_core.rag.search import PREFETCH, convex_fusion
from aisac_core.store.collections import DIALOGUE
from aisac_core.store.tables import MemorySession, Turn
from aisac_core.store.vectors import Cond, VectorPoint

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.store.vectors import VectorStore

_NS = uuid.UUID("6f1c2a52-4d0e-5a7b-9a51-3c0b7f0e4d21")
#: version of the ``dialogue`` payload: points of an older version are re-embedded by :func:`reconcile_dialogue`
#: (2: every turn indexed; scope fields ``project``/``participant``/``host``; times ``ts``/``t_lo``/``t_hi``)
PAYLOAD_VERSION = 2


def point_id(turn_id: int) -> str:
    """Deterministic vector point id of a turn's point (the pair a paired assistant turn closes, or the turn alone);
    a pair's id is that of its assistant turn, as in payload version 1, so a pair keeps its id."""
    return str(uuid.uuid5(_NS, f"dialogue:{turn_id}"))


def _label(t: Turn) -> str:
    return t.speaker or t.role.capitalize()


def _pair_text(user: str, assistant: str, user_label: str = "User", assistant_label: str = "Assistant") -> str:
    text = f"{user_label}: {user.strip()}\n{assistant_label}: {assistant.strip()}"
    return text[:PAIR_TEXT_CHARS]


def point_text(t: Turn, user: Turn | None) -> str:
    """The text a turn's point embeds: ``<speaker or Role>: content``, preceded by the user turn it answers (a pair),
    cut to :data:`PAIR_TEXT_CHARS` characters."""
    if user is not None:
        return _pair_text(user.content, t.content, _label(user), _label(t))
    return f"{_label(t)}: {t.content.strip()}"[:PAIR_TEXT_CHARS]


#: a turn to embed: (the turn, the user turn it answers or None, its session)
Unit = tuple[Turn, Turn | None, MemorySession]


def embed_turns(embedder: Embedder, units: list[Unit]) -> list[VectorPoint]:
    """The dialogue points of turns (:data:`Unit`): dense + sparse vectors of :func:`point_text`, payload ``{v, kind,
    turn_id, turn_ids, session_id, project, participant, host, speakers, roles, text, created_at, ts, date, t_lo,
    t_hi}`` plus ``user_turn_id`` / ``assistant_turn_id`` on a pair. ``ts``: the turn's time (:func:`turn_time`) in
    seconds since the epoch; ``t_lo`` / ``t_hi``: the hull of that day and of the days the turns' time expressions
    mean (:func:`aisac_core.memory.timeexpr.resolve`, against the turn's day)."""
    texts = [point_text(t, u) for t, u, _ in units]
    dense = embedder.embed_documents(texts)
    sparse = embedder.sparse_documents(texts)
    out = []
    for (t, u, ses), text, dv, sv in zip(units, texts, dense, sparse):
        when = turn_time(t, ses)
        ts = int(when.timestamp())
        day = when.date()
        mentions = resolve(f"{u.content}\n{t.content}" if u is not None else t.content, day)
        lo, hi = day_seconds(day), day_seconds(day) + 86_399
        sp = span_seconds(mentions)
        if sp is not None:
            lo, hi = min(lo, sp[0]), max(hi, sp[1])
        turns = [u, t] if u is not None else [t]
        payload: dict[str, Any] = {
            "v": PAYLOAD_VERSION,
            "kind": "pair" if u is not None else "turn",
            "turn_id": t.id,
            "turn_ids": [x.id for x in turns],
            "session_id": t.session_id,
            "speakers": sorted({x.speaker for x in turns if x.speaker}),
            "roles": [x.role for x in turns],
            "text": text,
            "created_at": iso(t.created_at),
            "ts": ts,
            "date": day.isoformat(),
            "t_lo": lo,
            "t_hi": hi,
        }
        for key in ("project", "participant", "host"):
            if getattr(ses, key):
                payload[key] = getattr(ses, key)
        if u is not None:
            payload["user_turn_id"] = u.id
            payload["assistant_turn_id"] = t.id
        out.append(VectorPoint(point_id(stored_id(t.id)), dv, list(sv[0]), list(sv[1]), payload))
    return out


def units_of(db: Session, rows: Sequence[Turn]) -> list[Unit]:
    """The :data:`Unit` of each turn of ``rows`` (its paired user turn and its session read in two queries); turns
    whose session is gone are left out."""
    uids = [t.pair_user_id for t in rows if t.pair_user_id is not None]
    users = {u.id: u for u in db.exec(select(Turn).where(col(Turn.id).in_(uids))).all()} if uids else {}
    sids = {t.session_id for t in rows}
    sessions = (
        {s.id: s for s in db.exec(select(MemorySession).where(col(MemorySession.id).in_(sids))).all()} if sids else {}
    )
    out: list[Unit] = []
    for t in rows:
        ses = sessions.get(t.session_id)
        if ses is None:
            continue
        out.append((t, users.get(t.pair_user_id) if t.pair_user_id is not None else None, ses))
    return out


#: seconds of look-back of an incremental sync: a turn whose transaction took a lower id but committed after
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
    """Upsert every turn recorded in SQL whose point (by id, :func:`point_id`, payload version
    :data:`PAYLOAD_VERSION`) the ``dialogue`` collection of ``vs`` lacks, embedded ``batch`` at a time, each upsert
    under ``lock``; returns ``(points added, highest turn id seen)``.

    Compared by ids and payload version, not counts: equal counts can hide a missing point behind an orphan, another
    process sharing the vectors adds points on its own, and a store written by an older aisac (payload version 1:
    pairs only, no scope fields) has its points re-embedded once, in place (same ids). ``after_id`` 0: every turn in
    SQL against every point of the collection (a process's first use; after a crash between the SQL commit and the
    vector upsert; after the collection was recreated for another embedding model). ``after_id`` > 0: only turns
    with a higher id, or created at or after ``since`` (the look-back for transactions that committed out of id
    order), looked up by id in the collection (cheap: run before every recall, so one replica's recall sees the
    turns another replica recorded even when that replica died before embedding them)."""
    present: set[str] | None = (
        {pid for pid, p in vs.scroll_ids(DIALOGUE, keys=["v"]) if p.get("v") == PAYLOAD_VERSION}
        if after_id <= 0
        else None
    )
    added = 0
    last_id = 0
    high = max(after_id, 0)
    while True:
        with Session(engine) as db:
            q = select(Turn).where(col(Turn.id) > last_id)
            if after_id > 0:
                newer = col(Turn.id) > after_id
                q = q.where(or_(newer, col(Turn.created_at) >= since) if since is not None else newer)
            rows = db.exec(q.order_by(col(Turn.id)).limit(batch * 8)).all()
            if not rows:
                break
            last_id = stored_id(rows[-1].id)
            high = max(high, last_id)
            if present is None:
                have = {
                    h.id
                    for h in vs.retrieve(DIALOGUE, [point_id(stored_id(t.id)) for t in rows])
                    if h.payload.get("v") == PAYLOAD_VERSION
                }
            else:
                have = present
            missing = [t for t in rows if point_id(stored_id(t.id)) not in have]
            units = units_of(db, missing) if missing else []
        for i in range(0, len(units), batch):
            pts = embed_turns(embedder, units[i : i + batch])
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


#: score added to a recalled point whose days (``t_lo``..``t_hi``) meet the days the question's time expressions
#: mean; chosen on the validation folds of ``python -m bench --only memory_conv`` (docs/memory.md)
TIME_WEIGHT = 0.25
#: weight of the second (multi-hop) round's score in the merged score of a point; chosen likewise
HOP_WEIGHT = 0.25
#: recall rounds by default: 1. A second round won on every held-out fold of the benchmark (+4 points of evidence
#: recall@20) but almost doubles the CPU time of a recall (p50 26 ms instead of 15 ms, over the 25 ms budget): callers ask
#: for it with ``hops=2`` (docs/memory.md). A second round by BM25 alone costs little but did not win on held-out folds.
DEFAULT_HOPS = 1
#: entities (capitalised names, places; dates) of the first round's best points that seed the second round
HOP_SEEDS = 3
HOP_ENTITIES = 6
_ENTITY = re.compile(r"\b[A-Z][a-z]{2,}(?:\s+[A-Z][a-z]{2,})*\b")
_NOT_ENTITIES = frozenset(
    "The This That These Those What When Where Which Who Why How User Assistant And But Yes Yeah Wow Thanks Thank "
    "Hey Hi Hello Sure Well Really Also Just Did Does Have Has Had Was Were Are Is Can Could Would Should Will It "
    "Its They Their There Then Our You Your Not Let Maybe Sounds Great Good Nice Oh So For From With".split()
)


def entities(text: str) -> list[str]:
    """Capitalised names and places of ``text`` (runs of capitalised words, common sentence openers left out) and its
    explicit dates, in order of appearance, without repeats: the seeds of a multi-hop recall round."""
    out: list[str] = []
    for m in _ENTITY.finditer(text):
        words = [w for w in m.group(0).split() if w not in _NOT_ENTITIES and w.lower() not in MONTHS]
        if words:
            out.append(" ".join(words))
    return list(dict.fromkeys(out))


def _turn_ids(p: dict[str, Any]) -> list[int]:
    ids = p.get("turn_ids")
    if isinstance(ids, list) and ids:
        return [int(i) for i in ids]
    return [int(p[k]) for k in ("user_turn_id", "assistant_turn_id") if p.get(k) is not None]


def distinct_units(
    ranked: list[tuple[float, dict[str, Any], bool]], k: int, exclude: set[int]
) -> list[tuple[float, list[int], dict[str, Any], bool]]:
    """The ``k`` best points as units of turns, each turn once: a point with a turn of ``exclude`` (the recent window)
    is left out; a turn recalled alone and then inside a pair becomes that pair (in the place of the better of the
    two); a point whose turns are all recalled already is skipped. ``(score, turn ids, payload, in range)``."""
    out: list[list[Any]] = []
    where: dict[int, int] = {}  # turn id -> index in out
    for score, p, in_range in ranked:
        ids = _turn_ids(p)
        if not ids or any(i in exclude for i in ids):
            continue
        new = [i for i in ids if i not in where]
        if not new:
            continue
        old = {where[i] for i in ids if i in where}
        if old:  # a pair over a turn already recalled alone: the pair takes that unit's place
            j = min(old)
            out[j] = [max(out[j][0], score), ids, p, in_range or out[j][3]]
            for i in ids:
                where[i] = j
            continue
        if len(out) >= k:
            continue
        for i in ids:
            where[i] = len(out)
        out.append([score, ids, p, in_range])
    return [(float(a), list(b), dict(c), bool(d)) for a, b, c, d in out]


def reference_time(s: MemorySession) -> datetime:
    """The date a question asked in session ``s`` is relative to: the session's ``started_at`` (an imported session),
    else now."""
    return _utc(s.started_at) if s.started_at is not None else _now()


def query_span(query: str, ref: datetime) -> tuple[TimeRange | None, tuple[int, int] | None]:
    """The days ``query``'s time expressions mean against ``ref`` (result shape and seconds), or (None, None)."""
    mentions = resolve(query, ref.date())
    sp = span_seconds(mentions)
    if sp is None:
        return None, None
    tr: TimeRange = {
        "first": min(m.first for m in mentions).isoformat(),
        "last": max(m.last for m in mentions).isoformat(),
        "reference": ref.date().isoformat(),
        "mentions": [cast(TimeMention, m.as_dict()) for m in mentions],
    }
    return tr, sp


#: a search candidate: ("pair", assistant turn id) or ("turn", turn id)
_Key = tuple[Literal["pair", "turn"], int]


class DialogueRecall:
    """Recall and search over the dialogue of one store: :meth:`recall` (the Router's context within a token
    budget) and :meth:`search` (keyword + semantic search over the turns). :class:`~aisac_core.memory.service.
    MemoryService` is one. The collaborators these methods use: ``engine`` (the SQL engine), ``embedder`` (queries
    embedded, tokens counted) and :meth:`dialogue` (the ``dialogue`` collection, reconciled with the turns)."""

    engine: Engine
    embedder: Embedder

    if TYPE_CHECKING:

        def dialogue(self, sync: bool = True) -> VectorStore:
            """The vector store holding the ``dialogue`` collection (:meth:`MemoryService.dialogue`)."""
            ...

    def _pair_hits(
        self, query: str, k: int, conds: list[Cond] | None = None
    ) -> list[tuple[str, float, dict[str, Any]]]:
        """(point id, fused score, payload) of the top ``k`` dialogue points for ``query`` (hybrid convex fusion with
        theoretical min-max normalisation, no pseudo-relevance feedback: a dialogue holds too few turns for it), only
        points matching every condition of ``conds`` (applied inside the vector query)."""
        vs = self.dialogue()
        emb = self.embedder
        hits = convex_fusion(
            vs,
            emb.embed_query(query),
            emb.sparse_query(query),
            k,
            conds or [],
            max(PREFETCH, 2 * k),
            collection=DIALOGUE,
        )
        return [(h.id, h.score, h.payload) for h in hits]

    def scoped_hits(
        self, query: str, n: int, scope: Scope, span: tuple[int, int] | None = None, hops: int = 1
    ) -> list[tuple[float, dict[str, Any], bool]]:
        """The ranked dialogue points for ``query`` within ``scope``: ``(score, payload, in time range)``, best first.

        ``span`` (seconds, from the question's time expressions): points whose days meet it are fetched by a second,
        time-filtered query too and gain :data:`TIME_WEIGHT`. ``hops`` 2: a second round with the query extended by
        the entities (:func:`entities`) of the first round's :data:`HOP_SEEDS` best points (hybrid, like the first); a
        point's score is its first round score plus :data:`HOP_WEIGHT` x its second round score (the rounds' union is ranked). The sum is divided by
        the sum of the weights that applied (1 + the time weight + the hop weight), so a score stays within 0..1."""
        conds = scope.conds()
        found: dict[str, list[Any]] = {}  # id -> [score, payload, in range]
        for pid, score, p in self._pair_hits(query, n, conds):
            found[pid] = [score, p, False]
        if span is not None:
            lo, hi = span
            for pid, score, p in self._pair_hits(query, n, [*conds, Cond("t_hi", gte=lo), Cond("t_lo", lte=hi)]):
                found.setdefault(pid, [score, p, False])
            for v in found.values():
                p = v[1]
                if isinstance(p.get("t_lo"), int | float) and p["t_lo"] <= hi and p.get("t_hi", 0) >= lo:
                    v[2] = True
        hopped = False
        if hops >= 2 and found:
            seeds = sorted(found.values(), key=lambda v: -v[0])[:HOP_SEEDS]
            known = {w.lower() for w in re.findall(r"\w+", query)}
            ents = [e for v in seeds for e in entities(str(v[1].get("text") or "")) if e.lower() not in known]
            ents = list(dict.fromkeys(ents))[:HOP_ENTITIES]
            if ents:
                hopped = True
                second = self._pair_hits(f"{query} {' '.join(ents)}", n, conds)
                for pid, score, p in second:
                    if pid in found:
                        found[pid][0] += HOP_WEIGHT * score
                    else:
                        found[pid] = [HOP_WEIGHT * score, p, False]
                if span is not None:
                    lo, hi = span
                    for v in found.values():
                        p = v[1]
                        if isinstance(p.get("t_lo"), int | float) and p["t_lo"] <= hi and p.get("t_hi", 0) >= lo:
                            v[2] = True
        # the weights' sum divides, so a score stays in 0..1 (the order is that of the weighted sum)
        total = 1.0 + (TIME_WEIGHT if span is not None else 0.0) + (HOP_WEIGHT if hopped else 0.0)
        ranked = [((v[0] + (TIME_WEIGHT if v[2] else 0.0)) / total, v[1], bool(v[2])) for v in found.values()]
        ranked.sort(key=lambda x: (-x[0], -int(x[1].get("turn_id") or 0)))
        return ranked

    def recall(
        self,
        session_id: str,
        query: str,
        last_n: int = 10,
        k: int = 5,
        token_budget: int = 2000,
        scope: Scope | dict[str, Any] | None = None,
        hops: int = DEFAULT_HOPS,
        time_aware: bool = True,
    ) -> Recall:
        """The Router's context for ``query`` in a session: its last ``last_n`` turns and the ``k`` most related older
        exchanges (user -> assistant pairs, and turns alone where a turn has no partner) within ``scope``, within
        ``token_budget`` tokens.

        Retrieval: hybrid convex fusion over the ``dialogue`` points, filtered by the scope inside the vector query
        (:class:`~aisac_core.memory.common.Scope`); a round's score: 0.5 x cosine / best cosine + 0.5 x BM25 / best BM25
        over the candidates (theoretical min-max normalisation, floors 0, Bruch, Gai & Ingber,
        ACM TOIS 42(1), 2023; see :func:`aisac_core.rag.search.normalise`). Time: with ``time_aware``, the query's time
        expressions ("last May", "two weeks ago", :mod:`aisac_core.memory.timeexpr`) are resolved against the asking
        session's date (:func:`reference_time`); exchanges whose days meet them gain :data:`TIME_WEIGHT` and carry
        ``in_time_range``; the result's ``time_range`` says what was understood. ``hops`` 2 adds a second round seeded by
        the first round's entities (:meth:`scoped_hits`; default :data:`DEFAULT_HOPS`). ``score`` (0..1) combines them
        (:meth:`scoped_hits`). Exchanges inside the last-N window are left out; each turn is recalled once
        (:func:`distinct_units`).

        Assembly: recent turns first, newest to oldest, while they fit (a newest turn larger than the whole budget is
        cut); then related exchanges by descending score, each added whole if it fits (one that does not fit is
        skipped and counted in ``omitted``). Tokens are counted with the embedding model's tokenizer over ``role:
        content`` of each turn.

        ``last_n`` 0-100, ``k`` 0-50, ``token_budget`` 1-100,000, ``hops`` 1-2. Returns ``{session_id, session_title,
        query, recent, related, tokens, token_budget, omitted: {recent, related}, took_ms, scope, time_range}``;
        each related item ``{kind, score, session_id, session_title, session_date, created_at, turns, mentions, tokens}``
        plus ``user``/``assistant`` and their ids on a pair. Raises MemoryInputError on an unknown session, an empty or
        over-long query, a bad scope or a value out of range.
        """
        # long function: one recall: scope filters, both retrieval rounds and their fusion share the query state
        _check_str(query, "query", MAX_QUERY_CHARS)
        last_n = _check_int(last_n, "last_n", 0, 100)
        k = _check_int(k, "k", 0, 50)
        token_budget = _check_int(token_budget, "token_budget", 1, 100_000)
        hops = _check_int(hops, "hops", 1, 2)
        sc = Scope.parse(scope)
        t0 = time.perf_counter()
        embedder = self.embedder
        with Session(self.engine) as db:
            s = _session(db, session_id)
            if sc.session_id is not None:
                _session(db, sc.session_id)  # a scope naming an unknown session is an error, not an empty recall
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
        window = {stored_id(t.id) for t in recent}
        time_range, span = query_span(query, reference_time(s)) if time_aware else (None, None)
        units: list[tuple[float, list[int], dict[str, Any], bool]] = []
        if k:
            ranked = self.scoped_hits(query, max(2 * (k + last_n), 20), sc, span, hops)
            units = distinct_units(ranked, k, window)
        # authoritative text from SQL (the payload keeps only the first PAIR_TEXT_CHARS)
        ids = [i for _, tids, _, _ in units for i in tids]
        with Session(self.engine) as db:
            turns_by_id = {t.id: t for t in db.exec(select(Turn).where(col(Turn.id).in_(ids))).all()} if ids else {}
            sess_ids = {t.session_id for t in turns_by_id.values()}
            sess = (
                {r.id: r for r in db.exec(select(MemorySession).where(col(MemorySession.id).in_(sess_ids))).all()}
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
        cand: list[tuple[float, list[Turn], dict[str, Any], bool]] = []
        for score, tids, p, in_range in units:
            ts = [turns_by_id[i] for i in tids if i in turns_by_id]
            if len(ts) != len(tids) or ts[0].session_id not in sess:  # deleted meanwhile
                continue
            cand.append((score, ts, p, in_range))
        unit_counts = count_tokens(embedder, ["\n".join(render(t) for t in ts) for _, ts, _, _ in cand])
        for (score, ts, _p, in_range), n in zip(cand, unit_counts):
            if used + n > token_budget:
                omitted_related += 1
                continue
            ses = sess[ts[0].session_id]
            when = turn_time(ts[-1], ses)
            item: RelatedPair = {
                "kind": "pair" if len(ts) == 2 and ts[1].pair_user_id == ts[0].id else "turn",
                "score": round(score, 6),
                "session_id": ts[0].session_id,
                "session_title": ses.title,
                "session_date": when.date().isoformat(),
                "created_at": iso(ts[-1].created_at),
                "turns": [turn_dict(t) for t in ts],
                "mentions": [
                    cast(TimeMention, m.as_dict()) for t in ts for m in resolve(t.content, turn_time(t, ses).date())
                ],
                "tokens": n,
            }
            if item["kind"] == "pair":
                item["user_turn_id"] = stored_id(ts[0].id)
                item["assistant_turn_id"] = stored_id(ts[1].id)
                item["user"] = ts[0].content
                item["assistant"] = ts[1].content
            if time_range is not None:
                item["in_time_range"] = in_range
            related.append(item)
            used += n
        out: Recall = {
            "session_id": session_id,
            "session_title": s.title,
            "query": query,
            "recent": chosen_recent,
            "related": related,
            "tokens": used,
            "token_budget": token_budget,
            "omitted": {"recent": omitted_recent, "related": omitted_related},
            "took_ms": round((time.perf_counter() - t0) * 1000, 2),
            "scope": sc.as_dict(),
            "time_range": time_range,
        }
        return out

    def search(
        self,
        query: str,
        session_id: str | None = None,
        roles: list[str] | None = None,
        mode: str = "hybrid",
        limit: int = 10,
        offset: int = 0,
        scope: Scope | dict[str, Any] | None = None,
    ) -> Search:
        """Keyword + semantic search over the turns of every session (or one), within ``scope``
        (:class:`~aisac_core.memory.common.Scope`; ``session_id`` is the scope's session).

        - keyword: turns whose content contains query words (case-insensitive substring; the newest
          :data:`KEYWORD_CANDIDATES` candidates), keyword score = share of the query's words found;
        - semantic: the :data:`SEMANTIC_CANDIDATES` best dialogue points - user -> assistant pairs and turns alone
          (hybrid dense + BM25), filtered by the scope inside the vector query;
        - hybrid (default): both; a hit's score = 0.5 x semantic + 0.5 x keyword, a keyword hit inside a
          semantic pair merges into the pair.

        Both candidate lists are filtered by the scope in their store query (payload filter; SQL ``WHERE``).
        Hits: ``{kind: "pair" | "turn", score, semantic_score, keyword_score, session_id, session_date, turns: [...]}`` with
        turn contents cut to :data:`SNIPPET_CHARS` characters. Paged by ``offset`` over the ranked candidates.
        Returns ``{hits, count, total, offset, next_offset, mode, took_ms, message?}`` (``message`` when nothing
        matched). Raises MemoryInputError on an unknown session or role, a bad mode, limit (1-50) or offset.
        """
        # long function: one dialogue search: the three modes share the scope filters and the result shaping
        _check_str(query, "query", MAX_QUERY_CHARS)
        if mode not in ("hybrid", "keyword", "semantic"):
            raise MemoryInputError(f"mode must be one of hybrid, keyword, semantic, got {mode!r}")
        limit = _check_int(limit, "limit", 1, 50)
        offset = _check_int(offset, "offset", 0, 10_000)
        if roles:
            bad = [r for r in roles if r not in ROLES]
            if bad:
                raise MemoryInputError(f"invalid role(s) {bad}: use {', '.join(ROLES)}")
        sc = Scope.parse(scope)
        if session_id:
            sc = Scope(session_id=session_id).over(sc)
        session_id = sc.session_id
        t0 = time.perf_counter()
        if session_id is not None:
            with Session(self.engine) as db:
                _session(db, session_id)
        words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", query) if len(w) > 1))[:20]
        # key: ("pair", assistant_id) or ("turn", turn_id) -> [semantic, keyword, turn ids]
        cands: dict[_Key, list[Any]] = {}
        turn_to_pair: dict[int, _Key] = {}
        if mode in ("hybrid", "semantic"):
            for _pid, score, p in self._pair_hits(query, SEMANTIC_CANDIDATES, sc.conds()):
                tids = _turn_ids(p)
                if not tids:
                    continue
                sem_key: _Key = ("pair", tids[-1]) if len(tids) == 2 else ("turn", tids[0])
                if sem_key in cands:
                    continue
                cands[sem_key] = [score, 0.0, tids]
                if sem_key[0] == "pair":
                    for tid in tids:
                        turn_to_pair[tid] = sem_key
            # a turn found alone and inside a found pair is one hit: the pair, with the better semantic score
            for alone in [kk for kk in cands if kk[0] == "turn" and kk[1] in turn_to_pair]:
                pk = turn_to_pair[alone[1]]
                cands[pk][0] = max(cands[pk][0], cands.pop(alone)[0])
        if mode in ("hybrid", "keyword") and words:
            with Session(self.engine) as db:
                q = select(col(Turn.id), col(Turn.content), col(Turn.pair_user_id)).where(
                    or_(*[func.lower(col(Turn.content)).contains(w, autoescape=True) for w in words])
                )
                q = scope_sql(q, sc)
                if roles:
                    q = q.where(col(Turn.role).in_(roles))
                rows = db.exec(
                    q.order_by(col(Turn.created_at).desc(), col(Turn.id).desc()).limit(KEYWORD_CANDIDATES)
                ).all()
            # a keyword hit on either turn of an embedded pair counts for the pair
            answered_by: dict[int, int] = {}
            user_ids = [tid for tid, _c, _p in rows]
            with Session(self.engine) as db:
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
                elif ("turn", tid) in cands:
                    cands[("turn", tid)][1] = max(cands[("turn", tid)][1], kw)
                else:
                    cands[("turn", tid)] = [0.0, kw, [tid]]
        w_sem, w_kw = {"hybrid": (0.5, 0.5), "semantic": (1.0, 0.0), "keyword": (0.0, 1.0)}[mode]
        ranked = sorted(cands.items(), key=lambda kv: (-(w_sem * kv[1][0] + w_kw * kv[1][1]), -kv[0][1]))
        total = len(ranked)
        page = ranked[offset : offset + limit]
        ids = [tid for _, v in page for tid in v[2]]
        with Session(self.engine) as db:
            turns = {t.id: t for t in db.exec(select(Turn).where(col(Turn.id).in_(ids))).all()} if ids else {}
            sids = {t.session_id for t in turns.values()}
            sess = (
                {r.id: r for r in db.exec(select(MemorySession).where(col(MemorySession.id).in_(sids))).all()}
                if sids
                else {}
            )
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
            if ts[0].session_id in sess:
                hits[-1]["session_date"] = turn_time(ts[-1], sess[ts[0].session_id]).date().isoformat()
        out: Search = {
            "hits": hits,
            "count": len(hits),
            "total": total,
            "offset": offset,
            "next_offset": offset + limit if offset + limit < total else None,
            "mode": mode,
            "took_ms": round((time.perf_counter() - t0) * 1000, 2),
        }
        if not sc.empty():
            out["scope"] = sc.as_dict()
        if not hits:
            out["message"] = "no turn matched the query" + (" in this scope" if not sc.empty() else "")
        return out


def scope_sql(q: Any, sc: Scope) -> Any:
    """``q`` (a select over ``Turn``) restricted to the turns of ``sc`` (a ``WHERE`` on the turn's session and on the
    turn's time: the session's ``started_at`` when set, else the turn's ``created_at``)."""
    if sc.session_id:
        q = q.where(col(Turn.session_id) == sc.session_id)
    ses_conds = [
        col(getattr(MemorySession, k)) == getattr(sc, k) for k in ("project", "participant", "host") if getattr(sc, k)
    ]
    if ses_conds:
        q = q.where(col(Turn.session_id).in_(select(col(MemorySession.id)).where(*ses_conds)))
    if sc.since is not None or sc.until is not None:
        when = func.coalesce(
            select(col(MemorySession.started_at))
            .where(col(MemorySession.id) == col(Turn.session_id))
            .scalar_subquery(),
            col(Turn.created_at),
        )
        if sc.since is not None:
            q = q.where(when >= sc.since)
        if sc.until is not None:
            q = q.where(when <= sc.until)
    return q
