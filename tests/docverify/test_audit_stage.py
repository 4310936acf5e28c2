"""The nightly audit stage (issue 21): audit packets for a sample of the night's accepts, in the
normal review flow, never withdrawn by the accept stage, answered like any packet and counted as
the false-accept rate by evaluate."""

from __future__ import annotations

import json

from tests.batch_stages import copy_samples, run_stages

from docverify.judging.judges import OfflineJudge
from docverify.reporting import report
from docverify.reporting.evaluate import evaluate_store
from docverify.reporting.evaluate_render import render_text
from docverify.sme.ground_truth import save_review
from docverify.sme.packets import list_pending_reviews
from docverify.stages.audit import audit_sample
from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore

DS = "2026-11-21"
NAMES = ["note_mts_19", "radiology_iu_101", "genomic_brca_ngs", "quest_cbc_panel"]


def _night(tmp_path, run_id="run-1"):
    b = Batch(store=ArtifactStore(tmp_path), ds=DS, run_id=run_id)
    run_stages(b, OfflineJudge(), shard_size=2)
    return b


def _audit_files(root):
    return sorted(p.name for p in (root / "sme_packets").glob("sme_packet_*_audit.json"))


def test_audit_packets_reproducible_kept_and_never_withdrawn(tmp_path):
    copy_samples(tmp_path, DS, NAMES)
    b = _night(tmp_path)
    accepted_before = {p.name: p.read_bytes() for p in (tmp_path / "accepted" / DS).glob("*.json")}
    assert len(accepted_before) == 3  # quest_cbc_panel is escalated

    small = audit_sample(b.fresh(), 0.02)  # at least one when any document was accepted
    assert len(small.sample) == 1 and small.accepted == 3
    assert audit_sample(b.fresh(), 0.02).sample == small.sample  # the same draw, packet kept
    assert audit_sample(b.fresh(), 0.0).sample == []  # 0 = off

    out = audit_sample(b.fresh(), 1.0)  # every accept audited
    assert sorted(out.sample) == sorted(d.removesuffix(".json") for d in accepted_before)
    assert out.kept == small.sample
    files = _audit_files(tmp_path)
    assert len(files) == 3
    packet = json.loads((tmp_path / "sme_packets" / files[0]).read_text())
    assert packet["review_kind"] == "audit" and packet["v5_decision"] == "AUTO_ACCEPT"
    assert packet["review_id"].endswith("_audit") and 0 < packet["audit_inclusion_probability"] <= 1
    assert isinstance(packet["primary_classification"], dict)
    assert (tmp_path / "sme_packets" / files[0].replace(".json", ".html")).exists()
    # the accepted records are untouched
    assert {p.name: p.read_bytes() for p in (tmp_path / "accepted" / DS).glob("*.json")} == accepted_before
    # the audits are in the review flow beside the escalation
    pending = list_pending_reviews(ArtifactStore(tmp_path))
    assert sum(r["review_id"].endswith("_audit") for r in pending) == 3 and len(pending) == 4
    assert {r["review_kind"] for r in pending if r["review_id"].endswith("_audit")} == {"audit"}
    assert pending[0]["review_kind"] == "escalation"  # the escalation first (most severe first)

    # an SME answers one audit: the accepted classification was wrong
    answered = packet["review_id"]
    save_review(ArtifactStore(tmp_path), answered, agrees=False, corrected_dominant_type="Clinical Note"
                if packet["primary_classification"]["dominant_type_overall"] != "Clinical Note" else "Lab Report",
                reviewer="sme1")
    reviewed_before = (tmp_path / "sme_packets" / files[0]).read_bytes()

    # a second run of the night: accept lists and withdraws pending packets of its documents, never audits
    b2 = _night(tmp_path, "run-2")
    assert _audit_files(tmp_path) == files
    again = audit_sample(b2.fresh(), 1.0)
    assert sorted(again.kept) == sorted(out.sample) and again.packets == []
    assert (tmp_path / "sme_packets" / files[0]).read_bytes() == reviewed_before
    assert not any("_audit" in p.name for p in tmp_path.glob("withdrawn/**/*"))


def test_an_answered_audit_correction_changes_the_false_accept_line(tmp_path):
    copy_samples(tmp_path, DS, NAMES)
    b = _night(tmp_path)
    store = ArtifactStore(tmp_path)
    before = evaluate_store(store)
    assert before.n_audited == 0 and before.false_accept.rate is None
    assert "false-accept rate" in render_text(before) or before.n_reviewed == 0

    audit_sample(b.fresh(), 1.0)
    audits = [r for r in list_pending_reviews(store) if r["review_id"].endswith("_audit")]
    first, second = audits[0]["review_id"], audits[1]["review_id"]
    save_review(store, second, agrees=True, reviewer="sme1")
    agreed = evaluate_store(store)
    assert agreed.n_audited == 1 and agreed.false_accept.rate == 0.0 and agreed.false_accept.n == 1
    assert agreed.escalation_precision.denominator == 0  # an audit is not an escalation
    packet = json.loads((tmp_path / "sme_packets" / f"sme_packet_{first}.json").read_text())
    accepted_type = packet["primary_classification"]["dominant_type_overall"]
    save_review(store, first, agrees=False, reviewer="sme2",
                corrected_dominant_type="Clinical Note" if accepted_type != "Clinical Note" else "Lab Report")
    gt = json.loads(next((tmp_path / "ground_truth").glob(f"gt_{first}.json")).read_text())
    assert gt["review_kind"] == "audit"
    figures = evaluate_store(store)
    assert figures.n_audited == 2 and figures.false_accept.corrected == 1 and figures.false_accept.n == 2
    assert 0 < figures.false_accept.rate < 1 and figures.false_accept.ci95_low < figures.false_accept.rate
    assert figures.false_accept_by_night[DS].n == 2 and accepted_type in figures.false_accept_by_type
    assert figures.false_accept_errors == {"type": 1}
    text = render_text(figures)
    assert "false-accept rate" in text and "1 corrected of n=2 audited" in text
    assert "False accepts per document type" in text
    # the night's batch report: the sample and the false-accept rate of the night and overall
    report.write(b.fresh())
    rep = json.loads((tmp_path / "reports" / DS / "batch_report.json").read_text())
    assert len(rep["audit"]["sample"]) == 3 and rep["audit"]["false_accept_night"]["n"] == 2
    assert rep["feedback"]["false_accept"]["corrected"] == 1
    assert sum("audit_packet" in d["outputs"] for d in rep["per_document"]) == 3
    md = (tmp_path / "reports" / DS / "batch_report.md").read_text()
    assert "## Audit of accepted documents" in md and "1 corrected of n=2 audited" in md
    assert "Audit of accepted documents" in (tmp_path / "reports" / DS / "batch_report.html").read_text()


def test_trend_of_the_last_nights(tmp_path):
    """reports/trend.json and .csv from the stored reports, one row per night, in the report too."""
    first, second = "2026-11-22", "2026-11-23"
    for ds in (first, second):
        copy_samples(tmp_path, ds, NAMES[:2] + NAMES[3:])
        b = Batch(store=ArtifactStore(tmp_path), ds=ds, run_id=f"run-{ds}")
        run_stages(b, OfflineJudge(), shard_size=2)
        audit_sample(b.fresh(), 0.02)
        out = report.write(b.fresh())
    trend = json.loads((tmp_path / "reports" / "trend.json").read_text())
    assert [r["night"] for r in trend["nights"]] == [first, second]
    row = trend["nights"][-1]
    assert row["documents"] == 3 and row["escalated"] == 1 and row["audited"] == 1
    assert row["escalation_rate"] == round(1 / 3, 4) and row["false_accept_rate"] is None
    csv_lines = (tmp_path / "reports" / "trend.csv").read_text().splitlines()
    assert csv_lines[0].startswith("night,documents,") and len(csv_lines) == 3
    assert out["trend"]["csv"].endswith("reports/trend.csv")
    md = (tmp_path / "reports" / second / "batch_report.md").read_text()
    assert "## Trend over the last nights" in md and f"| {first} | 3 |" in md
