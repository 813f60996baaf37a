"""What every server adapter shares: the application context a tool works on, and running core calls off the event
loop with clear MCP tool errors."""

from __future__ import annotations

import logging
from typing import Any, Callable, TypeVar

import anyio
from fastmcp.dependencies import Depends
from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_context

from aisac_core.context import AppContext
from aisac_core.errors import AisacError

log = logging.getLogger("aisac.servers")
T = TypeVar("T")


def current_app() -> AppContext:
    """The :class:`~aisac_core.context.AppContext` of the suite serving the current request: the lifespan of the
    suite (:func:`aisac_servers.suite.build`) yields it as ``{"app": ...}``; a mounted server reads the root's.

    Raises:
        ToolError: no suite lifespan is running (a server used without the suite).
    """
    rc = get_context().request_context
    lc = rc.lifespan_context if rc is not None else None
    app = lc.get("app") if isinstance(lc, dict) else None
    if not isinstance(app, AppContext):
        raise ToolError("this server runs without aisac's application context: serve it through the suite "
                        "(`aisac serve`, or aisac_servers.suite.build())")
    return app


#: default of a tool parameter ``app: AppContext = App``: fastmcp injects the application context and leaves the
#: parameter out of the tool's input schema.
App: Any = Depends(current_app)


async def call_core(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in a worker thread. aisac's user errors (:class:`~aisac_core.errors.AisacError`) become
    :class:`ToolError` with their message; anything else becomes a ToolError naming the failure (the traceback goes
    to the log, on stderr), never a raw traceback to the client."""
    try:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
    except ToolError:
        raise
    except AisacError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        log.exception("internal error in %s", getattr(fn, "__name__", fn))
        raise ToolError(f"internal error ({type(exc).__name__}: {exc}); the server log on stderr has details") from exc
