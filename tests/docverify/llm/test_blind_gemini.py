"""V2's blind reading (ADR 0034) through the real ``google-genai`` client against the loopback fake
Gemini (:mod:`tests.fake_gemini`, ``script_blind``: the script answers the blind reading too): its
request carries the segments and the text but not the classification; a confident other reading is
``INDEPENDENT_READING_DISAGREES``; a 500 is waited out; a malformed body ends incomplete, never
"no issue"; and the unscripted brain (the offline classifier on each segment's pages) agrees with the
offline classification of the same pages."""

from __future__ import annotations

import asyncio
import json

import pytest
from tests.docverify.llm.test_llm_faults import FAST, QUICK_THROTTLE, bundle, classification, judge
from tests.fake_gemini import MALFORMED, SEGMENTS_RE, FakeGemini, error_body, function_call, user_text


@pytest.fixture
def fake():
    server = FakeGemini().start()
    yield server
    server.stop()


def reading(doc_type: str, probability: float):
    def reply(body: dict) -> dict:
        segments = json.loads(SEGMENTS_RE.search(user_text(body)).group(1))
        return function_call(body, {"segment_readings": [
            {"segment_index": s["segment_index"], "doc_type": doc_type, "probability": probability,
             "reason": "a microscopic description and a final diagnosis"} for s in segments]})
    return reply


NO_FINDINGS = (200, lambda body: function_call(body, {"findings": []}))


def test_a_blind_reading_through_google_genai(fake):
    cls = classification(fake)  # the brain: the offline classifier (Pathology Report)
    fake.requests.clear()
    fake.script_blind = True
    fake.script = [(200, reading("Genomic Report", 0.9)), NO_FINDINGS]
    result = asyncio.run(judge(fake).judge("V2", bundle(), cls))
    assert fake.kinds() == ["V2_BLIND", "V2"]
    blind_text = user_text(fake.requests[0][1])
    assert "<segments>" in blind_text and "<classification>" not in blind_text and "SURGICAL PATHOLOGY" in blind_text
    (issue,) = result.issues
    assert issue.code == "INDEPENDENT_READING_DISAGREES"
    assert "Pathology Report" in issue.message and "Genomic Report" in issue.message and "0.90" in issue.message
    assert result.usage.llm_calls == 2


def test_a_500_on_the_blind_reading_is_waited_out(fake):
    cls = classification(fake)
    fake.requests.clear()
    fake.script_blind = True
    fake.script = [(500, error_body(500, "INTERNAL", "An internal error has occurred.")),
                   (200, reading("Pathology Report", 0.95)), NO_FINDINGS]
    result = asyncio.run(judge(fake).judge("V2", bundle(), cls))
    assert result.issues == [] and fake.kinds() == ["V2_BLIND", "V2_BLIND", "V2"]


def test_a_malformed_blind_reading_is_incomplete(fake):
    cls = classification(fake)
    fake.requests.clear()
    fake.script_blind = True
    fake.script = [(200, MALFORMED)] * FAST.max_attempts + [NO_FINDINGS]
    result = asyncio.run(judge(fake, throttle=QUICK_THROTTLE).judge("V2", bundle(), cls))
    (issue,) = result.issues
    assert issue.code == "VERIFICATION_INCOMPLETE" and "blind reading" in issue.message


def test_the_brain_reads_the_offline_classifiers_type_so_a_scriptless_night_keeps_its_routes(fake):
    cls = classification(fake)
    result = asyncio.run(judge(fake).judge("V2", bundle(), cls))
    assert result.issues == [] and fake.kinds()[-2:] == ["V2_BLIND", "V2"]
