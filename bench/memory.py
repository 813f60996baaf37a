"""Memory: ``memory_recall`` latency with 10,000 stored turns, and ``memory_add_turn`` throughput.

Store: 100 sessions x 100 turns (user / assistant alternating: 10,000 points, 5,000 pairs and 5,000 user turns
alone, since every turn is indexed). The user turns
are questions made from Cranfield titles ("What do we know about <title>?"), the assistant turns one or
two sentences of the abstracts, cycling through the collection; without Cranfield, templated synthetic
text. The turns are written to SQL directly in bulk and embedded in batches by
:meth:`aisac_core.memory.MemoryService.reconcile_dialogue` (the repair path, which embeds exactly what ``add_turn``
embeds), so the set-up takes about a minute instead of 5,000 single embeddings.

- recall: :meth:`aisac_core.memory.MemoryService.recall` in-process (last_n = 10, k = 5, token_budget = 2,000) in the
  last session, one call per query (the Cranfield queries, or synthetic ones), after 20 warm-up calls; the
  query-embedding cache is cleared so every call embeds its query.
- add_turn: :meth:`aisac_core.memory.MemoryService.add_turn` in a fresh session, 200 turns alternating user /
  assistant; every call embeds its turn (alone, or with the user turn it answers as a pair) and upserts it: turns/s
  overall.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlmodel import Session

from aisac_core.memory import DIALOGUE
from aisac_core.store.tables import MemorySession, Turn

from . import cranfield
from .common import Context, Timer, err, latency_summary, make_core, table, target_cell, temp_dir

TARGET_RECALL_P50_MS = 30.0
SESSIONS = 100
TURNS_PER_SESSION = 100
ADD_TURNS = 200
WARMUP = 20


def _texts(ctx: Context) -> tuple[list[tuple[str, str]], list[str], str]:
    """(question, answer) pairs, recall queries, and the name of the text source."""
    n_pairs = SESSIONS * TURNS_PER_SESSION // 2
    folder = ctx.data_dir / "retrieval" / "cranfield"
    if (folder / "cran.all.1400").exists() and (folder / "cran.qry").exists():
        col = cranfield.load(folder)
        per_doc = [
            (d.title, [s for s in re.split(r"(?<=\s\.)\s+", d.abstract) if len(s.split()) >= 4])
            for d in col.docs
            if d.title and d.abstract
        ]
        pairs = []
        i = 0
        while len(pairs) < n_pairs:
            title, sents = per_doc[i % len(per_doc)]
            j = (i // len(per_doc)) % max(1, len(sents))
            ans = " ".join(sents[j : j + 2]) or title
            pairs.append((f"What do we know about {title.rstrip(' .')}?", ans))
            i += 1
        return pairs, list(col.queries.values()), "Cranfield titles and abstract sentences"
    topics = [
        "lipase stability",
        "CO2 corrosion",
        "heat transfer in packed beds",
        "perovskite films",
        "battery capacity fade",
        "catalyst deactivation",
        "protein folding",
        "boundary layers",
    ]
    pairs = [
        (
            f"What did run {i} show about {topics[i % len(topics)]}?",
            f"Run {i} on {topics[i % len(topics)]} gave value {i % 97} at condition {i % 13}.",
        )
        for i in range(n_pairs)
    ]
    return pairs, [f"{t} result at condition {i}" for i in range(30) for t in topics], "synthetic templates"


def fill(core: Any, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Write SESSIONS x TURNS_PER_SESSION turns in bulk and embed their pairs; returns timings."""
    t0 = datetime.now(UTC) - timedelta(days=30)
    step = timedelta(milliseconds=10)
    k = 0
    with Timer() as t_sql:
        with Session(core.engine) as db:
            for s in range(SESSIONS):
                sid = f"ses-bench{s:04d}"
                db.add(MemorySession(id=sid, title=f"bench session {s}", project="bench", created_at=t0 + k * step))
                for _p in range(TURNS_PER_SESSION // 2):
                    q, a = pairs[k % len(pairs)]
                    u = Turn(session_id=sid, role="user", content=q, created_at=t0 + (2 * k) * step)
                    db.add(u)
                    db.flush()
                    db.add(
                        Turn(
                            session_id=sid,
                            role="assistant",
                            content=a,
                            pair_user_id=u.id,
                            created_at=t0 + (2 * k + 1) * step,
                        )
                    )
                    k += 1
            db.commit()
    err.print(f"memory: {2 * k:,} turns written in {t_sql.seconds:.1f} s; embedding them ({k:,} as pairs) ...")
    vs = core.vectors()
    with Timer() as t_emb:
        added = core.memory.reconcile_dialogue()  # the service's first use then finds the store reconciled
    return {
        "turns": 2 * k,
        "pairs": added,
        "sql_s": round(t_sql.seconds, 2),
        "embed_s": round(t_emb.seconds, 2),
        "pairs_per_s": round(added / t_emb.seconds, 1) if t_emb.seconds else None,
        "points": vs.count(DIALOGUE),
    }


def bench_recall(core: Any, queries: list[str], warm: list[str]) -> tuple[list[float], dict[str, Any]]:
    """Latency (ms) of each recall in the last bench session; plus a sample result's sizes."""
    sid = f"ses-bench{SESSIONS - 1:04d}"
    for w in warm:
        core.memory.recall(sid, w, last_n=10, k=5, token_budget=2000)
    core.embedder.clear_query_cache()
    out = []
    res: dict[str, Any] = {}
    for q in queries:
        t = time.perf_counter()
        res = core.memory.recall(sid, q, last_n=10, k=5, token_budget=2000)
        out.append((time.perf_counter() - t) * 1000)
        if not res["related"]:
            raise RuntimeError(f"recall returned no related pair for {q!r}")
    return out, {"recent": len(res["recent"]), "related": len(res["related"]), "tokens": res["tokens"]}


def bench_add_turn(core: Any, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Throughput of add_turn: ADD_TURNS turns alternating user / assistant (every assistant turn embedded)."""
    sid = core.memory.start_session("add_turn bench")["session_id"]
    core.memory.add_turn(sid, "user", "warm-up question")
    core.memory.add_turn(sid, "assistant", "warm-up answer")
    per_role: dict[str, list[float]] = {"user": [], "assistant": []}
    t0 = time.perf_counter()
    for i in range(ADD_TURNS):
        q, a = pairs[(7 * i) % len(pairs)]
        role = "user" if i % 2 == 0 else "assistant"
        t = time.perf_counter()
        core.memory.add_turn(sid, role, q if role == "user" else a)
        per_role[role].append((time.perf_counter() - t) * 1000)
    secs = time.perf_counter() - t0
    return {
        "turns": ADD_TURNS,
        "seconds": round(secs, 2),
        "turns_per_s": round(ADD_TURNS / secs, 1),
        "user_turn_ms": latency_summary(per_role["user"]),
        "assistant_turn_ms": latency_summary(per_role["assistant"]),
    }


def run(ctx: Context) -> dict[str, Any]:
    """The memory part; returns the JSON-ready result."""
    t0 = time.perf_counter()
    pairs, queries, source = _texts(ctx)
    n_q = int(ctx.options.get("queries", 0)) or len(queries)
    queries = queries[:n_q]
    warm = [q for q, _ in pairs[-WARMUP:]]
    with temp_dir(ctx, "memory") as tmp:
        core = make_core(tmp / "store")
        try:
            with Timer() as t_models:
                core.vectors()
            store = fill(core, pairs)
            recall_ms, sample = bench_recall(core, queries, warm)
            add = bench_add_turn(core, pairs)
        finally:
            core.close()
    rs = latency_summary(recall_ms)
    ok = rs["p50_ms"] <= TARGET_RECALL_P50_MS
    table(
        f"memory: recall over {store['turns']:,} turns ({store['points']:,} embedded points), in-process",
        ["measure", "n", "p50 ms", "p95 ms", "p99 ms", "mean ms", "target", "status"],
        [
            (
                "memory_recall (last_n 10, k 5, budget 2,000)",
                rs["n"],
                rs["p50_ms"],
                rs["p95_ms"],
                rs["p99_ms"],
                rs["mean_ms"],
                f"p50 <= {TARGET_RECALL_P50_MS:g}",
                target_cell(ok),
            ),
            (
                "memory_add_turn, user (SQL + embed alone + upsert)",
                add["user_turn_ms"]["n"],
                add["user_turn_ms"]["p50_ms"],
                add["user_turn_ms"]["p95_ms"],
                add["user_turn_ms"]["p99_ms"],
                add["user_turn_ms"]["mean_ms"],
                None,
                "-",
            ),
            (
                "memory_add_turn, assistant (SQL + embed pair + upsert)",
                add["assistant_turn_ms"]["n"],
                add["assistant_turn_ms"]["p50_ms"],
                add["assistant_turn_ms"]["p95_ms"],
                add["assistant_turn_ms"]["p99_ms"],
                add["assistant_turn_ms"]["mean_ms"],
                None,
                "-",
            ),
        ],
        caption=f"texts: {source}; set-up: {store['turns']:,} turns in {store['sql_s']} s (SQL), {store['pairs']:,} "
        f"points embedded in {store['embed_s']} s ({store['pairs_per_s']} points/s); add_turn throughput "
        f"{add['turns_per_s']} turns/s ({ADD_TURNS} turns, each embedded)",
    )
    summary = [
        {
            "metric": "memory_recall p50 / p95 ms (10,000 turns)",
            "value": f"{rs['p50_ms']} / {rs['p95_ms']}",
            "target": f"p50 <= {TARGET_RECALL_P50_MS:g}",
            "met": ok,
        },
        {"metric": "memory_add_turn turns/s (each embedded)", "value": add["turns_per_s"], "target": None, "met": None},
        {"metric": "turns in store", "value": store["turns"], "target": ">= 10000", "met": store["turns"] >= 10_000},
    ]
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": summary,
        "texts": source,
        "model_load_s": round(t_models.seconds, 2),
        "store": store,
        "recall_queries": len(queries),
        "recall_ms": rs,
        "recall_sample": sample,
        "add_turn": add,
        "targets": {"recall_p50_ms": {"target": TARGET_RECALL_P50_MS, "measured": rs["p50_ms"], "met": ok}},
    }
