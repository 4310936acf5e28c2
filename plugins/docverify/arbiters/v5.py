"""V5 — the arbiter: the rule table of ``spec/v5_arbiter.md``, nothing else.

Pure and deterministic: the same multiset of issues always gives the same decision. The rules
are one ordered list; the first whose condition holds decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from docverify.models import ArbiterDecision, Decision, Issue, Severity


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


def decide(issues: Iterable[Issue]) -> ArbiterDecision:
    c = count(issues)
    rule = next(r for r in RULES if r.condition(c))
    return ArbiterDecision(
        decision=rule.decision,
        rule=rule.number,
        reason=f"Rule {rule.number}: " + rule.reason.format(**c.__dict__),
        issues_analyzed=c.total_issues,
        blocker_count=c.blocker_count,
        major_count=c.major_count,
        minor_count=c.minor_count,
        fixable_count=c.fixable_count,
        major_fixable=c.major_fixable,
        major_non_fixable=c.major_non_fixable,
    )
