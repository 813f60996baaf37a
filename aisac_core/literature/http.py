"""HTTP for the literature clients: one shared budget per service, retries honouring Retry-After, the cache.

Politeness per service (the services' own published limits):

- arXiv: one request every 3 s on a single connection (arXiv API Terms of Use / User Manual, "Rate limits").
  Implemented as one request in flight at a time (a lock), an ``aiolimiter`` leaky bucket of 1 per interval,
  and a gap of at least ``lit_arxiv_interval_s`` counted from the previous *response*, so two requests
  never reach the server closer than the interval.
- NCBI E-utilities: 3 requests/s, 10/s with an API key (NCBI "A General Introduction to the E-utilities").
- Crossref: 5/s in the public pool, 10/s in the polite pool (a ``mailto``) (Crossref REST API docs, "Etiquette").
- OpenAlex: 10/s (OpenAlex docs, "Rate limits and authentication").
- Semantic Scholar: 1/s (the limit of an API key; unauthenticated calls share a pool) (S2 API docs).

Budgets are per literature service (:class:`HttpState`, one per store) and per (service, base URL): every
concurrent tool call on that store draws from the same one.
A 429 answer marks the service throttled until ``Retry-After`` has passed (default 60 s when the header is
absent); calls inside that window raise :class:`RateLimited` without sending a request. 500/502/503/504 and
network errors are retried up to ``lit_retries`` attempts with exponential back-off from ``lit_backoff_s``
(a ``Retry-After`` on the answer replaces the back-off; one above ``lit_max_retry_wait_s`` is not waited).

Cache: successful (200) bodies are stored in the ``lit_cache`` table keyed by sha256 of the normalised
request (service, path, sorted query parameters without credentials); entries older than
``lit_cache_ttl_s`` are not used. In replay mode (``lit_replay``) only the cache answers, whatever its age.

Outbound requests: every request (service API calls and PDF downloads, every redirect hop) goes through the egress
guard of :mod:`aisac_core.egress`: http(s) only, and no connection to a loopback, private, link-local or other
non-public address unless ``lit_allow_networks`` allows it (:class:`OutboundRefused`, kind ``blocked``). Error
messages never quote a response body: an HTTP error is reported by its status code and the standard reason
phrase of that code only (:func:`reason_phrase`).
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import hashlib
import json
import logging
import os
import socket
import ssl
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import anyio
import certifi
import httpx
from aiolimiter import AsyncLimiter
from sqlmodel import Session
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from aisac_core import egress
from aisac_core.egress import EgressPolicy, EgressRefused
from aisac_core.literature.paper import LiteratureError
from aisac_core.store.sql import lock
from aisac_core.store.tables import LitCacheEntry

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from aisac_core.settings import LiteratureSettings

log = logging.getLogger("aisac.literature")
T = TypeVar("T")

#: query parameters never part of a cache key (credentials and contact details)
SECRET_PARAMS = {"api_key", "mailto", "email", "tool", "x-api-key"}
#: Retry-After assumed when a 429 carries none (seconds)
DEFAULT_RETRY_AFTER = 60.0


class RateLimited(LiteratureError):
    """The service answered 429 (now or within its Retry-After window): ``retry_after`` seconds remain."""

    def __init__(self, service: str, retry_after: float) -> None:
        self.service, self.retry_after = service, max(0.0, retry_after)
        super().__init__(
            f"{service} is rate limiting us: retry after {self.retry_after:.0f} s "
            "(other sources still answer; the window is remembered, no request is sent before it ends)"
        )


class ServiceError(LiteratureError):
    """The service failed (an HTTP error status after retries, a refused request, or unreachable)."""

    def __init__(
        self,
        service: str,
        message: str,
        http_status: int | None = None,
        retry_after: float | None = None,
        kind: str = "error",
    ) -> None:
        self.service, self.http_status, self.retry_after, self.kind = service, http_status, retry_after, kind
        super().__init__(message)


class OutboundRefused(ServiceError):
    """The egress guard refused the request (a non-http(s) URL or a non-public address; see
    :mod:`aisac_core.egress`): nothing was sent. ``host``, ``address`` and ``reason`` come from the refusal."""

    def __init__(self, service: str, refusal: EgressRefused) -> None:
        self.host, self.address, self.reason = refusal.host, refusal.address, refusal.reason
        super().__init__(service, f"{service}: {refusal}", kind="blocked")


def reason_phrase(status: int) -> str:
    """The standard reason phrase of an HTTP status code (``"Bad Request"`` for 400; "" when unknown), from httpx's
    table of RFC 9110 phrases: never the phrase or the body the server sent, so no server text reaches a message."""
    return httpx.codes.get_reason_phrase(status)


class NotFound(LiteratureError):
    """The service has no record for the identifier."""

    def __init__(self, service: str, message: str) -> None:
        self.service = service
        super().__init__(message)


class ReplayMiss(LiteratureError):
    """Replay mode and the request is not in the cache."""

    def __init__(self, service: str, key: str) -> None:
        self.service = service
        super().__init__(
            f"replay mode (AISAC_LIT_REPLAY=1): {service} request {key[:12]} is not in the cache; "
            "replay answers only requests made (and cached) before. Turn replay off to fetch it."
        )


class BadResponse(ServiceError):
    """The service answered 200 with a body that cannot be parsed (truncated or malformed XML/JSON)."""

    def __init__(self, service: str, detail: str) -> None:
        super().__init__(
            service,
            f"{service} sent a response that cannot be parsed ({detail}); it was not cached. "
            "Try again later; if it persists the service may be failing.",
            kind="bad_response",
        )


def cache_key(service: str, url: str, params: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """sha256 of the normalised request and the request it stands for: (service, URL path, sorted params
    without :data:`SECRET_PARAMS`). The base URL's host is left out, so a mirror shares the entries."""
    path = urlsplit(url).path
    clean = {
        k: (str(v) if not isinstance(v, (list, tuple)) else [str(x) for x in v])
        for k, v in sorted((params or {}).items())
        if k.lower() not in SECRET_PARAMS and v is not None
    }
    req = {"service": service, "path": path, "params": clean}
    return hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest(), req


def cache_get(engine: Engine, key: str, ttl_s: float | None) -> LitCacheEntry | None:
    """The cached entry for ``key`` younger than ``ttl_s`` (any age when None), else None."""
    with Session(engine) as s:
        row = s.get(LitCacheEntry, key)
        if row is None or (ttl_s is not None and time.time() - row.created_at > ttl_s):
            return None
        s.expunge(row)
        return row


def cache_put(
    engine: Engine, key: str, service: str, request: dict[str, Any], body: str, content_type: str | None
) -> None:
    """Store (or refresh) a cached response."""
    with Session(engine) as s:
        lock(s, "lit_cache", key)  # get-or-create: two processes fetching the same request both succeed
        row = s.get(LitCacheEntry, key) or LitCacheEntry(
            key=key, service=service, request_json="", body="", created_at=0.0
        )
        row.request_json, row.body, row.content_type, row.created_at = (
            json.dumps(request),
            body,
            content_type,
            time.time(),
        )
        s.add(row)
        s.commit()


# --------------------------------------------------------------------------------------------------
# budgets
# --------------------------------------------------------------------------------------------------


@dataclass
class Policy:
    """Rate policy of a service: ``rate`` requests per ``period`` seconds (leaky bucket), ``serial`` = one
    request in flight, ``min_gap`` = seconds between the previous response and the next request."""

    rate: float
    period: float
    serial: bool = False
    min_gap: float = 0.0


class ServiceState:
    """The shared state of one service (kept by an :class:`HttpState`): its budget and the end of a 429 window."""

    def __init__(self, name: str, policy: Policy) -> None:
        self.name, self.policy = name, policy
        self.blocked_until = 0.0  # time.monotonic()
        self.last_response = -1e9  # time.monotonic() of the last response (serial services)
        self.requests = 0
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[asyncio.Lock, AsyncLimiter | None]
        ] = weakref.WeakKeyDictionary()

    def retry_after(self) -> float:
        """Seconds left in the current 429 window (0 when none)."""
        return max(0.0, self.blocked_until - time.monotonic())

    def block(self, seconds: float) -> None:
        """Start (or extend) a 429 window of ``seconds``."""
        self.blocked_until = max(self.blocked_until, time.monotonic() + seconds)

    def _loop_objects(self) -> tuple[asyncio.Lock, AsyncLimiter | None]:
        loop = asyncio.get_running_loop()
        got = self._per_loop.get(loop)
        if got is None:
            p = self.policy
            got = (asyncio.Lock(), AsyncLimiter(p.rate, p.period) if p.period > 0 and p.rate > 0 else None)
            self._per_loop[loop] = got
        return got

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait for this service's budget, then hold the slot while one request is made."""
        lock, limiter = self._loop_objects()
        if self.policy.serial:
            await lock.acquire()
        try:
            if limiter is not None:
                await limiter.acquire()
            if self.policy.min_gap > 0:
                wait = self.last_response + self.policy.min_gap - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            self.requests += 1
            try:
                yield
            finally:
                self.last_response = time.monotonic()
        finally:
            if self.policy.serial:
                lock.release()


def policy_for(service: str, lit: LiteratureSettings) -> Policy:
    """The documented rate policy of ``service`` under the literature settings ``lit`` (see the module docstring)."""
    if service == "arxiv":
        iv = lit.arxiv_interval_s
        return Policy(1, iv, serial=True, min_gap=iv)
    if service == "pubmed":
        return Policy(10 if os.environ.get(lit.ncbi_api_key_env) else 3, 1.0)
    if service == "crossref":
        return Policy(10 if lit.mailto else 5, 1.0)
    if service == "openalex":
        return Policy(10, 1.0)
    if service == "semantic_scholar":
        return Policy(1, 1.0)
    return Policy(2, 1.0)  # PDF downloads from other hosts


class HttpState:
    """The HTTP state one :class:`~.service.LiteratureService` shares between all its calls: a
    :class:`ServiceState` (budget, 429 window) per (service, base URL), created on first use with the policy of
    ``lit`` (:func:`policy_for`), and one SSL context for every client (building one costs ~50 ms: certificates are
    loaded; ``ssl_context`` replaces the default, e.g. a test's own CA).
    """

    def __init__(self, lit: LiteratureSettings, ssl_context: ssl.SSLContext | None = None) -> None:
        self.lit = lit
        self._ssl = ssl_context
        self._states: dict[tuple[str, str], ServiceState] = {}
        self._lock = threading.Lock()

    def state_for(self, service: str, base_url: str) -> ServiceState:
        """The :class:`ServiceState` of ``service`` at ``base_url`` (created on first use)."""
        key = (service, base_url)
        with self._lock:
            st = self._states.get(key)
            if st is None:
                st = self._states[key] = ServiceState(service, policy_for(service, self.lit))
            return st

    def ssl_context(self) -> ssl.SSLContext:
        """The SSL context of every client (certifi's CA bundle unless one was given; built on first use)."""
        with self._lock:
            if self._ssl is None:
                self._ssl = ssl.create_default_context(cafile=certifi.where())
            return self._ssl

    def reset(self) -> None:
        """Forget every budget and 429 window."""
        with self._lock:
            self._states.clear()


def _offline(exc: BaseException) -> bool:
    """Whether a transport error means this machine cannot reach the host at all: the name does not resolve
    (``socket.gaierror``) or the network / host is unreachable (ENETUNREACH, EHOSTUNREACH). One attempt is
    enough then: an offline search answers in under 2 s instead of retrying every source."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, socket.gaierror):
            return True
        if isinstance(e, OSError) and e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return True
        e = e.__cause__ or e.__context__
    text = str(exc).lower()
    return any(
        m in text
        for m in (
            "name or service not known",
            "temporary failure in name resolution",
            "nodename nor servname",
            "network is unreachable",
            "no address associated",
        )
    )


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP-date (RFC 9110 §10.2.3); None if absent/bad."""
    if not value:
        return None
    v = value.strip()
    try:
        return max(0.0, float(v))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    return max(0.0, dt.timestamp() - time.time())


# --------------------------------------------------------------------------------------------------
# the fetcher
# --------------------------------------------------------------------------------------------------


class _Retryable(Exception):
    def __init__(self, message: str, status: int | None, retry_after: float | None) -> None:
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


class Fetcher:
    """Makes the literature requests of one tool call: shared budgets, retries, cache, replay.

    ``lit``: the literature settings (sources read their base URLs and keys from ``fetcher.lit``); ``engine`` may be
    None (no cache); ``http``: the budgets, 429 windows and SSL context shared with other calls (default: a fresh
    :class:`HttpState`, shared with nothing). Use as ``async with Fetcher(lit, engine, http) as f``; a
    :class:`~.service.LiteratureService` makes its fetchers with :meth:`~.service.LiteratureService.fetcher`.

    Raises AisacError at construction for a malformed ``lit.allow_networks`` entry.
    """

    def __init__(self, lit: LiteratureSettings, engine: Engine | None, http: HttpState | None = None) -> None:
        self.lit, self.engine = lit, engine
        self.http = http if http is not None else HttpState(lit)
        #: per service: answers served from the cache, requests sent over the network
        self.cache_hits: dict[str, int] = {}
        self.sent: dict[str, int] = {}
        #: per service: the newest ``created_at`` (epoch s) of the cached answers used
        self.cached_at: dict[str, float] = {}
        self._client: httpx.AsyncClient | None = None
        #: the outbound policy (AISAC_LIT_ALLOW_NETWORKS); raises AisacError now for a malformed entry
        self.policy = EgressPolicy(lit.allow_networks)

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client, created on the first request (cache hits need none)."""
        if self._client is None:
            lit = self.lit
            mail = f" (mailto:{lit.mailto})" if lit.mailto else ""
            # the guarded transport checks every connection (and redirect hop) against the egress policy
            transport = egress.transport(self.policy, ssl_context=self.http.ssl_context())
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(lit.timeout_s),
                follow_redirects=True,
                transport=transport,
                headers={"User-Agent": f"aisac/0.1{mail}"},
            )
        return self._client

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._client is not None:
            await self._client.aclose()

    def _wait(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        ra = getattr(exc, "retry_after", None)
        if ra is not None:
            return float(ra)
        return float(self.lit.backoff_s * (2 ** (retry_state.attempt_number - 1)))

    async def fetch(
        self,
        service: str,
        url: str,
        params: dict[str, Any] | None,
        parse: Callable[[str], T],
        *,
        headers: dict[str, str] | None = None,
        base_url: str | None = None,
    ) -> tuple[T, bool]:
        """GET ``url`` for ``service`` and parse the 200 body with ``parse``; returns (parsed, from_cache).

        A fresh cached body is used instead of a request; a body is cached only after ``parse`` succeeded (a
        cached body that no longer parses is dropped and fetched again).

        Raises:
            RateLimited: 429 now, or still inside an earlier 429 window (no request sent then).
            NotFound: 404.
            ServiceError: another 4xx; 5xx or network errors after ``lit_retries`` attempts (``kind``
                ``unreachable`` for connection failures, ``timeout`` for time-outs).
            BadResponse: ``parse`` failed on the body (``parse`` raises it, or ValueError / ParseError).
            ReplayMiss: replay mode and not cached.
            ServiceError: kind ``timeout`` also when the request, its retries and its body take longer than
                ``lit.request_deadline_s`` in all.
        """
        lit = self.lit
        key, req = cache_key(service, url, params)
        engine = self.engine
        if engine is not None and (lit.replay or lit.cache_ttl_s > 0):
            row = await anyio.to_thread.run_sync(cache_get, engine, key, None if lit.replay else lit.cache_ttl_s)
            if row is not None:
                try:
                    parsed_cached = parse(row.body)
                    self.cache_hits[service] = self.cache_hits.get(service, 0) + 1
                    self.cached_at[service] = max(self.cached_at.get(service, 0.0), row.created_at)
                    return parsed_cached, True
                except Exception:
                    await anyio.to_thread.run_sync(self._forget, key)
        if lit.replay:
            raise ReplayMiss(service, key)
        state = self.http.state_for(service, base_url or url)
        if state.retry_after() > 0:
            raise RateLimited(service, state.retry_after())
        self.sent[service] = self.sent.get(service, 0) + 1
        deadline = lit.request_deadline_s
        try:
            with anyio.fail_after(deadline):  # the whole request: connection, retries, every byte of the body
                resp = await self._request(service, state, url, params, headers)
                text = resp.text
        except TimeoutError as exc:
            raise ServiceError(
                service,
                f"{service} did not answer within {deadline:g} s (AISAC_LIT_REQUEST_DEADLINE_S): the service is too "
                "slow or sends its answer too slowly; try again later",
                kind="timeout",
            ) from exc
        try:
            parsed = parse(text)
        except LiteratureError:
            raise
        except Exception as exc:
            raise BadResponse(service, f"{type(exc).__name__}: {exc}") from exc
        if engine is not None and lit.cache_ttl_s > 0:
            await anyio.to_thread.run_sync(cache_put, engine, key, service, req, text, resp.headers.get("content-type"))
        return parsed, False

    def _forget(self, key: str) -> None:
        assert self.engine is not None
        with Session(self.engine) as db:
            row = db.get(LitCacheEntry, key)
            if row is not None:
                db.delete(row)
                db.commit()

    async def _request(
        self,
        service: str,
        state: ServiceState,
        url: str,
        params: dict[str, Any] | None,
        headers: dict[str, str] | None,
        stream: bool = False,
    ) -> httpx.Response:
        lit = self.lit
        retrying = AsyncRetrying(
            stop=stop_after_attempt(lit.retries),
            wait=self._wait,
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if state.retry_after() > 0:
                        raise RateLimited(service, state.retry_after())
                    async with state.slot():
                        try:
                            if stream:
                                req = self.client.build_request("GET", url, params=params, headers=headers)
                                resp = await self.client.send(req, stream=True)
                            else:
                                resp = await self.client.get(url, params=params, headers=headers)
                        except EgressRefused as exc:
                            raise OutboundRefused(service, exc) from exc
                        except httpx.InvalidURL as exc:
                            raise ServiceError(
                                service, f"{service}: the URL is not valid ({exc}); nothing was fetched", kind="refused"
                            ) from exc
                        except httpx.TimeoutException as exc:
                            raise _Retryable(
                                f"timed out after {lit.timeout_s:g} s ({type(exc).__name__})", None, None
                            ) from exc
                        except httpx.TransportError as exc:
                            if _offline(exc):  # no name resolution / no route: retrying cannot help, fail fast
                                raise ServiceError(
                                    service,
                                    f"{service}: cannot reach the host ({type(exc).__name__}: {exc}); offline? "
                                    "check the network (or the base URL in AISAC_LIT_*_URL)",
                                    kind="unreachable",
                                ) from exc
                            raise _Retryable(f"cannot connect ({type(exc).__name__}: {exc})", None, None) from exc
                        if stream and resp.status_code >= 300:
                            await resp.aclose()  # an error body is never read (nor quoted)
                    return self._check(service, state, resp)
        except _Retryable as exc:
            kind = ("timeout" if "timed out" in str(exc) else "unreachable") if exc.status is None else "error"
            what = f"HTTP {exc.status}" if exc.status else str(exc)
            hint = (
                "check the network (or the base URL in AISAC_LIT_*_URL)"
                if exc.status is None
                else "the service is failing; try again later"
            )
            raise ServiceError(
                service,
                f"{service} failed after {lit.retries} attempts: {what}; {hint}",
                http_status=exc.status,
                retry_after=exc.retry_after,
                kind=kind,
            ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _check(self, service: str, state: ServiceState, resp: httpx.Response) -> httpx.Response:
        code = resp.status_code
        if code < 300:
            return resp
        ra = parse_retry_after(resp.headers.get("retry-after"))
        if code == 429:
            state.block(ra if ra is not None else DEFAULT_RETRY_AFTER)
            raise RateLimited(service, state.retry_after())
        if code in (500, 502, 503, 504):
            if ra is not None and ra > self.lit.max_retry_wait_s:
                raise ServiceError(
                    service,
                    f"{service} is unavailable (HTTP {code}) and asks to retry after {ra:.0f} s",
                    http_status=code,
                    retry_after=ra,
                    kind="unavailable",
                )
            raise _Retryable(f"HTTP {code}", code, ra)
        if code == 404:
            raise NotFound(service, f"{service} has no such record (HTTP 404 for {resp.url})")
        phrase = reason_phrase(code)
        raise ServiceError(
            service,
            f"{service} refused the request (HTTP {code}{' ' + phrase if phrase else ''}); "
            "check the query or identifier",
            http_status=code,
            kind="refused",
        )

    async def download(self, url: str, max_bytes: int, service: str = "download") -> tuple[bytes, str | None, str]:
        """Stream ``url`` (following redirects) up to ``max_bytes``; returns (body, content type, final URL).

        Uses ``service``'s budget (``arxiv`` for arXiv PDFs). Raises the same errors as :meth:`fetch`,
        :class:`OutboundRefused` for a URL (or a redirect hop) the egress policy refuses - checked before the budget
        is used and again at connect time; no byte is read from a refused address -, and :class:`LiteratureError`
        when the body exceeds ``max_bytes``; :class:`ServiceError` (kind ``timeout``) when the whole download takes
        longer than ``lit.download_deadline_s``. Never cached.
        """
        if self.lit.replay:
            raise LiteratureError("replay mode (AISAC_LIT_REPLAY=1) downloads nothing; turn replay off to import")
        try:
            self.policy.check_url(url)
        except EgressRefused as exc:
            raise OutboundRefused(service, exc) from exc
        parts = urlsplit(url)
        base = f"{parts.scheme}://{parts.netloc}" if service == "download" else self._base_for(service)
        state = self.http.state_for(service, base)
        if state.retry_after() > 0:
            raise RateLimited(service, state.retry_after())
        deadline = self.lit.download_deadline_s
        chunks: list[bytes] = []
        try:
            with anyio.fail_after(deadline):  # the whole download, whatever pace the server sends at
                resp = await self._request(service, state, url, None, None, stream=True)
                try:
                    size = 0
                    async for chunk in resp.aiter_bytes():
                        size += len(chunk)
                        if size > max_bytes:
                            raise LiteratureError(
                                f"the download from {url} exceeds {max_bytes / 1e6:.0f} MB "
                                "(AISAC_LIT_MAX_PDF_MB); nothing was saved"
                            )
                        chunks.append(chunk)
                finally:
                    with anyio.CancelScope(shield=True):
                        await resp.aclose()
        except TimeoutError as exc:
            raise ServiceError(
                service,
                f"the download from {url} did not finish within {deadline:g} s (AISAC_LIT_DOWNLOAD_DEADLINE_S): "
                "the server sends too slowly; nothing was saved",
                kind="timeout",
            ) from exc
        return b"".join(chunks), resp.headers.get("content-type"), str(resp.url)

    def _base_for(self, service: str) -> str:
        lit = self.lit
        return {
            "arxiv": lit.arxiv_url,
            "pubmed": lit.pubmed_url,
            "crossref": lit.crossref_url,
            "openalex": lit.openalex_url,
            "semantic_scholar": lit.s2_url,
        }.get(service, service)
