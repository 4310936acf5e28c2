"""offline-lexicon-v6 (ADR 0043): a page with the section structure of a clinical note reads as a note whatever
imaging it discusses; a Radiology header that heads notes too (IMPRESSION) does not make a page a radiology
report's first page. Small synthetic texts; each case also runs with the rule switched off, to show the rule is
what decides."""

from __future__ import annotations

from tests.docverify.classify.test_boundaries_v5 import NOTE_LAST_PAGE
from tests.docverify.classify.test_generalization import FAX, NOTE, RADIOLOGY, _bundle

from docverify.classify import offline
from docverify.classify.offline import classify_offline
from docverify.domain.lexicon import analyse

#: a neurology consult in the transcribed style (",SECTION:,"): history, examination, an IMPRESSION header and
#: a paragraph of MRI and CT findings; the lexicon alone reads it as a radiology report
CONSULT = """CC:, Headache.,HX: ,This 61 y/o RHF presented with two months of headache. An MRI of the brain showed an
enhancing mass with surrounding edema on T2-weighted and FLAIR images; a CT scan of the head with contrast showed no
hemorrhage. No prior study for comparison.,PMH:, hypertension.,FHX:, none.,SHX:, no tobacco.,EXAM:, alert.,
MS: oriented.,CN: unremarkable.,Motor: full strength.,Gait: normal.,IMPRESSION:, enhancing lesion on MRI, likely
glioma; axial and coronal images reviewed."""

PROCEDURE = """PROCEDURE: Left heart catheterization and coronary angiography.
PROCEDURE IN DETAIL: The patient was brought to the catheterization laboratory. After informed consent, the right groin
was prepped and draped in sterile fashion. A 6-French sheath was placed and selective coronary angiography was done.
The right coronary artery was totally occluded; it was dilated with a balloon and stented. He tolerated the procedure well.
"""

#: the procedure note's last page: its IMPRESSION and the angiogram's contrast, few words in common with page 1
PROCEDURE_LAST_PAGE = """IMPRESSION: Single-vessel disease treated successfully; residual narrowing under ten percent after contrast
injection. The other lesion is mild. Results discussed with the patient and his wife."""


def _segments(*pages: str) -> list[tuple[str, int, int]]:
    out = classify_offline(_bundle(*pages))
    return [(s.dominant_type, s.page_start, s.page_end) for s in out.segments]


def test_a_consult_full_of_imaging_findings_is_a_note(monkeypatch):
    lexicon = analyse(CONSULT).scores
    assert lexicon["Radiology Report"] > lexicon["Clinical Note"] > 0  # the shared lexicon's reading
    # CC, HX, PMH, FHX, SHX (the lexicon's) and MS, CN, Motor, Gait (the classifier's own NOTE_HEADERS)
    assert offline.clinical_structure(analyse(CONSULT)) >= 8
    out = classify_offline(_bundle(CONSULT))
    assert out.dominant_type_overall == "Clinical Note"
    assert out.page_decisions is not None
    scores = out.page_decisions[0].type_scores
    assert scores["Radiology Report"] == round(offline.STRUCTURE_FACTOR * lexicon["Radiology Report"], 3)
    assert scores["Clinical Note"] == round(lexicon["Clinical Note"], 3)
    monkeypatch.setattr(offline, "STRUCTURE_MIN", 99)
    assert classify_offline(_bundle(CONSULT)).dominant_type_overall == "Radiology Report"


def test_the_classifier_only_note_headers_count(monkeypatch):
    # without NOTE_HEADERS the consult holds fewer headers of its own, and MS:/CN: of a note count in capitals only
    assert offline.clinical_structure(analyse("ms: oriented.,cn: intact.")) == 0
    assert offline.clinical_structure(analyse("MS: oriented.,CN: intact.,Reflexes: 2+.")) == 3
    assert offline.clinical_structure(analyse("VISUAL ACUITY: 20/20.\nINTRAOCULAR PRESSURE: 14.")) == 2
    # the headers other reports carry too do not count: a radiology report's HISTORY/EXAM/IMPRESSION
    assert offline.clinical_structure(analyse(RADIOLOGY)) == 0
    assert offline.clinical_structure(analyse("HISTORY: cough.\nEXAM: chest.\nIMPRESSION: clear.")) == 0


def test_a_radiology_report_and_a_form_keep_their_scores():
    """The structure rule leaves a radiology report's and a fax cover's scores alone; the fax cover speaks to its
    reader ("If you have received this fax in error"), so since offline-lexicon-v9 it is a form page: its clinical
    scores count FORM_FACTOR, Other at least FORM_OTHER (ADR 0059)."""
    for text, kind, form in ((RADIOLOGY, "Radiology Report", False), (FAX, "Other", True)):
        out = classify_offline(_bundle(text))
        assert out.dominant_type_overall == kind
        assert out.page_decisions is not None
        lexicon = analyse(text).scores
        expected = {t: (max(s, offline.FORM_OTHER) if t == "Other" else s * offline.FORM_FACTOR) if form else s
                    for t, s in lexicon.items()}
        assert out.page_decisions[0].type_scores == {t: round(s, 3) for t, s in expected.items()}
    assert _segments(NOTE, RADIOLOGY) == [("Clinical Note", 1, 1), ("Radiology Report", 2, 2)]


def test_the_lexicon_itself_is_unchanged():
    # V2's and V4's offline checks read the lexicon's scores: the structure rule is the classifier's alone
    page = offline._pages(_bundle(NOTE_LAST_PAGE))[0]
    assert offline.clinical_structure(page.analysis) == 2  # PLAN, FOLLOW-UP
    assert page.analysis.scores["Radiology Report"] == analyse(NOTE_LAST_PAGE).scores["Radiology Report"]
    assert page.score("Radiology Report") == offline.STRUCTURE_FACTOR * page.analysis.scores["Radiology Report"]


def test_an_impression_header_does_not_start_a_radiology_report(monkeypatch):
    pages = (PROCEDURE, PROCEDURE_LAST_PAGE)
    decisions = classify_offline(_bundle(*pages)).page_decisions
    assert decisions is not None
    assert decisions[1].type_scores["Radiology Report"] > decisions[1].type_scores["Clinical Note"]
    assert decisions[1].continuity is not None and decisions[1].continuity < offline.CONT_HIGH
    assert _segments(*pages) == [("Clinical Note", 1, 2)]
    # with IMPRESSION counted as a Radiology header (v5), the last page starts a radiology report
    monkeypatch.setattr(offline, "HEADER_IGNORED", {})
    assert _segments(*pages) == [("Clinical Note", 1, 1), ("Radiology Report", 2, 2)]


def test_the_v6_rules_are_on():
    # v7 (ADR 0045) keeps v6's rules over lexicon-v4, v8 (ADR 0048) adds form pages
    assert offline.IMPLEMENTATION == "offline-lexicon-v14"
    assert offline.STRUCTURE_MIN == 2 and offline.STRUCTURE_FACTOR < 1.0
    assert {"Radiology Report", "Other"} == offline.STRUCTURE_DAMPED
    assert "IMPRESSION" in offline.HEADER_IGNORED["Radiology Report"]
