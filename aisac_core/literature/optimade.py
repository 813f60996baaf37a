"""OPTIMADE client: computed materials data (structures, formation energy, band gap, energy above the hull) from
the providers that serve the OPTIMADE API (Materials Project, OQMD, Alexandria, AFLOW, NOMAD, COD, ...).

Specification: OPTIMADE API v1.2 (Andersen et al., Sci. Data 8, 217 (2021); Evans et al., Digital Discovery 3, 1509
(2024); https://github.com/Materials-Consortia/OPTIMADE/blob/develop/optimade.rst):

- ``GET <base>/v1/structures?filter=<filter>&page_limit=<k>`` returns JSON:API ``{"data": [{"id", "type":
  "structures", "attributes": {...}}], "meta": {"provider": {"prefix", "name"}, "data_returned",
  "more_data_available"}, "links": {"next"}}``; an entry's own URL is ``<base>/v1/structures/<id>``.
- The filter language (spec section "API Filtering Format Specification"): ``elements HAS ALL "Fe","Li","O" AND
  nelements=3``, ``chemical_formula_reduced="FeLiO4P"`` (elements alphabetical, counts reduced, see
  :mod:`.formula`). A filter a caller writes is checked with the grammar of the ``optimade`` package
  (optimade-python-tools' ``LarkParser``) before anything is sent.
- Provider-specific fields carry the provider's prefix (``_oqmd_delta_e``, ``_alexandria_e_above_hull``); their
  units and descriptions are in ``<base>/v1/info/structures`` (``data.properties.<field>.unit``).

Computed properties: a provider field whose name without its ``_<prefix>_`` is one of :data:`PROPERTY_NAMES`' aliases
is reported under the common name (``formation_energy_per_atom``, ``energy_above_hull``, ``band_gap``) with the unit
the provider declares; every other provider field is kept as it came in ``provider_fields``. The alias lists
follow the providers' published field names (OQMD ``delta_e`` / ``stability`` / ``band_gap``; Alexandria and
Materials Project ``formation_energy_per_atom`` / ``e_above_hull`` / ``band_gap``; AFLOW ``enthalpy_formation_atom``
/ ``egap``); OQMD's ``stability`` is its distance to the convex hull.

Requests go through the literature :class:`~.http.Fetcher` (per-provider budget, retries, response cache, replay,
the egress guard: a provider on a loopback or private address is refused unless ``AISAC_LIT_ALLOW_NETWORKS``
names it). A provider that cannot be reached is an error (:class:`ProviderUnreachable`), never an empty list.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from aisac_core.literature.formula import ELEMENTS, formula_key
from aisac_core.literature.http import NotFound, RateLimited, ReplayMiss, ServiceError
from aisac_core.literature.paper import LiteratureError
from aisac_core.literature.results import MaterialProperty, MaterialRecord, MaterialsResult, MaterialStructure

if TYPE_CHECKING:
    from aisac_core.literature.http import Fetcher

#: most entries one call returns (OPTIMADE servers cap ``page_limit`` themselves; the reference server at 500)
MAX_RECORDS = 100
#: longest filter accepted (characters)
MAX_FILTER_CHARS = 2000
#: common property name -> the provider field names (without ``_<prefix>_``) that report it, by preference
PROPERTY_NAMES: dict[str, tuple[str, ...]] = {
    "formation_energy_per_atom": (
        "formation_energy_per_atom",
        "e_form",
        "delta_e",
        "enthalpy_formation_atom",
        "formation_energy",
    ),
    "energy_above_hull": ("e_above_hull", "energy_above_hull", "hull_distance", "distance_to_hull", "stability"),
    "band_gap": ("band_gap", "bandgap", "egap", "band_gap_ind"),
}


class ProviderUnreachable(LiteratureError):
    """The OPTIMADE provider could not be reached (no connection, no name resolution, time-out): nothing was
    searched, so there is no answer, not an empty one."""


def filter_parser() -> Any:
    """A parser of the OPTIMADE filter grammar (v1.0, optimade-python-tools' ``LarkParser``; ~0.1 s to build: keep
    one, :class:`~.service.LiteratureService` does)."""
    from optimade.filterparser import LarkParser

    return LarkParser(version=(1, 0, 0))


def check_filter(text: str, parser: Any = None) -> str:
    """``text`` stripped, when it is a filter of the OPTIMADE grammar (v1.0 grammar of the ``optimade`` package;
    ``parser``: one :func:`filter_parser` to reuse, default a new one).

    Raises:
        LiteratureError: empty, longer than :data:`MAX_FILTER_CHARS`, or not in the grammar (the message says
            where the parser stopped).
    """
    s = (text or "").strip()
    if not s:
        raise LiteratureError('the filter is empty: write one such as elements HAS ALL "Li","Fe","O" AND nelements=3')
    if len(s) > MAX_FILTER_CHARS:
        raise LiteratureError(f"the filter is {len(s)} characters long; at most {MAX_FILTER_CHARS} are accepted")
    try:
        (parser if parser is not None else filter_parser()).parse(s)
    except Exception as exc:
        detail = str(getattr(exc, "detail", "") or exc).splitlines()[0][:300]
        raise LiteratureError(
            f"the filter is not OPTIMADE filter syntax ({detail}); e.g. "
            'elements HAS ALL "Li","Fe","O" AND nelements=3, or chemical_formula_reduced="FeLiO4P"'
        ) from exc
    return s


def normalise_elements(elements: list[str] | str) -> list[str]:
    """Element symbols in their proper case (``"li"`` -> ``"Li"``), sorted, without repeats; a string is split at
    commas, spaces or dashes (``"Li-Fe-O"``).

    Raises:
        LiteratureError: an unknown symbol, or none at all.
    """
    items = elements.replace(",", " ").replace("-", " ").split() if isinstance(elements, str) else list(elements)
    out: set[str] = set()
    for raw in items:
        sym = str(raw).strip()
        sym = sym[:1].upper() + sym[1:].lower()
        if sym not in ELEMENTS:
            raise LiteratureError(f"{str(raw)[:20]!r} is not an element symbol: give symbols such as Li, Fe, O")
        out.add(sym)
    if not out:
        raise LiteratureError('elements is empty: give symbols such as ["Li", "Fe", "O"]')
    return sorted(out)


def build_filter(
    elements: list[str] | str | None = None,
    formula: str | None = None,
    exact_elements: bool = True,
    filter_text: str | None = None,
    parser: Any = None,
) -> str:
    """The OPTIMADE filter for a lookup: ``formula`` -> ``chemical_formula_reduced="<reduced>"``; ``elements`` ->
    ``elements HAS ALL "A","B"`` (and ``nelements=<n>`` when ``exact_elements``: only those elements);
    ``filter_text`` -> a filter of the caller's (checked), joined to the others with AND; ``parser`` as for
    :func:`check_filter`.

    Raises:
        LiteratureError: none of the three given; a bad formula, element or filter.
    """
    parts: list[str] = []
    if formula is not None and str(formula).strip():
        parts.append(f'chemical_formula_reduced="{formula_key(str(formula))}"')
    if elements is not None and (elements if isinstance(elements, list) else str(elements).strip()):
        els = normalise_elements(elements)
        clause = "elements HAS ALL " + ",".join(f'"{e}"' for e in els)
        if exact_elements:
            clause += f" AND nelements={len(els)}"
        parts.append(clause)
    parser = parser if parser is not None else filter_parser()
    if filter_text is not None and str(filter_text).strip():
        parts.append(f"({check_filter(str(filter_text), parser)})")
    if not parts:
        raise LiteratureError(
            'say what to look up: a formula ("LiFePO4"), elements (["Li", "Fe", "O"]) or an OPTIMADE filter'
        )
    return check_filter(" AND ".join(parts), parser)


def _parse_page(text: str) -> dict[str, Any]:
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError("no data list in the OPTIMADE answer")
    return data


def _parse_info(text: str) -> dict[str, Any]:
    data = json.loads(text)
    props = ((data or {}).get("data") or {}).get("properties") if isinstance(data, dict) else None
    if not isinstance(props, dict):
        raise ValueError("no properties in the OPTIMADE info answer")
    return props


def _prefix_of(field: str) -> tuple[str, str] | None:
    """``("oqmd", "delta_e")`` for ``_oqmd_delta_e``; None for a field of the standard."""
    if not field.startswith("_") or field.count("_") < 2:
        return None
    prefix, _, rest = field[1:].partition("_")
    return (prefix, rest) if prefix and rest else None


def computed_properties(
    attributes: dict[str, Any], units: dict[str, Any]
) -> tuple[dict[str, MaterialProperty], dict[str, Any]]:
    """The common-name properties of an entry's ``attributes`` and its other provider fields (see the module
    docstring); ``units``: ``/info/structures`` properties (field -> {unit, description})."""
    props: dict[str, MaterialProperty] = {}
    rank: dict[str, int] = {}
    others: dict[str, Any] = {}
    for field, value in attributes.items():
        split = _prefix_of(field)
        if split is None:
            continue
        name = split[1].lower()
        hit = next(
            ((common, aliases.index(name)) for common, aliases in PROPERTY_NAMES.items() if name in aliases), None
        )
        if hit is None or value is None or isinstance(value, (dict, list)):
            others[field] = value
            continue
        common, order = hit
        if common in props and rank[common] <= order:
            others[field] = value
            continue
        if common in props:
            others[props[common]["field"]] = props[common]["value"]
        info = units.get(field) if isinstance(units.get(field), dict) else {}
        prop: MaterialProperty = {"value": value, "unit": info.get("unit") if info else None, "field": field}
        if info and isinstance(info.get("description"), str):
            prop["description"] = info["description"][:300]
        props[common], rank[common] = prop, order
    return props, others


def to_record(
    entry: dict[str, Any],
    provider: str,
    provider_name: str | None,
    base: str,
    retrieved_at: str,
    units: dict[str, Any],
    with_structure: bool,
) -> MaterialRecord:
    """One ``structures`` entry of a page as a :class:`~.results.MaterialRecord`."""
    a = entry.get("attributes") or {}
    eid = str(entry.get("id"))
    props, others = computed_properties(a, units)
    self_link = (entry.get("links") or {}).get("self") if isinstance(entry.get("links"), dict) else None
    rec: MaterialRecord = {
        "provider": provider,
        "provider_name": provider_name,
        "database_id": eid,
        # the entry's own link when the provider gives an http(s) one, else the specification's entry URL
        "url": self_link
        if isinstance(self_link, str) and self_link.startswith(("https://", "http://"))
        else f"{base}/v1/structures/{quote(eid, safe='')}",
        "formula_reduced": a.get("chemical_formula_reduced"),
        "formula_anonymous": a.get("chemical_formula_anonymous"),
        "elements": a.get("elements"),
        "nelements": a.get("nelements"),
        "nsites": a.get("nsites"),
        "space_group": a.get("space_group_symbol_hermann_mauguin"),
        "last_modified": a.get("last_modified"),
        "retrieved_at": retrieved_at,
        "properties": props,
        "provider_fields": others,
    }
    if with_structure:
        st: MaterialStructure = {
            "lattice_vectors": a.get("lattice_vectors"),
            "species_at_sites": a.get("species_at_sites"),
            "cartesian_site_positions": a.get("cartesian_site_positions"),
        }
        rec["structure"] = st
    return rec


async def lookup(
    f: Fetcher, provider: str, base_url: str, filter_text: str, k: int = 10, with_structure: bool = False
) -> MaterialsResult:
    """The structures entries of ``provider`` (at the unversioned ``base_url``) matching the OPTIMADE
    ``filter_text`` (already checked: :func:`build_filter`), at most ``k`` (1..:data:`MAX_RECORDS`).

    Raises:
        ProviderUnreachable: no connection or a time-out (after the fetcher's retries).
        LiteratureError: the provider has no ``/v1/structures`` (404), refused the filter (4xx), failed (5xx),
            answered something that is not OPTIMADE JSON, rate limits us; replay mode and not cached.
    """
    base = base_url.rstrip("/")
    service = f"optimade:{provider}"
    url = f"{base}/v1/structures"
    params = {"filter": filter_text, "page_limit": k}
    query_url = f"{url}?{urlencode(params)}"
    notes: list[str] = []
    try:
        page, cached = await f.fetch(service, url, params, _parse_page, base_url=base)
    except ServiceError as exc:
        if exc.kind in ("unreachable", "timeout"):
            raise ProviderUnreachable(
                f"the OPTIMADE provider {provider!r} ({base}) cannot be reached: {exc}. Nothing was searched, so "
                "there is no answer; try again later or choose another provider (AISAC_LIT_OPTIMADE_PROVIDERS)"
            ) from exc
        if exc.http_status in (400, 403, 422, 501):
            raise LiteratureError(
                f"the OPTIMADE provider {provider!r} refused the filter {filter_text!r} (HTTP {exc.http_status}): "
                "it may not support a property or operator it names; simplify the filter"
            ) from exc
        raise
    except NotFound as exc:
        raise LiteratureError(
            f"{base} serves no OPTIMADE /v1/structures (HTTP 404): is it an OPTIMADE implementation's base URL "
            "(not an index meta-database)? Check AISAC_LIT_OPTIMADE_PROVIDERS"
        ) from exc
    except (RateLimited, ReplayMiss):
        raise
    units: dict[str, Any] = {}
    data = page["data"]
    if any(_prefix_of(str(x)) for e in data if isinstance(e, dict) for x in (e.get("attributes") or {})):
        try:
            units, _c = await f.fetch(service, f"{base}/v1/info/structures", None, _parse_info, base_url=base)
        except LiteratureError as exc:
            notes.append(f"the provider's units are unknown (/v1/info/structures: {exc}); values are as reported")
    meta: dict[str, Any] = page["meta"] if isinstance(page.get("meta"), dict) else {}
    prov: dict[str, Any] = meta["provider"] if isinstance(meta.get("provider"), dict) else {}
    when = f.cached_at.get(service) if cached else None
    retrieved_at = datetime.fromtimestamp(when, UTC) if when else datetime.now(UTC)
    stamp = retrieved_at.isoformat(timespec="seconds")
    records = [
        to_record(e, provider, prov.get("name"), base, stamp, units, with_structure)
        for e in data[:k]
        if isinstance(e, dict) and e.get("id") is not None
    ]
    returned = meta.get("data_returned")
    for w in meta.get("warnings") or []:
        if isinstance(w, dict) and isinstance(w.get("detail"), str):
            notes.append(f"provider warning: {w['detail'][:300]}")
    return {
        "provider": provider,
        "base_url": base,
        "filter": filter_text,
        "query_url": query_url,
        "records": records,
        "count": len(records),
        "data_returned": returned if isinstance(returned, int) else None,
        "more_data_available": bool(meta.get("more_data_available")),
        "from_cache": cached,
        "notes": notes,
    }
