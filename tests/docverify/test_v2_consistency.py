"""The spec's V2 rule table (slide 4) and its worked example."""

import pytest
from scripts.support.examples import genomic_then_note, mutate

from docverify.domain.models import ClassificationOutput
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


# --------------------------------------------------------------------------- every page of a segment is read

RADIOLOGY_P = ("CHEST RADIOGRAPH, TWO VIEWS\nCOMPARISON: None.\nFINDINGS: The lungs are clear. No pleural effusion "
               "or pneumothorax. The cardiomediastinal silhouette is normal.\nIMPRESSION: No acute cardiopulmonary "
               "process.")


def _judge(pages, segments):
    from scripts.support.examples import bundle, classification

    b = bundle(pages)
    c = ClassificationOutput.model_validate(classification(segments))
    return v2_consistency.offline_judgment(b, c)


def test_two_documents_merged_into_one_segment_are_seen_page_by_page():
    from scripts.support.examples import GENOMIC_P1, NOTE_P3

    ev = {"snippet": "BRCA1/2 Analysis — Full Gene Sequencing", "page": 1, "anchors_found": []}
    issues = _judge([GENOMIC_P1, RADIOLOGY_P, RADIOLOGY_P], [(1, 3, "Genomic Report", ev)])
    [issue] = [i for i in issues if i.code == "SEGMENT_HOLDS_OTHER_TYPE"]
    assert (issue.severity, issue.auto_fixable, issue.agent) == ("MAJOR", False, "V2")
    assert issue.details["doc_type"] == "Radiology Report" and issue.details["pages"] == [2, 3]
    assert "pages 2–3 read as Radiology Report" in issue.message
    # the control: the same pages split at the true boundary raise nothing
    ev3 = {"snippet": "IMPRESSION: No acute cardiopulmonary process.", "page": 2, "anchors_found": []}
    assert _judge([GENOMIC_P1, RADIOLOGY_P, NOTE_P3], [(1, 1, "Genomic Report", ev), (2, 2, "Radiology Report", ev3),
                                                      (3, 3, "Clinical Note", {**ev3, "page": 3})]) == [] or all(
        i.code != "SEGMENT_HOLDS_OTHER_TYPE" for i in _judge(
            [GENOMIC_P1, RADIOLOGY_P, NOTE_P3], [(1, 1, "Genomic Report", ev), (2, 2, "Radiology Report", ev3),
                                                  (3, 3, "Clinical Note", {**ev3, "page": 3})]))


def test_a_boundary_one_page_off_is_seen():
    from scripts.support.examples import GENOMIC_P1, GENOMIC_P2

    ev = {"snippet": "BRCA1/2 Analysis — Full Gene Sequencing", "page": 1, "anchors_found": []}
    ev2 = {"snippet": "IMPRESSION: No acute cardiopulmonary process.", "page": 4, "anchors_found": []}
    issues = _judge([GENOMIC_P1, GENOMIC_P2, RADIOLOGY_P, RADIOLOGY_P],
                    [(1, 3, "Genomic Report", ev), (4, 4, "Radiology Report", ev2)])
    assert [(i.code, i.details["pages"]) for i in issues if i.code == "SEGMENT_HOLDS_OTHER_TYPE"] == [
        ("SEGMENT_HOLDS_OTHER_TYPE", [3, 3])]


def test_a_type_the_segment_claims_as_embedded_is_not_foreign():
    from scripts.support.examples import GENOMIC_P1, mutate

    ev = {"snippet": "BRCA1/2 Analysis — Full Gene Sequencing", "page": 1, "anchors_found": []}
    from scripts.support.examples import bundle, classification

    c = classification([(1, 2, "Genomic Report", ev)])

    def embed(c):
        for tc in c["segments"][0]["classifications"]:
            if tc["doc_type"] == "Radiology Report":
                tc.update(presence_level="EMBEDDED_RAW", top_evidence=[{**ev, "page": 2}])
    c = ClassificationOutput.model_validate(mutate(c, embed))
    issues = v2_consistency.offline_judgment(bundle([GENOMIC_P1, RADIOLOGY_P]), c)
    assert all(i.code != "SEGMENT_HOLDS_OTHER_TYPE" for i in issues)
