"""Search latency over >= 10,000 chunks: in-process and over stdio.

Store: the sentences of the Cranfield abstracts (about 9,400 of at least four words), topped up with
two-sentence windows until there are ``min_chunks`` (10,240 by default). Each is real text, embedded by
aisac's own :class:`~aisac_core.rag.embeddings.Embedder` (MiniLM dense + BM25 sparse, batched) and written
with aisac's vector store under the payload schema the Indexer writes (doc_id, path, sha256, section,
page, char span, text, text sha256, ...). The Indexer itself is not used here: its per-file cost is
what the indexing part measures, and one file per sentence would only slow the set-up down.

Queries: the 225 Cranfield queries (or ``--queries N``), each measured once; before measuring, 20 other
texts (document titles) warm the path up, and the query-embedding cache is cleared, so every measured
search embeds its query, as a new question does.

- in-process: :meth:`aisac_core.rag.search.ChunkSearch.search` (k = 10) in hybrid mode (the default), then dense and
  sparse; the time is the wall clock around the call.
- stdio: ``aisac serve`` started by fastmcp's ``StdioTransport`` with ``AISAC_DATA_DIR`` on the bench
  store and ``HF_HUB_OFFLINE=1``; the time is the wall clock around ``client.call_tool("rag_search")``,
  so it includes JSON-RPC framing, the provenance trace write and the pipes.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path
from typing import Any

from . import cranfield
from .common import (
    AISAC_BIN,
    REPO_ROOT,
    Context,
    Skip,
    Timer,
    err,
    latency_summary,
    make_core,
    server_env,
    table,
    target_cell,
    temp_dir,
)

TARGET_INPROCESS_P50_MS = 30.0
TARGET_STDIO_P50_MS = 50.0
WARMUP = 20


def build_corpus(col: cranfield.Cranfield, min_chunks: int) -> list[tuple[str, int, str]]:
    """(Cranfield id, chunk index, text): every abstract sentence of >= 4 words, then two-sentence windows
    (document by document) until there are ``min_chunks``."""
    per_doc: list[tuple[str, list[str]]] = []
    for d in col.docs:
        sents = [s for s in re.split(r"(?<=\s\.)\s+", d.abstract) if len(s.split()) >= 4]
        per_doc.append((d.doc_id, sents))
    chunks = [(did, i, s) for did, sents in per_doc for i, s in enumerate(sents)]
    for did, sents in per_doc:
        for i in range(len(sents) - 1):
            if len(chunks) >= min_chunks:
                return chunks
            chunks.append((did, len(sents) + i, f"{sents[i]} {sents[i + 1]}"))
    return chunks


def fill_store(core: Any, chunks: list[tuple[str, int, str]], root: Path) -> dict[str, Any]:
    """Embed ``chunks`` with aisac's Embedder and upsert them with the Indexer's payload schema."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from aisac_core.hashing import sha256_text
    from aisac_core.rag.indexer import point_id
    from aisac_core.store.vectors import VectorPoint

    vs = core.vectors()
    emb = core.embedder
    embed_s = upsert_s = 0.0
    batch = 512
    with Progress(
        TextColumn("latency: embedding the corpus"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=len(chunks))
        for start in range(0, len(chunks), batch):
            part = chunks[start : start + batch]
            texts = [t for _, _, t in part]
            with Timer() as t:
                dense = emb.embed_documents(texts)
                sparse = emb.sparse_documents(texts)
            embed_s += t.seconds
            points = []
            for (cid, idx, text), dv, sv in zip(part, dense, sparse):
                path = root / f"cran-{int(cid):04d}.md"
                did = hashlib.sha256(str(path).encode()).hexdigest()[:16]
                sha = hashlib.sha256(cid.encode()).hexdigest()
                points.append(
                    VectorPoint(
                        id=point_id(did, sha, idx),
                        dense=dv,
                        sparse_indices=sv[0],
                        sparse_values=sv[1],
                        payload={
                            "doc_id": did,
                            "path": str(path),
                            "sha256": sha,
                            "file_type": "md",
                            "chunk_index": idx,
                            "page": None,
                            "page_end": None,
                            "char_start": 0,
                            "char_end": len(text),
                            "section": "",
                            "section_covers": "other",
                            "text": text,
                            "text_sha256": sha256_text(text),
                            "title": f"Cranfield {cid}",
                        },
                    )
                )
            with Timer() as t:
                for i in range(0, len(points), 256):
                    vs.upsert("chunks", points[i : i + 256])
            upsert_s += t.seconds
            bar.update(task, advance=len(part))
    with Timer() as t:
        vs.flush()
    return {
        "chunks": vs.count("chunks"),
        "embed_s": round(embed_s, 2),
        "chunks_per_s": round(len(chunks) / embed_s, 1),
        "upsert_s": round(upsert_s + t.seconds, 2),
    }


def in_process(core: Any, queries: list[str], warm: list[str], mode: str) -> list[float]:
    """Latency (ms) of each query through :meth:`aisac_core.rag.search.ChunkSearch.search` (k = 10) in ``mode``."""

    for w in warm:
        core.rag.search(w, k=10, mode=mode)
    core.embedder.clear_query_cache()
    out = []
    for q in queries:
        t0 = time.perf_counter()
        res = core.rag.search(q, k=10, mode=mode)
        out.append((time.perf_counter() - t0) * 1000)
        if not res.hits and mode != "sparse":
            raise RuntimeError(f"no hits for {q!r}: {res.message}")
    return out


async def over_stdio(store: Path, queries: list[str], warm: list[str]) -> tuple[list[float], float]:
    """Latency (ms) of each ``rag_search`` call (k = 10) to ``aisac serve`` over stdio, and the seconds from
    spawning the server to the first warm-up answer."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(
        command=str(AISAC_BIN),
        args=["serve"],
        env=server_env(store),
        cwd=str(REPO_ROOT),
        log_file=store.parent / "server-stderr.log",
    )
    out = []
    t0 = time.perf_counter()
    async with Client(transport) as client:
        first = None
        for w in warm:
            await client.call_tool("rag_search", {"query": w, "k": 10})
            first = first or time.perf_counter() - t0
        for q in queries:
            t = time.perf_counter()
            res = await client.call_tool("rag_search", {"query": q, "k": 10})
            out.append((time.perf_counter() - t) * 1000)
            if not (res.structured_content or {}).get("count"):
                raise RuntimeError(f"rag_search over stdio returned no hits for {q!r}")
    return out, first or 0.0


def run(ctx: Context) -> dict[str, Any]:
    """The latency part; returns the JSON-ready result. Raises :class:`Skip` without Cranfield."""
    import anyio

    folder = ctx.data_dir / "retrieval" / "cranfield"
    if not (folder / "cran.all.1400").exists() or not (folder / "cran.qry").exists():
        raise Skip(f"Cranfield collection not found in {folder} (its abstracts make the latency corpus)")
    col = cranfield.load(folder)
    min_chunks = int(ctx.options.get("min_chunks", 10_240))
    n_queries = int(ctx.options.get("queries", 0)) or len(col.queries)
    queries = list(col.queries.values())[:n_queries]
    warm = [d.title for d in col.docs if d.title][:WARMUP]
    t0 = time.perf_counter()
    chunks = build_corpus(col, min_chunks)
    results: dict[str, Any] = {}
    with temp_dir(ctx, "latency") as tmp:
        store = tmp / "store"
        core = make_core(store)
        try:
            with Timer() as t_models:
                core.vectors()
            fill = fill_store(core, chunks, tmp / "sentences")
            for mode in ("hybrid", "dense", "sparse"):
                results[f"in-process {mode}"] = latency_summary(in_process(core, queries, warm, mode))
        finally:
            core.close()  # releases the store's lock for the server process
        stdio_ms, first_s = anyio.run(over_stdio, store, queries, warm)
        results["stdio hybrid (rag_search)"] = latency_summary(stdio_ms)
    ip, sd = results["in-process hybrid"], results["stdio hybrid (rag_search)"]
    ip_ok, sd_ok = ip["p50_ms"] <= TARGET_INPROCESS_P50_MS, sd["p50_ms"] <= TARGET_STDIO_P50_MS
    rows = []
    for name, s in results.items():
        tgt = (
            f"<= {TARGET_INPROCESS_P50_MS:g}"
            if name == "in-process hybrid"
            else f"<= {TARGET_STDIO_P50_MS:g}"
            if name.startswith("stdio")
            else None
        )
        ok = ip_ok if name == "in-process hybrid" else sd_ok if name.startswith("stdio") else None
        rows.append((name, s["n"], s["p50_ms"], s["p95_ms"], s["p99_ms"], s["mean_ms"], tgt, target_cell(ok)))
    table(
        f"latency: search over {fill['chunks']:,} chunks (k = 10, each query once, cache cleared)",
        ["path", "queries", "p50 ms", "p95 ms", "p99 ms", "mean ms", "p50 target", "status"],
        rows,
        caption=f"corpus: {len(chunks):,} Cranfield sentences / 2-sentence windows embedded at "
        f"{fill['chunks_per_s']} chunks/s ({fill['embed_s']} s); stdio server answered its first "
        f"search {first_s:.2f} s after spawn",
    )
    summary = [
        {
            "metric": "in-process hybrid p50 / p95 ms",
            "value": f"{ip['p50_ms']} / {ip['p95_ms']}",
            "target": f"p50 <= {TARGET_INPROCESS_P50_MS:g}",
            "met": ip_ok,
        },
        {
            "metric": "stdio rag_search p50 / p95 ms",
            "value": f"{sd['p50_ms']} / {sd['p95_ms']}",
            "target": f"p50 <= {TARGET_STDIO_P50_MS:g}",
            "met": sd_ok,
        },
        {"metric": "chunks in store", "value": fill["chunks"], "target": ">= 10000", "met": fill["chunks"] >= 10_000},
    ]
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": summary,
        "model_load_s": round(t_models.seconds, 2),
        "store": fill,
        "queries": len(queries),
        "warmup": len(warm),
        "latency": results,
        "stdio_first_answer_s": round(first_s, 3),
        "targets": {
            "inprocess_p50_ms": {"target": TARGET_INPROCESS_P50_MS, "measured": ip["p50_ms"], "met": ip_ok},
            "stdio_p50_ms": {"target": TARGET_STDIO_P50_MS, "measured": sd["p50_ms"], "met": sd_ok},
        },
    }
