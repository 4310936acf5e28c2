"""The specification's worked examples as data, and builders of valid bundles and
classifications (tests break one thing at a time; scripts/make_examples.py writes the examples
to include/examples/ for the CLI). All texts here are written for this project: no patient data."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TypedDict

from docverify.domain.models import DOC_TYPES, DocumentBundle

GENOMIC_P1 = ("GENOMIC SEQUENCING REPORT\nSpecimen: peripheral blood\n"
              "BRCA1/2 Analysis — Full Gene Sequencing\nMethod: next-generation sequencing of all coding exons.")
GENOMIC_P2 = ("VARIANT FINDINGS\nBRCA1 c.5266dupC (p.Gln1756fs) pathogenic variant detected, heterozygous.\n"
              "Interpretation: this germline variant is associated with hereditary breast and ovarian cancer.")
NOTE_P3 = ("PROGRESS NOTE\nHISTORY OF PRESENT ILLNESS: The patient returns to discuss genetic test results.\n"
           "ASSESSMENT AND PLAN: Refer to high-risk breast clinic; discuss risk-reducing surgery.")


class EvidenceJSON(TypedDict):
    """An evidence item of a classification as JSON (:class:`~docverify.domain.models.Evidence`)."""

    snippet: str
    page: int
    anchors_found: list[str]


class TypeClassificationJSON(TypedDict):
    """One type of a segment (:class:`~docverify.domain.models.TypeClassification`)."""

    doc_type: str
    presence_level: str
    confidence: float
    segment_share: float
    top_evidence: list[EvidenceJSON]


class SegmentJSON(TypedDict):
    """One segment (:class:`~docverify.domain.models.Segment`)."""

    segment_index: int
    page_start: int
    page_end: int
    segment_page_count: int
    dominant_type: str
    reasoning: str
    classifications: list[TypeClassificationJSON]


class MixtureEntryJSON(TypedDict):
    """One entry of the document mixture (:class:`~docverify.domain.models.MixtureEntry`)."""

    doc_type: str
    presence_level: str
    overall_share: float


class SelfEvaluationJSON(TypedDict):
    confidence: float
    notes: str


class ClassificationJSON(TypedDict):
    """A classification as the builders write it: the JSON a classifier hands in
    (:class:`~docverify.domain.models.ClassificationOutput`'s fields; tests break it on purpose)."""

    doc_id: str
    dominant_type_overall: str
    number_of_segments: int
    segments: list[SegmentJSON]
    document_mixture: list[MixtureEntryJSON]
    vendor_signals: list[str]
    self_evaluation: SelfEvaluationJSON
    classifier: str


def bundle(pages: list[str], doc_id: str = "doc1") -> DocumentBundle:
    return DocumentBundle(
        doc_id=doc_id, file_path=f"/tmp/{doc_id}.pdf", sha256="0" * 64, total_pages=len(pages),
        processing_timestamp="2026-11-21T00:00:00Z", parser="test",
        pages=[{"page_num": i + 1, "text": t, "paragraphs": [x for x in t.split("\n") if x]}
               for i, t in enumerate(pages)],
    )


def offline_segments(*pages: str) -> list[tuple[str, int, int]]:
    """The offline classifier's segments ``(type, first page, last page)`` of a document of ``pages``."""
    from docverify.classify.offline import classify_offline

    return [(s.dominant_type, s.page_start, s.page_end) for s in classify_offline(bundle(list(pages))).segments]


def _types(dominant: str, evidence: EvidenceJSON,
           shares: dict[str, float] | None = None) -> list[TypeClassificationJSON]:
    out: list[TypeClassificationJSON] = []
    for t in DOC_TYPES:
        if t == dominant:
            out.append({"doc_type": t, "presence_level": "PRIMARY", "confidence": 0.9,
                        "segment_share": 1.0 if shares is None else shares[t], "top_evidence": [evidence]})
        else:
            out.append({"doc_type": t, "presence_level": "NO_EVIDENCE", "confidence": 0.0,
                        "segment_share": 0.0 if shares is None else shares[t], "top_evidence": []})
    return out


def classification(segments: list[tuple[int, int, str, EvidenceJSON]], doc_id: str = "doc1",
                   vendors: list[str] | None = None) -> ClassificationJSON:
    """segments: (start, end, dominant type, evidence dict). Valid by construction."""
    segs: list[SegmentJSON] = []
    pages_total = sum(e - s + 1 for s, e, _, _ in segments)
    weights: dict[str, float] = dict.fromkeys(DOC_TYPES, 0.0)
    for i, (s, e, dom, ev) in enumerate(segments, start=1):
        segs.append({"segment_index": i, "page_start": s, "page_end": e, "segment_page_count": e - s + 1,
                     "dominant_type": dom, "reasoning": "test", "classifications": _types(dom, ev)})
        weights[dom] += (e - s + 1) / pages_total
    dominant = max(weights, key=weights.__getitem__)
    mixture: list[MixtureEntryJSON] = [{"doc_type": t, "presence_level": "PRIMARY" if weights[t] > 0 else "NO_EVIDENCE",
                "overall_share": weights[t]} for t in DOC_TYPES]
    return {"doc_id": doc_id, "dominant_type_overall": dominant, "number_of_segments": len(segs),
            "segments": segs, "document_mixture": mixture, "vendor_signals": vendors or [],
            "self_evaluation": {"confidence": 0.8, "notes": "test"}, "classifier": "test"}


def genomic_then_note() -> tuple[DocumentBundle, ClassificationJSON]:
    """The spec's 'doc2_6' shape: genomic pages followed by a clinical note."""
    b = bundle([GENOMIC_P1, GENOMIC_P2, NOTE_P3], "doc2_6")
    c = classification([
        (1, 2, "Genomic Report", {"snippet": "BRCA1/2 Analysis — Full Gene Sequencing", "page": 1,
                                  "anchors_found": ["BRCA1/2 Analysis"]}),
        (3, 3, "Clinical Note", {"snippet": "ASSESSMENT AND PLAN: Refer to high-risk breast clinic", "page": 3,
                                 "anchors_found": ["ASSESSMENT AND PLAN"]}),
    ], "doc2_6")
    return b, c


def mutate(c: ClassificationJSON, fn: Callable[[ClassificationJSON], None]) -> ClassificationJSON:
    c = copy.deepcopy(c)
    fn(c)
    return c


CBC_QUEST = ("Quest Diagnostics\nCBC WITH DIFFERENTIAL\nWBC 8.2 x10E3/uL  Reference range 3.4-10.8\n"
             "RBC 4.61  Hemoglobin 13.4 g/dL  Hematocrit 40.1 %\nPLT 250 x10E3/uL")


def spec_auto_retry() -> tuple[DocumentBundle, ClassificationJSON]:
    """Slide 7/8: two fixable MAJOR (segment 1 shares sum to 1.06, mixture sums to 0.97) and one
    MINOR (Genomic Report MENTION_ONLY without evidence) → AUTO_RETRY → normalised → AUTO_ACCEPT."""
    b, c = genomic_then_note()
    shares = {"Genomic Report": 0.92, "Clinical Note": 0.06, "Pathology Report": 0.04,
              "Radiology Report": 0.02, "Other": 0.02}  # sum 1.06

    def shape(c: ClassificationJSON) -> None:
        for tc in c["segments"][0]["classifications"]:
            tc["segment_share"] = shares[tc["doc_type"]]
        seg2 = {tc["doc_type"]: tc for tc in c["segments"][1]["classifications"]}
        genomic = seg2["Genomic Report"]
        genomic["presence_level"], genomic["confidence"], genomic["segment_share"] = "MENTION_ONLY", 0.3, 0.1
        seg2["Clinical Note"]["segment_share"] = 0.9
        mixture = {"Genomic Report": 0.62, "Clinical Note": 0.35, "Pathology Report": 0.0,
                   "Radiology Report": 0.0, "Other": 0.0}  # sum 0.97
        for m in c["document_mixture"]:
            m["overall_share"] = mixture[m["doc_type"]]
    return b, mutate(c, shape)


def spec_escalate() -> tuple[DocumentBundle, ClassificationJSON]:
    """Slide 5/7: a routine Quest CBC panel classified as Genomic Report PRIMARY → rule 1."""
    b = bundle([CBC_QUEST], "quest_cbc")
    c = classification([(1, 1, "Genomic Report", {"snippet": "CBC WITH DIFFERENTIAL", "page": 1,
                                                  "anchors_found": ["WBC", "RBC", "PLT"]})],
                       "quest_cbc", vendors=["Quest Diagnostics"])
    c["segments"][0]["classifications"][2]["confidence"] = 0.78
    return b, c


def spec_fabricated() -> tuple[DocumentBundle, ClassificationJSON]:
    """Slide 6: a snippet that is not on its page, nor anywhere → EVIDENCE_FABRICATED BLOCKER."""
    b = bundle([GENOMIC_P1, GENOMIC_P2, "Patient history reviewed. No prior genetic testing.\n"
                "Family history: mother with breast cancer age 52."], "fabricated")
    c = classification([(1, 3, "Genomic Report", {"snippet": "BRCA1 pathogenic variant c.5266dupC detected",
                                                  "page": 3, "anchors_found": ["Variant Classification"]})],
                       "fabricated")
    return b, c


WORKED_EXAMPLES = {"spec_auto_retry": spec_auto_retry, "spec_escalate": spec_escalate,
                   "spec_fabricated": spec_fabricated}
