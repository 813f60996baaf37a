"""A local HTTP server on 127.0.0.1 that replays literature API responses (tests only).

Routes (each service under its own prefix, so the Settings base URLs point at ``<url>/arxiv/query``,
``<url>/eutils``, ``<url>/crossref``, ``<url>/openalex``, ``<url>/s2``, ``<url>/pdf/{id}``):

- with ``shared`` (../shared/data/api_fixtures): the real recorded bodies (arXiv Atom feeds by id_list, the
  "testing" search feed; PubMed esearch/esummary/efetch XML; Crossref and OpenAlex JSON from the paperqa
  cassettes; Semantic Scholar paper-by-DOI bodies), with their recorded status codes;
- else the project's own small fixtures in tests/fixtures/literature.

``script(prefix, [(status, headers, body), ...])`` queues canned answers (consumed in order) for requests whose
path starts with ``prefix``: 429 with Retry-After, 500, 503, truncated bodies... (a header ``X-Test-Delay: s``
is not sent but delays the answer by s seconds; ``X-Test-Drip: s`` sends the body one byte every s seconds, a
server that never times a read out). Every request is logged with
``time.monotonic()`` at arrival: ``requests(prefix)``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

OWN = Path(__file__).parent / "fixtures" / "literature"

Answer = tuple[int, dict[str, str], bytes]


def _read(p: Path) -> bytes:
    return p.read_bytes()


class QuietHandler(BaseHTTPRequestHandler):
    """An HTTP/1.1 request handler for the tests' local servers: no request log, one call to send a whole answer."""

    protocol_version = "HTTP/1.1"

    def reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
        """Send ``status``, ``headers`` and ``body`` (with its Content-Length)."""
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: object) -> None:
        pass


class ReplayServer:
    """See the module docstring. Use as a context manager; ``url`` is ``http://<host>:<port>`` (``host`` an IPv4
    address, 127.0.0.1 by default: Linux routes all of 127/8 to the loopback interface)."""

    def __init__(self, shared: Path | None = None, pdf: bytes | None = None, host: str = "127.0.0.1") -> None:
        self.shared = shared
        self.pdf = pdf
        self.log: list[tuple[float, str, dict[str, list[str]]]] = []
        self.headers: list[dict[str, str]] = []  # request headers, parallel to ``log``
        self._scripts: list[tuple[str, list[Answer]]] = []
        self._lock = threading.Lock()
        self._load()
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802
                t = time.monotonic()
                parts = urlsplit(self.path)
                q = parse_qs(parts.query, keep_blank_values=True)
                with outer._lock:
                    outer.log.append((t, parts.path, q))
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, headers, body = outer._answer(parts.path, q)
                headers = dict(headers)
                delay = float(headers.pop("X-Test-Delay", 0))
                drip = float(headers.pop("X-Test-Drip", 0))
                if delay:
                    time.sleep(delay)  # a slow service (time-out tests)
                if drip:  # one byte at a time: each read arrives well within a read time-out
                    self.send_response(status)
                    for k, v in {**headers, "Content-Length": str(len(body))}.items():
                        self.send_header(k, v)
                    self.end_headers()
                    try:
                        for i in range(len(body)):
                            self.wfile.write(body[i : i + 1])
                            self.wfile.flush()
                            time.sleep(drip)
                    except OSError:  # the client gave up
                        pass
                    return
                self.reply(status, headers, body)

        self.host = host
        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---------------------------------------------------------------------------------------------
    def script(self, prefix: str, answers: list[Answer]) -> None:
        """Queue canned answers for paths starting with ``prefix`` (consumed first-in first-out)."""
        with self._lock:
            self._scripts.append((prefix, list(answers)))

    def requests(self, prefix: str = "") -> list[tuple[float, str, dict[str, list[str]]]]:
        """Logged requests whose path starts with ``prefix``."""
        with self._lock:
            return [r for r in self.log if r[1].startswith(prefix)]

    def settings_kwargs(self) -> dict[str, Any]:
        """Settings fields pointing every literature service at this server, and allowing its loopback address
        through the egress guard (aisac_core.egress refuses loopback unless ``lit_allow_networks`` lists it)."""
        return {
            "lit_arxiv_url": f"{self.url}/arxiv/query",
            "lit_arxiv_pdf_url": f"{self.url}/pdf/{{id}}",
            "lit_pubmed_url": f"{self.url}/eutils",
            "lit_crossref_url": f"{self.url}/crossref",
            "lit_openalex_url": f"{self.url}/openalex",
            "lit_s2_url": f"{self.url}/s2",
            "lit_allow_networks": [self.host],
        }

    # ---------------------------------------------------------------------------------------------
    def _load(self) -> None:
        """Index the recorded bodies."""
        self.arxiv_ids: dict[str, tuple[int, bytes]] = {}
        self.decoded: dict[str, tuple[int, bytes]] = {}  # recorded URI path (unquoted) -> body
        self.efetch: dict[str, bytes] = {}
        if self.shared is None:
            return
        ax = self.shared / "arxiv"
        for f in ax.glob("*.json"):
            d = json.loads(f.read_text())
            q = parse_qs(urlsplit(d["url"]).query, keep_blank_values=True)
            if q.get("id_list", [""])[0]:
                self.arxiv_ids[q["id_list"][0]] = (d["status_code"], d["body"].encode("utf-8"))
        cas = self.shared / "paperqa_cassettes"
        for e in json.loads((cas / "decoded_index.json").read_text()):
            path = unquote(urlsplit(e["uri"]).path)
            self.decoded.setdefault(path, (e["status"], (cas / e["file"]).read_bytes()))
        pm = self.shared / "pubmed_entrez_biopython"
        import re

        for f in pm.glob("pubmed*.xml"):
            m = re.search(rb"<PMID[^>]*>(\d+)</PMID>", f.read_bytes())
            if m:
                self.efetch[m.group(1).decode()] = f.read_bytes()

    def _answer(self, path: str, q: dict[str, list[str]]) -> Answer:
        with self._lock:
            for i, (prefix, answers) in enumerate(self._scripts):
                if path.startswith(prefix) and answers:
                    ans = answers.pop(0)
                    if not answers:
                        self._scripts.pop(i)
                    return ans
        xml = {"Content-Type": "application/xml; charset=UTF-8"}
        atom = {"Content-Type": "application/atom+xml; charset=utf-8"}
        js = {"Content-Type": "application/json"}
        sh = self.shared
        if path.startswith("/pdf/"):
            if self.pdf is None:
                return 404, {"Content-Type": "text/html"}, b"<html><body>No such PDF</body></html>"
            return 200, {"Content-Type": "application/pdf"}, self.pdf
        if path.startswith("/arxiv/"):
            ids = q.get("id_list", [""])[0]
            if ids:
                if ids in self.arxiv_ids:
                    st, body = self.arxiv_ids[ids]
                    return st, atom, body
                if ids.startswith("2101.00001") or ids.startswith("2102.00002"):
                    body = _read(OWN / "arxiv_search.xml")
                    if ids.startswith("2102"):  # keep only the second entry
                        text = body.decode()
                        a, b = text.index("<entry>"), text.index("</entry>") + len("</entry>")
                        body = (text[:a] + text[b:]).encode()
                    else:
                        text = body.decode()
                        a = text.index("<entry>", text.index("</entry>"))
                        b = text.rindex("</entry>") + len("</entry>")
                        body = (text[:a] + text[b:]).encode()
                    return 200, atom, body
                return 200, atom, _read(OWN / "arxiv_empty.xml")
            if sh is not None:
                d = json.loads((sh / "arxiv" / "q_testing_s0_m10_bc5a6c384fe9.json").read_text())
                return 200, atom, d["body"].encode("utf-8")
            return 200, atom, _read(OWN / "arxiv_search.xml")
        if path.startswith("/eutils/"):
            name = path.rsplit("/", 1)[-1]
            term = q.get("term", [""])[0]
            if name == "esearch.fcgi":
                if "zzqx" in term:
                    return (
                        200,
                        xml,
                        (
                            _read(sh / "pubmed_entrez_biopython" / "esearch8.xml")
                            if sh
                            else _read(OWN / "pubmed_esearch_empty.xml")
                        ),
                    )
                return (
                    200,
                    xml,
                    (
                        _read(sh / "pubmed_entrez_biopython" / "esearch1.xml")
                        if sh
                        else _read(OWN / "pubmed_esearch.xml")
                    ),
                )
            if name == "esummary.fcgi":
                return (
                    200,
                    xml,
                    (
                        _read(sh / "pubmed_entrez_biopython" / "esummary1.xml")
                        if sh
                        else _read(OWN / "pubmed_esummary.xml")
                    ),
                )
            if name == "efetch.fcgi":
                pmid = q.get("id", [""])[0]
                if pmid in self.efetch:
                    return 200, xml, self.efetch[pmid]
                if pmid == "31000001":
                    return 200, xml, _read(OWN / "pubmed_efetch.xml")
                return 200, xml, b'<?xml version="1.0" ?>\n<PubmedArticleSet></PubmedArticleSet>\n'
            return 404, xml, b"<error>unknown E-utility</error>"
        if path.startswith("/crossref/works"):
            rest = unquote(path[len("/crossref/works") :]).lstrip("/")
            if not rest:
                if sh is not None:
                    return (
                        200,
                        js,
                        _read(
                            sh
                            / "paperqa_cassettes"
                            / "decoded"
                            / "test_title_search_paper_attributes2___00_crossref.json"
                        ),
                    )
                return 200, js, _read(OWN / "crossref_works.json")
            if f"/works/{rest}" in self.decoded:
                st, body = self.decoded[f"/works/{rest}"]
                return st, (js if st == 200 else {"Content-Type": "text/plain"}), body
            if rest.lower() == "10.5555/aisac.2021.001":
                return 200, js, _read(OWN / "crossref_work.json")
            return 404, {"Content-Type": "text/plain"}, b"Resource not found."
        if path.startswith("/openalex/works"):
            rest = unquote(path[len("/openalex/works") :]).lstrip("/")
            if not rest:
                flt = q.get("filter", [""])[0]
                if flt.startswith("openalex:") or flt.startswith("cites:"):
                    return 200, js, _read(OWN / "openalex_refs.json")
                if sh is not None:
                    return (
                        200,
                        js,
                        _read(
                            sh
                            / "paperqa_cassettes"
                            / "decoded"
                            / "test_title_search_paper_attributes2___03_openalex.json"
                        ),
                    )
                return 200, js, _read(OWN / "openalex_works.json")
            if f"/works/{rest}" in self.decoded:
                st, body = self.decoded[f"/works/{rest}"]
                return st, (js if st == 200 else {"Content-Type": "text/html"}), body
            if rest.lower() in (
                "w1000001",
                "https://doi.org/10.5555/aisac.2021.001",
                "pmid:31000001",
                "pmcid:pmc9000001",
            ):
                return 200, js, _read(OWN / "openalex_work.json")
            return 404, {"Content-Type": "text/html"}, b"<!doctype html>\n<title>404 Not Found</title>"
        if path.startswith("/s2/paper/"):
            rest = unquote(path[len("/s2/paper/") :])
            if rest == "search":
                return 200, js, _read(OWN / "s2_search.json")
            if rest.endswith("/references"):
                base, kind = rest[: -len("/references")], "s2_references.json"
            elif rest.endswith("/citations"):
                base, kind = rest[: -len("/citations")], "s2_citations.json"
            else:
                base, kind = rest, "s2_paper.json"
            recorded = self.decoded.get(f"/graph/v1/paper/{base}")
            if recorded is not None and kind == "s2_paper.json":
                return recorded[0], js, recorded[1]
            known = {
                "doi:10.5555/aisac.2021.001",
                "arxiv:2101.00001",
                "pmid:31000001",
                "pmcid:9000001",
                "0123456789abcdef0123456789abcdef012345ab",
                "corpusid:111",
            }
            if base.lower() in known:
                return 200, js, _read(OWN / kind)
            return 404, js, b'{"error": "Paper not found"}'
        return 404, {"Content-Type": "text/plain"}, b"no such route"
