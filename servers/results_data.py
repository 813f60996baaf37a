"""Result shapes of the data tools (their output schemas in ``tools/list``), and :func:`lean_schema`, which the
literature and roles result modules use too.

The tools return the plain dicts :mod:`aisac_core.data` builds (:data:`AsIs`); these TypedDicts declare the few
top-level keys a model works with - a host's model pays for every listed token in every conversation, and the
suite lists top-level keys only - so results carry more keys than declared (no ``additionalProperties: false``;
docs/data.md has the full shapes). ``NotRequired`` marks keys only some results carry.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypeVar

from pydantic import PlainSerializer
from typing_extensions import TypedDict

from .results_schema import schema

T = TypeVar("T")


def _as_is(value: Any) -> Any:
    return value


#: a tool's return annotation, ``-> AsIs[SomeResult]``: the TypedDict describes the result (the tool's
#: ``output_schema=lean_schema(SomeResult)``), while the dict goes out exactly as the core built it - fastmcp would
#: otherwise serialise it through the TypedDict, dropping every key it does not declare
AsIs = Annotated[T, PlainSerializer(_as_is, return_type=Any)]


def lean_schema(tp: Any) -> dict[str, Any]:
    """The output schema of a tool returning ``tp`` (a TypedDict), references inlined: :func:`schema`."""
    return schema(tp, inline=True)


class FrameDict(TypedDict):
    name: str
    rows: int
    columns: int
    replaced: NotRequired[bool]


class LoadResult(TypedDict):
    frames: list[dict[str, Any]]
    notes: list[str]


class ListResult(TypedDict):
    frames: list[dict[str, Any]]
    count: int


class PreviewResult(TypedDict):
    shape: list[int]
    dtypes: dict[str, str]
    rows: list[dict[str, Any]]


class DescribeResult(TypedDict):
    columns: dict[str, dict[str, Any]]


class QueryResult(TypedDict):
    matched: int
    rows: list[dict[str, Any]]
    result_id: str


class AggregateResult(TypedDict):
    groups: int
    rows: list[dict[str, Any]]
    result_id: str


class ToSessionResult(TypedDict):
    variable: str
    shape: list[int] | None


class VariablesResult(TypedDict):
    variables: list[dict[str, Any]]


class SessionListResult(TypedDict):
    sessions: list[dict[str, Any]]
    isolation: str
    limits: dict[str, Any]


class ResetResult(TypedDict):
    reset: bool
    killed_job: str | None


class CloseResult(TypedDict):
    closed: bool
