"""Batch mode (Variable docverify_llm_mode=batch, issue 15) the way a night lives it: the real
scheduler, dag-processor, triggerer and LocalExecutor of scripts/airflow_stack.py, the fake Gemini
endpoint and its Batch API on loopback. The provider's batch job operator defers to its trigger on
the **triggerer** (not `airflow dags test`'s in-process loop); verify then runs from the verdict
cache with no online call, and every document routes as the same night online (in process, same
fake)."""

from __future__ import annotations

import json

from scripts.airflow_stack import AirflowStack
from tests.batch_stages import copy_samples
from tests.docverify.test_llm_batch import DS, llm_judge, routes, run_night, sample_batch
from tests.fake_gemini import FakeGemini

from docverify.llm.cache import VerdictCache

DAG = "clinical_doc_verification"


def test_a_batch_night_defers_on_the_triggerer_and_routes_like_online(tmp_path, repo_dir):
    fake = FakeGemini().start()
    try:
        b = sample_batch(tmp_path / "online", repo_dir)
        online = run_night(b, llm_judge(fake, VerdictCache(b.store)))
        online_requests = fake.count
        assert online_requests > 0 and fake.batch_jobs == 0

        root = tmp_path / "store"
        copy_samples(root, DS)
        fake.batch_delay_s = 4.0  # PENDING → RUNNING → SUCCEEDED: the trigger polls a few times
        env = {"AIRFLOW_CONN_DOCVERIFY_LLM": json.dumps({"conn_type": "pydanticai_vertex", "extra": {
                   "model": "google:gemini-2.5-flash", "api_key": "fake-key", "base_url": fake.base_url}}),
               "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": '{"conn_type": "google_cloud_platform"}',
               "GOOGLE_GEMINI_BASE_URL": fake.base_url}
        variables = {"docverify_judge": "llm", "docverify_llm_mode": "batch", "docverify_llm_batch_poll_s": "1"}
        with AirflowStack(tmp_path / "home", root, variables=variables, env=env) as stack:
            stack.settle(DAG, timeout=300)  # today's scheduled (empty) night ends first (max_active_runs=1)
            run_id = stack.trigger(DAG, logical_date=f"{DS}T03:00:00Z")
            run = stack.wait_for_run(DAG, run_id, timeout=900)
            states = {ti["task_id"]: ti["state"] for ti in stack.task_instances(DAG, run_id)}
        assert run["state"] == "success", states
        for rnd in ("classify", "judgments"):
            assert states[f"llm_batch_collect_{rnd}"] == states[f"llm_batch_job_{rnd}"] == "success", states
            assert states[f"llm_batch_ingest_{rnd}"] == "success", states
        # the jobs ran on the fake's Batch API, polled by GeminiBatchJobTrigger on the triggerer
        assert fake.batch_jobs == 2 and fake.uploads == 2 and fake.downloads == 2 and fake.batch_polls >= 2
        assert fake.count == online_requests  # no generateContent call in the night: all came from the jobs
        batch_report = json.loads((root / "reports" / DS / "batch_report.json").read_text())
        assert batch_report["llm"]["mode"] == "batch" and batch_report["llm"]["calls"] == 0
        assert routes(batch_report) == routes(online)
    finally:
        fake.stop()
