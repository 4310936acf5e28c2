"""Document AI operators in the Google provider's style (the provider has none): thin
``GoogleCloudBaseOperator`` subclasses over :class:`~docverify_documentai.hooks.document_ai.DocumentAIHook`.

- :class:`DocumentAIBatchProcessOperator`: ``batchProcess`` over ``gs://`` documents (a list or a
  prefix), split into requests of at most 5,000 files; waits deferred on
  :class:`~docverify_documentai.triggers.document_ai.DocumentAIBatchOperationTrigger` or, not
  deferrable, in the hook (``wait_for_operations``); returns where each input's output went. A
  failed document is reported, never fatal — also inside an operation that ends with
  "Failed to process all documents." (per-document statuses decide, see ``summarize_operation``);
  an operation that failed as a whole raises.
- :class:`DocumentAIProcessDocumentOperator`: online ``process`` of one small document (the
  Layout Parser takes at most 15 pages online; pages counted with pypdfium2 before sending).

``deferrable`` defaults to Airflow's ``[operators] default_deferrable`` like every provider
operator. DAG files import this module at parse time: the hook, the trigger and the Google client
are imported inside methods.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, conf
from airflow.providers.google.cloud.operators.cloud_base import GoogleCloudBaseOperator

from docverify_documentai.errors import (
    DocumentAIBatchOperationFailed,
    DocumentAIInputError,
    DocumentAIPageLimitError,
    RejectedInput,
)
from docverify_documentai.utils.document_ai import (
    LAYOUT_PARSER_MAX_FILES_PER_BATCH,
    LAYOUT_PARSER_MAX_ONLINE_PAGES,
    LAYOUT_PARSER_MAX_PAGES_PER_DOCUMENT,
    InputResult,
    OperationsEvent,
    OperationSummary,
    RequestPlan,
    check_page_limit,
    map_results,
    mime_type_for,
    page_count,
    plan_requests,
)

if TYPE_CHECKING:
    import pathlib

    from airflow.sdk import Context, ObjectStoragePath
    from pydantic import JsonValue

    from docverify_documentai.hooks.document_ai import DocumentAIHook

__all__ = [
    "DocumentAIBatchOperationFailed",
    "DocumentAIBatchProcessOperator",
    "DocumentAIPageLimitError",
    "DocumentAIProcessDocumentOperator",
    "RequestPlan",
    "plan_requests",
]


def _as_list(value: str | Sequence[str] | None) -> list[str]:
    """A templated input list: a list, a JSON list string, or one URI / comma- or newline-separated URIs."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return [str(v) for v in json.loads(text)]
        return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]
    return [str(v) for v in value]


def _document_codes(op: OperationSummary) -> str:
    """The per-document statuses of a failed operation, counted by code and message (or that it had none)."""
    statuses = op["statuses"]
    if not statuses:
        return ", no per-document status"
    counts: dict[str, int] = {}
    for st in statuses:
        key = f"{st['status_code']} {st['status_message']}".strip()
        counts[key] = counts.get(key, 0) + 1
    return ", documents: " + ", ".join(f"{n}× {key}" for key, n in counts.items())


class _DocumentAIOperator(GoogleCloudBaseOperator):
    """What both operators share: the hook on their connection and the processor's resource name
    (from ``project_id`` or the connection's project, ``location``, ``processor_id``,
    ``processor_version``)."""

    # set by each subclass's __init__
    gcp_conn_id: str
    impersonation_chain: str | Sequence[str] | None
    api_endpoint: str | None
    transport: str | None
    project_id: str | None
    location: str
    processor_id: str
    processor_version: str | None

    def get_hook(self) -> DocumentAIHook:
        from docverify_documentai.hooks.document_ai import DocumentAIHook

        return DocumentAIHook(
            gcp_conn_id=self.gcp_conn_id,
            impersonation_chain=self.impersonation_chain,
            api_endpoint=self.api_endpoint,
            transport=self.transport,
        )

    def processor_name(self, hook: DocumentAIHook) -> str:
        project = self.project_id or hook.project_id
        return hook.processor_name(project, self.location, self.processor_id, self.processor_version)


class DocumentAIBatchProcessOperator(_DocumentAIOperator):
    """Run a Document AI processor (e.g. the Layout Parser) in batch over ``gs://`` documents.

    :param processor_id: the processor's id (the last part of its resource name).
    :param gcs_output_uri: the ``gs://`` folder Document AI writes to; each input's JSON shards
        land in ``<gcs_output_uri>/<operation id>/<input index>/``.
    :param gcs_input_uris: the ``gs://`` documents (a list, or a string: JSON list / comma-separated).
    :param gcs_input_prefix: or a ``gs://`` prefix: its objects with a known extension are listed
        through the same connection and submitted by name (so they can be split and mapped).
    :param project_id: the processor's project (default: the connection's project).
    :param location: the processor's location (``us``/``eu``/…).
    :param processor_version: optional version id (default: the processor's default version).
    :param page_counts: optional ``{uri: pages}``; inputs over ``max_pages`` are not sent and are
        reported with error_code TOO_MANY_PAGES.
    :param max_files_per_request: 5,000 for the Layout Parser.
    :param max_pages: 500 for the Layout Parser.
    :param poll_interval: seconds between polls of the operations.
    :param max_poll_failures: consecutive transient poll failures tolerated per operation.
    :param deferrable: wait on the triggerer instead of polling in the worker (default: Airflow's
        ``[operators] default_deferrable``).
    :param gcp_conn_id, impersonation_chain: the Google connection, as in provider operators.
    :param api_endpoint, transport: passed to :class:`DocumentAIHook` (tests, private endpoints).

    Returns (XCom) one dict per input: ``{"input_uri", "output_uri", "operation", "status_code",
    "status_message", "ok", "error_code"}`` (see ``map_results``).
    """

    template_fields: Sequence[str] = (
        "project_id",
        "location",
        "processor_id",
        "processor_version",
        "gcs_input_uris",
        "gcs_input_prefix",
        "gcs_output_uri",
        "gcp_conn_id",
        "impersonation_chain",
    )
    ui_color = "#c9daf8"

    def __init__(
        self,
        *,
        processor_id: str,
        gcs_output_uri: str,
        gcs_input_uris: str | Sequence[str] | None = None,
        gcs_input_prefix: str | None = None,
        project_id: str | None = None,
        location: str = "us",
        processor_version: str | None = None,
        page_counts: Mapping[str, int] | None = None,
        max_files_per_request: int = LAYOUT_PARSER_MAX_FILES_PER_BATCH,
        max_pages: int = LAYOUT_PARSER_MAX_PAGES_PER_DOCUMENT,
        poll_interval: float = 30.0,
        max_poll_failures: int = 5,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        transport: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.processor_id = processor_id
        self.gcs_output_uri = gcs_output_uri
        self.gcs_input_uris = gcs_input_uris
        self.gcs_input_prefix = gcs_input_prefix
        self.project_id = project_id
        self.location = location
        self.processor_version = processor_version
        self.page_counts = dict(page_counts or {})
        self.max_files_per_request = max_files_per_request
        self.max_pages = max_pages
        self.poll_interval = poll_interval
        self.max_poll_failures = max_poll_failures
        self.deferrable = deferrable
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.api_endpoint = api_endpoint
        self.transport = transport

    # -- helpers -------------------------------------------------------------------------------

    def input_uris(self) -> list[str]:
        """The documents to process: ``gcs_input_uris``, or the objects under ``gcs_input_prefix``."""
        uris = _as_list(self.gcs_input_uris)
        if bool(uris) == bool(self.gcs_input_prefix):
            raise AirflowException(
                f"{self.task_id}: give exactly one of gcs_input_uris (non-empty) or gcs_input_prefix "
                f"(got {len(uris)} URI(s) and prefix {self.gcs_input_prefix!r})"
            )
        return uris or self.list_prefix(self.gcs_input_prefix or "")

    def list_prefix(self, prefix: str) -> list[str]:
        """The ``gs://`` objects under ``prefix`` that Document AI reads (by extension), sorted; the
        others are counted in the log and left out."""
        from airflow.providers.google.cloud.hooks.gcs import GCSHook

        if not prefix.startswith("gs://") or len(prefix) <= len("gs://"):
            raise AirflowException(f"{self.task_id}: gcs_input_prefix {prefix!r} must look like gs://bucket/folder/")
        bucket, _, blob_prefix = prefix.removeprefix("gs://").partition("/")
        names = GCSHook(gcp_conn_id=self.gcp_conn_id, impersonation_chain=self.impersonation_chain).list(
            bucket, prefix=blob_prefix
        )
        objects = [n for n in names if not n.endswith("/")]
        uris = sorted(f"gs://{bucket}/{n}" for n in objects if mime_type_for(n))
        skipped = len(objects) - len(uris)
        self.log.info("prefix %s: %d document(s), %d other object(s) left out", prefix, len(uris), skipped)
        if not uris:
            raise AirflowException(
                f"{self.task_id}: no document Document AI can read under {prefix} ({skipped} other object(s)): "
                f"check the prefix, or upload the PDFs first"
            )
        return uris

    # -- execution -----------------------------------------------------------------------------

    def execute(self, context: Context) -> list[InputResult] | None:
        if not self.gcs_output_uri.startswith("gs://"):
            raise AirflowException(f"{self.task_id}: gcs_output_uri {self.gcs_output_uri!r} must be a gs:// folder")
        uris = self.input_uris()
        plan = plan_requests(uris, self.page_counts, self.max_files_per_request, self.max_pages)
        rejected = [err.to_dict() for err in plan.rejected]
        for err in plan.rejected:
            self.log.warning("not sent to Document AI: %s (%s)", err.file, err.code)
        if not plan.requests:
            self.log.warning("no document left to send (%d rejected)", len(rejected))
            return map_results([], [], rejected)
        hook = self.get_hook()
        processor = self.processor_name(hook)
        names = []
        for i, request_uris in enumerate(plan.requests, 1):
            name = hook.batch_process_documents(processor, self.gcs_output_uri, gcs_input_uris=request_uris)
            self.log.info("request %d/%d: %d document(s) → operation %s", i, len(plan.requests), len(request_uris), name)
            names.append(name)
        if self.deferrable:
            from docverify_documentai.triggers.document_ai import DocumentAIBatchOperationTrigger

            self.defer(
                trigger=DocumentAIBatchOperationTrigger(
                    operation_names=names,
                    gcp_conn_id=self.gcp_conn_id,
                    impersonation_chain=self.impersonation_chain,
                    api_endpoint=self.api_endpoint,
                    transport=self.transport,
                    poll_interval=self.poll_interval,
                    max_poll_failures=self.max_poll_failures,
                ),
                method_name="execute_complete",
                kwargs={"rejected": rejected},
                timeout=self.execution_timeout,  # the wait counts against the task's time limit
            )
        event = hook.wait_for_operations(names, self.poll_interval, self.max_poll_failures)
        return self.execute_complete(context, event, rejected=rejected)

    def execute_complete(
        self, context: Context, event: OperationsEvent, rejected: list[RejectedInput] | None = None
    ) -> list[InputResult]:
        """Turn the trigger's event into one result per input; raise if an operation failed as a whole."""
        operations = event.get("operations") or []
        if event.get("status") != "success":
            failed = [op for op in operations if op["failed"]]
            if failed:
                lines = "; ".join(
                    f"{op['name']} (state {op['state']}, error {op['error']}{_document_codes(op)})" for op in failed
                )
                raise DocumentAIBatchOperationFailed(
                    f"{self.task_id}: Document AI batch operation(s) failed: {lines}. Fix: check that processor "
                    f"{self.processor_id!r} in {self.location!r} exists and is enabled, that the connection "
                    f"{self.gcp_conn_id!r}'s service account has roles/documentai.apiUser, read access to the "
                    f"inputs and write access to {self.gcs_output_uri}; then clear this task to resubmit"
                )
            name = event.get("operation", "?")
            raise DocumentAIBatchOperationFailed(
                f"{self.task_id}: {event.get('message', 'unknown error')}. The job may still be running: "
                f"look at it with `gcloud documentai operations describe {name}` (or the console), "
                f"then clear this task to poll again or resubmit"
            )
        submitted = _as_list(self.gcs_input_uris) or None  # rendered again on resume: lists every input
        if submitted is not None:
            refused = {r["file"] for r in rejected or []}
            submitted = [u for u in submitted if u not in refused]
        results = map_results(operations, submitted, rejected or [])
        bad = [r for r in results if not r["ok"]]
        for r in bad:
            self.log.warning(
                "document failed: %s (status %s%s%s)", r["input_uri"], r["status_code"],
                f", {r['error_code']}" if r["error_code"] else "", f": {r['status_message']}" if r["status_message"] else "",
            )
        self.log.info(
            "Document AI batch: %d document(s), %d ok, %d failed, %d operation(s)",
            len(results), len(results) - len(bad), len(bad), len(operations),
        )
        return results


class DocumentAIProcessDocumentOperator(_DocumentAIOperator):
    """Process one small document online (synchronously) with a Document AI processor.

    :param processor_id: the processor's id.
    :param input_path: a local path or a URI (``gs://…`` read through the connection; any
        ObjectStoragePath scheme).
    :param output_path: where to write the Document JSON (local path or URI); when None, the Document
        dict itself is returned to XCom (only sensible for small documents).
    :param mime_type: default: from the extension.
    :param max_pages: 15, the Layout Parser's online limit; a larger PDF raises
        :class:`DocumentAIPageLimitError` telling to use :class:`DocumentAIBatchProcessOperator`.

    Returns ``{"input_uri", "output_uri", "pages", "ok": True}`` when ``output_path`` is set, else
    the Document as a proto3-JSON dict.
    """

    template_fields: Sequence[str] = (
        "project_id",
        "location",
        "processor_id",
        "processor_version",
        "input_path",
        "output_path",
        "mime_type",
        "gcp_conn_id",
        "impersonation_chain",
    )
    ui_color = "#c9daf8"

    def __init__(
        self,
        *,
        processor_id: str,
        input_path: str,
        output_path: str | None = None,
        project_id: str | None = None,
        location: str = "us",
        processor_version: str | None = None,
        mime_type: str | None = None,
        max_pages: int = LAYOUT_PARSER_MAX_ONLINE_PAGES,
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        transport: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.processor_id = processor_id
        self.input_path = input_path
        self.output_path = output_path
        self.project_id = project_id
        self.location = location
        self.processor_version = processor_version
        self.mime_type = mime_type
        self.max_pages = max_pages
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.api_endpoint = api_endpoint
        self.transport = transport

    def _path(self, location: str) -> ObjectStoragePath | pathlib.Path:
        if "://" in location and not location.startswith("file://"):
            from airflow.sdk import ObjectStoragePath

            return ObjectStoragePath(location, conn_id=self.gcp_conn_id)
        import pathlib

        return pathlib.Path(location.removeprefix("file://"))

    def execute(self, context: Context) -> dict[str, JsonValue]:
        mime = self.mime_type or mime_type_for(self.input_path)
        if not mime:
            raise AirflowException(
                f"{self.task_id}: cannot tell the MIME type of {self.input_path}: set mime_type= on the operator"
            )
        content = self._path(self.input_path).read_bytes()
        try:
            pages = page_count(content, self.input_path) if mime == "application/pdf" else 1
        except DocumentAIInputError as err:
            raise AirflowException(f"{self.task_id}: {err.message}") from err
        try:
            check_page_limit(self.input_path, pages, self.max_pages, online=True)
        except DocumentAIInputError as err:
            raise DocumentAIPageLimitError(err.message, self.input_path, pages, self.max_pages) from err
        hook = self.get_hook()
        name = self.processor_name(hook)
        document = hook.process_document(name, content, mime)
        self.log.info("processed %s online (%d page(s), %d byte(s)) with %s", self.input_path, pages, len(content), name)
        if not self.output_path:
            return document
        self._path(self.output_path).write_text(json.dumps(document, ensure_ascii=False))
        self.log.info("Document JSON written to %s", self.output_path)
        return {"input_uri": self.input_path, "output_uri": self.output_path, "pages": pages, "ok": True}
