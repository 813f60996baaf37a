"""Two helpers the adapters share for results declared in the core (:mod:`aisac_core.data.results` and the other
domains' ``results`` modules): :data:`AsIs`, the return annotation that sends a result exactly as the core built it,
and :func:`lean_schema`, the output schema of a result type with its references inlined.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import PlainSerializer

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
