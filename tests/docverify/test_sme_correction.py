"""Issue 10, item 7: an SME correction can set the dominant type, segments, presence per type and
the mixture; what the SME does not set is derived, so the record passes V1–V4's rule phases with
no BLOCKER and contradicts itself nowhere."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scripts.support.examples import genomic_then_note, spec_escalate, spec_fabricated
from tests.docverify.test_consistency import classifications, contradictions

from docverify.domain.models import DOC_TYPES, ClassificationOutput
from docverify.pipeline.document import rule_phases
from docverify.sme.ground_truth import apply_correction
from docverify.verify import v2_consistency

LEVELS = ["PRIMARY", "EMBEDDED_RAW", "MENTION_ONLY", "NO_EVIDENCE"]


def _blockers(b, gt):
    cls = ClassificationOutput.model_validate(gt)
    return [f"{i.agent} {i.code}" for issues in rule_phases(b, cls).values() for i in issues if i.severity == "BLOCKER"]


def _holds(b, gt):
    assert _blockers(b, gt) == []
    assert contradictions(gt, b.total_pages) == []
    assert v2_consistency.field_consistency(ClassificationOutput.model_validate(gt)) == []


def test_correct_to_other_removes_the_replaced_type_and_passes_the_rules():
    b, c = spec_escalate()  # Quest CBC panel called Genomic Report PRIMARY: V3 trap 1 BLOCKER
    assert _blockers(b, c) == ["V3 TRAP_ROUTINE_LAB_GENOMIC"]
    gt, changes = apply_correction(c, doc_id=b.doc_id, total_pages=1, corrected_dominant_type="Other", bundle=b)
    entries = {tc["doc_type"]: tc for tc in gt["segments"][0]["classifications"]}
    # the SME contradicted Genomic Report: no MENTION_ONLY leftover, no Genomic evidence
    assert entries["Other"]["presence_level"] == "PRIMARY"
    assert entries["Genomic Report"]["presence_level"] == "NO_EVIDENCE"
    assert entries["Genomic Report"]["top_evidence"] == [] and entries["Genomic Report"]["segment_share"] == 0
    mixture = {m["doc_type"]: m["presence_level"] for m in gt["document_mixture"]}
    assert mixture.get("Genomic Report", "NO_EVIDENCE") == "NO_EVIDENCE"
    assert "segments[0] → Genomic Report: PRIMARY → NO_EVIDENCE" in changes
    assert not any("MENTION_ONLY" in line for line in changes)
    _holds(b, gt)


def test_correcting_page_types_leaves_no_genomic_claims():
    b, c = genomic_then_note()
    old = [s["dominant_type"] for s in c["segments"]]
    assert "Genomic Report" in old
    segs = [{"page_start": s["page_start"], "page_end": s["page_end"],
             "dominant_type": "Other" if s["dominant_type"] == "Genomic Report" else s["dominant_type"]}
            for s in c["segments"]]
    gt, _ = apply_correction(c, doc_id=b.doc_id, total_pages=3, corrected_segments=segs, bundle=b)
    for s in gt["segments"]:
        g = next(tc for tc in s["classifications"] if tc["doc_type"] == "Genomic Report")
        assert g["presence_level"] == "NO_EVIDENCE" and g["top_evidence"] == []
    assert all(m["presence_level"] == "NO_EVIDENCE" for m in gt["document_mixture"] if m["doc_type"] == "Genomic Report")
    _holds(b, gt)


def test_the_smes_own_level_for_the_replaced_type_keeps_its_evidence():
    b, c = spec_escalate()
    gt, changes = apply_correction(c, doc_id=b.doc_id, total_pages=1, corrected_dominant_type="Other",
                                   corrected_presence={"Genomic Report": "MENTION_ONLY"}, bundle=b)
    g = next(tc for tc in gt["segments"][0]["classifications"] if tc["doc_type"] == "Genomic Report")
    before = next(tc for tc in c["segments"][0]["classifications"] if tc["doc_type"] == "Genomic Report")
    assert g["presence_level"] == "MENTION_ONLY"
    assert len(g["top_evidence"]) == len(before["top_evidence"]) > 0
    _holds(b, gt)


def test_the_sme_sets_presence_and_the_mixture():
    b, c = genomic_then_note()
    gt, changes = apply_correction(c, doc_id=b.doc_id, total_pages=3,
                                   corrected_presence={"Pathology Report": "MENTION_ONLY"},
                                   corrected_mixture={"Clinical Note": "PRIMARY", "Other": "NO_EVIDENCE"}, bundle=b)
    assert all({tc["doc_type"]: tc["presence_level"] for tc in s["classifications"]}["Pathology Report"]
               == "MENTION_ONLY" for s in gt["segments"])
    assert "document_mixture → Pathology Report: NO_EVIDENCE → MENTION_ONLY" in changes
    _holds(b, gt)


def test_fabricated_evidence_is_dropped_when_the_page_text_is_at_hand():
    b, c = spec_fabricated()
    assert "V4 EVIDENCE_FABRICATED" in _blockers(b, c)
    gt, changes = apply_correction(c, doc_id=b.doc_id, total_pages=3, bundle=b,
                                   corrected_presence={"Clinical Note": "EMBEDDED_RAW"})
    assert "segments[0]: 1 evidence item(s) dropped (type not present, page outside the segment, or not on its page)" \
        in changes
    _holds(b, gt)


@pytest.mark.parametrize("kwargs,match", [
    ({"corrected_mixture": {"Genomic Report": "MENTION_ONLY"}}, r"corrected_mixture\['Genomic Report'\]: MENTION_ONLY is weaker"),
    ({"corrected_mixture": {"Radiology Report": "EMBEDDED_RAW"}}, "stronger than every segment's level; say in which"),
    ({"corrected_dominant_type": "Radiology Report"}, "Radiology Report is the type of no segment"),
    ({"corrected_segments": [{"page_start": 1, "page_end": 3, "dominant_type": "Other",
                              "presence": {"Other": "MENTION_ONLY"}}]}, r"presence sets Other MENTION_ONLY"),
    ({"corrected_presence": {"Genomic": "PRIMARY"}}, "corrected_presence: 'Genomic' is not a document type"),
    ({"corrected_presence": {"Other": "SOME"}}, r"corrected_presence\['Other'\]: 'SOME' is not a presence level"),
])
def test_contradicting_corrections_are_refused(kwargs, match):
    b, c = genomic_then_note()
    with pytest.raises(ValueError, match=match):
        apply_correction(c, doc_id=b.doc_id, total_pages=3, bundle=b, **kwargs)


@st.composite
def corrections(draw):
    kw = {}
    if draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(2, 3), max_size=2)))
        bounds = list(zip([1, *cuts], [*(x - 1 for x in cuts), 3], strict=True))
        segs = []
        for lo, hi in bounds:
            s = {"page_start": lo, "page_end": hi, "dominant_type": draw(st.sampled_from(DOC_TYPES))}
            if draw(st.booleans()):
                s["presence"] = draw(st.dictionaries(st.sampled_from(DOC_TYPES), st.sampled_from(LEVELS), max_size=3))
            segs.append(s)
        kw["corrected_segments"] = segs
    if draw(st.booleans()):
        kw["corrected_dominant_type"] = draw(st.sampled_from(DOC_TYPES))
    if draw(st.booleans()):
        kw["corrected_presence"] = draw(st.dictionaries(st.sampled_from(DOC_TYPES), st.sampled_from(LEVELS), max_size=3))
    if draw(st.booleans()):
        kw["corrected_mixture"] = draw(st.dictionaries(st.sampled_from(DOC_TYPES), st.sampled_from(LEVELS), max_size=3))
    return kw


@settings(max_examples=200, deadline=None)
@given(classifications(), corrections())
def test_a_random_correction_holds_or_is_refused(primary, kw):
    """Over random (often contradictory) primary classifications and random corrections: either
    the correction is refused with a ValueError, or the record has no rule BLOCKER and no
    contradiction."""
    b, _ = genomic_then_note()
    try:
        gt, changes = apply_correction(primary, doc_id=b.doc_id, total_pages=3, bundle=b, **kw)
    except ValueError as exc:
        assert str(exc)  # a refusal names the problem
        return
    assert changes
    _holds(b, gt)
