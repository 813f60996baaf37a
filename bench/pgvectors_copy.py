"""Same vectors, two ports: the points of a store indexed with Cranfield on Qdrant Edge are copied into PostgreSQL +
pgvector, and the 225 queries run on both (hybrid nDCG@10, latency). Isolates the vector port from indexing time:
``python -m bench.pgvectors_copy <edge store dir> [<cranfield folder>]`` (a store left by
``python -m bench --only engines --keep``, ``<tmp>/pgvectors/edge``). Prints JSON.
"""

import json
import shutil
import sys
import time
from pathlib import Path

from aisac_core.context import AppContext
from aisac_core.store.vectors import VectorPoint

from . import cranfield
from .common import REPO_ROOT, isolated_settings, latency_summary
from .quality import evaluate, run_aisac

sys.path.insert(0, str(REPO_ROOT / "tests"))
from pg_cluster import PgCluster, pgvector_bin  # noqa: E402


def main() -> None:
    """Copy, search both, print the figures."""
    src = Path(sys.argv[1])
    col = cranfield.load(
        Path(sys.argv[2]) if len(sys.argv) > 2 else REPO_ROOT.parent / "shared/data/retrieval/cranfield"
    )
    s_edge = isolated_settings(src)
    out = {}
    core = AppContext(s_edge)
    try:
        vs = core.vectors()
        runs, lat = run_aisac(core, col, "hybrid")
        out["edge"] = {"ndcg@10": evaluate(runs, col)["ndcg@10"], "search_latency": latency_summary(lat)}
        ids = [pid for pid, _ in vs.scroll_ids("chunks", keys=[])]
        shard = vs._shard("chunks")
        pts = []
        for i in range(0, len(ids), 500):
            for r in shard.retrieve(ids[i : i + 500], with_payload=True, with_vector=True):
                v = r.vector
                sp = v["bm25"]
                pts.append(
                    VectorPoint(str(r.id), list(v["dense"]), list(sp.indices), list(sp.values), dict(r.payload or {}))
                )
    finally:
        core.close()
    cluster = PgCluster.start(pgvector_bin())
    try:
        db = cluster.create_database()
        dst = src.parent / (src.name + "-pg")
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("vectors"))
        s_pg = isolated_settings(dst).updated(vector_url=db)
        core = AppContext(s_pg)
        try:
            pv = core.vectors()
            t = time.perf_counter()
            for i in range(0, len(pts), 256):
                pv.upsert("chunks", pts[i : i + 256])
            up = time.perf_counter() - t
            runs, lat = run_aisac(core, col, "hybrid")
            out["postgres"] = {
                "ndcg@10": evaluate(runs, col)["ndcg@10"],
                "search_latency": latency_summary(lat),
                "points": len(pts),
                "upsert_points_per_s": round(len(pts) / up, 1),
            }
        finally:
            core.close()
    finally:
        cluster.stop()
    out["delta"] = round(abs(out["postgres"]["ndcg@10"] - out["edge"]["ndcg@10"]), 4)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
