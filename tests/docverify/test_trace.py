"""One document's trail (docverify.reporting.trace, ADR 0041): assembled from the store only,
across nights and both Dags, each step naming its task instance; no page text in it."""

from __future__ import annotations

import json
import shutil

import pytest
from tests.batch_stages import copy_samples, run_stages
from tests.phi_scan import leaks, night_phi
from tests.sample_ids import sid

from docverify.judging.judges import OfflineJudge
from docverify.reporting import report
from docverify.reporting.trace import PHI_FIELDS, UnknownDocument, document_trace, render_text
from docverify.sme.ground_truth import save_review
from docverify.sme.packets import resolve_key
from docverify.stages.audit import audit_sample
from docverify.stages.common import Batch
from docverify.stages.discover import discover
from docverify.storage.limits import InputError
from docverify.storage.store import ArtifactStore

DS, LATER = "2026-11-21", "2026-11-22"
NAMES = ("fabricated_evidence", "retry_shares", "corrupt_truncated", "genomic_brca_ngs", "note_mts_19")
CHANNEL = "airflow-hitl:sme_review/manual__2026-11-21T09:00:00+00:00/review[2]"


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    """A night of five samples (escalated, retried, unreadable, accepted), its audit of every
    accept, its report, and the SME's answer to fabricated_evidence given twice (two versions)."""
    root = tmp_path_factory.mktemp("trace") / "root"
    copy_samples(root, DS, NAMES)
    b = Batch(store=ArtifactStore(root), ds=DS, run_id="night-1")
    run_stages(b, OfflineJudge())
    audit_sample(b.fresh(), 1.0)
    report.write(b.fresh())
    store = ArtifactStore(root)
    key = resolve_key(store, sid("fabricated_evidence"))
    save_review(store, key, agrees=True, reviewer="dr_a", reviewed_at="2026-11-21T10:00:00Z", channel=CHANNEL)
    save_review(store, key, agrees=True, reviewer="dr_b", reviewed_at="2026-11-21T11:00:00Z", channel="notebook")
    return root, key


def _kinds(trace) -> list[str]:
    return [s.kind for s in trace.steps]


def test_an_escalated_answered_document_from_discovery_to_ground_truth(night):
    root, key = night
    trace = document_trace(ArtifactStore(root), sid("fabricated_evidence"))
    assert trace.nights == [DS] and trace.first_seen == DS
    assert _kinds(trace) == ["discover", "layout", "verify", "route", "sme_packet", "answer", "answer", "batch_report"]
    manifest = json.loads((root / "runs" / DS / "_manifest.json").read_text())
    sha = next(d["sha256"] for d in manifest["documents"] if d["doc_id"] == sid("fabricated_evidence"))
    first = trace.steps[0]
    assert first.first_seen and first.sha256 == sha and first.input_uri.endswith("/fabricated_evidence.pdf")
    verify = trace.steps[2]
    issues = {i.code: i for i in verify.attempts[0].issues}
    assert issues["EVIDENCE_FABRICATED"].severity == "BLOCKER" and issues["EVIDENCE_FABRICATED"].pages == [3]
    assert verify.task.task_id == "verify" and verify.task.map_index == 0
    route = trace.steps[3]
    assert (route.decision, route.rule, route.route) == ("ESCALATE_TO_SME", 1, "write_sme_packets")
    packet = trace.steps[4]
    assert packet.review_id == key and packet.review_status == "reviewed" and packet.ground_truth_version == 2
    assert packet.task.task_id == "write_sme_packets" and packet.task.run_id == "night-1"
    hitl, notebook = trace.steps[5:7]
    assert (hitl.reviewer, hitl.ground_truth_version, hitl.ground_truth_source) == ("dr_a", 1, "SME_VALIDATED")
    assert (hitl.task.dag_id, hitl.task.task_id, hitl.task.map_index) == ("sme_review", "review", 2)
    assert hitl.task.ui_path() == ("/dags/sme_review/runs/manual__2026-11-21T09%3A00%3A00%2B00%3A00/tasks/review/"
                                   "mapped/2")
    assert (notebook.reviewer, notebook.ground_truth_version, notebook.task) == ("dr_b", 2, None)
    # the night's tasks take the run of the night's report (the stage records carry none)
    for s in trace.steps[:4] + trace.steps[-1:]:
        assert s.task.dag_id == "clinical_doc_verification" and s.task.run_id == "night-1", s
        assert s.task.run_id_from == "batch report"
    assert trace.steps[-1].task.ui_path() == "/dags/clinical_doc_verification/runs/night-1/tasks/batch_report"


def test_the_retry_the_layout_error_and_the_audit(night):
    root, _ = night
    store = ArtifactStore(root)
    retried = document_trace(store, sid("retry_shares"))
    assert _kinds(retried)[:6] == ["discover", "layout", "verify", "route", "auto_fix_retry", "accept"]
    fix = retried.steps[4]
    assert fix.task.task_id == "auto_fix_retry" and fix.task.map_index == 0
    assert [a.attempt for a in fix.attempts] == [1] and fix.decision == "AUTO_ACCEPT"
    assert any("SEGMENT_SHARE_SUM" in f for f in retried.steps[2].attempts[0].fixes_after)
    assert "audit_packet" in _kinds(retried)  # every accept audited (rate 1.0)
    broken = document_trace(store, sid("corrupt_truncated"))
    layout = next(s for s in broken.steps if s.kind == "layout")
    assert layout.error == "CORRUPT" and (layout.task.task_id, layout.task.map_index) == ("layout_parse", 0)
    assert layout.record.endswith("/error.json")
    assert next(s for s in broken.steps if s.kind == "route").rule is None


def test_a_later_night_a_withdrawal_and_a_night_without_a_report(night, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(night[0], root)
    # the same file comes again on a later night: the trail spans both, first seen on the first
    copy_samples(root, LATER, ["genomic_brca_ngs"])
    run_stages(Batch(store=ArtifactStore(root), ds=LATER, run_id="night-2"), OfflineJudge())
    # and leaves the first night's folder before a re-run of that night: its accepted record is withdrawn
    (root / "incoming" / DS / "genomic_brca_ngs.pdf").unlink()
    discover(Batch(store=ArtifactStore(root), ds=DS, run_id="night-1-again"))
    trace = document_trace(ArtifactStore(root), sid("genomic_brca_ngs"))
    assert trace.nights == [DS, LATER] and trace.first_seen == DS
    assert [s.first_seen for s in trace.steps if s.kind == "discover"] == [True, False]
    gone = [s for s in trace.steps if s.kind == "withdrawn"]
    assert gone and gone[0].task.task_id == "discover" and gone[0].task.run_id == "night-1-again"
    assert "no longer in the incoming folder" in gone[0].withdrawn_reason
    later = [s for s in trace.steps if s.night == LATER]
    assert later and all(s.task is None or s.task.run_id in (None, "night-2") for s in later)
    discovered = next(s for s in later if s.kind == "discover")
    assert discovered.task.run_id is None  # no report of that night names its run: the date's runs
    assert discovered.task.ui_path() == ("/dags/clinical_doc_verification/runs?logical_date_gte=2026-11-22T00%3A00%3A00Z"
                                         "&logical_date_lte=2026-11-22T23%3A59%3A59Z")


def test_an_unknown_or_unsafe_doc_id(night):
    store = ArtifactStore(night[0])
    with pytest.raises(UnknownDocument, match="batch report") as err:
        document_trace(store, "no_such_document")
    assert err.value.to_dict()["error"] == "UNKNOWN_DOCUMENT"
    for bad in ("../etc", "a/b", ".hidden", ""):
        with pytest.raises(InputError):
            document_trace(store, bad)


def test_redacted_blanks_what_may_name_the_patient(night):
    trace = document_trace(ArtifactStore(night[0]), sid("corrupt_truncated"))
    assert any(s.input_uri for s in trace.steps) and any(s.error_message for s in trace.steps)
    shown = trace.redacted()
    assert {"input_uri", "file_name", "error_message"} <= set(shown.hidden)
    assert not any(getattr(s, f) for s in shown.steps for f in PHI_FIELDS)
    text = json.dumps(shown.model_dump(mode="json"))
    assert "corrupt_truncated.pdf" not in text and "file://" not in text


def test_no_page_text_in_the_trace_of_any_document_of_the_sample_night(tmp_path):
    """Every sample document through the night, its audit and report: no fragment of page text,
    evidence, reasoning or issue message in its trace (text or JSON)."""
    root = tmp_path / "root"
    copy_samples(root, DS)
    b = Batch(store=ArtifactStore(root), ds=DS, run_id="sample-night")
    run_stages(b, OfflineJudge())
    audit_sample(b.fresh(), 0.02)
    report.write(b.fresh())
    phi = night_phi(root)
    assert len(phi) > 100, len(phi)
    docs = [p.name for p in (root / "runs" / DS).iterdir() if not p.name.startswith("_")]
    assert len(docs) == len(list((root / "incoming" / DS).glob("*.pdf")))
    for doc in docs:
        trace = document_trace(ArtifactStore(root), doc)
        assert trace.steps and trace.steps[0].kind == "discover"
        shown = json.dumps(trace.model_dump(mode="json"), ensure_ascii=False) + render_text(trace)
        assert not leaks(shown, phi), (doc, leaks(shown, phi)[:3])
