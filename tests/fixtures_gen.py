"""Test documents of the project's own making: written at test time, never downloaded.

``write_corpus(dir)`` writes:
- ``notes/heat_transfer.md`` and ``notes/enzyme_kinetics.md``: Markdown notes with sections;
- ``report.pdf``: a two-page PDF generated with reportlab; page 1 is about perovskite solar cell
  stability, page 2 about a catalyst; each page carries a unique marker phrase (``PAGE_MARKERS``);
- ``summary.docx`` (python-docx) and ``glossary.html``;
- ``data/measurements.csv``: a table, catalogued and never embedded.

``write_bad_files(dir)`` writes the bad inputs: an empty PDF, random bytes named ``.pdf``, and a PDF
truncated to its first 40 % of bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

PAGE_MARKERS = {1: "perovskite encapsulation humidity lifetime", 2: "zeolite catalyst coking regeneration"}

HEAT_MD = """# Convective heat transfer in a packed bed

## Abstract
We measured the wall-to-bed heat transfer coefficient of a packed bed of 6 mm alumina spheres at
particle Reynolds numbers from 50 to 800. The Nusselt number rose from 12 to 61 over that range.

## Methods
Air flowed upward through a 50 mm steel tube filled with spheres. Thermocouples at five radial
positions recorded the temperature profile; the wall was heated electrically at 2.4 kW per square metre.

## Results
The wall heat transfer coefficient followed Nu = 0.17 Re^0.79 within 8 percent. Radial conduction
dominated below Re = 100.

## Discussion
Channelling near the wall explains the higher coefficient of the smaller tube.
"""

ENZYME_MD = """# Michaelis-Menten kinetics of a lipase

## Abstract
The hydrolysis of p-nitrophenyl butyrate by a fungal lipase follows Michaelis-Menten kinetics with
Km = 0.42 mM and kcat = 38 per second at 30 degrees Celsius and pH 7.5.

## Methods
Initial rates were read at 405 nm in a plate reader; substrate ranged from 0.05 to 4 mM.

## Results
Lineweaver-Burk and nonlinear fits agreed within 5 percent. Above 45 degrees Celsius the enzyme lost
half of its activity within ten minutes, showing thermal denaturation.
"""

HTML = """<!DOCTYPE html><html><head><title>Glossary of rheology</title></head><body>
<h1>Glossary of rheology</h1>
<h2>Viscoelasticity</h2><p>A viscoelastic fluid stores and dissipates energy; the storage modulus G' and
the loss modulus G'' describe the two parts under oscillatory shear.</p>
<h2>Yield stress</h2><p>The stress below which a Bingham plastic does not flow.</p>
</body></html>
"""

CSV = "sample,temperature_K,pressure_kPa\nA1,293.1,101.3\nA2,310.4,99.8\nA3,350.0,102.1\n"


def make_pdf(path: Path) -> Path:
    """A two-page scientific note PDF (reportlab) with headings, paragraphs and page numbers."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    w, h = A4
    pages = [
        (
            "1 Stability of perovskite solar cells",
            [
                f"We studied {PAGE_MARKERS[1]} of methylammonium lead iodide cells.",
                "Cells without encapsulation lost 40 percent of their efficiency after 200 hours at",
                "85 percent relative humidity, while encapsulated cells kept 92 percent of it.",
                "Moisture enters along grain boundaries and forms a hydrate phase.",
            ],
        ),
        (
            "2 Catalyst deactivation",
            [
                f"A second study concerned {PAGE_MARKERS[2]} in a fixed-bed reactor.",
                "Coke deposits reduced the conversion of methanol from 98 to 61 percent in 30 hours.",
                "Burning the coke in air at 550 degrees Celsius restored the activity fully.",
                "Table 1: Conversion before and after regeneration.",
            ],
        ),
    ]
    for i, (heading, lines) in enumerate(pages, 1):
        c.setFont("Helvetica-Bold", 16)
        if i == 1:
            c.drawString(72, h - 72, "Notes on materials durability")
            c.setFont("Helvetica-Bold", 13)
            c.drawString(72, h - 110, heading)
        else:
            c.setFont("Helvetica-Bold", 13)
            c.drawString(72, h - 90, heading)
        c.setFont("Helvetica", 10.5)
        y = h - 140
        for line in lines:
            c.drawString(72, y, line)
            y -= 14
        c.setFont("Helvetica", 9)
        c.drawString(w / 2, 40, str(i))
        c.showPage()
    c.save()
    return path


def make_docx(path: Path) -> Path:
    """A small DOCX with a heading and two paragraphs (python-docx)."""
    import docx

    d = docx.Document()
    d.add_heading("Summary of the corrosion campaign", level=1)
    d.add_paragraph("Stainless steel coupons lost 0.8 mg per square centimetre in 3 percent saline after 30 days.")
    d.add_heading("Conclusion", level=2)
    d.add_paragraph("Passivation with nitric acid halved the corrosion rate.")
    d.save(str(path))
    return path


def write_corpus(root: Path) -> Path:
    """Write the corpus into ``root`` (created) and return it."""
    (root / "notes").mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    (root / "notes" / "heat_transfer.md").write_text(HEAT_MD)
    (root / "notes" / "enzyme_kinetics.md").write_text(ENZYME_MD)
    (root / "glossary.html").write_text(HTML)
    (root / "data" / "measurements.csv").write_text(CSV)
    make_pdf(root / "report.pdf")
    make_docx(root / "summary.docx")
    return root


def write_bad_files(root: Path) -> dict[str, Path]:
    """Bad inputs: ``empty.pdf`` (0 bytes), ``binary.pdf`` (random bytes), ``truncated.pdf``."""
    root.mkdir(parents=True, exist_ok=True)
    out = {"empty": root / "empty.pdf", "binary": root / "binary.pdf", "truncated": root / "truncated.pdf"}
    out["empty"].write_bytes(b"")
    out["binary"].write_bytes(os.urandom(4096))
    full = make_pdf(root / "full.tmp")
    data = full.read_bytes()
    out["truncated"].write_bytes(data[: int(len(data) * 0.4)])
    full.unlink()
    return out
