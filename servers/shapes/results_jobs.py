"""Result shape of ``rag_job_cancel``, which cancels any of the three kinds of background job (index, code run, roles
run). The other long tools' results are declared in the core: :class:`aisac_core.rag.results.IndexJob`,
:class:`aisac_core.data.results.CodeRun`, :class:`aisac_core.literature.results.ImportResult` and
:mod:`aisac_core.roles.results`.
"""

from __future__ import annotations

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict


@with_config(ConfigDict(extra="forbid"))
class Cancel(TypedDict):
    job_id: str
    kind: str
    status: str
