"""Result shapes shared by several servers' tools (the output schemas hosts see in ``tools/list``).

Declared with ``typing_extensions.TypedDict`` (pydantic needs it on Python < 3.12) so fastmcp derives a real
output schema from a tool's return annotation while the tool keeps returning plain dicts.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from typing_extensions import NotRequired, TypedDict


# The full evidence anchor (:class:`aisac_core.evidence.anchor.Anchor`, JSON form): the cited chunk, its document,
# the file's and the chunk text's SHA-256, where it sits, and the search score when from a search. (A comment, not a
# docstring: a TypedDict's docstring becomes a description in every output schema that holds an anchor.)
class AnchorDict(TypedDict):

    chunk_id: str
    doc_id: str | None
    path: str | None
    sha256: str | None
    section: str | None
    page: int | None
    char_span: list[int | None]
    chunk_sha256: str | None
    score: NotRequired[float | None]


#: set by the provenance middleware around each tool call (a fresh list); a tool whose result is a compact form
#: of a fuller one (rag_search's default hits) appends the full result, and the trace records that instead, so the
#: trace keeps the full evidence anchors (:func:`record_full_result`)
FULL_RESULT: "ContextVar[list[Any] | None]" = ContextVar("aisac_full_result", default=None)


def record_full_result(result: Any) -> None:
    """Hand the full form of the current tool call's result to the trace (no-op outside the suite's middleware)."""
    holder = FULL_RESULT.get()
    if holder is not None:
        holder.append(result)
