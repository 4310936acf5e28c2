"""Batch mode's job step (ADR 0016): a Gemini batch job through the Google provider's
:class:`GenAIGeminiAPIHook` (:func:`docverify_airflow.tasks.llm_batch.hook`), deferrable (a Gemini batch job
can take up to 24 hours; the wait is on the triggerer, not a worker slot), told by the upstream
``llm_batch_collect_<round>`` task (XCom → templated ``model`` and ``input_source``: the uploaded
requests file's name) what to send. The requests never cross XCom or the trigger's arguments — only
the Files API name of the uploaded JSONL does; the results stay on the Files API and the ingest task
downloads them, so no local path is passed between tasks.

The provider's hook module imports ``google-genai`` at import time, which the DAG file must not do (a
task process parses it every time: ``tests/dags/test_dag_integrity.py``), so the hook is built at run
time, in :meth:`execute` and, when the trigger fires, to read the job (the task's XCom). The operator
uses the hook directly, as a provider operator does (no provider operator built to borrow its hook).
The API key is read from the LLM connection at both moments
(:func:`docverify_airflow.tasks.llm_batch.gemini_api_key`), never through XCom. A job that ends FAILED,
EXPIRED or CANCELLED fails this task at once (``AirflowFailException``: another try would create
a second job); ``llm_batch_ingest_<round>`` runs anyway and leaves every request to verify's
online calls.

A batch job is never lost (ADR 0019). The provider's trigger creates the job inside
the trigger and turns any poll exception into an error event, so one transient error lost a running,
billed job. Here the job is created through the provider's hook and its name recorded in the store
(:func:`docverify_airflow.tasks.llm_batch.record_job`) *before* the task defers, to
:class:`~docverify_airflow.triggers.gemini_batch.GeminiBatchJobTrigger`, which only polls it
(transient poll errors retried; SUCCEEDED without results polled again, bounded). A transient error
event re-attaches (defers again on the same job, :attr:`max_reattach` times; then the task fails
retryably); a retry or a re-run of the task finds the recorded job of the same requests and
re-attaches to it (pending, running or finished) instead of creating another."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from pydantic import JsonValue

if TYPE_CHECKING:
    from airflow.providers.google.cloud.hooks.gen_ai import GenAIGeminiAPIHook
    from airflow.sdk import Context

    from docverify_airflow.triggers.gemini_batch import GeminiBatchEvent, GeminiBatchJobTrigger


class NightlyGeminiBatchOperator(BaseOperator):
    """Creates (or re-attaches to) one round's Gemini batch job for its uploaded requests file and
    waits for it deferred; polls every ``polling_interval`` seconds (None: Variable
    ``docverify_llm_batch_poll_s``)."""

    template_fields: Sequence[str] = ("model", "input_source")

    #: times a transient error event re-attaches within one try before the task fails (retryably)
    max_reattach = 3

    def __init__(self, *, model: str, input_source: str, polling_interval: int | None = None, **kwargs: Any) -> None:
        # model, input_source: templated (the collect task's XCom: the model and the uploaded file's name)
        super().__init__(**kwargs)
        self.model = model
        self.input_source = input_source
        self.polling_interval = polling_interval

    @property
    def round_key(self) -> str:
        return self.task_id.removeprefix("llm_batch_job_")

    def _hook(self, context: Context) -> GenAIGeminiAPIHook:
        """The provider's Gemini API hook on this round's key (:func:`docverify_airflow.tasks.llm_batch.hook`)."""
        from docverify_airflow import config
        from docverify_airflow.tasks import llm_batch

        return llm_batch.hook(config.settings(context), self.round_key)

    def _trigger(self, context: Context, job_name: str) -> GeminiBatchJobTrigger:
        from docverify_airflow import config
        from docverify_airflow.tasks import llm_batch
        from docverify_airflow.triggers.gemini_batch import GeminiBatchJobTrigger

        s = config.settings(context)
        return GeminiBatchJobTrigger(
            job_name=job_name, gemini_api_key=llm_batch.gemini_api_key(s, self.round_key),
            polling_interval=s.llm_batch_poll_s if self.polling_interval is None else self.polling_interval)

    def execute(self, context: Context) -> None:
        from docverify_airflow.tasks import llm_batch
        from docverify_airflow.tasks.nightly import make_batch

        if not self.input_source:
            raise AirflowSkipException("no requests file: nothing to send")
        hook = self._hook(context)
        batch = make_batch(context)
        name = llm_batch.reattachable_job(batch, self.round_key, hook)
        if name:
            self.log.info("re-attaching to the recorded batch job %s (no new job)", name)
        else:
            job = hook.create_batch_job(
                model=self.model, source=self.input_source,
                create_batch_job_config={"display_name": f"docverify-{context.get('ds') or ''}-{self.task_id}"})
            if not job.name:  # the SDK types it optional; the API always names a job it created
                raise AirflowException("the Gemini API created a batch job without a name")
            name = job.name
            llm_batch.record_job(batch, self.round_key, name, source=self.input_source, model=self.model)
            self.log.info("batch job %s created and recorded in the store", name)
        context["ti"].xcom_push(key="job_name", value=name)
        self.defer(trigger=self._trigger(context, name), method_name="execute_complete", kwargs={"reattached": 0})

    def execute_complete(self, context: Context, event: GeminiBatchEvent, reattached: int = 0) -> dict[str, JsonValue]:
        """The job as the Gemini API describes it (``BatchJob.model_dump(mode=\"json\")``), into XCom."""
        if event.get("status") == "error":
            name = event.get("job_name")
            if event.get("transient") and name:
                if reattached < self.max_reattach:
                    self.log.warning("%s: re-attaching to %s (%d/%d)", event.get("message"), name, reattached + 1,
                                     self.max_reattach)
                    self.defer(trigger=self._trigger(context, name),
                               method_name="execute_complete", kwargs={"reattached": reattached + 1})
                raise AirflowException(f"could not follow the Gemini batch job {name} ({event.get('message')}); "
                                       f"it is recorded in the store: a retry of this task re-attaches to it")
            raise AirflowFailException(f"the Gemini batch job did not complete ({event.get('message')}); "
                                       f"verify asks its requests online")
        if event.get("results") is False:
            self.log.warning("batch job %s is SUCCEEDED without results after the bounded re-polls: its requests "
                             "are counted missing and go online", event.get("job_name"))
        job: dict[str, JsonValue] = self._hook(context).get_batch_job(event["job_name"]).model_dump(mode="json")
        return job
