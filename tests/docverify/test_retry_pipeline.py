"""The retry loop (spec slide 8) and verify_document end to end, on rule phases.

Judgment phases are replaced here by ``RulesOnlyJudge`` (it reports nothing and says so in its
name) to isolate the loop; the offline judge is exercised in test_worked_examples.py.
"""

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from scripts.support.examples import genomic_then_note, mutate, spec_auto_retry

from docverify.domain.codes import make_issue
from docverify.domain.models import VerificationReport
from docverify.judging.judges import Judge, JudgmentResult
from docverify.pipeline.document import verify_document
from docverify.pipeline.retry import MAX_RETRIES, fingerprint, run_loop


class RulesOnlyJudge(Judge):
    name = "test-rules-only"

    async def classify(self, bundle):  # pragma: no cover - not used
        raise NotImplementedError

    async def judge(self, agent, bundle, c):
        return JudgmentResult([], self.name)


def run(b, c, **kw):
    return asyncio.run(verify_document(b, c, RulesOnlyJudge(), **kw))


def test_spec_auto_retry_example():
    b, c = spec_auto_retry()
    r = run(b, c)
    a0, a1 = r.attempts
    assert sorted((i.severity, i.auto_fixable) for i in a0.issues) == [("MAJOR", True), ("MAJOR", True), ("MINOR", False)]
    assert (a0.decision.decision, a0.decision.rule) == ("AUTO_RETRY", 5)
    assert [i.code for i in a1.issues] == ["EVIDENCE_MISSING"]
    assert a1.issues[0].message == "Genomic Report is MENTION_ONLY in segment 2 but has no evidence snippets"
    assert (a1.decision.decision, a1.decision.rule) == ("AUTO_ACCEPT", 6)
    assert (r.final_decision, r.stop_reason) == ("AUTO_ACCEPT", "arbiter")
    assert {f.codes[0] for f in r.fixes_applied} == {"SEGMENT_SHARE_SUM", "MIXTURE_SHARE_SUM"}
    shares = [tc["segment_share"] for tc in r.final_classification["segments"][0]["classifications"]]
    assert abs(sum(shares) - 1) < 1e-9
    assert a0.fingerprint != a1.fingerprint


def test_valid_document_is_accepted_on_attempt_0():
    b, c = genomic_then_note()
    r = run(b, c)
    assert (r.final_decision, r.final_rule, len(r.attempts)) == ("AUTO_ACCEPT", 7, 1)


def test_blocker_escalates_without_retry():
    b, c = genomic_then_note()
    r = run(b, mutate(c, lambda c: c.update(vendor_signals=["Quest Diagnostics"])))
    assert (r.final_decision, r.final_rule, len(r.attempts)) == ("ESCALATE_TO_SME", 1, 1)


def test_schema_invalid_escalates_with_stop_reason():
    b, c = genomic_then_note()
    r = run(b, mutate(c, lambda c: c.pop("segments")))
    assert (r.final_decision, r.stop_reason, r.attempts[0].issues[0].code) == ("ESCALATE_TO_SME", "schema", "SCHEMA_INVALID")


def _report(doc, attempt, issues, fp):
    return VerificationReport(doc_id=doc, attempt=attempt, fingerprint=fp, issues=issues, quality_score=1.0)


def test_still_retry_after_attempt_2_escalates():
    """A verifier that finds a new fixable MAJOR every time: attempts 0, 1, 2, then escalate."""
    b, c = genomic_then_note()
    calls = []

    async def attempt_fn(cls, n):
        calls.append(n)
        # claim a share problem each time; the fixer really changes the shares, so no cycle
        for tc in cls.segments[0].classifications:
            tc.segment_share = tc.segment_share * 1.5 + 0.1
        issue = make_issue("SEGMENT_SHARE_SUM", "x", details={})
        return _report(cls.doc_id, n, [issue.model_copy(update={"issue_id": "V2-0001"})], fingerprint(cls) + str(n))

    r = asyncio.run(run_loop("doc2_6", c, attempt_fn))
    assert calls == [0, 1, 2] and MAX_RETRIES == 2
    assert (r.final_decision, r.stop_reason) == ("ESCALATE_TO_SME", "max_retries")
    assert [a.decision.decision for a in r.attempts] == ["AUTO_RETRY"] * 3


def test_fix_that_changes_nothing_is_a_cycle():
    """A fixable issue whose fixer finds nothing to change: the fingerprint repeats → escalate at once."""
    b, c = genomic_then_note()

    async def attempt_fn(cls, n):
        issue = make_issue("SEGMENT_COUNT_MISMATCH", "claimed", severity="BLOCKER")
        issue = make_issue("SEGMENT_PAGE_COUNT_WRONG", "claimed").model_copy(update={"issue_id": "V1-0001"})
        return _report(cls.doc_id, n, [issue], fingerprint(cls))

    r = asyncio.run(run_loop("doc2_6", c, attempt_fn))
    assert (r.final_decision, r.stop_reason, len(r.attempts)) == ("ESCALATE_TO_SME", "cycle", 1)


def test_fingerprint_sees_every_fixable_field():
    from docverify.domain.models import ClassificationOutput
    _, c = genomic_then_note()
    base = fingerprint(ClassificationOutput.model_validate(c))
    changes = [
        lambda c: c.update(number_of_segments=3),
        lambda c: c["segments"][0].update(segment_page_count=9),
        lambda c: c["segments"][0]["classifications"][0].update(segment_share=0.1),
        lambda c: c["document_mixture"][0].update(overall_share=0.4),
        lambda c: c["segments"][0]["classifications"].pop(),
        lambda c: c["segments"][0]["classifications"][2]["top_evidence"][0].update(page=2),
        lambda c: c["segments"][1].update(dominant_type="Other"),
        lambda c: c["segments"][1].update(page_start=2),
    ]
    fps = {fingerprint(ClassificationOutput.model_validate(mutate(c, ch))) for ch in changes}
    assert base not in fps and len(fps) == len(changes)
    # free text is not part of it
    assert fingerprint(ClassificationOutput.model_validate(mutate(c, lambda c: c["segments"][0].update(reasoning="other")))) == base


share = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(share, min_size=5, max_size=5), st.lists(share, min_size=5, max_size=5),
       st.integers(0, 4), st.booleans())
def test_loop_ends_within_three_attempts(seg_shares, mix_shares, n_segments_claimed, drop_evidence):
    b, c = genomic_then_note()

    def break_it(c):
        for tc, v in zip(c["segments"][0]["classifications"], seg_shares, strict=True):
            tc["segment_share"] = v
        for m, v in zip(c["document_mixture"], mix_shares, strict=True):
            m["overall_share"] = v
        c["number_of_segments"] = n_segments_claimed
        if drop_evidence:
            c["segments"][0]["classifications"][2]["top_evidence"] = []
    r = run(b, mutate(c, break_it))
    assert 1 <= len(r.attempts) <= 3
    assert [a.attempt for a in r.attempts] == list(range(len(r.attempts)))
    assert r.final_decision in ("AUTO_ACCEPT", "ESCALATE_TO_SME")
    if r.final_decision == "AUTO_ACCEPT":
        last = r.attempts[-1].decision
        assert last.blocker_count == last.major_count == 0
