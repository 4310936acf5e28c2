"""V2's ``SEGMENT_SPANS_PRINTED_DOCUMENTS`` (ADR 0069): a report segment that holds a page printed "Page 1 of n"
right after one printed "Page m of m" holds two printed documents; the fix splits it there and the document is
verified again. Other segments, a fax counter over the whole PDF and numbering that goes on are no finding."""

from __future__ import annotations

import asyncio

from scripts.support.examples import bundle as example_bundle
from tests.docverify.classify.test_numbered_pages_v13 import MARGINS, PATH1, PATH2
from tests.docverify.segments import bundle as _bundle
from tests.docverify.segments import classification as _classification

from docverify.classify import offline
from docverify.classify.offline import classify_offline
from docverify.domain.codes import CATALOGUE
from docverify.judging.judges import OfflineJudge
from docverify.pipeline.autofix import apply_fixes
from docverify.pipeline.document import verify_document
from docverify.verify.v2_consistency import printed_documents, rule_phase

CODE = "SEGMENT_SPANS_PRINTED_DOCUMENTS"
TWO = [PATH1 + "\nPage 1 of 2", MARGINS + "\nPage 2 of 2", PATH2 + "\nPage 1 of 1"]


def test_a_report_segment_holding_two_numberings_is_a_fixable_major():
    spec = CATALOGUE[CODE]
    assert (spec.agent, spec.severity, spec.auto_fixable) == ("V2", "MAJOR", True)
    issues = [i for i in rule_phase(_classification([(1, 3, "Pathology Report")]), _bundle(TWO)) if i.code == CODE]
    assert len(issues) == 1
    issue = issues[0]
    assert issue.severity == "MAJOR" and issue.auto_fixable and issue.details["split_at"] == [3]
    assert "page 3 (printed 1 of 1, after 2 of 2)" in issue.message and "2 printed documents" in issue.message
    assert "SURGICAL" not in issue.message and "tumor" not in issue.message  # numbers only, never page text


def test_no_finding_where_the_segments_follow_the_numbering_or_for_other_or_a_counter():
    right = _classification([(1, 2, "Pathology Report"), (3, 3, "Pathology Report")])
    assert printed_documents(_bundle(TWO), right) == []
    assert printed_documents(_bundle(TWO), _classification([(1, 3, "Other")])) == []
    # one counter over the whole PDF (a fax stamp): no numbering meets
    stamped = [PATH1 + "\nPage 1 of 3", MARGINS + "\nPage 2 of 3", PATH2 + "\nPage 3 of 3"]
    assert printed_documents(_bundle(stamped), _classification([(1, 3, "Pathology Report")])) == []
    # no numbers at all
    assert printed_documents(_bundle([PATH1, MARGINS, PATH2]), _classification([(1, 3, "Pathology Report")])) == []


def test_the_fix_splits_the_segment_where_the_printed_document_begins():
    cls = _classification([(1, 3, "Pathology Report")])
    [issue] = [i.model_copy(update={"issue_id": "V2-0001"}) for i in printed_documents(_bundle(TWO), cls)]
    fixed, applied = apply_fixes(cls, [issue], attempt=0)
    assert [(s.segment_index, s.page_start, s.page_end, s.dominant_type) for s in fixed.segments] == [
        (1, 1, 2, "Pathology Report"), (2, 3, 3, "Pathology Report")]
    assert fixed.number_of_segments == 2 and "page 3" in applied[0].description
    assert fixed.segments[1].reasoning.startswith("Split from segment 1 by the verifiers: page 3 begins a printed")
    # the evidence stays on its own pages: page 1's quote in the first piece only
    assert [e.page for tc in fixed.segments[0].classifications for e in tc.top_evidence] == [1]
    assert [e.page for tc in fixed.segments[1].classifications for e in tc.top_evidence] == []
    again, applied_again = apply_fixes(fixed, [issue], attempt=1)  # idempotent
    assert [(s.page_start, s.page_end) for s in again.segments] == [(1, 2), (3, 3)] and not applied_again


def test_a_classifier_that_ignores_the_numbers_is_fixed_and_verified_again(monkeypatch):
    monkeypatch.setattr(offline, "NUMBERED_PAGES", False)  # a classifier that reads no page numbers
    b = example_bundle(TWO)
    raw = classify_offline(b)
    assert [(s.page_start, s.page_end) for s in raw.segments] == [(1, 3)]
    monkeypatch.setattr(offline, "NUMBERED_PAGES", True)
    result = asyncio.run(verify_document(b, raw.model_dump(mode="json"), OfflineJudge()))
    first = result.attempts[0]
    assert CODE in {i.code for i in first.issues} and first.decision.decision == "AUTO_RETRY"
    assert [(s["page_start"], s["page_end"]) for s in result.final_classification["segments"]] == [(1, 2), (3, 3)]
    assert result.final_decision == "AUTO_ACCEPT" and any("printed document" in f.description
                                                          for f in result.fixes_applied)
