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

#: The default dense model: all-MiniLM-L6-v2 as int8 ONNX, assembled offline (DESIGN.md "Offline models").
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
        """Folder where offline models are assembled."""
        return self.data_dir / "models"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
