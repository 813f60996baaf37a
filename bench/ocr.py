"""Scanned PDFs (issue 41): OCR quality, time and memory per scanned page, and retrieval on scanned copies.

Run as part of ``python -m bench --only pdf`` (skipped with a message where ``tesseract`` is missing or the shared
PDFs are absent). Material: the first two pages of each shared papermage paper (:data:`PAGES`; 16 pages, two-column
and single-column), as born-digital excerpts and as image-only scanned copies at 200 dpi (:func:`bench.scans.scan_copy`:
0.4 degree skew, Gaussian noise sigma 6, JPEG quality 75). The original text layer is the truth.

Figures:

- per scanned page (as indexed: ``Indexer.run`` on the scanned copies, every OCRed page recorded): word recall and
  precision on body text and CER on aligned lines (:mod:`bench.scans`), seconds per page (render + Tesseract, wall
  clock; and CPU seconds of the Tesseract processes), peak resident memory of a Tesseract process and of this
  process;
- retrieval: the same 10 questions (:data:`QUESTIONS`, written from the papers' first pages) against a store of the
  born-digital excerpts and one of the scanned copies; agreement = the same three documents first (as a set);
- resolution, with ``--study``: every scanned page read at 200 / 250 / 300 dpi (:func:`_dpi_study`, the table of
  docs/rag.md "OCR resolution"; about 3 minutes more);
- resolution: two pages scanned at 200 dpi, OCRed at 200 / 250 / 300 dpi (the page image upscaled 1.25x / 1.5x by
  PDFium before Tesseract reads it; recall, precision, CER, s/page): the measurement behind the default ``ocr_dpi``
  = 300.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any

from .common import Context, Skip, make_core, table, target_cell, temp_dir
from .scans import line_cer, scan_copy, truth_lines, word_scores

#: papers and their pages (1-based) in the scanned corpus
PAPERS = [
    "1903.10676.pdf",
    "2020.acl-main.447.pdf",
    "2023.eacl-main.121.pdf",
    "2107.07170.pdf",
    "2203.00130v1.pdf",
    "2206.10883v3.pdf",
    "2302.07302v1.pdf",
    "2304.02623v1.pdf",
    "papermage.pdf",
]
PAGES = 2
#: questions for the retrieval agreement (each about one paper's first pages; the answer is not needed, only that
#: the scanned store ranks the same documents first)
QUESTIONS = [
    "a large corpus of English-language academic papers with full text and resolved citation links",
    "guidelines for human evaluation of faithfulness in long-form summarization",
    "few-shot NLP benchmark with a variable number of shots and class imbalance",
    "making medical research papers approachable to healthcare consumers",
    "summaries of civil rights lawsuits at multiple granularities",
    "augmenting citations in scientific papers with personalized historical context",
    "AI support for real-world expository writing tasks beyond summarization",
    "a unified toolkit for processing visually-rich scientific documents",
    "BERT pretrained on scientific text: named entity recognition on BC5CDR and JNLPBA",
    "annotators rate summary sentences with Likert scales versus span-level judgments",
]
TARGET_RECALL, TARGET_PRECISION, TARGET_CER = 0.97, 0.95, 0.03


def _excerpt(src: Path, dst: Path, pages: list[int]) -> Path:
    import pypdfium2 as pdfium

    out = pdfium.PdfDocument.new()
    pdf = pdfium.PdfDocument(str(src))
    out.import_pages(pdf, [p - 1 for p in pages])
    out.save(str(dst))
    out.close()
    pdf.close()
    return dst


def _texts(core: Any) -> dict[str, str]:
    """The parsed text of every indexed document of ``core``, by file name."""
    from sqlmodel import Session, col, select

    from aisac_core.store.tables import Document, DocumentContent

    with Session(core.engine) as s:
        rows = s.exec(
            select(Document.path, DocumentContent.text).where(col(Document.doc_id) == col(DocumentContent.doc_id))
        ).all()
    return {Path(p).name: t for p, t in rows}


def _order(born: str, scan: str) -> float:
    """Reading-order agreement of two parsed texts: 1 - normalised Levenshtein distance of their word sequences
    (lower-case tokens), so a column read out of turn costs every word it displaces."""
    from rapidfuzz.distance import Levenshtein

    from .scans import _TOKEN

    a = [t.lower() for t in _TOKEN.findall(born)]
    b = [t.lower() for t in _TOKEN.findall(scan)]
    return float(Levenshtein.normalized_similarity(a, b))


def _top_docs(core: Any, q: str, n: int = 3, min_relevance: float | None = None) -> list[str]:
    """The first ``n`` distinct documents of the hybrid hits for ``q``; with ``min_relevance``, only hits whose
    calibrated relevance reaches it count (the ranker's threshold: documents that address the question)."""
    hits = core.rag.search(q, k=30).as_dict()["hits"]
    docs: list[str] = []
    for h in hits:
        if min_relevance is not None and (h.get("relevance") or 0.0) < min_relevance:
            continue
        name = Path(h["path"]).name
        if name not in docs:
            docs.append(name)
        if len(docs) == n:
            break
    return docs


def run(ctx: Context) -> dict[str, Any]:
    """The OCR figures (module docstring). Raises :class:`Skip` without Tesseract or the shared papers."""
    import aisac_core.rag.documents as documents
    from aisac_core.rag.ocr import OcrOptions, engine, ocr_document

    eng = engine()
    if eng is None:
        raise Skip("Tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-eng)")
    src_dir = ctx.data_dir / "pdfs" / "papermage"
    papers = [src_dir / p for p in PAPERS if (src_dir / p).is_file()]
    if not papers:
        raise Skip(f"no papermage PDFs under {src_dir}")
    import pypdfium2 as pdfium

    t0 = time.perf_counter()
    with temp_dir(ctx, "ocr") as tmp:
        born, scans = tmp / "born", tmp / "scans"
        born.mkdir()
        scans.mkdir()
        truth: dict[str, Path] = {}
        for p in papers:
            n = len(pdfium.PdfDocument(str(p)))
            pages = list(range(1, min(PAGES, n) + 1))
            _excerpt(p, born / p.name, pages)
            scan_copy(p, scans / p.name, dpi=200, pages=pages, seed=len(truth))
            truth[p.name] = born / p.name
        # record every page the indexer OCRs
        seen: dict[str, dict[int, Any]] = {}
        orig = documents.ocr_document

        def recording(path: Path, pages: list[int], options: Any, progress: Any = None) -> Any:
            out = orig(path, pages, options, progress)
            seen[path.name] = out
            return out

        documents.ocr_document = recording  # type: ignore[assignment]
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            core_b, core_s = make_core(tmp / "store-born"), make_core(tmp / "store-scan")
            try:
                core_b.rag.indexer.run([born])
                wall0 = time.perf_counter()
                cs = core_s.rag.indexer.run([scans])
                index_wall = time.perf_counter() - wall0
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                born_texts, scan_texts = _texts(core_b), _texts(core_s)
                from aisac_core.rag import ranker

                thr = ranker.load().threshold
                agree, relevant = [], []
                for q in QUESTIONS:
                    a, b = _top_docs(core_b, q), _top_docs(core_s, q)
                    agree.append((q, a, b, set(a) == set(b)))
                    ra, rb = _top_docs(core_b, q, min_relevance=thr), _top_docs(core_s, q, min_relevance=thr)
                    relevant.append((q, ra, rb, set(ra) == set(rb)))
            finally:
                core_b.close()
                core_s.close()
        finally:
            documents.ocr_document = orig  # type: ignore[assignment]
        rows: list[tuple[Any, ...]] = []
        H = N_T = N_O = D = C = 0
        secs: list[float] = []
        for name, pages_ in sorted(seen.items()):
            for pno, page in sorted(pages_.items()):
                tl = truth_lines(truth[name], pno)
                words = [(w.text, w.l, w.t, w.r, w.b) for ln in page.lines for w in ln.words]
                hit, nt, no = word_scores(tl, words)
                d, c = line_cer(tl, [(ln.text, ln.l, ln.t, ln.r, ln.b) for ln in page.lines])
                H, N_T, N_O, D, C = H + hit, N_T + nt, N_O + no, D + d, C + c
                secs.append(page.seconds)
                rows.append(
                    (
                        name,
                        pno,
                        nt,
                        round(hit / nt, 3) if nt else None,
                        round(hit / no, 3) if no else None,
                        round(d / c, 4) if c else None,
                        page.conf and round(page.conf, 3),
                        page.seconds,
                    )
                )
        recall, precision, cer = H / N_T, H / N_O, D / C
        order = {n: round(_order(born_texts.get(n, ""), scan_texts.get(n, "")), 3) for n in sorted(seen)}
        table(
            "pdf/ocr: reading order of the parsed text, scanned vs born-digital (word-sequence similarity)",
            ["file", "similarity"],
            [*order.items(), ("mean", round(sum(order.values()) / max(1, len(order)), 3))],
            caption="1 - normalised Levenshtein distance over the word sequences of the parsed texts (whole excerpt)",
        )
        n_pages = len(secs)
        s_page = sum(secs) / n_pages
        tess_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        tess_peak_mb = ru1.ru_maxrss / 1024
        self_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append(
            ("all (micro)", n_pages, N_T, round(recall, 3), round(precision, 3), round(cer, 4), None, round(s_page, 2))
        )
        table(
            f"pdf/ocr: scanned copies at 200 dpi, read at {OcrOptions().dpi} dpi ({eng.version}, eng), body text vs the "
            "original text layer",
            ["file", "page", "truth words", "word recall", "word precision", "CER (aligned lines)", "conf", "s"],
            rows,
            caption="recall / precision: order-free multisets of lower-case tokens, OCR words counted only inside "
            "the original's text lines; CER: Levenshtein / characters of each original line vs the OCR line "
            "overlapping it most",
        )
        table(
            "pdf/ocr: retrieval on scanned copies vs born-digital excerpts (top-3 documents, 10 questions)",
            ["question", "born-digital top 3", "scanned top 3", "same"],
            [(q[:60], ", ".join(a), ", ".join(b), target_cell(ok)) for q, a, b, ok in agree],
        )
        dpi_rows = _dpi_table(papers[1] if len(papers) > 1 else papers[0], tmp, ocr_document, OcrOptions)
        probe = _memory_probe(scans / (papers[1] if len(papers) > 1 else papers[0]).name)
        dpi_study = _dpi_study(scans, truth, ocr_document, OcrOptions) if ctx.study else []
    same = sum(ok for *_, ok in agree)
    same_rel = sum(ok for *_, ok in relevant)
    top1 = sum(a[:1] == b[:1] for _, a, b, _ in agree)
    overlap = sum(len(set(a) & set(b)) for _, a, b, _ in agree)
    time_rows = [
        ("scanned pages OCRed", n_pages),
        ("s per scanned page (render + Tesseract, wall, mean)", round(s_page, 2)),
        ("load average (1 min) on the 2 cores when measured", round(os.getloadavg()[0], 1)),
        ("Tesseract CPU s per page", round(tess_cpu / n_pages, 2)),
        ("index wall s per scanned page (OCR + parse + embed)", round(index_wall / n_pages, 2)),
        ("one page alone, fresh process: render + OCR CPU s (Python + Tesseract)", probe["cpu_s"]),
        ("one page alone: peak RSS of the Python process (render, TSV, lines), MB", probe["self_mb"]),
        ("one page alone: peak RSS of the Tesseract process, MB", probe["child_mb"]),
        ("peak RSS of this process (indexing, models loaded), MB", round(self_peak_mb, 1)),
        ("chunks from scans", cs.chunks_embedded),
        (
            "retrieval: same top-3 set / same top-1 / top-3 documents shared",
            f"{same}/{len(agree)} / {top1}/{len(agree)} / {overlap}/{3 * len(agree)}",
        ),
        (
            f"retrieval: same top-3 set among documents above the relevance threshold ({thr:.2f}) (secondary)",
            f"{same_rel}/{len(relevant)}",
        ),
    ]
    table("pdf/ocr: time and memory per scanned page (this machine, 2 shared cores)", ["measure", "value"], time_rows)
    return {
        "engine": eng.pin("eng"),
        "pages": n_pages,
        "word_recall": round(recall, 4),
        "word_precision": round(precision, 4),
        "cer": round(cer, 4),
        "s_per_scanned_page": round(s_page, 3),
        "load_average": round(os.getloadavg()[0], 1),
        "tesseract_cpu_s_per_page": round(tess_cpu / n_pages, 3),
        "index_s_per_scanned_page": round(index_wall / n_pages, 3),
        "tesseract_peak_rss_mb": probe["child_mb"],
        "ocr_python_peak_rss_mb": probe["self_mb"],
        "one_page_cpu_s": probe["cpu_s"],
        "children_max_rss_mb": round(tess_peak_mb, 1),
        "process_peak_rss_mb": round(self_peak_mb, 1),
        "reading_order_similarity": order,
        "retrieval_top3_agreement": f"{same}/{len(agree)}",
        "retrieval_top1_agreement": f"{top1}/{len(agree)}",
        "retrieval_top3_overlap": f"{overlap}/{3 * len(agree)}",
        "retrieval_top3_above_threshold_agreement": f"{same_rel}/{len(relevant)}",
        "relevance_threshold": round(thr, 4),
        "retrieval_above_threshold": [{"question": q, "born": a, "scanned": b, "same": ok} for q, a, b, ok in relevant],
        "retrieval": [{"question": q, "born": a, "scanned": b, "same": ok} for q, a, b, ok in agree],
        "per_page": [
            dict(zip(("file", "page", "truth_words", "recall", "precision", "cer", "conf", "s"), r)) for r in rows
        ],
        "dpi": dpi_rows,
        "dpi_study": dpi_study,
        "seconds": round(time.perf_counter() - t0, 1),
        "targets": {
            "recall": {"target": TARGET_RECALL, "measured": round(recall, 4), "met": recall >= TARGET_RECALL},
            "precision": {
                "target": TARGET_PRECISION,
                "measured": round(precision, 4),
                "met": precision >= TARGET_PRECISION,
            },
            "cer": {"target": TARGET_CER, "measured": round(cer, 4), "met": cer <= TARGET_CER},
            "retrieval": {"target": "10/10", "measured": f"{same}/{len(agree)}", "met": same == len(agree)},
        },
    }


_PROBE = """
import json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path
import pypdfium2 as pdfium
from aisac_core.rag.ocr import OcrOptions, engine, ocr_document, render_zoom

def hwm(pid="self"):  # peak resident memory of one process image (VmHWM is reset by exec, ru_maxrss is not)
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0

t = time.process_time()
ocr_document(Path(sys.argv[1]), [1], OcrOptions())
me, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime
# Tesseract alone on the same page bitmap, its VmHWM read until it exits
pdf = pdfium.PdfDocument(sys.argv[1])
page = pdf[0]
dpi = OcrOptions().dpi
img = page.render(scale=render_zoom(*page.get_size(), dpi), grayscale=True).to_pil().convert("L")
png = Path(tempfile.mkdtemp()) / "p.png"
img.save(png)
env = {"PATH": os.environ.get("PATH", ""), "OMP_THREAD_LIMIT": "1"}
p = subprocess.Popen([engine().command, str(png), "-", "--psm", "3", "--dpi", str(dpi), "tsv"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
peak = 0.0
while p.poll() is None:
    try:
        peak = max(peak, hwm(p.pid))
    except OSError:
        break
    time.sleep(0.02)
print(json.dumps({"cpu_s": round(cpu, 2), "self_mb": round(hwm(), 1), "child_mb": round(peak, 1)}))
"""


def _memory_probe(scan: Path) -> dict[str, Any]:
    """Page 1 of ``scan`` OCRed in a fresh Python process: its CPU seconds (imports included) and the peak resident
    memory (``VmHWM``) of that process and of a Tesseract process reading the same page bitmap. ``VmHWM`` because a
    child's ``ru_maxrss`` keeps the peak of the process it was forked from (this one, with its models loaded)."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PROBE, str(scan)], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _dpi_table(src: Path, tmp: Path, ocr_document: Any, OcrOptions: Any) -> list[dict[str, Any]]:  # noqa: N803
    """Two pages scanned at 200 dpi, OCRed at 200 / 250 / 300 dpi (upscaled 1.25x / 1.5x before recognition)."""
    scan = scan_copy(src, tmp / "dpi.pdf", dpi=200, pages=[1, 2], seed=7)
    out = []
    for dpi in (200, 250, 300):
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        got = ocr_document(scan, [1, 2], OcrOptions(dpi=dpi))
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) / len(got)
        H = NT = NO = D = C = 0
        for pno, page in got.items():
            tl = truth_lines(src, pno)
            hit, nt, no = word_scores(tl, [(w.text, w.l, w.t, w.r, w.b) for ln in page.lines for w in ln.words])
            d, c = line_cer(tl, [(ln.text, ln.l, ln.t, ln.r, ln.b) for ln in page.lines])
            H, NT, NO, D, C = H + hit, NT + nt, NO + no, D + d, C + c
        out.append(
            {
                "dpi": dpi,
                "recall": round(H / NT, 4),
                "precision": round(H / NO, 4),
                "cer": round(D / C, 4),
                "s_per_page": round(sum(p.seconds for p in got.values()) / len(got), 2),
                "tesseract_cpu_s_per_page": round(cpu, 2),
            }
        )
    table(
        f"pdf/ocr: OCR resolution ({src.name} pages 1-2 scanned at 200 dpi)",
        ["OCR dpi", "word recall", "word precision", "CER", "s/page (wall)", "Tesseract CPU s/page"],
        [
            (r["dpi"], r["recall"], r["precision"], r["cer"], r["s_per_page"], r["tesseract_cpu_s_per_page"])
            for r in out
        ],
    )
    return out


def _dpi_study(scans: Path, truth: dict[str, Path], ocr_document: Any, OcrOptions: Any) -> list[dict[str, Any]]:  # noqa: N803
    """Every scanned copy in ``scans`` (200 dpi) read at 200 / 250 / 300 dpi: recall, precision and CER over all
    pages and without the one table page (1903.10676), Tesseract CPU seconds per page (``bench --only pdf --study``)."""
    import pypdfium2 as pdfium

    out = []
    for dpi in (200, 250, 300):
        sums = {"all": [0, 0, 0, 0, 0], "prose": [0, 0, 0, 0, 0]}
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        n = 0
        for name, src in sorted(truth.items()):
            with pdfium.PdfDocument(str(scans / name)) as pdf:
                pages = list(range(1, len(pdf) + 1))
            got = ocr_document(scans / name, pages, OcrOptions(dpi=dpi))
            for pno, page in got.items():
                tl = truth_lines(src, pno)
                hit, nt, no = word_scores(tl, [(w.text, w.l, w.t, w.r, w.b) for ln in page.lines for w in ln.words])
                d, c = line_cer(tl, [(ln.text, ln.l, ln.t, ln.r, ln.b) for ln in page.lines])
                n += 1
                for key in ("all",) + (() if name.startswith("1903.10676") else ("prose",)):
                    for k, v in enumerate((hit, nt, no, d, c)):
                        sums[key][k] += v
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        row: dict[str, Any] = {"dpi": dpi, "pages": n}
        for key, (h, nt, no, d, c) in sums.items():
            row[key] = {"recall": round(h / nt, 4), "precision": round(h / no, 4), "cer": round(d / c, 4)}
        row["tesseract_cpu_s_per_page"] = round((ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) / n, 2)
        out.append(row)
    table(
        "pdf/ocr: OCR resolution, every scanned page (200-dpi scans read at 200 / 250 / 300 dpi)",
        ["OCR dpi", "recall", "precision", "CER", "without the table page: R / P / CER", "Tesseract CPU s/page"],
        [
            (
                r["dpi"],
                r["all"]["recall"],
                r["all"]["precision"],
                r["all"]["cer"],
                f"{r['prose']['recall']} / {r['prose']['precision']} / {r['prose']['cer']}",
                r["tesseract_cpu_s_per_page"],
            )
            for r in out
        ],
    )
    return out
