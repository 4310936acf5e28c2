"""Batch mode's job step (issue 15): the Google provider's :class:`GenAIGeminiCreateBatchJobOperator`,
deferrable (a Gemini batch job can take up to 24 hours; the wait is on the triggerer, not a worker
slot), told by the upstream ``llm_batch_collect_<round>`` task (XCom → templated ``model`` and
``input_source``: the uploaded requests file's name) what to send. The requests never cross XCom or
the trigger's arguments — only the Files API name of the uploaded JSONL does; the results stay on
the Files API (``retrieve_result`` off) and the ingest task downloads them, so no local path is
passed between tasks.

The provider's operator module imports ``google-genai`` at import time, which the DAG file must not
do (a task process parses it every time: ``tests/dags/test_dag_integrity.py``). So the DAG's task is
this thin operator: at run time it builds the provider's operator and runs its ``execute`` (which
defers to the provider's :class:`GenAIGeminiCreateBatchJobTrigger`: create the job, poll it) and,
when the trigger fires, its ``execute_complete`` (the job, read through the provider's hook, is
the task's XCom). The API key is read from the LLM connection at both moments
(:func:`docverify_airflow.llm_batch.gemini_api_key`), never through XCom. A job that ends FAILED,
EXPIRED or CANCELLED fails this task at once (``AirflowFailException``: another try would create
a second job); ``llm_batch_ingest_<round>`` runs anyway and leaves every request to verify's
online calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException


class NightlyGeminiBatchOperator(BaseOperator):
    """Runs the provider's ``GenAIGeminiCreateBatchJobOperator`` (deferrable) for one round's
    uploaded requests file; polls every ``polling_interval`` seconds (None: Variable
    ``docverify_llm_batch_poll_s``)."""

    template_fields: Sequence[str] = ("model", "input_source")

    def __init__(self, *, model: Any, input_source: Any, polling_interval: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.input_source = input_source
        self.polling_interval = polling_interval

    def provider_operator(self, context: Any):
        from airflow.providers.google.cloud.operators.gen_ai import GenAIGeminiCreateBatchJobOperator

        from docverify_airflow import config, llm_batch

        s = config.settings(context)
        return GenAIGeminiCreateBatchJobOperator(
            task_id=self.task_id, project_id="", location="", model=self.model, input_source=self.input_source,
            gemini_api_key=llm_batch.gemini_api_key(s), gcp_conn_id=llm_batch.GCP_CONN_ID,
            create_batch_job_config={"display_name": f"docverify-{context.get('ds') or ''}-{self.task_id}"},
            deferrable=True, retrieve_result=False, wait_until_complete=False,
            polling_interval=s.llm_batch_poll_s if self.polling_interval is None else self.polling_interval)

    def execute(self, context: Any) -> Any:
        if not self.input_source:
            raise AirflowSkipException("no requests file: nothing to send")
        op = self.provider_operator(context)
        # the provider operator's own execute, inside this task (unwrapped from the executor safeguard
        # that warns about an operator run by another operator): it defers to the provider's trigger
        return type(op).execute.__wrapped__(op, context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") == "error":
            raise AirflowFailException(f"the Gemini batch job did not complete ({event.get('message')}); "
                                       f"verify asks its requests online")
        return self.provider_operator(context).execute_complete(context, event)
