"""SQL engines side by side: the same store paths on SQLite (the embedded default) and on PostgreSQL.

PostgreSQL is a throwaway cluster started from the installed server binaries (``initdb`` + ``pg_ctl``, as the tests
do: ``tests/pg_cluster.py``; ``fsync`` off, so the figures show the engine's own cost rather than this machine's
disk). The part is skipped when no PostgreSQL binaries or no psycopg driver are installed. Per engine:

1. ``memory_add_turn`` p50: :meth:`aisac_core.memory.MemoryService.add_turn` of 200 user turns (the SQL path: one locked
   transaction, read the newest turn, insert) and 40 assistant turns (SQL + embedding of the pair + upsert).
2. Provenance middleware overhead per tool call (CPU ms): :func:`bench.trace._overhead` (one trace event insert per
   call: SQLite through the raw DBAPI connection, PostgreSQL through a SQLAlchemy Core insert).
3. ``trace_get_run`` of a 1,000-event run: :meth:`aisac_core.trace.queries.RunQueries.get_run`, median of 10.
4. Jobs claimed per second with two replicas: two processes, each with its own engine, claim and finish 1,000
   queued jobs of a no-op kind through :class:`aisac_core.store.jobqueue.JobQueue` as fast as they can; the figure
   is jobs / wall time, and every job must end ``done`` after exactly one claim.
5. The vector backends on Cranfield (:mod:`bench.pgvectors`): Qdrant Edge and PostgreSQL + pgvector, index
   throughput and CPU, query p50/p95 and CPU, hybrid nDCG@10; and the query latency of both at the corpus size of
   docs/retrieval.md's Latency section (10,240 chunks, :func:`bench.pgvectors.run_latency`).
6. Replicas on one PostgreSQL with pgvector (:mod:`bench.replicas`): 8 MCP clients against one process and two
   replicas (calls/s, p50/p95, CPU), and a PostgreSQL restart during 60 s of load (successful calls without a
   trace event: target 0).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

import anyio

from .common import REPO_ROOT, Context, Skip, isolated_settings, table, target_cell, temp_dir
from .trace import TARGET_GET_RUN_MS, TARGET_OVERHEAD_MS, _median_ms, _overhead, _populate

N_USER_TURNS = 200
N_ASSISTANT_TURNS = 40
N_JOBS = 1000

CLAIMER = r"""
import sys, time
from aisac_core.store.jobqueue import JobQueue
from aisac_core.store.sql import make_engine
engine = make_engine(sys.argv[1])
q = JobQueue(engine, lease_s=60)
while time.time() < float(sys.argv[2]):
    time.sleep(0.001)
n = 0
while (job := q.claim(["bench"])) is not None:
    assert q.finish(job["job_id"], "done")
    n += 1
print(n)
"""


def _add_turn_ms(core: Any) -> dict[str, float]:
    mem = core.memory
    sid = mem.start_session("engines bench")["session_id"]
    mem.add_turn(sid, "user", "warm-up question")
    mem.add_turn(sid, "assistant", "warm-up answer")
    user, assistant = [], []
    for i in range(N_USER_TURNS):
        t0 = time.perf_counter()
        mem.add_turn(sid, "user", f"question {i} about sample S{i % 13}")
        user.append((time.perf_counter() - t0) * 1000)
        if i < N_ASSISTANT_TURNS:
            t0 = time.perf_counter()
            mem.add_turn(sid, "assistant", f"answer {i}: the melting point of S{i % 13} is {400 + i} K")
            assistant.append((time.perf_counter() - t0) * 1000)
    return {
        "user_p50_ms": round(statistics.median(user), 2),
        "assistant_p50_ms": round(statistics.median(assistant), 2),
    }


def _claims_per_s(url: str) -> dict[str, Any]:
    from sqlmodel import Session, func, select

    from aisac_core.store.jobqueue import JobQueue
    from aisac_core.store.sql import make_engine
    from aisac_core.store.tables import Job

    engine = make_engine(url)
    try:
        q = JobQueue(engine)
        prefix = "bench-" + uuid.uuid4().hex[:6]
        for i in range(N_JOBS):
            q.submit(f"{prefix}-{i:05d}", "bench", "{}")
        start_at = time.time() + 3.0  # both processes imported and connected before the clock starts
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CLAIMER, url, str(start_at)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO_ROOT,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=600) for p in procs]
        wall = time.time() - start_at
        for p, (_, e) in zip(procs, outs):
            if p.returncode != 0:
                raise RuntimeError(f"claimer failed: {e[-2000:]}")
        counts = [int(o.strip()) for o, _ in outs]
        with Session(engine) as s:
            done = s.exec(
                select(func.count())
                .select_from(Job)
                .where(Job.kind == "bench", Job.status == "done", Job.attempts == 1)
            ).one()
    finally:
        engine.dispose()
    if sum(counts) != N_JOBS or done != N_JOBS:
        raise RuntimeError(f"jobs claimed {counts} (sum {sum(counts)}), done once {done}, expected {N_JOBS}")
    return {"jobs": N_JOBS, "per_replica": counts, "seconds": round(wall, 2), "per_s": round(N_JOBS / wall, 1)}


def _measure(settings: Any) -> dict[str, Any]:
    from aisac_core.context import AppContext
    from aisac_core.trace.queries import RunQueries

    core = AppContext(settings)
    try:
        turns = _add_turn_ms(core)
        ov = anyio.run(_overhead, core)
        _populate(core, "bench-1000")
        get_run_ms = _median_ms(lambda: RunQueries(core.engine).get_run("bench-1000"))
    finally:
        core.close()
    claims = _claims_per_s(settings.resolved_sql_url)
    return {"add_turn": turns, "overhead": ov, "get_run_ms": get_run_ms, "claims": claims}


def run(ctx: Context) -> dict[str, Any]:
    """The engines part; returns the JSON-ready result."""
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from pg_cluster import PgCluster, PgUnavailable

    t_start = time.perf_counter()
    try:
        cluster = PgCluster.start()
    except PgUnavailable as exc:
        raise Skip(str(exc)) from exc
    results: dict[str, Any] = {}
    try:
        with temp_dir(ctx, "engines") as tmp:
            for engine in ("sqlite", "postgresql"):
                s = isolated_settings(tmp / engine)
                if engine == "postgresql":
                    s = s.updated(sql_url=cluster.create_database())
                results[engine] = _measure(s)
    finally:
        cluster.stop()
    lite, pg = results["sqlite"], results["postgresql"]

    def row(name: str, get: Any, limit: float | None = None) -> tuple[str, Any, Any, Any, str]:
        if limit is None:
            return (name, get(lite), get(pg), None, "-")
        return (name, get(lite), get(pg), f"<= {limit:g}", target_cell(get(lite) <= limit and get(pg) <= limit))

    table(
        "engines: the same store paths on SQLite and PostgreSQL 15 (local cluster, fsync off)",
        ["measure", "SQLite", "PostgreSQL", "target", "status"],
        [
            row("memory_add_turn p50, user turn: SQL only (ms)", lambda r: r["add_turn"]["user_p50_ms"]),
            row(
                "memory_add_turn p50, assistant turn: SQL + embed + upsert (ms)",
                lambda r: r["add_turn"]["assistant_p50_ms"],
            ),
            row(
                "trace middleware overhead per call, CPU (ms)",
                lambda r: r["overhead"]["overhead_cpu_ms"],
                TARGET_OVERHEAD_MS,
            ),
            row("trace middleware overhead per call, wall (ms)", lambda r: r["overhead"]["overhead_ms"]),
            row("trace_get_run, 1,000 events (ms, median of 10)", lambda r: r["get_run_ms"], TARGET_GET_RUN_MS),
            row("jobs claimed + finished per second, 2 replicas", lambda r: r["claims"]["per_s"]),
            row("  jobs per replica", lambda r: " / ".join(map(str, r["claims"]["per_replica"]))),
        ],
    )
    summary = [
        {"metric": f"{m} (SQLite / PostgreSQL)", "value": f"{get(lite)} / {get(pg)}", "target": None, "met": None}
        for m, get in (
            ("memory_add_turn p50 user turn ms", lambda r: r["add_turn"]["user_p50_ms"]),
            ("trace overhead CPU ms", lambda r: r["overhead"]["overhead_cpu_ms"]),
            ("trace_get_run 1,000 events ms", lambda r: r["get_run_ms"]),
            ("jobs claimed/s, 2 replicas", lambda r: r["claims"]["per_s"]),
        )
    ]
    vectors: dict[str, Any]
    try:  # the vector backends (issue 32): Qdrant Edge and PostgreSQL + pgvector on Cranfield
        from .pgvectors import TARGET_NDCG_DELTA, run_vectors

        vectors = run_vectors(ctx)
    except Skip as exc:
        vectors = {"status": "skipped", "reason": str(exc)}
    if "delta" in vectors:
        e, p = vectors["edge"], vectors["postgres"]
        table(
            "engines: vector backends on Cranfield (1,400 abstracts, 225 queries, hybrid)",
            ["measure", "Qdrant Edge", "PostgreSQL + pgvector", "target", "status"],
            [
                ("index: chunks embedded per second", e["chunks_per_s"], p["chunks_per_s"], None, "-"),
                ("index: whole run (s)", e["index_s"], p["index_s"], None, "-"),
                (
                    "query p50 (ms, embedding included)",
                    e["search_latency"]["p50_ms"],
                    p["search_latency"]["p50_ms"],
                    None,
                    "-",
                ),
                ("query p95 (ms)", e["search_latency"]["p95_ms"], p["search_latency"]["p95_ms"], None, "-"),
                ("index: CPU s, aisac process", e["index_cpu_s"], p["index_cpu_s"], None, "-"),
                ("index: CPU s, PostgreSQL", "-", p["index_db_cpu_s"], None, "-"),
                ("query CPU ms, aisac process", e["query_cpu_ms"], p["query_cpu_ms"], None, "-"),
                ("query CPU ms, PostgreSQL", "-", p["query_db_cpu_ms"], None, "-"),
                (
                    "hybrid nDCG@10",
                    e["ndcg@10"],
                    p["ndcg@10"],
                    f"|diff| <= {TARGET_NDCG_DELTA}",
                    target_cell(vectors["met"]),
                ),
            ],
        )
        summary.append(
            {
                "metric": "hybrid nDCG@10 PostgreSQL vs Qdrant Edge (|diff|)",
                "value": vectors["delta"],
                "target": TARGET_NDCG_DELTA,
                "met": vectors["met"],
            }
        )
    try:  # the same backends at the corpus size of docs/retrieval.md's Latency section (10,240 chunks)
        from .pgvectors import run_latency

        vectors["latency"] = lat = run_latency(ctx)
        table(
            f"engines: hybrid query latency over {lat['chunks']:,} chunks (225 Cranfield queries, k = 10)",
            ["measure", "Qdrant Edge", "PostgreSQL + pgvector"],
            [
                ("p50 ms (embedding included)", lat["edge"]["p50_ms"], lat["postgres"]["p50_ms"]),
                ("p95 ms", lat["edge"]["p95_ms"], lat["postgres"]["p95_ms"]),
                ("CPU ms per query, aisac process", lat["edge"]["cpu_ms"], lat["postgres"]["cpu_ms"]),
                ("CPU ms per query, PostgreSQL", "-", lat["postgres"]["db_cpu_ms"]),
            ],
        )
    except Skip as exc:
        vectors["latency"] = {"status": "skipped", "reason": str(exc)}
    replicas: dict[str, Any] = {}
    from .replicas import run_restart, run_throughput

    for name, part in (("throughput", run_throughput), ("restart", run_restart)):
        try:  # two replicas on one PostgreSQL with pgvector; a PostgreSQL restart under load (issue 32)
            replicas[name] = part(ctx)
        except Skip as exc:
            replicas[name] = {"status": "skipped", "reason": str(exc)}
    if "replicas_2" in replicas["throughput"]:
        summary.append(
            {
                "metric": "mixed calls/s, 8 clients: 1 process / 2 replicas on one PostgreSQL with pgvector",
                "value": f"{replicas['throughput']['replicas_1']['calls_per_s']} / "
                f"{replicas['throughput']['replicas_2']['calls_per_s']}",
                "target": None,
                "met": None,
            }
        )
    if "gap" in replicas["restart"]:
        summary.append(
            {
                "metric": "successful calls without a trace event, PostgreSQL restart in 60 s of load",
                "value": replicas["restart"]["gap"],
                "target": 0,
                "met": replicas["restart"]["met"],
            }
        )
    return {
        "status": "ok",
        **results,
        "vectors": vectors,
        "replicas": replicas,
        "summary": summary,
        "seconds": round(time.perf_counter() - t_start, 1),
    }
