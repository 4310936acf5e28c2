"""The real ``google-genai`` client (pydantic-ai ``GoogleModel``) against a local fake Gemini
endpoint: success, 429-then-success, 500, a malformed body, schema-invalid output, slow answers —
every fault ends in a result (a classification, an issue, or a typed ClassificationError), never
in a silent accept. The one exception that leaves a judgment is ``JudgeThrottled`` (issue 15):
throttling beyond the waiting budget is not a fault of the model and never escalates."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelHTTPError,
    ModelQuotaExceededError,
    ModelRequestRejectedError,
)
from tests.fake_gemini import MALFORMED, FakeGemini, Slow, error_body, function_call

from docverify.domain.models import ClassificationOutput, DocumentBundle, Page
from docverify.judging.judges import JudgeThrottled
from docverify.llm.faults import (
    BackoffRetry,
    ClassificationError,
    ServiceOutage,
    ThrottlePolicy,
    is_throttled,
    is_transient,
)
from docverify.llm.judge import LLMJudge

FAST = BackoffRetry(max_attempts=3, initial_wait_s=0.01, max_wait_s=0.05)
QUICK_THROTTLE = ThrottlePolicy(max_wait_s=0.5, initial_wait_s=0.01, max_backoff_s=0.05)
PAGES = [
    "SURGICAL PATHOLOGY REPORT\nFinal Diagnosis: invasive ductal carcinoma, grade 2.\nSpecimen: left breast core biopsy.",
    "Microscopic description: sheets of atypical cells. Immunohistochemistry: ER positive, PR positive.",
]


def bundle() -> DocumentBundle:
    return DocumentBundle(doc_id="doc_f", file_path="doc_f.pdf", sha256="0" * 64, total_pages=len(PAGES),
                          processing_timestamp="2026-11-21T00:00:00Z", parser="test",
                          pages=[Page(page_num=i + 1, text=t) for i, t in enumerate(PAGES)])


@pytest.fixture
def fake():
    server = FakeGemini().start()
    yield server
    server.stop()


def judge(fake: FakeGemini, **kw) -> LLMJudge:
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="fake-key", base_url=fake.base_url))
    kw.setdefault("retry_policy", FAST)
    kw.setdefault("throttle", QUICK_THROTTLE)
    kw.setdefault("blind_reading", "before")  # V2's labelled call is scripted here (ADR 0034)
    return LLMJudge(model, "gemini-2.5-flash", **kw)


def classification(fake: FakeGemini) -> ClassificationOutput:
    fake.script = []  # the brain: offline classifier over the prompt's pages
    return asyncio.run(judge(fake).classify(bundle())).classification


def findings(*items) -> dict:
    return {"findings": list(items)}


NO_FINDINGS = findings()
OK = (200, lambda body: function_call(body, NO_FINDINGS))


def test_success_carries_usage_and_the_request_is_data_first(fake):
    cls = classification(fake)
    fake.requests.clear()
    fake.script = [(200, lambda b: function_call(b, NO_FINDINGS, prompt_tokens=1500, output_tokens=12,
                                                 cached_tokens=1024))]
    result = asyncio.run(judge(fake).judge("V4", bundle(), cls))
    assert result.issues == [] and result.implementation == "llm:gemini-2.5-flash"
    assert (result.usage.llm_calls, result.usage.input_tokens, result.usage.output_tokens,
            result.usage.cached_tokens) == (1, 1500, 12, 1024)
    path, body = fake.requests[0]
    assert path.endswith("/models/gemini-2.5-flash:generateContent")
    assert body["contents"][0]["parts"][0]["text"].startswith('<document total_pages="2">')
    assert body["generationConfig"]["temperature"] == 0.0


def test_classification_through_the_real_client(fake):
    cls = classification(fake)
    assert cls.classifier == "llm:gemini-2.5-flash"
    assert cls.dominant_type_overall == "Pathology Report"
    assert fake.kinds() == ["classify"]


def test_429_then_success_is_retried(fake):
    cls = classification(fake)
    fake.requests.clear()
    fake.script = [(429, error_body(429, "RESOURCE_EXHAUSTED", "rate limited")), OK]
    result = asyncio.run(judge(fake).judge("V3", bundle(), cls))  # V3: one call (V2 adds its blind reading, ADR 0034); the fault handling is the same for every kind
    assert result.issues == []
    assert len(fake.requests) == 2 and result.usage.llm_calls == 2


def test_classify_429_then_success(fake):
    fake.script = [(429, error_body(429, "RESOURCE_EXHAUSTED")), (200, lambda b: function_call(
        b, {"dominant_type_overall": "Other", "number_of_segments": 1, "segments": [], "document_mixture": [],
            "vendor_signals": [], "self_evaluation": {"confidence": 0.5, "notes": ""}}))]
    result = asyncio.run(judge(fake).classify(bundle()))
    assert result.classification.dominant_type_overall == "Other" and result.usage.llm_calls == 2


# issue 22: this test asserted the old behaviour (a persistent 500/503 ended VERIFICATION_INCOMPLETE
# after FAST.max_attempts): an outage is now waited out like a 429 and then raises ServiceOutage
@pytest.mark.slow
@pytest.mark.parametrize("status,name", [(500, "INTERNAL"), (503, "UNAVAILABLE")])
def test_persistent_outage_raises_service_outage_not_incomplete(fake, status, name):
    cls = classification(fake)
    fake.requests.clear()
    fake.script = [(status, error_body(status, name))]
    with pytest.raises(ServiceOutage):
        asyncio.run(judge(fake).judge("V3", bundle(), cls))
    assert len(fake.requests) > FAST.max_attempts  # waited past the failure budget, within the waiting budget


@pytest.mark.slow
def test_persistent_429_raises_judge_throttled_not_incomplete(fake):
    """Issue 15: a 429 is waited out without spending the failure budget (3 attempts here); when
    the waiting budget is spent the judgment raises JudgeThrottled — never VERIFICATION_INCOMPLETE."""
    cls = classification(fake)
    fake.requests.clear()
    fake.script = [(429, error_body(429, "RESOURCE_EXHAUSTED", "rate limited"))]
    started = time.perf_counter()
    for agent in ("V3", "V4"):  # V2's labelled call is the same path; its blind reading is answered apart
        with pytest.raises(JudgeThrottled) as info:
            asyncio.run(judge(fake).judge(agent, bundle(), cls))
        assert "doc_f" in str(info.value) and PAGES[0][:20] not in str(info.value)
    assert time.perf_counter() - started < 10
    assert len(fake.requests) > 3 * FAST.max_attempts  # kept trying past the failure budget, within the wait budget
    with pytest.raises(JudgeThrottled):  # classification too: no ClassificationError / CLASSIFICATION_FAILED
        asyncio.run(judge(fake).classify(bundle()))


def test_many_429s_then_success_is_not_a_failure(fake):
    """More 429s than the failure budget's attempts, then an answer: the judgment succeeds."""
    cls = classification(fake)
    fake.requests.clear()
    fake.script = [(429, error_body(429, "RESOURCE_EXHAUSTED"))] * (FAST.max_attempts + 3) + [OK]
    result = asyncio.run(judge(fake, throttle=ThrottlePolicy(max_wait_s=5, initial_wait_s=0.01,
                                                             max_backoff_s=0.02)).judge("V3", bundle(), cls))
    assert result.issues == [] and len(fake.requests) == FAST.max_attempts + 4 == result.usage.llm_calls


def test_a_failure_after_429s_still_escalates(fake):
    """Throttling does not hide a real failure: 429s, then an unreadable body each time →
    VERIFICATION_INCOMPLETE after the failure budget (3 attempts). (Issue 22: was a persistent 500,
    which is now an outage, waited out.)"""
    cls = classification(fake)
    fake.requests.clear()
    fake.script = [(429, error_body(429, "RESOURCE_EXHAUSTED"))] * 2 + [(200, MALFORMED)]
    result = asyncio.run(judge(fake).judge("V2", bundle(), cls))
    assert [i.code for i in result.issues] == ["VERIFICATION_INCOMPLETE"]
    assert result.issues[0].details["error"] != "ModelRateLimitError"
    assert len(fake.requests) == 2 + FAST.max_attempts


def test_daily_quota_exhausted_is_throttled_at_once(fake):
    cls = classification(fake)
    fake.requests.clear()
    body = error_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded for metric: generate_content_free_tier_requests, "
                                                 "limit: 250, model: gemini-2.5-flash. per day")
    body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
        {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
         "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]
    fake.script = [(429, body)]
    with pytest.raises(JudgeThrottled, match="quota exhausted"):
        asyncio.run(judge(fake, throttle=ThrottlePolicy(max_wait_s=60)).judge("V4", bundle(), cls))
    assert len(fake.requests) == 1  # no waiting: a daily quota does not come back within the task


def test_persistent_fault_in_classify_is_a_typed_error(fake):
    fake.script = [(200, MALFORMED)]  # issue 22: was a 500, now an outage (ServiceOutage), not the document's
    with pytest.raises(ClassificationError) as info:
        asyncio.run(judge(fake).classify(bundle()))
    assert info.value.usage.llm_calls == 3 and "doc_f" in str(info.value)
    assert PAGES[0][:20] not in str(info.value)


def test_client_errors_are_not_retried(fake):
    cls = classification(fake)
    fake.requests.clear()
    fake.script = [(400, error_body(400, "INVALID_ARGUMENT", "bad request"))]
    result = asyncio.run(judge(fake).judge("V4", bundle(), cls))
    assert [i.code for i in result.issues] == ["VERIFICATION_INCOMPLETE"]
    assert len(fake.requests) == 1


def test_malformed_body_is_retried_then_incomplete(fake):
    cls = classification(fake)
    fake.requests.clear()
    fake.script = [(200, MALFORMED), OK]
    assert asyncio.run(judge(fake).judge("V2", bundle(), cls)).issues == []
    assert len(fake.requests) == 2
    fake.requests.clear()
    fake.script = [(200, MALFORMED)]
    result = asyncio.run(judge(fake).judge("V2", bundle(), cls))
    assert [i.code for i in result.issues] == ["VERIFICATION_INCOMPLETE"] and len(fake.requests) == 3


def test_schema_invalid_output_is_asked_again_then_incomplete(fake):
    cls = classification(fake)
    bad = findings({"code": "NOT_A_CODE", "severity": "MAJOR", "message": "m", "location": "l", "suggested_fix": "f"})
    fake.requests.clear()
    fake.script = [(200, lambda b: function_call(b, bad)), OK]
    assert asyncio.run(judge(fake, output_retries=1).judge("V4", bundle(), cls)).issues == []
    assert len(fake.requests) == 2
    fake.requests.clear()
    fake.script = [(200, lambda b: function_call(b, bad))]
    result = asyncio.run(judge(fake, output_retries=1).judge("V4", bundle(), cls))
    assert [i.code for i in result.issues] == ["VERIFICATION_INCOMPLETE"]
    assert len(fake.requests) == 2  # schema-invalid output is not a transient fault: no backoff retry on top


@pytest.mark.slow
def test_slow_answer_times_out_and_is_retried(fake):
    cls = classification(fake)
    fake.requests.clear()
    fake.script = [(200, Slow(2.0, function_call({"tools": [{"functionDeclarations": [{"name": "final_result"}]}]},
                                                 NO_FINDINGS))), OK]
    started = time.perf_counter()
    result = asyncio.run(judge(fake, timeout_s=0.5).judge("V2", bundle(), cls))
    assert result.issues == [] and len(fake.requests) == 2
    assert time.perf_counter() - started < 2.0  # the slow answer was abandoned, not awaited

    fake.requests.clear()
    fake.script = [(200, Slow(2.0, {}))]
    result = asyncio.run(judge(fake, timeout_s=0.3).judge("V2", bundle(), cls))
    (issue,) = result.issues
    assert issue.code == "VERIFICATION_INCOMPLETE" and issue.details["error"] == "RunTimedOut"


def test_transient_classification():
    assert is_transient(ModelHTTPError(429, "m")) and is_transient(ModelHTTPError(503, "m"))
    assert is_throttled(ModelHTTPError(429, "m")) and not is_throttled(ModelHTTPError(503, "m"))
    assert not is_throttled(ModelQuotaExceededError("m", "daily quota")) and not is_throttled(TimeoutError())
    assert is_transient(TimeoutError())
    assert is_transient(ModelAPIError("m", "unreadable body")) and is_transient(ConnectionResetError())
    assert not is_transient(ModelHTTPError(400, "m")) and not is_transient(ModelHTTPError(404, "m"))
    assert not is_transient(ValueError("schema")) and not is_transient(RuntimeError("x"))
    assert not is_transient(ModelQuotaExceededError("m", "daily quota"))
    assert not is_transient(ModelRequestRejectedError("m", "blocked"))


def test_backoff_waits_grow_are_jittered_and_capped():
    import tenacity

    policy = BackoffRetry(max_attempts=6, initial_wait_s=1.0, max_wait_s=8.0)

    class State:
        def __init__(self, n, exc=None):
            self.attempt_number = n
            self.outcome = None
            if exc is not None:
                fut = tenacity.Future(n)
                fut.set_exception(exc)
                self.outcome = fut

    for n in range(1, 7):
        waits = [policy._wait(State(n)) for _ in range(200)]
        assert all(0 <= w <= min(8.0, 2 ** n) for w in waits)
        assert len({round(w, 6) for w in waits}) > 50  # jitter
    # issue 15: a 503 now carries these Retry-After cases (was a 429, which BackoffRetry no longer retries:
    # the judge's ThrottlePolicy waits 429s out without spending attempts — asserted below)
    exc = ModelHTTPError(503, "m")
    exc.retry_after = 5
    assert all(5 <= policy._wait(State(1, exc)) <= 5.5 for _ in range(20))  # Retry-After respected, + jitter
    # issue 11: a long Retry-After is honoured in full (it was cut to max_wait_s), with jitter so
    # documents refused together do not come back in lockstep
    exc.retry_after = 600
    waits = [policy._wait(State(1, exc)) for _ in range(50)]
    assert all(600 <= w <= 660 for w in waits) and len({round(w, 6) for w in waits}) > 25
    assert not policy.should_retry(exc)  # issue 22: a 503 is an outage: the judge waits it out, not this budget
    exc = ModelAPIError("m", "unreadable body")
    exc.retry_after = 600
    assert policy.should_retry(exc)
    exc.retry_after = 3600  # beyond max_retry_after_s: not waited for in the task, not hammered either
    assert not policy.should_retry(exc)
    assert not policy.should_retry(ModelHTTPError(400, "m"))  # deterministic: at once
    assert not policy.should_retry(ModelHTTPError(429, "m"))  # throttling: the judge's, not the failure budget's
    with pytest.raises(ValueError):
        BackoffRetry(max_attempts=0)


def test_a_fallback_group_is_judged_by_its_members():
    """A FallbackExceptionGroup (every model of a fallback connection failed): throttling only when all
    members are 429s; its wait is the shortest Retry-After a member names; nested groups too."""
    from pydantic_ai.exceptions import FallbackExceptionGroup, ModelHTTPError

    from docverify.llm.faults import OUTAGE, _retry_after, fault_family, is_throttled

    def http(status, after=None):
        e = ModelHTTPError(status, "gemini-2.5-flash")
        e.retry_after = after
        return e

    two_429 = FallbackExceptionGroup("all", [http(429, 30.0), http(429, 12.0)])
    assert is_throttled(two_429) and fault_family(two_429) == OUTAGE and _retry_after(two_429) == 12.0
    mixed = FallbackExceptionGroup("all", [http(429, 30.0), http(503)])
    assert not is_throttled(mixed) and fault_family(mixed) == OUTAGE and _retry_after(mixed) == 30.0
    nested = FallbackExceptionGroup("all", [mixed, http(500)])
    assert fault_family(nested) == OUTAGE and _retry_after(nested) == 30.0
    assert _retry_after(FallbackExceptionGroup("all", [http(503), http(500)])) is None
    assert not is_throttled(FallbackExceptionGroup("all", [http(429), http(400)]))
