"""The aisac demo (`make demo`): index a small corpus, then use it through a real MCP client over stdio.

Steps:
  1. generate the example PDF (examples/make_pdf.py -> examples/generated/);
  2. index examples/ (four Markdown notes + the PDF) and ../shared/data/pdfs when that folder exists,
     with `aisac index` (progress on stderr; unchanged files are skipped, so a second run is quick);
  3. start `aisac serve` as a stdio subprocess (it starts the store's owner daemon and proxies to it,
     docs/processes.md) and drive it with fastmcp's Client: list the tools, list the documents, run three
     searches (hits with their evidence anchors, each anchor checked against the file and the chunk text),
     read one document resource, show a paper's structure (rag_get_overview), answer a question with the
     whole Router -> Planner -> Coordinator -> Evaluator graph (roles_run, no model needed), and check
     that answer's provenance (trace_verify, trace_export markdown);
  4. stop the owner daemon (`aisac owner stop`), then print the trace rows the calls wrote
     (aisac_core.trace.recorder) and the store status (`aisac status`, which also proves the store was released).

Store: `.aisac-demo/` in the repository root, or $AISAC_DATA_DIR when set. Exit status 0 only when every
step worked; any failure prints what went wrong and exits 1.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHARED_PDFS = (ROOT / ".." / "shared" / "data" / "pdfs").resolve()
sys.path[:0] = [str(ROOT), str(EXAMPLES)]

import make_pdf  # noqa: E402  (examples/make_pdf.py)

from aisac_core.store.files import secure_data_dir  # noqa: E402

_interactive = sys.stdout.isatty()
console = Console(width=None if _interactive else 140, highlight=False)

#: the notes every run must find (file name of the note that answers each example question)
EXAMPLE_NOTES = (
    "packed_bed_heat_transfer.md",
    "nmc811_cathode_degradation.md",
    "methane_flame_speed.md",
    "beta_galactosidase_kinetics.md",
    make_pdf.FILENAME,
)


class DemoError(RuntimeError):
    """A demo step failed; the message says which and why."""


def data_dir() -> Path:
    env = os.environ.get("AISAC_DATA_DIR")
    return Path(env).expanduser().resolve() if env else ROOT / ".aisac-demo"


def aisac_command() -> list[str]:
    """The `aisac` console script next to this interpreter (.venv/bin/aisac), else `python -m aisac_servers.cli`."""
    exe = Path(sys.executable).parent / "aisac"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "aisac_servers.cli"]


def child_env(ddir: Path) -> dict[str, str]:
    return {**os.environ, **demo_settings(ddir)}


def demo_settings(ddir: Path) -> dict[str, str]:
    """The demo's store, offline: no model download, and literature answered from its cache only (replay mode),
    so a question the planner routes to lit_search does not wait on the network."""
    return {
        "AISAC_DATA_DIR": str(ddir),
        "HF_HUB_OFFLINE": "1",
        "AISAC_LIT_REPLAY": os.environ.get("AISAC_LIT_REPLAY", "1"),
    }


def step(title: str) -> None:
    console.print()
    console.rule(f"[bold]{title}")


def short(text: str | None, n: int) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= n else t[: n - 1] + "…"


# ------------------------------------------------------------------------------------------------
# 1-2: generate the PDF, index
# ------------------------------------------------------------------------------------------------


def generate_pdf() -> Path:
    path, written = make_pdf.build_pdf()
    console.print(
        f"{'generated' if written else 'unchanged'}: {path.relative_to(ROOT)} ({path.stat().st_size:,} bytes, 2 pages)"
    )
    return path


def index(ddir: Path) -> dict[str, Any]:
    targets = [EXAMPLES]
    if SHARED_PDFS.is_dir():
        targets.append(SHARED_PDFS)
        console.print(f"indexing {EXAMPLES.relative_to(ROOT)}/ and {SHARED_PDFS} (progress on stderr)")
    else:
        console.print(f"indexing {EXAMPLES.relative_to(ROOT)}/ (progress on stderr)")
        console.print(f"[yellow]skipped[/yellow] {SHARED_PDFS}: folder not found (the shared papers are optional)")
    cmd = aisac_command() + ["index", *map(str, targets), "--json"]
    # stderr: a progress bar on a terminal, plain "indexing: n/N files" lines otherwise (make demo | tee, CI)
    proc = subprocess.run(cmd, env=child_env(ddir), stdout=subprocess.PIPE, text=True)
    # exit 1: some files failed (listed below from the JSON report); anything else is the run's own failure
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise DemoError(f"`aisac index` exited with status {proc.returncode}")
    report = json.loads(proc.stdout)
    c = report["counters"]
    t = Table(title="indexing run", show_header=True)
    for col in (
        "files seen",
        "indexed",
        "unchanged",
        "failed",
        "removed",
        "catalogued",
        "pages parsed",
        "chunks embedded",
        "parse s",
        "embed s",
    ):
        t.add_column(col, justify="right")
    t.add_row(
        *map(
            str,
            (
                c["files_seen"],
                c["files_indexed"],
                c["files_skipped"],
                c["files_failed"],
                c["files_pruned"],
                c["files_catalogued"],
                c["pages_parsed"],
                c["chunks_embedded"],
                c["parse_seconds"],
                c["embed_seconds"],
            ),
        )
    )
    console.print(t)
    bad = []
    for f in report["failures"]:
        mine = Path(f["path"]).resolve().is_relative_to(EXAMPLES)
        console.print(f"[{'red' if mine else 'yellow'}]not indexed[/] {escape(f['path'])}: {escape(f['error'])}")
        if mine:
            bad.append(f["path"])
    if bad:
        raise DemoError(f"example files failed to index: {bad}")
    return report


# ------------------------------------------------------------------------------------------------
# 3: the MCP session
# ------------------------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_anchor(hit: dict[str, Any], file_hashes: dict[str, str]) -> bool:
    """An anchor holds when the file still has the recorded sha256 and the chunk text the chunk sha256."""
    a = hit["anchor"]
    p = Path(a["path"])
    if a["path"] not in file_hashes:
        file_hashes[a["path"]] = sha256_file(p) if p.exists() else ""
    return (
        file_hashes[a["path"]] == a["sha256"]
        and hashlib.sha256(hit["text"].encode("utf-8")).hexdigest() == a["chunk_sha256"]
    )


def hits_table(title: str, hits: list[dict[str, Any]], file_hashes: dict[str, str]) -> tuple[Table, bool]:
    """One row per hit: where it is (document, doc_id, page, section), its anchor (char span, file and chunk
    sha256 prefixes, and whether both hashes still hold), and its text."""
    t = Table(title=escape(title), show_lines=True, title_justify="left")
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("score", justify="right", no_wrap=True)
    t.add_column("document · page · section", overflow="fold", max_width=32)
    t.add_column("anchor", no_wrap=True)
    t.add_column("text", overflow="fold", ratio=1, min_width=30)
    all_ok = True
    for i, h in enumerate(hits, 1):
        a = h["anchor"]
        ok = check_anchor(h, file_hashes)
        all_ok &= ok
        section = (h.get("section") or "-").split(" > ")[-1]
        page = "-" if a["page"] is None else str(a["page"])
        if h.get("page_end") not in (None, a["page"]):
            page += f"–{h['page_end']}"
        where = (
            f"{escape(Path(a['path']).name)}\n[dim]doc {a['doc_id']}[/dim]\n"
            f"p. {page} · {escape(short(section, 28))} [dim]({h.get('section_covers')})[/dim]"
        )
        anchor = (
            f"chars {a['char_span'][0]}–{a['char_span'][1]}\nfile  {a['sha256'][:12]}\n"
            f"chunk {a['chunk_sha256'][:12]} " + ("[green]✓[/green]" if ok else "[red]✗[/red]")
        )
        t.add_row(str(i), f"{a['score']:.4f}", where, anchor, escape(short(h["text"], 300)))
    return t, all_ok


async def mcp_session(ddir: Path, run_id: str, log_path: Path) -> dict[str, Any]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    cmd = aisac_command()
    # the server sees the same AISAC_* settings as the indexer, on the demo store, offline
    env = {**{k: v for k, v in os.environ.items() if k.startswith("AISAC_")}, **demo_settings(ddir)}
    meta = {"run_id": run_id}  # aisac's run id travels in the request _meta (or as a run_id argument)
    shared = SHARED_PDFS.is_dir()
    searches: list[tuple[str, dict[str, Any] | None, str | None]] = [
        (
            "What wall heat transfer coefficient was measured in the packed bed, and how did it change with flow?",
            None,
            "packed_bed_heat_transfer.md",
        ),
        (
            "Why does the corrosion rate of carbon steel fall at 80 °C?",
            {"path_glob": "*/examples/*"},
            make_pdf.FILENAME,
        ),
        ("What does the PaperMage toolkit provide for processing scientific documents?", None, "papermage.pdf")
        if shared
        else (
            "How does galactose inhibit beta-galactosidase?",
            {"section": ["results", "discussion"]},
            "beta_galactosidase_kinetics.md",
        ),
    ]
    calls = 0
    file_hashes: dict[str, str] = {}
    summary: dict[str, Any] = {"searches": []}
    with open(log_path, "w") as log:
        transport = StdioTransport(
            command=cmd[0], args=cmd[1:] + ["serve"], env=env, cwd=str(ROOT), keep_alive=False, log_file=log
        )
        t0 = time.perf_counter()
        async with Client(transport, timeout=120) as client:
            tools = await client.list_tools()
            summary["tools_list_s"] = time.perf_counter() - t0
            tt = Table(
                title=f"{len(tools)} tools (tools/list answered {summary['tools_list_s']:.1f} s after launch)",
                title_justify="left",
            )
            tt.add_column("tool")
            tt.add_column("what it does", overflow="fold")
            for tool in tools:
                # the first paragraph as one line (descriptions wrap), inline-code marks dropped
                first = " ".join((tool.description or "").split("\n\n")[0].replace("``", "").split()).rstrip(" :;,")
                tt.add_row(tool.name, escape(short(first, 110)))
            console.print(tt)
            names = {tool.name for tool in tools}
            missing = {"rag_index", "rag_search", "rag_list_documents", "rag_job_status", "rag_get_chunk"} - names
            if missing:
                raise DemoError(f"tools missing from tools/list: {sorted(missing)}")
            templates = await client.list_resource_templates()
            console.print("resource templates: " + ", ".join(t.uri_template for t in templates))

            res = await client.call_tool("rag_list_documents", {"limit": 1000}, meta=meta)
            calls += 1
            docs = res.structured_content["documents"]
            by_status: dict[str, int] = {}
            for d in docs:
                by_status[d["status"]] = by_status.get(d["status"], 0) + 1
            console.print(
                f"rag_list_documents: {len(docs)} documents "
                f"({', '.join(f'{n} {s}' for s, n in sorted(by_status.items()))})"
            )
            indexed_names = {Path(d["path"]).name for d in docs if d["status"] == "indexed"}
            if not set(EXAMPLE_NOTES) <= indexed_names:
                raise DemoError(f"example notes not indexed: {sorted(set(EXAMPLE_NOTES) - indexed_names)}")

            first_doc: str | None = None
            for query, filters, expect in searches:
                args: dict[str, Any] = {"query": query, "k": 4, "detail": "full"}  # the demo checks full anchors
                if filters:
                    args["filters"] = filters
                res = await client.call_tool("rag_search", args, meta=meta)
                calls += 1
                r = res.structured_content
                hits = r["hits"]
                title = (
                    f"rag_search {query!r}"
                    + (f"  filters={json.dumps(filters)}" if filters else "")
                    + f"  → {r['count']} hits, {r['mode']}, {r['took_ms']:.0f} ms"
                )
                if not hits:
                    raise DemoError(f"no hits for {query!r}: {r.get('message')}")
                table, ok = hits_table(title, hits, file_hashes)
                console.print(table)
                if not ok:
                    raise DemoError(f"an evidence anchor of {query!r} does not match its file or chunk text")
                top = Path(hits[0]["path"]).name
                if expect and expect not in {Path(h["path"]).name for h in hits}:
                    raise DemoError(f"expected {expect} among the hits for {query!r}; the best hit was {top}")
                summary["searches"].append(
                    {"query": query, "top": top, "score": hits[0]["score"], "took_ms": r["took_ms"]}
                )
                first_doc = first_doc or hits[0]["doc_id"]

            uri = f"aisac://rag/documents/{first_doc}"
            contents = await client.read_resource(uri)
            text = getattr(contents[0], "text", "") if contents else ""
            if not text.strip():
                raise DemoError(f"resource {uri} is empty")
            lines = text.splitlines()
            console.print(
                Panel(
                    Text("\n".join(lines[:14]) + f"\n… ({len(lines)} lines, {len(text):,} characters)"),
                    title=f"resource {uri} (first lines)",
                    title_align="left",
                    expand=False,
                )
            )

            pdf_doc = next(d for d in docs if d["status"] == "indexed" and Path(d["path"]).name == make_pdf.FILENAME)
            res = await client.call_tool("rag_get_overview", {"doc_id": pdf_doc["doc_id"]}, meta=meta)
            calls += 1
            ov = res.structured_content
            console.print(
                Panel(
                    Text(
                        f"title: {ov.get('title')}\n"
                        + "\n".join(
                            f"  {s_['label']:<13} {short(s_['title'], 50):<52} pages {s_['page_start']}–{s_['page_end']}, "
                            f"{s_['chunk_count']} chunks"
                            for s_ in ov.get("sections", [])
                        )
                    ),
                    title=f"rag_get_overview {make_pdf.FILENAME}",
                    title_align="left",
                    expand=False,
                )
            )

            question = (
                "Which datasets does the S2ORC paper describe?"
                if shared
                else "What wall heat transfer coefficient was measured in the packed bed?"
            )
            res = await client.call_tool("roles_run", {"task": question, "mode": "lite"}, meta=meta)
            calls += 1
            run = res.structured_content
            if run.get("status") != "done":
                raise DemoError(f"roles_run did not finish: {run}")
            answer, ev = run["answer"], run["evaluation"]
            cites = "\n".join(
                f"  [{c['n']}] {Path(str(c.get('path'))).name} p. {c.get('page')} ({c.get('section') or '-'}), "
                f"chunk sha256 {str(c['anchor'].get('chunk_sha256'))[:12]}"
                if c.get("kind") == "rag"
                else f"  [{c['n']}] {c.get('title')} ({c.get('ref')})"
                for c in answer.get("citations") or []
            )
            console.print(
                Panel(
                    Text(
                        f"route: {run['route'].get('intent')} / {run['route'].get('decision')}; "
                        f"plan: {len(run['plan'].get('steps', []))} steps; "
                        f"evaluator: {'pass' if ev.get('passed') else 'FAIL'} "
                        f"(mean severity {ev.get('mean_severity')}, max {ev.get('max_severity')})\n\n"
                        f"{short(answer.get('text'), 700)}\n\ncitations:\n{cites}"
                    ),
                    title=f"roles_run {question!r}  (run {run['run_id']})",
                    title_align="left",
                )
            )
            if not answer.get("citations"):
                raise DemoError(f"the answer to {question!r} cites no evidence")
            res = await client.call_tool("trace_verify", {"run_id": run["run_id"]}, meta=meta)
            calls += 1
            ver = res.structured_content
            res = await client.call_tool("trace_export", {"run_id": run["run_id"], "format": "markdown"}, meta=meta)
            calls += 1
            console.print(
                f"trace_verify {run['run_id']}: {ver['status']} ({ver.get('counts')}); "
                f"trace_export markdown: {res.structured_content['path']}"
            )
            if ver["status"] != "unchanged":
                raise DemoError(f"the answer's evidence does not verify: {ver}")
            summary["answer_run"] = run["run_id"]
    summary["calls"] = calls
    summary["session_s"] = time.perf_counter() - t0
    return summary


# ------------------------------------------------------------------------------------------------
# 4: provenance and status, after the server has exited
# ------------------------------------------------------------------------------------------------


def print_trace(ddir: Path, run_id: str, expected_calls: int) -> None:
    from aisac_core.context import AppContext
    from aisac_core.settings import Settings
    from aisac_core.trace.recorder import list_events

    core = AppContext(Settings(data_dir=ddir))
    try:
        events = list(reversed(list_events(core.engine, run_id=run_id, limit=100)))
    finally:
        core.close()
    t = Table(title=f"trace events of run {run_id} (aisac_core.trace.recorder.list_events)", title_justify="left")
    for col in ("id", "tool", "status", "latency ms", "arguments", "arguments sha256", "result sha256", "anchors"):
        t.add_column(col, overflow="fold")
    for e in events:
        args = json.dumps(e["arguments"], ensure_ascii=False)
        t.add_row(
            str(e["id"]),
            e["tool"],
            e["status"],
            f"{e['latency_ms']:.0f}",
            escape(short(args, 60)),
            e["arguments_sha256"][:12],
            (e["result_sha256"] or "-")[:12],
            str(len(e["anchor_ids"])),
        )
    console.print(t)
    if len(events) != expected_calls:
        raise DemoError(f"expected {expected_calls} trace events for run {run_id}, found {len(events)}")
    bad = [e for e in events if e["status"] != "ok"]
    if bad:
        raise DemoError(f"trace events not ok: {[(e['tool'], e['status'], e['error']) for e in bad]}")


def print_status(ddir: Path) -> dict[str, Any]:
    proc = subprocess.run(
        aisac_command() + ["status", "--json"], env=child_env(ddir), stdout=subprocess.PIPE, text=True
    )
    if proc.returncode != 0:
        raise DemoError(f"`aisac status` exited with status {proc.returncode} (is the store still locked?)")
    st = json.loads(proc.stdout)
    console.print(
        f"store {st['data_dir']}: documents {st['documents']}, chunks {st['chunks_in_vector_store']} "
        f"(manifest {st['chunks_in_manifest']}), catalogued {st['catalogued_files']}, trace events "
        f"{st['trace_events']}, {st['store_bytes'] / 1e6:.1f} MB"
    )
    if st["chunks_in_vector_store"] != st["chunks_in_manifest"]:
        raise DemoError("vector store and manifest disagree on the number of chunks")
    return st


def main() -> int:
    t_start = time.perf_counter()
    ddir = data_dir()
    secure_data_dir(ddir)  # created private (0700), as aisac creates every store
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    console.print(Panel.fit(f"[bold]aisac demo[/bold]\nstore: {ddir}\naisac: {' '.join(aisac_command())}"))
    times: dict[str, float] = {}
    run_id = "demo-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    log_path = ddir / "demo-serve.log"
    try:
        step("1. example PDF")
        t = time.perf_counter()
        generate_pdf()
        times["pdf"] = time.perf_counter() - t

        step("2. index (aisac index)")
        t = time.perf_counter()
        report = index(ddir)
        times["index"] = time.perf_counter() - t

        step("3. MCP session: aisac serve over stdio, driven by fastmcp.Client")
        t = time.perf_counter()
        summary = asyncio.run(mcp_session(ddir, run_id, log_path))
        times["mcp"] = time.perf_counter() - t

        step("4. provenance and status (after the server exited and its owner daemon stopped)")
        t = time.perf_counter()
        subprocess.run(aisac_command() + ["owner", "stop"], env=child_env(ddir), check=False, stdout=subprocess.DEVNULL)
        print_trace(ddir, run_id, summary["calls"])
        print_status(ddir)
        times["trace+status"] = time.perf_counter() - t
    except DemoError as exc:
        console.print(f"\n[red bold]demo failed:[/red bold] {escape(str(exc))}")
        return 1
    except Exception as exc:  # anything unexpected: say what, point at the server log, fail
        console.print_exception(max_frames=8)
        if log_path.exists() and log_path.stat().st_size:
            tail = log_path.read_text(errors="replace").splitlines()[-20:]
            console.print(Panel(Text("\n".join(tail)), title=f"last lines of {log_path}", title_align="left"))
        console.print(
            f"\n[red bold]demo failed:[/red bold] {type(exc).__name__}: {escape(str(exc))}\n"
            f"server log (stderr of aisac serve): {log_path}"
        )
        return 1
    total = time.perf_counter() - t_start
    c = report["counters"]
    console.print()
    console.rule("[bold green]demo ok")
    console.print(
        f"indexed {c['files_indexed']}, unchanged {c['files_skipped']}, failed {c['files_failed']} "
        f"(of {c['files_seen']} documents); {summary['calls']} tool calls traced under run {run_id}"
    )
    console.print("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()) + f"; total {total:.1f} s")
    console.print(f"server log: {log_path.relative_to(ROOT) if log_path.is_relative_to(ROOT) else log_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
