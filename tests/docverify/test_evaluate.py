"""Feedback figures (docverify.reporting.evaluate): hand-computed stores, the CLI, the batch report's
section, and the offline classifier on the labelled real corpus."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from docverify.domain.models import (
    DOC_TYPES,
    ClassificationOutput,
    GroundTruthRecord,
    SMEIssueSummary,
    SMEPacket,
)
from docverify.reporting import report
from docverify.reporting.evaluate import (
    FeedbackFigures,
    Ratio,
    evaluate_labelled_corpus,
    evaluate_store,
)
from docverify.reporting.evaluate_render import render_markdown, render_text
from docverify.stages.common import Batch
from docverify.storage.store import ArtifactStore

# --------------------------------------------------------------------------- fixtures


def classification(doc_id: str, dominant: str, segments: list[tuple[int, int, str]]) -> dict:
    """A valid ClassificationOutput: each segment PRIMARY for its type, the rest NO_EVIDENCE."""
    segs = []
    for i, (a, b, t) in enumerate(segments, 1):
        segs.append({
            "segment_index": i, "page_start": a, "page_end": b, "segment_page_count": b - a + 1,
            "dominant_type": t, "reasoning": "",
            "classifications": [{"doc_type": d, "presence_level": "PRIMARY" if d == t else "NO_EVIDENCE",
                                 "confidence": 0.9 if d == t else 0.0, "segment_share": 1.0 if d == t else 0.0,
                                 "top_evidence": []} for d in DOC_TYPES]})
    mixture = [{"doc_type": d, "presence_level": "PRIMARY" if d == dominant else "NO_EVIDENCE",
                "overall_share": 1.0 if d == dominant else 0.0} for d in DOC_TYPES]
    out = ClassificationOutput(doc_id=doc_id, dominant_type_overall=dominant, number_of_segments=len(segs),
                               segments=segs, document_mixture=mixture)
    return out.model_dump(mode="json")


def put_packet(store: ArtifactStore, doc_id: str, primary: dict | None, codes: list[str], rule: int,
               total_pages: int, error: dict | None = None) -> None:
    issues = [SMEIssueSummary(issue_id=f"V3-{i:04d}", severity="MAJOR", agent="V3", code=c, message="m")
              for i, c in enumerate(codes, 1)]
    packet = SMEPacket(doc_id=doc_id, pdf_filename=f"{doc_id}.pdf", pdf_path=f"/in/{doc_id}.pdf",
                       total_pages=total_pages, bundle_path="", v5_rule=rule, v5_reason="r",
                       total_issues=len(issues), issues_summary=issues, primary_classification=primary,
                       error=error, review_status="reviewed", created_at="2026-11-21T02:00:00Z")
    store.write_json(ArtifactStore.packet_rel(doc_id), packet)


def put_gt(store: ArtifactStore, doc_id: str, source: str, gt: dict, version: int = 1,
           corrected: str | None = None) -> None:
    rec = GroundTruthRecord(doc_id=doc_id, ground_truth_source=source, ground_truth_classification=gt,
                            corrected_dominant_type=corrected, reviewer="sme1", reviewed_at="2026-11-22T09:00:00Z",
                            version=version)
    store.write_json(ArtifactStore.ground_truth_rel(doc_id, version), rec)


PATH, GEN, NOTE, RAD, OTHER = ("Pathology Report", "Genomic Report", "Clinical Note", "Radiology Report", "Other")


def build_scenario(root) -> ArtifactStore:
    """Seven reviewed documents; the expected figures are worked out by hand in the tests."""
    s = ArtifactStore(root)
    # A: validated as is; EVIDENCE_WEAK twice in the packet (counts once)
    a = classification("A", PATH, [(1, 3, PATH)])
    put_packet(s, "A", a, ["TRAP_HEADER_FOOTER_EVIDENCE", "EVIDENCE_WEAK", "EVIDENCE_WEAK"], rule=3, total_pages=3)
    put_gt(s, "A", "SME_VALIDATED", a)
    # B: the Quest trap — dominant type corrected to Other, with segments
    put_packet(s, "B", classification("B", GEN, [(1, 2, GEN)]), ["TRAP_ROUTINE_LAB_GENOMIC"], rule=1, total_pages=2)
    put_gt(s, "B", "SME_CORRECTED", classification("B", OTHER, [(1, 2, OTHER)]), corrected=OTHER)
    # C: split corrected — the boundary moves from page 3 to page 4
    put_packet(s, "C", classification("C", GEN, [(1, 2, GEN), (3, 4, NOTE)]), ["EVIDENCE_WEAK"], rule=4, total_pages=4)
    put_gt(s, "C", "SME_CORRECTED", classification("C", GEN, [(1, 3, GEN), (4, 4, NOTE)]))
    # D: the primary covers page 1 of 3: pages 2-3 are wrong
    put_packet(s, "D", classification("D", RAD, [(1, 1, RAD)]), ["SEGMENT_SHARE_SUM"], rule=4, total_pages=3)
    put_gt(s, "D", "SME_CORRECTED", classification("D", RAD, [(1, 3, RAD)]))
    # E: parse error, no primary: counted apart
    put_packet(s, "E", None, [], rule=1, total_pages=0, error={"error": "CORRUPT", "message": "truncated"})
    put_gt(s, "E", "SME_CORRECTED", classification("E", NOTE, [(1, 1, NOTE)]), corrected=NOTE)
    # F: v1 validated, v2 corrected — v2 counts
    f = classification("F", RAD, [(1, 1, RAD)])
    put_packet(s, "F", f, ["TRAP_CONTEXT"], rule=3, total_pages=1)
    put_gt(s, "F", "SME_VALIDATED", f, version=1)
    put_gt(s, "F", "SME_CORRECTED", classification("F", NOTE, [(1, 1, NOTE)]), version=2, corrected=NOTE)
    # G: no packet (not escalated): the newest run's classification is the primary
    s.write_json("runs/2026-11-19/G/classification.json", classification("G", NOTE, [(1, 2, NOTE)]))
    s.write_json("runs/2026-11-20/G/classification.json", classification("G", PATH, [(1, 2, PATH)]))
    put_gt(s, "G", "SME_VALIDATED", classification("G", PATH, [(1, 2, PATH)]))
    return s


# --------------------------------------------------------------------------- the figures


def test_scenario_counts_and_accuracy(tmp_path):
    f = evaluate_store(build_scenario(tmp_path))
    assert (f.n_reviewed, f.n_validated, f.n_corrected) == (7, 2, 5)
    assert (f.n_primary_missing, f.primary_missing_doc_ids) == (1, ["E"])
    acc = f.accuracy
    assert acc.documents == 6  # E left out
    # dominant: A ok, B wrong, C ok, D ok, F wrong (v2), G ok (newest run)
    assert (acc.dominant_type_accuracy.numerator, acc.dominant_type_accuracy.denominator) == (4, 6)
    # pages: A 3/3, B 0/2, C 3/4, D 1/3, F 0/1, G 2/2
    assert (acc.page_accuracy.numerator, acc.page_accuracy.denominator) == (9, 15)
    assert acc.pages_not_covered == 2 and acc.pages_without_truth == 0
    assert acc.page_accuracy_documents == 6
    assert acc.page_accuracy_document_mean == pytest.approx((1 + 0 + 0.75 + 1 / 3 + 0 + 1) / 6)
    # split: only A and G exact
    assert (acc.split_accuracy.numerator, acc.split_accuracy.denominator) == (2, 6)
    # boundaries: only C has one each side, at different pages
    assert (acc.boundary_precision.numerator, acc.boundary_precision.denominator) == (0, 1)
    assert (acc.boundary_recall.numerator, acc.boundary_recall.denominator) == (0, 1)
    assert acc.documents_without_segment_truth == 0
    rows = {r.doc_id: r for r in f.per_document}
    assert rows["F"].version == 2 and rows["F"].ground_truth_source == "SME_CORRECTED"
    assert rows["G"].escalated is False and rows["G"].primary_dominant_type == PATH
    assert rows["E"].primary_missing is True
    assert f.unreadable == []


def test_scenario_escalation_precision_and_false_alarms(tmp_path):
    f = evaluate_store(build_scenario(tmp_path))
    # escalated with a primary: A B C D F (G has no packet, E no primary); corrected: B C D F
    assert f.n_escalated_reviewed == 5
    assert (f.escalation_precision.numerator, f.escalation_precision.denominator) == (4, 5)
    assert f.escalation_precision.value == pytest.approx(0.8)
    by_rule = {k: (v.n, v.validated, v.corrected) for k, v in f.escalation_by_rule.items()}
    assert by_rule == {"rule 1": (1, 0, 1), "rule 3": (2, 1, 1), "rule 4": (2, 0, 2)}
    codes = {k: (v.n, v.validated, v.corrected, v.false_alarm_rate) for k, v in f.false_alarm_by_code.items()}
    assert codes == {
        "EVIDENCE_WEAK": (2, 1, 1, 0.5),  # A (twice in its packet: once here) and C
        "TRAP_HEADER_FOOTER_EVIDENCE": (1, 1, 0, 1.0),
        "TRAP_ROUTINE_LAB_GENOMIC": (1, 0, 1, 0.0),
        "SEGMENT_SHARE_SUM": (1, 0, 1, 0.0),
        "TRAP_CONTEXT": (1, 0, 1, 0.0),  # F's latest answer is the correction
    }
    assert set(f.false_alarm_by_trap) == {"TRAP_HEADER_FOOTER_EVIDENCE", "TRAP_ROUTINE_LAB_GENOMIC", "TRAP_CONTEXT"}
    assert f.false_alarm_by_trap["TRAP_HEADER_FOOTER_EVIDENCE"].false_alarm_rate == 1.0
    json.dumps(f.model_dump(mode="json"))  # serialisable
    assert FeedbackFigures.model_validate_json(f.model_dump_json()) == f


def test_v2_overrides_v1_in_either_direction(tmp_path):
    s = ArtifactStore(tmp_path)
    prim = classification("X", PATH, [(1, 1, PATH)])
    put_packet(s, "X", prim, ["TRAP_CONTEXT"], rule=3, total_pages=1)
    put_gt(s, "X", "SME_CORRECTED", classification("X", NOTE, [(1, 1, NOTE)]), corrected=NOTE)
    assert evaluate_store(s).accuracy.dominant_type_accuracy.numerator == 0
    put_gt(s, "X", "SME_VALIDATED", prim, version=2)
    f = evaluate_store(s)
    assert (f.n_reviewed, f.n_validated, f.n_corrected) == (1, 1, 0)
    assert f.accuracy.dominant_type_accuracy.numerator == 1
    assert f.false_alarm_by_trap["TRAP_CONTEXT"].false_alarm_rate == 1.0
    put_gt(s, "X", "SME_CORRECTED", classification("X", NOTE, [(1, 1, NOTE)]), version=10, corrected=NOTE)
    assert evaluate_store(s).per_document[0].version == 10  # numeric order, not text order (v10 > v2)


def test_dominant_only_correction_has_no_segment_truth(tmp_path):
    """A correction of the dominant type written over the primary's unchanged segments must not
    count the primary's pages as right."""
    s = ArtifactStore(tmp_path)
    prim = classification("Q", GEN, [(1, 2, GEN)])
    put_packet(s, "Q", prim, ["TRAP_ROUTINE_LAB_GENOMIC"], rule=1, total_pages=2)
    gt = dict(prim, dominant_type_overall=OTHER)
    put_gt(s, "Q", "SME_CORRECTED", gt, corrected=OTHER)
    f = evaluate_store(s)
    assert f.accuracy.dominant_type_accuracy.show() == "0.0% (0/1)"
    assert f.accuracy.documents_without_segment_truth == 1
    assert f.accuracy.page_accuracy.value is None and f.accuracy.split_accuracy.value is None
    # corrected_dominant_type wins over a stale dominant_type_overall in the record
    put_gt(s, "Q", "SME_CORRECTED", prim, version=2, corrected=OTHER)
    assert evaluate_store(s).per_document[0].truth_dominant_type == OTHER


def test_truth_pages_outside_truth_segments_are_left_out(tmp_path):
    s = ArtifactStore(tmp_path)
    put_packet(s, "P", classification("P", PATH, [(1, 4, PATH)]), [], rule=2, total_pages=4)
    put_gt(s, "P", "SME_CORRECTED", classification("P", PATH, [(1, 2, PATH)]))
    acc = evaluate_store(s).accuracy
    assert (acc.page_accuracy.numerator, acc.page_accuracy.denominator, acc.pages_without_truth) == (2, 2, 2)


def test_malformed_primary_counts_as_wrong_not_missing(tmp_path):
    s = ArtifactStore(tmp_path)
    broken = {"doc_id": "M", "dominant_type_overall": 7, "segments": [{"page_start": "1"}]}
    put_packet(s, "M", broken, ["SCHEMA_INVALID"], rule=1, total_pages=2)
    put_gt(s, "M", "SME_CORRECTED", classification("M", NOTE, [(1, 2, NOTE)]))
    f = evaluate_store(s)
    assert f.n_primary_missing == 0
    acc = f.accuracy
    assert acc.dominant_type_accuracy.show() == "0.0% (0/1)"
    assert (acc.page_accuracy.numerator, acc.pages_not_covered) == (0, 2)
    assert acc.split_accuracy.show() == "0.0% (0/1)"


def test_empty_store_and_zero_denominators(tmp_path):
    f = evaluate_store(ArtifactStore(tmp_path))
    assert f.n_reviewed == 0 and f.per_document == [] and f.unreadable == []
    for r in (f.escalation_precision, f.accuracy.dominant_type_accuracy, f.accuracy.page_accuracy,
              f.accuracy.split_accuracy, f.accuracy.boundary_precision, f.accuracy.boundary_recall):
        assert r.value is None and r.show() == "n/a (0/0)"
    assert f.accuracy.page_accuracy_document_mean is None
    assert "no ground truth yet (n=0" in render_text(f)
    assert "No ground truth yet (n=0" in render_markdown(f)
    # only a parse-error document: reviewed, but every ratio still has no denominator
    s = ArtifactStore(tmp_path)
    put_packet(s, "E", None, [], rule=1, total_pages=0, error={"error": "CORRUPT", "message": "x"})
    put_gt(s, "E", "SME_CORRECTED", classification("E", NOTE, [(1, 1, NOTE)]))
    f = evaluate_store(s)
    assert (f.n_reviewed, f.n_primary_missing, f.escalation_precision.value) == (1, 1, None)
    text = render_text(f)
    assert "n/a (0/0)" in text and "primary classification missing (not scored)" in text


def test_ratio():
    assert Ratio.of(1, 3).show() == "33.3% (1/3)" and Ratio.of(0, 0).value is None


def test_broken_files_are_named_and_skipped(tmp_path):
    s = build_scenario(tmp_path)
    gt_dir = tmp_path / "ground_truth"
    (gt_dir / "gt_H.json").write_text("{not json")  # H: only a broken file
    (gt_dir / "gt_A.v2.json").write_text('{"doc_id": "A", "ground_truth_source": "MAYBE", '
                                         '"ground_truth_classification": {"note": "SECRET PHI TEXT"}, '
                                         '"reviewer": "r", "reviewed_at": "t"}')
    (gt_dir / "gt_B.v2.json").write_bytes(b"\xff\xfe")
    (gt_dir / "index.json").write_text("{}")
    (gt_dir / "gt_Z.json").write_text(
        GroundTruthRecord(doc_id="other", ground_truth_source="SME_VALIDATED", ground_truth_classification={},
                          reviewer="r", reviewed_at="t").model_dump_json())
    f = evaluate_store(s)
    assert f.n_reviewed == 7  # H and Z skipped; A and B fall back to their readable v1
    rows = {r.doc_id: r for r in f.per_document}
    assert rows["A"].version == 1 and rows["B"].version == 1
    bad = {u.uri.rsplit("/", 1)[-1]: u.reason for u in f.unreadable}
    assert set(bad) == {"gt_H.json", "gt_A.v2.json", "gt_B.v2.json", "index.json", "gt_Z.json"}
    assert "not valid JSON" in bad["gt_H.json"]
    assert "ground_truth_source" in bad["gt_A.v2.json"] and "SECRET" not in json.dumps(bad)
    assert "UTF-8" in bad["gt_B.v2.json"] and "holds review 'other'" in bad["gt_Z.json"]
    assert "gt_H.json" in render_text(f) and "gt_H.json" in render_markdown(f)


def test_broken_packet_falls_back_to_the_run_classification(tmp_path):
    s = ArtifactStore(tmp_path)
    s.write_text(ArtifactStore.packet_rel("K"), "[1, 2")
    s.write_json("runs/2026-11-20/K/classification.json", classification("K", RAD, [(1, 1, RAD)]))
    put_gt(s, "K", "SME_VALIDATED", classification("K", RAD, [(1, 1, RAD)]))
    f = evaluate_store(s)
    assert f.accuracy.dominant_type_accuracy.show() == "100.0% (1/1)"
    assert f.n_escalated_reviewed == 0 and [u.uri.rsplit("/", 1)[-1] for u in f.unreadable] == ["sme_packet_K.json"]


def test_render_markdown_and_text_carry_the_figures(tmp_path):
    f = evaluate_store(build_scenario(tmp_path))
    md = render_markdown(f, level=2)
    assert md.startswith("## Feedback from SME reviews")
    assert "| escalation precision (escalations the SME corrected) | 80.0% (4/5) |" in md
    assert "| EVIDENCE_WEAK | 2 | 1 | 1 | 50.0% |" in md
    assert "### False alarms per trap (V3 TRAP_* codes)" in md
    text = render_text(f)
    assert "60.0% (9/15)" in text and "66.7% (4/6)" in text and "33.3% (2/6)" in text


# --------------------------------------------------------------------------- CLI


def run_cli(repo_dir, *args):
    env = {**os.environ, "PYTHONPATH": f"{repo_dir / 'plugins'}"}
    p = subprocess.run([sys.executable, "-m", "docverify", "evaluate", *map(str, args)], cwd=repo_dir, env=env,
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_cli_text_and_json(repo_dir, tmp_path):
    build_scenario(tmp_path)
    p = run_cli(repo_dir, "--root", tmp_path)
    assert p.returncode == 0, p.stderr
    assert "escalation precision" in p.stdout and "80.0% (4/5)" in p.stdout and "TRAP_ROUTINE_LAB_GENOMIC" in p.stdout
    p = run_cli(repo_dir, "--root", tmp_path.as_uri(), "--json")
    assert p.returncode == 0
    out = json.loads(p.stdout)
    assert out["store"]["n_reviewed"] == 7 and out["labelled_corpus"] is None
    assert out["store"]["accuracy"]["page_accuracy"] == {"numerator": 9, "denominator": 15, "value": 0.6}


@pytest.mark.slow
def test_cli_empty_store_and_broken_file(repo_dir, tmp_path):
    p = run_cli(repo_dir, "--root", tmp_path)
    assert p.returncode == 0 and "no ground truth yet" in p.stdout and "n=0" in p.stdout
    (tmp_path / "ground_truth").mkdir()
    (tmp_path / "ground_truth" / "gt_broken.json").write_text("{")
    p = run_cli(repo_dir, "--root", tmp_path)
    assert p.returncode == 0
    assert "unreadable" in p.stdout and "gt_broken.json" in p.stdout and "no ground truth yet" in p.stdout
    p = run_cli(repo_dir, "--root", tmp_path, "--json")
    assert [u["uri"].rsplit("/", 1)[-1] for u in json.loads(p.stdout)["store"]["unreadable"]] == ["gt_broken.json"]


def test_cli_bad_root_and_bad_corpus(repo_dir, tmp_path):
    p = run_cli(repo_dir, "--root", tmp_path / "nope")
    assert p.returncode == 2 and json.loads(p.stdout)["error"] == "ROOT_NOT_FOUND"
    p = run_cli(repo_dir, "--root", tmp_path, "--corpus", tmp_path)
    assert p.returncode == 2 and json.loads(p.stdout)["error"] == "CORPUS_NOT_FOUND"


# --------------------------------------------------------------------------- batch report


def _empty_batch(tmp_path) -> Batch:
    b = Batch(store=ArtifactStore(tmp_path), ds="2026-11-21", run_id="t")
    b.store.write_json(b.manifest_rel, {"ds": b.ds, "documents": []})
    return b


def test_batch_report_has_the_feedback_section(tmp_path):
    build_scenario(tmp_path)
    b = _empty_batch(tmp_path)
    report.write(b)
    base = tmp_path / "reports" / b.ds / "batch_report"
    rep = json.loads(base.with_suffix(".json").read_text())
    fb = rep["feedback"]
    assert fb["n_reviewed"] == 7 and fb["escalation_precision"]["numerator"] == 4
    assert "per_document" not in fb  # the store-wide rows stay out of the nightly report
    md = base.with_suffix(".md").read_text()
    assert "## Feedback from SME reviews" in md and "80.0% (4/5)" in md
    html = base.with_suffix(".html").read_text()
    assert "<h2>Feedback from SME reviews</h2>" in html and "80.0% (4/5)" in html and html.rstrip().endswith("</html>")
    # a re-run with the same ground truth leaves the JSON byte for byte
    before = base.with_suffix(".json").read_bytes()
    report.write(b)
    assert base.with_suffix(".json").read_bytes() == before


def test_batch_report_without_ground_truth_and_when_evaluation_fails(tmp_path, monkeypatch):
    b = _empty_batch(tmp_path)
    rep = report.build(b)
    assert rep["feedback"]["n_reviewed"] == 0
    assert "No ground truth yet" in report.to_markdown(rep) and "No ground truth yet" in report.to_html(rep)

    def boom(store):
        raise PermissionError("denied")

    monkeypatch.setattr("docverify.reporting.evaluate.evaluate_store", boom)
    rep = report.build(b)
    assert rep["feedback"]["error"] == "PermissionError"
    assert "not computed: `PermissionError`" in report.to_markdown(rep)
    assert "Feedback from SME reviews" in report.to_html(rep)
    old = {k: v for k, v in rep.items() if k != "feedback"}  # a report built before the section existed
    assert "Feedback" not in report.to_markdown(old)


# --------------------------------------------------------------------------- labelled real corpus


def _bench_module(repo_dir):
    path = repo_dir / "scripts" / "bench_classifier.py"
    spec = importlib.util.spec_from_file_location("bench_classifier_for_evaluate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_labelled_corpus_figures(corpora_dir, repo_dir, tmp_path):
    c = evaluate_labelled_corpus(corpora_dir)
    assert c.documents == 281 and c.implementation == "offline-lexicon-v14"
    acc = c.accuracy
    # Measured (offline-lexicon-v3 / lexicon-v3): dominant type 99.6% (280/281) — the bench's
    # figure —, pages 99.0% (416/420), split 98.6% (277/281); v2 had 97.9%, 97.9%, 96.8%.
    # Floors as the bench's: 0.94.
    assert acc.dominant_type_accuracy.value >= 0.94
    assert acc.page_accuracy.value >= 0.94 and acc.page_accuracy.denominator == c.pages
    assert acc.split_accuracy.value >= 0.90
    assert acc.boundary_recall.denominator == 0 and acc.boundary_recall.value is None  # one label per text
    for corpus, figures in c.per_corpus.items():
        assert figures.dominant_type_accuracy.value >= 0.85, corpus
    # the same code path as scripts/bench_classifier.py: the same pages and the same answers
    bench = _bench_module(repo_dir)
    res = bench.evaluate(bench.load_records(corpora_dir))
    assert acc.dominant_type_accuracy.numerator == res["correct"] and c.pages == res["pages"]
    assert sorted(m.id for m in c.misclassified) == sorted(e["id"] for e in res["errors"])
    # the corpus figures reach the CLI, text and JSON
    p = run_cli(repo_dir, "--root", tmp_path, "--corpus", corpora_dir / "text_labeled", "--json")
    assert p.returncode == 0
    assert json.loads(p.stdout)["labelled_corpus"]["accuracy"]["dominant_type_accuracy"]["numerator"] == res["correct"]


# --------------------------------------------------------------------------- Cannot classify


def put_unclassifiable(store: ArtifactStore, doc_id: str, reason: str, *, review_kind: str = "escalation",
                       version: int = 1) -> None:
    rec = GroundTruthRecord(doc_id=doc_id, ground_truth_source="SME_UNCLASSIFIABLE", review_kind=review_kind,
                            ground_truth_classification=None, unclassifiable_reason=reason,
                            correction_notes="blurred scan", reviewer="sme1", reviewed_at="2026-11-22T09:00:00Z",
                            version=version)
    store.write_json(ArtifactStore.ground_truth_rel(doc_id, version), rec)


def test_cannot_classify_is_counted_apart_from_every_figure(tmp_path):
    s = build_scenario(tmp_path)
    before = evaluate_store(s)
    put_packet(s, "U", classification("U", PATH, [(1, 1, PATH)]), ["TRAP_CONTEXT"], rule=3, total_pages=1)
    put_unclassifiable(s, "U", "needs a re-scan")
    put_unclassifiable(s, "W", "wrong file", review_kind="audit")  # an audit: not a false accept either
    f = evaluate_store(s)
    assert (f.n_reviewed, f.n_validated, f.n_corrected, f.n_unclassifiable) == (
        before.n_reviewed + 2, before.n_validated, before.n_corrected, 2)
    assert [(u.doc_id, u.reason, u.review_kind) for u in f.unclassifiable] == [
        ("U", "needs a re-scan", "escalation"), ("W", "wrong file", "audit")]
    assert f.accuracy == before.accuracy and f.escalation_precision == before.escalation_precision
    assert f.false_alarm_by_code == before.false_alarm_by_code and f.escalation_by_rule == before.escalation_by_rule
    assert (f.n_audited, f.false_accept) == (before.n_audited, before.false_accept)
    assert FeedbackFigures.model_validate_json(f.model_dump_json()) == f
    text = render_text(f)
    assert "cannot classify (SME_UNCLASSIFIABLE; not scored)" in text and "needs a re-scan: 1, wrong file: 1" in text
    assert "blurred scan" not in text  # the notes stay in the record
    assert "cannot classify" in render_markdown(f)
    rep = {"feedback": report.feedback_section(s)}  # the batch report's feedback section
    assert rep["feedback"]["n_unclassifiable"] == 2
    for rendered in (report.feedback_markdown(rep), report.feedback_html(rep)):
        assert "cannot classify (SME_UNCLASSIFIABLE; not scored)" in rendered and "blurred scan" not in rendered


def test_an_audit_answered_cannot_classify_is_no_false_accept(tmp_path):
    s = ArtifactStore(tmp_path)
    put_unclassifiable(s, "A", "unreadable", review_kind="audit")
    f = evaluate_store(s)
    assert (f.n_reviewed, f.n_unclassifiable, f.n_audited, f.false_accept.n) == (1, 1, 0, 0)
    assert f.per_document[0].unclassifiable_reason == "unreadable"
