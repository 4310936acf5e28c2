"""Google Document AI hooks in the Google provider's style (the provider has none).

:class:`DocumentAIHook` owns the processor resource names (built and parsed with the client
library's path helpers: ``processor_path``, ``processor_version_path``, ``parse_processor_path``,
``parse_processor_version_path``) and the synchronous wait for batch operations
(:meth:`DocumentAIHook.wait_for_operations`, the same :class:`OperationWatch` loop the trigger
runs asynchronously). It takes its credentials from a Google Cloud connection through the
provider's :class:`GoogleBaseHook` (key file, ADC, impersonation, or ``is_anonymous`` for tests)
and builds ``google.cloud.documentai.DocumentProcessorServiceClient``; :class:`DocumentAIAsyncHook`
is its asynchronous twin for the trigger.

The regional endpoint is ``{location}-documentai.googleapis.com``. It is overridden by the hook's
``api_endpoint`` argument or the connection extra ``documentai_api_endpoint`` — an ``http://`` URL
with the REST transport is how the tests point the real client at a local fake server. The
transport comes from the ``transport`` argument or the extra ``documentai_transport``; the default
is ``rest`` (the path the tests exercise end to end); ``grpc`` also works and gives the trigger the
native asyncio client.

``google.cloud.documentai`` is imported inside methods only: DAG files import operators (and so
this module) at parse time, and that package costs a noticeable part of a second.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.google.common.consts import CLIENT_INFO
from airflow.providers.google.common.hooks.base_google import GoogleBaseAsyncHook, GoogleBaseHook
from pydantic import JsonValue

from docverify_documentai.utils.document_ai import MIME_TYPES, OperationsEvent, OperationWatch, mime_type_for

if TYPE_CHECKING:
    from google.api_core.retry import Retry
    from google.cloud.documentai import (
        DocumentProcessorServiceAsyncClient,
        DocumentProcessorServiceClient,
        ProcessOptions,
    )
    from google.protobuf.message import Message

DEFAULT_LOCATION = "us"
TRANSPORTS = ("rest", "grpc")
EXTRA_API_ENDPOINT = "documentai_api_endpoint"
EXTRA_TRANSPORT = "documentai_transport"

# operation names have no path helper in the client library
_OPERATION_RE = re.compile(r"^projects/[^/]+/locations/(?P<location>[^/]+)/operations/(?P<op_id>[^/]+)$")

# Errors worth another attempt: throttling, unavailability, server faults, deadlines.
TRANSIENT_HTTP_CODES = frozenset({408, 429, 500, 502, 503, 504})


def parse_processor_name(name: str) -> dict[str, str | None]:
    """``projects/<p>/locations/<l>/processors/<id>[/processorVersions/<v>]`` → ``{"project",
    "location", "processor_id", "processor_version" (None without one)}``, by the client
    library's path parsers; anything else raises ValueError."""
    from google.cloud.documentai import DocumentProcessorServiceClient as Client

    parts = Client.parse_processor_version_path(name) or Client.parse_processor_path(name)
    if not parts or "/" in parts["processor"]:
        raise ValueError(
            f"{name!r} is not a Document AI processor name: expected "
            f"projects/<project>/locations/<location>/processors/<id>[/processorVersions/<version>]"
        )
    return {"project": parts["project"], "location": parts["location"], "processor_id": parts["processor"],
            "processor_version": parts.get("processor_version")}


def location_of(resource_name: str) -> str:
    """The location part of a processor, processor-version or operation resource name."""
    match = _OPERATION_RE.match(resource_name)
    if match:
        return match.group("location")
    try:
        return str(parse_processor_name(resource_name)["location"])
    except ValueError:
        raise ValueError(
            f"{resource_name!r} is not a Document AI processor or operation name: expected "
            f"projects/<project>/locations/<location>/processors/<id>[/processorVersions/<v>] "
            f"or projects/<project>/locations/<location>/operations/<id>"
        ) from None


def is_transient(exc: BaseException) -> bool:
    """Whether an API error is worth retrying: 408/429/5xx, a timeout or a dropped connection."""
    code = getattr(exc, "code", None)
    if isinstance(code, int) and code in TRANSIENT_HTTP_CODES:
        return True
    import requests

    return isinstance(exc, TimeoutError | ConnectionError | requests.ConnectionError | requests.Timeout)


def default_retry(initial: float = 1.0, maximum: float = 30.0, timeout: float = 300.0) -> Retry:
    """Exponential backoff with jitter on transient errors (429, 5xx, timeouts), bounded by ``timeout``
    seconds in all. The library's own default retries only 503 and deadline errors."""
    from google.api_core.retry import Retry

    return Retry(predicate=is_transient, initial=initial, maximum=maximum, multiplier=2.0, timeout=timeout)


class DocumentAIHook(GoogleBaseHook):
    """Google Document AI (``documentai.googleapis.com/v1``) through the Google connection.

    :param gcp_conn_id: the Google Cloud connection (credentials, project, extras).
    :param impersonation_chain: optional service account(s) to impersonate, as in every provider hook.
    :param api_endpoint: overrides the regional endpoint (and the connection extra
        ``documentai_api_endpoint``); ``http://host:port`` is allowed with the REST transport.
    :param transport: ``rest`` (default) or ``grpc``; else the extra ``documentai_transport``.
    """

    hook_name = "Google Document AI"

    def __init__(
        self,
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        transport: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(gcp_conn_id=gcp_conn_id, impersonation_chain=impersonation_chain, **kwargs)
        self.api_endpoint = api_endpoint or self._get_field(EXTRA_API_ENDPOINT) or None
        self.transport = (transport or self._get_field(EXTRA_TRANSPORT) or "rest").lower()
        if self.transport not in TRANSPORTS:
            raise ValueError(
                f"Document AI transport {self.transport!r} (connection {gcp_conn_id!r}) is not supported: "
                f"use one of {TRANSPORTS} in the hook argument or the extra {EXTRA_TRANSPORT!r}"
            )
        if self.api_endpoint and "://" in self.api_endpoint and self.transport != "rest":
            raise ValueError(
                f"the Document AI endpoint {self.api_endpoint!r} has a URL scheme, which only the REST "
                f"transport accepts: set {EXTRA_TRANSPORT}='rest' or give host:port"
            )
        self._clients: dict[str, DocumentProcessorServiceClient] = {}

    def endpoint_for(self, location: str) -> str:
        """The API endpoint used for ``location``: the override if any, else the regional one."""
        return self.api_endpoint or f"{location}-documentai.googleapis.com"

    def get_conn(self, location: str = DEFAULT_LOCATION) -> DocumentProcessorServiceClient:
        """The synchronous client for ``location`` (built once per location and cached)."""
        if location not in self._clients:
            from google.cloud.documentai import DocumentProcessorServiceClient

            self._clients[location] = DocumentProcessorServiceClient(
                credentials=self.get_credentials(),
                client_info=CLIENT_INFO,
                client_options=self.get_client_options(api_endpoint_override=self.endpoint_for(location)),
                transport=self.transport,
            )
        return self._clients[location]

    @staticmethod
    def processor_name(project_id: str, location: str, processor_id: str, processor_version: str | None = None) -> str:
        """``projects/…/locations/…/processors/…[/processorVersions/…]`` — the resource every call
        takes (the client library's ``processor_path`` / ``processor_version_path``)."""
        from google.cloud.documentai import DocumentProcessorServiceClient as Client

        if processor_version:
            return Client.processor_version_path(project_id, location, processor_id, processor_version)
        return Client.processor_path(project_id, location, processor_id)

    parse_processor_name = staticmethod(parse_processor_name)

    def process_document(
        self,
        processor_name: str,
        content: bytes,
        mime_type: str = "application/pdf",
        *,
        process_options: ProcessOptions | None = None,
        retry: Retry | None = None,
        timeout: float | None = 300.0,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> dict[str, JsonValue]:
        """Process one document online and return the Document as a proto3-JSON dict (camelCase keys,
        int64 as strings, zero values omitted — exactly what a batch job writes to GCS).

        ``retry`` defaults to :func:`default_retry` (429/5xx/timeouts, exponential backoff with jitter).
        """
        from google.cloud import documentai
        from google.protobuf.json_format import MessageToDict

        request = documentai.ProcessRequest(
            name=processor_name, raw_document=documentai.RawDocument(content=content, mime_type=mime_type)
        )
        if process_options:
            request.process_options = process_options
        client = self.get_conn(location_of(processor_name))
        response = client.process_document(
            request=request, retry=retry or default_retry(), timeout=timeout, metadata=metadata
        )
        return MessageToDict(documentai.Document.pb(response.document))

    def batch_process_documents(
        self,
        processor_name: str,
        gcs_output_uri: str,
        gcs_input_uris: Sequence[str] | None = None,
        gcs_input_prefix: str | None = None,
        *,
        mime_types: dict[str, str] | None = None,
        process_options: ProcessOptions | None = None,
        retry: Retry | None = None,
        timeout: float | None = 120.0,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> str:
        """Start a batch job over a list of ``gs://`` documents or a ``gs://`` prefix (exactly one) and
        return the long-running operation's name. Outputs land in
        ``<gcs_output_uri>/<operation id>/<input index>/…-<shard>.json``.

        ``mime_types`` maps a URI to its MIME type; otherwise the extension decides (:data:`MIME_TYPES`),
        and an unknown extension raises ValueError naming the URI. This call does not split: callers
        respect the 5,000-files limit (see ``plan_requests`` in the operators module).
        """
        if bool(gcs_input_uris) == bool(gcs_input_prefix):
            raise ValueError("give exactly one of gcs_input_uris (a non-empty list) or gcs_input_prefix")
        if not gcs_output_uri.startswith("gs://"):
            raise ValueError(f"gcs_output_uri {gcs_output_uri!r} must be a gs:// folder")
        from google.cloud import documentai

        if gcs_input_uris:
            documents = []
            for uri in gcs_input_uris:
                mime = (mime_types or {}).get(uri) or mime_type_for(uri)
                if not uri.startswith("gs://") or not mime:
                    raise ValueError(
                        f"batch input {uri!r} must be a gs:// object with a known extension "
                        f"({', '.join(sorted(MIME_TYPES))}) or an entry in mime_types"
                    )
                documents.append(documentai.GcsDocument(gcs_uri=uri, mime_type=mime))
            input_config = documentai.BatchDocumentsInputConfig(gcs_documents=documentai.GcsDocuments(documents=documents))
        else:
            input_config = documentai.BatchDocumentsInputConfig(
                gcs_prefix=documentai.GcsPrefix(gcs_uri_prefix=gcs_input_prefix)
            )
        request = documentai.BatchProcessRequest(
            name=processor_name,
            input_documents=input_config,
            document_output_config=documentai.DocumentOutputConfig(
                gcs_output_config=documentai.DocumentOutputConfig.GcsOutputConfig(gcs_uri=gcs_output_uri)
            ),
        )
        if process_options:
            request.process_options = process_options
        client = self.get_conn(location_of(processor_name))
        operation = client.batch_process_documents(
            request=request, retry=retry or default_retry(), timeout=timeout, metadata=metadata
        )
        return str(operation.operation.name)

    def get_operation(
        self,
        name: str,
        *,
        retry: Retry | None = None,
        timeout: float | None = 60.0,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> dict[str, JsonValue]:
        """The long-running operation ``name`` as a proto3-JSON dict: ``name``, ``done`` (always
        present, False when proto3 omitted it), ``error`` ({code, message}) when it failed, and
        ``metadata`` (BatchProcessMetadata: ``state``, ``individualProcessStatuses`` [{inputGcsSource,
        status, outputGcsDestination}]). See :func:`summarize_operation` for the snake_case digest.

        Over REST the answer is parsed with unknown fields ignored (the client library's own
        ``get_operation`` parses strictly: a field Google adds tomorrow would be a ``ParseError``
        that ends the wait), see :func:`get_operation_rest`."""
        client = self.get_conn(location_of(name))
        if self.transport == "rest":
            return (retry or default_retry())(get_operation_rest)(client, name, timeout=timeout, metadata=metadata)
        operation = client.get_operation(
            request={"name": name}, retry=retry or default_retry(), timeout=timeout, metadata=metadata
        )
        return operation_to_dict(operation)

    def wait_for_operations(
        self,
        names: Sequence[str],
        poll_interval: float = 30.0,
        max_poll_failures: int = 5,
        timeout: float | None = None,
    ) -> OperationsEvent:
        """Poll the batch operations ``names`` every ``poll_interval`` seconds until all are done
        and return the final event (the trigger's shape, see :class:`OperationWatch`): a
        transient poll failure is retried at the next interval up to ``max_poll_failures`` in a
        row, any other ends the wait with an error event, as does ``timeout`` seconds without an
        end. Each poll is one attempt: the watch owns the retry policy."""
        from google.api_core.retry import Retry

        watch = OperationWatch(names, max_poll_failures)
        no_retry = Retry(predicate=lambda exc: False)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            for name in watch.pending:
                try:
                    summary = watch.polled(name, self.get_operation(name, retry=no_retry))
                except Exception as exc:
                    error = watch.poll_failed(name, exc, is_transient(exc))
                    if error:
                        return error
                    self.log.warning("transient error polling %s (%d/%d): %s", name, watch.failures[name],
                                     max_poll_failures, type(exc).__name__)
                    continue
                self.log.info("operation %s: done=%s state=%s", name, summary["done"], summary["state"])
            if watch.done:
                return watch.event()
            if deadline is not None and time.monotonic() + poll_interval > deadline:
                return watch.error(watch.pending[0], f"not done after {timeout:g} s (the wait timed out)")
            time.sleep(poll_interval)


def get_operation_rest(
    client: DocumentProcessorServiceClient, name: str, *, timeout: float | None = 60.0,
    metadata: Sequence[tuple[str, str]] = (),
) -> dict[str, JsonValue]:
    """``GET /v1/<name>`` on the REST client's own authorized session and host, parsed into a
    ``google.longrunning.Operation`` with ``ignore_unknown_fields=True`` (also inside the
    BatchProcessMetadata it carries), then :func:`operation_to_dict`. An HTTP error raises the
    library's ``GoogleAPICallError`` subclass, as the client would (so :func:`is_transient` and
    the retry see the same exceptions)."""
    import google.cloud.documentai_v1  # noqa: F401 - registers BatchProcessMetadata for the Any field
    from google.api_core import exceptions as core_exceptions
    from google.longrunning import operations_pb2
    from google.protobuf import json_format

    transport = client._transport
    headers = {key: str(value) for key, value in metadata}
    # the client types its transport as the abstract base; the REST transport has the session
    response = transport._session.get(  # type: ignore[attr-defined]
        f"{transport._host}/v1/{name}", timeout=timeout, headers=headers)
    if response.status_code >= 400:
        raise core_exceptions.from_http_response(response)
    operation = json_format.Parse(response.content, operations_pb2.Operation(), ignore_unknown_fields=True)
    return operation_to_dict(operation)


def operation_to_dict(operation: Message) -> dict[str, JsonValue]:
    """A ``google.longrunning.Operation`` message → proto3-JSON dict with ``done`` always set."""
    import google.cloud.documentai_v1  # noqa: F401 - registers BatchProcessMetadata for the Any field
    from google.protobuf.json_format import MessageToDict

    data: dict[str, JsonValue] = MessageToDict(operation)
    data["done"] = bool(data.get("done", False))
    return data


class DocumentAIAsyncHook(GoogleBaseAsyncHook):
    """Asynchronous Document AI calls for the trigger (runs on the triggerer's event loop).

    With the gRPC transport it uses ``DocumentProcessorServiceAsyncClient``; with REST (the default;
    the library ships no asyncio REST transport) the sync hook's call runs in a worker thread so the
    event loop is never blocked.
    """

    sync_hook_class = DocumentAIHook

    def __init__(
        self,
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        transport: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            gcp_conn_id=gcp_conn_id,
            impersonation_chain=impersonation_chain,
            api_endpoint=api_endpoint,
            transport=transport,
            **kwargs,
        )
        self._async_clients: dict[str, DocumentProcessorServiceAsyncClient] = {}

    async def get_async_client(self, location: str = DEFAULT_LOCATION) -> DocumentProcessorServiceAsyncClient:
        """The asyncio (gRPC) client for ``location``, with the connection's credentials."""
        if location not in self._async_clients:
            from google.cloud.documentai import DocumentProcessorServiceAsyncClient

            sync_hook: DocumentAIHook = await self.get_sync_hook()
            self._async_clients[location] = DocumentProcessorServiceAsyncClient(
                credentials=sync_hook.get_credentials(),
                client_info=CLIENT_INFO,
                client_options=sync_hook.get_client_options(api_endpoint_override=sync_hook.endpoint_for(location)),
            )
        return self._async_clients[location]

    async def get_operation(self, name: str, *, timeout: float | None = 60.0) -> dict[str, JsonValue]:
        """One poll of the operation ``name`` (one attempt: the trigger owns the retry policy)."""
        sync_hook: DocumentAIHook = await self.get_sync_hook()
        if sync_hook.transport == "grpc":
            client = await self.get_async_client(location_of(name))
            operation = await client.get_operation(request={"name": name}, retry=None, timeout=timeout)
            return operation_to_dict(operation)
        from google.api_core.retry import Retry

        no_retry = Retry(predicate=lambda exc: False)
        return await asyncio.to_thread(sync_hook.get_operation, name, retry=no_retry, timeout=timeout)
