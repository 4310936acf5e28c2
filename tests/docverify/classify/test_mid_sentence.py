"""offline-lexicon-v11 (ADR 0066): a page whose text starts with a lower-case letter starts in the middle of a
sentence, so it continues the page before it -- a change of type into it costs MID_SENTENCE_SWITCH times the
penalty. A clinical note's second page of laboratory values (the lexicon's Other vocabulary) stays in the note when
it starts mid-sentence; the same page starting a sentence of its own is cut off, as before."""

from __future__ import annotations

import pytest
from scripts.support.examples import bundle, offline_segments

from docverify.classify import offline
from docverify.classify.offline import classify_offline

NOTE = ("PROGRESS NOTE\nHISTORY OF PRESENT ILLNESS: The patient is a 67-year-old man with chronic kidney disease and "
        "hypertension who returns for follow-up of fatigue and poor appetite. He reports no chest pain or dyspnea.\n"
        "PHYSICAL EXAMINATION: Blood pressure 148/86, pulse 78. Lungs clear. Trace pedal edema.\nHe was told his "
        "creatinine had risen and that his potassium was")
LABS = ("LABORATORY DATA: Sodium 135, potassium 3.3, chloride 95, bicarbonate 20, BUN 54, creatinine 2.2, glucose "
        "112. White count 9.6, hemoglobin 11.9, hematocrit 35.2, platelet count 245, INR 0.99.\n"
        "Plan: continue lisinopril; start potassium chloride. Follow up in two weeks.")
MID = "low at the last visit.\n" + LABS
OWN = "Potassium was low at the last visit.\n" + LABS


def test_a_page_that_starts_mid_sentence_stays_in_the_note():
    assert offline_segments(NOTE, MID) == [("Clinical Note", 1, 2)]


def test_without_the_rule_its_laboratory_values_cut_it_off_as_other(monkeypatch):
    monkeypatch.setattr(offline, "MID_SENTENCE_SWITCH", 1.0)
    assert offline_segments(NOTE, MID) == [("Clinical Note", 1, 1), ("Other", 2, 2)]


def test_the_same_page_starting_its_own_sentence_is_cut_off_as_before():
    assert offline_segments(NOTE, OWN) == [("Clinical Note", 1, 1), ("Other", 2, 2)]


@pytest.mark.parametrize("page, says", [(MID, True), (OWN, False)], ids=["mid-sentence", "own sentence"])
def test_the_page_decision_says_so(page, says):
    decision = classify_offline(bundle([NOTE, page])).page_decisions[1]
    assert ("starts mid-sentence" in decision.reason) is says


def test_a_form_page_is_exempt():
    form = offline._Page(2, "name: ____\ndate: ____", offline.analyse("name: ____\ndate: ____"), None)  # type: ignore[arg-type]
    form._form_rule = "layout"
    assert not offline._mid_sentence(form)
