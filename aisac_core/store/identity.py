"""The store's identity: what a store was built with, recorded once in the store and checked by every process.

Several processes may serve one store (replicas on one PostgreSQL, a CLI next to a server). A process whose settings
differ from the store's would damage it silently: vectors written to a private folder while the shared manifest calls
them indexed, documents re-chunked with another chunk size (and flipped back by the next replica), query vectors of
one embedding model compared with document vectors of another. So the store records its identity - schema revision,
vector backend and location, embedding model (name, sha256 of the model file, dimension), chunker settings and
parser revision - in its ``store_meta`` table (key :data:`IDENTITY_KEY`, one JSON object) when a writing process
first opens it, and every process compares its own with it before it reads or writes anything else
(:func:`check_identity`, called by the composition root, :class:`aisac_core.context.AppContext`).

A difference is refused with :class:`StoreIdentityError`, whose message names each differing item with the store's
value, this process's value and the setting to change. Two kinds of difference:

- **where** the store is (vector backend and location): always refused; a store moves only with
  ``aisac store migrate``, which records the new location;
- **what** it was built with (embedding model, chunker, parser): refused for read-only processes and on a store
  other processes share (a SQL server); a writing process on a store of its own machine (the SQLite file, held by one
  process) adopts its settings - the index fingerprint then re-embeds every document, as before the identity existed
  - and ``adopt=True`` (``aisac index --adopt-settings``) does the same deliberately on a shared store.

The schema revision is recorded for the reader; differences of schema are the migrations' business
(:mod:`aisac_core.store.migrations`: a writing process upgrades, a read-only one refuses a store not at its head).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from aisac_core.errors import AisacError
from aisac_core.store.sql import lock
from aisac_core.store.tables import StoreMeta

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = [
    "IDENTITY_KEY",
    "Difference",
    "StoreIdentity",
    "StoreIdentityError",
    "check_identity",
    "differences",
    "read_identity",
    "write_identity",
]

#: the ``store_meta`` key of the identity record
IDENTITY_KEY = "identity"

#: item -> (setting that changes it, kind): ``where`` items are never adopted, ``what`` items may be (module docs)
SETTINGS: dict[str, tuple[str, str]] = {
    "vector_backend": ("AISAC_VECTOR_URL / AISAC_VECTOR_BACKEND", "where"),
    "vector_location": ("AISAC_VECTOR_URL / AISAC_QDRANT_URL / AISAC_DATA_DIR", "where"),
    "embedding_model": ("AISAC_EMBEDDING_MODEL", "what"),
    "embedding_model_sha256": ("AISAC_EMBEDDING_MODEL (the model file)", "what"),
    "embedding_dim": ("AISAC_EMBEDDING_MODEL", "what"),
    "chunk_max_tokens": ("AISAC_CHUNK_MAX_TOKENS", "what"),
    "chunker": ("the aisac version (chunker)", "what"),
    "pdf_pipeline": ("AISAC_PDF_PIPELINE", "what"),
    "parser_revision": ("the aisac version (parser, docling-slim, header model)", "what"),
}


class StoreIdentityError(AisacError, RuntimeError):
    """This process's settings differ from the store's identity; the message names each difference and the setting
    to change. Raised before the process reads or writes anything else in the store."""


@dataclass(frozen=True)
class StoreIdentity:
    """What a store is built with (every field a plain JSON value).

    - ``schema_revision``: the Alembic revision of the SQL schema when the record was written (``"0033"``);
    - ``vector_backend``: ``edge``, ``qdrant`` or ``postgres``;
    - ``vector_location``: ``embedded:<folder>`` (a folder of the data dir), ``sql`` (the SQL store's own
      PostgreSQL database), ``postgresql://host:port/database`` (another one; no user or password) or the Qdrant
      server's URL;
    - ``embedding_model``: the dense model's id (:attr:`aisac_core.rag.embeddings.Embedder.model_id`);
    - ``embedding_model_sha256``: sha256 of its ``model.onnx`` (None for a fastembed model name: the name is its
      identity); when both sides have one, it decides and the name (which holds a local path) is not compared;
    - ``embedding_dim``: dimension of its vectors when known without loading it (None otherwise);
    - ``chunk_max_tokens``, ``chunker``, ``pdf_pipeline``: the chunker's settings;
    - ``parser_revision``: parser revision, docling-slim version, contextual header revision, header model hash.
    """

    schema_revision: str | None
    vector_backend: str
    vector_location: str
    embedding_model: str
    embedding_model_sha256: str | None
    embedding_dim: int | None
    chunk_max_tokens: int
    chunker: str
    pdf_pipeline: str
    parser_revision: str

    def as_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StoreIdentity:
        """The record from its dict (unknown keys ignored, missing ones None: a record of another aisac version)."""
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls)}
        return cls(**values)


@dataclass(frozen=True)
class Difference:
    """One item where this process differs from the store: its name, both values, the setting, and its kind."""

    item: str
    store: Any
    here: Any
    setting: str
    kind: str

    def __str__(self) -> str:
        return f"{self.item}: the store has {self.store!r}, this process {self.here!r} (setting: {self.setting})"


def read_identity(engine: Engine) -> StoreIdentity | None:
    """The store's identity record, or None (a store created before identities existed, or a new one).

    Raises :class:`StoreIdentityError` when the record is not valid JSON (edited by hand)."""
    with Session(engine) as s:
        row = s.get(StoreMeta, IDENTITY_KEY)
        return None if row is None else _parse(row.value)


def _parse(raw: str) -> StoreIdentity:
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise StoreIdentityError(
            f"the store's identity record (store_meta key {IDENTITY_KEY!r}) is damaged ({exc}): delete that row and "
            "run a writing command (aisac index --adopt-settings) to record it again"
        ) from exc
    return StoreIdentity.from_dict(data)


def write_identity(engine: Engine, identity: StoreIdentity) -> None:
    """Record ``identity`` as the store's (replacing the previous record), in one transaction."""
    with Session(engine) as s:
        row = s.get(StoreMeta, IDENTITY_KEY, with_for_update=True) or StoreMeta(key=IDENTITY_KEY, value="")
        row.value = json.dumps(identity.as_dict(), sort_keys=True)
        s.add(row)
        s.commit()


def differences(store: StoreIdentity, here: StoreIdentity) -> list[Difference]:
    """Every item where ``here`` (this process) differs from ``store``, in the order of :data:`SETTINGS`.

    The embedding model is compared by its file's sha256 when both records have one (the same file at two paths is
    the same model), else by its name; the dimension only when both know it."""
    out: list[Difference] = []
    hashed = bool(store.embedding_model_sha256 and here.embedding_model_sha256)
    for item, (setting, kind) in SETTINGS.items():
        a, b = getattr(store, item), getattr(here, item)
        if item == "embedding_model" and hashed:
            continue
        if item == "embedding_model_sha256" and not hashed:
            continue
        if item == "embedding_dim" and (a is None or b is None):
            continue
        if a != b:
            out.append(Difference(item, a, b, setting, kind))
    return out


def check_identity(
    engine: Engine, here: StoreIdentity, *, write: bool, shared: bool, adopt: bool = False
) -> StoreIdentity | None:
    """Compare this process's identity ``here`` with the store's, before anything else is read or written.

    Args:
        engine: the store's SQL engine (schema at head).
        here: this process's identity (:func:`aisac_core.rag.identity.current_identity`).
        write: the process may write (``index``, ``repair``, ``migrate``, a server); False: a read-only command,
            which never records anything.
        shared: other processes may use the store at once (the SQL store is a server): differences of model,
            chunker or parser are then refused unless ``adopt``.
        adopt: record ``here`` over differences of model, chunker or parser (``aisac index --adopt-settings``);
            differences of location are refused even so.

    Returns: the identity in force afterwards (None: a read-only process on a store without a record).

    Raises:
        StoreIdentityError: the differences that are refused, each with both values and the setting to change.
    """
    if not write:
        stored = read_identity(engine)
        if stored is None:  # a store made before identities: read as it is, nothing recorded
            return None
        diffs = differences(stored, here)
        if not diffs:
            return here
        raise _refusal(diffs, write=False)
    with Session(engine) as s:  # read and record in one transaction, serialised with every other process's check
        lock(s, "aisac-store-identity")  # PostgreSQL: an advisory lock; SQLite: BEGIN IMMEDIATE already serialises
        row = s.get(StoreMeta, IDENTITY_KEY)
        stored = None if row is None else _parse(row.value)
        diffs = [] if stored is None else differences(stored, here)
        where = [d for d in diffs if d.kind == "where"]
        if diffs and (where or not (adopt or not shared)):
            raise _refusal(diffs, write=True)
        # a new store, one made before identities (adopted by its first writing process), an adopted difference,
        # or a schema this process migrated: record it
        if stored is None or diffs or stored.schema_revision != here.schema_revision:
            row = row or StoreMeta(key=IDENTITY_KEY, value="")
            row.value = json.dumps(here.as_dict(), sort_keys=True)
            s.add(row)
            s.commit()
        return here


def _refusal(diffs: list[Difference], *, write: bool) -> StoreIdentityError:
    """The error naming ``diffs`` and what to do (``write``: the refused process may write)."""
    where = [d for d in diffs if d.kind == "where"]
    if where:
        fix = (
            "point this process at the store's vectors (the settings above), or move the store with "
            "`aisac store migrate`"
        )
    elif not write:
        fix = (
            "use the store's settings for this command (read-only commands never change the store); to rebuild the "
            "index with the new settings, run `aisac index --adopt-settings PATH` (re-embeds every document)"
        )
    else:
        fix = (
            "give this process the store's settings, as every other process on this shared store has; to change "
            "them for all, stop the other processes and run `aisac index --adopt-settings PATH` (re-embeds every "
            "document), then start them with the new settings"
        )
    return StoreIdentityError(
        f"this process's settings differ from the store's ({len(diffs)} difference{'s' if len(diffs) > 1 else ''}; "
        "nothing was read or written): " + "; ".join(str(d) for d in diffs) + ". " + fix + " (docs/deployment.md)"
    )
