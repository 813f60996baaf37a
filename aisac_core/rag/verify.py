"""Verifying an evidence anchor against the file on disk and the index, by re-hashing.

An anchor (:class:`~aisac_core.evidence.anchor.Anchor`) holds the sha256 of the file's bytes when it was
indexed and the sha256 of the chunk's text: the file is hashed again, and the chunk text is looked for by
its hash among the document's chunks (or, whitespace normalised, in the document's parsed text). When the
file changed and was not re-indexed yet, its current version is parsed again to look for the passage.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisac_core.errors import PathOutsideRootsError, inside_roots, quote_path
from aisac_core.evidence.anchor import Anchor
from aisac_core.hashing import sha256_file, sha256_text
from aisac_core.rag.documents import parse_as_configured
from aisac_core.rag.formats import DocumentError
from aisac_core.rag.indexer import doc_id_of_path, is_point_id
from aisac_core.rag.results import Verification
from aisac_core.settings import HostRoots
from aisac_core.store.vectors import Cond

if TYPE_CHECKING:
    from aisac_core.rag.embeddings import Embedder
    from aisac_core.settings import Settings
    from aisac_core.store.tables import Document, DocumentContent
    from aisac_core.store.vectors import VectorStore

ANCHOR_STATUSES = ("ok", "file_changed", "chunk_changed", "missing")


def _norm_ws(s: str) -> str:
    return " ".join(s.split())


def _check_quote(out: Verification, span: tuple[int, int], text: str | None) -> None:
    """Re-check an anchor's ``quote_span`` against the chunk ``text``: ``quote`` is the quoted text (whitespace
    collapsed), or None with the reason added to ``detail`` when the span lies outside the chunk."""
    if text is None:
        out["quote"] = None
        out["detail"] += "; the quote span could not be checked (chunk text unavailable)"
    elif span[1] > len(text):
        out["quote"] = None
        out["detail"] += f"; the quote span {list(span)} lies outside the chunk ({len(text)} characters)"
    else:
        out["quote"] = _norm_ws(text[span[0] : span[1]])


class AnchorVerifier:
    """Verifying evidence anchors against the files on disk and the index of one store: :meth:`verify_full_anchor`
    (a chunk's anchor) and :meth:`verify_cell_anchor` (a table cell's). A part of
    :class:`~aisac_core.rag.service.RagService`. The collaborators these methods use: ``settings`` (the registered
    roots; chunking, PDF and OCR settings to re-parse a changed file), ``embedder`` (its tokenizer sizes the chunks of
    a re-parse), :meth:`vectors` (the ``chunks`` collection) and :meth:`document` (the anchored document's manifest
    row and parsed text)."""

    settings: Settings
    embedder: Embedder

    if TYPE_CHECKING:

        def vectors(self) -> VectorStore:
            """The vector store with the ``chunks`` collection ready (:meth:`RagService.vectors`)."""
            ...

        def document(self, doc_id: str) -> tuple[Document, DocumentContent | None] | None:
            """A document's manifest row and parsed content (:meth:`aisac_core.rag.indexer.Manifest.document`)."""
            ...

    def _check_roots(self, path: Path, host: HostRoots | None = None) -> None:
        """With registered roots (the requesting host's, ``host``, else the settings' ``roots``; and the catalogue
        roots), the indexed file must lie inside one to be read: a replica or host whose roots exclude a document does not
        read it, even to verify an anchor. Raises PathOutsideRootsError; no roots registered: unrestricted, as indexing."""
        s = self.settings
        corpus = s.rag.roots if host is None else host.roots
        roots = [Path(r).expanduser().resolve() for r in [*corpus, *s.rag.catalog_roots]]
        if not roots:
            return
        try:
            where = path.resolve()
        except (RuntimeError, OSError):  # a symlink loop: not inside anything
            where = path
        if not inside_roots(where, roots):
            raise PathOutsideRootsError(
                f"the anchored document {quote_path(path)} is outside this process's registered roots "
                f"({', '.join(str(r) for r in roots)}), so it is not read, not even to verify an anchor: add its folder "
                "to the roots (AISAC_ROOTS, or the host's --roots) to verify evidence from it"
            )

    def verify_full_anchor(self, anchor: dict[str, Any], roots: HostRoots | None = None) -> Verification:
        """Check an evidence anchor against the file on disk and the index of this store, by re-hashing.
        ``roots``: the requesting host's roots, which the anchored file must lie in to be read (None: the settings').

        Args:
            anchor: the ``anchor`` dict of a search hit (``rag_search``, ``rag_get_chunk``): ``{chunk_id,
                doc_id, path, sha256, section, page, char_span, chunk_sha256, score}``. Required: ``doc_id``
                (or ``path``), ``sha256`` and ``chunk_sha256``; ``chunk_id`` is used when present. An optional
                ``text`` (the hit's chunk text, when its sha256 equals ``chunk_sha256``) lets the check find
                the passage in a changed file even after the old chunk left the index.

        Returns:
            ``{"status", "chunk_id", "doc_id", "path", "detail", "sha256_now", "current_chunk_id"}`` where
            ``status`` is, in this order of precedence:

            - ``missing``: the document is no longer in the index, or its file is gone or unreadable;
            - ``ok``: the file's sha256 equals the anchor's, and the chunk text with ``chunk_sha256`` is a
              chunk of the document (the anchored point itself, or a chunk of the current index with the same
              text hash, or - anchor ``text`` given - the text occurs in the document's parsed text);
            - ``file_changed``: the file's bytes changed, but the anchored passage is still in the current
              version (a current chunk has the same text sha256, or the passage's text occurs, whitespace
              normalised, in the current version's parsed text): the quote still holds, the page/char span
              may have moved;
            - ``chunk_changed``: the passage is no longer found: the file changed and the text is gone, or
              the file is unchanged but no chunk has that text hash (anchor altered, or the document was
              re-chunked by a new parser revision and the text is not known).

            When the file changed and the index still holds the old version (not re-indexed yet), the current
            file is parsed again (PDF: ~0.1 s/page) to look for the passage. ``current_chunk_id`` names a chunk
            of the current index with the same text, when one exists. ``sha256_now`` is the file's current hash
            (None when missing).

        Raises:
            AnchorError: ``anchor`` is not a dict, or lacks ``sha256`` / ``chunk_sha256`` / (``doc_id`` or ``path``).
            PathOutsideRootsError: with registered roots, the document's file lies outside all of them (not read).
            BadPathError: the anchor's ``path`` (used without ``doc_id``) is empty, holds a NUL byte or is a loop.
        """
        # long function: each anchor outcome (ok, file_changed, chunk_changed, missing, cell) checked in order, one place
        a = Anchor.parse(anchor)  # raises AnchorError naming what is missing
        if a.bbox is not None:
            return self.verify_cell_anchor(a, anchor.get("text"))
        chunk_id = a.chunk_id
        want_sha, want_chunk = a.sha256, a.chunk_sha256
        doc_id = a.doc_id or doc_id_of_path(a.path, what="anchor path")  # type: ignore[arg-type]  # doc_id or path
        out: Verification = {
            "status": "missing",
            "chunk_id": chunk_id,
            "doc_id": doc_id,
            "path": a.path,
            "detail": "",
            "sha256_now": None,
            "current_chunk_id": None,
        }
        got = self.document(doc_id)
        if got is None:
            out["detail"] = (
                f"document {doc_id} is not in the index (removed, or never indexed in this store): "
                "index the file again and search anew"
            )
            return out
        row, content = got
        path = Path(row.path)
        out["path"] = row.path
        self._check_roots(path, roots)
        try:
            now = sha256_file(path)
        except FileNotFoundError:
            out["detail"] = f"the file {row.path} no longer exists"
            return out
        except OSError as exc:
            out["detail"] = f"the file {row.path} cannot be read ({exc})"
            return out
        out["sha256_now"] = now

        vs = self.vectors()
        text: str | None = None
        if isinstance(anchor.get("text"), str) and sha256_text(anchor["text"]) == want_chunk:
            text = anchor["text"]
        anchored_point_ok = False
        if chunk_id and is_point_id(chunk_id):
            recs = vs.retrieve("chunks", [chunk_id])
            if recs and recs[0].payload.get("text_sha256") == want_chunk:
                anchored_point_ok = True
                text = text or recs[0].payload.get("text")
        index_is_current = row.sha256 == now and row.status == "indexed"
        current_match = None
        if index_is_current:
            for pid, p in vs.scroll_ids("chunks", [Cond("doc_id", eq=doc_id)]):
                if p.get("text_sha256") == want_chunk:
                    current_match = pid
                    break
        out["current_chunk_id"] = current_match

        if now == want_sha:
            if anchored_point_ok or current_match:
                out["status"], out["detail"] = "ok", "file unchanged (sha256 equal) and the chunk text hash matches"
                if a.quote_span is not None:
                    if text is None and current_match:
                        recs = vs.retrieve("chunks", [current_match])
                        text = recs[0].payload.get("text") if recs else None
                    _check_quote(out, a.quote_span, text)
            elif (
                text is not None
                and content is not None
                and index_is_current
                and _norm_ws(text) in _norm_ws(content.text)
            ):
                out["status"], out["detail"] = (
                    "ok",
                    (
                        "file unchanged (sha256 equal); the passage occurs in its text (the document was re-chunked since)"
                    ),
                )
            else:
                out["status"] = "chunk_changed"
                out["detail"] = (
                    "file unchanged (sha256 equal) but no chunk of the document has the anchor's "
                    "chunk_sha256: the anchor was altered, or the document was re-chunked by a new "
                    "parser revision; search again for a fresh anchor"
                )
            return out

        # the file changed: is the passage still in the current version?
        found, where = False, ""
        if current_match:
            found, where = True, f"a chunk of the re-indexed version ({current_match}) has the same text"
        elif index_is_current:
            if text is not None and content is not None and _norm_ws(text) in _norm_ws(content.text):
                found, where = True, "the passage occurs in the re-indexed version's text"
        else:
            try:
                parsed = parse_as_configured(path, self.settings, self.embedder.tokenizer())
            except DocumentError as exc:
                out["status"] = "chunk_changed"
                out["detail"] = f"the file changed (sha256 differs) and its current version cannot be parsed: {exc}"
                return out
            if any(sha256_text(c.text) == want_chunk for c in parsed.chunks):
                found, where = True, "a chunk of the current (not yet re-indexed) version has the same text"
            elif text is not None and _norm_ws(text) in _norm_ws(parsed.text):
                found, where = True, "the passage occurs in the current (not yet re-indexed) version's text"
        if found:
            out["status"] = "file_changed"
            out["detail"] = (
                f"the file changed since the anchor was made (sha256 differs), but {where}; page and "
                "char span may have moved"
            )
        else:
            out["status"] = "chunk_changed"
            out["detail"] = (
                "the file changed since the anchor was made (sha256 differs) and the anchored passage "
                "is no longer in it"
                + ("" if text is not None else " (no chunk of the current version has its text hash)")
            )
        return out

    def verify_cell_anchor(self, a: Anchor, text: Any) -> Verification:
        """Check a table cell anchor (:class:`Anchor` with ``bbox``; made by :func:`aisac_core.data.pdftables.
        cell_anchor`) against the PDF on disk: the file is re-hashed and its page re-read; the text inside the cell's box
        (the parsed segments', and the PDF's own characters there) must have the sha256 ``chunk_sha256``, or equal the
        optional ``text`` up to whitespace and typographic variants.

        The file is the indexed document ``doc_id`` when the index holds it, else the anchor's ``path`` resolved inside the
        registered roots (an anchor's path is never opened outside them).

        Returns the :meth:`verify_full_anchor` result: ``ok`` (file unchanged, the box holds the text), ``file_changed`` (the
        file changed but the text is still at that box, or elsewhere on the page: detail says which), ``chunk_changed``
        (the box no longer holds the text, or the file changed and the page lacks it), ``missing`` (no such file).

        Raises:
            AnchorError: a ``text`` given whose sha256 is not the anchor's ``chunk_sha256``.
            PathOutsideRootsError: an anchor path (of a file the index does not hold) outside the registered roots.
        """
        from aisac_core.errors import resolve_in_roots
        from aisac_core.evidence.anchor import AnchorError
        from aisac_core.rag.formats import check_pdf, convert
        from aisac_core.rag.pdfpage import cell_holds, cell_text_at, page_segments, same_text

        if text is not None and (not isinstance(text, str) or sha256_text(text) != a.chunk_sha256):
            raise AnchorError(
                "the anchor's 'text' is not the cell text its chunk_sha256 names: pass the anchor as data_preview or "
                "the answer gave it (or leave 'text' out)"
            )
        out: Verification = {
            "status": "missing",
            "chunk_id": a.chunk_id,
            "doc_id": a.doc_id,
            "path": a.path,
            "detail": "",
            "sha256_now": None,
            "current_chunk_id": None,
        }
        got = self.document(a.doc_id) if a.doc_id else None
        if got is not None:
            path = Path(got[0].path)
        elif a.path:
            s = self.settings
            path = resolve_in_roots(a.path, [*s.rag.roots, *s.rag.catalog_roots], what="anchor path")
        else:
            out["detail"] = f"document {a.doc_id} is not in the index and the anchor names no path"
            return out
        out["path"] = str(path)
        try:
            now = sha256_file(path)
        except OSError as exc:
            out["detail"] = f"the file {path} cannot be read ({exc})"
            return out
        out["sha256_now"] = now
        try:
            check_pdf(path)
            res = convert(path, "pdf", "native")  # the tables are read from the native pipeline's text segments
        except DocumentError as exc:
            out["status"], out["detail"] = "chunk_changed", f"the file can no longer be read as a PDF: {exc}"
            return out
        page = int(a.page or 1)
        assert a.bbox is not None
        at_box = cell_text_at(res, page, a.bbox)

        def holds(t: str) -> bool:
            return sha256_text(t) == a.chunk_sha256 or (isinstance(text, str) and same_text(t, text))

        unchanged = now == a.sha256
        if cell_holds(res, path, page, a.bbox, a.chunk_sha256 or "", text if isinstance(text, str) else None):
            out["status"] = "ok" if unchanged else "file_changed"
            out["detail"] = (
                f"file unchanged (sha256 equal) and page {page} holds the cell text in the anchored box"
                if unchanged
                else f"the file changed since the anchor was made (sha256 differs), but page {page} still holds the "
                "cell text in the anchored box"
            )
            return out
        segs = page_segments(res).get(page, (0.0, 0.0, []))[2]
        elsewhere = any(holds(s.text) for s in segs)
        if not unchanged and elsewhere:
            out["status"] = "file_changed"
            out["detail"] = (
                f"the file changed (sha256 differs); the cell text is on page {page} but no longer in the anchored box"
            )
            return out
        out["status"] = "chunk_changed"
        out["detail"] = (
            f"page {page} no longer holds the cell text in the anchored box (found there: {at_box[:80]!r})"
            if unchanged
            else "the file changed (sha256 differs) and the anchored page no longer holds the cell text"
        )
        return out
