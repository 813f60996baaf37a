"""Reading a document by its structure: an overview (metadata, sections with page ranges and chunk counts,
captions) and the text of named sections in reading order with page anchors, paged.

Both read the structure stored with each parse (``DocumentContent.structure_json``, written by
:func:`aisac_core.rag.structure.document_structure`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aisac_core.rag.identify import apply_identifier
from aisac_core.rag.results import Block, Overview, SectionInfo, SectionText
from aisac_core.rag.search import SearchError
from aisac_core.rag.structure import SECTION_LABELS
from aisac_core.store.tables import Document, DocumentContent

if TYPE_CHECKING:
    from aisac_core.ports import PaperLookup

#: tokens are estimated as characters / 4 (the usual rule of thumb for English text with BPE tokenizers,
#: e.g. OpenAI's "a token is ~4 characters"); MiniLM's WordPiece gives a similar count on scientific prose.
CHARS_PER_TOKEN = 4
#: bounds of ``max_tokens`` in :meth:`SectionReader.read_sections`
READ_MIN_TOKENS, READ_MAX_TOKENS = 50, 20000


class DocumentNotFoundError(SearchError):
    """An unknown doc_id, or a document without a stored parse (failed, or indexed by an older aisac)."""


class SectionNotFoundError(SearchError):
    """A section the document does not have; the message lists those it has."""


def _public_section(sec: dict[str, Any]) -> SectionInfo:
    keys = ("title", "number", "level", "label", "page_start", "page_end", "chunk_count")
    return cast(SectionInfo, {k: sec.get(k) for k in keys})


def overview_of_structure(st: dict[str, Any]) -> dict[str, Any]:
    """``{metadata, sections, labels, captions}`` of :meth:`SectionReader.overview` from a parse's structure
    (``ParsedDocument.structure``, stored as ``DocumentContent.structure_json``)."""
    secs = st.get("sections", [])
    top: list[dict[str, Any]] = []
    min_level = min((s["level"] for s in secs), default=1)
    for s in secs:
        if s["level"] <= min_level or not top:
            top.append({**_public_section(s), "subsections": []})
        else:
            top[-1]["subsections"].append(_public_section(s))
    labels: dict[str, dict[str, Any]] = {}
    for s in secs:
        lab = labels.setdefault(s["label"], {"sections": [], "page_start": None, "page_end": None})
        lab["sections"].append(s["title"])
        for key, fn in (("page_start", min), ("page_end", max)):
            if s.get(key) is not None:
                lab[key] = s[key] if lab[key] is None else fn(lab[key], s[key])
    return {"metadata": st.get("metadata", {}), "sections": top, "labels": labels, "captions": st.get("captions", [])}


def _match_sections(secs: list[dict[str, Any]], section: str) -> list[int]:
    """Indexes of the sections ``section`` names: a taxonomy label (all sections with it, outermost
    only), else a heading (case- and whitespace-insensitive; with or without its number) or a number."""
    want = " ".join(section.lower().split())
    if want in SECTION_LABELS:
        idx = [i for i, s in enumerate(secs) if s["label"] == want]
    else:

        def forms(s: dict[str, Any]) -> set[str]:
            t = " ".join(s["title"].lower().split())
            out = {t}
            if s.get("number"):
                out.add(s["number"].lower())
                out.add(re.sub(r"^" + re.escape(s["number"].lower()) + r"\.?\s*", "", t))
            return out

        idx = [i for i, s in enumerate(secs) if want in forms(s)]
    # drop sections nested in an earlier match (their text is already included)
    out: list[int] = []
    for i in idx:
        if not any(secs[j]["char_start"] <= secs[i]["char_start"] < secs[j]["char_end"] for j in out):
            out.append(i)
    return out


class SectionReader:
    """Reading a document of one store by its structure: :meth:`overview` and :meth:`read_sections`. A part of
    :class:`~aisac_core.rag.service.RagService`. The collaborators these methods use: :meth:`document` (a document's
    manifest row and parsed content) and ``paper_lookup`` (looks a paper up by the DOI / arXiv id printed on it; None:
    the layout reading alone)."""

    paper_lookup: PaperLookup | None

    if TYPE_CHECKING:

        def document(self, doc_id: str) -> tuple[Document, DocumentContent | None] | None:
            """A document's manifest row and parsed content (:meth:`aisac_core.rag.indexer.Manifest.document`)."""
            ...

    def _structure_of(self, doc_id: str) -> tuple[Document, DocumentContent, dict[str, Any]]:
        """The manifest row, parsed content and stored structure of an indexed document; raises
        :class:`DocumentNotFoundError` (unknown, failed, being indexed, or indexed without a structure)."""
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise DocumentNotFoundError(
                "doc_id is empty: rag_list_documents lists the indexed documents and their doc_ids"
            )
        got = self.document(doc_id.strip())
        if got is None:
            raise DocumentNotFoundError(f"no indexed document {doc_id!r}: rag_list_documents lists doc_ids")
        row, content = got
        if row.status == "failed":
            raise DocumentNotFoundError(f"document {doc_id} ({row.path}) was not indexed: {row.error}")
        if content is None or row.status != "indexed":
            raise DocumentNotFoundError(
                f"document {doc_id} ({row.path}) is being indexed ({row.status}); try again "
                "when rag_job_status says the job is done"
            )
        if not content.structure_json:
            raise DocumentNotFoundError(
                f"document {doc_id} was indexed by an older aisac without structure: index it "
                "again (rag_index with its path; the new parser revision re-parses it)"
            )
        return row, content, json.loads(content.structure_json)

    def overview(self, doc_id: str) -> Overview:
        """What a document of this store is and which parts it has.

        Returns ``{doc_id, path, file_type, pages, chunk_count, sha256, indexed_at, title, metadata: {title,
        authors, year, doi, arxiv_id}, sections: [{title, number, level, label, page_start, page_end,
        chunk_count, subsections: [{title, number, level, label, page_start, page_end, chunk_count}]}],
        labels: {label: {sections, page_start, page_end}}, captions: [{kind (figure|table), text, page}]}``.
        ``sections`` are the top-level sections (level 1) in reading order; headings found before any top-level
        one appear as top-level too. ``labels`` lists the taxonomy labels the document really has (usable as
        ``rag_read_sections`` section or ``rag_search`` ``section`` filter). Metadata comes from the first pages
        (the title by type size, authors from the block under it, DOI / arXiv id / year by pattern); a field
        not found is null (or []). ``metadata`` also says where the guessed fields come from and how sure they
        are: ``title_source`` / ``confidence``, ``authors_source`` / ``authors_confidence`` ("layout", "pdf_info",
        "layout+pdf_info"), ``outline_source`` / ``outline_confidence`` ("outline": the document's own bookmarks
        or heading markup; "layout"), each confidence 0..1 (docs/rag.md, "Title and authors"); ``title_confidence`` /
        ``authors_confidence`` are calibrated probabilities (docs/rag.md, "Header model") and below
        :data:`aisac_core.rag.headers.UNCERTAIN_BELOW` the field is flagged ``title_uncertain`` / ``authors_uncertain``
        and ``title`` shows the file name with the guess beside it. A DOI or arXiv id on the first pages is looked up
        first (:func:`aisac_core.rag.identify.apply_identifier`): where it answers, its title and authors win
        (``title_source``: "crossref", "arxiv", ...). ``page_*`` are null for formats without pages.

        Raises:
            DocumentNotFoundError: unknown doc_id, a failed document (its error is quoted), no stored structure.
        """
        row, content, st = self._structure_of(doc_id)
        ov = overview_of_structure(st)
        # identifiers first (aisac_core.rag.identify): the registry's title and authors when the DOI / arXiv id answers
        ov["metadata"] = apply_identifier(ov["metadata"], content.text[:8000], self.paper_lookup)
        title = ov["metadata"].get("title") or row.title
        if ov["metadata"].get("title_uncertain"):
            # below the threshold a guess is not presented as the title: the file name, the guess beside it
            title = f"{Path(row.path).name} (title uncertain: {title!r})"
        return {
            "doc_id": row.doc_id,
            "path": row.path,
            "file_type": row.file_type,
            "pages": row.pages,
            "chunk_count": row.chunk_count,
            "sha256": row.sha256,
            "indexed_at": row.indexed_at.isoformat() if row.indexed_at else None,
            "title": title,
            "metadata": ov["metadata"],
            "sections": ov["sections"],
            "labels": ov["labels"],
            "captions": ov["captions"],
        }

    def read_sections(
        self, doc_id: str, section: str, max_tokens: int = 2000, cursor: int | None = None
    ) -> SectionText:
        """The text of a document's section(s) (of this store) in reading order, with page anchors, paged.

        Args:
            doc_id: from ``rag_list_documents`` / a search hit.
            section: a taxonomy label (``methods``, ``results``, ... : every section with that label) or a
                heading as the overview lists it (``"3.1 Setup"``, ``"Setup"`` or ``"3.1"``).
            max_tokens: page size, 50..20000 tokens (estimated as characters / 4, :data:`CHARS_PER_TOKEN`).
                A block longer than the page is cut at a word boundary and continued on the next page.
            cursor: ``next_cursor`` of the previous page (a character offset into the document's plain text);
                omit for the first page.

        Returns:
            ``{doc_id, title, section, matched: [{title, number, level, label, page_start, page_end,
            chunk_count}], text, blocks: [{kind (heading|text|caption|table|reference|list), page, char_span,
            section}], tokens (estimate of this page), total_tokens, next_cursor (null on the last page)}``.
            ``text`` is the page's blocks joined by blank lines, headings as Markdown ``#`` lines, each other
            block prefixed with its page anchor ``[p. N]`` (PDF) - the ``char_span`` of a block indexes into
            the document's plain text (resource ``aisac://documents/{doc_id}/text``), like search anchors.

        Raises:
            DocumentNotFoundError: unknown doc_id / failed document / no stored structure.
            SectionNotFoundError: the document has no such section; the message lists the labels and
                headings it has.
            SearchError: max_tokens or cursor out of range.
        """
        if (
            isinstance(max_tokens, bool)
            or not isinstance(max_tokens, int)
            or not READ_MIN_TOKENS <= max_tokens <= READ_MAX_TOKENS
        ):
            raise SearchError(
                f"max_tokens must be an integer from {READ_MIN_TOKENS} to {READ_MAX_TOKENS}, got {max_tokens!r}"
            )
        if not isinstance(section, str) or not section.strip():
            raise SearchError(
                "section is empty: give a label (abstract, introduction, methods, results, discussion, "
                "conclusion, datasets, references, other) or a heading from rag_get_overview"
            )
        row, content, st = self._structure_of(doc_id)
        return sections_of_structure(row.doc_id, row.title, content.text, st, section, max_tokens, cursor)


def sections_of_structure(
    doc_id: str,
    title: str | None,
    text: str,
    st: dict[str, Any],
    section: str,
    max_tokens: int = 2000,
    cursor: int | None = None,
) -> SectionText:
    """:meth:`SectionReader.read_sections` on a parse: ``text`` (the plain text) and ``st`` (its structure,
    ``ParsedDocument.structure``) of the document ``doc_id`` whose stored ``title`` is given; same arguments,
    result and errors (SectionNotFoundError, SearchError for a bad cursor)."""
    if cursor is not None and (isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor <= len(text)):
        raise SearchError(f"cursor must be a next_cursor returned by a previous call (0..{len(text)}), got {cursor!r}")
    secs = st.get("sections", [])
    idx = _match_sections(secs, section)
    if not idx:
        labels = sorted({s["label"] for s in secs})
        heads = [s["title"] for s in secs if s["level"] <= 1] or [s["title"] for s in secs]
        raise SectionNotFoundError(
            f"document {doc_id} has no section {section!r}. Its section labels: "
            f"{', '.join(labels) or '(none: no headings were found)'}; its top-level headings: "
            f"{'; '.join(heads[:40]) or '(none)'}. Pass one of these (rag_get_overview lists all)."
        )
    ranges = [(secs[i]["char_start"], secs[i]["char_end"]) for i in idx]
    blocks = [b for b in st.get("blocks", []) if any(a <= b[2] < z for a, z in ranges)]
    total = sum(b[3] - b[2] for b in blocks)
    budget = max_tokens * CHARS_PER_TOKEN
    pos = cursor or 0
    out_blocks: list[Block] = []
    texts: list[str] = []
    used = 0
    next_cursor: int | None = None
    for kind, page, s, e, si in blocks:
        if e <= pos:
            continue
        s = max(s, pos)
        piece = text[s:e]
        if used and used + len(piece) > budget:
            next_cursor = s
            break
        if len(piece) > budget - used:  # one block longer than the page: cut at a word boundary
            cut = piece.rfind(" ", 0, budget - used)
            cut = cut if cut > 0 else budget - used
            piece = piece[:cut]
            e = s + cut
            next_cursor = e
        used += len(piece)
        title = secs[si]["title"] if si >= 0 else None
        out_blocks.append({"kind": kind, "page": page, "char_span": [s, e], "section": title})
        if kind == "heading":
            level = secs[si]["level"] if si >= 0 else 1
            texts.append("#" * min(6, level + 1) + " " + piece.strip())
        else:
            texts.append((f"[p. {page}] " if page is not None else "") + piece.strip())
        if next_cursor is not None:
            break
    return {
        "doc_id": doc_id,
        "title": st.get("metadata", {}).get("title") or title,
        "section": section,
        "matched": [_public_section(secs[i]) for i in idx],
        "text": "\n\n".join(texts),
        "blocks": out_blocks,
        "tokens": -(-used // CHARS_PER_TOKEN),
        "total_tokens": -(-total // CHARS_PER_TOKEN),
        "next_cursor": next_cursor,
    }
