"""Shared fixtures: real stores in temporary folders, the real offline model, real parsed documents.

- ``settings`` / ``core``: a fresh store (SQLite + Qdrant Edge) in a temp dir; the process-wide core
  points at it for the test (so servers built in the test use it).
- ``models_dir``: one assembled offline model folder reused by every test (assembly copies 22 MB).
- ``corpus``: a small corpus of the project's own making (Markdown notes + a generated PDF).
- ``shared_data``: ../shared/data, or the test is skipped when it is absent (a user's fresh clone).
- ``indexed_core``: a session-wide store with ``corpus`` indexed (read-only use!).
- ``pg_server``: one throwaway PostgreSQL cluster for the test session (``initdb`` + ``pg_ctl`` of the installed
  server binaries; skipped with a message where they or the psycopg driver are missing). Test modules marked
  ``both_engines`` run every test that uses ``settings`` twice: on SQLite and on a fresh PostgreSQL database.
- ``pgvector_server``: the same from the ``pgserver`` wheel's PostgreSQL 16 with pgvector (vectors in PostgreSQL).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO / "tests"))

from fixtures_gen import write_corpus  # noqa: E402


def _code_isolation() -> str:
    """On a machine with neither bubblewrap nor user namespaces code runs are refused by default; the functional
    tests of code sessions then opt into isolation ``none`` explicitly (the security tests choose each mode
    themselves and skip those that cannot run, with the reason). Returns the pytest header line."""
    from aisac_core.sessions.isolation import detect_isolation

    if "AISAC_SANDBOX_ISOLATION" in os.environ:
        return f"code isolation: {os.environ['AISAC_SANDBOX_ISOLATION']} (from AISAC_SANDBOX_ISOLATION)"
    mode = detect_isolation("auto")[0]
    if mode == "unavailable":
        os.environ["AISAC_SANDBOX_ISOLATION"] = "none"
        return "code isolation: none (no bubblewrap, no user namespaces here: functional tests opt into none)"
    return f"code isolation: {mode}"


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_ISOLATION_LINE] = _code_isolation()


def pytest_report_header(config: pytest.Config) -> str:
    return config.stash.get(_ISOLATION_LINE, "")


_ISOLATION_LINE = pytest.StashKey[str]()

#: Seconds each test file took in a full run on these 2-core machines (``tests/file_seconds.json``, written by a run
#: with ``AISAC_RECORD_FILE_SECONDS=tests/file_seconds.json``). ``make test`` hands whole files to the two workers
#: (``--dist loadfile --no-loadscope-reorder``) in collection order; collecting the longest files first keeps the
#: run from ending on one long file while the other worker idles (longest-processing-time-first scheduling, Graham
#: 1969). A file missing from the table (a new one) counts one second per test.
FILE_SECONDS = REPO / "tests" / "file_seconds.json"


#: Test files that share a pool's work (:class:`EmbeddingPool`, :class:`ParsePool`), in the order they run: each
#: chain is one xdist work unit (:func:`pytest_xdist_make_scheduler`), so its files run one after the other on one
#: worker, the one that fills the pool first. Run side by side, a pool's users waited on its lock: in a clean-clone
#: run tests/test_extractive.py's setup waited 195 s for the demo's vectors with its worker idle, and after it the
#: other users queued behind each other the same way. In a chain no worker waits on another's pool work, every text is
#: still embedded (every file parsed) once per run, and the other workers run the other files meanwhile.
POOL_CHAINS: dict[str, tuple[str, ...]] = {
    "embedding-pool": (
        "tests/test_demo.py",  # first: the widest user (pdfs/papermage and pdfs/docling), in one subprocess
        "tests/test_extractive.py",
        "tests/test_roles_s2orc.py",
        "tests/test_indexing.py",
    ),
    "parse-pool": (
        "tests/test_documents.py",  # first: it parses every shared file
        "tests/test_chunk_sentences.py",
        "tests/test_pdf_layouts.py",
        "tests/test_pdf_metadata.py",
        "tests/test_pdf_structure.py",
    ),
}
_CHAIN_OF = {f: (name, i) for name, files in POOL_CHAINS.items() for i, f in enumerate(files)}


def _file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _unit_of(path: str) -> str:
    """The xdist work unit of a test file: its pool chain's name, else the file itself."""
    chain = _CHAIN_OF.get(path)
    return chain[0] if chain else path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the collected work units longest first (see :data:`FILE_SECONDS`; a unit is a test file or a pool chain
    of :data:`POOL_CHAINS`, whose files keep the chain's order); tests keep their order within a file, so
    module-scoped fixtures are built once as before."""
    import json

    try:
        seconds: dict[str, float] = json.loads(FILE_SECONDS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        seconds = {}
    counts: dict[str, int] = {}
    for item in items:
        counts[_file_of(item)] = counts.get(_file_of(item), 0) + 1
    weight: dict[str, float] = {}
    for f, n in counts.items():
        weight[_unit_of(f)] = weight.get(_unit_of(f), 0.0) + float(seconds.get(f, n))
    first_seen = {f: i for i, f in reversed(list(enumerate(_file_of(it) for it in items)))}
    unit_seen = {_unit_of(f): i for f, i in sorted(first_seen.items(), key=lambda kv: -kv[1])}

    def key(it: pytest.Item) -> tuple[float, int, int]:
        f = _file_of(it)
        u = _unit_of(f)
        return (-weight[u], unit_seen[u], _CHAIN_OF[f][1] if f in _CHAIN_OF else first_seen[f])

    items.sort(key=key)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201
    """``--dist loadfile`` with the files of a pool chain (:data:`POOL_CHAINS`) in one work unit: xdist's file
    scheduler, whose unit is a file, except for these. Other modes are xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class PoolChainScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit_of(nodeid.split("::", 1)[0])

    return PoolChainScheduling(config, log)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """With ``AISAC_RECORD_FILE_SECONDS=PATH``: write each test file's total seconds (setup + call + teardown of
    every test) to PATH as JSON, for :data:`FILE_SECONDS`."""
    import json

    target = os.environ.get("AISAC_RECORD_FILE_SECONDS")
    if not target:
        return
    totals: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if isinstance(rep, pytest.TestReport):
                f = rep.nodeid.split("::", 1)[0]
                totals[f] = totals.get(f, 0.0) + rep.duration
    ordered = dict(sorted(((f, round(t, 1)) for f, t in totals.items()), key=lambda kv: -kv[1]))
    Path(target).write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")


#: CPU seconds per test file in this process (``AISAC_RECORD_FILE_CPU``): [own, children's]
_FILE_CPU: dict[str, list[float]] = {}


def _cpu_now() -> tuple[float, float]:
    """(user + system seconds of this process, of its children waited for)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ANN201
    """With ``AISAC_RECORD_FILE_CPU=PATH``: sum each test file's CPU seconds (setup + call + teardown), this
    process's and its waited-for subprocesses' (``getrusage``; a daemon that detaches from the test, like the
    store's owner, is not counted). The wall seconds of :data:`FILE_SECONDS` mix in waiting for the other
    workers on a shared machine; CPU seconds show what a change saves."""
    if not os.environ.get("AISAC_RECORD_FILE_CPU"):
        yield
        return
    before = _cpu_now()
    yield
    after = _cpu_now()
    acc = _FILE_CPU.setdefault(_file_of(item), [0.0, 0.0])
    acc[0] += after[0] - before[0]
    acc[1] += after[1] - before[1]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write :data:`_FILE_CPU` to ``$AISAC_RECORD_FILE_CPU.<worker>.json`` (one file per xdist worker)."""
    import json

    target = os.environ.get("AISAC_RECORD_FILE_CPU")
    if not target or not _FILE_CPU:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    rows = {f: {"own_s": round(a, 2), "children_s": round(b, 2)} for f, (a, b) in _FILE_CPU.items()}
    Path(f"{target}.{worker}.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An assembled offline model folder shared by all tests' stores (copied into each data dir)."""
    from aisac_core.rag.embeddings import assemble_offline_minilm

    d = tmp_path_factory.mktemp("models") / "all-MiniLM-L6-v2-int8"
    return assemble_offline_minilm(d)


def unique_corpus(dest: Path, files: int = 150) -> Path:
    """``files`` Markdown documents of distinct text (seeded), so that no parse or embedding cache makes indexing
    them fast: an index job over them runs long enough (seconds) to be cancelled, interrupted or killed mid-way.
    (Copies of one corpus are not enough: the embedding cache turns every copy after the first into cache hits.)"""
    import random

    rng = random.Random(files)
    words = [
        "anode",
        "cathode",
        "lattice",
        "enzyme",
        "protein",
        "sample",
        "thermal",
        "voltage",
        "spectra",
        "kinetic",
        "solvent",
        "membrane",
        "diffusion",
        "catalyst",
        "entropy",
        "photon",
        "isotope",
        "polymer",
        "crystal",
        "plasma",
    ]
    dest.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        paragraphs = [" ".join(f"{rng.choice(words)}{rng.randrange(10**6)}" for _ in range(60)) + "." for _ in range(4)]
        (dest / f"note{i:04d}.md").write_text(f"# Note {i}\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return dest


def make_settings(data_dir: Path, models_dir: Path, **kw):  # noqa: ANN201
    """Settings for a store in ``data_dir`` that reuses the assembled model folder (hard links, no copy)."""
    from aisac_core.settings import Settings

    target = data_dir / "models" / "all-MiniLM-L6-v2-int8"
    if not target.exists():
        shutil.copytree(models_dir, target, copy_function=os.link)
    return Settings(data_dir=data_dir, **kw)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests of a module marked ``both_engines`` that use the ``sql_engine`` fixture (through ``settings``) run once
    per SQL engine."""
    d = metafunc.definition
    if (
        d.get_closest_marker("both_engines")
        and not d.get_closest_marker("sqlite_only")
        and "sql_engine" in metafunc.fixturenames
    ):
        metafunc.parametrize("sql_engine", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture
def sql_engine(request: pytest.FixtureRequest) -> str:
    """``sqlite`` (the default) or ``postgresql`` in modules marked ``both_engines``."""
    return getattr(request, "param", "sqlite")


@pytest.fixture
def sql_url(request: pytest.FixtureRequest, sql_engine: str) -> str | None:
    """None (the store's own SQLite file) or the URL of a fresh database on the session's PostgreSQL."""
    if sql_engine == "sqlite":
        return None
    return request.getfixturevalue("pg_server").create_database()


@pytest.fixture
def settings(tmp_path: Path, models_dir: Path, sql_url: str | None):  # noqa: ANN201
    return make_settings(tmp_path / "store", models_dir, sql_url=sql_url)


def store_env(settings, **extra: str) -> dict[str, str]:  # noqa: ANN001
    """Environment for an ``aisac`` subprocess on the store of ``settings`` (data dir and SQL URL), without the
    caller's other ``AISAC_*`` variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AISAC_")}
    env.update(HF_HUB_OFFLINE="1", AISAC_DATA_DIR=str(settings.data_dir))
    if settings.sql_url:
        env["AISAC_SQL_URL"] = settings.sql_url
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """A PostgreSQL cluster for the whole test session; ``create_database()`` gives the URL of a new empty database."""
    from pg_cluster import PgCluster, PgUnavailable

    try:
        cluster = PgCluster.start()
    except PgUnavailable as exc:
        pytest.skip(str(exc))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def pgvector_server(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """A PostgreSQL 16 cluster with the pgvector extension (the ``pgserver`` wheel's binaries) for the session;
    ``create_database()`` gives a new empty database. Skipped with the reason where pgserver is missing."""
    from pg_cluster import PgCluster, PgUnavailable, pgvector_bin

    try:
        cluster = PgCluster.start(pgvector_bin())
    except PgUnavailable as exc:
        pytest.skip(str(exc))
    yield cluster
    cluster.stop()


@pytest.fixture
def core(settings):  # noqa: ANN001, ANN201
    from aisac_core.context import AppContext

    c = AppContext(settings)
    yield c
    c.close()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder with the project's own test documents (see fixtures_gen.write_corpus)."""
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture
def corpus_copy(tmp_path: Path, corpus: Path) -> Path:
    """A private, editable copy of ``corpus``."""
    dst = tmp_path / "corpus"
    shutil.copytree(corpus, dst)
    return dst


@pytest.fixture(scope="session")
def indexed_core(tmp_path_factory: pytest.TempPathFactory, models_dir: Path, corpus: Path):  # noqa: ANN201
    """A session-wide store with ``corpus`` indexed. Tests must not modify it."""
    from aisac_core.context import AppContext

    c = AppContext(make_settings(tmp_path_factory.mktemp("indexed") / "store", models_dir))
    c.rag.indexer.run([corpus])
    yield c
    c.close()


class EmbeddingPool:
    """Chunk embeddings shared by the tests that index the same shared papers (tests/test_demo.py indexes
    pdfs/papermage and pdfs/docling, tests/test_extractive.py and tests/test_roles_s2orc.py papermage PDFs,
    tests/test_indexing.py's shared-data test pdfs/docling on both SQL engines; on different xdist workers): the rows
    of a store's own ``embedding_cache`` table (:mod:`aisac_core.rag.embedcache`: key sha256(model id + NUL + text)
    -> float32 vector), pooled in one SQLite file. :meth:`use` copies the pool into a new store before it indexes and
    the store's new rows back after; a flock on the pool serialises the users, so a text is embedded once per run
    (the demo holds it for its whole subprocess run). Under ``make test`` the users run one after another on one
    worker (:data:`POOL_CHAINS`), the demo first, so none waits on the lock; it still guards other ways of running
    the suite (``--dist load``, several runs on one ``AISAC_TEST_EMBED_POOL``).

    The vectors are the model's own (the store's cache holds exactly these), so the stores built this way are the
    ones indexing builds without the pool. The pool file's name carries the model's sha256: another model never
    reads it. The pool lives in this run's temporary folder: kept between runs it would outlive a change of the
    embedding code (``AISAC_TEST_EMBED_POOL=DIR`` keeps it in DIR, to measure a file without its embedding work;
    measured on tests/test_extractive.py, 8 papers: 96 CPU s with an empty pool, 38 with a full one; on
    tests/test_demo.py, 15 PDFs: 141.5 and 37.4)."""

    def __init__(self, folder: Path, models_dir: Path) -> None:
        import hashlib

        digest = hashlib.sha256((models_dir / "model.onnx").read_bytes()).hexdigest()[:16]
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"embedding-pool-{digest}.sqlite"
        self.lock = folder / f"embedding-pool-{digest}.lock"

    @contextlib.contextmanager
    def use(self, engine):  # noqa: ANN001, ANN201
        """Seed ``engine``'s ``embedding_cache`` from the pool, run the caller's indexing, then pool the store's
        rows (others wait meanwhile)."""
        import fcntl
        import sqlite3

        from sqlalchemy import insert
        from sqlmodel import Session, select

        from aisac_core.store.tables import EmbeddingCacheEntry

        with open(self.lock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            pool = sqlite3.connect(self.path)
            try:
                pool.execute("create table if not exists pool (key text primary key, model text, dim int, vector blob)")
                with Session(engine) as s:
                    have = set(s.exec(select(EmbeddingCacheEntry.key)).all())
                    rows = [
                        {"key": k, "model": m, "dim": d, "vector": v}
                        for k, m, d, v in pool.execute("select key, model, dim, vector from pool")
                        if k not in have
                    ]
                    if rows:
                        s.execute(insert(EmbeddingCacheEntry), rows)
                        s.commit()
                yield
                with Session(engine) as s:
                    new = [(r.key, r.model, r.dim, r.vector) for r in s.exec(select(EmbeddingCacheEntry))]
                pool.executemany("insert or ignore into pool values (?, ?, ?, ?)", new)
                pool.commit()
            finally:
                pool.close()
                fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def embedding_pool(tmp_path_factory: pytest.TempPathFactory, models_dir: Path) -> EmbeddingPool:
    """The run's :class:`EmbeddingPool` (shared by the xdist workers: their temporary folders' parent)."""
    folder = os.environ.get("AISAC_TEST_EMBED_POOL")
    base = tmp_path_factory.getbasetemp()
    run_dir = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return EmbeddingPool(Path(folder) if folder else run_dir / "embedding-pool", models_dir)


class ParsePool:
    """Parsed shared documents pooled between the test files that parse the same files with the same arguments
    (tests/test_documents.py, test_chunk_sentences.py, test_pdf_layouts.py, test_pdf_metadata.py and
    test_pdf_structure.py parse the papers of ../shared/data, on different xdist workers): the
    :class:`~aisac_core.rag.documents.ParsedDocument` that :func:`~aisac_core.rag.documents.parse_document` returns,
    pickled in this run's temporary folder, so each file is parsed once per run instead of once per test file.

    The key is the file's path and sha256, ``max_tokens`` and the tokenizer's sha256: another file content, budget or
    tokenizer is another entry. A flock per key makes a second caller wait for the first caller's parse instead of
    parsing the same file at the same time (under ``make test`` the users run one after another on one worker,
    :data:`POOL_CHAINS`, so none waits). Each call returns its own unpickled copy (a test may change it); a parse
    that raises is not pooled (every caller raises it). The pool lives in this run's temporary folder only: kept
    between runs it would outlive a change of the parsing code."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._tokenizers: dict[int, tuple[object, str]] = {}

    def _tokenizer_digest(self, tokenizer) -> str:  # noqa: ANN001
        import hashlib

        known = self._tokenizers.get(id(tokenizer))
        if known is None or known[0] is not tokenizer:
            known = (tokenizer, hashlib.sha256(tokenizer.to_str().encode()).hexdigest())
            self._tokenizers[id(tokenizer)] = known
        return known[1]

    def parse(self, path: Path, tokenizer, max_tokens: int = 256):  # noqa: ANN001, ANN201
        """``parse_document(path, tokenizer, max_tokens)``, parsed once per run (see the class)."""
        import fcntl
        import hashlib
        import pickle

        from aisac_core.rag.documents import parse_document

        path = Path(path).resolve()
        content = hashlib.sha256(path.read_bytes()).hexdigest()
        key = hashlib.sha256(
            f"{path}\0{content}\0{max_tokens}\0{self._tokenizer_digest(tokenizer)}".encode()
        ).hexdigest()[:32]
        entry = self.folder / f"{key}.pickle"
        with open(self.folder / f"{key}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if entry.is_file():
                    return pickle.loads(entry.read_bytes())
                doc = parse_document(path, tokenizer, max_tokens=max_tokens)
                part = entry.with_suffix(f".{os.getpid()}.part")
                part.write_bytes(pickle.dumps(doc, protocol=pickle.HIGHEST_PROTOCOL))
                part.replace(entry)
                return doc
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def parse_pool(tmp_path_factory: pytest.TempPathFactory) -> ParsePool:
    """The run's :class:`ParsePool` (shared by the xdist workers: their temporary folders' parent)."""
    base = tmp_path_factory.getbasetemp()
    return ParsePool((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "parse-pool")


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent (fresh clone): shared-data tests skipped")
    return SHARED_DATA.resolve()  # the store keeps resolved paths; ../shared may be a link


@pytest.fixture(scope="session")
def shared_embedder(tmp_path_factory: pytest.TempPathFactory, models_dir: Path):  # noqa: ANN201
    """One loaded default Embedder for the whole session (loading it per store costs 0.5-1.5 s)."""
    from aisac_core.rag.embeddings import Embedder

    e = Embedder(make_settings(tmp_path_factory.mktemp("shared-emb") / "store", models_dir))
    _ = e.dim
    return e


@pytest.fixture
def fast_core(settings, shared_embedder):  # noqa: ANN001, ANN201
    """Like ``core`` (a fresh store; pass it to ``build(app=...)``), but reusing ``shared_embedder``."""
    from aisac_core.context import AppContext

    c = AppContext(settings, embedder=shared_embedder)
    yield c
    c.close()


@contextlib.contextmanager
def http_server(env: dict[str, str], timeout: float = 30.0):  # noqa: ANN201
    """Run ``aisac serve --transport http --no-token`` on a free loopback port (the explicit opt-out of the bearer
    token every HTTP server requires otherwise); yields the MCP URL, stops the server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    aisac = str(Path(sys.executable).parent / "aisac")
    proc = subprocess.Popen(
        [aisac, "serve", "--transport", "http", "--port", str(port), "--no-token"],  # loopback, the tests' own
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Terminate ``proc`` and wait up to ``timeout`` seconds; kill it when it does not stop."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def served_alone(server, app):  # noqa: ANN001, ANN201
    """One aisac server mounted without a namespace (unprefixed tool names), serving ``app`` through a lifespan like
    the suite's (tools read the application context from it)."""
    from contextlib import asynccontextmanager

    from fastmcp import FastMCP

    @asynccontextmanager
    async def lifespan(_server):  # noqa: ANN001, ANN202
        yield {"app": app}

    main = FastMCP(f"{server.name}-alone", lifespan=lifespan)
    main.mount(server)
    return main


#: Debian's chromium, driven by Playwright (no browser download)
CHROMIUM = os.environ.get("AISAC_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture
def chromium() -> str:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip(f"no chromium at {CHROMIUM} (Debian: apt-get install chromium): browser test skipped")
    try:
        import playwright.sync_api  # noqa: F401  (presence check)
    except ImportError:
        pytest.skip("playwright is not installed: browser test skipped")
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")  # type: ignore[return-value]


@contextlib.contextmanager
def chromium_browser(executable: str):  # noqa: ANN201
    """Debian's chromium launched headless through Playwright (sandbox and GPU off, as in a container); yields the
    browser and closes it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()
