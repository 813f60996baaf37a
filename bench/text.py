"""Text as printed: the PDF text aisac stores (chunk text, quotes, anchors) against the shared Markdown ground truth.

Figures (issue 42, acceptance 3), each before (``reconstruct_pdf(..., as_printed=False)``: the text layer as
docling-parse reads it, aisac-parse-7) and after (:mod:`aisac_core.rag.printed`):

- **CER** against docling's ground truth Markdown (``pdfs/docling/groundtruth/<stem>.md`` for each shared PDF that
  has one): every prose block of the Markdown (blank-line separated; tables, images, code and formulas left out;
  heading marks, list bullets and Markdown escapes removed) is aligned to the span of the stored text that matches
  it best (rapidfuzz's partial-ratio alignment, its ends then moved by up to 8 characters to the smallest distance);
  CER = sum of Levenshtein distances / sum of the blocks' characters, whitespace runs as one space. Reading order
  and missing blocks weigh in as they do for a reader quoting the text.
- **spacing accents left**: "¨"-style characters (:data:`aisac_core.rag.printed.SPACING_ACCENTS`) in the stored text
  of every shared PDF.
- **line-end hyphens**: the decisions (joined / hyphen kept) on a fixed sample checked by hand
  (``bench/data/hyphen_sample.json``: the PDF, the two halves and the form the printed word has), right / checked.
- **spaces restored**: lines given a space from their glyph positions, per file.

Run: ``python -m bench --only text``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .common import Context, Skip, make_core, table, target_cell, temp_dir

SAMPLE = Path(__file__).resolve().parent / "data" / "hyphen_sample.json"
#: titles and authors as printed, read off the rendered first pages (tests/fixtures/pdf_truth.json)
FRONT_TRUTH = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "pdf_truth.json"
TARGET_CER_RATIO = 0.5
TARGET_HYPHENS = 0.95


def md_blocks(md: str) -> list[str]:
    """The prose blocks of a ground-truth Markdown file (module docstring), whitespace runs as one space."""
    out: list[str] = []
    fence = False
    for block in re.split(r"\n\s*\n", md):
        b = block.strip()
        if b.startswith("```"):
            fence = not fence if b.count("```") % 2 else fence
            continue
        if fence or not b or b.startswith(("|", "<!--", "$$")):
            continue
        lines = []
        for ln in b.splitlines():
            ln = re.sub(r"^\s*(#{1,6}\s+|[-*+]\s+)", "", ln)
            lines.append(ln)
        t = " ".join(" ".join(lines).split())
        t = re.sub(r"\\([_*#\[\]()`|\\<>-])", r"\1", t).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
        if len(t) >= 20:
            out.append(t)
    return out


#: dashes and quotes folded on both sides of a comparison: docling's ground truth and docling-parse both fold them
#: (the printed “…” and — read as " and -), so they would count as neither artefact nor repair
_TYPO = str.maketrans(
    {
        "\u2010": "-",
        "\u2011": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
    }
)


def comparable(text: str) -> str:
    """``text`` as compared: typographic dashes and quotes folded (:data:`_TYPO`), whitespace runs as one space."""
    return " ".join(text.translate(_TYPO).split())


def aligned_distance(want: str, text: str) -> int:
    """The Levenshtein distance of ``want`` to the span of ``text`` that matches it best (module docstring)."""
    from rapidfuzz import fuzz
    from rapidfuzz.distance import Levenshtein

    al = fuzz.partial_ratio_alignment(want, text)
    if al is None or al.score == 0:
        return len(want)
    best = Levenshtein.distance(want, text[al.dest_start : al.dest_end])
    for ds in range(-8, 9):
        for de in range(-8, 9):
            s, e = max(0, al.dest_start + ds), min(len(text), al.dest_end + de)
            if e > s:
                best = min(best, Levenshtein.distance(want, text[s:e], score_cutoff=best))
    return best


def _stored_text(path: Path, tok: Any, as_printed: bool) -> tuple[str, Any]:
    from aisac_core.rag.chunking import chunk_document
    from aisac_core.rag.formats import convert
    from aisac_core.rag.pdf import reconstruct_pdf

    res = convert(path, "pdf", "native")
    doc = reconstruct_pdf(res, path.stem, as_printed=as_printed)
    text, _chunks, _ = chunk_document(doc, tok, 256, None)
    return text, doc


def run(ctx: Context) -> dict[str, Any]:
    """The text part; returns the JSON-ready result. Raises :class:`Skip` when the shared PDFs are absent."""
    from aisac_core.rag.formats import DocumentError
    from aisac_core.rag.printed import spacing_accents

    src = ctx.data_dir / "pdfs"
    pdfs = sorted(src.rglob("*.pdf")) if src.is_dir() else []
    if not pdfs:
        raise Skip(f"no PDFs found under {src}")
    gt_dir = src / "docling" / "groundtruth"
    with temp_dir(ctx, "text") as tmp:
        core = make_core(tmp / "store")
        try:
            tok = core.embedder.tokenizer()
        finally:
            core.close()
    cer_rows: list[tuple[Any, ...]] = []
    acc_rows: list[tuple[Any, ...]] = []
    totals = {"before": [0, 0], "after": [0, 0]}
    acc_total = {"before": 0, "after": 0}
    decisions: dict[str, list[tuple[str, str, bool]]] = {}
    leftovers: list[str] = []
    front_truth = json.loads(FRONT_TRUTH.read_text(encoding="utf-8")) if FRONT_TRUTH.is_file() else {}
    front_rows: list[tuple[Any, ...]] = []
    front_tot = {"before": [0, 0], "after": [0, 0]}
    grobid = ctx.data_dir / "pdf_metadata" / "grobid"
    pdfs = pdfs + (sorted(grobid.glob("*.pdf")) if grobid.is_dir() else [])
    for f in pdfs:
        try:
            before, _ = _stored_text(f, tok, False)
            after, doc = _stored_text(f, tok, True)
        except DocumentError:
            continue
        rel = str(f.relative_to(src)) if f.is_relative_to(src) else f"grobid/{f.name}"
        ft = front_truth.get(rel) or {}
        names = ([ft["title"]] if ft.get("title") else []) + list(ft.get("authors") or [])
        if names:
            frow: list[Any] = [rel, len(names)]
            for key, text in (("before", before), ("after", after)):
                head = comparable(text[:6000])
                d = sum(aligned_distance(comparable(n), head) for n in names)
                c = sum(len(comparable(n)) for n in names)
                front_tot[key][0] += d
                front_tot[key][1] += c
                frow.append(d)
            front_rows.append(tuple(frow))
        if f.is_relative_to(grobid):
            acc_rows.append((rel, spacing_accents(before), spacing_accents(after), 0, 0))
            acc_total["before"] += spacing_accents(before)
            acc_total["after"] += spacing_accents(after)
            continue
        decisions[rel] = [tuple(d) for d in doc._aisac_meta.get("hyphens", [])]
        a_b, a_a = spacing_accents(before), spacing_accents(after)
        acc_total["before"] += a_b
        acc_total["after"] += a_a
        if a_a:
            leftovers += [after[max(0, m.start() - 20) : m.end() + 20] for m in re.finditer(r"[¨´˜ˆˇ˘˙˚˝¸˛¯ˉˋ]", after)]
        acc_rows.append((rel, a_b, a_a, len(decisions[rel]), sum(not d[2] for d in decisions[rel])))
        gt = gt_dir / f"{f.stem}.md"
        if not gt.is_file():
            continue
        blocks = md_blocks(gt.read_text(encoding="utf-8"))
        row: list[Any] = [rel, len(blocks), sum(map(len, blocks))]
        for key, text in (("before", before), ("after", after)):
            flat = comparable(text)
            dist = sum(aligned_distance(comparable(b), flat) for b in blocks)
            chars = sum(map(len, blocks))
            totals[key][0] += dist
            totals[key][1] += chars
            row.append(round(dist / chars, 4) if chars else None)
        cer_rows.append(tuple(row))
    if not cer_rows:
        raise Skip(f"no ground truth Markdown under {gt_dir} for the shared PDFs")
    cer_b = totals["before"][0] / totals["before"][1]
    cer_a = totals["after"][0] / totals["after"][1]
    cer_rows.append(("all (micro)", None, totals["after"][1], round(cer_b, 4), round(cer_a, 4)))
    table(
        "text: CER of the stored text against docling's ground truth Markdown (prose blocks aligned)",
        ["file", "blocks", "characters", "CER before", "CER after"],
        cer_rows,
        caption="before: the text layer as docling-parse reads it (aisac-parse-7); after: text as printed",
    )
    fb = front_tot["before"][0] / front_tot["before"][1] if front_tot["before"][1] else None
    fa = front_tot["after"][0] / front_tot["after"][1] if front_tot["after"][1] else None
    front_rows.append(("all (micro)", None, front_tot["before"][0], front_tot["after"][0]))
    table(
        "text: titles and authors as printed (tests/fixtures/pdf_truth.json) found in the stored text",
        ["file", "strings", "edits before", "edits after"],
        front_rows,
        caption=f"CER before {fb and round(fb, 4)}, after {fa and round(fa, 4)} over "
        f"{front_tot['after'][1]} characters (each string aligned in the first 6,000 characters)",
    )
    acc_rows.append(("all", acc_total["before"], acc_total["after"], sum(len(v) for v in decisions.values()), None))
    table(
        "text: spacing accents left and line-end hyphens, every shared PDF",
        ["file", "accents before", "accents after", "line-end hyphens", "hyphen kept"],
        acc_rows,
    )
    # the hand-checked sample
    right = checked = 0
    wrong: list[str] = []
    if SAMPLE.is_file():
        sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
        for s in sample["decisions"]:
            got = [d for d in decisions.get(s["file"], []) if d[0] == s["head"] and d[1] == s["tail"]]
            if not got:
                continue
            checked += 1
            form = s["head"][:-1] + s["tail"] if got[0][2] else s["head"] + s["tail"]
            if form == s["printed"]:
                right += 1
            else:
                wrong.append(f"{s['head']}{s['tail']} -> {form} (printed: {s['printed']})")
    share = right / checked if checked else None
    ratio = cer_a / cer_b if cer_b else None
    table(
        "text: targets (issue 42, acceptance 3)",
        ["metric", "value", "target", ""],
        [
            (
                "CER after / before",
                round(ratio, 3) if ratio is not None else None,
                "<= 0.5",
                target_cell(ratio is not None and ratio <= TARGET_CER_RATIO),
            ),
            ("spacing accents left", acc_total["after"], "0", target_cell(acc_total["after"] == 0)),
            (
                f"line-end hyphens right ({right}/{checked} checked by hand)",
                share,
                ">= 0.95",
                target_cell(share is not None and share >= TARGET_HYPHENS and checked >= 40),
            ),
        ],
    )
    for w in wrong:
        print("  wrong hyphen:", w)
    for x in leftovers[:20]:
        print("  accent left:", repr(x))
    return {
        "status": "ok",
        "summary": [
            {
                "metric": "text as printed: CER of PDF text vs ground truth, before / after",
                "value": f"{round(cer_b, 4)} / {round(cer_a, 4)}",
                "target": "after <= half of before",
                "met": ratio is not None and ratio <= TARGET_CER_RATIO,
            },
            {
                "metric": "spacing accents left",
                "value": acc_total["after"],
                "target": "0",
                "met": acc_total["after"] == 0,
            },
            {
                "metric": "line-end hyphens right (hand-checked sample)",
                "value": f"{right}/{checked}",
                "target": ">= 95 % of >= 40",
                "met": share is not None and share >= TARGET_HYPHENS and checked >= 40,
            },
        ],
        "front_cer": {"before": fb, "after": fa, "chars": front_tot["after"][1], "files": front_rows},
        "cer": {"before": round(cer_b, 4), "after": round(cer_a, 4), "ratio": ratio, "files": cer_rows},
        "spacing_accents": acc_total,
        "accents_left": leftovers,
        "hyphens": {"right": right, "checked": checked, "share": share, "wrong": wrong},
        "decisions": {k: [list(d) for d in v] for k, v in decisions.items()},
    }
