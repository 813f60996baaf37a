"""Argument completion for the suite: fastmcp answers ``completion/complete`` with the handler of the server the
client talks to, and a mounted server's own handler is not consulted, so the suite chains its servers' handlers."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from fastmcp import FastMCP


def chain_completions(main: FastMCP, servers: Iterable[FastMCP]) -> None:
    """Give ``main`` a completion handler that asks each of ``servers``' handlers (``@server.completion``) in turn
    and returns the first non-empty answer; nothing is registered when none has a handler."""
    handlers = [h for s in servers if (h := getattr(s, "_completion_handler", None)) is not None]
    if not handlers:
        return

    async def complete(ref: Any, argument: Any, context: Any) -> Any:
        for handler in handlers:
            got = handler(ref, argument, context)
            got = await got if inspect.isawaitable(got) else got
            if got:
                return got
        return None

    main.add_completion_handler(complete)
