"""Every row of the spec's V1 table (slide 4), with its severity and auto-fix flag."""

import pytest

from docverify.examples import genomic_then_note, mutate
from docverify.models import ClassificationOutput
from docverify.verify import v1_schema


def v1(bundle, raw):
    cls, issues = v1_schema.parse(raw)
    return issues if cls is None else v1_schema.check(bundle, cls)


def codes(issues):
    return [(i.code, i.severity, i.auto_fixable) for i in issues]


def test_valid_classification_has_no_v1_issue():
    b, c = genomic_then_note()
    assert v1(b, c) == []


# (row, mutation, expected code, severity, auto-fixable)
ROWS = [
    (1, lambda c: c.update(number_of_segments=3), "SEGMENT_COUNT_MISMATCH", "BLOCKER", True),
    (2, lambda c: c["segments"][1].update(page_end=9, segment_page_count=7), "PAGE_OUT_OF_BOUNDS", "BLOCKER", False),
    (2, lambda c: c["segments"][0].update(page_start=0, segment_page_count=3), "PAGE_OUT_OF_BOUNDS", "BLOCKER", False),
    (2, lambda c: c["segments"][0].update(page_start=2, page_end=1), "PAGE_RANGE_INVERTED", "BLOCKER", False),
    (3, lambda c: c["segments"][0].update(segment_page_count=5), "SEGMENT_PAGE_COUNT_WRONG", "MAJOR", True),
    (4, lambda c: c["segments"][0]["classifications"][2].update(confidence=1.2), "CONFIDENCE_OUT_OF_RANGE", "BLOCKER", False),
    (4, lambda c: c["segments"][0]["classifications"][0].update(confidence=-0.1), "CONFIDENCE_OUT_OF_RANGE", "BLOCKER", False),
    (5, lambda c: c["segments"][0]["classifications"].pop(4), "DOC_TYPE_MISSING", "BLOCKER", True),
    (5, lambda c: c["document_mixture"].pop(0), "DOC_TYPE_MISSING", "BLOCKER", True),
    (6, lambda c: c["segments"][0]["classifications"][2].update(top_evidence=[]), "EVIDENCE_MISSING", "MINOR", False),
]


@pytest.mark.parametrize("row,mutation,code,severity,fixable", ROWS)
def test_v1_table_row(row, mutation, code, severity, fixable):
    b, c = genomic_then_note()
    issues = v1(b, mutate(c, mutation))
    assert (code, severity, fixable) in codes(issues), codes(issues)
    # the mutation breaks exactly one check
    assert {i.code for i in issues} == {code}


def test_spec_example_segment_count_message():
    b, c = genomic_then_note()
    [issue] = v1(b, mutate(c, lambda c: c.update(number_of_segments=3)))
    assert issue.message == "number_of_segments is 3 but segments array has 2 items"
    assert issue.ig_code == "IG-1"


def test_spec_example_missing_evidence_message():
    b, c = genomic_then_note()
    [issue] = v1(b, mutate(c, lambda c: c["segments"][0]["classifications"][2].update(top_evidence=[])))
    assert issue.message == "Genomic Report is PRIMARY in segment 1 but has no evidence snippets"


def test_no_evidence_type_needs_no_evidence():
    b, c = genomic_then_note()
    c2 = mutate(c, lambda c: c["segments"][0]["classifications"][0].update(top_evidence=[]))
    assert v1(b, c2) == []  # Clinical Note is NO_EVIDENCE in segment 1


def test_schema_invalid_is_a_blocker_not_an_exception():
    b, c = genomic_then_note()
    bad = mutate(c, lambda c: c["segments"][0]["classifications"][0].update(doc_type="Discharge Letter"))
    [issue] = v1(b, bad)
    assert (issue.code, issue.severity, issue.auto_fixable) == ("SCHEMA_INVALID", "BLOCKER", False)
    assert "segments.0.classifications.0.doc_type" in issue.message
    assert "Discharge Letter" not in issue.message  # paths, not values


def test_duplicate_type_is_reported():
    b, c = genomic_then_note()
    dup = mutate(c, lambda c: c["segments"][0]["classifications"].append(dict(c["segments"][0]["classifications"][0])))
    assert "DOC_TYPE_DUPLICATE" in {i.code for i in v1(b, dup)}


def test_share_out_of_range_is_a_blocker():
    b, c = genomic_then_note()
    bad = mutate(c, lambda c: c["segments"][0]["classifications"][0].update(segment_share=-0.2))
    assert ("SHARE_OUT_OF_RANGE", "BLOCKER", False) in codes(v1(b, bad))


def test_models_parse_out_of_range_values_so_v1_can_report_them():
    b, c = genomic_then_note()
    ClassificationOutput.model_validate(mutate(c, lambda c: c["segments"][0].update(page_start=-4)))
