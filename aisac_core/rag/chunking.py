"""Chunking a parsed document: its plain text with the char span of every item, and token-bounded chunks.

The plain text is every item of the DoclingDocument in reading order, joined by blank lines; every chunk's and
every anchor's char span indexes into it. Chunks come from docling-core's ``HybridChunker`` (structure-aware,
then token-bounded and peer-merged) with a tokenizer built on the dense model's own ``tokenizer.json``, so a
chunk never exceeds what the model reads (256 tokens for MiniLM). An item longer than the budget is cut at sentence
ends only: its sentences (pySBD, Sadvilkar & Neumann, NLP-OSS 2020, the rule-based "Golden Rules" segmenter, which
keeps "e.g.", "pp.", "Daniel M." and "(avg." inside their sentences) are packed whole into segments of at most the
budget; only a sentence longer than the budget is itself split (by semchunk, at its clauses or words). Chunk
ends are therefore item ends or sentence ends (``tests/test_chunk_sentences.py`` checks every shared PDF). Each chunk keeps its pages, char span, heading
path (``section``) and taxonomy label (``section_covers``), and the text to embed (the chunk with its heading
context).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aisac_core.rag.structure import section_label


@dataclass
class Chunk:
    """One retrievable unit of a document."""

    index: int
    text: str
    embed_text: str
    page: int | None
    page_end: int | None
    char_start: int
    char_end: int
    section: str
    section_covers: str
    #: ``text`` (the file's own text) or ``ocr`` (some of the chunk was read by OCR from a page image)
    source: str = "text"
    #: for an ``ocr`` chunk: the mean Tesseract word confidence (0-1) of its OCRed items, weighted by characters
    ocr_confidence: float | None = None


@functools.lru_cache(maxsize=8)
def _make_chunker(tokenizer: Any, max_tokens: int) -> Any:
    """A HybridChunker over ``tokenizer`` (built once per tokenizer and size: building costs ~10 ms)."""
    return _build_chunker(tokenizer, max_tokens)


class _VocabCachedTokenizer:
    """The tokenizer handed to semchunk (HybridChunker splits long items with it): the same ``encode``; and
    ``get_vocab``, which semchunk calls at every split only to learn the length of the longest token
    (``max_token_chars``, semchunk 3.x ``chunkerify``), answers with that longest token alone, computed once.
    Scanning MiniLM's 30,522-token vocabulary at every split took about a third of a paper's parse time."""

    _cache: dict[int, _VocabCachedTokenizer] = {}

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self._vocab: list[str] | None = None

    @classmethod
    def of(cls, tok: Any) -> _VocabCachedTokenizer:
        if id(tok) not in cls._cache:
            cls._cache[id(tok)] = cls(tok)
        return cls._cache[id(tok)]

    def encode(self, text: str, add_special_tokens: bool = False) -> Any:
        return self.tok.encode(text, add_special_tokens=add_special_tokens)

    def get_vocab(self) -> list[str]:
        if self._vocab is None:
            self._vocab = [max(self.tok.get_vocab(), key=len)]
        return self._vocab


def _build_chunker(tokenizer: Any, max_tokens: int) -> Any:
    from docling_core.transforms.chunker.hybrid_chunker import HybridChunker
    from docling_core.transforms.chunker.tokenizer.base import BaseTokenizer

    class LocalTokenizer(BaseTokenizer):
        """docling-core tokenizer over a local ``tokenizers.Tokenizer`` (no hub access)."""

        model_config = {"arbitrary_types_allowed": True}
        tok: Any
        max_tokens: int

        def count_tokens(self, text: str) -> int:
            return len(self.tok.encode(text, add_special_tokens=False).ids)

        def get_max_tokens(self) -> int:
            return self.max_tokens

        def get_tokenizer(self) -> Any:
            return _VocabCachedTokenizer.of(self.tok)

    class SentenceChunker(HybridChunker):
        """HybridChunker whose plain-text split of an over-long item packs whole sentences (module docstring)."""

        def segment(self, doc_chunk: Any, available_length: int, doc_serializer: Any) -> list[str]:
            from docling_core.types.doc import TableItem

            items = doc_chunk.meta.doc_items or []
            if len(items) == 1 and isinstance(items[0], TableItem):
                return list(super().segment(doc_chunk, available_length, doc_serializer))
            tok = self.tokenizer.get_tokenizer()
            return sentence_segments(
                doc_chunk.text,
                lambda t: len(tok.encode(t, add_special_tokens=False).ids),
                available_length,
                lambda t, n: [str(x) for x in chunkerify(tok, chunk_size=n)(t)],
            )

    from semchunk import chunkerify  # type: ignore[attr-defined]  # semchunk's __init__ lacks __all__

    return SentenceChunker(tokenizer=LocalTokenizer(tok=tokenizer, max_tokens=max_tokens), merge_peers=True)


def sentences(text: str) -> list[tuple[int, int]]:
    """The sentences of ``text`` as ``(start, end)`` char spans that tile it (trailing whitespace belongs to the
    sentence before it).

    Segmenter: pySBD 0.3 (``pysbd.Segmenter(language="en", clean=False)``; Sadvilkar & Neumann, "PySBD:
    Pragmatic Sentence Boundary Disambiguation", NLP-OSS 2020): rule-based, no model, abbreviations ("e.g.",
    "et al.", "pp.", initials) and numbers ("10.5", "Fig. 3") stay inside their sentence.
    """
    import pysbd

    spans: list[tuple[int, int]] = []
    pos = 0
    # a Segmenter is built in under a microsecond and keeps per-text state: one per call
    for s in pysbd.Segmenter(language="en", clean=False).segment(text) if text.strip() else []:
        i = text.find(s, pos)
        if i < 0:  # pySBD changed the text (it should not with clean=False): close the span at the next match
            i = pos
        end = max(i + len(s), pos)
        if end > pos:
            spans.append((pos, end))
        pos = end
    if pos < len(text):
        if spans:
            spans[-1] = (spans[-1][0], len(text))
        else:
            spans.append((0, len(text)))
    return spans


def sentence_segments(
    text: str, count: Callable[[str], int], budget: int, split_long: Callable[[str, int], list[str]]
) -> list[str]:
    """``text`` cut into segments of whole sentences (:func:`sentences`), each at most ``budget`` tokens.

    Args:
        text: the text of one over-long item.
        count: tokens of a string (the embedding model's tokenizer, no special tokens).
        budget: the most tokens a segment may have.
        split_long: splits one sentence longer than ``budget`` into pieces of at most ``budget`` tokens (the only
            place a sentence is cut).

    Returns:
        The segments, stripped, in order; joined by spaces they give ``text`` up to whitespace.
    """
    out: list[str] = []
    cur: list[str] = []
    cur_n = 0
    for a, b in sentences(text):
        s = text[a:b].strip()
        if not s:
            continue
        n = count(s)
        if n > budget:  # a sentence longer than the budget: the only one that is split
            if cur:
                out.append(" ".join(cur))
                cur, cur_n = [], 0
            out.extend(p.strip() for p in split_long(s, budget) if p.strip())
            continue
        if cur and cur_n + n > budget:
            out.append(" ".join(cur))
            cur, cur_n = [], 0
        cur.append(s)
        cur_n += n
    if cur:
        out.append(" ".join(cur))
    return out


def _item_text(item: Any, doc: Any) -> str:
    from docling_core.types.doc import TableItem

    if isinstance(item, TableItem):
        try:
            return item.export_to_markdown(doc)
        except Exception:
            return ""
    return (getattr(item, "text", "") or "").strip()


def chunk_document(
    doc: Any, tokenizer: Any, max_tokens: int, ocr_items: dict[str, list[float]] | None = None
) -> tuple[str, list[Chunk], dict[str, tuple[int, int]]]:
    """The plain text of ``doc`` (a DoclingDocument), its chunks, and the char span of every item.

    Args:
        doc: the document, items in reading order.
        tokenizer: a ``tokenizers.Tokenizer`` of the embedding model (truncation and padding off).
        max_tokens: chunk size bound in tokens of that tokenizer.
        ocr_items: ``{item self_ref: [confidence, characters]}`` of the items read by OCR
            (:func:`aisac_core.rag.pdf.ocr_item_confidence`): a chunk holding any of them gets ``source="ocr"``
            and their character-weighted mean confidence.

    Returns:
        ``(text, chunks, offsets)``: the items' texts joined by blank lines; the :class:`Chunk` list (its
        ``section_covers`` from the outermost labelled heading; :func:`aisac_core.rag.structure.document_structure`
        refines it); ``{item self_ref: (start, end)}`` into ``text``.
    """
    # canonical plain text: every item in reading order, blank line between items
    offsets: dict[str, tuple[int, int]] = {}
    parts: list[str] = []
    pos = 0
    for item, _lvl in doc.iterate_items():
        t = _item_text(item, doc)
        if not t:
            continue
        if parts:
            pos += 2
        offsets[item.self_ref] = (pos, pos + len(t))
        parts.append(t)
        pos += len(t)
    text = "\n\n".join(parts)

    titles = {
        (getattr(it, "text", "") or "").strip()
        for it, _ in doc.iterate_items()
        if str(getattr(it, "label", "")).endswith("title")
    }
    chunker = _make_chunker(tokenizer, max_tokens)
    out: list[Chunk] = []
    for ch in chunker.chunk(dl_doc=doc):
        body = (ch.text or "").strip()
        if not body:
            continue
        items = ch.meta.doc_items or []
        pages = sorted({p.page_no for it in items for p in (it.prov or [])})
        spans = [offsets[it.self_ref] for it in items if it.self_ref in offsets]
        start, end = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else (0, 0)
        # a split of a long item, or several items: narrow the span to the chunk's own text, whitespace
        # aside (the chunker may join words with a newline where the item text has a space)
        words = body.split()
        m = re.compile(r"\s+".join(map(re.escape, words))).search(text, start, max(end, start + len(body) + 1))
        if m:
            start, end = m.start(), m.end()
        elif words and (m := re.compile(r"\s+".join(map(re.escape, words[:8]))).search(text, start, end)):
            start = m.start()  # the chunk's text differs further on (markup): at least start where it does
        headings = list(ch.meta.headings or [])
        section = " > ".join(headings)
        # the label of the outermost heading that has one: "3 Results > 3.1 Experimental setup" is results
        covers = "other"
        for hd in headings:
            if hd in titles:  # the document's title is not a section ("Notes on materials ..." is not methods)
                continue
            covers = section_label(hd)
            if covers != "other":
                break
        embed = chunker.contextualize(chunk=ch)
        source, conf = "text", None
        ocr_of = [ocr_items[it.self_ref] for it in items if ocr_items and it.self_ref in ocr_items]
        if ocr_of:
            source = "ocr"
            n = sum(x[1] for x in ocr_of)
            conf = round(sum(x[0] * x[1] for x in ocr_of) / n if n else sum(x[0] for x in ocr_of) / len(ocr_of), 3)
        out.append(
            Chunk(
                index=len(out),
                text=body,
                embed_text=embed,
                page=pages[0] if pages else None,
                page_end=pages[-1] if pages else None,
                char_start=start,
                char_end=end,
                section=section,
                section_covers=covers,
                source=source,
                ocr_confidence=conf,
            )
        )
    return text, out, offsets


#: Revision of the text the vectors are computed from (enters the index fingerprint): 2 = the document
#: title prepended as a contextual chunk header when the heading path does not already carry it.
CONTEXT_REVISION = 2


def indexed_text(embed_text: str, title: str | None, section: str = "") -> str:
    """The text a chunk's dense and BM25 vectors are computed from: a contextual chunk header, then the chunk.

    Args:
        embed_text: the chunk with its heading path (:attr:`Chunk.embed_text`, docling's ``contextualize``:
            the headings, one a line, then the chunk text).
        title: the document title (``ParsedDocument.title``), or None.
        section: the chunk's heading path, ``" > "``-joined (:attr:`Chunk.section`).

    Returns:
        ``title + "\n" + embed_text``, or ``embed_text`` unchanged when there is no title or the title is
        already one of the headings or the first line (docling puts a ``TitleItem`` at heading level 0, so a
        Markdown ``# title`` already heads every chunk). The stored chunk text, its hash and its anchor are
        not affected: only what is embedded.

    Source: contextual chunk headers, i.e. indexing a passage together with its document title and section
    path so that a chunk that never names its subject can still match it; the title field is the classic
    strongest field of structured-document retrieval (Robertson, Zaragoza & Taylor, CIKM 2004, BM25F), and
    passage retrieval with the title prepended is what dense retrievers are trained on (Karpukhin et al.,
    EMNLP 2020, DPR: "title [SEP] passage").
    """
    t = " ".join((title or "").split())
    if not t:
        return embed_text
    heads = {" ".join(h.split()) for h in section.split(" > ")} if section else set()
    first = " ".join(embed_text.split("\n", 1)[0].split())
    if t == first or any(h.startswith(t) for h in heads):
        return embed_text
    return f"{t}\n{embed_text}"
