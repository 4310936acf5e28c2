"""offline-lexicon-v13 (ADR 0069): printed page numbers as boundary cues.

* "Page 1 of 1" on a report's page: the page after it may start a document, even one with few cues of its own;
* a page numbered "1 of n" right after one numbered "m of m": two documents, even of one type;
* "Page k of n" after "Page k-1 of n": the same document;
* one counter over the whole PDF (a fax stamp) says nothing about the documents inside it.
"""

from __future__ import annotations

import pytest
from scripts.support.examples import bundle, offline_segments

from docverify.classify import offline
from docverify.classify.offline import classify_offline
from docverify.domain.pagination import Cue

PATH1 = ("SURGICAL PATHOLOGY REPORT\nDIAGNOSIS: Right breast, core needle biopsy: invasive ductal carcinoma, grade 2.\n"
         "GROSS DESCRIPTION: Received in formalin are three cores of tan tissue.\n"
         "MICROSCOPIC DESCRIPTION: Sections show infiltrating glands and nests of tumor cells.")
PATH2 = ("SURGICAL PATHOLOGY REPORT\nDIAGNOSIS: Colon, sigmoid, polypectomy: tubular adenoma, no high-grade dysplasia."
         "\nGROSS DESCRIPTION: Received in formalin is a polyp measuring 0.8 cm.\n"
         "MICROSCOPIC DESCRIPTION: Sections show adenomatous epithelium.")
#: a page with a few Other cues and nothing of the report
BILLING = "Billing questions: contact the business office at the number on your statement."
APPOINTMENT = "Your next appointment: Tuesday at 9:00.\nPlease arrive 15 minutes early."
#: a page that continues a report, with no cue of its own
MARGINS = "Sections of the margin are free of tumor."


def _off(monkeypatch):
    monkeypatch.setattr(offline, "NUMBERED_PAGES", False)
    monkeypatch.setattr(offline, "NUMBERED_SPLIT", False)


@pytest.mark.parametrize("after", [BILLING, APPOINTMENT])
def test_after_a_reports_last_numbered_page_a_page_with_few_cues_starts_its_own_document(after, monkeypatch):
    assert offline_segments(PATH1 + "\nPage 1 of 1", after) == [("Pathology Report", 1, 1), ("Other", 2, 2)]
    _off(monkeypatch)
    assert offline_segments(PATH1 + "\nPage 1 of 1", after) == [("Pathology Report", 1, 2)]


def test_two_reports_of_one_type_numbered_each_are_two_segments(monkeypatch):
    pages = (PATH1 + "\nPage 1 of 2", MARGINS + "\nPage 2 of 2", PATH2 + "\nPage 1 of 1")
    assert offline_segments(*pages) == [("Pathology Report", 1, 2), ("Pathology Report", 3, 3)]
    _off(monkeypatch)
    assert offline_segments(*pages) == [("Pathology Report", 1, 3)]


def test_numbering_that_goes_on_keeps_the_document_together():
    # the same two reports, the second's numbering continuing the first's: one document as printed (after an
    # unnumbered page, so that the numbers are no counter over the whole PDF)
    pages = (BILLING, PATH1 + "\nPage 1 of 3", MARGINS + "\nPage 2 of 3", PATH2 + "\nPage 3 of 3")
    assert offline._numbering(offline._pages(bundle(list(pages)))) == [Cue.NONE, Cue.STARTS, Cue.CONTINUES,
                                                                       Cue.CONTINUES]
    assert offline_segments(*pages) == [("Other", 1, 1), ("Pathology Report", 2, 4)]


def test_the_switch_factors(monkeypatch):
    texts = [PATH2 + "\nPage 1 of 1", PATH1 + "\nPage 1 of 2", BILLING + "\nPage 2 of 2"]
    numbered = offline._emissions(offline._pages(bundle(texts)))[5]
    monkeypatch.setattr(offline, "NUMBERED_PAGES", False)
    plain = offline._emissions(offline._pages(bundle(texts)))[5]
    assert numbered == pytest.approx([plain[0], offline.NUMBERED_START * plain[1], offline.NUMBERED_CONTINUE * plain[2]])


def test_a_counter_over_the_whole_pdf_is_no_cue(monkeypatch):
    # a fax stamp "Page i of 3" on every page: no cue, the classifier reads the pages as without it
    pages = [PATH1 + "\nPage 1 of 3", MARGINS + "\nPage 2 of 3", APPOINTMENT + "\nPage 3 of 3"]
    assert offline._numbering(offline._pages(bundle(pages))) == [Cue.NONE] * 3
    out = classify_offline(bundle(pages))
    assert not any("printed page numbers" in d.reason for d in out.page_decisions)
    _off(monkeypatch)
    assert classify_offline(bundle(pages)).segments == out.segments


def test_the_page_decisions_say_what_the_numbers_said():
    out = classify_offline(bundle([PATH1 + "\nPage 1 of 2", MARGINS + "\nPage 2 of 2", PATH2 + "\nPage 1 of 1"]))
    reasons = [d.reason for d in out.page_decisions]
    assert "printed page numbers" not in reasons[0]
    assert reasons[1].endswith("printed page numbers: numbered as the next page of the page before it")
    assert reasons[2].startswith("new segment") and "two documents' numberings meet" in reasons[2]
    assert out.classifier == offline.IMPLEMENTATION == "offline-lexicon-v14"
