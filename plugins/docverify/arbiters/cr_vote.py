"""The CR_V2 vote of ``cr_v2_vote.md`` of the specification (shared/spec, outside this repository) (and CR v1, its predecessor), exact to the document.

Three agents A, B and C each vote one action on an item: KEEP, DROP, FLIP or FLAG (MERGE is
accepted and counted as KEEP — Rule 4). The rules are one ordered list per version; the first
whose condition holds decides. Pure and deterministic.

Decisions where the document is ambiguous (README "CR_V2 vote"; each one is a test):

* Rule 1 comes first. The document's Rule 2 examples (2 FLIP + 1 KEEP, 2 DROP + 1 FLIP) have a
  2-vote majority, so Rule 1 decides them; Rule 2 only sees three different actions that are not
  exactly {FLIP, DROP, KEEP} (e.g. KEEP + FLIP + FLAG).
* "KEEP + FLAG" (Rule 2) is the action FLAG, which the action table defines as "keep + mark
  uncertain"; the arbiter outputs ``FLAG``.
* Rule 4 is a normalisation before Rules 1–3: a MERGE vote becomes KEEP, and the result records
  which agents' MERGE was replaced (``merged``); the deciding rule is then 1, 2 or 3.
* A majority that is itself FLAG (two or three FLAG votes, no facet exception) needs a
  flag_reason the document does not name: ``MAJORITY_FLAG``.
* CR v1's Rule 3 "else FLAG" names no flag_reason: ``TIE_UNRESOLVED`` (v1 has no granularity
  variant — that arrived with v2).
* Exactly one vote of each of A, B and C is required; anything else is a :class:`VoteInputError`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from pydantic import JsonValue

AGENTS: tuple[str, ...] = ("A", "B", "C")
VOTE_ACTIONS = frozenset({"KEEP", "DROP", "FLIP", "FLAG", "MERGE"})
FINAL_ACTIONS = frozenset({"KEEP", "DROP", "FLIP", "FLAG"})
Version = Literal["v1", "v2"]
VERSIONS: tuple[str, ...] = ("v1", "v2")

#: conflict_type → the preferred actor whose minority vote is protected (v2 only).
FACET_PRIORITY: Mapping[str, str] = {
    "granularity_overlap_candidate": "C",
    "REDUNDANT_UPPER_REF": "C",
}
STRUCTURAL_REASON_CODES = frozenset({"NEGATION_SCOPE", "CONTRAST_CLAUSE", "STRUCTURAL_INCONSISTENT"})
DROP_JUSTIFIED = frozenset({"WEAK_EVIDENCE", "REDUNDANT_UPPER_REF"})
GRANULARITY = "granularity_overlap_candidate"

# flag reasons
FACET_MINORITY_SIGNAL = "FACET_MINORITY_SIGNAL"
REDUNDANT_REF_UNCERTAIN = "REDUNDANT_REF_UNCERTAIN"
POLARITY_UNCERTAIN = "POLARITY_UNCERTAIN"
TIE_UNRESOLVED = "TIE_UNRESOLVED"
MAJORITY_FLAG = "MAJORITY_FLAG"
FLAG_REASONS = frozenset({FACET_MINORITY_SIGNAL, REDUNDANT_REF_UNCERTAIN, POLARITY_UNCERTAIN, TIE_UNRESOLVED,
                          MAJORITY_FLAG})


class VoteInputError(ValueError):
    """The votes cannot be judged (a missing or extra agent, an unknown action)."""


@dataclass(frozen=True)
class Vote:
    action: str
    reason_code: str = ""


class VoteResultDict(TypedDict):
    """:meth:`VoteResult.to_dict`: the result as the CLI prints it and the jury records it."""

    final_action: str
    flag_reason: str | None
    rule: int
    version: str
    votes: dict[str, str]
    reason_codes: dict[str, str]
    merged: list[str]


@dataclass(frozen=True)
class VoteResult:
    final_action: str
    flag_reason: str | None
    rule: int
    version: str
    votes: dict[str, str]
    """Each agent's action as adopted (MERGE already replaced by KEEP)."""
    reason_codes: dict[str, str] = field(default_factory=dict)
    merged: tuple[str, ...] = ()
    """Agents whose MERGE vote Rule 4 counted as KEEP."""

    def to_dict(self) -> VoteResultDict:
        return {"final_action": self.final_action, "flag_reason": self.flag_reason, "rule": self.rule,
                "version": self.version, "votes": dict(self.votes), "reason_codes": dict(self.reason_codes),
                "merged": list(self.merged)}


@dataclass(frozen=True)
class Ballot:
    """The votes of one item as the rules see them."""

    votes: dict[str, Vote]
    conflict_type: str | None

    @property
    def actions(self) -> dict[str, str]:
        return {a: v.action for a, v in self.votes.items()}

    def majority(self) -> tuple[str, int]:
        action, n = Counter(self.actions.values()).most_common(1)[0]
        return action, n

    def minority_agents(self) -> list[str]:
        action, _ = self.majority()
        return [a for a in AGENTS if self.votes[a].action != action]

    def reason_of(self, action: str) -> str:
        return next(v.reason_code for v in self.votes.values() if v.action == action)


Outcome = tuple[str, str | None]


@dataclass(frozen=True)
class VoteRule:
    number: int
    name: str
    condition: Callable[[Ballot], bool]
    resolve: Callable[[Ballot], Outcome]


def _has_majority(b: Ballot) -> bool:
    return b.majority()[1] >= 2


def _is_flip_drop_keep(b: Ballot) -> bool:
    return set(b.actions.values()) == {"FLIP", "DROP", "KEEP"}


def _all_different(b: Ballot) -> bool:
    return not _has_majority(b) and not _is_flip_drop_keep(b)


def _adopt(action: str) -> Outcome:
    return action, (MAJORITY_FLAG if action == "FLAG" else None)


def _rule1_v1(b: Ballot) -> Outcome:
    return _adopt(b.majority()[0])


def _rule1_v2(b: Ballot) -> Outcome:
    preferred = FACET_PRIORITY.get(b.conflict_type or "")
    if preferred is not None and preferred in b.minority_agents():
        return "FLAG", FACET_MINORITY_SIGNAL
    return _adopt(b.majority()[0])


def _rule2_v1(b: Ballot) -> Outcome:
    return "FLAG", POLARITY_UNCERTAIN


def _rule2_v2(b: Ballot) -> Outcome:
    return "FLAG", REDUNDANT_REF_UNCERTAIN if b.conflict_type == GRANULARITY else POLARITY_UNCERTAIN


def _rule3_v1(b: Ballot) -> Outcome:
    if b.reason_of("FLIP") in STRUCTURAL_REASON_CODES:
        return "FLIP", None
    return "FLAG", TIE_UNRESOLVED


def _rule3_v2(b: Ballot) -> Outcome:
    if b.reason_of("FLIP") in STRUCTURAL_REASON_CODES:
        return "FLIP", None
    if b.reason_of("DROP") in DROP_JUSTIFIED:
        return "DROP", None
    return "FLAG", REDUNDANT_REF_UNCERTAIN if b.conflict_type == GRANULARITY else TIE_UNRESOLVED


RULES: dict[str, tuple[VoteRule, ...]] = {
    "v1": (
        VoteRule(1, "majority", _has_majority, _rule1_v1),
        VoteRule(2, "all different", _all_different, _rule2_v1),
        VoteRule(3, "1 FLIP + 1 DROP + 1 KEEP", _is_flip_drop_keep, _rule3_v1),
    ),
    "v2": (
        VoteRule(1, "majority + facet-minority protection", _has_majority, _rule1_v2),
        VoteRule(2, "all different", _all_different, _rule2_v2),
        VoteRule(3, "1 FLIP + 1 DROP + 1 KEEP", _is_flip_drop_keep, _rule3_v2),
    ),
}


#: a vote as it comes: a :class:`Vote` (the jury), or the CLI's JSON before it is checked here (an
#: action string or ``{"action", "reason_code"}``; anything else is refused)
VoteInput = Vote | JsonValue


def _as_vote(agent: str, raw: VoteInput) -> Vote:
    if isinstance(raw, Vote):
        vote = raw
    elif isinstance(raw, str):
        vote = Vote(raw)
    elif isinstance(raw, Mapping) and isinstance(action := raw.get("action"), str):
        vote = Vote(action, str(raw.get("reason_code") or ""))
    else:
        raise VoteInputError(f"agent {agent}: a vote is an action string or {{\"action\", \"reason_code\"}}, "
                             f"not {type(raw).__name__}")
    action = vote.action.strip().upper()
    if action not in VOTE_ACTIONS:
        raise VoteInputError(f"agent {agent}: unknown action {vote.action!r} (use one of "
                             f"{', '.join(sorted(VOTE_ACTIONS))})")
    return Vote(action, vote.reason_code.strip())


def arbiter_vote(votes: Mapping[str, VoteInput], conflict_type: str | None = None, *,
                 version: Version | str = "v2") -> VoteResult:
    """One item: the votes of A, B and C (``Vote``, an action string, or a dict with ``action``
    and ``reason_code``) and the item's conflict_type → :class:`VoteResult`."""
    if version not in RULES:
        raise VoteInputError(f"unknown CR version {version!r} (use v1 or v2)")
    if set(votes) != set(AGENTS):
        raise VoteInputError(f"need exactly one vote of each of A, B and C, got {sorted(votes)}")
    parsed = {a: _as_vote(a, votes[a]) for a in AGENTS}
    merged = tuple(a for a in AGENTS if parsed[a].action == "MERGE")  # Rule 4: MERGE counts as KEEP
    adopted = {a: Vote("KEEP" if v.action == "MERGE" else v.action, v.reason_code) for a, v in parsed.items()}
    ballot = Ballot(adopted, conflict_type)
    rule = next(r for r in RULES[version] if r.condition(ballot))
    action, reason = rule.resolve(ballot)
    return VoteResult(action, reason, rule.number, version, ballot.actions,
                      {a: v.reason_code for a, v in adopted.items() if v.reason_code}, merged)


def arbiter_vote_all(actions_by_tuple: Mapping[str, Mapping[str, VoteInput]],
                     conflict_flags: Mapping[str, str] | None = None, *,
                     version: Version | str = "v2") -> dict[str, VoteResult]:
    """The document's interface: ``actions_by_tuple`` (tuple_id → {A, B, C} actions) and
    ``conflict_flags`` (tuple_id → conflict_type) → tuple_id → result."""
    flags = conflict_flags or {}
    out: dict[str, VoteResult] = {}
    for tuple_id, votes in actions_by_tuple.items():
        try:
            out[tuple_id] = arbiter_vote(votes, flags.get(tuple_id), version=version)
        except VoteInputError as exc:
            raise VoteInputError(f"tuple {tuple_id}: {exc}") from exc
    return out
