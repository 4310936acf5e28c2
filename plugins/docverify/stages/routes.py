"""The routes' outputs: accepted records and SME packets (written for the documents of the
night only, withdrawn when the night no longer holds their content)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import JsonValue

from docverify.domain.models import DocumentBundle, SMEPacket
from docverify.reporting.outputs import accepted_record
from docverify.sme.packets import build_packet, now_iso, review_id, write_packet
from docverify.sme.render import write_packet_html
from docverify.stages.common import Batch, StageStats, lineage
from docverify.stages.results import Accepted, PacketsWritten
from docverify.stages.verify import read_bundle, read_companion
from docverify.storage.limits import (
    InputError,
)
from docverify.storage.runstore import (
    DocResult,
    Routes,
)


def withdraw(batch: Batch, rel: str, kind: str, doc_id: str, reason: str) -> str | None:
    """Move a stale output of an earlier run of this night aside, never deleting it:
    ``withdrawn/<ds>/<kind>_<doc_id>[.<n>].json`` holds the record, its URI, the reason and the
    run that withdrew it (create-if-absent: an earlier withdrawal is never overwritten). None when
    another run of the same night withdrew it first.

    Conditional on the object as it is at the moment of the delete (ADR 0030): it is read
    versioned, copied aside, then deleted with :meth:`~docverify.storage.store.ArtifactStore.delete_if`.
    When the delete is refused (an SME answered the packet meanwhile, another run rewrote or moved
    it), the object is kept, the copy just written is removed and the lineage says so (None). A
    packet (``kind`` ``sme_packet``) whose review_status is not pending is never withdrawn."""
    import json
    import logging

    rs = batch.rs
    got = rs.read_versioned(rel)
    if got is None:
        return None
    record, version = json.loads(got[0]), got[1]
    if kind == "sme_packet" and (not isinstance(record, dict) or record.get("review_status", "pending") != "pending"):
        return None
    moved = {"withdrawn_at": now_iso(), "run_id": batch.run_id, "reason": reason, "kind": kind,
             "doc_id": doc_id, "original_uri": rs.uri(rel), "record": record}
    n = 1
    while True:
        target = rs.withdrawn_rel(kind, doc_id, n)
        if rs.write_json(target, moved, overwrite=False):
            break
        n += 1
    if not rs.delete_if(rel, version):  # answered, rewritten or moved meanwhile: kept as it is now
        rs.delete(target)  # the copy this call wrote (create-if-absent: nobody else's)
        logging.getLogger("docverify.routes").warning(
            "%s changed or went while this run withdrew it (an SME answered it, or another run rewrote or moved "
            "it): left as it is now, this run's copy removed", rs.uri(rel))
        lineage("withdraw", doc_id, kind=kind, reason=reason, from_uri=rs.uri(rel), withdrawn=False,
                kept="changed meanwhile")
        return None
    lineage("withdraw", doc_id, kind=kind, reason=reason, from_uri=rs.uri(rel), output_uri=rs.uri(target))
    return target


def withdraw_removed(batch: Batch, present: set[str]) -> list[str]:
    """Reconcile the night's outputs with its inputs (ADR 0024): the accepted record and the
    *pending* packets of this night of a document whose PDF is no longer in the incoming folder
    (``present``: the doc ids of every listed ``*.pdf``) are withdrawn with the reason — moved
    aside by :func:`withdraw`, never deleted. A reviewed packet, ground truth and audit packets are
    never touched. One listing of the accepted records and one of the packets; a packet is read
    only when its key names no present document. Returns the doc ids withdrawn."""
    import re

    rs = batch.rs
    reason = f"its PDF is no longer in the incoming folder of {batch.ds} (removed before a re-run)"
    done: set[str] = set()
    for name in rs.list(rs.accepted_dir, ".json"):
        doc_id = name[: -len(".json")]
        if doc_id not in present and withdraw(batch, f"{rs.accepted_dir}/{name}", "accepted", doc_id, reason):
            done.add(doc_id)
    prefix = f"sme_packet_{batch.ds}_"
    for name in rs.list(rs.PACKETS_DIR, ".json"):
        if not name.startswith(prefix) or name.endswith("_audit.json"):
            continue
        key = name[len("sme_packet_"):-len(".json")]
        rest = key[len(batch.ds) + 1:]  # <doc_id>_<10 hex>, or <doc_id> when nothing could be read
        m = re.fullmatch(r"(.+)_[0-9a-f]{10}", rest)
        if rest in present or (m and m.group(1) in present):
            continue
        rel = rs.packet_rel(key)
        packet = rs.get_json(rel)
        if not isinstance(packet, dict) or packet.get("review_status", "pending") != "pending" \
                or packet.get("doc_id") in present:
            continue
        if withdraw(batch, rel, "sme_packet", key, reason):
            rs.delete(rs.packet_html_rel(key))
            done.add(str(packet.get("doc_id") or rest))
    return sorted(done)


def _review_id(batch: Batch, doc_id: str, sha256: str | None) -> str:
    return review_id(batch.ds, doc_id, sha256)


def _night_packet_keys(batch: Batch, docs: Iterable[str]) -> dict[str, list[str]]:
    """This night's packet keys per doc id of ``docs`` (``<ds>_<doc_id>_<10 hex>``), from one
    listing (which also tells the run store which packets do not exist)."""
    import re

    docs = set(docs)
    out: dict[str, list[str]] = {}
    prefix = f"sme_packet_{batch.ds}_"
    for name in batch.rs.list(batch.rs.PACKETS_DIR, ".json"):
        if not name.startswith(prefix):
            continue
        m = re.fullmatch(r"(.+)_([0-9a-f]{10})", name[len(prefix):-len(".json")])
        if m and m.group(1) in docs:
            out.setdefault(m.group(1), []).append(name[len("sme_packet_"):-len(".json")])
    return out


def _withdraw_pending_packets(batch: Batch, doc_id: str, current: str, reason: str, keys: dict[str, list[str]], *,
                              keep_current: bool) -> None:
    """*Pending* packets of this night's document from an earlier run: the one of its current
    content ``current`` (unless ``keep_current``: it is being written again) and those of content
    the night no longer holds (the file was replaced). A reviewed packet and ground truth are never
    touched."""
    rs = batch.rs
    for key in keys.get(doc_id, []):
        if key == current and keep_current:
            continue
        why = reason if key == current else f"{reason}; the file now has other content (sha256 {current[-10:]}…)"
        # withdraw reads it versioned and leaves a packet that is not pending (or becomes answered) alone
        if withdraw(batch, rs.packet_rel(key), "sme_packet", key, why):
            rs.delete(rs.packet_html_rel(key))  # the packet's rendering goes with it


def _earlier_outputs(batch: Batch, routes: Routes, candidates: list[str], *, list_packets: bool = False
                     ) -> dict[str, list[str]]:
    """This night's packet keys of ``candidates`` from earlier runs. A document new this run (no
    run folder before its layout) has no accepted record or packet of an earlier run: when every
    candidate is new, their accepted records are known absent without a request and the packets
    are not listed — unless ``list_packets`` (the packet writer always lists them: a packet an SME
    reviewed is never overwritten, even by a cleared and re-run task); else one listing of the
    night's accepted records and one of the packets."""
    rs = batch.rs
    new = set(routes.new)
    if all(d in new for d in candidates):
        for d in candidates:
            rs.assume_absent(rs.accepted_rel(d))
        return _night_packet_keys(batch, candidates) if list_packets else {}
    rs.names(rs.accepted_dir)
    return _night_packet_keys(batch, candidates)


def accept(batch: Batch) -> Accepted:
    """Write ``accepted/<ds>/<doc>.json`` for every document whose final decision is
    AUTO_ACCEPT (directly, or after the retry): reads the routes and the result of each document
    it may write (the accept and retry routes), nothing else per document. A pending packet of an
    earlier run of this night for such a document is withdrawn (moved aside with the reason): one
    route per document."""
    rs = batch.rs
    stats = StageStats("accept")
    written = []
    routes = rs.routes()
    candidates = (routes.routes["accept"] + routes.routes["auto_fix_retry"]) if routes else []
    keys = _earlier_outputs(batch, routes, candidates) if routes else {}
    for doc_id in candidates:
        rec = rs.result(doc_id)
        if rec is None or rec.result is None or rec.result.final_decision != "AUTO_ACCEPT" or rec.bundle is None:
            rs.forget(doc_id)
            continue
        result, meta = rec.result, rec.classification_meta
        rel = rs.accepted_rel(doc_id)
        rs.write_if_changed(rel, accepted_record(
            doc_id, rec.bundle, result, bundle_uri=rs.uri(rs.bundle_rel(doc_id)), run_id=batch.run_id,
            provenance={"classification_source": meta.source if meta else None,
                        "classifier": meta.implementation if meta else None}))
        _withdraw_pending_packets(batch, doc_id, _review_id(batch, doc_id, rec.bundle.sha256),
                                  f"accepted by a later run of {batch.ds} (rule {result.final_rule})", keys,
                                  keep_current=False)
        written.append(doc_id)
        lineage("accept", doc_id, decision="AUTO_ACCEPT", rule=result.final_rule, attempts=len(result.attempts),
                output_uri=rs.uri(rel))
        rs.forget(doc_id)
    stats.docs = len(written)
    stats.save(batch, documents=written)
    return Accepted(accepted=written, uri=rs.uri(rs.accepted_dir))


def _production(batch: Batch, doc_id: str, rel: str | None) -> dict[str, JsonValue] | None:
    """A production classification supplied beside the PDF: ``<doc>.production.json``
    (within the companion limits; one that is not is left out of the packet)."""
    if not rel:
        return None
    try:
        return read_companion(batch, rel)
    except (InputError, FileNotFoundError) as exc:
        lineage("write_sme_packets", doc_id, production_error=getattr(exc, "code", "NOT_FOUND"))
        return None


def _unverified_packet(batch: Batch, doc_id: str, rec: DocResult) -> tuple[str, SMEPacket]:
    """(review id, packet) of a document whose result is an error (it could not be parsed or classified)."""
    rs, error = batch.rs, rec.error
    assert error is not None
    total = rec.bundle.total_pages if rec.bundle else 0
    err_json = error.model_dump(mode="json", exclude={"sha256"})
    key = _review_id(batch, doc_id, rec.bundle.sha256 if rec.bundle else error.sha256)
    return key, build_packet(doc_id=doc_id, pdf_path=error.file, total_pages=total,
                             bundle_path=rs.uri(rs.bundle_rel(doc_id)) if total else "", result=None,
                             error=err_json, run_id=batch.run_id, review_id=key)


def write_sme_packets(batch: Batch) -> PacketsWritten:
    """One packet per escalated document (after V5 or after the retry), and per document that
    could not be parsed or classified. A packet an SME already reviewed is kept. Reads the routes,
    the manifest and, per document it may write, its result (and bundle and PDF for the packet)."""
    rs = batch.rs
    stats = StageStats("write_sme_packets")
    written: list[str] = []
    kept: list[str] = []
    routes = rs.routes()
    candidates = (routes.routes["write_sme_packets"] + routes.routes["auto_fix_retry"]) if routes else []
    errors = routes.errors if routes else {}
    keys = _earlier_outputs(batch, routes, candidates, list_packets=True) if routes else {}
    manifest = rs.manifest_if_exists() if errors else None  # the size an unreadable file's packet shows
    sizes = {d.doc_id: d.bytes for d in manifest.documents} if manifest else {}

    def finish(doc_id: str, key: str, packet: SMEPacket, bundle: DocumentBundle | None, why: str, **fields: object) -> None:
        _withdraw_pending_packets(batch, doc_id, key, f"escalated again by a later run of {batch.ds}", keys,
                                  keep_current=True)
        uri, outcome = write_packet(rs, packet, write_json=rs.write_if_changed)
        html_uri, _ = write_packet_html(rs, key, bundle=bundle)
        # an accepted record of an earlier run (none: known from the listing, no request)
        withdraw(batch, rs.accepted_rel(doc_id), "accepted", doc_id, f"escalated by a later run of {batch.ds} ({why})")
        (kept if outcome == "kept_reviewed" else written).append(doc_id)
        rs.forget(doc_id, rels=[rs.packet_rel(key)])
        lineage("write_sme_packets", doc_id, decision="ESCALATE_TO_SME", output_uri=uri, html_uri=html_uri,
                packet=outcome, **fields)

    for doc_id in candidates:
        if doc_id in errors:  # escalated without a verification: discover / layout / no result
            err = errors[doc_id]
            key = _review_id(batch, doc_id, err.sha256)
            packet = build_packet(doc_id=doc_id, pdf_path=err.file, total_pages=0, bundle_path="",
                                  result=None, error=err.model_dump(mode="json"), run_id=batch.run_id, review_id=key,
                                  size_bytes=sizes.get(doc_id) or None)
            finish(doc_id, key, packet, None, err.error, rule=None, reason="error", error=err.error)
            continue
        rec = rs.result(doc_id)
        if rec is None:
            continue
        if rec.error is not None:
            key, packet = _unverified_packet(batch, doc_id, rec)
            finish(doc_id, key, packet, None, rec.error.error, rule=None, reason="error", error=rec.error.error)
        elif rec.result is not None and rec.result.final_decision == "ESCALATE_TO_SME":
            result = rec.result
            bundle = read_bundle(batch, doc_id)
            key = _review_id(batch, doc_id, bundle.sha256)
            packet = build_packet(doc_id=doc_id, pdf_path=bundle.file_path, total_pages=bundle.total_pages,
                                  bundle_path=rs.uri(rs.bundle_rel(doc_id)), result=result,
                                  production_classification=_production(batch, doc_id, rec.production_rel),
                                  run_id=batch.run_id, bundle=bundle, review_id=key)
            finish(doc_id, key, packet, bundle, f"rule {result.final_rule}", rule=result.final_rule,
                   stop_reason=result.stop_reason, production_supplied=packet.production_classification is not None)
        rs.forget(doc_id)
    stats.docs = len(written) + len(kept)
    stats.save(batch, written=written, kept_reviewed=kept)
    return PacketsWritten(packets=written, kept_reviewed=kept, uri=rs.uri(rs.PACKETS_DIR))
