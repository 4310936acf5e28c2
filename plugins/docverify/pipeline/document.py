"""``verify_document()`` — the one function the DAG, the retry loop and the CLI call.

One attempt runs V1 (rules), then V2, V3 and V4 (each a rule phase and a judgment phase; the
three judgments concurrently), and numbers the issues ``V1-0001``…. Every attempt of every path
goes through :func:`verify_attempt`: the DAG's ``verify`` task (attempt 0 and its V5 decision,
:func:`verify_document` with ``max_retries=0``), its ``auto_fix_retry`` task (the later attempts,
from the stored attempt 0) and the CLI. The rule phases of an attempt are computed once and
shared by the three agents.

Skips, as the specification orders them:
* a classification that does not match the schema stops after V1 (nothing else can be read);
* every judgment phase (V2, V3 and V4) is skipped when any rule phase (V1–V4) of the attempt
  found a BLOCKER: the arbiter's rule 1 escalates such a document whatever an LLM says, so no
  LLM money is spent on it (the report's runs say which phase was skipped and why).

What runs beyond the specification is the :class:`~docverify.domain.policy.VerifyPolicy` passed as
``policy=…`` (never read from the judge or a global): the BLOCKER repair (:mod:`docverify.pipeline.retry`),
V2's patient-identity and low-confidence checks (rule phase) and the label-versus-text guard beside
a non-offline V2 judgment (:func:`run_agent`).

What a verification depends on — the judge, the policy, the optional CR_V2 jury and V5 second
opinion, the verifier registry — travels as one explicit :class:`VerifyDeps` (pydantic-ai's
typed-deps style; ADR 0003), built once per Airflow task by ``docverify_airflow.tasks.wiring``. Every
function below takes either a ``VerifyDeps`` or a bare judge (then: ``policy=…``, no jury, no
second opinion).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from docverify.arbiters.jury import Jury, review_judgment
from docverify.domain.codes import make_issue, number_issues
from docverify.domain.models import (
    AttemptRecord,
    ClassificationOutput,
    DocumentBundle,
    Issue,
    Severity,
    VerificationReport,
    VerificationResult,
    VerifierRun,
)
from docverify.domain.policy import DEFAULT_POLICY, VerifyPolicy
from docverify.judging.judges import Judge, JudgeThrottled, JudgmentResult, Usage, judgment_call
from docverify.pipeline.retry import (
    MAX_RETRIES,
    AttemptDecider,
    RawClassification,
    attempt_record,
    fingerprint,
    run_loop,
)
from docverify.verify import v1_schema, v2_consistency, v4_evidence
from docverify.verify.registry import REGISTRY, Registry

if TYPE_CHECKING:
    from docverify.arbiters.second_opinion import SecondOpinion

#: The verifiers with a judgment phase, in order (of the default registry).
AGENTS = REGISTRY.judged_ids


@dataclass(frozen=True)
class VerifyDeps:
    """Everything one verification depends on, passed explicitly (never patched onto the judge nor
    read from a global): built once per task (``docverify_airflow.tasks.wiring.verify_deps``), by the CLI
    and the benchmarks.

    Attributes:
        judge: the classifier and the judgment phases (offline or LLM).
        policy: what runs beyond the specification (:mod:`docverify.domain.policy`).
        jury: the CR_V2 jury over each judgment's findings (:mod:`docverify.arbiters.jury`), or None (off).
        second_opinion: the V5 second opinion (:mod:`docverify.arbiters.second_opinion`), or None (off).

    The verifiers that run are the judge's registry (``judge.registry``, default
    :data:`docverify.verify.registry.REGISTRY`): the judge judges exactly those.
    """

    judge: Judge
    policy: VerifyPolicy = DEFAULT_POLICY
    jury: Jury | None = None
    second_opinion: SecondOpinion | None = None

    @property
    def verifiers(self) -> Registry:
        """The verifiers to run: the judge's registry."""
        return self.judge.registry


def as_deps(deps: VerifyDeps | Judge, policy: VerifyPolicy | None = None) -> VerifyDeps:
    """``deps`` itself, or a bare judge with ``policy`` (default :data:`~docverify.domain.policy.DEFAULT_POLICY`)
    and no jury nor second opinion. A ``policy`` beside a ``VerifyDeps`` must be its own."""
    if isinstance(deps, VerifyDeps):
        if policy is not None and policy != deps.policy:
            raise ValueError("policy= differs from the VerifyDeps' policy: pass one of them")
        return deps
    return VerifyDeps(judge=deps, policy=policy if policy is not None else DEFAULT_POLICY)


#: The implementation of V2's label-versus-text guard (``policy.label_text_guard``).
GUARD_IMPLEMENTATION = f"guard:{v2_consistency.OFFLINE_IMPLEMENTATION}"


@dataclass
class AgentOutcome:
    issues: list[Issue]
    runs: list[VerifierRun]
    usage: Usage = field(default_factory=Usage)


def run_v1(bundle: DocumentBundle, raw: RawClassification) -> tuple[ClassificationOutput | None, AgentOutcome]:
    cls, issues = v1_schema.parse(raw)
    if cls is not None:
        issues = v1_schema.check(bundle, cls)
    run = VerifierRun(agent="V1", phase="rules", implementation=v1_schema.IMPLEMENTATION, issue_count=len(issues))
    return cls, AgentOutcome(issues, [run])


def rule_phases(bundle: DocumentBundle, cls: ClassificationOutput, v1_issues: list[Issue] | None = None,
                *, policy: VerifyPolicy = DEFAULT_POLICY, registry: Registry = REGISTRY) -> dict[str, list[Issue]]:
    """The rule-phase issues of every verifier of ``registry`` (pure, milliseconds to a little more
    for V4's lookups); V2's include the checks ``policy`` switches on."""
    phases = {"V1": v1_schema.check(bundle, cls) if v1_issues is None else v1_issues}
    phases.update({s.agent: s.rule_phase(bundle, cls, policy) for s in registry if s.agent != "V1"})
    return phases


def judgment_skip_reason(phases: dict[str, list[Issue]]) -> str:
    """Why the attempt's judgment phases (LLM or offline) are skipped, or '' when they run:
    a rule-phase BLOCKER means V5's rule 1 escalates (or, with ``policy.blocker_repair`` and every
    BLOCKER auto-fixable, the repair runs first and the repaired attempt is judged), so no judgment
    can change it."""
    blockers = sorted({f"{i.agent} {i.code}" for issues in phases.values() for i in issues
                       if i.severity == Severity.BLOCKER.value})
    if not blockers:
        return ""
    return f"a rule phase found a BLOCKER ({', '.join(blockers)}): no judgment (and no LLM call) on this attempt"


async def run_agent(agent: str, bundle: DocumentBundle, cls: ClassificationOutput, deps: VerifyDeps | Judge,
                    *, phases: dict[str, list[Issue]] | None = None,
                    policy: VerifyPolicy | None = None) -> AgentOutcome:
    """Rule phase + judgment phase of V2, V3 or V4 (+ V2's label-versus-text guard, see
    :func:`label_text_guard`).

    ``phases`` are this attempt's rule phases when the caller already has them (:func:`verify_attempt`
    computes them once for the three agents); without them the agent computes all four itself (its
    judgment is skipped when any rule phase found a BLOCKER)."""
    deps = as_deps(deps, policy)
    judge, policy = deps.judge, deps.policy
    if phases is None:
        phases = rule_phases(bundle, cls, policy=policy, registry=deps.verifiers)
    rules = phases[agent]
    runs = [VerifierRun(agent=agent, phase="rules", implementation="rules-v1", issue_count=len(rules))]
    skip = judgment_skip_reason(phases)
    if skip:
        runs.append(VerifierRun(agent=agent, phase="judgment", implementation=judge.name, skipped=True,
                                skip_reason=skip))
        return AgentOutcome(rules, runs)
    result: JudgmentResult = await judgment_call(judge, agent)(bundle, cls)
    u = result.usage
    runs.append(VerifierRun(agent=agent, phase="judgment", implementation=result.implementation,
                            issue_count=len(result.issues), llm_calls=u.llm_calls, cache_hits=u.cache_hits,
                            input_tokens=u.input_tokens, output_tokens=u.output_tokens))
    # the CR_V2 jury reviews this judgment's findings (only with deps.jury)
    findings, jury_runs, jury_usage = await review_judgment(agent, bundle, cls, result, deps.jury)
    runs += jury_runs
    total = Usage()
    total.add(u)
    total.add(jury_usage)
    if agent == "V2" and policy.label_text_guard and result.implementation != v2_consistency.OFFLINE_IMPLEMENTATION:
        guard = label_text_guard(bundle, cls, findings)
        runs.append(VerifierRun(agent=agent, phase="guard", implementation=GUARD_IMPLEMENTATION,
                                issue_count=len(guard)))
        findings = findings + guard
    return AgentOutcome(rules + findings, runs, total)


def label_text_guard(bundle: DocumentBundle, cls: ClassificationOutput, findings: list[Issue]) -> list[Issue]:
    """The offline label-versus-text check (:func:`v2_consistency.offline_judgment`: lexical support of
    every PRIMARY label by its segment's text) beside a V2 judgment that is not that check (the LLM's):
    deterministic, no LLM call. Its issues are marked ``details["implementation"] =``
    :data:`GUARD_IMPLEMENTATION`; one the judgment already reported (same code and location) is left out."""
    seen = {(i.code, i.location.strip()) for i in findings}
    return [i.model_copy(update={"details": {**i.details, "implementation": GUARD_IMPLEMENTATION}})
            for i in v2_consistency.offline_judgment(bundle, cls) if (i.code, i.location.strip()) not in seen]


def assemble(doc_id: str, attempt: int, cls: RawClassification,
             outcomes: list[AgentOutcome], registry: Registry = REGISTRY) -> VerificationReport:
    """One attempt's report from the agents' outcomes (V1 first, then V2, V3, V4). Every issue's agent
    must be a verifier of ``registry`` (the models check only the id's form)."""
    made = [i for o in outcomes for i in o.issues]
    strangers = sorted({i.agent for i in made} - set(registry.agent_ids))
    if strangers:
        raise ValueError(f"unknown verifier(s) {', '.join(strangers)}: one of {', '.join(registry.agent_ids)}")
    issues = number_issues(made)
    return VerificationReport(
        doc_id=doc_id, attempt=attempt, fingerprint=fingerprint(cls), issues=issues,
        runs=[r for o in outcomes for r in o.runs], quality_score=v4_evidence.quality_score(issues),
    )


async def _contained(agent: str, run: Awaitable[AgentOutcome]) -> AgentOutcome:
    """One agent's outcome; a fault of its judge becomes a ``VERIFICATION_INCOMPLETE`` issue of the
    document (never an accept), except throttling, which propagates (the task is retried)."""
    try:
        return await run
    except JudgeThrottled:
        raise
    except Exception as exc:  # noqa: BLE001 - this document only: it escalates, the night goes on
        return AgentOutcome([make_issue("VERIFICATION_INCOMPLETE",
                                        f"No result from {agent} for this document ({type(exc).__name__})",
                                        agent=agent)], [])


async def verify_attempt(bundle: DocumentBundle, classification: RawClassification, deps: VerifyDeps | Judge, attempt: int = 0,
                         usage: Usage | None = None, *, contain_faults: bool = False,
                         policy: VerifyPolicy | None = None) -> VerificationReport:
    """One attempt: V1, then the other verifiers of the registry (V2–V4) concurrently on rule phases
    computed once. With ``contain_faults`` (the nightly tasks) an agent that raises yields
    ``VERIFICATION_INCOMPLETE`` instead of failing the document (:class:`~docverify.judging.judges.JudgeThrottled`
    still propagates)."""
    deps = as_deps(deps, policy)
    cls, v1 = run_v1(bundle, classification)
    if cls is None:
        return assemble(bundle.doc_id, attempt, classification, [v1], deps.verifiers)
    registry = deps.verifiers
    # once per attempt, shared by the agents
    phases = rule_phases(bundle, cls, v1.issues, policy=deps.policy, registry=registry)
    agents = registry.judged_ids
    runs = [run_agent(a, bundle, cls, deps, phases=phases) for a in agents]
    if contain_faults:
        runs = [_contained(a, r) for a, r in zip(agents, runs, strict=True)]
    outcomes = await asyncio.gather(*runs)
    if usage is not None:
        for o in outcomes:
            usage.add(o.usage)
    return assemble(bundle.doc_id, attempt, cls, [v1, *outcomes], registry)


async def verify_document(bundle: DocumentBundle, classification: RawClassification, deps: VerifyDeps | Judge, *,
                          max_retries: int = MAX_RETRIES, first_report: VerificationReport | None = None,
                          usage: Usage | None = None, contain_faults: bool = False,
                          policy: VerifyPolicy | None = None) -> VerificationResult:
    """Verify, fix and re-verify one document until V5 accepts or escalates.

    ``max_retries=0`` stops after attempt 0's V5 decision: a document V5 sends to the retry ends
    with ``stop_reason="max_retries"`` (the DAG's verify task routes it to ``auto_fix_retry``,
    which continues from ``first_report``). ``policy``: what runs beyond the specification
    (:mod:`docverify.domain.policy`); every attempt and the loop use the same one. ``deps``: a
    :class:`VerifyDeps` (its jury reviews the judgments, its second opinion decides each attempt) or
    a bare judge."""
    deps = as_deps(deps, policy)

    async def attempt_fn(cls: RawClassification, n: int) -> VerificationReport:
        return await verify_attempt(bundle, cls, deps, n, usage, contain_faults=contain_faults)

    # the V5 second opinion decides each attempt (only with deps.second_opinion)
    return await run_loop(bundle.doc_id, classification, attempt_fn, first_report=first_report,
                          max_retries=max_retries, policy=deps.policy,
                          decide_attempt=decider(bundle, deps.second_opinion, usage))


def decider(bundle: DocumentBundle, second_opinion: SecondOpinion | None,
            usage: Usage | None = None) -> AttemptDecider | None:
    """For :func:`~docverify.pipeline.retry.run_loop`: ``async (report, cls, earlier) -> AttemptRecord`` with the
    second opinion applied, or None (no second opinion: the loop uses the table alone)."""
    if second_opinion is None:
        return None

    async def decide(report: VerificationReport, cls: ClassificationOutput | None,
                     earlier: Sequence[AttemptRecord] = ()) -> AttemptRecord:
        rec = attempt_record(report, earlier)
        decision, u = await second_opinion.review(bundle, cls, report.issues, rec.decision)
        if usage is not None:
            usage.add(u)
        return rec.model_copy(update={"decision": decision})

    return decide
