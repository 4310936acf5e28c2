"""Pure helpers of the Document AI hook, trigger and operators: processor limits, MIME types, the
split of a batch into requests, page counting, the digest of a finished operation into
per-document results, and :class:`OperationWatch` — the one polling state machine behind both the
hook's synchronous wait and the trigger's deferred one.

Nothing here imports Airflow or a Google client (``pypdfium2`` only inside :func:`page_count`), so
it is cheap at DAG-parse time and testable alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from docverify_documentai.errors import DocumentAIErrorCode, DocumentAIInputError, RejectedInput

# Layout Parser limits (Document AI quotas page): online requests take at most 15 pages, a batch
# request at most 5,000 files, and no document may have more than 500 pages.
LAYOUT_PARSER_MAX_ONLINE_PAGES = 15
LAYOUT_PARSER_MAX_PAGES_PER_DOCUMENT = 500
LAYOUT_PARSER_MAX_FILES_PER_BATCH = 5000

# google.rpc.Code values used in the results.
CODE_OK = 0
CODE_UNKNOWN = 2
CODE_INVALID_ARGUMENT = 3

#: google.rpc codes of a document's status that are not that document's fault: the configuration's
#: (NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION, UNAUTHENTICATED: the processor, the buckets,
#: the service account) or the service's (DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL,
#: UNAVAILABLE). An operation all of whose documents failed with these failed as a whole.
CONFIGURATION_CODES = frozenset({5, 7, 9, 16})
SERVICE_CODES = frozenset({4, 8, 10, 13, 14})

# Document AI types every input by MIME type; these are the ones it accepts (the Layout Parser
# also reads the office formats), keyed by file extension.
MIME_TYPES: dict[str, str] = {
    ".pdf": "application/pdf",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".gif": "image/gif",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".bmp": "image/bmp",
    ".webp": "image/webp",
    ".html": "text/html",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


def mime_type_for(uri: str) -> str | None:
    """The MIME type Document AI expects for ``uri``, from its extension (None when unknown)."""
    name = uri.rsplit("/", 1)[-1].lower()
    dot = name.rfind(".")
    return MIME_TYPES.get(name[dot:]) if dot >= 0 else None


@dataclass(frozen=True)
class RequestPlan:
    """How a batch is submitted: ``requests`` (lists of ``gs://`` URIs, each within the per-request
    file limit, inputs in their given order, duplicates dropped) and ``rejected`` (one typed
    :class:`DocumentAIInputError` per input that must not be sent: over the page limit, or a file type
    Document AI does not read)."""

    requests: list[list[str]] = field(default_factory=list)
    rejected: list[DocumentAIInputError] = field(default_factory=list)

    @property
    def submitted(self) -> int:
        return sum(len(r) for r in self.requests)


def plan_requests(
    uris: Iterable[str],
    page_counts: Mapping[str, int] | None = None,
    max_files: int = LAYOUT_PARSER_MAX_FILES_PER_BATCH,
    max_pages: int = LAYOUT_PARSER_MAX_PAGES_PER_DOCUMENT,
) -> RequestPlan:
    """Split ``uris`` into batch requests of at most ``max_files`` files.

    An input whose page count (when ``page_counts`` knows it) exceeds ``max_pages`` is rejected with
    ``TOO_MANY_PAGES``; one with an extension Document AI does not read, with ``UNSUPPORTED``
    (:class:`DocumentAIInputError`). Rejections are reported, never raised: one bad file does not stop
    the batch.
    """
    if max_files < 1:
        raise ValueError(f"max_files must be at least 1, got {max_files}")
    counts = page_counts or {}
    seen: set[str] = set()
    accepted: list[str] = []
    rejected: list[DocumentAIInputError] = []
    for uri in uris:
        if uri in seen:
            continue
        seen.add(uri)
        pages = counts.get(uri)
        if pages is not None and int(pages) > max_pages:
            rejected.append(
                DocumentAIInputError(
                    DocumentAIErrorCode.TOO_MANY_PAGES,
                    f"{uri} has {int(pages)} pages; the Document AI Layout Parser takes at most {max_pages} "
                    f"per document: split the PDF into parts of at most {max_pages} pages and submit the parts",
                    uri,
                )
            )
        elif mime_type_for(uri) is None:
            rejected.append(
                DocumentAIInputError(
                    DocumentAIErrorCode.UNSUPPORTED,
                    f"{uri}: Document AI does not read this file type (known extensions: "
                    f"{', '.join(sorted(MIME_TYPES))}); convert it to PDF or remove it from the batch",
                    uri,
                )
            )
        else:
            accepted.append(uri)
    requests = [accepted[i : i + max_files] for i in range(0, len(accepted), max_files)]
    return RequestPlan(requests=requests, rejected=rejected)


def check_page_limit(uri: str, pages: int, limit: int, *, online: bool) -> None:
    """Raise :class:`DocumentAIInputError` (``TOO_MANY_PAGES``) when ``pages`` exceeds ``limit``; the message says what to
    do (the batch operator for more than the online limit, splitting beyond 500 pages)."""
    if pages <= limit:
        return
    if online and pages <= LAYOUT_PARSER_MAX_PAGES_PER_DOCUMENT:
        fix = "process it with DocumentAIBatchProcessOperator (batch takes up to 500 pages per document)"
    else:
        fix = f"split the PDF into parts of at most {LAYOUT_PARSER_MAX_PAGES_PER_DOCUMENT} pages"
    kind = "online" if online else "per document"
    raise DocumentAIInputError(DocumentAIErrorCode.TOO_MANY_PAGES, f"{uri} has {pages} pages, over the {kind} limit of {limit}: {fix}", uri)


# --- a batch operation as Document AI describes it (proto3 JSON: omitted defaults, camelCase), read once
# by summarize_operation; unknown fields are ignored

class _RpcStatusJSON(BaseModel):
    """A ``google.rpc.Status``: ``code`` None when proto3 omitted it."""

    model_config = ConfigDict(extra="allow")
    code: int | None = None
    message: str = ""

    def __bool__(self) -> bool:  # an empty status ({}) says nothing, as the JSON object did
        return bool(self.model_fields_set or self.model_extra)


class _ProcessStatusJSON(BaseModel):
    """One document's ``individualProcessStatuses`` entry."""

    input_uri: str = Field("", alias="inputGcsSource")
    output_uri: str | None = Field(None, alias="outputGcsDestination")
    status: _RpcStatusJSON | None = None


class _BatchMetadataJSON(BaseModel):
    state: str | None = None
    statuses: list[_ProcessStatusJSON] | None = Field(None, alias="individualProcessStatuses")


class _OperationJSON(BaseModel):
    name: str = ""
    done: bool = False
    error: _RpcStatusJSON | None = None
    metadata: _BatchMetadataJSON | None = None


class RpcError(TypedDict):
    code: int
    message: str


class StatusSummary(TypedDict):
    """One document's status in a finished operation."""

    input_uri: str
    output_uri: str | None
    status_code: int  # google.rpc.Code, 0 = OK
    status_message: str


class OperationSummary(TypedDict):
    """:func:`summarize_operation`'s digest of one batch operation."""

    name: str
    done: bool
    state: str | None
    failed: bool
    partial: bool
    error: RpcError | None
    statuses: list[StatusSummary]


class InputResult(TypedDict):
    """One input's result (:func:`map_results`; the batch operator's XCom)."""

    input_uri: str
    output_uri: str | None
    operation: str | None
    status_code: int
    status_message: str
    ok: bool
    error_code: str | None  # a DocumentAIErrorCode value for an input never sent


class OperationsEvent(TypedDict):
    """The end of a wait (:class:`OperationWatch`): the trigger's event and the hook's answer."""

    status: Literal["success", "error"]
    message: str
    operations: list[OperationSummary]
    operation: NotRequired[str]  # an error about one poll: the operation it was about


def summarize_operation(operation: Mapping[str, JsonValue]) -> OperationSummary:
    """The parts of a batch operation (the proto3-JSON dict of ``DocumentAIHook.get_operation``) that
    the operator needs, in snake_case, with proto3's omitted defaults filled in::

        {"name", "done": bool, "state": "SUCCEEDED"|"FAILED"|…|None, "failed": bool, "partial": bool,
         "error": {"code": int, "message": str} | None,
         "statuses": [{"input_uri", "output_uri" (None when absent), "status_code" (0 = OK), "status_message"}]}

    ``failed`` means the operation failed as a whole, as opposed to single documents failing
    inside a finished operation. An operation that ends with an ``error`` (or a FAILED/CANCELLED
    state) is decided by its per-document statuses: Document AI ends a batch in which some
    documents failed with ``error`` {code 3, "Failed to process all documents."} while the
    documents that succeeded have their ``status`` OK and their output folder. Such an operation is
    ``partial`` (not ``failed``): its OK documents are read, the others fail one by one. It
    ``failed`` as a whole only when it has no usable per-document status (none, or one without
    its input), or when no document succeeded and every document's code is the configuration's or
    the service's (:data:`CONFIGURATION_CODES`, :data:`SERVICE_CODES`: e.g. PERMISSION_DENIED on
    the output bucket), never one document's own. ``partial`` is also set on an operation that
    reports SUCCEEDED with some failed documents.
    """
    op = _OperationJSON.model_validate(operation)
    metadata = op.metadata or _BatchMetadataJSON()
    error = op.error
    state = metadata.state
    statuses: list[StatusSummary] = []
    for item in metadata.statuses or []:
        status = item.status or _RpcStatusJSON()
        statuses.append(
            {
                "input_uri": item.input_uri,
                "output_uri": item.output_uri or None,
                "status_code": CODE_OK if status.code is None else status.code,  # proto3 omits code 0 (OK)
                "status_message": status.message,
            }
        )
    done = op.done
    ended_badly = bool(error) or (done and state in ("FAILED", "CANCELLED"))
    usable = bool(statuses) and all(st["input_uri"] for st in statuses)
    ok = [st for st in statuses if st["status_code"] == CODE_OK and st["output_uri"]]
    not_documents_fault = all(st["status_code"] in CONFIGURATION_CODES | SERVICE_CODES
                              for st in statuses if st not in ok)
    failed = ended_badly and (not usable or (not ok and not_documents_fault))
    return {
        "name": op.name,
        "done": done,
        "state": state,
        "failed": failed,
        "partial": done and not failed and usable and len(ok) < len(statuses),
        "error": {"code": CODE_UNKNOWN if error.code is None else error.code, "message": error.message} if error else None,
        "statuses": statuses,
    }


def map_results(
    operations: Sequence[OperationSummary],
    submitted: Sequence[str] | None = None,
    rejected: Sequence[RejectedInput] = (),
) -> list[InputResult]:
    """One result per input, in this shape (the operator's XCom)::

        {"input_uri", "output_uri" (the input's output folder, or None), "operation" (name or None),
         "status_code" (google.rpc.Code, 0 = OK), "status_message", "ok": bool,
         "error_code" (a DocumentAIErrorCode value for inputs never sent, else None)}

    ``operations`` are :func:`summarize_operation` digests; ``submitted`` (when known) lets an input
    Document AI reported nothing about show up as failed instead of vanishing; ``rejected`` are
    ``DocumentAIInputError.to_dict()`` of the inputs the plan refused. Results follow ``submitted``'s order
    when given, else the operations' order; rejected inputs come last.
    """
    by_input: dict[str, InputResult] = {}
    for op in operations:
        for status in op["statuses"]:
            ok = status["status_code"] == CODE_OK and bool(status["output_uri"])
            by_input[status["input_uri"]] = {
                "input_uri": status["input_uri"],
                "output_uri": status["output_uri"],
                "operation": op["name"],
                "status_code": status["status_code"],
                "status_message": status["status_message"] or ("" if ok else "no output folder reported"),
                "ok": ok,
                "error_code": None,
            }
    results: list[InputResult] = []
    if submitted is not None:
        for uri in dict.fromkeys(submitted):
            found = by_input.pop(uri, None)
            results.append(
                found
                or {
                    "input_uri": uri,
                    "output_uri": None,
                    "operation": None,
                    "status_code": CODE_UNKNOWN,
                    "status_message": "Document AI reported no status for this input",
                    "ok": False,
                    "error_code": None,
                }
            )
    results.extend(by_input.values())
    for err in rejected:
        results.append(
            {
                "input_uri": err["file"],
                "output_uri": None,
                "operation": None,
                "status_code": CODE_INVALID_ARGUMENT,
                "status_message": err["message"],
                "ok": False,
                "error_code": err["error"],
            }
        )
    return results


def page_count(content: bytes, name: str = "") -> int:
    """The number of pages of a PDF held in memory (pypdfium2; nothing is extracted). A file it
    cannot open raises :class:`DocumentAIInputError` (``NOT_A_PDF``) naming ``name``."""
    import pypdfium2

    try:
        pdf = pypdfium2.PdfDocument(content)
    except Exception as exc:  # PdfiumError: not a PDF, damaged, or a password is needed
        raise DocumentAIInputError(
            DocumentAIErrorCode.NOT_A_PDF,
            f"{name or 'the input'}: its pages cannot be counted ({type(exc).__name__}: {exc}); "
            f"check that it is an unencrypted PDF",
            name,
        ) from None
    try:
        return len(pdf)
    finally:
        pdf.close()


class OperationWatch:
    """Where the wait for a set of batch operations stands; one poll result at a time is fed in.

    The hook's synchronous wait and the trigger's asynchronous one run the same loop: poll every
    pending operation, :meth:`polled` a digest or :meth:`poll_failed` an exception; a non-transient
    failure, or ``max_poll_failures`` consecutive transient ones of one operation, ends the wait
    with an error event; once every operation is done, :meth:`event` is the final event::

        {"status": "success" | "error", "message": str, "operations": [summarize_operation(...)]}

    (an error about a poll also names ``operation`` and has ``operations: []``).
    """

    def __init__(self, names: Sequence[str], max_poll_failures: int = 5) -> None:
        if not names:
            raise ValueError("at least one operation name is needed")
        self.names = list(dict.fromkeys(names))
        self.max_poll_failures = max_poll_failures
        self.finished: dict[str, OperationSummary] = {}
        self.failures: dict[str, int] = dict.fromkeys(self.names, 0)

    @property
    def pending(self) -> list[str]:
        return [n for n in self.names if n not in self.finished]

    @property
    def done(self) -> bool:
        return not self.pending

    def polled(self, name: str, operation: Mapping[str, JsonValue]) -> OperationSummary:
        """Record one successful poll (the proto3-JSON operation); its digest."""
        summary = summarize_operation(operation)
        self.failures[name] = 0
        if summary["done"]:
            self.finished[name] = summary
        return summary

    def poll_failed(self, name: str, exc: BaseException, transient: bool) -> OperationsEvent | None:
        """Record one failed poll: the error event that ends the wait, or None to poll again."""
        self.failures[name] += 1
        if not transient:
            return self.error(name, f"polling failed: {type(exc).__name__}: {exc}")
        if self.failures[name] >= self.max_poll_failures:
            return self.error(name, f"{self.failures[name]} consecutive polls failed, the last with "
                                    f"{type(exc).__name__}: {exc}")
        return None

    @staticmethod
    def error(name: str, reason: str) -> OperationsEvent:
        """An error event about operation ``name`` whose state is unknown (the poll itself failed)."""
        return {"status": "error", "message": f"could not follow Document AI operation {name}: {reason}",
                "operations": [], "operation": name}

    def event(self) -> OperationsEvent:
        """The final event, once :attr:`done`."""
        operations = [self.finished[n] for n in self.names]
        failed = [op["name"] for op in operations if op["failed"]]
        if failed:
            return {"status": "error", "operations": operations,
                    "message": f"Document AI operation(s) failed as a whole: {', '.join(failed)}"}
        docs = sum(len(op["statuses"]) for op in operations)
        bad = sum(1 for op in operations for s in op["statuses"] if s["status_code"] != CODE_OK)
        partial = [op["name"] for op in operations if op["partial"]]
        note = f" (partial failure kept per document: {', '.join(partial)})" if partial else ""
        return {"status": "success", "operations": operations,
                "message": f"{len(operations)} operation(s) done: {docs} document(s), {bad} failed{note}"}
