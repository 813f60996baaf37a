"""aisac_core.memory on real components: SQLite (or PostgreSQL), Qdrant Edge, the offline MiniLM model; the service is
built directly from the store's parts."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from aisac_core import memory as mem
from aisac_core.memory import MemoryInputError, MemoryService
from aisac_core.store.tables import Turn
from aisac_core.store.vectors import Cond

pytestmark = pytest.mark.both_engines


@pytest.fixture
def svc(fast_core) -> MemoryService:
    """A memory service over a fresh store: its SQL engine, its vector store (opened on first use), the embedder."""
    return MemoryService(fast_core.engine, fast_core.vectors, fast_core.embedder)


def _thread(svc: MemoryService, sid: str, pairs: list[tuple[str, str]]) -> list[dict]:
    out = []
    for q, a in pairs:
        out.append(svc.add_turn(sid, "user", q))
        out.append(svc.add_turn(sid, "assistant", a))
    return out


def test_turns_order_pairs_and_history_paging(fast_core, svc):
    sid = svc.start_session("lipase", "enzymes")["session_id"]
    u = svc.add_turn(sid, "user", "How fast does the lipase denature at 60 C?")
    r = svc.add_turn(sid, "router", "route: rag", {"route": "rag"})
    p = svc.add_turn(sid, "planner", "plan: search, then fit", {"plan": ["search", "fit"]}, parent_id=r["turn_id"])
    a = svc.add_turn(sid, "assistant", "Half-life about 12 minutes at 60 C.")
    # the assistant turn pairs with the latest user turn, across the router and planner turns
    assert a["pair"] == {"user_turn_id": u["turn_id"], "assistant_turn_id": a["turn_id"]}
    assert p["pair"] is None
    # a second assistant turn without a new user turn forms no pair
    assert svc.add_turn(sid, "assistant", "Anything else?")["pair"] is None
    stamps = [t["created_at"] for t in (u, r, p, a)]
    assert stamps == sorted(stamps) and len(set(stamps)) == 4
    # every turn is indexed (issue 45): the pair (u, a) under the assistant turn's id, and u, r, p and the second
    # assistant turn alone: 5 points, 1 of them a pair
    vs = fast_core.vectors()
    assert vs.count(mem.DIALOGUE) == 5
    assert vs.count(mem.DIALOGUE, [Cond("kind", eq="pair")]) == 1

    page1 = svc.get_history(sid, limit=2)
    assert [t["role"] for t in page1["turns"]] == ["user", "router"] and page1["next_cursor"]
    page2 = svc.get_history(sid, cursor=page1["next_cursor"], limit=2)
    assert [t["role"] for t in page2["turns"]] == ["planner", "assistant"]
    assert (
        page2["turns"][0]["metadata"] == {"plan": ["search", "fit"]} and page2["turns"][0]["parent_id"] == r["turn_id"]
    )
    last = svc.get_history(sid, cursor=page2["next_cursor"], limit=2)
    assert len(last["turns"]) == 1 and last["next_cursor"] is None
    only = svc.get_history(sid, roles=["assistant"])
    assert [t["role"] for t in only["turns"]] == ["assistant", "assistant"]
    # token budget: stops before exceeding, and a first turn larger than the budget is cut
    tb = svc.get_history(sid, token_budget=20)
    assert tb["tokens"] <= 20 and tb["next_cursor"] and tb["count"] < 5
    tiny = svc.get_history(sid, token_budget=3)
    assert tiny["count"] == 1 and tiny["turns"][0]["truncated"] and tiny["tokens"] == 3


def test_recall_within_budget_and_excludes_window(svc):
    s1 = svc.start_session("enzymes")["session_id"]
    _thread(
        svc,
        s1,
        [
            (
                "What activation energy did the Arrhenius fit give for lipase unfolding?",
                "The fit gave 250 kJ/mol for the thermal unfolding of the lipase.",
            ),
            ("Which buffer did we use?", "Phosphate buffer at pH 7.4."),
        ],
    )
    s2 = svc.start_session("corrosion")["session_id"]
    _thread(svc, s2, [("What protects X65 steel in CO2 brine?", "A siderite (FeCO3) layer forms above 60 C.")])
    res = svc.recall(s2, "energy barrier of enzyme denaturation", last_n=2, k=3, token_budget=500)
    assert [t["role"] for t in res["recent"]] == ["user", "assistant"]
    assert res["related"][0]["session_id"] == s1 and "250 kJ/mol" in res["related"][0]["assistant"]
    # the pair of the last-N window is not repeated among the related ones
    window = {t["turn_id"] for t in res["recent"]}
    assert all(r["assistant_turn_id"] not in window for r in res["related"])
    assert res["tokens"] <= 500 and res["tokens"] == sum(t["tokens"] for t in res["recent"] + res["related"])
    small = svc.recall(s2, "energy barrier of enzyme denaturation", last_n=2, k=3, token_budget=25)
    assert small["tokens"] <= 25 and small["related"] == [] and small["omitted"]["related"] >= 1
    cut = svc.recall(s2, "anything", last_n=2, k=0, token_budget=4)
    assert len(cut["recent"]) == 1 and cut["recent"][0]["truncated"] and cut["omitted"]["recent"] == 1


def test_search_keyword_and_semantic(svc):
    s1 = svc.start_session("a")["session_id"]
    _thread(svc, s1, [("Tell me about siderite scales", "Siderite is iron carbonate, protective above 60 C.")])
    svc.add_turn(s1, "tool", "rag_search returned 3 hits on siderite morphology")
    s2 = svc.start_session("b")["session_id"]
    _thread(svc, s2, [("What is the Nusselt number?", "A dimensionless heat transfer coefficient.")])
    kw = svc.search("siderite", mode="keyword")
    assert kw["total"] == 2 and {h["kind"] for h in kw["hits"]} == {"pair", "turn"}
    sem = svc.search("convective heat transfer", mode="semantic", limit=1)
    assert sem["hits"][0]["session_id"] == s2 and sem["next_offset"] == 1
    only = svc.search("siderite", session_id=s2)
    assert all(h["session_id"] == s2 for h in only["hits"])
    tool = svc.search("morphology", mode="keyword", roles=["tool"])
    assert tool["hits"][0]["turns"][0]["role"] == "tool"


def test_facts_supersession_as_of_and_timeline(svc):
    svc.record_fact("H1", "status", "proposed", valid_at="2026-01-01")
    r = svc.record_fact("h1", "Status", "supported", valid_at="2026-02-01T00:00:00Z", source="doc:abc")
    assert r["superseded"]["object"] == "proposed" and r["superseded"]["invalid_at"] == "2026-02-01T00:00:00.000000Z"
    svc.record_fact("H1", "effect_size", "0.4", valid_at="2026-01-15")
    # a back-dated fact slots in between and is closed by the later one
    back = svc.record_fact("H1", "status", "doubtful", valid_at="2026-01-20T00:00:00+01:00")
    assert back["fact"]["invalid_at"] == "2026-02-01T00:00:00.000000Z"
    assert back["superseded"]["object"] == "proposed"

    def status(as_of):
        return [f["object"] for f in svc.query_facts(subject="H1", predicate="status", as_of=as_of)["facts"]]

    assert status("2025-12-31") == []
    assert status("2026-01-10") == ["proposed"]
    assert status("2026-01-25") == ["doubtful"]
    assert status("2026-02-01") == ["supported"]
    assert status(None) == ["supported"]
    assert len(svc.query_facts(subject="H1")["facts"]) == 2  # status + effect_size
    assert svc.query_facts(object="SUPP")["facts"][0]["object"] == "supported"
    tl = svc.fact_timeline("h1", predicate="status")
    assert [f["object"] for f in tl["facts"]] == ["proposed", "doubtful", "supported"]
    assert [f["current"] for f in tl["facts"]] == [False, False, True]
    with pytest.raises(MemoryInputError, match="not an ISO 8601"):
        svc.query_facts(as_of="last tuesday")
    with pytest.raises(MemoryInputError, match="valid_at"):
        svc.record_fact("H1", "status", "x", valid_at="2026-13-45")


def test_bad_input(svc):
    sid = svc.start_session()["session_id"]
    with pytest.raises(MemoryInputError, match="unknown session id"):
        svc.add_turn("ses-nope", "user", "hi")
    with pytest.raises(MemoryInputError, match="content is empty"):
        svc.add_turn(sid, "user", "   ")
    with pytest.raises(MemoryInputError, match="the limit is 100,000 characters"):
        svc.add_turn(sid, "user", "x" * 100_001)
    with pytest.raises(MemoryInputError, match="invalid role 'boss'"):
        svc.add_turn(sid, "boss", "hi")
    with pytest.raises(MemoryInputError, match="confirm=true"):
        svc.delete_session(sid)
    with pytest.raises(MemoryInputError, match="cursor"):
        svc.get_history(sid, cursor="abc")
    assert svc.add_turn(sid, "user", "x" * 100_000)["turn_id"]


def test_delete_session_removes_turns_and_pairs_keeps_facts(fast_core, svc):
    s1 = svc.start_session("gone")["session_id"]
    s2 = svc.start_session("kept")["session_id"]
    _thread(svc, s1, [("q1", "a1"), ("q2", "a2")])
    _thread(svc, s2, [("q3", "a3")])
    svc.record_fact("X", "is", "y")
    # every turn is indexed (issue 45): 3 pairs and their 3 user turns alone (was 3 pairs)
    assert fast_core.vectors().count(mem.DIALOGUE) == 6
    out = svc.delete_session(s1, confirm=True)
    assert out == {"deleted": s1, "turns_deleted": 4, "pairs_deleted": 2, "facts_kept": True}
    assert fast_core.vectors().count(mem.DIALOGUE) == 2  # s2's pair and its user turn (was 1: the pair)
    assert svc.list_sessions()["total"] == 1
    assert svc.query_facts(subject="X")["total"] == 1
    with pytest.raises(MemoryInputError, match="unknown session id"):
        svc.get_history(s1)


def test_reconcile_repairs_a_lost_vector_upsert(fast_core, svc):
    """A crash between the SQL commit and the vector upsert: the next process's first use re-embeds it."""
    sid = svc.start_session()["session_id"]
    _thread(svc, sid, [("first question", "first answer"), ("second question", "second answer")])
    vs = fast_core.vectors()
    with Session(fast_core.engine) as db:
        a_id = db.exec(select(Turn.id).where(Turn.role == "assistant").order_by(Turn.id.desc())).first()
    vs.delete(mem.DIALOGUE, [Cond("assistant_turn_id", eq=a_id)])
    # 2 pairs + their 2 user turns alone (issue 45: every turn indexed; was 2 pairs), one pair lost
    assert vs.count(mem.DIALOGUE) == 3
    assert svc.reconcile_dialogue() == 1
    assert vs.count(mem.DIALOGUE) == 4
    assert svc.reconcile_dialogue() == 0  # converged


def test_a_new_service_reconciles_on_first_use_and_holds_its_own_state(fast_core, svc):
    """The reconciled flag and the dialogue lock are per service (per store), not per process: a service built
    later on the same store repairs a lost pair on its first use, and the context builds one service per store."""
    sid = svc.start_session()["session_id"]
    _thread(svc, sid, [("first question", "first answer"), ("second question", "second answer")])
    vs = fast_core.vectors()
    first = svc.get_history(sid)["turns"][1]["turn_id"]
    vs.delete(mem.DIALOGUE, [Cond("assistant_turn_id", eq=first)])
    # reconciled once already, but every use syncs the recent pairs by id (a replica sharing the SQL store records
    # pairs too): the lost pair is embedded again by this service
    # (4 points: 2 pairs and their 2 user turns alone, issue 45; were 2 pairs)
    svc.recall(sid, "first", last_n=0, k=1)
    assert vs.count(mem.DIALOGUE) == 4
    vs.delete(mem.DIALOGUE, [Cond("assistant_turn_id", eq=first)])
    assert vs.count(mem.DIALOGUE) == 3
    fresh = MemoryService(fast_core.engine, fast_core.vectors, fast_core.embedder)
    assert fresh.upsert_lock is not svc.upsert_lock
    res = fresh.recall(sid, "first question", last_n=0, k=2)
    assert vs.count(mem.DIALOGUE) == 4 and {r.get("assistant_turn_id") for r in res["related"]} >= {first}
    assert isinstance(fast_core.memory, MemoryService) and fast_core.memory is fast_core.memory
    assert fast_core.memory.engine is fast_core.engine and fast_core.memory.embedder is fast_core.embedder


def test_list_sessions_pages_and_export(svc):
    ids = [svc.start_session(f"s{i}", "p" if i % 2 else None)["session_id"] for i in range(5)]
    page = svc.list_sessions(limit=2)
    assert page["total"] == 5 and page["next_offset"] == 2 and page["sessions"][0]["session_id"] == ids[-1]
    assert svc.list_sessions(project="p")["total"] == 2
    sid = ids[0]
    for i in range(5):
        svc.add_turn(sid, "user" if i % 2 == 0 else "planner", f"turn {i}", {"i": i})
    part1 = svc.export_session(sid, "markdown", limit=3)
    assert "### 1. User" in part1["markdown"] and "### 3. User" in part1["markdown"] and part1["next_cursor"]
    part2 = svc.export_session(sid, "markdown", cursor=part1["next_cursor"], limit=3)
    assert "### 4. Planner" in part2["markdown"] and part2["next_cursor"] is None
    js = svc.export_session(sid, "json")
    assert js["session"]["turn_count"] == 5 and [t["metadata"]["i"] for t in js["turns"]] == list(range(5))
    with pytest.raises(MemoryInputError, match="format"):
        svc.export_session(sid, "pdf")


def test_recall_two_relevant_pairs_score_alike(svc):
    s1 = svc.start_session("lipase")["session_id"]
    _thread(
        svc,
        s1,
        [
            (
                "What was the lipase half-life at 60 C?",
                "The lipase lost half of its activity after 12 minutes at 60 C.",
            ),
            ("And the lipase half-life at 70 C?", "At 70 C the lipase lost half of its activity within 3 minutes."),
        ],
    )
    s2 = svc.start_session("follow-up")["session_id"]
    res = svc.recall(s2, "how fast does the lipase lose activity when heated", last_n=0, k=5)
    scores = [r["score"] for r in res["related"]]
    # both exchanges answer the question: both score high and close (min-max over two gave 1.0 and 0.0)
    assert len(scores) == 2 and min(scores) > 0.7 and max(scores) - min(scores) < 0.2, scores
