"""Temporal facts: ``(subject, predicate, object)`` valid from ``valid_at`` until ``invalid_at``; recording one
closes the fact it supersedes; queried as of any time, or as a timeline."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from aisac_core.memory.common import (
    MAX_FACT_FIELD_CHARS,
    _check_int,
    _check_json,
    _check_str,
    _now,
    _utc,
    iso,
    parse_time,
    stored_id,
)
from aisac_core.memory.results import Fact as FactResult
from aisac_core.memory.results import Facts, Recorded, Timeline
from aisac_core.store.sql import lock
from aisac_core.store.tables import Fact

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


def fact_dict(f: Fact) -> FactResult:
    """JSON-ready fact."""
    return {
        "fact_id": stored_id(f.id),
        "subject": f.subject,
        "predicate": f.predicate,
        "object": f.object,
        "conditions": json.loads(f.conditions_json or "{}"),
        "valid_at": iso(f.valid_at),
        "invalid_at": iso(f.invalid_at),
        "source": f.source,
        "evidence_span": f.evidence_span,
        "run_id": f.run_id,
        "created_at": iso(f.created_at),
    }


class FactLog:
    """Temporal facts over one SQL store: the memory tools' ``memory_record_fact``, ``memory_query_facts`` and
    ``memory_fact_timeline``. :class:`~aisac_core.memory.service.MemoryService` is one (it has the engine); the
    only collaborator these methods use is ``engine``, the store's SQL engine (schema migrated)."""

    engine: Engine

    def record_fact(
        self,
        subject: str,
        predicate: str,
        object: str,
        conditions: dict[str, Any] | None = None,
        valid_at: str | None = None,
        source: str | None = None,
        evidence_span: str | None = None,
        run_id: str | None = None,
    ) -> Recorded:
        """Record a fact valid from ``valid_at`` (default now). The fact of the same subject + predicate that
        was valid at ``valid_at`` is closed (its ``invalid_at`` set to ``valid_at``); when a later fact exists
        (a back-dated record), the new fact is closed at that fact's ``valid_at``.

        ``subject``, ``predicate``, ``object``: non-empty, at most 10,000 characters (subject and predicate match any
        case); ``conditions``: a JSON object; ``valid_at``: ISO 8601 (or ``now``). Returns ``{fact: {...},
        superseded: {...} | None}``. Raises MemoryInputError on an empty or over-long field or a bad time."""
        _check_str(subject, "subject", MAX_FACT_FIELD_CHARS)
        _check_str(predicate, "predicate", MAX_FACT_FIELD_CHARS)
        _check_str(object, "object", MAX_FACT_FIELD_CHARS)
        cond = _check_json(conditions, "conditions")
        for name, val in (("source", source), ("evidence_span", evidence_span), ("run_id", run_id)):
            if val is not None:
                _check_str(val, name, MAX_FACT_FIELD_CHARS)
        va = parse_time(valid_at, "valid_at") or _now()
        sk, pk = subject.strip().lower(), predicate.strip().lower()
        with Session(self.engine) as db:  # serialised per (subject, predicate): supersede sees every earlier fact
            lock(db, "fact", sk, pk)
            same = (col(Fact.subject_key) == sk, col(Fact.predicate_key) == pk)
            prev = db.exec(
                select(Fact)
                .where(*same, col(Fact.valid_at) <= va, or_(col(Fact.invalid_at).is_(None), col(Fact.invalid_at) > va))
                .order_by(col(Fact.valid_at).desc(), col(Fact.id).desc())
                .limit(1)
            ).first()
            nxt = db.exec(
                select(Fact).where(*same, col(Fact.valid_at) > va).order_by(col(Fact.valid_at), col(Fact.id)).limit(1)
            ).first()
            superseded = None
            if prev is not None:
                prev.invalid_at = va
                db.add(prev)
            row = Fact(
                subject=subject.strip(),
                predicate=predicate.strip(),
                object=object,
                subject_key=sk,
                predicate_key=pk,
                conditions_json=cond,
                valid_at=va,
                invalid_at=nxt.valid_at if nxt is not None else None,
                source=source,
                evidence_span=evidence_span,
                run_id=run_id,
                created_at=_now(),
            )
            db.add(row)
            db.commit()
            db.refresh(row)
            if prev is not None:
                db.refresh(prev)
                superseded = fact_dict(prev)
            return {"fact": fact_dict(row), "superseded": superseded}

    def query_facts(
        self,
        subject: str | None = None,
        predicate: str | None = None,
        object: str | None = None,
        as_of: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> Facts:
        """Facts valid at ``as_of`` (default now: valid_at <= as_of < invalid_at, or still open), filtered by
        subject / predicate (case-insensitive, exact) and object (case-insensitive substring; ``%`` and ``_`` are
        literal characters, not SQL wildcards).

        Returns ``{facts, total, as_of, offset, next_offset}`` (``limit`` 1-500). Raises MemoryInputError on a bad
        time or limit."""
        at = parse_time(as_of, "as_of") or _now()
        limit = _check_int(limit, "limit", 1, 500)
        offset = _check_int(offset, "offset", 0, 10**9)
        conds = [col(Fact.valid_at) <= at, or_(col(Fact.invalid_at).is_(None), col(Fact.invalid_at) > at)]
        if subject:
            conds.append(col(Fact.subject_key) == subject.strip().lower())
        if predicate:
            conds.append(col(Fact.predicate_key) == predicate.strip().lower())
        if object:
            conds.append(func.lower(col(Fact.object)).contains(object.strip().lower(), autoescape=True))  # % _ literal
        with Session(self.engine) as db:
            total = db.exec(select(func.count()).select_from(Fact).where(*conds)).one()
            rows = db.exec(
                select(Fact)
                .where(*conds)
                .order_by(col(Fact.subject_key), col(Fact.predicate_key), col(Fact.valid_at), col(Fact.id))
                .offset(offset)
                .limit(limit)
            ).all()
        return {
            "facts": [fact_dict(f) for f in rows],
            "total": int(total),
            "as_of": iso(at),
            "offset": offset,
            "next_offset": offset + limit if offset + limit < total else None,
        }

    def fact_timeline(self, subject: str, predicate: str | None = None, limit: int = 100, offset: int = 0) -> Timeline:
        """Every fact about ``subject`` (optionally one predicate), current and superseded, by valid_at:
        ``{subject, facts: [{..., current}], total, offset, next_offset}`` (``limit`` 1-500). Raises
        MemoryInputError on an empty subject or a bad limit."""
        _check_str(subject, "subject", MAX_FACT_FIELD_CHARS)
        limit = _check_int(limit, "limit", 1, 500)
        offset = _check_int(offset, "offset", 0, 10**9)
        conds = [col(Fact.subject_key) == subject.strip().lower()]
        if predicate:
            conds.append(col(Fact.predicate_key) == predicate.strip().lower())
        now = _now()
        with Session(self.engine) as db:
            total = db.exec(select(func.count()).select_from(Fact).where(*conds)).one()
            rows = db.exec(
                select(Fact).where(*conds).order_by(col(Fact.valid_at), col(Fact.id)).offset(offset).limit(limit)
            ).all()
        facts: list[FactResult] = []
        for f in rows:
            d = fact_dict(f)
            d["current"] = _utc(f.valid_at) <= now and (f.invalid_at is None or _utc(f.invalid_at) > now)
            facts.append(d)
        return {
            "subject": subject,
            "facts": facts,
            "total": int(total),
            "offset": offset,
            "next_offset": offset + limit if offset + limit < total else None,
        }
