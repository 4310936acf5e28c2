"""The trigger that waits for Document AI batch operations on the triggerer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from airflow.triggers.base import BaseTrigger, TriggerEvent

from docverify_documentai.hooks.document_ai import DocumentAIAsyncHook, is_transient
from docverify_documentai.utils.document_ai import OperationWatch

CLASSPATH = "docverify_documentai.triggers.document_ai.DocumentAIBatchOperationTrigger"


class DocumentAIBatchOperationTrigger(BaseTrigger):
    """Polls one or more Document AI long-running batch operations every ``poll_interval`` seconds
    until all are done (through the async hook; the loop is :class:`OperationWatch`, shared with
    the hook's synchronous wait), then fires one event::

        {"status": "success" | "error", "message": str,
         "operations": [summarize_operation(...) for each operation]}

    ``status`` is ``error`` when an operation failed as a whole, when a poll failed for good, or
    when ``max_poll_failures`` consecutive polls of one operation hit transient errors (429, 5xx,
    timeouts, dropped connections); a transient failure below that bound is logged and retried at
    the next interval. Documents that failed inside a finished operation do not make it an error:
    their statuses travel in ``operations[].statuses``.
    """

    def __init__(
        self,
        operation_names: Sequence[str],
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        api_endpoint: str | None = None,
        transport: str | None = None,
        poll_interval: float = 30.0,
        max_poll_failures: int = 5,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ has no annotations
        if not operation_names:
            raise ValueError("DocumentAIBatchOperationTrigger needs at least one operation name")
        self.operation_names = list(operation_names)
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.api_endpoint = api_endpoint
        self.transport = transport
        self.poll_interval = poll_interval
        self.max_poll_failures = max_poll_failures

    def serialize(self) -> tuple[str, dict[str, str | float | Sequence[str] | None]]:
        return (
            CLASSPATH,
            {
                "operation_names": self.operation_names,
                "gcp_conn_id": self.gcp_conn_id,
                "impersonation_chain": self.impersonation_chain,
                "api_endpoint": self.api_endpoint,
                "transport": self.transport,
                "poll_interval": self.poll_interval,
                "max_poll_failures": self.max_poll_failures,
            },
        )

    def _hook(self) -> DocumentAIAsyncHook:
        return DocumentAIAsyncHook(
            gcp_conn_id=self.gcp_conn_id,
            impersonation_chain=self.impersonation_chain,
            api_endpoint=self.api_endpoint,
            transport=self.transport,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = self._hook()
        watch = OperationWatch(self.operation_names, self.max_poll_failures)
        while True:
            for name in watch.pending:
                try:
                    summary = watch.polled(name, await hook.get_operation(name))
                except Exception as exc:
                    error = watch.poll_failed(name, exc, is_transient(exc))
                    if error:
                        yield TriggerEvent(error)
                        return
                    self.log.warning(
                        "transient error polling %s (%d/%d): %s: %s",
                        name, watch.failures[name], self.max_poll_failures, type(exc).__name__, exc,
                    )
                    continue
                if summary["done"]:
                    self.log.info(
                        "operation %s done: state=%s, %d document status(es)%s",
                        name, summary["state"], len(summary["statuses"]),
                        f", error {summary['error']}" if summary["error"] else "",
                    )
                else:
                    self.log.info("operation %s not done yet (state=%s)", name, summary["state"])
            if watch.done:
                yield TriggerEvent(watch.event())
                return
            await asyncio.sleep(self.poll_interval)
