"""Issue 44's cost figures in one run: index CPU against mcp-server-qdrant, query p50 at 10k chunks on the embedded
store, and the PostgreSQL hybrid query's CPU against the embedded store's.

``python -m bench --only cost [--peer-python PATH]``

1. **Index CPU against mcp-server-qdrant** (the Qdrant team's MCP server, ``mcp-server-qdrant``; it needs
   ``fastmcp==2.7.0``, which cannot share aisac's environment, so it runs from its own virtualenv: ``python -m venv
   /tmp/peer && /tmp/peer/bin/pip install mcp-server-qdrant==0.8.1``; pass that interpreter with ``--peer-python``
   or ``AISAC_BENCH_PEER_PYTHON``). Same corpus: the Cranfield abstracts, one Markdown file per document
   (:func:`bench.quality.write_collection`). Same model: the peer's ``FastEmbedProvider`` is given aisac's own
   offline all-MiniLM-L6-v2 folder (``TextEmbedding(..., specific_model_path=DIR)``; the peer's own code otherwise).
   aisac indexes the folder with its :class:`~aisac_core.rag.indexer.Indexer` (parse, chunk, dense + BM25, the
   manifest, Qdrant Edge); the peer stores each document's text as one entry through its ``QdrantConnector.store``
   (the ``qdrant-store`` tool's code path: embed, upsert into qdrant-client's local mode), one call per document, as
   a host would call the tool. The figure is CPU seconds (user + system, every thread) of each process over the
   indexing loop alone, models loaded before (:func:`bench.common.cpu_seconds`, ``resource.getrusage``). Target:
   aisac <= 1.3 x the peer.
2. **Query p50 at 10k chunks** and 3. **PostgreSQL hybrid CPU**: :func:`bench.pgvectors.run_latency` (the Latency
   corpus, 10,240 chunks, every Cranfield query once through ``search``, hybrid, k = 10, its query embedding
   included), on Qdrant Edge and on PostgreSQL + pgvector (``pgserver``); CPU per query is this process's plus, on
   PostgreSQL, the cluster's. Targets: Edge p50 <= 15 ms; PostgreSQL CPU <= 2 x Edge CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from .common import Context, Skip, cpu_seconds, err, make_core, table, target_cell, temp_dir

TARGET_INDEX_CPU_RATIO = 1.3
TARGET_EDGE_P50_MS = 15.0
TARGET_PG_CPU_RATIO = 2.0

#: the peer's indexing loop, run by the peer's own interpreter: argv = model dir, corpus folder, store dir; prints
#: {"docs", "cpu_s", "wall_s", "load_cpu_s", "version"} as JSON
PEER = r"""
import asyncio, json, resource, sys, time
from importlib.metadata import version
from pathlib import Path

from fastembed import TextEmbedding
from mcp_server_qdrant.embeddings.fastembed import FastEmbedProvider
from mcp_server_qdrant.qdrant import Entry, QdrantConnector

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

class Local(FastEmbedProvider):
    # the peer's provider with aisac's offline MiniLM folder (the peer would download the same model by name)
    def __init__(self, model_dir):
        self.model_name = "sentence-transformers/all-MiniLM-L6-v2"
        self.embedding_model = TextEmbedding(self.model_name, specific_model_path=model_dir)

async def main():
    c0 = cpu()
    conn = QdrantConnector(None, None, "bench", Local(sys.argv[1]), qdrant_local_path=sys.argv[3])
    await conn.store(Entry(content="warm-up"), collection_name="warm")
    load = cpu() - c0
    files = sorted(Path(sys.argv[2]).glob("*.md"))
    texts = [(f.name, f.read_text(encoding="utf-8")) for f in files]
    texts = [(n, t) for n, t in texts if t.strip()]
    c0, w0 = cpu(), time.perf_counter()
    for name, text in texts:
        await conn.store(Entry(content=text, metadata={"path": name}))
    print(json.dumps({"docs": len(texts), "cpu_s": cpu() - c0, "wall_s": time.perf_counter() - w0,
                      "load_cpu_s": load, "version": version("mcp-server-qdrant")}))

asyncio.run(main())
"""


def peer_python(ctx: Context) -> Path | None:
    """The interpreter of the virtualenv holding mcp-server-qdrant (``--peer-python`` or
    ``AISAC_BENCH_PEER_PYTHON``), None when not given or absent."""
    given = ctx.options.get("peer_python") or os.environ.get("AISAC_BENCH_PEER_PYTHON")
    if not given:
        return None
    p = Path(given)
    return p if p.exists() else None


def index_both(ctx: Context, peer: Path | None) -> dict[str, Any]:
    """Index the Cranfield abstracts with aisac and (when ``peer`` is given) with mcp-server-qdrant; CPU seconds
    of each indexing loop. Raises :class:`Skip` when Cranfield is absent."""
    from . import cranfield
    from .quality import write_collection

    folder = ctx.data_dir / "retrieval" / "cranfield"
    if not (folder / "cran.all.1400").exists():
        raise Skip(f"Cranfield collection not found in {folder}")
    col = cranfield.load(folder)
    out: dict[str, Any] = {}
    with temp_dir(ctx, "cost") as tmp:
        docs = tmp / "cranfield"
        write_collection(col, docs)
        from aisac_core.rag.indexer import Counters

        core = make_core(tmp / "store")
        try:
            core.vectors()  # models loaded and store opened before the clock starts
            core.embedder.embed_documents(["warm-up"])
            counters = Counters()
            cpu0, w0 = cpu_seconds(), time.perf_counter()
            core.rag.indexer.run([docs], counters=counters, failures=[])
            out["aisac"] = {
                "cpu_s": round(cpu_seconds() - cpu0, 2),
                "wall_s": round(time.perf_counter() - w0, 2),
                "docs": counters.files_indexed,
                "chunks": counters.chunks_embedded,
                "stages_cpu_s": {
                    "parse": round(counters.parse_cpu_s, 2),
                    "dense": round(counters.dense_cpu_s, 2),
                    "bm25": round(counters.sparse_cpu_s, 2),
                    "store": round(counters.store_cpu_s, 2),
                },
            }
            model_dir = core.settings.models_dir / "all-MiniLM-L6-v2-int8"
        finally:
            core.close()
        if peer is not None:
            err.print("cost: indexing with mcp-server-qdrant")
            env = {**os.environ, "HF_HUB_OFFLINE": "1"}
            res = subprocess.run(
                [str(peer), "-c", PEER, str(model_dir), str(docs), str(tmp / "peer-store")],
                capture_output=True,
                text=True,
                env=env,
                timeout=3600,
                check=False,
            )
            if res.returncode != 0:
                out["peer"] = {"error": res.stderr.strip().splitlines()[-1:] or ["failed"]}
            else:
                out["peer"] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def run(ctx: Context) -> dict[str, Any]:
    """The cost part: the three figures and their targets (tables on stdout); returns the JSON-ready result."""
    from .pgvectors import run_latency

    t0 = time.perf_counter()
    peer = peer_python(ctx)
    idx = index_both(ctx, peer)
    try:
        lat = run_latency(ctx)
    except Skip as exc:
        lat = {"skipped": str(exc)}
    rows, summary = [], []
    a, p = idx["aisac"], idx.get("peer")
    if p and "cpu_s" in p:
        ratio = round(a["cpu_s"] / p["cpu_s"], 2)
        rows.append(
            (
                "index CPU, aisac / mcp-server-qdrant",
                ratio,
                f"<= {TARGET_INDEX_CPU_RATIO}",
                target_cell(ratio <= TARGET_INDEX_CPU_RATIO),
            )
        )
        summary.append(
            {
                "metric": "index CPU / mcp-server-qdrant",
                "value": ratio,
                "target": f"<= {TARGET_INDEX_CPU_RATIO}",
                "met": ratio <= TARGET_INDEX_CPU_RATIO,
            }
        )
    else:
        why = (p or {}).get("error") or "mcp-server-qdrant not given (--peer-python)"
        rows.append(
            ("index CPU, aisac / mcp-server-qdrant", None, f"<= {TARGET_INDEX_CPU_RATIO}", f"not measured: {why}")
        )
    if "edge" in lat:
        e, g = lat["edge"], lat["postgres"]
        pg_cpu = g["cpu_ms"] + (g["db_cpu_ms"] or 0.0)
        ratio = round(pg_cpu / e["cpu_ms"], 2) if e["cpu_ms"] else None
        rows.append(
            (
                f"query p50 ms, Edge, {lat['chunks']:,} chunks",
                e["p50_ms"],
                f"<= {TARGET_EDGE_P50_MS}",
                target_cell(e["p50_ms"] <= TARGET_EDGE_P50_MS),
            )
        )
        rows.append(
            (
                "hybrid query CPU, PostgreSQL / Edge",
                ratio,
                f"<= {TARGET_PG_CPU_RATIO}",
                target_cell(ratio is not None and ratio <= TARGET_PG_CPU_RATIO),
            )
        )
        summary.append(
            {
                "metric": "query p50 ms (Edge, 10k chunks)",
                "value": e["p50_ms"],
                "target": f"<= {TARGET_EDGE_P50_MS}",
                "met": e["p50_ms"] <= TARGET_EDGE_P50_MS,
            }
        )
        summary.append(
            {
                "metric": "PostgreSQL hybrid CPU / Edge",
                "value": ratio,
                "target": f"<= {TARGET_PG_CPU_RATIO}",
                "met": ratio is not None and ratio <= TARGET_PG_CPU_RATIO,
            }
        )
    else:
        rows.append(("query p50 and PostgreSQL CPU", None, "", f"not measured: {lat.get('skipped')}"))
    peer_s = (
        f"mcp-server-qdrant {p.get('version')}: {p['cpu_s']:.1f} CPU s, {p['wall_s']:.0f} s wall, {p['docs']} entries; "
        if p and "cpu_s" in p
        else ""
    )
    table(
        "cost (issue 44)",
        ["measure", "value", "target", "status"],
        rows,
        caption=f"indexing the Cranfield abstracts: aisac {a['cpu_s']:.1f} CPU s, {a['wall_s']:.0f} s wall, {a['docs']} files, "
        f"{a['chunks']} chunks (CPU s per stage {a['stages_cpu_s']}); {peer_s}"
        + (
            f"query (hybrid, k = 10, embedding included): Edge p50 {lat['edge']['p50_ms']} ms, CPU {lat['edge']['cpu_ms']} ms; "
            f"PostgreSQL p50 {lat['postgres']['p50_ms']} ms, CPU {lat['postgres']['cpu_ms']} ms + cluster {lat['postgres']['db_cpu_ms']} ms"
            if "edge" in lat
            else ""
        ),
    )
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": summary,
        "index": idx,
        "query": lat,
    }
