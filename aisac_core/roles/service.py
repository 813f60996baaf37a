"""The roles service: the router, planner and evaluator one at a time, the whole graph, its background runs, the
host-model submissions and the role prompts, over one store.

Built by the composition root (``AppContext.roles``) with only what the roles need: the roles settings, the store's
engine (opened on first use), rag through its typed interface (:class:`~aisac_core.roles.env.Corpus`: search, chunk
lookup, anchor verification, returning rag's declared result types), the served project's graph augmentation and
the job lease. The suite's tools reach it as a :class:`~aisac_core.ports.ToolPort` argument of the
methods that call tools (the MCP layer opens one per call: ``aisac_servers.serving.toolclient.SuiteTools``).

Every role step is a ``role_step`` trace event of the caller's run (``run_id``), every model request a
``model_call`` event under it (:mod:`.backends`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from functools import cached_property
from typing import TYPE_CHECKING, cast

import anyio

from aisac_core.ports import ToolPort
from aisac_core.roles import RolesError, check_mode
from aisac_core.roles import evaluator as core_evaluator
from aisac_core.roles import planner as core_planner
from aisac_core.roles import prompts as core_prompts
from aisac_core.roles import router as core_router
from aisac_core.roles.backends import Backend, get_backend
from aisac_core.roles.graph import GraphRun, default_graph
from aisac_core.roles.jobs import RunJobs
from aisac_core.roles.results import (
    CritiqueSubmitResult,
    EvaluateResult,
    PlanResult,
    RolesJob,
    RolesRun,
    RouteResult,
    RunResult,
    SubmitResult,
)
from aisac_core.roles.schemas import load_schema, validate
from aisac_core.roles.store import Step, run_events, save_submission
from aisac_core.roles.tools import capabilities, proposable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from sqlalchemy.engine import Engine

    from aisac_core.jsontypes import JSONObject, JSONValue
    from aisac_core.rag.results import AnchorDict, HitDict
    from aisac_core.roles.env import Corpus, GraphAugment
    from aisac_core.roles.shapes import Answer, Citation
    from aisac_core.settings import RolesSettings

#: appended to a role prompt for the host's own model: where to submit its JSON
HOST_SUFFIX = (
    "\n\nSubmit the JSON object with the tool {tool}({arg}=<the object>). If it reports errors, fix "
    "them and submit again.\n"
)


def answer_object(
    answer: str, citations: Sequence[JSONValue] | None, files: list[str] | None, code_runs: list[int] | None
) -> Answer:
    """The evaluator's answer object from a host's answer: ``{text, citations: [{n, kind: rag, chunk_id, anchor,
    score}], files, code_runs}``. ``citations``: rag_search hits or their anchors. Raises :class:`RolesError` for a
    citation that is not an object or has no ``chunk_id``."""
    cites: list[Citation] = []
    for n, c in enumerate(citations or [], 1):
        if not isinstance(c, dict):
            raise RolesError(f"citations[{n - 1}] must be an object: a rag_search hit or its 'anchor'")
        anchor = c.get("anchor")
        a = anchor if isinstance(anchor, dict) else c
        chunk_id, score = a.get("chunk_id"), c.get("score", a.get("score"))
        if not chunk_id:
            raise RolesError(f"citations[{n - 1}] has no chunk_id: pass rag_search hits or their 'anchor' objects")
        cites.append(
            # a host's anchor: the evaluator's evidence gate re-verifies it against the index
            {
                "n": n,
                "kind": "rag",
                "chunk_id": str(chunk_id),
                "anchor": cast("AnchorDict", a),
                "score": score if isinstance(score, int | float) and not isinstance(score, bool) else None,
            }
        )
    return {"text": answer, "citations": cites, "files": files or [], "code_runs": code_runs or []}


#: texts whose vectors :meth:`RolesService.embed_texts` keeps (about 1.5 MB of 384-float vectors)
EMBED_CACHE_SIZE = 1024


class RolesService(GraphRun):
    """The roles of one store. The whole graph run, :meth:`run`, is its part
    :class:`~aisac_core.roles.graph.GraphRun`, for which the service provides the collaborators.

    Args:
        settings: the roles settings (``Settings.roles``): backend, mode, thresholds, plan limits, prompt overlay.
        engine: a zero-argument callable returning the store's SQL engine (called on first use; the response
            cache, the trace and the job table live there).
        corpus: a zero-argument callable returning the store's documents as the roles read them (a
            :class:`~aisac_core.roles.env.Corpus`: the rag service; called on first use): the router's context
            (search hits), the full anchor of a compact citation, the evaluator's evidence gate (anchor
            verification) and the extractive answer's neighbouring chunks.
        graph_augment: the served project's workflow-graph augmentation (None: none).
        lease_s: seconds a background run's row in the job table is leased for (renewed every third).
        embed: ``texts -> unit vectors`` (the store's dense embedder): semantic similarity of question, answer and
            cited sentences (None: similarity not used).
    """

    def __init__(
        self,
        settings: RolesSettings,
        engine: Callable[[], Engine],
        *,
        corpus: Callable[[], Corpus],
        graph_augment: GraphAugment | None = None,
        lease_s: float = 30.0,
        embed: Callable[[list[str]], list[list[float]]] | None = None,
    ) -> None:
        self.settings = settings
        self._engine = engine
        self._corpus = corpus
        self.graph_augment = graph_augment
        self.lease_s = lease_s
        self._embed = embed
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()
        self._vec_lock = threading.Lock()

    @property
    def corpus(self) -> Corpus:
        """The store's documents as the roles read them (rag's search, chunks and anchor verification; opened on
        first use)."""
        return self._corpus()

    def _chunk(self, chunk_id: str) -> HitDict | None:
        # rag's chunk lookup; reaching the corpus may open the store: call it off the event loop
        return self.corpus.get_chunk(chunk_id)

    def chunk_text(self, chunk_id: str | None) -> str | None:
        """The text of chunk ``chunk_id`` as the index holds it (None: not in the index): what a citation's
        ``quote_span`` points into."""
        if not chunk_id:
            return None
        got = self.corpus.get_chunk(chunk_id)
        return got["text"] or "" if got else None

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Unit dense vectors of ``texts`` (the store's MiniLM embedder), for the extractive answer's and the support
        judge's semantic similarity; ``[]`` vectors when the service was built without an embedder. The last
        :data:`EMBED_CACHE_SIZE` texts' vectors are kept, so the support judge reuses the sentences the extractive
        answer embedded (the same question, the same candidate sentences)."""
        if self._embed is None:
            return [[] for _ in texts]
        with self._vec_lock:
            known = {t: self._vectors[t] for t in texts if t in self._vectors}
        todo = list(dict.fromkeys(t for t in texts if t not in known))
        if todo:
            got = dict(zip(todo, self._embed(todo)))
            with self._vec_lock:
                for t, v in got.items():
                    self._vectors[t] = v
                    self._vectors.move_to_end(t)
                while len(self._vectors) > EMBED_CACHE_SIZE:
                    self._vectors.popitem(last=False)
            known.update(got)
        return [known[t] for t in texts]

    @property
    def engine(self) -> Engine:
        """The store's SQL engine (opened on first use)."""
        return self._engine()

    @cached_property
    def jobs(self) -> RunJobs:
        """Background ``roles_run`` graph runs (asyncio tasks of this process, recorded in the ``job`` table so every
        process serving the store reads their status). Opens the store the first time: reach it off the event loop."""
        return RunJobs(self.engine, lease_s=self.lease_s)

    def active_graph(self) -> JSONObject:
        """The workflow graph runs use by default: :func:`aisac_core.roles.graph.default_graph` with the served
        project's augmentation (:attr:`graph_augment`). Raises :class:`RolesError` when the augmented graph is
        invalid."""
        return default_graph(self.graph_augment)

    def _backend(self, llm: str | None, sampling: Backend | None = None) -> Backend | None:
        # the model backend for ``llm`` (aisac_core.roles.backends.get_backend); raises RolesError
        return get_backend(self.settings, llm, sampling)

    def search_hits(self, task: str, k: int = 5) -> list[HitDict]:
        """The top ``k`` search hits for ``task``; none when the index is empty or cannot be opened (no context is
        not an error of the role)."""
        try:
            return self.corpus.search_hits(task, k)
        except Exception:  # an empty or unopened index is no context, not an error of the role
            return []

    async def route(
        self,
        task: str,
        *,
        run_id: str,
        mode: str | None = None,
        llm: str | None = None,
        sampling: Backend | None = None,
    ) -> RouteResult:
        """``roles_route``: the router's step alone, over the top 5 search hits, recorded as a ``router`` step of
        ``run_id``. Returns :class:`~aisac_core.roles.results.RouteResult`. Raises :class:`RolesError` (empty task,
        unknown mode or llm), :class:`~aisac_core.roles.RoleModelError`, :class:`~aisac_core.roles.NeedInput`."""
        if not task or not task.strip():
            raise RolesError("task is empty: give the question to route")
        m = check_mode(mode, self.settings.mode)
        backend = self._backend(llm, sampling)
        hits = await anyio.to_thread.run_sync(self.search_hits, task)
        with Step(self.engine, run_id, "router", {"task": task, "mode": m}) as st:
            decided = await core_router.route(self, task, hits, None, backend, mode=m, run_id=run_id, parent_id=st.id)
            st.result = decided
        return cast(RouteResult, {**decided, "run_id": run_id, "event_id": st.id})

    async def plan(
        self,
        task: str,
        *,
        tools: ToolPort,
        run_id: str,
        route: Mapping[str, object] | None = None,
        feedback: Sequence[Mapping[str, object]] | None = None,
        attempt: int = 0,
        llm: str | None = None,
        sampling: Backend | None = None,
    ) -> PlanResult:
        """``roles_plan``: a plan over the live tools of ``tools`` (not run), recorded as a ``planner`` step of
        ``run_id``. Returns :class:`~aisac_core.roles.results.PlanResult`. Raises :class:`RolesError`,
        :class:`~aisac_core.roles.RoleModelError`, :class:`~aisac_core.roles.NeedInput`."""
        if not task or not task.strip():
            raise RolesError("task is empty: give the question to plan for")
        backend = self._backend(llm, sampling)
        caps = await capabilities(tools)
        args = {"task": task, "attempt": attempt, "feedback": feedback}
        with Step(self.engine, run_id, "planner", args) as st:
            planned = await core_planner.plan(
                self,
                task,
                route,
                caps,
                backend,
                run_id=run_id,
                parent_id=st.id,
                attempt=attempt,
                feedback=feedback,
                proposable=await proposable(tools),
            )
            st.result = planned
        return cast(PlanResult, {**planned, "run_id": run_id, "event_id": st.id})

    async def evaluate(
        self,
        task: str,
        answer: str,
        *,
        run_id: str,
        citations: Sequence[JSONValue] | None = None,
        files: list[str] | None = None,
        code_runs: list[int] | None = None,
        of_run: str | None = None,
        mode: str | None = None,
        llm: str | None = None,
        sampling: Backend | None = None,
    ) -> EvaluateResult:
        """``roles_evaluate``: the evaluator on a host's answer (:func:`answer_object`; a compact citation gets its
        full anchor from the index) against the trace of ``of_run`` (default ``run_id``), recorded as an
        ``evaluator`` step of ``run_id``. Returns :class:`~aisac_core.roles.results.EvaluateResult`. Raises
        :class:`RolesError`, :class:`~aisac_core.roles.RoleModelError`, :class:`~aisac_core.roles.NeedInput`."""
        m = check_mode(mode, self.settings.mode)
        backend = self._backend(llm, sampling)
        ans = answer_object(answer, citations, files, code_runs)
        for c in ans["citations"]:  # a compact rag_search hit cites its chunk_id: the index holds the full anchor
            got = None if c["anchor"].get("sha256") else await anyio.to_thread.run_sync(self._chunk, c["chunk_id"])
            if got is not None:
                c["anchor"] = {**got["anchor"], "score": c["score"]}
        events = await anyio.to_thread.run_sync(run_events, self.engine, of_run or run_id)
        with Step(self.engine, run_id, "evaluator", {"task": task, "mode": m, "answer": ans}) as st:
            report = await core_evaluator.evaluate(
                self, task, ans, events, backend, mode=m, run_id=run_id, parent_id=st.id
            )
            st.result = report
        return cast(EvaluateResult, {**report, "run_id": run_id, "event_id": st.id})

    def start_run(
        self,
        task: str,
        *,
        open_tools: Callable[[], AbstractAsyncContextManager[ToolPort]],
        run_id: str,
        mode: str | None = None,
        llm: str | None = None,
        session_id: str | None = None,
        sampling: Backend | None = None,
    ) -> str:
        """Start :meth:`run` as a background job of the running event loop (``open_tools()``: an async context
        giving the tool port for the run); returns the job id (follow it with :attr:`jobs`, :meth:`run_outcome`)."""

        async def go() -> RunResult:
            async with open_tools() as tools:
                return await self.run(
                    task, tools=tools, mode=mode, llm=llm, session_id=session_id, run_id=run_id, sampling=sampling
                )

        return self.jobs.start(run_id, go, {"task": task[:2000], "mode": mode, "llm": llm})

    def run_outcome(self, job_id: str, run_id: str, *, wait_s: float, report_uri: str) -> RolesRun:
        """``roles_run``'s answer for job ``job_id`` (after waiting ``wait_s`` seconds): ``status: done`` with the
        :class:`~aisac_core.roles.results.RunResult` keys, else the job's status and a ``message``; ``report_uri``:
        the run report's address. Raises :class:`RolesError` when the run failed (its message)."""
        st = self.jobs.status(job_id)
        assert st is not None
        if st["status"] == "failed":
            err = st["error"]
            raise RolesError(
                err.split(": ", 1)[1]
                if err.startswith(("RolesError", "RoleModelError"))
                else f"the run failed ({err}); its trace is run {run_id}"
            )
        if st["status"] in ("running", "cancelled", "interrupted"):
            return {
                "status": st["status"],
                "job_id": job_id,
                "run_id": run_id,
                "report_uri": report_uri,
                "message": f"still running after {wait_s:g} s; poll roles_job_status(job_id)"
                if st["status"] == "running"
                else st.get("error") or st["status"],
            }
        return cast(
            RolesRun, {"status": "done", "job_id": job_id, "run_id": run_id, **st["result"], "report_uri": report_uri}
        )

    def job_status(self, job_id: str | None = None) -> RolesJob:
        """``roles_job_status``: job ``job_id``'s status (``{job_id, run_id, status, elapsed_s, result?, error?,
        runner?}``), or ``{jobs: [...]}`` (the recent jobs) without an id. Raises :class:`RolesError` for an unknown
        id."""
        if job_id is None:
            return {"jobs": [dict(j) for j in self.jobs.list()]}  # the open objects of the wire schema
        st = self.jobs.status(job_id)
        if st is None:
            raise RolesError(f"unknown job id {job_id!r}: roles_run returns job ids; roles_job_status() lists them")
        return st

    async def _submit(
        self, role: str, schema: str, payload: JSONValue, run_id: str, errors: list[str] | None = None
    ) -> SubmitResult:
        errors = validate(schema, payload) if errors is None else errors
        engine = await anyio.to_thread.run_sync(lambda: self.engine)
        if errors:
            await anyio.to_thread.run_sync(
                lambda: save_submission(engine, run_id=run_id, role=schema, payload=payload, errors=errors)
            )
            raise RolesError(
                f"the {schema} is not valid ({len(errors)} error(s)); fix and submit again:\n- " + "\n- ".join(errors)
            )
        with Step(engine, run_id, role, {"submitted_by": "host model", "schema": schema}) as st:
            st.result = {**payload, "by": "host"} if isinstance(payload, dict) else payload  # valid: an object
        sid = await anyio.to_thread.run_sync(
            lambda: save_submission(
                engine, run_id=run_id, role=schema, payload=payload, errors=[], trace_event_id=st.id
            )
        )
        return {"stored": True, "submission_id": sid, "run_id": run_id, "event_id": st.id}

    async def submit_route(self, route: JSONValue, *, run_id: str) -> SubmitResult:
        """``roles_submit_route``: check a host model's route against its schema and store it (a ``router`` step of
        ``run_id``). Raises :class:`RolesError` listing what to fix (the invalid submission is stored too)."""
        return await self._submit("router", "route", route, run_id)

    async def submit_plan(self, plan: JSONValue, *, tools: ToolPort, run_id: str) -> SubmitResult:
        """``roles_submit_plan``: check a host model's plan against its schema and the live tools of ``tools``, and
        store it. Raises :class:`RolesError` listing what to fix."""
        errors = validate("plan", plan)
        if not errors:
            errors = core_planner.validate_plan(
                plan, await capabilities(tools), self.settings.max_plan_steps, await proposable(tools)
            )
        return await self._submit("planner", "plan", plan, run_id, errors)

    async def submit_critique(self, critique: JSONValue, *, run_id: str) -> CritiqueSubmitResult:
        """``roles_submit_critique``: check and store a host model's critiques; the verdict follows the configured
        severity thresholds. Raises :class:`RolesError` listing what to fix."""
        out = await self._submit("evaluator", "critique", critique, run_id)
        if not core_evaluator.is_critique_report(critique):  # not reached: _submit raised for an invalid one
            raise RolesError("the critique is not valid against its schema; fix and submit again")
        s = self.settings
        summ = core_evaluator.summarize(critique["critiques"], s.max_mean_severity, s.max_severity)
        return cast(
            CritiqueSubmitResult,
            {
                **out,
                **{k: v for k, v in summ.items() if k != "critiques"},
                "content_judged": True,
                "verdict": core_evaluator.verdict(summ["passed"], True),
            },
        )

    async def router_prompt(self, task: str) -> str:
        """The Router's instructions for the host's model, with the top search hits as context."""
        hits = await anyio.to_thread.run_sync(self.search_hits, task)
        text, _v = core_prompts.render("router", core_router.prompt_values(task, hits, None), self.settings.prompt_dir)
        return text + HOST_SUFFIX.format(tool="roles_submit_route", arg="route")

    async def planner_prompt(
        self, task: str, *, tools: ToolPort, route: str | None = None, feedback: str | None = None
    ) -> str:
        """The Planner's instructions for the host's model, with the live tools of ``tools``; ``route``: the router
        JSON (text), ``feedback``: critiques of a previous attempt (text)."""
        caps = await capabilities(tools)
        s = self.settings
        try:
            route_obj = json.loads(route) if route else None
        except ValueError:
            route_obj = {"note": route}
        fb = [{"aspect": "feedback", "severity": 1, "text": feedback}] if feedback else None
        text, _v = core_prompts.render(
            "planner", core_planner.prompt_values(task, route_obj, caps, s.max_plan_steps, fb), s.prompt_dir
        )
        return text + HOST_SUFFIX.format(tool="roles_submit_plan", arg="plan")

    async def evaluator_prompt(self, task: str, answer: str, of_run: str | None = None) -> str:
        """The Evaluator's instructions for the host's model, with the trace of run ``of_run`` (when given)."""
        events = await anyio.to_thread.run_sync(run_events, self.engine, of_run) if of_run else []
        values = {
            "task": task,
            "answer": answer,
            "evidence": core_evaluator.evidence_summary(events),
            "gates": "(run roles_evaluate for the automatic gates)",
            "schema": load_schema("critique"),
        }
        text, _v = core_prompts.render("evaluator", values, self.settings.prompt_dir)
        return text + HOST_SUFFIX.format(tool="roles_submit_critique", arg="critique")
