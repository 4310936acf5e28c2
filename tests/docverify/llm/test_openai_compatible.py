"""Contract test of the judge on an OpenAI-compatible endpoint (ADR 0034): how a hospital that cannot
send PHI out runs it on a self-hosted model (vLLM, Ollama). The real ``openai`` client behind
pydantic-ai's ``OpenAIChatModel`` talks to a loopback server (:mod:`tests.fake_openai`) whose answers
are **built** in the documented Chat Completions shape — the shared corpora hold no recorded OpenAI
answer, so none is replayed here.

Covered: V2's blind reading and a normal judgment end to end (the request carries the output tool
and the fenced text; the answer's tool call becomes issues; usage counts the tokens the body gave),
a 429 and a 500 waited out (ADR 0018's outage family, whatever the provider), a malformed body
retried then ``VERIFICATION_INCOMPLETE``; and the Airflow side: a common-ai ``pydanticai`` connection
(host = the server's ``/v1`` base URL, password = key, extra ``{"model": "openai-chat:<served
name>"}`` or ``"vllm:<served name>"``) gives the model ``config.judge`` runs the judgments on."""

from __future__ import annotations

import asyncio
import json

import pytest
from tests.docverify.llm.test_llm_judge import PAGE1, PAGE2, make_bundle, make_classification
from tests.fake_openai import MALFORMED, RATE_LIMITED, SERVER_ERROR, FakeOpenAI, tool_call, user_text

from docverify.llm.faults import BackoffRetry, ThrottlePolicy
from docverify.llm.judge import LLMJudge

FAST = BackoffRetry(max_attempts=3, initial_wait_s=0.01, max_wait_s=0.05)
QUICK = ThrottlePolicy(max_wait_s=5, initial_wait_s=0.01, max_backoff_s=0.05)
SERVED = "Qwen/Qwen2.5-7B-Instruct"  # a name as vLLM serves it; nothing here depends on it


@pytest.fixture
def fake():
    server = FakeOpenAI().start()
    yield server
    server.stop()


def model_on(fake: FakeOpenAI):
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(SERVED, provider=OpenAIProvider(base_url=fake.base_url, api_key="local-key"))


def judge_on(fake: FakeOpenAI, **kw) -> LLMJudge:
    kw.setdefault("retry_policy", FAST)
    kw.setdefault("throttle", QUICK)
    kw.setdefault("blind_reading", "before")  # both of V2's calls (the default asks blind instead)
    return LLMJudge(model_on(fake), f"openai:{SERVED}", **kw)


def blind_brain(readings: dict[int, tuple[str, float]]):
    """Answers the blind reading with ``readings`` (segment → type, probability), a judgment with no findings."""
    def brain(body: dict) -> dict:
        params = json.dumps(body["tools"][0]["function"].get("parameters") or {})
        if "segment_readings" not in params:
            return tool_call(body, {"findings": []})
        segments = json.loads(user_text(body).split("<segments>\n", 1)[1].split("\n</segments>", 1)[0])
        return tool_call(body, {"segment_readings": [
            {"segment_index": s["segment_index"], "doc_type": readings.get(s["segment_index"], ("Other", 0.1))[0],
             "probability": readings.get(s["segment_index"], ("Other", 0.1))[1], "reason": "what the text is"}
            for s in segments]}, prompt_tokens=700, completion_tokens=60)
    return brain


@pytest.mark.slow
def test_v2_blind_then_judgment_through_the_real_openai_client(fake):
    fake.brain = blind_brain({2: ("Radiology Report", 0.88)})
    result = asyncio.run(judge_on(fake).judge("V2", make_bundle(PAGE1, PAGE2), make_classification()))
    assert fake.kinds() == ["V2_BLIND", "judgment"]
    (path, blind), (_, labelled) = fake.requests
    assert path == "/v1/chat/completions" and blind["model"] == SERVED
    assert blind["tools"][0]["type"] == "function" and "<classification>" not in user_text(blind)
    assert "<segments>" in user_text(blind) and PAGE2.splitlines()[0] in user_text(blind)
    assert "<classification>" in user_text(labelled)
    assert any(m["role"] == "system" for m in blind["messages"])  # the shared system instructions
    (issue,) = result.issues
    assert issue.code == "INDEPENDENT_READING_DISAGREES" and "Radiology Report" in issue.message
    assert "Clinical Note" in issue.message and "0.88" in issue.message
    assert result.implementation == f"llm:openai:{SERVED}"
    assert result.usage.llm_calls == 2 and result.usage.input_tokens >= 700 and result.usage.output_tokens >= 60


def test_a_normal_judgment_with_a_finding(fake):
    finding = {"code": "EVIDENCE_WEAK", "severity": "MAJOR", "message": "The snippet is a header.",
               "location": "segments[1] → Genomic Report", "suggested_fix": "Quote the result line",
               "page": 1, "snippet": "GENOMIC SEQUENCING REPORT"}
    fake.script = [(200, lambda body: tool_call(body, {"findings": [finding]}))]
    result = asyncio.run(judge_on(fake).judge("V4", make_bundle(PAGE1, PAGE2), make_classification()))
    assert [(i.code, i.agent, i.severity) for i in result.issues] == [("EVIDENCE_WEAK", "V4", "MAJOR")]
    assert len(fake.requests) == 1


@pytest.mark.slow
@pytest.mark.parametrize("fault", [RATE_LIMITED, SERVER_ERROR], ids=["429", "500"])
def test_a_429_or_a_500_is_waited_out_then_the_answer(fake, fault):
    fake.script = [fault, fault, fault, fault, (200, lambda body: tool_call(body, {"findings": []}))]
    result = asyncio.run(judge_on(fake).judge("V3", make_bundle(PAGE1, PAGE2), make_classification()))
    assert result.issues == []
    # the openai client's own retries (max_retries) and the judge's: every request reached the server
    assert len(fake.requests) == 5


def test_a_malformed_body_is_retried_then_verification_incomplete(fake):
    fake.script = [(200, MALFORMED)]
    result = asyncio.run(judge_on(fake).judge("V3", make_bundle(PAGE1, PAGE2), make_classification()))
    (issue,) = result.issues
    assert issue.code == "VERIFICATION_INCOMPLETE" and issue.agent == "V3"
    assert len(fake.requests) >= FAST.max_attempts


def test_a_malformed_blind_reading_is_incomplete_and_the_judgment_still_runs(fake):
    fake.script = [(200, MALFORMED), (200, blind_brain({}))]  # one attempt per call: the blind reading's fails
    result = asyncio.run(judge_on(fake, retry_policy=None).judge("V2", make_bundle(PAGE1, PAGE2),
                                                                 make_classification()))
    codes = [i.code for i in result.issues]
    assert codes == ["VERIFICATION_INCOMPLETE"] and "blind reading" in result.issues[0].message
    assert fake.kinds() == ["V2_BLIND", "judgment"]


# --------------------------------------------------------------------------- the Airflow connection


@pytest.mark.parametrize("model", [f"openai-chat:{SERVED}", f"vllm:{SERVED}"])
def test_a_pydanticai_connection_selects_the_openai_compatible_model(monkeypatch, tmp_path, fake, model):
    """The common-ai provider's generic ``pydanticai`` connection type: host = base URL (…/v1),
    password = the key, extra ``model`` = ``openai-chat:<served name>`` (Chat Completions; ``openai:``
    would select the Responses API, which most self-hosted servers do not serve) or
    ``vllm:<served name>``. As docverify_judge_conn_id it judges; the classifier keeps its own."""
    from tests.dags import airflow_env  # noqa: F401  (AIRFLOW_HOME before any Airflow import)
    from tests.fake_gemini import FakeGemini

    from docverify_airflow import config

    gemini = FakeGemini().start()
    fake.brain = blind_brain({})
    try:
        monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", "llm")
        monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path))
        monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_LLM_MAX_ATTEMPTS", "2")
        monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_LLM", json.dumps({
            "conn_type": "pydanticai_vertex",
            "extra": {"model": "google:gemini-2.5-flash", "api_key": "fake-key", "base_url": gemini.base_url}}))
        monkeypatch.setenv("AIRFLOW_CONN_LOCAL_JUDGE", json.dumps({
            "conn_type": "pydanticai", "host": fake.base_url, "password": "local-key", "extra": {"model": model}}))
        monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE_CONN_ID", "local_judge")
        judge = config.judge(config.Settings.load())
        assert isinstance(judge, LLMJudge) and not judge.self_verifying
        assert judge.classifier_model_id == "google:gemini-2.5-flash" and judge.model_id.endswith(SERVED)
        bundle = make_bundle(PAGE1, PAGE2)
        got = asyncio.run(judge.classify(bundle))  # on Gemini
        assert got.implementation == "llm:google:gemini-2.5-flash" and gemini.kinds() == ["classify"]
        result = asyncio.run(judge.judge("V2", bundle, got.classification))  # on the local server
        # V2 asked blind instead of labelled by default (the specification's call budget, ADR 0034)
        assert fake.kinds() == ["V2_BLIND"] and all(k == "classify" for k in gemini.kinds())
        assert result.implementation == f"llm:{judge.model_id}"
        # the jury and the V5 second opinion default to the judge's connection
        monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_V5_SECOND_OPINION", "on")
        assert config.second_opinion(config.Settings.load()).llm.model_id == judge.model_id
        assert config.Settings.load().jury_conns() == ["local_judge"] * 3
    finally:
        gemini.stop()


def test_an_empty_judge_connection_is_the_classifiers_with_a_warning(monkeypatch, tmp_path, caplog):
    from tests.dags import airflow_env  # noqa: F401

    from docverify_airflow import config

    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_JUDGE", "llm")
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_DOCVERIFY_LLM", json.dumps({
        "conn_type": "pydanticai_vertex",
        "extra": {"model": "google:gemini-2.5-flash", "api_key": "fake-key", "base_url": "http://127.0.0.1:9"}}))
    monkeypatch.delenv("AIRFLOW_VAR_DOCVERIFY_JUDGE_CONN_ID", raising=False)
    with caplog.at_level("WARNING", logger="docverify_airflow.config"):
        judge = config.judge(config.Settings.load())
    assert isinstance(judge, LLMJudge) and judge.self_verifying and judge.classifier is None
    assert any("verified by its own model" in r.getMessage() and "docverify_judge_conn_id" in r.getMessage()
               for r in caplog.records)
