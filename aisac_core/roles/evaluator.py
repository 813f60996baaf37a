"""The Evaluator: automatic gates first (no model), then the model's critiques, then pass/fail by thresholds.

Gates (each failure is a critique with the severity given):

- **evidence**: every rag anchor the answer cites is verified with :meth:`aisac_core.rag.verify.AnchorVerifier.verify_full_anchor`
  (re-hashes the file and the chunk text). An anchor that does not verify (``missing``, ``chunk_changed``) is a
  critique of severity 1.0, a ``file_changed`` one (the passage is still there) 0.3. The anchors that verify and
  score at least the mode's ``min_score`` must number at least its ``min_anchors`` (:data:`~aisac_core.roles.
  MODE_GATES`: lite 1, standard 2, strict 3), else severity 0.9.
- **data**: files the run referenced (``path``-like arguments of ``data_*`` tool calls, the answer's ``files``)
  must exist and must not be error pages (HTML where data was expected, or an HTML page titled with an HTTP
  error), else severity 0.9 each.
- **exec**: ``data_code_run`` calls of the run (or those the answer lists in ``code_runs``) must have succeeded
  (trace status ``ok`` and result ``ok: true``), else severity 0.9 each.

An empty answer, or one without citations, is severity 1.0 (completeness / grounding).

Two verdicts, named plainly (:mod:`aisac_core.roles.support`): ``anchors`` (intact / changed / missing: the cited
bytes are still there) and ``support`` (supported / partly / not supported / contradicted / not judged: the cited
sentence states the claim; judged by the learned support judge and documented rules without a model, by the model
per citation with one). A citation judged not supported or contradicted is a critique of severity 0.9, partly 0.3; citations of front matter, running headers or reference lists
never count toward the evidence gate.

Wording: without a model nothing judged the content as a whole, so the report says ``content: not judged (no model)`` and its
``verdict`` is "automatic checks passed" or "automatic checks failed" (never "verified": the gates check that the
cited bytes are there, the support rules that the cited sentence shares the claim's numbers, names and terms; the
two verdicts ``anchors`` and ``support`` say which); with a model it is "passed" or "failed". The ``passed`` key
keeps the machine-readable outcome in both cases.

Pass/fail: ``mean_severity <= roles_max_mean_severity`` (default 0.4) and ``max_severity <= roles_max_severity``
(default 0.8), over at most 10 critiques (highest severity kept); no critiques means mean = max = 0. These
defaults and the gate severities are aisac's own choice (a failed gate must fail the run: 0.9 > 0.8).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeGuard, cast

import anyio

from aisac_core.jsontypes import JSONObject, json_object, json_objects
from aisac_core.roles import MODE_GATES
from aisac_core.roles.backends import ask_json
from aisac_core.roles.prompts import render
from aisac_core.roles.schemas import load_schema, validate
from aisac_core.roles.support import anchor_word, anchors_verdict, judge_answer

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aisac_core.rag.results import Verification
    from aisac_core.roles.backends import Backend
    from aisac_core.roles.env import EvaluatorEnv
    from aisac_core.roles.shapes import (
        Answer,
        CritiqueReport,
        CritiqueSummary,
        DataGate,
        Evaluation,
        EvidenceGate,
        ExecGate,
        GateAnchor,
        GateFile,
        GateRun,
        Gates,
        RoleCritique,
        RunEvent,
        SupportReport,
    )

MAX_CRITIQUES = 10
_PATH_KEYS = ("path", "paths", "file", "files", "source")
_HTTP_ERROR = re.compile(r"<title>[^<]*(\b[45]\d\d\b|not found|forbidden|access denied|error)[^<]*</title>", re.I)


def verify(env: EvaluatorEnv, anchor: Mapping[str, object]) -> Verification:
    """Re-verify a cited anchor (``env.corpus.verify_cited``, :meth:`aisac_core.rag.verify.AnchorVerifier.verify_full_anchor`):
    ``{status, chunk_id, doc_id, path, detail, sha256_now, current_chunk_id}``; a document outside this process's
    roots is ``missing``."""
    return env.corpus.verify_cited(anchor)


def evidence_gate(
    env: EvaluatorEnv, answer: Answer, mode: str, not_evidence: set[int] | None = None
) -> tuple[EvidenceGate, list[RoleCritique]]:
    """The evidence gate: ``({passed, required, min_score, verified_counted, anchors: [...]}, critiques)``.
    ``not_evidence``: citation numbers whose cited sentence is front matter, a running header or a reference entry
    (:func:`aisac_core.roles.support.is_not_evidence`): verified or not, they never count."""
    gate = MODE_GATES[mode]
    skip = not_evidence or set()
    anchors: list[GateAnchor] = []
    crit: list[RoleCritique] = []
    counted = 0
    for c in answer.get("citations") or []:
        a = c.get("anchor")
        if not isinstance(a, dict):
            continue
        status: str | None
        detail: str | None
        try:
            got = verify(env, a)
            status, detail = got.get("status"), got.get("detail")
        except Exception as exc:  # a verification error is a failed verification, with the reason
            status, detail = "missing", f"{type(exc).__name__}: {exc}"
        score = a.get("score") if a.get("score") is not None else c.get("score")
        ok = status == "ok"
        counts = ok and score is not None and score >= gate["min_score"] and c.get("n") not in skip
        counted += counts
        anchors.append(
            {
                "n": c.get("n"),
                "chunk_id": a.get("chunk_id"),
                "status": status,
                "detail": detail,
                "score": score,
                "counted": counts,
                "anchor": anchor_word(status),
            }
        )
        if status in ("missing", "chunk_changed"):
            crit.append(
                {
                    "aspect": "grounding",
                    "severity": 1.0,
                    "evidence_refs": [str(a.get("chunk_id"))],
                    "text": f"citation [{c.get('n')}] does not verify ({status}: {detail}); "
                    "search again and cite current passages",
                }
            )
        elif status == "file_changed":
            crit.append(
                {
                    "aspect": "grounding",
                    "severity": 0.3,
                    "evidence_refs": [str(a.get("chunk_id"))],
                    "text": f"citation [{c.get('n')}]: the file changed since indexing, the passage is still "
                    "there; re-index to refresh page and span",
                }
            )
    passed = counted >= gate["min_anchors"]
    if not passed:
        crit.append(
            {
                "aspect": "grounding",
                "severity": 0.9,
                "evidence_refs": [str(a["chunk_id"]) for a in anchors],  # as the critiques above
                "text": f"the answer cites {counted} intact anchor(s) with score >= {gate['min_score']}; mode "
                f"{mode} needs {gate['min_anchors']}: gather more evidence (wider or other searches)",
            }
        )
    return (
        {
            "passed": passed,
            "required": int(gate["min_anchors"]),
            "min_score": gate["min_score"],
            "verified_counted": counted,
            "anchors": anchors,
        },
        crit,
    )


def _paths(x: object) -> list[str]:
    out: list[str] = []
    if isinstance(x, dict):
        for k, v in x.items():
            if k in _PATH_KEYS and isinstance(v, str):
                out.append(v)
            elif k in _PATH_KEYS and isinstance(v, list):
                out += [p for p in v if isinstance(p, str)]
    return out


def looks_like_error_page(path: Path) -> str | None:
    """Why the file looks like an error page (HTML where data was expected, or an HTTP error page), or None."""
    try:
        head = path.read_bytes()[:4096].decode("utf-8", "replace")
    except OSError as exc:
        return f"unreadable ({exc})"
    is_html = bool(re.match(r"\s*(<!doctype html|<html)", head, re.I))
    if not is_html:
        return None
    if path.suffix.lower() not in (".html", ".htm", ".xhtml"):
        return "an HTML page where a data file was expected (a download that returned an error page?)"
    if _HTTP_ERROR.search(head):
        return "an HTML page titled with an HTTP error"
    return None


def data_gate(answer: Answer, events: list[RunEvent]) -> tuple[DataGate, list[RoleCritique]]:
    """The data gate over the run's ``data_*`` tool calls and the answer's ``files``."""
    refs: dict[str, int | None] = {}
    for ev in events:
        if ev["kind"] == "tool_call" and str(ev["tool"]).startswith("data_") and ev["tool"] != "data_code_run":
            res = json_object(ev.get("result"))
            # the resolved source paths the data server reports (a relative argument is relative to its first root)
            resolved = [
                path
                for f in json_objects(res.get("frames"))
                if isinstance(path := json_object(f.get("source")).get("path"), str) and path
            ]
            for p in resolved or [p for p in _paths(ev.get("arguments") or {}) if Path(p).expanduser().is_absolute()]:
                refs.setdefault(p, ev["id"])
    for p in answer.get("files") or []:
        refs.setdefault(str(p), None)
    files: list[GateFile] = []
    crit: list[RoleCritique] = []
    for p, ev_id in refs.items():
        fp = Path(p).expanduser()
        problem = None if fp.exists() else "does not exist"
        if problem is None and fp.is_file():
            problem = looks_like_error_page(fp)
        files.append({"path": p, "event_id": ev_id, "ok": problem is None, "problem": problem})
        if problem:
            crit.append(
                {
                    "aspect": "data",
                    "severity": 0.9,
                    "evidence_refs": [str(ev_id) if ev_id else p],
                    "text": f"referenced file {p} {problem}; fetch or point to the right file",
                }
            )
    return {"passed": not crit, "files": files}, crit


def exec_gate(answer: Answer, events: list[RunEvent]) -> tuple[ExecGate, list[RoleCritique]]:
    """The exec gate over the run's ``data_code_run`` calls (or the answer's ``code_runs`` event ids)."""
    wanted = {int(i) for i in answer.get("code_runs") or []}
    # a run longer than the job threshold answers {pending, job_id}; its outcome is the last data_code_job_status
    # call for that job in the same run
    finished: dict[str, RunEvent] = {}
    for ev in events:
        done = ev.get("result")
        if ev["kind"] == "tool_call" and ev["tool"] == "data_code_job_status" and isinstance(done, dict):
            job = json_object(ev.get("arguments")).get("job_id")
            if job and not done.get("pending"):
                finished[str(job)] = ev
    runs: list[GateRun] = []
    crit: list[RoleCritique] = []
    for ev in events:
        if ev["kind"] != "tool_call" or ev["tool"] != "data_code_run" or (wanted and ev["id"] not in wanted):
            continue
        res = ev.get("result")
        if isinstance(res, dict) and res.get("pending") and str(res.get("job_id")) in finished:
            ev = {**ev, "result": finished[str(res["job_id"])]["result"]}
            res = ev["result"]
        ok_flag = res.get("ok") if isinstance(res, dict) else None
        ok = ev["status"] == "ok" and ok_flag is True
        res_err = res.get("error") if isinstance(res, dict) else None
        err = ev.get("error") or (res_err if isinstance(res_err, str) or res_err is None else str(res_err))
        runs.append({"event_id": ev["id"], "ok": ok, "error": err})
        if not ok:
            crit.append(
                {
                    "aspect": "code",
                    "severity": 0.9,
                    "evidence_refs": [str(ev["id"])],
                    "text": f"code run (trace event {ev['id']}) failed: {str(err)[:300]}; fix the code and run "
                    "it again before relying on its output",
                }
            )
    return {"passed": not crit, "runs": runs}, crit


def is_critique_report(value: object) -> TypeGuard[CritiqueReport]:
    """True when ``value`` is valid against the ``critique`` JSON Schema, whose keys and types
    :class:`~aisac_core.roles.shapes.CritiqueReport` declares (``tests/test_roles.py::test_schema_guards_match_their_types`` checks that they agree)."""
    return not validate("critique", value)


def summarize(critiques: list[RoleCritique], max_mean: float, max_max: float) -> CritiqueSummary:
    """``{critiques (at most 10, highest severity first), mean_severity, max_severity, passed, thresholds}``."""
    cs = sorted(critiques, key=lambda c: -float(c.get("severity", 0)))[:MAX_CRITIQUES]
    sev = [float(c.get("severity", 0)) for c in cs]
    mean = sum(sev) / len(sev) if sev else 0.0
    mx = max(sev) if sev else 0.0
    return {
        "critiques": cs,
        "mean_severity": round(mean, 4),
        "max_severity": round(mx, 4),
        "passed": mean <= max_mean and mx <= max_max,
        "thresholds": {"max_mean_severity": max_mean, "max_severity": max_max},
    }


def support_critiques(support: SupportReport) -> list[RoleCritique]:
    """Critiques of the support verdicts: a citation judged ``not supported`` or ``contradicted`` is severity 0.9
    (it fails the run), ``partly`` 0.3; front matter / reference citations say they do not count."""
    out: list[RoleCritique] = []
    for r in support["citations"]:
        if r["verdict"] in ("not supported", "partly", "contradicted"):
            out.append(
                {
                    "aspect": "support",
                    "severity": 0.3 if r["verdict"] == "partly" else 0.9,
                    "evidence_refs": [str(r["n"])],
                    "text": f"citation [{r['n']}] {r['verdict']}: {'; '.join(r['reasons'])[:300]}",
                }
            )
    return out


#: the automatic gates, in the order the evaluator prompt shows them
_GATE_NAMES: tuple[Literal["evidence", "data", "exec"], ...] = ("evidence", "data", "exec")

#: the no-model verdicts (:func:`verdict`)
AUTO_PASSED, AUTO_FAILED = "automatic checks passed", "automatic checks failed"
#: the report's ``content`` field when no model judged the answer's content (only the automatic gates ran)
NOT_JUDGED = "not judged (no model)"


def verdict(passed: bool, content_judged: bool) -> str:
    """The report's wording: ``"passed"`` / ``"failed"`` when a model judged the content, else ``"automatic checks
    passed"`` / ``"automatic checks failed"`` (the automatic gates and support rules say nothing about whether the
    answer is right, only that its cited bytes are there and the cited sentences share its numbers, names and
    terms: the ``anchors`` and ``support`` verdicts)."""
    if content_judged:
        return "passed" if passed else "failed"
    return AUTO_PASSED if passed else AUTO_FAILED


def automatic_checks(
    env: EvaluatorEnv, answer: Answer, events: list[RunEvent], mode: str, not_evidence: set[int] | None = None
) -> tuple[Gates, list[RoleCritique]]:
    """All gates: ``({evidence, data, exec}, critiques)``, plus completeness critiques for an empty or uncited
    answer (``not_evidence``: see :func:`evidence_gate`)."""
    ev_gate, c1 = evidence_gate(env, answer, mode, not_evidence)
    d_gate, c2 = data_gate(answer, events)
    x_gate, c3 = exec_gate(answer, events)
    crit = c1 + c2 + c3
    if not (answer.get("text") or "").strip():
        crit.append({"aspect": "completeness", "severity": 1.0, "evidence_refs": [], "text": "the answer is empty"})
    elif not answer.get("citations"):
        crit.append(
            {
                "aspect": "grounding",
                "severity": 1.0,
                "evidence_refs": [],
                "text": "the answer cites no evidence; every claim needs an anchor",
            }
        )
    return {"evidence": ev_gate, "data": d_gate, "exec": x_gate}, crit


def evidence_summary(events: list[RunEvent]) -> list[JSONObject]:
    """The run's tool calls as the evaluator prompt shows them: numbered in order, no event ids or run ids (a
    prompt must be identical when the run is replayed, or the cached response is not found)."""
    calls = [ev for ev in events if ev["kind"] == "tool_call"]
    return [
        {
            "call": n,
            "tool": ev["tool"],
            "status": ev["status"],
            "arguments": ev.get("arguments"),
            "error": ev.get("error"),
        }
        for n, ev in enumerate(calls, 1)
    ][-30:]


async def evaluate(
    env: EvaluatorEnv,
    task: str,
    answer: Answer,
    events: list[RunEvent],
    backend: Backend | None,
    *,
    mode: str,
    run_id: str,
    parent_id: int | None,
) -> Evaluation:
    """The evaluator's report: ``{mode, gates, critiques, mean_severity, max_severity, passed, thresholds, by,
    content_judged, content, verdict}``.

    Automatic gates run first; with ``backend`` the model adds critiques (the schema allows 10). ``passed`` is
    the machine-readable outcome (the graph re-plans on False); ``content_judged`` says whether a model judged
    the content, ``content`` is ``"judged by model"`` or :data:`NOT_JUDGED`, and ``verdict`` the wording of
    :func:`verdict` ("passed" / "failed" with a model, "automatic checks passed" / "automatic checks failed" without).
    Raises :class:`~aisac_core.roles.RoleModelError` when the model fails."""
    s = env.settings
    support = await judge_answer(
        env, task, answer, backend, chunk_text=env.chunk_text, embed=env.embed_texts, run_id=run_id, parent_id=parent_id
    )
    skip = {n for r in support["citations"] if r.get("evidence") is False and (n := r["n"]) is not None}
    # the gates re-hash cited files: a worker thread, not the event loop
    gates, crit = await anyio.to_thread.run_sync(lambda: automatic_checks(env, answer, events, mode, skip))
    crit += support_critiques(support)
    by = "automatic"
    request_sha256: str | None = None
    if backend is not None:
        shown = {
            "text": answer.get("text"),
            "citations": [
                {k: c.get(k) for k in ("n", "kind", "chunk_id", "title", "page", "section", "ref", "quote")}
                for c in answer.get("citations") or []
            ],
        }
        text, version = render(
            "evaluator",
            {
                "task": task,
                "answer": shown,
                "evidence": evidence_summary(events),
                "gates": {"gates": {k: {"passed": bool(gates[k]["passed"])} for k in _GATE_NAMES}, "critiques": crit},
                "schema": load_schema("critique"),
            },
            s.prompt_dir,
        )
        got = await ask_json(
            env,
            backend,
            role="evaluator",
            schema="critique",
            prompt=text,
            prompt_version=version,
            run_id=run_id,
            parent_id=parent_id,
        )
        # the model's critiques were validated against the critique schema (aspect, text, severity, evidence_refs)
        crit = crit + [
            cast("RoleCritique", {"evidence_refs": [], **c, "by": "model"})
            for c in json_objects(got["output"].get("critiques"))
        ]
        by = "automatic+model"
        request_sha256 = got["request_sha256"]
    summary = summarize(crit, s.max_mean_severity, s.max_severity)
    judged = backend is not None
    out: Evaluation = {
        "mode": mode,
        "anchors": anchors_verdict([a["status"] for a in gates["evidence"]["anchors"]]),
        "support": support,
        "gates": gates,
        "critiques": summary["critiques"],
        "mean_severity": summary["mean_severity"],
        "max_severity": summary["max_severity"],
        "passed": summary["passed"],
        "thresholds": summary["thresholds"],
        "by": by,
        "content_judged": judged,
        "content": "judged by model" if judged else NOT_JUDGED,
        "verdict": verdict(summary["passed"], judged),
    }
    if request_sha256 is not None:
        out["request_sha256"] = request_sha256
    return out
