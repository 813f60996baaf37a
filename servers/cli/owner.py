"""The CLI's side of the owner model and of the store's settings: building :class:`Settings` with one-line errors,
talking to the store's running owner process (``aisac index``, ``search``, ``status``), and ``aisac config``.

While an owner process serves a store (docs/processes.md) it holds the store's locks, so a CLI command sends its
work to that process over HTTP (the URL and bearer token of ``owner.json``) instead of opening the store; the
results have the same shape as the in-process ones. With no owner (or ``--no-owner`` / ``AISAC_OWNER_MODE=0``)
the command opens the store itself.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError

from aisac_core.context import AppContext
from aisac_core.errors import AisacError
from aisac_core.owner import SUPPORTED, OwnerInfo, aisac_version, live_owner, settings_drift
from aisac_core.settings import Settings, plain_value, read_settings_file, setting_sources, write_settings_file
from aisac_core.settings_messages import settings_errors

from .safe import safe_print

if TYPE_CHECKING:
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport


class OwnerCallError(AisacError):
    """The store's owner process answered a CLI request with an error (its message says what to fix)."""


def fail_lines(lines: list[str], code: int = 2) -> None:
    """Print each line as ``error: <line>`` on stderr (plain text, never wrapped) and exit with ``code``."""
    for line in lines:
        safe_print(f"error: {line}", file=sys.stderr)
    raise typer.Exit(code)


def load_settings(data_dir: Path | None = None, **kwargs: Any) -> Settings:
    """The settings of the command (``--data-dir`` over the environment over ``aisac.toml``). An invalid setting
    prints one line per bad value (variable, value, accepted form) and exits with code 2 (``typer.Exit``)."""
    try:
        return Settings(data_dir=data_dir, **kwargs) if data_dir else Settings(**kwargs)
    except ValidationError as exc:
        fail_lines(settings_errors(exc))
    except SettingsError as exc:  # a value pydantic-settings could not decode
        fail_lines([str(exc)])
    raise AssertionError("unreachable")  # pragma: no cover


def cli_owner(
    settings: Settings, no_owner: bool = False, warn: Callable[[str], None] | None = None
) -> OwnerInfo | None:
    """The running owner a CLI command should talk to, or None to open the store in this process (no owner runs,
    ``no_owner``, ``AISAC_OWNER_MODE=0``, or a platform without the owner model).

    Never starts an owner. When the owner's behaviour settings differ from the command's, ``warn`` gets one line
    naming the differences (the owner's settings apply). Raises OwnerCallError when the owner is another aisac
    version (the message says what to do)."""
    if no_owner or not settings.owner.mode or not SUPPORTED:
        return None
    info = live_owner(settings.data_dir)
    if info is None:
        return None
    if info.version != aisac_version():
        raise OwnerCallError(
            f"the store {settings.data_dir} is served by an aisac {info.version} process (pid "
            f"{info.pid}), this is aisac {aisac_version()}: run this command with that version, or "
            f"once its hosts are done `aisac owner stop --data-dir {settings.data_dir}` and retry"
        )
    drift = settings_drift(info, settings)
    if drift and warn is not None:
        warn(
            f"the store's owner process (pid {info.pid}) runs with other settings than this command, and its "
            "settings apply: "
            + "; ".join(f"{k}: owner {json.dumps(a)} vs here {json.dumps(b)}" for k, (a, b) in drift.items())
        )
    return info


def _client(
    info: OwnerInfo, timeout: float = 3600, host: dict[str, Any] | None = None
) -> Client[StreamableHttpTransport]:
    """A client of the owner; ``host``: this command's per-host settings (roots...), applied by the owner to its
    requests (:func:`aisac_core.settings.host_settings`)."""
    # fastmcp loads here, only for a command sent to the owner (~0.6 s of imports): `aisac --help` and the stdio
    # proxy never need it
    from fastmcp import Client

    from ..base.proxying import HOST_HEADER, owner_mcp_transport

    headers = {HOST_HEADER: json.dumps(host, separators=(",", ":"))} if host is not None else None
    return Client(owner_mcp_transport(info, headers), timeout=timeout)


async def _call(c: Any, tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    from fastmcp.exceptions import ToolError  # loaded with the client (above)

    try:
        res = await c.call_tool(tool, args, **kw)
    except ToolError as exc:
        raise OwnerCallError(str(exc)) from exc
    return res.structured_content or {}


def index_via_owner(
    info: OwnerInfo,
    paths: list[Path],
    catalog_only: bool,
    progress: Callable[[float, float | None, str | None], None],
    host: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``rag_index`` of ``paths`` (made absolute here: the owner has another working folder) on the owner, with
    ``wait=true``; every MCP progress notification goes to ``progress(done, total, message)``; a job still running
    after the tool's wait is polled with ``rag_job_status`` until it ends. Returns ``{"counters", "failures"}`` like
    the in-process run. Raises OwnerCallError with the owner's message (a missing path, a path outside the roots)."""

    async def run() -> dict[str, Any]:
        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress(done, total, message)

        async with _client(info, host=host) as c:
            st = await _call(
                c,
                "rag_index",
                {
                    "path": [str(p.expanduser().resolve()) for p in paths],
                    "catalog_only": catalog_only,
                    "wait": True,
                    "timeout_s": 3600,
                },
                progress_handler=on_progress,
            )
            while st.get("status") in ("queued", "running"):
                await anyio.sleep(1.0)
                st = await _call(c, "rag_job_status", {"job_id": st["job_id"]})
                progress(st.get("done") or 0, st.get("total") or None, st.get("message"))
            if st.get("status") == "failed":
                raise OwnerCallError(st.get("message") or f"index job {st.get('job_id')} failed")
            return {"counters": st.get("counters") or {}, "failures": st.get("failures") or []}

    return anyio.run(run)


def search_via_owner(info: OwnerInfo, query: str, k: int, filters: dict[str, Any] | None, mode: str) -> dict[str, Any]:
    """``rag_search`` on the owner: the same dict as :meth:`aisac_core.rag.search.SearchResult.as_dict`. Raises
    OwnerCallError with the owner's message (bad filter, empty query)."""

    async def run() -> dict[str, Any]:
        async with _client(info, 300) as c:
            return await _call(
                c, "rag_search", {"query": query, "k": k, "filters": filters, "mode": mode, "detail": "full"}
            )

    return anyio.run(run)


def verify_via_owner(info: OwnerInfo, anchor: str | dict[str, Any]) -> dict[str, Any]:
    """``rag_verify_anchor`` on the owner (the same dict as :meth:`aisac_core.rag.service.RagService.verify_anchor`).
    Raises OwnerCallError with the owner's message."""

    async def run() -> dict[str, Any]:
        async with _client(info, 300) as c:
            return await _call(c, "rag_verify_anchor", {"anchor": anchor})

    return anyio.run(run)


class _OwnerJobs:
    """Stands in for :class:`~aisac_core.rag.jobs.JobManager` in :meth:`~aisac_core.rag.status.StoreHealth.status`:
    the jobs as the owner lists them (the owner's answer, without opening a second job manager in this process)."""

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self.jobs = jobs

    def list(self, limit: int = 20) -> list[dict[str, Any]]:
        return self.jobs[:limit]


class _OwnerVectors:
    """Stands in for the vector store (locked by the owner) in the store's status: the owner's chunk count."""

    def __init__(self, count: int | None) -> None:
        self.n = count

    def count(self, _name: str) -> int | None:
        return self.n


def _owner_status(core: Any, jobs: list[dict[str, Any]], count: int | None) -> dict[str, Any]:
    """:meth:`~aisac_core.rag.status.StoreHealth.status` over a store the owner holds: the SQL store and the embedder
    id of this process (SQLite in WAL mode has many readers), the vector count and the index jobs from the owner;
    ``vector_check`` reads no point id (the owner holds the vector store): ``checked_chunks`` is 0."""
    from aisac_core.rag.results import VectorCheck
    from aisac_core.rag.status import StoreHealth  # the rag modules load here: `aisac --help` stays fast
    from aisac_core.rag.vectorcheck import VectorAudit

    class OwnerStatus(StoreHealth, VectorAudit):
        def __init__(self) -> None:
            self.settings, self.engine, self.embedder = core.settings, core.engine, core.embedder

        @property
        def jobs(self) -> _OwnerJobs:  # type: ignore[override]  # a stand-in with JobManager.list
            return _OwnerJobs(jobs)

        def vectors(self) -> _OwnerVectors:  # type: ignore[override]  # a stand-in with VectorStore.count
            return _OwnerVectors(count)

        def check_vectors(self) -> VectorCheck:
            # the owner holds the vector store's lock, so no point id can be read here: nothing was checked
            # (``checked_chunks`` 0), and ``aisac index --repair`` through the owner checks for real
            return {
                "missing_vectors": 0,
                "orphan_vectors": 0,
                "documents_missing_vectors": 0,
                "missing_in": [],
                "checked_chunks": 0,
            }

    return dict(OwnerStatus().status())


def status_via_owner(info: OwnerInfo, settings: Settings) -> dict[str, Any]:
    """The dict of :meth:`~aisac_core.rag.status.StoreHealth.status` for a store its owner holds: the owner's
    ``rag_store_status`` tool when it has one (exactly the in-process result), else computed here from the SQL store
    with the owner's job list (``rag_job_status``); ``chunks_in_vector_store`` is then None (the vector store is
    locked by the owner). Raises OwnerCallError."""

    async def remote() -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        async with _client(info, 120) as c:
            if "rag_store_status" in {t.name for t in await c.list_tools()}:
                return await _call(c, "rag_store_status", {}), []
            return None, (await _call(c, "rag_job_status", {})).get("jobs") or []

    full, jobs = anyio.run(remote)
    if full is not None:
        return full
    core = AppContext(settings, read_only=True)
    try:
        return _owner_status(core, jobs, None)
    finally:
        core.close()


class SettingsFileError(AisacError):
    """``<data_dir>/aisac.toml`` cannot be read or written, or a setting given to ``aisac config`` is unknown or
    invalid; the message names the file or setting and the accepted form."""


def _known_names(name: str) -> str:
    """What to say about an unknown setting ``name``: the closest names (difflib) and every valid one."""
    import difflib

    names = [n for n in Settings.setting_names() if n != "data_dir"]
    close = difflib.get_close_matches(name, names, n=3)
    return (f"did you mean {', '.join(close)}? " if close else "") + "valid names: " + ", ".join(sorted(names))


def set_setting(data_dir: Path, name: str, value: str) -> Any:
    """Validate ``value`` (text, read like the environment variable) for the flat setting ``name`` and store it in
    ``<data_dir>/aisac.toml``; returns the stored value (paths resolved).

    Raises:
        SettingsFileError: unknown name, ``data_dir``, an invalid value (one line: name, value, accepted form), or
            an unreadable / unwritable file."""
    if name == "data_dir" or name not in Settings.setting_names():
        why = "the data dir is chosen with AISAC_DATA_DIR or --data-dir" if name == "data_dir" else _known_names(name)
        raise SettingsFileError(f"unknown setting {name!r}: {why}")
    current = _file_values(data_dir)
    try:
        given: dict[str, Any] = {name: value}  # text, validated like the environment variable
        checked = Settings(data_dir=data_dir, **given).get(name)
    except ValidationError as exc:
        raise SettingsFileError("; ".join(settings_errors(exc, env=False))) from exc
    current[name] = plain_value(checked)
    _write(data_dir, current)
    return current[name]


def unset_setting(data_dir: Path, name: str) -> bool:
    """Remove ``name`` from ``<data_dir>/aisac.toml``; returns whether it was there. Raises SettingsFileError."""
    current = _file_values(data_dir)
    if name not in current:
        return False
    del current[name]
    _write(data_dir, current)
    return True


def _file_values(data_dir: Path) -> dict[str, Any]:
    try:
        return read_settings_file(data_dir)
    except ValueError as exc:
        raise SettingsFileError(str(exc)) from exc


def _write(data_dir: Path, values: dict[str, Any]) -> None:
    try:
        write_settings_file(data_dir, values)
    except OSError as exc:
        raise SettingsFileError(f"{data_dir / 'aisac.toml'}: cannot write it ({exc.strerror})") from exc


# --------------------------------------------------------------------------------------------------
# aisac config
# --------------------------------------------------------------------------------------------------

config_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="The store's settings file <data_dir>/aisac.toml (the environment overrides it).",
)
_DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", help="store folder (default: $AISAC_DATA_DIR or the user data dir)", envvar="AISAC_DATA_DIR"
    ),
]


@config_app.command("set")
def config_set(
    name: Annotated[str, typer.Argument(help="flat setting name, e.g. roots, lit_replay")],
    value: Annotated[
        str,
        typer.Argument(
            help="the value, as in the environment variable (a list: JSON, or paths joined by the path separator)"
        ),
    ],
    data_dir: _DataDir = None,
) -> None:
    """Validate a setting and store it in <data_dir>/aisac.toml (mode 0600)."""
    settings = load_settings(data_dir)
    try:
        stored = set_setting(settings.data_dir, name, value)
    except SettingsFileError as exc:
        fail_lines([str(exc)])
    safe_print(
        f"{name} = {json.dumps(stored)} in {settings.data_dir / 'aisac.toml'}"
        + (
            "; the environment variable AISAC_" + name.upper() + " overrides it in this shell"
            if any(k.upper() == "AISAC_" + name.upper() for k in os.environ)
            else ""
        ),
        file=sys.stderr,
    )


@config_app.command("unset")
def config_unset(name: Annotated[str, typer.Argument(help="flat setting name")], data_dir: _DataDir = None) -> None:
    """Remove a setting from <data_dir>/aisac.toml (its default applies again)."""
    settings = load_settings(data_dir)
    try:
        removed = unset_setting(settings.data_dir, name)
    except SettingsFileError as exc:
        fail_lines([str(exc)])
    safe_print(f"removed {name}" if removed else f"{name} was not set in the file", file=sys.stderr)


@config_app.command("show")
def config_show(
    data_dir: _DataDir = None,
    every: Annotated[bool, typer.Option("--all", help="also the settings left at their default")] = False,
) -> None:
    """Print the settings in force as JSON: {name: {value, source (environment, aisac.toml, default)}}."""
    settings = load_settings(data_dir)
    try:
        src = setting_sources(settings)
    except ValueError as exc:
        fail_lines([str(exc)])
    shown = {k: v for k, v in src.items() if every or v["source"] != "default" or k == "data_dir"}
    safe_print(json.dumps({"file": str(settings.data_dir / "aisac.toml"), "settings": shown}, indent=1, default=str))
