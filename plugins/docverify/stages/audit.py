"""The nightly audit (ADR 0023): a reproducible sample of the night's AUTO_ACCEPT documents goes
to the SMEs as *audit* packets, in the normal review flow. The accepted records stay accepted.

An audit packet's key is ``<review_id>_audit`` (``sme_packet_<ds>_<doc>_<10 hex>_audit.json``):
the accept stage's withdrawal of pending packets and write_sme_packets list this night's packets
by ``<doc>_<10 hex>`` exactly, so they never see (nor withdraw, nor overwrite) an audit packet."""

from __future__ import annotations

from docverify.reporting.audit_sample import UNSURE_CODES, draw_sample, sampling_confidence
from docverify.sme.packets import build_packet, review_id, write_packet
from docverify.sme.render import write_packet_html
from docverify.stages.common import Batch, StageStats, lineage
from docverify.stages.results import AuditDrawn
from docverify.stages.verify import read_bundle

AUDIT_SUFFIX = "_audit"


def audit_key(review_id: str) -> str:
    return f"{review_id}{AUDIT_SUFFIX}"


def audit_sample(batch: Batch, rate: float) -> AuditDrawn:
    """Draw the night's audit sample among the documents whose final decision is AUTO_ACCEPT
    (the accept and retry routes; :func:`docverify.reporting.audit_sample.draw_sample`, ``rate`` 0 = off) and write
    an audit packet for each: the classification to confirm, the page images, the verifiers'
    issues if any. A re-run draws the same sample; an audit packet that exists (pending or
    answered) is never rewritten."""
    rs = batch.rs
    stats = StageStats("audit_sample")
    routes = rs.routes()
    candidates = (routes.routes["accept"] + routes.routes["auto_fix_retry"]) if routes and rate > 0 else []
    accepted: dict[str, float] = {}
    weighted_up: list[str] = []  # accepted while the independent reading abstained: drawn as the least confident
    for doc_id in candidates:
        rec = rs.result(doc_id)
        if rec is not None and rec.result is not None and rec.result.final_decision == "AUTO_ACCEPT" \
                and rec.bundle is not None:
            codes = [i.code for i in rec.result.attempts[-1].issues] if rec.result.attempts else []
            accepted[doc_id] = sampling_confidence(rec.result.final_classification, codes)
            if UNSURE_CODES.intersection(codes):
                weighted_up.append(doc_id)
    sample = draw_sample(batch.ds, accepted.items(), rate)
    written: list[str] = []
    kept: list[str] = []
    for doc_id, probability in sample:
        rec = rs.result(doc_id)
        # drawn from the accepted documents read above (each with its bundle and result)
        assert rec is not None and rec.bundle is not None and rec.result is not None
        key = audit_key(review_id(batch.ds, doc_id, rec.bundle.sha256))
        rel = rs.packet_rel(key)
        if rs.get_json(rel, memo=False) is not None:  # drawn by an earlier run of the night: kept as is
            kept.append(doc_id)
            lineage("audit_sample", doc_id, packet="kept", output_uri=rs.uri(rel))
            rs.forget(doc_id)
            continue
        result = rec.result
        bundle = read_bundle(batch, doc_id)
        packet = build_packet(doc_id=doc_id, pdf_path=bundle.file_path, total_pages=bundle.total_pages,
                              bundle_path=rs.uri(rs.bundle_rel(doc_id)), result=result, run_id=batch.run_id,
                              bundle=bundle, review_id=key)
        packet = packet.model_copy(update={
            "review_kind": "audit", "v5_decision": "AUTO_ACCEPT", "escalation_reason": "audit",
            "audit_inclusion_probability": round(probability, 6),
            "v5_reason": f"Audit of an accepted document (drawn with probability {probability:.3f}; "
                         f"V5 rule {result.final_rule} accepted it): confirm or correct the classification"})
        uri, _ = write_packet(rs, packet)
        html_uri, _ = write_packet_html(rs, key, bundle=bundle)
        written.append(doc_id)
        lineage("audit_sample", doc_id, packet="written", review_kind="audit", inclusion_probability=probability,
                output_uri=uri, html_uri=html_uri)
        rs.forget(doc_id, rels=[rel])
    stats.docs = len(written) + len(kept)
    stats.save(batch, written=written, kept=kept, accepted=len(accepted), rate=rate,
               sample={d: round(p, 6) for d, p in sample}, weighted_up=weighted_up)
    return AuditDrawn(packets=written, kept=kept, sample=[d for d, _ in sample], accepted=len(accepted),
                      uri=rs.uri(rs.PACKETS_DIR))
