"""SME review packets (spec slide 9): build, key, write, find and list them.

A packet is written once per escalated document and never overwritten once an SME has reviewed
it. Its key is the review id ``<night>_<doc_id>_<sha256[:10]>`` (:func:`review_id`). Packet text,
page text and snippets are PHI: this module logs doc ids and URIs only."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Callable
from typing import Any, TypedDict

from pydantic import JsonValue, TypeAdapter, ValidationError

from docverify.domain.classification_view import ClassificationView
from docverify.domain.models import (
    DOC_TYPES,
    SEVERITY_ORDER,
    DocumentBundle,
    DominantAgreement,
    HistoryAttempt,
    Issue,
    PacketError,
    ProductionComparison,
    SegmentShape,
    Severity,
    SMEIssueSummary,
    SMEPacket,
    VerificationResult,
)
from docverify.domain.read_models import StoredRead
from docverify.sme.context import locate_issue, stored_context
from docverify.sme.facts import has_pages
from docverify.storage.runstore import VOLATILE, RunStore
from docverify.storage.store import ArtifactStore, dumps

log = logging.getLogger("docverify.sme")

#: how often a packet's conditional write reads again after losing a race before it gives up
PACKET_CAS_ATTEMPTS = 20


class PacketNotFoundError(FileNotFoundError):
    """No SME packet for the document under the storage root."""


_PACKET_ERROR = TypeAdapter(PacketError)


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


# --------------------------------------------------------------------------- production comparison


def segment_shape(cls: ClassificationView) -> list[SegmentShape]:
    return [(s.page_start, s.page_end, s.dominant_type) for s in cls.segments]


def compare_production(primary: dict[str, JsonValue], production: dict[str, JsonValue]) -> ProductionComparison:
    """Whether a production classification agrees with the primary one (both as stored): the dominant
    type, the segments (page ranges and dominant types) and each type's strongest presence level."""
    view_a, view_b = ClassificationView.model_validate(primary), ClassificationView.model_validate(production)
    a, b = view_a.strongest(), view_b.strongest()
    presence = {t: {"primary": a.get(t, "NO_EVIDENCE"), "production": b.get(t, "NO_EVIDENCE")}
                for t in DOC_TYPES if a.get(t, "NO_EVIDENCE") != b.get(t, "NO_EVIDENCE")}
    seg_a, seg_b = segment_shape(view_a), segment_shape(view_b)
    dom_a, dom_b = view_a.dominant_type_overall, view_b.dominant_type_overall
    dom: DominantAgreement = {"primary": dom_a, "production": dom_b, "agree": dom_a == dom_b}
    return {
        "dominant_type": dom,
        "segments": {"primary": seg_a, "production": seg_b, "agree": seg_a == seg_b},
        "presence_differences": presence,
        "production_classifier": view_b.classifier,
        "agrees": dom["agree"] and seg_a == seg_b and not presence,
    }


# --------------------------------------------------------------------------- packets


def build_packet(*, doc_id: str, pdf_path: str, total_pages: int, bundle_path: str,
                 result: VerificationResult | None, error: dict[str, JsonValue] | None = None,
                 production_classification: dict[str, JsonValue] | None = None, run_id: str = "",
                 bundle: DocumentBundle | None = None, review_id: str = "",
                 size_bytes: int | None = None) -> SMEPacket:
    """A packet for an escalated document, or for one that could not be parsed/classified
    (``error`` set, ``result`` None). The error of such a packet carries what the SME can know of
    the file without its text (:func:`with_file_facts`): ``file_name``, ``size_bytes`` (``size_bytes``,
    else the error record's ``bytes``/``size_bytes``, else absent), ``error`` and ``message``.

    ``production_classification`` (the production classifier's output for the same PDF) adds
    ``production_differs`` (the dominant types differ) and ``production_comparison``. With
    ``bundle``, every issue carries its page-text window (``context``, see
    :mod:`docverify.sme.context`)."""
    issues = sort_issues(result.attempts[-1].issues) if result else []
    primary = result.final_classification if result else None
    differs, comparison = None, None
    if production_classification is not None and isinstance(primary, dict):
        differs = production_classification.get("dominant_type_overall") != primary.get("dominant_type_overall")
        comparison = compare_production(primary, production_classification)
    facts = with_file_facts(error, pdf_path, size_bytes) if error is not None else None
    kind: str
    if result:
        rule, reason = result.final_rule, result.escalation_reason or result.attempts[-1].decision.reason
        kind = result.stop_reason
    else:  # a parse/classification error: no verification ran, so no V5 rule decided
        rule, kind = None, "error"
        reason = (f"Not verified: the document could not be processed ({facts['error'] if facts else 'ERROR'}: "
                  f"{facts.get('message', '') if facts else ''})")
    summaries = []
    for i in issues:
        s = SMEIssueSummary(issue_id=i.issue_id, severity=i.severity, agent=i.agent, code=i.code,
                            message=i.message, location=i.location, suggested_fix=i.suggested_fix,
                            formatted=format_issue(i), details=i.details)
        if bundle is not None:
            s.context = stored_context(locate_issue(bundle, s, ClassificationView.read(primary)))
        summaries.append(s)
    return SMEPacket(
        doc_id=doc_id, review_id=review_id, pdf_filename=pdf_path.rsplit("/", 1)[-1], pdf_path=pdf_path, total_pages=total_pages,
        bundle_path=bundle_path, v5_rule=rule, v5_reason=reason, total_issues=len(issues),
        v5_explanation=result.attempts[-1].decision.explanation_sme if result else "",
        v5_citations=result.attempts[-1].decision.citations if result else {},
        jury_votes=[{"attempt": a.attempt, "agent": r.agent, **v} for a in (result.attempts if result else [])
                    for r in a.runs if r.phase == "jury" for v in r.votes or []],
        issues_summary=summaries, primary_classification=primary,
        production_classification=production_classification, production_differs=differs,
        production_comparison=comparison, error=facts, created_at=now_iso(), run_id=run_id,
        escalation_reason=kind, attempt_history=attempt_history(result) if result else [],
        original_classification=result.original_classification if result else None,
    )


def with_file_facts(error: dict[str, JsonValue], pdf_path: str = "",
                    size_bytes: int | None = None) -> PacketError:
    """``error`` (an error record's JSON, validated here) with what is known of the input file without
    reading its text: ``file_name`` (the last part of ``pdf_path`` or of the record's ``file``),
    ``size_bytes`` (when known) and the error's code and message as they are."""
    out = _PACKET_ERROR.validate_python(error)
    path = pdf_path or out.get("file") or ""
    if path and not out.get("file_name"):
        out["file_name"] = path.rstrip("/").rsplit("/", 1)[-1]
    size = size_bytes if size_bytes is not None else error.get("size_bytes", error.get("bytes"))
    if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
        out["size_bytes"] = size
    else:
        out.pop("size_bytes", None)
    return out


def attempt_history(result: VerificationResult) -> list[HistoryAttempt]:
    """Every attempt with its decision and issues, and the fixes applied after it (packets)."""
    out: list[HistoryAttempt] = []
    for a in result.attempts:
        d = a.decision
        out.append({
            "attempt": a.attempt, "decision": d.decision, "rule": d.rule, "reason": d.reason,
            "blocker_repair": a.blocker_repair,
            "issues": [{"issue_id": i.issue_id, "severity": i.severity, "agent": i.agent, "code": i.code,
                        "message": i.message, "location": i.location, "auto_fixable": i.auto_fixable}
                       for i in sort_issues(a.issues)],
            "skipped_judgments": [f"{r.agent}: {r.skip_reason}" for r in a.runs if r.skipped],
            "fixes_after": [{"fixer": f.fixer, "codes": f.codes, "issue_ids": f.issue_ids,
                             "description": f.description} for f in result.fixes_applied if f.attempt == a.attempt],
        })
    return out


def review_id(ds: str, doc_id: str, sha256: str | None) -> str:
    """The key of one review: one document of one night with its content,
    ``<night>_<doc_id>_<first 10 hex of sha256>``. The same file name on another night, or with
    other bytes, is another review; the same night with the same bytes is the same one (a re-run
    finds its packet). Without a hash (nothing could be read) the night and the id."""
    digest = (sha256 or "")[:10]
    return f"{ds}_{doc_id}_{digest}" if digest else f"{ds}_{doc_id}"


def packet_key(packet: SMEPacket) -> str:
    """The key under which a packet and its ground truth are stored: its review_id, or its doc_id
    for a packet of the older layout (``sme_packet_<doc_id>.json``)."""
    return packet.review_id or packet.doc_id


def _key_of_file(name: str) -> str:
    return name[len("sme_packet_"):-len(".json")] if name.startswith("sme_packet_") else name[:-len(".json")]


def resolve_key(store: ArtifactStore | RunStore, key: str) -> str:
    """``key`` as given when a packet is stored under it; else the one packet whose doc_id is
    ``key`` (so ``load_packet(store, "quest_cbc_panel")`` still works while there is one review of
    that file). Several nights with that file name → PacketNotFoundError listing their keys."""
    if store.exists(ArtifactStore.packet_rel(key)):
        return key
    matches = []
    for name in store.list(RunStore.PACKETS_DIR, ".json"):
        try:
            p = store.read_json(f"{RunStore.PACKETS_DIR}/{name}")
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(p, dict) and p.get("doc_id") == key:
            matches.append(_key_of_file(name))
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise PacketNotFoundError(f"{len(matches)} reviews of document {key!r} (one per night or content): give one "
                                  f"of {', '.join(sorted(matches))} (list_pending_reviews() shows review_id)")
    return key


def write_packet(store: ArtifactStore | RunStore, packet: SMEPacket,
                 write_json: Callable[[str, SMEPacket], bool] | None = None) -> tuple[str, str]:
    """Write the packet unless an SME already reviewed it. Returns (uri, outcome) with outcome
    ``written`` | ``kept_reviewed``.

    Every write is conditional on the packet as it is at the moment of the write (ADR 0030), so a
    re-run can never set a packet an SME just answered back to pending: one versioned read, then
    absent → create-if-absent; reviewed → kept; pending and equal apart from the volatile keys
    (:data:`docverify.storage.runstore.VOLATILE`) → left byte for byte; pending and changed →
    :meth:`~docverify.storage.store.ArtifactStore.replace_if` with the version read. A lost race (someone
    created, answered or rewrote it meanwhile) reads again and decides again. ``write_json`` (the
    callers' ``write_if_changed``) is accepted for compatibility and not called: no writer but the
    compare-and-swap may touch a packet. On a :class:`RunStore` the memo follows."""
    rel = ArtifactStore.packet_rel(packet_key(packet))
    data = dumps(packet)
    new = json.loads(data)
    strip = set(VOLATILE)
    for _ in range(PACKET_CAS_ATTEMPTS):
        got = store.read_versioned(rel)
        if got is None:
            if store.write_bytes(rel, data, overwrite=False):
                if isinstance(store, RunStore):
                    store._remember(rel, data)
                return store.uri(rel), "written"
            continue  # created meanwhile: decide on what is there
        current = json.loads(got[0])
        if not isinstance(current, dict) or current.get("review_status", "pending") != "pending":
            return store.uri(rel), "kept_reviewed"
        if {k: v for k, v in current.items() if k not in strip} == {k: v for k, v in new.items() if k not in strip}:
            return store.uri(rel), "written"  # unchanged: a re-run leaves it as it is
        if store.replace_if(rel, data, got[1]):
            return store.uri(rel), "written"
    raise RuntimeError(f"{store.uri(rel)}: the packet kept changing while it was rewritten "
                       f"({PACKET_CAS_ATTEMPTS} attempts); run the task again")


def html_rel(doc_id: str) -> str:
    """``sme_packets/sme_packet_<doc_id>.html``: the readable rendering beside the JSON."""
    return RunStore.packet_html_rel(doc_id)


#: Why the review task refused an answer given in the Required Actions form, one file per review
REFUSALS_DIR = "sme_packets/refusals"


def refusal_rel(review_id: str) -> str:
    """``sme_packets/refusals/<review_id>.json``: the reason the review task refused the last answer
    (written by the review task, shown by the review workspace)."""
    return f"{REFUSALS_DIR}/{review_id}.json"


def load_packet(store: ArtifactStore | RunStore, doc_id: str) -> SMEPacket:
    """The stored packet of ``doc_id``.

    Raises:
        PacketNotFoundError: no packet (the document was not escalated, or the nightly run that
            escalates it has not written it yet).
        ValueError: the file is not a valid packet (names the file).
    """
    rel = ArtifactStore.packet_rel(resolve_key(store, doc_id))
    if not store.exists(rel):
        raise PacketNotFoundError(
            f"no SME packet for document {doc_id!r} at {store.uri(rel)}: only escalated documents have one; "
            f"check the doc id (list_pending_reviews()) and that the nightly run for its date finished")
    try:
        return SMEPacket.model_validate(store.read_json(rel))
    except (ValidationError, json.JSONDecodeError) as exc:
        raise ValueError(
            f"{store.uri(rel)} is not a valid SME packet ({type(exc).__name__}: review_status must be 'pending' or "
            f"'reviewed'; see include/schemas/SMEPacket.json): restore it from the nightly run") from exc


class _IssueRead(StoredRead):
    severity: str = "MINOR"
    code: str | None = None


class _ErrorRead(StoredRead):
    error: str | None = None


class _PendingRead(StoredRead):
    """A stored packet as the list of pending reviews reads it, validated once where it is read: each key
    with the default an older packet reads as."""

    doc_id: str
    review_id: str | None = None
    review_status: str = "pending"
    review_kind: str | None = "escalation"
    pdf_filename: str | None = ""
    v5_rule: int | None = None
    total_issues: int | None = 0
    created_at: str = ""
    error: _ErrorRead | None = None
    issues_summary: list[_IssueRead] | None = None
    primary_classification: JsonValue = None
    bundle_path: str | None = None
    total_pages: int | None = None


class PendingReview(TypedDict):
    """A row of :func:`list_pending_reviews`."""

    doc_id: str
    review_id: str
    night: str
    pdf_filename: str | None
    v5_rule: int | None
    total_issues: int | None
    top_severity: str
    error: str | None
    created_at: str
    packet_uri: str
    review_kind: str | None
    has_pages: bool
    first_code: str


def _top_severity(packet: _PendingRead) -> str:
    issues = packet.issues_summary or []
    if issues:
        return min((i.severity for i in issues), key=lambda s: SEVERITY_ORDER.get(Severity(s), 9))
    return "ERROR" if packet.error else ""


_TOP_ORDER = {"ERROR": -1, "BLOCKER": 0, "MAJOR": 1, "MINOR": 2, "": 3}


def _pending_row(store: ArtifactStore, rel: str, key: str, p: _PendingRead) -> PendingReview:
    night = key[:10] if p.review_id and re.match(r"\d{4}-\d\d-\d\d_", key) else ""
    error = p.error.error if p.error else None
    return {"doc_id": p.doc_id, "review_id": key, "night": night, "pdf_filename": p.pdf_filename,
            "v5_rule": p.v5_rule, "total_issues": p.total_issues, "top_severity": _top_severity(p), "error": error,
            "created_at": p.created_at, "packet_uri": store.uri(rel), "review_kind": p.review_kind,
            "has_pages": has_pages(classified=isinstance(p.primary_classification, dict), error_code=error,
                                   bundle_path=p.bundle_path, total_pages=p.total_pages),
            "first_code": next((str(i.code) for i in p.issues_summary or [] if i.code), "")}


def list_pending_reviews(store: ArtifactStore) -> list[dict[str, Any]]:
    """One row per pending packet: doc_id, pdf_filename, v5_rule, total_issues, top_severity
    (BLOCKER | MAJOR | MINOR, or ERROR for a document that could not be processed), error code,
    ``has_pages`` (a page to look at, :func:`docverify.sme.facts.has_pages`), ``first_code`` (the code of
    its most severe finding, "" when none), created_at, packet URI.
    Documents with a page to look at first (ADR 0051: a file nobody can look at is an operator's
    work, after them), then most severe first, then oldest first. Unreadable packets are skipped
    with a warning naming the file."""
    rows: list[PendingReview] = []
    for name in store.list(RunStore.PACKETS_DIR, ".json"):
        rel = f"{RunStore.PACKETS_DIR}/{name}"
        try:
            p = store.read_json(rel)
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("skipping unreadable packet %s (%s)", store.uri(rel), type(exc).__name__)
            continue
        if not isinstance(p, dict) or p.get("review_status", "pending") != "pending" or "doc_id" not in p:
            continue
        try:
            row = _pending_row(store, rel, _key_of_file(name), _PendingRead.model_validate(p))
        except ValidationError:
            log.warning("skipping packet %s: not a packet's shape", store.uri(rel))
            continue
        rows.append(row)
    rows.sort(key=lambda r: (not r["has_pages"], _TOP_ORDER.get(r["top_severity"], 3), r["created_at"],
                             r["review_id"]))
    return [dict(r) for r in rows]  # plain dicts: the Airflow side adds its own keys (the task, who holds it)


# --------------------------------------------------------------------------- ground truth
