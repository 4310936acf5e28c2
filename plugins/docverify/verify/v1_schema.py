"""V1 — schema & completeness (spec slide 4). Pure rules, no LLM.

The six checks of the spec, plus the two that make them total: a classification that does not
match the schema at all (``SCHEMA_INVALID``), and shares outside [0, 1] (``SHARE_OUT_OF_RANGE``,
which share normalisation could not repair).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import ValidationError

from docverify.domain.codes import make_issue
from docverify.domain.models import DOC_TYPES, ClassificationOutput, DocumentBundle, Issue, Segment
from docverify.domain.policy import VerifyPolicy
from docverify.verify.common import is_number, iter_type_entries, seg_loc, type_loc
from docverify.verify.spec import VerifierSpec

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

IMPLEMENTATION = "rules-v1"


#: pydantic error type → the JSON type the field expects
_EXPECTED = {"float_type": "number", "int_type": "integer", "string_type": "string", "bool_type": "boolean",
             "list_type": "array", "model_type": "object", "dict_type": "object", "enum": "enum member",
             "literal_error": "enum member", "missing": "a value", "extra_forbidden": "no such field"}


def _json_type(value: object) -> str:
    """The JSON type of a value, never the value: values may be page text (PHI)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if value.is_integer() else "number with a fraction"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _error(e: ErrorDetails) -> dict[str, str]:
    out = {"path": ".".join(str(p) for p in e["loc"]) or "<root>", "error": e["type"],
           "expected": _EXPECTED.get(e["type"], e["type"])}
    if e["type"] not in ("missing", "extra_forbidden") and "input" in e:
        out["got"] = _json_type(e["input"])
    return out


def parse(raw: object) -> tuple[ClassificationOutput | None, list[Issue]]:
    """Parse a raw classification. A shape error becomes one ``SCHEMA_INVALID`` BLOCKER that
    lists the first problems: field path, what was expected and the JSON type that came (a
    confidence of ``true`` or ``"0.9"``, a page of ``2.5``, an enum in the wrong case — the
    models are strict, ADR 0020), never the value. ``details["errors"]`` has the same per error
    (path, pydantic error type, expected, got)."""
    if isinstance(raw, ClassificationOutput):
        return raw, []
    try:
        return ClassificationOutput.model_validate(raw), []
    except ValidationError as exc:
        errs = exc.errors()
        typed = [_error(e) for e in errs[:5]]
        where = "; ".join(
            f"{t['path']}: {e['msg']}" + (f" (got {t['got']})" if "got" in t else "")
            for t, e in zip(typed, errs[:5], strict=True)
        )
        more = f" (and {len(errs) - 5} more)" if len(errs) > 5 else ""
        return None, [
            make_issue(
                "SCHEMA_INVALID",
                f"The classification does not match the ClassificationOutput schema: {where}{more}",
                location="<root>",
                suggested_fix="Re-run the classifier; check it against include/schemas/ClassificationOutput.json",
                details={"error_count": len(errs), "errors": typed},
            )
        ]


def check(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    issues: list[Issue] = []
    total = bundle.total_pages

    # 1 — number_of_segments matches the array
    if not cls.segments:
        issues.append(make_issue("SCHEMA_INVALID", "The segments array is empty: no page is classified",
                                 location="segments", suggested_fix="Re-run the classifier"))
    if cls.number_of_segments != len(cls.segments):
        issues.append(make_issue(
            "SEGMENT_COUNT_MISMATCH",
            f"number_of_segments is {cls.number_of_segments} but segments array has {len(cls.segments)} items",
            location="number_of_segments",
            suggested_fix=f"Set number_of_segments to {len(cls.segments)}",
        ))

    for seg in cls.segments:
        issues += _segment_issues(seg, total)
    issues += _mixture_issues(cls)
    issues += page_coverage(bundle, cls)
    issues += evidence_pages(bundle, cls)
    return issues



def _segment_issues(seg: Segment, total: int) -> list[Issue]:
    """Checks 2–6 of one segment: page bounds and order, its page count, confidences and shares in
    [0, 1], all five types, evidence for every type that is not NO_EVIDENCE."""
    issues: list[Issue] = []
    # 2 — page bounds and start ≤ end
    bad = [p for p in (seg.page_start, seg.page_end) if not 1 <= p <= total]
    if bad:
        issues.append(make_issue(
            "PAGE_OUT_OF_BOUNDS",
            f"Segment {seg.segment_index} spans pages {seg.page_start}–{seg.page_end} but the document has pages 1–{total}",
            location=seg_loc(seg), suggested_fix="Re-run the classifier with the document's real page count",
        ))
    if seg.page_start > seg.page_end:
        issues.append(make_issue(
            "PAGE_RANGE_INVERTED",
            f"Segment {seg.segment_index} starts on page {seg.page_start} after it ends on page {seg.page_end}",
            location=seg_loc(seg), suggested_fix="Re-run the classifier",
        ))
    # 3 — segment_page_count
    expected = seg.page_end - seg.page_start + 1
    if seg.page_start <= seg.page_end and seg.segment_page_count != expected:
        issues.append(make_issue(
            "SEGMENT_PAGE_COUNT_WRONG",
            f"Segment {seg.segment_index} has segment_page_count {seg.segment_page_count} but spans {expected} pages",
            location=f"{seg_loc(seg)}.segment_page_count", suggested_fix=f"Set segment_page_count to {expected}",
            details={"segment_index": seg.segment_index, "expected": expected},
        ))
    # 4 — confidences in [0, 1]; shares in [0, 1]
    for tc in seg.classifications:
        if not (is_number(tc.confidence) and 0.0 <= tc.confidence <= 1.0):
            issues.append(make_issue(
                "CONFIDENCE_OUT_OF_RANGE",
                f"Segment {seg.segment_index}, {tc.doc_type}: confidence {tc.confidence} is outside [0.0, 1.0]",
                location=f"{type_loc(seg, tc)}.confidence", suggested_fix="Re-run the classifier",
            ))
        if not (is_number(tc.segment_share) and 0.0 <= tc.segment_share <= 1.0):
            issues.append(make_issue(
                "SHARE_OUT_OF_RANGE",
                f"Segment {seg.segment_index}, {tc.doc_type}: segment_share {tc.segment_share} is outside [0.0, 1.0]",
                location=f"{type_loc(seg, tc)}.segment_share", suggested_fix="Re-run the classifier",
            ))
    # 5 — all five types in the segment
    issues += _completeness([tc.doc_type for tc in seg.classifications], f"Segment {seg.segment_index}",
                            seg_loc(seg), {"segment_index": seg.segment_index})
    # 6 — evidence for every type that is not NO_EVIDENCE
    for tc in seg.classifications:
        if tc.presence_level != "NO_EVIDENCE" and not tc.top_evidence:
            issues.append(make_issue(
                "EVIDENCE_MISSING",
                f"{tc.doc_type} is {tc.presence_level} in segment {seg.segment_index} but has no evidence snippets",
                location=f"{type_loc(seg, tc)}.top_evidence",
                suggested_fix="Cite at least one snippet from the page text, or mark the type NO_EVIDENCE",
            ))
    return issues


def _mixture_issues(cls: ClassificationOutput) -> list[Issue]:
    """The document mixture's five types and shares, and the self-evaluation's confidence, in range."""
    issues: list[Issue] = []
    issues += _completeness([m.doc_type for m in cls.document_mixture], "The document mixture",
                            "document_mixture", {"mixture": True})
    for m in cls.document_mixture:
        if not (is_number(m.overall_share) and 0.0 <= m.overall_share <= 1.0):
            issues.append(make_issue(
                "SHARE_OUT_OF_RANGE",
                f"Document mixture, {m.doc_type}: overall_share {m.overall_share} is outside [0.0, 1.0]",
                location=f"document_mixture → {m.doc_type}", suggested_fix="Re-run the classifier",
            ))
    if not (is_number(cls.self_evaluation.confidence) and 0.0 <= cls.self_evaluation.confidence <= 1.0):
        issues.append(make_issue(
            "CONFIDENCE_OUT_OF_RANGE",
            f"self_evaluation.confidence {cls.self_evaluation.confidence} is outside [0.0, 1.0]",
            location="self_evaluation.confidence", suggested_fix="Re-run the classifier",
        ))
    return issues


def _spans(pages: list[int]) -> str:
    """[1, 2, 3, 7] → '1–3, 7'."""
    out, start = [], None
    for k, p in enumerate(pages):
        if start is None:
            start = p
        if k + 1 == len(pages) or pages[k + 1] != p + 1:
            out.append(str(start) if start == p else f"{start}–{p}")
            start = None
    return ", ".join(out)


def page_coverage(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    """Every page 1..total_pages lies in some segment (``PAGE_NOT_COVERED``, BLOCKER: which
    segment owns the page is a classification, not arithmetic). Pages beyond ``total_pages`` are
    ``PAGE_OUT_OF_BOUNDS`` and two segments on one page V2's ``PAGE_OVERLAP``, so together every
    page is in exactly one segment."""
    if not cls.segments:
        return []  # SCHEMA_INVALID already says no page is classified
    covered: set[int] = set()
    for seg in cls.segments:
        lo, hi = max(1, min(seg.page_start, seg.page_end)), min(bundle.total_pages, max(seg.page_start, seg.page_end))
        covered.update(range(lo, hi + 1))
    missing = [p for p in range(1, bundle.total_pages + 1) if p not in covered]
    if not missing:
        return []
    return [make_issue(
        "PAGE_NOT_COVERED",
        f"Page(s) {_spans(missing)} of {bundle.total_pages} are in no segment",
        location="segments", suggested_fix="Re-segment the document so that every page belongs to one segment",
        details={"pages": missing},
    )]


def evidence_pages(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    """Every evidence item cites a page 1..total_pages (``EVIDENCE_PAGE_OUTSIDE_DOCUMENT``,
    BLOCKER). A page that does not exist is not a wrong page: V4 leaves such items alone, so the
    wrong-page fixer never "repairs" them."""
    issues = []
    for pos, seg, tc in iter_type_entries(cls):
        for k, ev in enumerate(tc.top_evidence):
            if not 1 <= ev.page <= bundle.total_pages:
                issues.append(make_issue(
                    "EVIDENCE_PAGE_OUTSIDE_DOCUMENT",
                    f"Evidence {k + 1} for {tc.doc_type} in segment {seg.segment_index} cites page {ev.page} "
                    f"but the document has pages 1–{bundle.total_pages}",
                    location=f"{type_loc(seg, tc)}.top_evidence[{k}].page",
                    suggested_fix="Re-run the classifier: evidence must cite a page of this document",
                    details={"segment_pos": pos, "doc_type": tc.doc_type, "evidence_index": k, "page": ev.page},
                ))
    return issues


def _completeness(types: list[str], what: str, location: str, details: Mapping[str, object]) -> list[Issue]:
    out: list[Issue] = []
    missing = [t for t in DOC_TYPES if t not in types]
    if missing:
        out.append(make_issue(
            "DOC_TYPE_MISSING",
            f"{what} lacks {', '.join(missing)} (all five document types must be present)",
            location=location, suggested_fix="Add the missing types as NO_EVIDENCE with confidence 0 and share 0",
            details={**details, "missing": missing},
        ))
    dupes = sorted({t for t in types if types.count(t) > 1})
    if dupes:
        out.append(make_issue(
            "DOC_TYPE_DUPLICATE",
            f"{what} lists {', '.join(dupes)} more than once",
            location=location, suggested_fix="Re-run the classifier",
        ))
    return out


# --------------------------------------------------------------------------- the verifier's spec

def _rule_phase(bundle: DocumentBundle, cls: ClassificationOutput, policy: VerifyPolicy) -> list[Issue]:
    return check(bundle, cls)


#: V1 in the registry (:mod:`docverify.verify.registry`): rules only, no judgment. Its parse step
#: (:func:`parse`) runs before every other verifier (:func:`docverify.pipeline.document.run_v1`).
SPEC = VerifierSpec(
    agent="V1",
    title="schema",
    codes=("SCHEMA_INVALID", "SEGMENT_COUNT_MISMATCH", "PAGE_OUT_OF_BOUNDS", "PAGE_RANGE_INVERTED",
           "SEGMENT_PAGE_COUNT_WRONG", "CONFIDENCE_OUT_OF_RANGE", "SHARE_OUT_OF_RANGE", "DOC_TYPE_MISSING",
           "DOC_TYPE_DUPLICATE", "EVIDENCE_MISSING", "PAGE_NOT_COVERED", "EVIDENCE_PAGE_OUTSIDE_DOCUMENT"),
    rule_phase=_rule_phase,
)
