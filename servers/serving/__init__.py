"""Serving the suite: the suite itself (mounts, provenance middleware, profiles), MCP tasks, the in-process
tool client, the sampling backend, the dashboard mount and the run report's MCP Apps view."""
