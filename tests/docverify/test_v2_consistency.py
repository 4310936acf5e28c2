"""The spec's V2 rule table (slide 4) and its worked example."""

import pytest

from docverify.examples import genomic_then_note, mutate
from docverify.models import ClassificationOutput
from docverify.verify import v2_consistency

SPEC_SHARES = {"Genomic Report": 0.50, "Clinical Note": 0.30, "Pathology Report": 0.10,
               "Radiology Report": 0.08, "Other": 0.08}


def rules(c):
    return v2_consistency.rule_phase(ClassificationOutput.model_validate(c))


def set_segment_shares(c, seg, shares):
    for tc in c["segments"][seg]["classifications"]:
        tc["segment_share"] = shares[tc["doc_type"]]


def test_valid_has_no_issue():
    assert rules(genomic_then_note()[1]) == []


def test_spec_example_segment_share_sum():
    _, c = genomic_then_note()
    [issue] = rules(mutate(c, lambda c: set_segment_shares(c, 1, SPEC_SHARES)))
    assert issue.message == "Segment 2 shares sum to 1.060 instead of 1.0"
    assert (issue.code, issue.severity, issue.auto_fixable, issue.ig_code) == ("SEGMENT_SHARE_SUM", "MAJOR", True, "IG-3")
    assert issue.location == "segments[2]"


@pytest.mark.parametrize("total,flagged", [(1.0, False), (1.009, False), (0.991, False), (1.011, True), (0.97, True)])
def test_mixture_tolerance(total, flagged):
    _, c = genomic_then_note()

    def scale(c):
        for m in c["document_mixture"]:
            m["overall_share"] *= total
    issues = rules(mutate(c, scale))
    assert (["MIXTURE_SHARE_SUM"] if flagged else []) == [i.code for i in issues]
    if flagged:
        assert issues[0].severity == "MAJOR" and issues[0].auto_fixable


def test_zero_sum_cannot_be_normalised_so_it_is_not_fixable():
    _, c = genomic_then_note()
    [issue] = rules(mutate(c, lambda c: set_segment_shares(c, 0, dict.fromkeys(SPEC_SHARES, 0.0))))
    assert issue.code == "SEGMENT_SHARE_SUM" and not issue.auto_fixable


def test_page_overlap_is_a_blocker():
    _, c = genomic_then_note()
    c2 = mutate(c, lambda c: c["segments"][1].update(page_start=2, segment_page_count=2))
    [issue] = rules(c2)
    assert (issue.code, issue.severity, issue.auto_fixable) == ("PAGE_OVERLAP", "BLOCKER", False)
    assert issue.message == "Segments 1 and 2 both claim page 2"
