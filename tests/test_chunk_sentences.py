"""Chunks end at sentence ends: every chunk of every shared PDF ends where an item (paragraph, heading, table) ends
or where a sentence ends, as pySBD (aisac_core.rag.chunking.sentences) segments the item; only a sentence longer
than the chunk budget may be cut. Plus the packing rule itself on a paragraph of our own making.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aisac_core.rag.chunking import sentence_segments, sentences

BUDGET = 256


def _pdfs(shared: Path) -> list[Path]:
    return (
        sorted((shared / "pdfs" / "papermage").glob("*.pdf"))
        + sorted(p for p in (shared / "pdfs" / "docling").glob("*.pdf") if "password" not in p.name)
        + sorted((shared / "pdf_metadata" / "grobid").glob("*.pdf"))
    )


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory, models_dir: Path):  # noqa: ANN201
    from conftest import make_settings

    from aisac_core.rag.embeddings import Embedder

    return Embedder(make_settings(tmp_path_factory.mktemp("sent-tok") / "store", models_dir)).tokenizer()


def _mid_sentence_ends(text: str, ends: list[tuple[int, str]], count) -> list[str]:  # noqa: ANN001
    """The chunk ends of ``ends`` (char end, heading path) that fall inside a sentence that fits the budget left
    beside the chunk's headings (docling's HybridChunker counts the headings in every chunk)."""
    bad = []
    for e, section in ends:
        if e >= len(text.rstrip()) or text[e:].startswith("\n\n"):
            continue  # an item's end
        a = text.rfind("\n\n", 0, e)
        a = 0 if a < 0 else a + 2
        b = text.find("\n\n", e)
        b = len(text) if b < 0 else b
        item = text[a:b]
        spans = sentences(item)
        bounds = {a + s + len(item[s:t].rstrip()) for s, t in spans} | {a + t for _, t in spans}
        if e in bounds or len(text[e:b].strip()) == 0:
            continue
        s, t = next((s, t) for s, t in spans if a + s <= e < a + t)
        if count(item[s:t]) + count(section.replace(" > ", "\n")) + 2 > BUDGET:
            continue  # an over-long sentence: the one allowed cut
        bad.append(f"...{text[max(a, e - 50) : e]!r} | {text[e : e + 30]!r}")
    return bad


@pytest.mark.slow
def test_no_shared_pdf_chunk_ends_inside_a_sentence(shared_data: Path, tokenizer, parse_pool) -> None:  # noqa: ANN001
    def count(t: str) -> int:
        return len(tokenizer.encode(t, add_special_tokens=False).ids)

    problems: dict[str, list[str]] = {}
    n_chunks = 0
    pdfs = _pdfs(shared_data)
    assert len(pdfs) >= 18
    for p in pdfs:
        doc = parse_pool.parse(p, tokenizer, max_tokens=BUDGET)  # parse_document, once per run (conftest.ParsePool)
        n_chunks += len(doc.chunks)
        bad = _mid_sentence_ends(doc.text, [(c.char_end, c.section) for c in doc.chunks[:-1]], count)
        if bad:
            problems[p.name] = bad
    assert n_chunks > 800
    assert not problems, problems


def test_sentence_packing_keeps_abbreviations_and_numbers_whole() -> None:
    text = (
        "The field is assumed ultra light (∼ 10-22 eV) in all our runs. "
        "We use features, e.g. named entities, as in Russell et al. (2001, pp. 363-370). "
        "Daniel M. Russell wrote it. "
        "Fig. 3 shows the halo mass of 1.5 x 10^12 solar masses. "
        "The end."
    )

    def count(t: str) -> int:
        return len(t.split())

    segs = sentence_segments(text, count, 16, lambda t, n: [t])
    assert segs == [
        "The field is assumed ultra light (∼ 10-22 eV) in all our runs.",
        "We use features, e.g. named entities, as in Russell et al. (2001, pp. 363-370).",
        "Daniel M. Russell wrote it.",
        "Fig. 3 shows the halo mass of 1.5 x 10^12 solar masses. The end.",
    ]
    # a sentence longer than the budget is the only one handed to the splitter
    seen: list[str] = []
    long = "word " * 30 + "end."
    out = sentence_segments("Short one here. " + long + " Tail.", count, 10, lambda t, n: seen.append(t) or [t])
    assert seen == [long.strip()] and out[0] == "Short one here." and out[-1] == "Tail."
    # spans tile the text
    spans = sentences(text)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
