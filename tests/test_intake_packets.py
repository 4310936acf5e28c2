"""Intake packets (scripts/intake_packets.py) and what the end-to-end benchmark scores on them: the generator
is deterministic and its truth tiles the pages with forms where it says; DocSplit's boundary P/R/F1 and the
V-measure on hand-made splits; the escalation precision on hand-made outcomes (issue 39)."""

from __future__ import annotations

import math
import pathlib
import sys

import pytest

from docverify.reporting.labelled_sample import text_page

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
try:
    import bench_end_to_end as b
    import intake_packets as ip
finally:
    sys.path.remove(str(REPO / "scripts"))

CN, RR, OT = "Clinical Note", "Radiology Report", "Other"


@pytest.fixture(autouse=True)
def _scripts_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))  # the scripts import their siblings lazily


@pytest.fixture(scope="module")
def test_records(corpora_dir):
    from scripts.support import labelled_corpus

    records = labelled_corpus.part_records(corpora_dir, REPO, "test")
    if not any(ip.is_form(r) for r in records):
        pytest.skip("forms_real is not in the corpora")
    return records


def _shape(packets):
    return [(p.truth, p.forms, p.source_ids, [pg.text for pg in p.bundle.pages]) for p in packets]


def test_the_generator_is_deterministic_and_its_truth_tiles_the_pages(test_records):
    packets = ip.make_intake_packets(test_records, 30, 7)
    assert _shape(packets) == _shape(ip.make_intake_packets(list(reversed(test_records)), 30, 7))
    assert _shape(packets) != _shape(ip.make_intake_packets(test_records, 30, 8))
    forms = {str(r["id"]): r for r in test_records if ip.is_form(r)}
    for i, p in enumerate(packets):
        assert 2 <= len(p.truth) <= 6 and p.bundle.total_pages == len(p.bundle.pages)
        assert p.truth[0][1] == 1 and p.truth[-1][2] == p.bundle.total_pages
        assert all(a[2] + 1 == c[1] and a[1] <= a[2] for a, c in zip(p.truth, p.truth[1:], strict=False))
        reports = [s for s in p.truth if s[0] != OT]
        assert 1 <= len(reports) <= 4 and len({t for t, _, _ in reports}) == len(reports)
        assert all(t in ip.CLINICAL_TYPES for t, _, _ in reports)
        assert len({f.record_id for f in p.forms}) == len(p.forms) >= 1  # different forms
        assert sum(t == OT for t, _, _ in p.truth) == len(p.forms)
        # every packet has a form at its own position, in turn: a third of the packets each
        assert ip.POSITIONS[i % 3] in p.positions
        first_report, last_report = reports[0][1], reports[-1][2]
        for f in p.forms:
            assert (OT, f.page_start, f.page_end) in p.truth and f.kind and f.record_id in forms
            assert f.position == ("first" if f.page_end < first_report else "last" if f.page_start > last_report
                                  else "middle")
            texts = dict(ip.form_real_pages(forms[f.record_id]))
            # the form's real pages, as a night holds a PDF's page (labelled_sample.text_page: lines cleaned)
            assert [pg.text for pg in p.bundle.pages[f.page_start - 1:f.page_end]] == [
                text_page(1, texts[j]).text for j in f.real_pages]
            assert f.page_end - f.page_start + 1 == len(f.real_pages) <= ip.WHOLE_MAX_PAGES
            assert not f.ocr
        assert not p.ocr


def test_scanned_pages_change_only_the_texts_they_replace(test_records):
    plain = ip.make_intake_packets(test_records, 12, 3)
    key = (plain[0].forms[0].record_id, plain[0].forms[0].real_pages[0])
    scanned = ip.make_intake_packets(test_records, 12, 3,
                                     ocr_pages={(plain[0].doc_id, *key): ip.Scan("SCANNED", 0.87)})
    assert [(p.truth, p.source_ids) for p in plain] == [(p.truth, p.source_ids) for p in scanned]
    f = scanned[0].forms[0]
    assert scanned[0].ocr and key in scanned[0].ocr_keys
    assert scanned[0].bundle.pages[f.page_start - 1].text == "SCANNED"
    # the scanned page carries the OCR's confidence, as the local PDF parser records it; the others none
    assert [pg.ocr_confidence for pg in scanned[0].bundle.pages] == [
        0.87 if pg.page_num == f.page_start else None for pg in scanned[0].bundle.pages]
    assert f.ocr == (len(f.real_pages) == 1)
    # a scan is of one packet: the same form page elsewhere keeps its text layer
    assert not any(p.ocr for p in scanned[1:])
    assert [p.bundle.pages for p in plain[1:]] == [p.bundle.pages for p in scanned[1:]]


def test_the_scan_sample_takes_whole_packets_and_no_more_pages_than_asked(test_records):
    plain = ip.make_intake_packets(test_records, 12, 3)
    sample = ip.ocr_sample(plain, 5, 1)
    assert sample == ip.ocr_sample(plain, 5, 1) and 0 < len(sample) <= 5
    by_id = {p.doc_id: p for p in plain}
    for pid in {pid for pid, _, _ in sample}:  # every form page of a packet chosen, none of another
        assert sorted((rid, j) for q, rid, j in sample if q == pid) == sorted(ip.form_pages_used([by_id[pid]]))


def test_the_benchmark_keeps_the_forms_out_of_its_old_kinds(test_records):
    docs = b.part_documents(test_records, kinds=("single", "intake"), intake=6, seed_offset=1)
    singles = [d for d in docs if d.kind == "single"]
    assert len(singles) == sum(not ip.is_form(r) for r in test_records)
    assert [d.kind for d in docs].count("intake") == 6 and all(d.packet for d in docs if d.kind == "intake")


def test_a_scanned_page_is_rendered_as_a_letter_page():
    image = ip.render_page("Patient registration\nName: ____\n" + "word " * 3000)
    assert image.size == (round(8.5 * ip.DPI), 11 * ip.DPI)
    assert image.getextrema()[0] == (0, 255)  # black text on white


# --------------------------------------------------------------------------- split scores by hand

TRUTH = [(CN, 1, 2), (OT, 3, 3), (RR, 4, 5)]


def test_a_perfect_split_scores_one_everywhere():
    s = ip.split_scores(TRUTH, list(TRUTH), 5)
    assert s == {"exact": True, "exact_merged": True, "boundary_precision": 1.0, "boundary_recall": 1.0,
                 "boundary_f1": 1.0, "v_measure": 1.0}


def test_one_boundary_missed():
    pred = [(CN, 1, 3), (RR, 4, 5)]  # the one-page form absorbed into the note before it
    assert ip.boundaries(TRUTH) == {3, 4} and ip.boundaries(pred) == {4}
    assert ip.boundary_prf(TRUTH, pred) == (1.0, 0.5, pytest.approx(2 / 3))
    # homogeneity: cluster {1,2,3} holds two true documents (2:1); completeness 1
    n, h = 5, lambda *ps: -sum(x * math.log(x) for x in ps)
    hom = 1 - (3 / n) * h(2 / 3, 1 / 3) / h(2 / 5, 1 / 5, 2 / 5)
    assert ip.v_measure(TRUTH, pred, 5) == pytest.approx(2 * hom / (hom + 1))
    s = ip.split_scores(TRUTH, pred, 5)
    assert not s["exact"] and not s["exact_merged"] and s["boundary_f1"] == pytest.approx(2 / 3)


def test_one_boundary_too_many():
    pred = [(CN, 1, 1), (CN, 2, 2), (OT, 3, 3), (RR, 4, 5)]
    assert ip.boundary_prf(TRUTH, pred) == (pytest.approx(2 / 3), 1.0, pytest.approx(0.8))
    n, h = 5, lambda *ps: -sum(x * math.log(x) for x in ps)
    com = 1 - (2 / n) * h(1 / 2, 1 / 2) / h(1 / 5, 1 / 5, 1 / 5, 2 / 5)  # the note cut in two
    assert ip.v_measure(TRUTH, pred, 5) == pytest.approx(2 * com / (1 + com))


def test_nothing_predicted_against_a_true_boundary_scores_zero():
    assert ip.boundary_prf([(CN, 1, 1), (RR, 2, 2)], [(CN, 1, 2)]) == (0.0, 0.0, 0.0)
    assert ip.boundary_prf([(CN, 1, 2)], [(CN, 1, 2)]) == (1.0, 1.0, 1.0)
    assert ip.v_measure([(CN, 1, 1), (RR, 2, 2)], [(CN, 1, 2)], 2) == 0.0


@pytest.mark.slow
def test_the_v_measure_is_sklearns():
    metrics = pytest.importorskip("sklearn.metrics")
    pred = [(CN, 1, 1), (OT, 2, 4), (RR, 5, 5)]
    labels = lambda spans: [k for k, (_, a, z) in enumerate(spans) for _ in range(a, z + 1)]  # noqa: E731
    assert ip.v_measure(TRUTH, pred, 5) == pytest.approx(metrics.v_measure_score(labels(TRUTH), labels(pred)))


def test_two_adjacent_forms_read_as_one_in_the_headline_only():
    truth = [(OT, 1, 1), (OT, 2, 2), (CN, 3, 4)]
    merged = [(OT, 1, 2), (CN, 3, 4)]
    s = ip.split_scores(truth, merged, 4)
    assert not s["exact"] and s["exact_merged"] and s["boundary_f1"] == 1.0 and s["v_measure"] == 1.0
    assert ip.split_scores(truth, list(truth), 4)["exact"]
    form = ip.FormPlacement("f2", "consent", "first", 2, 2, (0,), True)
    assert ip.form_found(form, truth, merged)
    assert not ip.form_found(form, truth, [(OT, 1, 1), (CN, 2, 4)])  # the second form absorbed


def test_an_intake_packet_is_right_on_the_headline_reading():
    from scripts import verifier_bench as vb

    from docverify.domain.models import DocumentBundle, Page

    bundle = DocumentBundle(doc_id="p", file_path="p", total_pages=4,
                            pages=[Page(page_num=i, text="x") for i in range(1, 5)])
    truth = [(OT, 1, 1), (OT, 2, 2), (CN, 3, 4)]
    doc = b.Doc(vb.BenchDoc(bundle, [vb.TruthSegment(*t) for t in truth], []), "intake", "intake")
    seg = lambda t, a, z: {"dominant_type": t, "page_start": a, "page_end": z}  # noqa: E731
    assert b.is_right(doc, {"segments": [seg(OT, 1, 2), seg(CN, 3, 4)]})
    assert not b.is_right(doc, {"segments": [seg(OT, 1, 1), seg(CN, 2, 4)]})


# --------------------------------------------------------------------------- escalation precision by hand


def _o(right: bool, decision: str, codes=(), right_final=None) -> b.Outcome:
    return b.Outcome("d", "intake", "intake", "mixed", right, right if right_final is None else right_final,
                     decision, None, list(codes))


def test_escalation_precision_overall_and_per_code():
    outcomes = [
        _o(True, "AUTO_ACCEPT"),
        _o(False, "ESCALATE_TO_SME", ["A"]),
        _o(True, "ESCALATE_TO_SME", ["A", "B"]),
        _o(False, "ESCALATE_TO_SME", []),
        _o(False, "AUTO_ACCEPT"),  # a false accept: not an escalation
        _o(False, "AUTO_ACCEPT", right_final=True),  # retried, fixed, accepted: not an escalation either
    ]
    f = b.figures(outcomes)
    assert (f["escalations"], f["escalated_wrong"]) == (3, 2)
    assert f["escalation_precision"] == pytest.approx(2 / 3)
    assert f["escalation_precision_by_code"] == {
        "A": {"escalations": 2, "real_errors": 1, "precision": 0.5},
        "B": {"escalations": 1, "real_errors": 0, "precision": 0.0},
        b.NO_CODE: {"escalations": 1, "real_errors": 1, "precision": 1.0},
    }
    assert (f["false_accepts"], f["accepted"]) == (1, 3)
    assert b.figures([_o(True, "AUTO_ACCEPT")])["escalation_precision"] is None


def test_an_error_the_fixes_made_right_is_stopped_not_missed():
    """A wrong split the verifiers' automatic fix corrected (accepted, right as written) counts as stopped and
    as fixed; a wrong classification accepted as it was is missed."""
    f = b.figures([_o(False, "AUTO_ACCEPT", right_final=True), _o(False, "AUTO_ACCEPT"),
                   _o(False, "ESCALATE_TO_SME", ["A"])])
    assert (f["classifier_wrong"], f["stopped"], f["fixed"], f["false_accepts"]) == (3, 2, 1, 1)
    assert f["stopped_rate"] == pytest.approx(2 / 3) and len(f["missed"]) == 1


def test_the_page_shows_escalation_precision_and_the_issue_targets():
    pos = lambda *g: [f"position:{x}" for x in g] + ["scan:text layer", "kind:consent", "form:one page"]  # noqa: E731
    outcomes = [
        b.Outcome("s1", "single", "mtsamples", CN, True, True, "AUTO_ACCEPT", 1),
        b.Outcome("s2", "single", "mtsamples", CN, False, False, "ESCALATE_TO_SME", 3, ["X"]),
        b.Outcome("i1", "intake", "intake", "mixed", True, True, "AUTO_ACCEPT", 1,
                  split=ip.split_scores(TRUTH, TRUTH, 5), groups=pos("first"), forms=[("first", "consent", True)]),
        b.Outcome("i2", "intake", "intake", "mixed", False, False, "AUTO_ACCEPT", 1,
                  split=ip.split_scores(TRUTH, [(CN, 1, 3), (RR, 4, 5)], 5), groups=pos("middle", "last"),
                  forms=[("middle", "consent", False)]),
    ]
    part = b.summarise("test", outcomes, 1.0)
    assert part["intake"]["all"]["exact_merged"] == 0.5
    assert part["intake"]["groups"]["position:middle"]["packets"] == 1
    assert part["old_kinds"]["documents"] == 2
    checks = {(t["scope"], t["key"]): t["met"] for t in b.issue39_targets(part)}
    assert checks[("intake", "exact_merged")] is False and checks[("all", "escalation_precision")] is True
    text = "\n".join(b.render([part], {"commit": "`abc`"}))
    assert "escalation precision" in text and "| `X` | 1 | 1 (100.0 %) |" in text
    assert "Issue 39's targets — test part" in text and "| position: first | 1 | 100.0 % |" in text
