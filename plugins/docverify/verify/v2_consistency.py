"""V2 — internal consistency (spec slide 4, second half).

Rule phase (no LLM): each segment's five ``segment_share`` values and the mixture's five
``overall_share`` values sum to 1.0 ± 0.01 (MAJOR, auto-fixable by normalisation); no two
segments share a page (BLOCKER).

Judgment phase (does each segment's page text support its labels?): skipped when any rule
phase found a BLOCKER. The offline implementation below asks the lexicon whether the segment's
text lexically supports each PRIMARY label; the LLM one lives in ``docverify.llm``.
"""

from __future__ import annotations

from docverify.codes import make_issue
from docverify.models import ClassificationOutput, DocumentBundle, Issue
from docverify.verify.common import is_number, seg_loc, segment_text

IMPLEMENTATION = "rules-v1"
OFFLINE_IMPLEMENTATION = "offline-lexical-support-v1"
SHARE_TOLERANCE = 0.01


def _share_sum(values: list[float]) -> float | None:
    if not values or not all(is_number(v) for v in values):
        return None
    return float(sum(values))


def rule_phase(cls: ClassificationOutput) -> list[Issue]:
    issues: list[Issue] = []
    for seg in cls.segments:
        total = _share_sum([tc.segment_share for tc in seg.classifications])
        if total is not None and abs(total - 1.0) > SHARE_TOLERANCE:
            issues.append(make_issue(
                "SEGMENT_SHARE_SUM",
                f"Segment {seg.segment_index} shares sum to {total:.3f} instead of 1.0",
                location=seg_loc(seg),
                suggested_fix="Normalise the five segment_share values by their sum",
                # a zero (or negative) sum cannot be normalised: a person must decide
                auto_fixable=total > 0,
                details={"segment_index": seg.segment_index, "sum": round(total, 6)},
            ))
    total = _share_sum([m.overall_share for m in cls.document_mixture])
    if total is not None and abs(total - 1.0) > SHARE_TOLERANCE:
        issues.append(make_issue(
            "MIXTURE_SHARE_SUM",
            f"Mixture overall_share sums to {total:.3f} instead of 1.0",
            location="document_mixture",
            suggested_fix="Normalise the five overall_share values by their sum",
            auto_fixable=total > 0,
            details={"sum": round(total, 6)},
        ))
    issues += _page_overlaps(cls)
    return issues


def _page_overlaps(cls: ClassificationOutput) -> list[Issue]:
    """Segments that share a page, in O(n log n) and at most n − 1 issues: segments sorted by
    their first page, each compared with the one reaching furthest so far (a segment that
    overlaps any earlier one overlaps that one)."""
    issues: list[Issue] = []
    spans = sorted(((min(s.page_start, s.page_end), max(s.page_start, s.page_end), s.segment_index)
                    for s in cls.segments), key=lambda t: (t[0], t[1]))
    reach: tuple[int, int, int] | None = None  # (lo, hi, index) of the segment ending last so far
    for lo, hi, idx in spans:
        if reach is not None and lo <= reach[1]:
            a_idx, b_idx = sorted((reach[2], idx))
            o_lo, o_hi = lo, min(hi, reach[1])
            pages = f"page {o_lo}" if o_lo == o_hi else f"pages {o_lo}–{o_hi}"
            issues.append(make_issue(
                "PAGE_OVERLAP",
                f"Segments {a_idx} and {b_idx} both claim {pages}",
                location=f"segments[{a_idx}], segments[{b_idx}]",
                suggested_fix="Re-segment the document so that every page belongs to one segment",
                details={"segments": [a_idx, b_idx], "pages": [o_lo, o_hi]},
            ))
        if reach is None or hi > reach[1]:
            reach = (lo, hi, idx)
    return issues


def offline_judgment(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    """Lexical support of every PRIMARY label by its segment's whole page text."""
    from docverify.classify.lexicon import lexical_support

    issues: list[Issue] = []
    for seg in cls.segments:
        text = segment_text(bundle, seg)
        for tc in seg.classifications:
            if tc.presence_level != "PRIMARY":
                continue
            support = lexical_support(text, tc.doc_type)
            if support.supported:
                continue
            if not text.strip():
                why = "its pages have no text"
            else:
                why = f"its page text reads as {support.best_type}"
            issues.append(make_issue(
                "LABEL_TEXT_MISMATCH",
                f"Segment {seg.segment_index} is labelled {tc.doc_type} PRIMARY but {why} "
                f"(lexical support {support.score:.2f})",
                agent="V2",
                location=f"{seg_loc(seg)} → {tc.doc_type}",
                suggested_fix=f"Check the label; the text's best lexical match is {support.best_type}",
                details={"segment_index": seg.segment_index, "best_type": support.best_type,
                         "score": round(support.score, 4), "implementation": OFFLINE_IMPLEMENTATION},
            ))
    return issues
