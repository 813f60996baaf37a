"""Result shapes of the long tools and their job tools (``rag_index``, ``rag_job_status``, ``rag_job_cancel``,
``lit_import``, ``data_code_run``, ``data_code_job_status``, ``roles_run``, ``roles_job_status``): their output
schemas in ``tools/list``. Only the keys a model works with are declared (every schema token costs a host's model
in every conversation); results carry more (``AsIs``: sent as the core built them). ``NotRequired``: only some
results carry the key.
"""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict


class CodeRun(TypedDict):
    ok: bool
    job_id: str
    status: str
    pending: NotRequired[bool]
    stdout: NotRequired[str]
    result: NotRequired[str]
    error: NotRequired[str]
    state_lost: NotRequired[bool]


class RolesRun(TypedDict):
    status: str
    job_id: str
    answer: NotRequired[dict[str, Any]]
    evaluation: NotRequired[dict[str, Any]]


class RolesJob(TypedDict, total=False):
    job_id: str
    status: str
    result: dict[str, Any]
    error: str
    jobs: list[dict[str, Any]]


class Import(TypedDict):
    status: str
    path: NotRequired[str]
    job_id: NotRequired[str | None]
    job: NotRequired[dict[str, Any]]


class Cancel(TypedDict):
    job_id: str
    kind: str
    status: str
