"""The LLM-facing schemas mirror the domain's vocabularies (they were import-time asserts)."""

from typing import get_args

from docverify.domain.models import DOC_TYPES, PresenceLevel
from docverify.llm.schemas import JURY_REASON_CODES, DocTypeName, JuryReason, PresenceName


def test_the_answer_literals_are_the_domains_types_presences_and_reasons():
    assert set(get_args(DocTypeName)) == set(DOC_TYPES)
    assert set(get_args(PresenceName)) == {p.value for p in PresenceLevel}
    assert set(get_args(JuryReason)) == set(JURY_REASON_CODES)
