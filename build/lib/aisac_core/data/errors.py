"""The user errors of the data tools."""

from __future__ import annotations

from aisac_core.errors import AisacError


class DataError(AisacError):
    """Bad input to a data tool: unknown frame, unreadable file, refused query, bad argument."""


class SandboxError(AisacError):
    """Bad input to a code tool (unknown session or job, bad name, busy session, too many sessions)."""
