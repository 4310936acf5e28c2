"""The Document AI package's own errors and their stable machine codes.

:class:`DocumentAIErrorCode` names why an input was never sent (its value travels in the
operators' results as ``error_code``); an application maps these codes onto its own. The
exceptions an operator raises are Airflow exceptions, as in the provider."""

from __future__ import annotations

import enum
from typing import TypedDict

from airflow.sdk.exceptions import AirflowException


class DocumentAIErrorCode(enum.StrEnum):
    """Why an input is refused before it reaches Document AI."""

    TOO_MANY_PAGES = "TOO_MANY_PAGES"  # more pages than the processor takes on this path
    UNSUPPORTED = "UNSUPPORTED"  # a file type Document AI does not read
    NOT_A_PDF = "NOT_A_PDF"  # a ``.pdf`` whose pages could not be counted (not a PDF, damaged, encrypted)


class RejectedInput(TypedDict):
    """:meth:`DocumentAIInputError.to_dict`: an input refused before it was sent."""

    error: str  # a DocumentAIErrorCode value
    message: str
    file: str


class DocumentAIInputError(Exception):
    """One input that must not be sent: ``code`` (:class:`DocumentAIErrorCode`), ``message`` (names
    the input and says what to do) and ``file`` (the input's URI or path)."""

    def __init__(self, code: DocumentAIErrorCode | str, message: str, file: str = "") -> None:
        super().__init__(message)
        self.code = DocumentAIErrorCode(code)
        self.message = message
        self.file = file

    def to_dict(self) -> RejectedInput:
        return {"error": self.code.value, "message": self.message, "file": self.file}

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"


class DocumentAIBatchOperationFailed(AirflowException):
    """A Document AI batch operation failed as a whole (or could not be followed to its end)."""


class DocumentAIPageLimitError(AirflowException):
    """A document has more pages than the chosen Document AI path accepts.

    Attributes: ``uri``, ``pages``, ``limit``, ``code`` (``TOO_MANY_PAGES``).
    """

    code = DocumentAIErrorCode.TOO_MANY_PAGES

    def __init__(self, message: str, uri: str, pages: int, limit: int) -> None:
        super().__init__(message)
        self.uri, self.pages, self.limit = uri, pages, limit
