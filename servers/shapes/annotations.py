"""The MCP tool annotations of aisac's tools: :func:`hints` gives all five, always (the listing,
:mod:`aisac_servers.shapes.toollist`, leaves out those equal to the specification's defaults)."""

from __future__ import annotations

from typing import Any


def hints(
    title: str,
    *,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
) -> dict[str, Any]:
    """The MCP tool annotations of a tool, all five always given (the spec's defaults are destructive and
    open-world, so a tool that leaves one out looks dangerous to a host).

    Args:
        title: human-readable name a host shows ("Search the corpus").
        read_only: the tool changes nothing (``readOnlyHint``); then ``destructiveHint`` is False.
        destructive: the tool may delete or overwrite stored data (``destructiveHint``).
        idempotent: calling it again with the same arguments has no further effect (``idempotentHint``).
        open_world: the tool reaches outside aisac's store, e.g. a web API (``openWorldHint``).

    Returns: ``{"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}`` for
    ``@server.tool(annotations=...)`` (MCP specification, "Tool annotations").
    """
    return {
        "title": title,
        "readOnlyHint": read_only,
        "destructiveHint": destructive and not read_only,
        "idempotentHint": idempotent or read_only,
        "openWorldHint": open_world,
    }
