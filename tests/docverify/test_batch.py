"""The DAG's stages as plain functions (no Airflow): faults end in a decision, never in a
failed batch or a silent accept; re-runs are idempotent."""

import json

import pytest
from tests.batch_stages import copy_samples, run_stages
from tests.packets import packet_file
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.reporting import report
from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.stages.layout import layout_local
from docverify.stages.verify import arbiter, plan_shards, verify_shard
from docverify.storage.paths import doc_id_for
from docverify.storage.store import ArtifactStore

DS = "2026-11-20"


class ExplodingClassifier(OfflineJudge):
    """The offline judge whose classifier fails, as a broken LLM endpoint would."""

    name = "test-exploding-classifier"

    async def classify(self, bundle):
        raise ConnectionError("endpoint down")


def make_batch(tmp_path, repo_dir, names):
    copy_samples(tmp_path, DS, names)
    return Batch(store=ArtifactStore(tmp_path), ds=DS, run_id="test")


def run_all(b, judge):
    routes = run_stages(b, judge, shard_size=2)
    return routes, report.write(b)


def test_classifier_fault_escalates_the_document_not_the_batch(tmp_path, repo_dir):
    b = make_batch(tmp_path, repo_dir, ["genomic_brca_ngs", "retry_shares"])
    routes, out = run_all(b, ExplodingClassifier())
    rep = json.loads((tmp_path / "reports" / DS / "batch_report.json").read_text())
    by_id = {d["doc_id"]: d for d in rep["per_document"]}
    assert by_id[sid("genomic_brca_ngs")]["final_decision"] == "ESCALATE_TO_SME"
    assert by_id[sid("genomic_brca_ngs")]["error"] == "CLASSIFICATION_FAILED"
    packet = json.loads(packet_file(tmp_path, sid("genomic_brca_ngs"), ".json").read_text())
    assert packet["error"]["error"] == "CLASSIFICATION_FAILED" and "endpoint down" not in json.dumps(packet)
    # the document with a provided classification is unaffected by the classifier's fault
    assert by_id[sid("retry_shares")]["final_decision"] == "AUTO_ACCEPT"


class FailingEvidenceJudge(OfflineJudge):
    """The offline judge whose V4 judgment fails, as a broken endpoint would."""

    name = "test-failing-v4"

    async def judge(self, agent, bundle, classification):
        if agent == "V4":
            raise ConnectionError("endpoint down")
        return await super().judge(agent, bundle, classification)


def test_missing_verifier_result_is_never_a_silent_accept(tmp_path, repo_dir):
    b = make_batch(tmp_path, repo_dir, ["genomic_brca_ngs"])
    discover(b.fresh())
    layout_local(b.fresh(), workers=1)
    [shard] = plan_shards(b.fresh())
    verify_shard(b.fresh(), shard, FailingEvidenceJudge())  # V4's judgment "failed": no result
    routes = arbiter(b.fresh())
    assert routes.counts["write_sme_packets"] == 1
    rec = b.fresh().rs.result(sid("genomic_brca_ngs"))
    assert [i.code for i in rec.result.attempts[0].issues] == ["VERIFICATION_INCOMPLETE"]
    assert rec.result.final_decision == "ESCALATE_TO_SME"


def test_rerun_is_idempotent_and_reuses(tmp_path, repo_dir):
    b = make_batch(tmp_path, repo_dir, ["note_mts_19", "retry_shares", "corrupt_truncated"])
    run_all(b, OfflineJudge())
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.json") if "_stages" not in p.parts and "reports" not in p.parts}
    stats = layout_local(b, workers=1)
    assert stats.cache_hits == 2  # the corrupt file is parsed again (its error may be transient)
    run_all(b, OfflineJudge())
    after = {p: p.read_bytes() for p in tmp_path.rglob("*.json") if "_stages" not in p.parts and "reports" not in p.parts}
    assert after == before


@pytest.mark.parametrize("max_documents,expected", [(0, 3), (2, 2)])
def test_discover_limits_and_counts(tmp_path, repo_dir, max_documents, expected):
    b = make_batch(tmp_path, repo_dir, ["note_mts_19", "retry_shares", "corrupt_truncated"])
    out = discover(b, max_documents)
    assert out.documents == expected
    manifest = b.manifest()
    assert manifest["skipped_over_max_documents"] == 3 - expected
    assert {d["doc_id"] for d in manifest["documents"] if d["classification_rel"]} <= {sid("retry_shares")}


def test_doc_ids_are_opaque_safe_names():
    # ADR 0050: the id is doc- + 12 hex of the sha256 of the name's bytes, no part of the name;
    # two names that differ only in case (a.pdf / a.PDF) never share an id
    import hashlib
    import re

    doc_id = doc_id_for("incoming/x/Report 7 (final).PDF")
    assert re.fullmatch(r"doc-[0-9a-f]{12}", doc_id), doc_id
    assert doc_id == "doc-" + hashlib.sha256(b"Report 7 (final).PDF").hexdigest()[:12]
    assert doc_id_for("a.pdf") != doc_id_for("a.PDF")
    assert doc_id_for("quest_cbc_panel.pdf") != "quest_cbc_panel"  # a safe stem is no longer its own id
    assert doc_id == doc_id_for("Report 7 (final).PDF")  # stable, whatever the folder
