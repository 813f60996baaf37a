"""Where one hybrid query's time goes, stage by stage, on Qdrant Edge and on PostgreSQL + pgvector (issue 44).

``python -m bench.query_profile [--min-chunks N] [--queries N] [--engines edge,postgres] [--cprofile FILE]
[--dump FILE]``

The store is the latency corpus (:func:`bench.latency.build_corpus`: Cranfield abstract sentences and two-sentence
windows, 10,240 chunks by default), embedded once with aisac's Embedder and upserted with the Indexer's payload
schema (:func:`bench.latency.fill_store`). Every Cranfield query then runs once through
:meth:`aisac_core.rag.search.ChunkSearch.search` (hybrid, k = 10, query-embedding cache cleared, so each query is
embedded). Each stage is a span around the call that does it (``time.perf_counter`` for wall time and
``time.process_time`` for the CPU of every thread of this process, ONNX Runtime's included); a span's time excludes
the spans nested in it. The PostgreSQL rows add the cluster's CPU (:func:`bench.replicas.cluster_cpu_s`) and the
statement count; ``--cprofile`` writes a cProfile of the measured loop of the last engine; ``--dump`` writes every
query's ranked ids and scores as JSON (to compare two versions of the code: same ids, scores to 1e-6).
"""

from __future__ import annotations

import cProfile
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .common import Context, cpu_seconds, latency_summary, table, temp_dir


class Spans:
    """Exclusive wall and CPU time per stage label (nested spans subtract from their parent)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[float]] = []

    @contextmanager
    def span(self, label: str) -> Iterator[None]:
        """Time the block under ``label``."""
        frame = [0.0, 0.0]  # time of the spans nested in this one
        self._stack.append(frame)
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            dw, dc = time.perf_counter() - w0, time.process_time() - c0
            self._stack.pop()
            self.wall[label] += dw - frame[0]
            self.cpu[label] += dc - frame[1]
            self.calls[label] += 1
            if self._stack:
                self._stack[-1][0] += dw
                self._stack[-1][1] += dc


def _wrap(spans: Spans, obj: Any, attr: str, label: Callable[..., str] | str) -> Callable[[], None]:
    """Replace ``obj.attr`` by a spanned call; returns the undo."""
    orig = getattr(obj, attr)

    def wrapped(*a: Any, **kw: Any) -> Any:
        with spans.span(label(*a, **kw) if callable(label) else label):
            return orig(*a, **kw)

    setattr(obj, attr, wrapped)
    return lambda: setattr(obj, attr, orig)


def _query_label(name: str, *a: Any, **kw: Any) -> str:
    if kw.get("ids") is not None:
        return f"{kw.get('mode')} scores of given ids"
    return {"dense": "dense search (top 100)", "sparse": "BM25 search (top 100)"}.get(str(kw.get("mode")), "query")


def instrument(core: Any, spans: Spans) -> list[Callable[[], None]]:
    """Spans around every stage of a hybrid query of ``core``; returns the undo functions."""
    from aisac_core.rag import ranker, search

    vs = core.vectors()
    emb = core.embedder
    undo = [
        _wrap(spans, emb, "embed_query", "embed query (tokenise + ONNX)"),
        _wrap(spans, emb, "sparse_query", "BM25 query vector"),
        _wrap(spans, emb, "sparse_documents", "feedback: BM25 of 10 chunks"),
        _wrap(spans, vs, "query", _query_label),
        _wrap(spans, vs, "retrieve", "payload reads"),
        _wrap(spans, vs, "dense_vectors", "feedback: stored vectors"),
        _wrap(spans, search, "_fuse", "fusion (normalise + sort)"),
        _wrap(spans, search, "expand_query", "feedback: RM3 expansion"),
        _wrap(spans, search, "indexed_text", "feedback: chunk texts"),
        _wrap(spans, ranker, "features", "ranker features"),
        _wrap(spans, ranker, "score", "ranker logit + isotonic"),
    ]
    return undo


def _pg_statements(vs: Any) -> tuple[Callable[[], int], Callable[[], None]]:
    """Count the statements the PostgreSQL vector store sends (cursor.execute / executemany); (count, undo)."""
    import psycopg

    n = [0]
    orig_e, orig_m = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def execute(self: Any, *a: Any, **kw: Any) -> Any:
        n[0] += 1
        return orig_e(self, *a, **kw)

    def executemany(self: Any, *a: Any, **kw: Any) -> Any:
        n[0] += 1
        return orig_m(self, *a, **kw)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]

    def undo() -> None:
        psycopg.Cursor.execute = orig_e  # type: ignore[method-assign]
        psycopg.Cursor.executemany = orig_m  # type: ignore[method-assign]

    return (lambda: n[0]), undo


def profile_engine(
    core: Any, queries: list[str], warm: list[str], cluster: Any | None, prof: cProfile.Profile | None
) -> dict[str, Any]:
    """Run ``queries`` (after ``warm``) through hybrid search on ``core`` with spans; the per-stage figures."""
    from .replicas import cluster_cpu_s

    for w in warm:
        core.rag.search(w, k=10)
    # 1. the figures: the plain loop, as bench.latency runs it (no span, no profiler)
    core.embedder.clear_query_cache()
    count, undo_pg = _pg_statements(core.vectors()) if cluster is not None else ((lambda: 0), (lambda: None))
    lat: list[float] = []
    ranked: list[list[tuple[str, float, float | None]]] = []
    db0, cpu0, st0 = (cluster_cpu_s(cluster) if cluster else 0.0), cpu_seconds(), count()
    try:
        for q in queries:
            w0 = time.perf_counter()
            res = core.rag.search(q, k=10)
            lat.append((time.perf_counter() - w0) * 1000)
            # a chunk named by its file and index: the point ids hash the temporary folder's path
            ranked.append(
                [
                    (f"{Path(str(h.payload.get('path'))).name}#{h.payload.get('chunk_index')}", h.score, h.relevance)
                    for h in res.hits
                ]
            )
    finally:
        undo_pg()
    cpu = cpu_seconds() - cpu0
    db = (cluster_cpu_s(cluster) - db0) if cluster else 0.0
    statements = count() - st0
    # 2. where it goes: the same queries again with a span around each stage (the spans cost CPU of their own)
    core.embedder.clear_query_cache()
    spans = Spans()
    undo = instrument(core, spans)
    try:
        for q in queries:
            with spans.span("other (validation, glue)"):
                core.rag.search(q, k=10)
    finally:
        for u in undo:
            u()
    # 3. a cProfile of a third pass when asked
    if prof is not None:
        core.embedder.clear_query_cache()
        prof.enable()
        for q in queries:
            core.rag.search(q, k=10)
        prof.disable()
    n = len(queries)
    stages = {
        k: {
            "wall_ms": round(1000 * spans.wall[k] / n, 2),
            "cpu_ms": round(1000 * spans.cpu[k] / n, 2),
            "calls": spans.calls[k] / n,
        }
        for k in sorted(spans.wall, key=lambda k: -spans.cpu[k])
    }
    return {
        **latency_summary(lat),
        "cpu_ms": round(1000 * cpu / n, 2),
        "db_cpu_ms": round(1000 * db / n, 2) if cluster else None,
        "statements_per_query": round(statements / n, 1) if cluster else None,
        "stages": stages,
        "ranked": ranked,
    }


@contextmanager
def _cached_embeddings(core: Any, cache: Path | None) -> Iterator[None]:
    """While filling the store: the corpus's dense and BM25 vectors read from / written to ``cache`` (a pickle of
    ``{text: (dense, sparse)}``, this benchmark's own file) so a second profile skips embedding 10k chunks."""
    import pickle

    if cache is None:
        yield
        return
    emb = core.embedder
    got: dict[str, Any] = pickle.loads(cache.read_bytes()) if cache.exists() else {}
    dense_orig, sparse_orig = emb.embed_documents, emb.sparse_documents
    n0 = len(got)

    def dense(texts: list[str]) -> list[list[float]]:
        todo = [t for t in texts if t not in got]
        if todo:
            for t, d, s in zip(todo, dense_orig(todo), sparse_orig(todo)):
                got[t] = (d, s)
        return [got[t][0] for t in texts]

    emb.embed_documents = dense
    emb.sparse_documents = lambda texts: [got[t][1] for t in texts]
    try:
        yield
    finally:
        emb.embed_documents, emb.sparse_documents = dense_orig, sparse_orig
        if len(got) != n0:
            cache.write_bytes(pickle.dumps(got))


def explain(core: Any, query: str) -> list[tuple[str, float, str]]:
    """EXPLAIN ANALYZE of every statement one hybrid search of ``query`` sends to PostgreSQL: ``(statement, server
    execution ms, plan's first line)`` in order (``SET`` statements are replayed as they were, not explained)."""
    import psycopg

    seen: list[tuple[str, Any]] = []
    orig = psycopg.Cursor.execute

    def execute(self: Any, q: Any, params: Any = None, **kw: Any) -> Any:
        seen.append((str(q), params))
        return orig(self, q, params, **kw)

    core.embedder.clear_query_cache()
    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    try:
        core.rag.search(query, k=10)
    finally:
        psycopg.Cursor.execute = orig  # type: ignore[method-assign]
    out = []
    with psycopg.connect(core.vectors().url.replace("postgresql+psycopg", "postgresql")) as conn:
        for sql, params in seen:
            with conn.cursor() as cur:
                head = sql.lstrip().upper()
                if head.startswith(";"):  # a pre-ping (none since issue 44)
                    continue
                if not head.startswith(("SELECT", "WITH")):
                    if head.startswith("SET"):
                        cur.execute(sql, params)
                    continue
                cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
                plan = cur.fetchone()[0][0]
                nodes, todo = [], [plan["Plan"]]
                while todo:
                    node = todo.pop(0)
                    nodes.append(
                        node["Node Type"]
                        + (f" on {node['Relation Name']}" if "Relation Name" in node else "")
                        + (f" ({node['Index Name']})" if "Index Name" in node else "")
                    )
                    todo.extend(node.get("Plans", []))
                out.append(
                    (
                        " ".join(sql.split())[:110],
                        float(plan["Execution Time"]) + float(plan["Planning Time"]),
                        "; ".join(n for n in nodes if " on " in n),
                    )
                )
                conn.rollback()  # each statement of the store runs in a transaction of its own (its SET LOCAL ends)
        conn.rollback()
    return out


def run(ctx: Context, engines: tuple[str, ...], cprofile_out: Path | None, dump: Path | None) -> dict[str, Any]:
    """Profile each engine of ``engines``; prints a table per engine; returns the figures."""
    from . import cranfield
    from .latency import WARMUP, build_corpus, fill_store
    from .pgvectors import _backend_context, _cranfield_and_cluster

    cluster = None
    if "postgres" in engines:
        col, cluster = _cranfield_and_cluster(ctx)
    else:
        col = cranfield.load(ctx.data_dir / "retrieval" / "cranfield")
    chunks = build_corpus(col, int(ctx.options.get("min_chunks", 10_240)))
    queries = list(col.queries.values())[: int(ctx.options.get("queries", 0)) or None]
    warm = [d.title for d in col.docs if d.title][:WARMUP]
    out: dict[str, Any] = {"chunks": len(chunks), "queries": len(queries)}
    try:
        with temp_dir(ctx, "query-profile") as tmp:
            for backend in engines:
                core = _backend_context(tmp / backend, backend, cluster)
                try:
                    core.vectors()
                    with _cached_embeddings(core, ctx.options.get("embed_cache")):
                        fill_store(core, chunks, Path("/aisac-bench/sentences"))  # fixed: the point ids hash it
                    prof = cProfile.Profile() if cprofile_out is not None else None
                    out[backend] = profile_engine(core, queries, warm, cluster if backend == "postgres" else None, prof)
                    if backend == "postgres" and ctx.options.get("explain"):
                        rows = explain(core, queries[0])
                        out["explain"] = rows
                        table(
                            f"EXPLAIN ANALYZE of the statements of one hybrid search ({queries[0][:50]!r})",
                            ["statement", "server ms (plan + execution)", "top node"],
                            rows,
                            caption=f"{len(rows)} statements, {sum(r[1] for r in rows):.2f} ms",
                        )
                    if prof is not None and cprofile_out is not None:
                        prof.dump_stats(str(cprofile_out.with_suffix(f".{backend}.prof")))
                finally:
                    core.close()
    finally:
        if cluster is not None:
            cluster.stop()
    for backend in engines:
        r = out[backend]
        rows = [(k, v["calls"], v["wall_ms"], v["cpu_ms"]) for k, v in r["stages"].items()]
        rows.append(
            (
                "sum of the spans",
                None,
                round(sum(v["wall_ms"] for v in r["stages"].values()), 2),
                round(sum(v["cpu_ms"] for v in r["stages"].values()), 2),
            )
        )
        rows.append(("plain loop: wall p50, process CPU", None, r["p50_ms"], r["cpu_ms"]))
        if r["db_cpu_ms"] is not None:
            rows.append(("PostgreSQL cluster CPU", r["statements_per_query"], None, r["db_cpu_ms"]))
        table(
            f"query profile, {backend}: {out['chunks']:,} chunks, {out['queries']} queries (hybrid, k = 10)",
            ["stage", "calls/query", "wall ms/query", "CPU ms/query"],
            rows,
            caption=f"wall p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms; process CPU {r['cpu_ms']} ms/query",
        )
    if dump is not None:
        dump.write_text(json.dumps({b: out[b]["ranked"] for b in engines}))
    for b in engines:
        out[b].pop("ranked")
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="per-stage profile of one hybrid query on each vector engine")
    ap.add_argument("--min-chunks", type=int, default=10_240)
    ap.add_argument("--queries", type=int, default=0)
    ap.add_argument("--engines", default="edge,postgres")
    ap.add_argument("--cprofile", type=Path, default=None)
    ap.add_argument("--dump", type=Path, default=None)
    ap.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE one search's PostgreSQL statements")
    ap.add_argument("--embed-cache", type=Path, default=None, help="pickle of the corpus vectors (reused)")
    args = ap.parse_args()
    res = run(
        Context(
            options={
                "min_chunks": args.min_chunks,
                "queries": args.queries,
                "embed_cache": args.embed_cache,
                "explain": args.explain,
            }
        ),
        tuple(e for e in args.engines.split(",") if e),
        args.cprofile,
        args.dump,
    )
    json.dump(res, sys.stderr, indent=1)
