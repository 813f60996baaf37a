"""aisac benchmarks: ``python -m bench`` (``make bench``) prints tables and writes JSON to bench/results/.

Parts (each selectable with ``--only``):

- ``quality``  (:mod:`bench.quality`): Cranfield nDCG@10 / recall@100 of aisac's dense, sparse and hybrid
  search, indexed through aisac's own pipeline, next to a plain ``bm25s`` baseline.
- ``pdf``      (:mod:`bench.pdf`): PDF parse time per page (docling + aisac's reconstruction) and section
  detection precision/recall on the shared PDFs.
- ``headers``  (:mod:`bench.headers`): the paper-header model (title exact match, author-name F1, ECE and
  reliability tables) on the held-out GROBID pairs, or on any folder of pairs (``--pairs DIR``).
- ``indexing`` (:mod:`bench.indexing`): pages/s and chunks/s on the shared PDFs, full, no-op and
  one-file-changed re-index times.
- ``latency``  (:mod:`bench.latency`): search p50/p95 over >= 10,000 chunks, in-process and over stdio.
- ``startup``  (:mod:`bench.startup`): spawn of ``aisac serve`` to the ``tools/list`` answer.
- ``memory_conv`` (:mod:`bench.memory_conv`): evidence recall@20 turns by question type on synthetic LoCoMo-shaped
  conversations (:mod:`bench.convdata`) against bm25s and MiniLM alone, add_turn CPU and recall latency.
- ``memory``   (:mod:`bench.memory`): ``memory_recall`` p50/p95 over 10,000 stored turns (in-process) and
  ``memory_add_turn`` throughput (turns/s, embedding included).
- ``trace``    (:mod:`bench.trace`): provenance middleware overhead per tool call, ``trace_get_run`` of a
  1,000-event run.
- ``literature`` (:mod:`bench.literature`): ``lit_search`` latency over a local replay server (HTTP vs cache),
  merge throughput, and the smallest gap between arXiv requests under 5 concurrent calls (target >= 3 s).
- ``data``     (:mod:`bench.data`): ``data_code_run`` warm round trip (target p50 <= 50 ms), ``data_load`` +
  ``data_preview`` of the 48,000-row Parquet, idle session worker RSS.
- ``roles``    (:mod:`bench.roles`): the headless graph without a model (``aisac ask``), per role step, plan
  validation, the evidence gate.
- ``projects`` (:mod:`bench.projects`): ``aisac init`` and the bootstrap per template; spawn of
  ``aisac serve --project`` to ``tools/list`` next to plain ``aisac serve``.

- ``engines``  (:mod:`bench.engines`): SQLite and PostgreSQL side by side: ``memory_add_turn`` p50, trace
  middleware overhead, ``trace_get_run`` of 1,000 events, jobs claimed per second by two replicas; the vector
  backends (Qdrant Edge, PostgreSQL + pgvector) on Cranfield; 8 clients on one process and on two replicas sharing
  one PostgreSQL with pgvector; a PostgreSQL restart during 60 s of load (trace gap, :mod:`bench.replicas`).
- ``pageimage`` (:mod:`bench.pageimage`): a cited passage's PDF page rendered with its highlight (first view and
  cached), the dashboard's evidence cards.
- ``owner``    (:mod:`bench.owner`): what sharing a store costs: proxied vs in-process call latency, daemon
  cold start (issue 9).
- ``sheets``   (:mod:`bench.sheets`): load time and peak memory per shared workbook, and the extent and merge bombs
  of issue 29 (targets: <= 2 s and 200 MB each).
- ``load``     (:mod:`bench.load`): 8 MCP clients over streamable HTTP (loopback, bounded) against one server,
  mixed search / memory add / recall / trace list: calls/s, p50/p95 per tool, server CPU per call.
- ``tools``    (:mod:`bench.tools`): what the suite costs a host's context: ``tools/list`` bytes and tokens per tool
  profile and server (before / now), the composed instructions, result sizes of rag_search, memory_recall,
  trace_get_run.

- ``answers``  (:mod:`bench.answers`): the answers dev set (bench/data/answers_dev.json) through ``aisac ask``
  without a model: share of answers stating the fact, support precision, false "supported", time per question.

- ``cell_types`` (:mod:`bench.cell_types`): the learned line classifier of table structure on annotated tables
  (``--data DIR``: any folder in the shared ``cell_types`` format): line accuracy, macro F1 per class, tables
  right, the sheet confidence's ECE and reliability table.
- ``pdf_tables`` (:mod:`bench.pdf_tables`): tables read out of PDFs (:mod:`aisac_core.rag.pdftables`) on the ICDAR
  2013 Table Competition set (``--data DIR``: any folder in its format): region P/R/F1 and the competition's
  adjacency-relation F1 per document and pooled, held-out and development documents apart, beside published figures.
- ``support``  (:mod:`bench.support`): the learned support judge on SciFact claims with their cited abstracts
  (held-out part of the shared claims, or ``--claims FILE --corpus FILE``): rationale selection, sentence- and
  abstract-level F1 beside VeriSci's, "supported" precision, ECE, no-evidence abstention, ms per citation.

- ``text``     (:mod:`bench.text`): text as printed (issue 42): CER of the stored PDF text against the shared
  Markdown ground truth before / after, spacing accents left, line-end hyphen decisions on a hand-checked sample.

- ``failing_start`` (:mod:`bench.failing_start`): 20 first starts of ``aisac serve`` (stdio) on a store whose SQL
  file is damaged, under two busy loops: each must answer the first tool call with a clear error within 30 s.

- ``cost`` (:mod:`bench.cost`): issue 44's cost figures in one run: index CPU against mcp-server-qdrant (from its
  own virtualenv, ``--peer-python``), query p50 at 10k chunks on the embedded store, PostgreSQL hybrid CPU / Edge.

Data comes from ``../shared/data`` (relative to the repository root; ``--data`` to change); a part whose
data is absent prints a SKIP line. Every part uses its own temporary store, never the user's.
"""

PARTS = (
    "quality",
    "indexing",
    "latency",
    "startup",
    "memory",
    "memory_conv",
    "trace",
    "literature",
    "data",
    "roles",
    "projects",
    "pdf",
    "headers",
    "owner",
    "engines",
    "pageimage",
    "tools",
    "sheets",
    "cell_types",
    "pdf_tables",
    "load",
    "answers",
    "support",
    "failing_start",
    "text",
    "cost",
)
