"""Batch mode's Airflow layer (issue 15) against the fake Batch API, without a scheduler: the collect
task uploads the requests through the provider's hook, the job task runs the provider's
GenAIGeminiCreateBatchJobOperator (it defers to the provider's trigger, which creates and polls the
job; the event resumes the task), the ingest task downloads the results file into the verdict cache.
Online mode and a cached night skip; a failed job fails its task and ingest sends everything online."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)
from tests.fake_gemini import FakeGemini

from docverify import batch as B
from docverify.store import ArtifactStore

DS = "2026-11-22"


class TI:
    def __init__(self):
        self.xcom: dict[str, object] = {}

    def xcom_pull(self, task_ids: str, key: str = "return_value"):
        return self.xcom.get(task_ids)

    def xcom_push(self, key, value):  # the provider operator pushes job_name
        pass


@pytest.fixture
def night(monkeypatch, tmp_path, repo_dir):
    fake = FakeGemini().start()
    fake.batch_delay_s = 0.2  # PENDING → RUNNING → SUCCEEDED while the trigger polls
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", "llm")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_MODE", "batch")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path / "store"))
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_LLM", json.dumps(
        {"conn_type": "pydanticai_vertex",
         "extra": {"model": "google:gemini-2.5-flash", "api_key": "fake-key", "base_url": fake.base_url}}))
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", '{"conn_type": "google_cloud_platform"}')
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.base_url)  # google-genai's own base URL variable
    incoming = tmp_path / "store" / "incoming" / DS
    incoming.mkdir(parents=True)
    for name in ("genomic_brca_ngs.pdf", "retry_shares.pdf", "retry_shares.classification.json"):
        shutil.copy(repo_dir / "include" / "samples" / name, incoming / name)
    b = B.Batch(store=ArtifactStore(tmp_path / "store"), ds=DS, run_id="t")
    B.discover(b.fresh())
    B.layout_local(b.fresh(), workers=1, timeout_s=60)
    yield fake, b, {"ds": DS, "run_id": "t", "params": {"reuse_cached": True, "concurrency": 4}, "ti": TI()}
    fake.stop()


def run_job(task_id: str, plan: dict, context: dict):
    """The job task as the task runner drives it: execute defers; the trigger runs; the event resumes it."""
    from airflow.providers.google.cloud.triggers.gen_ai import GenAIGeminiCreateBatchJobTrigger
    from airflow.sdk.exceptions import TaskDeferred

    from docverify_airflow.operators.gemini_batch import NightlyGeminiBatchOperator

    op = NightlyGeminiBatchOperator(task_id=task_id, model=plan["model"], input_source=plan["file_name"],
                                    polling_interval=0)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)
    trigger = deferred.value.trigger
    assert isinstance(trigger, GenAIGeminiCreateBatchJobTrigger) and deferred.value.method_name == "execute_complete"
    assert trigger.input_source == plan["file_name"]  # a file name crosses the trigger, never the requests

    async def first_event():
        async for event in trigger.run():
            return event.payload

    event = asyncio.run(first_event())
    return getattr(op, deferred.value.method_name)(context, event)


def test_two_rounds_through_the_provider_operator_fill_the_cache(night):
    from docverify_airflow import llm_batch as T

    fake, b, context = night
    ti = context["ti"]
    for rnd in ("classify", "judgments"):
        plan = T.collect(context, rnd)
        assert plan["requests"] > 0 and plan["file_name"].startswith("files/") and plan["model"] == "gemini-2.5-flash"
        ti.xcom[f"llm_batch_collect_{rnd}"] = plan
        job = run_job(f"llm_batch_job_{rnd}", plan, context)
        assert job["state"] == "JOB_STATE_SUCCEEDED" and job["dest"]["file_name"]
        ti.xcom[f"llm_batch_job_{rnd}"] = job
        out = T.ingest(context, rnd)
        assert out["succeeded"] == out["requests"] == plan["requests"] and out["online_fallback"] == 0
    assert fake.batch_jobs == 2 and fake.batch_polls >= 4 and fake.count == 0
    # classify for the PDF without a companion; V2-V4 for both documents (judgments need the classification)
    assert sum(1 for _ in (b.store.root / "cache" / "llm").glob("*.json")) == 1 + 3 + 3
    # a re-run: everything cached, the collect tasks skip (no job)
    from airflow.sdk.exceptions import AirflowSkipException

    for rnd in ("classify", "judgments"):
        with pytest.raises(AirflowSkipException, match="verdict cache"):
            T.collect(context, rnd)
    assert fake.batch_jobs == 2


def test_online_mode_skips(night, monkeypatch):
    from airflow.sdk.exceptions import AirflowSkipException

    from docverify_airflow import llm_batch as T

    fake, _b, context = night
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_MODE", "online")
    for fn in (T.collect, T.ingest):
        with pytest.raises(AirflowSkipException, match="online"):
            fn(context, "classify")
    assert fake.uploads == 0


def test_a_failed_job_fails_its_task_and_ingest_leaves_everything_online(night):
    from airflow.sdk.exceptions import AirflowFailException

    from docverify_airflow import llm_batch as T

    fake, b, context = night
    fake.batch_job_fails = True
    plan = T.collect(context, "classify")
    context["ti"].xcom["llm_batch_collect_classify"] = plan
    with pytest.raises(AirflowFailException, match="did not complete"):
        run_job("llm_batch_job_classify", plan, context)
    out = T.ingest(context, "classify")  # all_done_min_one_success: runs after the failed job
    assert out["state"] == "JOB_FAILED" and out["succeeded"] == 0 and out["online_fallback"] == plan["requests"]
    assert not list((b.store.root / "cache" / "llm").glob("*.json"))


def test_a_vertex_connection_without_a_key_is_refused(night, monkeypatch):
    from docverify_airflow import config
    from docverify_airflow import llm_batch as T

    monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_LLM", json.dumps(
        {"conn_type": "pydanticai_vertex", "extra": {"model": "google-cloud:gemini-2.5-flash", "project": "p"}}))
    with pytest.raises(ValueError, match="API key"):
        T.gemini_api_key(config.settings())
