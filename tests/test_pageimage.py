"""Evidence page images (aisac_core.trace.pageimage): a cited passage highlighted on a PNG of its PDF page.

Real PDFs made with reportlab (known text positions), real rendering with pypdfium2, real PNG decoding with Pillow;
on ../shared/data/pdfs (skipped when absent), sentences extracted from real papers are found on their pages."""

from __future__ import annotations

import io
import os
import stat
import threading
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageChops, ImageDraw
from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

from aisac_core.trace.pageimage import MAX_PIXELS, PageImage, evidence_page

REPO = Path(__file__).resolve().parents[1]
SHARED_PDFS = REPO.parent / "shared" / "data" / "pdfs"
W, H = A4
FONT, SIZE = "Vera", 11
X = 72
# page 2: (baseline y in points, text). Line 1 ends with a ligature glyph (U+FB01), lines 1-2 carry a passage that
# wraps, lines 3-4 a word hyphenated over the line break.
LINES = [
    (H - 100, "Coke deposits reduced the conversion of methanol to 61 percent, and the ef\ufb01cient"),
    (H - 114, "regeneration in air restored the activity fully within two hours."),
    (H - 140, "A separate sentence about the reactor tem-"),
    (H - 154, "perature control follows here, far from the first one."),
]
WRAPPED = "the efficient regeneration in air restored the activity"
HYPHENATED = "about the reactor temperature control"
ABSENT = "Quantum chromodynamics of heavy mesons at finite temperature"


def _font() -> None:
    if FONT not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont(FONT, "Vera.ttf"))  # bundled with reportlab; has the fi ligature glyph


def make_pdf(path: Path, *, encrypt: str | None = None) -> Path:
    """Three pages: a title page, the known lines on page 2, and a page rotated by 90 degrees."""
    _font()
    c = canvas.Canvas(str(path), pagesize=A4, encrypt=encrypt)
    c.setFont(FONT, 16)
    c.drawString(X, H - 72, "Notes on catalyst durability")
    c.showPage()
    c.setFont(FONT, SIZE)
    for y, text in LINES:
        c.drawString(X, y, text)
    c.showPage()
    c.setPageRotation(90)  # reportlab also swaps the media box: landscape 842 x 595, shown as portrait
    c.setFont(FONT, SIZE)
    c.drawString(X, 500, "On a rotated page the highlighted sentence still lands on its text.")
    c.showPage()
    c.save()
    return path


@pytest.fixture(scope="module")
def pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pdf(tmp_path_factory.mktemp("pageimage") / "note.pdf")


def _scale(result: PageImage) -> float:
    return result.width / W


def _expected_box(line: int, start: str, end: str, scale: float) -> tuple[float, float, float, float]:
    """Pixel box (x0, y0, x1, y1) of the text from ``start`` to ``end`` (inclusive) on ``LINES[line]``."""
    y, text = LINES[line]
    a, b = text.index(start), text.index(end) + len(end)
    x0 = X + pdfmetrics.stringWidth(text[:a], FONT, SIZE)
    x1 = X + pdfmetrics.stringWidth(text[:b], FONT, SIZE)
    return x0 * scale, (H - y - 0.75 * SIZE) * scale, x1 * scale, (H - y) * scale  # cap height to baseline


def _covers(rect: tuple[int, int, int, int], box: tuple[float, float, float, float], tol: float = 4) -> None:
    x0, y0, x1, y1 = rect
    assert abs(x0 - box[0]) <= tol and abs(x1 - box[2]) <= tol, (rect, box)
    assert y0 <= box[1] + 1 and y1 >= box[3] - 1, (rect, box)  # covers cap height to baseline
    assert y0 >= box[1] - 0.6 * SIZE * 1.6 and y1 <= box[3] + 0.5 * SIZE * 1.6, (rect, box)  # and not much more


def _image(result: PageImage) -> Image.Image:
    img = Image.open(io.BytesIO(result.png))
    img.load()
    return img.convert("RGB")


def test_wrapped_passage_with_ligature_is_highlighted_where_it_was_drawn(pdf: Path, tmp_path: Path) -> None:
    res = evidence_page(pdf, 2, WRAPPED, cache_dir=tmp_path / "c", width=900)
    assert res is not None and res.found and not res.cached and res.page == 2
    img = _image(res)
    assert img.size == (900, res.height) == (res.width, res.height)
    assert abs(res.height - round(900 * H / W)) <= 1
    assert len(res.rects) == 2
    for x0, y0, x1, y1 in res.rects:
        assert 0 <= x0 < x1 <= res.width and 0 <= y0 < y1 <= res.height
    first, second = sorted(res.rects, key=lambda r: r[1])
    s = _scale(res)
    _covers(first, _expected_box(0, "the ef", "\ufb01cient", s))
    _covers(second, _expected_box(1, "regeneration", "activity", s))

    clean = _image(evidence_page(pdf, 2, ABSENT, cache_dir=tmp_path / "c", width=900))
    # inside a rect, background pixels turned yellow
    for x0, y0, x1, y1 in res.rects:
        bg = [
            (x, y)
            for x in range(x0 + 2, x1 - 2)
            for y in range(y0 + 2, y1 - 2)
            if clean.getpixel((x, y)) == (255, 255, 255)
        ]
        assert len(bg) > 50
        for x, y in bg[:: max(1, len(bg) // 50)]:
            r, g, b = img.getpixel((x, y))
            assert r >= 240 and g >= 220 and b <= 190, (x, y, (r, g, b))
    # outside the rects (and their 1-pixel outline) nothing changed
    masked = [im.copy() for im in (img, clean)]
    for m in masked:
        d = ImageDraw.Draw(m)
        for x0, y0, x1, y1 in res.rects:
            d.rectangle((x0 - 1, y0 - 1, x1 + 1, y1 + 1), fill=(0, 0, 0))
    assert ImageChops.difference(*masked).getbbox() is None


def test_hyphenated_passage_and_ligature_in_the_quote(pdf: Path, tmp_path: Path) -> None:
    res = evidence_page(pdf, 2, HYPHENATED, cache_dir=tmp_path, width=600)
    assert res is not None and res.found and res.width == 600 and len(res.rects) == 2
    first, second = sorted(res.rects, key=lambda r: r[1])
    _covers(first, _expected_box(2, "about", "tem-", _scale(res)), tol=6)  # the line-end hyphen may be included
    _covers(second, _expected_box(3, "perature", "control", _scale(res)))
    # a quote with a soft hyphen, a tab and a line break, and one written with another ligature (U+FB00 "ff")
    for quote in ("  restored\tthe activ\u00adity\n fully", "the e\ufb00icient\n regeneration"):
        res = evidence_page(pdf, 2, quote, cache_dir=tmp_path, width=600)
        assert res is not None and res.found, quote


def test_a_long_chunk_partly_on_the_page_is_covered_by_word_windows(pdf: Path, tmp_path: Path) -> None:
    """A chunk whose text differs from the page in places (and continues elsewhere) is still found piecewise."""
    chunk = (
        "Coke deposits reduced the conversion of methanol to 61 percent, and the efficient regeneration "
        "in air [1] restored the activity fully within two hours. Section 3 continues on the next page with "
        "a description of the kinetic model that was fitted to the data."
    )
    res = evidence_page(pdf, 2, chunk, cache_dir=tmp_path)
    assert res is not None and res.found and len(res.rects) == 2
    assert all(r[1] < (H - LINES[2][0] - SIZE) * _scale(res) for r in res.rects)  # nothing on the lines further down


def test_not_found_gives_the_page_without_highlight(pdf: Path, tmp_path: Path) -> None:
    res = evidence_page(pdf, 2, ABSENT, cache_dir=tmp_path)
    assert res is not None and not res.found and res.rects == []
    assert _image(res).size == (900, res.height)
    assert evidence_page(pdf, 1, WRAPPED, cache_dir=tmp_path).found is False  # the passage is on page 2, not 1


def test_rotated_page_does_not_crash_and_the_rect_lands_on_text(pdf: Path, tmp_path: Path) -> None:
    res = evidence_page(pdf, 3, "the highlighted sentence still lands", cache_dir=tmp_path, width=900)
    assert res is not None and res.found and (res.width, res.height) == (900, round(900 * H / W))  # shown upright
    clean = _image(evidence_page(pdf, 3, ABSENT, cache_dir=tmp_path, width=900))
    for x0, y0, x1, y1 in res.rects:
        assert 0 <= x0 < x1 <= res.width and 0 <= y0 < y1 <= res.height
        assert y1 - y0 > x1 - x0  # the line runs vertically on the rotated page
        dark = sum(1 for x in range(x0, x1) for y in range(y0, y1) if sum(clean.getpixel((x, y))) < 300)
        assert dark > 100


@pytest.mark.parametrize("case", ["text_as_pdf", "missing", "page_0", "page_4", "encrypted", "garbage", "truncated"])
def test_bad_inputs_give_none(pdf: Path, tmp_path: Path, case: str) -> None:
    path, page = pdf, 2
    if case == "text_as_pdf":
        path = tmp_path / "fake.pdf"
        path.write_text("this is not a PDF " * 50)
    elif case == "missing":
        path = tmp_path / "missing.pdf"
    elif case == "page_0":
        page = 0
    elif case == "page_4":
        page = 4
    elif case == "encrypted":
        path = make_pdf(tmp_path / "locked.pdf", encrypt="pw")
        with pytest.raises(pdfium.PdfiumError):
            pdfium.PdfDocument(str(path))  # really encrypted
    elif case == "garbage":
        path = tmp_path / "garbage.pdf"
        path.write_bytes(b"%PDF-1.7\n" + os.urandom(20000))
    else:
        path = tmp_path / "truncated.pdf"
        path.write_bytes(pdf.read_bytes()[:1500])
    assert evidence_page(path, page, WRAPPED, cache_dir=tmp_path / "cache") is None


def test_shared_password_protected_pdf_gives_none(tmp_path: Path) -> None:
    locked = SHARED_PDFS / "docling" / "2206.01062_pg3.password-1234.pdf"
    if not locked.exists():
        pytest.skip(f"{locked} absent")
    assert evidence_page(locked, 1, "anything at all here", cache_dir=tmp_path) is None


def test_cache_hit_is_identical_and_a_changed_mtime_renders_again(pdf: Path, tmp_path: Path) -> None:
    src = tmp_path / "doc.pdf"
    src.write_bytes(pdf.read_bytes())
    cache = tmp_path / "cache" / "pages"
    first = evidence_page(src, 2, WRAPPED, cache_dir=cache)
    again = evidence_page(src, 2, WRAPPED, cache_dir=cache)
    assert first is not None and again is not None and not first.cached and again.cached
    assert (
        again.png == first.png
        and again.rects == first.rects
        and (again.width, again.height, again.found) == (first.width, first.height, first.found)
    )
    assert evidence_page(src, 2, WRAPPED, cache_dir=cache, width=700).cached is False  # width is in the key
    # the cache answers without opening the PDF: same size and mtime, unreadable content, still served
    st = src.stat()
    src.write_bytes(b"x" * st.st_size)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert evidence_page(src, 2, WRAPPED, cache_dir=cache).cached is True
    # a changed mtime is a new key: rendered again (and, the content being garbage now, not at all)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert evidence_page(src, 2, WRAPPED, cache_dir=cache) is None
    src.write_bytes(pdf.read_bytes())
    fresh = evidence_page(src, 2, WRAPPED, cache_dir=cache)
    assert fresh is not None and not fresh.cached and fresh.png == first.png
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    files = sorted(cache.iterdir())
    assert {f.suffix for f in files} == {".png", ".json"} and not any(f.name.startswith(".tmp") for f in files)
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)


def test_hostile_page_sizes_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "tall.pdf"
    c = canvas.Canvas(str(path), pagesize=(100, 5000))
    c.drawString(10, 4900, "a very tall page with a line of text")
    c.showPage()
    c.setPageSize((14400, 14400))
    c.drawString(10, 10, "a huge page")
    c.showPage()
    c.save()
    tall = evidence_page(path, 1, "a very tall page", cache_dir=tmp_path, width=900)
    assert tall is not None and tall.found and tall.height <= 4 * 900
    huge = evidence_page(path, 2, "a huge page", cache_dir=tmp_path, width=4096)
    assert huge is not None and huge.width * huge.height <= MAX_PIXELS * 1.01
    with pytest.raises(ValueError):
        evidence_page(path, 1, "x", cache_dir=tmp_path, width=0)


def test_concurrent_calls_are_serialised_safely(pdf: Path, tmp_path: Path) -> None:
    out: list[PageImage | None] = []
    jobs = [(2, WRAPPED), (2, HYPHENATED), (3, "the highlighted sentence"), (1, "catalyst durability")] * 2
    threads = [
        threading.Thread(target=lambda p=p, q=q, i=i: out.append(evidence_page(pdf, p, q, cache_dir=tmp_path / str(i))))
        for i, (p, q) in enumerate(jobs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(out) == len(jobs) and all(r is not None and r.found for r in out)


def _real_papers(n: int) -> list[tuple[Path, str]]:
    """(pdf, sentence from its first page) for the first ``n`` shared papers with text on page 1."""
    if not SHARED_PDFS.is_dir():
        pytest.skip(f"{SHARED_PDFS} absent")
    picked = []
    for path in sorted(SHARED_PDFS.rglob("*.pdf"), key=lambda p: ("papermage" not in p.parts, p)):  # papers first
        try:
            doc = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError:
            continue
        try:
            text = doc[0].get_textpage().get_text_range()
        finally:
            doc.close()
        words = [s for s in text.replace("\r\n", " ").split(". ") if 8 <= len(s.split()) <= 40]
        if words:
            picked.append((path, words[len(words) // 2].strip()))
        if len(picked) == n:
            return picked
    pytest.skip("fewer than 3 shared PDFs with text")


def test_sentences_from_real_papers_are_found(tmp_path: Path) -> None:
    for path, sentence in _real_papers(3):
        res = evidence_page(path, 1, sentence, cache_dir=tmp_path)
        assert res is not None and res.found, (path.name, sentence)
        assert res.width == 900 and _image(res).size == (res.width, res.height)
        assert all(0 <= r[0] < r[2] <= res.width and 0 <= r[1] < r[3] <= res.height for r in res.rects)


def test_math_italics_outside_the_bmp_are_matched(tmp_path: Path) -> None:
    """pdfium reports U+1D6FD-style letters as UTF-16 surrogate pairs; they match the passage's code points."""
    paper = SHARED_PDFS / "papermage" / "2203.00130v1.pdf"
    if not paper.exists():
        pytest.skip(f"{paper} absent")
    formula = "𝐸[𝑦] = 𝛽0 + 𝛾𝑗 + 𝛽1𝑥1 + 𝛽2𝑥2"
    res = evidence_page(paper, 37, formula, cache_dir=tmp_path)  # E[y] = b0 + gj + b1x1 + b2x2 in math italics
    assert res is not None and res.found and len(res.rects) == 1
    res = evidence_page(paper, 37, "E[y] = \u03b20 + \u03b3j + \u03b21x1 + \u03b22x2", cache_dir=tmp_path)
    assert res is not None and res.found  # the plain Greek of a docling chunk matches the math italics (NFKD)


def test_mutated_pdfs_never_raise(pdf: Path, tmp_path: Path) -> None:
    """Random byte corruption of a valid PDF: an image or None, never an exception."""
    import random

    rng, data = random.Random(20), pdf.read_bytes()
    for n in range(40):
        bad = bytearray(data)
        for _ in range(rng.choice([1, 10, 100])):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        path = tmp_path / f"m{n}.pdf"
        path.write_bytes(bytes(bad))
        res = evidence_page(path, rng.choice([1, 2, 3]), WRAPPED, cache_dir=tmp_path / "cache")
        assert res is None or (res.png.startswith(b"\x89PNG") and all(r[2] <= res.width for r in res.rects))
