"""lexicon-v4 (ADR 0045): the vocabulary of autopsy reports, ancillary and molecular pathology, and ultrasound
and Doppler measurement sheets. Small texts written for these tests (no corpus text), each without the
headers earlier lexicons knew, so the new words are what decide."""

from __future__ import annotations

from tests.docverify.classify.test_generalization import _bundle

from docverify.classify.offline import classify_offline
from docverify.domain.lexicon import best_type, get_lexicon

AUTOPSY = """The decedent was a 71 year old man found unresponsive at home. Autopsy performed 14 hours post-mortem.
External examination: well nourished adult male. Internal examination: the heart weighs 520 grams with marked
left ventricular hypertrophy; the coronary arteries show severe atherosclerosis.
Cause of death: atherosclerotic and hypertensive cardiovascular disease. Manner of death: natural."""

DOPPLER = """Right common carotid artery peak systolic velocity 92 cm/s, end diastolic velocity 21 cm/s.
Internal carotid artery peak systolic velocity 118 cm/s, resistive index 0.71. Color Doppler and spectral Doppler
performed with a linear transducer. Heterogeneous hypoechoic plaque at the bulb. Left side: antegrade vertebral flow."""

ANCILLARY = """Ancillary studies: flow cytometry shows a monoclonal B-cell population, CD5 and CD23 positive.
Molecular pathology: FISH for t(11;14) is negative. Cytology of the pleural fluid shows atypical lymphoid cells."""


def test_the_vocabulary_is_versioned():
    assert get_lexicon().version == "lexicon-v4"


def test_an_autopsy_text_without_a_report_header_reads_as_pathology():
    assert best_type(AUTOPSY)[0] == "Pathology Report"
    assert classify_offline(_bundle(AUTOPSY)).dominant_type_overall == "Pathology Report"


def test_a_doppler_measurement_sheet_reads_as_radiology():
    assert best_type(DOPPLER)[0] == "Radiology Report"
    assert classify_offline(_bundle(DOPPLER)).dominant_type_overall == "Radiology Report"


def test_ancillary_and_molecular_studies_read_as_pathology():
    assert best_type(ANCILLARY)[0] == "Pathology Report"
