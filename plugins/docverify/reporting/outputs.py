"""Per-document artifacts of ``verify --out`` (the CLI), and the accepted record the DAG's
``accept`` task writes too (:func:`accepted_record`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pydantic import BaseModel, JsonValue
from typing_extensions import TypedDict

from docverify.domain.models import DocumentBundle, VerificationResult
from docverify.sme.packets import build_packet, now_iso, review_id, write_packet
from docverify.storage.runstore import RunStore
from docverify.storage.store import ArtifactStore


class BundleFacts(Protocol):
    """What the accepted record names of a bundle: :class:`DocumentBundle`, or the routes'
    ``BundleMeta``."""

    @property
    def file_path(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    @property
    def parser(self) -> str: ...


class AcceptedDecision(TypedDict):
    final_decision: str
    rule: int
    attempts: int
    fixes_applied: list[str]


class AcceptedRecord(TypedDict):
    """``accepted/<ds>/<doc_id>.json``."""

    doc_id: str
    accepted_at: str
    run_id: str
    decision: AcceptedDecision
    #: the PDF, its hash, the parser and the bundle's URI, and the caller's ``provenance``
    provenance: dict[str, str | None]
    #: the accepted classification as the result holds it
    classification: dict[str, JsonValue]


class AttemptReport(TypedDict):
    """``runs/<ds>/<doc>/attempt_<n>/report.json``: one attempt's issues (their JSON) and verifier runs."""

    doc_id: str
    attempt: int
    fingerprint: str
    quality_score: float
    issues: list[dict[str, JsonValue]]
    runs: list[dict[str, JsonValue]]


class JsonWriter(Protocol):
    """``store.write_json``'s shape for what this module writes: a path and the object (True: written)."""

    def __call__(self, rel: str, obj: BaseModel | AcceptedRecord | AttemptReport, /) -> bool: ...


def write_attempts(store: ArtifactStore, ds: str, result: VerificationResult,
                   write_json: JsonWriter | None = None) -> list[str]:
    """``runs/<ds>/<doc>/attempt_<n>/report.json`` and ``v5_arbiter_decision.json`` per attempt,
    and the whole result as ``runs/<ds>/<doc>/verification.json``. ``write_json`` replaces
    ``store.write_json`` (the DAG passes a writer that skips unchanged content)."""
    write_json = write_json or store.write_json
    rs = RunStore(store, ds)
    uris = []
    for a in result.attempts:
        base = ArtifactStore.attempt_dir(ds, result.doc_id, a.attempt)
        report: AttemptReport = {
            "doc_id": result.doc_id, "attempt": a.attempt, "fingerprint": a.fingerprint,
            "quality_score": a.quality_score, "issues": [i.model_dump(mode="json") for i in a.issues],
            "runs": [r.model_dump(mode="json") for r in a.runs],
        }
        write_json(f"{base}/report.json", report)
        write_json(f"{base}/v5_arbiter_decision.json", a.decision)
        uris.append(store.uri(base))
    write_json(rs.doc_rel(result.doc_id, "verification.json"), result)
    return uris


def accepted_record(doc_id: str, bundle: BundleFacts, result: VerificationResult, *, bundle_uri: str,
                    run_id: str = "", provenance: Mapping[str, str | None] | None = None) -> AcceptedRecord:
    """``accepted/<ds>/<doc_id>.json``: the accepted classification and its provenance. ``bundle``
    is a :class:`DocumentBundle` or anything with its ``file_path``, ``sha256`` and ``parser``."""
    return {
        "doc_id": doc_id, "accepted_at": now_iso(), "run_id": run_id,
        "decision": {"final_decision": result.final_decision, "rule": result.final_rule,
                     "attempts": len(result.attempts), "fixes_applied": [f.description for f in result.fixes_applied]},
        "provenance": {"pdf": bundle.file_path, "sha256": bundle.sha256, "parser": bundle.parser,
                       "bundle": bundle_uri, **(provenance or {})},
        "classification": result.final_classification,
    }


def write_outcome(store: ArtifactStore, ds: str, bundle: DocumentBundle, result: VerificationResult,
                  *, provenance: Mapping[str, str | None] | None = None, run_id: str = "",
                  write_json: JsonWriter | None = None) -> dict[str, str]:
    """The attempts, then the accepted record or the SME packet. Returns the output URIs.
    Timestamps and run ids are volatile: with a writer that skips unchanged content, a re-run
    leaves the files as they were."""
    write_json = write_json or store.write_json
    out = {"attempts": ", ".join(write_attempts(store, ds, result, write_json))}
    bundle_rel = RunStore(store, ds).bundle_rel(bundle.doc_id)
    if result.final_decision == "AUTO_ACCEPT":
        rel = RunStore(store, ds).accepted_rel(bundle.doc_id)
        write_json(rel, accepted_record(bundle.doc_id, bundle, result, bundle_uri=store.uri(bundle_rel),
                                        run_id=run_id, provenance=provenance))
        out["accepted"] = store.uri(rel)
    else:
        packet = build_packet(doc_id=bundle.doc_id, pdf_path=bundle.file_path, total_pages=bundle.total_pages,
                              bundle_path=store.uri(bundle_rel), result=result, run_id=run_id,
                              review_id=review_id(ds, bundle.doc_id, bundle.sha256))
        uri, outcome = write_packet(store, packet, write_json=write_json)
        out["sme_packet"] = uri
        out["sme_packet_outcome"] = outcome
    return out
