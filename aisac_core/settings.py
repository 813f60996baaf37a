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
with flat names changed, and :meth:`Settings.flat` lists every setting by flat name.

Sources, highest priority first: constructor arguments, the environment, the store's settings file
``<data_dir>/aisac.toml`` (flat names, written by ``aisac config set``; see :func:`read_settings_file`), defaults.
The data dir itself comes from the constructor, ``AISAC_DATA_DIR`` or the default, never from the file.

List settings accept a JSON list (``AISAC_ROOTS='["~/papers", "~/notes"]'``), and also plain text: the path lists
(``roots``, ``catalog_roots``) one path or paths joined by ``os.pathsep`` (``~/papers:~/notes``), the others
comma-separated values. :func:`aisac_core.settings_messages.settings_errors` turns a ``ValidationError`` into one line per bad setting, naming
the variable, the value and the accepted form. :func:`behaviour_settings` lists the settings that change what the
tools do, and their digest (the owner daemon records them, see :mod:`aisac_core.owner`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from platformdirs import user_data_dir
from pydantic import Field, TypeAdapter, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from aisac_core.tool_profiles import check_value

#: the store's settings file, in the data dir
SETTINGS_FILE = "aisac.toml"


def _text_list(v: Any, sep: str) -> Any:
    """A list setting given as text: a JSON list (``[...]``), else values split on ``sep`` (empty: ``[]``).
    Raises ValueError for text starting with ``[`` that is not a JSON list."""
    if not isinstance(v, str):
        return v
    text = v.strip()
    if text.startswith("["):
        try:
            got = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON list ({exc.msg} at character {exc.pos})") from exc
        if not isinstance(got, list):
            raise ValueError("not a JSON list")
        return got
    return [p.strip() for p in text.split(sep) if p.strip()]


#: a list of paths read from text: one path, paths joined by os.pathsep, or a JSON list
PathList = Annotated[list[Path], NoDecode]
#: a list of strings read from text: comma-separated values or a JSON list
TextList = Annotated[list[str], NoDecode]

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
    - ``ocr``: ``auto`` (default: PDF pages without a usable text layer are read by Tesseract when it is installed)
      or ``off`` (scanned PDFs are refused); ``ocr_dpi`` render resolution; ``ocr_max_pages`` and
      ``ocr_time_limit_s`` bound the OCR of one document; ``ocr_language`` Tesseract's language(s), ``eng`` or
      ``eng+deu`` (docs/rag.md, "Scanned PDFs (OCR)").
    """

    model_config = SettingsConfigDict(env_prefix="AISAC_", extra="ignore")

    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    chunk_max_tokens: int = Field(default=256, ge=32, le=2048)
    #: texts per ONNX run; small batches of length-sorted texts were fastest on 2 cores (chunks of ~180
    #: tokens: 22 chunks/s at 8, 14 at 32, where padding and attention cost grow with the batch)
    embed_batch_size: int = Field(default=8, ge=1, le=1024)
    roots: PathList = Field(default_factory=list)
    catalog_roots: PathList = Field(default_factory=list)
    pdf_pipeline: Literal["native", "standard"] = "native"
    ocr: Literal["auto", "off"] = "auto"
    #: 300 dpi: a 200-dpi scan rendered at 300 (1.5x) before Tesseract reads its 10-pt body text at an x-height of
    #: ~19 px instead of ~12 (Tesseract is most accurate at 20-30 px): on the 16 scanned pages of bench/ocr.py word
    #: recall 0.973 -> 0.985, CER 0.018 -> 0.012, for about a fifth more Tesseract CPU (docs/rag.md, "Scanned PDFs (OCR)")
    ocr_dpi: int = Field(default=300, ge=100, le=400)
    ocr_max_pages: int = Field(default=200, ge=1, le=10_000)
    ocr_time_limit_s: float = Field(default=900.0, gt=0, le=86_400)
    ocr_language: str = Field(default="eng", pattern=r"^[A-Za-z_]{3,20}(\+[A-Za-z_]{3,20}){0,4}$")

    @field_validator("roots", "catalog_roots", mode="before")
    @classmethod
    def _roots_from_text(cls, v: Any) -> Any:
        return _text_list(v, os.pathsep)

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
    #: overall deadlines, whatever the server does (``timeout_s`` bounds each read, so a server sending one byte
    #: every few seconds would otherwise hold a call for ever): one API request with its retries, one PDF download
    request_deadline_s: float = Field(default=90.0, gt=0)
    download_deadline_s: float = Field(default=300.0, gt=0)
    #: hosts, IP addresses or CIDR networks (``10.1.2.0/24``) that outbound fetches may reach although they are
    #: loopback, private or link-local - for a service mirrored on the LAN; everything else private is refused
    allow_networks: TextList = Field(default_factory=list)
    #: OPTIMADE providers ``lit_materials`` may ask, by name -> unversioned base URL (``<base>/v1/structures`` is
    #: queried); JSON in the environment, e.g. ``AISAC_LIT_OPTIMADE_PROVIDERS='{"oqmd": "https://oqmd.org/optimade"}'``.
    #: Defaults: the Alexandria, OQMD and Materials Project implementations listed by providers.optimade.org
    optimade_providers: dict[str, str] = Field(
        default_factory=lambda: {
            "alexandria": "https://alexandria.icams.rub.de/pbe",
            "oqmd": "https://oqmd.org/optimade",
            "mp": "https://optimade.materialsproject.org",
        }
    )
    #: the provider asked when a call names none (a key of ``optimade_providers``)
    optimade_provider: str = "alexandria"

    @field_validator("allow_networks", mode="before")
    @classmethod
    def _list_from_text(cls, v: Any) -> Any:
        return _text_list(v, ",")


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
    #: one workbook sheet: most cells read (in the file, and in its grid with long empty runs cut) and most cells
    #: covered by merged ranges; a sheet past either is refused with an error naming the setting, the other sheets
    #: still load (aisac_core.data.sheetgrid)
    max_sheet_cells: int = Field(default=2_000_000, gt=0)
    max_merged_cells: int = Field(default=200_000, gt=0)


class SandboxSettings(BaseSettings):
    """Sandboxed code sessions (environment ``AISAC_SANDBOX_<NAME>``; docs/data.md)."""

    model_config = SettingsConfigDict(env_prefix="AISAC_SANDBOX_", extra="ignore")

    dir: Path | None = None  # session folders; default <data_dir>/sessions
    isolation: Literal["auto", "bwrap", "unshare", "none"] = "auto"  # OS isolation of the workers
    allow_imports: TextList = Field(default_factory=list)  # added to the built-in import allow-list
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

    @field_validator("allow_imports", mode="before")
    @classmethod
    def _list_from_text(cls, v: Any) -> Any:
        return _text_list(v, ",")


class OwnerSettings(BaseSettings):
    """The per-store owner daemon that several hosts share (environment ``AISAC_OWNER_<NAME>``;
    docs/processes.md)."""

    model_config = SettingsConfigDict(env_prefix="AISAC_OWNER_", extra="ignore")

    mode: bool = True  # `aisac serve` proxies to the store's owner daemon (False: open the store in-process)
    idle_seconds: float = Field(default=1800.0, ge=0)  # the daemon exits after this long without requests (0: never)
    start_timeout_s: float = Field(default=120.0, gt=0)  # how long a starter waits for the daemon to listen
    #: an owner started with other behaviour settings than a new host's is restarted for that host only when it
    #: has been idle (no request, no job pending) this long; else the host gets OwnerSettingsDriftError
    restart_idle_s: float = Field(default=10.0, ge=0)


#: group attribute -> its settings class; a field's flat name is the group's environment prefix without
#: ``AISAC_`` (lower-cased) + the field name
GROUPS: dict[str, type[BaseSettings]] = {
    "rag": RagSettings,
    "lit": LiteratureSettings,
    "roles": RolesSettings,
    "data": DataSettings,
    "sandbox": SandboxSettings,
    "owner": OwnerSettings,
}


def _flat_prefix(cls: type[BaseSettings]) -> str:
    return str(cls.model_config.get("env_prefix", ""))[len("AISAC_") :].lower()


#: flat name -> (group, field) for every grouped setting
FLAT_NAMES: dict[str, tuple[str, str]] = {
    _flat_prefix(cls) + f: (g, f) for g, cls in GROUPS.items() for f in cls.model_fields
}


def _env_name(flat: str) -> str:
    """The environment variable of a flat setting name (``lit_replay`` -> ``AISAC_LIT_REPLAY``)."""
    return "AISAC_" + flat.upper()


def _init_error(e: dict[str, Any]) -> InitErrorDetails:
    """A collected validation error as ``ValidationError.from_exception_data`` takes it (``ctx`` only when set)."""
    out = InitErrorDetails(type=e["type"], loc=e["loc"], input=e.get("input"))
    if e.get("ctx"):
        out["ctx"] = e["ctx"]
    return out


class Settings(BaseSettings):
    """Configuration of one aisac store and its servers (see the module docstring for the groups).

    Store-wide fields (environment variable = ``AISAC_`` + upper-case name):

    - ``data_dir``: folder of the store (SQLite file, vector folders, assembled models). Default: the platform's
      user data dir (``~/.local/share/aisac`` on Linux).
    - ``sql_url``: SQLAlchemy URL of the relational store; default ``sqlite:///<data_dir>/aisac.db``.
    - ``vector_backend``: ``edge`` (Qdrant Edge, embedded, default), ``qdrant`` (qdrant-client; ``qdrant_url``
      names a server, else qdrant-client's local mode under ``<data_dir>/qdrant``) or ``postgres`` (pgvector).
    - ``vector_url``: the PostgreSQL database of the vectors (``postgresql+psycopg://...``, or ``sql``: the SQL
      store's own database); setting it selects the ``postgres`` backend (:mod:`aisac_core.store.pgvectors`).
    - ``allow_private_vectors``: let one process use an embedded vector folder with a server SQL store (refused
      otherwise: replicas would each see only their own vectors).
    - ``qdrant_*``: a Qdrant server's connection and collection layout (local mode ignores them; see the fields).
    - ``models_root``: folder of the assembled models when it is not ``<data_dir>/models`` (a project's store under
      ``<data_dir>/projects/<id>`` shares the machine's models).
    - ``warm``: load models and open the vector store in the background when a server starts.
    - ``run_idle_seconds``: provenance run window for callers that bring no run id.
    - ``job_lease_seconds`` / ``job_poll_seconds``: how long a process's claim on a background job holds without
      renewal, and how often pending jobs are looked for (:mod:`aisac_core.store.jobqueue`).
    - ``tools``: the tool profile ``aisac serve`` exposes to hosts (``core``, ``full`` or server names, comma-separated;
      :mod:`aisac_core.tool_profiles`).
    - ``http_token`` / ``max_request_bytes``: bearer token of ``serve --transport http`` (required off loopback;
      else generated) and the largest HTTP request body accepted (413 above).

    Raises (construction): ``pydantic.ValidationError`` for a value out of range or of the wrong type, naming the
    setting; ``ValueError`` for an unknown grouped setting passed to :meth:`updated`.
    """

    model_config = SettingsConfigDict(env_prefix="AISAC_", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: Path(user_data_dir("aisac")))
    sql_url: str | None = None
    vector_backend: Literal["edge", "qdrant", "postgres"] = "edge"
    #: PostgreSQL database of the vectors (pgvector): a postgresql+psycopg:// URL, or "sql" for the SQL store's own
    #: database; setting it selects the postgres backend
    vector_url: str | None = None
    #: one process only: an embedded vector folder next to a server SQL store (refused by default; see server_store)
    allow_private_vectors: bool = False
    #: strict audit mode: a tool call fails when its trace event cannot be written to the SQL store (it is still
    #: kept in the local journal, <data_dir>/trace-journal.jsonl); default: the call succeeds, the event waits
    trace_strict: bool = False
    #: Qdrant REST URL (``http(s)://host:6333``, ``host:6333``; unset: local mode); API key (a secret) and TLS:
    #: https://qdrant.tech/documentation/security/ (TLS unset: the URL's scheme; none: TLS when a key is set;
    #: CA file: a PEM bundle or a folder of hashed certificates that signs the server's certificate)
    qdrant_url: str | None = None
    qdrant_api_key: str | None = Field(default=None, repr=False)
    qdrant_https: bool | None = None
    qdrant_ca_file: Path | None = None
    #: seconds (integer) before one request to the server fails; unset: qdrant-client's default, 5 s
    qdrant_timeout_s: int | None = Field(default=None, ge=1, le=86400)
    #: new collections on a server (unset: its defaults): shards, copies per shard, copies acknowledging a write:
    #: https://qdrant.tech/documentation/scaling/distributed_deployment/ (sharding, replication)
    qdrant_shard_number: int | None = Field(default=None, ge=1, le=1000)
    qdrant_replication_factor: int | None = Field(default=None, ge=1, le=100)
    qdrant_write_consistency_factor: int | None = Field(default=None, ge=1, le=100)
    models_root: Path | None = None
    #: load the models and open the vector store in the background when a server starts (AISAC_WARM=0: on
    #: the first call that needs them instead)
    warm: bool = True
    #: calls without a client run id join the current run until this many seconds of silence.
    run_idle_seconds: float = 1800.0
    #: background jobs (indexing): a process claims a job for this many seconds and renews the claim every third of
    #: it; a job whose process died is claimed again by any process serving the store once its lease expired
    job_lease_seconds: float = Field(default=30.0, ge=2.0, le=3600.0)
    #: seconds between two looks at the jobs table for claimable work while jobs are pending anywhere
    job_poll_seconds: float = Field(default=1.0, gt=0.0, le=60.0)
    #: the tools a host sees (``aisac serve --tools``): core, full, all, or server names, comma-separated
    tools: str = "all"
    #: the default memory scope of a host connection (AISAC_MEMORY_SCOPE): a JSON object with keys among session_id,
    #: project, participant, host, since, until (aisac_core.memory.common.Scope), e.g. '{"participant": "alice"}';
    #: memory_recall / memory_search stay within it and memory_start_session stamps its project, participant and host
    #: on new sessions, unless a call gives its own value for a key
    memory_scope: str | None = None
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
        """Route flat names (``lit_replay=True``) into their groups; each group reads the environment for the rest.
        Settings from ``<data_dir>/aisac.toml`` fill in what neither the constructor nor the environment set."""
        if not isinstance(values, dict):
            return values
        values = dict(values)
        given: dict[str, dict[str, Any]] = {g: {} for g in GROUPS}
        for key in [k for k in values if k in FLAT_NAMES]:
            g, f = FLAT_NAMES[key]
            given[g][f] = values.pop(key)
        data_dir = Path(values.get("data_dir") or user_data_dir("aisac")).expanduser()
        path = data_dir / SETTINGS_FILE
        from_file = read_settings_file(data_dir)
        env = {k.upper() for k in os.environ}
        errors: list[Any] = []
        for name, value in from_file.items():
            if name in FLAT_NAMES:
                g, f = FLAT_NAMES[name]
                if f not in given[g] and _env_name(name) not in env and not isinstance(values.get(g), GROUPS[g]):
                    given[g][f] = value
                    continue
            elif name not in values:  # a store-wide field: checked here, so its error can name the file
                field = cls.model_fields[name]
                try:
                    ann: Any = Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation
                    TypeAdapter(ann).validate_python(value)
                except ValidationError as exc:
                    errors += [{**e, "loc": (name, f"@{path}")} for e in exc.errors()]
                values[name] = value
        for g, group_cls in GROUPS.items():
            cur = values.get(g)
            if isinstance(cur, group_cls) and not given[g]:
                continue
            base = cur.model_dump() if isinstance(cur, group_cls) else dict(cur) if isinstance(cur, dict) else {}
            try:
                values[g] = group_cls(**{**base, **given[g]})
            except ValidationError as exc:  # re-located to the flat name (two groups may share a field name)
                prefix = _flat_prefix(group_cls)
                for e in exc.errors():
                    name = prefix + str(e["loc"][0]) if e["loc"] else g
                    tag = (f"@{path}",) if name in from_file and _env_name(name) not in env else ()
                    errors.append({**e, "loc": (name, *tag)})
        if errors:
            raise ValidationError.from_exception_data("Settings", [_init_error(e) for e in errors])
        return values

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand_data_dir(cls, v: Path) -> Path:
        return v.expanduser().resolve()

    @field_validator("tools", mode="after")
    @classmethod
    def _tools_profile(cls, v: str) -> str:
        """A profile value in normal form (lower case, comma-separated); which names exist is checked at serve."""
        return check_value(v)

    @field_validator("memory_scope", mode="before")
    @classmethod
    def _memory_scope(cls, v: Any) -> str | None:
        """A JSON object (given as text or, from a config file, as a table), kept as compact JSON text; its keys and
        values are checked where it is used (:meth:`aisac_core.memory.common.Scope.parse`)."""
        if v is None or v == "":
            return None
        if isinstance(v, dict):
            return json.dumps(v, sort_keys=True, separators=(",", ":"))
        try:
            obj = json.loads(v) if isinstance(v, str) else None
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise ValueError(
                'memory_scope must be a JSON object such as \'{"participant": "alice", "project": "p1"}\' '
                "(keys: session_id, project, participant, host, since, until)"
            )
        return json.dumps(obj, sort_keys=True, separators=(",", ":"))

    @field_validator("qdrant_https", "qdrant_write_consistency_factor", mode="after")
    @classmethod
    def _qdrant_consistent(cls, v: Any, info: ValidationInfo) -> Any:
        """``qdrant_https`` agrees with the URL's scheme; write consistency <= replication factor. Raises ValueError."""
        url, rf = str(info.data.get("qdrant_url") or "").lower(), info.data.get("qdrant_replication_factor")
        if info.field_name == "qdrant_https" and v is not None and "://" in url and url.startswith("https://") != v:
            raise ValueError(f"contradicts the scheme of AISAC_QDRANT_URL ({url.split(':')[0]}); unset one of them")
        if info.field_name == "qdrant_write_consistency_factor" and v is not None and rf is not None and v > rf:
            raise ValueError(f"a write cannot wait for more copies than qdrant_replication_factor ({rf}) makes")
        return v

    @field_validator("vector_url", mode="after")
    @classmethod
    def _vector_url(cls, v: str | None) -> str | None:
        """``sql`` (any case) or a ``postgresql`` URL. Raises ValueError naming the accepted forms."""
        if v is None or not v.strip():
            return None
        v = v.strip()
        if v.lower() in ("sql", "same", "same-as-sql"):
            return "sql"
        if not v.startswith("postgresql"):
            raise ValueError("give a postgresql+psycopg:// URL (pgvector), or 'sql' for the SQL store's database")
        return v

    @property
    def vector_kind(self) -> Literal["edge", "qdrant", "postgres"]:
        """The vector backend in force: ``postgres`` when ``vector_url`` is set, else ``vector_backend``."""
        return "postgres" if self.vector_url else self.vector_backend

    @property
    def resolved_vector_url(self) -> str | None:
        """The PostgreSQL URL of the vectors (``postgres`` backend): ``vector_url``, or the SQL store's URL when
        it is ``sql`` or unset; None for the other backends."""
        if self.vector_kind != "postgres":
            return None
        return self.resolved_sql_url if self.vector_url in (None, "sql") else self.vector_url

    @property
    def shared_vectors(self) -> bool:
        """True when the vectors live on a server (PostgreSQL, or a Qdrant server): every process sees the same."""
        return self.vector_kind == "postgres" or (self.vector_kind == "qdrant" and bool(self.qdrant_url))

    @property
    def server_sql(self) -> bool:
        """True when the SQL store is a server (not the SQLite file)."""
        return not self.resolved_sql_url.startswith("sqlite")

    @property
    def server_store(self) -> bool:
        """True when both halves of the store live on servers (a non-SQLite ``sql_url`` and the vectors in
        PostgreSQL or on a Qdrant server): nothing in the data dir needs one owner process, so any number
        of aisac processes (replicas) serve the store side by side."""
        return self.server_sql and self.shared_vectors

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

    def updated(self, **changes: Any) -> Settings:
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


# --------------------------------------------------------------------------------------------------
# the store's settings file, error lines, behaviour settings
# --------------------------------------------------------------------------------------------------


def settings_file(data_dir: Path) -> Path:
    """Path of the store's settings file, ``<data_dir>/aisac.toml``."""
    return Path(data_dir).expanduser() / SETTINGS_FILE


def read_settings_file(data_dir: Path) -> dict[str, Any]:
    """The settings in ``<data_dir>/aisac.toml`` as ``{flat name: value}`` (``{}`` when there is no file).

    Raises ValueError (inside :class:`Settings`, a ``ValidationError``) naming the file for invalid TOML, an
    unknown setting name, a table, or ``data_dir`` (the data dir is where the file is, so it cannot set it)."""
    path = settings_file(data_dir)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror})") from exc
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc}); fix it or remove it") from exc
    known = set(Settings.setting_names()) - {"data_dir"}
    for name, value in data.items():
        if name not in known:
            raise ValueError(
                f"{path}: unknown setting {name!r} (the file takes flat names such as roots, "
                "lit_replay; data_dir comes from AISAC_DATA_DIR only); see `aisac config show`"
            )
        if isinstance(value, dict):
            raise ValueError(f"{path}: {name} is a table; give it as name = value")  # noqa: TRY004
    return data


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a TOML basic string


def plain_value(value: Any) -> Any:
    """A setting value as JSON/TOML data (paths as strings)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    return value


def write_settings_file(data_dir: Path, values: dict[str, Any]) -> Path:
    """Write ``values`` (flat name -> str/bool/int/float/list, None entries dropped) as ``<data_dir>/aisac.toml``,
    mode 0600, atomically (temporary file + rename). Returns the path. Raises OSError."""
    path = settings_file(data_dir)
    lines = [
        "# aisac settings of this store (`aisac config set NAME VALUE`); the environment overrides them",
        *(f"{k} = {_toml_value(v)}" for k, v in sorted(values.items()) if v is not None),
    ]
    tmp = path.with_name(f".{SETTINGS_FILE}.{os.getpid()}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def setting_sources(settings: Settings) -> dict[str, dict[str, Any]]:
    """Every setting of ``settings`` (flat name) with its value and where it comes from:
    ``{name: {"value": ..., "source": "environment" | "aisac.toml" | "default"}}`` (values as JSON data; an
    argument given in Python counts as default; a secret that is set shows as ``***``). Raises ValueError naming an
    unreadable or invalid settings file."""
    in_file = read_settings_file(settings.data_dir)
    env = {k.upper() for k in os.environ}
    out: dict[str, dict[str, Any]] = {}
    for name, value in settings.flat().items():
        src = "environment" if _env_name(name) in env else "aisac.toml" if name in in_file else "default"
        out[name] = {"value": "***" if name in SECRETS and value else plain_value(value), "source": src}
    return out


def setting_field(name: str) -> Any:
    """The pydantic ``FieldInfo`` of the setting with flat name ``name``, or None for an unknown name."""
    if name in FLAT_NAMES:
        g, f = FLAT_NAMES[name]
        return GROUPS[g].model_fields[f]
    return Settings.model_fields.get(name)


#: secrets (``aisac config show`` prints ``***``), and the flat settings that do not change what the tools answer or
#: allow: those, process management, performance, the Qdrant server's connection and collection layout
SECRETS = frozenset({"http_token", "qdrant_api_key"})
NON_BEHAVIOUR = (
    SECRETS
    | {n for n in Settings.model_fields if n.startswith("qdrant_") and n != "qdrant_url"}
    | {
        "data_dir",
        "warm",
        "embed_batch_size",
        "owner_mode",
        "owner_idle_seconds",
        "owner_start_timeout_s",
        "owner_restart_idle_s",
        "job_lease_seconds",
        "job_poll_seconds",
        "tools",
    }
)


#: the flat settings that belong to a host connection, not to the store: two hosts on one owner may differ in them
#: (the stdio relay sends them with each request, the owner applies them per request: the roots, which the MCP adapters
#: pass to the services as a :class:`HostRoots` argument, the roles
#: tools' ``llm`` and ``mode`` defaults, the tool profile). Every other behaviour setting must agree with the
#: owner's (embedding model, chunking, parser, SQL and vector stores...): the owner refuses a mismatch.
PER_HOST = frozenset({"roots", "tools", "roles_llm", "roles_mode", "memory_scope"})


class HostRoots(NamedTuple):
    """The root folders in force for the request being served: the host's ``roots`` (those its MCP client declares,
    or its ``AISAC_ROOTS``) and the store's ``catalog_roots``. Services that read files take it as an argument
    (``roots=``; None: the settings' own ``roots``)."""

    roots: tuple[Path, ...]
    catalog_roots: tuple[Path, ...]


#: the default memory scope (JSON text, :attr:`Settings.memory_scope`) of the host whose request the owner is serving
#: (set per request by the owner's host view, ``aisac_servers.serving.hosts``); None: the settings' own
HOST_MEMORY_SCOPE: ContextVar[str | None] = ContextVar("aisac_host_memory_scope", default=None)


def host_settings(settings: Settings) -> dict[str, Any]:
    """The per-host settings (:data:`PER_HOST`) of ``settings`` as ``{flat name: JSON value}``: what a relay sends
    its owner with each request."""
    return {k: plain_value(settings.get(k)) for k in sorted(PER_HOST)}


def behaviour_settings(settings: Settings) -> tuple[dict[str, Any], str]:
    """The settings that change what the tools do - roots, catalog roots, models and chunking, stores, literature
    (replay, services, limits), roles, data and sandbox limits, provenance window - as ``{flat name: JSON value}``,
    without the per-host ones (:data:`PER_HOST`: roots, tool profile, roles LLM and mode), and their digest (sha256 hex of the sorted JSON). Secrets (tokens, API keys) are not among them; the API key
    settings are names of environment variables. The owner daemon records both (``owner.json``)."""
    values = {k: plain_value(v) for k, v in settings.flat().items() if k not in NON_BEHAVIOUR | PER_HOST}
    blob = json.dumps(values, sort_keys=True, default=str, separators=(",", ":"))
    return values, hashlib.sha256(blob.encode()).hexdigest()
