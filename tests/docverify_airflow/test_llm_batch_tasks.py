"""Batch mode's Airflow layer (issue 15) against the fake Batch API, without a scheduler: the collect
task uploads the requests through the provider's hook, the job task creates the job through the
provider's hook, records it in the store and defers to GeminiBatchJobTrigger (which polls it; the
event resumes the task), the ingest task downloads the results file into the verdict cache.
Online mode and a cached night skip; a failed job fails its task and ingest sends everything online.
Issue 22: transient poll errors, a retry or re-run, and SUCCEEDED-before-results never lose the job."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)
from tests.fake_gemini import FakeGemini

from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.stages.layout import layout_local
from docverify.storage.store import ArtifactStore

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
    b = Batch(store=ArtifactStore(tmp_path / "store"), ds=DS, run_id="t")
    discover(b.fresh())
    layout_local(b.fresh(), workers=1, timeout_s=60)
    yield fake, b, {"ds": DS, "run_id": "t", "params": {"reuse_cached": True, "concurrency": 4}, "ti": TI()}
    fake.stop()


def first_event(trigger) -> dict:
    async def run():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(run())


def run_job(task_id: str, plan: dict, context: dict, **trigger_kw):
    """The job task as the task runner drives it: execute creates the job, records it and defers; the
    trigger polls it; the event resumes the task (which may defer again: a re-attach)."""
    from airflow.sdk.exceptions import TaskDeferred

    from docverify_airflow.operators.gemini_batch import NightlyGeminiBatchOperator
    from docverify_airflow.triggers.gemini_batch import GeminiBatchJobTrigger

    op = NightlyGeminiBatchOperator(task_id=task_id, model=plan["model"], input_source=plan["file_name"],
                                    polling_interval=0)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)
    while True:
        trigger = deferred.value.trigger
        assert isinstance(trigger, GeminiBatchJobTrigger) and deferred.value.method_name == "execute_complete"
        assert trigger.job_name.startswith("batches/")  # a job name crosses the trigger, never the requests
        for k, v in trigger_kw.items():
            setattr(trigger, k, v)
        try:
            return getattr(op, deferred.value.method_name)(context, first_event(trigger), **deferred.value.kwargs)
        except TaskDeferred as again:
            deferred = type("D", (), {"value": again})


@pytest.mark.slow
def test_two_rounds_through_the_job_operator_fill_the_cache(night):
    from docverify_airflow.tasks import llm_batch as T

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
    # classify for the PDF without a companion; V2 (read blind instead of labelled, the default: ADR 0034),
    # V3 and V4 for both documents (judgments need the classification)
    assert sum(1 for _ in (b.store.root / "cache" / "llm").glob("*.json")) == 1 + 3 + 3
    # a re-run: everything cached, the collect tasks skip (no job)
    from airflow.sdk.exceptions import AirflowSkipException

    for rnd in ("classify", "judgments"):
        with pytest.raises(AirflowSkipException, match="verdict cache"):
            T.collect(context, rnd)
    assert fake.batch_jobs == 2


def test_online_mode_skips(night, monkeypatch):
    from airflow.sdk.exceptions import AirflowSkipException

    from docverify_airflow.tasks import llm_batch as T

    fake, _b, context = night
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_MODE", "online")
    for fn in (T.collect, T.ingest):
        with pytest.raises(AirflowSkipException, match="online"):
            fn(context, "classify")
    assert fake.uploads == 0


def test_a_failed_job_fails_its_task_and_ingest_leaves_everything_online(night):
    from airflow.sdk.exceptions import AirflowFailException

    from docverify_airflow.tasks import llm_batch as T

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
    from docverify_airflow.tasks import llm_batch as T

    monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_LLM", json.dumps(
        {"conn_type": "pydanticai_vertex", "extra": {"model": "google-cloud:gemini-2.5-flash", "project": "p"}}))
    with pytest.raises(ValueError, match="API key"):
        T.gemini_api_key(config.settings())


# ---------------------------------------------------------------------------------------------
# issue 22 items 3 and 4: a batch job is never lost


def _recorded(b, rnd):
    from docverify.stages import batch_mode as llm_batch

    return b.store.read_json(llm_batch.job_rel(b, rnd))


def test_transient_poll_errors_keep_the_batch(night):
    """503 "The model is overloaded." while polling: retried by the trigger; past its bound, the
    error event re-attaches to the recorded job. One job, every answer from it, nothing online."""
    from docverify_airflow.tasks import llm_batch as T

    fake, b, context = night
    ti = context["ti"]
    plan = T.collect(context, "classify")
    ti.xcom["llm_batch_collect_classify"] = plan
    fake.batch_poll_errors = 5  # the trigger tolerates 2 in a row: two error events, two re-attaches
    job = run_job("llm_batch_job_classify", plan, context, max_poll_failures=3)
    assert job["state"] == "JOB_STATE_SUCCEEDED" and _recorded(b, "classify")["name"] == job["name"]
    ti.xcom["llm_batch_job_classify"] = job
    out = T.ingest(context, "classify")
    assert out["succeeded"] == plan["requests"] and out["online_fallback"] == 0
    assert fake.batch_jobs == 1 and fake.count == 0 and fake.batch_poll_errors == 0


def test_a_retry_or_rerun_reattaches_to_the_recorded_job(night):
    from airflow.sdk.exceptions import AirflowException, TaskDeferred

    from docverify_airflow.operators.gemini_batch import NightlyGeminiBatchOperator
    from docverify_airflow.tasks import llm_batch as T

    fake, b, context = night
    plan = T.collect(context, "classify")
    op = NightlyGeminiBatchOperator(task_id="llm_batch_job_classify", model=plan["model"],
                                    input_source=plan["file_name"], polling_interval=0)
    with pytest.raises(TaskDeferred) as first:
        op.execute(context)
    name = first.value.trigger.job_name
    assert _recorded(b, "classify")["name"] == name and fake.batch_jobs == 1  # recorded before the wait
    # too many transient errors in one try: the task fails retryably (not AirflowFailException) ...
    event = {"status": "error", "transient": True, "job_name": name, "message": "503 UNAVAILABLE"}
    with pytest.raises(AirflowException, match="re-attaches") as failed:
        op.execute_complete(context, event, reattached=op.max_reattach)
    assert type(failed.value).__name__ == "AirflowException"
    # ... and the retry (a fresh operator) re-attaches to the same job instead of creating another
    with pytest.raises(TaskDeferred) as retry:
        NightlyGeminiBatchOperator(task_id="llm_batch_job_classify", model=plan["model"],
                                   input_source=plan["file_name"], polling_interval=0).execute(context)
    assert retry.value.trigger.job_name == name and fake.batch_jobs == 1
    # a re-run whose collect uploads the same requests again: still the same job
    plan2 = T.collect(context, "classify")
    assert plan2["file_name"] != plan["file_name"]
    job = run_job("llm_batch_job_classify", plan2, context)
    assert job["name"] == name and fake.batch_jobs == 1


def test_the_job_task_failed_but_the_recorded_job_succeeded_is_ingested(night):
    from docverify_airflow.tasks import llm_batch as T

    fake, b, context = night
    plan = T.collect(context, "classify")
    context["ti"].xcom["llm_batch_collect_classify"] = plan
    from airflow.sdk.exceptions import TaskDeferred

    from docverify_airflow.operators.gemini_batch import NightlyGeminiBatchOperator

    with pytest.raises(TaskDeferred):
        NightlyGeminiBatchOperator(task_id="llm_batch_job_classify", model=plan["model"],
                                   input_source=plan["file_name"], polling_interval=0).execute(context)
    import time

    time.sleep(fake.batch_delay_s)
    out = T.ingest(context, "classify")  # no job XCom: the task failed (e.g. retries exhausted)
    assert out["succeeded"] == plan["requests"] and out["online_fallback"] == 0 and fake.batch_jobs == 1


def test_succeeded_before_its_results_file_is_polled_again(night):
    from docverify_airflow.tasks import llm_batch as T

    fake, b, context = night
    plan = T.collect(context, "classify")
    context["ti"].xcom["llm_batch_collect_classify"] = plan
    fake.batch_results_late_polls = 2
    job = run_job("llm_batch_job_classify", plan, context)
    assert job["dest"]["file_name"]
    context["ti"].xcom["llm_batch_job_classify"] = job
    out = T.ingest(context, "classify")
    assert out["succeeded"] == plan["requests"] and out["online_fallback"] == 0


def test_the_recorded_real_batches_get_through_the_trigger(night, corpora_dir):
    """The real finished batches.get (ellmer) served verbatim: the trigger reads it as done with its
    results file; the same body without its results file is polled again (bounded), then reported
    without results. The fake's finished job has the recording's fields."""
    from docverify_airflow.triggers.gemini_batch import GeminiBatchJobTrigger

    fake, b, context = night
    real = json.loads((corpora_dir / "realapi" / "batch" / "ellmer_state-capitals-gemini.json").read_text())["batch"]
    name = real["name"]
    fake.jobs_served[name] = real
    trigger = GeminiBatchJobTrigger(job_name=name, gemini_api_key="fake-key", polling_interval=0)
    assert first_event(trigger) == {"status": "success", "message": "Job completed", "job_name": name,
                                    "results": True}
    late = json.loads(json.dumps(real))
    del late["metadata"]["output"], late["response"]
    fake.jobs_served[name] = late
    before = fake.batch_polls
    event = first_event(GeminiBatchJobTrigger(job_name=name, gemini_api_key="fake-key", polling_interval=0,
                                              results_polls=3))
    assert event["status"] == "success" and event["results"] is False and fake.batch_polls - before == 4

    def keys(v, p=""):
        return set().union(*[{p + k} | keys(x, p + k + ".") for k, x in v.items()]) if isinstance(v, dict) else set()

    plan = __import__("docverify_airflow.tasks.llm_batch", fromlist=["collect"]).collect(context, "classify")
    job = run_job("llm_batch_job_classify", plan, context)
    own = fake._job_view(fake.jobs[job["name"]])
    assert keys(own) == keys(real), keys(own) ^ keys(real)


def test_the_job_trigger_serializes_and_tells_transient_poll_errors():
    import importlib

    import httpx
    from google.genai import errors

    from docverify_airflow.triggers.gemini_batch import GeminiBatchJobTrigger, is_transient

    trigger = GeminiBatchJobTrigger(job_name="batches/x", gemini_api_key="k", polling_interval=5, results_polls=2)
    classpath, kwargs = trigger.serialize()
    module, _, cls = classpath.rpartition(".")
    again = getattr(importlib.import_module(module), cls)(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    overloaded = {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                            "status": "UNAVAILABLE"}}
    assert is_transient(errors.ServerError(503, overloaded))
    assert is_transient(errors.ClientError(429, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}))
    assert is_transient(httpx.ConnectError("refused")) and is_transient(TimeoutError())
    assert not is_transient(errors.ClientError(404, {"error": {"code": 404, "status": "NOT_FOUND"}}))
    assert not is_transient(errors.ClientError(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT"}}))
