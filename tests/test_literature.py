"""Literature server on the project's own small fixtures: real httpx clients against a local HTTP
server on 127.0.0.1 (tests/literature_replay.py), real SQLite cache, real MCP client on the suite."""

from __future__ import annotations

import asyncio
import socket

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from literature_replay import ReplayServer
from sqlmodel import Session, select

pytestmark = pytest.mark.both_engines

XML = {"Content-Type": "application/xml"}
JSON = {"Content-Type": "application/json"}
ALL = ["arxiv", "pubmed", "crossref", "openalex", "semantic_scholar"]
DOI = "10.5555/aisac.2021.001"


# --------------------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def replay():
    with ReplayServer() as srv:
        yield srv


def _core(tmp_path, srv: ReplayServer, **kw):
    from aisac_core.context import AppContext
    from aisac_core.settings import Settings

    opts = {
        **srv.settings_kwargs(),
        "lit_backoff_s": 0.01,
        "lit_arxiv_interval_s": 0.05,
        "lit_retries": 3,
        "warm": False,
        "roots": [tmp_path / "papers"],
        **kw,
    }
    return AppContext(Settings(data_dir=tmp_path / "store", **opts))  # budgets and 429 windows: fresh per store


@pytest.fixture
def lit_core(tmp_path, replay):
    core = _core(tmp_path, replay)
    yield core
    core.close()


def _suite(core):
    from aisac_servers.serving.suite import build

    return build(["lit"], app=core, lifespan=False)  # the test closes its core


def _valid(result_type: str, data: dict) -> dict:
    """``data`` validated against the declared output schema of ``result_type`` (in aisac_core.literature.results):
    every top-level key declared, the always-present ones there."""
    import jsonschema

    from aisac_core.literature import results
    from aisac_servers.shapes.results_schema import output_schema

    jsonschema.validate(data, output_schema(getattr(results, result_type)))
    return data


async def _search(c: Client, query: str = "transformer protein structure", **kw) -> dict:
    r = await c.call_tool("lit_search", {"query": query, **kw})
    return r.structured_content


# --------------------------------------------------------------------------------------------------
# identifiers, merging, headers, PDF check (no network)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("10.1038/NATURE12373", ("doi", "10.1038/nature12373")),
        ("doi:10.1038/nature12373", ("doi", "10.1038/nature12373")),
        ("https://doi.org/10.1038/nature12373", ("doi", "10.1038/nature12373")),
        ("http://dx.doi.org/10.1038/nature12373", ("doi", "10.1038/nature12373")),
        ("10.48550/arXiv.2104.12255", ("arxiv", "2104.12255")),
        ("arXiv:2104.12255v1", ("arxiv", "2104.12255v1")),
        ("https://arxiv.org/abs/2104.12255v2", ("arxiv", "2104.12255v2")),
        ("hep-th/9901001", ("arxiv", "hep-th/9901001")),
        ("astro-ph/0601001v1", ("arxiv", "astro-ph/0601001v1")),
        ("pmid:31000001", ("pmid", "31000001")),
        ("31000001", ("pmid", "31000001")),
        ("pmc9000001", ("pmcid", "PMC9000001")),
        ("0123456789ABCDEF0123456789abcdef012345ab", ("s2", "0123456789abcdef0123456789abcdef012345ab")),
        ("CorpusId:111", ("s2", "CorpusId:111")),
        ("W1000001", ("openalex", "W1000001")),
    ],
)
def test_parse_identifier(raw, expected):
    from aisac_core.literature import parse_identifier

    assert parse_identifier(raw) == expected


@pytest.mark.parametrize(
    "raw,msg",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("10.abc/xyz", "malformed DOI"),
        ("doi:nonsense", "malformed DOI"),
        ("10.1038", "malformed DOI"),
        ("not an id", "unrecognised identifier"),
    ],
)
def test_parse_identifier_errors(raw, msg):
    from aisac_core.literature import LiteratureError, parse_identifier

    with pytest.raises(LiteratureError, match=msg):
        parse_identifier(raw)


def test_merge_by_doi_arxiv_pmid_title():
    from aisac_core.literature import Paper, merge_papers

    a = Paper(source="arxiv", source_id="2101.00001v2", arxiv_id="2101.00001v2", title="X", year=2021)
    s = Paper(source="semantic_scholar", source_id="s", arxiv_id="2101.00001", doi="10.1000/ABC", citation_count=5)
    c = Paper(
        source="crossref", source_id="10.1000/abc", doi="https://doi.org/10.1000/abc", citation_count=9, venue="J"
    )
    p = Paper(source="pubmed", source_id="7", pmid="7", doi="10.1000/abc")
    o = Paper(source="openalex", source_id="W1", pmid="7")
    t1 = Paper(source="crossref", source_id="10.2000/x", doi="10.2000/x", title="Graph  Networks: a Study", year=2019)
    t2 = Paper(source="openalex", source_id="W2", title="graph networks - a study", year=2019)
    t3 = Paper(source="openalex", source_id="W3", title="graph networks - a study", year=2020)  # other year
    merged = merge_papers(
        {"arxiv": [a], "semantic_scholar": [s], "crossref": [c, t1], "pubmed": [p], "openalex": [o, t2, t3]}
    )
    assert len(merged) == 3
    top = merged[0]
    assert {x["source"] for x in top.sources} == {"arxiv", "semantic_scholar", "crossref", "pubmed", "openalex"}
    assert top.doi == "10.1000/abc" and top.arxiv_id == "2101.00001v2" and top.pmid == "7"
    assert top.citation_count == 9 and top.venue == "J" and top.title == "X"
    titled = [m for m in merged if m.doi == "10.2000/x"][0]
    assert len(titled.sources) == 2


def test_retry_after_parsing():
    import email.utils
    import time

    from aisac_core.literature.http import parse_retry_after

    assert parse_retry_after("17") == 17
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    future = email.utils.formatdate(time.time() + 120, usegmt=True)
    assert 100 < parse_retry_after(future) <= 121


def test_check_pdf_refuses_html_and_login_walls():
    from aisac_core.literature import LiteratureError
    from aisac_core.literature.service import check_pdf

    check_pdf(b"%PDF-1.7\n...", "application/pdf", "u")
    check_pdf(b"%PDF-1.4\n...", None, "u")
    with pytest.raises(LiteratureError, match="HTML page"):
        check_pdf(b"<!DOCTYPE html><html><body>Sign in</body></html>", "text/html; charset=utf-8", "u")
    with pytest.raises(LiteratureError, match="not a PDF"):
        check_pdf(b"PK\x03\x04zip", "application/pdf", "u")
    with pytest.raises(LiteratureError, match="HTML page"):
        check_pdf(b"%PDF-1.4 but served as", "text/html", "u")


# --------------------------------------------------------------------------------------------------
# search over the local server
# --------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_search_all_sources_merged(lit_core, replay):
    async with Client(_suite(lit_core)) as c:
        res = await _search(c, sources=ALL, k=10)
    assert {n: st["status"] for n, st in res["sources"].items()} == {n: "ok" for n in ALL}
    top = res["papers"][0]
    assert top["doi"] == DOI
    assert {s["source"] for s in top["sources"]} == set(ALL)
    assert top["arxiv_id"] == "2101.00001v2" and top["pmid"] == "31000001" and top["pmcid"] == "PMC9000001"
    assert top["citation_count"] == 52 and top["open_access"] is True
    dois = [p["doi"] for p in res["papers"] if p["doi"]]
    assert len(dois) == len(set(dois))
    # 2 arXiv + 2 PubMed + 2 Crossref + 2 OpenAlex + 2 S2, the shared paper counted once, the crystal paper twice
    assert res["count"] == 10 - 4 - 1
    # politeness parameters reached the services
    ((_t, _p, q),) = replay.requests("/eutils/esearch")
    assert q["tool"] == ["aisac"] and q["sort"] == ["relevance"]


@pytest.mark.anyio
async def test_year_filters_reach_services(lit_core, replay):
    async with Client(_suite(lit_core)) as c:
        res = await _search(c, sources=ALL, year_from=2020, year_to=2021)
    assert all(p["year"] is None or 2020 <= p["year"] <= 2021 for p in res["papers"])
    assert "submittedDate:[202001010000 TO 202112312359]" in replay.requests("/arxiv")[0][2]["search_query"][0]
    assert replay.requests("/crossref")[0][2]["filter"] == ["from-pub-date:2020,until-pub-date:2021"]
    assert replay.requests("/openalex")[0][2]["filter"] == ["publication_year:2020-2021"]
    assert replay.requests("/s2")[0][2]["year"] == ["2020-2021"]
    assert replay.requests("/eutils/esearch")[0][2]["mindate"] == ["2020"]
    async with Client(_suite(lit_core)) as c:
        await _search(c, "open ended", sources=["openalex", "semantic_scholar"], year_from=2020)
    assert replay.requests("/openalex")[1][2]["filter"] == ["publication_year:>2019"]
    assert replay.requests("/s2")[1][2]["year"] == ["2020-"]


@pytest.mark.anyio
async def test_api_keys_and_mailto_sent_but_never_cached_or_traced(tmp_path, replay, monkeypatch):
    from aisac_core.literature.http import LitCacheEntry
    from aisac_core.store.tables import TraceEvent

    monkeypatch.setenv("MY_S2_KEY", "s2-secret")
    monkeypatch.setenv("MY_NCBI_KEY", "ncbi-secret")
    core = _core(
        tmp_path,
        replay,
        lit_s2_api_key_env="MY_S2_KEY",
        lit_ncbi_api_key_env="MY_NCBI_KEY",
        lit_mailto="me@example.org",
    )
    try:
        async with Client(_suite(core)) as c:
            await _search(c, sources=ALL)
    finally:
        core.close()
    s2 = [h for (_t, p, _q), h in zip(replay.log, replay.headers) if p.startswith("/s2/")][0]
    assert s2["x-api-key"] == "s2-secret" and "mailto:me@example.org" in s2["user-agent"]
    ((_t, _p, q),) = replay.requests("/eutils/esearch")
    assert q["api_key"] == ["ncbi-secret"] and q["email"] == ["me@example.org"]
    assert replay.requests("/openalex")[0][2]["mailto"] == ["me@example.org"]
    http = core.literature.http  # the budgets this store's calls used
    assert http.state_for("pubmed", f"{replay.url}/eutils").policy.rate == 10  # 10/s with a key
    assert http.state_for("crossref", f"{replay.url}/crossref").policy.rate == 10  # polite pool
    with Session(core.engine) as s:
        stored = " ".join(r.request_json + r.key for r in s.exec(select(LitCacheEntry)).all())
        traced = " ".join((e.arguments_json or "") + (e.result_json or "") for e in s.exec(select(TraceEvent)).all())
    assert stored and "secret" not in stored and "me@example.org" not in stored
    assert traced and "secret" not in traced


@pytest.mark.anyio
async def test_429_rate_limited_others_answer_and_window_remembered(lit_core, replay):
    replay.script("/crossref", [(429, {"Retry-After": "30", **JSON}, b'{"status":"failed"}')])
    async with Client(_suite(lit_core)) as c:
        first = await _search(c, sources=["arxiv", "pubmed", "crossref", "openalex"])
        second = await _search(
            c, "another query inside the window", sources=["arxiv", "pubmed", "crossref", "openalex"]
        )
    for res in (first, second):
        st = res["sources"]["crossref"]
        assert st["status"] == "rate_limited" and 25 <= st["retry_after"] <= 30
        assert all(res["sources"][n]["status"] == "ok" for n in ("arxiv", "pubmed", "openalex"))
        assert res["count"] > 0
    assert len(replay.requests("/crossref")) == 1  # the second call sent nothing to crossref
    assert len(replay.requests("/openalex")) == 2


@pytest.mark.anyio
async def test_5xx_retried_then_ok(lit_core, replay):
    replay.script("/openalex", [(500, JSON, b"{}"), (503, {"Retry-After": "1", **JSON}, b"{}")])
    async with Client(_suite(lit_core)) as c:
        res = await _search(c, sources=["openalex"])
    assert res["sources"]["openalex"]["status"] == "ok" and res["count"] == 2
    t1, t2, t3 = [t for t, _p, _q in replay.requests("/openalex")]
    assert t2 - t1 < 0.9  # back-off lit_backoff_s = 0.01 s after the bare 500
    assert t3 - t2 >= 1.0  # the 503's Retry-After: 1 was honoured


@pytest.mark.anyio
async def test_5xx_after_retries_is_a_status_not_a_failure(lit_core, replay):
    replay.script("/openalex", [(503, JSON, b"{}")] * 3)
    replay.script("/crossref", [(500, JSON, b"{}")] * 3)
    async with Client(_suite(lit_core)) as c:
        res = await _search(c, sources=["openalex", "crossref", "arxiv"])
    assert res["sources"]["openalex"]["status"] == "error" and res["sources"]["openalex"]["http_status"] == 503
    assert res["sources"]["crossref"]["http_status"] == 500
    assert "after 3 attempts" in res["sources"]["crossref"]["error"]
    assert res["sources"]["arxiv"]["status"] == "ok" and res["count"] == 2
    assert len(replay.requests("/openalex")) == 3


@pytest.mark.anyio
async def test_503_with_long_retry_after_not_waited(lit_core, replay):
    replay.script("/openalex", [(503, {"Retry-After": "3600", **JSON}, b"{}")])
    async with Client(_suite(lit_core)) as c:
        res = await _search(c, sources=["openalex"])
    st = res["sources"]["openalex"]
    assert st["status"] == "unavailable" and st["retry_after"] == 3600 and len(replay.requests("/openalex")) == 1


@pytest.mark.anyio
async def test_400_refused_and_404_not_found(lit_core, replay):
    replay.script("/crossref", [(400, JSON, b'{"status":"failed","message":[{"type":"validation-failure"}]}')])
    async with Client(_suite(lit_core)) as c:
        res = await _search(c, sources=["crossref", "pubmed"])
        assert res["sources"]["crossref"]["status"] == "refused"
        err = res["sources"]["crossref"]["error"]
        assert res["sources"]["crossref"]["http_status"] == 400 and "HTTP 400 Bad Request" in err
        assert "validation-failure" not in err  # a response body is never echoed back
        assert res["sources"]["pubmed"]["status"] == "ok"
        with pytest.raises(ToolError, match="no paper found for doi '10.5555/missing'"):
            await c.call_tool("lit_get", {"identifier": "10.5555/missing"})
    assert len(replay.requests("/crossref")) == 2  # a 4xx is not retried


@pytest.mark.anyio
async def test_network_unreachable(tmp_path, replay):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed once the block ends: nothing listens there
    core = _core(tmp_path, replay, lit_arxiv_url=f"http://127.0.0.1:{dead}/api/query", lit_retries=2)
    try:
        async with Client(_suite(core)) as c:
            res = await _search(c, sources=["arxiv", "crossref"])
    finally:
        core.close()
    st = res["sources"]["arxiv"]
    assert st["status"] == "unreachable" and "check the network" in st["error"]
    assert res["sources"]["crossref"]["status"] == "ok"


@pytest.mark.anyio
async def test_offline_every_source_unreachable_is_an_error_fast(tmp_path, replay):
    """Issue 28: with no source reachable (names that never resolve: RFC 6761 ``.invalid``), lit_search is an
    error (is_error: true) saying so, within 2 s: one attempt per source, no retries after a failed resolution."""
    import time

    bad = "http://aisac-offline-test.invalid"
    core = _core(
        tmp_path,
        replay,
        lit_arxiv_url=f"{bad}/api/query",
        lit_pubmed_url=f"{bad}/eutils",
        lit_crossref_url=bad,
        lit_openalex_url=bad,
        lit_s2_url=bad,
        lit_retries=3,
        lit_backoff_s=1.0,
    )
    try:
        async with Client(_suite(core)) as c:
            t0 = time.perf_counter()
            r = await c.call_tool("lit_search", {"query": "protein folding"}, raise_on_error=False)
            took = time.perf_counter() - t0
    finally:
        core.close()
    assert r.is_error, r
    text = r.content[0].text
    assert "all sources unreachable: offline?" in text and "arxiv: unreachable" in text, text
    assert took < 2.0, took


@pytest.mark.anyio
async def test_slow_service_times_out(tmp_path, replay):
    core = _core(tmp_path, replay, lit_timeout_s=0.3, lit_retries=2)
    replay.script("/crossref", [(200, {"X-Test-Delay": "1.0", **JSON}, b"{}")] * 2)
    try:
        async with Client(_suite(core)) as c:
            res = await _search(c, sources=["crossref", "openalex"])
    finally:
        core.close()
    st = res["sources"]["crossref"]
    assert st["status"] == "timeout" and "timed out after 0.3 s" in st["error"] and "after 2 attempts" in st["error"]
    assert res["sources"]["openalex"]["status"] == "ok"


@pytest.mark.anyio
async def test_truncated_xml_is_bad_response_and_not_cached(lit_core, replay):
    from literature_replay import OWN

    replay.script("/eutils/esearch", [(200, XML, (OWN / "pubmed_truncated.xml").read_bytes())])
    async with Client(_suite(lit_core)) as c:
        bad = await _search(c, sources=["pubmed"])
        good = await _search(c, sources=["pubmed"])
    assert (
        bad["sources"]["pubmed"]["status"] == "bad_response" and "cannot be parsed" in bad["sources"]["pubmed"]["error"]
    )
    assert good["sources"]["pubmed"]["status"] == "ok" and good["count"] == 2
    assert len(replay.requests("/eutils/esearch")) == 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    "prefix,source,body,detail",
    [
        ("/arxiv", "arxiv", b"<html><body><p>Proxy error<br></body></html>", "ParseError"),
        ("/arxiv", "arxiv", b"<?xml version='1.0'?><html><body>maintenance</body></html>", "not an Atom feed"),
        ("/crossref", "crossref", b'{"status": "ok"}', "no message.items"),
        ("/openalex", "openalex", b'{"results": [', "JSONDecodeError"),
        ("/s2/", "semantic_scholar", b"[]", "no data"),
    ],
)
async def test_malformed_bodies_are_bad_response(lit_core, replay, prefix, source, body, detail):
    replay.script(prefix, [(200, {"Content-Type": "text/plain"}, body)])
    async with Client(_suite(lit_core)) as c:
        res = await _search(c, sources=[source, "pubmed"])
    st = res["sources"][source]
    assert st["status"] == "bad_response" and detail in st["error"], st
    assert res["sources"]["pubmed"]["status"] == "ok"


@pytest.mark.anyio
async def test_k_over_service_maximum_is_clamped_and_said(lit_core, replay):
    async with Client(_suite(lit_core)) as c:
        res = await _search(c, sources=["semantic_scholar", "openalex"], k=150)
        big = await _search(c, "x", sources="openalex", k=5000)
    s2 = res["sources"]["semantic_scholar"]
    assert s2["k_requested"] == 150 and s2["k_max"] == 100
    assert "k_max" not in res["sources"]["openalex"]
    assert any("semantic_scholar's maximum of 100" in n for n in res["notes"])
    assert replay.requests("/s2/paper/search")[0][2]["limit"] == ["100"]
    assert replay.requests("/openalex")[0][2]["per-page"] == ["150"]
    assert any("maximum of 1000 merged papers" in n for n in big["notes"])
    assert replay.requests("/openalex")[1][2]["per-page"] == ["200"]


@pytest.mark.anyio
async def test_pubmed_long_id_lists_are_summarised_in_batches(lit_core, replay):
    ids = "".join(f"<Id>{32000000 + i}</Id>" for i in range(250))
    replay.script(
        "/eutils/esearch",
        [
            (
                200,
                XML,
                f"<?xml version='1.0'?><eSearchResult><Count>250</Count>"
                f"<IdList>{ids}</IdList></eSearchResult>".encode(),
            )
        ],
    )
    async with Client(_suite(lit_core)) as c:
        res = await _search(c, sources=["pubmed"], k=250)
    assert res["sources"]["pubmed"]["status"] == "ok"
    batches = [q["id"][0].split(",") for _t, _p, q in replay.requests("/eutils/esummary")]
    assert [len(b) for b in batches] == [200, 50] and batches[0][0] == "32000000"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "args,msg",
    [
        ({"query": ""}, "query is empty"),
        ({"query": "   "}, "query is empty"),
        ({"query": "x", "sources": ["arxiv", "scopus"]}, "unknown source 'scopus'"),
        ({"query": "x", "sources": []}, "sources is empty"),
        ({"query": "x", "k": 0}, "k=0"),
        ({"query": "x", "year_from": 2022, "year_to": 2020}, "after year_to"),
    ],
)
async def test_search_bad_input_is_a_tool_error(lit_core, replay, args, msg):
    async with Client(_suite(lit_core)) as c:
        with pytest.raises(ToolError, match=msg):
            await c.call_tool("lit_search", args)
    assert replay.requests() == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "ident,msg",
    [
        ("10.abc/xyz", "malformed DOI"),
        ("doi:nonsense", "malformed DOI"),
        ("", "identifier is empty"),
        ("what is this", "unrecognised identifier"),
    ],
)
async def test_get_bad_identifier_is_a_tool_error(lit_core, replay, ident, msg):
    async with Client(_suite(lit_core)) as c:
        for tool in ("lit_get", "lit_references", "lit_citations", "lit_import"):
            with pytest.raises(ToolError, match=msg):
                await c.call_tool(tool, {"identifier": ident})


@pytest.mark.anyio
async def test_not_found_ids(lit_core, replay):
    async with Client(_suite(lit_core)) as c:
        with pytest.raises(ToolError, match="arXiv has no paper '2301.99999' \\(empty feed\\)"):
            await c.call_tool("lit_get", {"identifier": "arXiv:2301.99999"})
        with pytest.raises(ToolError, match="PubMed has no article with PMID 999"):
            await c.call_tool("lit_get", {"identifier": "pmid:999"})
        res = await _search(c, "zzqx", sources=["pubmed"])  # PubMed's empty IdList
    assert res["sources"]["pubmed"] == {**res["sources"]["pubmed"], "status": "ok", "count": 0}
    assert res["count"] == 0
    assert replay.requests("/eutils/esummary") == []  # nothing to summarise


@pytest.mark.anyio
async def test_cache_then_replay_mode(tmp_path, replay):
    core = _core(tmp_path, replay)
    async with Client(_suite(core)) as c:
        first = await _search(c, sources=ALL)
        n = len(replay.requests())
        again = await _search(c, sources=ALL)
    assert len(replay.requests()) == n  # answered from the cache
    assert all(st["from_cache"] for st in again["sources"].values())
    assert not any(st["from_cache"] for st in first["sources"].values())
    assert again["papers"][0]["title"] == first["papers"][0]["title"]
    core.close()
    core = _core(tmp_path, replay, lit_replay=True)  # same store, replay mode
    try:
        async with Client(_suite(core)) as c:
            replayed = await _search(c, sources=ALL)
            missed = await _search(c, "never asked before", sources=["arxiv", "crossref"])
            with pytest.raises(ToolError, match="replay mode"):
                await c.call_tool("lit_import", {"identifier": "2101.00001"})
    finally:
        core.close()
    assert len(replay.requests()) == n
    assert [p["title"] for p in replayed["papers"]] == [p["title"] for p in first["papers"]]
    # a replay returns the very records of the first run (retrieved_at is the time of the cached answer)
    assert replayed["papers"] == again["papers"]
    assert {st["status"] for st in missed["sources"].values()} == {"replay_miss"}


@pytest.mark.anyio
async def test_cache_ttl_expiry(tmp_path, replay):
    core = _core(tmp_path, replay, lit_cache_ttl_s=1.5)
    try:
        async with Client(_suite(core)) as c:
            await _search(c, sources=["crossref"])
            await _search(c, sources=["crossref"])
            assert len(replay.requests("/crossref")) == 1
            await asyncio.sleep(1.6)
            await _search(c, sources=["crossref"])
    finally:
        core.close()
    assert len(replay.requests("/crossref")) == 2


# --------------------------------------------------------------------------------------------------
# arXiv politeness (acceptance 4): timestamps recorded at the server
# --------------------------------------------------------------------------------------------------


async def _concurrent_arxiv(core, n: int) -> None:
    async with Client(_suite(core)) as c:
        await asyncio.gather(
            *[c.call_tool("lit_search", {"query": f"topic {i}", "sources": ["arxiv"]}) for i in range(n)]
        )


def _gaps(srv: ReplayServer) -> list[float]:
    times = sorted(t for t, _p, _q in srv.requests("/arxiv"))
    return [b - a for a, b in zip(times, times[1:])]


@pytest.mark.anyio
async def test_arxiv_spacing_under_5_concurrent_calls(tmp_path, replay):
    core = _core(tmp_path, replay, lit_arxiv_interval_s=0.4)
    try:
        await _concurrent_arxiv(core, 5)
    finally:
        core.close()
    gaps = _gaps(replay)
    assert len(gaps) == 4
    assert min(gaps) >= 0.4, gaps


@pytest.mark.anyio
async def test_arxiv_spacing_real_3s_default(tmp_path, replay):
    core = _core(tmp_path, replay, lit_arxiv_interval_s=3.0)
    try:
        await _concurrent_arxiv(core, 2)
    finally:
        core.close()
    (gap,) = _gaps(replay)
    assert gap >= 3.0


# --------------------------------------------------------------------------------------------------
# look-ups, references, citations (Semantic Scholar client and the OpenAlex fall-back)
# --------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_doi_merges_crossref_openalex_s2(lit_core, replay):
    async with Client(_suite(lit_core)) as c:
        r = (await c.call_tool("lit_get", {"identifier": "https://doi.org/10.5555/AISAC.2021.001"})).structured_content
    p = r["paper"]
    assert r["kind"] == "doi" and p["doi"] == DOI
    assert {s["source"] for s in p["sources"]} == {"crossref", "openalex", "semantic_scholar"}
    assert p["arxiv_id"] == "2101.00001" and p["pmid"] == "31000001" and p["openalex_id"] == "W1000001"
    assert p["pdf_url"] == "https://arxiv.org/pdf/2101.00001" and p["open_access"] is True
    assert replay.requests("/s2/paper/DOI:10.5555/aisac.2021.001")


@pytest.mark.anyio
async def test_get_pmid_arxiv_s2_openalex(lit_core, replay):
    async with Client(_suite(lit_core)) as c:
        pm = (await c.call_tool("lit_get", {"identifier": "pmid:31000001"})).structured_content["paper"]
        ax = (await c.call_tool("lit_get", {"identifier": "arXiv:2102.00002"})).structured_content["paper"]
        s2 = (await c.call_tool("lit_get", {"identifier": "CorpusId:111"})).structured_content["paper"]
        oa = (await c.call_tool("lit_get", {"identifier": "PMC9000001"})).structured_content["paper"]
    assert (
        pm["abstract"].startswith("BACKGROUND: Protein structure")
        and "RESULTS: A transformer predicts contacts" in pm["abstract"]
    )
    assert pm["authors"] == ["Ada Fixture", "Ben Example"] and pm["pmcid"] == "PMC9000001" and pm["year"] == 2021
    assert (
        ax["arxiv_id"] == "2102.00002v1" and ax["arxiv_id_base"] == "2102.00002" and ax["title"].startswith("Attention")
    )
    assert s2["s2_id"] == "0123456789abcdef0123456789abcdef012345ab" and s2["citation_count"] == 52
    assert oa["openalex_id"] == "W1000001" and oa["abstract"] == "We train a transformer."
    assert {x["source"] for x in oa["sources"]} == {"openalex", "semantic_scholar"}
    assert replay.requests("/s2/paper/PMCID:9000001") and replay.requests("/openalex/works/pmcid:PMC9000001")


@pytest.mark.anyio
async def test_references_and_citations_from_s2(lit_core, replay):
    async with Client(_suite(lit_core)) as c:
        refs = (await c.call_tool("lit_references", {"identifier": DOI})).structured_content
        cits = (await c.call_tool("lit_citations", {"identifier": "arXiv:2101.00001v2", "k": 5000})).structured_content
        with pytest.raises(ToolError, match="no paper found"):
            await c.call_tool("lit_references", {"identifier": "CorpusId:999"})
    assert refs["sources"]["semantic_scholar"]["status"] == "ok"
    assert [p["title"] for p in refs["references"]] == ["Graph networks for crystal properties"]  # unresolved dropped
    assert [p["title"] for p in cits["citations"]] == ["Protein language models at scale"]
    assert any("maximum of 1000" in n for n in cits["notes"])
    ((_t, path, q),) = replay.requests("/s2/paper/ARXIV:2101.00001/citations")
    assert q["limit"] == ["1000"] and "externalIds" in q["fields"][0]


@pytest.mark.anyio
async def test_references_fall_back_to_openalex_when_s2_throttled(lit_core, replay):
    replay.script("/s2/", [(429, {"Retry-After": "60", **JSON}, b'{"message":"Too Many Requests"}')])
    async with Client(_suite(lit_core)) as c:
        refs = (await c.call_tool("lit_references", {"identifier": DOI})).structured_content
        cits = (await c.call_tool("lit_citations", {"identifier": DOI})).structured_content
    _valid("ReferencesResult", refs), _valid("CitationsResult", cits)
    assert refs["sources"]["semantic_scholar"]["status"] == "rate_limited"
    assert refs["sources"]["openalex"]["status"] == "ok"
    assert {p["title"] for p in refs["references"]} == {
        "Graph networks for crystal properties",
        "Residue contact prediction revisited",
    }
    assert cits["sources"]["semantic_scholar"]["status"] == "rate_limited" and cits["count"] == 2
    assert len(replay.requests("/s2/")) == 1
    flt = [q["filter"][0] for _t, _p, q in replay.requests("/openalex/works") if "filter" in q]
    assert "openalex:W2000002|W2000003" in flt and "cites:W1000001" in flt


@pytest.mark.anyio
async def test_service_built_from_its_parts_keeps_its_own_budgets_and_cache(tmp_path, replay):
    """A LiteratureService built directly (the built-in sources, a real SQLite cache): a 429 window is remembered by
    the service that saw it, never by another one in the same process; the cache answers a repeated request."""
    from aisac_core.literature import LiteratureService, source_registry
    from aisac_core.plugins import make_plugin_manager
    from aisac_core.settings import Settings
    from aisac_core.store.sql import make_engine

    lit = Settings(
        data_dir=tmp_path / "store", lit_backoff_s=0.01, lit_arxiv_interval_s=0.05, **replay.settings_kwargs()
    ).lit
    engine = make_engine(f"sqlite:///{tmp_path / 'lit.db'}")
    sources = source_registry(make_plugin_manager())
    a = LiteratureService(sources, lit, engine=lambda: engine)
    b = LiteratureService(sources, lit)  # no cache
    replay.script("/arxiv", [(429, {"Retry-After": "45"}, b"")])
    try:
        first = _valid("SearchResult", await a.search("protein", ["arxiv"]))
        again = await a.search("protein", ["arxiv"])
        other = await b.search("protein", ["arxiv"])
        cold = await a.search("protein", ["crossref"])
        warm = await a.search("protein", ["crossref"])
    finally:
        engine.dispose()
    assert first["sources"]["arxiv"]["status"] == again["sources"]["arxiv"]["status"] == "rate_limited"
    assert other["sources"]["arxiv"]["status"] == "ok" and other["count"] > 0
    assert len(replay.requests("/arxiv")) == 2  # a's second call sent nothing; b's went out
    assert cold["sources"]["crossref"]["from_cache"] is False and warm["sources"]["crossref"]["from_cache"] is True
    assert [p["title"] for p in warm["papers"]] == [p["title"] for p in cold["papers"]]
    assert len(replay.requests("/crossref")) == 1
    a.reset()
    assert (await a.search("protein", ["arxiv"]))["sources"]["arxiv"]["status"] == "ok"


@pytest.mark.anyio
async def test_get_when_every_source_is_throttled_is_structured(lit_core, replay):
    replay.script("/arxiv", [(429, {"Retry-After": "45"}, b"")])
    async with Client(_suite(lit_core)) as c:
        r = (await c.call_tool("lit_get", {"identifier": "2101.00001"})).structured_content
        imp = (await c.call_tool("lit_import", {"identifier": "2101.00001"})).structured_content
    _valid("GetResult", r), _valid("ImportResult", imp)
    assert r["paper"] is None and r["sources"]["arxiv"]["status"] == "rate_limited"
    assert 40 <= r["sources"]["arxiv"]["retry_after"] <= 45
    assert imp["status"] == "rate_limited" and imp["retry_after"] > 0
    assert len(replay.requests("/arxiv")) == 1


@pytest.mark.anyio
async def test_tool_calls_are_traced(lit_core, replay):
    from aisac_core.store.tables import TraceEvent

    async with Client(_suite(lit_core)) as c:
        await c.call_tool("lit_search", {"query": "protein", "sources": ["crossref"], "run_id": "run-lit"})
        with pytest.raises(ToolError):
            await c.call_tool("lit_get", {"identifier": "10.abc/x", "run_id": "run-lit"})
    with Session(lit_core.engine) as s:
        ev = s.exec(select(TraceEvent).where(TraceEvent.run_id == "run-lit").order_by(TraceEvent.id)).all()
    assert [(e.server, e.tool, e.status) for e in ev] == [("lit", "lit_search", "ok"), ("lit", "lit_get", "tool_error")]
    assert DOI in ev[0].result_json


@pytest.mark.anyio
async def test_tools_listed_with_docs(lit_core):
    async with Client(_suite(lit_core)) as c:
        tools = {t.name: t for t in await c.list_tools()}
    assert {"lit_search", "lit_get", "lit_references", "lit_citations", "lit_import"} <= set(tools)
    # short descriptions (every listed token costs a host's model), but each says when to use the tool
    assert all(len(t.description or "") > 40 for n, t in tools.items() if n.startswith("lit_"))
    assert all(
        tools[n].annotations.open_world_hint is not False  # listed only when not the default (true)
        for n in ("lit_search", "lit_get", "lit_references", "lit_citations")
    )
