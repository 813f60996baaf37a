"""aisac benchmarks: ``python -m bench`` (``make bench``) prints tables and writes JSON to bench/results/.

Parts (each selectable with ``--only``):

- ``quality``  (:mod:`bench.quality`): Cranfield nDCG@10 / recall@100 of aisac's dense, sparse and hybrid
  search, indexed through aisac's own pipeline, next to a plain ``bm25s`` baseline.
- ``indexing`` (:mod:`bench.indexing`): pages/s and chunks/s on the shared PDFs, full, no-op and
  one-file-changed re-index times.
- ``latency``  (:mod:`bench.latency`): search p50/p95 over >= 10,000 chunks, in-process and over stdio.
- ``startup``  (:mod:`bench.startup`): spawn of ``aisac serve`` to the ``tools/list`` answer.
- ``memory``   (:mod:`bench.memory`): ``memory_recall`` p50/p95 over 10,000 stored turns (in-process) and
  ``memory_add_turn`` throughput (turns/s, embedding included).

Data comes from ``../shared/data`` (relative to the repository root; ``--data`` to change); a part whose
data is absent prints a SKIP line. Every part uses its own temporary store, never the user's.
"""

PARTS = ("quality", "indexing", "latency", "startup", "memory")
