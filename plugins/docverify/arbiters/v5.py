"""V5 — the arbiter: the rule table of ``v5_arbiter.md`` of the specification (shared/spec, outside this repository), nothing else.

Pure and deterministic: the same multiset of issues always gives the same decision. The rules
are one ordered list; the first whose condition holds decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypedDict

from docverify.domain.codes import CATALOGUE
from docverify.domain.models import SEVERITY_ORDER, ArbiterDecision, Decision, Issue, Severity


@dataclass(frozen=True)
class Counts:
    total_issues: int
    blocker_count: int
    major_count: int
    minor_count: int
    major_fixable: int
    major_non_fixable: int
    fixable_count: int


def count(issues: Iterable[Issue]) -> Counts:
    issues = list(issues)

    def sev(i: Issue) -> str:
        return Severity(i.severity).value

    majors = [i for i in issues if sev(i) == "MAJOR"]
    return Counts(
        total_issues=len(issues),
        blocker_count=sum(1 for i in issues if sev(i) == "BLOCKER"),
        major_count=len(majors),
        minor_count=sum(1 for i in issues if sev(i) == "MINOR"),
        major_fixable=sum(1 for i in majors if i.auto_fixable),
        major_non_fixable=sum(1 for i in majors if not i.auto_fixable),
        fixable_count=sum(1 for i in issues if i.auto_fixable),
    )


@dataclass(frozen=True)
class Rule:
    number: int
    condition: Callable[[Counts], bool]
    decision: Decision
    reason: str


RULES: tuple[Rule, ...] = (
    Rule(1, lambda c: c.blocker_count > 0, Decision.ESCALATE_TO_SME,
         "Critical failure — structural/fabrication error ({blocker_count} BLOCKER)"),
    Rule(2, lambda c: c.major_count >= 3, Decision.ESCALATE_TO_SME,
         "Too many errors to auto-correct confidently ({major_count} MAJOR)"),
    Rule(3, lambda c: c.major_non_fixable >= 2, Decision.ESCALATE_TO_SME,
         "Requires human judgment ({major_non_fixable} non-fixable MAJOR)"),
    Rule(4, lambda c: c.major_non_fixable >= 1, Decision.ESCALATE_TO_SME,
         "Human expertise needed — conservative ({major_non_fixable} non-fixable MAJOR)"),
    Rule(5, lambda c: 1 <= c.major_fixable <= 2, Decision.AUTO_RETRY,
         "Apply fixes and re-verify ({major_fixable} fixable MAJOR)"),
    Rule(6, lambda c: c.minor_count > 0 and c.major_count == 0 and c.blocker_count == 0,
         Decision.AUTO_ACCEPT, "Tolerable minor issues ({minor_count} MINOR)"),
    Rule(7, lambda c: c.total_issues == 0, Decision.AUTO_ACCEPT, "Perfect output (no issues)"),
    Rule(8, lambda c: True, Decision.ESCALATE_TO_SME, "Ambiguous — safety default"),
)


def evidence_pages(issues: Iterable[Issue]) -> list[int]:
    """The pages the issues point at (``details``: page, pages, found_on_pages, fix_page)."""
    pages: set[int] = set()
    for i in issues:
        d = i.details or {}
        for key in ("page", "fix_page"):
            if isinstance(d.get(key), int) and not isinstance(d.get(key), bool):
                pages.add(d[key])
        for key in ("pages", "found_on_pages"):
            if isinstance(d.get(key), list):
                pages.update(p for p in d[key] if isinstance(p, int) and not isinstance(p, bool))
    return sorted(pages)


class Citations(TypedDict):
    """``ArbiterDecision.citations``: what the decision rests on."""

    rule: int
    issue_ids: list[str]
    issue_codes: list[str]
    evidence_pages: list[int]


def citations(rule: int, issues: list[Issue]) -> Citations:
    return {"rule": rule, "issue_ids": sorted({i.issue_id for i in issues if i.issue_id}),
            "issue_codes": sorted({i.code for i in issues}), "evidence_pages": evidence_pages(issues)}


def audit_line(decision: str, rule: int, c: Counts, cites: Citations) -> str:
    """One line for the report and the lineage log: decision, rule, counts, codes, pages — no text."""
    return (f"V5 {decision} rule {rule} | issues {c.total_issues} (BLOCKER {c.blocker_count}, MAJOR {c.major_count} "
            f"[fixable {c.major_fixable}], MINOR {c.minor_count}) | codes: {', '.join(cites['issue_codes']) or '-'} "
            f"| pages: {', '.join(map(str, cites['evidence_pages'])) or '-'}")


_SME_WHAT = {
    Decision.ESCALATE_TO_SME: "needs your review",
    Decision.AUTO_RETRY: "was sent to automatic fixing and re-verification",
    Decision.AUTO_ACCEPT: "was accepted automatically",
}


def sme_explanation(decision: Decision, rule: Rule, reason: str, issues: list[Issue]) -> str:
    """For the SME: why the table decided, issue by issue (id, severity, code title, pages) — the
    catalogue's titles, never page text."""
    lines = [f"This classification {_SME_WHAT[decision]}: {reason}."]

    def key(i: Issue) -> tuple[int, str, str, bool, str, list[int]]:
        return (SEVERITY_ORDER[Severity(i.severity)], i.issue_id, i.code, i.auto_fixable, i.agent, evidence_pages([i]))

    for i in sorted(issues, key=key):
        title = CATALOGUE[i.code].title if i.code in CATALOGUE else i.code
        pages = evidence_pages([i])
        where = f" (page {', '.join(map(str, pages))})" if pages else ""
        fix = "fixable automatically" if i.auto_fixable else "not fixable automatically"
        lines.append(f"- {i.issue_id or i.agent} {Severity(i.severity).value} {i.code}: {title}{where}; {fix}.")
    return "\n".join(lines)


def decide(issues: Iterable[Issue]) -> ArbiterDecision:
    issues = list(issues)
    c = count(issues)
    rule = next(r for r in RULES if r.condition(c))
    reason = f"Rule {rule.number}: " + rule.reason.format(**c.__dict__)
    cites = citations(rule.number, issues)
    return ArbiterDecision(
        decision=rule.decision,
        rule=rule.number,
        reason=reason,
        issues_analyzed=c.total_issues,
        blocker_count=c.blocker_count,
        major_count=c.major_count,
        minor_count=c.minor_count,
        fixable_count=c.fixable_count,
        major_fixable=c.major_fixable,
        major_non_fixable=c.major_non_fixable,
        citations=cites,
        explanation_sme=sme_explanation(rule.decision, rule, reason, issues),
        explanation_audit=audit_line(rule.decision.value, rule.number, c, cites),
    )
