"""Every row of the spec's V1 table (slide 4), with its severity and auto-fix flag."""

import pytest
from scripts.support.examples import genomic_then_note, mutate

from docverify.domain.models import ClassificationOutput
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


# --------------------------------------------------------------------------- issue 20: strict input types

def _tc(c, **kw):
    c["segments"][0]["classifications"][2].update(**kw)


# (mutation, field path, expected JSON type, JSON type that came)
WRONG_TYPES = [
    (lambda c: _tc(c, confidence=True), "segments.0.classifications.2.confidence", "number", "boolean"),
    (lambda c: _tc(c, confidence=False), "segments.0.classifications.2.confidence", "number", "boolean"),
    (lambda c: _tc(c, confidence="0.9"), "segments.0.classifications.2.confidence", "number", "string"),
    (lambda c: _tc(c, segment_share=True), "segments.0.classifications.2.segment_share", "number", "boolean"),
    (lambda c: c["document_mixture"][2].update(overall_share=False), "document_mixture.2.overall_share", "number",
     "boolean"),
    (lambda c: c["self_evaluation"].update(confidence="1"), "self_evaluation.confidence", "number", "string"),
    (lambda c: c["segments"][0].update(page_start="3"), "segments.0.page_start", "integer", "string"),
    (lambda c: c["segments"][0].update(page_end=2.5), "segments.0.page_end", "integer", "number with a fraction"),
    (lambda c: c["segments"][0].update(segment_page_count=True), "segments.0.segment_page_count", "integer", "boolean"),
    (lambda c: c.update(number_of_segments="2"), "number_of_segments", "integer", "string"),
    (lambda c: _tc(c, top_evidence=[{"snippet": "BRCA1/2 Analysis", "page": 1.5, "anchors_found": []}]),
     "segments.0.classifications.2.top_evidence.0.page", "integer", "number with a fraction"),
    (lambda c: _tc(c, doc_type="genomic report"), "segments.0.classifications.2.doc_type", "enum member", "string"),
    (lambda c: _tc(c, presence_level="Primary"), "segments.0.classifications.2.presence_level", "enum member",
     "string"),
    (lambda c: c["segments"][0].update(dominant_type="GENOMIC REPORT"), "segments.0.dominant_type", "enum member",
     "string"),
    (lambda c: c.update(vendor_signals=[7]), "vendor_signals.0", "string", "integer"),
]


@pytest.mark.parametrize("mutation,path,expected,got", WRONG_TYPES)
def test_wrong_input_type_is_a_typed_schema_blocker(mutation, path, expected, got):
    b, c = genomic_then_note()
    [issue] = v1(b, mutate(c, mutation))
    assert (issue.code, issue.severity, issue.auto_fixable, issue.ig_code) == ("SCHEMA_INVALID", "BLOCKER", False, "IG-0")
    assert issue.details["errors"] == [{"path": path, "error": issue.details["errors"][0]["error"],
                                        "expected": expected, "got": got}]
    assert path in issue.message and f"(got {got})" in issue.message
    for value in ("0.9", "genomic report", "Primary", "GENOMIC REPORT", "True", "2.5"):
        assert value not in issue.message  # the type, never the value


def test_wrong_input_type_escalates():
    from tests.docverify.run_sync import verify_document_sync

    from docverify.judging.judges import OfflineJudge

    b, c = genomic_then_note()
    r = verify_document_sync(b, mutate(c, lambda c: _tc(c, confidence=True)), OfflineJudge())
    assert (r.final_decision, r.stop_reason) == ("ESCALATE_TO_SME", "schema")
    assert r.attempts[0].issues[0].code == "SCHEMA_INVALID"


def test_numbers_that_are_numbers_still_parse():
    b, c = genomic_then_note()
    c2 = mutate(c, lambda c: [_tc(c, confidence=1, segment_share=1),  # an int is a number
                              c["segments"][0].update(page_start=1.0, page_end=2.0),  # 1.0 is a whole number
                              c["document_mixture"][2].update(overall_share=1)])
    cls, issues = v1_schema.parse(c2)
    assert issues == [] and cls is not None
    seg = cls.segments[0]
    assert (type(seg.page_start), seg.page_start, seg.page_end) == (int, 1, 2)
    assert cls.segments[0].classifications[2].confidence == 1.0
    assert v1(b, c2) == []


def test_strict_types_hold_for_json_text_too():
    import json

    b, c = genomic_then_note()
    ok = ClassificationOutput.model_validate_json(json.dumps(c))  # enum strings parse from JSON text
    assert ok.segments[0].dominant_type == "Genomic Report"
    with pytest.raises(ValueError):
        ClassificationOutput.model_validate_json(json.dumps(mutate(c, lambda c: _tc(c, confidence=True))))
