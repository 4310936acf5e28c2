"""The nightly DAG in batch mode (issue 15, Variable docverify_llm_mode=batch) under `airflow dags test`
against the fake Gemini endpoint and its Batch API: both rounds go through the collect tasks, the
provider's batch job operator (deferred: the trigger creates and polls the job) and the ingest
tasks; verify then runs from the verdict cache with no online call and routes every document as
the same night online; a second run creates no batch job."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest
from tests.dags.airflow_env import REPO, airflow_cmd
from tests.dags.test_dag_run import _latest_run_states
from tests.fake_gemini import FakeGemini

pytestmark = pytest.mark.slow

DS = "2026-11-23"
SAMPLES = REPO / "include" / "samples"
DOCS = ("genomic_brca_ngs.pdf", "radiology_iu_101.pdf", "retry_shares.pdf", "retry_shares.classification.json",
        "fax_cover_sheet.pdf")


def run_dag(root: pathlib.Path, fake: FakeGemini, mode: str) -> str:
    env = {"AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT": str(root), "AIRFLOW_VAR_DOCVERIFY_JUDGE": "llm",
           "AIRFLOW_VAR_DOCVERIFY_LLM_MODE": mode, "AIRFLOW_VAR_DOCVERIFY_LLM_BATCH_POLL_S": "1",
           "AIRFLOW_CONN_DOCVERIFY_LLM": json.dumps({"conn_type": "pydanticai_vertex", "extra": {
               "model": "google:gemini-2.5-flash", "api_key": "fake-key", "base_url": fake.base_url}}),
           "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": '{"conn_type": "google_cloud_platform"}',
           "GOOGLE_GEMINI_BASE_URL": fake.base_url}
    proc = airflow_cmd("dags", "test", "clinical_doc_verification", DS, env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    return log


def night(root: pathlib.Path) -> pathlib.Path:
    incoming = root / "incoming" / DS
    incoming.mkdir(parents=True)
    for name in DOCS:
        shutil.copy(SAMPLES / name, incoming / name)
    return root


def report(root: pathlib.Path) -> dict:
    return json.loads((root / "reports" / DS / "batch_report.json").read_text())


def routes(rep: dict) -> dict:
    return {d["doc_id"]: (d["final_decision"], d.get("error")) for d in rep["per_document"]}


def test_a_batch_night_under_airflow_routes_like_online_from_the_cache(airflow_db, tmp_path):
    fake = FakeGemini().start()
    fake.batch_delay_s = 1.5  # PENDING → RUNNING → SUCCEEDED while the trigger polls
    try:
        online_root = night(tmp_path / "online")
        run_dag(online_root, fake, "online")
        online_calls = fake.count
        assert online_calls > 0 and fake.batch_jobs == 0

        root = night(tmp_path / "batch")
        log = run_dag(root, fake, "batch")
        assert fake.count == online_calls  # no online call in batch mode
        assert fake.batch_jobs == 2 and fake.uploads == 2 and fake.downloads == 2 and fake.batch_polls >= 4
        rep = report(root)
        assert routes(rep) == routes(report(online_root))
        assert rep["llm"]["mode"] == "batch" and rep["llm"]["calls"] == 0
        assert rep["llm"]["batch"]["succeeded"] == online_calls and rep["llm"]["batch"]["online_fallback"] == 0
        states = _latest_run_states()
        assert {states[f"llm_batch_{t}_{r}"] for t in ("collect", "job", "ingest") for r in ("classify", "judgments")} \
            == {"success"}, states
        assert "waiting for batches/" in log  # the trigger polled the recorded, running job

        run_dag(root, fake, "batch")  # everything cached: the collect tasks skip, no job, no call
        assert fake.batch_jobs == 2 and fake.count == online_calls
        states = _latest_run_states()
        assert {states[f"llm_batch_{t}_{r}"] for t in ("collect", "job", "ingest") for r in ("classify", "judgments")} \
            == {"skipped"}, states
        assert routes(report(root)) == routes(rep)
    finally:
        fake.stop()
