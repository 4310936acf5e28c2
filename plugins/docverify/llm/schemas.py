"""The LLM-facing output schemas: what a model must answer, as pydantic models (pydantic-ai's
``output_type``); an answer outside them is asked again."""

from __future__ import annotations

import logging
from typing import Literal, cast

from pydantic import BaseModel, Field

from docverify.verify.llm_io import LLMModel
from docverify.verify.registry import REGISTRY

logger = logging.getLogger("docverify.llm")


# --------------------------------------------------------------------------- LLM-facing schemas

# The literal types mirror models.py / the jury's reason codes (tests/docverify/llm/test_llm_schemas.py)
DocTypeName = Literal["Clinical Note", "Pathology Report", "Genomic Report", "Radiology Report", "Other"]
PresenceName = Literal["PRIMARY", "EMBEDDED_RAW", "MENTION_ONLY", "NO_EVIDENCE"]


class LLMEvidence(LLMModel):
    snippet: str = Field(description="A short passage copied verbatim from one page of the segment.")
    page: int = Field(description="The page number (1-based) the snippet was copied from.")
    anchors_found: list[str] = Field(
        description="1-3 short key phrases copied verbatim from the same page that mark the type."
    )


class LLMTypeClassification(LLMModel):
    doc_type: DocTypeName
    presence_level: PresenceName
    confidence: float = Field(description="0.0-1.0: how sure you are of this presence level.")
    segment_share: float = Field(description="0.0-1.0; the five shares of a segment sum to 1.0.")
    top_evidence: list[LLMEvidence] = Field(
        description="1-3 items for a type that is not NO_EVIDENCE; empty for NO_EVIDENCE."
    )


class LLMSegment(LLMModel):
    segment_index: int = Field(description="1, 2, … in page order.")
    page_start: int
    page_end: int
    segment_page_count: int = Field(description="page_end - page_start + 1.")
    dominant_type: DocTypeName
    reasoning: str = Field(description="One or two sentences, no patient identifiers.")
    classifications: list[LLMTypeClassification] = Field(
        description="Exactly five entries: each document type once."
    )


class LLMMixtureEntry(LLMModel):
    doc_type: DocTypeName
    presence_level: PresenceName
    overall_share: float = Field(description="Page-weighted share; the five sum to 1.0.")


class LLMSelfEvaluation(LLMModel):
    confidence: float
    notes: str


class ClassificationAnswer(LLMModel):
    """What the classifier model answers; maps onto :class:`ClassificationOutput` (plus doc_id and
    classifier). Only the shape is enforced here — values (a confidence of 1.7, a page 0, a wrong
    segment count) go through unchanged so that V1 can report them."""

    dominant_type_overall: DocTypeName
    number_of_segments: int
    segments: list[LLMSegment]
    document_mixture: list[LLMMixtureEntry] = Field(description="Exactly five entries: each type once.")
    vendor_signals: list[str]
    self_evaluation: LLMSelfEvaluation


#: The issue codes each judgment may report (all non-fixable in the catalogue), from the registry.
AGENT_CODES: dict[str, tuple[str, ...]] = {s.agent: s.judgment_codes for s in REGISTRY.judged}

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


class JuryVote(LLMModel):
    """One juror's vote on one finding of a judgment phase."""

    vote: Literal["KEEP", "DROP", "FLIP", "FLAG"] = Field(
        description="KEEP: the finding stands. DROP: a false alarm. FLIP: the opposite presence level holds "
        "(PRIMARY <-> MENTION_ONLY). FLAG: you cannot tell."
    )
    reason_code: JuryReason = Field(description="The one code that best explains the vote.")


class SecondOpinionAnswer(LLMModel):
    """The V5 second opinion: a route for the document and how sure the model is."""

    route: Literal["AUTO_ACCEPT", "AUTO_RETRY", "ESCALATE_TO_SME"]
    confidence: float = Field(description="0.0-1.0: how sure you are of this route.")
    reasoning: str = Field(description="One sentence with issue ids and codes only; no patient identifiers, "
                           "no text copied from the document.")


OUTPUT_TYPES: dict[str, type[BaseModel]] = {
    "classify": ClassificationAnswer,
    **{s.agent: cast("type[BaseModel]", s.findings_model) for s in REGISTRY.judged},  # check() ensures it
    # the blind readings asked before a judgment (ADR 0034: V2_BLIND)
    **{s.blind_kind: cast("type[BaseModel]", s.blind_model) for s in REGISTRY.judged if s.blind},
    "JURY": JuryVote,
    "JURY_EVIDENCE": JuryVote,
    "V5_SECOND": SecondOpinionAnswer,
}

_AGENT_TITLES = {s.agent: s.title for s in REGISTRY.judged}
