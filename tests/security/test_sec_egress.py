"""Server-side request forgery through the literature server: third-party metadata (a Crossref record's PDF link)
or a redirect points lit_import / lit_search at this machine or its network. Every attack goes through the real
fetch path: the MCP tools on the suite, real httpx clients, real local HTTP servers (stdlib, in threads), and checks
containment - nothing connected, nothing read, nothing echoed, nothing saved or indexed."""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpcore
import pytest
from conftest import make_settings
from fastmcp import Client
from fastmcp.exceptions import ToolError
from fixtures_gen import make_pdf
from literature_replay import QuietHandler, ReplayServer

pytestmark = pytest.mark.anyio

META_HOST = "127.0.0.9"  # the literature services (metadata) live here, and only this address is allowed
SECRET = "s3cr3t-0wner-t0ken-4242"  # what the local services would leak
LOCAL_PDF = b"%PDF-1.4\n% " + SECRET.encode() + b"\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
JSON = {"Content-Type": "application/json"}


# --------------------------------------------------------------------------------------------------
# local servers
# --------------------------------------------------------------------------------------------------


class Local:
    """A stdlib HTTP server on ``host`` (IPv4 or IPv6) answering every GET with ``answer`` = (status, headers, body);
    ``log`` lists the request paths it received. Optional ``tls`` (an SSLContext) serves HTTPS."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        answer: tuple[int, dict[str, str], bytes] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.answer = answer or (200, {"Content-Type": "application/pdf"}, LOCAL_PDF)
        self.log: list[str] = []
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.log.append(self.path)
                self.reply(*outer.answer)

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
            daemon_threads = True

        self.httpd = Server((host, 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Local:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def meta():
    """The literature services' replay server, on META_HOST."""
    with ReplayServer(host=META_HOST) as srv:
        yield srv


@pytest.fixture
def victim():
    """A local service on 127.0.0.1 whose answer (a PDF) carries SECRET."""
    with Local("127.0.0.1") as v:
        yield v


@pytest.fixture
def connects(monkeypatch):
    """Every TCP connection httpcore's backend actually opens, as (host, port): the guard passes checked IP
    literals only, so a refused address never appears here."""
    seen: list[tuple[str, int]] = []
    real = httpcore.AnyIOBackend.connect_tcp

    async def spy(self, host, port, *a, **kw):  # noqa: ANN001, ANN202
        seen.append((host, port))
        return await real(self, host, port, *a, **kw)

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", spy)
    return seen


@pytest.fixture
def fake_dns(monkeypatch):
    """``fake_dns[name] = [ip, ...]``: names the resolver answers as an attacker's DNS server would."""
    table: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def lookup(host, port, *a, **kw):  # noqa: ANN001, ANN202
        name = host.decode() if isinstance(host, bytes) else host
        if name in table:
            return [
                (
                    socket.AF_INET6 if ":" in ip else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (ip, port) if ":" not in ip else (ip, port, 0, 0),
                )
                for ip in table[name]
            ]
        return real(host, port, *a, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    return table


def _core(
    tmp_path: Path,
    models_dir: Path,
    embedder,
    meta: ReplayServer,
    allow: list[str] | None = None,
    store: str = "store",
    **kw,
):
    from aisac_core.context import AppContext

    papers = tmp_path / "papers"
    papers.mkdir(exist_ok=True)
    opts = {**meta.settings_kwargs(), "lit_backoff_s": 0.01, "lit_retries": 2, "lit_timeout_s": 5.0, **kw}
    if allow is not None:
        opts["lit_allow_networks"] = allow
    return AppContext(
        make_settings(tmp_path / store, models_dir, roots=[papers], warm=False, **opts), embedder=embedder
    )


@pytest.fixture
def lit(tmp_path, models_dir, shared_embedder, meta):
    c = _core(tmp_path, models_dir, shared_embedder, meta)
    yield c
    c.close()


def _suite(core):
    from aisac_servers.serving.suite import build

    return build(["rag", "lit"], app=core, lifespan=False)  # the fixture closes the core


def _record(meta: ReplayServer, pdf_url: str, doi: str = "10.5555/evil.1") -> str:
    """Crossref answers the DOI with a record whose open-access PDF link is ``pdf_url`` (attacker-controlled)."""
    meta.script(
        "/crossref/works/",
        [
            (
                200,
                JSON,
                json.dumps(
                    {
                        "status": "ok",
                        "message": {
                            "DOI": doi,
                            "title": ["An innocent paper"],
                            "link": [{"URL": pdf_url, "content-type": "application/pdf"}],
                        },
                    }
                ).encode(),
            )
        ],
    )
    return doi


async def _import_refused(core, meta: ReplayServer, pdf_url: str, doi: str = "10.5555/evil.1") -> str:
    """lit_import of a paper whose PDF link is ``pdf_url``: must fail; returns the error text, after checking
    that nothing was saved nor indexed."""
    _record(meta, pdf_url, doi)
    async with Client(_suite(core)) as c:
        with pytest.raises(ToolError) as ei:
            await c.call_tool("lit_import", {"identifier": doi, "wait": True})
        docs = (await c.call_tool("rag_list_documents", {})).structured_content
    root = core.settings.rag.roots[0]
    assert list(root.iterdir()) == [], "nothing may be saved"
    assert docs["documents"] == [] and docs["total"] == 0, "nothing may be indexed"
    msg = str(ei.value)
    assert doi in msg and "Nothing was saved or indexed" in msg
    assert SECRET not in msg and "%PDF" not in msg
    return msg


def _only_meta(connects: list[tuple[str, int]]) -> bool:
    """True when connections were made (the metadata lookups: the spy works) and all of them to META_HOST."""
    return bool(connects) and all(h == META_HOST for h, _p in connects)


def _assert_refused(msg: str, host: str, cls: str) -> None:
    assert f"refused to connect to {host}" in msg, msg
    assert cls in msg and "AISAC_LIT_ALLOW_NETWORKS" in msg, msg


# --------------------------------------------------------------------------------------------------
# attacks through lit_import
# --------------------------------------------------------------------------------------------------


async def test_pdf_url_to_loopback_is_refused_and_the_local_pdf_never_saved(lit, meta, victim, connects):
    msg = await _import_refused(lit, meta, f"http://127.0.0.1:{victim.port}/paper.pdf")
    _assert_refused(msg, "127.0.0.1", "loopback")
    assert victim.log == [], "the local service must not receive a request"
    assert _only_meta(connects), connects


async def test_pdf_url_to_localhost_is_refused(lit, meta, victim, connects):
    msg = await _import_refused(lit, meta, f"http://localhost:{victim.port}/paper.pdf")
    _assert_refused(msg, "localhost", "loopback")
    assert "resolves to" in msg and victim.log == []
    assert _only_meta(connects), connects


async def test_pdf_url_to_ipv6_loopback_is_refused(lit, meta, connects):
    with Local("::1") as v6:
        msg = await _import_refused(lit, meta, f"http://[::1]:{v6.port}/paper.pdf")
    _assert_refused(msg, "::1", "loopback")
    assert v6.log == [] and _only_meta(connects)


async def test_pdf_url_to_unspecified_address_is_refused(lit, meta, victim, connects):
    # Linux delivers a connection to 0.0.0.0 to the local host
    msg = await _import_refused(lit, meta, f"http://0.0.0.0:{victim.port}/paper.pdf")
    _assert_refused(msg, "0.0.0.0", "unspecified")
    assert victim.log == [] and _only_meta(connects)


@pytest.mark.parametrize(
    "host,cls",
    [
        ("10.0.0.1", "private"),
        ("192.168.1.1", "private"),
        ("172.16.5.4", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "shared address space"),
        ("[fd00::1]", "private"),
        ("[fe80::1]", "link-local"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
    ],
)
async def test_private_and_metadata_addresses_are_refused_without_connecting(lit, meta, connects, host, cls):
    msg = await _import_refused(lit, meta, f"http://{host}/latest/meta-data/iam/paper.pdf")
    _assert_refused(msg, host.strip("[]"), cls)
    assert _only_meta(connects), f"a connection to {host} was attempted: {connects}"


@pytest.mark.parametrize(
    "wrapped,cls",
    [
        ("[::ffff:127.0.0.1]", "loopback (IPv4-mapped IPv6)"),
        ("[::ffff:169.254.169.254]", "link-local (IPv4-mapped IPv6)"),
        ("[64:ff9b::7f00:1]", "loopback (NAT64)"),
        ("[2002:7f00:1::1]", "loopback (6to4)"),
        ("[::127.0.0.1]", "loopback (IPv4-compatible IPv6)"),
    ],
)
async def test_ipv4_wrapped_in_ipv6_is_refused(lit, meta, victim, connects, wrapped, cls):
    msg = await _import_refused(lit, meta, f"http://{wrapped}:{victim.port}/paper.pdf")
    _assert_refused(msg, wrapped.strip("[]"), cls)
    assert victim.log == [] and _only_meta(connects)


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f000001", "127.000.000.001"])
async def test_numeric_spellings_of_loopback_are_refused(lit, meta, victim, connects, host):
    msg = await _import_refused(lit, meta, f"http://{host}:{victim.port}/paper.pdf")
    assert victim.log == [] and _only_meta(connects)
    assert "refused" in msg or "not valid" in msg


async def test_attacker_dns_name_resolving_to_loopback_is_refused(lit, meta, victim, connects, fake_dns):
    fake_dns["papers.evil.example"] = ["127.0.0.1"]
    fake_dns["mixed.evil.example"] = ["93.184.216.34", "127.0.0.1"]  # a public answer does not launder a private one
    msg = await _import_refused(lit, meta, f"http://papers.evil.example:{victim.port}/paper.pdf")
    _assert_refused(msg, "papers.evil.example", "loopback")
    assert "resolves to 127.0.0.1" in msg
    msg2 = await _import_refused(lit, meta, f"http://mixed.evil.example:{victim.port}/paper.pdf", "10.5555/evil.2")
    _assert_refused(msg2, "mixed.evil.example", "loopback")
    assert victim.log == [] and _only_meta(connects), connects


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://127.0.0.1/paper.pdf",
        "gopher://127.0.0.1:70/_x",
        "dict://127.0.0.1:11211/stat",
        "FILE:///etc/shadow",
    ],
)
async def test_non_http_schemes_are_refused(lit, meta, connects, url):
    msg = await _import_refused(lit, meta, url)
    assert "only http and https URLs are fetched" in msg, msg
    assert "root:" not in msg and _only_meta(connects)


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/paper.pdf",
        "http://localhost:{port}/x.pdf",
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
        "http://[::ffff:127.0.0.1]:{port}/paper.pdf",
    ],
)
async def test_redirect_hop_to_a_local_address_is_refused(
    tmp_path, models_dir, shared_embedder, meta, victim, connects, target
):
    """The first hop (a mirror on 127.0.0.2, allowed) redirects to an address that is not allowed."""
    location = target.format(port=victim.port)
    with Local("127.0.0.2", (302, {"Location": location}, b"")) as redirector:
        core = _core(tmp_path, models_dir, shared_embedder, meta, allow=[META_HOST, "127.0.0.2"])
        try:
            msg = await _import_refused(core, meta, f"http://127.0.0.2:{redirector.port}/paper.pdf")
        finally:
            core.close()
    assert redirector.log == ["/paper.pdf"], "the allowed first hop is fetched"
    assert victim.log == [], "the redirect target must not be reached"
    assert "refused" in msg and "AISAC_LIT_ALLOW_NETWORKS" in msg or "only http and https" in msg, msg
    assert {h for h, _p in connects} <= {META_HOST, "127.0.0.2"}, connects


async def test_owner_daemon_like_service_is_never_reached_by_any_request(
    tmp_path, models_dir, shared_embedder, meta, lit, connects
):
    """A loopback HTTP server holding a bearer token (like the owner daemon): neither a PDF link nor a service base
    URL pointing at it makes a request, and its token never appears in any answer."""
    body = json.dumps({"token": SECRET, "url": "http://127.0.0.1"}).encode()
    with Local("127.0.0.1", (200, JSON, body)) as owner:
        core = _core(
            tmp_path,
            models_dir,
            shared_embedder,
            meta,
            store="store-owner",
            lit_crossref_url=f"http://127.0.0.1:{owner.port}/mcp",
            lit_allow_networks=[META_HOST],
        )
        try:
            async with Client(_suite(core)) as c:
                found = await c.call_tool("lit_search", {"query": "owner token", "sources": ["crossref", "pubmed"]})
                got = await c.call_tool("lit_get", {"identifier": "10.5555/whatever"})
        finally:
            core.close()
        res = found.structured_content
        _assert_refused(res["sources"]["crossref"]["error"], "127.0.0.1", "loopback")
        assert res["sources"]["crossref"]["status"] == "blocked" and res["sources"]["pubmed"]["status"] == "ok"
        assert got.structured_content["sources"]["crossref"]["status"] == "blocked"
        assert SECRET not in json.dumps(res) + json.dumps(got.structured_content)
        msg = await _import_refused(lit, meta, f"http://127.0.0.1:{owner.port}/mcp", "10.5555/evil.3")
        _assert_refused(msg, "127.0.0.1", "loopback")
    assert owner.log == [] and _only_meta(connects), connects


async def test_error_bodies_of_allowed_servers_are_never_echoed(tmp_path, models_dir, shared_embedder, meta):
    """A server that is allowed but answers an error (4xx, or an HTML page instead of the PDF) never has its body
    quoted back: only the status code and its standard reason phrase, or the content type and size."""
    page = f"<html><body>internal {SECRET}</body></html>".encode()
    with Local("127.0.0.3", (200, {"Content-Type": "text/html"}, page)) as mirror:
        core = _core(tmp_path, models_dir, shared_embedder, meta, allow=[META_HOST, "127.0.0.3"])
        try:
            meta.script("/crossref", [(400, JSON, json.dumps({"message": SECRET}).encode())])
            async with Client(_suite(core)) as c:
                res = (await c.call_tool("lit_search", {"query": "x", "sources": ["crossref"]})).structured_content
            st = res["sources"]["crossref"]
            assert st["status"] == "refused" and "HTTP 400 Bad Request" in st["error"] and SECRET not in st["error"]
            doi = _record(meta, f"http://127.0.0.3:{mirror.port}/paper.pdf")
            async with Client(_suite(core)) as c:
                with pytest.raises(ToolError, match="HTML page") as ei:
                    await c.call_tool("lit_import", {"identifier": doi})
            assert SECRET not in str(ei.value) and "<html" not in str(ei.value)
            assert list(core.settings.rag.roots[0].iterdir()) == []
        finally:
            core.close()
    assert mirror.log == ["/paper.pdf"]


# --------------------------------------------------------------------------------------------------
# the allow-list lets a trusted mirror through
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bind,url_host,entry",
    [
        ("127.0.0.5", "127.0.0.5", "127.0.0.5"),
        ("127.0.0.5", "127.0.0.5", "127.0.0.0/29"),
        ("127.0.0.1", "localhost", "localhost"),
    ],
)
async def test_allow_list_lets_a_lan_mirror_through(
    tmp_path, models_dir, shared_embedder, meta, connects, bind, url_host, entry
):
    pdf = make_pdf(tmp_path / "mirror.pdf").read_bytes()
    with Local(bind, (200, {"Content-Type": "application/pdf"}, pdf)) as mirror:
        core = _core(tmp_path, models_dir, shared_embedder, meta, allow=[META_HOST, entry])
        try:
            doi = _record(meta, f"http://{url_host}:{mirror.port}/paper.pdf")
            async with Client(_suite(core)) as c:
                res = (await c.call_tool("lit_import", {"identifier": doi, "wait": True})).structured_content
        finally:
            core.close()
    assert res["status"] == "imported" and res["job"]["status"] == "done", res
    assert Path(res["path"]).read_bytes() == pdf and mirror.log == ["/paper.pdf"]
    # the connection went to the checked IP literal, never to a name the resolver could answer differently
    assert all(h[0].isdigit() or ":" in h for h, _p in connects) and (bind, mirror.port) in connects, connects


async def test_https_mirror_is_verified_against_the_url_host_while_connecting_to_the_checked_ip(
    tmp_path, monkeypatch, fake_dns, connects
):
    """Connecting to the checked IP literal keeps TLS correct: the SNI and the certificate check use the URL's host
    name (httpcore passes the origin's host as server_hostname)."""
    from aisac_core.literature.http import Fetcher, HttpState
    from aisac_core.settings import Settings

    cert, key = _self_signed(tmp_path, "mirror.test")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    sni: list[str | None] = []
    server_ctx.sni_callback = lambda sock, name, ctx: sni.append(name)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    fake_dns["mirror.test"] = ["127.0.0.6"]
    with Local("127.0.0.6", tls=server_ctx) as mirror:
        s = Settings(data_dir=tmp_path / "store", warm=False, lit_retries=1, lit_allow_networks=["mirror.test"])
        async with Fetcher(s.lit, None, HttpState(s.lit, ssl_context=client_ctx)) as f:
            body, _ctype, final = await f.download(f"https://mirror.test:{mirror.port}/p.pdf", 10**6)
        assert body == LOCAL_PDF and final == f"https://mirror.test:{mirror.port}/p.pdf"
        assert sni == ["mirror.test"] and connects == [("127.0.0.6", mirror.port)]
        # the same server under a name its certificate does not carry is refused by TLS
        fake_dns["other.test"] = ["127.0.0.6"]
        s2 = Settings(data_dir=tmp_path / "store", warm=False, lit_retries=1, lit_allow_networks=["other.test"])
        from aisac_core.literature.http import ServiceError

        async with Fetcher(s2.lit, None, HttpState(s2.lit, ssl_context=client_ctx)) as f:
            with pytest.raises(ServiceError, match="cannot connect"):
                await f.download(f"https://other.test:{mirror.port}/p.pdf", 10**6)


def _self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    c, k = folder / "cert.pem", folder / "key.pem"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return c, k


# --------------------------------------------------------------------------------------------------
# the classifier and the policy
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "addr,cls",
    [
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("::", "unspecified"),
        ("10.1.2.3", "private"),
        ("172.31.255.1", "private"),
        ("192.168.0.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("fec0::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("100.127.255.254", "shared address space"),
        ("224.0.0.251", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "special-purpose"),
        ("198.18.0.1", "special-purpose"),
        ("2001:db8::1", "special-purpose"),
        ("::ffff:10.0.0.1", "private (IPv4-mapped IPv6)"),
        ("::ffff:0:7f00:1", "loopback (IPv4-translated IPv6)"),
        ("2002:a9fe:a9fe::", "link-local (6to4)"),
        ("64:ff9b:1::1", "private"),
    ],
)
def test_address_class(addr, cls):
    from aisac_core.egress import address_class

    assert address_class(addr) == cls


def test_policy_allow_list_forms_and_bad_entries():
    import ipaddress

    from aisac_core.egress import EgressPolicy, EgressRefused
    from aisac_core.errors import AisacError

    p = EgressPolicy(["10.1.2.0/24", "Mirror.Lab.", "fd00::5", "[::1]"])
    p.check_address("x", ipaddress.ip_address("10.1.2.200"))
    p.check_address("x", "::ffff:10.1.2.7")  # mapped form of an allowed address
    p.check_address("mirror.lab", "192.168.7.7")  # allowed by name
    p.check_address("x", "fd00::5")
    p.check_address("x", "::1")
    p.check_address("x", "8.8.8.8")
    with pytest.raises(EgressRefused) as ei:
        p.check_address("x", "10.1.3.1")
    assert ei.value.reason == "private" and ei.value.address == "10.1.3.1"
    with pytest.raises(AisacError, match="not a valid CIDR"):
        EgressPolicy(["10.0.0.0/33"])
    with pytest.raises(EgressRefused, match="only http and https"):
        EgressPolicy().check_url("javascript:alert(1)")
