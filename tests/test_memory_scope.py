"""Memory over long conversations: every turn indexed and findable whatever the roles and their order, scoped recall
and search (session, project, participant, host, time range) enforced in the store query on both store shapes
(SQLite + Qdrant Edge; PostgreSQL + pgvector), a connection's default scope, time expressions resolved against
session dates, and the re-embedding of an older store's dialogue points."""

from __future__ import annotations

from datetime import date

import pytest
from conftest import make_settings
from fastmcp import Client
from sqlmodel import Session, select

from aisac_core.context import AppContext
from aisac_core.memory import DIALOGUE, MemoryInputError, MemoryService, Scope
from aisac_core.memory.recall import PAYLOAD_VERSION, point_id
from aisac_core.memory.timeexpr import resolve
from aisac_core.store.tables import Turn
from aisac_core.store.vectors import Cond, VectorPoint
from aisac_servers.serving.suite import build

pytestmark = pytest.mark.anyio

#: (participant, project, session date, turns as (role, speaker, text))
SESSIONS = [
    (
        "alice",
        "enzymes",
        "2023-05-08",
        [
            ("user", "Alice", "I ran the lipase assay yesterday and the activity dropped at 60 C."),
            ("assistant", "Bob", "The lipase assay drop suggests denaturation."),
            ("assistant", "Bob", "Did you repeat the lipase assay with fresh buffer?"),
        ],
    ),
    (
        "alice",
        "corrosion",
        "2023-08-21",
        [
            ("assistant", "Bob", "Welcome back: the corrosion coupons are in the lipase assay room."),
            ("user", "Alice", "The corrosion coupons lost 3 percent of their mass."),
            ("user", "Alice", "I measured the corrosion coupons last week, before the lipase assay."),
        ],
    ),
    (
        "carol",
        "enzymes",
        "2023-05-20",
        [
            ("user", "Carol", "My lipase assay gave a half-life of 12 minutes."),
            ("router", None, "route: lipase assay lookup"),
            ("assistant", "Dan", "A 12 minute half-life for the lipase assay is typical."),
        ],
    ),
    (
        "carol",
        "corrosion",
        "2023-09-02",
        [
            ("user", "Carol", "Corrosion of the lipase assay coupons was negligible."),
            ("user", "Carol", "Also the corrosion rate fell after coating."),
            ("assistant", "Dan", "Coating usually cuts the corrosion rate by half."),
        ],
    ),
]


@pytest.fixture(scope="module", params=["sqlite-edge", "postgresql-pgvector"])
def loaded(request, tmp_path_factory, models_dir, shared_embedder):  # noqa: ANN001, ANN201
    """A store holding SESSIONS (two participants x two projects, two hosts, dated sessions) on each store shape:
    ``(core, {session index: session id}, {(session index, turn index): turn id})``."""
    data_dir = tmp_path_factory.mktemp(request.param) / "store"
    if request.param == "sqlite-edge":
        settings = make_settings(data_dir, models_dir)
    else:
        url = request.getfixturevalue("pgvector_server").create_database()
        settings = make_settings(data_dir, models_dir, sql_url=url, vector_url="sql")
    core = AppContext(settings, embedder=shared_embedder)
    sids: dict[int, str] = {}
    tids: dict[tuple[int, int], int] = {}
    for i, (who, project, day, turns) in enumerate(SESSIONS):
        host = "claude-desktop" if i % 2 == 0 else "vscode"
        sids[i] = core.memory.start_session(f"s{i}", project, who, host, day)["session_id"]
        for j, (role, speaker, text) in enumerate(turns):
            tids[(i, j)] = core.memory.add_turn(sids[i], role, text, speaker=speaker)["turn_id"]
    yield core, sids, tids
    core.close()


def _recalled(res: dict) -> list[int]:
    return [t["turn_id"] for item in res["related"] for t in item["turns"]]


def test_every_turn_is_indexed_and_findable_by_its_own_text(loaded) -> None:
    core, sids, tids = loaded
    vs = core.vectors()
    with Session(core.engine) as db:
        n_turns = len(db.exec(select(Turn.id)).all())
    # one point per turn: pairs under their assistant turn, every other turn alone
    assert vs.count(DIALOGUE) == n_turns == len(tids)
    asker = core.memory.start_session("asker")["session_id"]
    for (i, j), tid in tids.items():
        text = SESSIONS[i][3][j][2]
        res = core.memory.recall(asker, text, last_n=0, k=3, token_budget=100_000)
        assert tid in _recalled(res), (i, j, text)
        hits = core.memory.search(text, mode="semantic", limit=3)["hits"]
        assert tid in [t["turn_id"] for h in hits for t in h["turns"]], (i, j, text)
    # an opening assistant turn, a user turn after a user turn, an assistant turn after an assistant turn: alone
    for key in ((1, 0), (1, 2), (0, 2), (3, 1)):
        (p,) = vs.retrieve(DIALOGUE, [point_id(tids[key])])
        assert (
            p.payload["kind"] == "turn" and p.payload["turn_ids"] == [tids[key]] and p.payload["v"] == PAYLOAD_VERSION
        )
    (pair,) = vs.retrieve(DIALOGUE, [point_id(tids[(0, 1)])])
    assert pair.payload["kind"] == "pair" and pair.payload["turn_ids"] == [tids[(0, 0)], tids[(0, 1)]]
    assert pair.payload["speakers"] == ["Alice", "Bob"] and pair.payload["date"] == "2023-05-08"
    assert pair.payload["participant"] == "alice" and pair.payload["project"] == "enzymes"


SCOPES = [
    ({"participant": "alice"}, lambda i: SESSIONS[i][0] == "alice"),
    ({"participant": "carol"}, lambda i: SESSIONS[i][0] == "carol"),
    ({"project": "enzymes"}, lambda i: SESSIONS[i][1] == "enzymes"),
    ({"project": "corrosion", "participant": "carol"}, lambda i: i == 3),
    ({"host": "vscode"}, lambda i: i % 2 == 1),
    ({"since": "2023-05-15", "until": "2023-08-31"}, lambda i: "2023-05-15" <= SESSIONS[i][2] <= "2023-08-31"),
    ({"until": "2023-05-08"}, lambda i: SESSIONS[i][2] <= "2023-05-08"),
]


@pytest.mark.parametrize("n", range(len(SCOPES)))
def test_scoped_recall_and_search_never_leave_the_scope(loaded, n: int) -> None:
    core, sids, tids = loaded
    scope, inside = SCOPES[n]
    allowed = {tid for (i, _j), tid in tids.items() if inside(i)}
    asker = core.memory.start_session("asker")["session_id"]
    for query in ("lipase assay", "corrosion coupons coating", "what happened last week?"):
        res = core.memory.recall(asker, query, last_n=0, k=50, token_budget=100_000, scope=scope)
        got = set(_recalled(res))
        assert got <= allowed, (scope, query, got - allowed)
        # the scope is a filter of the store query, not of a page of hits: every turn in scope is recalled
        assert got == allowed, (scope, query, allowed - got)
        for mode in ("hybrid", "keyword", "semantic"):
            hits = core.memory.search(query, mode=mode, limit=50, scope=scope)
            found = {t["turn_id"] for h in hits["hits"] for t in h["turns"]}
            assert found <= allowed, (scope, query, mode, found - allowed)
            if mode == "semantic":
                assert found == allowed
    # the session of the scope: only its turns
    res = core.memory.recall(asker, "lipase", last_n=0, k=50, scope={"session_id": sids[0]})
    assert set(_recalled(res)) == {tids[(0, j)] for j in range(3)}


def test_bad_scopes_are_clear_errors(loaded) -> None:
    core, sids, _ = loaded
    asker = core.memory.start_session("asker")["session_id"]
    for bad, msg in (
        ({"person": "alice"}, "unknown key"),
        ({"since": "last tuesday"}, "not an ISO 8601"),
        ({"since": "2023-09-01", "until": "2023-01-01"}, "is after until"),
        ("alice", "must be a JSON object"),
        ({"participant": "x" * 501}, "limit is 500"),
        ({"session_id": "ses-nope"}, "unknown session id"),
    ):
        with pytest.raises(MemoryInputError, match=msg):
            core.memory.recall(asker, "lipase", scope=bad)
        with pytest.raises(MemoryInputError, match=msg):
            core.memory.search("lipase", scope=bad)
    with pytest.raises(MemoryInputError, match="hops"):
        core.memory.recall(asker, "lipase", hops=3)


def test_time_expressions_resolve_against_the_session_date(loaded) -> None:
    core, sids, tids = loaded
    # the turn said on 2023-05-08 about "yesterday" is about 2023-05-07; its point's day span covers it
    (p,) = core.vectors().retrieve(DIALOGUE, [point_id(tids[(0, 0)])])
    assert p.payload["ts"] == 1683504000 and p.payload["t_lo"] == 1683417600  # 2023-05-08 / 2023-05-07, 00:00 UTC
    # a question asked in a session dated 2023-11-20 about "last May": May 2023, and the May sessions come first
    asker = core.memory.start_session("asker", started_at="2023-11-20")["session_id"]
    res = core.memory.recall(asker, "What did Alice do last May?", last_n=0, k=4, scope={"participant": "alice"})
    assert res["time_range"]["first"] == "2023-05-01" and res["time_range"]["last"] == "2023-05-31"
    assert res["time_range"]["reference"] == "2023-11-20"
    first = res["related"][0]
    assert first["session_date"] == "2023-05-08" and first["in_time_range"] is True
    assert {"text": "yesterday", "first": "2023-05-07", "last": "2023-05-07"} in first["mentions"]
    assert all(r["session_date"].startswith("2023-05") for r in res["related"] if r["in_time_range"])
    # the same question without time awareness carries no range
    plain = core.memory.recall(asker, "What did Alice do last May?", last_n=0, k=4, time_aware=False)
    assert plain["time_range"] is None and "in_time_range" not in plain["related"][0]
    # "last week" in a session of 2023-08-21 means 2023-08-14..20
    (q,) = core.vectors().retrieve(DIALOGUE, [point_id(tids[(1, 2)])])
    assert q.payload["t_lo"] == 1691971200  # 2023-08-14 00:00 UTC


@pytest.mark.parametrize(
    ("text", "ref", "expect"),
    [
        ("I went there yesterday", date(2023, 5, 8), [("yesterday", "2023-05-07", "2023-05-07")]),
        ("What did Alice do last May?", date(2023, 11, 20), [("last May", "2023-05-01", "2023-05-31")]),
        ("last May", date(2023, 5, 20), [("last May", "2022-05-01", "2022-05-31")]),
        ("in May", date(2023, 3, 2), [("in May", "2022-05-01", "2022-05-31")]),
        ("next May", date(2023, 3, 2), [("next May", "2023-05-01", "2023-05-31")]),
        ("we moved last week", date(2023, 8, 23), [("last week", "2023-08-14", "2023-08-20")]),
        ("two weeks ago", date(2023, 8, 23), [("two weeks ago", "2023-08-07", "2023-08-13")]),
        ("a few days ago", date(2023, 8, 23), [("a few days ago", "2023-08-20", "2023-08-20")]),
        ("last Friday", date(2023, 8, 23), [("last Friday", "2023-08-18", "2023-08-18")]),
        ("last weekend", date(2023, 8, 23), [("last weekend", "2023-08-19", "2023-08-20")]),
        (
            "on 7 May 2023 and May 9th",
            date(2023, 11, 1),
            [("7 May 2023", "2023-05-07", "2023-05-07"), ("May 9th", "2023-05-09", "2023-05-09")],
        ),
        ("in 2022", date(2023, 1, 1), [("in 2022", "2022-01-01", "2022-12-31")]),
        ("the day before yesterday", date(2024, 3, 1), [("the day before yesterday", "2024-02-28", "2024-02-28")]),
        ("last month", date(2024, 1, 15), [("last month", "2023-12-01", "2023-12-31")]),
        ("on 2023-02-30 nothing", date(2024, 1, 15), []),  # not a day
        ("May I ask something? We may go.", date(2024, 1, 15), []),  # "May" alone is not a month here
    ],
)
def test_resolver(text: str, ref: date, expect: list[tuple[str, str, str]]) -> None:
    got = [(m.text, m.first.isoformat(), m.last.isoformat()) for m in resolve(text, ref)]
    assert got == expect


async def test_default_scope_of_a_connection(loaded) -> None:
    core, sids, tids = loaded
    alice = {tid for (i, _j), tid in tids.items() if SESSIONS[i][0] == "alice"}
    async with Client(build(app=core)) as c:
        meta = {"aisac/memory_scope": {"participant": "alice"}}
        asker = (await c.call_tool("memory_start_session", {"title": "q"}, meta=meta)).structured_content
        assert asker["participant"] == "alice"  # the connection's participant is stamped on its new sessions
        res = (
            await c.call_tool(
                "memory_recall", {"session_id": asker["session_id"], "query": "lipase assay", "k": 50}, meta=meta
            )
        ).structured_content
        assert set(_recalled(res)) == alice and res["scope"] == {"participant": "alice"}
        # a call's own scope narrows within the default's open keys
        res = (
            await c.call_tool(
                "memory_search",
                {"query": "corrosion", "mode": "semantic", "scope": {"project": "corrosion"}},
                meta=meta,
            )
        ).structured_content
        found = {t["turn_id"] for h in res["hits"] for t in h["turns"]}
        assert found == {tids[(1, j)] for j in range(3)}
        bad = await c.call_tool(
            "memory_recall",
            {"session_id": asker["session_id"], "query": "x"},
            meta={"aisac/memory_scope": "alice"},
            raise_on_error=False,
        )
        assert bad.is_error and "must be a JSON object" in bad.content[0].text
    # the setting (AISAC_MEMORY_SCOPE) is the default of a server's connections that send none
    carol = {tid for (i, _j), tid in tids.items() if SESSIONS[i][0] == "carol"}
    before = core.settings.memory_scope
    core.settings.memory_scope = '{"participant":"carol"}'
    try:
        async with Client(build(app=core)) as c:
            res = (
                await c.call_tool(
                    "memory_recall", {"session_id": sids[0], "query": "lipase assay", "k": 50, "last_n": 0}
                )
            ).structured_content
        assert set(_recalled(res)) == carol and res["scope"] == {"participant": "carol"}
    finally:
        core.settings.memory_scope = before


def test_scope_merge() -> None:
    d = Scope.parse({"participant": "alice", "project": "p1"})
    s = Scope.parse({"project": "p2", "since": "2023-01-01", "until": "2023-01-31"}).over(d)
    assert s.as_dict() == {
        "project": "p2",
        "participant": "alice",
        "since": "2023-01-01T00:00:00.000000Z",
        "until": "2023-01-31T23:59:59.999999Z",
    }
    assert [c.key for c in s.conds()] == ["project", "participant", "ts"]


def test_an_older_store_is_reindexed_once(tmp_path, models_dir, shared_embedder) -> None:
    """Points of payload version 1 (pairs only, no scope fields) are re-embedded in place, and the turns an older
    store never indexed (a user turn without answer, an opening assistant turn) are added, on first use."""
    core = AppContext(make_settings(tmp_path / "store", models_dir), embedder=shared_embedder)
    try:
        sid = core.memory.start_session("old", participant="erin")["session_id"]
        a0 = core.memory.add_turn(sid, "assistant", "Hello, how can I help with the titration?")["turn_id"]
        u1 = core.memory.add_turn(sid, "user", "What is the endpoint of the titration?")["turn_id"]
        a1 = core.memory.add_turn(sid, "assistant", "The endpoint is at pH 8.3 with phenolphthalein.")["turn_id"]
        vs = core.vectors()
        # as an older aisac left it: only the pair, with the version 1 payload
        (pair,) = vs.retrieve(DIALOGUE, [point_id(a1)])
        old = {k: pair.payload[k] for k in ("session_id", "user_turn_id", "assistant_turn_id", "text", "created_at")}
        vs.delete(DIALOGUE, [Cond("session_id", eq=sid)])
        dense = shared_embedder.embed_documents([old["text"]])[0]
        sp = shared_embedder.sparse_documents([old["text"]])[0]
        vs.upsert(DIALOGUE, [VectorPoint(point_id(a1), dense, sp[0], sp[1], old)])
        assert vs.count(DIALOGUE, [Cond("participant", eq="erin")]) == 0
        fresh = MemoryService(core.engine, core.vectors, shared_embedder)  # a new process's service on the store
        assert fresh.reconcile_dialogue() == 3
        assert vs.count(DIALOGUE, [Cond("participant", eq="erin")]) == 3
        got = {h.id: h.payload for h in vs.retrieve(DIALOGUE, [point_id(t) for t in (a0, u1, a1)])}
        assert {p["v"] for p in got.values()} == {PAYLOAD_VERSION}
        assert fresh.reconcile_dialogue() == 0  # converged
    finally:
        core.close()
