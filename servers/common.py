"""What every server adapter shares: running core calls off the event loop with clear MCP tool errors."""

from __future__ import annotations

import logging
from typing import Any, Callable, TypeVar

import anyio
from fastmcp.exceptions import ToolError

log = logging.getLogger("aisac.servers")
T = TypeVar("T")


def _user_errors() -> tuple[type[Exception], ...]:
    from aisac_core.rag.documents import DocumentError
    from aisac_core.errors import AisacError
    from aisac_core.rag.embeddings import EmbeddingModelError
    from aisac_core.rag.indexer import IndexError_
    from aisac_core.memory import MemoryInputError
    from aisac_core.rag.search import SearchError
    from aisac_core.store.sql import StoreError
    from aisac_core.store.vectors import VectorStoreError

    return (AisacError, SearchError, IndexError_, DocumentError, VectorStoreError, EmbeddingModelError, StoreError,
            MemoryInputError)


async def call_core(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in a worker thread. aisac's own input and store errors become :class:`ToolError` with
    their message; anything else becomes a ToolError naming the failure (the traceback goes to the log,
    on stderr), never a raw traceback to the client."""
    try:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
    except ToolError:
        raise
    except _user_errors() as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        log.exception("internal error in %s", getattr(fn, "__name__", fn))
        raise ToolError(f"internal error ({type(exc).__name__}: {exc}); the server log on stderr has details") from exc
