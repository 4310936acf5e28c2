"""The V5 second opinion: its overrides as a table, the property that it never loosens the table's
route (hypothesis, random issue lists and proposals), the LLM side on FunctionModel (cached,
a fault is the table's decision), and citations + explanations on every V5 decision."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai.models.function import FunctionModel
from tests.docverify.scripted_tools import ToolScript as Proposer

from docverify.arbiters.second_opinion import OVERRIDES, STRICTNESS, Proposal, SecondOpinion, combine
from docverify.arbiters.v5 import decide
from docverify.domain.models import ClassificationOutput, DocumentBundle, Issue
from docverify.domain.resources import include_dir
from docverify.llm.cache import InMemoryVerdictCache
from docverify.llm.judge import LLMJudge
from docverify.pipeline.document import verify_document


def issue(sev, fixable=False, n=1, code="X", **details):
    return Issue(issue_id=f"V2-{n:04d}", agent="V2", severity=sev, message="m", code=code, auto_fixable=fixable,
                 details=details)


ACCEPT = [issue("MINOR")]
RETRY = [issue("MAJOR", True, code="SEGMENT_SHARE_SUM")]
ESCALATE = [issue("BLOCKER", code="PAGE_OVERLAP")]


@pytest.mark.parametrize("issues, proposal, expected, override", [
    (ESCALATE, Proposal("AUTO_ACCEPT", 0.99), "ESCALATE_TO_SME", "TABLE_ESCALATES"),
    (ACCEPT, None, "AUTO_ACCEPT", "LLM_FAILURE"),
    (RETRY, None, "AUTO_RETRY", "LLM_FAILURE"),
    (ACCEPT, Proposal("AUTO_ACCEPT", 0.54), "ESCALATE_TO_SME", "LOW_CONFIDENCE"),
    (ACCEPT, Proposal("AUTO_ACCEPT", 0.55), "AUTO_ACCEPT", "STRICTER_OF_TWO"),
    (ACCEPT, Proposal("AUTO_RETRY", 0.9), "ESCALATE_TO_SME", "NOTHING_TO_FIX"),
    (RETRY, Proposal("AUTO_ACCEPT", 0.9), "AUTO_RETRY", "STRICTER_OF_TWO"),
    (RETRY, Proposal("ESCALATE_TO_SME", 0.8), "ESCALATE_TO_SME", "STRICTER_OF_TWO"),
    (ACCEPT, Proposal("ESCALATE_TO_SME", 0.7), "ESCALATE_TO_SME", "STRICTER_OF_TWO"),
])
def test_override_table(issues, proposal, expected, override):
    final = combine(decide(issues), issues, proposal, model="m")
    assert (final.decision, final.second_opinion["override"]) == (expected, override)
    assert final.rule == decide(issues).rule
    assert f"-> {override} -> {expected}" in final.explanation_audit


def test_blocker_or_non_fixable_major_escalates_whatever_the_llm_says():
    # the table escalates these already; the override holds even for a table decision handed in as accept
    table = decide(ACCEPT)
    for bad in ([issue("BLOCKER")], [issue("MAJOR", False)]):
        final = combine(table, bad, Proposal("AUTO_ACCEPT", 1.0))
        assert (final.decision, final.second_opinion["override"]) == ("ESCALATE_TO_SME", "BLOCKER_OR_NON_FIXABLE_MAJOR")
    assert [o.name for o in OVERRIDES] == ["TABLE_ESCALATES", "LLM_FAILURE", "BLOCKER_OR_NON_FIXABLE_MAJOR",
                                           "LOW_CONFIDENCE", "NOTHING_TO_FIX", "STRICTER_OF_TWO"]


issue_st = st.builds(
    lambda sev, fixable, n, page: issue(sev, fixable, n, page=page),
    st.sampled_from(["BLOCKER", "MAJOR", "MINOR"]), st.booleans(), st.integers(1, 99), st.integers(1, 9))
proposal_st = st.none() | st.builds(Proposal, st.sampled_from(sorted(STRICTNESS)), st.floats(0.0, 1.0))


@given(st.lists(issue_st, max_size=8), proposal_st)
def test_never_looser_than_the_table(issues, proposal):
    table = decide(issues)
    final = combine(table, issues, proposal)
    assert STRICTNESS[final.decision] >= STRICTNESS[table.decision]
    if table.decision == "ESCALATE_TO_SME":
        assert final.decision == "ESCALATE_TO_SME"  # an escalation never becomes an accept (or a retry)
    if any(i.severity == "BLOCKER" or (i.severity == "MAJOR" and not i.auto_fixable) for i in issues):
        assert final.decision == "ESCALATE_TO_SME"
    if proposal is not None and proposal.confidence < 0.55:
        assert final.decision == "ESCALATE_TO_SME"


@given(st.lists(issue_st, max_size=8))
def test_every_v5_decision_carries_citations_and_two_explanations(issues):
    d = decide(issues)
    assert d.citations["rule"] == d.rule
    assert d.citations["issue_codes"] == sorted({i.code for i in issues})
    assert d.citations["evidence_pages"] == sorted({i.details["page"] for i in issues})
    assert d.explanation_sme and d.explanation_audit.startswith(f"V5 {d.decision} rule {d.rule} |")
    assert "m" not in d.explanation_audit.split("|")[-1]  # no message text, codes and pages only


# --------------------------------------------------------------------------- the LLM side

EX = include_dir() / "examples" / "spec_auto_retry"
BUNDLE = DocumentBundle.model_validate(json.loads((EX / "bundle.json").read_text()))
RAW = json.loads((EX / "classification.json").read_text())
CLS = ClassificationOutput.model_validate(RAW)


def opinion(fn):
    return SecondOpinion(LLMJudge(FunctionModel(fn), "so", cache=InMemoryVerdictCache(), retry_policy=None,
                                  output_retries=0))


def test_llm_escalates_a_retry_and_a_rerun_is_free():
    fn = Proposer({"route": "ESCALATE_TO_SME", "confidence": 0.8, "reasoning": "V2-0001 doubtful"})
    so = opinion(fn)
    table = decide(RETRY)
    final, usage = asyncio.run(so.review(BUNDLE, CLS, RETRY, table))
    assert final.decision == "ESCALATE_TO_SME" and usage.llm_calls == 1
    assert "<issues>" in fn.prompts[0] and "SEGMENT_SHARE_SUM" in fn.prompts[0]
    again, usage2 = asyncio.run(so.review(BUNDLE, CLS, RETRY, table))
    assert again == final and (usage2.llm_calls, usage2.cache_hits, fn.calls) == (0, 1, 1)


def test_llm_fault_is_the_tables_decision_and_escalations_are_not_asked():
    fn = Proposer(RuntimeError("down"))
    so = opinion(fn)
    final, _ = asyncio.run(so.review(BUNDLE, CLS, ACCEPT, decide(ACCEPT)))
    assert (final.decision, final.second_opinion["override"], final.second_opinion["error"]) == (
        "AUTO_ACCEPT", "LLM_FAILURE", "RuntimeError")
    esc, usage = asyncio.run(so.review(BUNDLE, CLS, ESCALATE, decide(ESCALATE)))
    assert esc == decide(ESCALATE) and usage.llm_calls == 0 and fn.calls == 1


def test_in_the_retry_loop_every_attempt_is_reviewed():
    from docverify.judging.judges import OfflineJudge

    fn = Proposer({"route": "AUTO_ACCEPT", "confidence": 0.95, "reasoning": "ok"})
    from docverify.pipeline.document import VerifyDeps

    res = asyncio.run(verify_document(BUNDLE, RAW, VerifyDeps(OfflineJudge(), second_opinion=opinion(fn))))
    plain = asyncio.run(verify_document(BUNDLE, RAW, OfflineJudge()))
    assert [a.decision.decision for a in res.attempts] == [a.decision.decision for a in plain.attempts]
    assert all(a.decision.second_opinion["override"] == "STRICTER_OF_TWO" for a in res.attempts)
    assert plain.attempts[0].decision.second_opinion is None
    assert "second_opinion" not in json.dumps(plain.model_dump(mode="json"))


def test_throttling_is_not_an_llm_failure_it_propagates():
    from docverify.judging.judges import JudgeThrottled

    class Throttled:
        model_id = "throttled"

        async def ask(self, kind, doc_id, inputs):
            raise JudgeThrottled("quota")

    with pytest.raises(JudgeThrottled):
        asyncio.run(SecondOpinion(Throttled()).review(BUNDLE, CLS, ACCEPT, decide(ACCEPT)))
