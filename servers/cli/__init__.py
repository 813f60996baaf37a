"""The ``aisac`` command line: the commands (``main``: the console script's ``app``), commands through a running owner
(``owner``), ``aisac store`` (``store``), ``aisac ask`` (``ask``). ``python -m aisac_servers.cli`` runs it too."""

from .main import app, main

__all__ = ["app", "main"]
