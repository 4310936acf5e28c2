"""SME packets (spec slide 9) and ground-truth records (slide 10).

A packet is written once per escalated document and never overwritten once an SME has
reviewed it; a ground-truth record is never overwritten (a second answer is a new version).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from docverify.models import SEVERITY_ORDER, Issue, Severity, SMEIssueSummary, SMEPacket, VerificationResult
from docverify.store import ArtifactStore


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_issue(issue: Issue) -> str:
    """The spec's human-readable form: [BLOCKER] V3-0001 (Agent: V3) / Message / Location / Fix."""
    lines = [f"[{issue.severity}] {issue.issue_id} (Agent: {issue.agent})", f"  Message:   {issue.message}"]
    if issue.location:
        lines.append(f"  Location:  {issue.location}")
    if issue.suggested_fix:
        lines.append(f"  Fix:       {issue.suggested_fix}")
    return "\n".join(lines)


def sort_issues(issues: list[Issue]) -> list[Issue]:
    return sorted(issues, key=lambda i: (SEVERITY_ORDER[Severity(i.severity)], i.issue_id))


def build_packet(*, doc_id: str, pdf_path: str, total_pages: int, bundle_path: str,
                 result: VerificationResult | None, error: dict[str, Any] | None = None,
                 production_classification: dict | None = None, run_id: str = "") -> SMEPacket:
    """A packet for an escalated document, or for one that could not be parsed/classified
    (``error`` set, ``result`` None)."""
    issues = sort_issues(result.attempts[-1].issues) if result else []
    primary = result.final_classification if result else None
    differs = None
    if production_classification is not None and primary is not None:
        differs = production_classification.get("dominant_type_overall") != primary.get("dominant_type_overall")
    if result:
        rule, reason = result.final_rule, result.escalation_reason or result.attempts[-1].decision.reason
    else:
        rule, reason = 1, f"Rule 1: the document could not be processed ({(error or {}).get('error', 'ERROR')})"
    return SMEPacket(
        doc_id=doc_id, pdf_filename=pdf_path.rsplit("/", 1)[-1], pdf_path=pdf_path, total_pages=total_pages,
        bundle_path=bundle_path, v5_rule=rule, v5_reason=reason, total_issues=len(issues),
        issues_summary=[SMEIssueSummary(issue_id=i.issue_id, severity=i.severity, agent=i.agent, code=i.code,
                                        message=i.message, location=i.location, suggested_fix=i.suggested_fix,
                                        formatted=format_issue(i)) for i in issues],
        primary_classification=primary, production_classification=production_classification,
        production_differs=differs, error=error, created_at=now_iso(), run_id=run_id,
    )


def write_packet(store: ArtifactStore, packet: SMEPacket, write_json=None) -> tuple[str, str]:
    """Write the packet unless an SME already reviewed it. Returns (uri, outcome) with outcome
    ``written`` | ``kept_reviewed``. ``write_json`` replaces ``store.write_json``."""
    rel = ArtifactStore.packet_rel(packet.doc_id)
    if store.exists(rel):
        current = store.read_json(rel)
        if current.get("review_status", "pending") != "pending":
            return store.uri(rel), "kept_reviewed"
    (write_json or store.write_json)(rel, packet)
    return store.uri(rel), "written"
