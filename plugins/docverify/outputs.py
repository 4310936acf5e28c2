"""Per-document artifacts, written the same way by the DAG and by ``verify --out``."""

from __future__ import annotations

from typing import Any

from docverify.models import DocumentBundle, VerificationResult
from docverify.sme import build_packet, now_iso, write_packet
from docverify.store import ArtifactStore


def write_attempts(store: ArtifactStore, ds: str, result: VerificationResult) -> list[str]:
    """``runs/<ds>/<doc>/attempt_<n>/report.json`` and ``v5_arbiter_decision.json`` per attempt."""
    uris = []
    for a in result.attempts:
        base = ArtifactStore.attempt_dir(ds, result.doc_id, a.attempt)
        store.write_json(f"{base}/report.json", {
            "doc_id": result.doc_id, "attempt": a.attempt, "fingerprint": a.fingerprint,
            "quality_score": a.quality_score, "issues": [i.model_dump(mode="json") for i in a.issues],
            "runs": [r.model_dump(mode="json") for r in a.runs],
        })
        store.write_json(f"{base}/v5_arbiter_decision.json", a.decision)
        uris.append(store.uri(base))
    store.write_json(f"{ArtifactStore.run_dir(ds, result.doc_id)}/verification.json", result)
    return uris


def write_outcome(store: ArtifactStore, ds: str, bundle: DocumentBundle, result: VerificationResult,
                  *, provenance: dict[str, Any] | None = None, run_id: str = "") -> dict[str, str]:
    """The attempts, then the accepted record or the SME packet. Returns the output URIs."""
    out = {"attempts": ", ".join(write_attempts(store, ds, result))}
    bundle_rel = f"{ArtifactStore.run_dir(ds, bundle.doc_id)}/bundle.json"
    if result.final_decision == "AUTO_ACCEPT":
        rel = f"accepted/{ds}/{bundle.doc_id}.json"
        store.write_json(rel, {
            "doc_id": bundle.doc_id, "accepted_at": now_iso(), "run_id": run_id,
            "decision": {"final_decision": result.final_decision, "rule": result.final_rule,
                         "attempts": len(result.attempts), "fixes_applied": [f.description for f in result.fixes_applied]},
            "provenance": {"pdf": bundle.file_path, "sha256": bundle.sha256, "parser": bundle.parser,
                           "bundle": store.uri(bundle_rel), **(provenance or {})},
            "classification": result.final_classification,
        })
        out["accepted"] = store.uri(rel)
    else:
        packet = build_packet(doc_id=bundle.doc_id, pdf_path=bundle.file_path, total_pages=bundle.total_pages,
                              bundle_path=store.uri(bundle_rel), result=result, run_id=run_id)
        uri, outcome = write_packet(store, packet)
        out["sme_packet"] = uri
        out["sme_packet_outcome"] = outcome
    return out
