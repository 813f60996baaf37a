"""Retrieval quality on Cranfield: nDCG@10 and recall@100 of aisac's dense, sparse and hybrid search,
side by side with a plain ``bm25s`` baseline on the same texts.

Method:

1. Every Cranfield document becomes one small Markdown file, ``cran-NNNN.md``: ``# <title>`` then the
   abstract (the ``.W`` field, whitespace-normalised; it repeats the title, as in every standard use
   of the collection). Two documents (471 and 995) have neither title nor abstract: aisac reports them
   as failed ("no extractable text") and they are simply never retrieved.
2. The folder is indexed through aisac's own pipeline (:class:`aisac_core.rag.indexer.Indexer`: docling
   parse, HybridChunker, MiniLM + BM25 embeddings, Qdrant Edge) into a temporary store.
3. Each of the 225 queries (renumbered 1..225 in file order, see :mod:`bench.cranfield`) is run with
   :meth:`aisac_core.rag.search.ChunkSearch.search` at k = 100 in each mode; hits are chunks, mapped back to
   Cranfield ids through the file name; a document's rank is that of its best chunk.
4. nDCG@10 (graded gains, :data:`bench.cranfield.GAINS`) and recall@100 (gain > 0) per query, averaged
   over the 225 queries; a paired randomization test compares the shipped hybrid with each other run.

The hybrid run uses the fusion aisac ships (:data:`aisac_core.rag.search.FUSION`, theoretical min-max
normalisation and RM3 feedback); the other fusion, the earlier shipped hybrid (min-max over the candidates,
no feedback, 0.420) and TM2C2 without feedback are run on the same index for comparison, each with its
nDCG@10 over odd and even query numbers and p against the shipped and the earlier hybrid. ``--study`` adds the fusion study of docs/retrieval.md
(:mod:`bench.fusion_study`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from . import cranfield, scifact, scifact_full
from .common import Context, Skip, Timer, cpu_seconds, err, latency_summary, make_core, table, target_cell, temp_dir
from .metrics import mean, ndcg_at_k, paired_randomization_test, recall_at_k

#: The hybrid shipped before theoretical min-max and RM3 feedback (0.420): min-max over the candidates.
EARLIER = "aisac hybrid (convex min-max, no feedback: earlier shipped)"


def write_collection(col: cranfield.Cranfield, folder: Path) -> None:
    """One Markdown file per document: ``# title`` and the abstract (empty documents give empty files)."""
    folder.mkdir(parents=True, exist_ok=True)
    for d in col.docs:
        body = (f"# {d.title}\n\n" if d.title else "") + (f"{d.abstract}\n" if d.abstract else "")
        (folder / f"cran-{int(d.doc_id):04d}.md").write_text(body, encoding="utf-8")


def cran_id(path: str) -> str:
    """Collection id of an indexed file ``.../cran-0042.md`` -> ``"42"`` (SciFact ids are numeric too)."""
    return str(int(Path(path).stem.split("-", 1)[1]))


def index_collection(core: Any, folder: Path) -> dict[str, Any]:
    """Index ``folder`` with aisac's Indexer (progress on stderr); returns time, counters and failures."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from aisac_core.rag.indexer import Counters

    counters, failures = Counters(), []
    with Timer() as t_models:
        core.vectors()  # loads the models and opens the store, so the index time is indexing only
    with Progress(
        TextColumn(f"quality: indexing {folder.name}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)
        cpu0 = cpu_seconds()
        with Timer() as t:
            core.rag.indexer.run(
                [folder],
                counters=counters,
                failures=failures,
                progress=lambda done, total, _n: bar.update(task, completed=done, total=total),
            )
        index_cpu = cpu_seconds() - cpu0  # before the efficiency probe, which runs the raw ONNX loop itself
    from .indexing import efficiency

    return {
        "efficiency": efficiency(core, counters.as_dict()),
        "model_load_s": round(t_models.seconds, 2),
        "index_s": round(t.seconds, 2),
        "index_cpu_s": round(index_cpu, 2),
        "counters": counters.as_dict(),
        "failures": failures,
    }


def run_aisac(
    core: Any, col: cranfield.Cranfield, mode: str, fusion: str | None = None, overrides: dict[str, Any] | None = None
) -> tuple[dict, list]:
    """Run every query through :meth:`aisac_core.rag.search.ChunkSearch.search` (k = 100) in ``mode`` (and, for hybrid,
    with ``fusion`` and the module constants in ``overrides``, e.g. ``{"PRF_CHUNKS": 0}``, restored after);
    returns ``({qid: [cranfield ids, best first]}, [latency ms])``. The query-embedding cache is cleared
    first, so every run's latencies include embedding its queries."""
    from aisac_core.rag import search as retrieval

    core.embedder.clear_query_cache()
    saved = {name: getattr(retrieval, name) for name in ["FUSION", *(overrides or {})]}
    if fusion:
        retrieval.FUSION = fusion
    for name, value in (overrides or {}).items():
        setattr(retrieval, name, value)
    try:
        runs, lat = {}, []
        for qid, text in col.queries.items():
            res = core.rag.search(text, k=100, mode=mode)
            lat.append(res.took_ms)
            runs[qid] = [cran_id(h.payload["path"]) for h in res.hits]
        return runs, lat
    finally:
        for name, value in saved.items():
            setattr(retrieval, name, value)


def run_bm25s(col: cranfield.Cranfield, stem: bool) -> tuple[dict, dict]:
    """The ``bm25s`` baseline (its defaults: Lucene BM25, k1 = 1.5, b = 0.75) over the same title + abstract
    texts, English stopwords, with PyStemmer's Snowball stemmer when ``stem``; returns (runs, settings)."""
    import bm25s

    stemmer = None
    if stem:
        try:
            import Stemmer

            stemmer = Stemmer.Stemmer("english")
        except ImportError:
            return {}, {"error": "PyStemmer is not installed"}
    ids = [d.doc_id for d in col.docs]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize([d.text for d in col.docs], stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    qids = list(col.queries)
    qtok = bm25s.tokenize([col.queries[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False)
    docs, scores = retriever.retrieve(qtok, k=min(100, len(ids)), show_progress=False)
    runs = {q: [ids[int(j)] for j, s in zip(docs[i], scores[i]) if s > 0] for i, q in enumerate(qids)}
    settings = {
        "method": retriever.method,
        "k1": retriever.k1,
        "b": retriever.b,
        "stopwords": "en",
        "stemmer": "PyStemmer english (Snowball)" if stemmer else None,
        "version": bm25s.__version__,
    }
    return runs, settings


def evaluate(runs: dict[str, list[str]], col: cranfield.Cranfield) -> dict[str, Any]:
    """Mean nDCG@10 and recall@100 over all queries, with the per-query nDCG@10 values."""
    qids = list(col.queries)
    nd = [ndcg_at_k(runs.get(q, []), col.qrels.get(q, {}), 10) for q in qids]
    rc = [recall_at_k(runs.get(q, []), col.qrels.get(q, {}), 100) for q in qids]
    return {
        "ndcg@10": round(mean(nd), 4),
        "recall@100": round(mean(rc), 4),
        "queries": len(qids),
        "per_query_ndcg@10": [round(x, 4) for x in nd],
    }


#: The collections: (label, folder under shared/data, files needed, loader). "SciFact train" is BEIR's SciFact
#: train split (807 claims over the full 5,183-abstract corpus, :mod:`bench.scifact_full`); the learned ranker's
#: cross-validated figures on it come from ``bench/train_ranker.py``.
COLLECTIONS: tuple[tuple[str, str, tuple[str, ...], Any], ...] = (
    ("Cranfield", "retrieval/cranfield", ("cran.all.1400", "cran.qry", "cranqrel"), cranfield.load),
    ("SciFact dev", "retrieval/scifact_dev", scifact.FILES, scifact.load),
    ("SciFact train", "claims/scifact", scifact_full.FILES, scifact_full.load),
)
#: Published nDCG@10 on BEIR SciFact (the 300 *test* claims, so for reference only, not the same queries):
#: Thakur et al., "BEIR", NeurIPS Datasets & Benchmarks 2021, Table 2; MiniLM and bge-small from the MTEB
#: leaderboard (Muennighoff et al., EACL 2023); monoT5 from Rosa et al., "No parameter left behind", 2022.
PUBLISHED_SCIFACT = {
    "BM25 (BEIR)": 0.665,
    "BM25 + CE reranker (BEIR)": 0.688,
    "ColBERT (BEIR)": 0.671,
    "all-MiniLM-L6-v2 (MTEB)": 0.645,
    "bge-small-en-v1.5 (MTEB)": 0.72,
    "monoT5-3B reranker": 0.766,
}
#: The hybrid shipped before issue 33, per collection (SciFact dev measured on the same index, RM3 always).
TODAY = {"Cranfield": 0.437, "SciFact dev": 0.884}


def _variants(shipped: str, other: str) -> tuple[tuple[str, str, str | None, dict[str, Any] | None], ...]:
    """(label, mode, fusion, module overrides) of every run on one index: the shipped hybrid, each mode
    alone, and the shipped hybrid with one recent feature switched off at a time."""

    return (
        (f"aisac hybrid ({shipped}, shipped)", "hybrid", shipped, None),
        ("aisac dense (MiniLM)", "dense", None, None),
        ("aisac sparse (BM25)", "sparse", None, None),
        (f"aisac hybrid ({other})", "hybrid", other, None),
        (EARLIER, "hybrid", "convex", {"NORMALISATION": "minmax", "PRF_CHUNKS": 0, "DENSE_PRF_CHUNKS": 0}),
        ("hybrid, TM2C2 off (min-max)", "hybrid", "convex", {"NORMALISATION": "minmax"}),
        ("hybrid, dense feedback off (RM3 only, shipped before)", "hybrid", "convex", {"DENSE_PRF_CHUNKS": 0}),
        ("hybrid, dense feedback ungated", "hybrid", "convex", {"DENSE_PRF_CLEAR_GAP": None}),
        ("hybrid, RM3 off", "hybrid", "convex", {"PRF_CHUNKS": 0}),
        ("hybrid, RM3 gated by dense/BM25 agreement", "hybrid", "convex", {"PRF_GATE": "agreement"}),
        (
            "hybrid + learned re-ranking (in-sample: the shipped model saw these queries)",
            "hybrid",
            "convex",
            {"RERANK": True},
        ),
    )


def run_collection(ctx: Context, label: str, folder: Path, col: cranfield.Cranfield) -> dict[str, Any]:
    """Index one collection through aisac, run every variant and the bm25s baselines; returns the result."""
    from aisac_core.rag import search as retrieval

    shipped = retrieval.FUSION
    other = "rrf" if shipped == "convex" else "convex"
    systems: dict[str, dict[str, Any]] = {}
    study: dict[str, Any] | None = None
    hybrid_label = f"aisac hybrid ({shipped}, shipped)"
    with temp_dir(ctx, "quality") as tmp:
        write_collection(col, tmp / folder.name)
        core = make_core(tmp / "store")
        try:
            indexing = index_collection(core, tmp / folder.name)
            for name, mode, fusion, over in _variants(shipped, other):
                runs, lat = run_aisac(core, col, mode, fusion, over)
                systems[name] = {**evaluate(runs, col), "search_latency": latency_summary(lat)}
            if ctx.study and label == "Cranfield":
                from .fusion_study import run_study

                study = run_study(core, col)
        finally:
            core.close()
    for name, stem in (("bm25s (stopwords + stemmer)", True), ("bm25s (stopwords, no stemmer)", False)):
        runs, settings = run_bm25s(col, stem)
        if runs:
            systems[name] = {**evaluate(runs, col), "settings": settings}
    hyb = systems[hybrid_label]
    for name, s in systems.items():
        if name != hybrid_label:
            s["p_vs_shipped_hybrid"] = round(
                paired_randomization_test(hyb["per_query_ndcg@10"], s["per_query_ndcg@10"]), 4
            )
    odd = [int(q) % 2 == 1 for q in col.queries]
    for s in systems.values():
        nd = s["per_query_ndcg@10"]
        s["ndcg@10_odd_qids"] = round(mean([x for x, o in zip(nd, odd) if o]), 4)
        s["ndcg@10_even_qids"] = round(mean([x for x, o in zip(nd, odd) if not o]), 4)
    rows = [
        (
            name,
            s["ndcg@10"],
            s["ndcg@10_odd_qids"],
            s["ndcg@10_even_qids"],
            s["recall@100"],
            s.get("search_latency", {}).get("p50_ms"),
            s.get("p_vs_shipped_hybrid"),
        )
        for name, s in systems.items()
    ]
    c = indexing["counters"]
    table(
        f"quality: {label} ({len(col.docs):,} abstracts, {len(col.queries)} queries)",
        ["system", "nDCG@10", "odd qids", "even qids", "recall@100", "search p50 ms", "p vs hybrid"],
        rows,
        caption=f"indexed through aisac in {indexing['index_s']:.0f} s wall, {indexing['index_cpu_s']:.0f} CPU s "
        f"({c['files_indexed']} files, {c['chunks_embedded']} chunks, {c['files_failed']} failed: "
        f"{', '.join(Path(f['path']).name for f in indexing['failures']) or 'none'}); CPU s per stage: parse "
        f"{c['parse_cpu_s']:.0f}, dense {c['dense_cpu_s']:.0f}, BM25 {c['sparse_cpu_s']:.1f}, store "
        f"{c['store_cpu_s']:.0f}; embedding efficiency (aisac / raw ONNX tokens per CPU s) "
        f"{indexing['efficiency'].get('efficiency')}; p = paired randomization "
        "test on per-query nDCG@10 against the shipped hybrid.",
    )
    best_bm25s = max((s["ndcg@10"] for n, s in systems.items() if n.startswith("bm25s")), default=0.0)
    return {
        "indexing": indexing,
        "systems": systems,
        "hybrid_ndcg@10": hyb["ndcg@10"],
        "best_bm25s_ndcg@10": best_bm25s,
        "fusion_study": study,
    }


def run(ctx: Context) -> dict[str, Any]:
    """The quality part: for each collection present, index it with aisac, evaluate every mode, the feature
    ablations and the bm25s baselines, print the tables; returns the JSON-ready result. Raises :class:`Skip`
    when no collection is present."""
    from aisac_core.rag.embeddings import SPARSE_MODEL_ID

    t0 = time.perf_counter()
    per: dict[str, dict[str, Any]] = {}
    for label, sub, needed, loader in COLLECTIONS:
        folder = ctx.data_dir / sub
        if not all((folder / f).exists() for f in needed):
            err.print(f"quality: {label} not found in {folder} (needs {', '.join(needed)}); skipped")
            continue
        per[label] = run_collection(ctx, label, folder, loader(folder))
    if not per:
        raise Skip("no retrieval collection found (data/retrieval/cranfield, retrieval/scifact_dev, claims/scifact)")
    checks, summary = [], []
    for label, r in per.items():
        hyb, b = r["hybrid_ndcg@10"], r["best_bm25s_ndcg@10"]
        today = TODAY.get(label)
        checks.append((f"{label}: hybrid nDCG@10 > bm25s", hyb, f"> {b}", target_cell(hyb > b)))
        if today is not None:
            checks.append((f"{label}: hybrid nDCG@10 >= before", hyb, f">= {today}", target_cell(hyb >= today)))
        summary.append({"metric": f"{label} hybrid nDCG@10", "value": hyb, "target": f"> bm25s {b}", "met": hyb > b})
    table("quality: targets", ["check", "measured", "target", "status"], checks)
    if "SciFact train" in per:
        table(
            "quality: published BEIR SciFact nDCG@10 (300 test claims; reference only, other queries)",
            ["system", "nDCG@10"],
            [
                *PUBLISHED_SCIFACT.items(),
                ("aisac hybrid, SciFact train claims (this run)", per["SciFact train"]["hybrid_ndcg@10"]),
            ],
        )
    for r in per.values():
        if r["fusion_study"]:
            from .fusion_study import print_study

            print_study(r["fusion_study"])
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": summary,
        "sparse_model": SPARSE_MODEL_ID,
        "collections": per,
        "gains": {str(k): v for k, v in cranfield.GAINS.items()},
    }
