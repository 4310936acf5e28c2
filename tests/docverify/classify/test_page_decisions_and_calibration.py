"""The offline classifier's per-page decision in its output, and its calibrated confidence (ADR 0035)."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import tests.docverify.classify.test_generalization as g

from docverify.classify.calibration import calibrated, calibration, platt
from docverify.classify.offline import classify_offline
from docverify.verify import v1_schema


def _script(repo_dir, name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_adr35", repo_dir / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_each_page_records_its_scores_continuity_and_why_a_segment_starts_there():
    bundle = g._bundle(g.NOTE, g.NOTE, g.FAX, g.RADIOLOGY, g.RADIOLOGY)
    out = classify_offline(bundle)
    decisions = out.page_decisions
    assert decisions is not None and [d.page for d in decisions] == [1, 2, 3, 4, 5]
    starts = {s.page_start for s in out.segments}
    for d in decisions:
        seg = next(s for s in out.segments if s.page_start <= d.page <= s.page_end)
        assert d.label == seg.dominant_type
        assert d.starts_segment == (d.page in starts)
        assert set(d.type_scores) == {"Clinical Note", "Pathology Report", "Genomic Report", "Radiology Report",
                                      "Other"}
    assert decisions[0].continuity is None
    # the same text again reads as a continuation; another document's first page does not
    assert decisions[1].continuity == 1.0 and not decisions[1].starts_segment
    assert decisions[2].continuity < 0.05 and decisions[2].starts_segment
    # the fax cover speaks to its reader: a form page (offline-lexicon-v9), its own Other segment
    assert decisions[2].reason.startswith("new segment: form page (it addresses its reader")
    assert decisions[2].label == "Other"
    assert decisions[3].type_scores["Radiology Report"] > decisions[3].type_scores["Other"]
    # no page text in the record: numbers and lexicon labels only
    dumped = json.dumps([d.model_dump(mode="json") for d in decisions])
    assert "chest pain" not in dumped and "facsimile" not in dumped


def test_the_optional_field_passes_v1_and_an_output_without_it_too():
    bundle = g._bundle(g.NOTE, g.RADIOLOGY)
    out = classify_offline(bundle)
    raw = out.model_dump(mode="json")
    parsed, issues = v1_schema.parse(raw)
    assert issues == [] and parsed is not None and parsed.page_decisions == out.page_decisions
    assert v1_schema.check(bundle, parsed) == []
    del raw["page_decisions"]  # an LLM classifier's output has none
    parsed, issues = v1_schema.parse(raw)
    assert issues == [] and parsed is not None and parsed.page_decisions is None


def test_the_document_confidence_is_the_calibrated_raw_score():
    bundle = g._bundle(g.NOTE, g.NOTE)
    raw = classify_offline(bundle, calibrate=False).self_evaluation.confidence
    cal = classify_offline(bundle).self_evaluation.confidence
    assert cal == round(calibrated(raw), 4)
    cfg = calibration()
    assert cfg["a"] > 0  # a higher raw score is a likelier right answer
    values = [platt(x / 20, cfg["a"], cfg["b"]) for x in range(21)]
    assert values == sorted(values) and all(0.0 < v < 1.0 for v in values)


@pytest.mark.slow
def test_the_shipped_calibration_equals_a_retrain_on_the_tuning_parts(corpora_dir, repo_dir):
    script = _script(repo_dir, "calibrate_classifier")
    shipped = json.loads((repo_dir / "include" / "rules" / "classifier_calibration.json").read_text())
    assert script.calibration_record(corpora_dir) == shipped
