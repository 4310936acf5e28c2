"""The catalogue of issue codes: one row per stable machine code.

Every verifier creates issues through :func:`make_issue`, so a code's severity, auto-fix flag
and IG code live here and nowhere else. A test checks that every auto-fixable code has a fixer
registered in :mod:`docverify.pipeline.autofix`. Which verifier may raise which code is its spec's
(:mod:`docverify.verify.registry`; ``tests/docverify/test_registry.py`` checks both agree); a new
verifier brings its own rows (``VerifierSpec.new_codes``): the registry builds its catalogue once, this
table plus those rows (``Registry.catalogue``), and a verifier makes an issue of its own code from its row
(``make_issue(ROW, …)``). Nothing here changes after import (ADR 0039).

IG codes group the checks by the integrity guideline they protect:
IG-0 input (the document or the classification could not be read), IG-1 segment count,
IG-2 page ranges, IG-3 shares, IG-4 confidences, IG-5 completeness of the five types,
IG-6 evidence presence and quality, IG-7 clinical traps, IG-8 header/footer evidence,
IG-9 evidence grounding (hallucination), IG-10 label/text consistency, IG-11 verification
could not be completed, IG-12 patient identity (one segment, one patient).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from docverify.domain.models import SEVERITY_ORDER, Issue, Severity
from docverify.domain.resources import load_rule


@dataclass(frozen=True)
class CodeSpec:
    code: str
    agent: str
    severity: Severity
    auto_fixable: bool
    ig_code: str
    title: str


_B, _M, _m = Severity.BLOCKER, Severity.MAJOR, Severity.MINOR

#: The specification's codes (read-only); a registry's full catalogue adds its verifiers' rows.
CATALOGUE: Mapping[str, CodeSpec] = MappingProxyType({
    c.code: c
    for c in (
        # V1 — schema & completeness (spec slide 4, six checks)
        CodeSpec("SCHEMA_INVALID", "V1", _B, False, "IG-0", "Classification does not match the schema"),
        CodeSpec("SEGMENT_COUNT_MISMATCH", "V1", _B, True, "IG-1", "number_of_segments differs from the segments array"),
        CodeSpec("PAGE_OUT_OF_BOUNDS", "V1", _B, False, "IG-2", "Segment page outside 1..total_pages"),
        CodeSpec("PAGE_RANGE_INVERTED", "V1", _B, False, "IG-2", "Segment page_start > page_end"),
        CodeSpec("SEGMENT_PAGE_COUNT_WRONG", "V1", _M, True, "IG-2", "segment_page_count is not end - start + 1"),
        CodeSpec("CONFIDENCE_OUT_OF_RANGE", "V1", _B, False, "IG-4", "Confidence outside [0, 1]"),
        CodeSpec("SHARE_OUT_OF_RANGE", "V1", _B, False, "IG-3", "A share is negative, above 1 or not a number"),
        CodeSpec("DOC_TYPE_MISSING", "V1", _B, True, "IG-5", "A document type is missing from a segment or the mixture"),
        CodeSpec("DOC_TYPE_DUPLICATE", "V1", _B, False, "IG-5", "A document type appears twice in a segment or the mixture"),
        CodeSpec("EVIDENCE_MISSING", "V1", _m, False, "IG-6", "No evidence for a type that is not NO_EVIDENCE"),
        # V2 — internal consistency
        CodeSpec("SEGMENT_SHARE_SUM", "V2", _M, True, "IG-3", "Segment shares do not sum to 1.0"),
        CodeSpec("MIXTURE_SHARE_SUM", "V2", _M, True, "IG-3", "Mixture shares do not sum to 1.0"),
        CodeSpec("PAGE_OVERLAP", "V2", _B, False, "IG-2", "Two segments share a page"),
        CodeSpec("LABEL_TEXT_MISMATCH", "V2", _M, False, "IG-10", "Page text does not support the label"),
        CodeSpec("SEGMENT_HOLDS_OTHER_TYPE", "V2", _M, False, "IG-10",
                 "Pages of a segment read as a type the segment marks NO_EVIDENCE (merged documents, a boundary off)"),
        CodeSpec("INDEPENDENT_READING_DISAGREES", "V2", _M, False, "IG-10",
                 "A reading of the segment's text made without the classifier's labels finds another type"),
        CodeSpec("SEGMENT_BOUNDARY_MISPLACED", "V2", _M, True, "IG-2",
                 "Pages at a segment's start or end read surely as another type: split the segment there"),
        CodeSpec("SEGMENT_EDGE_UNRELATED", "V2", _M, False, "IG-2",
                 "A segment's first or last page shares almost nothing with the page beside it and shows nothing "
                 "of the segment's type: another document joined to it?"),
        CodeSpec("OTHER_EDGE_READS_AS_NEIGHBOUR", "V2", _M, False, "IG-2",
                 "An Other segment's first or last page reads most as the report type of the segment beside it: "
                 "a page of that report split off?"),
        CodeSpec("SEGMENT_EDGE_CONTINUES_NEIGHBOUR", "V2", _M, False, "IG-2",
                 "A segment's first or last page continues the report beside it (its words, its cues, its reading): "
                 "a section of that report labelled as another type?"),
        CodeSpec("SEGMENT_SPANS_PRINTED_DOCUMENTS", "V2", _M, True, "IG-2",
                 "A report segment holds a page printed 'Page 1 of n' right after one printed 'Page m of m': two "
                 "printed documents in one segment; split it there"),
        CodeSpec("INDEPENDENT_READING_ABSTAINS", "V2", _m, False, "IG-10",
                 "The reading made without the classifier's labels leans to another type on a text unlike its "
                 "training material, and abstains"),
        # V3 — clinical traps
        CodeSpec("TRAP_ROUTINE_LAB_GENOMIC", "V3", _B, False, "IG-7", "Routine-lab vendor with Genomic Report PRIMARY"),
        CodeSpec("TRAP_ADMIN_DOCUMENT", "V3", _B, False, "IG-7", "Administrative document classified as a report"),
        CodeSpec("TRAP_HEADER_FOOTER_EVIDENCE", "V3", _m, False, "IG-8", "Header/footer text used as evidence"),
        CodeSpec("TRAP_CONTEXT", "V3", _M, False, "IG-7", "Context suggests a classification trap"),
        # V4 — evidence against the page text
        CodeSpec("EVIDENCE_FABRICATED", "V4", _B, False, "IG-9", "Evidence snippet found nowhere in the document"),
        CodeSpec("EVIDENCE_WRONG_PAGE", "V4", _M, True, "IG-9", "Evidence snippet found on another page of its segment"),
        CodeSpec("EVIDENCE_OUTSIDE_SEGMENT", "V4", _M, False, "IG-9", "Evidence snippet found only outside its segment"),
        CodeSpec("ANCHOR_NOT_ON_PAGE", "V4", _M, False, "IG-9", "Anchor absent from its claimed page"),
        CodeSpec("EVIDENCE_WEAK", "V4", _M, False, "IG-6", "Evidence is generic or too short to support the label"),
        # Any judgment phase
        CodeSpec("VERIFICATION_INCOMPLETE", "ANY", _M, False, "IG-11", "A judgment could not be completed"),
        # Consistency between fields (ADR 0006). Severity/fixability and the reason for each are in
        # README "Consistency between fields"; in short: a repair that is unambiguous (the mixture and the
        # overall type are summaries of the segments) is a fixable MAJOR; a contradiction whose repair
        # needs a judgment (which segment owns a page, which of two claims is wrong) is a BLOCKER.
        CodeSpec("PAGE_NOT_COVERED", "V1", _B, False, "IG-2", "A page of the document is in no segment"),
        CodeSpec("EVIDENCE_PAGE_OUTSIDE_DOCUMENT", "V1", _B, False, "IG-9", "Evidence cites a page the document does not have"),
        CodeSpec("SEGMENT_TYPE_CONTRADICTS_PRESENCE", "V2", _B, False, "IG-10",
                 "A segment's dominant_type is not its strongest presence (or is NO_EVIDENCE/MENTION_ONLY)"),
        CodeSpec("PRIMARY_WITHOUT_SHARE", "V2", _M, False, "IG-3",
                 "A PRIMARY type has no share of a segment (or of the mixture) whose shares are not all zero"),
        CodeSpec("MIXTURE_CONTRADICTS_SEGMENTS", "V2", _M, True, "IG-10",
                 "A mixture presence level differs from the strongest level in the segments"),
        CodeSpec("DOMINANT_OVERALL_CONTRADICTS_SEGMENTS", "V2", _M, True, "IG-10",
                 "dominant_type_overall is the dominant_type of no segment"),
        # The CR_V2 jury over a judgment's findings (ADR 0012; only when the jury is enabled)
        CodeSpec("JURY_FLIP", "ANY", _M, True, "IG-10", "The jury found the opposite presence level (applied as a fix)"),
        CodeSpec("JURY_FLAG", "ANY", _M, False, "IG-11", "The jury could not settle a finding"),
        # Beyond the specification, each switched by docverify.domain.policy.VerifyPolicy (ADR 0022)
        CodeSpec("PATIENT_IDENTITY_CONFLICT", "V2", _M, False, "IG-12",
                 "One segment's pages carry two different patient identifiers (MRN / patient id, or name and DOB)"),
        CodeSpec("LOW_CONFIDENCE_PRIMARY", "V2", _M, False, "IG-4",
                 "A PRIMARY type's confidence is below the policy's minimum"),
    )
})

AUTO_FIXABLE_CODES: frozenset[str] = frozenset(c.code for c in CATALOGUE.values() if c.auto_fixable)


def make_issue(
    code: str | CodeSpec,
    message: str,
    *,
    agent: str | None = None,
    location: str = "",
    suggested_fix: str = "",
    severity: Severity | str | None = None,
    auto_fixable: bool | None = None,
    details: Mapping[str, object] | None = None,
) -> Issue:
    """An issue with the catalogue's severity/fix flag/IG code. ``issue_id`` is assigned later
    by :func:`number_issues`; ``severity`` may only be raised above the catalogue's, never
    lowered, and ``auto_fixable`` may only be switched off. ``code``: a code of the specification's
    catalogue, or the row of a code a verifier brings (its ``new_codes``)."""
    spec = code if isinstance(code, CodeSpec) else CATALOGUE[code]
    name = spec.code
    sev = Severity(severity) if severity is not None else spec.severity

    if SEVERITY_ORDER[sev] > SEVERITY_ORDER[spec.severity]:
        raise ValueError(f"{name}: severity {sev.value} is below the catalogue's {spec.severity.value}")
    fixable = spec.auto_fixable if auto_fixable is None else (spec.auto_fixable and auto_fixable)
    ag = agent or spec.agent
    if ag in ("ANY",):
        raise ValueError(f"{name}: give the agent explicitly")
    return Issue(
        issue_id="",
        agent=ag,
        severity=sev,
        message=message,
        location=location,
        auto_fixable=fixable,
        code=name,
        ig_code=spec.ig_code,
        suggested_fix=suggested_fix,
        details=details or {},
    )


def number_issues(issues: list[Issue]) -> list[Issue]:
    """Assign ``V1-0001``… per agent, in order of appearance."""
    counters: dict[str, int] = {}
    out = []
    for issue in issues:
        n = counters.get(issue.agent, 0) + 1
        counters[issue.agent] = n
        out.append(issue.model_copy(update={"issue_id": f"{issue.agent}-{n:04d}"}))
    return out


def plain_words(code: str) -> str:
    """The one-sentence explanation of ``code`` for a clinician (``include/rules/plain_words.json``,
    ADR 0036); the catalogue's title when the file has none (a code registered by a verifier
    without its sentence yet), else the code itself."""
    sentence = (load_rule("plain_words").get("codes") or {}).get(code)
    if sentence:
        return str(sentence)
    spec = CATALOGUE.get(code)
    return spec.title if spec else code


def blocker_why() -> str:
    """Why a BLOCKER stops automatic acceptance even when the document's type looks right."""
    return str(load_rule("plain_words").get("blocker_why") or "")
