"""Issue 15: the LLM judge's shared rate limiter and waiting budget come from Variables
(docverify_llm_rpm / _tpm / _limiter_hosts / _throttle_wait_s); two judges built in two tasks of
one machine share one budget (the state file under $AIRFLOW_HOME)."""

from __future__ import annotations

import json

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)
from tests.fake_gemini import FakeGemini

from docverify.stages.common import split


@pytest.fixture
def fake():
    server = FakeGemini().start()
    yield server
    server.stop()


def _llm(monkeypatch, tmp_path, fake):
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", "llm")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path / "store"))
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_LLM", json.dumps(
        {"conn_type": "pydanticai_vertex",
         "extra": {"model": "google:gemini-2.5-flash", "api_key": "fake-key", "base_url": fake.base_url}}))


def test_unlimited_by_default(monkeypatch, tmp_path, fake):
    from docverify_airflow import config

    _llm(monkeypatch, tmp_path, fake)
    judge = config.judge(config.Settings.load())
    assert judge.limiter is None and judge.throttle.max_wait_s == 1200


def test_variables_give_one_shared_limiter(monkeypatch, tmp_path, fake):
    from docverify_airflow import config

    _llm(monkeypatch, tmp_path, fake)
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_RPM", "60")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_TPM", "1000000")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_LIMITER_HOSTS", "2")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_THROTTLE_WAIT_S", "300")
    a, b = config.judge(config.Settings.load()), config.judge(config.Settings.load())  # as two task processes of one night would
    assert a.throttle.max_wait_s == 300
    assert (a.limiter.rpm, a.limiter.tpm, a.limiter.share) == (60, 1000000, 0.5)
    assert a.limiter.path == b.limiter.path and a.limiter.path.parent == tmp_path / "home" / "docverify-llm-limiter"
    assert a.limiter.reserve() == 0.0
    assert b.limiter.reserve() == pytest.approx(60 / (60 * 0.5 * 0.98), abs=0.05)  # b waits for a's slot


@pytest.mark.parametrize("judge,shards", [("offline", 16), ("llm", 3)])
def test_llm_nights_plan_no_more_shards_than_the_llm_pool_has_slots(monkeypatch, tmp_path, judge, shards):
    """More shards than llm slots run in waves and the quota idles while each wave starts (issue 15);
    the offline judge keeps max_shards."""
    from docverify_airflow.tasks import nightly as tasks

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", judge)
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_SHARDS", "3")
    ids = [f"doc{i:03d}" for i in range(160)]
    ctx = {"params": {"shard_size": 10, "max_shards": 16}, "ds": "2026-11-20", "run_id": "r"}
    got = tasks._shards(ctx, lambda batch, size, most, limit: split(ids, size, most, limit))
    assert len(got) == shards and sorted(d for s in got for d in s) == ids
    # a nonsense max_shards still fails as such (the cap does not hide it)
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", "llm")
    with pytest.raises(ValueError, match="max_shards"):
        tasks._shards({**ctx, "params": {"max_shards": 5000}}, lambda *a: [])
