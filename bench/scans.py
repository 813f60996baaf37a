"""Scanned copies of born-digital PDFs, and how well OCR reads them back (issue 41).

A scanned copy: each page rendered by PDFium (``pypdfium2``) to 8-bit grey at ``dpi``, then degraded like a
flatbed scan - a small rotation (``skew`` degrees, white fill), Gaussian sensor noise (``noise``, standard
deviation in grey levels), JPEG compression (quality 75) - and the page images rebuilt into an image-only PDF
(Pillow's PDF writer, one page per image, page size = image size at ``dpi``, so coordinates are unchanged). The
original's text layer is the truth.

Measures (:func:`word_scores`, :func:`line_cer`):

- word recall / precision, order-free: multisets of lower-case alphanumeric tokens; recall = |truth ∩ OCR| /
  |truth|, precision = |truth ∩ OCR| / |OCR|. "Body text": OCR words are counted only where the original page
  has text (their centre inside the box of an original text line, 3 pt slack), so words printed inside figure
  bitmaps, which the original's text layer does not hold either, count neither way.
- CER on aligned lines: each original text line (PDFium's text of that line box, in the original's reading
  order) is aligned to the OCR line with the largest box overlap; CER = Levenshtein distance / length of the
  original line, summed over all lines (characters of the original in the denominator, whitespace collapsed).
  Lines the OCR missed count in full. A low CER needs each line read whole and in order; the reading order across
  columns is checked on the parsed text (``bench/pdf.py``, part ``ocr``).
"""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path
from typing import Any

_TOKEN = re.compile(r"[^\W_]+")


def scan_copy(
    src: Path,
    dst: Path,
    *,
    dpi: int = 200,
    pages: list[int] | None = None,
    skew: float = 0.4,
    noise: float = 6.0,
    seed: int = 0,
    jpeg_quality: int = 75,
) -> Path:
    """Write an image-only copy of ``src`` (pages ``pages``, 1-based; all when None) to ``dst``; returns ``dst``.

    ``skew``: rotation in degrees (alternating sign per page); ``noise``: Gaussian noise sigma in grey levels;
    ``seed`` fixes the noise. Deterministic for equal arguments."""
    import numpy as np
    import pypdfium2 as pdfium
    from PIL import Image

    rng = np.random.default_rng(seed)
    pdf = pdfium.PdfDocument(str(src))
    images: list[Any] = []
    try:
        for k, pno in enumerate(pages or range(1, len(pdf) + 1)):
            page = pdf[pno - 1]
            img = page.render(scale=dpi / 72.0, grayscale=True).to_pil().convert("L")
            page.close()
            if skew:
                img = img.rotate(skew if k % 2 == 0 else -skew, resample=Image.Resampling.BILINEAR, fillcolor=255)
            if noise:
                a = np.asarray(img, dtype=np.float32) + rng.normal(0.0, noise, (img.height, img.width))
                img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "L")
            buf = io.BytesIO()
            img.save(buf, "JPEG", quality=jpeg_quality)
            images.append(Image.open(io.BytesIO(buf.getvalue())))
    finally:
        pdf.close()
    images[0].save(dst, "PDF", save_all=True, append_images=images[1:], resolution=float(dpi))
    return dst


def truth_lines(src: Path, pno: int) -> list[tuple[str, tuple[float, float, float, float]]]:
    """The text lines of page ``pno`` (1-based) of a born-digital PDF as ``(text, (l, t, r, b))`` in points,
    top-left origin, from docling's native parse (its line cells, the same the index reads)."""
    from aisac_core.rag.formats import convert

    res = _converted(src, convert)
    page = res.pages[pno - 1]
    H = page.size.height
    out = []
    for c in page.parsed_page.textline_cells:
        t = (c.text or "").strip()
        if not t:
            continue
        bb = c.rect.to_bounding_box()
        if bb.coord_origin.name != "TOPLEFT":
            bb = bb.to_top_left_origin(page_height=H)
        out.append((t, (bb.l, min(bb.t, bb.b), bb.r, max(bb.t, bb.b))))
    return out


_CONVERTED: dict[Path, Any] = {}


def _converted(src: Path, convert: Any) -> Any:
    if src not in _CONVERTED:
        _CONVERTED.clear()
        _CONVERTED[src] = convert(src, "pdf", "native")
    return _CONVERTED[src]


def _tokens(text: str) -> Counter[str]:
    return Counter(t.lower() for t in _TOKEN.findall(text))


def word_scores(
    truth: list[tuple[str, tuple[float, float, float, float]]], ocr_words: list[tuple[str, float, float, float, float]]
) -> tuple[int, int, int]:
    """``(matched, truth tokens, OCR tokens)`` for one page: ``ocr_words`` are ``(text, l, t, r, b)`` in points;
    only those inside an original line box (3 pt slack) count (module docstring)."""
    tw: Counter[str] = Counter()
    for t, _ in truth:
        tw += _tokens(t)
    kept = []
    for text, l, t, r, b in ocr_words:  # noqa: E741
        cx, cy = (l + r) / 2, (t + b) / 2
        if any(bl - 3 <= cx <= br + 3 and bt - 3 <= cy <= bb + 3 for _, (bl, bt, br, bb) in truth):
            kept.append(text)
    ow = _tokens(" ".join(kept))
    return sum((tw & ow).values()), sum(tw.values()), sum(ow.values())


def line_cer(
    truth: list[tuple[str, tuple[float, float, float, float]]], ocr_lines: list[tuple[str, float, float, float, float]]
) -> tuple[int, int]:
    """``(edit distance, truth characters)`` of one page, each original line against the OCR line overlapping it
    most (module docstring)."""
    from rapidfuzz.distance import Levenshtein

    dist = chars = 0
    for text, (l, t, r, b) in truth:  # noqa: E741
        want = " ".join(text.split())
        best, area = "", 0.0
        for otext, ol, ot, orr, ob in ocr_lines:
            ix = max(0.0, min(r, orr) - max(l, ol))
            iy = max(0.0, min(b, ob) - max(t, ot))
            if ix * iy > area:
                best, area = otext, ix * iy
        got = " ".join(best.split())
        # an OCR line that runs on over a neighbouring original cell: compare the part that overlaps best
        if len(got) > len(want):
            got = _best_window(got, want)
        dist += Levenshtein.distance(want, got)
        chars += len(want)
    return dist, chars


def _best_window(got: str, want: str) -> str:
    from rapidfuzz import fuzz

    al = fuzz.partial_ratio_alignment(want, got)
    if al is None:
        return got
    return got[al.dest_start : al.dest_end]
