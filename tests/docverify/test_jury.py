"""The CR_V2 jury over the judgment phases' findings (docverify.arbiters.jury): votes → KEEP / DROP / FLIP
(a fix the retry applies) / FLAG (escalates); only judgment findings go to it; bounded; cached (a
re-run costs no call); a juror's fault is its FLAG vote; off by default changes nothing."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic_ai.models.function import FunctionModel
from tests.docverify.scripted_tools import votes as Voter

from docverify.arbiters.jury import CONFLICT_TYPES, Juror, Jury, flip_target
from docverify.domain.codes import make_issue
from docverify.domain.models import ClassificationOutput, DocumentBundle
from docverify.domain.resources import include_dir
from docverify.judging.judges import JudgmentResult, OfflineJudge
from docverify.llm.cache import InMemoryVerdictCache
from docverify.llm.judge import LLMJudge
from docverify.pipeline.document import VerifyDeps, verify_document

EX = include_dir() / "examples" / "spec_auto_retry"
BUNDLE = DocumentBundle.model_validate(json.loads((EX / "bundle.json").read_text()))
RAW = json.loads((EX / "classification.json").read_text())
CLS = ClassificationOutput.model_validate(RAW)


def llm(fn, name, cache=None):
    return LLMJudge(FunctionModel(fn), name, cache=cache if cache is not None else InMemoryVerdictCache(),
                    retry_policy=None, output_retries=0)


def jury(a, b, c, **kw):
    return Jury([Juror("A", llm(a, "a")), Juror("B", llm(b, "b")), Juror("C", llm(c, "c"), "JURY_EVIDENCE")], **kw)


def finding(code="EVIDENCE_WEAK", agent="V4", **details):
    return make_issue(code, "finding message", agent=agent, location="segments[2] → Genomic Report",
                      details={"page": 3, "doc_type": "Genomic Report", "segment_index": 2, **details})


def review(j, *issues, agent="V4"):
    return asyncio.run(j.review(agent, BUNDLE, CLS, JudgmentResult(list(issues), "offline-test")))


@pytest.mark.parametrize("votes, conflict_code, expected", [
    ((("KEEP", "SUPPORTED_BY_TEXT"),) * 3, "EVIDENCE_WEAK", ("KEEP", None, 1)),
    ((("DROP", "WEAK_EVIDENCE"), ("DROP", "WEAK_EVIDENCE"), ("DROP", "OTHER")), "EVIDENCE_WEAK", ("DROP", None, 1)),
    # C (the evidence facet) alone against a V4 finding: its minority is protected → FLAG
    ((("DROP", "OTHER"), ("DROP", "OTHER"), ("KEEP", "SUPPORTED_BY_TEXT")), "EVIDENCE_WEAK",
     ("FLAG", "FACET_MINORITY_SIGNAL", 1)),
    # … and against a V3 context trap (REDUNDANT_UPPER_REF) too, but not against a V2 finding
    ((("DROP", "OTHER"), ("DROP", "OTHER"), ("KEEP", "OTHER")), "TRAP_CONTEXT", ("FLAG", "FACET_MINORITY_SIGNAL", 1)),
    ((("DROP", "OTHER"), ("DROP", "OTHER"), ("KEEP", "OTHER")), "LABEL_TEXT_MISMATCH", ("DROP", None, 1)),
    ((("FLIP", "NEGATION_SCOPE"), ("DROP", "OTHER"), ("KEEP", "OTHER")), "LABEL_TEXT_MISMATCH", ("FLIP", None, 3)),
    ((("FLIP", "OTHER"), ("DROP", "OTHER"), ("KEEP", "OTHER")), "LABEL_TEXT_MISMATCH", ("FLAG", "TIE_UNRESOLVED", 3)),
])
def test_votes_decide_each_finding(votes, conflict_code, expected):
    agent = {"EVIDENCE_WEAK": "V4", "TRAP_CONTEXT": "V3", "LABEL_TEXT_MISMATCH": "V2"}[conflict_code]
    j = jury(Voter(votes[0]), Voter(votes[1]), Voter(votes[2]))
    issues, run, counts, usage = review(j, finding(conflict_code, agent), agent=agent)
    (rec,) = run.votes
    assert (rec["final_action"], rec["flag_reason"], rec["rule"]) == expected
    assert rec["conflict_type"] == CONFLICT_TYPES[conflict_code]
    assert run.phase == "jury" and usage.llm_calls == 3 and run.llm_calls == 3
    codes = [i.code for i in issues]
    action = expected[0]
    if action == "KEEP":
        assert codes == [conflict_code] and issues[0].details["jury"]["final_action"] == "KEEP"
    elif action == "DROP":
        assert codes == [] and counts.dropped == 1
    elif action == "FLIP":
        assert codes == ["JURY_FLIP"] and issues[0].auto_fixable
        assert issues[0].details["flip"] == {"segment_index": 2, "doc_type": "Genomic Report", "from": "MENTION_ONLY",
                                             "to": "PRIMARY"}
    else:
        assert codes == [conflict_code, "JURY_FLAG"] and not issues[1].auto_fixable
        assert issues[1].details["flag_reason"] == expected[1] and expected[1] in issues[1].message


def test_flip_without_a_flippable_target_is_a_flag():
    j = jury(Voter(("FLIP", "NEGATION_SCOPE")), Voter(("FLIP", "NEGATION_SCOPE")), Voter(("KEEP", "OTHER")))
    issue = finding("LABEL_TEXT_MISMATCH", "V2", doc_type="Radiology Report")  # NO_EVIDENCE: nothing to flip
    issues, run, _, _ = review(j, issue, agent="V2")
    assert [i.code for i in issues] == ["LABEL_TEXT_MISMATCH", "JURY_FLAG"]
    assert run.votes[0]["flag_reason"] == "POLARITY_UNCERTAIN"
    assert flip_target(issue, CLS) is None


def test_a_failing_juror_votes_flag():
    j = jury(Voter(("KEEP", "OTHER")), Voter(RuntimeError("down")), Voter(("DROP", "OTHER")))
    issues, run, counts, _ = review(j, finding())
    assert run.votes[0]["votes"]["B"] == "FLAG" and run.votes[0]["reason_codes"]["B"] == "JUROR_FAILED"
    assert counts.juror_failures == 1 and "JURY_FLAG" in [i.code for i in issues]


def test_bounded_and_incomplete_never_reviewed():
    a, b, c = Voter(("KEEP", "OTHER")), Voter(("KEEP", "OTHER")), Voter(("KEEP", "OTHER"))
    j = jury(a, b, c, max_findings=2)
    incomplete = make_issue("VERIFICATION_INCOMPLETE", "x", agent="V4")
    issues, run, counts, _ = review(j, incomplete, finding(page=1), finding(page=2), finding(page=3))
    assert (counts.reviewed, counts.unreviewed) == (2, 1) and len(run.votes) == 2
    assert a.calls == b.calls == c.calls == 2 and len(issues) == 4


def test_same_model_same_prompt_jurors_share_one_call():
    shared = llm(Voter(("DROP", "OTHER")), "shared")
    j = Jury([Juror("A", shared), Juror("B", shared), Juror("C", shared, "JURY_EVIDENCE")])
    issues, run, _, usage = review(j, finding())
    assert usage.llm_calls == 2  # A and B: one call; C: its own prompt


class OneFinding(OfflineJudge):
    """The offline judge plus one scripted V2 judgment finding (a clinical-note label the text
    does not support), so the test controls what the jury sees."""

    async def judge(self, agent, bundle, classification):
        r = await super().judge(agent, bundle, classification)
        if agent != "V2":
            return r
        tc = next(tc for tc in classification.segments[1].classifications if tc.doc_type == "Genomic Report")
        extra = [] if tc.presence_level == "PRIMARY" else [make_issue(
            "LABEL_TEXT_MISMATCH", "m", agent="V2", location="segments[2] → Genomic Report",
            details={"segment_index": 2, "doc_type": "Genomic Report"})]
        return JudgmentResult(r.issues + extra, r.implementation)


def test_rule_phases_untouched_flip_applied_by_the_retry_and_rerun_is_free():
    # the worked example after its share fixes (otherwise 3 fixable MAJOR: rule 2 escalates)
    raw = asyncio.run(verify_document(BUNDLE, RAW, OfflineJudge())).final_classification
    cache = InMemoryVerdictCache()
    voters = [Voter(("FLIP", "NEGATION_SCOPE")), Voter(("DROP", "OTHER")), Voter(("KEEP", "OTHER"))]
    j = Jury([Juror(n, llm(v, n.lower(), cache), "JURY_EVIDENCE" if n == "C" else "JURY")
              for n, v in zip("ABC", voters, strict=True)])
    res = asyncio.run(verify_document(BUNDLE, raw, VerifyDeps(OneFinding(), jury=j)))
    a0 = res.attempts[0]
    # the rule phases' fixable share issues and the jury's FLIP → AUTO_RETRY; the fix flips the label
    assert "JURY_FLIP" in [i.code for i in a0.issues] and "LABEL_TEXT_MISMATCH" not in [i.code for i in a0.issues]
    first = res.fixes_applied[0]
    assert (first.attempt, first.codes) == (0, ["JURY_FLIP"]) and "MENTION_ONLY -> PRIMARY" in first.description
    # attempt 1: the offline V2 judgment now objects to Genomic PRIMARY and this jury flips it back —
    # the fingerprint repeats, so the retry loop stops (cycle) and escalates instead of looping
    a1 = res.attempts[1]
    assert a1.issues[-1].details["flip"]["from"] == "PRIMARY"
    assert (res.stop_reason, res.final_decision) == ("cycle", "ESCALATE_TO_SME")
    jury_runs = [r for r in a0.runs if r.phase == "jury"]
    assert {r.agent for r in jury_runs} == {"V2", "V3", "V4"}
    rule_codes = {"SEGMENT_SHARE_SUM", "MIXTURE_SHARE_SUM"}
    assert "EVIDENCE_MISSING" in {i.code for i in a0.issues}  # a rule-phase finding: never put to the jury
    assert all(v["code"] not in rule_codes | {"EVIDENCE_MISSING"} for r in jury_runs for v in r.votes)
    calls = sum(v.calls for v in voters)
    assert calls == 6  # one finding per attempt, three jurors
    asyncio.run(verify_document(BUNDLE, raw, VerifyDeps(OneFinding(), jury=j)))
    assert sum(v.calls for v in voters) == calls  # the verdict cache: a re-run costs no call


def test_no_jury_changes_nothing():
    plain = asyncio.run(verify_document(BUNDLE, RAW, OfflineJudge()))
    again = asyncio.run(verify_document(BUNDLE, RAW, VerifyDeps(OfflineJudge(), jury=None)))
    assert plain.model_dump() == again.model_dump()
    assert all(r.phase != "jury" for a in plain.attempts for r in a.runs)
    assert "votes" not in json.dumps(plain.model_dump(mode="json"))


class ThrottledLLM:
    """An LLM client whose quota never frees up within its waiting budget."""

    model_id = "throttled"

    async def ask(self, kind, doc_id, inputs):
        from docverify.judging.judges import JudgeThrottled

        raise JudgeThrottled("quota held the call back")


def test_a_throttled_juror_is_not_a_failed_vote_the_stage_waits():
    from docverify.judging.judges import JudgeThrottled

    j = Jury([Juror("A", llm(Voter(("KEEP", "OTHER")), "a")), Juror("B", ThrottledLLM()),
              Juror("C", llm(Voter(("KEEP", "OTHER")), "c"), "JURY_EVIDENCE")])
    with pytest.raises(JudgeThrottled):
        review(j, finding())
