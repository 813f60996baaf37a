"""Data: a registry of named DataFrames with lineage (the data server's frame logic; no MCP types).

Modules: :mod:`~aisac_core.data.frames` (the registry, :class:`~aisac_core.data.frames.FrameRegistry`),
:mod:`~aisac_core.data.loaders` (file formats and header detection), :mod:`~aisac_core.data.query` (the query
allow-list and aggregates), :mod:`~aisac_core.data.results` (the result types) and :mod:`~aisac_core.data.errors`.
The code sessions a frame can be put into are :mod:`aisac_core.sessions`. Nothing is imported here: pandas loads
only when a frame is used.
"""
