"""offline-lexicon-v8's form pages (ADR 0048): a page that is a form as a whole -- field labels with nothing
after them, blanks, checkboxes, signature and date lines, few sentences -- opens its own Other segment even
when it is short and next to a report, and its page decision says so; a report's header block (EXAM/DATE
lines, a pathology report's specimen fields) does not make its page a form. The forms below are written for
these tests (no corpus text); each case also runs with the rule switched off, to show the rule is what decides."""

from __future__ import annotations

import pytest
from tests.docverify.classify.test_generalization import _bundle

from docverify.classify import offline
from docverify.classify.form_layout import form_layout
from docverify.classify.offline import classify_offline
from docverify.domain.lexicon import analyse

#: a one-page intake form as the text layer of a fillable PDF gives it: labels without values (several to a line),
#: radio buttons; next to no cue of the lexicon's (no blank, no bracket checkbox): its words alone are weak
INTAKE_FORM = """Lakeside Family Medicine
Last name:                First name:
Date of birth:            Sex:   ○ M   ○ F
Street:                   Apt:
City:                     State:      ZIP:
Reason for visit:
Referred by:              Phone:
Preferred language:       Interpreter:   ○ Yes   ○ No
"""

#: a pathology requisition: its tissue options name pathology's words, on lines of labels and radio buttons
REQUISITION = """Lakeside Family Medicine
Last name:                First name:
Date of birth:            Sex:   ○ M   ○ F
Ordering clinician:       Clinic:
Specimen source:          Site:
Tissue:   ○ Biopsy   ○ Resection   ○ Frozen section
Clinical information:
Collected by:             Time:
"""

PATHOLOGY = """SURGICAL PATHOLOGY REPORT
SPECIMEN: Colon, sigmoid, segmental resection.
CLINICAL HISTORY: Sigmoid mass on colonoscopy.
FINAL DIAGNOSIS:
Colon, sigmoid, resection: invasive adenocarcinoma, moderately differentiated, invading into the
muscularis propria. Twelve lymph nodes negative for carcinoma (0/12). Margins free of tumor.
GROSS DESCRIPTION:
Received in formalin is a 22 cm segment of colon with a 3.5 cm ulcerated mass, 6 cm from the distal margin.
MICROSCOPIC DESCRIPTION:
Sections show malignant glands infiltrating the muscularis propria with desmoplastic stroma.
"""

PATHOLOGY_2 = """Representative sections of the tumor and the margins were submitted in cassettes A1-A12.
Lymph nodes: twelve nodes identified and entirely submitted. Immunohistochemical stains for MLH1, PMS2, MSH2
and MSH6 show retained nuclear expression in the tumor cells. The pathologic stage is pT2 N0.
Electronically signed by the attending pathologist.
"""

RADIOLOGY = """EXAMINATION: CT abdomen and pelvis with contrast.
TECHNIQUE: axial images were obtained after intravenous contrast; coronal and sagittal reformats.
COMPARISON: none.
FINDINGS: the liver, spleen, pancreas and adrenal glands are normal. No hydronephrosis. No free fluid or
lymphadenopathy. The appendix is normal.
IMPRESSION: no acute abnormality in the abdomen or pelvis.
"""

#: a release form: a title, labels, options, the signature line
CONSENT_FORM = """Lakeside Family Medicine
Permission to share records
Name:                          Address:
City:                State:         ZIP:
○ Entire record   ○ Visit notes   ○ Imaging   ○ Laboratory
Expires on:
Signature:                              Date:
Printed name:                           Relationship:
"""

FAX_COVER = """Lakeside Family Medicine
To:                              From:
Fax:                             Pages:
Phone:                           Date:
Re:
○ Urgent  ○ For review  ○ Please comment  ○ Please reply
"""

NOTE = """HISTORY OF PRESENT ILLNESS: 64-year-old woman with a sigmoid adenocarcinoma, seen after her resection.
She is eating well and her pain is controlled with acetaminophen.
PAST MEDICAL HISTORY: hypertension, type 2 diabetes. MEDICATIONS: metformin, lisinopril.
PHYSICAL EXAMINATION: afebrile, blood pressure 132/80, the incision is healing well, abdomen soft.
ASSESSMENT AND PLAN: stage I colon cancer after resection; no adjuvant chemotherapy; surveillance
colonoscopy in one year and CEA every six months.
"""

#: a radiology report whose first lines are header fields: "EXAM:", "DATE:", "ORDERING PHYSICIAN:" ...
RADIOLOGY_HEADER_FIELDS = """EXAM: MRI brain without and with contrast
DATE: 03/14/2025
ACCESSION: 0000000
ORDERING PHYSICIAN:
REFERRING DIAGNOSIS: headache
CLINICAL HISTORY: new daily headaches for three weeks.
TECHNIQUE: sagittal T1, axial T2, FLAIR, diffusion and post-contrast T1 images of the brain.
COMPARISON: none.
FINDINGS: no mass, hemorrhage or acute infarct. The ventricles and sulci are normal for age. No abnormal
enhancement. The major intracranial flow voids are present.
IMPRESSION: normal MRI of the brain.
"""

RADIOLOGY_HEADER_FIELDS_2 = """ADDENDUM: the diffusion-weighted images were reviewed again; there is no restricted diffusion.
The paranasal sinuses are clear and the mastoid air cells are well aerated. No change to the impression.
"""

#: a pathology report's page of specimen fields (a synoptic block: label, value on the next line)
PATHOLOGY_SPECIMEN_FIELDS = """SURGICAL PATHOLOGY REPORT
Patient Name:
Med. Rec. #:
Accession #:
Date of Procedure:
Date of Receipt:
SPECIMEN:
Breast, left, lumpectomy
PROCEDURE:
Lumpectomy with sentinel lymph node biopsy
TUMOR SIZE:
1.8 cm
HISTOLOGIC TYPE:
Invasive ductal carcinoma
HISTOLOGIC GRADE:
Nottingham grade 2
MARGINS:
Negative for invasive carcinoma; closest margin 4 mm
LYMPH NODES:
0 of 2 sentinel lymph nodes involved
FINAL DIAGNOSIS:
Left breast, lumpectomy: invasive ductal carcinoma, grade 2, 1.8 cm, margins negative.
"""


def _segments(*pages: str) -> list[tuple[str, int, int]]:
    out = classify_offline(_bundle(*pages))
    return [(s.dominant_type, s.page_start, s.page_end) for s in out.segments]


def _off(m: pytest.MonkeyPatch) -> None:
    m.setattr(offline, "FORM_MIN_LINES", 10**6)  # no page is a form: offline-lexicon-v7's segmentation


@pytest.mark.parametrize(("pages", "form_page", "expected"), [
    # a one-page intake form before a pathology report
    ((INTAKE_FORM, PATHOLOGY, PATHOLOGY_2), 1,
     [("Other", 1, 1), ("Pathology Report", 2, 3)]),
    # a consent form after a radiology report
    ((NOTE, RADIOLOGY, CONSENT_FORM), 3,
     [("Clinical Note", 1, 1), ("Radiology Report", 2, 2), ("Other", 3, 3)]),
    # a fax cover first
    ((FAX_COVER, NOTE, NOTE), 1,
     [("Other", 1, 1), ("Clinical Note", 2, 3)]),
    # a form between two reports
    ((PATHOLOGY, PATHOLOGY_2, INTAKE_FORM, RADIOLOGY), 3,
     [("Pathology Report", 1, 2), ("Other", 3, 3), ("Radiology Report", 4, 4)]),
], ids=["intake-before-pathology", "consent-after-radiology", "fax-cover-first", "form-between"])
def test_a_form_page_opens_its_own_other_segment(pages, form_page, expected):
    out = classify_offline(_bundle(*pages))
    assert [(s.dominant_type, s.page_start, s.page_end) for s in out.segments] == expected
    decisions = out.page_decisions
    assert decisions is not None
    decision = decisions[form_page - 1]
    assert "form page (" in decision.reason and decision.label == "Other"
    assert decision.starts_segment
    # the form's segment says why it is Other
    segment = next(s for s in out.segments if s.page_start == form_page)
    assert segment.reasoning.startswith(f"Form on page {form_page}, Other (page {form_page}: ")
    assert "lines are form fields" in segment.reasoning
    # no other page is a form page
    assert all("form page (" not in d.reason for d in decisions if d.page != form_page)
    # the page after a form starts its report, and says it follows a form
    if form_page < len(pages):
        assert decisions[form_page].starts_segment and "after a form page" in decisions[form_page].reason


def test_without_the_rule_weak_forms_are_absorbed(monkeypatch):
    # a form whose words are weak evidence: offline-lexicon-v7 let the report beside it absorb it
    cases = [
        # (v7 read the intake form's "Reason for visit" as a clinical note of its own)
        ((INTAKE_FORM, PATHOLOGY, PATHOLOGY_2), [("Other", 1, 1), ("Pathology Report", 2, 3)],
         [("Clinical Note", 1, 1), ("Pathology Report", 2, 3)]),
        ((REQUISITION, PATHOLOGY, PATHOLOGY_2), [("Other", 1, 1), ("Pathology Report", 2, 3)],
         [("Pathology Report", 1, 3)]),
        ((PATHOLOGY, PATHOLOGY_2, REQUISITION), [("Pathology Report", 1, 2), ("Other", 3, 3)],
         [("Pathology Report", 1, 3)]),
    ]
    for pages, v8, _ in cases:
        assert _segments(*pages) == v8
    _off(monkeypatch)
    for pages, _, v7 in cases:
        assert _segments(*pages) == v7


def test_the_form_layout_of_a_page():
    lay = form_layout(analyse(INTAKE_FORM))
    # "Reason for visit:" is a clinical note's section header: neither it nor "City:" over it counts as a field
    assert lay.lines == 8 and lay.fields == 5 and lay.sentences == 0
    for form in (INTAKE_FORM, REQUISITION, CONSENT_FORM, FAX_COVER):
        assert offline.is_form(analyse(form)), form[:40]
    # the requisition reads strongly as pathology (its tissue options), but it is labels and options throughout
    requisition = analyse(REQUISITION)
    assert requisition.scores["Pathology Report"] >= offline.FORM_MAX_CLINICAL
    assert form_layout(requisition).field_share >= offline.FORM_STRONG_SHARE
    for report in (PATHOLOGY, RADIOLOGY, NOTE, RADIOLOGY_HEADER_FIELDS, PATHOLOGY_SPECIMEN_FIELDS):
        assert not offline.is_form(analyse(report)), report[:30]


def test_a_radiology_reports_header_fields_do_not_make_it_a_form():
    # EXAM:, DATE:, ACCESSION:, an empty ORDERING PHYSICIAN: -- label lines, but the page is a report
    assert _segments(RADIOLOGY_HEADER_FIELDS, RADIOLOGY_HEADER_FIELDS_2) == [("Radiology Report", 1, 2)]
    assert _segments(NOTE, RADIOLOGY_HEADER_FIELDS, RADIOLOGY_HEADER_FIELDS_2) == [
        ("Clinical Note", 1, 1), ("Radiology Report", 2, 3)]


def test_a_pathology_reports_specimen_fields_do_not_make_it_a_form():
    # labels over their values (the value on the next line), empty identifier labels, section headers alone on
    # their lines: a synoptic pathology page, not a form
    lay = form_layout(analyse(PATHOLOGY_SPECIMEN_FIELDS))
    assert lay.fields <= 5 < lay.lines
    assert _segments(PATHOLOGY_SPECIMEN_FIELDS, PATHOLOGY_2) == [("Pathology Report", 1, 2)]
    assert _segments(PATHOLOGY, PATHOLOGY_SPECIMEN_FIELDS, PATHOLOGY_2) == [("Pathology Report", 1, 3)]


def test_a_page_of_labels_with_strong_clinical_evidence_is_no_form(monkeypatch):
    # the clinical gate: a page of field lines that reads strongly as a report is the report's
    page = offline._pages(_bundle(INTAKE_FORM))[0]
    assert page.form
    monkeypatch.setattr(offline, "FORM_MAX_CLINICAL", -1.0)
    monkeypatch.setattr(offline, "FORM_STRONG_SHARE", 2.0)
    assert not offline._pages(_bundle(INTAKE_FORM))[0].form


def test_a_form_keeps_the_lexicons_scores_for_v2_and_v4():
    # the form rule is the classifier's view of the page; the shared lexicon's scores do not move
    out = classify_offline(_bundle(INTAKE_FORM))
    assert out.dominant_type_overall == "Other"
    assert out.page_decisions is not None
    scores = out.page_decisions[0].type_scores
    lexicon = analyse(INTAKE_FORM).scores
    assert scores["Other"] == round(max(lexicon["Other"], offline.FORM_OTHER), 3)
    assert scores["Clinical Note"] == round(offline.FORM_FACTOR * lexicon["Clinical Note"], 3)


def test_a_multi_page_form_is_one_other_segment():
    assert _segments(INTAKE_FORM, CONSENT_FORM, PATHOLOGY, PATHOLOGY_2) == [
        ("Other", 1, 2), ("Pathology Report", 3, 4)]


def test_the_implementation_is_v8():
    assert offline.IMPLEMENTATION == "offline-lexicon-v14"
