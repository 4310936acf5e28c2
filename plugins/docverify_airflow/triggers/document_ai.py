"""The trigger that waits for Document AI batch operations on the triggerer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from docverify_airflow.hooks.document_ai import DocumentAIAsyncHook, is_transient
from docverify_airflow.utils.document_ai import summarize_operation

CLASSPATH = "docverify_airflow.triggers.document_ai.DocumentAIBatchOperationTrigger"


class DocumentAIBatchOperationTrigger(BaseTrigger):
    """Polls one or more Document AI long-running batch operations every ``poll_interval`` seconds
    until all are done, then fires one event::

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
        super().__init__()
        if not operation_names:
            raise ValueError("DocumentAIBatchOperationTrigger needs at least one operation name")
        self.operation_names = list(operation_names)
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.api_endpoint = api_endpoint
        self.transport = transport
        self.poll_interval = poll_interval
        self.max_poll_failures = max_poll_failures

    def serialize(self) -> tuple[str, dict[str, Any]]:
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
        finished: dict[str, dict[str, Any]] = {}
        failures: dict[str, int] = dict.fromkeys(self.operation_names, 0)
        while True:
            for name in self.operation_names:
                if name in finished:
                    continue
                try:
                    summary = summarize_operation(await hook.get_operation(name))
                except Exception as exc:
                    failures[name] += 1
                    if not is_transient(exc):
                        yield TriggerEvent(self._error(name, f"polling failed: {type(exc).__name__}: {exc}"))
                        return
                    if failures[name] >= self.max_poll_failures:
                        yield TriggerEvent(
                            self._error(
                                name,
                                f"{failures[name]} consecutive polls failed, the last with "
                                f"{type(exc).__name__}: {exc}",
                            )
                        )
                        return
                    self.log.warning(
                        "transient error polling %s (%d/%d): %s: %s",
                        name, failures[name], self.max_poll_failures, type(exc).__name__, exc,
                    )
                    continue
                failures[name] = 0
                if summary["done"]:
                    finished[name] = summary
                    self.log.info(
                        "operation %s done: state=%s, %d document status(es)%s",
                        name, summary["state"], len(summary["statuses"]),
                        f", error {summary['error']}" if summary["error"] else "",
                    )
                else:
                    self.log.info("operation %s not done yet (state=%s)", name, summary["state"])
            if len(finished) == len(self.operation_names):
                operations = [finished[n] for n in self.operation_names]
                failed = [op["name"] for op in operations if op["failed"]]
                if failed:
                    message = f"Document AI operation(s) failed as a whole: {', '.join(failed)}"
                    yield TriggerEvent({"status": "error", "message": message, "operations": operations})
                else:
                    docs = sum(len(op["statuses"]) for op in operations)
                    bad = sum(1 for op in operations for s in op["statuses"] if s["status_code"] != 0)
                    message = f"{len(operations)} operation(s) done: {docs} document(s), {bad} failed"
                    yield TriggerEvent({"status": "success", "message": message, "operations": operations})
                return
            await asyncio.sleep(self.poll_interval)

    def _error(self, name: str, reason: str) -> dict[str, Any]:
        """An error event about operation ``name`` whose state is unknown (the poll itself failed)."""
        return {
            "status": "error",
            "message": f"could not follow Document AI operation {name}: {reason}",
            "operations": [],
            "operation": name,
        }
