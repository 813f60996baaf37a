"""The user error of the code-session tools."""

from __future__ import annotations

from aisac_core.errors import AisacError

__all__ = ["SandboxError"]


class SandboxError(AisacError):
    """Bad input to a code tool (unknown session or job, bad name, busy session, too many sessions), or a worker
    that cannot start."""
