"""``aisac ask``: run the graph headless and print the answer, its citations, the evaluator's report and the run id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from fastmcp import Client
from fastmcp.exceptions import ToolError
from rich.markup import escape

from aisac_core.context import AppContext
from aisac_core.evidence.anchor import ocr_note
from aisac_core.owner import OwnerInfo, live_owner
from aisac_core.roles import RolesError
from aisac_core.roles.evaluator import NOT_JUDGED, verdict

from ..base.proxying import owner_mcp_transport
from ..serving.toolclient import SuiteTools
from .safe import safe_print

if TYPE_CHECKING:
    from rich.console import Console


#: the accepted ``--mode`` and ``--llm`` values (as roles_run takes them)
MODES = ("lite", "standard", "strict")
LLMS = ("auto", "none", "openai", "replay")


def ask(
    core: AppContext,
    question: str,
    *,
    mode: str | None,
    llm: str | None,
    session_id: str | None,
    as_json: bool,
    out: Console,
    err: Console,
    use_owner: bool = True,
) -> int:
    """Run the graph (:meth:`~aisac_core.roles.service.RolesService.run`) and print the result; returns the exit
    code (0; the evaluator's verdict is printed, not turned into a failure code). Raises RolesError for bad input.

    When the store has a running owner process (``aisac serve``, docs/processes.md), which holds the store's
    lock, the run goes to that process as a ``roles_run`` call instead of opening the store here (unless
    ``use_owner`` is False or ``AISAC_OWNER_MODE=0``)."""
    # bad values are refused here, before an owner process is looked for or started
    if mode is not None and mode not in MODES:
        raise RolesError(f"mode {mode!r} is not one of {', '.join(MODES)} (minimum cited anchors 1/2/3)")
    if llm == "sampling":  # a tool argument of roles_run; the command line has no MCP client to sample from
        raise RolesError(
            "llm='sampling' needs an MCP client that offers sampling, and aisac ask has none: use "
            f"{', '.join(LLMS)}, or call roles_run from a host that offers sampling"
        )
    if llm is not None and llm not in LLMS:
        raise RolesError(f"llm {llm!r} is not one of {', '.join(LLMS)}")
    owner = _live_owner(core) if use_owner and core.settings.owner.mode else None
    err.print(
        "[dim]running router -> planner -> coordinator -> evaluator"
        + (f" in the store's owner process ({owner.address})" if owner else "")
        + " ...[/dim]"
    )
    if owner is not None:
        res = anyio.run(lambda: _ask_owner(owner, question, mode, llm, session_id))
    else:
        res = anyio.run(lambda: _ask_here(core, question, mode, llm, session_id))
    if as_json:
        safe_print(json.dumps(res, indent=1, ensure_ascii=False, default=str))
        return 0
    print_result(res, out)
    return 0


def _live_owner(core: AppContext) -> OwnerInfo | None:
    try:
        return live_owner(core.settings.data_dir)
    except Exception:
        return None


async def _ask_here(
    core: AppContext, question: str, mode: str | None, llm: str | None, session_id: str | None
) -> dict[str, Any]:
    """The run in this process, on the suite built over ``core``."""
    async with SuiteTools(core) as tools:
        return dict(await core.roles.run(question, tools=tools, mode=mode, llm=llm, session_id=session_id))


async def _ask_owner(
    owner: OwnerInfo, question: str, mode: str | None, llm: str | None, session_id: str | None
) -> dict[str, Any]:
    """``roles_run`` on the store's owner over HTTP (its bearer token from owner.json); polls a long run."""
    args: dict[str, Any] = {"task": question, "wait_s": 600}
    for k, v in (("mode", mode), ("llm", llm), ("session_id", session_id)):
        if v is not None:
            args[k] = v
    async with Client(owner_mcp_transport(owner), timeout=900) as c:
        try:
            res: dict[str, Any] = (await c.call_tool("roles_run", args)).structured_content
            while res.get("status") == "running":
                await anyio.sleep(2)
                res = (await c.call_tool("roles_job_status", {"job_id": res["job_id"]})).structured_content
                if res.get("status") == "failed":
                    raise RolesError(res.get("error") or "the run failed")
                if res.get("status") == "done":
                    res = res["result"]
        except ToolError as exc:
            raise RolesError(str(exc)) from exc
    return res


def print_result(res: dict[str, Any], out: Console) -> None:
    """Human rendering of a run result: the answer, its citations, then the evaluator's verdict ("automatic checks
    passed" / "automatic checks failed" and ``content: not judged (no model)`` when no model judged the content,
    "passed" / "failed" when one did), its gates and critiques."""
    ans = res["answer"] or {}
    ev = res["evaluation"] or {}
    out.print(f"[bold]run id:[/bold] {res['run_id']}")
    r = res["route"]
    out.print(f"[bold]route:[/bold] {r.get('intent')} / {r.get('complexity')} -> {r.get('decision')} ({r.get('by')})")
    out.print(f"[bold]answer[/bold] ({ans.get('by')}, attempt {len(res['attempts'])}):")
    out.print(escape(ans.get("text") or ""))
    if ans.get("closest"):  # an answer saying the sources do not state it lists what came closest, apart
        out.print("[bold]closest passages[/bold] (they do not state it):")
        for c in ans["closest"]:
            where = (
                f"[{c['n']}] {c.get('verdict')}"
                if c.get("n") is not None
                else f"{c.get('title') or '-'} · p. {c.get('page')} · {c.get('section') or '-'}"
            )
            out.print(escape(f"  - {where}"))
            out.print(escape(f"      “{str(c.get('sentence'))[:300]}”"))
    if ans.get("withheld"):  # the written answer that no cited passage supports, shown as such
        out.print("[dim]withheld (no cited passage supports it):[/dim]")
        out.print(escape(str(ans["withheld"])), style="dim")
    if ans.get("citations"):
        out.print("[bold]citations:[/bold]")
    for c in ans.get("citations") or []:
        if c["kind"] == "rag":
            a = c["anchor"]
            span = a.get("char_span")
            out.print(
                escape(
                    f"  [{c['n']}] {c.get('title') or Path(str(c.get('path'))).name} · p. {c.get('page')} · "
                    f"{c.get('section') or '-'} · score {c.get('score')} · chunk {c['chunk_id']} · "
                    f"chars {span} · sha256 {str(a.get('sha256'))[:12]}…"
                    + (f" · {note}" if (note := ocr_note(a)) else "")
                )
            )
            if c.get("quote"):
                out.print(escape(f"      “{c['quote']}”"))
        else:
            out.print(escape(f"  [{c['n']}] {c.get('title')} ({c.get('ref')})"))
    judged = ev.get("content_judged", (ev.get("by") or "automatic") != "automatic")
    word = ev.get("verdict") or verdict(bool(ev.get("passed")), judged)
    sup = ev.get("support") or {}
    # green only for what was checked: without a model, a pass whose support is not "supported" is yellow
    full = judged or sup.get("verdict") == "supported"
    colour = ("green" if full else "yellow") if ev.get("passed") else "red"
    out.print(
        f"[bold]evaluation[/bold] ({ev.get('mode')}, {ev.get('by')}): [{colour}]{word}[/{colour}] · mean "
        f"severity {ev.get('mean_severity')} · max {ev.get('max_severity')} · thresholds "
        f"{ev.get('thresholds')}"
    )
    sv = sup.get("verdict") or "not judged"
    sc = {"supported": "green", "partly": "yellow", "not supported": "red", "contradicted": "red"}.get(sv, "dim")
    av = ev.get("anchors") or "-"
    ac = "green" if av == "intact" else "red"
    out.print(
        f"  anchors: [{ac}]{av}[/{ac}] (the cited bytes are still there) · support: [{sc}]{sv}[/{sc}] (the cited "
        f"sentence states the claim; judged by {sup.get('by') or '-'})"
    )
    for r in sup.get("citations") or []:
        why = f": {'; '.join(r.get('reasons') or [])}" if r.get("reasons") else ""
        prob = f" (P {r['probability']:.2f})" if isinstance(r.get("probability"), (int, float)) else ""
        rc = {"supported": "green", "partly": "yellow", "not supported": "red", "contradicted": "red"}.get(
            str(r.get("verdict")), "dim"
        )
        word = "CONTRADICTED" if r.get("verdict") == "contradicted" else str(r.get("verdict"))
        head = escape(f"[{r.get('n')}] {word}{prob}")
        out.print(f"    [{rc}]{head}[/{rc}]{escape(why)}")
    out.print(f"  content: {ev.get('content') or ('judged by model' if judged else NOT_JUDGED)}")
    gates = ev.get("gates") or {}
    g = gates.get("evidence") or {}
    out.print(
        f"  evidence gate: {'ok' if g.get('passed') else 'FAILED'} ({g.get('verified_counted')} intact anchors "
        f">= score {g.get('min_score')}, need {g.get('required')})"
    )
    out.print(
        f"  data gate: {'ok' if (gates.get('data') or {}).get('passed') else 'FAILED'} · exec gate: "
        f"{'ok' if (gates.get('exec') or {}).get('passed') else 'FAILED'}"
    )
    for c in ev.get("critiques") or []:
        out.print(escape(f"  - [{c.get('aspect')} {c.get('severity')}] {c.get('text')}"))
    for m in res.get("model_errors") or []:
        out.print(escape(f"[yellow]model error ({m['role']}), rules used instead:[/yellow] {m['error']}"))
    out.print(f"[dim]{len(res['attempts'])} attempt(s), {res['took_s']} s; trace run id {res['run_id']}[/dim]")
