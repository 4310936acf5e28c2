"""V3 — clinical traps (spec slide 5).

Rule phase (data in ``include/rules/traps.json``):

1. a routine-lab vendor in ``vendor_signals`` and Genomic Report PRIMARY → BLOCKER;
2. administrative keywords in the document and a report type that is not NO_EVIDENCE → BLOCKER;
   by default read per segment (ADR 0037) and counting a report type at PRIMARY or EMBEDDED_RAW only:
   MENTION_ONLY, the specification's own remedy for a type a document only mentions, does not
   trigger it (ADR 0046; policy ``admin_trap_counts_mentions`` restores the letter); opt-in
   (``admin_trap_spares_read_reports``, ADR 0062), a PRIMARY report segment that V2's independent reading
   reads as that type with at least ``SPARED_READING`` is spared;
3. header/footer patterns (page X of Y, fax numbers, MRN, date of birth) in evidence → MINOR.

Every text (page text, vendor_signals, evidence snippets) is matched in
:func:`~docverify.verify.common.match_form` (NFKC, casefolded, Unicode spaces and line breaks
collapsed, punctuation between words a separator), keywords and vendor names on word
boundaries (:func:`~docverify.verify.common.term_pattern`), so "TEST  REQUEST",
"Specimen-Receipt", "Quest Diagnostics" with a no-break space and "D.O.B." are seen
(ADR 0021).

Judgment phase over the first 4,000 characters (``V3_CONTEXT_CHARS``). The offline
implementation applies context rules the pattern phase cannot see: routine lab values under a
Genomic Report label, a routine-lab vendor named in the text but missing from vendor_signals,
and a report type that is only *mentioned* (the text names it, none of its sections appear).
"""

from __future__ import annotations

import functools
import re
from typing import Literal, TypedDict

from pydantic import Field

from docverify.domain.codes import make_issue
from docverify.domain.models import ClassificationOutput, DocumentBundle, Issue, Segment
from docverify.domain.policy import SPARED_READING, VerifyPolicy
from docverify.domain.resources import load_rule
from docverify.verify import independent  # its model loads on first use, not at import
from docverify.verify.common import (
    V3_CONTEXT_CHARS,
    iter_type_entries,
    match_form,
    primary_types,
    segment_text,
    strongest_presence,
    term_pattern,
    type_loc,
)
from docverify.verify.llm_io import (
    Finding,
    JudgmentFindings,
    JudgmentInputs,
    PageEntry,
    judgment_view,
    page_entry,
)
from docverify.verify.spec import VerifierSpec

IMPLEMENTATION = "rules-v1"
#: v2 (ADR 0063): the routine-lab and lab-vendor rules read each Genomic Report segment's own opening
OFFLINE_IMPLEMENTATION = "offline-context-rules-v2"
GENOMIC = "Genomic Report"


#: (term, its pattern) pairs: the reported term and how it is found in match-form text
Terms = list[tuple[str, re.Pattern[str]]]


class _ContextRules(TypedDict):
    labs: Terms
    genomic: Terms
    #: report type → the stems of its section words
    sections: dict[str, Terms]


class _TrapRules(TypedDict):
    """``include/rules/traps.json``, compiled (:func:`_rules`)."""

    #: (reported vendor name, pattern): in vendor_signals / in the page text
    vendors: Terms
    text_vendors: Terms
    admin: Terms
    report_types: list[str]
    header_footer: dict[str, re.Pattern[str]]
    ctx: _ContextRules


@functools.lru_cache(maxsize=1)
def _rules() -> _TrapRules:
    data = load_rule("traps")
    vendors = data["routine_lab_vendors"]
    return {
        # (reported name, pattern): in vendor_signals and in the page text
        "vendors": [(v["name"], term_pattern(a)) for v in vendors for a in v["aliases"]],
        "text_vendors": [(v["name"], term_pattern(a)) for v in vendors for a in v["text_aliases"]],
        "admin": [(k, term_pattern(k)) for k in data["admin_keywords"]],
        "report_types": data["report_types"],
        "header_footer": {name: re.compile(p, re.IGNORECASE) for name, p in data["header_footer_patterns"].items()},
        "ctx": {
            "labs": [(t, term_pattern(t)) for t in data["context"]["routine_lab_markers"]],
            "genomic": [(t, term_pattern(t)) for t in data["context"]["genomic_markers"]],
            # section words are stems: "histolog" finds "histology", "genotyp" "genotyping"
            "sections": {k: [(t, term_pattern(t.strip(), stem=True)) for t in v]
                         for k, v in data["context"]["report_sections"].items()},
        },
    }


def _found(pairs: Terms, text: str) -> list[str]:
    """The terms of ``pairs`` found in ``text`` (already in :func:`match_form`), in list order."""
    return [term for term, rx in pairs if rx.search(text)]


def _found_longest(pairs: Terms, text: str) -> list[str]:
    """:func:`_found`, but a match inside a longer term's match does not count: "fax cover
    sheet" is reported once, not also as "fax cover" and "cover sheet"."""
    spans = sorted(((m.start(), m.end(), term) for term, rx in pairs for m in rx.finditer(text)),
                   key=lambda s: (s[0] - s[1], s[0]))
    kept: list[tuple[int, int, str]] = []
    for s, e, term in spans:
        if not any(ks <= s and e <= ke for ks, ke, _ in kept):
            kept.append((s, e, term))
    hit = {term for _, _, term in kept}
    return list(dict.fromkeys(term for term, _ in pairs if term in hit))


def _vendors(pairs: Terms, texts: list[str]) -> list[str]:
    """The vendors (reported names) one of whose names is in one of ``texts`` (in match form)."""
    return sorted({name for name, rx in pairs for t in texts if rx.search(t)})


#: the levels at which a report type counts for trap 2 (ADR 0046): a report type *in* the document
TRAP2_LEVELS = frozenset({"PRIMARY", "EMBEDDED_RAW"})
#: ... and with ``counts_mentions`` (the specification's letter: any level but NO_EVIDENCE)
TRAP2_LEVELS_STRICT = frozenset({"PRIMARY", "EMBEDDED_RAW", "MENTION_ONLY"})


def rule_phase(bundle: DocumentBundle, cls: ClassificationOutput, *, per_segment: bool = False,
               counts_mentions: bool = True, spares_read_reports: bool = False) -> list[Issue]:
    """The three rule traps. The keywords' defaults are the specification's letter (trap 2 over the
    whole document, any level but NO_EVIDENCE); the verifier passes the policy's readings
    (``admin_trap_per_segment``, ``admin_trap_counts_mentions``: per segment, PRIMARY/EMBEDDED_RAW;
    ``admin_trap_spares_read_reports``: a report segment the independent reading reads as its type is spared)."""
    r = _rules()
    return [*_trap_routine_lab(r, cls),
            *_trap_admin(r, bundle, cls, per_segment, counts_mentions, spares_read_reports),
            *_trap_header_footer(r, cls)]


def _trap_routine_lab(r: _TrapRules, cls: ClassificationOutput) -> list[Issue]:
    """Trap 1 — routine-lab vendor + Genomic Report PRIMARY."""
    vendors = _vendors(r["vendors"], [match_form(s) for s in cls.vendor_signals])
    if not (vendors and GENOMIC in primary_types(cls)):
        return []
    return [make_issue(
        "TRAP_ROUTINE_LAB_GENOMIC",
        f"Routine lab vendor detected ({', '.join(vendors)}) but Genomic Report marked PRIMARY",
        location="document_mixture → Genomic Report",
        suggested_fix="Reclassify as 'Other' or downgrade Genomic Report to MENTION_ONLY",
        details={"vendors": vendors},
    )]


def _read_as(text: str, doc_type: str) -> bool:
    """V2's independent reading (no classification seen) gives ``text`` ``doc_type`` at least SPARED_READING."""
    return independent.default_reader().read(text).probs.get(doc_type, 0.0) >= SPARED_READING


def _trap_admin(r: _TrapRules, bundle: DocumentBundle, cls: ClassificationOutput, per_segment: bool,
                counts_mentions: bool, spares_read_reports: bool = False) -> list[Issue]:
    """Trap 2 — administrative keywords + a report type that is not NO_EVIDENCE. The specification's
    rule reads the whole document against the strongest level of each report type; with
    ``per_segment`` (policy ``admin_trap_per_segment``) the keywords of a segment's pages are read
    against that segment's levels, so that a PDF holding a prior-authorization form and, in a
    segment of its own, the pathology report it asks for is not an administrative document
    classified as a report (the form's segment must be Other). One segment: the same rule.
    Without ``counts_mentions`` (policy ``admin_trap_counts_mentions`` off, ADR 0046) a report type
    counts at PRIMARY or EMBEDDED_RAW: a form classified Other that records the report types it
    *mentions* ("pathology, radiology" among the records to release) at MENTION_ONLY — what the
    specification recommends for a mentioned type — is not an administrative document called a report.
    With ``spares_read_reports`` (opt-in, ADR 0062) a segment labelled a report type PRIMARY that the
    independent reading reads as that type (:func:`_read_as`) is spared: it reads as the report it is labelled."""
    counted = TRAP2_LEVELS_STRICT if counts_mentions else TRAP2_LEVELS
    scopes: list[tuple[Segment | None, str, dict[str, str]]] = (
        [(seg, segment_text(bundle, seg), {tc.doc_type: tc.presence_level for tc in seg.classifications})
         for seg in cls.segments] if per_segment
        else [(None, bundle.full_text(), strongest_presence(cls))])
    issues: list[Issue] = []
    for seg, text, levels in scopes:
        keywords = _found_longest(r["admin"], match_form(text))
        if not keywords:
            continue
        for rt in r["report_types"]:
            level = levels.get(rt, "NO_EVIDENCE")
            if level not in counted or (spares_read_reports and seg is not None and level == "PRIMARY"
                                        and _read_as(text, rt)):
                continue
            quoted = ", ".join(f"'{k}'" for k in keywords)
            where = f" in segment {seg.segment_index}" if seg is not None and len(cls.segments) > 1 else ""
            issues.append(make_issue(
                "TRAP_ADMIN_DOCUMENT",
                f"Administrative keywords found ({quoted}) but {rt} marked {level}{where}",
                location=f"segments[{seg.segment_index}] → {rt}" if seg is not None else f"document_mixture → {rt}",
                suggested_fix=f"If this is an administrative form, classify it as 'Other' and mark {rt} NO_EVIDENCE",
                details={"keywords": keywords, "doc_type": rt, "presence_level": level,
                         **({"segment_index": seg.segment_index} if seg is not None else {})},
            ))
    return issues


def _trap_header_footer(r: _TrapRules, cls: ClassificationOutput) -> list[Issue]:
    """Trap 3 — header/footer content used as evidence."""
    issues: list[Issue] = []
    for _, seg, tc in iter_type_entries(cls):
        for k, ev in enumerate(tc.top_evidence):
            snippet = match_form(ev.snippet)
            hits = [name for name, rx in r["header_footer"].items() if rx.search(snippet)]
            if hits:
                issues.append(make_issue(
                    "TRAP_HEADER_FOOTER_EVIDENCE",
                    f"Evidence {k + 1} for {tc.doc_type} in segment {seg.segment_index} (page {ev.page}) "
                    f"looks like header/footer content ({', '.join(hits)})",
                    location=f"{type_loc(seg, tc)}.top_evidence[{k}]",
                    suggested_fix="Cite body text, not page headers or footers",
                    details={"patterns": hits, "page": ev.page},
                ))
    return issues


def _genomic_context(r: _TrapRules, bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    """The routine-lab and lab-vendor rules over the opening of each segment labelled Genomic Report PRIMARY
    (ADR 0063); a document of one segment, or one whose Genomic Report is PRIMARY in the mixture only, is read
    from its own opening, as the letter."""
    if GENOMIC not in primary_types(cls):
        return []
    genomic = [seg for seg in cls.segments
               if any(tc.doc_type == GENOMIC and tc.presence_level == "PRIMARY" for tc in seg.classifications)]
    scopes: list[tuple[Segment | None, str]] = (
        [(seg, segment_text(bundle, seg)) for seg in genomic] if len(cls.segments) > 1 and genomic
        else [(None, bundle.full_text())])
    declared = set(_vendors(r["vendors"], [match_form(s) for s in cls.vendor_signals]))
    issues: list[Issue] = []
    for seg, text in scopes:
        ctx = match_form(text[:V3_CONTEXT_CHARS])
        where = f" of segment {seg.segment_index}" if seg is not None else ""
        at = {"segment_index": seg.segment_index} if seg is not None else {}
        labs, genomic_terms = _found(r["ctx"]["labs"], ctx), _found(r["ctx"]["genomic"], ctx)
        if len(labs) >= 2 and not genomic_terms:
            issues.append(make_issue(
                "TRAP_CONTEXT",
                f"Genomic Report is PRIMARY but the opening text{where} shows routine lab values "
                f"({len(labs)} lab markers) and no genomic terms",
                agent="V3",
                location=f"segments[{seg.segment_index}] → Genomic Report" if seg is not None
                else "document_mixture → Genomic Report",
                suggested_fix="Check whether this is a routine lab panel ('Other')",
                details={"lab_markers": labs, **at, "implementation": OFFLINE_IMPLEMENTATION},
            ))
        missed = sorted(set(_vendors(r["text_vendors"], [ctx])) - declared)
        if missed:
            issues.append(make_issue(
                "TRAP_CONTEXT",
                f"The text{where} names a routine lab vendor ({', '.join(missed)}) missing from vendor_signals "
                f"while Genomic Report is PRIMARY",
                agent="V3", location="vendor_signals",
                suggested_fix="Add the vendor to vendor_signals and re-check the Genomic Report label",
                details={"vendors": missed, **at, "implementation": OFFLINE_IMPLEMENTATION},
            ))
    return issues


def offline_judgment(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    """The context rules over the opening :data:`V3_CONTEXT_CHARS` characters of each segment that labels
    Genomic Report PRIMARY (ADR 0063: in a PDF of several documents, the clinical note that opens it says
    nothing of the genomic report on page 5; one segment: the document's opening, as before), and the
    mention-only rule over the opening of each segment that labels a report PRIMARY (a release form on page 1
    naming pathology says nothing of the pathology report that starts on page 3)."""
    r = _rules()
    issues = _genomic_context(r, bundle, cls)

    # Mention-only trap: a report type is PRIMARY in a segment, its name appears in the segment's
    # opening text, none of its sections do.
    flagged: set[str] = set()
    for seg in cls.segments:
        seg_ctx = match_form(segment_text(bundle, seg)[:V3_CONTEXT_CHARS])
        for tc in seg.classifications:
            rt = tc.doc_type
            if rt not in r["report_types"] or tc.presence_level != "PRIMARY" or rt in flagged:
                continue
            sections = _found(r["ctx"]["sections"].get(rt, []), seg_ctx)
            if not sections and re.search(re.escape(rt.split()[0]), seg_ctx, re.IGNORECASE):
                flagged.add(rt)
                issues.append(make_issue(
                    "TRAP_CONTEXT",
                    f"{rt} is PRIMARY but the opening text of segment {seg.segment_index} only mentions it: "
                    f"none of its usual sections appear",
                    agent="V3", location=f"segments[{seg.segment_index}] → {rt}",
                    suggested_fix=f"Consider MENTION_ONLY for {rt}",
                    details={"doc_type": rt, "segment_index": seg.segment_index,
                             "implementation": OFFLINE_IMPLEMENTATION},
                ))
    return issues


# --------------------------------------------------------------------------- the verifier's spec

class ContextFinding(Finding):
    code: Literal["TRAP_CONTEXT"]


class ContextFindings(JudgmentFindings):
    findings: list[ContextFinding] = Field(description="One entry per problem; empty when there is none.")


class ContextInputs(JudgmentInputs):
    """V3's inputs: the judgment's, with the context budget the pages were cut to."""

    context_chars: int


def llm_inputs(bundle: DocumentBundle, classification: ClassificationOutput) -> ContextInputs:
    """V3: the first :data:`V3_CONTEXT_CHARS` characters of ``bundle.full_text()``, kept page by
    page (the ``"\\n\\n"`` between pages counts, as in ``full_text``)."""
    budget = V3_CONTEXT_CHARS
    pages: list[PageEntry] = []
    for i, p in enumerate(bundle.pages):
        if i:
            budget -= 2
        if budget <= 0:
            break
        text = p.text[:budget]
        pages.append(page_entry(p.page_num, text, truncated=len(p.text) > budget))
        budget -= len(text)
    return {
        "total_pages": bundle.total_pages,
        "context_chars": V3_CONTEXT_CHARS,
        "pages": pages,
        "classification": judgment_view(classification),
    }


def _rule_phase(bundle: DocumentBundle, cls: ClassificationOutput, policy: VerifyPolicy) -> list[Issue]:
    return rule_phase(bundle, cls, per_segment=policy.admin_trap_per_segment,
                      counts_mentions=policy.admin_trap_counts_mentions,
                      spares_read_reports=policy.admin_trap_spares_read_reports)


SPEC = VerifierSpec(
    agent="V3",
    title="context",
    codes=("TRAP_ROUTINE_LAB_GENOMIC", "TRAP_ADMIN_DOCUMENT", "TRAP_HEADER_FOOTER_EVIDENCE", "TRAP_CONTEXT"),
    rule_phase=_rule_phase,
    judgment_codes=("TRAP_CONTEXT",),
    offline_judgment=offline_judgment,
    offline_implementation=OFFLINE_IMPLEMENTATION,
    prompt="v3_context_v1",
    findings_model=ContextFindings,
    llm_inputs=llm_inputs,
)
