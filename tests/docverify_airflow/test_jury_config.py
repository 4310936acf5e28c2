"""config.jury(settings) / config.second_opinion(settings): off by default (and declared off in
airflow_settings.yaml); switched on by Variables, on models from Airflow connections."""

from __future__ import annotations

import pytest
import yaml
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)
from tests.docverify_airflow.test_judge_config import _conn
from tests.fake_gemini import FakeGemini


@pytest.fixture
def fake():
    server = FakeGemini().start()
    yield server
    server.stop()


def test_off_by_default_and_declared_off(monkeypatch, repo_dir):
    from docverify_airflow import config

    for v in ("JURY", "JURY_CONN_IDS", "V5_SECOND_OPINION"):
        monkeypatch.delenv(f"AIRFLOW_VAR_DOCVERIFY_{v}", raising=False)
    assert config.jury(config.Settings.load()) is None and config.second_opinion(config.Settings.load()) is None
    from docverify_airflow.tasks import wiring

    deps = wiring.verify_deps(config.settings())
    assert deps.jury is None and deps.second_opinion is None
    assert not hasattr(deps.judge, "jury") and not hasattr(deps.judge, "second_opinion")  # never patched on
    declared = {v["variable_name"]: v["variable_value"]
                for v in yaml.safe_load((repo_dir / "airflow_settings.yaml").read_text())["airflow"]["variables"]}
    assert (declared["docverify_jury"], declared["docverify_v5_second_opinion"]) == ("off", "off")
    assert declared["docverify_jury_conn_ids"] == "" and declared["docverify_jury_max_findings"] == "8"


def test_jury_and_second_opinion_from_connections(monkeypatch, tmp_path, fake):
    from docverify_airflow import config

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_LLM", _conn(fake.base_url))
    monkeypatch.setenv("AIRFLOW_CONN_JUROR_PRO", _conn(fake.base_url, "google:gemini-2.5-pro"))
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JURY", "cr_v1")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JURY_CONN_IDS", "docverify_llm, juror_pro, docverify_llm")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_V5_SECOND_OPINION", "on")
    jury = config.jury(config.Settings.load())
    assert jury.version == "v1"
    assert [(j.name, j.llm.model_id, j.kind) for j in jury.jurors] == [
        ("A", "google:gemini-2.5-flash", "JURY"), ("B", "google:gemini-2.5-pro", "JURY"),
        ("C", "google:gemini-2.5-flash", "JURY_EVIDENCE")]
    assert jury.jurors[0].llm is jury.jurors[2].llm  # one LLMJudge per connection
    assert config.second_opinion(config.Settings.load()).llm.model_id == "google:gemini-2.5-flash"
    from docverify_airflow.tasks import wiring

    deps = wiring.verify_deps(config.settings())
    assert deps.jury is not None and deps.second_opinion is not None and not hasattr(deps.judge, "jury")


@pytest.mark.parametrize("var, value, match", [
    ("JURY", "maybe", "not a jury mode"),
    ("JURY_CONN_IDS", "a,b", "three connection ids"),
    ("V5_SECOND_OPINION", "maybe", "is not a switch: use on or off"),
])
def test_bad_values_fail_loudly(monkeypatch, var, value, match):
    from docverify_airflow import config

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JURY", "cr_v2")
    monkeypatch.setenv(f"AIRFLOW_VAR_DOCVERIFY_{var}", value)
    with pytest.raises(ValueError, match=match):
        config.jury(config.Settings.load()) if var != "V5_SECOND_OPINION" else config.second_opinion(config.Settings.load())
