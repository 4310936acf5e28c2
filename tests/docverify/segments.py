"""Bundles and classifications made by hand for the tests of V2's readings: pages of text, and segments
``(page_start, page_end, type)`` each with its type PRIMARY (one evidence item on its first page) and every
other type NO_EVIDENCE."""

from __future__ import annotations

from docverify.domain.models import DOC_TYPES, ClassificationOutput, DocumentBundle, Page


def bundle(pages: list[str]) -> DocumentBundle:
    return DocumentBundle(doc_id="d", file_path="x.pdf", total_pages=len(pages),
                          pages=[Page(page_num=i, text=t) for i, t in enumerate(pages, 1)])


def classification(segments: list[tuple[int, int, str]]) -> ClassificationOutput:
    segs = []
    for i, (a, b, t) in enumerate(segments, 1):
        segs.append({"segment_index": i, "page_start": a, "page_end": b, "segment_page_count": b - a + 1,
                     "dominant_type": t, "reasoning": "",
                     "classifications": [{"doc_type": d, "presence_level": "PRIMARY" if d == t else "NO_EVIDENCE",
                                          "confidence": 0.9, "segment_share": 1.0 if d == t else 0.0,
                                          "top_evidence": [{"snippet": "x", "page": a}] if d == t else []}
                                         for d in DOC_TYPES]})
    present = {s[2] for s in segments}
    return ClassificationOutput.model_validate({
        "doc_id": "d", "dominant_type_overall": segments[0][2], "number_of_segments": len(segs), "segments": segs,
        "document_mixture": [{"doc_type": d, "presence_level": "PRIMARY" if d in present else "NO_EVIDENCE",
                              "overall_share": 1.0 / len(present) if d in present else 0.0} for d in DOC_TYPES],
        "vendor_signals": [], "self_evaluation": {"confidence": 0.9, "notes": ""}})
