"""Issue 20, item 7a: PATIENT_IDENTITY_CONFLICT — two patient identifiers in one segment's pages
(include/rules/identity.json, docverify.verify.identity), switched by VerifyPolicy.patient_identity.
Every text here is made up for the test; the corpus test only counts (single-patient records must
raise nothing)."""

from __future__ import annotations

import json

import pytest
from scripts.support.examples import GENOMIC_P1, GENOMIC_P2, NOTE_P3, bundle, classification
from tests.docverify.run_sync import verify_document_sync

from docverify.domain.codes import CATALOGUE
from docverify.domain.models import ClassificationOutput, DocumentBundle, Page, Segment
from docverify.domain.policy import VerifyPolicy
from docverify.judging.judges import OfflineJudge
from docverify.verify import identity

JANE = "Patient: Jane Roe   DOB: 01/02/1960\nMRN: 00123456\n"
JOHN = "Patient: John Smith   DOB: 03/04/1971\nMRN: 987654\n"


def _segment_of(*pages: str) -> tuple[DocumentBundle, Segment]:
    b = bundle(list(pages), "id_doc")
    seg = Segment(segment_index=1, page_start=1, page_end=len(pages), segment_page_count=len(pages),
                  dominant_type="Clinical Note", reasoning="", classifications=[])
    return b, seg


def test_the_code_is_in_the_catalogue():
    spec = CATALOGUE["PATIENT_IDENTITY_CONFLICT"]
    assert (spec.agent, spec.severity.value, spec.auto_fixable, spec.ig_code) == ("V2", "MAJOR", False, "IG-12")


@pytest.mark.parametrize("text,expected", [
    ("MRN: 00123456", [("mrn", "123456")]),
    ("Medical Record Number: 123 456", [("mrn", "123456")]),
    ("Med. Rec. #: 0012-3456", [("mrn", "123456")]),
    ("MR #: A123456", [("mrn", "123456")]),
    ("Patient ID: 4455667", [("patient_id", "4455667")]),
    ("Patient ID: 12345   MRN: 67890", [("mrn", "67890"), ("patient_id", "12345")]),
    # not an identifier of the patient, or no identifier at all
    ("MRN: ____________", []),
    ("MRN:\nDOB: 01/02/1960", []),
    ("Accession #: 12-34567", []),
    ("Specimen Patient ID: 55555", []),
    ("Mother's MRN: 7654321", []),
    ("Patient ID: UUID:C68F26E6-5CC1", []),
    ("MRN 123", []),  # too short to be an identifier
])
def test_identifiers(text, expected):
    assert sorted(identity.identifiers(text)) == expected


@pytest.mark.parametrize("text,expected", [
    ("Patient: Jane Roe DOB: 01/02/1960", [({"jane", "roe"}, (1960, 1, 2))]),
    ("PATIENT NAME: ROE, JANE A.\nDate of Birth: 1960-01-02", [({"jane", "roe"}, (1960, 1, 2))]),
    ("Name: Jane Roe\nD.O.B.: Jan 2, 1960", [({"jane", "roe"}, (1960, 1, 2))]),
    ("Patient: Mrs. Jane Roe\nDOB: 02-Jan-1960", [({"jane", "roe"}, (1960, 1, 2))]),
    # no pair: no label, a relative, a placeholder, narrative, no date
    ("JANE ROE\nDOB: 01/02/1960", []),
    ("Name: Jane Roe\nMother's DOB: 05/06/1935", []),
    ("Family history: Mother: Mary Roe, DOB 05/06/1935", []),
    ("Name: LAST, FIRST  DOB: MM/DD/YYYY", []),
    ("the patient - she was seen on 01/02/2020 DOB: 01/02/1960", []),
    ("Patient: Jane Roe\nDOB: ____/____/______", []),
    ("Attending physician: Dr. John Smith  DOB: 01/02/1960", []),
])
def test_name_dob_pairs(text, expected):
    assert [(set(n), d) for n, d in identity.name_dob_pairs(text)] == expected


def test_two_mrns_and_two_name_dob_pairs_in_one_segment():
    b, seg = _segment_of(JANE, NOTE_P3, NOTE_P3, JOHN)
    [c_mrn, c_pair] = identity.segment_conflicts(b, seg)
    assert (c_mrn["kind"], c_mrn["pages_by_identifier"]) == ("mrn", [[1], [4]])
    assert (c_pair["kind"], c_pair["pages_by_identifier"]) == ("name_dob", [[1], [4]])
    assert all(len(h) == 12 for c in (c_mrn, c_pair) for h in c["identifier_hashes"])


@pytest.mark.parametrize("other", [
    "MRN: 123 456\nPatient: ROE, JANE  Date of Birth: 1960-01-02",  # same MRN and person, written otherwise
    "MRN: 000123456",  # leading zeros
    "Patient ID: 9999999",  # another family: the lab's patient id beside the hospital's MRN
    "Patient: Jane Roe  DOB: 01/02/1961",  # same name, a date misread: one differing part is not a conflict
    "Patient: Jane Q. Roe  DOB: 01/02/1960",  # a middle initial
    "Next of kin: spouse John Smith\nSpouse's DOB: 03/04/1971",  # a relative
    "Electronically signed by John Smith, MD on 03/04/2024",  # a physician
])
def test_no_conflict(other):
    b, seg = _segment_of(JANE, other)
    assert identity.segment_conflicts(b, seg) == []


def test_the_issue_names_pages_never_identifiers():
    b = bundle([JANE + NOTE_P3, NOTE_P3, JOHN + NOTE_P3], "id_doc")
    c = classification([(1, 3, "Clinical Note", {"snippet": "ASSESSMENT AND PLAN: Refer to high-risk breast clinic",
                                                 "page": 1, "anchors_found": ["ASSESSMENT AND PLAN"]})], "id_doc")
    r = verify_document_sync(b, c, OfflineJudge())
    [issue] = [i for i in r.attempts[0].issues if i.code == "PATIENT_IDENTITY_CONFLICT"]
    assert (issue.agent, issue.severity, issue.auto_fixable, issue.ig_code) == ("V2", "MAJOR", False, "IG-12")
    assert issue.message == ("Segment 1 carries more than one patient's identifiers: 2 different medical record "
                             "numbers (one on page 1, another on page 3); 2 different (name, date of birth) pairs "
                             "(one on page 1, another on page 3)")
    blob = json.dumps(issue.model_dump(mode="json"))
    for value in ("123456", "987654", "Jane", "John", "Roe", "Smith", "1960", "1971"):
        assert value not in blob
    assert issue.details["pages"] == [1, 3] and r.final_decision == "ESCALATE_TO_SME" and r.final_rule == 4
    # switched off: the same document passes V2's rule phase
    off = verify_document_sync(b, c, OfflineJudge(), policy=VerifyPolicy(patient_identity=False))
    assert "PATIENT_IDENTITY_CONFLICT" not in {i.code for a in off.attempts for i in a.issues}


def test_two_patients_in_two_segments_are_not_a_conflict():
    b = bundle([JANE + GENOMIC_P1, GENOMIC_P2, JOHN + NOTE_P3], "id_doc")
    c = classification([
        (1, 2, "Genomic Report", {"snippet": "BRCA1/2 Analysis — Full Gene Sequencing", "page": 1,
                                  "anchors_found": ["BRCA1/2 Analysis"]}),
        (3, 3, "Clinical Note", {"snippet": "ASSESSMENT AND PLAN: Refer to high-risk breast clinic", "page": 3,
                                 "anchors_found": ["ASSESSMENT AND PLAN"]})], "id_doc")
    assert identity.check(b, ClassificationOutput.model_validate(c)) == []


def test_no_false_alarm_on_single_patient_corpus_records(corpora_dir):
    """Every record of the labelled corpora is one patient's document (text only, read here, never
    copied): none may raise the issue."""
    alarms, records = [], 0
    for rel in ("text_labeled/combined_sample.jsonl", "text_labeled_more/records.jsonl"):
        for line in (corpora_dir / rel).read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            records += 1
            b = DocumentBundle(doc_id=rec["id"], file_path="-", total_pages=1, pages=[Page(page_num=1, text=rec["text"])])
            seg = Segment(segment_index=1, page_start=1, page_end=1, segment_page_count=1,
                          dominant_type="Other", reasoning="", classifications=[])
            if identity.segment_conflicts(b, seg):
                alarms.append(rec["id"])
    assert records >= 400 and alarms == []

