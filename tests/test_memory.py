"""aisac_core.memory on real components: SQLite, Qdrant Edge, the offline MiniLM model."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from aisac_core import memory as mem
from aisac_core.memory import MemoryInputError
from aisac_core.store.tables import Turn
from aisac_core.store.vectors import Cond

pytestmark = pytest.mark.both_engines


def _thread(core, sid: str, pairs: list[tuple[str, str]]) -> list[dict]:
    out = []
    for q, a in pairs:
        out.append(mem.add_turn(core, sid, "user", q))
        out.append(mem.add_turn(core, sid, "assistant", a))
    return out


def test_turns_order_pairs_and_history_paging(fast_core):
    sid = mem.start_session(fast_core, "lipase", "enzymes")["session_id"]
    u = mem.add_turn(fast_core, sid, "user", "How fast does the lipase denature at 60 C?")
    r = mem.add_turn(fast_core, sid, "router", "route: rag", {"route": "rag"})
    p = mem.add_turn(fast_core, sid, "planner", "plan: search, then fit", {"plan": ["search", "fit"]}, parent_id=r["turn_id"])
    a = mem.add_turn(fast_core, sid, "assistant", "Half-life about 12 minutes at 60 C.")
    # the assistant turn pairs with the latest user turn, across the router and planner turns
    assert a["pair"] == {"user_turn_id": u["turn_id"], "assistant_turn_id": a["turn_id"]}
    assert p["pair"] is None
    # a second assistant turn without a new user turn forms no pair
    assert mem.add_turn(fast_core, sid, "assistant", "Anything else?")["pair"] is None
    stamps = [t["created_at"] for t in (u, r, p, a)]
    assert stamps == sorted(stamps) and len(set(stamps)) == 4
    assert fast_core.vectors().count(mem.DIALOGUE) == 1

    page1 = mem.get_history(fast_core, sid, limit=2)
    assert [t["role"] for t in page1["turns"]] == ["user", "router"] and page1["next_cursor"]
    page2 = mem.get_history(fast_core, sid, cursor=page1["next_cursor"], limit=2)
    assert [t["role"] for t in page2["turns"]] == ["planner", "assistant"]
    assert page2["turns"][0]["metadata"] == {"plan": ["search", "fit"]} and page2["turns"][0]["parent_id"] == r["turn_id"]
    last = mem.get_history(fast_core, sid, cursor=page2["next_cursor"], limit=2)
    assert len(last["turns"]) == 1 and last["next_cursor"] is None
    only = mem.get_history(fast_core, sid, roles=["assistant"])
    assert [t["role"] for t in only["turns"]] == ["assistant", "assistant"]
    # token budget: stops before exceeding, and a first turn larger than the budget is cut
    tb = mem.get_history(fast_core, sid, token_budget=20)
    assert tb["tokens"] <= 20 and tb["next_cursor"] and tb["count"] < 5
    tiny = mem.get_history(fast_core, sid, token_budget=3)
    assert tiny["count"] == 1 and tiny["turns"][0]["truncated"] and tiny["tokens"] == 3


def test_recall_within_budget_and_excludes_window(fast_core):
    s1 = mem.start_session(fast_core, "enzymes")["session_id"]
    _thread(fast_core, s1, [
        ("What activation energy did the Arrhenius fit give for lipase unfolding?",
         "The fit gave 250 kJ/mol for the thermal unfolding of the lipase."),
        ("Which buffer did we use?", "Phosphate buffer at pH 7.4."),
    ])
    s2 = mem.start_session(fast_core, "corrosion")["session_id"]
    _thread(fast_core, s2, [("What protects X65 steel in CO2 brine?", "A siderite (FeCO3) layer forms above 60 C.")])
    res = mem.recall(fast_core, s2, "energy barrier of enzyme denaturation", last_n=2, k=3, token_budget=500)
    assert [t["role"] for t in res["recent"]] == ["user", "assistant"]
    assert res["related"][0]["session_id"] == s1 and "250 kJ/mol" in res["related"][0]["assistant"]
    # the pair of the last-N window is not repeated among the related ones
    window = {t["turn_id"] for t in res["recent"]}
    assert all(r["assistant_turn_id"] not in window for r in res["related"])
    assert res["tokens"] <= 500 and res["tokens"] == sum(t["tokens"] for t in res["recent"] + res["related"])
    small = mem.recall(fast_core, s2, "energy barrier of enzyme denaturation", last_n=2, k=3, token_budget=25)
    assert small["tokens"] <= 25 and small["related"] == [] and small["omitted"]["related"] >= 1
    cut = mem.recall(fast_core, s2, "anything", last_n=2, k=0, token_budget=4)
    assert len(cut["recent"]) == 1 and cut["recent"][0]["truncated"] and cut["omitted"]["recent"] == 1


def test_search_keyword_and_semantic(fast_core):
    s1 = mem.start_session(fast_core, "a")["session_id"]
    _thread(fast_core, s1, [("Tell me about siderite scales", "Siderite is iron carbonate, protective above 60 C.")])
    mem.add_turn(fast_core, s1, "tool", "rag_search returned 3 hits on siderite morphology")
    s2 = mem.start_session(fast_core, "b")["session_id"]
    _thread(fast_core, s2, [("What is the Nusselt number?", "A dimensionless heat transfer coefficient.")])
    kw = mem.search(fast_core, "siderite", mode="keyword")
    assert kw["total"] == 2 and {h["kind"] for h in kw["hits"]} == {"pair", "turn"}
    sem = mem.search(fast_core, "convective heat transfer", mode="semantic", limit=1)
    assert sem["hits"][0]["session_id"] == s2 and sem["next_offset"] == 1
    only = mem.search(fast_core, "siderite", session_id=s2)
    assert all(h["session_id"] == s2 for h in only["hits"])
    tool = mem.search(fast_core, "morphology", mode="keyword", roles=["tool"])
    assert tool["hits"][0]["turns"][0]["role"] == "tool"


def test_facts_supersession_as_of_and_timeline(fast_core):
    mem.record_fact(fast_core, "H1", "status", "proposed", valid_at="2026-01-01")
    r = mem.record_fact(fast_core, "h1", "Status", "supported", valid_at="2026-02-01T00:00:00Z", source="doc:abc")
    assert r["superseded"]["object"] == "proposed" and r["superseded"]["invalid_at"] == "2026-02-01T00:00:00.000000Z"
    mem.record_fact(fast_core, "H1", "effect_size", "0.4", valid_at="2026-01-15")
    # a back-dated fact slots in between and is closed by the later one
    back = mem.record_fact(fast_core, "H1", "status", "doubtful", valid_at="2026-01-20T00:00:00+01:00")
    assert back["fact"]["invalid_at"] == "2026-02-01T00:00:00.000000Z"
    assert back["superseded"]["object"] == "proposed"

    def status(as_of):
        return [f["object"] for f in mem.query_facts(fast_core, subject="H1", predicate="status", as_of=as_of)["facts"]]

    assert status("2025-12-31") == []
    assert status("2026-01-10") == ["proposed"]
    assert status("2026-01-25") == ["doubtful"]
    assert status("2026-02-01") == ["supported"]
    assert status(None) == ["supported"]
    assert len(mem.query_facts(fast_core, subject="H1")["facts"]) == 2  # status + effect_size
    assert mem.query_facts(fast_core, object="SUPP")["facts"][0]["object"] == "supported"
    tl = mem.fact_timeline(fast_core, "h1", predicate="status")
    assert [f["object"] for f in tl["facts"]] == ["proposed", "doubtful", "supported"]
    assert [f["current"] for f in tl["facts"]] == [False, False, True]
    with pytest.raises(MemoryInputError, match="not an ISO 8601"):
        mem.query_facts(fast_core, as_of="last tuesday")
    with pytest.raises(MemoryInputError, match="valid_at"):
        mem.record_fact(fast_core, "H1", "status", "x", valid_at="2026-13-45")


def test_bad_input(fast_core):
    sid = mem.start_session(fast_core)["session_id"]
    with pytest.raises(MemoryInputError, match="unknown session id"):
        mem.add_turn(fast_core, "ses-nope", "user", "hi")
    with pytest.raises(MemoryInputError, match="content is empty"):
        mem.add_turn(fast_core, sid, "user", "   ")
    with pytest.raises(MemoryInputError, match="the limit is 100,000 characters"):
        mem.add_turn(fast_core, sid, "user", "x" * 100_001)
    with pytest.raises(MemoryInputError, match="invalid role 'boss'"):
        mem.add_turn(fast_core, sid, "boss", "hi")
    with pytest.raises(MemoryInputError, match="confirm=true"):
        mem.delete_session(fast_core, sid)
    with pytest.raises(MemoryInputError, match="cursor"):
        mem.get_history(fast_core, sid, cursor="abc")
    assert mem.add_turn(fast_core, sid, "user", "x" * 100_000)["turn_id"]


def test_delete_session_removes_turns_and_pairs_keeps_facts(fast_core):
    s1 = mem.start_session(fast_core, "gone")["session_id"]
    s2 = mem.start_session(fast_core, "kept")["session_id"]
    _thread(fast_core, s1, [("q1", "a1"), ("q2", "a2")])
    _thread(fast_core, s2, [("q3", "a3")])
    mem.record_fact(fast_core, "X", "is", "y")
    assert fast_core.vectors().count(mem.DIALOGUE) == 3
    out = mem.delete_session(fast_core, s1, confirm=True)
    assert out == {"deleted": s1, "turns_deleted": 4, "pairs_deleted": 2, "facts_kept": True}
    assert fast_core.vectors().count(mem.DIALOGUE) == 1
    assert mem.list_sessions(fast_core)["total"] == 1
    assert mem.query_facts(fast_core, subject="X")["total"] == 1
    with pytest.raises(MemoryInputError, match="unknown session id"):
        mem.get_history(fast_core, s1)


def test_reconcile_repairs_a_lost_vector_upsert(fast_core):
    """A crash between the SQL commit and the vector upsert: the next process's first use re-embeds it."""
    sid = mem.start_session(fast_core)["session_id"]
    _thread(fast_core, sid, [("first question", "first answer"), ("second question", "second answer")])
    vs = fast_core.vectors()
    with Session(fast_core.engine) as db:
        a_id = db.exec(select(Turn.id).where(Turn.role == "assistant").order_by(Turn.id.desc())).first()
    vs.delete(mem.DIALOGUE, [Cond("assistant_turn_id", eq=a_id)])
    assert vs.count(mem.DIALOGUE) == 1
    assert mem.reconcile_dialogue(fast_core) == 1
    assert vs.count(mem.DIALOGUE) == 2
    assert mem.reconcile_dialogue(fast_core) == 0  # converged


def test_list_sessions_pages_and_export(fast_core):
    ids = [mem.start_session(fast_core, f"s{i}", "p" if i % 2 else None)["session_id"] for i in range(5)]
    page = mem.list_sessions(fast_core, limit=2)
    assert page["total"] == 5 and page["next_offset"] == 2 and page["sessions"][0]["session_id"] == ids[-1]
    assert mem.list_sessions(fast_core, project="p")["total"] == 2
    sid = ids[0]
    for i in range(5):
        mem.add_turn(fast_core, sid, "user" if i % 2 == 0 else "planner", f"turn {i}", {"i": i})
    part1 = mem.export_session(fast_core, sid, "markdown", limit=3)
    assert "### 1. User" in part1["markdown"] and "### 3. User" in part1["markdown"] and part1["next_cursor"]
    part2 = mem.export_session(fast_core, sid, "markdown", cursor=part1["next_cursor"], limit=3)
    assert "### 4. Planner" in part2["markdown"] and part2["next_cursor"] is None
    js = mem.export_session(fast_core, sid, "json")
    assert js["session"]["turn_count"] == 5 and [t["metadata"]["i"] for t in js["turns"]] == list(range(5))
    with pytest.raises(MemoryInputError, match="format"):
        mem.export_session(fast_core, sid, "pdf")


def test_recall_two_relevant_pairs_score_alike(fast_core):
    s1 = mem.start_session(fast_core, "lipase")["session_id"]
    _thread(fast_core, s1, [
        ("What was the lipase half-life at 60 C?", "The lipase lost half of its activity after 12 minutes at 60 C."),
        ("And the lipase half-life at 70 C?", "At 70 C the lipase lost half of its activity within 3 minutes."),
    ])
    s2 = mem.start_session(fast_core, "follow-up")["session_id"]
    res = mem.recall(fast_core, s2, "how fast does the lipase lose activity when heated", last_n=0, k=5)
    scores = [r["score"] for r in res["related"]]
    # both exchanges answer the question: both score high and close (min-max over two gave 1.0 and 0.0)
    assert len(scores) == 2 and min(scores) > 0.7 and max(scores) - min(scores) < 0.2, scores
