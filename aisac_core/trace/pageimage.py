"""Evidence page images: a cited passage highlighted on a PNG of its PDF page, for the dashboard's evidence cards.

:func:`evidence_page` renders one page with pypdfium2, finds the passage with pdfium's text page (one code point
and one box per character) and draws a translucent yellow rectangle per text line of the match; results are cached
on disk, keyed by the file's identity (resolved path, size, mtime) and the request.

Coordinates: character boxes are in PDF user space (PDF 32000-1:2008 §8.3.2.3: origin bottom left, y up, 1/72 inch)
as pdfium's ``FPDFText_GetLooseCharBox`` / ``FPDFText_GetCharBox`` return them; ``FPDF_PageToDevice``, the renderer's
own transform, maps them to image pixels (origin top left, y down), page rotation and crop box included.
pdfium is not thread-safe: every pdfium call here runs under docling's process-wide ``pypdfium2_lock`` (the lock
its PDF backend takes), so a page image rendered while a document is being indexed never overlaps it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import io
import itertools
import json
import logging
import math
import os
import re
import tempfile
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageDraw

log = logging.getLogger(__name__)

try:  # the process-wide pdfium lock docling's PDF backend takes: indexing and page images never overlap in pdfium
    from docling.utils.locks import pypdfium2_lock as _PDFIUM_LOCK
except ImportError:  # docling absent (a reduced install): pdfium calls of this module are still serialised
    _PDFIUM_LOCK = threading.Lock()
_CACHE_VERSION = "pageimage-1"  # bump when the drawing or the matching changes: old entries are not served
MAX_HEIGHT_RATIO = 4.0  # image height <= 4 x width
MAX_PIXELS = 6_000_000  # ~6 MP per page image
MAX_RECTS = 200
MIN_WINDOW_KEY = 16  # a word window must have at least this many letters/digits to be searched
MAX_GAP = 40  # matched windows this close (letters/digits) are joined: a citation mark between
FILL, ALPHA, OUTLINE = (255, 221, 0), 0.35, (214, 150, 0)  # translucent yellow, darker outline


@dataclass(frozen=True)
class PageImage:
    """One rendered evidence page (see :func:`evidence_page`)."""

    png: bytes
    width: int
    height: int
    rects: list[tuple[int, int, int, int]]
    page: int
    found: bool
    cached: bool


def normalise_passage(text: str) -> str:
    """NFKC, soft hyphens and control characters dropped, whitespace collapsed to single spaces, stripped."""
    text = unicodedata.normalize("NFKC", text or "")
    return " ".join("".join(c for c in text if c.isspace() or unicodedata.category(c)[0] != "C").split())


@functools.lru_cache(maxsize=4096)
def _key_chars(ch: str) -> str:
    """The matching key of a character: NFKD (ligatures split, accents apart), case folded, letters and digits only;
    spaces, line breaks, hyphens and punctuation vanish, so extraction differences do not break a match."""
    return "".join(c for c in unicodedata.normalize("NFKD", ch).casefold() if c.isalnum())


def _find_ranges(page_key: str, passage: str) -> list[tuple[int, int]]:
    """Ranges ``[start, end)`` of ``page_key`` covered by the passage: the whole passage, else its first 12 words
    plus overlapping 6-word windows (stride 3), each window taken at the occurrence nearest the previous match;
    matches at most ``MAX_GAP`` apart are joined."""
    whole = "".join(map(_key_chars, passage))
    if len(whole) < 3:
        return []
    if (at := page_key.find(whole)) >= 0:
        return [(at, at + len(whole))]
    words = passage.split()
    windows = [" ".join(words[:12])] + [" ".join(words[i : i + 6]) for i in range(0, max(len(words) - 3, 1), 3)]
    ranges: list[tuple[int, int]] = []
    prev_end: int | None = None
    for w in windows[:400]:
        k = "".join(map(_key_chars, w))
        if len(k) < MIN_WINDOW_KEY:
            continue
        hits = [m.start() for m in itertools.islice(re.finditer(re.escape(k), page_key), 20)]
        if hits:
            if prev_end is None:
                best = hits[0]
            else:
                end = prev_end
                best = min(hits, key=lambda h: abs(h - end))
            ranges.append((best, best + len(k)))
            prev_end = best + len(k)
    merged: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if merged and a - merged[-1][1] <= MAX_GAP:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def _box(textpage: Any, i: int) -> tuple[float, float, float, float] | None:
    """The loose box (font ascent to descent) of character ``i``, else (absent, implausible) its tight box, or None."""
    try:
        box = textpage.get_charbox(i)
    except Exception:
        return None
    rect = pdfium_c.FS_RECTF()
    if pdfium_c.FPDFText_GetLooseCharBox(textpage, i, rect):
        loose = (rect.left, rect.bottom, rect.right, rect.top)
        if loose[0] < loose[2] and box[3] - box[1] <= loose[3] - loose[1] <= 3 * (box[3] - box[1]) + 2:
            box = loose
    return box if box[2] > box[0] and box[3] > box[1] and all(map(math.isfinite, box)) else None


def _line_boxes(textpage: Any, indices: list[int]) -> list[tuple[float, float, float, float]]:
    """One user-space box per text line for the characters ``indices`` (reading order): a character joins the line
    if it overlaps it vertically by half the smaller height and is not far to its right (column gap: new box)."""
    lines: list[list[float]] = []
    for i in indices:
        if (box := _box(textpage, i)) is None:
            continue
        x0, y0, x1, y1 = box
        if lines:
            cur = lines[-1]
            overlap, gap = min(y1, cur[3]) - max(y0, cur[1]), x0 - cur[2]
            if overlap >= 0.5 * min(y1 - y0, cur[3] - cur[1]) and gap < 3 * (cur[3] - cur[1]) and x1 > cur[0] - 1:
                cur[:] = [min(cur[0], x0), min(cur[1], y0), max(cur[2], x1), max(cur[3], y1)]
                continue
        lines.append([x0, y0, x1, y1])
    return [(a, b, c, d) for a, b, c, d in lines[:MAX_RECTS]]


def _to_pixels(page: Any, size: tuple[int, int], box: tuple[float, float, float, float]) -> tuple[int, int, int, int]:
    """A user-space box -> an image-pixel box (x0, y0, x1, y1), y down, clipped to the image."""
    xs, ys, dx, dy = [], [], ctypes.c_int(), ctypes.c_int()
    for x, y in ((box[0], box[1]), (box[2], box[3]), (box[0], box[3]), (box[2], box[1])):
        pdfium_c.FPDF_PageToDevice(page, 0, 0, size[0], size[1], 0, x, y, dx, dy)
        xs.append(dx.value)
        ys.append(dy.value)
    return (max(0, min(xs)), max(0, min(ys)), min(size[0], max(xs)), min(size[1], max(ys)))


def _scale(w_pt: float, h_pt: float, width: int) -> float:
    """Pixels per point: ``width`` px across (the renderer rounds up: epsilon), capped in height and area."""
    scale = (width - 1e-3) / w_pt
    if h_pt * scale > MAX_HEIGHT_RATIO * width:
        scale = MAX_HEIGHT_RATIO * width / h_pt
    if (w_pt * scale) * (h_pt * scale) > MAX_PIXELS:
        scale = math.sqrt(MAX_PIXELS / (w_pt * h_pt))
    return scale


def _render_and_locate(
    path: Path, page: int, passage: str, width: int, box: tuple[float, float, float, float] | None = None
) -> tuple[Any, list[tuple[int, int, int, int]], bool] | None:
    """Under the pdfium lock: open, render, locate. (PIL image, pixel rects, found), or None: not displayable."""
    with _PDFIUM_LOCK:
        pdf = pg = tp = None
        try:
            # PdfiumError for a broken or password-protected file; an owner-password-only file (permissions such
            # as "no copying") opens with the empty user password and is shown, as every viewer shows it
            pdf = pdfium.PdfDocument(str(path))
            if not 1 <= page <= len(pdf):
                return None
            w_pt, h_pt = (pg := pdf[page - 1]).get_size()
            if not all(math.isfinite(v) and v > 0 for v in (w_pt, h_pt)):
                return None
            image = pg.render(scale=_scale(w_pt, h_pt, width), rev_byteorder=True).to_pil().convert("RGB")
            if box is not None and all(math.isfinite(v) for v in box):
                # a table cell: its box, top-left origin, into user space (y up from the media box's bottom)
                x0, _y0, _x1, y1 = pg.get_mediabox()
                rect = _to_pixels(pg, image.size, (x0 + box[0], y1 - box[3], x0 + box[2], y1 - box[1]))
                rects = [rect] if rect[2] > rect[0] and rect[3] > rect[1] else []
                return image, rects, bool(rects)
            tp = pg.get_textpage()
            codes = [pdfium_c.FPDFText_GetUnicode(tp, i) for i in range(min(tp.count_chars(), 500_000))]
            for i in range(len(codes) - 1):  # a UTF-16 surrogate pair (math italics): the code point on its first
                if 0xD800 <= codes[i] < 0xDC00 <= codes[i + 1] < 0xE000:
                    codes[i], codes[i + 1] = 0x10000 + ((codes[i] - 0xD800) << 10) + codes[i + 1] - 0xDC00, 0
            keys = [_key_chars(chr(c)) if 0 < c <= 0x10FFFF and not 0xD800 <= c < 0xE000 else "" for c in codes]
            chars = [i for i, k in enumerate(keys) for _ in k]  # page character index of each key character
            ranges = _find_ranges("".join(keys), passage)
            indices = sorted({chars[j] for a, b in ranges for j in range(a, b)})
            rects = [_to_pixels(pg, image.size, box) for box in _line_boxes(tp, indices)]
            rects = [r for r in rects if r[2] > r[0] and r[3] > r[1]]
            return image, rects, bool(rects)
        except Exception as exc:  # a broken or hostile file: no image
            log.debug("evidence page %s p.%s: %s", path, page, exc)
            return None
        finally:
            for obj in (tp, pg, pdf):
                with contextlib.suppress(Exception):
                    obj is not None and obj.close()


def _draw(image: Any, rects: list[tuple[int, int, int, int]]) -> bytes:
    """Tint the rects (blend within their bounding box only, each pixel once), outline them, encode PNG."""
    if rects:
        ux, uy = min(r[0] for r in rects), min(r[1] for r in rects)
        region = image.crop((ux, uy, max(r[2] for r in rects), max(r[3] for r in rects)))
        mask = Image.new("L", region.size, 0)
        for x0, y0, x1, y1 in rects:
            ImageDraw.Draw(mask).rectangle((x0 - ux, y0 - uy, x1 - ux - 1, y1 - uy - 1), fill=255)
        image.paste(Image.blend(region, Image.new("RGB", region.size, FILL), ALPHA), (ux, uy), mask)
        for x0, y0, x1, y1 in rects:
            ImageDraw.Draw(image).rectangle((x0, y0, x1 - 1, y1 - 1), outline=OUTLINE, width=1)
    image.save(buf := io.BytesIO(), format="PNG", optimize=False, compress_level=1)  # ~45 % faster than 6, no larger
    return buf.getvalue()


def _read_cache(cache_dir: Path, key: str, page: int) -> PageImage | None:
    try:
        meta = json.loads((cache_dir / f"{key}.json").read_text(encoding="utf-8"))
        png = (cache_dir / f"{key}.png").read_bytes()
        stored = [tuple(int(v) for v in r) for r in meta["rects"]]
        if not png.startswith(b"\x89PNG") or any(len(r) != 4 for r in stored):
            return None
        rects = [(x0, y0, x1, y1) for x0, y0, x1, y1 in stored]
        return PageImage(
            png=png,
            width=int(meta["width"]),
            height=int(meta["height"]),
            rects=rects,
            page=page,
            found=bool(meta["found"]),
            cached=True,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(cache_dir: Path, key: str, result: PageImage) -> None:
    """PNG then JSON (the JSON is the commit mark), each through a 0600 temp file and os.replace."""
    meta = {
        "rects": [list(r) for r in result.rects],
        "width": result.width,
        "height": result.height,
        "found": result.found,
        "page": result.page,
    }
    try:
        if not cache_dir.is_dir():
            os.makedirs(cache_dir, mode=0o700, exist_ok=True)
            os.chmod(cache_dir, 0o700)
        for suffix, data in ((".png", result.png), (".json", json.dumps(meta).encode("utf-8"))):
            fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-", suffix=suffix)  # created 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, cache_dir / f"{key}{suffix}")
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
    except OSError as exc:
        log.debug("evidence page cache %s not written: %s", cache_dir, exc)


def evidence_page(
    path: Path,
    page: int,
    passage: str,
    *,
    cache_dir: Path,
    width: int = 900,
    box: tuple[float, float, float, float] | None = None,
) -> PageImage | None:
    """Render page ``page`` of the PDF ``path`` with ``passage`` highlighted.

    Args:
        path: the PDF file, recognised by ``%PDF-`` within its first 1024 bytes (not by the suffix).
        page: 1-based page number.
        passage: the cited text (chunk text or quoted sentence), located after normalising both sides (NFKC /
            compatibility decomposition, so "ﬁ" matches "fi"; case, whitespace, line breaks, soft and line-end
            hyphens and punctuation ignored): the whole passage, else its first 12 words and overlapping 6-word
            windows, so a passage spanning lines, or partly on another page, is still covered.
        cache_dir: folder of the PNG + JSON cache (created 0700; files 0600, written atomically).
        width: image width in pixels (16..4096); the height follows the page. A page taller than 4x its width,
            or an image above ~6 MP, is rendered smaller.
        box: a table cell's box ``(l, t, r, b)`` in PDF points with the origin at the top left of the page's media
            box (a cell anchor's ``bbox``): highlighted as it is, instead of searching for ``passage``.

    Returns:
        A :class:`PageImage`: PNG bytes, its size in pixels, the highlight rectangles ``(x0, y0, x1, y1)`` in image
        pixels (origin top left, y down; one per text line; ``[]`` with ``found=False`` when the passage is not on
        the page, whose image is still returned), and ``cached`` when served from ``cache_dir`` without opening
        the PDF. Boxes: pdfium ``FPDFText_GetLooseCharBox`` in PDF user space (PDF 32000-1:2008 §8.3.2.3) mapped
        with ``FPDF_PageToDevice`` (page rotation and crop box included).
        None when the file is missing, unreadable, not a PDF, broken or password-protected, or ``page`` is out
        of range: a bad or hostile file never raises (the reason is logged at debug level).

    Raises:
        ValueError: ``width`` outside 16..4096 (a caller error).
    """
    if not 16 <= (width := int(width)) <= 4096:
        raise ValueError(f"width must be 16..4096 pixels, not {width}")
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        return None
    cache_dir, norm = Path(cache_dir), normalise_passage(passage)
    try:
        path = Path(path).resolve()
        st = path.stat()
        key = hashlib.sha256(
            json.dumps(
                [_CACHE_VERSION, str(path), st.st_size, st.st_mtime_ns, page, norm, width]
                + ([[round(v, 2) for v in box]] if box is not None else []),
                ensure_ascii=False,
            ).encode("utf-8")
        ).hexdigest()
        hit = _read_cache(cache_dir, key, page)  # only a readable PDF of this size and mtime has an entry
        if hit is not None:
            return hit
        with open(path, "rb") as f:
            if b"%PDF-" not in f.read(1024):
                return None
    except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        log.debug("evidence page %s: %s", path, exc)
        return None
    if (done := _render_and_locate(path, page, norm, width, box)) is None:
        return None
    image, rects, found = done
    try:
        png = _draw(image, rects)
    except Exception as exc:  # Pillow failing on a rendered image: no card image rather than an error
        log.debug("evidence page %s p.%s: drawing failed: %s", path, page, exc)
        return None
    result = PageImage(
        png=png, width=image.size[0], height=image.size[1], rects=rects, page=page, found=found, cached=False
    )
    _write_cache(cache_dir, key, result)
    return result
