"""PDF structure: parse time per page and section detection quality on the shared PDFs.

Figures, over every readable PDF under ``shared/data/pdfs`` (the encrypted one is skipped):

- parse time per page: :func:`aisac_core.rag.documents.parse_document` end to end (docling's model-free
  ``NativePdfPipeline`` + aisac's reconstruction + structure + chunking), the best of 2 runs per file
  after one warm-up parse (converter construction excluded); the docling conversion alone
  is timed too, so the reconstruction's share shows. Target: <= 0.1 s/page.
- section detection against the top-level sections a reader sees (``tests/fixtures/papermage_sections.json``,
  written by reading the papermage PDFs): precision and recall of the level-1 headings of
  ``rag_get_overview`` per paper, and micro-averaged.
- heading detection against docling's groundtruth Markdown (``pdfs/docling/groundtruth/*.md``, every
  ``#`` line): precision and recall of all our headings (title included), per file and micro-averaged.

Headings match when their keys (lower-case letters and digits) are equal, or - groundtruth Markdown only,
whose headings are re-typed - when rapidfuzz's ratio of the keys is >= 90.

Scanned PDFs (OCR): word recall / precision, CER, seconds and peak memory per scanned page, retrieval agreement and
the OCR resolution study, on scanned copies of the shared papers (:mod:`bench.ocr`).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from .common import Context, Skip, Timer, make_core, skip_line, table, target_cell, temp_dir
from .ocr import run as ocr_figures

TARGET_S_PER_PAGE = 0.1
TARGET_PR = 0.9
TRUTH = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "papermage_sections.json"
PDF_TRUTH = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "pdf_truth.json"
LAYOUTS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "layouts"


def _key(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _pr(found: list[str], truth: list[str], fuzzy: bool = False) -> tuple[int, int, int]:
    """(true positives among found, found, truth) with one-to-one matching in order of appearance."""
    from rapidfuzz import fuzz

    left = [_key(t) for t in truth]
    tp = 0
    for f in (_key(x) for x in found):
        for i, t in enumerate(left):
            if f == t or (fuzzy and fuzz.ratio(f, t) >= 90):
                tp += 1
                del left[i]
                break
    return tp, len(found), len(truth)


def _ratio(tp: int, n: int) -> float | None:
    return round(tp / n, 3) if n else None


def run(ctx: Context) -> dict[str, Any]:
    """The pdf part; returns the JSON-ready result. Raises :class:`Skip` when the shared PDFs are absent."""
    from aisac_core.rag.documents import parse_document
    from aisac_core.rag.formats import DocumentError, convert
    from aisac_core.rag.pdf import reconstruct_pdf
    from aisac_core.rag.sections import overview_of_structure

    src = ctx.data_dir / "pdfs"
    pdfs = sorted(src.rglob("*.pdf")) if src.is_dir() else []
    if not pdfs:
        raise Skip(f"no PDFs found under {src}")
    truth = json.loads(TRUTH.read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    with temp_dir(ctx, "pdf") as tmp:
        core = make_core(tmp / "store")
        try:
            tok = core.embedder.tokenizer()
        finally:
            core.close()
        readable = []
        for f in pdfs:
            try:
                parse_document(f, tok)  # warm-up (first one builds the converter) and readability check
                readable.append(f)
            except DocumentError:
                continue
        files: list[dict[str, Any]] = []
        for f in readable:
            best_total = best_conv = best_rec = float("inf")
            for _ in range(2):
                with Timer() as tc:
                    res = convert(f, "pdf", "native")
                with Timer() as tr:
                    reconstruct_pdf(res, f.stem)
                with Timer() as tp:
                    doc = parse_document(f, tok)
                best_conv, best_total = min(best_conv, tc.seconds), min(best_total, tp.seconds)
                best_rec = min(best_rec, tr.seconds)
            pages = len(res.pages)
            row: dict[str, Any] = {
                "file": str(f.relative_to(src)),
                "pages": pages,
                "parse_s": round(best_total, 4),
                "convert_s": round(best_conv, 4),
                "reconstruct_s": round(best_rec, 4),
                "s_per_page": round(best_total / pages, 4),
            }
            top = [s["title"] for s in overview_of_structure(doc.structure)["sections"] if s["level"] == 1]
            if f.name in truth and f.parent.name == "papermage":
                row["top_level"] = _pr(top, truth[f.name])
                row["top_level_found"] = top
            gt = src / "docling" / "groundtruth" / (f.stem + ".md")
            if f.parent.name == "docling" and gt.is_file():
                gt_heads = [
                    m.group(1).strip() for m in re.finditer(r"^#+\s+(.+)$", gt.read_text(encoding="utf-8"), re.M)
                ]
                ours = ([doc.structure["metadata"].get("title")] if doc.structure["metadata"].get("title") else []) + [
                    s["title"] for s in doc.structure["sections"]
                ]
                row["headings_vs_groundtruth"] = _pr(ours, gt_heads, fuzzy=True)
            files.append(row)
    pages = sum(r["pages"] for r in files)
    total = sum(r["parse_s"] for r in files)
    conv = sum(r["convert_s"] for r in files)
    rec = sum(r["reconstruct_s"] for r in files)
    per_page = total / pages if pages else None
    rows = [
        (
            r["file"],
            r["pages"],
            r["convert_s"],
            r["reconstruct_s"],
            r["parse_s"],
            r["s_per_page"],
            target_cell(r["s_per_page"] <= TARGET_S_PER_PAGE),
        )
        for r in files
    ]
    rows.append(
        (
            "all",
            pages,
            round(conv, 3),
            round(rec, 3),
            round(total, 3),
            round(per_page or 0, 4),
            target_cell(per_page is not None and per_page <= TARGET_S_PER_PAGE),
        )
    )
    table(
        "pdf: parse time (docling native pipeline + aisac reconstruction + structure + chunking; best of 2)",
        [
            "file",
            "pages",
            "docling convert s",
            "reconstruct s",
            "parse_document s",
            "s/page",
            f"<= {TARGET_S_PER_PAGE}",
        ],
        rows,
        caption="parse_document = docling conversion + aisac's reconstruction + chunking (docling-core "
        "HybridChunker) + structure; 'reconstruct s' times aisac's reconstruction alone",
    )

    def pr_rows(key: str) -> tuple[list[tuple[Any, ...]], float | None, float | None]:
        out, TP, F, T = [], 0, 0, 0
        for r in files:
            if key not in r:
                continue
            tp, nf, nt = r[key]
            # recall counts truth items matched: the same as tp under one-to-one matching
            TP, F, T = TP + tp, F + nf, T + nt
            out.append((r["file"], nt, nf, tp, _ratio(tp, nf) if nf else 1.0, _ratio(tp, nt) if nt else 1.0))
        p, rc = _ratio(TP, F), _ratio(TP, T)
        out.append(("micro-average", T, F, TP, p, rc))
        return out, p, rc

    pm_rows, pm_p, pm_r = pr_rows("top_level")
    table(
        "pdf: top-level section detection vs tests/fixtures/papermage_sections.json (read from the PDFs)",
        ["file", "truth", "found", "matched", "precision", "recall"],
        pm_rows,
    )
    gt_rows, gt_p, gt_r = pr_rows("headings_vs_groundtruth")
    table(
        "pdf: all headings vs docling groundtruth Markdown headings (fuzzy >= 90)",
        ["file", "truth", "found", "matched", "precision", "recall"],
        gt_rows,
    )
    front = _front_matter_table(ctx.data_dir, tok)
    layouts = _layouts_table(tok)
    header = _header_figures(ctx.data_dir)
    try:
        ocr: dict[str, Any] = ocr_figures(ctx)
    except Skip as exc:
        skip_line("pdf/ocr", str(exc))
        ocr = {}
    summary = [
        {
            "metric": "header model, held-out GROBID pairs: title exact / author F1 / title ECE / authors ECE",
            "value": (
                f"{header['title_exact']} / {header['author_f1']} / {header['title_ece']} / {header['authors_ece']}"
                if header
                else "skipped (no corpus)"
            ),
            "target": ">= 0.85 / >= 0.90 / <= 0.05 / <= 0.05",
            "met": bool(header)
            and header["title_exact"] >= 0.85
            and header["author_f1"] >= 0.90
            and header["title_ece"] <= 0.05
            and header["authors_ece"] <= 0.05,
        },
        {
            "metric": "header model s per first page (features + CRF + marginals)",
            "value": header.get("s_per_first_page") if header else None,
        },
        {
            "metric": "titles / first authors / full author lists (pdf_truth.json)",
            "value": f"{front['titles']} / {front['first_authors']} / {front['full_authors']}",
        },
        {"metric": "generated layouts right (title, authors, outline)", "value": layouts},
        {
            "metric": "parse s/page (all shared PDFs)",
            "value": round(per_page, 4) if per_page else None,
            "target": f"<= {TARGET_S_PER_PAGE}",
            "met": per_page is not None and per_page <= TARGET_S_PER_PAGE,
        },
        {
            "metric": "top-level sections precision / recall (papermage)",
            "value": f"{pm_p} / {pm_r}",
            "target": f">= {TARGET_PR}",
            "met": (pm_p or 0) >= TARGET_PR and (pm_r or 0) >= TARGET_PR,
        },
        {"metric": "headings precision / recall (docling groundtruth)", "value": f"{gt_p} / {gt_r}"},
        {
            "metric": "scanned copies at 200 dpi: word recall / precision / CER (body text)",
            "value": f"{ocr['word_recall']} / {ocr['word_precision']} / {ocr['cer']}" if ocr else "skipped",
            "target": ">= 0.97 / >= 0.95 / <= 0.03",
            "met": bool(ocr) and ocr["word_recall"] >= 0.97 and ocr["word_precision"] >= 0.95 and ocr["cer"] <= 0.03,
        },
        {
            "metric": "scanned page: s (render + OCR) / Tesseract peak RSS MB / process peak RSS MB",
            "value": (
                f"{ocr['s_per_scanned_page']} / {ocr['tesseract_peak_rss_mb']} / {ocr['process_peak_rss_mb']}"
                if ocr
                else "skipped"
            ),
        },
        {
            "metric": "retrieval on scanned copies: same top-3 documents (10 questions)",
            "value": ocr.get("retrieval_top3_agreement", "skipped"),
            "target": "10/10",
            "met": ocr.get("retrieval_top3_agreement") == "10/10",
        },
    ]
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": summary,
        "files": files,
        "pages": pages,
        "s_per_page": per_page,
        "convert_s_per_page": conv / pages if pages else None,
        "reconstruct_s_per_page": rec / pages if pages else None,
        "top_level": {"precision": pm_p, "recall": pm_r},
        "groundtruth_headings": {"precision": gt_p, "recall": gt_r},
        "front_matter": front,
        "header_model": header,
        "generated_layouts": layouts,
        "ocr": ocr,
        "targets": {
            "s_per_page": {
                "target": TARGET_S_PER_PAGE,
                "measured": per_page,
                "met": per_page is not None and per_page <= TARGET_S_PER_PAGE,
            }
        },
    }


def _header_figures(data_dir: Path) -> dict[str, Any]:
    """The header model's figures on the held-out split of the GROBID corpus (:mod:`bench.headers`) and its time
    per first page; {} without the corpus or the model."""
    from aisac_core.rag.headers import header_model

    from .headers import evaluate, load_docs, split_of

    folder = data_dir / "pdf_headers" / "grobid"
    model = header_model()
    if model is None or not folder.is_dir():
        return {}
    docs = load_docs(folder)
    sp = split_of(docs)
    test = [d for d in docs if sp[d.doc_id] == "test"]
    with Timer() as t:
        fig, _ = evaluate(model, test)
    keys = ("documents", "title_exact", "author_precision", "author_recall", "author_f1", "title_ece", "authors_ece")
    out = {k: fig[k] for k in keys}
    out["s_per_first_page"] = round(t.seconds / max(1, len(test)), 4)
    table("pdf: header model on the held-out GROBID pairs (bench.headers)", ["measure", "value"], list(out.items()))
    return out


def _front_matter_table(data_dir: Path, tok: Any) -> dict[str, str]:
    """Titles, first authors and full author lists against ``tests/fixtures/pdf_truth.json`` (read from the
    rendered first pages of every readable shared PDF, GROBID's test PDFs included); prints one row per PDF."""
    import unicodedata

    from aisac_core.rag.documents import parse_document

    def norm(x: str | None) -> str:
        return " ".join(unicodedata.normalize("NFKC", x or "").casefold().split())

    truth = {k: v for k, v in json.loads(PDF_TRUTH.read_text(encoding="utf-8")).items() if not k.startswith("_")}
    rows, t_ok, fa_ok, full_ok, n_auth = [], 0, 0, 0, 0
    for key, tr in truth.items():
        d, name = key.split("/")
        f = data_dir / ("pdf_metadata/grobid" if d == "grobid" else f"pdfs/{d}") / name
        if not f.is_file():
            continue
        m = parse_document(f, tok).structure["metadata"]
        title_ok = norm(m["title"]) == norm(tr["title"])
        first = bool(tr["authors"]) and bool(m["authors"]) and norm(m["authors"][0]) == norm(tr["authors"][0])
        full = bool(tr["authors"]) and m["authors"] == tr["authors"]
        t_ok += title_ok
        if tr["authors"]:
            n_auth += 1
            fa_ok += first
            full_ok += full
        rows.append(
            (
                key,
                title_ok,
                m["title_source"],
                m["confidence"],
                m.get("title_uncertain"),
                f"{len(m['authors'])}/{len(tr['authors'])}",
                full,
                m.get("authors_confidence"),
            )
        )
    table(
        "pdf: title and authors vs tests/fixtures/pdf_truth.json (read from the first pages)",
        [
            "file",
            "title right",
            "title_source",
            "title_confidence",
            "uncertain",
            "authors found/true",
            "author list exact",
            "authors_confidence",
        ],
        rows,
    )
    return {
        "titles": f"{t_ok}/{len(rows)}",
        "first_authors": f"{fa_ok}/{n_auth}",
        "full_authors": f"{full_ok}/{n_auth}",
    }


def _layouts_table(tok: Any) -> str:
    """Title, authors and outline of the generated layouts (``tests/fixtures/layouts``, truth in its truth.json);
    prints one row per PDF with the section recall; returns "right/total"."""
    from aisac_core.rag.documents import parse_document
    from aisac_core.rag.sections import overview_of_structure

    truth = {k: v for k, v in json.loads((LAYOUTS / "truth.json").read_text(encoding="utf-8")).items() if k[0] != "_"}
    rows, right = [], 0
    for name, tr in truth.items():
        doc = parse_document(LAYOUTS / name, tok)
        m, ov = doc.structure["metadata"], overview_of_structure(doc.structure)
        heads = [s["title"] for s in ov["sections"]] + [x["title"] for s in ov["sections"] for x in s["subsections"]]
        want = tr["outline"] + tr["sub"]
        recall = sum(1 for h in want if h in heads) / len(want)
        ok = m["title"] == tr["title"] and m["authors"] == tr["authors"] and heads == want
        right += ok
        rows.append(
            (name, m["title"] == tr["title"], m["authors"] == tr["authors"], round(recall, 2), m["outline_source"], ok)
        )
    table(
        "pdf: generated layouts (tests/fixtures/layouts): title, authors, section recall",
        ["file", "title", "authors", "section recall", "outline_source", "all right"],
        rows,
    )
    return f"{right}/{len(rows)}"
