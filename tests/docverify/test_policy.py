"""Issue 20, items 6 and 7: the verification policy (docverify.domain.policy.VerifyPolicy), passed
explicitly through verify_document. The specification's routing by default (any BLOCKER escalates
at rule 1, the BLOCKER repair is opt-in); LOW_CONFIDENCE_PRIMARY; the label-versus-text guard
beside an LLM judge (pydantic-ai FunctionModel, no network)."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from scripts.support.examples import NOTE_P3, bundle, classification, genomic_then_note, mutate
from tests.docverify.blind_reader import blind_aside
from tests.docverify.run_sync import verify_document_sync

from docverify.domain import policy as P
from docverify.domain.models import DOC_TYPES
from docverify.domain.policy import DEFAULT_POLICY, VerifyPolicy
from docverify.judging.judges import OfflineJudge, Usage
from docverify.llm.judge import LLMJudge
from docverify.pipeline.document import GUARD_IMPLEMENTATION, verify_document

REPAIR = VerifyPolicy(blocker_repair=True)


def test_the_defaults_are_the_module_constants_and_the_object_is_frozen():
    assert DEFAULT_POLICY == VerifyPolicy() == VerifyPolicy(
        blocker_repair=P.BLOCKER_REPAIR, patient_identity=P.PATIENT_IDENTITY,
        min_primary_confidence=P.MIN_PRIMARY_CONFIDENCE, label_text_guard=P.LABEL_TEXT_GUARD,
        admin_trap_per_segment=P.ADMIN_TRAP_PER_SEGMENT, admin_trap_counts_mentions=P.ADMIN_TRAP_COUNTS_MENTIONS)
    # trap 2: per segment (ADR 0037), PRIMARY/EMBEDDED_RAW only (ADR 0046)
    assert (DEFAULT_POLICY.admin_trap_per_segment, DEFAULT_POLICY.admin_trap_counts_mentions) == (True, False)
    assert (DEFAULT_POLICY.blocker_repair, DEFAULT_POLICY.min_primary_confidence) == (False, 0.2)
    with pytest.raises(ValidationError):
        DEFAULT_POLICY.blocker_repair = True  # type: ignore[misc]
    for bad in (-0.1, 1.5):
        with pytest.raises(ValidationError):
            VerifyPolicy(min_primary_confidence=bad)
    with pytest.raises(ValidationError):
        VerifyPolicy(blocker_reapir=True)  # a misspelt switch is refused, not ignored


# --------------------------------------------------------------------------- item 6: rule 1 by default


def _seed_v1_example():
    """The specification's V1 example (slide 4): number_of_segments is 3 but the segments array
    has 2 items; otherwise a perfect classification."""
    b, c = genomic_then_note()
    return b, mutate(c, lambda c: c.update(number_of_segments=3))


def test_the_seed_v1_example_escalates_by_rule_1_by_default():
    b, c = _seed_v1_example()
    r = verify_document_sync(b, c, OfflineJudge())
    [issue] = r.attempts[0].issues
    assert (issue.code, issue.severity, issue.auto_fixable) == ("SEGMENT_COUNT_MISMATCH", "BLOCKER", True)
    assert issue.message == "number_of_segments is 3 but segments array has 2 items"
    assert (r.final_decision, r.final_rule, r.stop_reason, len(r.attempts)) == ("ESCALATE_TO_SME", 1, "arbiter", 1)
    assert not r.attempts[0].blocker_repair and r.fixes_applied == []
    assert all(run.skipped for run in r.attempts[0].runs if run.phase == "judgment")


def test_the_seed_v1_example_is_repaired_and_accepted_with_the_repair_switched_on():
    b, c = _seed_v1_example()
    r = verify_document_sync(b, c, OfflineJudge(), policy=REPAIR)
    assert r.attempts[0].blocker_repair and r.attempts[0].decision.rule == 1  # the table still says rule 1
    assert [f.fixer for f in r.fixes_applied] == ["fix_segment_count"]
    assert (r.final_decision, r.final_rule, len(r.attempts)) == ("AUTO_ACCEPT", 7, 2)
    assert r.final_classification["number_of_segments"] == 2


def _no_findings(messages, info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"findings": []})])


def _llm() -> LLMJudge:
    # V2's blind reading (ADR 0034) answered apart: no opinion, never a finding
    return LLMJudge(FunctionModel(blind_aside(_no_findings)), "fake-gemini", retry_policy=None, blind_reading="before")


def test_by_default_the_seed_v1_example_costs_no_llm_call():
    """The repair is what the judgment calls were spent on (three, and V2's blind reading): by default none is
    made."""
    b, c = _seed_v1_example()
    calls = {}
    for name, pol in (("default", DEFAULT_POLICY), ("repair", REPAIR)):
        usage = Usage()
        r = asyncio.run(verify_document(b, c, _llm(), usage=usage, policy=pol))
        calls[name] = (r.final_decision, usage.llm_calls)
    assert calls == {"default": ("ESCALATE_TO_SME", 0), "repair": ("AUTO_ACCEPT", 4)}


# --------------------------------------------------------------------------- item 7b: LOW_CONFIDENCE_PRIMARY


def test_a_primary_below_the_minimum_confidence_is_a_non_fixable_major():
    b, c = genomic_then_note()
    c = mutate(c, lambda c: c["segments"][1]["classifications"][0].update(confidence=0.4))  # Clinical Note
    assert verify_document_sync(b, c, OfflineJudge()).final_decision == "AUTO_ACCEPT"  # 0 = off (the default)
    r = verify_document_sync(b, c, OfflineJudge(), policy=VerifyPolicy(min_primary_confidence=0.6))
    [issue] = r.attempts[0].issues
    assert (issue.agent, issue.code, issue.severity, issue.auto_fixable, issue.ig_code) == (
        "V2", "LOW_CONFIDENCE_PRIMARY", "MAJOR", False, "IG-4")
    assert issue.location == "segments[2] → Clinical Note" and issue.details["minimum"] == 0.6
    assert (r.final_decision, r.final_rule) == ("ESCALATE_TO_SME", 4)
    # at or above the minimum: nothing (the genomic segment's PRIMARY has 0.9)
    assert verify_document_sync(b, c, OfflineJudge(), policy=VerifyPolicy(min_primary_confidence=0.4)).final_rule == 7


# --------------------------------------------------------------------------- item 7c: the label-versus-text guard

PATH_P3 = ("SURGICAL PATHOLOGY REPORT\nSpecimen: left breast, core needle biopsy.\n"
           "GROSS DESCRIPTION: three cores of tan tissue.\nMICROSCOPIC: invasive ductal carcinoma, grade 2.\n"
           "FINAL DIAGNOSIS: invasive ductal carcinoma; margins not applicable.")


def _everything_other():
    """Two clinical notes and a pathology report, each a segment labelled Other PRIMARY with no
    evidence: the only rule issue is EVIDENCE_MISSING (MINOR) per segment."""
    b = bundle([NOTE_P3, NOTE_P3.replace("returns to", "comes back to"), PATH_P3], "all_other")
    c = classification([(p, p, "Other", {}) for p in (1, 2, 3)], "all_other")
    for seg in c["segments"]:
        for tc in seg["classifications"]:
            tc["top_evidence"] = []
    assert [m["doc_type"] for m in c["document_mixture"]] == list(DOC_TYPES)
    return b, c


def _verify(b, c, judge, policy=DEFAULT_POLICY):
    return asyncio.run(verify_document(b, c, judge, policy=policy))


def test_with_the_llm_judge_the_guard_escalates_an_unsupported_label():
    b, c = _everything_other()
    r = _verify(b, c, _llm())
    a0 = r.attempts[0]
    guard = [i for i in a0.issues if i.details.get("implementation") == GUARD_IMPLEMENTATION]
    # whatever V2's offline judgment reports; here at least the three unsupported labels
    assert [(i.agent, i.code, i.location) for i in guard if i.code == "LABEL_TEXT_MISMATCH"] == [
        ("V2", "LABEL_TEXT_MISMATCH", f"segments[{n}] → Other") for n in (1, 2, 3)]
    assert {i.agent for i in guard} == {"V2"} and not any(i.auto_fixable for i in guard)
    runs = [(r.agent, r.phase, r.implementation, r.issue_count) for r in a0.runs if r.phase == "guard"]
    assert runs == [("V2", "guard", GUARD_IMPLEMENTATION, len(guard))]
    assert (r.final_decision, r.final_rule) == ("ESCALATE_TO_SME", 2)  # 3 MAJOR


def test_with_the_guard_off_the_same_classification_is_accepted():
    b, c = _everything_other()
    r = _verify(b, c, _llm(), VerifyPolicy(label_text_guard=False))
    assert {i.code for i in r.attempts[0].issues} == {"EVIDENCE_MISSING"}
    assert not any(run.phase == "guard" for run in r.attempts[0].runs)
    assert (r.final_decision, r.final_rule) == ("AUTO_ACCEPT", 6)


def test_the_offline_judge_gets_no_second_copy_of_its_own_check():
    b, c = _everything_other()
    r = _verify(b, c, OfflineJudge())
    a0 = r.attempts[0]
    assert not any(run.phase == "guard" for run in a0.runs)
    assert [i.code for i in a0.issues if i.code == "LABEL_TEXT_MISMATCH"] == ["LABEL_TEXT_MISMATCH"] * 3


def test_the_guard_leaves_out_what_the_llm_already_reported():
    b, c = _everything_other()

    def one_finding(messages, info: AgentInfo) -> ModelResponse:
        schema = json.dumps(info.output_tools[0].parameters_json_schema)
        findings = []
        if "LABEL_TEXT_MISMATCH" in schema and "TRAP_CONTEXT" not in schema and "EVIDENCE_WEAK" not in schema:  # V2
            findings = [{"code": "LABEL_TEXT_MISMATCH", "severity": "MAJOR", "message": "a note, not Other",
                         "location": "segments[1] → Other", "suggested_fix": "Re-label"}]
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"findings": findings})])

    r = _verify(b, c, LLMJudge(FunctionModel(one_finding), "fake-gemini", retry_policy=None, blind_reading="off"))
    mismatches = [(i.location, i.details["implementation"]) for i in r.attempts[0].issues
                  if i.code == "LABEL_TEXT_MISMATCH"]
    llm_found = [m for m in mismatches if m[1] != GUARD_IMPLEMENTATION]
    locations = sorted(m[0] for m in mismatches)
    assert locations == [f"segments[{n}] → Other" for n in (1, 2, 3)]  # each segment once
    assert llm_found == [("segments[1] → Other", "llm:fake-gemini")]


def test_a_rule_blocker_skips_the_guard_with_the_judgments():
    b, c = _everything_other()
    c = mutate(c, lambda c: c.update(number_of_segments=4))
    r = _verify(b, c, _llm())
    assert not any(run.phase == "guard" for run in r.attempts[0].runs)
    assert (r.final_decision, r.final_rule) == ("ESCALATE_TO_SME", 1)


# --------------------------------------------------------------------------- the CLI's flags


def test_the_cli_switches_the_repair_on_with_a_flag(tmp_path, capsys):
    from docverify.cli import main

    b, c = _seed_v1_example()
    (tmp_path / "b.json").write_text(b.model_dump_json())
    (tmp_path / "c.json").write_text(json.dumps(c))
    args = ["verify", "--bundle", str(tmp_path / "b.json"), "--classification", str(tmp_path / "c.json")]
    decisions = []
    for extra in ([], ["--blocker-repair"], ["--blocker-repair", "--no-blocker-repair"]):
        assert main(args + extra) == 0
        out = json.loads(capsys.readouterr().out)
        decisions.append((out["final_decision"], out["final_rule"]))
    assert decisions == [("ESCALATE_TO_SME", 1), ("AUTO_ACCEPT", 7), ("ESCALATE_TO_SME", 1)]
    assert main(args + ["--min-primary-confidence", "1.5"]) == 2
    assert json.loads(capsys.readouterr().out)["error"] == "INVALID_ARGUMENT"


def test_the_cli_counts_mentions_for_trap_2_only_with_its_flag(tmp_path, capsys):
    """ADR 0046 through ``verify``: a requisition classified Other with Pathology Report MENTION_ONLY
    is accepted by default and escalated by trap 2 with ``--admin-trap-counts-mentions``."""
    from docverify.cli import main

    form = ("LABORATORY REQUISITION AND RECORDS REQUEST\nPatient name: SAMPLE, PATIENT\n"
            "Records requested: pathology, radiology.\nDeliver to the requesting clinic by courier.\n"
            "Signature of the requesting provider: ____________  Date: ________")
    b = bundle([form], "roi")

    def shape(c):
        path = next(tc for tc in c["segments"][0]["classifications"] if tc["doc_type"] == "Pathology Report")
        path.update(presence_level="MENTION_ONLY", confidence=0.3, segment_share=0.0,
                    top_evidence=[{"snippet": "Records requested: pathology, radiology.", "page": 1,
                                   "anchors_found": []}])
        next(m for m in c["document_mixture"] if m["doc_type"] == "Pathology Report").update(
            presence_level="MENTION_ONLY")

    c = mutate(classification([(1, 1, "Other", {"snippet": "LABORATORY REQUISITION AND RECORDS REQUEST", "page": 1,
                                                "anchors_found": []})], "roi"), shape)
    (tmp_path / "b.json").write_text(b.model_dump_json())
    (tmp_path / "c.json").write_text(json.dumps(c))
    args = ["verify", "--bundle", str(tmp_path / "b.json"), "--classification", str(tmp_path / "c.json")]
    routes = []
    for extra in ([], ["--admin-trap-counts-mentions"], ["--admin-trap-counts-mentions", "--no-admin-trap-per-segment"]):
        assert main(args + extra) == 0
        out = json.loads(capsys.readouterr().out)
        codes = [i["code"] for a in out["attempts"] for i in a["issues"]]
        routes.append((out["final_decision"], "TRAP_ADMIN_DOCUMENT" in codes))
    assert routes == [("AUTO_ACCEPT", False), ("ESCALATE_TO_SME", True), ("ESCALATE_TO_SME", True)]


def test_the_cli_spares_a_report_that_reads_as_one_only_with_its_flag(tmp_path, capsys):
    """ADR 0062 through ``verify``: a pathology report whose header prints its requisition number is trap 2 by
    default (the specification's letter) and spared with ``--admin-trap-spares-read-reports``."""
    from tests.docverify.test_v3_traps import PATHOLOGY_WITH_REQUISITION, REQUISITION_PATH_EV

    from docverify.cli import main

    (tmp_path / "b.json").write_text(bundle([PATHOLOGY_WITH_REQUISITION], "path").model_dump_json())
    (tmp_path / "c.json").write_text(json.dumps(classification([(1, 1, "Pathology Report", REQUISITION_PATH_EV)], "path")))
    args = ["verify", "--bundle", str(tmp_path / "b.json"), "--classification", str(tmp_path / "c.json")]
    trapped = []
    for extra in ([], ["--admin-trap-spares-read-reports"]):
        assert main(args + extra) == 0
        out = json.loads(capsys.readouterr().out)
        trapped.append("TRAP_ADMIN_DOCUMENT" in [i["code"] for a in out["attempts"] for i in a["issues"]])
    assert trapped == [True, False]


def test_one_constructor_from_a_mapping_of_overrides():
    """Settings, the CLI flags and the verifier benchmark build their policy the same way."""
    assert P.VerifyPolicy.from_overrides() == P.DEFAULT_POLICY
    assert P.VerifyPolicy.from_overrides({"min_primary_confidence": None}) == P.DEFAULT_POLICY  # None: the default
    got = P.VerifyPolicy.from_overrides({"blocker_repair": True, "min_primary_confidence": 0.5})
    assert (got.blocker_repair, got.min_primary_confidence, got.patient_identity) == (True, 0.5, True)
    with pytest.raises(ValidationError, match="no_such_switch"):
        P.VerifyPolicy.from_overrides({"no_such_switch": True})
    with pytest.raises(ValidationError, match="min_primary_confidence"):
        P.VerifyPolicy.from_overrides({"min_primary_confidence": 2.0})
