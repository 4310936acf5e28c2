"""Issue 22 (the LLM part): REAL Gemini / Vertex AI error bodies and blocked answers replayed from a
loopback server through the project's real client path (pydantic-ai ``GoogleModel`` + google-genai via
``GoogleProvider(base_url=...)``, the fake of ``tests/fake_gemini.py`` serving the recorded body).

What each family must end as:

* outage (429 per-minute, 503 overloaded / deadline expired, 500 INTERNAL): waited out; a success after
  it is the judgment; past the waiting budget ``ServiceOutage`` leaves ``verify_attempt(contain_faults=True)``
  (the nightly path): the task fails and Airflow retries it — never ``VERIFICATION_INCOMPLETE``;
* configuration (API_KEY_INVALID, unknown model 404, PERMISSION_DENIED, credentials that cannot refresh):
  ``ConfigurationFault`` on the first answer, naming the connection;
* a daily quota: ``DailyQuotaExhausted`` at once, naming the reset (midnight Pacific time);
* the document's own request (content blocked, MAX_TOKENS without an answer, a 400, a context too long):
  that document's ``VERIFICATION_INCOMPLETE``; the night goes on.

Bodies are read from the shared corpora (``realapi/``, see its README.md), never copied here, except
the one 403 below (no recording in the corpora): its source is named next to it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import pathlib

import pytest
from tests.fake_gemini import FakeGemini, function_call

from docverify.domain.models import ClassificationOutput, DocumentBundle, Page
from docverify.judging.judges import JudgeThrottled
from docverify.llm.faults import (
    CONFIGURATION,
    DAILY_QUOTA,
    DOCUMENT,
    OUTAGE,
    BackoffRetry,
    ClassificationError,
    ConfigurationFault,
    DailyQuotaExhausted,
    ServiceOutage,
    ThrottlePolicy,
    fault_family,
    next_pacific_midnight,
)
from docverify.llm.judge import LLMJudge
from docverify.pipeline.document import verify_attempt

FAST = BackoffRetry(max_attempts=3, initial_wait_s=0.01, max_wait_s=0.05)
#: the waits shrunk for the test: the same policy as the night's, a 3 s budget instead of 1200 s
SHORT = ThrottlePolicy(max_wait_s=3.0, initial_wait_s=0.01, max_backoff_s=0.02)
CONN = "docverify_llm_replay"
PAGES = [
    "SURGICAL PATHOLOGY REPORT\nFinal Diagnosis: invasive ductal carcinoma, grade 2.\nSpecimen: left breast core biopsy.",
    "Microscopic description: sheets of atypical cells. Immunohistochemistry: ER positive, PR positive.",
]

#: 403 PERMISSION_DENIED as quoted in https://github.com/google-gemini/gemini-cli/issues/25607
#: (no 403 is recorded in realapi/errors/errors_from_issues.json)
PERMISSION_DENIED_403 = {"error": {"code": 403, "message": "The caller does not have permission",
                                   "errors": [{"message": "The caller does not have permission",
                                               "domain": "global", "reason": "forbidden"}],
                                   "status": "PERMISSION_DENIED"}}


@pytest.fixture(scope="module")
def realapi(corpora_dir) -> pathlib.Path:
    return pathlib.Path(corpora_dir) / "realapi"


@pytest.fixture(scope="module")
def errors(realapi) -> dict:
    """``realapi/errors/errors_from_issues.json``: {key: {source, status, body}}."""
    return json.loads((realapi / "errors" / "errors_from_issues.json").read_text())


def recorded(errors: dict, key: str) -> tuple[int, dict]:
    entry = errors[key]
    assert entry["source"]  # every replayed body names the public thread it was quoted in
    return entry["status"], entry["body"]


@pytest.fixture
def fake():
    server = FakeGemini().start()
    yield server
    server.stop()


def bundle() -> DocumentBundle:
    return DocumentBundle(doc_id="doc_r", file_path="doc_r.pdf", sha256="0" * 64, total_pages=len(PAGES),
                          processing_timestamp="2026-11-21T00:00:00Z", parser="test",
                          pages=[Page(page_num=i + 1, text=t) for i, t in enumerate(PAGES)])


def model(fake: FakeGemini, name: str = "gemini-2.5-flash"):
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    return GoogleModel(name, provider=GoogleProvider(api_key="fake-key", base_url=fake.base_url))


def judge(fake: FakeGemini, m=None, **kw) -> LLMJudge:
    kw.setdefault("retry_policy", FAST)
    kw.setdefault("throttle", SHORT)
    kw.setdefault("connection", CONN)
    kw.setdefault("blind_reading", "before")  # V2's labelled call is scripted here (ADR 0034)
    return LLMJudge(m if m is not None else model(fake), "gemini-2.5-flash", **kw)


def classification(fake: FakeGemini) -> ClassificationOutput:
    fake.script = []  # the fake's brain: the offline classifier over the prompt's pages
    cls = asyncio.run(judge(fake).classify(bundle())).classification
    fake.requests.clear()
    return cls


OK = (200, lambda body: function_call(body, {"findings": []}))
CLASSIFIED = (200, lambda b: function_call(b, {
    "dominant_type_overall": "Other", "number_of_segments": 1, "segments": [], "document_mixture": [],
    "vendor_signals": [], "self_evaluation": {"confidence": 0.5, "notes": ""}}))

OUTAGE_KEYS = ["err_503_overloaded", "err_500_internal", "err_503_deadline_expired",
               "err_429_bare", "err_429_vertex_dsq", "err_429_help_only"]


# ------------------------------------------------------------------ 1. an outage is a wait, never a verdict

@pytest.mark.parametrize("key", OUTAGE_KEYS)
def test_an_outage_then_a_success_is_the_success(fake, errors, key):
    """errors_from_issues.json[key] answered 5 times (more than FAST's 3 attempts), then an answer."""
    cls = classification(fake)
    status, body = recorded(errors, key)
    fake.script = [(status, body)] * 5 + [OK]
    result = asyncio.run(judge(fake).judge("V3", bundle(), cls))  # V3: one call (V2 adds its blind reading, ADR 0034); the fault handling is the same for every kind
    assert result.issues == [] and len(fake.requests) == 6 == result.usage.llm_calls

    fake.requests.clear()
    fake.script = [(status, body)] * 5 + [CLASSIFIED]  # the classification too: no CLASSIFICATION_FAILED
    assert asyncio.run(judge(fake).classify(bundle())).classification.dominant_type_overall == "Other"


@pytest.mark.slow
@pytest.mark.parametrize("key", ["err_503_overloaded", "err_500_internal", "err_503_deadline_expired"])
def test_an_outage_past_the_budget_fails_the_task_not_the_document(fake, errors, key):
    """errors_from_issues.json[key] for longer than the (shrunk) budget: ServiceOutage leaves the
    nightly path (verify_attempt with contain_faults=True), no VERIFICATION_INCOMPLETE is written."""
    cls = classification(fake)
    fake.script = [recorded(errors, key)]
    j = judge(fake, throttle=ThrottlePolicy(max_wait_s=0.3, initial_wait_s=0.01, max_backoff_s=0.05))
    with pytest.raises(ServiceOutage) as info:
        asyncio.run(verify_attempt(bundle(), cls, j, contain_faults=True))
    assert isinstance(info.value, JudgeThrottled) and "doc_r" in str(info.value)
    assert PAGES[0][:20] not in str(info.value)
    assert len(fake.requests) > FAST.max_attempts  # kept waiting past the old failure budget
    fake.requests.clear()
    with pytest.raises(ServiceOutage):  # and the classifier: not CLASSIFICATION_FAILED
        asyncio.run(j.classify(bundle()))


def test_a_per_minute_quota_asking_26s_is_an_outage_not_a_daily_quota(fake, errors):
    """errors_from_issues.json["err_429_quota_retryinfo_26s"]: QuotaFailure PerMinute + RetryInfo 26s.
    A wait of 26 s exceeds the 3 s test budget: ServiceOutage at once (the task is retried), not
    DailyQuotaExhausted."""
    cls = classification(fake)
    fake.script = [recorded(errors, "err_429_quota_retryinfo_26s")]
    with pytest.raises(ServiceOutage) as info:
        asyncio.run(judge(fake).judge("V4", bundle(), cls))
    assert not isinstance(info.value, DailyQuotaExhausted) and "next wait 2" in str(info.value)
    assert len(fake.requests) == 1


# ------------------------------------------------------------------ 2. configuration faults fail at once

@pytest.mark.parametrize("key", ["err_400_api_key_invalid", "err_404_model_not_found", "err_404_spurious_empty",
                                 "permission_denied_403"])
def test_a_configuration_fault_fails_at_once_naming_the_connection(fake, errors, key):
    """errors_from_issues.json[key] (the 403: PERMISSION_DENIED_403 above): the first answer raises
    ConfigurationFault out of the nightly path; no document is marked, no second request is sent."""
    cls = classification(fake)
    fake.script = [(403, PERMISSION_DENIED_403) if key == "permission_denied_403" else recorded(errors, key)]
    with pytest.raises(ConfigurationFault):  # the classifier: not CLASSIFICATION_FAILED
        asyncio.run(judge(fake).classify(bundle()))
    assert len(fake.requests) == 1
    with pytest.raises(ConfigurationFault) as info:
        asyncio.run(verify_attempt(bundle(), cls, judge(fake), contain_faults=True))
    text = str(info.value)
    assert CONN in text and "docverify_llm_conn_id" in text and "clear the task" in text
    assert "API key not valid" not in text  # the provider's body is not echoed
    assert len(fake.requests) <= 1 + 3  # V2–V4 run concurrently: one request each at most, none repeated


def test_credentials_that_cannot_refresh_are_a_configuration_fault():
    """google.auth's RefreshError (a revoked service-account key) raised by the client as is."""
    from google.auth.exceptions import RefreshError
    from pydantic_ai.models.function import FunctionModel

    def refuse(messages, info):
        raise RefreshError("invalid_grant: Invalid JWT Signature.")

    j = LLMJudge(FunctionModel(refuse), "m", retry_policy=FAST, throttle=SHORT, connection=CONN)
    with pytest.raises(ConfigurationFault, match="cannot be refreshed") as info:
        asyncio.run(j.classify(bundle()))
    assert CONN in str(info.value)


# ------------------------------------------------------------------ 3. a daily quota

def test_a_daily_quota_with_a_quotafailure_fails_at_once_naming_the_reset(fake, errors):
    """errors_from_issues.json["err_429_minute_and_day_violations"]: a PerDay quotaId among the violations."""
    cls = classification(fake)
    fake.script = [recorded(errors, "err_429_minute_and_day_violations")]
    with pytest.raises(DailyQuotaExhausted) as info:
        asyncio.run(verify_attempt(bundle(), cls, judge(fake, throttle=ThrottlePolicy(max_wait_s=60)),
                                   contain_faults=True))
    assert "midnight Pacific" in str(info.value) and info.value.resets_at in str(info.value)
    assert len(fake.requests) <= 3  # V2–V4 concurrently: one request each at most, no waiting


def test_a_daily_quota_said_only_in_words_fails_at_once(fake, errors):
    """errors_from_issues.json["err_429_bare"] with its message changed to say "per day" (no recording
    has a daily message without QuotaFailure): not taken for a per-minute limit."""
    cls = classification(fake)
    status, body = recorded(errors, "err_429_bare")
    body = copy.deepcopy(body)
    body["error"]["message"] = "Quota exceeded: requests per day for gemini-2.5-flash. Try again tomorrow."
    fake.script = [(status, body)]
    with pytest.raises(DailyQuotaExhausted):
        asyncio.run(judge(fake, throttle=ThrottlePolicy(max_wait_s=60)).judge("V4", bundle(), cls))
    assert len(fake.requests) == 1


def test_the_reset_is_the_next_pacific_midnight():
    from datetime import UTC, datetime

    assert next_pacific_midnight(datetime(2026, 11, 25, 1, 0, tzinfo=UTC)) == "2026-11-25T08:00:00Z"  # PST
    assert next_pacific_midnight(datetime(2026, 7, 1, 12, 0, tzinfo=UTC)) == "2026-07-02T07:00:00Z"  # PDT


# ------------------------------------------------------------------ 4. the document's own faults

DOCUMENT_FAULTS = {  # name: (file under realapi/, the keys to the body in it, HTTP status)
    "model_armor_prompt_block": ("gemini/prompt_blocked_model_armor_vertex.json", (), 200),
    "safety_finish": ("gemini/safety_finish_15flash.json", (), 200),
    "prohibited_content": ("errors/prompt_blocked_prohibited_25flash.json", ("body",), 200),
    "max_tokens_no_parts": ("gemini/max_tokens_empty_25pro.json", (), 200),
    "vertex_400": ("gemini/error_400_invalid_argument_vertex.json", (), 400),
    "context_window_400": ("errors/errors_from_issues.json", ("err_400_context_window", "body"), 400),
}


@pytest.mark.parametrize("name", list(DOCUMENT_FAULTS))
def test_a_fault_of_the_documents_own_request_is_its_verification_incomplete(fake, realapi, name):
    path, keys, status = DOCUMENT_FAULTS[name]
    body = json.loads((realapi / path).read_text())
    for k in keys:
        body = body[k]
    cls = classification(fake)
    fake.script = [(status, body)]
    report = asyncio.run(verify_attempt(bundle(), cls, judge(fake), contain_faults=True))  # the night goes on
    incomplete = [i for i in report.issues if i.code == "VERIFICATION_INCOMPLETE"]
    assert {i.agent for i in incomplete} == {"V2", "V3", "V4"}
    with pytest.raises(ClassificationError):  # the classifier: CLASSIFICATION_FAILED for this document
        asyncio.run(judge(fake).classify(bundle()))


# ------------------------------------------------------------------ 5. fallback connections

def test_a_fallback_group_of_outages_is_an_outage_and_is_waited_out(fake, errors):
    """Both models of a FallbackModel answer errors_from_issues.json["err_503_overloaded"] twice, then
    an answer: the FallbackExceptionGroup is an outage, waited out; the judgment is the answer."""
    from pydantic_ai.models.fallback import FallbackModel

    cls = classification(fake)
    fake.script = [recorded(errors, "err_503_overloaded")] * 4 + [OK]
    j = judge(fake, FallbackModel(model(fake), model(fake, "gemini-2.5-pro")))
    result = asyncio.run(j.judge("V2", bundle(), cls))
    assert result.issues == [] and len(fake.requests) == 5


def test_a_fallback_group_with_a_configuration_fault_is_a_configuration_fault(fake, errors):
    """The primary answers errors_from_issues.json["err_400_api_key_invalid"], the fallback
    ["err_503_overloaded"]: any configuration fault in the group makes it one."""
    from pydantic_ai.models.fallback import FallbackModel

    cls = classification(fake)
    fake.script = [recorded(errors, "err_400_api_key_invalid"), recorded(errors, "err_503_overloaded")]
    j = judge(fake, FallbackModel(model(fake), model(fake, "gemini-2.5-pro")))
    with pytest.raises(ConfigurationFault):
        asyncio.run(j.judge("V2", bundle(), cls))


#: pairs of recorded outage bodies (primary, fallback) a FallbackModel's two models answer
GROUP_PAIRS = [("err_429_bare", "err_503_overloaded"), ("err_429_vertex_dsq", "err_503_deadline_expired"),
               ("err_503_overloaded", "err_429_help_only"), ("err_500_internal", "err_429_bare")]


@pytest.mark.parametrize("pair", GROUP_PAIRS, ids="+".join)
def test_a_fallback_group_of_429_and_503_members_is_waited_out_not_incomplete(fake, errors, pair):
    """Both models of a FallbackModel answer recorded 429 / 503 / 500 bodies twice (the
    FallbackExceptionGroup of real pydantic-ai errors), then an answer: the group is an outage, waited
    out; the judgment is the answer, never VERIFICATION_INCOMPLETE."""
    from pydantic_ai.models.fallback import FallbackModel

    cls = classification(fake)
    fake.script = [recorded(errors, pair[0]), recorded(errors, pair[1])] * 2 + [OK]
    j = judge(fake, FallbackModel(model(fake), model(fake, "gemini-2.5-pro")))
    result = asyncio.run(j.judge("V2", bundle(), cls))
    assert result.issues == [] and len(fake.requests) == 5


def test_a_fallback_group_past_the_budget_is_a_service_outage_not_a_verdict(fake, errors):
    """errors_from_issues.json["err_429_quota_retryinfo_26s"] (RetryInfo 26 s, beyond the 3 s test budget) and
    ["err_503_overloaded"]: the group's wait is its members' shortest Retry-After, past the budget a
    ServiceOutage leaves the nightly path — no document is marked."""
    from pydantic_ai.exceptions import FallbackExceptionGroup
    from pydantic_ai.models.fallback import FallbackModel

    from docverify.llm.faults import _retry_after, is_throttled

    cls = classification(fake)
    fake.script = [recorded(errors, "err_429_quota_retryinfo_26s"), recorded(errors, "err_503_overloaded")]
    j = judge(fake, FallbackModel(model(fake), model(fake, "gemini-2.5-pro")))
    with pytest.raises(ServiceOutage):
        asyncio.run(verify_attempt(bundle(), cls, j, contain_faults=True))
    # the group as pydantic-ai raises it, from the same bodies (a fresh fake: the verify run's cancelled
    # calls may still arrive at the first one)
    from pydantic_ai import Agent

    other = FakeGemini().start()
    try:
        other.script = [recorded(errors, "err_429_quota_retryinfo_26s"), recorded(errors, "err_503_overloaded")]
        with pytest.raises(FallbackExceptionGroup) as info:
            asyncio.run(Agent(FallbackModel(model(other), model(other, "gemini-2.5-pro"))).run("x"))
    finally:
        other.stop()
    group = info.value
    assert fault_family(group) == OUTAGE and not is_throttled(group)  # a 503 member: the breaker counts it
    assert _retry_after(group) == pytest.approx(26.0), [(type(x).__name__, getattr(x, "retry_after", None)) for x in group.exceptions]


def test_a_fallback_group_of_429s_only_is_throttling(fake, errors):
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import FallbackExceptionGroup
    from pydantic_ai.models.fallback import FallbackModel

    from docverify.llm.faults import is_throttled

    fake.script = [recorded(errors, "err_429_bare"), recorded(errors, "err_429_vertex_dsq")]
    with pytest.raises(FallbackExceptionGroup) as info:
        asyncio.run(Agent(FallbackModel(model(fake), model(fake, "gemini-2.5-pro"))).run("x"))
    assert fault_family(info.value) == OUTAGE and is_throttled(info.value)


def test_a_fallback_answer_is_priced_by_the_model_that_answered(fake, errors, realapi):
    """The primary answers errors_from_issues.json["err_503_overloaded"], gemini-2.5-pro answers (its
    response says modelVersion gemini-2.5-pro): the call costs gemini-2.5-pro's price, not None and
    not the primary's."""
    from pydantic_ai import Agent
    from pydantic_ai.models.fallback import FallbackModel

    from docverify.llm.cost import answered_price_model, estimate_cost, price_model_of, price_responses
    from docverify.llm.schemas import OUTPUT_TYPES

    usage = json.loads((realapi / "gemini" / "tool_output_25flash_thoughtsig.json")
                       .read_text())["usageMetadata"]
    fb = FallbackModel(model(fake), model(fake, "gemini-2.5-pro"))
    fake.script = [recorded(errors, "err_503_overloaded"),
                   (200, lambda b: {**function_call(b, {"findings": []}), "usageMetadata": usage,
                                    "modelVersion": "gemini-2.5-pro"})]
    result = asyncio.run(Agent(fb, output_type=OUTPUT_TYPES["V2"]).run("x"))
    assert price_model_of(fb) is None  # which model answers is known from the answer only
    cost = price_responses(result.all_messages())
    pro = estimate_cost("gemini-2.5-pro", input_tokens=219, output_tokens=93 + 323)
    flash = estimate_cost("gemini-2.5-flash", input_tokens=219, output_tokens=93 + 323)
    assert cost.model == "gemini-2.5-pro" and cost.usd == pro.usd and cost.usd > flash.usd > 0
    assert answered_price_model(price_model_of(fb), result.all_messages()) == "gemini-2.5-pro"


def test_fault_families_of_groups():
    from pydantic_ai.exceptions import FallbackExceptionGroup, ModelHTTPError

    g = FallbackExceptionGroup("all failed", [ModelHTTPError(503, "a"), ModelHTTPError(429, "b")])
    assert fault_family(g) == OUTAGE
    assert fault_family(FallbackExceptionGroup("x", [ModelHTTPError(503, "a"), ModelHTTPError(401, "b")])) \
        == CONFIGURATION
    assert fault_family(FallbackExceptionGroup("x", [ModelHTTPError(503, "a"), ModelHTTPError(400, "b")])) == DOCUMENT
    assert fault_family(ModelHTTPError(403, "a")) == CONFIGURATION and fault_family(ValueError()) == DOCUMENT
    assert fault_family(ModelHTTPError(429, "a", body={"error": {"message": "daily limit reached"}})) == DAILY_QUOTA


# ------------------------------------------------------------------ 6. the limiter's TPM counts input tokens

def test_the_limiter_charges_input_tokens_only(fake, realapi):
    """Issue 22: Gemini's TPM quota counts input tokens (GenerateContentInputTokensPerModelPerMinute),
    so thought and output tokens are not charged. The answer carries the real usage block of
    gemini/tool_output_25flash_thoughtsig.json (219 prompt / 93 candidates / 323 thoughts)."""
    from docverify.llm.ratelimit import RateLimiter

    usage = json.loads((realapi / "gemini" / "tool_output_25flash_thoughtsig.json").read_text())["usageMetadata"]

    class Spy(RateLimiter):
        tokens = 0

        def reserve(self, tokens=0, **kw):
            Spy.tokens += tokens
            return super().reserve(tokens, **kw)

        def charge(self, *, requests=0, tokens=0):
            Spy.tokens += tokens
            super().charge(requests=requests, tokens=tokens)

    cls = classification(fake)
    fake.script = [(200, lambda b: {**function_call(b, {"findings": []}), "usageMetadata": usage})]
    result = asyncio.run(judge(fake, limiter=Spy("m", tpm=10_000_000)).judge("V3", bundle(), cls))
    assert result.usage.input_tokens == int(usage["promptTokenCount"]) and result.usage.output_tokens > 0
    assert Spy.tokens == int(usage["promptTokenCount"])  # reserved estimate + correction = the input tokens


# ------------------------------------------------------------------ 7. the task boundary

def test_the_task_fails_without_retries_on_configuration_and_daily_quota_only():
    """tasks.retry_rule: ConfigurationFault / DailyQuotaExhausted → AirflowFailException (a retry would
    get the same answer); ServiceOutage propagates as is, so Airflow retries the task."""
    from airflow.sdk.exceptions import AirflowFailException

    from docverify_airflow.tasks import nightly as tasks

    for exc, fails_at_once in ((ConfigurationFault("conn"), True), (DailyQuotaExhausted("quota"), True),
                               (ServiceOutage("outage"), False)):
        @tasks.retry_rule
        def task(exc=exc):
            raise exc

        with pytest.raises(AirflowFailException if fails_at_once else ServiceOutage):
            task()



# ------------------------------------------------------------------ 8. the circuit breaker

def test_the_circuit_breaker_sends_one_probe_at_a_time_during_an_outage(fake):
    """Four judgments at once meet six 503 "The model is overloaded." answers (the status and message of
    errors_from_issues.json["err_503_overloaded"]; in process here, to count the requests in flight
    exactly): after the first failure (threshold 1) only the probe is sent until an answer closes the
    circuit; then everyone goes, and every judgment is the answer."""
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    cls = classification(fake)
    state = {"n": 0, "in": 0, "seen": []}

    async def fn(messages, info):
        state["n"] += 1
        n = state["n"]
        state["in"] += 1
        state["seen"].append((n, state["in"]))
        try:
            await asyncio.sleep(0.02)
            if n <= 6:
                raise ModelHTTPError(503, "m", body={"error": {"code": 503, "status": "UNAVAILABLE",
                                                               "message": "The model is overloaded."}})
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"findings": []})])
        finally:
            state["in"] -= 1

    j = LLMJudge(FunctionModel(fn), "m", retry_policy=FAST, throttle=SHORT, breaker_threshold=1)

    async def night():
        return await asyncio.gather(*(j.judge("V3", bundle(), cls) for _ in range(4)))  # one call each

    results = asyncio.run(night())
    assert all(r.issues == [] for r in results)  # no VERIFICATION_INCOMPLETE
    burst = [inflight for n, inflight in state["seen"] if n <= 4]
    probes = [inflight for n, inflight in state["seen"] if 4 < n <= 7]  # two failing probes, then the answer
    assert max(burst) == 4 and probes == [1, 1, 1]
    assert state["n"] == 4 + 3 + 3 and j._outage_streak == 0 and j._prober is None
