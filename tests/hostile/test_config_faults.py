"""Configuration fails loudly: a Variable that cannot be read fails the task naming it (it never
switches the storage root to data/ or the judge to offline); a missing one keeps its documented
default; deterministic failures fail the task at once (not retried), transient ones are left to
Airflow's retries."""

from __future__ import annotations

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)


def _broken_variable_get(key, default=None):
    raise ConnectionError("api server unreachable")


def test_an_unreadable_variable_fails_naming_it(monkeypatch):
    from airflow.sdk import Variable

    from docverify_airflow import config

    real_get = Variable.get
    monkeypatch.setattr(Variable, "get", staticmethod(_broken_variable_get))
    with pytest.raises(config.ConfigUnavailable, match="Variable docverify_storage_root could not be read"):
        config.storage_root(config.Settings.load())
    # the settings are read together (the first unreadable one stops the read): break only the judge's
    monkeypatch.setattr(Variable, "get", staticmethod(
        lambda key, default=None: _broken_variable_get(key) if key == "docverify_judge" else real_get(key)))
    with pytest.raises(config.ConfigUnavailable, match="Variable docverify_judge could not be read"):
        config.judge(config.Settings.load())


def test_a_missing_variable_keeps_its_default(monkeypatch):
    from docverify.judging.judges import OfflineJudge
    from docverify_airflow import config

    monkeypatch.delenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", raising=False)
    monkeypatch.delenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", raising=False)
    assert config.storage_root(config.Settings.load()) == config.REPO / config.DEFAULT_STORAGE_ROOT
    assert isinstance(config.judge(config.Settings.load()), OfflineJudge)


def test_deterministic_failures_fail_at_once_transient_ones_are_retried(monkeypatch, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    from docverify_airflow.tasks import nightly as tasks

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path))
    ctx = {"params": {"batch_prefix": "../../outside_batch"}, "ds": "2026-11-20", "run_id": "r"}
    with pytest.raises(AirflowFailException, match="INPUT_UNSAFE_NAME.*not retried"):
        tasks.discover(dict(ctx))  # each task its own context (a task keeps the settings it read in it)
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", "gemini-please")
    with pytest.raises(AirflowFailException, match="docverify_judge"):
        tasks.verify({**ctx, "params": {}, "ti": type("TI", (), {"map_index": 0})()}, [])
    monkeypatch.delenv("AIRFLOW_VAR_DOCVERIFY_JUDGE")
    # a shard param Airflow could not map (over [core] max_map_length) or a nonsense one: at once
    for params in ({"max_shards": 5000}, {"shard_size": 0}):
        with pytest.raises(AirflowFailException, match="not retried"):
            tasks.plan_shards({**ctx, "params": params})

    @tasks.retry_rule
    def flaky():
        raise ConnectionError("storage unreachable")

    with pytest.raises(ConnectionError):  # not turned into AirflowFailException: Airflow retries it
        flaky()
