"""Small PDFs of our own making for the PDF-structure tests (reportlab, written at test time).

``make_paper(path, sections=...)``: a one-column paper with a title, authors, a DOI line, an abstract,
numbered headings in bold type, a figure caption, a table and a reference list. ``sections`` maps the
heading text to its paragraphs, so a test can write a second version with one paragraph edited.
``make_scanned(path)``: a page that holds only a drawn bitmap (no text layer).
"""

from __future__ import annotations

from pathlib import Path

TITLE = "Thermal stability of layered perovskite films"
AUTHORS = "Ada Lovelace, Carl Gauss and Marie Curie"
DOI = "10.1234/aisac.2024.0042"

SECTIONS: dict[str, list[str]] = {
    "Abstract": [
        "We report the thermal stability of layered perovskite films annealed between 80 and 200 degrees "
        "Celsius. Films with butylammonium spacers kept their phase up to 160 degrees Celsius."
    ],
    "1 Introduction": [
        "Layered perovskites promise stable solar absorbers. Their decomposition path under heat "
        "is not yet known, which this work addresses."
    ],
    "2 Materials and Methods": [
        "Films were spin coated from dimethylformamide at 4000 rpm and annealed on a hot "
        "plate in nitrogen. X-ray diffraction patterns were recorded every ten minutes."
    ],
    "3 Results": [
        "The (002) reflection vanished above 160 degrees Celsius for every spacer length. Lead iodide "
        "appeared at 180 degrees Celsius as the sole decomposition product.",
        "Figure 1: Diffraction patterns of the annealed films.",
        "Table 1: Onset temperatures of decomposition.",
    ],
    "4 Conclusion": ["Butylammonium spacers give the most stable films of the series studied here."],
    "References": [
        "[1] A. Author. Perovskite stability. J. Mater. Chem. 12 (2019) 1-10.",
        "[2] B. Author. Layered phases. Phys. Rev. B 99 (2020) 115-120.",
    ],
}


def _wrap(text: str, width: int = 92) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)


def make_paper(path: Path, sections: dict[str, list[str]] | None = None, title: str = TITLE) -> Path:
    """Write the paper PDF to ``path`` (one column, A4) and return ``path``."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    sections = SECTIONS if sections is None else sections
    c = canvas.Canvas(str(path), pagesize=A4)
    w, h = A4
    y = h - 80
    c.setFont("Helvetica-Bold", 17)
    c.drawString(72, y, title)
    y -= 24
    c.setFont("Helvetica", 11)
    c.drawString(72, y, AUTHORS)
    y -= 16
    c.setFont("Helvetica", 9)
    c.drawString(72, y, f"doi: {DOI}  (2024)")
    y -= 30
    page = 1

    def newline(dy: float) -> None:
        nonlocal y, page
        y -= dy
        if y < 80:
            c.setFont("Helvetica", 9)
            c.drawString(w / 2, 40, str(page))
            c.showPage()
            page += 1
            y = h - 72

    for heading, paras in sections.items():
        c.setFont("Helvetica-Bold", 12.5)
        c.drawString(72, y, heading)
        newline(20)
        for para in paras:
            caption = para.startswith(("Figure", "Table"))
            if caption and para.startswith("Table"):
                c.setFont("Helvetica", 9)
                c.drawString(72, y, para)
                newline(14)
                for row in (("spacer", "onset (C)", "product"), ("butyl", "160", "PbI2"), ("hexyl", "150", "PbI2")):
                    for j, cell in enumerate(row):
                        c.drawString(90 + 120 * j, y, cell)
                    newline(13)
                newline(8)
                continue
            c.setFont("Helvetica", 9 if caption else 10.5)
            for line in _wrap(para):
                c.drawString(72, y, line)
                newline(14)
            newline(8)
    c.setFont("Helvetica", 9)
    c.drawString(w / 2, 40, str(page))
    c.showPage()
    c.save()
    return path


def make_scanned(path: Path) -> Path:
    """A one-page PDF whose page is only a drawn bitmap: no text layer (like a scan without OCR)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    try:
        from PIL import Image, ImageDraw
    except ImportError:  # pragma: no cover - Pillow comes with docling
        raise
    img = Image.new("L", (600, 200), 255)
    ImageDraw.Draw(img).text((20, 80), "This text is pixels, not characters.", fill=0)
    c = canvas.Canvas(str(path), pagesize=A4)
    c.drawImage(ImageReader(img), 72, 500, width=450, height=150)
    c.showPage()
    c.save()
    return path
