"""The six built-in servers, registered through the ``aisac_register_servers`` hook (:mod:`aisac_core.plugins`) like
any extension's. A server is given as a ``"module:attribute"`` string, imported only when a suite mounts it
(:func:`aisac_servers.serving.suite.suite_servers`), so listing the names loads nothing (a stdio proxy needs just these).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from aisac_core.plugins import hookimpl

#: namespace -> "module:attribute" of each built-in server (tool names are ``<namespace>_<tool>``)
BUILTIN_SERVERS = {
    "rag": "aisac_servers.adapters.rag:server",
    "memory": "aisac_servers.adapters.memory:server",
    "lit": "aisac_servers.adapters.literature:server",
    "data": "aisac_servers.adapters.data:server",
    "roles": "aisac_servers.adapters.roles:server",
    "trace": "aisac_servers.adapters.trace:server",
}
#: the name this module is registered under on a plugin manager
PLUGIN_NAME = "aisac_servers.base.builtin"


def _present(spec: str) -> bool:
    return importlib.util.find_spec(spec.split(":")[0]) is not None


@hookimpl
def aisac_register_servers() -> list[tuple[str, Any]]:
    """The built-in servers whose module is present: rag, memory, lit, data, roles, trace."""
    return [(ns, spec) for ns, spec in BUILTIN_SERVERS.items() if _present(spec)]
