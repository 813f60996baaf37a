"""The user errors of the data tools."""

from __future__ import annotations

from aisac_core.errors import AisacError


class DataError(AisacError):
    """Bad input to a data tool: unknown frame, unreadable file, refused query, bad argument."""


class WorkbookOpenError(DataError):
    """openpyxl cannot open a workbook (a missing or damaged part); ``cause`` says why. The table readers then read
    its values with calamine (:func:`aisac_core.data.calamine_books.openpyxl_fallback`)."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause
