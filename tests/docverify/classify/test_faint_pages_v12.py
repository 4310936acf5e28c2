"""offline-lexicon-v12 (ADR 0068): two kinds of page with next to nothing of their own.

* A weak page led by Other (a report's last page with a "please call" line and a CONFIDENTIAL stamp) that shares its
  words with the page before continues the report; a page of the same few Other cues that shares nothing with the
  page before (a one-page cover) still opens its own segment, and so does one right after a form page (it continues
  the form).
* A page with no cue of any type right after a form page continues the form: leaving a form for it costs the whole
  switch penalty, so the report after it does not take it as its first page.
"""

from __future__ import annotations

import pytest
from scripts.support.examples import bundle, offline_segments

from docverify.classify import offline
from docverify.classify.offline import classify_offline

GENOMIC = ("GENOMIC TESTING REPORT\nTest performed: Comprehensive genomic profiling by next-generation sequencing.\n"
           "RESULTS: Pathogenic variant detected in BRCA2 c.5946delT (p.Ser1982fs), heterozygous. Variant allele "
           "frequency 48 percent, consistent with a germline variant. No other pathogenic variants or variants of "
           "uncertain significance were identified in the 30 genes analyzed.\nINTERPRETATION: This result confirms "
           "hereditary breast and ovarian cancer syndrome. Genetic counseling is recommended for the patient and "
           "at-risk relatives.")
#: the report's last page: a sentence that shares the report's words, a "please call" line, a CONFIDENTIAL stamp
TAIL = ("The result for the patient and relatives was discussed with the ordering clinician on March 9.\n"
        "Questions about this report: please call the laboratory.\nCONFIDENTIAL")
#: the same kind of Other cues on a page that shares no word with the report: a cover
COVER = ("Westside Family Clinic\nPlease deliver promptly to the scheduling desk.\nQuestions: please call us.\n"
         "CONFIDENTIAL")
FORM = ("PATIENT REGISTRATION\nName: ______________________\nDate of birth: ____/____/______\nAddress: ______________\n"
        "Phone: (____) ____-______\nInsurance carrier: ______________\nPolicy number: ______________\n"
        "Signature: ______________________ Date: __________")
#: no cue of any type
FAINT = "Thank you.\nThe front office staff will help with any questions about scheduling."
#: a pathology report whose first lines are its laboratory's address (no header within the first 150 characters)
PATHOLOGY = ("Lakeside Medical Laboratory, Department of Anatomic Pathology, 1200 Harbor Road, Suite 400, Springfield, "
             "serving the Riverside and Lakeside hospitals since 1974\nSURGICAL PATHOLOGY REPORT\n"
             "DIAGNOSIS: Right breast, core needle biopsy: invasive ductal carcinoma, grade 2. Lymphovascular invasion "
             "not identified.\nGROSS DESCRIPTION: Received in formalin are three cores of tan tissue.\n"
             "MICROSCOPIC DESCRIPTION: Sections show infiltrating glands and nests of tumor cells.")


def test_a_reports_weak_last_page_led_by_other_stays_in_the_report():
    assert offline_segments(GENOMIC, TAIL) == [("Genomic Report", 1, 2)]


def test_without_the_rule_it_was_cut_off_as_other(monkeypatch):
    monkeypatch.setattr(offline, "WEAK_OTHER_CONTINUES", False)
    assert offline_segments(GENOMIC, TAIL) == [("Genomic Report", 1, 1), ("Other", 2, 2)]


def test_a_cover_that_shares_no_word_with_the_report_is_still_its_own_segment():
    assert offline_segments(GENOMIC, COVER) == [("Genomic Report", 1, 1), ("Other", 2, 2)]


def test_after_a_form_page_a_weak_other_page_continues_the_form():
    pages = offline._pages(bundle([FORM, TAIL]))
    assert pages[0].form and not offline._weak_other_continues(pages, 1)
    assert offline_segments(FORM, TAIL) == [("Other", 1, 2)]


def test_a_page_without_cues_after_a_form_continues_the_form():
    assert offline_segments(FORM, FAINT, PATHOLOGY) == [("Other", 1, 2), ("Pathology Report", 3, 3)]


def test_without_the_rule_the_report_after_it_took_it(monkeypatch):
    monkeypatch.setattr(offline, "FAINT_AFTER_FORM", False)
    assert offline_segments(FORM, FAINT, PATHOLOGY) == [("Other", 1, 1), ("Pathology Report", 2, 3)]


@pytest.mark.parametrize("pages, page, says", [
    ([GENOMIC, TAIL], 1, "a weak page led by Other that shares its words with the page before continues it"),
    ([FORM, FAINT, PATHOLOGY], 1, "no cue of its own after a form page"),
], ids=["weak Other page", "page without cues after a form"])
def test_the_page_decision_says_why(pages, page, says):
    assert says in classify_offline(bundle(pages)).page_decisions[page].reason


def test_a_page_without_cues_is_faint_and_a_form_page_is_not():
    form, faint = offline._pages(bundle([FORM, FAINT]))
    assert offline._faint(faint) and not offline._faint(form)
