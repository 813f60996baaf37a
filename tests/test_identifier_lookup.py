"""Identifiers first (issue 37): a paper printing its DOI on page 1 gets the Crossref record's title and authors in
its overview (``title_source: "crossref"``), replayed from the real recorded Crossref response in
../shared/data/api_fixtures (paperqa cassette of 10.1063/1.4938384) by the local replay server; offline (the
literature services unreachable) the same file gives the layout reading, marked as such, and the registry's
answer fills in at a later overview once the network is back. Skipped without ../shared."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import make_settings
from literature_replay import ReplayServer

from aisac_core.rag.indexer import doc_id_for

DOI = "10.1063/1.4938384"
TITLE = "Effect of native oxide layers on copper thin-film tensile properties: A reactive molecular dynamics study"


def _paper(path: Path, printed_title: str) -> Path:
    """A one-page paper: a two-line title in bold, the authors, a DOI line, an abstract, a first section."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    _, h = A4
    words = printed_title.split()
    half = len(words) // 2
    c.setFont("Helvetica-Bold", 15)
    c.drawString(72, h - 80, " ".join(words[:half]))
    c.drawString(72, h - 101, " ".join(words[half:]))
    c.setFont("Helvetica", 11)
    c.drawString(72, h - 130, "Michael D. Skarlinski and David J. Quesnel")
    c.setFont("Helvetica", 9)
    c.drawString(72, h - 146, "Department of Mechanical Engineering, University of Rochester, Rochester, NY 14627, USA")
    c.drawString(72, h - 160, f"doi: {DOI}")
    c.setFont("Helvetica-Bold", 11)
    c.drawString(72, h - 195, "Abstract")
    c.setFont("Helvetica", 10)
    y = h - 212
    for line in (
        "We study how native oxide layers change the tensile response of copper thin films with reactive",
        "molecular dynamics. Oxide layers lower the yield stress and move the onset of plasticity to the surface.",
    ):
        c.drawString(72, y, line)
        y -= 14
    c.setFont("Helvetica-Bold", 11)
    c.drawString(72, y - 20, "1 Introduction")
    c.setFont("Helvetica", 10)
    c.drawString(72, y - 38, "Copper films are used in interconnects, where their mechanical reliability matters.")
    c.showPage()
    c.save()
    return path


@pytest.fixture(scope="module")
def replay():  # noqa: ANN201
    from conftest import SHARED_DATA

    api = SHARED_DATA / "api_fixtures"
    if not (api / "paperqa_cassettes").is_dir():
        pytest.skip(f"recorded API responses absent: {api}")
    with ReplayServer(shared=api) as srv:
        yield srv


def _core(root: Path, models_dir: Path, embedder, **lit):  # noqa: ANN001, ANN202
    from aisac_core.context import AppContext

    s = make_settings(root / "store", models_dir, warm=False, lit_backoff_s=0.01, lit_retries=1, **lit)
    return AppContext(s, embedder=embedder)


def _overview_until(core, did: str, source: str, seconds: float = 20.0) -> dict:  # noqa: ANN001
    """The overview, asked again (the background lookup may still run) until ``title_source`` is ``source``."""
    end = time.monotonic() + seconds
    while True:
        ov = core.rag.overview(did)
        if ov["metadata"]["title_source"] == source or time.monotonic() > end:
            return ov
        time.sleep(0.2)


def test_doi_on_page_one_gives_crossrefs_title_and_authors(tmp_path, models_dir, shared_embedder, replay) -> None:  # noqa: ANN001
    docs = tmp_path / "docs"
    docs.mkdir()
    # printed with a typo-free but differently cased title: the registry's own text wins
    pdf = _paper(docs / "oxide.pdf", TITLE.replace("A reactive", "a Reactive"))
    core = _core(tmp_path, models_dir, shared_embedder, **replay.settings_kwargs())
    try:
        core.rag.indexer.run([docs], failures=[])
        ov = _overview_until(core, doc_id_for(pdf), "crossref")
        m = ov["metadata"]
        assert m["doi"] == DOI and m["identifier"] == DOI and m["identifier_lookup"] == "answered"
        assert m["title_source"] == "crossref" and m["title"] == TITLE and ov["title"] == TITLE
        assert m["authors"] == ["Michael D. Skarlinski", "David J. Quesnel"] and m["authors_source"] == "crossref"
        assert m["layout_title"] and m["layout_title"].casefold() == TITLE.casefold()  # the layout's own reading
        assert m["title_uncertain"] is False
        assert any(r[1].startswith("/crossref/works/10.1063") for r in replay.requests("/crossref"))
    finally:
        core.close()


def test_offline_the_layout_answers_and_says_so(tmp_path, models_dir, shared_embedder) -> None:  # noqa: ANN001
    docs = tmp_path / "docs"
    docs.mkdir()
    pdf = _paper(docs / "oxide.pdf", TITLE)
    dead = "http://127.0.0.1:9"  # discard port: nothing listens, the connection is refused at once
    core = _core(
        tmp_path,
        models_dir,
        shared_embedder,
        lit_crossref_url=f"{dead}/crossref",
        lit_openalex_url=f"{dead}/openalex",
        lit_s2_url=f"{dead}/s2",
        lit_allow_networks=["127.0.0.1"],
    )
    try:
        core.rag.indexer.run([docs], failures=[])
        ov = core.rag.overview(doc_id_for(pdf))
        m = ov["metadata"]
        assert m["doi"] == DOI and m["identifier_lookup"] == "unanswered"
        assert m["title_source"] == "layout" and m["title"].casefold() == TITLE.casefold()
        assert 0 < m["title_confidence"] <= 1 and "layout_title" not in m
    finally:
        core.close()
