"""The CR_V2 vote (cr_v2_vote.md of the specification, shared/spec, outside this repository): every rule, code set and flag reason as a table row; the
v1/v2 difference table; the decisions taken where the document is ambiguous; properties."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docverify.arbiters import cr_vote
from docverify.arbiters.cr_vote import (
    DROP_JUSTIFIED,
    FACET_PRIORITY,
    STRUCTURAL_REASON_CODES,
    Vote,
    VoteInputError,
    arbiter_vote,
    arbiter_vote_all,
)

G = "granularity_overlap_candidate"
R = "REDUNDANT_UPPER_REF"


def v(action, reason=""):
    return Vote(action, reason)


def ballot(a, b, c):
    return {"A": a, "B": b, "C": c}


# (votes A, B, C; conflict_type) → v2 (action, flag_reason, rule)
V2_TABLE = [
    # Rule 1: ≥ 2 identical → adopt
    (ballot("KEEP", "KEEP", "KEEP"), None, ("KEEP", None, 1)),
    (ballot("DROP", "DROP", "KEEP"), None, ("DROP", None, 1)),
    (ballot("FLIP", "FLIP", "DROP"), None, ("FLIP", None, 1)),
    (ballot("KEEP", "FLIP", "KEEP"), "polarity_conflict", ("KEEP", None, 1)),
    # Rule 1 exception: the preferred actor C in the minority → FLAG FACET_MINORITY_SIGNAL
    (ballot("DROP", "DROP", "KEEP"), G, ("FLAG", "FACET_MINORITY_SIGNAL", 1)),
    (ballot("KEEP", "KEEP", "DROP"), R, ("FLAG", "FACET_MINORITY_SIGNAL", 1)),
    # … but not when C is in the majority, or the minority is A or B, or all agree
    (ballot("DROP", "KEEP", "KEEP"), G, ("KEEP", None, 1)),
    (ballot("KEEP", "DROP", "KEEP"), R, ("KEEP", None, 1)),
    (ballot("DROP", "DROP", "DROP"), G, ("DROP", None, 1)),
    # … and not for a conflict type outside _FACET_PRIORITY
    (ballot("DROP", "DROP", "KEEP"), "other_conflict", ("DROP", None, 1)),
    # the document's "Rule 2" examples have a majority: Rule 1 decides them
    (ballot("FLIP", "FLIP", "KEEP"), None, ("FLIP", None, 1)),
    (ballot("DROP", "DROP", "FLIP"), None, ("DROP", None, 1)),
    # Rule 2: all different, not {FLIP, DROP, KEEP} → FLAG
    (ballot("KEEP", "FLIP", "FLAG"), None, ("FLAG", "POLARITY_UNCERTAIN", 2)),
    (ballot("DROP", "FLAG", "KEEP"), "polarity_conflict", ("FLAG", "POLARITY_UNCERTAIN", 2)),
    (ballot("FLAG", "FLIP", "DROP"), G, ("FLAG", "REDUNDANT_REF_UNCERTAIN", 2)),
    (ballot("FLAG", "FLIP", "DROP"), R, ("FLAG", "POLARITY_UNCERTAIN", 2)),
    # Rule 3: 1 FLIP + 1 DROP + 1 KEEP
    (ballot(v("FLIP", "NEGATION_SCOPE"), v("DROP"), "KEEP"), None, ("FLIP", None, 3)),
    (ballot(v("FLIP", "CONTRAST_CLAUSE"), v("DROP", "WEAK_EVIDENCE"), "KEEP"), None, ("FLIP", None, 3)),
    (ballot("KEEP", v("FLIP", "STRUCTURAL_INCONSISTENT"), v("DROP")), G, ("FLIP", None, 3)),
    (ballot(v("FLIP", "OTHER"), v("DROP", "WEAK_EVIDENCE"), "KEEP"), None, ("DROP", None, 3)),
    (ballot(v("DROP", "REDUNDANT_UPPER_REF"), "KEEP", v("FLIP")), G, ("DROP", None, 3)),
    (ballot(v("FLIP", "OTHER"), v("DROP", "OTHER"), "KEEP"), None, ("FLAG", "TIE_UNRESOLVED", 3)),
    (ballot(v("FLIP"), v("DROP"), "KEEP"), G, ("FLAG", "REDUNDANT_REF_UNCERTAIN", 3)),
    (ballot(v("FLIP"), v("DROP"), "KEEP"), R, ("FLAG", "TIE_UNRESOLVED", 3)),
    # Rule 4: MERGE counts as KEEP
    (ballot("MERGE", "KEEP", "DROP"), None, ("KEEP", None, 1)),
    (ballot("MERGE", "MERGE", "FLIP"), None, ("KEEP", None, 1)),
    (ballot(v("FLIP", "NEGATION_SCOPE"), "MERGE", "DROP"), None, ("FLIP", None, 3)),
    (ballot("MERGE", "FLIP", "FLAG"), None, ("FLAG", "POLARITY_UNCERTAIN", 2)),
    (ballot("DROP", "DROP", "MERGE"), G, ("FLAG", "FACET_MINORITY_SIGNAL", 1)),
    # our decision: a FLAG majority carries MAJORITY_FLAG
    (ballot("FLAG", "FLAG", "KEEP"), None, ("FLAG", "MAJORITY_FLAG", 1)),
]


@pytest.mark.parametrize("votes, conflict, expected", V2_TABLE)
def test_v2_table(votes, conflict, expected):
    r = arbiter_vote(votes, conflict, version="v2")
    assert (r.final_action, r.flag_reason, r.rule) == expected
    assert r.final_action != "MERGE" and "MERGE" not in r.votes.values()


def test_code_sets_are_the_documents():
    assert {"NEGATION_SCOPE", "CONTRAST_CLAUSE", "STRUCTURAL_INCONSISTENT"} == STRUCTURAL_REASON_CODES
    assert {"WEAK_EVIDENCE", "REDUNDANT_UPPER_REF"} == DROP_JUSTIFIED
    assert dict(FACET_PRIORITY) == {G: "C", R: "C"}
    assert [r.number for r in cr_vote.RULES["v2"]] == [1, 2, 3] == [r.number for r in cr_vote.RULES["v1"]]


@pytest.mark.parametrize("code", sorted(STRUCTURAL_REASON_CODES))
def test_every_structural_code_flips(code):
    for version in ("v1", "v2"):
        assert arbiter_vote(ballot(v("FLIP", code), v("DROP", "WEAK_EVIDENCE"), "KEEP"),
                            version=version).final_action == "FLIP"


@pytest.mark.parametrize("code", sorted(DROP_JUSTIFIED))
def test_every_justified_drop_code_drops_in_v2_only(code):
    votes = ballot("KEEP", v("FLIP", "OTHER"), v("DROP", code))
    assert arbiter_vote(votes, version="v2").final_action == "DROP"
    assert (arbiter_vote(votes, version="v1").final_action, arbiter_vote(votes, version="v1").flag_reason) == (
        "FLAG", "TIE_UNRESOLVED")


# The document's "CR v1 vs CR v2" table, row by row: same votes, the two versions' answers.
V1_V2_ROWS = [
    # Rule 1: v2 adds the facet-minority protection
    ("Rule 1", ballot("DROP", "DROP", "KEEP"), G, ("DROP", None, 1), ("FLAG", "FACET_MINORITY_SIGNAL", 1)),
    ("Rule 1", ballot("KEEP", "KEEP", "FLIP"), R, ("KEEP", None, 1), ("FLAG", "FACET_MINORITY_SIGNAL", 1)),
    # Rule 2: v2 adds granularity → REDUNDANT_REF_UNCERTAIN
    ("Rule 2", ballot("KEEP", "FLIP", "FLAG"), G, ("FLAG", "POLARITY_UNCERTAIN", 2),
     ("FLAG", "REDUNDANT_REF_UNCERTAIN", 2)),
    ("Rule 2", ballot("KEEP", "FLIP", "FLAG"), None, ("FLAG", "POLARITY_UNCERTAIN", 2),
     ("FLAG", "POLARITY_UNCERTAIN", 2)),
    # Rule 3: v2 adds DROP justified, and the granularity flag reason
    ("Rule 3", ballot(v("FLIP", "NEGATION_SCOPE"), v("DROP", "WEAK_EVIDENCE"), "KEEP"), None,
     ("FLIP", None, 3), ("FLIP", None, 3)),
    ("Rule 3", ballot(v("FLIP"), v("DROP", "WEAK_EVIDENCE"), "KEEP"), None, ("FLAG", "TIE_UNRESOLVED", 3),
     ("DROP", None, 3)),
    ("Rule 3", ballot(v("FLIP"), v("DROP"), "KEEP"), G, ("FLAG", "TIE_UNRESOLVED", 3),
     ("FLAG", "REDUNDANT_REF_UNCERTAIN", 3)),
    # Facet priority: none in v1
    ("Facet", ballot("FLIP", "FLIP", "DROP"), G, ("FLIP", None, 1), ("FLAG", "FACET_MINORITY_SIGNAL", 1)),
    # DROP justification: none in v1
    ("DROP", ballot(v("FLIP"), v("DROP", "REDUNDANT_UPPER_REF"), "KEEP"), R, ("FLAG", "TIE_UNRESOLVED", 3),
     ("DROP", None, 3)),
]


@pytest.mark.parametrize("row, votes, conflict, v1, v2", V1_V2_ROWS)
def test_v1_v2_table(row, votes, conflict, v1, v2):
    r1 = arbiter_vote(votes, conflict, version="v1")
    r2 = arbiter_vote(votes, conflict, version="v2")
    assert (r1.final_action, r1.flag_reason, r1.rule) == v1, row
    assert (r2.final_action, r2.flag_reason, r2.rule) == v2, row


def test_v1_never_uses_the_v2_reasons():
    actions = ["KEEP", "DROP", "FLIP", "FLAG", "MERGE"]
    codes = ["", "NEGATION_SCOPE", "WEAK_EVIDENCE", "REDUNDANT_UPPER_REF"]
    for a, b, c in itertools.product(actions, repeat=3):
        for code in codes:
            for conflict in (None, G, R):
                r = arbiter_vote(ballot(v(a, code), v(b, code), v(c, code)), conflict, version="v1")
                assert r.flag_reason not in ("FACET_MINORITY_SIGNAL", "REDUNDANT_REF_UNCERTAIN")


def test_merge_is_recorded_and_never_output():
    r = arbiter_vote(ballot("MERGE", "KEEP", "DROP"))
    assert r.merged == ("A",) and r.votes == {"A": "KEEP", "B": "KEEP", "C": "DROP"}
    assert r.to_dict()["merged"] == ["A"]


def test_document_interface_actions_by_tuple():
    out = arbiter_vote_all(
        {"t1": ballot("KEEP", "KEEP", "DROP"), "t2": ballot({"action": "FLIP", "reason_code": "NEGATION_SCOPE"},
                                                               "DROP", "KEEP")},
        {"t1": G},
    )
    assert (out["t1"].final_action, out["t1"].flag_reason) == ("FLAG", "FACET_MINORITY_SIGNAL")
    assert out["t2"].final_action == "FLIP" and out["t2"].reason_codes == {"A": "NEGATION_SCOPE"}


@pytest.mark.parametrize("votes, match", [
    ({"A": "KEEP", "B": "KEEP"}, "exactly one vote"),
    ({"A": "KEEP", "B": "KEEP", "C": "KEEP", "D": "DROP"}, "exactly one vote"),
    (ballot("KEEP", "KEEP", "MAYBE"), "unknown action"),
    (ballot("KEEP", "KEEP", 3), "a vote is"),
])
def test_bad_votes_are_typed_errors(votes, match):
    with pytest.raises(VoteInputError, match=match):
        arbiter_vote(votes)


def test_bad_version():
    with pytest.raises(VoteInputError, match="version"):
        arbiter_vote(ballot("KEEP", "KEEP", "KEEP"), version="v3")


vote_st = st.builds(Vote, st.sampled_from(sorted(cr_vote.VOTE_ACTIONS)),
                    st.sampled_from(["", *sorted(STRUCTURAL_REASON_CODES | DROP_JUSTIFIED), "OTHER"]))


@given(st.fixed_dictionaries({"A": vote_st, "B": vote_st, "C": vote_st}),
       st.sampled_from([None, G, R, "x"]), st.sampled_from(["v1", "v2"]))
def test_properties(votes, conflict, version):
    r = arbiter_vote(votes, conflict, version=version)
    assert r.final_action in cr_vote.FINAL_ACTIONS
    assert (r.final_action == "FLAG") == (r.flag_reason is not None)
    assert r.flag_reason is None or r.flag_reason in cr_vote.FLAG_REASONS
    # the result never depends on the order the agents' votes are given in
    assert arbiter_vote(dict(reversed(list(votes.items()))), conflict, version=version) == r
    # an adopted non-FLAG action was voted by someone (MERGE counted as KEEP)
    if r.final_action != "FLAG":
        assert r.final_action in r.votes.values()
