"""The literature operations the server and the CLI call: :class:`LiteratureService` (search, get, references,
citations, import), one per store, built by the application context.

Every operation returns plain JSON-ready dicts (their shapes: :mod:`.results`). Per-source outcomes are reported,
never raised, in ``sources``: ``{"<source>": {"status": "ok", "count", "from_cache"?, "k_requested"?, "k_max"?} |
{"status": "rate_limited", "retry_after": s} | {"status": "not_found" | "error" | "unreachable" | "timeout" |
"refused" | "unavailable" | "bad_response" | "replay_miss" | "blocked", "error": message, "http_status"?}}``
(``blocked``: the egress guard refused the address, see :mod:`aisac_core.egress`).
Bad input (empty query, unknown source, malformed identifier, bad years) raises :class:`LiteratureError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import anyio

from aisac_core.errors import PathOutsideRootsError, resolve_in_roots
from aisac_core.hashing import sha256_bytes, sha256_file
from aisac_core.literature import openalex, semanticscholar
from aisac_core.literature.http import Fetcher, HttpState, NotFound, RateLimited, ReplayMiss, ServiceError
from aisac_core.literature.paper import LiteratureError, Paper, merge_papers, parse_identifier
from aisac_core.literature.results import (
    CitationsResult,
    GetResult,
    ImportResult,
    MaterialsResult,
    ReferencesResult,
    SearchResult,
    SourceStatus,
)
from aisac_core.literature.sources import aliases, literature_sources, max_results, routes
from aisac_core.settings import HostRoots

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.settings import LiteratureSettings

#: largest k a tool call accepts for the merged list (each source is also clamped to its own maximum)
MAX_K = 1000


class IndexJobs(Protocol):
    """Queues index jobs (rag's job manager)."""

    def submit(self, paths: list[Path]) -> str:
        """Queue an index job for ``paths``; returns its id."""
        ...


class Corpus(Protocol):
    """What ``lit_import`` needs from rag: its index jobs."""

    @property
    def jobs(self) -> IndexJobs:
        """The index job manager."""
        ...


def _stamp(f: Fetcher, source: str, papers: list[Paper]) -> None:
    """Papers answered from the cache only carry the time their answer was fetched, not now (replays match)."""
    if f.cache_hits.get(source) and not f.sent.get(source) and source in f.cached_at:
        when = datetime.fromtimestamp(f.cached_at[source], UTC).isoformat(timespec="seconds")
        for p in papers:
            p.retrieved_at = when


class LiteratureUnreachable(LiteratureError):
    """Every source of a search failed to connect or timed out (offline, or a proxy blocks them): the search is an
    error (``is_error: true`` for an MCP host), not an empty list of papers."""


def _status_of(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, RateLimited):
        return {"status": "rate_limited", "retry_after": round(exc.retry_after, 1), "error": str(exc)}
    if isinstance(exc, NotFound):
        return {"status": "not_found", "error": str(exc)}
    if isinstance(exc, ReplayMiss):
        return {"status": "replay_miss", "error": str(exc)}
    if isinstance(exc, ServiceError):
        d: dict[str, Any] = {"status": exc.kind, "error": str(exc)}
        if exc.http_status:
            d["http_status"] = exc.http_status
        if exc.retry_after is not None:
            d["retry_after"] = round(exc.retry_after, 1)
        return d
    if isinstance(exc, LiteratureError):
        return {"status": "error", "error": str(exc)}
    return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}


async def _guard(source: str, coro: Awaitable[Any]) -> tuple[str, Any, SourceStatus]:
    t0 = time.perf_counter()
    try:
        res = await coro
        st: dict[str, Any] = {"status": "ok"}
    except Exception as exc:  # one source failing never fails the call
        res, st = None, _status_of(exc)
    st["took_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    return source, res, cast(SourceStatus, st)


def normalise_sources(sources: list[str] | str | None, registry: Mapping[str, Any] | None = None) -> list[str]:
    """Source names in canonical spelling, from ``registry`` (name -> source; default: the built-ins, see
    :func:`~.sources.literature_sources`). None -> every registered source. Raises LiteratureError for an unknown
    or empty list."""
    registry = registry if registry is not None else literature_sources()
    if sources is None:
        return list(registry)
    spellings = aliases(dict(registry))
    items = [sources] if isinstance(sources, str) else list(sources)
    out: list[str] = []
    for raw in items:
        name = spellings.get(str(raw).strip().lower())
        if name is None:
            raise LiteratureError(
                f"unknown source {raw!r}: choose from {', '.join(registry)} (or omit sources for all)"
            )
        if name not in out:
            out.append(name)
    if not out:
        raise LiteratureError(f"sources is empty: choose from {', '.join(registry)} (or omit sources for all)")
    return out


def _check_years(year_from: int | None, year_to: int | None) -> None:
    for y in (year_from, year_to):
        if y is not None and not 1500 <= y <= 2200:
            raise LiteratureError(f"year {y} is out of range: give a four-digit year such as 2019")
    if year_from and year_to and year_from > year_to:
        raise LiteratureError(f"year_from {year_from} is after year_to {year_to}: swap them")


class LiteratureService:
    """The literature operations of one store.

    Args:
        sources: the registered sources by canonical name (:func:`~.sources.source_registry` of the plugin manager:
            the five built-ins plus any a served project's plugins add), in registration order.
        lit: the literature settings (base URLs, politeness, cache, replay, egress allow-list).
        engine: a zero-argument callable returning the SQL engine of the response cache (opened on the first
            request); None: no cache.
        roots: the registered corpus roots ``lit_import`` saves PDFs into.
        corpus: rag's index jobs, so ``lit_import`` indexes what it saved; None: ``import_paper`` raises.
        http: the budgets, 429 windows and SSL context of this service's requests (default: a new
            :class:`~.http.HttpState`; every call of this service shares it).
    """

    def __init__(
        self,
        sources: Mapping[str, Any],
        lit: LiteratureSettings,
        *,
        engine: Callable[[], Engine] | None = None,
        roots: Sequence[Path] = (),
        corpus: Corpus | None = None,
        http: HttpState | None = None,
    ) -> None:
        self.sources: dict[str, Any] = dict(sources)
        self.lit = lit
        self._roots = list(roots)
        self.http = http if http is not None else HttpState(lit)
        self._engine = engine
        self._corpus = corpus
        #: the OPTIMADE filter grammar's parser (``lit_materials``), built on first use
        self._filter_parser: Any = None

    @property
    def roots(self) -> list[Path]:
        """The registered corpus roots ``lit_import`` saves into when the request names no host roots."""
        return list(self._roots)

    def fetcher(self, cache: bool = True) -> Fetcher:
        """A :class:`~.http.Fetcher` on this service's budgets (and its cache unless ``cache`` is False or it has
        none); use as ``async with service.fetcher() as f``. Raises AisacError for a malformed egress allow-list."""
        engine = self._engine() if cache and self._engine is not None else None
        return Fetcher(self.lit, engine, self.http)

    def cache_only(self) -> LiteratureService:
        """A copy of this service that answers from its response cache alone (replay mode: never the network),
        sharing its sources, cache and budgets (rag's identifier lookups read the cache first)."""
        return LiteratureService(
            self.sources,
            self.lit.model_copy(update={"replay": True}),
            engine=self._engine,
            roots=self._roots,
            corpus=self._corpus,
            http=self.http,
        )

    def reset(self) -> None:
        """Forget every budget and 429 window of this service."""
        self.http.reset()

    async def search(
        self,
        query: str,
        sources: list[str] | str | None = None,
        k: int = 10,
        year_from: int | None = None,
        year_to: int | None = None,
    ) -> SearchResult:
        """Search the sources concurrently and merge their ranked lists (:func:`~.paper.merge_papers`).

        Args: ``query`` non-empty text; ``sources`` names (default: every registered source); ``k`` merged papers
        wanted (1..1000; each source is asked for ``k``, clamped to its own maximum: arXiv 2000, PubMed 10000,
        Crossref 1000, OpenAlex 200, Semantic Scholar 100); ``year_from``/``year_to`` inclusive publication years.

        Returns ``{query, papers: [Paper...], count, sources: {name: status}, notes: [...]}``; papers outside the
        year range (when a source ignores the filter) are dropped.

        Raises LiteratureError: empty query, unknown source, k < 1, bad years.
        """
        if not isinstance(query, str) or not query.strip():
            raise LiteratureError("query is empty: give words to search for, e.g. 'transformer protein structure'")
        registry = self.sources
        names = normalise_sources(sources, registry)
        if not isinstance(k, int) or k < 1:
            raise LiteratureError(f"k={k!r}: give the number of papers wanted, 1 to {MAX_K}")
        notes = []
        if k > MAX_K:
            notes.append(f"k={k} exceeds the maximum of {MAX_K} merged papers: clamped to {MAX_K}")
            k = MAX_K
        _check_years(year_from, year_to)
        q = query.strip()
        async with self.fetcher() as f:
            results = await asyncio.gather(*[_guard(n, registry[n].search(f, q, k, year_from, year_to)) for n in names])
        ranked: dict[str, list[Paper]] = {}
        statuses: dict[str, SourceStatus] = {}
        for name, papers, st in results:
            cap = max_results(registry[name])
            if k > cap:
                st["k_requested"], st["k_max"] = k, cap
                notes.append(f"k={k} exceeds {name}'s maximum of {cap} per request: asked {name} for {cap}")
            if papers is not None:
                st["count"] = len(papers)
                st["from_cache"] = bool(f.cache_hits.get(name)) and not f.sent.get(name)
                _stamp(f, name, papers)
                ranked[name] = papers
            statuses[name] = st
        if statuses and all(st["status"] in ("unreachable", "timeout") for st in statuses.values()):
            detail = "; ".join(f"{n}: {st['status']}" for n, st in statuses.items())
            raise LiteratureUnreachable(
                f"all sources unreachable: offline? ({detail}). No paper was searched; check the network or "
                "proxy, or search the indexed documents with rag_search instead"
            )
        merged = merge_papers(ranked)
        if year_from or year_to:
            merged = [p for p in merged if p.year is None or ((year_from or 0) <= p.year <= (year_to or 9999))]
        papers_out = merged[:k]
        return {
            "query": q,
            "papers": [p.model_dump() for p in papers_out],
            "count": len(papers_out),
            "sources": statuses,
            "notes": notes,
        }

    async def get(self, identifier: str) -> GetResult:
        """One paper by identifier (see :func:`~.paper.parse_identifier`), from the sources that index that kind:
        DOI -> Crossref + OpenAlex + Semantic Scholar (merged); arXiv id -> arXiv; PMID -> PubMed (efetch, with
        abstract); PMCID -> OpenAlex + Semantic Scholar; S2 id -> Semantic Scholar; W id -> OpenAlex; plus every
        registered source that declares it answers that kind of identifier.

        Returns ``{identifier, kind, paper: Paper | None, sources: {name: status}}``; ``paper`` is None only when
        every source was throttled or failed (their statuses say why, e.g. ``rate_limited`` with ``retry_after``).

        Raises LiteratureError: malformed or unknown identifier; every source says not found.
        """
        kind, value = parse_identifier(identifier)
        chosen = routes(self.sources, kind)
        async with self.fetcher() as f:
            results = await asyncio.gather(*[_guard(n, fn(f, kind, value)) for n, fn in chosen])
        found = {n: [p] for n, p, _st in results if p is not None}
        for n, ps in found.items():
            _stamp(f, n, ps)
        statuses = {n: st for n, _p, st in results}
        if not found:
            if all(st["status"] == "not_found" for st in statuses.values()):
                raise LiteratureError(
                    f"no paper found for {kind} {value!r}: "
                    + "; ".join(st.get("error", "") for st in statuses.values())
                )
            return {"identifier": identifier, "kind": kind, "paper": None, "sources": statuses}
        paper = merge_papers(found)[0]
        return {"identifier": identifier, "kind": kind, "paper": paper.model_dump(), "sources": statuses}

    async def _graph(self, identifier: str, k: int, which: Literal["references", "citations"]) -> dict[str, Any]:
        kind, value = parse_identifier(identifier)
        if not isinstance(k, int) or k < 1:
            raise LiteratureError(f"k={k!r}: give the number of papers wanted, 1 to {semanticscholar.MAX_GRAPH}")
        notes = []
        if k > semanticscholar.MAX_GRAPH:
            notes.append(f"k={k} exceeds Semantic Scholar's maximum of {semanticscholar.MAX_GRAPH}: clamped")
            k = semanticscholar.MAX_GRAPH
        statuses: dict[str, SourceStatus] = {}
        async with self.fetcher() as f:
            papers = None
            if kind != "openalex":
                fn = semanticscholar.references if which == "references" else semanticscholar.citations
                _n, papers, statuses["semantic_scholar"] = await _guard("semantic_scholar", fn(f, kind, value, k))
            if papers is None and kind in ("doi", "pmid", "pmcid", "openalex"):
                fn2 = openalex.references if which == "references" else openalex.citations
                _n, papers, statuses["openalex"] = await _guard("openalex", fn2(f, kind, value, k))
        if papers is None and statuses and all(st["status"] == "not_found" for st in statuses.values()):
            raise LiteratureError(
                f"no paper found for {kind} {value!r}: " + "; ".join(st.get("error", "") for st in statuses.values())
            )
        for name, st in statuses.items():
            if st["status"] == "ok" and papers is not None:
                st["count"] = len(papers)
                _stamp(f, name, papers)
        return {
            "identifier": identifier,
            "kind": kind,
            which: [p.model_dump() for p in (papers or [])][:k],
            "count": len(papers or []),
            "sources": statuses,
            "notes": notes,
        }

    async def references(self, identifier: str, k: int = 100) -> ReferencesResult:
        """Papers ``identifier`` cites: Semantic Scholar ``/references``, else (throttled, failing, or an OpenAlex
        id) OpenAlex ``referenced_works``; ``k`` papers wanted (1..1000, clamped). Returns ``{identifier, kind,
        references: [Paper], count, sources, notes}``. Raises LiteratureError: malformed identifier, k < 1, not
        found anywhere."""
        return cast(ReferencesResult, await self._graph(identifier, k, "references"))

    async def citations(self, identifier: str, k: int = 100) -> CitationsResult:
        """Papers citing ``identifier``: Semantic Scholar ``/citations``, else OpenAlex ``filter=cites:``.
        Returns ``{identifier, kind, citations: [Paper], count, sources, notes}``. Errors as :meth:`references`."""
        return cast(CitationsResult, await self._graph(identifier, k, "citations"))

    async def materials(
        self,
        formula: str | None = None,
        elements: list[str] | str | None = None,
        filter: str | None = None,
        provider: str | None = None,
        k: int = 10,
        exact_elements: bool = True,
        with_structure: bool = False,
    ) -> MaterialsResult:
        """Computed materials records from an OPTIMADE provider (:mod:`.optimade`, OPTIMADE API v1.2).

        Args: ``formula`` a composition (``"LiFePO4"``; matched on OPTIMADE's ``chemical_formula_reduced``, so any
        spelling of the composition finds it); ``elements`` symbols the structures contain (``["Li", "Fe", "O"]``;
        only those when ``exact_elements``); ``filter`` an OPTIMADE filter of the caller's, AND-ed with the others;
        ``provider`` a name of ``lit_optimade_providers`` (default ``lit_optimade_provider``); ``k`` records wanted
        (1..100); ``with_structure`` adds each record's cell (lattice vectors, species, Cartesian positions in Å).

        Returns ``{provider, base_url, filter, query_url, records: [{provider, database_id, url, formula_reduced,
        elements, properties: {formation_energy_per_atom | energy_above_hull | band_gap: {value, unit, field}},
        provider_fields, retrieved_at, ...}], count, data_returned, more_data_available, from_cache, notes}``.

        Raises LiteratureError: nothing to look up, a bad formula / element / filter, an unknown provider, k out of
        range; :class:`~.optimade.ProviderUnreachable` when the provider cannot be reached (never an empty result
        then); the provider's refusals and failures (see :func:`~.optimade.lookup`).
        """
        from aisac_core.literature import optimade

        providers = self.lit.optimade_providers
        name = (provider or self.lit.optimade_provider or "").strip().lower()
        if name not in providers:
            raise LiteratureError(
                f"unknown OPTIMADE provider {str(provider)[:40]!r}: choose from {', '.join(sorted(providers)) or '(none)'}"
                " or add one to AISAC_LIT_OPTIMADE_PROVIDERS (name -> base URL)"
            )
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= optimade.MAX_RECORDS:
            raise LiteratureError(f"k={k!r}: give the number of records wanted, 1 to {optimade.MAX_RECORDS}")
        if self._filter_parser is None:
            self._filter_parser = await asyncio.to_thread(optimade.filter_parser)
        filter_text = optimade.build_filter(elements, formula, exact_elements, filter, self._filter_parser)
        async with self.fetcher() as f:
            return await optimade.lookup(f, name, providers[name], filter_text, k, with_structure)

    async def import_paper(
        self, identifier: str, root: str | None = None, roots: HostRoots | None = None
    ) -> ImportResult:
        """Download the open-access PDF of ``identifier`` into a registered root, write a provenance sidecar and
        start an index job.

        PDF URL: arXiv papers from ``lit_arxiv_pdf_url`` (arXiv's budget applies); others from the open-access
        PDF link their sources give (OpenAlex ``best_oa_location``, Semantic Scholar ``openAccessPdf``, Crossref
        ``link``). The file is ``<root>/<arxiv-ID|doi-DOI|pmid-N>.pdf``, written atomically; the sidecar
        ``<same>.provenance.json`` holds ``{source_url, final_url, retrieved_at, sha256, bytes, content_type,
        identifier, paper}``.

        Returns ``{status: imported | already_present, path, sidecar, sha256, bytes, source_url, job_id, paper}``;
        or ``{status: rate_limited, retry_after, ...}`` when the service is throttled.

        Raises LiteratureError: bad identifier; no corpus to index into (``corpus`` None); not found; no open-access
        PDF known; the download failed or the egress guard refused its URL or a redirect hop (a loopback, private or
        link-local address, a non-http(s) scheme: see :mod:`aisac_core.egress`; nothing is fetched from such an
        address); the download is not a PDF; too large; the root is outside the registered roots. In every error
        case nothing is saved and nothing is indexed.
        """
        parse_identifier(identifier)  # a bad identifier is reported before anything else
        if self.lit.replay:
            raise LiteratureError(
                "replay mode (AISAC_LIT_REPLAY=1) answers from the cache and downloads nothing; "
                "turn replay off to import a PDF"
            )
        target_dir = resolve_root(self.roots if roots is None else list(roots.roots), root)
        if self._corpus is None:
            raise LiteratureError("lit_import cannot index here: this literature service has no corpus to index into")
        corpus = self._corpus
        got = await self.get(identifier)
        if got["paper"] is None:
            limited = {n: st for n, st in got["sources"].items() if st["status"] == "rate_limited"}
            if limited:
                ra = max(st.get("retry_after", 0.0) for st in limited.values())
                return {
                    "status": "rate_limited",
                    "retry_after": ra,
                    "identifier": identifier,
                    "sources": got["sources"],
                }
            raise LiteratureError(
                f"cannot look up {identifier!r}: "
                + "; ".join(f"{n}: {st.get('error')}" for n, st in got["sources"].items())
            )
        paper = Paper(**got["paper"])
        if paper.arxiv_id:
            url, service = self.lit.arxiv_pdf_url.format(id=paper.arxiv_id), "arxiv"
        elif paper.pdf_url and paper.open_access is not False:
            url, service = paper.pdf_url, "download"
        else:
            raise LiteratureError(
                f"no open-access PDF is known for {identifier!r} (open_access="
                f"{paper.open_access}); download it yourself and put it into a registered root, "
                "then run rag_index"
            )
        max_bytes = int(self.lit.max_pdf_mb * 1024 * 1024)
        async with self.fetcher() as f:
            try:
                body, ctype, final_url = await f.download(url, max_bytes, service=service)
            except RateLimited as exc:
                return {
                    "status": "rate_limited",
                    "retry_after": round(exc.retry_after, 1),
                    "identifier": identifier,
                    "source_url": url,
                    "error": str(exc),
                }
            except (ServiceError, NotFound) as exc:
                raise LiteratureError(
                    f"cannot import {identifier!r}, its PDF was not downloaded: "
                    f"{str(exc).rstrip('.')}. Nothing was saved or indexed."
                ) from exc
        check_pdf(body, ctype, url)
        sha = sha256_bytes(body)
        name = _slug(paper)

        def _write() -> tuple[Path, Path, str]:
            target_dir.mkdir(parents=True, exist_ok=True)
            pdf = target_dir / f"{name}.pdf"
            status = "imported"
            if not pdf.is_symlink() and pdf.is_file() and sha256_file(pdf) == sha:
                status = "already_present"
            else:
                write_new(target_dir, pdf.name, body)
            side = target_dir / f"{name}.provenance.json"
            meta = {
                "source_url": url,
                "final_url": final_url,
                "retrieved_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "sha256": sha,
                "bytes": len(body),
                "content_type": ctype,
                "identifier": identifier,
                "paper": paper.model_dump(),
                "tool": "aisac lit_import",
            }
            write_new(target_dir, side.name, json.dumps(meta, indent=2, ensure_ascii=False).encode("utf-8"))
            return pdf, side, status

        try:
            pdf, side, status = await anyio.to_thread.run_sync(_write)
        except OSError as exc:
            raise LiteratureError(
                f"cannot write the PDF or its sidecar into {target_dir} ({exc.strerror or exc}): the folder must be a "
                "real folder of the root, not a symlink; nothing outside it was written"
            ) from exc
        job_id = await anyio.to_thread.run_sync(corpus.jobs.submit, [pdf])
        return {
            "status": status,
            "path": str(pdf),
            "sidecar": str(side),
            "sha256": sha,
            "bytes": len(body),
            "source_url": url,
            "job_id": job_id,
            "paper": paper.model_dump(),
        }


# --------------------------------------------------------------------------------------------------
# import helpers
# --------------------------------------------------------------------------------------------------

#: content types a PDF download may carry (anything else, e.g. text/html, is refused)
PDF_TYPES = (
    "application/pdf",
    "application/x-pdf",
    "application/octet-stream",
    "binary/octet-stream",
    "application/download",
    "application/force-download",
)


def check_pdf(body: bytes, content_type: str | None, url: str) -> None:
    """Refuse a download that is not a PDF: the ``%PDF-`` header must appear in the first 1024 bytes (ISO 32000-1
    §7.5.2; readers accept it within 1 KB), and the content type, when given, must not be HTML/text.

    Raises LiteratureError naming what was received (an HTML error page or login wall typically) by its kind,
    content type and size only: the body itself is never quoted."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    head = body[:1024]
    if b"%PDF-" not in head or (ctype and ctype not in PDF_TYPES and not ctype.endswith("pdf")):
        looks = (
            "an HTML page (an error page or a login wall)"
            if b"<html" in body[:2048].lower() or "html" in ctype
            else "not a PDF"
        )
        shown = "".join(ch for ch in ctype if ch.isascii() and (ch.isalnum() or ch in "/+-."))[:60]
        raise LiteratureError(
            f"the download from {url} is {looks}: content type {shown or 'none'}, {len(body)} bytes. Nothing was "
            "saved. The paper may not be open access: download it in a browser and put it into a registered root "
            "yourself."
        )


def write_new(folder: Path, name: str, data: bytes) -> Path:
    """Write ``data`` to ``folder/name`` without ever following a link planted there: the bytes go to a new file
    with a random name, created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (mode 0600; an existing file or a symlink
    at that name is an error, not a target), which is then renamed over ``name`` (a rename replaces a symlink
    itself, never the file it points to). ``folder`` is opened with ``O_NOFOLLOW | O_DIRECTORY`` and both steps
    go through its descriptor, so a folder swapped for a link meanwhile is refused too. Returns the path.

    Raises:
        OSError: the folder is a symlink or cannot be written (``ELOOP``/``ENOTDIR``), or the write failed (the
            partial file is removed).
    """
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        tmp = f".{name}.{secrets.token_hex(8)}.part"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)
    return folder / name


def _slug(paper: Paper) -> str:
    if paper.arxiv_id:
        base = f"arxiv-{paper.arxiv_id}"
    elif paper.doi:
        base = f"doi-{paper.doi}"
    elif paper.pmid:
        base = f"pmid-{paper.pmid}"
    else:
        base = f"{paper.source}-{paper.source_id}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base)[:150]


def resolve_root(roots: Sequence[Path], root: str | None) -> Path:
    """The target folder in the registered corpus ``roots``: a root by name or path, or a folder inside one
    (created). None -> the first root. Raises PathOutsideRootsError (a LiteratureError sibling) outside the roots."""

    roots = list(roots)
    if not roots:
        raise PathOutsideRootsError(
            "lit_import needs a registered corpus root to save the PDF into, and none is registered: set "
            "AISAC_ROOTS='[\"/folder/of/papers\"]' (or the project manifest's data sources) and pass root=<its name "
            "or a folder inside it>"
        )
    if root is None or root == "":
        return roots[0]
    by_name = [r for r in roots if r.name == root]
    if by_name and not Path(root).expanduser().is_absolute():
        return by_name[0]
    return resolve_in_roots(root, roots, what="root")
