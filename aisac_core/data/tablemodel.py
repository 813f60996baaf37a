"""What the loaders take from the learned table structure (:mod:`aisac_core.data.structure`): the model's reading of
a grid (rows above the table, header rows, body rows, notes below), the numbers and statistical markers of text
columns, and a delimited file's dialect (clevercsv).

Used by :func:`aisac_core.data.loaders.load_csv` (the model decides where a CSV's table starts and ends) and
:func:`aisac_core.data.loaders.sheet_frame` (the model's reading and calibrated confidence beside the workbook
rules). docs/data.md "Learned table structure".
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from aisac_core.data.cells import cell_kind, cell_text
from aisac_core.data.layout import summary_block_start
from aisac_core.data.structure import (
    Structure,
    marker_meaning,
    model_sha256,
    parse_number,
    reading_confidence,
    value_kind,
)

if TYPE_CHECKING:
    import pandas as pd

#: a text column becomes numeric when this share of its non-empty values that are not markers are numbers: all of
#: them, so a text note in a column of numbers is never turned into a missing value (the column stays as it is)
NUMERIC_TEXT_SHARE = 1.0
#: characters of a delimited file given to clevercsv's dialect detection (its consistency measure is
#: quadratic-ish in the sample: 16,000 characters take ~30 ms)
DIALECT_SAMPLE = 16_000


def reading(st: Structure) -> dict[str, Any] | None:
    """The table the model reads: ``{top: [rows above], header: [rows], body: [rows], below: [rows after the last
    body row], labels: {row: class}}`` (0-based grid rows), or None when it finds no body line.

    Header rows: the header lines above the first body line, after the last metadata line; a header line inside
    the body (a repeated header) stays in the body's labels, not in the header."""
    lab = st.by_row()
    rows = st.rows
    body_idx = [k for k, r in enumerate(rows) if lab[r] in ("data", "derived", "group")]
    if not body_idx:
        return None
    first = body_idx[0]
    # the body runs from its first line to its last line before the notes that end the table
    last = body_idx[-1]
    header = [r for r in rows[:first] if lab[r] == "header"]
    top = [r for r in rows[:first] if lab[r] != "header"]
    if header and top and max(top) > min(header):  # metadata between header lines: the header is the lower block
        cut = max(top)
        top = top + [h for h in header if h < cut]
        header = [h for h in header if h > cut]
    body = [r for r in rows[first : last + 1] if lab[r] != "notes"]
    below = [r for r in rows if r > rows[last]] + [r for r in rows[first : last + 1] if lab[r] == "notes"]
    return {"top": sorted(top), "header": header, "body": body, "below": sorted(below), "labels": lab}


def summary(st: Structure, rows_map: Sequence[int] | None = None, limit: int = 40) -> dict[str, Any]:
    """The model's reading as the load result reports it (``detected.structure``, stored with the frame's source
    options): ``model_sha256`` (its first 16 hex digits: which model read the frame), the calibrated
    ``confidence``, ``uncertain``, ``header_rows`` (1-based sheet rows), ``row_labels`` ({1-based row: class} of
    the lines that are not plain data: metadata, header, group, derived, notes; at most ``limit``) and
    ``alternatives``."""

    def sheet_row(r: int) -> int:
        return (rows_map[r] if rows_map is not None and r < len(rows_map) else r) + 1

    rd = reading(st)
    labels = {sheet_row(r): c for r, c in zip(st.rows, st.labels) if c != "data"}
    return {
        "model": "line classifier (Strudel-style; docs/data.md)",
        "model_sha256": model_sha256()[:16],
        "confidence": st.confidence,
        "uncertain": st.uncertain,
        "header_rows": [sheet_row(r) for r in rd["header"]] if rd else [],
        "row_labels": dict(list(labels.items())[:limit]),
        "alternatives": [{**a, "row": sheet_row(a["row"] - 1)} for a in st.alternatives],
    }


#: a number written with a magnitude suffix (``20k``, ``0.3M``, ``1.2 bn``): not converted to the bare number
_MAGNITUDE = re.compile(r"^[-−(]?[\d.,\s]*\d\s?(?:k|K|M|G|B|bn|Bn|T)\)?$")


def numbers_and_markers(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, dict[str, str]], list[str]]:
    """Text columns of numbers as statistical tables write them (``18 080``, ``1,234``, ``(12)``) and statistical
    markers (``..``, ``[c]``, ``(NA)``, ``-``) made numeric: a column whose non-empty values that are not markers
    are all numbers (:data:`NUMERIC_TEXT_SHARE`; and at least one is) becomes float, each marker a missing value. Returns ``(frame, markers, notes)``; ``markers``: {column: {marker: meaning}} (the meaning
    kept, :func:`aisac_core.data.structure.marker_meaning`)."""
    import pandas as pd

    markers: dict[str, dict[str, str]] = {}
    changed: list[str] = []
    magnitude: list[str] = []
    for k, col in enumerate(list(df.columns)):
        s = df.iloc[:, k]
        if not (s.dtype == object or pd.api.types.is_string_dtype(s.dtype)):
            continue
        values = s.dropna().tolist()
        if any(isinstance(v, bool) or not isinstance(v, str | int | float) for v in values):
            continue
        vals = [v for v in values if isinstance(v, str) and v.strip()]
        if not vals:
            continue
        found = {v.strip(): m for v in vals if (m := marker_meaning(v)) is not None}
        rest = [v for v in vals if v.strip() not in found]
        n_num = sum(1 for v in values if not isinstance(v, str))
        nums = [parse_number(v) if value_kind(v) in ("num", "year") else None for v in rest]
        good = n_num + sum(x is not None for x in nums)
        if not good or good < NUMERIC_TEXT_SHARE * (n_num + len(rest)):
            continue
        scaled = sorted({v.strip() for v, x in zip(rest, nums) if x is not None and _MAGNITUDE.search(v.strip())})
        if scaled:  # 20k, 0.3M, 1.2bn: the number alone would be a thousand or a million times off; kept as text
            magnitude.append(f"{col} ({', '.join(scaled[:3])})")
            continue

        def conv(v: Any, found: dict[str, str] = found) -> float | None:
            if isinstance(v, int | float):
                return float(v)
            if not isinstance(v, str) or not v.strip() or v.strip() in found:
                return None
            return parse_number(v) if value_kind(v) in ("num", "year") else None

        df.isetitem(k, pd.to_numeric(s.map(conv), errors="coerce").to_numpy())
        changed.append(str(col))
        if found:
            markers[str(col)] = found
    notes = []
    if magnitude:
        notes.append(
            "kept as text, their numbers carry a magnitude suffix (k, M, G, B, bn: thousand, million, ... or, for M, "
            "molar) that a plain number would drop: " + "; ".join(magnitude)
        )
    if changed:
        notes.append(
            f"{len(changed)} column(s) of numbers written as text (thousands separators, markers) made numeric: "
            + ", ".join(changed[:10])
        )
    if markers:
        shown = sorted({f"{m!r} ({meaning})" for d in markers.values() for m, meaning in d.items()})
        notes.append("statistical markers read as missing values: " + ", ".join(shown[:8]))
    return df, markers, notes


def csv_dialect(text: str) -> tuple[str, str] | None:
    """``(delimiter, quotechar)`` of delimited text by clevercsv's data-consistency measure (G. J. J. van den Burg,
    A. Nazábal, C. Sutton, "Wrangling messy CSV files by detecting row and type patterns", Data Mining and
    Knowledge Discovery 2019) over the first :data:`DIALECT_SAMPLE` characters, delimiters limited to
    ``, ; TAB |``; None when it cannot decide."""
    import clevercsv

    sample = text[:DIALECT_SAMPLE]
    if len(text) > DIALECT_SAMPLE and "\n" in sample:
        sample = sample[: sample.rfind("\n") + 1]
    try:
        d = clevercsv.Detector().detect(sample, delimiters=[",", ";", "\t", "|"])
    except Exception:  # noqa: BLE001 - clevercsv raises assorted errors on odd text; the caller falls back
        return None
    if d is None or not d.delimiter:
        return None
    return str(d.delimiter), str(d.quotechar or '"')


#: a delimited file up to this many characters is parsed whole for the classifier (notes and summary lines below
#: the table are found); a larger one is classified over its first rows only (header and start of the table)
MODEL_CSV_CHARS = 5_000_000


def all_rows(text: str, delim: str, quotechar: str = '"') -> list[list[str]] | None:
    """Every record of delimited text (ragged rows kept as they are), None when the csv module cannot parse it."""
    try:
        return [list(r) for r in csv.reader(io.StringIO(text), delimiter=delim, quotechar=quotechar)]
    except csv.Error:
        return None


def csv_decision(st: Structure, rules: dict[str, Any]) -> dict[str, Any]:
    """How a delimited file is read given the model's structure ``st`` and the rules' reading ``rules`` (the result
    of :func:`aisac_core.data.loaders.detect_table`).

    Returns ``{mode, reading, agree}``: ``mode`` is ``"model"`` (the model's header and body: it is confident, or
    it agrees with the rules) or ``"rules"`` (the model finds no table body, or it is uncertain and disagrees with
    the rules: the rules' reading is kept with the confidence the model gives it, below the threshold, and the
    model's reading is reported as the alternative). A plain grid is what the rules give when they find no
    header (``col_1 ...``)."""
    rd = reading(st)
    if rd is None:
        return {"mode": "rules", "reading": None, "agree": False, "rules_header": list(rules["header"])}
    agree = rd["header"] == list(rules["header"]) and (not rd["body"] or rd["body"][0] == rules["data_start"])
    mode = "model" if agree or not st.uncertain else "rules"
    out = {"mode": mode, "reading": rd, "agree": agree, "rules_header": list(rules["header"])}
    if mode == "rules":
        # the model is unsure of its own reading and disagrees: the rules' reading is kept, with the confidence the
        # model gives it (flagged uncertain; the model's reading reported as the alternative)
        out["rules_confidence"] = round(reading_confidence(st, rules["header"], rules["data_start"]), 4)
    return out


def apply_decision(
    decision: dict[str, Any],
    grid: list[list[str]],
    t: dict[str, Any],
    full: list[list[str]] | None,
    detect: Callable[..., dict[str, Any]],
) -> tuple[dict[str, Any], list[list[str]] | None, list[str | None] | None]:
    """The table reading (``detect``: :func:`aisac_core.data.loaders.detect_table`, and its result) and, when the file was parsed whole, the body rows, for a
    decision of :func:`aisac_core.data.tablemodel.csv_decision`.

    Raises:
        ValueError: a body record has values in more fields than the first body record (pandas' message, "Expected
            N fields in line L, saw M"): a ragged top is a preamble, a ragged body is a malformed file, never padded.
    """
    rd = decision["reading"]
    if decision["mode"] == "model" and not decision["agree"]:
        start = rd["header"][0] if rd["header"] else rd["body"][0]
        blanked: list[list[str]] = [[] if i < start else r for i, r in enumerate(grid)]
        t = detect(blanked, len(rd["header"]))
        if rd["body"] and rd["body"][0] < len(grid):
            t["data_start"] = max(t["data_start"], rd["body"][0])
    if full is None or decision["mode"] != "model":
        return t, None, None
    lab = rd["labels"]
    last = rd["body"][-1] if rd["body"] else t["data_start"] - 1
    # a summary block under the body (Mean, SD, Min, Max ... after an empty record) is not data: set aside
    cand = [
        i
        for i in range(t["data_start"], min(last, len(full) - 1) + 1)
        if lab.get(i) not in ("notes", "metadata") and any(v.strip() for v in full[i])
    ]
    firsts = [next(v.strip() for v in full[i] if v.strip()) for i in cand]
    cut = summary_block_start(firsts, [k > 0 and cand[k] - cand[k - 1] > 1 for k in range(len(cand))])
    if cut is not None:
        below = [" | ".join(v.strip() for v in full[i] if v.strip()) for i in cand[cut:]]
        note = (
            f"{len(below)} row(s) below the table set aside as a summary block, not data "
            f"({', '.join(firsts[cut : cut + 6])}): listed in skipped_below"
        )
        t = {**t, "summary_below": below, "notes": [*t.get("notes", []), note]}
        last = cand[cut - 1]
    # every record from the first to the last body line but those the model reads as notes or titles (lines of a
    # long file between the classified windows are body lines); a group line of one cell (a section label) is not
    # a record: its label goes into the group column of the records below it
    rows: list[list[str]] = []
    groups: list[str | None] = []
    current: str | None = None
    width = 0  # fields of the first body record: a later record with values past it is an error, as in read_csv
    for i, r in enumerate(full):
        if not t["data_start"] <= i <= last or lab.get(i) in ("notes", "metadata"):
            continue
        cells = [v.strip() for v in r if v.strip()]
        if lab.get(i) == "group" and len(cells) == 1:
            current = cells[0]
            continue
        if cells and not width:
            width = len(r)
        elif width and len(r) > width and any(v.strip() for v in r[width:]):
            # pandas' own wording, so the loader's parse-error message names the line the same way
            raise ValueError(f"Expected {width} fields in line {i + 1}, saw {len(r)}")
        rows.append(r)
        groups.append(current if cells else None)  # an empty record stays empty (dropped with the others)
    return t, rows, (groups if any(g is not None for g in groups) else None)


def frame_of_rows(rows: list[list[str]]) -> pd.DataFrame:
    """Parsed records as a frame with pandas' own type inference (written back as CSV and read by ``read_csv``),
    ragged rows padded."""
    import pandas as pd

    width = max((len(r) for r in rows), default=0)
    if not width:
        return pd.DataFrame()
    buf = io.StringIO()
    w = csv.writer(buf)
    for r in rows:
        w.writerow(r + [""] * (width - len(r)))
    buf.seek(0)
    return pd.read_csv(buf, header=None, skip_blank_lines=True)


def report_structure(
    opts: dict[str, Any], notes: list[str], st: Structure, decision: dict[str, Any], grid: list[list[str]]
) -> None:
    """The model's reading, confidence and (for a plain grid) the alternatives in ``opts["detected"]`` and notes."""
    d = opts["detected"]
    d["confidence"] = st.confidence
    d["structure"] = summary(st)
    rd = decision["reading"]
    if decision["mode"] == "rules" and rd is not None:
        d["confidence"] = decision.get("rules_confidence", st.confidence)
        d["ambiguous"] = {
            "reasons": [f"the table-structure model reads the table differently (its confidence {st.confidence:.2f})"],
            "alternatives": [
                {
                    "by": "model",
                    "header_rows": [h + 1 for h in rd["header"]],
                    "data_start_row": rd["body"][0] + 1 if rd["body"] else None,
                }
            ],
        }
        notes.append(
            f"layout uncertain (confidence {d['confidence']:.2f}): the header rules' reading is kept; the "
            f"table-structure model reads header row(s) {', '.join(str(h + 1) for h in rd['header']) or 'none'}"
        )
        return
    if decision["mode"] == "model":
        below = [r for r in rd["below"] if r > (rd["body"][-1] if rd["body"] else -1)]
        summary_rows = list(d.get("skipped_below") or [])  # a summary block set aside (apply_decision)
        d["skipped_below"] = (summary_rows + [" ".join(v.strip() for v in grid[r] if v.strip())[:200] for r in below])[
            :20
        ]
        if not decision["agree"]:
            notes.append(
                f"table read by the table-structure model (confidence {st.confidence:.2f}): header row(s) "
                f"{', '.join(str(h + 1) for h in rd['header']) or 'none'}, data from row "
                f"{(rd['body'][0] + 1) if rd['body'] else '-'}"
            )
        if below:
            notes.append(
                f"{len(below)} row(s) below the table skipped as notes/footnotes: {d['skipped_below'][0][:80]!r}"
            )
        if st.uncertain:
            notes.append(f"layout uncertain (table-structure confidence {st.confidence:.2f})")


def sheet_structure(
    grid: Sequence[Sequence[Any]],
    merged: Sequence[tuple[int, int, int, int]],
    t: dict[str, Any],
    rows_map: Sequence[int] | None,
) -> tuple[dict[str, Any], float | None, list[str]] | None:
    """The model's reading of a workbook sheet's table block beside the rules' (``t``: the result of
    :func:`aisac_core.data.regions.detect_region`): ``(structure, confidence, notes)`` or None when the block is
    empty. The block is classified with merged ranges un-filled (the model was trained on cell strings without
    merges).

    ``confidence``: the model's calibrated confidence of the rules' reading: its own when both agree on the header
    rows and the first body row; else the larger of the confidence it gives the rules' reading
    (:func:`aisac_core.data.structure.reading_confidence`) and one minus its confidence in its own, different,
    reading (a model unsure of its own reading does not outvote the rules). The loader takes the lower of it and
    the rules' own.
    The rules keep deciding the layout of workbooks (they read merges, bold and alignment, which the model
    cannot)."""
    from aisac_core.data.structure import classify

    top, left, bottom, right = t["box"]
    if not t["body"]:
        return None
    filled = {(i, j) for (a, b, c, d) in merged for i in range(a, c + 1) for j in range(b, d + 1) if (i, j) != (a, b)}
    block = [
        [None if (i, j) in filled else (grid[i][j] if j < len(grid[i]) else None) for j in range(left, right + 1)]
        for i in range(top, bottom + 1)
    ]
    st = classify(block)
    rd = reading(st)
    if rd is None:
        return None
    rmap = [(rows_map[i] if rows_map is not None and i < len(rows_map) else i) for i in range(top, bottom + 1)]
    out = summary(st, rmap)
    header = [h - top for h in t["header"]]
    start = t["body"][0] - top
    agree = rd["header"] == header and bool(rd["body"]) and rd["body"][0] == start
    if agree:
        conf = st.confidence
    else:  # not a fitted probability: the model's doubt in its own, different, reading is given to the rules
        # (they read merges, bold and alignment it cannot), or its own estimate of their reading if higher
        conf = round(max(reading_confidence(st, header, start, t["body"][-1] - top), 1.0 - st.confidence), 4)
    out["agrees_with_rules"] = agree
    out["rules_data_start_row"] = rmap[start] + 1
    # the section-label lines the model reads (sheet rows, 1-based): the loader moves a one-cell one into a column
    out["group_rows"] = [rmap[r] + 1 for r in st.rows_of("group") if r < len(rmap)][:5000]
    notes = []
    if not agree:
        out["model_reading"] = {
            "header_rows": [rmap[h] + 1 for h in rd["header"]],
            "data_start_row": rmap[rd["body"][0]] + 1 if rd["body"] else None,
        }
        notes.append(
            f"the table-structure model reads this sheet differently (header row(s) "
            f"{', '.join(str(rmap[h] + 1) for h in rd['header']) or 'none'}, data from row "
            f"{out['model_reading']['data_start_row']}); its confidence in the loaded reading: {conf:.2f}"
        )
    return out, conf, notes


#: a workbook table is read as the model reads it, not as the rules do, when the model disagrees with the rules and
#: its calibrated confidence in its own reading is at least this (among the held-out tables at >= 0.9, 91 % were
#: right: docs/data.md "Learned table structure")
MODEL_OVERRIDES = 0.9


def model_override(
    learned: tuple[dict[str, Any], float | None, list[str]] | None, rows_map: Sequence[int]
) -> tuple[int, int, str] | None:
    """``(header_rows, skip_rows, note)`` for re-reading a sheet as the model reads it (the options of
    :func:`aisac_core.data.regions.detect_region`), or None when the rules' reading stands (the model agrees, or
    its confidence is below :data:`MODEL_OVERRIDES`, or its header rows are all above the rules' first body row: the
    rules read merges, bold and alignment the model cannot, and the model overrides them only where they took a
    header for data, as with header labels that are numbers)."""
    if learned is None:
        return None
    st = learned[0]
    mr = st.get("model_reading")
    if not mr or st["confidence"] < MODEL_OVERRIDES or not mr.get("data_start_row") or not mr["header_rows"]:
        return None
    if not any(h >= st["rules_data_start_row"] for h in mr["header_rows"]):
        return None  # only a header the rules took for data (labels that are numbers) overrides them
    first = (mr["header_rows"][0] if mr["header_rows"] else mr["data_start_row"]) - 1
    base = rows_map[0] if rows_map else 0
    note = (
        f"table read as the table-structure model reads it (confidence {st['confidence']:.2f}): header row(s) "
        f"{', '.join(str(h) for h in mr['header_rows']) or 'none'}, data from row {mr['data_start_row']}"
    )
    return len(mr["header_rows"]), first - base, note


def ragged_top(grid: Sequence[Sequence[str]]) -> int:
    """The number of leading records of delimited text that are a preamble: records with fewer fields than the
    table's (the most common field count of the records read, at least 2), before the first record that has that
    many. A table's header row carries every field (empty ones as empty strings); a preamble of free text lines
    (a title, a producer, a contact) does not. 0 when the first non-empty record is already full width."""
    counts: dict[int, int] = {}
    for r in grid:
        if any(v.strip() for v in r):
            counts[len(r)] = counts.get(len(r), 0) + 1
    if not counts:
        return 0
    width = max(counts, key=lambda w: (counts[w], w))
    if width < 2:
        return 0
    for i, r in enumerate(grid):
        if len(r) >= width:
            return i if any(any(v.strip() for v in x) for x in grid[:i]) else 0
    return 0


def skip_preamble(grid: list[list[str]]) -> tuple[list[list[str]], int, list[str]]:
    """``grid`` with its preamble (:func:`ragged_top`) blanked, the number of preamble records and their text."""
    n = ragged_top(grid)
    if not n:
        return grid, 0, []
    text = [" ".join(v.strip() for v in r if v.strip())[:200] for r in grid[:n] if any(v.strip() for v in r)]
    return [[] for _ in grid[:n]] + grid[n:], n, text


def detect_encoding(raw: bytes) -> str:
    """The encoding of a delimited file's bytes: a byte-order mark decides; else strict UTF-8; else
    charset-normalizer's best guess over the first 200,000 bytes; else latin-1."""
    if raw.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    try:
        raw.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(raw[:200_000]).best()
    return best.encoding if best is not None else "latin-1"


def section_column(
    rows: list[list[Any]],
    body: Sequence[int],
    rmap: Sequence[int],
    group_rows: set[int],
    names: list[str],
    notes: list[str],
) -> tuple[list[list[Any]], list[str]]:
    """A workbook table's section labels as a first column ``group``: ``rows`` are the body's rows (cells of the
    kept columns) at grid rows ``body``, ``rmap`` maps grid rows to sheet rows, ``group_rows`` holds the sheet rows
    (1-based) the model reads as group lines (:func:`sheet_structure`). A group line whose only value is a text in
    the first column becomes the ``group`` value of the rows under it (as for a CSV, :func:`apply_decision`); a note
    is added to ``notes``. Only where the sections are sound: two labels at least that lead rows, two rows a label
    on average (a label over each single row is a label / values layout), and no label directly under another
    (labels stacked one under the other are form fields: "Team:" / "Cost Center:" over a report). Otherwise
    ``(rows, names)`` come back unchanged. Errors: none."""
    if not group_rows:
        return rows, names
    kept: list[list[Any]] = []
    groups: list[str | None] = []
    current: str | None = None
    led: list[int] = []  # per label, the rows it leads
    stacked = False
    for i, r in zip(body, rows):
        cells = [v for v in r if cell_kind(v) != "empty"]
        if rmap[i] + 1 in group_rows and len(cells) == 1 and r and cell_kind(r[0]) == "text":
            stacked = stacked or (bool(led) and led[-1] == 0)
            current = cell_text(r[0]).strip()
            led.append(0)
            continue
        if led and cells:
            led[-1] += 1
        kept.append(r)
        groups.append(current if cells else None)
    if sum(n > 0 for n in led) < 2 or stacked or led[-1] == 0 or sum(led) < 2 * len(led):
        return rows, names
    gname = "group" if "group" not in names else "group_"
    notes.append(
        f"{len(rows) - len(kept)} section label row(s) moved into column {gname!r}: "
        f"{sorted(set(filter(None, groups)))[:5]}"
    )
    return [[g, *r] for g, r in zip(groups, kept)], [gname, *names]
