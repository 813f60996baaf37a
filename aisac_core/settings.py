"""aisac settings: one object, read from the environment (prefix ``AISAC_``).

Every server and the CLI read the same :class:`Settings`, so one data dir is one store.
Lists and mappings are given as JSON in the environment, e.g.
``AISAC_ROOTS='["~/papers"]'``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from platformdirs import user_data_dir
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The default dense model: all-MiniLM-L6-v2 as int8 ONNX, assembled offline from two pip packages (README "Offline models").
DEFAULT_EMBEDDING_MODEL = "offline:all-MiniLM-L6-v2-int8"


class Settings(BaseSettings):
    """Configuration of one aisac store and its servers.

    Fields (environment variable = ``AISAC_`` + upper-case name):

    - ``data_dir``: folder of the store (SQLite file, vector folders, assembled models).
      Default: the platform's user data dir (``~/.local/share/aisac`` on Linux).
    - ``sql_url``: SQLAlchemy URL of the relational store; default ``sqlite:///<data_dir>/aisac.db``.
    - ``vector_backend``: ``edge`` (Qdrant Edge, embedded, default) or ``qdrant`` (qdrant-client;
      ``qdrant_url`` names a server, else qdrant-client's local mode under ``<data_dir>/qdrant``).
    - ``embedding_model``: ``offline:all-MiniLM-L6-v2-int8`` (default, no download), a folder with
      ``model.onnx`` + tokenizer files, or any fastembed model name (needs internet once).
    - ``chunk_max_tokens``: chunk size in tokens of the embedding tokenizer (MiniLM reads 256).
    - ``roots`` / ``catalog_roots``: registered folders; indexed roots are parsed and embedded,
      catalog-only roots (tables, large outputs) are listed with metadata and not embedded.
    - ``embed_batch_size``: texts per embedding batch.
    - ``pdf_pipeline``: ``native`` (model-free, default) or ``standard`` (docling's layout model;
      only when its weights are present locally).
    - ``warm``: load models and open the vector store in the background when a server starts.
    - ``run_idle_seconds``: provenance run window for callers that bring no run id.
    - ``lit_*``: the literature server: service base URLs, mailto, API key variable names, arXiv
      interval, time-outs and retries, cache TTL, replay mode, PDF size limit (docs/literature.md).
    - ``roles_*``: the roles: LLM backend (auto/none/openai/sampling/replay), endpoint, model, key
      variable, time-out, seed; evaluator mode and pass thresholds (mean <= 0.4, max <= 0.8); plan step limit;
      re-plan limit; prompt overlay folder (docs/roles.md).
    """

    model_config = SettingsConfigDict(env_prefix="AISAC_", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: Path(user_data_dir("aisac")))
    sql_url: str | None = None
    vector_backend: Literal["edge", "qdrant"] = "edge"
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    chunk_max_tokens: int = Field(default=256, ge=32, le=2048)
    #: texts per ONNX run; small batches of length-sorted texts were fastest on 2 cores (chunks of ~180
    #: tokens: 22 chunks/s at 8, 14 at 32, where padding and attention cost grow with the batch)
    embed_batch_size: int = Field(default=8, ge=1, le=1024)
    roots: list[Path] = Field(default_factory=list)
    catalog_roots: list[Path] = Field(default_factory=list)
    pdf_pipeline: Literal["native", "standard"] = "native"
    #: load the models and open the vector store in the background when a server starts (AISAC_WARM=0: on
    #: the first call that needs them instead)
    warm: bool = True
    #: calls without a client run id join the current run until this many seconds of silence.
    run_idle_seconds: float = 1800.0
    # several hosts on one store: one owner process per store (docs/processes.md), HTTP token and request size limit
    owner_mode: bool = True  # `aisac serve` proxies to the store's owner daemon (False: open the store in-process)
    owner_idle_seconds: float = Field(default=1800.0, ge=0)  # the daemon exits after this long without requests (0: never)
    owner_start_timeout_s: float = Field(default=120.0, gt=0)  # how long a starter waits for the daemon to listen
    http_token: str | None = None  # bearer token of `serve --transport http` (required off loopback; else generated)
    max_request_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)  # largest HTTP request body accepted (413 above)
    #: folder of the assembled models when it is not <data_dir>/models (a project's store under
    #: <data_dir>/projects/<id> shares the machine's models)
    models_root: Path | None = None
    # roles: LLM backend of the router/planner/evaluator, evaluator thresholds, plan limits, prompt overlay
    roles_llm: Literal["auto", "none", "openai", "sampling", "replay"] = "auto"  # auto: openai if a base URL is set
    roles_llm_base_url: str | None = None  # OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1
    roles_llm_model: str = "gpt-4o-mini"
    roles_llm_api_key_env: str = "OPENAI_API_KEY"  # name of the environment variable holding the key
    roles_llm_timeout_s: float = Field(default=60.0, gt=0)
    roles_llm_seed: int = 7
    roles_mode: Literal["lite", "standard", "strict"] = "standard"
    roles_max_mean_severity: float = Field(default=0.4, ge=0, le=1)  # evaluator passes at mean <= this ...
    roles_max_severity: float = Field(default=0.8, ge=0, le=1)  # ... and max <= this
    roles_max_plan_steps: int = Field(default=8, ge=1, le=50)
    roles_replan_limit: int = Field(default=2, ge=0, le=5)
    roles_prompt_dir: Path | None = None  # overlay: a file here replaces the packaged prompt of the same name
    # literature: base URLs (tests and mirrors point them elsewhere), politeness, cache, replay
    lit_arxiv_url: str = "https://export.arxiv.org/api/query"
    lit_arxiv_pdf_url: str = "https://arxiv.org/pdf/{id}"  # {id}: arXiv id with version when known
    lit_pubmed_url: str = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"
    lit_crossref_url: str = "https://api.crossref.org"
    lit_openalex_url: str = "https://api.openalex.org"
    lit_s2_url: str = "https://api.semanticscholar.org/graph/v1"
    lit_mailto: str | None = None  # Crossref/OpenAlex polite pool, NCBI email
    lit_ncbi_api_key_env: str = "NCBI_API_KEY"  # names of environment variables holding the keys
    lit_s2_api_key_env: str = "S2_API_KEY"
    lit_arxiv_interval_s: float = Field(default=3.0, ge=0)  # arXiv: one request per 3 s, one connection
    lit_timeout_s: float = Field(default=20.0, gt=0)
    lit_retries: int = Field(default=3, ge=1, le=10)  # attempts per request (5xx, network errors)
    lit_backoff_s: float = Field(default=1.0, ge=0)  # first back-off; doubles per attempt
    lit_max_retry_wait_s: float = Field(default=30.0, ge=0)  # a longer Retry-After is reported, not waited
    lit_cache_ttl_s: float = Field(default=7 * 86400.0, ge=0)  # 0 = no cache
    lit_replay: bool = False  # answer only from the cache, never from the network
    lit_max_pdf_mb: float = Field(default=100.0, gt=0)
    # data: DataFrame registry and sandboxed code sessions (docs/data.md)
    data_max_file_mb: float = Field(default=1024.0, gt=0)  # largest file data_load reads
    sandbox_dir: Path | None = None  # session folders; default <data_dir>/sessions
    sandbox_isolation: Literal["auto", "bwrap", "unshare", "none"] = "auto"  # OS isolation of the workers
    sandbox_allow_imports: list[str] = Field(default_factory=list)  # added to the built-in import allow-list
    sandbox_cpu_s: float = Field(default=60.0, gt=0)  # CPU seconds per code_run
    sandbox_session_cpu_s: int = Field(default=3600, ge=1)  # CPU seconds per worker life (hard RLIMIT_CPU)
    sandbox_memory_mb: int = Field(default=2048, ge=256)  # address space per worker (RLIMIT_AS)
    sandbox_file_mb: int = Field(default=256, ge=1)  # largest file a worker may write (RLIMIT_FSIZE)
    sandbox_timeout_s: float = Field(default=300.0, gt=0)  # default wall time of one code_run (then killed)
    sandbox_job_threshold_s: float = Field(default=10.0, ge=0)  # longer runs return a job id
    sandbox_output_chars: int = Field(default=100_000, ge=1000)  # kept per stream (stdout, stderr)
    sandbox_max_sessions: int = Field(default=8, ge=1)  # live workers at once
    sandbox_seed: int = 0  # random.seed / numpy.random.seed of each session

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand_data_dir(cls, v: Path) -> Path:
        return v.expanduser().resolve()

    @field_validator("roots", "catalog_roots", mode="after")
    @classmethod
    def _expand_roots(cls, v: list[Path]) -> list[Path]:
        return [p.expanduser().resolve() for p in v]

    @property
    def resolved_sql_url(self) -> str:
        """The SQL URL in force: ``sql_url`` or the SQLite file in ``data_dir``."""
        return self.sql_url or f"sqlite:///{self.data_dir / 'aisac.db'}"

    @property
    def vectors_dir(self) -> Path:
        """Folder of the embedded vector store (one sub-folder per collection)."""
        return self.data_dir / ("vectors" if self.vector_backend == "edge" else "qdrant")

    @property
    def models_dir(self) -> Path:
        """Folder where offline models are assembled (``models_root`` when set)."""
        return self.models_root or self.data_dir / "models"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
