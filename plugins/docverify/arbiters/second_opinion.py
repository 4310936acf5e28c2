"""The decision arbiter's pattern on V5: an LLM second opinion that can only make a route stricter.

For a document the V5 table would accept or retry, an LLM sees the issues and the evidence and
proposes a route with a confidence (``include/prompts/v5_second_opinion_v1.md``). Safety
overrides decide, in order (the first that holds; rules as data, :data:`OVERRIDES`):

1. ``TABLE_ESCALATES`` — the table escalates: escalate (the LLM is not even asked);
2. ``LLM_FAILURE`` — no usable answer (fault, timeout, invalid output): the table's decision;
3. ``BLOCKER_OR_NON_FIXABLE_MAJOR`` — any BLOCKER or non-fixable MAJOR: escalate, whatever the LLM says;
4. ``LOW_CONFIDENCE`` — confidence < 0.55: escalate;
5. ``NOTHING_TO_FIX`` — the LLM proposes AUTO_RETRY but no issue is auto-fixable: escalate
   (a retry would change nothing and stop as a cycle);
6. ``STRICTER_OF_TWO`` — the stricter of the table's route and the proposal
   (AUTO_ACCEPT < AUTO_RETRY < ESCALATE_TO_SME).

So the final route is never looser than the table's (a property test shows it). The decision keeps
the table's rule number; ``second_opinion`` records the table's decision, the proposal, the
override that decided and the model; the audit line gets a suffix with codes only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from pydantic import BaseModel

from docverify.arbiters.jury import AskingLLM
from docverify.arbiters.v5 import Counts, count, evidence_pages
from docverify.domain.models import ArbiterDecision, ClassificationOutput, Decision, DocumentBundle, Issue
from docverify.judging.judges import JudgeThrottled, Usage
from docverify.llm.schemas import SecondOpinionAnswer
from docverify.verify.v4_evidence import llm_inputs as evidence_inputs

STRICTNESS = {"AUTO_ACCEPT": 0, "AUTO_RETRY": 1, "ESCALATE_TO_SME": 2}
MIN_CONFIDENCE = 0.55
ESC = Decision.ESCALATE_TO_SME.value


@dataclass(frozen=True)
class Proposal:
    route: str
    confidence: float
    reasoning: str = ""


class ProposalRecord(TypedDict):
    route: str
    confidence: float
    reasoning: str


class SecondOpinionRecord(TypedDict):
    """``ArbiterDecision.second_opinion``: the table's decision, the proposal, the override that decided."""

    model: str
    table_decision: str
    table_rule: int
    proposal: ProposalRecord | None
    error: str
    override: str
    decision: str
    changed: bool


@dataclass(frozen=True)
class _Ctx:
    table: str
    counts: Counts
    proposal: Proposal | None


@dataclass(frozen=True)
class Override:
    name: str
    condition: Callable[[_Ctx], bool]
    route: Callable[[_Ctx], str]


def _stricter(a: str, b: str) -> str:
    return a if STRICTNESS[a] >= STRICTNESS[b] else b


def _proposed(x: _Ctx) -> Proposal:
    """The proposal of an override after ``LLM_FAILURE`` (which decides when there is none)."""
    if x.proposal is None:
        raise ValueError("no proposal: LLM_FAILURE decides before any override that reads it")
    return x.proposal


OVERRIDES: tuple[Override, ...] = (
    Override("TABLE_ESCALATES", lambda x: x.table == ESC, lambda x: ESC),
    Override("LLM_FAILURE", lambda x: x.proposal is None, lambda x: x.table),
    Override("BLOCKER_OR_NON_FIXABLE_MAJOR", lambda x: x.counts.blocker_count > 0 or x.counts.major_non_fixable > 0,
             lambda x: ESC),
    Override("LOW_CONFIDENCE", lambda x: _proposed(x).confidence < MIN_CONFIDENCE, lambda x: ESC),
    Override("NOTHING_TO_FIX", lambda x: _proposed(x).route == "AUTO_RETRY" and x.counts.fixable_count == 0,
             lambda x: ESC),
    Override("STRICTER_OF_TWO", lambda x: True, lambda x: _stricter(x.table, _proposed(x).route)),
)


def combine(table: ArbiterDecision, issues: list[Issue], proposal: Proposal | None, *, error: str = "",
            model: str = "") -> ArbiterDecision:
    """The table's decision and the LLM's proposal (None: it failed) → the final decision."""
    table_route = Decision(table.decision).value
    ctx = _Ctx(table_route, count(issues), proposal)
    o = next(o for o in OVERRIDES if o.condition(ctx))
    final = o.route(ctx)
    record: SecondOpinionRecord = {
        "model": model, "table_decision": table_route, "table_rule": table.rule,
        "proposal": None if proposal is None else {"route": proposal.route, "confidence": round(proposal.confidence, 4),
                                                   "reasoning": proposal.reasoning},
        "error": error, "override": o.name, "decision": final, "changed": final != table_route,
    }
    prop = "none" if proposal is None else f"{proposal.route} {proposal.confidence:.2f}"
    audit = f"{table.explanation_audit} | second opinion: {prop} -> {o.name} -> {final}"
    sme = table.explanation_sme
    if final != table_route:
        sme += (f"\nA second opinion ({model or 'LLM'}) made the route stricter: {table_route} -> {final} "
                f"({o.name}).")
    update: dict[str, object] = {"second_opinion": record, "explanation_audit": audit, "explanation_sme": sme}
    if final != table_route:
        update["decision"] = Decision(final)
        update["reason"] = f"{table.reason}; second opinion: {o.name} -> {final}"
    return table.model_copy(update=update)


def second_opinion_inputs(bundle: DocumentBundle, cls: ClassificationOutput, issues: list[Issue],
                          table: ArbiterDecision) -> dict[str, object]:
    """What the LLM reads: the evidence pages and the judgment view (as V4's judgment), the
    issues as codes and facts (no messages) and the table's decision."""
    inputs: dict[str, object] = dict(evidence_inputs(bundle, cls))
    inputs["issues"] = {
        "table": {"decision": Decision(table.decision).value, "rule": table.rule},
        "issues": [{"issue_id": i.issue_id, "agent": i.agent, "code": i.code, "severity": i.severity,
                    "auto_fixable": i.auto_fixable, "location": i.location, "pages": evidence_pages([i])}
                   for i in issues],
    }
    return inputs


class SecondOpinion:
    """The LLM side: one cached call per (document state, table decision) on an ``LLMJudge``
    (its model, verdict cache, retries and timeout)."""

    kind = "V5_SECOND"

    def __init__(self, llm: AskingLLM):
        self.llm = llm
        self.name = f"v5-second-opinion:{llm.model_id}"

    async def review(self, bundle: DocumentBundle, cls: ClassificationOutput | None, issues: list[Issue],
                     table: ArbiterDecision) -> tuple[ArbiterDecision, Usage]:
        """Never raises but :class:`~docverify.judging.judges.JudgeThrottled` (the quota held the call back:
        the task waits and retries, the document is not decided): any other fault is the table's
        decision (``LLM_FAILURE``)."""
        if Decision(table.decision).value == ESC or cls is None:
            return table, Usage()
        out: BaseModel | None
        try:
            inputs = second_opinion_inputs(bundle, cls, issues, table)
            out, usage, err = await self.llm.ask(self.kind, bundle.doc_id, inputs)
        except JudgeThrottled:
            raise
        except Exception as exc:  # noqa: BLE001
            out, usage, err = None, Usage(), type(exc).__name__
        proposal = None
        if isinstance(out, SecondOpinionAnswer):
            proposal = Proposal(out.route, min(1.0, max(0.0, float(out.confidence))), out.reasoning)
        return combine(table, issues, proposal, error=err, model=self.llm.model_id), usage
