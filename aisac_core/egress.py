"""Outbound network policy: which addresses a fetch of third-party URLs may reach (server-side request forgery guard).

URLs that come from third-party metadata (an OpenAlex or Crossref record's PDF link, a redirect) must not make this
process talk to the machine it runs on or to its network: the owner daemon listens on loopback with a bearer token,
cloud metadata services sit on link-local addresses, intranet services on private ones. The policy:

- only ``http`` and ``https`` URLs are fetched (every redirect hop is checked again);
- the host is resolved once (every address ``getaddrinfo`` gives), every address is classified, and the connection
  is made to one of those checked IP literals, so a second DNS answer (DNS rebinding) cannot change the target
  between the check and the connect; TLS still verifies the certificate against the URL's host name (httpcore sends
  the origin's host as ``server_hostname``);
- refused address classes (see :func:`address_class`): unspecified, loopback, link-local, multicast, shared address
  space, private, reserved and other special-purpose (not globally reachable) addresses, for IPv4 and IPv6, also
  when wrapped in an IPv6 form (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo);
- the allow-list (``settings.lit.allow_networks``, env ``AISAC_LIT_ALLOW_NETWORKS``) names host names, IP addresses
  or CIDR networks that may be reached although they are in a refused class (a mirror on the LAN).

:func:`transport` returns an httpx transport enforcing the policy: an ``httpcore.AsyncConnectionPool`` whose network
backend (:class:`GuardedBackend`) resolves and checks before it connects. A refused fetch raises
:class:`EgressRefused` before any byte is sent, so no response body of a refused address is ever read.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import httpcore
import httpx

from aisac_core.errors import AisacError

if TYPE_CHECKING:
    import ssl

    from aisac_core.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: the environment variable (JSON list) that feeds ``settings.lit.allow_networks``
ALLOW_ENV = "AISAC_LIT_ALLOW_NETWORKS"
#: URL schemes that are fetched at all
SCHEMES = ("http", "https")

_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # RFC 1122 §3.2.1.3: "this host on this network"
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # RFC 6598: shared address space (carrier-grade NAT)
_RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
_ULA = ipaddress.ip_network("fc00::/7")  # RFC 4193: unique local IPv6 unicast addresses
_V4_COMPATIBLE = ipaddress.ip_network("::/96")  # RFC 4291 §2.5.5.1 (deprecated IPv4-compatible form)
_V4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 §2.1 (SIIT IPv4-translated form)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 §2.1: NAT64 well-known prefix
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: local-use NAT64 prefix (embedding unknown)


class EgressRefused(AisacError):
    """An outbound fetch the policy refuses: a scheme other than http(s), or a host whose address is in a refused
    class and not allowed. ``host``, ``address`` (None for a scheme refusal) and ``reason`` (the address class or
    ``"scheme <name>"``) say which; the message says how to allow a trusted host."""

    def __init__(self, message: str, *, host: str, address: str | None, reason: str) -> None:
        self.host, self.address, self.reason = host, address, reason
        super().__init__(message)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address | None, str]:
    """The IPv4 address an IPv6 address stands for (and the form's name), else (None, "")."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, "IPv4-mapped IPv6"
    if ip in _V4_TRANSLATED:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "IPv4-translated IPv6"
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "NAT64"
    if ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    if ip.teredo is not None:
        return ip.teredo[1], "Teredo"
    if ip in _V4_COMPATIBLE and int(ip) > 1:  # :: and ::1 are the IPv6 unspecified and loopback addresses
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "IPv4-compatible IPv6"
    return None, ""


def address_class(ip: IPAddress | str) -> str | None:
    """The refused class of ``ip``, or None when it is a globally reachable (public) address.

    Args:
        ip: an ``ipaddress.IPv4Address`` / ``IPv6Address`` or its text form (an IPv6 zone ``%eth0`` is ignored).

    Returns: one of ``"unspecified"`` (0.0.0.0/8 of RFC 1122, ``::``), ``"loopback"`` (127/8, ``::1``; RFC 1122,
    RFC 4291 §2.5.3), ``"link-local"`` (169.254/16 of RFC 3927 - cloud metadata services -, fe80::/10 of RFC 4291),
    ``"multicast"``, ``"shared address space"`` (100.64/10, RFC 6598), ``"private"`` (10/8, 172.16/12, 192.168/16
    of RFC 1918; fc00::/7 of RFC 4193; the deprecated site-local fec0::/10 and NAT64 local-use 64:ff9b:1::/48),
    ``"reserved"`` (240/4 and the IETF-reserved IPv6 ranges), ``"special-purpose"`` (any other address Python's
    ``ipaddress`` does not report as ``is_global``, from the IANA special-purpose registries of RFC 6890:
    documentation, benchmarking, ...), or None. An IPv6 address wrapping an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``
    and IPv4-compatible ``::a.b.c.d`` of RFC 4291 §2.5.5, IPv4-translated of RFC 2765, NAT64 64:ff9b::/96 of RFC
    6052, 6to4 2002::/16 of RFC 3056, Teredo 2001::/32 of RFC 4380) is classified by the IPv4 address it wraps,
    e.g. ``"loopback (IPv4-mapped IPv6)"``. The properties used are those of Python's ``ipaddress`` module
    (https://docs.python.org/3/library/ipaddress.html).

    Raises:
        ValueError: ``ip`` is a string that is not an IP address.
    """
    if isinstance(ip, str):
        ip = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(int(ip))
        if ip.is_unspecified:
            return "unspecified"
        if ip.is_loopback:
            return "loopback"
        inner, form = _embedded_ipv4(ip)
        if inner is not None:
            cls = address_class(inner)
            return f"{cls} ({form})" if cls else None
        if ip in _NAT64_LOCAL or ip in _ULA or ip.is_site_local:
            return "private"
    if ip.is_unspecified or (isinstance(ip, ipaddress.IPv4Address) and ip in _THIS_NETWORK):
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return "shared address space"
    if isinstance(ip, ipaddress.IPv4Address) and any(ip in n for n in _RFC1918):
        return "private"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private or not ip.is_global:
        return "special-purpose"
    return None


def _host_key(host: str) -> str:
    """A host name as compared with the allow-list: lower case, no brackets, no trailing dot."""
    return host.strip().strip("[]").rstrip(".").lower()


class EgressPolicy:
    """The outbound policy: the http(s) scheme check and the address classes of :func:`address_class`, minus the
    allow-list.

    Args:
        allow: host names, IP addresses or CIDR networks (``"10.1.2.0/24"``, ``"fd00::/8"``, ``"mirror.lab"``)
            that may be reached although their address is in a refused class. A host name entry allows that name
            (whatever it resolves to); an address or network entry allows the addresses it contains (also inside
            an IPv4-mapped IPv6 form).
        setting: the setting's name quoted in refusal messages.

    Raises:
        AisacError: an entry that looks like a network (contains ``/``) but is not a valid one.
    """

    def __init__(self, allow: Iterable[str] = (), setting: str = ALLOW_ENV) -> None:
        self.setting = setting
        self.hosts: set[str] = set()
        self.networks: list[IPNetwork] = []
        for raw in allow:
            entry = _host_key(str(raw))
            if not entry:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry.split("%", 1)[0], strict=False))
            except ValueError:
                if "/" in entry:
                    raise AisacError(
                        f"{setting} entry {raw!r} is not a valid CIDR network: give a host name, an IP "
                        "address or a network such as 10.1.2.0/24"
                    ) from None
                self.hosts.add(entry)

    @classmethod
    def from_settings(cls, settings: Settings) -> EgressPolicy:
        """The literature fetch policy of ``settings`` (its ``lit.allow_networks``). Raises as the constructor."""
        return cls(settings.lit.allow_networks)

    def host_allowed(self, host: str) -> bool:
        """True when ``host`` (a name or address as written in a URL) is a host-name entry of the allow-list."""
        return _host_key(host) in self.hosts

    def address_allowed(self, ip: IPAddress) -> bool:
        """True when ``ip`` (or the IPv4 address it wraps) lies in an address or network entry of the allow-list."""
        candidates: list[IPAddress] = [ip]
        if isinstance(ip, ipaddress.IPv6Address):
            inner, _form = _embedded_ipv4(ipaddress.IPv6Address(int(ip)))
            if inner is not None:
                candidates.append(inner)
        return any(c.version == n.version and c in n for c in candidates for n in self.networks)

    def check_address(self, host: str, ip: IPAddress | str) -> None:
        """Refuse ``ip`` (one address ``host`` resolved to) when it is in a refused class and not allowed.

        Args: ``host`` the URL's host as written (for the message and the host-name allow-list); ``ip`` an
        ``ipaddress`` object or its text.

        Raises:
            EgressRefused: naming the host, the address, its class and the setting that would allow it.
        """
        ip_obj = ipaddress.ip_address(ip.split("%", 1)[0]) if isinstance(ip, str) else ip
        cls = address_class(ip_obj)
        if cls is None or self.host_allowed(host) or self.address_allowed(ip_obj):
            return
        shown = _host_key(host)
        try:
            literal = ipaddress.ip_address(shown.split("%", 1)[0]) == ip_obj
        except ValueError:
            literal = False
        via = "" if literal else f" resolves to {ip_obj}, which"
        article = "an" if cls[0] in "aeiou" else "a"
        raise EgressRefused(
            f"refused to connect to {shown}: the host{via} is {article} {cls} address, and outbound literature fetches "
            f"never reach loopback, private, link-local or other non-public addresses (a URL taken from paper "
            f"metadata could otherwise reach services on this machine or its network). Nothing was fetched. If "
            f"{shown} is a trusted mirror, allow it: {self.setting}='[\"{shown}\"]' (a host, an IP address or a "
            f"CIDR network such as 10.1.2.0/24).",
            host=shown,
            address=str(ip_obj),
            reason=cls,
        )

    def check_scheme(self, scheme: str, host: str = "") -> None:
        """Refuse a URL scheme other than http / https (``file:``, ``ftp:``, ``gopher:``, ...).

        Raises:
            EgressRefused: with ``reason`` ``"scheme <name>"``.
        """
        s = (scheme or "").lower()
        if s not in SCHEMES:
            raise EgressRefused(
                f"refused to fetch a {s or 'scheme-less'}: URL: only http and https URLs are "
                "fetched. Nothing was fetched.",
                host=_host_key(host),
                address=None,
                reason=f"scheme {s or 'none'}",
            )

    def check_url(self, url: str) -> None:
        """Pre-flight check of ``url`` without DNS: the scheme, and the host when it is an IP literal. The
        authoritative check happens again at connect time on every resolved address (:class:`GuardedBackend`).

        Raises:
            EgressRefused: a refused scheme, a missing host, or an IP-literal host in a refused class.
        """
        parts = urlsplit(url.strip())
        self.check_scheme(parts.scheme, parts.hostname or "")
        host = parts.hostname or ""
        if not host:
            raise EgressRefused(
                f"refused to fetch {url[:200]!r}: the URL has no host. Nothing was fetched.",
                host="",
                address=None,
                reason="no host",
            )
        try:
            ip = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return  # a name (or a numeric form only the resolver reads, e.g. 0x7f000001): checked at connect time
        self.check_address(host, ip)

    async def resolve(self, host: str, port: int, timeout: float | None = None) -> list[IPAddress]:
        """Every address ``host`` resolves to (an IP literal resolves to itself), each checked.

        Args: ``host`` a name or IP literal; ``port`` the TCP port; ``timeout`` seconds for the lookup.

        Returns: the addresses in resolver order, without duplicates.

        Raises:
            EgressRefused: any of the addresses is refused (a name that resolves to a public and a loopback address
                is refused as a whole).
            httpcore.ConnectError: the name does not resolve; httpcore.ConnectTimeout: the lookup timed out.
        """
        name = _host_key(host)
        try:
            addrs: list[IPAddress] = [ipaddress.ip_address(name.split("%", 1)[0])]
        except ValueError:
            try:
                with anyio.fail_after(timeout):
                    infos = await anyio.getaddrinfo(name, port, type=socket.SOCK_STREAM)
            except TimeoutError as exc:
                raise httpcore.ConnectTimeout(f"resolving {name} timed out") from exc
            except OSError as exc:
                raise httpcore.ConnectError(f"cannot resolve {name} ({exc})") from exc
            addrs = []
            for info in infos:
                ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
                if ip not in addrs:
                    addrs.append(ip)
            if not addrs:
                raise httpcore.ConnectError(f"cannot resolve {name} (no address)") from None
        for ip in addrs:
            self.check_address(host, ip)
        return addrs


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that resolves the host itself, checks every address with ``policy``, and connects
    to a checked IP literal through ``backend`` (default ``httpcore.AnyIOBackend()``). Unix sockets are refused.

    ``connect_tcp`` raises :class:`EgressRefused` (nothing connected), or what the wrapped backend raises for the
    last address tried (``httpcore.ConnectError`` / ``ConnectTimeout``).
    """

    def __init__(self, policy: EgressPolicy, backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.backend = backend if backend is not None else httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve ``host``, check every address, then connect to the first that answers (see the class)."""
        addrs = await self.policy.resolve(host, port, timeout)
        last: Exception | None = None
        for ip in addrs:
            try:
                return await self.backend.connect_tcp(
                    str(ip), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        """Always refused: outbound fetches go over TCP only. Raises EgressRefused."""
        raise EgressRefused(
            "refused to connect to a Unix socket: outbound fetches use TCP only.",
            host=path,
            address=None,
            reason="unix socket",
        )

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` (httpcore's connect retries)."""
        await self.backend.sleep(seconds)


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    """Re-raise httpcore's exceptions as the httpx exceptions of the same name (as httpx's own transport does)."""
    try:
        yield
    except httpcore.TimeoutException as exc:
        raise _translate(exc) from exc
    except (
        httpcore.NetworkError,
        httpcore.ProtocolError,
        httpcore.UnsupportedProtocol,
        httpcore.ProxyError,
        httpcore.PoolTimeout,
    ) as exc:
        raise _translate(exc) from exc


def _translate(exc: Exception) -> Exception:
    for cls in type(exc).__mro__:
        target = getattr(httpx, cls.__name__, None)
        if isinstance(target, type) and issubclass(target, httpx.TransportError):
            return target(str(exc))
    return httpx.TransportError(str(exc))


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        if hasattr(self._stream, "aclose"):
            with _httpx_errors():
                await self._stream.aclose()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport over an ``httpcore.AsyncConnectionPool`` whose backend is a :class:`GuardedBackend`.

    Every request (so every redirect hop httpx follows) has its scheme checked, then its connection checked at
    connect time. Args: ``policy``; ``ssl_context`` for https (default: httpcore's); ``limits`` (httpx.Limits).
    ``handle_async_request`` raises :class:`EgressRefused`, or httpx's transport errors.
    """

    def __init__(
        self, policy: EgressPolicy, ssl_context: ssl.SSLContext | None = None, limits: httpx.Limits | None = None
    ) -> None:
        lim = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
        self.policy = policy
        self.pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=lim.max_connections,
            max_keepalive_connections=lim.max_keepalive_connections,
            keepalive_expiry=lim.keepalive_expiry,
            network_backend=GuardedBackend(policy),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the guarded pool (see the class)."""
        self.policy.check_scheme(request.url.scheme, request.url.host)
        req = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _httpx_errors():
            resp = await self.pool.handle_async_request(req)
        return httpx.Response(
            status_code=resp.status,
            headers=resp.headers,
            stream=_ResponseStream(resp.stream),
            extensions=resp.extensions,
        )

    async def aclose(self) -> None:
        """Close the pool's connections."""
        await self.pool.aclose()


def transport(policy: EgressPolicy, ssl_context: ssl.SSLContext | None = None) -> GuardedTransport:
    """The httpx transport enforcing ``policy`` (pass it as ``httpx.AsyncClient(transport=...)``; the client then
    ignores proxy environment variables, so every connection is made, and checked, here). See
    :class:`GuardedTransport`."""
    return GuardedTransport(policy, ssl_context=ssl_context)
