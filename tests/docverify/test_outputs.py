"""``verify --out``'s per-document outputs and the accepted record: an accepted document gets its
record with provenance, an escalated one its packet; a reviewed packet is never overwritten."""

from __future__ import annotations

import json

import pytest
from tests.docverify.run_sync import verify_document_sync

from docverify.domain.models import DocumentBundle
from docverify.domain.resources import include_dir
from docverify.judging.judges import OfflineJudge
from docverify.reporting.outputs import write_outcome
from docverify.storage.store import ArtifactStore

DS = "2026-11-20"


def example(name):
    ex = include_dir() / "examples" / name
    bundle = DocumentBundle.model_validate(json.loads((ex / "bundle.json").read_text()))
    return bundle, verify_document_sync(bundle, json.loads((ex / "classification.json").read_text()), OfflineJudge())


def test_an_accepted_document_gets_its_record_and_every_attempt(tmp_path):
    bundle, result = example("spec_auto_retry")
    assert result.final_decision == "AUTO_ACCEPT" and len(result.attempts) >= 2
    out = write_outcome(ArtifactStore(tmp_path), DS, bundle, result, run_id="r1", provenance={"classifier": "given"})
    record = json.loads((tmp_path / "accepted" / DS / f"{bundle.doc_id}.json").read_text())
    assert record["decision"]["final_decision"] == "AUTO_ACCEPT" and record["run_id"] == "r1"
    assert record["provenance"]["sha256"] == bundle.sha256 and record["provenance"]["classifier"] == "given"
    assert record["classification"]["doc_id"] == bundle.doc_id
    for a in result.attempts:
        assert (tmp_path / "runs" / DS / bundle.doc_id / f"attempt_{a.attempt}" / "v5_arbiter_decision.json").exists()
    assert "sme_packet" not in out and not (tmp_path / "sme_packets").exists()


def test_an_escalated_document_gets_a_packet_and_a_reviewed_one_is_kept(tmp_path):
    bundle, result = example("spec_escalate")
    assert result.final_decision == "ESCALATE_TO_SME"
    store = ArtifactStore(tmp_path)
    out = write_outcome(store, DS, bundle, result)
    assert out["sme_packet_outcome"] == "written" and not (tmp_path / "accepted").exists()
    [packet_file] = (tmp_path / "sme_packets").glob("sme_packet_*.json")
    packet = json.loads(packet_file.read_text())
    assert packet["doc_id"] == bundle.doc_id and packet["review_status"] == "pending"
    packet["review_status"] = "reviewed"
    packet_file.write_text(json.dumps(packet))
    again = write_outcome(store, DS, bundle, result)
    assert again["sme_packet_outcome"] == "kept_reviewed"
    assert json.loads(packet_file.read_text())["review_status"] == "reviewed"


@pytest.mark.parametrize("name", ["spec_auto_retry", "spec_escalate"])
def test_outputs_carry_no_page_text(tmp_path, name):
    bundle, result = example(name)
    write_outcome(ArtifactStore(tmp_path), DS, bundle, result)
    accepted = list((tmp_path / "accepted").rglob("*.json"))
    text = " ".join(p.read_text() for p in accepted)
    for page in bundle.pages:
        for para in page.paragraphs:
            if len(para) > 80:
                assert para not in text
