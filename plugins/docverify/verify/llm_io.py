"""The LLM-facing pieces every verifier's judgment shares: the base of the structured findings a
model answers (:class:`Finding`, :class:`JudgmentFindings`) and the helpers that build the inputs
a call reads (:func:`page_entry`, :func:`judgment_view`). Each verifier module derives its own
findings model and inputs from these (its :class:`~docverify.verify.spec.VerifierSpec`);
:mod:`docverify.llm.schemas` and :mod:`docverify.llm.prompts` use them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, model_validator

from docverify.domain.codes import CATALOGUE
from docverify.domain.models import SEVERITY_ORDER, ClassificationOutput, DocType, PresenceLevel, Severity


class LLMModel(BaseModel):
    # Unknown keys are ignored (a model adding a key is harmless); wrong values are not.
    model_config = ConfigDict(extra="ignore", hide_input_in_errors=True)  # no model output in a traceback


SeverityName = Literal["BLOCKER", "MAJOR"]
"""No code a judgment may report is MINOR in the catalogue, so MINOR is never allowed."""


class Finding(LLMModel):
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
            # a code a verifier brings (its findings model's Literal admits only its own codes): the
            # judge checks the severity against its registry's row when it makes the issue
            return self
        if SEVERITY_ORDER[Severity(self.severity)] > SEVERITY_ORDER[spec.severity]:
            raise ValueError(
                f"severity {self.severity} is below {spec.severity.value}, the lowest allowed for {self.code}"
            )
        return self

    def issue_details(self) -> dict[str, object]:
        """Facts of the finding beyond the common fields, for the issue's ``details`` (V4: page, snippet)."""
        return {}


class JudgmentFindings(LLMModel):
    """A judgment's answer: an empty list when nothing is wrong."""

    # a Sequence: each verifier narrows it to the list of its own findings
    findings: Sequence[Finding] = Field(description="One entry per problem; empty when there is none.")


class PageEntry(TypedDict):
    """One page as a call reads it (:func:`page_entry`)."""

    page_num: int
    text: str
    #: only when the text was cut (V3's context budget)
    truncated: NotRequired[bool]


class TypeClaimView(TypedDict):
    doc_type: DocType
    presence_level: PresenceLevel
    confidence: float
    #: each evidence item as its JSON (``Evidence.model_dump(mode="json")``)
    top_evidence: list[dict[str, object]]


class SegmentView(TypedDict):
    segment_index: int
    page_start: int
    page_end: int
    dominant_type: DocType
    reasoning: str
    classifications: list[TypeClaimView]


class MixtureView(TypedDict):
    doc_type: DocType
    presence_level: PresenceLevel


class JudgmentView(TypedDict):
    """The part of a classification a judgment reads (:func:`judgment_view`)."""

    dominant_type_overall: DocType
    vendor_signals: list[str]
    segments: list[SegmentView]
    document_mixture: list[MixtureView]


class DocumentInputs(TypedDict):
    """What a call reads of the document: its page count and the pages sent (the classification call
    reads only these; :func:`docverify.llm.prompts.render_user_prompt` fences them)."""

    total_pages: int
    pages: list[PageEntry]


class JudgmentInputs(DocumentInputs):
    """A judgment's inputs: the pages and the classification's :func:`judgment_view`."""

    classification: JudgmentView


def page_entry(page_num: int, text: str, truncated: bool = False) -> PageEntry:
    entry: PageEntry = {"page_num": page_num, "text": text}
    if truncated:
        entry["truncated"] = True
    return entry


def judgment_view(classification: ClassificationOutput) -> JudgmentView:
    """The part of a classification the V2/V3/V4 judgments read: doc types, presence levels,
    confidences, page ranges, evidence, reasoning and vendor signals — never the shares
    (``segment_share``, ``overall_share``) nor the derived ``segment_page_count`` and
    ``number_of_segments``, which the retry loop's fixes rewrite."""
    return {
        "dominant_type_overall": classification.dominant_type_overall,
        "vendor_signals": list(classification.vendor_signals),
        "segments": [
            {
                "segment_index": seg.segment_index,
                "page_start": seg.page_start,
                "page_end": seg.page_end,
                "dominant_type": seg.dominant_type,
                "reasoning": seg.reasoning,
                "classifications": [
                    {
                        "doc_type": tc.doc_type,
                        "presence_level": tc.presence_level,
                        "confidence": tc.confidence,
                        "top_evidence": [ev.model_dump(mode="json") for ev in tc.top_evidence],
                    }
                    for tc in seg.classifications
                ],
            }
            for seg in classification.segments
        ],
        "document_mixture": [
            {"doc_type": m.doc_type, "presence_level": m.presence_level} for m in classification.document_mixture
        ],
    }
