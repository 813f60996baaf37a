"""The ``aisac`` command: index, search, serve, status, config, owner, ...

Human output (tables, progress bars) goes to stderr except for the result a command exists to print
(``search`` hits, ``status``), which goes to stdout; ``aisac serve`` over stdio writes only JSON-RPC to
stdout. While the store's owner process runs, ``index``, ``search``, ``status`` and ``ask`` send their work to it
(:mod:`aisac_servers.cli.owner`); an invalid setting is one ``error:`` line per value and exit code 2.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from aisac_core.context import AppContext
from aisac_core.errors import AisacError
from aisac_core.owner import (
    SUPPORTED,
    OwnerError,
    OwnerSettingsDriftError,
    claim_store,
    ensure_owner,
    live_owner,
    read_owner_file,
    stop_owner,
)
from aisac_core.security import DashboardGuard, is_loopback, new_token
from aisac_core.tool_profiles import ToolProfileError, check_value, resolve

from .common import DataDir, NoOwner, _app, _core, _fail, _owner, _settings, err, out
from .corpus import index, search, verify
from .owner import config_app, status_via_owner
from .safe import safe_print
from .store import store_app

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from aisac_core.settings import Settings

# Each command imports the domain it runs (and fastmcp) in its body: `aisac --help` and the stdio proxy of
# `aisac serve` start without loading the store, the models or the MCP servers they do not use.

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="aisac: MCP servers for transparent, retrieval-grounded scientific assistance.",
)

app.command()(index)
app.command()(search)
app.command()(verify)
app.add_typer(config_app, name="config")
app.add_typer(store_app, name="store")


def http_host_config(host: str, port: int, token: str) -> str:
    """The lines ``aisac serve --transport http`` prints when it generated its bearer token: the token, and an MCP
    host configuration entry (``url`` + ``headers``, the form Claude Code, Cursor and VS Code read) that uses it."""
    shown = f"[{host}]" if ":" in host else host
    entry = {
        "aisac": {"type": "http", "url": f"http://{shown}:{port}/mcp", "headers": {"Authorization": f"Bearer {token}"}}
    }
    return (
        f"aisac: every request needs the header 'Authorization: Bearer {token}' (generated for this run; set "
        "AISAC_HTTP_TOKEN to choose it, or pass --no-token on a loopback address to serve without one). "
        f"Host configuration:\n{json.dumps({'mcpServers': entry}, indent=1)}"
    )


@app.command()
def serve(
    server: Annotated[
        str | None, typer.Argument(help="one server (rag, memory, ...); default: the whole suite")
    ] = None,
    transport: Annotated[str, typer.Option(help="stdio (default) or http (streamable HTTP)")] = "stdio",
    host: Annotated[
        str,
        typer.Option(
            help="HTTP bind address; every HTTP server requires the bearer token "
            "(AISAC_HTTP_TOKEN, else one is generated and printed), loopback included"
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port")] = 8765,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token",
            help="serve HTTP on a loopback address without a bearer token: every local account of this machine "
            "can then read and call the store (refused for other addresses)",
        ),
    ] = False,
    no_owner: Annotated[
        bool,
        typer.Option(
            "--no-owner",
            help="open the store in this process instead of sharing "
            "it through the store's owner daemon (single host only)",
        ),
    ] = False,
    data_dir: DataDir = None,
    project: Annotated[
        Path | None,
        typer.Option(
            "--project", help="a project folder with aisac.toml: its own store, tools, prompts (docs/projects.md)"
        ),
    ] = None,
    tools: Annotated[
        str | None,
        typer.Option(
            "--tools",
            help="tool profile the host sees: core (grounded Q&A, "
            "~11 tools), full (core listed, every other tool through tools_search), all "
            "(every tool listed), or server names, comma-separated "
            "(rag,memory; core,lit); default AISAC_TOOLS, else all "
            "(docs/hosts.md)",
        ),
    ] = None,
) -> None:
    """Run the MCP suite (or one server) over stdio or streamable HTTP.

    By default the store is shared: stdio processes proxy to the store's owner daemon (started on demand, see
    docs/processes.md); an HTTP server becomes the owner itself, or proxies to the running one.
    """
    # long function: the `aisac serve` command: its options and the transports they select
    from ..base.builtin import aisac_register_servers
    from ..owner.daemon import build_proxy, serve_http  # httpx, the relay: `aisac --help` needs neither

    logging.basicConfig(
        level=os.environ.get("AISAC_LOG_LEVEL", "WARNING"),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    if transport not in ("stdio", "http"):
        _fail(f"--transport must be stdio or http, got {transport!r}")
    settings = _settings(data_dir)
    _warn_missing_roots(settings)
    names = [server] if server else None
    available = dict(aisac_register_servers())
    if server and server not in available:
        _fail(f"unknown server(s) {[server]}; available: {', '.join(available)}")
    try:  # checked here (one line on error); the suite resolves it again over its real servers (plugins included)
        profile_value = check_value(tools) if tools is not None else settings.tools
        profile = resolve(profile_value, names or [*available, *(["project"] if project is not None else [])])
    except ToolProfileError as exc:
        _fail(str(exc))
    from aisac_core.store.guards import SplitStoreError, check_replica_store

    try:  # a server SQL store with vectors private to this process: refused unless opted in
        check_replica_store(settings)
    except SplitStoreError as exc:
        _fail(str(exc))
    if settings.server_store:  # a replica: settings that differ from the shared store's refuse the start itself
        _check_replica_identity(settings)
    # Windows: no flock, in-process; a store wholly on database servers has nothing to own: every process opens it
    use_owner = settings.owner.mode and not no_owner and SUPPORTED and not settings.server_store
    base_settings = settings
    if project is not None:  # check the manifest first (one line on error); the store is the project's
        from aisac_core.projects import BootstrapError, bootstrap

        try:
            settings = bootstrap(project, base_settings, open_store=False).settings
        except BootstrapError as exc:
            _fail(str(exc))
        os.environ.update(
            AISAC_PROJECT=str(Path(project).expanduser().resolve()), AISAC_MODELS_ROOT=str(settings.models_dir)
        )  # read by the store's owner daemon

    def in_process(owner: bool = False) -> FastMCP:
        """The suite served in this process; ``owner``: as the store's owner over HTTP on ``host`` (every tool for
        the relays of other hosts, each with its own profile and roots; the ``--tools`` profile for direct
        clients)."""
        if project is not None:
            from aisac_core.projects import BootstrapError

            from ..adapters.project import serve_project

            try:
                suite, _app_ctx = serve_project(project, base_settings, names, tools=profile_value)
                return suite
            except BootstrapError as exc:
                _fail(str(exc))
        # the suite loads here, not at the top: a stdio proxy to the owner daemon never needs it (~0.3 s of imports)
        from ..serving.suite import build

        if owner:
            # the hosts' own settings are honoured only on a loopback server (whose token only the user can read)
            local = host.strip("[]") in ("127.0.0.1", "localhost", "::1")
            return build(
                names, app=AppContext(settings), catalog=True, host_settings=local, served_profile=profile_value
            )
        return build(names, app=AppContext(settings), tools=profile_value)

    try:
        if transport == "stdio":
            if use_owner:
                from ..owner.catalog import has_catalog

                # with the store's answer catalogue the relay answers the host's first requests at once and finds
                # or starts the owner in the background; without it (a first start), fail fast
                if not has_catalog(settings.data_dir):
                    try:  # version mismatch, daemon cannot start; re-checked per request
                        ensure_owner(settings)
                    except OwnerSettingsDriftError as exc:  # serve anyway: each call reports it
                        err.print(f"aisac: {exc}", soft_wrap=True, markup=False)
                build_proxy(settings, names, profile).run(transport="stdio", show_banner=False)
            else:
                in_process().run(transport="stdio", show_banner=False)
            return
        token = settings.http_token
        if no_token and token is None:
            if not is_loopback(host):
                _fail(f"--no-token is for loopback addresses only; {host} is reachable from other machines")
            err.print(
                "aisac: serving HTTP without a token (--no-token): every local account of this machine can read "
                "and call this store",
                soft_wrap=True,
                markup=False,
            )
        elif token is None:
            token = new_token()
            err.print(http_host_config(host, port, token), soft_wrap=True, markup=False)
        if not use_owner:
            serve_http(settings, in_process(), host=host, port=port, token=token)
            return
        fd, info = claim_store(settings)
        if fd is not None:
            # this process owns the store; proxies of other hosts reach it with the token in owner.json
            try:
                serve_http(
                    settings, in_process(owner=True), host=host, port=port, token=token, register_fd=fd, kind="http"
                )
            finally:
                os.close(fd)
        else:
            assert info is not None
            err.print(f"aisac: the store is owned by pid {info.pid} ({info.address}); serving as a proxy to it")
            serve_http(settings, build_proxy(settings, names, profile), host=host, port=port, token=token)
    except OwnerError as exc:
        _fail(str(exc))


def _warn_missing_roots(settings: Settings) -> list[str]:
    """Say on stderr which configured roots (``AISAC_ROOTS``, ``catalog_roots``) are not existing folders (an unexpanded
    ``${workspaceFolder}``, a moved folder); returns them."""
    from aisac_core.host_roots import missing_roots

    missing = [str(p) for p in missing_roots([*settings.rag.roots, *settings.rag.catalog_roots])]
    for p in missing:
        err.print(
            f"aisac: warning: the root {p} is not an existing folder: nothing in it can be indexed or loaded; "
            "fix AISAC_ROOTS (or the host entry's --root, docs/hosts.md)",
            soft_wrap=True,
            markup=False,
        )
    return missing


def _check_replica_identity(settings: Settings) -> None:
    """Exit (one line) when this replica's settings differ from the shared store's identity
    (:meth:`AppContext.check_store`); a store that cannot be reached now is left to the first call to report."""
    from aisac_core.store.identity import StoreIdentityError

    core = AppContext(settings)
    try:
        _ = core.engine
    except StoreIdentityError as exc:
        _fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - the database may come back: each call reports it meanwhile
        logging.getLogger("aisac").warning("the store cannot be opened at start (%s); each call will say why", exc)
    finally:
        core.close()


@app.command()
def owner(
    action: Annotated[str, typer.Argument(help="status (the store's owner process) or stop")] = "status",
    data_dir: DataDir = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="status: everything as JSON (the owner's settings included)")
    ] = False,
) -> None:
    """The store's owner process (docs/processes.md): show it (a short summary; --json for all of it), or stop it
    (the store is closed cleanly)."""
    settings = _settings(data_dir)
    if action == "status":
        info = live_owner(settings.data_dir)
        stale = None if info else read_owner_file(settings.data_dir)
        if as_json:
            safe_print(
                json.dumps(
                    {
                        "running": info is not None,
                        "owner": {k: v for k, v in info.as_dict().items() if k != "token"} if info else None,
                        "stale_pid": stale.pid if stale else None,
                    },
                    indent=1,
                )
            )
            return
        for line in owner_summary(info, stale.pid if stale else None):
            safe_print(line)
    elif action == "stop":
        stopped = stop_owner(settings.data_dir)
        err.print(f"stopped the owner pid {stopped.pid}" if stopped else "no owner process is running")
    else:
        _fail(f"action must be status or stop, got {action!r}")


def owner_summary(info: Any, stale_pid: int | None) -> list[str]:
    """The lines of ``aisac owner status``: whether an owner runs, its pid, kind, version, start, where it listens,
    its last request and pending jobs (``info``: its :class:`~aisac_core.owner.OwnerInfo`, None when none runs)."""
    if info is None:
        tail = f" (owner.json names pid {stale_pid}, which has exited)" if stale_pid else ""
        return [f"no owner process is running{tail}; the next host or command starts one"]
    lines = [
        f"owner: running, {info.listening()}",
        f"kind {info.kind}, aisac {info.version}, started {info.started_at}",
    ]
    if info.last_request_at:
        ago = max(0.0, time.time() - info.last_request_at)
        pending = {True: "an index job is queued or running", False: "no index job pending"}.get(info.jobs_pending, "")
        lines.append(f"last request {ago:.0f} s ago" + (f"; {pending}" if pending else ""))
    lines.append("(aisac owner status --json prints everything, the owner's settings included)")
    return lines


def _trace_gap(settings: Settings) -> dict[str, Any]:
    """The store's trace gap (:meth:`aisac_core.trace.service.TraceService.gaps`; reads SQL only, never the vectors);
    when the SQL store cannot be read, what the local journal alone shows (:func:`aisac_core.trace.gaps.journal_gap`)
    with the reason in ``detail``."""
    core = AppContext(settings, read_only=True)
    try:
        return dict(core.trace.gaps())
    except Exception as exc:  # the status of the rest must still print
        return _journal_gap(settings, exc)
    finally:
        core.close()


def _journal_gap(settings: Settings, exc: BaseException) -> dict[str, Any]:
    """The trace gap from the local journal alone, ``exc`` (why the store could not be read) in its ``detail``."""
    from aisac_core.trace.gaps import journal_gap

    got: dict[str, Any] = dict(journal_gap(settings.data_dir))
    got["detail"] = "; ".join(x for x in (f"could not read the trace in the store: {exc}", str(got["detail"])) if x)
    return got


@app.command()
def status(
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
    no_owner: NoOwner = False,
) -> None:
    """Documents, chunks, jobs, where the store lives (and its size), and the isolation code sessions run under;
    asks the store's owner process while it runs."""
    settings = _settings(data_dir)
    info = _owner(settings, no_owner)
    core = _core(settings, read_only=True) if info is None else None
    st: Mapping[str, Any]
    try:
        if core is not None:
            st = core.rag.status()
        else:
            assert info is not None  # no core exactly when the owner runs
            st = status_via_owner(info, settings)
    except Exception as exc:
        if as_json:  # a script reading --json always gets JSON: the error and what the local journal holds
            from aisac_core.store.sql import redact_url

            down = {
                "error": str(exc),
                "data_dir": str(settings.data_dir),
                "sql_url": redact_url(settings.resolved_sql_url),
                "trace_gap": _journal_gap(settings, exc),
            }
            safe_print(json.dumps(down, indent=1))
            raise typer.Exit(1) from None
        _fail(str(exc))
    finally:
        if core is not None:
            core.close()
    from aisac_core.sessions.isolation import detect_isolation

    mode, note = detect_isolation(settings.sandbox.isolation)  # what code sessions run under on this machine
    st = {**st, "code_isolation": {"mode": mode, "note": note}, "trace_gap": _trace_gap(settings)}
    if info is not None:  # where the owner listens: its Unix socket, or loopback TCP and why
        st = {**st, "owner": info.listening()}
    st = {**st, "missing_roots": _warn_missing_roots(settings)}
    if as_json:
        safe_print(json.dumps(st, indent=1))
        return
    for line in status_summary(st, settings):
        safe_print(line)
    vc = st.get("vector_check") or {}
    if vc.get("missing_vectors") or vc.get("orphan_vectors"):
        err.print(
            f"[yellow]warning:[/yellow] the vector store does not match the manifest: {vc['missing_vectors']} "
            f"vectors missing in {vc['documents_missing_vectors']} documents, {vc['orphan_vectors']} orphan vectors; "
            "run: aisac index --repair",
            soft_wrap=True,
        )
    if st["trace_gap"].get("detail"):
        err.print(f"[yellow]warning:[/yellow] trace gap: {st['trace_gap']['detail']}", soft_wrap=True)


def _size(n: int) -> str:
    """``n`` bytes for a person: ``512 bytes``, ``1.2 MB``..."""
    size = float(n)
    for unit in ("bytes", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def status_summary(st: Mapping[str, Any], settings: Settings) -> list[str]:
    """The short human summary of ``aisac status`` (``--json`` prints every field): where the store is and its size,
    documents by status and type, chunks and vectors, stale documents, roots (and which are missing), the owner,
    code isolation, and the last jobs."""
    docs = st.get("documents") or {}
    by_status = ", ".join(f"{n} {k}" for k, n in sorted(docs.items())) or "none"
    by_type = ", ".join(f"{n} {k}" for k, n in sorted((st.get("documents_by_type") or {}).items()))
    vectors = st.get("chunks_in_vector_store")
    roots = [str(r) for r in settings.rag.roots]
    missing = set(st.get("missing_roots") or [])
    lines = [
        f"store       {st.get('data_dir')} ({_size(int(st.get('store_bytes') or 0))}; {st.get('vector_backend')} vectors)",
        f"documents   {by_status}" + (f" ({by_type})" if by_type else ""),
        f"chunks      {st.get('chunks_in_manifest', 0)} indexed"
        + ("" if vectors is None else f", {vectors} in the vector store")
        + (f"; {st['stale_documents']} stale (aisac index re-processes them)" if st.get("stale_documents") else ""),
        "roots       "
        + (", ".join(r + (" (missing)" if r in missing else "") for r in roots) if roots else "none set (AISAC_ROOTS)")
        + "; a host that declares MCP roots uses its own",
        f"trace       {st.get('trace_events', 0)} events",
        f"schema      revision {st.get('schema_revision')}",
    ]
    if st.get("owner"):
        lines.append(f"owner       {st['owner']}")
    iso = st.get("code_isolation") or {}
    if iso:
        lines.append(f"code runs   {iso.get('mode')}")
    for j in list(st.get("recent_jobs") or [])[:3]:
        lines.append(
            f"job         {j['job_id']}: {j['status']} {j['done']}/{j['total']} ({j['finished_at'] or 'running'})"
        )
    for w in st.get("permission_warnings") or []:
        lines.append(f"warning     {w}")
    lines.append("(aisac status --json prints every field)")
    return lines


@app.command()
def dashboard(
    host: Annotated[str, typer.Option(help="bind address (loopback only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port")] = 8766,
    prune_days: Annotated[
        float | None,
        typer.Option(
            "--prune-days", help="retention: export (JSON) and delete runs older than this many days, then exit"
        ),
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Live trace dashboard in the browser (runs, event trees, evidence, live updates)."""
    from aisac_core.trace.dashboard import serve as serve_dashboard

    core = _app(data_dir)
    if prune_days is not None:
        try:
            res = core.trace.prune(prune_days)
        except Exception as exc:
            _fail(str(exc))
        finally:
            core.close()
        safe_print(json.dumps(res, indent=1))
        return
    token = core.settings.http_token or new_token()
    shown = f"[{host}]" if ":" in host else host
    err.print(
        f"aisac dashboard on http://{shown}:{port}/?token={token} (store {core.settings.data_dir}); open this URL "
        "(the token is asked once, then kept in a cookie of this site); Ctrl-C stops it",
        soft_wrap=True,
        markup=False,
    )
    if SUPPORTED and (info := live_owner(core.settings.data_dir)) is not None:
        # this dashboard only reads the trace (SQLite), so it runs next to the owner, which holds the vector store
        where = f"Unix socket {info.socket}" if info.socket else info.url.rsplit("/mcp", 1)[0]
        err.print(
            f"the store's owner process (pid {info.pid}) runs; this dashboard reads the same trace. The owner's "
            f"own /dashboard (on its {where}) needs its bearer token (owner.json)",
            soft_wrap=True,
            markup=False,
        )
    try:
        serve_dashboard(host, port, core.trace, lambda asgi: DashboardGuard(asgi, token))
    except ValueError as exc:
        _fail(str(exc))
    finally:
        core.close()


@app.command()
def report(
    run_id: Annotated[str | None, typer.Argument(help="run id (default: the most recent run)")] = None,
    format: Annotated[
        str, typer.Option("--format", "-f", help="html (one offline file for a reviewer) or markdown")
    ] = "html",
    data_dir: DataDir = None,
) -> None:
    """Write a run's report (question, answer, cited evidence, evaluation, plan, timeline, steps) to
    <data dir>/trace_exports/ and print its path."""
    from aisac_core.trace.queries import RunQueries

    if format not in ("html", "markdown"):
        _fail(f"--format must be html or markdown, got {format!r}")
    core = _app(data_dir)
    try:
        rid = run_id or next((r["run_id"] for r in RunQueries(core.engine).list_runs(limit=1)["runs"]), None)
        if rid is None:
            _fail("the trace has no runs yet: run `aisac ask` or use the suite from a host first")
        out = core.trace.export(rid, format)
    except AisacError as exc:
        _fail(str(exc))
    finally:
        core.close()
    safe_print(out["path"])


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="the new project folder (created; must be empty)")],
    template: Annotated[str, typer.Option("--template", "-t", help="general, materials or process_safety")] = "general",
    name: Annotated[str | None, typer.Option(help="display name (default: the template's)")] = None,
    force: Annotated[bool, typer.Option("--force", help="write into a non-empty folder")] = False,
) -> None:
    """Create a project from a template: aisac.toml, sample data, extensions (docs/projects.md)."""
    from aisac_core.projects import BootstrapError, init_project, load_manifest

    try:
        man = init_project(directory, template, name=name, force=force)
    except BootstrapError as exc:
        _fail(str(exc))
    p = load_manifest(man)
    err.print(
        f"created project {p.manifest.project.name!r} (id {p.id}) in {p.root}; serve it with "
        f"`aisac serve --project {p.root}`, index it with the rag_index tool (no path: every manifest root)",
        soft_wrap=True,
        markup=False,
    )


#: the variable VS Code and Cursor replace by the open workspace folder in an MCP server's configuration
#: said by ``aisac install`` when no root is set anywhere
_NO_ROOTS_NOTE = (
    "aisac: no roots set for {host}: a host that declares MCP roots (VS Code) gives its own workspace folders; "
    "for any other host, rag_index without a path has nothing to index until you add the folder(s) of your papers: "
    "aisac install {host} --root /folder/of/papers"
)


@app.command()
def install(
    host: Annotated[str, typer.Argument(help="claude-desktop, vscode or cursor")],
    project: Annotated[
        Path | None, typer.Option("--project", help="serve this project (a folder with aisac.toml)")
    ] = None,
    print_: Annotated[bool, typer.Option("--print", help="print the configuration, write nothing")] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="the host's configuration file (default: where the host reads it, docs/hosts.md)"
        ),
    ] = None,
    data_dir: DataDir = None,
    tools: Annotated[
        str | None,
        typer.Option(
            "--tools",
            help="tool profile the host sees: core (grounded Q&A, "
            "smallest context), full (every tool, core listed), all, or server names, comma-separated "
            "(docs/hosts.md); asked when omitted on a terminal",
        ),
    ] = None,
    roots: Annotated[
        list[Path] | None,
        typer.Option(
            "--root",
            "--roots",
            help="a folder of papers and data the host's tools may read (repeat for several); asked when omitted on "
            "a terminal; never the current folder unless you name it (docs/hosts.md, Roots)",
        ),
    ] = None,
) -> None:
    """Add aisac to an MCP host's configuration (merged, with a backup of the old file), or print it.

    Roots are the folders the host's tools may index and load from (rag_index, data_load, lit_import); nothing
    outside them is read. A host that declares the MCP roots capability (VS Code) gives its own (its workspace
    folders) and they win; for the others (Claude Desktop, Cursor) the roots you choose here are written into the
    host's entry as AISAC_ROOTS: --root, else asked on a terminal, else the roots already set in the environment or
    the store's aisac.toml, else none (aisac then says how to add them)."""
    from aisac_core.projects import BootstrapError
    from aisac_core.projects.hosts import HostConfigError, host_env, render, server_entry
    from aisac_core.projects.hosts import install as install_host

    try:
        settings = _settings(data_dir)
        if tools is None and not print_ and sys.stdin.isatty():
            tools = typer.prompt(
                "tool profile for this host (core: grounded Q&A with the fewest tools; full: every "
                "tool, the core ones listed and the others found with tools_search; all: every "
                "tool listed; or server names such as rag,memory)",
                default=settings.tools,
            )
        if tools is not None:  # the names too, not only the form (a typo would stop the host's server at start)
            from ..base.builtin import aisac_register_servers

            resolve(tools, [*dict(aisac_register_servers()), "project"])
        env = host_env(settings)
        if not roots and not settings.rag.roots and project is None and not print_ and sys.stdin.isatty():
            answer = typer.prompt(
                "roots: the folder(s) of papers and data this host's tools may read, comma-separated (nothing "
                "outside them is read; empty: none for now, add them later with --root)",
                default="",
                show_default=False,
            )
            roots = [Path(x.strip()) for x in answer.split(",") if x.strip()]
        if roots:
            missing = [str(r) for r in roots if not r.expanduser().is_dir()]
            if missing:
                _fail(f"--root: not a folder: {', '.join(missing)}; give existing folders")
            env["AISAC_ROOTS"] = json.dumps([str(r.expanduser().resolve()) for r in roots])
        entry = server_entry(host, data_dir=settings.data_dir, project=project, env=env, tools=tools)
        if print_:
            safe_print(json.dumps(render(host, entry), indent=2, ensure_ascii=False))
            if "AISAC_ROOTS" not in env and not settings.rag.roots and project is None:
                err.print(_NO_ROOTS_NOTE.format(host=host), soft_wrap=True, markup=False)
            return
        res = install_host(host, entry, config_path=config)
    except (HostConfigError, BootstrapError, ValueError) as exc:  # ValueError: an unreadable aisac.toml
        _fail(str(exc))
    if "AISAC_ROOTS" not in env and not settings.rag.roots and project is None:
        err.print(_NO_ROOTS_NOTE.format(host=host), soft_wrap=True, markup=False)
    err.print(
        f"{'replaced' if res.replaced else 'added'} the {res.name!r} server in {res.path}"
        + (f" with roots {env['AISAC_ROOTS']}" if "AISAC_ROOTS" in env else "")
        + (f" (previous file kept as {res.backup})" if res.backup else "")
        + "; restart the host",
        soft_wrap=True,
        markup=False,
    )


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="the question")],
    mode: Annotated[str | None, typer.Option(help="lite, standard or strict (minimum cited anchors 1/2/3)")] = None,
    llm: Annotated[str | None, typer.Option(help="auto, none, openai or replay (default: AISAC_ROLES_LLM)")] = None,
    session: Annotated[str | None, typer.Option("--session", help="memory session id for context")] = None,
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the whole result as JSON")] = False,
    project: Annotated[
        Path | None,
        typer.Option(
            "--project", help="a project folder with aisac.toml: its store, tools, prompts and workflow graph"
        ),
    ] = None,
    no_owner: NoOwner = False,
) -> None:
    """Answer a question headless: route, plan, execute with the suite's tools, evaluate, re-plan (in the store's
    owner process while it runs)."""
    from .ask import ask as run_ask

    if project is not None:
        from aisac_core.projects import BootstrapError, bootstrap

        try:
            b = bootstrap(project, _settings(data_dir))
        except BootstrapError as exc:
            _fail(str(exc))
        core = AppContext(b.settings, project=b)
    else:
        core = _app(data_dir)
    try:
        code = run_ask(
            core,
            question,
            mode=mode,
            llm=llm,
            session_id=session,
            as_json=as_json,
            out=out,
            err=err,
            use_owner=not no_owner,
        )
    except Exception as exc:  # roles errors carry what to fix
        _fail(str(exc))
    finally:
        core.close()
    if code:
        raise typer.Exit(code)


def _flow_help(*apps: typer.Typer) -> None:
    """Give each command of ``apps`` its docstring as help with the source's line breaks inside a paragraph
    joined (rich keeps them, which left wide gaps in ``aisac --help``); paragraphs stay apart."""
    import inspect
    import re

    for a in apps:
        for cmd in a.registered_commands:
            doc = cmd.help or (inspect.getdoc(cmd.callback) if cmd.callback is not None else None)
            if doc:
                cmd.help = re.sub(r"(?<!\n)\n(?!\n)", " ", doc)


_flow_help(app, config_app, store_app)


def main() -> None:  # pragma: no cover
    """Entry point of the ``aisac`` console script and ``python -m aisac_servers.cli``."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
