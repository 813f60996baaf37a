"""What a person wants to see of a run, distilled from its trace: the question, the answer with its citations, the
cited evidence apart from what was merely retrieved, critiques and gates with their verdict, the plan as a graph,
and a timeline of every step and tool call.

:func:`run_report` is the one source of the dashboard's run page, the Markdown export and the HTML export, so the
three always agree. It reads only the trace (:meth:`aisac_core.trace.queries.RunQueries.get_run` with results): no store,
no files.

Where the pieces come from:

- **question**: the ``task`` of the roles graph's first step (``roles_run``, ``aisac ask``); else the first user
  turn a host recorded (``memory_add_turn`` with ``role=user``); else the query of the run's first tool call that
  has one (``query``, ``question``, ``task``);
- **answer**: the last ``researcher`` step's result (``{text, citations, by}``); else the ``answer`` of a
  ``roles_run`` tool call a host made; citations keep their ``n`` (the ``[n]`` markers of the text);
- **cited / retrieved**: every evidence anchor found in the run's results (:func:`find_anchors`), split into those
  the answer cites (in ``[n]`` order) and the others (first appearance order, once each);
- **verdict**: the last evaluator result: ``passed`` with its gates, and its two verdicts: ``anchors`` (intact /
  changed / missing) and ``support`` (supported / partly / not supported / not judged, per citation too). Without a model judging the content
  (``by`` = ``automatic``), a pass only says the automatic checks passed: the label is "automatic checks passed"
  (a failure "automatic checks failed"), as in the evaluator's own ``verdict``; a trace recorded before this
  wording gets the same label (it is derived from ``passed`` and ``content_judged``, not read);
- **plan**: the last planner result's steps (``{id, goal, tool|helper, depends_on}``, roles' ``schemas/plan.json``)
  as nodes and edges; a plan without ids becomes a chain; a coordinator's ``steps`` list when no planner ran;
- **timeline**: one span per event: start offset and duration (ms) from the event's own ``started_at`` and
  ``latency_ms``, depth in the run tree.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from aisac_core.evidence.anchor import find_anchors

#: argument names that carry a question, in order of preference
QUESTION_KEYS = ("task", "question", "query", "q")
#: an answer's citation markers: [1], [2][3], [1, 4]
MARKER = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")


def anchor_label(status: str | None) -> str:
    """The anchors verdict word shown for a trace verification status (:func:`aisac_core.trace.verify.verify_run`):
    ``unchanged`` reads ``intact`` (the cited bytes are still there, as in the evaluator's ``anchors`` verdict);
    ``changed`` / ``missing`` as they are; ``-`` when not checked."""
    return "intact" if status == "unchanged" else str(status or "-")


def walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of a run tree in depth-first order (a node before its children)."""
    out: list[dict[str, Any]] = []
    for n in nodes:
        out.append(n)
        out += walk(n.get("children", []))
    return out


def _role(events: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    """Role steps (or roles tool calls) whose tool name contains one of ``names``, with a dict result."""
    return [
        e
        for e in events
        if (e["kind"] == "role_step" or e["server"] == "roles")
        and any(n in e["tool"].lower() for n in names)
        and isinstance(e.get("result"), dict)
    ]


def _question(events: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    for e in events:
        args = e.get("arguments")
        if e["kind"] == "role_step" and isinstance(args, dict) and isinstance(args.get("task"), str):
            return args["task"].strip(), "roles task"
    for e in events:
        args = e.get("arguments")
        if (
            e["tool"].endswith("add_turn")
            and isinstance(args, dict)
            and args.get("role") == "user"
            and isinstance(args.get("content"), str)
        ):
            return args["content"].strip(), "first user turn"
    for e in sorted(events, key=lambda x: x["id"]):
        args = e.get("arguments")
        if e["kind"] == "tool_call" and isinstance(args, dict):
            for k in QUESTION_KEYS:
                if isinstance(args.get(k), str) and args[k].strip():
                    return args[k].strip(), f"{e['tool']} {k}"
    return None, None


def _answer(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    res = _role(events, "researcher")
    if res and isinstance(res[-1]["result"].get("text"), str):
        a = res[-1]["result"]
        return {
            "text": a["text"],
            "by": a.get("by"),
            "citations": list(a.get("citations") or []),
            "event_id": res[-1]["id"],
        }
    for e in reversed(_roles_run_calls(events)):  # a host's roles_run call: its result carries the answer
        a = e["result"].get("answer")
        if isinstance(a, dict) and isinstance(a.get("text"), str):
            return {
                "text": a["text"],
                "by": a.get("by"),
                "citations": list(a.get("citations") or []),
                "event_id": e["id"],
            }
    return None


def _card(a: dict[str, Any], event_id: int, n: int | None = None, quote: str | None = None) -> dict[str, Any]:
    """An evidence card: what to show of one anchor."""
    span = a.get("char_span")
    return {
        "n": n,
        "chunk_id": a.get("chunk_id"),
        "doc_id": a.get("doc_id"),
        "path": a.get("path"),
        "title": a.get("title"),
        "page": a.get("page"),
        "section": a.get("section"),
        "score": a.get("score"),
        "text": " ".join(str(a.get("text") or quote or "").split()),
        "quote": quote,
        "char_span": list(span) if isinstance(span, (list, tuple)) else None,
        "quote_span": list(a["quote_span"]) if isinstance(a.get("quote_span"), (list, tuple)) else None,
        "support": None,
        "sha256": a.get("sha256"),
        "chunk_sha256": a.get("chunk_sha256"),
        "event_id": event_id,
        # passages read by OCR from a page image say so (aisac_core.rag.ocr)
        "source": "ocr" if a.get("source") == "ocr" else None,
        "ocr_confidence": a.get("ocr_confidence") if a.get("source") == "ocr" else None,
        # a table cell anchor's box on its page (points, origin top-left): the page image highlights it
        "bbox": list(a["bbox"]) if isinstance(a.get("bbox"), (list, tuple)) and len(a["bbox"]) == 4 else None,
        # a database record a number cites (citation kind ``record``, aisac_core.roles.compare): its http(s) URL
        "url": a["url"] if isinstance(a.get("url"), str) and a["url"].startswith(("https://", "http://")) else None,
    }


def _evidence(
    events: list[dict[str, Any]], answer: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    first: dict[str, tuple[dict[str, Any], int]] = {}
    for e in events:
        for a in find_anchors(e.get("result")):
            if a.get("chunk_id") and a["chunk_id"] not in first:
                first[a["chunk_id"]] = (a, e["id"])
    cited: list[dict[str, Any]] = []
    for i, c in enumerate((answer or {}).get("citations") or [], 1):
        if not isinstance(c, dict):
            continue
        given = c.get("anchor")
        anchor: dict[str, Any] = given if isinstance(given, dict) else c
        cid = anchor.get("chunk_id") or c.get("chunk_id")
        seen = (
            first.get(cid) if cid is not None else None
        )  # the search hit carries the chunk text; the citation a quote
        base = {**(seen[0] if seen else {}), **{k: v for k, v in anchor.items() if v is not None}}
        for k in ("title", "text"):
            if not base.get(k) and c.get(k):
                base[k] = c[k]
        base["chunk_id"] = cid
        n = c.get("n")
        n = n if isinstance(n, int) and not isinstance(n, bool) and 0 < n < 10_000 else i  # a host may submit anything
        quote = c.get("quote") if isinstance(c.get("quote"), str) else None
        assert answer is not None  # the citations are the answer's
        cited.append(_card(base, seen[1] if seen else answer["event_id"], n=n, quote=quote))
    cited_ids = {c["chunk_id"] for c in cited}
    retrieved = [_card(a, eid) for cid, (a, eid) in first.items() if cid not in cited_ids]
    return cited, retrieved


def _roles_run_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A host's ``roles_run`` tool calls that finished with a result (the graph itself is traced as its own run)."""
    return [
        e
        for e in events
        if e["kind"] == "tool_call" and e["tool"].endswith("roles_run") and isinstance(e.get("result"), dict)
    ]


def _verdict(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    ev = _role(events, "evaluator", "evaluate")
    if ev:
        r, event_id = ev[-1]["result"], ev[-1]["id"]
    else:  # a host's roles_run call carries the graph's evaluation
        calls = [e for e in _roles_run_calls(events) if isinstance(e["result"].get("evaluation"), dict)]
        if not calls:
            return None
        r, event_id = calls[-1]["result"]["evaluation"], calls[-1]["id"]
    # the evaluator's own fields when present (aisac_core.roles.evaluator.verdict: same wording), else from ``by``
    judged = (
        r["content_judged"]
        if isinstance(r.get("content_judged"), bool)
        else (r.get("by") or "") not in ("automatic", "none", "")
    )
    passed = r.get("passed")
    if passed is None:
        label = "not evaluated"
    elif passed:
        label = "passed" if judged else "automatic checks passed"
    else:
        label = "failed" if judged else "automatic checks failed"
    gates = r.get("gates") if isinstance(r.get("gates"), dict) else {}
    sup = r.get("support") if isinstance(r.get("support"), dict) else {}
    return {
        "passed": passed,
        "label": label,
        # the two verdicts (aisac_core.roles.support): the cited bytes are there / the cited sentence states the claim
        "anchors": r.get("anchors") if isinstance(r.get("anchors"), str) else None,
        "support": sup.get("verdict") if isinstance(sup.get("verdict"), str) else "not judged",
        "support_by": sup.get("by"),
        "support_citations": {
            c["n"]: {
                "verdict": c.get("verdict"),
                "reasons": c.get("reasons") or [],
                "quote_span": c.get("quote_span"),
                # the learned judge's calibrated probability of its verdict (aisac_core.roles.support_model)
                "probability": c.get("probability"),
            }
            for c in sup.get("citations") or []
            if isinstance(c, dict) and isinstance(c.get("n"), int)
        },
        "content_judged": judged,
        "by": r.get("by"),
        "mean_severity": r.get("mean_severity"),
        "max_severity": r.get("max_severity"),
        "gates": {
            k: {"passed": bool(v.get("passed")), **({"detail": v["detail"]} if v.get("detail") else {})}
            for k, v in gates.items()
            if isinstance(v, dict)
        },
        "event_id": event_id,
    }


def critiques(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The critiques of an evaluator result (``critiques``, or the first list under a similar key), as dicts."""
    for k in ("critiques", "issues", "findings", "problems", "critique"):
        v = result.get(k)
        if isinstance(v, list):
            return [c if isinstance(c, dict) else {"message": c} for c in v]
    return []


def severity(c: dict[str, Any]) -> str:
    """Severity class: a word as given (high, medium, low...), or a number 0..1 (roles' evaluator,
    schemas/critique.json) banded >= 0.7 high, >= 0.4 medium, else low."""
    v = c.get("severity", c.get("level"))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return "high" if v >= 0.7 else "medium" if v >= 0.4 else "low"
    return str(v or "info").lower()


def _critique_list(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    steps = _role(events, "evaluator", "evaluate", "critic")
    for e in steps:
        for c in critiques(e["result"]):
            v = c.get("severity", c.get("level"))
            word = severity(c)
            label = f"{word} {v:.2f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else word
            msg = next(
                (c[k] for k in ("message", "text", "critique", "issue", "description", "reason") if c.get(k)), None
            )
            out.append(
                {
                    "severity": word,
                    "label": label,
                    "aspect": c.get("aspect"),
                    "message": str(msg or c),
                    "event_id": e["id"],
                    "final": e is steps[-1],
                }
            )
    return out


def _plan(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    plans = _role(events, "planner", "plan")
    steps: Any = None
    if plans:
        p = plans[-1]["result"].get("plan", plans[-1]["result"])
        if isinstance(p, dict):
            p = next((p[k] for k in ("steps", "substeps", "tasks", "subtasks") if isinstance(p.get(k), list)), None)
        steps = p
    if not isinstance(steps, list) or not steps:
        coord = [
            e
            for e in events
            if e["kind"] == "role_step"
            and "coordinator" in e["tool"]
            and isinstance(e.get("arguments"), dict)
            and isinstance(e["arguments"].get("steps"), list)
        ]
        if not coord:
            return None
        steps = coord[-1]["arguments"]["steps"]
    nodes: list[dict[str, Any]] = []
    edges: list[tuple[str, str]] = []
    parents: dict[str, str] = {}  # for an outline: a step under its last dependency or its parent step

    def add(items: list[Any], prefix: str, parent: str | None, depth: int) -> None:
        prev: str | None = None
        for i, s in enumerate(items[:200]):
            if isinstance(s, dict):
                sid = str(s.get("id", f"{prefix}{i + 1}"))
                label = str(s.get("goal") or s.get("title") or s.get("description") or s.get("step") or sid)
                nodes.append(
                    {"id": sid, "label": label, "tool": s.get("tool"), "helper": s.get("helper"), "named": "id" in s}
                )
                deps = s.get("depends_on")
                if isinstance(deps, list):  # a DAG (roles' plan schema): the dependencies are the edges
                    edges.extend((str(d), sid) for d in deps)
                    if deps:
                        parents[sid] = str(deps[-1])
                elif prev is not None:  # a list without dependencies runs in order
                    edges.append((prev, sid))
                elif parent is not None:  # a sub-step list hangs under its step
                    edges.append((parent, sid))
                if parent is not None and sid not in parents:
                    parents[sid] = parent
                kids = next(
                    (s[k] for k in ("steps", "substeps", "children", "subtasks") if isinstance(s.get(k), list)), None
                )
                if kids and depth < 6:
                    add(kids, f"{sid}.", sid, depth + 1)
            else:
                sid = f"{prefix}{i + 1}" if prefix else str(s)
                nodes.append({"id": sid, "label": str(s), "tool": None, "helper": None, "named": False})
                if prev is not None:
                    edges.append((prev, sid))
                elif parent is not None:
                    edges.append((parent, sid))
                if parent is not None:
                    parents[sid] = parent
            prev = sid

    add(steps, "", None, 0)
    known = {n["id"] for n in nodes}
    return {
        "nodes": nodes,
        "edges": [(a, b) for a, b in edges if a in known and b in known and a != b],
        "parents": {k: v for k, v in parents.items() if v in known and k != v},
        "event_id": plans[-1]["id"] if plans else None,
    }


def _parse(ts: str) -> datetime | None:
    try:
        return datetime.fromisoformat(ts)
    except (TypeError, ValueError):
        return None


def _timeline(tree: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    rows: list[dict[str, Any]] = []

    def visit(nodes: list[dict[str, Any]], depth: int) -> None:
        for n in nodes:
            rows.append(
                {
                    "id": n["id"],
                    "label": n["tool"],
                    "server": n["server"],
                    "kind": n["kind"],
                    "status": n["status"],
                    "depth": depth,
                    "duration_ms": float(n.get("latency_ms") or 0.0),
                    "_start": _parse(n.get("started_at") or ""),
                }
            )
            visit(n.get("children", []), depth + 1)

    visit(tree, 0)
    starts = [r["_start"] for r in rows if r["_start"] is not None]
    t0 = min(starts) if starts else None
    span = 0.0
    for r in rows:
        start = r.pop("_start")
        r["start_ms"] = round((start - t0).total_seconds() * 1000, 3) if start is not None and t0 else 0.0
        span = max(span, r["start_ms"] + r["duration_ms"])
    return rows, round(span, 3)


def run_report(data: dict[str, Any]) -> dict[str, Any]:
    """The report of a run from :meth:`~aisac_core.trace.queries.RunQueries.get_run` (``include_results=True``).

    Returns ``{run_id, run (the summary), question, question_source, answer: {text, by, citations, event_id} |
    None, cited: [card], retrieved: [card], verdict: {passed, label, content_judged, by, mean_severity,
    max_severity, gates: {name: {passed, detail?}}, event_id} | None, critiques: [{severity, label, aspect, message,
    event_id, final}] (``final``: of the last evaluation; earlier ones led to a re-plan), plan: {nodes: [{id, label, tool, helper, named}], edges: [(from, to)], parents: {id: id} (the outline's nesting:
    last dependency or enclosing step), event_id} | None, timeline: [{id,
    label, server, kind, status, depth, start_ms, duration_ms}], span_ms, errors, last_id, linked_runs}``
    (``linked_runs``: the runs of the roles graphs this run's ``roles_run`` calls started); a card is ``{n,
    chunk_id, doc_id, path, title, page, section, score, text, quote, char_span, quote_span (the quoted sentence's
    [start, end] in the chunk text, or None), support (the citation's support verdict, or None), sha256,
    chunk_sha256, event_id, source ("ocr" for a passage read by OCR, else None), ocr_confidence}``
    (``n``: the answer's ``[n]`` for a cited card, None for a retrieved one). See the module docstring."""
    events = walk(data["tree"])
    own = data["run"].get("run_id")
    linked = list(
        dict.fromkeys(
            str(e["result"]["run_id"])
            for e in _roles_run_calls(events)
            if e["result"].get("run_id") and e["result"]["run_id"] != own
        )
    )
    question, source = _question(events)
    answer = _answer(events)
    cited, retrieved = _evidence(events, answer)
    timeline, span = _timeline(data["tree"])
    verdict = _verdict(events)
    for card in cited:  # each cited card carries its support verdict and the span the judge read
        judged = (verdict or {}).get("support_citations", {}).get(card["n"])
        if judged:
            card["support"] = judged["verdict"]
            card["support_probability"] = judged.get("probability")
            if card["quote_span"] is None and isinstance(judged.get("quote_span"), list):
                card["quote_span"] = judged["quote_span"]
    return {
        "run_id": data["run"].get("run_id"),
        "run": data["run"],
        "question": question,
        "question_source": source,
        "answer": answer,
        "cited": cited,
        "retrieved": retrieved,
        "verdict": verdict,
        "critiques": _critique_list(events),
        "plan": _plan(events),
        "timeline": timeline,
        "span_ms": span,
        "errors": data.get("errors") or [],
        "last_id": data.get("last_id"),
        "linked_runs": linked,
    }


def question_of(events: list[dict[str, Any]]) -> str | None:
    """The question of a run from its events (any order; see the module docstring), or None."""
    return _question(events)[0]


def answer_digest(events: list[dict[str, Any]]) -> dict[str, Any]:
    """``{citations, verdict, verified, anchors}`` of a run from its researcher / evaluator steps and ``roles_run``
    calls (events with ``id, kind, server, tool, result``; others are ignored): the last answer's citation count,
    the last evaluator's verdict label, and the evidence anchors it found unchanged / checked (see
    :func:`run_report`). Missing parts are None."""
    answer = _answer(events)
    verdict = _verdict(events)
    out: dict[str, Any] = {
        "citations": len(answer["citations"]) if answer else None,
        "verdict": verdict["label"] if verdict else None,
        "verified": None,
        "anchors": None,
    }
    ev = _role(events, "evaluator", "evaluate")
    gates = ev[-1]["result"].get("gates") if ev else None
    gate = gates.get("evidence") if isinstance(gates, dict) else None
    if isinstance(gate, dict) and isinstance(gate.get("anchors"), list):
        out["anchors"] = len(gate["anchors"])
        out["verified"] = sum(1 for a in gate["anchors"] if isinstance(a, dict) and a.get("status") == "ok")
    return out
