"""Auto-fix engine: spec example, registry completeness, idempotence."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripts.support.examples import genomic_then_note, mutate

from docverify.domain.codes import AUTO_FIXABLE_CODES, CATALOGUE
from docverify.domain.models import ClassificationOutput
from docverify.pipeline.autofix import FIXERS, apply_fixes, normalise_shares
from docverify.verify import v1_schema, v2_consistency, v4_evidence


def test_every_auto_fixable_code_has_a_fixer():
    assert set(FIXERS) >= AUTO_FIXABLE_CODES, AUTO_FIXABLE_CODES - set(FIXERS)
    assert set(FIXERS) <= set(CATALOGUE)


def test_spec_example_normalisation():
    out = normalise_shares([0.50, 0.30, 0.10, 0.08, 0.08])
    assert [round(v, 3) for v in out] == [0.472, 0.283, 0.094, 0.075, 0.075]
    assert sum(out) == pytest.approx(1.0, abs=1e-9)


@given(st.lists(st.floats(min_value=0, max_value=10, allow_nan=False), min_size=1, max_size=8)
       .filter(lambda v: sum(v) > 1e-6))
def test_normalised_shares_sum_to_one(values):
    assert abs(sum(normalise_shares(values)) - 1.0) <= 1e-9


def test_normalising_zero_sum_refuses():
    with pytest.raises(ValueError):
        normalise_shares([0.0, 0.0])


def _issues(b, c):
    cls = ClassificationOutput.model_validate(c)
    return cls, v1_schema.check(b, cls) + v2_consistency.rule_phase(cls) + v4_evidence.rule_phase(b, cls)


@pytest.mark.parametrize("mutation,code", [
    (lambda c: c.update(number_of_segments=5), "SEGMENT_COUNT_MISMATCH"),
    (lambda c: c["segments"][0].update(segment_page_count=7), "SEGMENT_PAGE_COUNT_WRONG"),
    # a NO_EVIDENCE entry: dropping the dominant type's own entry is also a contradiction (issue 10)
    (lambda c: c["segments"][1]["classifications"].pop(1), "DOC_TYPE_MISSING"),
    (lambda c: c["document_mixture"].pop(3), "DOC_TYPE_MISSING"),
    (lambda c: [tc.update(segment_share=tc["segment_share"] * 1.3 + 0.01) for tc in c["segments"][0]["classifications"]],
     "SEGMENT_SHARE_SUM"),
    (lambda c: [m.update(overall_share=m["overall_share"] * 0.9) for m in c["document_mixture"]], "MIXTURE_SHARE_SUM"),
    (lambda c: c["segments"][0]["classifications"][2]["top_evidence"][0].update(page=2), "EVIDENCE_WRONG_PAGE"),
])
def test_each_fixer_clears_its_issue(mutation, code):
    b, c = genomic_then_note()
    cls, issues = _issues(b, mutate(c, mutation))
    assert code in {i.code for i in issues}
    fixed, applied = apply_fixes(cls, issues, attempt=0)
    assert [a.codes for a in applied] == [[code]]
    _, after = _issues(b, fixed.model_dump())
    assert code not in {i.code for i in after}, after
    # idempotent: fixing again changes nothing
    again, applied2 = apply_fixes(fixed, issues, attempt=1)
    assert applied2 == [] and again == fixed


def test_apply_fixes_does_not_touch_its_input():
    b, c = genomic_then_note()
    cls, issues = _issues(b, mutate(c, lambda c: c.update(number_of_segments=5)))
    apply_fixes(cls, issues, attempt=0)
    assert cls.number_of_segments == 5
