"""Result shapes shared by several servers' tools (the output schemas hosts see in ``tools/list``).

Declared with ``typing_extensions.TypedDict`` (pydantic needs it on Python < 3.12) so fastmcp derives a real
output schema from a tool's return annotation while the tool keeps returning plain dicts.
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict


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
