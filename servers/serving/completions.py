"""Argument completion for the suite: fastmcp answers ``completion/complete`` with the handler of the server the
client talks to, and a mounted server's own handler is not consulted, so the suite chains its servers' handlers."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
from fastmcp import FastMCP

from aisac_core.context import AppContext

from .common import current_app


def by_prefix(
    targets: dict[tuple[str, str], Callable[[AppContext, str], list[str]]],
) -> Callable[..., Awaitable[list[str] | None]]:
    """A completion handler for resource-template arguments: for a reference whose ``(template URI, argument
    name)`` is a key of ``targets``, the values ``fn(app, prefix)`` returns (run in a worker thread); None for any
    other reference, so :func:`chain_completions` asks the next server's handler."""

    async def complete(ref: Any, argument: Any, context: Any = None) -> list[str] | None:
        name = getattr(argument, "name", None)
        fn = targets.get((str(getattr(ref, "uri", None) or ""), name)) if isinstance(name, str) else None
        if fn is None:
            return None
        return await anyio.to_thread.run_sync(fn, current_app(), str(getattr(argument, "value", "") or ""))

    return complete


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
