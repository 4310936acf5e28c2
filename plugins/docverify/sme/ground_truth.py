"""Ground-truth records (spec slide 10): an SME's answer, validated and saved as a new version.

A ground-truth record is never overwritten (a second answer is a new version:
``gt_<review_id>.json``, ``gt_<review_id>.v2.json``, …). The Airflow review DAG (HITL tasks) and the
notebook helper write through the same functions, :func:`save_review` (Agree / Correct) and
:func:`save_unclassifiable` (Cannot classify); the form channels check an answer first with
:mod:`docverify.sme.answer`."""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from docverify.domain.classification_view import ClassificationView
from docverify.domain.models import (
    DOC_TYPES,
    DocumentBundle,
    GroundTruthRecord,
    SegmentShape,
    SMEPacket,
    UnclassifiableReason,
)
from docverify.sme.correction import SegmentRange, check_levels, derive
from docverify.sme.packets import (
    PACKET_CAS_ATTEMPTS,
    html_rel,
    load_packet,
    now_iso,
    packet_key,
    resolve_key,
    segment_shape,
)
from docverify.sme.render import write_packet_html
from docverify.storage.limits import MAX_PAGES
from docverify.storage.store import ArtifactStore, dumps

log = logging.getLogger("docverify.sme")

SEGMENT_KEYS = ("page_start", "page_end", "dominant_type")
MAX_VERSIONS = 10_000


class NoChange(ValueError):
    """A correction that changes nothing in the primary classification."""


def _check_type(value: object, field: str) -> str:
    if not isinstance(value, str) or value not in DOC_TYPES:
        raise ValueError(f"{field}: {value!r} is not a document type; allowed values: {', '.join(DOC_TYPES)}")
    return value


def validate_segments(segments: object, total_pages: int) -> list[SegmentRange]:
    """The SME's segments, checked: a non-empty list of ``{page_start, page_end, dominant_type}``
    in page order that covers pages 1..total_pages exactly once (when the page count is unknown,
    0, they must still start at 1, be contiguous and end by page ``MAX_PAGES``). Raises ValueError
    naming the field; a page number beyond the document is refused before any arithmetic on it."""
    field = "corrected_segments"
    if not isinstance(segments, list) or not segments:
        raise ValueError(f"{field}: give a non-empty list of {{page_start, page_end, dominant_type}} objects, "
                         f"e.g. [{{\"page_start\": 1, \"page_end\": 2, \"dominant_type\": \"Genomic Report\"}}]")
    out: list[SegmentRange] = []
    expect = 1
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
        for key, v in (("page_start", start), ("page_end", end)):
            if v > (total_pages or MAX_PAGES):
                raise ValueError(f"{where}.{key}: {v} is beyond the document's last page; allowed: "
                                 + (f"1..{total_pages}" if total_pages else f"1..{MAX_PAGES} (page count unknown)"))
        if end < start:
            raise ValueError(f"{where}: page_end {end} is before page_start {start}")
        if start != expect:
            raise ValueError(f"{where}.page_start: {start} leaves a gap or an overlap: segments must cover the pages "
                             f"in order without gaps, so this one must start at page {expect}")
        out.append({"page_start": start, "page_end": end,
                    "dominant_type": _check_type(seg["dominant_type"], f"{where}.dominant_type")})
        if seg.get("presence") is not None:
            out[-1]["presence"] = check_levels(seg["presence"], f"{where}.presence")
        expect = end + 1
    if total_pages and expect != total_pages + 1:
        raise ValueError(f"{field}: the segments end at page {expect - 1} but the document has {total_pages} page(s); "
                         f"the last segment must end at page {total_pages}")
    return out


def _ranges(shapes: list[SegmentShape]) -> str:
    return ", ".join(f"{start}–{end} {kind}" for start, end, kind in shapes) or "none"


def apply_correction(primary: Mapping[str, object] | None, *, doc_id: str, total_pages: int,
                     corrected_dominant_type: str | None = None,
                     corrected_segments: Sequence[Mapping[str, object]] | None = None,
                     corrected_presence: dict[str, str] | None = None,
                     corrected_mixture: dict[str, str] | None = None,
                     bundle: DocumentBundle | None = None) -> tuple[dict[str, Any], list[str]]:
    """The SME's classification: the primary classification with the SME's corrections, and
    everything they did not set derived from what they set (:mod:`docverify.sme.correction`),
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
    if corrected_dominant_type is not None:
        _check_type(corrected_dominant_type, "corrected_dominant_type")
    segs_in = validate_segments(corrected_segments, total_pages) if corrected_segments is not None else None
    presence = check_levels(corrected_presence, "corrected_presence")
    mixture = check_levels(corrected_mixture, "corrected_mixture")
    if corrected_dominant_type is None and segs_in is None and not presence and not mixture:
        raise ValueError("a correction needs corrected_dominant_type, corrected_segments, corrected_presence "
                         "and/or corrected_mixture (to keep the primary classification as is, answer agrees=True)")
    has_primary = isinstance(primary, dict)
    gt: dict[str, Any] = copy.deepcopy(primary) if isinstance(primary, dict) else {
        "doc_id": doc_id, "dominant_type_overall": None, "number_of_segments": 0, "segments": [],
        "document_mixture": []}
    changes: list[str] = []
    old_segs: list[Mapping[str, object]] = [s for s in gt.get("segments") or [] if isinstance(s, dict)]
    if segs_in is not None:
        new = segs_in
        new_shape = segment_shape(ClassificationView.model_validate({"segments": new}))
        old_shape = segment_shape(ClassificationView.model_validate({"segments": old_segs}))
        if new_shape != old_shape:
            changes.append(f"segments: {_ranges(old_shape)} → {_ranges(new_shape)}")
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
        kept = [{"page_start": s.get("page_start"), "page_end": s.get("page_end"),
                 "dominant_type": s.get("dominant_type")} for s in old_segs]
        try:  # kept segments must hold too: pages 1..total_pages each in exactly one, in order
            new = validate_segments(kept, total_pages)
        except ValueError as exc:
            raise ValueError(f"the primary classification's segments cannot be kept ({exc}): give corrected_segments "
                             f"covering pages 1..{total_pages or 'N'}") from None
        if len(new) == 1 and corrected_dominant_type and new[0]["dominant_type"] != corrected_dominant_type:
            changes.append(f"segments[0].dominant_type: {new[0]['dominant_type']} → {corrected_dominant_type}")
            new[0]["dominant_type"] = corrected_dominant_type
    out = derive(gt, new, dominant=corrected_dominant_type, presence=presence, mixture=mixture, bundle=bundle,
                 old_segments=old_segs, changes=changes)
    if not changes:
        raise NoChange("the correction changes nothing in the primary classification "
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


def _mark_reviewed(store: ArtifactStore, doc_id: str, answered: SMEPacket | None = None) -> None:
    """Packet → reviewed, pointing at the newest ground-truth version that exists now (with its
    reviewer and time). Serialised in this process; across processes every writer looks again
    after writing the pointer and rewrites it while a newer version has appeared meanwhile, so the
    last writer to finish leaves the newest version named (the ground-truth files stay the truth).
    Each write of the pointer is a compare-and-swap (:func:`_set_reviewed`), so it and a re-run's
    conditional rewrite or withdrawal of the packet exclude each other (ADR 0030). ``answered``: the
    packet the SME answered (put back if it was withdrawn meanwhile)."""
    with _PACKET_LOCK:
        written = 0
        for _ in range(MAX_VERSIONS):
            version = _newest_version(store, doc_id)
            if not version or version == written:
                return
            newest = GroundTruthRecord.model_validate(store.read_json(ArtifactStore.ground_truth_rel(doc_id, version)))
            _set_reviewed(store, doc_id, newest, answered)
            written = version


def _set_reviewed(store: ArtifactStore, key: str, newest: GroundTruthRecord, answered: SMEPacket | None) -> None:
    """One compare-and-swap of the packet to ``reviewed`` (ADR 0030): read it versioned, update
    it, :meth:`~docverify.storage.store.ArtifactStore.replace_if`; when a re-run rewrote it in between,
    read again and mark what is there now. A packet withdrawn in between (deleted after the SME
    loaded it) is put back, answered, from ``answered`` (create-if-absent), so the ground truth's
    ``packet_path`` names a packet."""
    rel = ArtifactStore.packet_rel(key)
    update = dict(review_status="reviewed", reviewed_at=newest.reviewed_at, reviewer=newest.reviewer,
                  ground_truth_path=store.uri(ArtifactStore.ground_truth_rel(key, newest.version)),
                  ground_truth_version=newest.version)
    for _ in range(PACKET_CAS_ATTEMPTS):
        got = store.read_versioned(rel)
        if got is None:
            if answered is None:
                raise FileNotFoundError(f"{store.uri(rel)}: the packet is gone (withdrawn?) and the answer is "
                                        f"saved as {update['ground_truth_path']}")
            if store.write_bytes(rel, dumps(SMEPacket.model_validate({**answered.model_dump(mode="json"), **update})),
                                 overwrite=False):
                log.warning("packet %s was withdrawn while its answer was saved: put back as reviewed", store.uri(rel))
                return
            continue
        current = json.loads(got[0])
        current.update(update)
        if store.replace_if(rel, dumps(SMEPacket.model_validate(current)), got[1]):
            return
    raise RuntimeError(f"{store.uri(rel)}: the packet kept changing while it was marked reviewed")


def packet_bundle(store: ArtifactStore, packet: SMEPacket) -> DocumentBundle | None:
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
                corrected_segments: Sequence[Mapping[str, object]] | None = None, correction_notes: str = "", reviewer: str,
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
    changes: list[str]
    if agrees:
        if (corrected_dominant_type is not None or corrected_segments is not None or corrected_presence
                or corrected_mixture):
            raise ValueError("agrees=True takes no corrected_dominant_type/corrected_segments: "
                             "to change the classification answer agrees=False")
        if primary is None:
            raise ValueError(f"packet {doc_id!r} has no primary classification to validate "
                             f"(error: {packet.error['error'] if packet.error else 'none'}): answer agrees=False with "
                             f"corrected_dominant_type (and corrected_segments)")
        classification, changes, source = copy.deepcopy(primary), [], "SME_VALIDATED"
    else:
        classification, changes = apply_correction(
            primary, doc_id=doc_id, total_pages=packet.total_pages,
            corrected_dominant_type=corrected_dominant_type, corrected_segments=corrected_segments,
            corrected_presence=corrected_presence, corrected_mixture=corrected_mixture,
            bundle=packet_bundle(store, packet))
        source = "SME_CORRECTED"
    return _write_answer(store, packet, GroundTruthRecord(
        doc_id=doc_id, review_id=packet.review_id, ground_truth_source=source, review_kind=packet.review_kind,
        ground_truth_classification=classification,
        corrected_dominant_type=None if agrees else corrected_dominant_type,
        corrected_segments=None if agrees or corrected_segments is None else validate_segments(
            corrected_segments, packet.total_pages),
        corrected_presence=None if agrees else corrected_presence or None,
        corrected_mixture=None if agrees else corrected_mixture or None,
        corrections_applied=changes, correction_notes=correction_notes or "", reviewer=reviewer.strip(),
        reviewed_at=reviewed_at or now_iso(), packet_path=store.uri(ArtifactStore.packet_rel(key)),
        channel=channel))


def save_unclassifiable(store: ArtifactStore, doc_id: str, *, reason: str, notes: str = "", reviewer: str,
                        reviewed_at: str | None = None, channel: str = "") -> tuple[GroundTruthRecord, str]:
    """Record that the SME could not classify ``doc_id`` (*Cannot classify*): source
    ``SME_UNCLASSIFIABLE``, no classification, ``unclassifiable_reason`` one of
    ``"unreadable"``, ``"wrong file"``, ``"needs a re-scan"``, ``"other"`` (with notes), written as
    a new version like every answer; the packet becomes ``reviewed``. Returns (record, uri).

    Raises:
        PacketNotFoundError: no packet for ``doc_id``.
        ValueError: an empty reviewer, an unknown reason, or "other" without notes.
    """
    from typing import get_args

    packet = load_packet(store, doc_id)
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise ValueError("reviewer: give the SME's user name (who answered)")
    if reason not in get_args(UnclassifiableReason):
        raise ValueError(f"unclassifiable_reason: {reason!r} is not a reason; allowed values: "
                         f"{', '.join(get_args(UnclassifiableReason))}")
    if reason == "other" and not (notes or "").strip():
        raise ValueError("correction_notes: with the reason 'other', say in the notes why")
    return _write_answer(store, packet, GroundTruthRecord(
        doc_id=packet.doc_id, review_id=packet.review_id, ground_truth_source="SME_UNCLASSIFIABLE",
        review_kind=packet.review_kind, ground_truth_classification=None, unclassifiable_reason=reason,
        correction_notes=notes or "", reviewer=reviewer.strip(), reviewed_at=reviewed_at or now_iso(),
        packet_path=store.uri(ArtifactStore.packet_rel(packet_key(packet))), channel=channel))


def _write_answer(store: ArtifactStore, packet: SMEPacket, record: GroundTruthRecord) -> tuple[GroundTruthRecord, str]:
    """Write ``record`` as a new version, mark the packet reviewed and refresh its HTML."""
    key = packet_key(packet)
    record, uri = _write_versioned(store, record)
    _mark_reviewed(store, key, packet)
    log.info("ground truth doc_id=%s source=%s version=%d uri=%s", record.doc_id, record.ground_truth_source,
             record.version, uri)
    if store.exists(html_rel(key)):
        try:
            write_packet_html(store, key)
        except Exception as exc:  # the answer is saved; a stale rendering must not undo that
            log.warning("packet HTML of %s not refreshed (%s)", record.doc_id, type(exc).__name__)
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
