"""SME packets (spec slide 9), the review helper and ground-truth records (slide 10).

A packet is written once per escalated document and never overwritten once an SME has
reviewed it; a ground-truth record is never overwritten (a second answer is a new version:
``gt_<doc_id>.json``, ``gt_<doc_id>.v2.json``, …). The Airflow review DAG (HITL tasks) and the
notebook helper (:class:`SMEReviewHelper`) write ground truth through the same function,
:func:`save_review`.

Packet text, page text and snippets are PHI: this module logs doc ids, versions, sources and
URIs only.
"""

from __future__ import annotations

import copy
import datetime as dt
import getpass
import json
import logging
import re
import threading
from typing import Any

from pydantic import ValidationError

from docverify.models import (
    DOC_TYPES,
    PRESENCE_RANK,
    SEVERITY_ORDER,
    DocumentBundle,
    GroundTruthRecord,
    Issue,
    Severity,
    SMEIssueSummary,
    SMEPacket,
    VerificationResult,
)
from docverify.runstore import RunStore
from docverify.sme_context import get_issue_context
from docverify.sme_render import packet_html, packet_markdown, write_packet_html
from docverify.store import ArtifactStore, as_root

log = logging.getLogger("docverify.sme")

__all__ = [
    "PacketNotFoundError", "SMEReviewHelper", "apply_correction", "build_packet", "compare_production",
    "format_issue", "get_issue_context", "ground_truth_versions", "html_rel", "list_pending_reviews", "load_packet",
    "packet_key", "resolve_key", "review_id",
    "packet_html", "packet_markdown", "save_review", "sort_issues", "validate_segments", "write_packet",
    "write_packet_html",
]

SEGMENT_KEYS = ("page_start", "page_end", "dominant_type")
MAX_VERSIONS = 10_000


class PacketNotFoundError(FileNotFoundError):
    """No SME packet for the document under the storage root."""


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


def _segment_shape(cls: dict) -> list[tuple[Any, Any, Any]]:
    segs = cls.get("segments") if isinstance(cls.get("segments"), list) else []
    return [(s.get("page_start"), s.get("page_end"), s.get("dominant_type")) for s in segs if isinstance(s, dict)]


def _strongest(cls: dict) -> dict[str, str]:
    out: dict[str, str] = {}
    entries = [m for m in cls.get("document_mixture") or [] if isinstance(m, dict)]
    for s in cls.get("segments") or []:
        if isinstance(s, dict):
            entries += [c for c in s.get("classifications") or [] if isinstance(c, dict)]
    for e in entries:
        t, level = e.get("doc_type"), e.get("presence_level")
        if t in DOC_TYPES and level in PRESENCE_RANK and PRESENCE_RANK[level] >= PRESENCE_RANK[out.get(t, "NO_EVIDENCE")]:
            out[t] = level
    return out


def compare_production(primary: dict, production: dict) -> dict[str, Any]:
    """Whether a production classification agrees with the primary one: the dominant type, the
    segments (page ranges and dominant types) and each type's strongest presence level."""
    a, b = _strongest(primary), _strongest(production)
    presence = {t: {"primary": a.get(t, "NO_EVIDENCE"), "production": b.get(t, "NO_EVIDENCE")}
                for t in DOC_TYPES if a.get(t, "NO_EVIDENCE") != b.get(t, "NO_EVIDENCE")}
    seg_a, seg_b = _segment_shape(primary), _segment_shape(production)
    dom = {"primary": primary.get("dominant_type_overall"), "production": production.get("dominant_type_overall")}
    dom["agree"] = dom["primary"] == dom["production"]
    out = {
        "dominant_type": dom,
        "segments": {"primary": [list(s) for s in seg_a], "production": [list(s) for s in seg_b],
                     "agree": seg_a == seg_b},
        "presence_differences": presence,
        "production_classifier": production.get("classifier", ""),
    }
    out["agrees"] = dom["agree"] and seg_a == seg_b and not presence
    return out


# --------------------------------------------------------------------------- packets


def build_packet(*, doc_id: str, pdf_path: str, total_pages: int, bundle_path: str,
                 result: VerificationResult | None, error: dict[str, Any] | None = None,
                 production_classification: dict | None = None, run_id: str = "",
                 bundle: DocumentBundle | None = None, review_id: str = "") -> SMEPacket:
    """A packet for an escalated document, or for one that could not be parsed/classified
    (``error`` set, ``result`` None).

    ``production_classification`` (the production classifier's output for the same PDF) adds
    ``production_differs`` (the dominant types differ) and ``production_comparison``. With
    ``bundle``, every issue carries its page-text window (``context``, see
    :mod:`docverify.sme_context`)."""
    issues = sort_issues(result.attempts[-1].issues) if result else []
    primary = result.final_classification if result else None
    differs, comparison = None, None
    if production_classification is not None and isinstance(primary, dict):
        differs = production_classification.get("dominant_type_overall") != primary.get("dominant_type_overall")
        comparison = compare_production(primary, production_classification)
    if result:
        rule, reason = result.final_rule, result.escalation_reason or result.attempts[-1].decision.reason
        kind = result.stop_reason
    else:  # a parse/classification error: no verification ran, so no V5 rule decided
        err = error or {}
        rule, kind = None, "error"
        reason = f"Not verified: the document could not be processed ({err.get('error', 'ERROR')}: {err.get('message', '')})"
    summaries = []
    for i in issues:
        s = SMEIssueSummary(issue_id=i.issue_id, severity=i.severity, agent=i.agent, code=i.code,
                            message=i.message, location=i.location, suggested_fix=i.suggested_fix,
                            formatted=format_issue(i), details=i.details)
        if bundle is not None:
            from docverify.sme_context import locate_issue, stored_context

            s.context = stored_context(locate_issue(bundle, s.model_dump(mode="json"),
                                                    primary if isinstance(primary, dict) else None))
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
        production_comparison=comparison, error=error, created_at=now_iso(), run_id=run_id,
        escalation_reason=kind, attempt_history=attempt_history(result) if result else [],
        original_classification=result.original_classification if result else None,
    )


def attempt_history(result: VerificationResult) -> list[dict[str, Any]]:
    """Every attempt with its decision and issues, and the fixes applied after it (packets)."""
    out = []
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


def packet_key(packet: SMEPacket | dict) -> str:
    """The key under which a packet and its ground truth are stored: its review_id, or its doc_id
    for a packet of the older layout (``sme_packet_<doc_id>.json``)."""
    if isinstance(packet, dict):
        return packet.get("review_id") or packet["doc_id"]
    return packet.review_id or packet.doc_id


def _key_of_file(name: str) -> str:
    return name[len("sme_packet_"):-len(".json")] if name.startswith("sme_packet_") else name[:-len(".json")]


def resolve_key(store: ArtifactStore, key: str) -> str:
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


def write_packet(store: ArtifactStore, packet: SMEPacket, write_json=None) -> tuple[str, str]:
    """Write the packet unless an SME already reviewed it. Returns (uri, outcome) with outcome
    ``written`` | ``kept_reviewed``. ``write_json`` replaces ``store.write_json``."""
    rel = ArtifactStore.packet_rel(packet_key(packet))
    if store.exists(rel):
        current = store.read_json(rel)
        if current.get("review_status", "pending") != "pending":
            return store.uri(rel), "kept_reviewed"
    (write_json or store.write_json)(rel, packet)
    return store.uri(rel), "written"


def html_rel(doc_id: str) -> str:
    """``sme_packets/sme_packet_<doc_id>.html``: the readable rendering beside the JSON."""
    return RunStore.packet_html_rel(doc_id)


def load_packet(store: ArtifactStore, doc_id: str) -> SMEPacket:
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


def _top_severity(packet: dict) -> str:
    issues = packet.get("issues_summary") or []
    if issues:
        return min((i.get("severity", "MINOR") for i in issues), key=lambda s: SEVERITY_ORDER.get(Severity(s), 9))
    return "ERROR" if packet.get("error") else ""


_TOP_ORDER = {"ERROR": -1, "BLOCKER": 0, "MAJOR": 1, "MINOR": 2, "": 3}


def list_pending_reviews(store: ArtifactStore) -> list[dict[str, Any]]:
    """One row per pending packet: doc_id, pdf_filename, v5_rule, total_issues, top_severity
    (BLOCKER | MAJOR | MINOR, or ERROR for a document that could not be processed), error code,
    created_at, packet URI. Most severe first, then oldest first. Unreadable packets are skipped
    with a warning naming the file."""
    rows = []
    for name in store.list(RunStore.PACKETS_DIR, ".json"):
        rel = f"{RunStore.PACKETS_DIR}/{name}"
        try:
            p = store.read_json(rel)
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("skipping unreadable packet %s (%s)", store.uri(rel), type(exc).__name__)
            continue
        if not isinstance(p, dict) or p.get("review_status", "pending") != "pending" or "doc_id" not in p:
            continue
        key = _key_of_file(name)
        night = key[:10] if p.get("review_id") and re.match(r"\d{4}-\d\d-\d\d_", key) else ""
        rows.append({"doc_id": p["doc_id"], "review_id": key, "night": night,
                     "pdf_filename": p.get("pdf_filename", ""), "v5_rule": p.get("v5_rule"),
                     "total_issues": p.get("total_issues", 0), "top_severity": _top_severity(p),
                     "error": (p.get("error") or {}).get("error"), "created_at": p.get("created_at", ""),
                     "packet_uri": store.uri(rel)})
    rows.sort(key=lambda r: (_TOP_ORDER.get(r["top_severity"], 3), r["created_at"], r["review_id"]))
    return rows


# --------------------------------------------------------------------------- ground truth


def _check_type(value: Any, field: str) -> str:
    if value not in DOC_TYPES:
        raise ValueError(f"{field}: {value!r} is not a document type; allowed values: {', '.join(DOC_TYPES)}")
    return value


def validate_segments(segments: Any, total_pages: int) -> list[dict[str, Any]]:
    """The SME's segments, checked: a non-empty list of ``{page_start, page_end, dominant_type}``
    in page order that covers pages 1..total_pages exactly once (when the page count is unknown,
    0, they must still start at 1 and be contiguous). Raises ValueError naming the field."""
    field = "corrected_segments"
    if not isinstance(segments, list) or not segments:
        raise ValueError(f"{field}: give a non-empty list of {{page_start, page_end, dominant_type}} objects, "
                         f"e.g. [{{\"page_start\": 1, \"page_end\": 2, \"dominant_type\": \"Genomic Report\"}}]")
    out, expect = [], 1
    for k, seg in enumerate(segments):
        where = f"{field}[{k}]"
        if not isinstance(seg, dict):
            raise ValueError(f"{where}: must be an object with keys {', '.join(SEGMENT_KEYS)}")
        extra, missing = set(seg) - {*SEGMENT_KEYS, "presence"}, [key for key in SEGMENT_KEYS if key not in seg]
        if extra or missing:
            raise ValueError(f"{where}: keys must be exactly {', '.join(SEGMENT_KEYS)} (and optionally presence) "
                             f"(missing: {', '.join(missing) or 'none'}; unknown: {', '.join(sorted(extra)) or 'none'})")
        start, end = seg["page_start"], seg["page_end"]
        for key, v in (("page_start", start), ("page_end", end)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{where}.{key}: {v!r} is not a page number (an integer ≥ 1)")
        if end < start:
            raise ValueError(f"{where}: page_end {end} is before page_start {start}")
        if start != expect:
            raise ValueError(f"{where}.page_start: {start} leaves a gap or an overlap: segments must cover the pages "
                             f"in order without gaps, so this one must start at page {expect}")
        if total_pages and end > total_pages:
            raise ValueError(f"{where}.page_end: {end} is beyond the document's last page; allowed: 1..{total_pages}")
        _check_type(seg["dominant_type"], f"{where}.dominant_type")
        out.append({"page_start": start, "page_end": end, "dominant_type": seg["dominant_type"]})
        if seg.get("presence") is not None:
            from docverify.sme_correction import check_levels

            out[-1]["presence"] = check_levels(seg["presence"], f"{where}.presence")
        expect = end + 1
    if total_pages and expect != total_pages + 1:
        raise ValueError(f"{field}: the segments end at page {expect - 1} but the document has {total_pages} page(s); "
                         f"the last segment must end at page {total_pages}")
    return out


def _ranges(segs: list[dict]) -> str:
    return ", ".join(f"{s.get('page_start')}–{s.get('page_end')} {s.get('dominant_type')}" for s in segs) or "none"


def apply_correction(primary: dict | None, *, doc_id: str, total_pages: int,
                     corrected_dominant_type: str | None = None,
                     corrected_segments: list[dict] | None = None,
                     corrected_presence: dict[str, str] | None = None,
                     corrected_mixture: dict[str, str] | None = None,
                     bundle: DocumentBundle | None = None) -> tuple[dict[str, Any], list[str]]:
    """The SME's classification: the primary classification with the SME's corrections, and
    everything they did not set derived from what they set (:mod:`docverify.sme_correction`),
    each change listed in the returned lines:

    * ``corrected_segments`` → the segments (``segment_index`` 0..n-1); a segment may carry
      ``presence`` ``{doc type: level}``; without them the primary's page ranges are kept (one
      segment over all pages when there is no primary classification and the page count is known);
    * ``corrected_dominant_type`` → ``dominant_type_overall``, and the dominant type of a
      classification of exactly one segment; it must be the type of some segment;
    * ``corrected_presence`` ``{doc type: level}`` → that level in every segment (a segment's
      own ``presence`` wins); ``corrected_mixture`` ``{doc type: level}`` → the mixture's levels.

    With ``bundle`` (the page text), evidence not found on its page is dropped. Raises
    ValueError naming the bad field, or when the correction changes nothing."""
    from docverify.sme_correction import check_levels, derive

    if corrected_dominant_type is not None:
        _check_type(corrected_dominant_type, "corrected_dominant_type")
    segs_in = validate_segments(corrected_segments, total_pages) if corrected_segments is not None else None
    presence = check_levels(corrected_presence, "corrected_presence")
    mixture = check_levels(corrected_mixture, "corrected_mixture")
    if corrected_dominant_type is None and segs_in is None and not presence and not mixture:
        raise ValueError("a correction needs corrected_dominant_type, corrected_segments, corrected_presence "
                         "and/or corrected_mixture (to keep the primary classification as is, answer agrees=True)")
    has_primary = isinstance(primary, dict)
    gt: dict[str, Any] = copy.deepcopy(primary) if has_primary else {
        "doc_id": doc_id, "dominant_type_overall": None, "number_of_segments": 0, "segments": [],
        "document_mixture": []}
    changes: list[str] = []
    old_segs = [s for s in gt.get("segments") or [] if isinstance(s, dict)]
    if segs_in is not None:
        new = segs_in
        if _segment_shape({"segments": new}) != _segment_shape({"segments": old_segs}):
            changes.append(f"segments: {_ranges(old_segs)} → {_ranges(new)}")
    elif not has_primary:
        if corrected_dominant_type is None:
            raise ValueError("this packet has no classification (the document could not be processed): give "
                             "corrected_dominant_type and/or corrected_segments")
        if not total_pages:  # nothing known about the pages: only the document's type can be recorded
            gt["dominant_type_overall"] = corrected_dominant_type
            return gt, [f"dominant_type_overall: None → {corrected_dominant_type} (page count unknown: no segments)"]
        new = [{"page_start": 1, "page_end": total_pages, "dominant_type": corrected_dominant_type}]
        changes.append(f"segments: none (no classification) → 1–{total_pages} {corrected_dominant_type}")
    else:
        new = [{"page_start": s.get("page_start"), "page_end": s.get("page_end"),
                "dominant_type": s.get("dominant_type")} for s in old_segs]
        try:  # kept segments must hold too: pages 1..total_pages each in exactly one, in order
            validate_segments(new, total_pages)
        except ValueError as exc:
            raise ValueError(f"the primary classification's segments cannot be kept ({exc}): give corrected_segments "
                             f"covering pages 1..{total_pages or 'N'}") from None
        if len(new) == 1 and corrected_dominant_type and new[0]["dominant_type"] != corrected_dominant_type:
            changes.append(f"segments[0].dominant_type: {new[0]['dominant_type']} → {corrected_dominant_type}")
            new[0]["dominant_type"] = corrected_dominant_type
    out = derive(gt, new, dominant=corrected_dominant_type, presence=presence, mixture=mixture, bundle=bundle,
                 old_segments=old_segs, changes=changes)
    if not changes:
        raise ValueError("the correction changes nothing in the primary classification "
                         "(same dominant type, segments, presence levels and mixture): answer agrees=True instead")
    return out, changes


def _write_versioned(store: ArtifactStore, record: GroundTruthRecord) -> tuple[GroundTruthRecord, str]:
    """Create ``gt_<key>.json``, or the first free ``.v<n>`` after it. Create-if-absent, so
    concurrent writers never overwrite each other (atomic locally; on an object store the
    exists-then-upload window remains)."""
    key = record.review_id or record.doc_id
    for version in range(1, MAX_VERSIONS + 1):
        rel = ArtifactStore.ground_truth_rel(key, version)
        candidate = record.model_copy(update={"version": version})
        if store.write_json(rel, candidate, overwrite=False):
            return candidate, store.uri(rel)
    raise RuntimeError(f"{MAX_VERSIONS} ground-truth versions of {record.doc_id!r} exist: archive the old ones")


_PACKET_LOCK = threading.Lock()


def _newest_version(store: ArtifactStore, key: str) -> int:
    version = 0
    while store.exists(ArtifactStore.ground_truth_rel(key, version + 1)):
        version += 1
    return version


def _mark_reviewed(store: ArtifactStore, doc_id: str) -> None:
    """Packet → reviewed, pointing at the newest ground-truth version that exists now (with its
    reviewer and time). Serialised in this process; across processes every writer looks again
    after writing the pointer and rewrites it while a newer version has appeared meanwhile, so the
    last writer to finish leaves the newest version named (the ground-truth files stay the truth)."""
    rel = ArtifactStore.packet_rel(doc_id)
    with _PACKET_LOCK:
        written = 0
        for _ in range(MAX_VERSIONS):
            version = _newest_version(store, doc_id)
            if not version or version == written:
                return
            newest = GroundTruthRecord.model_validate(store.read_json(ArtifactStore.ground_truth_rel(doc_id, version)))
            current = store.read_json(rel)
            current.update(review_status="reviewed", reviewed_at=newest.reviewed_at, reviewer=newest.reviewer,
                           ground_truth_path=store.uri(ArtifactStore.ground_truth_rel(doc_id, newest.version)),
                           ground_truth_version=newest.version)
            store.write_json(rel, SMEPacket.model_validate(current))
            written = version


def _packet_bundle(store: ArtifactStore, packet: SMEPacket) -> DocumentBundle | None:
    """The packet's DocumentBundle when it lies in this store (so a correction can drop evidence
    that is not on its page); None otherwise."""
    prefix = store.uri("x")[:-1]
    if not packet.bundle_path or not packet.bundle_path.startswith(prefix):
        return None
    try:
        return DocumentBundle.model_validate(store.read_json(packet.bundle_path[len(prefix):]))
    except Exception:  # a missing or unreadable bundle: the correction is still recorded, unchecked
        log.warning("bundle of %s not readable: evidence of the correction not checked against the pages", packet.doc_id)
        return None


def save_review(store: ArtifactStore, doc_id: str, *, agrees: bool, corrected_dominant_type: str | None = None,
                corrected_segments: list[dict] | None = None, correction_notes: str = "", reviewer: str,
                reviewed_at: str | None = None, channel: str = "",
                corrected_presence: dict[str, str] | None = None,
                corrected_mixture: dict[str, str] | None = None) -> tuple[GroundTruthRecord, str]:
    """Record an SME's answer for ``doc_id`` as ground truth; returns (record, uri).

    ``agrees`` → ``SME_VALIDATED`` with the packet's primary classification as is; otherwise
    ``SME_CORRECTED`` with :func:`apply_correction`'s classification. The record is written as a
    new version (never overwriting one), then the packet becomes ``reviewed`` with
    ``reviewed_at``, ``reviewer``, ``ground_truth_path`` and ``ground_truth_version``, and its HTML
    rendering is refreshed when it exists.

    Raises:
        PacketNotFoundError: no packet for ``doc_id``.
        ValueError: an invalid packet, an empty reviewer, agrees=True with corrections, a packet
            without a classification to validate, or a bad correction (names the field).
    """
    packet = load_packet(store, doc_id)
    key, doc_id = packet_key(packet), packet.doc_id  # files by the review's key; the record names the document
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise ValueError("reviewer: give the SME's user name (who answered)")
    primary = packet.primary_classification if isinstance(packet.primary_classification, dict) else None
    if agrees:
        if (corrected_dominant_type is not None or corrected_segments is not None or corrected_presence
                or corrected_mixture):
            raise ValueError("agrees=True takes no corrected_dominant_type/corrected_segments: "
                             "to change the classification answer agrees=False")
        if primary is None:
            raise ValueError(f"packet {doc_id!r} has no primary classification to validate "
                             f"(error: {(packet.error or {}).get('error', 'none')}): answer agrees=False with "
                             f"corrected_dominant_type (and corrected_segments)")
        classification, changes, source = copy.deepcopy(primary), [], "SME_VALIDATED"
    else:
        classification, changes = apply_correction(
            primary, doc_id=doc_id, total_pages=packet.total_pages,
            corrected_dominant_type=corrected_dominant_type, corrected_segments=corrected_segments,
            corrected_presence=corrected_presence, corrected_mixture=corrected_mixture,
            bundle=_packet_bundle(store, packet))
        source = "SME_CORRECTED"
    record = GroundTruthRecord(
        doc_id=doc_id, review_id=packet.review_id, ground_truth_source=source, ground_truth_classification=classification,
        corrected_dominant_type=None if agrees else corrected_dominant_type,
        corrected_segments=None if agrees or corrected_segments is None else validate_segments(
            corrected_segments, packet.total_pages),
        corrected_presence=None if agrees else corrected_presence or None,
        corrected_mixture=None if agrees else corrected_mixture or None,
        corrections_applied=changes, correction_notes=correction_notes or "", reviewer=reviewer.strip(),
        reviewed_at=reviewed_at or now_iso(), packet_path=store.uri(ArtifactStore.packet_rel(key)),
        channel=channel)
    record, uri = _write_versioned(store, record)
    _mark_reviewed(store, key)
    log.info("ground truth doc_id=%s source=%s version=%d uri=%s", doc_id, source, record.version, uri)
    if store.exists(html_rel(key)):
        try:
            write_packet_html(store, key)
        except Exception as exc:  # the answer is saved; a stale rendering must not undo that
            log.warning("packet HTML of %s not refreshed (%s)", doc_id, type(exc).__name__)
    return record, uri


def ground_truth_versions(store: ArtifactStore, doc_id: str) -> list[GroundTruthRecord]:
    """Every ground-truth record of the review ``doc_id`` (a review_id, or a doc_id while one
    review of it exists), oldest version first."""
    if not store.exists(ArtifactStore.ground_truth_rel(doc_id, 1)):
        doc_id = resolve_key(store, doc_id)
    out = []
    for version in range(1, MAX_VERSIONS + 1):
        rel = ArtifactStore.ground_truth_rel(doc_id, version)
        if not store.exists(rel):
            break
        out.append(GroundTruthRecord.model_validate(store.read_json(rel)))
    return out


# --------------------------------------------------------------------------- notebook helper


class SMEReviewHelper:
    """The SME's notebook interface (spec slide 10) on a storage root (a path, ``file://`` or
    ``gs://`` URI):

    1. ``list_pending_reviews()`` → 2. ``load_packet(doc_id)`` → 3. ``get_issue_context(doc_id,
    issue_id)`` per issue → 4./5. ``save_review(doc_id, agrees, …)`` → 6. ground truth under
    ``ground_truth/``. ``save_review`` is the same writer the Airflow review DAG uses.
    """

    def __init__(self, storage_root: Any, *, reviewer: str | None = None):
        self.store = ArtifactStore(as_root(storage_root))
        self.reviewer = reviewer

    def list_pending_reviews(self) -> list[dict[str, Any]]:
        """Pending packets: doc_id, pdf_filename, v5_rule, total_issues, top_severity, error,
        created_at, packet_uri (most severe first)."""
        return list_pending_reviews(self.store)

    def load_packet(self, doc_id: str) -> SMEPacket:
        return load_packet(self.store, doc_id)

    def get_issue_context(self, doc_id: str, issue_id: str, *, highlight: bool = True) -> dict[str, Any]:
        """Page, 2 paragraphs before, the match, 3 after, and the highlight boxes of one issue."""
        return get_issue_context(self.store, self.load_packet(doc_id), issue_id, highlight=highlight)

    def packet_markdown(self, doc_id: str) -> str:
        return packet_markdown(self.load_packet(doc_id))

    def html_uri(self, doc_id: str) -> str | None:
        """URI of the packet's HTML rendering, when the nightly run wrote one."""
        rel = html_rel(packet_key(self.load_packet(doc_id)))
        return self.store.uri(rel) if self.store.exists(rel) else None

    def save_review(self, doc_id: str, agrees: bool, corrected_dominant_type: str | None = None,
                    correction_notes: str = "", reviewer: str | None = None, *,
                    corrected_segments: list[dict] | None = None, corrected_presence: dict[str, str] | None = None,
                    corrected_mixture: dict[str, str] | None = None) -> tuple[GroundTruthRecord, str]:
        """Save the answer as ground truth (see :func:`save_review`); the reviewer defaults to the
        helper's ``reviewer``, else the login name."""
        return save_review(self.store, doc_id, agrees=agrees, corrected_dominant_type=corrected_dominant_type,
                           corrected_segments=corrected_segments, correction_notes=correction_notes,
                           corrected_presence=corrected_presence, corrected_mixture=corrected_mixture,
                           reviewer=reviewer or self.reviewer or getpass.getuser(), channel="notebook")

    def ground_truth(self, doc_id: str) -> list[GroundTruthRecord]:
        return ground_truth_versions(self.store, doc_id)
