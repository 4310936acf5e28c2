"""V2 rule-phase checks beyond the specification (ADR 0022), each switched by the
:class:`~docverify.domain.policy.VerifyPolicy` that :func:`docverify.verify.v2_consistency.rule_phase`
is given (without a policy, or without the bundle, none runs: the rule phase is the
specification's).

* ``PATIENT_IDENTITY_CONFLICT`` (``policy.patient_identity``): :mod:`docverify.verify.identity`.
* ``LOW_CONFIDENCE_PRIMARY`` (``policy.min_primary_confidence`` > 0): a PRIMARY type whose own
  confidence is below the minimum. V2, not V1: the confidence is a valid number (V1's range check
  passed); what is wrong is that the classification claims PRIMARY while doubting it — a
  contradiction between two fields of one classification, which is V2's (like
  ``PRIMARY_WITHOUT_SHARE``). MAJOR and not fixable: whether the label or the confidence is wrong
  is a judgment, so V5's rule 4 sends it to a person.
"""

from __future__ import annotations

from docverify.domain.codes import make_issue
from docverify.domain.models import ClassificationOutput, DocumentBundle, Issue
from docverify.domain.policy import VerifyPolicy
from docverify.verify import identity
from docverify.verify.common import is_number, type_loc


def low_confidence_primary(cls: ClassificationOutput, minimum: float) -> list[Issue]:
    """``LOW_CONFIDENCE_PRIMARY`` for every PRIMARY entry whose confidence is below ``minimum``
    (0 or less: off)."""
    if minimum <= 0:
        return []
    issues = []
    for seg in cls.segments:
        for tc in seg.classifications:
            if tc.presence_level == "PRIMARY" and is_number(tc.confidence) and tc.confidence < minimum:
                issues.append(make_issue(
                    "LOW_CONFIDENCE_PRIMARY",
                    f"Segment {seg.segment_index}: {tc.doc_type} is PRIMARY with confidence {tc.confidence:.2f}, "
                    f"below the minimum {minimum:.2f}",
                    agent="V2",
                    location=type_loc(seg, tc),
                    suggested_fix="Check the label against the document: confirm it or re-classify the segment",
                    details={"segment_index": seg.segment_index, "doc_type": tc.doc_type,
                             "confidence": tc.confidence, "minimum": minimum},
                ))
    return issues


def rule_checks(bundle: DocumentBundle | None, cls: ClassificationOutput, policy: VerifyPolicy | None) -> list[Issue]:
    """The V2 rule-phase issues of the checks ``policy`` switches on (none without a policy)."""
    if policy is None:
        return []
    issues: list[Issue] = []
    if policy.patient_identity and bundle is not None:
        issues += identity.check(bundle, cls)
    return issues + low_confidence_primary(cls, policy.min_primary_confidence)
