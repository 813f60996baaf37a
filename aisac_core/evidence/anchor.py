"""The evidence anchor: the one type that ties a claim to a passage of an indexed file.

An anchor names a chunk (``chunk_id``) of a document (``doc_id``, ``path``), the sha256 of the file's bytes when it
was indexed (``sha256``), where the passage sits (``section``, ``page``, ``char_span`` in the parsed text) and the
sha256 of the chunk's text (``chunk_sha256``), plus the search ``score`` when it came from a search, and, when a
citation quotes part of the chunk, ``quote_span``: ``[start, end]`` character offsets of the quoted sentence(s) inside
the chunk's text (the chunk hash still names the chunk; the span says which words of it support the claim). A *table
cell anchor* names one cell of a table read out of a PDF (:mod:`aisac_core.rag.pdftables`): ``chunk_id`` is
``cell:<table id>:r<row>c<col>``, ``chunk_sha256`` the sha256 of the cell's text, and ``bbox`` its box on ``page``. Both hashes make
it verifiable later: re-hash the file, look for a chunk with the same text hash. Indexing writes the fields into each
chunk's payload, search turns a payload into an :class:`Anchor`, the trace finds anchors in tool results
(:func:`find_anchors`), the evaluator and the dashboard read them.

Hashes: SHA-256 (FIPS 180-4) as lower-case hex, of the file's bytes and of the chunk text in UTF-8
(:mod:`aisac_core.hashing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from aisac_core.errors import AisacError

#: the keys of an anchor's JSON form, in order
ANCHOR_KEYS = ("chunk_id", "doc_id", "path", "sha256", "section", "page", "char_span", "chunk_sha256", "score")


class AnchorError(AisacError, ValueError):
    """An anchor argument that is not an anchor (not a dict, required keys missing or of the wrong type)."""


@dataclass(frozen=True)
class Anchor:
    """An evidence anchor (see the module docstring for the meaning of each field).

    ``char_span`` is ``[start, end]`` in characters of the document's parsed text (either may be None for chunks
    written before spans were kept); ``page`` is 1-based (None for formats without pages); ``score`` is None when the
    anchor does not come from a search.
    """

    chunk_id: str | None
    doc_id: str | None
    path: str | None
    sha256: str | None
    section: str | None
    page: int | None
    char_span: tuple[int | None, int | None]
    chunk_sha256: str | None
    score: float | None = None
    quote_span: tuple[int, int] | None = None
    #: ``"ocr"`` when the passage was read by OCR from a page image; None for a file's own text
    source: str | None = None
    #: the mean OCR word confidence of the passage (0-1), for ``source == "ocr"``
    ocr_confidence: float | None = None
    #: a table cell's box on its ``page`` ``(l, t, r, b)`` in PDF points, origin top-left (cell anchors only)
    bbox: tuple[float, float, float, float] | None = None

    @classmethod
    def from_payload(cls, chunk_id: str, payload: dict[str, Any], score: float | None = None) -> Anchor:
        """The anchor of a stored chunk: ``payload`` is the chunk's vector-store payload as the indexer writes it
        (``doc_id``, ``path``, ``sha256``, ``section``, ``page``, ``char_start``, ``char_end``, ``text_sha256``,
        and ``source`` / ``ocr_confidence`` for OCR text); ``score`` is rounded to 6 decimals."""
        ocr = payload.get("source") == "ocr"
        return cls(
            chunk_id=chunk_id,
            doc_id=payload.get("doc_id"),
            path=payload.get("path"),
            sha256=payload.get("sha256"),
            section=payload.get("section") or None,
            page=payload.get("page"),
            char_span=(payload.get("char_start"), payload.get("char_end")),
            chunk_sha256=payload.get("text_sha256"),
            score=None if score is None else round(score, 6),
            source="ocr" if ocr else None,
            ocr_confidence=payload.get("ocr_confidence") if ocr else None,
        )

    @classmethod
    def parse(cls, obj: Any) -> Anchor:
        """Validate a client-supplied anchor (the ``anchor`` object of a search hit) and return it.

        Required: ``sha256`` and ``chunk_sha256`` (non-empty strings) and ``doc_id`` or ``path``.

        Raises:
            AnchorError: ``obj`` is not a dict, or a required key is missing or not a non-empty string.
        """
        if not isinstance(obj, dict):
            raise AnchorError(f"anchor must be the anchor object of a search hit (a dict), got {type(obj).__name__}")
        missing = [k for k in ("sha256", "chunk_sha256") if not isinstance(obj.get(k), str) or not obj.get(k)]
        if not _nonempty(obj.get("doc_id")) and not _nonempty(obj.get("path")):
            missing.append("doc_id or path")
        if missing:
            raise AnchorError(
                f"anchor lacks {', '.join(missing)}: pass the whole 'anchor' object of a rag_search "
                "or rag_get_chunk hit ({chunk_id, doc_id, path, sha256, section, page, char_span, "
                "chunk_sha256, score})"
            )
        qs = obj.get("quote_span")
        if qs is not None and not (
            isinstance(qs, (list, tuple))
            and len(qs) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in qs)
            and 0 <= qs[0] < qs[1]
        ):
            raise AnchorError(
                "anchor quote_span must be [start, end]: two integers, 0 <= start < end, character offsets of the "
                "quoted sentence inside the chunk text (or leave it out)"
            )
        bb = obj.get("bbox")
        if bb is not None and not (
            isinstance(bb, (list, tuple))
            and len(bb) == 4
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x == x for x in bb)
            and bb[0] <= bb[2]
            and bb[1] <= bb[3]
        ):
            raise AnchorError(
                "anchor bbox must be [l, t, r, b]: four numbers in PDF points, origin top-left, l <= r and t <= b "
                "(the bbox of a table cell anchor; or leave it out)"
            )
        if bb is not None and not (isinstance(obj.get("page"), int) and obj["page"] >= 1):
            raise AnchorError("a table cell anchor (one with a bbox) needs its page: a 1-based integer")
        span = obj.get("char_span")
        span_t = (span[0], span[1]) if isinstance(span, (list, tuple)) and len(span) == 2 else (None, None)
        conf = obj.get("ocr_confidence")
        ocr = obj.get("source") == "ocr"
        return cls(
            chunk_id=obj["chunk_id"] if _nonempty(obj.get("chunk_id")) else None,
            doc_id=obj["doc_id"] if _nonempty(obj.get("doc_id")) else None,
            path=obj["path"] if _nonempty(obj.get("path")) else None,
            sha256=obj["sha256"],
            section=obj.get("section"),
            page=obj.get("page"),
            char_span=span_t,
            chunk_sha256=obj["chunk_sha256"],
            score=obj.get("score"),
            quote_span=(qs[0], qs[1]) if qs is not None else None,
            source="ocr" if ocr else None,
            ocr_confidence=float(conf)
            if ocr and isinstance(conf, (int, float)) and not isinstance(conf, bool)
            else None,
            bbox=(float(bb[0]), float(bb[1]), float(bb[2]), float(bb[3])) if bb is not None else None,
        )

    def key(self) -> tuple[str | None, str | None, str | None]:
        """Identity of the cited passage: (chunk_id, file sha256, chunk sha256)."""
        return (self.chunk_id, self.sha256, self.chunk_sha256)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (keys :data:`ANCHOR_KEYS`; ``char_span`` as a two-item list; ``quote_span`` added when set;
        ``source: "ocr"`` and ``ocr_confidence`` added for OCR text)."""
        out: dict[str, Any] = {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "path": self.path,
            "sha256": self.sha256,
            "section": self.section,
            "page": self.page,
            "char_span": list(self.char_span),
            "chunk_sha256": self.chunk_sha256,
            "score": self.score,
        }
        if self.quote_span is not None:
            out["quote_span"] = list(self.quote_span)
        if self.source == "ocr":
            out["source"] = "ocr"
            out["ocr_confidence"] = self.ocr_confidence
        if self.bbox is not None:
            out["bbox"] = [round(x, 2) for x in self.bbox]
        return out


def ocr_note(obj: Any) -> str:
    """How evidence read by OCR is labelled wherever it is shown (CLI, run page, exports): ``"OCR text,
    confidence 0.93"`` for an anchor (or a hit, card or citation holding one under ``anchor``) with ``source:
    "ocr"``; ``""`` otherwise. The confidence is Tesseract's mean word confidence (0-1), not a calibrated
    probability (:mod:`aisac_core.rag.ocr`)."""
    if not isinstance(obj, dict):
        return ""
    a = obj if obj.get("source") == "ocr" else obj.get("anchor")
    if not isinstance(a, dict) or a.get("source") != "ocr":
        return ""
    conf = a.get("ocr_confidence")
    return "OCR text" + (f", confidence {conf:.2f}" if isinstance(conf, (int, float)) else "")


def _nonempty(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


def is_anchor(obj: Any) -> TypeGuard[dict[str, Any]]:
    """Whether ``obj`` is the JSON form of an anchor: a dict with a string ``chunk_id``."""
    return isinstance(obj, dict) and isinstance(obj.get("chunk_id"), str)


def find_anchors(result: Any) -> list[dict[str, Any]]:
    """Every anchor in a tool result (any nesting of dicts and lists), in document order.

    An anchor is found as the value of an ``anchor`` key (:func:`is_anchor`); each comes back as its dict with the
    enclosing hit's ``text`` and ``title`` added when the hit has them (``text`` lets a verifier find the passage in
    a changed file).
    """
    found: list[dict[str, Any]] = []
    stack: list[Any] = [result]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            a = x.get("anchor")
            if is_anchor(a):
                found.append(
                    {
                        **a,
                        **({"text": x["text"]} if isinstance(x.get("text"), str) else {}),
                        **({"title": x["title"]} if x.get("title") else {}),
                    }
                )
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, list):
            stack.extend(reversed(x))
    return found
