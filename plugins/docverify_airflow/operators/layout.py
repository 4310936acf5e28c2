"""The nightly DAG's Document AI step: the package's :class:`DocumentAIBatchProcessOperator`, told
by the upstream ``plan_document_ai`` task (XCom → templated fields) what to send — or to skip.
The operator sets none of its templated fields itself (they are rendered again after a deferral);
the Variables are read by the plan (:func:`docverify_airflow.tasks.document_ai.plan`) and the results
reach the ``layout`` task through XCom."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowSkipException

from docverify_documentai.operators.document_ai import DocumentAIBatchProcessOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from docverify_documentai.utils.document_ai import InputResult


class NightlyDocumentAIOperator(DocumentAIBatchProcessOperator):
    """:class:`DocumentAIBatchProcessOperator` that skips itself when ``skip_reason`` (templated)
    is not empty; everything else is the package operator's."""

    template_fields: Sequence[str] = (*DocumentAIBatchProcessOperator.template_fields, "skip_reason", "poll_interval")

    def __init__(self, *, skip_reason: str = "", **kwargs: Any) -> None:
        # skip_reason: templated (the plan's XCom: why no document goes to Document AI, or empty)
        super().__init__(**kwargs)
        self.skip_reason = skip_reason

    def execute(self, context: Context) -> list[InputResult] | None:
        if self.skip_reason:
            raise AirflowSkipException(str(self.skip_reason))
        return super().execute(context)
