"""Tool profiles: which servers and tools a host sees (``aisac serve --tools``, setting ``AISAC_TOOLS``).

A host's model pays for every listed tool in every conversation (the ``tools/list`` JSON sits in its context), so a
host that only answers grounded questions should not list 60 tools. A profile value is a comma-separated list of
items, united:

- ``core``: grounded question answering - the tools of :data:`CORE_TOOLS` (search and read the corpus, check an
  anchor, conversation memory, the whole roles graph, a run's trace);
- ``full``: every tool of every server, within a small context: the ``core`` tools are listed, every other tool is
  found with ``tools_search`` (BM25 over names, descriptions and arguments) and called by name or through
  ``tools_call`` (:data:`CATALOG_TOOLS`);
- ``all``: every tool of every server listed (the default; hosts with their own tool selection);
- a server namespace (``rag``, ``memory``, ``lit``, ``data``, ``roles``, ``trace``, a plugin's or ``project``): all
  tools of that server.

``core,lit`` is the core tools plus every literature tool. A server that is not in the profile is not mounted, so
its resources and prompts are hidden too; a server exposed only in part (``roles`` in ``core``) keeps its
resources and prompts. :func:`compose_instructions` / :func:`filter_instructions` build the suite's instructions
from the exposed servers' own. This module knows no MCP (the suite and the stdio relay apply it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: the profile names (besides server namespaces)
PROFILES = ("core", "full", "all")
#: the two tools through which the ``full`` profile reaches the tools it does not list
CATALOG_TOOLS = ("tools_search", "tools_call")
#: the tools of the ``core`` profile, per server (a host's grounded Q&A: search, read, verify, remember, answer)
CORE_TOOLS: dict[str, tuple[str, ...]] = {
    "rag": (
        "rag_search",
        "rag_get_overview",
        "rag_read_sections",
        "rag_get_chunk",
        "rag_list_documents",
        "rag_verify_anchor",
    ),
    "memory": ("memory_start_session", "memory_add_turn", "memory_recall"),
    "roles": ("roles_run",),
    "trace": ("trace_get_run",),
}
#: first line of the suite's instructions
INSTRUCTIONS_HEAD = (
    "aisac: scientific assistance grounded in the user's documents, with provenance. Every call is "
    'recorded in a trace run; to group calls, send _meta {"aisac/run_id": "<id>"}.'
)
_ITEM = re.compile(r"^[a-z][a-z0-9]*$")


class ToolProfileError(ValueError):
    """A profile value that names neither a profile nor an available server."""


@dataclass(frozen=True)
class ToolProfile:
    """A resolved profile: the servers to mount, in order, and for the servers exposed in part, their tool names.

    ``only[ns]`` holds the tool names shown of server ``ns``; a server absent from ``only`` shows every tool.
    ``search``: every tool is callable, but only the core tools and :data:`CATALOG_TOOLS` are listed (``full``)."""

    value: str
    servers: tuple[str, ...]
    only: dict[str, frozenset[str]] = field(default_factory=dict)
    search: bool = False

    def allows(self, tool: str) -> bool:
        """Whether the tool named ``tool`` (``rag_search``) is callable under this profile."""
        if tool in CATALOG_TOOLS:
            return self.search
        ns = tool.split("_", 1)[0]
        if ns not in self.servers:
            return False
        return ns not in self.only or tool in self.only[ns]

    def lists(self, tool: str) -> bool:
        """Whether the tool named ``tool`` appears in ``tools/list`` under this profile."""
        if self.search:
            return tool in CATALOG_TOOLS or any(tool in names for names in CORE_TOOLS.values())
        return self.allows(tool)

    def allows_prompt(self, name: str) -> bool:
        """Whether the prompt ``name`` (``roles_planner``) is listed: its server is mounted."""
        return name.split("_", 1)[0] in self.servers

    def allows_uri(self, uri: str) -> bool:
        """Whether the resource ``uri`` is listed and readable (``aisac://<ns>/...`` of a mounted server; other
        schemes always)."""
        if not uri.startswith("aisac://"):
            return True
        return uri[len("aisac://") :].split("/", 1)[0] in self.servers

    @property
    def budgeted(self) -> bool:
        """True for the profiles whose ``tools/list`` keeps to a token budget (``core``, alone or with servers, and
        ``full``): their listing gives output schemas as top-level keys without types."""
        return self.search or "core" in self.value.split(",")

    @property
    def is_full(self) -> bool:
        """True when nothing is hidden (every available server, every tool listed: ``all``)."""
        return not self.only and not self.search and self.value == "all"


def of_servers(names: list[str]) -> ToolProfile:
    """The profile exposing every tool of the servers ``names`` (``aisac serve rag``), unchecked."""
    return ToolProfile(",".join(names), tuple(names))


def check_value(value: str) -> str:
    """``value`` normalised (lower case, no spaces), or ToolProfileError when it is not a comma-separated list of
    names; whether each name exists is checked by :func:`resolve`."""
    items = [v.strip().lower() for v in str(value).split(",") if v.strip()]
    bad = [v for v in items if not _ITEM.match(v)]
    if not items or bad:
        raise ToolProfileError(
            f"tools profile {value!r}: give core, full, all or server names separated by commas "
            "(e.g. core, full, all, rag,memory, core,lit)"
        )
    return ",".join(items)


def resolve(value: str | None, available: list[str]) -> ToolProfile:
    """The profile ``value`` (``core``, ``full``, ``all``, ``rag,memory``, ``core,lit``...; None or empty: ``all``)
    over the ``available`` server namespaces (in mount order).

    Raises:
        ToolProfileError: an item that is neither ``core``, ``full``, ``all`` nor an available server (the message
            names the accepted values).
    """
    norm = check_value(value or "all")
    items = norm.split(",")
    unknown = [i for i in items if i not in PROFILES and i not in available]
    if unknown:
        raise ToolProfileError(
            f"unknown tools profile item(s) {', '.join(unknown)}; accepted: "
            f"{', '.join(PROFILES)} or server names ({', '.join(available)}), comma-separated"
        )
    if "all" in items:
        return ToolProfile("all", tuple(available))
    if "full" in items:
        return ToolProfile("full", tuple(available), search=True)
    whole = {i for i in items if i != "core"}
    only: dict[str, frozenset[str]] = {}
    if "core" in items:
        for ns, tools in CORE_TOOLS.items():
            if ns in available and ns not in whole:
                only[ns] = frozenset(tools)
    servers = tuple(ns for ns in available if ns in whole or ns in only)
    return ToolProfile(norm, servers, only)


def compose_instructions(server_instructions: dict[str, str | None]) -> str:
    """The suite's instructions: :data:`INSTRUCTIONS_HEAD`, then one line ``[ns] <the server's instructions>`` per
    server (in the given order; servers without instructions are left out). Keep each server's text short: the
    whole is part of every conversation's context."""
    lines = [INSTRUCTIONS_HEAD]
    for ns, text in server_instructions.items():
        if text and text.strip():
            lines.append(f"[{ns}] " + " ".join(text.split()))
    return "\n".join(lines)


def filter_instructions(text: str | None, servers: tuple[str, ...] | list[str]) -> str | None:
    """Composed instructions (:func:`compose_instructions`) keeping only the lines of ``servers`` (and the head):
    what a proxy serving a profile shows of the owner's whole-suite instructions."""
    if not text:
        return text
    keep = tuple(f"[{ns}] " for ns in servers)
    return "\n".join(line for line in text.split("\n") if not line.startswith("[") or line.startswith(keep))


_PAREN = re.compile(r"\s*\([^()]*\)")
_CLAUSE = re.compile(r"(?<=[.;])\s+")


def scrub_text(text: str, hidden: set[str] | frozenset[str]) -> str:
    """``text`` (a tool's description) without what names a tool in ``hidden`` (tools a profile does not offer): a
    parenthesis naming one goes, then each clause (up to ``.`` or ``;``) still naming one. A host is then never
    pointed to a tool it cannot call. ``text`` unchanged when nothing in it is hidden."""
    if not text or not hidden:
        return text
    pattern = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, hidden), key=len, reverse=True)) + r")\b")
    if not pattern.search(text):
        return text
    text = _PAREN.sub(lambda m: "" if pattern.search(m.group(0)) else m.group(0), text)
    kept = [c for c in _CLAUSE.split(text) if not pattern.search(c)]
    out = " ".join(kept).strip()
    if out.endswith(";"):
        out = out[:-1] + "."
    return out
