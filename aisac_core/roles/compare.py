"""The comparison table of the materials question: values a paper reports in a table beside the values a materials
database computes, every number cited ("Which compositions showed the lowest formation energy, and how do the
reported values compare to computed predictions?").

A workflow-graph node of kind ``comparison`` (the materials template adds one, :mod:`.graph`) runs inside the
coordinator step, through the suite's tools (so every call is traced):

1. ``rag_search`` for the question: the indexed PDFs among the hits (at most ``max_documents``, best first);
2. ``data_load`` of each PDF (its tables as frames, :mod:`aisac_core.data.pdftables`) and ``data_preview`` of each
   frame (rows with the anchor of every cell);
3. in each frame, the composition column (a header naming a composition / formula / compound / material, else the
   first column whose cells read as chemical formulas) and the value column of the property (a header naming it,
   :data:`HEADERS`; of several, one labelled reported / measured / experimental first, then the first that is not
   labelled computed / calculated / DFT / predicted); the unit from the header's parentheses;
4. ``lit_materials`` (OPTIMADE, :mod:`aisac_core.literature.optimade`) per composition: of the provider's records
   for that reduced formula carrying the property, the lowest value (the ground-state polymorph for an energy).

Each row: the composition, the reported value with its cell (text, table, page, cell anchor with ``bbox``), the
database value with its record (provider, id, URL, field, unit) and their difference when both are in eV/atom
(meV/atom is converted). :func:`attach` then adds the table to the researcher's answer: a Markdown table whose
every number carries a citation marker, one citation per cell (kind ``cell``, its anchor: the run page highlights the
box) and per record (kind ``record``: provider, id, URL). A provider that cannot be reached leaves the database
column empty and says so in ``notes``; it never invents a value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from aisac_core.jsontypes import JSONObject, JSONValue, json_object, json_objects
from aisac_core.literature.formula import formula_key
from aisac_core.literature.paper import LiteratureError

#: a traced tool call of the graph: (tool, arguments) -> (status, result, error)
Call = Callable[[str, JSONObject], Awaitable[tuple[str, JSONValue, str | None]]]

if TYPE_CHECKING:
    from aisac_core.roles.shapes import Comparison, ComparisonRow, DatabaseValue

#: property -> the words a table header names it with (lower case)
HEADERS: dict[str, tuple[str, ...]] = {
    "formation_energy_per_atom": (
        "formation energy",
        "formation enthalpy",
        "enthalpy of formation",
        "δh",
        "δhf",
        "e_f",
    ),
    "band_gap": ("band gap", "bandgap", "e_g"),
    "energy_above_hull": ("above hull", "hull distance", "e_hull", "ehull"),
}
LABELS = {
    "formation_energy_per_atom": "formation energy",
    "band_gap": "band gap",
    "energy_above_hull": "energy above hull",
}
COMPOSITION_WORDS = ("composition", "formula", "compound", "material", "phase", "cathode", "sample")
REPORTED_WORDS = ("reported", "measured", "experiment", "exp.", "this work", "observed")
COMPUTED_WORDS = ("computed", "calculated", "calc", "dft", "predicted", "theory", "theoretical")
#: most compositions looked up in the database per run
MAX_COMPOSITIONS = 20
_NUMBER = re.compile(r"^[−–-]?\s*\d+(?:[.,]\d+)?$")


def _unit(header: str) -> str | None:
    m = re.search(r"\(([^()]*)\)|\[([^\[\]]*)\]", header)
    return (m.group(1) or m.group(2)).strip() if m else None


def _to_ev_per_atom(value: float, unit: str | None) -> float | None:
    u = (unit or "").replace(" ", "").lower()
    if u in ("ev/atom", "ev", "ev/at", "ev/at."):
        return value
    if u in ("mev/atom", "mev/at"):
        return value / 1000.0
    return None


def _number(text: str) -> float | None:
    t = str(text).strip().replace("−", "-").replace("–", "-").replace(" ", "")
    if not _NUMBER.match(t):
        return None
    try:
        return float(t.replace(",", "."))
    except ValueError:
        return None


def _composition(text: str) -> str | None:
    """The reduced formula of a composition cell (``"LiCoO2 (layered)"`` -> ``CoLiO2``), None when it is none."""
    for token in str(text).replace("\n", " ").split():
        token = token.strip(",;:*†‡")
        if len(token) < 2 or not token[0].isupper():
            continue
        try:
            return formula_key(token)
        except LiteratureError:
            continue
    return None


def pick_columns(columns: list[str], rows: list[JSONObject], prop: str) -> tuple[str, str] | None:
    """``(composition column, value column)`` of a table for ``prop`` (see the module docstring), or None."""
    words = HEADERS.get(prop, ())
    values = [c for c in columns if any(w in c.lower() for w in words)]
    if not values:
        return None
    reported = [c for c in values if any(w in c.lower() for w in REPORTED_WORDS)]
    plain = [c for c in values if not any(w in c.lower() for w in COMPUTED_WORDS)]
    value = (reported or plain or values)[0]
    comp = next((c for c in columns if c != value and any(w in c.lower() for w in COMPOSITION_WORDS)), None)
    if comp is None:
        for c in columns:
            if c in values:
                continue
            cells = [r.get(c) for r in rows if r.get(c) not in (None, "")]
            if cells and sum(_composition(str(x)) is not None for x in cells) >= max(1, len(cells) // 2 + 1):
                comp = c
                break
    return (comp, value) if comp is not None else None


def applies(task: str, node: Mapping[str, object]) -> bool:
    """Whether the question asks about the node's property (its label or a header word, e.g. "formation energy"):
    a comparison node runs only then, so other questions of the project cost no database call."""
    prop = str(node.get("property") or "formation_energy_per_atom")
    t = " ".join(task.lower().split())
    return any(w in t for w in (LABELS.get(prop, prop.replace("_", " ")), *HEADERS.get(prop, ())) if len(w) > 3)


async def compare_reported(call: Call, task: str, node: JSONObject) -> Comparison:
    """The comparison of ``task`` (see the module docstring); ``node``: the graph node (``property``, default
    ``formation_energy_per_atom``; ``provider``, default the configured one; ``max_documents``, default 3).

    Returns ``{kind: "materials_comparison", property, label, rows: [{composition, formula_reduced, reported:
    {value, unit, text, column, frame, page, caption, anchor}, database: {value, unit, provider, database_id, url,
    field} | None, difference_ev_per_atom | None}], lowest_reported, lowest_database, tables, provider, notes}``.
    Tool failures become notes; nothing is raised for them.
    """
    # long function: the comparison table built row by row with both kinds of citation
    prop = str(node.get("property") or "formation_energy_per_atom")
    notes: list[str] = []
    provider = node.get("provider")
    out: Comparison = {
        "kind": "materials_comparison",
        "property": prop,
        "label": LABELS.get(prop, prop.replace("_", " ")),
        "rows": [],
        "lowest_reported": [],
        "lowest_database": [],
        "tables": [],
        "provider": provider,
        "notes": notes,
    }
    status, res, err = await call("rag_search", {"query": task, "k": 10})
    if status != "ok" or not isinstance(res, dict):
        notes.append(f"rag_search failed: {err}")
        return out
    paths: list[str] = []
    for h in json_objects(res.get("hits")):
        a = h.get("anchor") if isinstance(h.get("anchor"), dict) else h
        p = a.get("path") if isinstance(a, dict) else None
        if isinstance(p, str) and p.lower().endswith(".pdf") and p not in paths:
            paths.append(p)
    most = node.get("max_documents")
    paths = paths[: int(most) if isinstance(most, int | float | str) and most else 3]
    if not paths:
        notes.append("no indexed PDF among the passages found for the question: no table to read")
    reported: list[ComparisonRow] = []
    for k, path in enumerate(paths):
        status, loaded, err = await call("data_load", {"path": path, "name": f"compare_{k + 1}"})
        if status != "ok" or not isinstance(loaded, dict):
            notes.append(f"data_load {path}: {err}")
            continue
        for fr in json_objects(loaded.get("frames")):
            name = fr.get("name")
            status, prev, err = await call("data_preview", {"name": name, "n": 500})
            if status != "ok" or not isinstance(prev, dict):
                notes.append(f"data_preview {name}: {err}")
                continue
            rows = json_objects(prev.get("rows"))
            names = fr.get("column_names")
            picked = pick_columns([str(c) for c in names] if isinstance(names, list) else [], rows, prop)
            if picked is None:
                continue
            comp_col, val_col = picked
            det = json_object(fr.get("detected"))
            out["tables"].append(
                {"path": path, "frame": name, "page": det.get("page"), "caption": det.get("caption"), "column": val_col}
            )
            cells = {(c.get("row"), c.get("column")): c for c in json_objects(prev.get("cells"))}
            unit = _unit(val_col.split("|")[0]) or _unit(val_col)
            for i, r in enumerate(rows):
                cell = cells.get((i, val_col))
                comp_cell = cells.get((i, comp_col))
                formula = _composition(str(r.get(comp_col) or ""))
                if cell is None or formula is None:
                    continue
                value = _number(str(cell.get("text", "")))
                if value is None:
                    continue
                reported.append(
                    {
                        "composition": str(r.get(comp_col)).split()[0],
                        "formula_reduced": formula,
                        "reported": {
                            "value": value,
                            "unit": unit,
                            "text": cell.get("text"),
                            "column": val_col,
                            "frame": name,
                            "page": json_object(cell.get("anchor")).get("page"),
                            "caption": det.get("caption"),
                            "anchor": {**json_object(cell.get("anchor")), "text": cell.get("text")},
                            "composition_anchor": (comp_cell or {}).get("anchor"),
                        },
                    }
                )
    if not reported:
        if paths:
            notes.append(f"no table of the indexed PDFs found reports the {out['label']} of compositions")
        return out
    looked: dict[str, DatabaseValue | None] = {}
    for row in reported:
        f = row["formula_reduced"]
        if f in looked or len(looked) >= MAX_COMPOSITIONS:
            continue
        args: JSONObject = {"formula": f, "k": 20}
        if provider:
            args["provider"] = provider
        status, got, err = await call("lit_materials", args)
        if status != "ok" or not isinstance(got, dict):
            looked[f] = None
            notes.append(f"lit_materials {f}: {err}")
            continue
        out["provider"] = got.get("provider")
        best: DatabaseValue | None = None
        for rec in json_objects(got.get("records")):
            p = json_object(rec.get("properties")).get(prop)
            v = p.get("value") if isinstance(p, dict) else None
            if not isinstance(p, dict) or not isinstance(v, int | float) or isinstance(v, bool):
                continue
            if best is None or v < best["value"]:
                best = {
                    "value": v,
                    "unit": p.get("unit"),
                    "field": p.get("field"),
                    "provider": rec.get("provider"),
                    "provider_name": rec.get("provider_name"),
                    "database_id": rec.get("database_id"),
                    "url": rec.get("url"),
                    "retrieved_at": rec.get("retrieved_at"),
                }
        if best is None:
            notes.append(f"{got.get('provider')} has no record of {f} with a {out['label']}")
        looked[f] = best
    for row in reported:
        db = looked.get(row["formula_reduced"])
        row["database"] = db
        diff = None
        if db is not None:
            a = _to_ev_per_atom(float(row["reported"]["value"]), row["reported"]["unit"])
            db_unit = db.get("unit")
            b = _to_ev_per_atom(float(db["value"]), db_unit if isinstance(db_unit, str) else None)
            if a is not None and b is not None:
                diff = round(b - a, 4)
        row["difference_ev_per_atom"] = diff
    reported.sort(key=lambda r: float(r["reported"]["value"]))
    out["rows"] = reported
    low = min(float(r["reported"]["value"]) for r in reported)
    out["lowest_reported"] = sorted(
        {r["composition"] for r in reported if math.isclose(float(r["reported"]["value"]), low)}
    )
    dbs = [(r["composition"], db["value"]) for r in reported if (db := r.get("database")) is not None]
    if dbs:
        lowdb = min(float(v) for _c, v in dbs)
        out["lowest_database"] = sorted({c for c, v in dbs if math.isclose(float(v), lowdb)})
    return out


def _fmt(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else _md(v)


def _md(v: object, limit: int = 80) -> str:
    """Text from a document or a remote record made safe for one Markdown table cell: one line, no ``|``, no
    backtick or bracket that would start code or a link, at most ``limit`` characters."""
    t = " ".join(str(v).split())
    t = re.sub(r"[|`\[\]<>]", " ", t).strip()
    return t[:limit] + ("…" if len(t) > limit else "")


def attach(answer: Mapping[str, object], results: Mapping[str, Comparison]) -> dict[str, object]:
    """``answer`` with every materials comparison in ``results`` (step id -> result) added: a Markdown table in
    ``text`` whose numbers carry citation markers, a ``cell`` citation per reported value (its cell anchor) and a
    ``record`` citation per database record, and the rows (with their citation numbers) in ``comparisons``."""
    comps = [r for r in results.values() if isinstance(r, dict) and r.get("kind") == "materials_comparison"]
    comps = [c for c in comps if c.get("rows") or c.get("notes")]
    if not comps:
        return {**answer}
    cited = answer.get("citations")
    citations: list[object] = list(cited) if isinstance(cited, list) else []
    n = max([v for c in citations if isinstance(c, dict) and isinstance(v := c.get("n"), int)] + [0])
    text = str(answer.get("text") or "").rstrip()
    tables: list[Comparison] = []
    for comp in comps:
        label = comp.get("label") or "value"
        rows = comp.get("rows") or []
        if not rows:
            text += "\n\nNo table of reported and computed values could be built: " + "; ".join(
                _md(x, 300) for x in comp["notes"]
            )
            tables.append({**comp})
            continue
        unit = rows[0]["reported"].get("unit") or ""
        lines = [
            f"Reported {label} beside the computed value of a materials database (lowest reported first):",
            "",
            f"| Composition | Reported ({_md(unit, 20)}) | Computed, database | Computed − reported (eV/atom) |",
            "|---|---|---|---|",
        ]
        records: dict[str, int] = {}
        out_rows: list[ComparisonRow] = []
        for r in rows:
            rep = r["reported"]
            n += 1
            rep_n = n
            citations.append(
                {
                    "n": rep_n,
                    "kind": "cell",
                    "doc_id": rep["anchor"].get("doc_id"),
                    "path": rep["anchor"].get("path"),
                    "page": rep.get("page"),
                    "title": rep.get("caption") or rep.get("frame"),
                    "quote": rep.get("text"),
                    "anchor": rep["anchor"],
                    "column": rep.get("column"),
                }
            )
            db = r.get("database")
            db_cell = "not found"
            db_n = None
            if db is not None:
                key = f"{db.get('provider')}:{db.get('database_id')}"
                if key not in records:
                    n += 1
                    records[key] = n
                    citations.append(
                        {
                            "n": n,
                            "kind": "record",
                            "title": f"{db.get('provider_name') or db.get('provider')} {db.get('database_id')}",
                            "provider": db.get("provider"),
                            "database_id": db.get("database_id"),
                            "url": db.get("url"),
                            "field": db.get("field"),
                            "retrieved_at": db.get("retrieved_at"),
                        }
                    )
                db_n = records[key]
                db_cell = (
                    f"{_fmt(db['value'])} {_md(db.get('unit') or '', 20)} ({_md(db.get('provider'), 30)} "
                    f"{_md(db.get('database_id'), 60)}) [{db_n}]"
                )
            diff = r.get("difference_ev_per_atom")
            lines.append(
                f"| {_md(r['composition'], 40)} | {_md(rep.get('text'), 30)} [{rep_n}] | {db_cell.replace('  ', ' ')} | "
                f"{'' if diff is None else f'{diff:+.3f}'} |"
            )
            out_rows.append({**r, "reported_citation": rep_n, "database_citation": db_n})
        low = ", ".join(_md(x, 40) for x in comp.get("lowest_reported") or [])
        lines.append("")
        lines.append(f"Lowest reported {label}: {low}.")
        if comp.get("lowest_database"):
            lowdb = ", ".join(_md(x, 40) for x in comp["lowest_database"])
            lines.append(f"Lowest computed {label} in the database among them: {lowdb}.")
        if comp.get("notes"):
            lines.append("Notes: " + "; ".join(_md(x, 300) for x in comp["notes"]))
        text += "\n\n" + "\n".join(lines)
        tables.append({**comp, "rows": out_rows})
    return {**answer, "text": text, "citations": citations, "comparisons": tables}
