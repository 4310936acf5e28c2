"""The LLM-facing output schemas: what a model must answer, as pydantic models (pydantic-ai's
``output_type``); an answer outside them is asked again."""

from __future__ import annotations

import logging
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from docverify.codes import CATALOGUE
from docverify.models import (
    SEVERITY_ORDER,
    Severity,
)

logger = logging.getLogger("docverify.llm")


# --------------------------------------------------------------------------- LLM-facing schemas

# The literal types mirror models.py / the jury's reason codes (tests/docverify/llm/test_llm_schemas.py)
DocTypeName = Literal["Clinical Note", "Pathology Report", "Genomic Report", "Radiology Report", "Other"]
PresenceName = Literal["PRIMARY", "EMBEDDED_RAW", "MENTION_ONLY", "NO_EVIDENCE"]


class _LLMModel(BaseModel):
    # Unknown keys are ignored (a model adding a key is harmless); wrong values are not.
    model_config = ConfigDict(extra="ignore", hide_input_in_errors=True)  # no model output in a traceback


class LLMEvidence(_LLMModel):
    snippet: str = Field(description="A short passage copied verbatim from one page of the segment.")
    page: int = Field(description="The page number (1-based) the snippet was copied from.")
    anchors_found: list[str] = Field(
        description="1-3 short key phrases copied verbatim from the same page that mark the type."
    )


class LLMTypeClassification(_LLMModel):
    doc_type: DocTypeName
    presence_level: PresenceName
    confidence: float = Field(description="0.0-1.0: how sure you are of this presence level.")
    segment_share: float = Field(description="0.0-1.0; the five shares of a segment sum to 1.0.")
    top_evidence: list[LLMEvidence] = Field(
        description="1-3 items for a type that is not NO_EVIDENCE; empty for NO_EVIDENCE."
    )


class LLMSegment(_LLMModel):
    segment_index: int = Field(description="1, 2, … in page order.")
    page_start: int
    page_end: int
    segment_page_count: int = Field(description="page_end - page_start + 1.")
    dominant_type: DocTypeName
    reasoning: str = Field(description="One or two sentences, no patient identifiers.")
    classifications: list[LLMTypeClassification] = Field(
        description="Exactly five entries: each document type once."
    )


class LLMMixtureEntry(_LLMModel):
    doc_type: DocTypeName
    presence_level: PresenceName
    overall_share: float = Field(description="Page-weighted share; the five sum to 1.0.")


class LLMSelfEvaluation(_LLMModel):
    confidence: float
    notes: str


class ClassificationAnswer(_LLMModel):
    """What the classifier model answers; maps onto :class:`ClassificationOutput` (plus doc_id and
    classifier). Only the shape is enforced here — values (a confidence of 1.7, a page 0, a wrong
    segment count) go through unchanged so that V1 can report them."""

    dominant_type_overall: DocTypeName
    number_of_segments: int
    segments: list[LLMSegment]
    document_mixture: list[LLMMixtureEntry] = Field(description="Exactly five entries: each type once.")
    vendor_signals: list[str]
    self_evaluation: LLMSelfEvaluation


#: The issue codes each judgment may report (all non-fixable in the catalogue).
AGENT_CODES: dict[str, tuple[str, ...]] = {
    "V2": ("LABEL_TEXT_MISMATCH",),
    "V3": ("TRAP_CONTEXT",),
    "V4": ("EVIDENCE_FABRICATED", "EVIDENCE_WEAK", "ANCHOR_NOT_ON_PAGE"),
}

SeverityName = Literal["BLOCKER", "MAJOR"]
"""No code a judgment may report is MINOR in the catalogue, so MINOR is never allowed."""

for _agent, _codes in AGENT_CODES.items():
    for _code in _codes:
        _spec = CATALOGUE[_code]
        assert _spec.agent == _agent and not _spec.auto_fixable, _code
        assert _spec.severity.value in get_args(SeverityName), _code


class Finding(_LLMModel):
    """One problem a judgment found. ``severity`` may only equal or exceed the catalogue's
    severity of ``code``; a lower one fails validation, so the model is asked again."""

    code: str
    severity: SeverityName = Field(description="The code's severity as the instructions give it.")
    message: str = Field(description="One or two sentences for a reviewer; no patient identifiers.")
    location: str = Field(description="Where in the classification, e.g. 'segments[1] → Genomic Report'.")
    suggested_fix: str = Field(description="What the label or evidence should be.")

    @model_validator(mode="after")
    def _severity_not_below_catalogue(self) -> Finding:
        spec = CATALOGUE.get(self.code)
        if spec is None:
            raise ValueError(f"unknown issue code {self.code!r}")
        if SEVERITY_ORDER[Severity(self.severity)] > SEVERITY_ORDER[spec.severity]:
            raise ValueError(
                f"severity {self.severity} is below {spec.severity.value}, the lowest allowed for {self.code}"
            )
        return self


class ConsistencyFinding(Finding):
    code: Literal["LABEL_TEXT_MISMATCH"]


class ContextFinding(Finding):
    code: Literal["TRAP_CONTEXT"]


class EvidenceFinding(Finding):
    code: Literal["EVIDENCE_FABRICATED", "EVIDENCE_WEAK", "ANCHOR_NOT_ON_PAGE"]
    page: int | None = Field(default=None, description="The page the evidence item cites.")
    snippet: str | None = Field(
        default=None, description="The evidence snippet (or anchor) exactly as the classification gives it."
    )


class JudgmentFindings(_LLMModel):
    """A judgment's answer: an empty list when nothing is wrong."""

    findings: list[Finding] = Field(description="One entry per problem; empty when there is none.")


class ConsistencyFindings(JudgmentFindings):
    findings: list[ConsistencyFinding] = Field(description="One entry per problem; empty when there is none.")


class ContextFindings(JudgmentFindings):
    findings: list[ContextFinding] = Field(description="One entry per problem; empty when there is none.")


class EvidenceFindings(JudgmentFindings):
    findings: list[EvidenceFinding] = Field(description="One entry per problem; empty when there is none.")


for _agent, _model in (("V2", ConsistencyFindings), ("V3", ContextFindings), ("V4", EvidenceFindings)):
    _finding_type = _model.model_fields["findings"].annotation.__args__[0]  # type: ignore[union-attr]
    assert set(get_args(_finding_type.model_fields["code"].annotation)) == set(AGENT_CODES[_agent])

#: The jury's reason codes (README "CR_V2 jury"): the CR_V2 structural codes justify a FLIP, the
#: drop-justified codes a DROP; the rest describe a KEEP or a FLAG.
JURY_REASON_CODES: tuple[str, ...] = (
    "NEGATION_SCOPE", "CONTRAST_CLAUSE", "STRUCTURAL_INCONSISTENT",  # structural (FLIP)
    "WEAK_EVIDENCE", "REDUNDANT_UPPER_REF",  # drop-justified (DROP)
    "SUPPORTED_BY_TEXT", "INSUFFICIENT_CONTEXT", "OTHER",
)
JuryReason = Literal[
    "NEGATION_SCOPE", "CONTRAST_CLAUSE", "STRUCTURAL_INCONSISTENT", "WEAK_EVIDENCE", "REDUNDANT_UPPER_REF",
    "SUPPORTED_BY_TEXT", "INSUFFICIENT_CONTEXT", "OTHER",
]


class JuryVote(_LLMModel):
    """One juror's vote on one finding of a judgment phase."""

    vote: Literal["KEEP", "DROP", "FLIP", "FLAG"] = Field(
        description="KEEP: the finding stands. DROP: a false alarm. FLIP: the opposite presence level holds "
        "(PRIMARY <-> MENTION_ONLY). FLAG: you cannot tell."
    )
    reason_code: JuryReason = Field(description="The one code that best explains the vote.")


class SecondOpinionAnswer(_LLMModel):
    """The V5 second opinion: a route for the document and how sure the model is."""

    route: Literal["AUTO_ACCEPT", "AUTO_RETRY", "ESCALATE_TO_SME"]
    confidence: float = Field(description="0.0-1.0: how sure you are of this route.")
    reasoning: str = Field(description="One sentence with issue ids and codes only; no patient identifiers, "
                           "no text copied from the document.")


OUTPUT_TYPES: dict[str, type[BaseModel]] = {
    "classify": ClassificationAnswer,
    "V2": ConsistencyFindings,
    "V3": ContextFindings,
    "V4": EvidenceFindings,
    "JURY": JuryVote,
    "JURY_EVIDENCE": JuryVote,
    "V5_SECOND": SecondOpinionAnswer,
}

_AGENT_TITLES = {"V2": "consistency", "V3": "context", "V4": "evidence"}
