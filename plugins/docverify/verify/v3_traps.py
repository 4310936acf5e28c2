"""V3 — clinical traps (spec slide 5).

Rule phase (data in ``include/rules/traps.json``):

1. a routine-lab vendor in ``vendor_signals`` and Genomic Report PRIMARY → BLOCKER;
2. administrative keywords in the document and a report type that is not NO_EVIDENCE → BLOCKER;
3. header/footer patterns (page X of Y, fax numbers, MRN, date of birth) in evidence → MINOR.

Judgment phase over the first 4,000 characters (``V3_CONTEXT_CHARS``). The offline
implementation applies context rules the pattern phase cannot see: routine lab values under a
Genomic Report label, a routine-lab vendor named in the text but missing from vendor_signals,
and a report type that is only *mentioned* (the text names it, none of its sections appear).
"""

from __future__ import annotations

import functools
import re

from docverify.codes import make_issue
from docverify.models import ClassificationOutput, DocumentBundle, Issue
from docverify.resources import load_rule
from docverify.verify.common import (
    V3_CONTEXT_CHARS,
    iter_type_entries,
    primary_types,
    strongest_presence,
    type_loc,
)

IMPLEMENTATION = "rules-v1"
OFFLINE_IMPLEMENTATION = "offline-context-rules-v1"
GENOMIC = "Genomic Report"


def _word_re(term: str) -> re.Pattern:
    # Terms are literal words; a term already holding regex syntax (c\.\d+) is used as is.
    body = term if "\\" in term else re.escape(term)
    return re.compile(rf"(?<![A-Za-z0-9]){body}(?![A-Za-z0-9])", re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def _rules():
    data = load_rule("traps")
    return {
        "vendors": [(v, _word_re(v)) for v in data["routine_lab_vendors"]],
        "admin": [(k, _word_re(k)) for k in data["admin_keywords"]],
        "report_types": data["report_types"],
        "header_footer": {name: re.compile(p, re.IGNORECASE) for name, p in data["header_footer_patterns"].items()},
        "ctx": {
            "labs": [(t, _word_re(t)) for t in data["context"]["routine_lab_markers"]],
            "genomic": [(t, _word_re(t)) for t in data["context"]["genomic_markers"]],
            "sections": {k: [(t, _word_re(t.strip())) for t in v] for k, v in data["context"]["report_sections"].items()},
        },
    }


def _found(pairs, text: str) -> list[str]:
    return [term for term, rx in pairs if rx.search(text)]


def rule_phase(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    r = _rules()
    issues: list[Issue] = []

    # Trap 1 — routine-lab vendor + Genomic Report PRIMARY
    vendors = sorted({v for v, rx in r["vendors"] for s in cls.vendor_signals if rx.search(s)})
    if vendors and GENOMIC in primary_types(cls):
        issues.append(make_issue(
            "TRAP_ROUTINE_LAB_GENOMIC",
            f"Routine lab vendor detected ({', '.join(vendors)}) but Genomic Report marked PRIMARY",
            location="document_mixture → Genomic Report",
            suggested_fix="Reclassify as 'Other' or downgrade Genomic Report to MENTION_ONLY",
            details={"vendors": vendors},
        ))

    # Trap 2 — administrative keywords + a report type that is not NO_EVIDENCE
    keywords = _found(r["admin"], bundle.full_text())
    if keywords:
        levels = strongest_presence(cls)
        for rt in r["report_types"]:
            level = levels.get(rt, "NO_EVIDENCE")
            if level != "NO_EVIDENCE":
                quoted = ", ".join(f"'{k}'" for k in keywords)
                issues.append(make_issue(
                    "TRAP_ADMIN_DOCUMENT",
                    f"Administrative keywords found ({quoted}) but {rt} marked {level}",
                    location=f"document_mixture → {rt}",
                    suggested_fix=f"If this is an administrative form, classify it as 'Other' and mark {rt} NO_EVIDENCE",
                    details={"keywords": keywords, "doc_type": rt, "presence_level": level},
                ))

    # Trap 3 — header/footer content used as evidence
    for _, seg, tc in iter_type_entries(cls):
        for k, ev in enumerate(tc.top_evidence):
            hits = [name for name, rx in r["header_footer"].items() if rx.search(ev.snippet)]
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


def offline_judgment(bundle: DocumentBundle, cls: ClassificationOutput) -> list[Issue]:
    r = _rules()
    ctx = bundle.full_text()[:V3_CONTEXT_CHARS]
    issues: list[Issue] = []
    primaries = primary_types(cls)

    if GENOMIC in primaries:
        labs, genomic = _found(r["ctx"]["labs"], ctx), _found(r["ctx"]["genomic"], ctx)
        if len(labs) >= 2 and not genomic:
            issues.append(make_issue(
                "TRAP_CONTEXT",
                f"Genomic Report is PRIMARY but the opening text shows routine lab values "
                f"({len(labs)} lab markers) and no genomic terms",
                agent="V3", location="document_mixture → Genomic Report",
                suggested_fix="Check whether this is a routine lab panel ('Other')",
                details={"lab_markers": labs, "implementation": OFFLINE_IMPLEMENTATION},
            ))
        in_text = _found(r["vendors"], ctx)
        declared = {v for v, rx in r["vendors"] for s in cls.vendor_signals if rx.search(s)}
        missed = sorted(set(in_text) - declared)
        if missed:
            issues.append(make_issue(
                "TRAP_CONTEXT",
                f"The text names a routine lab vendor ({', '.join(missed)}) missing from vendor_signals "
                f"while Genomic Report is PRIMARY",
                agent="V3", location="vendor_signals",
                suggested_fix="Add the vendor to vendor_signals and re-check the Genomic Report label",
                details={"vendors": missed, "implementation": OFFLINE_IMPLEMENTATION},
            ))

    # Mention-only trap: a report type is PRIMARY, its name appears, none of its sections do.
    for rt in r["report_types"]:
        if rt not in primaries:
            continue
        sections = _found(r["ctx"]["sections"].get(rt, []), ctx)
        if not sections and re.search(re.escape(rt.split()[0]), ctx, re.IGNORECASE):
            issues.append(make_issue(
                "TRAP_CONTEXT",
                f"{rt} is PRIMARY but the opening text only mentions it: none of its usual sections appear",
                agent="V3", location=f"document_mixture → {rt}",
                suggested_fix=f"Consider MENTION_ONLY for {rt}",
                details={"doc_type": rt, "implementation": OFFLINE_IMPLEMENTATION},
            ))
    return issues
