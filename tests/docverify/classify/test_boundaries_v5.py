"""offline-lexicon-v5's page boundaries (ADR 0042): a note's page of imaging findings stays in the note, a
page that shares its words with the page before follows it into a clinical type but never into Other.
Small synthetic texts; each case also runs with the rule switched off, to show the rule is what decides."""

from __future__ import annotations

import pytest
from tests.docverify.classify.test_generalization import NOTE, RADIOLOGY, _bundle

from docverify.classify import offline
from docverify.classify.offline import classify_offline

#: the last page of NOTE's visit: imaging results, no radiology header, the note's own words (lisinopril,
#: troponins, cardiology, chest pain, hypertension): it reads as Radiology on its own
NOTE_LAST_PAGE = """The chest radiograph showed no pleural effusion and no pneumothorax; the CT scan of the chest showed a
6 mm nodule in the right upper lobe, to be followed in twelve months.
PLAN: continue lisinopril and atorvastatin, aspirin daily; serial troponins and the cardiology consult as planned
for the chest pain. Hypertension and hyperlipidemia: unchanged.
FOLLOW-UP: clinic in two weeks.
"""

CONSENT_FORM = """CONSENT FOR SURGICAL PROCEDURE AND DISPOSITION OF TISSUE
Patient name: ____________________  Date of birth: __________  Medical record number: __________
I consent to the excisional biopsy of the left breast and to the examination of the removed tissue by the
pathology department. I understand that tissue not needed for diagnosis may be retained for teaching.
[ ] I agree   [ ] I do not agree
Signature of patient: ____________________ Date: ________  Witness: ____________________
"""

#: a short pathology report that repeats the form's words (the specimen, the department) and carries
#: blanks of its own: it shows some Other, and shares many words with the form
PATHOLOGY_AFTER_FORM = """Left breast, excisional biopsy: the removed tissue was examined in the pathology department.
GROSS DESCRIPTION: received in formalin, a 3.1 cm fragment of fibrofatty breast tissue.
DIAGNOSIS: invasive ductal carcinoma, Nottingham grade 2. Margins negative.
Patient name: ____________________  Medical record number: __________
Signature of pathologist: ____________________ Date: ________  Witness: ____________________
"""


def _segments(*pages: str) -> list[tuple[str, int, int]]:
    out = classify_offline(_bundle(*pages))
    return [(s.dominant_type, s.page_start, s.page_end) for s in out.segments]


def test_a_notes_last_page_of_imaging_results_is_not_the_next_reports_first(monkeypatch):
    pages = (NOTE, NOTE_LAST_PAGE, RADIOLOGY)
    # v5's rules alone: v6's clinical structure rule (PLAN and FOLLOW-UP on the page) halves the page's
    # Radiology score; test_structure_v6.py shows that page with it
    monkeypatch.setattr(offline, "STRUCTURE_MIN", 99)
    # on its own the page reads as Radiology (no Radiology header on it, though)
    decisions = classify_offline(_bundle(*pages)).page_decisions
    assert decisions is not None
    scores = decisions[1].type_scores
    assert scores["Radiology Report"] > 2 * scores["Clinical Note"] > 0
    assert decisions[1].continuity is not None and decisions[1].continuity >= offline.CONT_HIGH
    assert _segments(*pages) == [("Clinical Note", 1, 2), ("Radiology Report", 3, 3)]
    assert "continues Clinical" in decisions[1].reason and decisions[2].starts_segment
    # either rule alone is not enough here: without one of them the page starts the radiology report
    for name in ("HEADERLESS_SWITCH", "CONT_EMIT"):
        with monkeypatch.context() as m:
            m.setattr(offline, name, 1.0)
            assert _segments(*pages) == [("Clinical Note", 1, 1), ("Radiology Report", 2, 3)], name


def test_a_radiology_report_with_its_headers_still_starts_its_own_segment_after_a_note():
    assert _segments(NOTE, RADIOLOGY) == [("Clinical Note", 1, 1), ("Radiology Report", 2, 2)]
    assert _segments(NOTE, NOTE, RADIOLOGY, RADIOLOGY) == [("Clinical Note", 1, 2), ("Radiology Report", 3, 4)]


def test_the_headed_types_of_a_page():
    page = offline._pages(_bundle(RADIOLOGY, NOTE_LAST_PAGE))
    assert "Radiology Report" in offline._headed_types(page[0])
    assert "Radiology Report" not in offline._headed_types(page[1])
    assert "Clinical Note" in offline._headed_types(page[1])  # PLAN, FOLLOW-UP


def test_a_report_that_shares_a_forms_words_does_not_join_the_form(monkeypatch):
    pages = (CONSENT_FORM, PATHOLOGY_AFTER_FORM)
    decisions = classify_offline(_bundle(*pages)).page_decisions
    assert decisions is not None and decisions[1].continuity is not None
    assert decisions[1].continuity >= offline.CONT_HIGH  # the same specimen, department, blanks
    assert decisions[1].type_scores["Other"] >= offline.CONT_SUPPORT * decisions[1].type_scores["Pathology Report"]
    assert _segments(*pages) == [("Other", 1, 1), ("Pathology Report", 2, 2)]
    # if a page could follow its neighbour into Other, the report would be swallowed by the form
    monkeypatch.setattr(offline, "CONT_EXCLUDE", frozenset())
    assert _segments(*pages) == [("Other", 1, 2)]


@pytest.mark.parametrize("constant", ["CONT_EMIT", "HEADERLESS_SWITCH"])
def test_the_v5_rules_are_on(constant):
    # v4 shipped both at 1.0 (off); the implementation id says which segmentation produced an output
    # (v6, ADR 0043, v7, ADR 0045, and v8, ADR 0048, keep v5's rules)
    assert getattr(offline, constant) != 1.0 and offline.IMPLEMENTATION == "offline-lexicon-v14"
    assert offline.BREAK_SWITCH == 1.0  # the other half of ADR 0035's rule stays off (ADR 0042)
