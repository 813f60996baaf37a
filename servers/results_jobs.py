"""Result shapes of the long tools and their job tools (``rag_index``, ``rag_job_status``, ``rag_job_cancel``,
``data_code_run`` and ``data_code_job_status`` return :class:`aisac_core.data.results.CodeRun`, ``lit_import``
:class:`aisac_core.literature.results.ImportResult`, ``roles_run`` and ``roles_job_status`` the types of
:mod:`aisac_core.roles.results`): their output schemas in ``tools/list``. Only the keys a model works with are
declared (every schema token costs a host's model in every conversation); results carry more (``AsIs``: sent as the
core built them). ``NotRequired``: only some
results carry the key.
"""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict


class IndexJob(TypedDict):
    job_id: str
    status: str
    done: int
    total: int
    failures: list[dict[str, Any]]


class IndexJobList(TypedDict, total=False):
    jobs: list[dict[str, Any]]
    job_id: str
    status: str
    done: int
    total: int


class Cancel(TypedDict):
    job_id: str
    kind: str
    status: str
