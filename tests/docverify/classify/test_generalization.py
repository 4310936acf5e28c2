"""Issue 13: form cues, the minimum-evidence rule, short-header context, page boundaries, and
the figures on the committed split (text_labeled + text_labeled_more)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from docverify.classify.lexicon import analyse
from docverify.classify.offline import WEAK_FALLBACK_CONFIDENCE, classify_offline
from docverify.models import DocumentBundle, Page

RELEASE_FORM = """AUTHORIZATION FOR RELEASE OF PROTECTED HEALTH INFORMATION
Patient name: ____________________  Date of birth: __________
I hereby authorize the facility named below to disclose the following records:
[ ] Discharge Summary   [ ] History & Physical   [ ] Operative Report
[ ] Radiology Report    [ ] Pathology Report     [ ] Progress Notes
Purpose of disclosure: ____________________
This authorization expires on: __________. I understand that I may revoke it in writing.
Signature of patient or legal representative: ____________________ Date signed: ________
"""

MEMO = """MEMORANDUM
To: all staff
cc: department heads
Re: parking changes next month
The north lot will be closed for repaving. Please use the east garage and keep your badge visible.
"""

NOTE = """HISTORY OF PRESENT ILLNESS: 58-year-old man with two days of chest pain radiating to the left arm.
PAST MEDICAL HISTORY: hypertension, hyperlipidemia. MEDICATIONS: lisinopril, atorvastatin.
PHYSICAL EXAMINATION: blood pressure 150/90, heart regular, lungs clear.
ASSESSMENT AND PLAN: rule out acute coronary syndrome; serial troponins, aspirin, cardiology consult.
"""

RADIOLOGY = """EXAMINATION: CT chest with contrast.
TECHNIQUE: axial images were obtained after intravenous contrast.
COMPARISON: prior radiograph.
FINDINGS: no pulmonary embolism. No consolidation or pleural effusion. Heart size normal.
IMPRESSION: no acute cardiopulmonary abnormality.
"""

FAX = """FAX COVER SHEET
To: Records department        From: Clinic front desk
Fax: 555-0100   Pages (including cover): 4
CONFIDENTIALITY NOTICE: this facsimile is intended only for the named recipient. If you have
received this fax in error, please call us and destroy it.
"""


def _bundle(*pages: str) -> DocumentBundle:
    return DocumentBundle(doc_id="t", file_path="t.pdf", total_pages=len(pages),
                          pages=[Page(page_num=i, text=t) for i, t in enumerate(pages, 1)])


def test_release_form_listing_record_types_is_other():
    out = classify_offline(_bundle(RELEASE_FORM))
    assert out.dominant_type_overall == "Other"
    # the record types on checkbox lines count for little
    a = analyse(RELEASE_FORM)
    assert all(h.factor < 1 for t in ("Clinical Note", "Radiology Report", "Pathology Report")
               for h in a.hits[t])


def test_cc_in_a_memo_is_not_a_chief_complaint():
    hits = analyse(MEMO).hits["Clinical Note"]
    assert not any(h.entry.label == "CC" for h in hits)
    assert classify_offline(_bundle(MEMO)).dominant_type_overall == "Other"
    assert any(h.entry.label == "CC" for h in analyse("CC: chest pain for two days\n").hits["Clinical Note"])


def test_a_single_weak_cue_falls_back_to_other_with_low_confidence():
    text = "Thank you for your order. We shipped the replacement tobacco pouch on Monday by courier."
    out = classify_offline(_bundle(text))
    seg = out.segments[0]
    assert seg.dominant_type == "Other"
    other = next(c for c in seg.classifications if c.doc_type == "Other")
    assert other.confidence <= max(WEAK_FALLBACK_CONFIDENCE, 0.5)


def test_a_one_page_cover_between_documents_is_its_own_segment():
    out = classify_offline(_bundle(NOTE, NOTE, FAX, RADIOLOGY, RADIOLOGY))
    got = [(s.dominant_type, s.page_start, s.page_end) for s in out.segments]
    assert got == [("Clinical Note", 1, 2), ("Other", 3, 3), ("Radiology Report", 4, 5)]
    assert all(s.reasoning for s in out.segments)  # the evidence behind each decision


def _bench(repo_dir):
    spec = importlib.util.spec_from_file_location("bench_classifier_i13", repo_dir / "scripts" / "bench_classifier.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_figures_on_the_split(corpora_dir, repo_dir):
    parts = _bench(repo_dir).evaluate_parts(corpora_dir)
    test = parts["test"]
    # Measured (offline-lexicon-v2): test dominant 96.4%, Other recall 100%, Clinical precision
    # 100%, multi-document page accuracy 94.3%, exact split 80.0% (docs/benchmarks/classifier.md).
    assert test["documents"] > 150 and parts["tune"]["documents"] > 150
    assert test["accuracy"] >= 0.93
    assert test["per_type"]["Other"]["recall"] >= 0.95
    assert test["per_type"]["Clinical Note"]["precision"] >= 0.95
    assert test["multi"]["page_accuracy"] >= 0.90
    assert test["multi"]["exact_split"] >= 0.72
