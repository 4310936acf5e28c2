"""Why a PDF (or its Document AI output) could not become a :class:`~docverify.domain.models.DocumentBundle`.

Every failure of the local parser, and of the Document AI JSON converter
(:mod:`docverify.layout.docai`: the ``DOCAI_*`` codes and ``TOO_MANY_PAGES``), is a
:class:`ParseError` with one stable machine ``code`` (see :data:`PARSE_ERROR_CODES`) and a human
``message`` that names the file and says what to do about it. ``to_dict()`` is the JSON form
that crosses process boundaries and ends up in SME packets (``SMEPacket.error``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

EMPTY_FILE = "EMPTY_FILE"
NOT_A_PDF = "NOT_A_PDF"
CORRUPT = "CORRUPT"
ENCRYPTED = "ENCRYPTED"
ZERO_PAGES = "ZERO_PAGES"
NO_TEXT_LAYER = "NO_TEXT_LAYER"
TOO_LARGE = "TOO_LARGE"
TIMEOUT = "TIMEOUT"
UNSUPPORTED = "UNSUPPORTED"
DOCAI_INVALID_JSON = "DOCAI_INVALID_JSON"
DOCAI_NO_CONTENT = "DOCAI_NO_CONTENT"
DOCAI_SHARDS_MISSING = "DOCAI_SHARDS_MISSING"
DOCAI_SHARDS_INCONSISTENT = "DOCAI_SHARDS_INCONSISTENT"
TOO_MANY_PAGES = "TOO_MANY_PAGES"
DOCAI_FAILED = "DOCAI_FAILED"
DOCAI_NO_RESULT = "DOCAI_NO_RESULT"
INPUT_CHANGED = "INPUT_CHANGED"

PARSE_ERROR_CODES: tuple[str, ...] = (
    EMPTY_FILE,  # the file has 0 bytes
    NOT_A_PDF,  # no "%PDF" header within the first 1024 bytes
    CORRUPT,  # the PDF structure cannot be read (or a page cannot be loaded, or the parser crashed)
    ENCRYPTED,  # a user password is required to open it
    ZERO_PAGES,  # a readable PDF whose page tree holds no page
    NO_TEXT_LAYER,  # pages without extractable text (a scan): needs OCR / Document AI
    TOO_LARGE,  # over the byte or page limit
    TIMEOUT,  # parsing took longer than the time limit (child process killed)
    UNSUPPORTED,  # a feature the parser cannot handle (unknown security handler, unreadable path)
    DOCAI_INVALID_JSON,  # a Document AI output file that is not JSON, or not a Document (wrong field types)
    DOCAI_NO_CONTENT,  # a Document AI Document with no text at all (no layout blocks, no text/pages)
    DOCAI_SHARDS_MISSING,  # shardInfo.shardCount says N shards, fewer were given
    DOCAI_SHARDS_INCONSISTENT,  # shards that do not belong together (duplicate index, counts or offsets differ)
    TOO_MANY_PAGES,  # more pages than Document AI accepts per document (500 for the Layout Parser)
    DOCAI_FAILED,  # Document AI reported a failure for this document (its status is in the message)
    DOCAI_NO_RESULT,  # a batch job said nothing about this document
    INPUT_CHANGED,  # the bytes read are not the bytes discovered (sha256 differs from the manifest's; ADR 0052)
)
"""The stable machine codes of :class:`ParseError`, in a fixed order."""


class ParseErrorDict(TypedDict):
    """:meth:`ParseError.to_dict`: the JSON form of a parse error."""

    error: str
    message: str
    file: str


class ParseError(Exception):
    """A PDF that cannot become a DocumentBundle.

    Attributes:
        code: one of :data:`PARSE_ERROR_CODES`.
        message: one sentence naming the file, the problem and what to do.
        file: the file name (or path) the error is about.
    """

    def __init__(self, code: str, message: str, file: str = "") -> None:
        if code not in PARSE_ERROR_CODES:
            raise ValueError(f"unknown parse error code {code!r}; expected one of {PARSE_ERROR_CODES}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.file = file

    def to_dict(self) -> ParseErrorDict:
        return {"error": self.code, "message": self.message, "file": self.file}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ParseError:
        """Inverse of :meth:`to_dict` (used when the error comes back from a child process)."""
        return cls(str(data["error"]), str(data.get("message", "")), str(data.get("file", "")))

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"ParseError({self.code!r}, {self.message!r}, file={self.file!r})"

    def __reduce__(self) -> tuple[type[ParseError], tuple[str, str, str]]:  # picklable despite the custom __init__
        return (type(self), (self.code, self.message, self.file))
