"""Batch mode's job step (issue 15): the Google provider's :class:`GenAIGeminiCreateBatchJobOperator`,
deferrable (a Gemini batch job can take up to 24 hours; the wait is on the triggerer, not a worker
slot), told by the upstream ``llm_batch_collect_<round>`` task (XCom → templated ``model`` and
``input_source``: the uploaded requests file's name) what to send. The requests never cross XCom or
the trigger's arguments — only the Files API name of the uploaded JSONL does.

The API key is read from the LLM connection here (:func:`docverify_airflow.llm_batch.gemini_api_key`)
at execute time and again when the task resumes after the deferral — never through XCom. A job that
ends FAILED, EXPIRED or CANCELLED fails this task at once (``AirflowFailException``: another try
would create a second job); the ``llm_batch_ingest_<round>`` task runs anyway (``all_done``) and
leaves every request to verify's online calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.google.cloud.operators.gen_ai import GenAIGeminiCreateBatchJobOperator
from airflow.sdk.exceptions import AirflowFailException


class NightlyGeminiBatchOperator(GenAIGeminiCreateBatchJobOperator):
    """:class:`GenAIGeminiCreateBatchJobOperator`, deferrable, results left on the Files API (the
    ingest task downloads them: no local path is passed between tasks)."""

    template_fields: Sequence[str] = tuple(GenAIGeminiCreateBatchJobOperator.template_fields)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("project_id", "")  # the Gemini API's Batch API is addressed by key, not project
        kwargs.setdefault("location", "")
        kwargs.setdefault("gemini_api_key", "")
        super().__init__(deferrable=True, retrieve_result=False, wait_until_complete=False, **kwargs)

    def _key(self, context: Any) -> None:
        from docverify_airflow import config, llm_batch

        self.gemini_api_key = llm_batch.gemini_api_key(config.settings(context))

    def execute(self, context: Any) -> Any:
        self._key(context)
        ds = context.get("ds") or ""
        self.create_batch_job_config = {"display_name": f"docverify-{ds}-{self.task_id}"}
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") == "error":
            raise AirflowFailException(f"the Gemini batch job did not complete ({event.get('message')}); "
                                       f"verify asks its requests online")
        self._key(context)
        return super().execute_complete(context, event)
