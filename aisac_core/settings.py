"""aisac settings: one object, read from the environment (prefix ``AISAC_``), grouped per domain.

Every server and the CLI read the same :class:`Settings`, so one data dir is one store. The store-wide fields sit
on :class:`Settings` itself (``settings.data_dir``); each domain's fields sit in a nested group whose environment
prefix keeps the names users already set:

========== ======================== ===================================================================
group       environment              example
========== ======================== ===================================================================
``rag``     ``AISAC_<NAME>``         ``settings.rag.roots`` <- ``AISAC_ROOTS``
``lit``     ``AISAC_LIT_<NAME>``     ``settings.lit.replay`` <- ``AISAC_LIT_REPLAY``
``roles``   ``AISAC_ROLES_<NAME>``   ``settings.roles.llm`` <- ``AISAC_ROLES_LLM``
``data``    ``AISAC_DATA_<NAME>``    ``settings.data.max_file_mb`` <- ``AISAC_DATA_MAX_FILE_MB``
``sandbox`` ``AISAC_SANDBOX_<NAME>`` ``settings.sandbox.cpu_s`` <- ``AISAC_SANDBOX_CPU_S``
``owner``   ``AISAC_OWNER_<NAME>``   ``settings.owner.idle_seconds`` <- ``AISAC_OWNER_IDLE_SECONDS``
========== ======================== ===================================================================

A setting's *flat name* is its environment name without ``AISAC_``, lower-cased (``lit_replay``, ``roots``): the
constructor takes flat names (``Settings(lit_replay=True, roots=[...])``), :meth:`Settings.updated` returns a copy
with flat names changed, and :meth:`Settings.flat` lists every setting by flat name. Lists and mappings are given as
JSON in the environment, e.g. ``AISAC_ROOTS='["~/papers"]'``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from platformdirs import user_data_dir
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The default dense model: all-MiniLM-L6-v2 as int8 ONNX, assembled offline from two pip packages (README,
#: "Offline models").
DEFAULT_EMBEDDING_MODEL = "offline:all-MiniLM-L6-v2-int8"


class RagSettings(BaseSettings):
    """Indexing and retrieval (environment ``AISAC_<NAME>``).

    - ``embedding_model``: ``offline:all-MiniLM-L6-v2-int8`` (default, no download), a folder with ``model.onnx`` +
      tokenizer files, or any fastembed model name (needs internet once).
    - ``chunk_max_tokens``: chunk size in tokens of the embedding tokenizer (MiniLM reads 256).
    - ``embed_batch_size``: texts per embedding batch.
    - ``roots`` / ``catalog_roots``: registered folders; indexed roots are parsed and embedded, catalog-only roots
      (tables, large outputs) are listed with metadata and not embedded.
    - ``pdf_pipeline``: ``native`` (model-free, default) or ``standard`` (docling's layout model; only when its
      weights are present locally).
    """

    model_config = SettingsConfigDict(env_prefix="AISAC_", extra="ignore")

    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    chunk_max_tokens: int = Field(default=256, ge=32, le=2048)
    #: texts per ONNX run; small batches of length-sorted texts were fastest on 2 cores (chunks of ~180
    #: tokens: 22 chunks/s at 8, 14 at 32, where padding and attention cost grow with the batch)
    embed_batch_size: int = Field(default=8, ge=1, le=1024)
    roots: list[Path] = Field(default_factory=list)
    catalog_roots: list[Path] = Field(default_factory=list)
    pdf_pipeline: Literal["native", "standard"] = "native"

    @field_validator("roots", "catalog_roots", mode="after")
    @classmethod
    def _expand_roots(cls, v: list[Path]) -> list[Path]:
        return [p.expanduser().resolve() for p in v]


class LiteratureSettings(BaseSettings):
    """The literature server (environment ``AISAC_LIT_<NAME>``): service base URLs (tests and mirrors point them
    elsewhere), politeness, cache, replay (docs/literature.md)."""

    model_config = SettingsConfigDict(env_prefix="AISAC_LIT_", extra="ignore")

    arxiv_url: str = "https://export.arxiv.org/api/query"
    arxiv_pdf_url: str = "https://arxiv.org/pdf/{id}"  # {id}: arXiv id with version when known
    pubmed_url: str = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"
    crossref_url: str = "https://api.crossref.org"
    openalex_url: str = "https://api.openalex.org"
    s2_url: str = "https://api.semanticscholar.org/graph/v1"
    mailto: str | None = None  # Crossref/OpenAlex polite pool, NCBI email
    ncbi_api_key_env: str = "NCBI_API_KEY"  # names of environment variables holding the keys
    s2_api_key_env: str = "S2_API_KEY"
    #: arXiv API terms of use: one request every 3 seconds, one connection (https://info.arxiv.org/help/api/tou.html)
    arxiv_interval_s: float = Field(default=3.0, ge=0)
    timeout_s: float = Field(default=20.0, gt=0)
    retries: int = Field(default=3, ge=1, le=10)  # attempts per request (5xx, network errors)
    backoff_s: float = Field(default=1.0, ge=0)  # first back-off; doubles per attempt
    max_retry_wait_s: float = Field(default=30.0, ge=0)  # a longer Retry-After is reported, not waited
    cache_ttl_s: float = Field(default=7 * 86400.0, ge=0)  # 0 = no cache
    replay: bool = False  # answer only from the cache, never from the network
    max_pdf_mb: float = Field(default=100.0, gt=0)
    #: hosts, IP addresses or CIDR networks (``10.1.2.0/24``) that outbound fetches may reach although they are
    #: loopback, private or link-local - for a service mirrored on the LAN; everything else private is refused
    allow_networks: list[str] = Field(default_factory=list)


class RolesSettings(BaseSettings):
    """The roles (environment ``AISAC_ROLES_<NAME>``): LLM backend of the router/planner/evaluator, evaluator
    thresholds, plan limits, prompt overlay folder (docs/roles.md)."""

    model_config = SettingsConfigDict(env_prefix="AISAC_ROLES_", extra="ignore")

    llm: Literal["auto", "none", "openai", "sampling", "replay"] = "auto"  # auto: openai if a base URL is set
    llm_base_url: str | None = None  # OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1
    llm_model: str = "gpt-4o-mini"
    llm_api_key_env: str = "OPENAI_API_KEY"  # name of the environment variable holding the key
    llm_timeout_s: float = Field(default=60.0, gt=0)
    llm_seed: int = 7
    mode: Literal["lite", "standard", "strict"] = "standard"
    max_mean_severity: float = Field(default=0.4, ge=0, le=1)  # the evaluator passes at mean <= this ...
    max_severity: float = Field(default=0.8, ge=0, le=1)  # ... and max <= this
    max_plan_steps: int = Field(default=8, ge=1, le=50)
    replan_limit: int = Field(default=2, ge=0, le=5)
    prompt_dir: Path | None = None  # overlay: a file here replaces the packaged prompt of the same name


class DataSettings(BaseSettings):
    """The DataFrame registry (environment ``AISAC_DATA_<NAME>``; docs/data.md)."""

    model_config = SettingsConfigDict(env_prefix="AISAC_DATA_", extra="ignore")

    max_file_mb: float = Field(default=1024.0, gt=0)  # largest file data_load reads
    #: Office files (XLSX/DOCX/PPTX are ZIP archives) are refused before parsing when their members unpack to
    #: more than this, or to more than ``max_unpack_ratio`` times their packed size above 16 MB (a zip bomb);
    #: applies to data_load and to indexing
    max_unpacked_mb: float = Field(default=512.0, gt=0)
    max_unpack_ratio: float = Field(default=100.0, gt=1)


class SandboxSettings(BaseSettings):
    """Sandboxed code sessions (environment ``AISAC_SANDBOX_<NAME>``; docs/data.md)."""

    model_config = SettingsConfigDict(env_prefix="AISAC_SANDBOX_", extra="ignore")

    dir: Path | None = None  # session folders; default <data_dir>/sessions
    isolation: Literal["auto", "bwrap", "unshare", "none"] = "auto"  # OS isolation of the workers
    allow_imports: list[str] = Field(default_factory=list)  # added to the built-in import allow-list
    cpu_s: float = Field(default=60.0, gt=0)  # CPU seconds per code_run
    session_cpu_s: int = Field(default=3600, ge=1)  # CPU seconds per worker life (hard RLIMIT_CPU)
    memory_mb: int = Field(default=2048, ge=256)  # address space per worker (RLIMIT_AS)
    file_mb: int = Field(default=256, ge=1)  # largest file a worker may write (RLIMIT_FSIZE)
    timeout_s: float = Field(default=300.0, gt=0)  # default wall time of one code_run (then killed)
    job_threshold_s: float = Field(default=10.0, ge=0)  # longer runs return a job id
    output_chars: int = Field(default=100_000, ge=1000)  # kept per stream (stdout, stderr)
    max_sessions: int = Field(default=8, ge=1)  # live workers at once
    disk_mb: int = Field(default=1024, ge=16)  # bytes a session's folder may hold (checked after every run)
    figure_mb: float = Field(default=8.0, gt=0)  # largest PNG figure returned from one run
    reply_mb: float = Field(default=32.0, gt=0)  # largest reply a worker may send (figures included)
    seed: int = 0  # random.seed / numpy.random.seed of each session


class OwnerSettings(BaseSettings):
    """The per-store owner daemon that several hosts share (environment ``AISAC_OWNER_<NAME>``;
    docs/processes.md)."""

    model_config = SettingsConfigDict(env_prefix="AISAC_OWNER_", extra="ignore")

    mode: bool = True  # `aisac serve` proxies to the store's owner daemon (False: open the store in-process)
    idle_seconds: float = Field(default=1800.0, ge=0)  # the daemon exits after this long without requests (0: never)
    start_timeout_s: float = Field(default=120.0, gt=0)  # how long a starter waits for the daemon to listen


#: group attribute -> its settings class; a field's flat name is the group's environment prefix without
#: ``AISAC_`` (lower-cased) + the field name
GROUPS: dict[str, type[BaseSettings]] = {"rag": RagSettings, "lit": LiteratureSettings, "roles": RolesSettings,
                                         "data": DataSettings, "sandbox": SandboxSettings, "owner": OwnerSettings}


def _flat_prefix(cls: type[BaseSettings]) -> str:
    return str(cls.model_config.get("env_prefix", ""))[len("AISAC_"):].lower()


#: flat name -> (group, field) for every grouped setting
FLAT_NAMES: dict[str, tuple[str, str]] = {_flat_prefix(cls) + f: (g, f) for g, cls in GROUPS.items()
                                          for f in cls.model_fields}


class Settings(BaseSettings):
    """Configuration of one aisac store and its servers (see the module docstring for the groups).

    Store-wide fields (environment variable = ``AISAC_`` + upper-case name):

    - ``data_dir``: folder of the store (SQLite file, vector folders, assembled models). Default: the platform's
      user data dir (``~/.local/share/aisac`` on Linux).
    - ``sql_url``: SQLAlchemy URL of the relational store; default ``sqlite:///<data_dir>/aisac.db``.
    - ``vector_backend``: ``edge`` (Qdrant Edge, embedded, default) or ``qdrant`` (qdrant-client; ``qdrant_url``
      names a server, else qdrant-client's local mode under ``<data_dir>/qdrant``).
    - ``models_root``: folder of the assembled models when it is not ``<data_dir>/models`` (a project's store under
      ``<data_dir>/projects/<id>`` shares the machine's models).
    - ``warm``: load models and open the vector store in the background when a server starts.
    - ``run_idle_seconds``: provenance run window for callers that bring no run id.
    - ``http_token`` / ``max_request_bytes``: bearer token of ``serve --transport http`` (required off loopback;
      else generated) and the largest HTTP request body accepted (413 above).

    Raises (construction): ``pydantic.ValidationError`` for a value out of range or of the wrong type, naming the
    setting; ``ValueError`` for an unknown grouped setting passed to :meth:`updated`.
    """

    model_config = SettingsConfigDict(env_prefix="AISAC_", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: Path(user_data_dir("aisac")))
    sql_url: str | None = None
    vector_backend: Literal["edge", "qdrant"] = "edge"
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    models_root: Path | None = None
    #: load the models and open the vector store in the background when a server starts (AISAC_WARM=0: on
    #: the first call that needs them instead)
    warm: bool = True
    #: calls without a client run id join the current run until this many seconds of silence.
    run_idle_seconds: float = 1800.0
    http_token: str | None = None
    max_request_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)

    rag: RagSettings = Field(default_factory=RagSettings)
    lit: LiteratureSettings = Field(default_factory=LiteratureSettings)
    roles: RolesSettings = Field(default_factory=RolesSettings)
    data: DataSettings = Field(default_factory=DataSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    owner: OwnerSettings = Field(default_factory=OwnerSettings)

    @model_validator(mode="before")
    @classmethod
    def _groups_from_flat_names(cls, values: Any) -> Any:
        """Route flat names (``lit_replay=True``) into their groups; each group reads the environment for the rest."""
        if not isinstance(values, dict):
            return values
        values = dict(values)
        given: dict[str, dict[str, Any]] = {g: {} for g in GROUPS}
        for key in [k for k in values if k in FLAT_NAMES]:
            g, f = FLAT_NAMES[key]
            given[g][f] = values.pop(key)
        for g, group_cls in GROUPS.items():
            cur = values.get(g)
            if isinstance(cur, group_cls) and not given[g]:
                continue
            base = cur.model_dump() if isinstance(cur, group_cls) else dict(cur) if isinstance(cur, dict) else {}
            values[g] = group_cls(**{**base, **given[g]})
        return values

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand_data_dir(cls, v: Path) -> Path:
        return v.expanduser().resolve()

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

    @classmethod
    def setting_names(cls) -> list[str]:
        """Every setting's flat name (store-wide fields, then the grouped ones)."""
        return [f for f in cls.model_fields if f not in GROUPS] + list(FLAT_NAMES)

    def get(self, name: str) -> Any:
        """The value of the setting with flat name ``name``. Raises ``KeyError`` for an unknown name."""
        if name in FLAT_NAMES:
            g, f = FLAT_NAMES[name]
            return getattr(getattr(self, g), f)
        if name in type(self).model_fields and name not in GROUPS:
            return getattr(self, name)
        raise KeyError(name)

    def flat(self) -> dict[str, Any]:
        """Every setting by flat name (``{"data_dir": ..., "roots": [...], "lit_replay": False, ...}``)."""
        return {name: self.get(name) for name in self.setting_names()}

    def updated(self, **changes: Any) -> "Settings":
        """A copy with the settings named by flat name changed (values are taken as given, not re-validated, like
        ``model_copy``). Raises ``ValueError`` naming an unknown setting."""
        top: dict[str, Any] = {}
        groups: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            if name in FLAT_NAMES:
                g, f = FLAT_NAMES[name]
                groups.setdefault(g, {})[f] = value
            elif name in type(self).model_fields and name not in GROUPS:
                top[name] = value
            else:
                raise ValueError(f"unknown setting {name!r}; known: {', '.join(self.setting_names())}")
        top.update({g: getattr(self, g).model_copy(update=u) for g, u in groups.items()})
        return self.model_copy(update=top)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings of the environment, read once per process."""
    return Settings()
