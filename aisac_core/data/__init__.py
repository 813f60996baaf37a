"""Data: a registry of named DataFrames with lineage, and sandboxed Python sessions (the data server's logic; no MCP
types).

Modules: :mod:`~aisac_core.data.frames` (the registry, :class:`~aisac_core.data.frames.FrameRegistry`),
:mod:`~aisac_core.data.loaders` (file formats and header detection), :mod:`~aisac_core.data.query` (the query
allow-list and aggregates), :mod:`~aisac_core.data.sandbox` (code sessions,
:class:`~aisac_core.data.sandbox.SandboxManager`), :mod:`~aisac_core.data.isolation` (starting and talking to a
session's worker process), :mod:`~aisac_core.data.worker` (the worker itself, run as a script and never imported),
:mod:`~aisac_core.data.results` (the result types) and :mod:`~aisac_core.data.errors`. Nothing is imported here:
pandas loads only when a frame is used.
"""
