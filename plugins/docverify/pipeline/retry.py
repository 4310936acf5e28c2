"""The retry orchestrator (spec slide 8): fix → verify again, at most ``MAX_RETRIES`` times.

Attempts 0, 1 and 2: an AUTO_RETRY after attempt 2 escalates. Before each re-verification the
MD5 fingerprint of the fixed classification is compared with every earlier one: a fix that
changed nothing (or brought back an earlier state) escalates at once instead of spending another
verification. Every attempt's issues and decision are kept.

By default any BLOCKER escalates at V5's rule 1, as the specification says. With the policy's
``blocker_repair`` switched on (Variable ``docverify_blocker_repair``, CLI ``--blocker-repair``), an
attempt whose BLOCKERs are all auto-fixable is repaired once before rule 1 applies
(:func:`needs_blocker_repair`); the V5 table itself is unchanged either way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from pydantic import JsonValue

from docverify.arbiters.v5 import decide
from docverify.domain.models import (
    AttemptRecord,
    ClassificationOutput,
    Decision,
    FixApplied,
    Issue,
    Severity,
    VerificationReport,
    VerificationResult,
)
from docverify.domain.policy import DEFAULT_POLICY, VerifyPolicy
from docverify.pipeline.autofix import FIXERS, apply_fixes
from docverify.verify.v1_schema import parse

MAX_RETRIES = 2


def fingerprint(cls: RawClassification) -> str:
    """MD5 over segment boundaries, dominant types, all shares and every field a fixer can
    change (number_of_segments, segment_page_count, the set of type entries, evidence pages).
    Free text (reasoning, notes) is left out: a fixer never writes it. Anything else (a raw
    classification that did not parse) is the MD5 of its JSON."""
    if not isinstance(cls, ClassificationOutput):
        blob = json.dumps(cls, sort_keys=True, default=str)
        return hashlib.md5(blob.encode()).hexdigest()
    view = {
        "number_of_segments": cls.number_of_segments,
        "dominant_type_overall": cls.dominant_type_overall,
        "segments": [
            {
                "i": s.segment_index, "start": s.page_start, "end": s.page_end,
                "count": s.segment_page_count, "dominant": s.dominant_type,
                "types": [
                    [tc.doc_type, tc.presence_level, repr(tc.segment_share), repr(tc.confidence),
                     [[e.page, e.snippet, e.anchors_found] for e in tc.top_evidence]]
                    for tc in s.classifications
                ],
            }
            for s in cls.segments
        ],
        "mixture": [[m.doc_type, m.presence_level, repr(m.overall_share)] for m in cls.document_mixture],
        "vendors": cls.vendor_signals,
    }
    return hashlib.md5(json.dumps(view, sort_keys=True).encode()).hexdigest()


#: a classification as it comes: the companion file's JSON, not yet validated (V1 parses it and
#: reports why it does not parse), or the parsed model
RawClassification = ClassificationOutput | JsonValue
# attempt 0 gets the raw classification when it does not parse (V1 reports why)
AttemptFn = Callable[[RawClassification, int], Awaitable[VerificationReport]]
#: The record of an attempt in place of the V5 table's (the V5 second opinion): (report, the
#: attempt's classification or None, the earlier attempts' records) → the record
AttemptDecider = Callable[[VerificationReport, ClassificationOutput | None, list[AttemptRecord]],
                          Awaitable[AttemptRecord]]
StopReason = Literal["arbiter", "max_retries", "cycle", "schema"]


def needs_blocker_repair(issues: list[Issue], earlier: Sequence[AttemptRecord] = (),
                         policy: VerifyPolicy = DEFAULT_POLICY) -> bool:
    """Auto-fixable BLOCKERs (README 'Auto-fixable BLOCKERs'; only with ``policy.blocker_repair``):
    when the attempt has BLOCKERs and every one is auto-fixable with a registered fixer, the fixes
    run once before V5's rule 1 applies. Once per document: a BLOCKER still there after the repair
    escalates by rule 1. With the switch off (the default) this is always False."""
    if not policy.blocker_repair:
        return False
    blockers = [i for i in issues if Severity(i.severity) == Severity.BLOCKER]
    return (bool(blockers) and all(i.auto_fixable and i.code in FIXERS for i in blockers)
            and not any(a.blocker_repair for a in earlier))


def attempt_record(report: VerificationReport, earlier: Sequence[AttemptRecord] = (),
                   policy: VerifyPolicy = DEFAULT_POLICY) -> AttemptRecord:
    return AttemptRecord(attempt=report.attempt, issues=report.issues, decision=decide(report.issues),
                         fingerprint=report.fingerprint, quality_score=report.quality_score, runs=report.runs,
                         blocker_repair=needs_blocker_repair(report.issues, earlier, policy))


async def run_loop(
    doc_id: str,
    classification: RawClassification,
    verify_attempt: AttemptFn,
    *,
    first_report: VerificationReport | None = None,
    max_retries: int = MAX_RETRIES,
    decide_attempt: AttemptDecider | None = None,
    policy: VerifyPolicy = DEFAULT_POLICY,
) -> VerificationResult:
    """Verify ``classification`` and retry with fixes until V5 accepts or escalates.

    ``first_report`` lets the nightly DAG hand over attempt 0, which its V1–V4 tasks already
    computed; the loop then starts with the fix. ``decide_attempt`` replaces the V5 table's
    record of an attempt (the V5 second opinion, :mod:`docverify.arbiters.second_opinion`); whether
    the attempt is a BLOCKER repair is decided here, by ``policy``, whoever recorded it.
    """
    cls, schema_issues = parse(classification)
    attempts: list[AttemptRecord] = []
    fixes: list[FixApplied] = []
    report = first_report or await verify_attempt(cls if cls is not None else classification, 0)
    seen = {report.fingerprint}
    while True:
        if decide_attempt is None:
            rec = attempt_record(report, attempts, policy)
        else:
            rec = await decide_attempt(report, cls, attempts)
            rec = rec.model_copy(update={"blocker_repair": needs_blocker_repair(report.issues, attempts, policy)})
        attempts.append(rec)
        decision = rec.decision.decision
        if (decision != Decision.AUTO_RETRY.value and not rec.blocker_repair) or cls is None:
            stop: StopReason = "schema" if cls is None else "arbiter"
            return make_result(doc_id, attempts, fixes, cls, classification, stop, "")
        if rec.attempt >= max_retries:
            still = "auto-fixable BLOCKER(s)" if rec.blocker_repair else "AUTO_RETRY"
            return make_result(doc_id, attempts, fixes, cls, classification, "max_retries",
                           f"Still {still} after attempt {rec.attempt} (MAX_RETRIES = {max_retries})")
        cls, applied = apply_fixes(cls, rec.issues, rec.attempt)
        fixes += applied
        fp = fingerprint(cls)
        if fp in seen:
            return make_result(doc_id, attempts, fixes, cls, classification, "cycle",
                           f"The fixes after attempt {rec.attempt} left the classification's fingerprint "
                           f"unchanged or repeated an earlier one ({fp}): nothing more to fix automatically")
        seen.add(fp)
        report = await verify_attempt(cls, rec.attempt + 1)


def make_result(doc_id: str, attempts: list[AttemptRecord], fixes: list[FixApplied], cls: ClassificationOutput | None,
                raw: RawClassification, stop: StopReason, why: str) -> VerificationResult:
    last = attempts[-1].decision
    final = "AUTO_ACCEPT" if (stop == "arbiter" and last.decision == Decision.AUTO_ACCEPT.value) else "ESCALATE_TO_SME"
    if final == "ESCALATE_TO_SME" and not why:
        why = last.reason
    return VerificationResult(
        doc_id=doc_id, final_decision=final, final_rule=last.rule, stop_reason=stop,
        escalation_reason=why if final == "ESCALATE_TO_SME" else "",
        attempts=attempts, fixes_applied=fixes,
        final_classification=cls.model_dump(mode="json") if cls is not None else raw,
        original_classification=raw.model_dump(mode="json") if isinstance(raw, ClassificationOutput) else (
            raw if isinstance(raw, dict) else None),
    )
