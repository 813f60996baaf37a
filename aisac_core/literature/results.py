"""Result types of the literature operations (:class:`~.service.LiteratureService`), declared once: the service
returns plain dicts of these shapes and the ``lit_*`` tools derive their output schemas from them.

Top-level results forbid undeclared keys; ``NotRequired`` marks keys only some results carry. A paper is the
:class:`~.paper.Paper` record as a dict (``Paper.model_dump()``; docs/literature.md lists its fields).
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from aisac_core.rag.results import IndexJob

#: on every top-level result: undeclared keys are refused (``additionalProperties: false``); pydantic's
#: ``with_config`` rather than a ``__pydantic_config__`` member, which mypy would read as a required key
_closed = with_config(ConfigDict(extra="forbid"))

#: a paper record (:class:`~.paper.Paper` as a dict)
PaperDict = dict[str, Any]


# comments, not docstrings: a docstring would become the schema's description, which every host pays for


# what one source answered: ``status`` ok | rate_limited | not_found | error | unreachable | timeout | refused |
# unavailable | bad_response | replay_miss | blocked
class SourceStatus(TypedDict):
    status: str
    took_ms: float
    count: NotRequired[int]
    from_cache: NotRequired[bool]
    k_requested: NotRequired[int]
    k_max: NotRequired[int]
    retry_after: NotRequired[Annotated[float, Field(description="seconds")]]
    error: NotRequired[str]
    http_status: NotRequired[int]


# ``lit_search``: the merged papers, best first
@_closed
class SearchResult(TypedDict):
    query: str
    papers: list[PaperDict]
    count: int
    sources: dict[str, SourceStatus]
    notes: list[str]


# ``lit_get``: one paper (None when every source failed)
@_closed
class GetResult(TypedDict):
    identifier: str
    kind: str
    paper: PaperDict | None
    sources: dict[str, SourceStatus]


# ``lit_references``: the papers a paper cites
@_closed
class ReferencesResult(TypedDict):
    identifier: str
    kind: str
    references: list[PaperDict]
    count: int
    sources: dict[str, SourceStatus]
    notes: list[str]


# ``lit_citations``: the papers citing a paper
@_closed
class CitationsResult(TypedDict):
    identifier: str
    kind: str
    citations: list[PaperDict]
    count: int
    sources: dict[str, SourceStatus]
    notes: list[str]


# ``lit_import``: ``status`` imported | already_present (the PDF saved, an index job started; ``job`` only when the
# call waited for it) | rate_limited (nothing saved; ``retry_after``, ``identifier``, and ``sources`` or
# ``source_url`` and ``error``)
@_closed
class ImportResult(TypedDict):
    status: str
    path: NotRequired[str]
    sidecar: NotRequired[Annotated[str, Field(description="the provenance JSON beside the PDF")]]
    sha256: NotRequired[str]
    bytes: NotRequired[int]
    source_url: NotRequired[str]
    job_id: NotRequired[str]
    paper: NotRequired[PaperDict]
    job: NotRequired[Annotated[IndexJob, Field(description="the index job's last status, when waited for")]]
    identifier: NotRequired[str]
    retry_after: NotRequired[Annotated[float, Field(description="seconds")]]
    sources: NotRequired[dict[str, SourceStatus]]
    error: NotRequired[str]


# one computed property of a materials record: the value the provider reports under ``field`` (its own name, e.g.
# ``_oqmd_delta_e``), with the unit the provider declares for that field in ``/info/structures`` (None when it
# declares none)
class MaterialProperty(TypedDict):
    value: Any
    unit: str | None
    field: str
    description: NotRequired[str]


# ``structure``: the cell of a materials record (OPTIMADE structures fields), only when asked for
class MaterialStructure(TypedDict):
    lattice_vectors: list[list[float | None]] | None
    species_at_sites: list[str] | None
    cartesian_site_positions: Annotated[list[list[float | None]] | None, Field(description="angstrom")]


# one OPTIMADE structures entry as a citable record: ``provider`` (the configured name), ``database_id`` (the
# entry's id at the provider), ``url`` (the entry's own URL, ``<base>/v1/structures/<id>``)
class MaterialRecord(TypedDict):
    provider: str
    provider_name: str | None
    database_id: str
    url: str
    formula_reduced: str | None
    formula_anonymous: NotRequired[str | None]
    elements: list[str] | None
    nelements: int | None
    nsites: NotRequired[int | None]
    space_group: NotRequired[str | None]
    last_modified: NotRequired[str | None]
    retrieved_at: str
    properties: Annotated[
        dict[str, MaterialProperty],
        Field(description="formation_energy_per_atom, energy_above_hull, band_gap, ... when the provider has them"),
    ]
    provider_fields: Annotated[dict[str, Any], Field(description="every other provider-specific (_prefix_) field")]
    structure: NotRequired[MaterialStructure]


# ``lit_materials``: the structures entries of one OPTIMADE provider matching ``filter``
@_closed
class MaterialsResult(TypedDict):
    provider: str
    base_url: str
    filter: Annotated[str, Field(description="the OPTIMADE filter sent")]
    query_url: str
    records: list[MaterialRecord]
    count: int
    data_returned: int | None
    more_data_available: bool
    from_cache: bool
    notes: list[str]
