"""Sessions and their turns: start, add (pairing an assistant turn with the user turn it answers), page through
the history, list, export as JSON or Markdown, delete: the methods of :class:`SessionLog`, a part of the store's memory
service that declares the collaborators it uses."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, delete, func, or_
from sqlmodel import Session, col, select

from aisac_core.memory.common import (
    MAX_CONTENT_CHARS,
    MAX_TITLE_CHARS,
    ROLES,
    MemoryInputError,
    _check_int,
    _check_json,
    _check_str,
    _now,
    _session,
    _utc,
    iso,
    parse_time,
    session_dict,
    stored_id,
    turn_dict,
)
from aisac_core.memory.recall import count_tokens, embed_turns, render, truncate_to_tokens
from aisac_core.memory.results import AddedTurn, Deleted, Export, History, PairRef, Sessions
from aisac_core.memory.results import Session as SessionResult
from aisac_core.memory.results import Turn as TurnResult
from aisac_core.store.collections import DIALOGUE
from aisac_core.store.sql import lock
from aisac_core.store.tables import MemorySession, Turn
from aisac_core.store.vectors import Cond

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.rag.embeddings import Embedder
    from aisac_core.store.vectors import VectorStore


class SessionLog:
    """Sessions and their turns over one store: start, append (indexing each turn in the ``dialogue`` collection),
    page, list, export, delete. :class:`~aisac_core.memory.service.MemoryService` is one. The collaborators these
    methods use: ``engine`` (the SQL engine), ``embedder`` (pairs embedded, token budgets counted), ``upsert_lock``
    (serialises this store's writes to the ``dialogue`` collection) and :meth:`dialogue` (that collection, reconciled
    with the turns)."""

    engine: Engine
    embedder: Embedder
    upsert_lock: threading.Lock

    if TYPE_CHECKING:

        def dialogue(self, sync: bool = True) -> VectorStore:
            """The vector store holding the ``dialogue`` collection (:meth:`MemoryService.dialogue`)."""
            ...

    def start_session(
        self,
        title: str | None = None,
        project: str | None = None,
        participant: str | None = None,
        host: str | None = None,
        started_at: str | datetime | None = None,
    ) -> SessionResult:
        """Create a session: ``{session_id, title, project, created_at, turn_count: 0, last_turn_at: None, participant,
        host, started_at}``. ``title``, ``project``, ``participant`` (whose history), ``host`` (the MCP host recording
        it): at most 500 characters (empty = None); ``started_at``: when the conversation took place, ISO 8601, for a
        conversation imported from elsewhere (its turns then share that date: recall's time filters and time
        expressions use it). Raises MemoryInputError when a value is too long or not a date."""
        title = _check_str(title, "title", MAX_TITLE_CHARS, required=False)
        project = _check_str(project, "project", MAX_TITLE_CHARS, required=False)
        participant = _check_str(participant, "participant", MAX_TITLE_CHARS, required=False)
        host = _check_str(host, "host", MAX_TITLE_CHARS, required=False)
        started = parse_time(started_at, "started_at") if started_at is not None and started_at != "" else None
        row = MemorySession(
            id="ses-" + uuid.uuid4().hex[:16],
            title=title,
            project=project,
            participant=participant,
            host=host,
            started_at=started,
            created_at=_now(),
        )
        with Session(self.engine) as db:
            db.add(row)
            db.commit()
            db.refresh(row)
            return session_dict(row, 0, None)

    def add_turn(
        self,
        session_id: str,
        role: str,
        content: str,
        metadata: dict[str, Any] | None = None,
        parent_id: int | None = None,
        speaker: str | None = None,
    ) -> AddedTurn:
        """Append a turn and index it in the ``dialogue`` collection: an assistant turn answering a user turn as the pair
        of both (user turn first), every other turn alone, so every turn can be recalled whatever the roles and their
        order. ``speaker``: who said it, by name (at most 500 characters), kept with the turn and in its point.

        Returns ``{turn_id, session_id, role, created_at, parent_id, pair: {user_turn_id, assistant_turn_id} | None}``.
        Raises MemoryInputError: unknown session, invalid role, empty or over-long content, bad metadata or speaker,
        unknown parent.
        """
        if role not in ROLES:
            raise MemoryInputError(f"invalid role {role!r}: use one of {', '.join(ROLES)}")
        _check_str(content, "content", MAX_CONTENT_CHARS)
        meta = _check_json(metadata, "metadata")
        speaker = _check_str(speaker, "speaker", MAX_TITLE_CHARS, required=False)
        if parent_id is not None and (isinstance(parent_id, bool) or not isinstance(parent_id, int)):
            raise MemoryInputError(f"parent_id must be a turn id (integer), got {parent_id!r}")
        # open (and reconcile, the first time) before this turn commits; reads sync the other processes' turns
        vs = self.dialogue(sync=False)
        # one serialised transaction (store.sql.lock): order and pairing race-free; the rows stay loaded after the commit
        # (no refresh round trips: they are what was just written)
        with Session(self.engine, expire_on_commit=False) as db:
            lock(db, "turn", session_id)
            ses = _session(db, session_id)
            if parent_id is not None:
                parent = db.get(Turn, parent_id)
                if parent is None or parent.session_id != session_id:
                    raise MemoryInputError(f"parent_id {parent_id} is not a turn of session {session_id!r}")
            last = db.exec(
                select(col(Turn.created_at))
                .where(col(Turn.session_id) == session_id)
                .order_by(col(Turn.created_at).desc(), col(Turn.id).desc())
                .limit(1)
            ).first()
            now = _now()
            if last is not None and now <= _utc(last):
                now = _utc(last) + timedelta(microseconds=1)
            pair_user: Turn | None = None
            if role == "assistant":
                last_user = db.exec(
                    select(Turn)
                    .where(col(Turn.session_id) == session_id, col(Turn.role) == "user")
                    .order_by(col(Turn.created_at).desc(), col(Turn.id).desc())
                    .limit(1)
                ).first()
                if last_user is not None:
                    answered = db.exec(
                        select(col(Turn.id))
                        .where(
                            col(Turn.session_id) == session_id,
                            col(Turn.role) == "assistant",
                            col(Turn.created_at) > last_user.created_at,
                        )
                        .limit(1)
                    ).first()
                    if answered is None:
                        pair_user = last_user
            row = Turn(
                session_id=session_id,
                role=role,
                content=content,
                metadata_json=meta,
                parent_id=parent_id,
                pair_user_id=pair_user.id if pair_user else None,
                created_at=now,
                speaker=speaker,
            )
            db.add(row)
            db.commit()
            out: AddedTurn = {
                "turn_id": stored_id(row.id),
                "session_id": session_id,
                "role": role,
                "created_at": iso(row.created_at),
                "parent_id": parent_id,
                "pair": None,
            }
            unit = (row, pair_user, ses)
        # after the commit: a crash here is repaired by reconcile_dialogue
        points = embed_turns(self.embedder, [unit])
        with self.upsert_lock:
            vs.upsert(DIALOGUE, points)
        if pair_user is not None:
            ref: PairRef = {"user_turn_id": stored_id(pair_user.id), "assistant_turn_id": stored_id(row.id)}
            out["pair"] = ref
        return out

    def get_history(
        self,
        session_id: str,
        cursor: str | int | None = None,
        limit: int = 50,
        roles: list[str] | None = None,
        token_budget: int | None = None,
    ) -> History:
        """Turns of a session, oldest first, from ``cursor``; optionally only ``roles``; at most ``limit`` turns
        and, with ``token_budget``, at most that many tokens (``role: content`` counted with the embedding
        tokenizer; a first turn larger than the budget is returned cut, with ``truncated: true``).

        Returns ``{session_id, turns, count, next_cursor}`` and, with ``token_budget``, ``tokens`` and
        ``token_budget``; ``next_cursor`` is None at the end. Raises MemoryInputError on an unknown session or role,
        a bad cursor, limit (1-500) or token budget (1-1,000,000)."""
        limit = _check_int(limit, "limit", 1, 500)
        if token_budget is not None:
            token_budget = _check_int(token_budget, "token_budget", 1, 1_000_000)
        if roles:
            bad = [r for r in roles if r not in ROLES]
            if bad:
                raise MemoryInputError(f"invalid role(s) {bad}: use {', '.join(ROLES)}")
        with Session(self.engine) as db:
            _session(db, session_id)
            q = select(Turn).where(col(Turn.session_id) == session_id)
            cf = _cursor_filter(db, session_id, cursor)
            if cf is not None:
                q = q.where(cf)
            if roles:
                q = q.where(col(Turn.role).in_(roles))
            rows = db.exec(q.order_by(col(Turn.created_at), col(Turn.id)).limit(limit + 1)).all()
        more = len(rows) > limit
        rows = rows[:limit]
        turns: list[TurnResult] = []
        used = 0
        if token_budget is not None and rows:
            counts = count_tokens(self.embedder, [render(t) for t in rows])
            for t, n in zip(rows, counts):
                if used + n > token_budget:
                    if not turns:  # the first turn alone is over the budget: cut it so paging moves on
                        d = turn_dict(t)
                        head = len(t.role) + 2
                        d["content"] = truncate_to_tokens(self.embedder, render(t), token_budget)[head:]
                        d["truncated"] = True
                        turns.append(d)
                        used = token_budget
                    more = True
                    break
                turns.append(turn_dict(t))
                used += n
        else:
            turns = [turn_dict(t) for t in rows]
            used = sum(count_tokens(self.embedder, [render(t) for t in rows])) if token_budget is not None else 0
        last_id = turns[-1]["turn_id"] if turns else None
        out: History = {
            "session_id": session_id,
            "turns": turns,
            "count": len(turns),
            "next_cursor": str(last_id) if more and last_id is not None else None,
        }
        if token_budget is not None:
            out["tokens"] = used
            out["token_budget"] = token_budget
        return out

    def list_sessions(self, project: str | None = None, limit: int = 50, offset: int = 0) -> Sessions:
        """Sessions, newest first: ``{sessions: [{session_id, title, project, created_at, turn_count,
        last_turn_at}], total, offset, next_offset}`` (``limit`` 1-500). Raises MemoryInputError on a bad limit or
        offset."""
        limit = _check_int(limit, "limit", 1, 500)
        offset = _check_int(offset, "offset", 0, 10**9)
        with Session(self.engine) as db:
            base = select(MemorySession)
            cnt = select(func.count()).select_from(MemorySession)
            if project:
                base = base.where(col(MemorySession.project) == project)
                cnt = cnt.where(col(MemorySession.project) == project)
            total = db.exec(cnt).one()
            rows = db.exec(
                base.order_by(col(MemorySession.created_at).desc(), col(MemorySession.id)).offset(offset).limit(limit)
            ).all()
            stats = (
                {
                    sid: (n, last)
                    for sid, n, last in db.exec(
                        select(col(Turn.session_id), func.count(), func.max(col(Turn.created_at)))
                        .where(col(Turn.session_id).in_([r.id for r in rows]))
                        .group_by(col(Turn.session_id))
                    ).all()
                }
                if rows
                else {}
            )
        sessions = []
        for r in rows:
            n, last = stats.get(r.id, (0, None))
            if isinstance(last, str):
                last = datetime.fromisoformat(last)
            sessions.append(session_dict(r, int(n), last))
        return {
            "sessions": sessions,
            "total": int(total),
            "offset": offset,
            "next_offset": offset + limit if offset + limit < total else None,
        }

    def export_session(
        self, session_id: str, format: str = "markdown", cursor: str | int | None = None, limit: int = 1000
    ) -> Export:
        """A session with its turns (oldest first, at most ``limit`` (1-2,000) per call; ``next_cursor`` continues) as
        JSON (``{session, turns, count, next_cursor}``) or Markdown (``{session_id, format, count, markdown,
        next_cursor}``). Raises MemoryInputError on an unknown session, a bad format, cursor or limit."""
        if format not in ("json", "markdown"):
            raise MemoryInputError(f"format must be 'json' or 'markdown', got {format!r}")
        limit = _check_int(limit, "limit", 1, EXPORT_MAX_TURNS)
        with Session(self.engine) as db:
            s = _session(db, session_id)
            total, last_at = db.exec(
                select(func.count(), func.max(col(Turn.created_at))).where(col(Turn.session_id) == session_id)
            ).one()
            if isinstance(last_at, str):
                last_at = datetime.fromisoformat(last_at)
            q = select(Turn).where(col(Turn.session_id) == session_id)
            cf = _cursor_filter(db, session_id, cursor)
            if cf is not None:
                q = q.where(cf)
            rows = db.exec(q.order_by(col(Turn.created_at), col(Turn.id)).limit(limit + 1)).all()
            first_no = 1
            if rows:
                first_no = (
                    db.exec(
                        select(func.count())
                        .select_from(Turn)
                        .where(
                            col(Turn.session_id) == session_id,
                            or_(
                                col(Turn.created_at) < rows[0].created_at,
                                and_(col(Turn.created_at) == rows[0].created_at, col(Turn.id) < rows[0].id),
                            ),
                        )
                    ).one()
                    + 1
                )
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = str(rows[-1].id) if more else None
        sd = session_dict(s, int(total), last_at)
        if format == "json":
            return {
                "session": sd,
                "turns": [turn_dict(t) for t in rows],
                "count": len(rows),
                "next_cursor": next_cursor,
            }
        return {
            "session_id": session_id,
            "format": "markdown",
            "count": len(rows),
            "markdown": render_markdown(s, rows, int(total), first_no, next_cursor),
            "next_cursor": next_cursor,
        }

    def session_markdown(self, session_id: str, max_turns: int = 1000) -> str:
        """The session as Markdown (the resource): its first ``max_turns`` turns, with a note when cut. Raises
        MemoryInputError on an unknown session."""
        return self.export_session(session_id, "markdown", limit=max_turns)["markdown"]

    def delete_session(self, session_id: str, confirm: bool = False) -> Deleted:
        """Delete a session, its turns and its dialogue pairs (facts are kept: they are beliefs with their own
        provenance, not part of the transcript). Requires ``confirm=True``. Returns ``{deleted, turns_deleted,
        pairs_deleted, facts_kept: true}``; raises MemoryInputError without confirm or on an unknown session."""
        if confirm is not True:
            raise MemoryInputError(
                "deleting a session needs confirm=true (its turns and dialogue pairs are removed for good; facts are kept)"
            )
        with Session(self.engine) as db:
            _session(db, session_id)
            n_turns = db.exec(select(func.count()).select_from(Turn).where(col(Turn.session_id) == session_id)).one()
            n_pairs = db.exec(
                select(func.count())
                .select_from(Turn)
                .where(col(Turn.session_id) == session_id, col(Turn.pair_user_id).is_not(None))
            ).one()
            db.exec(delete(Turn).where(col(Turn.session_id) == session_id))
            db.exec(delete(MemorySession).where(col(MemorySession.id) == session_id))
            db.commit()
        vs = self.dialogue(sync=False)
        with self.upsert_lock:
            vs.delete(DIALOGUE, [Cond("session_id", eq=session_id)])
        return {"deleted": session_id, "turns_deleted": int(n_turns), "pairs_deleted": int(n_pairs), "facts_kept": True}


def _cursor_filter(db: Session, session_id: str, cursor: Any) -> Any:
    if cursor is None or cursor == "":
        return None
    try:
        cid = int(cursor)
    except (TypeError, ValueError):
        raise MemoryInputError(f"cursor {cursor!r} is not valid: pass next_cursor from the previous page") from None
    ref = db.get(Turn, cid)
    if ref is None or ref.session_id != session_id:
        raise MemoryInputError(
            f"cursor {cursor!r} is not a turn of session {session_id!r}: pass next_cursor "
            "from the previous page of this session"
        )
    return or_(
        col(Turn.created_at) > ref.created_at, and_(col(Turn.created_at) == ref.created_at, col(Turn.id) > ref.id)
    )


EXPORT_MAX_TURNS = 2000


def render_markdown(
    s: MemorySession, rows: Sequence[Turn], total: int, first_no: int = 1, next_cursor: str | None = None
) -> str:
    """A readable Markdown transcript: a header with the session's metadata, then one section per turn
    (number, role, time, ids), its content, and its metadata as a JSON block when present."""
    lines = [
        f"# {s.title or 'Untitled session'}",
        "",
        f"- **session**: `{s.id}`",
        f"- **project**: {s.project or '-'}",
        f"- **created**: {iso(s.created_at)}",
        f"- **turns**: {total}",
    ]
    if rows and (first_no != 1 or next_cursor):
        lines.append(f"- **this part**: turns {first_no}–{first_no + len(rows) - 1}")
    lines.append("")
    for i, t in enumerate(rows, start=first_no):
        ids = (
            f"turn {t.id}"
            + (f", reply to {t.parent_id}" if t.parent_id else "")
            + (f", answers {t.pair_user_id}" if t.pair_user_id else "")
        )
        lines += [
            "---",
            "",
            f"### {i}. {t.role.capitalize()}",
            "",
            f"*{iso(t.created_at)} · {ids}*",
            "",
            t.content.rstrip(),
            "",
        ]
        meta = json.loads(t.metadata_json or "{}")
        if meta:
            lines += [
                "<details><summary>metadata</summary>",
                "",
                "```json",
                json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=True),
                "```",
                "",
                "</details>",
                "",
            ]
    if next_cursor:
        lines += ["---", "", f"*continued: export again with cursor `{next_cursor}`*", ""]
    return "\n".join(lines)
