"""OCR of scanned PDF pages with Tesseract, offline, into the text lines aisac's PDF reconstruction reads.

Which pages: a page is OCRed only when it has no usable text layer (:func:`pages_needing_ocr`): text made mostly
of unmapped glyphs (docling-parse writes a glyph it cannot map to Unicode as ``GLYPH<...>``; U+FFFD and private-use
code points are unmapped too), or no text at all over an image, or a near-empty text layer (under
:data:`STAMP_LETTERS` letters and digits, e.g. a "Downloaded from ..." stamp) over an image covering at least
:data:`SCAN_AREA` of the page. A blank page or one of vector graphics is no scan; a page with its own text is never
OCRed.

How: the page is rendered by PDFium (``pypdfium2``, already installed with docling) to an 8-bit grey bitmap at
``dpi`` (default 300: chosen by measurement, docs/rag.md "Scanned PDFs (OCR)": a scan of 200 dpi, the usual
resolution of digitised back issues, is upscaled 1.5x by PDFium so that body text reaches the x-height Tesseract
reads best), written to a private temporary
folder and read by the ``tesseract`` command (Tesseract 5, LSTM engine, Debian packages ``tesseract-ocr`` and
``tesseract-ocr-eng``; nothing is downloaded) with ``--psm 3`` (automatic page segmentation) and the ``tsv`` output
configuration: one row per word with its block, paragraph and line numbers, its box in pixels and its
confidence (0-100). Words of one Tesseract line become one :class:`OcrLine`, its box converted to PDF points
(``px * 72 / dpi``, top-left origin, the page's coordinate system in docling); the reconstruction
(:mod:`aisac_core.rag.pdf`) then orders, joins and labels them exactly as it does a PDF's own text lines.

Weight: Tesseract's LSTM engine reports no font attributes, so a line is marked bold by its stroke width relative
to its font size, at least :data:`BOLD_INK_RATIO` times the page's median over its lines (bold faces are drawn
with stems about 1.5-2 times wider than regular ones); headings are then found as for a born-digital PDF (weight,
size, numbering). Font size: from the word boxes and the letters they hold (:func:`_em_and_baseline`).

Bounds: at most ``max_pages`` scanned pages and ``time_limit_s`` seconds of OCR per document (the settings
``AISAC_OCR_MAX_PAGES``, ``AISAC_OCR_TIME_LIMIT_S``, named in the error; Tesseract runs with the time left as its
timeout); a page bitmap has at most :data:`MAX_PIXELS` pixels (a hostile page size is read at a lower resolution);
``progress(done, total)`` is called after every page, and an exception it raises (a cancelled job) stops the
document between two pages. Tesseract runs as a child process with a minimal environment, reading a bitmap aisac
rendered into a private 0700 folder (the PDF itself never reaches it).

Confidence: Tesseract's word confidence (``conf``, 0-100, the LSTM recogniser's certainty), divided by 100. It is
shown as the recogniser reports it and is not a calibrated probability of the word being right.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from aisac_core.rag.formats import DocumentError

#: the Debian packages of the engine and its English language data (named when they are missing)
OCR_PACKAGES = "tesseract-ocr tesseract-ocr-eng"
#: pages with fewer letters than this over a page-size bitmap count as scans (a stamp or a page number on an image)
STAMP_LETTERS = 25
#: a bitmap covering at least this share of the page area is a scanned page image
SCAN_AREA = 0.6
#: a line whose stroke width (relative to its font size) is at least this multiple of the page's median line is bold
BOLD_INK_RATIO = 1.3
#: most pixels a page is rendered with (A0 at 200 dpi is 62 million): a hostile PDF may declare a page of 200 x 200
#: inches (PDF's largest, 14,400 pt), which at 200 dpi would be a 1.6 GB bitmap; larger pages are read at less dpi
MAX_PIXELS = 64_000_000
#: most pixels on one side of a page bitmap (a 1 x 10^9 pt page would otherwise be one very long bitmap)
MAX_SIDE = 16_384
#: the font name given to OCR lines (the reconstruction's weight test reads ``bold``, set from ink)
OCR_FONT = "OCR"
OCR_FONT_BOLD = "OCR-Bold"
_UNMAPPED = re.compile(r"GLYPH<[^>]*>|[\ufffd\ue000-\uf8ff]")
#: typographic quotes and dashes as docling-parse gives them from a born-digital text layer (ASCII): measured on the
#: 9 shared papermage papers' first two pages, whose text layers hold 40 U+2019, 23 curly double quotes and 24 en/em
#: dashes (pdfium) and whose parsed text holds none of them; Tesseract reads the printed glyphs (’ “ ” — –), so a
#: scanned copy indexed them apart from the born-digital one ("patient’s" vs "patient's": other embedding tokens)
OCR_FOLD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2013": "-",
        "\u2014": "-",
    }
)
_LANG = re.compile(r"^[A-Za-z_]{3,20}(\+[A-Za-z_]{3,20}){0,4}$")


class OcrError(DocumentError):
    """A scanned PDF that cannot be OCRed: the engine is missing, a limit was reached, or the engine failed."""


@dataclass(frozen=True)
class OcrOptions:
    """How scanned pages are read (from ``settings.rag``: ``ocr``, ``ocr_dpi``, ``ocr_max_pages``,
    ``ocr_time_limit_s``, ``ocr_language``).

    ``enabled``: False refuses scanned PDFs as before OCR existed. ``dpi``: render resolution (dots per inch).
    ``max_pages``: most scanned pages per document. ``time_limit_s``: most seconds of OCR per document.
    ``language``: Tesseract language(s), ``eng`` or ``eng+deu`` (each needs its ``tesseract-ocr-<lang>`` package).
    """

    enabled: bool = True
    dpi: int = 300
    max_pages: int = 200
    time_limit_s: float = 900.0
    language: str = "eng"

    @classmethod
    def from_settings(cls, settings: Any) -> OcrOptions:
        """The options of ``settings`` (an :class:`aisac_core.settings.Settings`)."""
        r = settings.rag
        return cls(
            enabled=r.ocr == "auto",
            dpi=r.ocr_dpi,
            max_pages=r.ocr_max_pages,
            time_limit_s=r.ocr_time_limit_s,
            language=r.ocr_language,
        )


@dataclass(frozen=True)
class OcrWord:
    """One recognised word: text, box in PDF points (top-left origin), confidence in [0, 1]."""

    text: str
    l: float  # noqa: E741
    t: float
    r: float
    b: float
    conf: float


@dataclass
class OcrLine:
    """One recognised line: its words, box in PDF points (top-left origin), mean word confidence in [0, 1], and
    whether its strokes are bold (module docstring)."""

    words: list[OcrWord]
    l: float  # noqa: E741
    t: float
    r: float
    b: float
    conf: float
    bold: bool = False

    @property
    def text(self) -> str:
        """The words joined by single spaces."""
        return " ".join(w.text for w in self.words)


@dataclass
class OcrPage:
    """The OCR of one page (1-based ``page_no``): lines, mean word confidence, seconds spent (render + OCR)."""

    page_no: int
    lines: list[OcrLine] = field(default_factory=list)
    conf: float | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class OcrEngine:
    """The installed engine: command path, version (``tesseract 5.3.0``), language-data folder and the sha256 of
    each language's ``.traineddata`` file (they enter the index fingerprint)."""

    command: str
    version: str
    tessdata: str
    languages: Mapping[str, str]

    def pin(self, language: str) -> str:
        """``tesseract 5.3.0+eng:<sha256[:16]>``: the engine and model versions a scanned page was read with."""
        parts = [f"{lang}:{self.languages.get(lang, 'missing')[:16]}" for lang in language.split("+")]
        return f"{self.version}+{'+'.join(parts)}"


def _env() -> dict[str, str]:
    # one thread: Tesseract's OpenMP threads slow it down on a shared 2-core machine; no user config read
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TESSDATA_PREFIX")}
    env["OMP_THREAD_LIMIT"] = "1"
    return env


@functools.lru_cache(maxsize=1)
def engine() -> OcrEngine | None:
    """The installed Tesseract (:class:`OcrEngine`), or None when the ``tesseract`` command is missing or fails
    to report its version. Cached for the process."""
    cmd = shutil.which("tesseract")
    if cmd is None:
        return None
    try:
        ver = subprocess.run([cmd, "--version"], capture_output=True, text=True, timeout=30, env=_env())
        langs = subprocess.run([cmd, "--list-langs"], capture_output=True, text=True, timeout=30, env=_env())
    except (OSError, subprocess.SubprocessError):
        return None
    first = (ver.stdout or ver.stderr).strip().splitlines()
    if ver.returncode != 0 or not first:
        return None
    m = re.search(r'"([^"]+)"', langs.stdout)
    tessdata = m.group(1) if m else ""
    languages: dict[str, str] = {}
    for name in langs.stdout.strip().splitlines()[1:]:
        name = name.strip()
        f = Path(tessdata) / f"{name}.traineddata"
        if name and f.is_file():
            languages[name] = hashlib.sha256(f.read_bytes()).hexdigest()
    return OcrEngine(cmd, first[0].strip(), tessdata, MappingProxyType(languages))


#: revision of how OCR words become text lines (a new one re-reads scanned documents only, born-digital ones keep
#: their fingerprint): 2 = typographic quotes and dashes folded as a text layer gives them (:data:`OCR_FOLD`); OCR
#: lines of either estimated weight continue one title; a usual section name alone on an OCR line, set larger than
#: the body, is a heading (aisac_core.rag.frontmatter, aisac_core.rag.pdf); 3 = capitals read with a lower-case l
#: ("Al", "Fl") re-read by the document's own vocabulary (:func:`resolve_stroke_confusions`)
OCR_READING = 3


def fingerprint_part(options: OcrOptions) -> str:
    """What the index fingerprint records of OCR: off, the engine missing, or engine + language-data versions, the
    resolution and :data:`OCR_READING` (a new Tesseract, new language data or a new way of reading its lines re-reads
    scanned pages once)."""
    if not options.enabled:
        return "ocr=off"
    eng = engine()
    if eng is None:
        return "ocr=missing"
    return f"ocr={eng.pin(options.language)}@{options.dpi}dpi/r{OCR_READING}"


def _usable(text: str) -> int:
    """Letters and digits of ``text`` outside unmapped-glyph markers."""
    return sum(ch.isalnum() for ch in _UNMAPPED.sub("", text))


def page_needs_ocr(page: Any) -> bool:
    """Whether a page of docling's native conversion result (``res.pages[i]``) has no usable text layer (module
    docstring): no text cell, mostly unmapped glyphs, or a near-empty text layer over a page-size bitmap."""
    pp = page.parsed_page
    if pp is None:
        return False
    texts = [c.text or "" for c in pp.textline_cells]
    total = sum(len(t.strip()) for t in texts)
    joined = "".join(texts)
    if total and sum(len(m) for m in _UNMAPPED.findall(joined)) >= 0.5 * total:
        return True  # a text layer of unmapped glyphs: the rendered page is readable, its text is not
    if _usable(joined) >= STAMP_LETTERS or page.size is None:
        return False
    # no text and a bitmap of any size, or a stamp over a bitmap covering most of the page (a blank page or a page
    # of vector graphics is no scan)
    bitmaps = getattr(pp, "bitmap_resources", None) or ()
    if total == 0 and bitmaps:
        return True
    area = page.size.width * page.size.height
    for bm in bitmaps:
        bb = bm.rect.to_bounding_box()
        if area > 0 and abs(bb.r - bb.l) * abs(bb.b - bb.t) >= SCAN_AREA * area:
            return True
    return False


def pages_needing_ocr(res: Any) -> list[int]:
    """The 1-based numbers of the pages of ``res`` (docling's native ``ConversionResult``) to OCR."""
    return [p.page_no if p.page_no >= 1 else p.page_no + 1 for p in res.pages if page_needs_ocr(p)]


def missing_engine_message(name: str) -> str:
    """The refusal for a scanned PDF where Tesseract is not installed (names the packages)."""
    return (
        f"{name} has no text layer (a scanned or image-only PDF) and the OCR engine is not installed: install "
        f"Tesseract (Debian/Ubuntu: apt-get install {OCR_PACKAGES}; macOS: brew install tesseract) and index it "
        "again, or run OCR on it yourself (e.g. ocrmypdf) and index the result"
    )


def parse_tsv(tsv: str, scale: float) -> list[OcrLine]:
    """Lines from Tesseract's TSV output (``tesseract img - tsv``: header row, then ``level page_num block_num
    par_num line_num word_num left top width height conf text``; level 5 rows are words). ``scale``: points per
    pixel (72 / dpi). Empty words and words of confidence -1 (no text) are dropped; typographic quotes and dashes
    become the ASCII characters a born-digital text layer is read as (:data:`OCR_FOLD`)."""
    lines: dict[tuple[str, str, str], list[OcrWord]] = {}
    for row in tsv.splitlines()[1:]:
        f = row.split("\t")
        if len(f) < 12 or f[0] != "5":
            continue
        text = "\t".join(f[11:]).strip().translate(OCR_FOLD)
        try:
            left, top, w, h, conf = int(f[6]), int(f[7]), int(f[8]), int(f[9]), float(f[10])
        except ValueError:
            continue
        if not text or conf < 0:
            continue
        lines.setdefault((f[2], f[3], f[4]), []).append(
            OcrWord(text, left * scale, top * scale, (left + w) * scale, (top + h) * scale, conf / 100.0)
        )
    out = []
    for words in lines.values():
        em, base = _em_and_baseline(words)
        out.append(
            OcrLine(
                words=words,
                l=min(w.l for w in words),
                t=base - ASCENT * em,
                r=max(w.r for w in words),
                b=base + DESCENT * em,
                conf=statistics.fmean(w.conf for w in words),
            )
        )
    return out


#: share of the em above the baseline (cap height / ascenders) and below it (descenders) in a Latin text face;
#: a word box spans the parts its letters reach (Times: cap height 0.66, ascender 0.68, x-height 0.45, descender
#: 0.22 em; Computer Modern: 0.68, 0.69, 0.43, 0.19)
ASCENT, DESCENT, XHEIGHT = 0.68, 0.21, 0.45
_ASC = re.compile(r"[A-Z0-9bdfhklt\[\](){}/|!?%&$#@]")
_DESC = re.compile(r"[gjpqy,;()\[\]{}|@$]")


def _em_and_baseline(words: list[OcrWord]) -> tuple[float, float]:
    """The font size (em, points) and baseline of a line from its word boxes: a word's box height is the part of
    the em its letters reach (ascenders, x-height, descenders; :data:`ASCENT`), so each word gives an estimate
    of the em; the median over the line is robust to a few odd boxes. Line boxes built from em and baseline have
    the same height for every line of one size (box heights of raw OCR words vary with the letters, 7-11 pt
    for 10-pt type), which the reconstruction's size tests (headings, paragraph breaks) need."""
    ems: list[float] = []
    bases: list[float] = []
    for w in words:
        h = w.b - w.t
        asc, desc = bool(_ASC.search(w.text)), bool(_DESC.search(w.text))
        reach = (ASCENT if asc else XHEIGHT) + (DESCENT if desc else 0.0)
        em = h / reach
        ems.append(em)
        bases.append(w.b - (DESCENT * em if desc else 0.0))
    return statistics.median(ems), statistics.median(bases)


def _mark_bold(lines: list[OcrLine], img: Any, scale: float) -> None:
    """Set ``bold`` on lines whose stroke width, relative to their font size, is at least :data:`BOLD_INK_RATIO`
    times the page's median line. Stroke width of a binarised word image = 2 x dark pixels / dark-light edges
    (a stroke of width w and length L has area w*L and 2*L edge pixels), summed over the line's words."""
    import numpy as np

    dark = np.asarray(img) < 128
    rel: list[float] = []
    for ln in lines:
        area = edges = 0
        for w in ln.words:
            x0, y0, x1, y1 = (max(0, int(round(v / scale))) for v in (w.l, w.t, w.r, w.b))
            box = dark[y0:y1, x0:x1]
            if box.size == 0:
                continue
            area += int(box.sum())
            edges += int((box[:, 1:] != box[:, :-1]).sum()) + int((box[1:, :] != box[:-1, :]).sum())
        em_px = (ln.b - ln.t) / (ASCENT + DESCENT) / scale
        rel.append(2 * area / edges / em_px if edges and em_px > 0 else 0.0)
    if len(rel) < 3:
        return
    med = statistics.median(rel)
    for ln, x in zip(lines, rel):
        ln.bold = med > 0 and x >= BOLD_INK_RATIO * med


#: a token of capitals and digits holding a lower-case ``l``: in many faces capital I, lower-case l and the digit 1
#: are one vertical stroke, and Tesseract reads "AI" as "Al" and "F1" as "Fl" (measured on the 16 scanned pages of
#: bench/ocr.py read at 200 dpi: 10 of 34 "AI" became "Al", 12 of 16 "F1" became "Fl"; docs/rag.md)
_CAPS_WITH_L = re.compile(r"^(?=.*l)(?=.*[A-Z])[A-Z0-9l]{2,12}$")
_WORD_TOKEN = re.compile(r"[^\W_]+")
#: a reading that replaces an "l" must occur at least this often in the document's own OCR words
VOCAB_MIN_COUNT = 2


def _stroke_variants(token: str) -> list[str]:
    """The readings of ``token`` with each lower-case ``l`` (at most 3) read as ``I`` or ``1``."""
    out = [""]
    ls = token.count("l")
    if ls > 3:
        return []
    for ch in token:
        out = [o + c for o in out for c in (("I", "1") if ch == "l" else (ch,))]
    return [o for o in out if o != token]


def resolve_stroke_confusions(pages: Mapping[int, OcrPage]) -> int:
    """Re-read, in place, tokens of capitals and digits holding a lower-case ``l`` ("Al", "Fl") by the document's own
    vocabulary; returns how many tokens changed.

    A token matching :data:`_CAPS_WITH_L` becomes the variant with ``I`` or ``1`` for its ``l`` (:func:`_stroke_variants`)
    that the same document's OCR words hold at least :data:`VOCAB_MIN_COUNT` times with a higher mean confidence than
    the token's own readings (the recogniser was surer of that reading of the same glyph shape elsewhere in the
    document); the most frequent such variant wins. A token without such a variant stays as read: "Al" in a chemistry
    paper that never writes "AI" twice, "Al2O3" (no "AI2O3"), "Cl". Tokens are runs of letters and digits inside a
    word ("Al-based" -> "Al"); the word's box and confidence are kept."""
    count: Counter[str] = Counter()
    conf: dict[str, float] = {}
    for page in pages.values():
        for ln in page.lines:
            for w in ln.words:
                for t in _WORD_TOKEN.findall(w.text):
                    count[t] += 1
                    conf[t] = conf.get(t, 0.0) + w.conf
    choice: dict[str, str] = {}
    for t in count:
        if not _CAPS_WITH_L.match(t):
            continue
        mean = conf[t] / count[t]
        ok = [v for v in _stroke_variants(t) if count[v] >= VOCAB_MIN_COUNT and conf[v] / count[v] > mean]
        if ok:
            choice[t] = max(ok, key=lambda v: (count[v], conf[v]))
    if not choice:
        return 0
    changed = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal changed
        t = m.group(0)
        if t in choice:
            changed += 1
            return choice[t]
        return t

    for page in pages.values():
        for ln in page.lines:
            ln.words = [replace(w, text=_WORD_TOKEN.sub(sub, w.text)) for w in ln.words]
    return changed


def ocr_document(
    path: Path, pages: list[int], options: OcrOptions, progress: Callable[[int, int], None] | None = None
) -> dict[int, OcrPage]:
    """OCR ``pages`` (1-based) of the PDF at ``path``.

    Args:
        path: the PDF (already opened by docling, so readable and not encrypted).
        pages: the page numbers to read (:func:`pages_needing_ocr`).
        options: resolution, limits, language (:class:`OcrOptions`).
        progress: ``progress(done, total)`` after each page; an exception it raises stops the OCR between pages
            and propagates (a cancelled job).

    Returns:
        ``{page_no: OcrPage}`` for every page of ``pages``, capitals read with a lower-case l re-read by the
        document's own vocabulary (:func:`resolve_stroke_confusions`, over all the pages read).

    Raises:
        OcrError: Tesseract missing (the message names the packages), a language without its data, more pages than
            ``max_pages`` (``AISAC_OCR_MAX_PAGES``), the time limit ``time_limit_s`` (``AISAC_OCR_TIME_LIMIT_S``)
            reached, or Tesseract failing on a page.
    """
    eng = engine()
    if eng is None:
        raise OcrError(missing_engine_message(path.name))
    if not _LANG.match(options.language):
        raise OcrError(f"OCR language {options.language!r} is not of the form 'eng' or 'eng+deu' (AISAC_OCR_LANGUAGE)")
    missing = [lang for lang in options.language.split("+") if lang not in eng.languages]
    if missing:
        raise OcrError(
            f"{path.name} needs OCR in {'+'.join(missing)}, whose language data is not installed: apt-get install "
            + " ".join(f"tesseract-ocr-{m.lower()}" for m in missing)
            + f" (installed: {', '.join(sorted(eng.languages)) or 'none'}; AISAC_OCR_LANGUAGE)"
        )
    if len(pages) > options.max_pages:
        raise OcrError(
            f"{path.name} has {len(pages)} scanned pages, more than the OCR page limit of {options.max_pages} per "
            "document (setting AISAC_OCR_MAX_PAGES): raise the limit or split the file"
        )
    import pypdfium2 as pdfium

    deadline = time.monotonic() + options.time_limit_s
    out: dict[int, OcrPage] = {}
    pdf = pdfium.PdfDocument(str(path))
    try:
        with tempfile.TemporaryDirectory(prefix="aisac-ocr-") as tmp:  # created 0700
            img_path = Path(tmp) / "page.png"
            for k, pno in enumerate(pages):
                t0 = time.monotonic()
                left = deadline - t0
                if left <= 0:
                    raise _time_error(path.name, options, k, len(pages))
                page = pdf[pno - 1]
                try:
                    pw, ph = page.get_size()
                    zoom = render_zoom(pw, ph, options.dpi)
                    img = page.render(scale=zoom, grayscale=True).to_pil().convert("L")
                finally:
                    page.close()
                scale = 1.0 / zoom  # points per pixel
                img.save(img_path)
                os.chmod(img_path, 0o600)
                try:
                    run = subprocess.run(
                        [eng.command, str(img_path), "-", "-l", options.language, "--psm", "3"]
                        + ["--dpi", str(max(1, round(72 * zoom))), "tsv"],
                        capture_output=True,
                        text=True,
                        timeout=left,
                        env=_env(),
                        stdin=subprocess.DEVNULL,
                    )
                except subprocess.TimeoutExpired:
                    raise _time_error(path.name, options, k, len(pages)) from None
                if run.returncode != 0:
                    raise OcrError(
                        f"{path.name}: Tesseract failed on page {pno} (exit {run.returncode}): "
                        f"{(run.stderr or '').strip()[:300] or 'no message'}"
                    )
                lines = parse_tsv(run.stdout, scale)
                _mark_bold(lines, img, scale)
                words = [w.conf for ln in lines for w in ln.words]
                out[pno] = OcrPage(
                    pno, lines, statistics.fmean(words) if words else None, round(time.monotonic() - t0, 3)
                )
                if progress is not None:
                    progress(k + 1, len(pages))
    finally:
        pdf.close()
    resolve_stroke_confusions(out)
    return out


def render_zoom(width_pt: float, height_pt: float, dpi: int) -> float:
    """Pixels per point to render a page of ``width_pt`` x ``height_pt`` points at ``dpi``, lowered so that the
    bitmap has at most :data:`MAX_PIXELS` pixels and :data:`MAX_SIDE` pixels a side."""
    w, h = max(1.0, width_pt), max(1.0, height_pt)
    zoom = min(dpi / 72.0, MAX_SIDE / max(w, h))
    if w * h * zoom * zoom > MAX_PIXELS:
        zoom = (MAX_PIXELS / (w * h)) ** 0.5
    return zoom


def _time_error(name: str, options: OcrOptions, done: int, total: int) -> OcrError:
    return OcrError(
        f"{name}: OCR stopped at the time limit of {options.time_limit_s:g} s per document (setting "
        f"AISAC_OCR_TIME_LIMIT_S) after {done} of {total} scanned pages: raise the limit or split the file"
    )
