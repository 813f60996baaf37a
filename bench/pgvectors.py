"""The vector backends side by side on the shared Cranfield collection: Qdrant Edge (embedded, the default) and
PostgreSQL with pgvector (the ``pgserver`` wheel's PostgreSQL 16, a throwaway cluster, ``fsync`` off; vectors in the
SQL store's database, ``AISAC_VECTOR_URL=sql``). Part of ``python -m bench --only engines``.

Per backend: index throughput (the 1,400 abstracts, chunks embedded per second of the whole index run, models
loaded before), hybrid nDCG@10 of the 225 queries (:func:`bench.quality.run_aisac`, the shipped fusion: the fusion
is shared, only the vector port differs), and the query latency p50/p95 of those searches (embedding included); CPU seconds of this process and of
the PostgreSQL cluster (:func:`bench.replicas.cluster_cpu_s`) for the index run and per query.
Acceptance (issue 32): |nDCG@10(PostgreSQL) - nDCG@10(Edge)| <= 0.01. Skipped when the collection or pgserver is
missing.
"""

from __future__ import annotations

import sys
from typing import Any

from .common import REPO_ROOT, Context, Skip, cpu_seconds, isolated_settings, latency_summary, temp_dir
from .quality import evaluate, index_collection, run_aisac, write_collection
from .replicas import cluster_cpu_s

#: largest nDCG@10 difference between the PostgreSQL and the embedded backend (issue 32, acceptance 2)
TARGET_NDCG_DELTA = 0.01


def _cranfield_and_cluster(ctx: Context) -> tuple[Any, Any]:
    """The Cranfield collection (:func:`bench.cranfield.load`) and a started throwaway PostgreSQL-with-pgvector
    cluster (``tests/pg_cluster.py``; stop it when done). Raises :class:`Skip` when either is missing."""
    from . import cranfield

    folder = ctx.data_dir / "retrieval" / "cranfield"
    if not (folder / "cran.all.1400").exists():
        raise Skip(f"Cranfield collection not found in {folder}")
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from pg_cluster import PgCluster, PgUnavailable, pgvector_bin

    try:
        cluster = PgCluster.start(pgvector_bin())
    except PgUnavailable as exc:
        raise Skip(str(exc)) from exc
    return cranfield.load(folder), cluster


def _backend_context(folder: Any, backend: str, cluster: Any) -> Any:
    """An application context on a fresh store in ``folder``: embedded SQLite + Qdrant Edge (``edge``), or a new
    database of ``cluster`` holding both SQL and vectors (``postgres``)."""
    from aisac_core.context import AppContext

    s = isolated_settings(folder)
    if backend == "postgres":
        s = s.updated(sql_url=cluster.create_database(), vector_url="sql")
    return AppContext(s)


def run_vectors(ctx: Context) -> dict[str, Any]:
    """Index and search Cranfield on both backends; returns ``{"edge": {...}, "postgres": {...}, "delta": x}``.
    Raises :class:`Skip` when the collection or the pgserver package is missing."""
    col, cluster = _cranfield_and_cluster(ctx)
    out: dict[str, Any] = {}
    try:
        with temp_dir(ctx, "pgvectors") as tmp:
            write_collection(col, tmp / "cranfield")
            for backend in ("edge", "postgres"):
                core = _backend_context(tmp / backend, backend, cluster)
                try:
                    db0 = cluster_cpu_s(cluster)
                    idx = index_collection(core, tmp / "cranfield")
                    db1 = cluster_cpu_s(cluster)
                    cpu0 = cpu_seconds()
                    runs, lat = run_aisac(core, col, "hybrid")
                    query_cpu = cpu_seconds() - cpu0
                    db2 = cluster_cpu_s(cluster)
                finally:
                    core.close()
                chunks = idx["counters"]["chunks_embedded"]
                out[backend] = {
                    "index_cpu_s": idx["index_cpu_s"],
                    "index_db_cpu_s": round(db1 - db0, 2),
                    "query_cpu_ms": round(1000 * query_cpu / max(len(lat), 1), 1),
                    "query_db_cpu_ms": round(1000 * (db2 - db1) / max(len(lat), 1), 1),
                    "index_s": idx["index_s"],
                    "chunks": chunks,
                    "chunks_per_s": round(chunks / idx["index_s"], 1) if idx["index_s"] else None,
                    "ndcg@10": evaluate(runs, col)["ndcg@10"],
                    "search_latency": latency_summary(lat),
                }
    finally:
        cluster.stop()
    out["delta"] = round(abs(out["postgres"]["ndcg@10"] - out["edge"]["ndcg@10"]), 4)
    out["met"] = out["delta"] <= TARGET_NDCG_DELTA
    return out


def run_latency(ctx: Context) -> dict[str, Any]:
    """Query latency of both backends at the corpus size of ``docs/retrieval.md``'s Latency section: the same
    Cranfield sentence corpus as :mod:`bench.latency` (``--min-chunks``, 10,240 by default), embedded once per
    backend with aisac's Embedder and upserted with the Indexer's payload schema (:func:`bench.latency.fill_store`),
    then every Cranfield query once through :meth:`aisac_core.rag.search.ChunkSearch.search` (hybrid, k = 10, query cache
    cleared; :func:`bench.latency.in_process`). Returns ``{"chunks": n, "edge": summary, "postgres": summary}``
    (summaries from :func:`bench.common.latency_summary`, ms; plus CPU ms per query of this process and of the
    cluster). Raises :class:`Skip` when the collection or pgserver is missing."""
    from .latency import WARMUP, build_corpus, fill_store, in_process

    col, cluster = _cranfield_and_cluster(ctx)
    chunks = build_corpus(col, int(ctx.options.get("min_chunks", 10_240)))
    queries = list(col.queries.values())
    warm = [d.title for d in col.docs if d.title][:WARMUP]
    out: dict[str, Any] = {"chunks": len(chunks)}
    try:
        with temp_dir(ctx, "pgvectors-latency") as tmp:
            for backend in ("edge", "postgres"):
                core = _backend_context(tmp / backend, backend, cluster)
                try:
                    core.vectors()
                    fill_store(core, chunks, tmp / "sentences")
                    db0, cpu0 = cluster_cpu_s(cluster), cpu_seconds()
                    lat = in_process(core, queries, warm, "hybrid")
                    cpu, db = cpu_seconds() - cpu0, cluster_cpu_s(cluster) - db0
                finally:
                    core.close()
                out[backend] = {
                    **latency_summary(lat),
                    "cpu_ms": round(1000 * cpu / len(lat), 1),
                    "db_cpu_ms": round(1000 * db / len(lat), 1) if backend == "postgres" else None,
                }
    finally:
        cluster.stop()
    return out


if __name__ == "__main__":  # python -m bench.pgvectors [--min-chunks N]: the latency part alone
    import argparse
    import json

    ap = argparse.ArgumentParser(description="query latency of Qdrant Edge and PostgreSQL + pgvector")
    ap.add_argument("--min-chunks", type=int, default=10_240)
    args = ap.parse_args()
    print(json.dumps(run_latency(Context(options={"min_chunks": args.min_chunks})), indent=1))
