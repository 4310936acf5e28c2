"""What a shard's summary keeps of each document (ids, codes, rules, decisions — no page text, no
issue messages): written by the verify and retry stages, read by the arbiter and the report, so
neither reads every document's result."""

from __future__ import annotations

from docverify.domain.models import VerificationResult
from docverify.storage.runstore import DocResult, DocSummary, JuryVote


def doc_summary(rec: DocResult) -> DocSummary:
    """What the report and the arbiter need of one document, kept in its shard's summary (ids,
    codes, rules — no page text, no issue messages), so neither reads the document's result."""
    out: DocSummary = {"route": rec.route, "decision": rec.decision}
    if rec.error is not None:
        out["error"] = {"stage": rec.error.stage, "error": rec.error.error, "message": rec.error.message}
    a0 = rec.first_attempt
    impl = set()
    if rec.classification_meta is not None:
        impl.add(f"classifier:{rec.classification_meta.implementation}")
    for r in a0.runs if a0 is not None else []:
        if not r.skipped:
            impl.add(f"{r.agent}-{r.phase}:{r.implementation}")
    out["implementations"] = sorted(impl)
    res = rec.result
    if res is not None:
        out["final_decision"] = res.final_decision
        out["rule"] = res.final_rule
        out["attempts"] = len(res.attempts)
        out["stop_reason"] = res.stop_reason
        out["issue_codes"] = sorted(i.code for i in res.attempts[0].issues)
        out["issue_codes_final"] = [i.code for i in res.attempts[-1].issues]
        out["issue_codes_attempt_0"] = [i.code for i in res.attempts[0].issues]
        out["quality_score"] = res.attempts[-1].quality_score
        out["fixes"] = [f.fixer for f in res.fixes_applied]
        out["v5_audit"] = res.attempts[-1].decision.explanation_audit
        votes = jury_votes(res)  # ADR 0012: only when the jury ran
        if votes:
            out["jury"] = votes
    return out


def jury_votes(res: VerificationResult) -> list[JuryVote]:
    """Every jury vote of a document's attempts (codes only): attempt, agent, finding code, the
    votes, the final action, flag reason and rule."""
    out: list[JuryVote] = []
    for a in res.attempts:
        for r in a.runs:
            if r.phase == "jury":
                out += [{"attempt": a.attempt, "agent": r.agent, "code": v["code"], "votes": v["votes"],
                         "reason_codes": v.get("reason_codes", {}), "final_action": v["final_action"],
                         "flag_reason": v["flag_reason"], "rule": v["rule"], "version": v["version"]}
                        for v in r.votes or []]
    return out
