"""V2's blind reading (ADR 0034): before the LLM judge sees the classifier's answer, it labels each
segment from the segment's page text alone; the verifier compares the two.

The model reads :func:`blind_inputs` — the pages every segment covers and each segment's page range,
**never** a label, a presence level, a confidence, evidence or the classifier's reasoning — under the
prompt ``include/prompts/v2_blind_v1.md`` and answers :class:`BlindReading` (per segment: one of the
five types, the probability it gives that type, a one-sentence reason). :func:`compare` turns a
segment whose blind label differs from the classifier's ``dominant_type`` with a probability of at
least :data:`DISAGREE_PROBABILITY` into ``INDEPENDENT_READING_DISAGREES`` (V2, MAJOR, not fixable),
naming both labels and the probability. A reading that leaves a segment unread (or reads one that
does not exist) is unusable: :func:`compare` raises and the judge reports the judgment incomplete,
never "no issue".

No Airflow, no LLM client here: the judge (:mod:`docverify.llm.judge`) makes the call from the
verifier's spec (:class:`~docverify.verify.spec.VerifierSpec` ``blind_*`` fields).
"""

from __future__ import annotations

from typing import TypedDict

from pydantic import BaseModel, Field

from docverify.domain.codes import make_issue
from docverify.domain.models import ClassificationOutput, DocType, DocumentBundle, Issue
from docverify.verify.common import page_span, seg_loc
from docverify.verify.llm_io import DocumentInputs, LLMModel, page_entry

PROMPT = "v2_blind_v1"

#: The probability from which a blind label that differs from the classifier's dominant type is a
#: finding. Not calibrated on a real model (none is reachable offline, ADR 0034): a reading below it
#: is the judge's doubt, not a second opinion; the end-to-end benchmark's ``--judge-model`` is
#: where a real endpoint's figure is measured.
DISAGREE_PROBABILITY = 0.7


class SegmentReading(LLMModel):
    segment_index: int = Field(description="The segment's index as given in <segments>.")
    doc_type: DocType = Field(description="The one document type the segment's text is.")
    probability: float = Field(ge=0.0, le=1.0, description=(
        "0.0-1.0: the probability that the segment is of this type, judged from its text alone."))
    reason: str = Field(description="One sentence: what in the text makes it this type. No patient identifiers.")


class BlindReading(LLMModel):
    segment_readings: list[SegmentReading] = Field(description="Exactly one entry per segment of <segments>.")


class SegmentRange(TypedDict):
    segment_index: int
    page_start: int
    page_end: int


class BlindReadingInputs(DocumentInputs):
    """What the blind reading reads: the pages and each segment's range, no label."""

    segments: list[SegmentRange]


def blind_inputs(bundle: DocumentBundle, classification: ClassificationOutput) -> BlindReadingInputs:
    """Exactly what the blind reading reads: the pages some segment covers (as V2's judgment) and
    each segment's index and page range — no label, level, confidence, evidence or reasoning."""
    ranges = [(s.page_start, s.page_end) for s in classification.segments]
    pages = [p for p in bundle.pages if any(lo <= p.page_num <= hi for lo, hi in ranges)]
    return {
        "total_pages": bundle.total_pages,
        "pages": [page_entry(p.page_num, p.text) for p in pages],
        "segments": [{"segment_index": s.segment_index, "page_start": s.page_start, "page_end": s.page_end}
                     for s in classification.segments],
    }


def compare(classification: ClassificationOutput, reading: BaseModel, implementation: str) -> list[Issue]:
    """``INDEPENDENT_READING_DISAGREES`` for every segment the blind reading labels with another type
    than the classifier's ``dominant_type`` at a probability of at least :data:`DISAGREE_PROBABILITY`.
    Raises ``ValueError`` when the reading does not read every segment exactly once."""
    if not isinstance(reading, BlindReading):
        raise ValueError(f"the blind reading is a {type(reading).__name__}, not a BlindReading")
    readings: list[SegmentReading] = list(reading.segment_readings)
    by_index: dict[int, SegmentReading] = {}
    for r in readings:
        if r.segment_index in by_index:
            raise ValueError(f"the blind reading reads segment {r.segment_index} twice")
        by_index[r.segment_index] = r
    wanted = {s.segment_index for s in classification.segments}
    if set(by_index) != wanted:
        raise ValueError(f"the blind reading read segments {sorted(by_index)}, not {sorted(wanted)}")
    issues: list[Issue] = []
    for seg in classification.segments:
        r = by_index[seg.segment_index]
        blind, labelled = str(r.doc_type), str(seg.dominant_type)
        if blind == labelled or r.probability < DISAGREE_PROBABILITY:
            continue
        pages = page_span(seg.page_start, seg.page_end)
        issues.append(make_issue(
            "INDEPENDENT_READING_DISAGREES",
            f"Segment {seg.segment_index} ({pages}) is labelled {labelled} by the classifier, but a reading of its "
            f"text without the classifier's labels finds {blind} (probability {r.probability:.2f}): {r.reason}",
            agent="V2",
            location=f"{seg_loc(seg)} → {labelled}",
            suggested_fix=f"Check whether segment {seg.segment_index} is {blind} rather than {labelled}",
            auto_fixable=False,
            details={"implementation": implementation, "classifier_label": labelled, "blind_label": blind,
                     "probability": round(r.probability, 4), "threshold": DISAGREE_PROBABILITY},
        ))
    return issues
