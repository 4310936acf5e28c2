"""V5: every row of v5_arbiter.md (the specification, shared/spec, outside this repository), the worked examples, and properties."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docverify.arbiters.v5 import RULES, decide
from docverify.domain.models import Issue


def issue(sev, fixable=False, n=0):
    return Issue(issue_id=f"V2-{n:04d}", agent="V2", severity=sev, message="m", code="X", auto_fixable=fixable)


def issues(b=0, mf=0, mn=0, mi=0):
    return ([issue("BLOCKER") for _ in range(b)] + [issue("MAJOR", True) for _ in range(mf)]
            + [issue("MAJOR", False) for _ in range(mn)] + [issue("MINOR") for _ in range(mi)])


# (blockers, fixable MAJOR, non-fixable MAJOR, MINOR) → (rule, decision)
TABLE = [
    ((1, 0, 0, 0), 1, "ESCALATE_TO_SME"),
    ((2, 2, 0, 5), 1, "ESCALATE_TO_SME"),
    ((0, 3, 0, 0), 2, "ESCALATE_TO_SME"),
    ((0, 1, 2, 0), 2, "ESCALATE_TO_SME"),
    ((0, 0, 2, 0), 3, "ESCALATE_TO_SME"),
    ((0, 0, 1, 0), 4, "ESCALATE_TO_SME"),
    ((0, 1, 1, 3), 4, "ESCALATE_TO_SME"),
    ((0, 1, 0, 0), 5, "AUTO_RETRY"),
    ((0, 2, 0, 4), 5, "AUTO_RETRY"),
    ((0, 0, 0, 1), 6, "AUTO_ACCEPT"),
    ((0, 0, 0, 7), 6, "AUTO_ACCEPT"),
    ((0, 0, 0, 0), 7, "AUTO_ACCEPT"),
]


@pytest.mark.parametrize("counts,rule,decision", TABLE)
def test_rule_table(counts, rule, decision):
    d = decide(issues(*counts))
    assert (d.rule, d.decision) == (rule, decision)
    assert d.reason.startswith(f"Rule {rule}: ")


def test_rules_are_in_spec_order():
    assert [r.number for r in RULES] == list(range(1, 9))
    assert RULES[-1].decision == "ESCALATE_TO_SME"


def test_spec_example_auto_retry():
    d = decide(issues(mf=2, mi=1))
    assert (d.decision, d.rule, d.blocker_count, d.major_count, d.minor_count, d.fixable_count) == \
        ("AUTO_RETRY", 5, 0, 2, 1, 2)


def test_spec_example_escalate():
    d = decide(issues(b=1))
    assert (d.decision, d.rule, d.blocker_count, d.issues_analyzed) == ("ESCALATE_TO_SME", 1, 1, 1)


def test_rule8_is_the_fallback_for_an_unmatched_state():
    assert RULES[-1].condition(None) is True  # reached only when no other rule matches


issue_st = st.builds(issue, st.sampled_from(["BLOCKER", "MAJOR", "MINOR"]), st.booleans())


@given(st.lists(issue_st, max_size=12))
def test_total_and_deterministic(items):
    d1 = decide(items)
    d2 = decide(list(reversed(items)))  # a multiset: order does not matter
    assert d1 == d2
    assert d1.decision in ("AUTO_ACCEPT", "AUTO_RETRY", "ESCALATE_TO_SME")
    assert d1.issues_analyzed == len(items) == d1.blocker_count + d1.major_count + d1.minor_count
    # never accept a document carrying a BLOCKER or a MAJOR
    if d1.decision == "AUTO_ACCEPT":
        assert d1.blocker_count == d1.major_count == 0


def test_exhaustive_small_counts_agree_with_the_table_text():
    for b, mf, mn, mi in itertools.product(range(3), range(4), range(3), range(2)):
        d = decide(issues(b, mf, mn, mi))
        if b:
            assert d.rule == 1
        elif mf + mn >= 3:
            assert d.rule == 2
        elif mn >= 2:
            assert d.rule == 3
        elif mn == 1:
            assert d.rule == 4
        elif 1 <= mf <= 2:
            assert d.rule == 5
        elif mi:
            assert d.rule == 6
        else:
            assert d.rule == 7
