"""offline-lexicon-v9's form pages (ADR 0059): a page that speaks to its reader ("you", "your") or instructs
them ("Please circle any items that you have today") is a form page whatever its layout -- a consent of prose,
a review-of-systems questionnaire whose options are symptoms -- and opens its own Other segment beside a report;
a report that says "you" once in its last lines, or a note full of clinical vocabulary, is not."""

from __future__ import annotations

from scripts.support.examples import bundle, offline_segments

from docverify.classify import offline
from docverify.classify.offline import classify_offline, form_rule
from docverify.domain.lexicon import analyse

NOTE = (
    "HISTORY OF PRESENT ILLNESS: The patient is a 58-year-old man with two days of substernal chest pain radiating "
    "to the left arm, worse with exertion. He denies fever or cough.\nPAST MEDICAL HISTORY: Hypertension, "
    "hyperlipidemia.\nPHYSICAL EXAMINATION: Blood pressure 152/94, pulse 88. Lungs clear. Regular rhythm, no "
    "murmur.\nASSESSMENT AND PLAN: Unstable angina. Admit to telemetry, serial troponins, aspirin, heparin drip, "
    "cardiology consultation in the morning."
)
CONSENT = (
    "Consent to Participate in a Research Study\nYou are being asked to take part in a research study. Your "
    "participation is voluntary, and you may stop at any time without any effect on your care. If you agree, you "
    "will be asked to answer questions about your health and to allow the study team to review your records. "
    "There is no cost to you. Your information will be kept private to the extent allowed by law. Please take "
    "your time to decide and ask the study team any questions you have before you agree."
)
ROS = (
    "REVIEW OF SYSTEMS\nPlease circle any items that you have today\n"
    "GENERAL: Fevers, chills, sweats, fatigue, unexplained weight loss, loss of appetite\n"
    "EYES: Blurring, double vision, irritation, discharge, vision loss, eye pain\n"
    "CARDIOVASCULAR: Chest pains, palpitations, fainting, shortness of breath with exercise, swelling of the feet\n"
    "RESPIRATORY: Cough, shortness of breath, wheezing, coughing up blood\n"
    "GASTROINTESTINAL: Nausea, vomiting, diarrhea, constipation, abdominal pain, blood in stools\n"
    "NEUROLOGICAL: Weakness, numbness, seizures, tremors, vertigo\n"
)
REPORT_TAIL = (
    "FINAL DIAGNOSIS: Colon, sigmoid, resection: adenocarcinoma, moderately differentiated, invading the "
    "muscularis propria; 0 of 14 lymph nodes involved; margins negative.\nIf you have questions about this report, "
    "please contact the pathology department."
)


def test_a_consent_of_prose_addresses_its_reader_and_is_its_own_other_segment():
    assert form_rule(analyse(CONSENT)) == "addressed"
    assert offline_segments(NOTE, CONSENT) == [("Clinical Note", 1, 1), ("Other", 2, 2)]


def test_a_review_of_systems_questionnaire_instructs_its_reader_and_is_no_clinical_note():
    """Its symptom lists read as a Clinical Note in the lexicon; the instruction to circle them does not."""
    a = analyse(ROS)
    assert a.scores["Clinical Note"] > a.scores["Other"]
    assert form_rule(a) == "instructed"
    assert offline_segments(ROS, NOTE) == [("Other", 1, 1), ("Clinical Note", 2, 2)]
    decisions = classify_offline(bundle([ROS, NOTE])).page_decisions
    assert decisions is not None and "it instructs its reader" in decisions[0].reason


def test_a_report_that_says_you_once_and_a_note_are_no_form_pages():
    assert form_rule(analyse(REPORT_TAIL)) is None
    assert form_rule(analyse(NOTE)) is None


def test_both_rules_switch_off():
    try:
        offline.ADDRESSED_FORMS = offline.INSTRUCTED_FORMS = False
        assert form_rule(analyse(CONSENT)) is None and form_rule(analyse(ROS)) is None
    finally:
        offline.ADDRESSED_FORMS = offline.INSTRUCTED_FORMS = True
