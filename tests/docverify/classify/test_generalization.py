"""Issue 13: form cues, the minimum-evidence rule, short-header context, page boundaries, and
the figures on the committed split (text_labeled + text_labeled_more)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from docverify.classify.offline import WEAK_FALLBACK_CONFIDENCE, classify_offline
from docverify.domain.lexicon import analyse
from docverify.domain.models import DocumentBundle, Page

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


ECHO = """2-D ECHOCARDIOGRAM
1. Normal left ventricular size and wall thickness. Left ventricular systolic function is normal,
ejection fraction estimated at 60%.
2. The left atrium is mildly dilated. The right atrium and right ventricle are normal.
3. The aortic valve is trileaflet. Mild mitral regurgitation. Trace tricuspid regurgitation.
4. No pericardial effusion. Doppler interrogation shows normal diastolic function.
IMPRESSION: Normal LV systolic function. Mild mitral regurgitation.
"""

EKG = """ELECTROCARDIOGRAM
12-lead EKG: normal sinus rhythm at 72 beats per minute. PR interval 160 ms, QRS duration 90 ms,
QTc 420 ms. Normal axis. No ST segment elevation or depression. T waves upright in the lateral leads.
Interpretation: normal ECG, unchanged from the prior tracing.
"""

CARDIAC_MRI = """EXAMINATION: MRI heart with and without contrast.
TECHNIQUE: cine images and late gadolinium enhancement images were obtained after intravenous contrast.
COMPARISON: none.
FINDINGS: left ventricular size is normal; ejection fraction 55%. No late enhancement. No pericardial effusion.
IMPRESSION: normal cardiac MRI.
"""

GENOMIC_APPENDIX = """How Common Is Cystic Fibrosis?
The incidence of cystic fibrosis in the general population is about 1 in 3,500 newborns; it is more
common among individuals of Northern European ancestry.
What Is the Prognosis for an Individual with Cystic Fibrosis?
With current treatment many affected individuals live well into adulthood.
Ethnicity: Northern European
"""

PATHOLOGY = """SURGICAL PATHOLOGY REPORT
FINAL DIAGNOSIS:
Breast, left, core needle biopsy: invasive ductal carcinoma, Nottingham grade 2. Lymphovascular invasion not identified.
GROSS DESCRIPTION:
Received in formalin are three tan-white cores of tissue, 1.2 x 0.1 x 0.1 cm in aggregate, entirely submitted.
MICROSCOPIC DESCRIPTION:
Sections show infiltrating nests of atypical ductal cells with moderate nuclear pleomorphism.
"""


def test_echocardiogram_and_ekg_notes_are_clinical_notes():
    # cardiology procedure notes (issue 13: echo notes were read as Radiology)
    for text in (ECHO, EKG):
        out = classify_offline(_bundle(text))
        assert out.dominant_type_overall == "Clinical Note", text[:20]
        assert out.segments[0].reasoning.startswith("Clinical Note cues")
    # a radiology report of the heart keeps its report structure and modality
    assert classify_offline(_bundle(CARDIAC_MRI)).dominant_type_overall == "Radiology Report"


def test_a_genomic_reports_disease_education_page_is_genomic():
    out = classify_offline(_bundle(GENOMIC_APPENDIX))
    assert out.dominant_type_overall == "Genomic Report"
    genomic = next(c for c in out.segments[0].classifications if c.doc_type == "Genomic Report")
    assert genomic.top_evidence  # explainable: verbatim evidence for the call


def test_a_weak_page_without_the_running_type_starts_its_own_segment():
    # a short genomic page after a pathology report shows nothing of Pathology: its own evidence
    # disagrees with the running segment, so it is not absorbed
    out = classify_offline(_bundle(PATHOLOGY, PATHOLOGY, GENOMIC_APPENDIX))
    got = [(s.dominant_type, s.page_start, s.page_end) for s in out.segments]
    assert got == [("Pathology Report", 1, 2), ("Genomic Report", 3, 3)]
    # a weak page that does support the running type (or carries no cue) continues it
    footer = "Electronically signed by the attending pathologist. Specimen retained for 10 years."
    out = classify_offline(_bundle(PATHOLOGY, PATHOLOGY, footer))
    assert [(s.dominant_type, s.page_start, s.page_end) for s in out.segments] == [
        ("Pathology Report", 1, 3)]


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
    # Measured (offline-lexicon-v3): test dominant 99.5%, Other recall 100%, Clinical precision
    # 100%, Genomic recall 100%, multi-document page accuracy 97.2%, exact split 88.3%
    # (docs/benchmarks/classifier.md; v2 had 96.4 / 100 / 100 / 75 / 94.3 / 80.0).
    assert test["documents"] > 150 and parts["tune"]["documents"] > 150
    assert test["accuracy"] >= 0.97
    assert test["per_type"]["Other"]["recall"] >= 0.95
    assert test["per_type"]["Clinical Note"]["precision"] >= 0.95
    assert test["per_type"]["Genomic Report"]["recall"] >= 0.9
    assert test["multi"]["page_accuracy"] >= 0.95
    assert test["multi"]["exact_split"] >= 0.85
    if "large_multi" in test:  # with text_labeled_large (ADR 0035); offline-lexicon-v6 and v7 measured 98.3 % / 93.5 %
        # (187/200) on both corpora's 200 PDFs (ADR 0043, 0045), v5 98.1 % / 93.0 % (ADR 0043), v4 97.8 % / 91.0 % (ADR 0042): the
        # issue's targets 97 % / 92 %
        assert test["large_multi"]["page_accuracy"] >= 0.97
        assert test["large_multi"]["exact_split"] >= 0.92
