"""docverify_airflow.config.judge(settings): production is configuration. The Variable docverify_judge
switches the judge; the LLM judge's model comes from an Airflow connection of the common-ai
provider (here conn type pydanticai_vertex with a google: model and a base_url on the fake
Gemini endpoint), so the real google-genai client is what calls out."""

from __future__ import annotations

import asyncio
import json

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)
from tests.fake_gemini import FakeGemini


@pytest.fixture
def fake():
    server = FakeGemini().start()
    yield server
    server.stop()


def _conn(base_url: str, model: str = "google:gemini-2.5-flash") -> str:
    return json.dumps({"conn_type": "pydanticai_vertex",
                       "extra": {"model": model, "api_key": "fake-key", "base_url": base_url}})


def test_offline_is_the_default(monkeypatch):
    from docverify.judging.judges import OfflineJudge
    from docverify_airflow import config

    monkeypatch.delenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", raising=False)
    assert isinstance(config.judge(config.Settings.load()), OfflineJudge)


def test_unknown_judge_fails_loudly(monkeypatch):
    from docverify_airflow import config

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", "gemini-please")
    with pytest.raises(ValueError, match="docverify_judge='gemini-please' is not a judge: use one of offline, llm"):
        config.judge(config.Settings.load())


def test_llm_judge_from_the_connection_calls_the_endpoint(monkeypatch, tmp_path, fake):
    from docverify.domain.models import DocumentBundle, Page
    from docverify.llm.judge import LLMJudge
    from docverify_airflow import config

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", "llm")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_LLM", _conn(fake.base_url))
    judge = config.judge(config.Settings.load())
    assert isinstance(judge, LLMJudge)
    assert judge.name == "llm:google:gemini-2.5-flash" and judge.price_model == "gemini-2.5-flash"
    assert judge.retry_policy.max_attempts == 2 and judge.cache is not None

    bundle = DocumentBundle(doc_id="d1", file_path="d1.pdf", sha256="0" * 64, total_pages=1,
                            processing_timestamp="2026-11-21T00:00:00Z", parser="test",
                            pages=[Page(page_num=1, text="CHEST X-RAY REPORT\nImpression: no acute disease.")])
    result = asyncio.run(judge.classify(bundle))
    assert result.classification.classifier == "llm:google:gemini-2.5-flash"
    assert len(fake.requests) == 1 and fake.requests[0][0].endswith("gemini-2.5-flash:generateContent")
    assert list((tmp_path / "cache" / "llm").glob("*.json"))  # the verdict cache lives in the store
    asyncio.run(config.judge(config.Settings.load()).classify(bundle))
    assert len(fake.requests) == 1  # a new judge on the same store: a cache hit, no call


def test_named_connection_and_a_missing_one(monkeypatch, fake):
    from docverify_airflow import config

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", "llm")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_CONN_ID", "gemini_eu")
    monkeypatch.setenv("AIRFLOW_CONN_GEMINI_EU", _conn(fake.base_url, "google:gemini-2.5-pro"))
    assert config.judge(config.Settings.load()).name == "llm:google:gemini-2.5-pro"
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_CONN_ID", "no_such_conn")
    with pytest.raises(ValueError, match="the LLM connection 'no_such_conn' could not give a model"):
        config.judge(config.Settings.load())
