"""``python -m aisac_servers.cli``: the ``aisac`` command line."""

from .main import main

main()
