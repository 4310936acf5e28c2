"""offline-lexicon-v10's lone first page (ADR 0060): the first page of a document of several pages that holds no
cue of any type and shares (next to) nothing with page 2 opens its own Other segment -- the last page of a form, an
information leaflet, a form in another language before a report -- where the Viterbi pass used to let page 2's
type absorb it. Only the first page: a report's last lines alone on its last page stay in the report."""

from __future__ import annotations

import pytest
from scripts.support.examples import bundle, offline_segments

from docverify.classify import offline
from docverify.classify.offline import classify_offline

PATHOLOGY_1 = (
    "SURGICAL PATHOLOGY REPORT\nSPECIMEN: Colon, sigmoid, resection.\nGROSS DESCRIPTION: Received in formalin is a "
    "segment of sigmoid colon measuring 22 cm with an ulcerated tumor 4.1 cm from the distal margin.\n"
    "MICROSCOPIC DESCRIPTION: Sections show adenocarcinoma, moderately differentiated, invading the muscularis "
    "propria. Lymphovascular invasion is not identified."
)
PATHOLOGY_2 = (
    "FINAL DIAGNOSIS: Colon, sigmoid, resection: adenocarcinoma, moderately differentiated, invading the muscularis "
    "propria; 0 of 14 lymph nodes involved; margins negative. Immunohistochemistry for mismatch repair proteins "
    "shows intact nuclear expression of MLH1, PMS2, MSH2 and MSH6. Electronically signed out by the pathologist."
)
#: an information page of a benefits form: no cue of any type, nothing in common with the report
LEAFLET = (
    "Accessible formats of this information are available at the county office.\n"
    "For assistance and equal access to human services, contact the county coordinator.\nADA4 (2-18)"
)
#: a prescription in Portuguese
PRESCRIPTION = ("Receituário de Controle Especial\n1a Via - Farmácia\nRua Dr. Luis Bastos do Prado, 5º andar\n"
                "PACIENTE: fulano de tal\nUso Interno\nTomar 1 comp, VO, por dia. manhã")


@pytest.mark.parametrize("first", [LEAFLET, PRESCRIPTION], ids=["leaflet", "foreign-language prescription"])
def test_a_lone_first_page_before_a_report_is_its_own_other_segment(first):
    assert offline_segments(first, PATHOLOGY_1, PATHOLOGY_2) == [("Other", 1, 1), ("Pathology Report", 2, 3)]


def test_without_the_rule_the_report_absorbs_it(monkeypatch):
    """What v9 did (and what the rule is for): the page's emissions cost nothing under any type."""
    monkeypatch.setattr(offline, "LONE_FIRST_PAGE", False)
    assert offline_segments(LEAFLET, PATHOLOGY_1, PATHOLOGY_2) == [("Pathology Report", 1, 3)]


def test_the_page_decision_says_why():
    out = classify_offline(bundle([LEAFLET, PATHOLOGY_1, PATHOLOGY_2]))
    first = out.page_decisions[0]
    assert first.label == "Other" and "lone first page" in first.reason and "shared with page 2" in first.reason
    assert out.page_decisions[1].starts_segment


def test_the_same_page_last_stays_in_the_report():
    """A report's last page may hold a few words of no type: only the first page is read as lone."""
    assert offline_segments(PATHOLOGY_1, PATHOLOGY_2, LEAFLET) == [("Pathology Report", 1, 3)]


def test_a_first_page_that_shares_words_with_page_two_is_not_lone():
    """A cover line of the report itself ("sigmoid colon resection ... adenocarcinoma") continues it."""
    cover = "Sigmoid colon resection specimen, adenocarcinoma: lymph nodes and margins, see the pages that follow."
    assert offline.word_share(offline.distinct_words(cover), offline.distinct_words(PATHOLOGY_1)) >= 0.02
    assert offline_segments(cover, PATHOLOGY_1, PATHOLOGY_2) == [("Pathology Report", 1, 3)]


def test_a_single_page_document_and_a_report_first_page_are_never_lone():
    assert offline_segments(LEAFLET) == [("Other", 1, 1)]
    assert offline_segments(PATHOLOGY_1, PATHOLOGY_2) == [("Pathology Report", 1, 2)]


def test_a_first_page_of_two_words_is_not_read():
    """Too few words to judge (a page number, a stamp): it follows the Viterbi pass as before."""
    assert offline_segments("Page 1", PATHOLOGY_1, PATHOLOGY_2) == [("Pathology Report", 1, 3)]
