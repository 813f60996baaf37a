"""Code sessions: stateful, sandboxed Python sessions, one worker process each (the data server's code tools; no
MCP types).

Modules: :mod:`~aisac_core.sessions.manager` (:class:`~aisac_core.sessions.manager.SandboxManager`: admits sessions
and workers, schedules runs as jobs, looks them up), :mod:`~aisac_core.sessions.session` (a
:class:`~aisac_core.sessions.session.Session` owns its worker, cells and files; one run from request to result),
:mod:`~aisac_core.sessions.isolation` (which OS isolation the machine offers; starting and talking to a worker),
:mod:`~aisac_core.sessions.worker` (the worker itself, run as a script and never imported) with
:mod:`~aisac_core.sessions.confine` (seccomp, Landlock), :mod:`~aisac_core.sessions.replies` (a worker's untrusted
reply made a result), :mod:`~aisac_core.sessions.sessionfs` (the server's writes into a session folder, which
follow no link; the disk quota), :mod:`~aisac_core.sessions.mplcache` (matplotlib's font list),
:mod:`~aisac_core.sessions.names`, :mod:`~aisac_core.sessions.results` (the result types; a code run is the tagged
union :data:`~aisac_core.sessions.results.CodeRun`) and :mod:`~aisac_core.sessions.errors`. The DataFrame registry
stays in :mod:`aisac_core.data`, which puts frames into sessions. Nothing is imported here.
"""
